"""An export's JSON checked as it is read: an array's items with their byte spans, and the shapes of its objects.

Every error names the file and the place in it (``refused``): a JSON path such as ``[3].mapping.a1f3``, or a
line and column where the text is not JSON.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Literal, TypeVar, overload

from . import jsonnumbers
from ..core.answers import JsonValue
from .common import Original, refused

Kind = TypeVar("Kind")  # the JSON type ``require`` checks a value against


def load_json(original: Original) -> JsonValue:
    """The parsed JSON of an original, or InvalidParams naming the line and column."""
    text = original.text()
    with _refused_as_json(original, text):
        return jsonnumbers.loads(text)


@contextmanager
def _refused_as_json(original: Original, text: str) -> Iterator[None]:
    """What the JSON decoder refuses in ``text``, as InvalidParams naming the original and the place."""
    try:
        yield
    except json.JSONDecodeError as exc:
        raise refused(original.name, f"line {exc.lineno} column {exc.colno}", f"is not valid JSON: {exc.msg}") from exc
    except jsonnumbers.NumberRefused as exc:
        raise refused(original.name, exc.place(text), str(exc)) from exc
    except RecursionError as exc:
        raise refused(original.name, None, "nests JSON too deeply") from exc


def json_array_spans(original: Original) -> tuple[Any, list[tuple[int, int]]]:
    """The parsed JSON of a file holding an array, with each element's byte span in the original.

    Elements are decoded one at a time with the standard decoder, so the
    cost stays that of ``json.loads``; the spans let each item cite only the
    part of a large original that holds it.  A file that is not an array is
    parsed whole, with no spans.
    """
    text = original.text()
    offset = 3 if original.data.startswith(b"\xef\xbb\xbf") else 0
    decoder = jsonnumbers.DECODER
    position = _skip_space(text, 0)
    if position >= len(text) or text[position] != "[":
        return load_json(original), []
    items: list[Any] = []
    spans: list[tuple[int, int]] = []
    byte_at, char_at = offset, 0
    position = _skip_space(text, position + 1)
    with _refused_as_json(original, text):
        if position < len(text) and text[position] == "]":
            end = position + 1
        else:
            while True:
                item, end = decoder.raw_decode(text, position)
                byte_at += len(text[char_at:position].encode("utf-8", "surrogatepass"))
                start_byte = byte_at
                byte_at += len(text[position:end].encode("utf-8", "surrogatepass"))
                char_at = end
                items.append(item)
                spans.append((start_byte, byte_at))
                position = _skip_space(text, end)
                if position < len(text) and text[position] == ",":
                    position = _skip_space(text, position + 1)
                    continue
                if position < len(text) and text[position] == "]":
                    end = position + 1
                    break
                raise json.JSONDecodeError("Expecting ',' delimiter", text, position)
        if _skip_space(text, end) != len(text):
            raise json.JSONDecodeError("Extra data", text, _skip_space(text, end))
    return items, spans


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\n\r":
        position += 1
    return position


# --- checking JSON shapes -------------------------------------------------------------------------------


_KIND_NAMES = {dict: "an object", list: "a list", str: "a string"}


def keyed_objects(original: Original, data: Any, plural: str, key_of: Callable[[dict[str, Any], str], str],
                  repeated: tuple[str, str]) -> Iterator[tuple[int, str, dict[str, Any], str]]:
    """The objects of an export's JSON list, each with its index, its place (``[3]``) and its key
    (``key_of(raw, place)``), refused naming the place where the list is not one, an item is not an object
    or a key comes again: ``repeated`` is the key's field and what it is called (``("uuid", "conversation
    uuid")``: 'repeats the conversation uuid ...' at ``[3].uuid``)."""
    if not isinstance(data, list):
        raise refused(original.name, None, f"must hold a list of {plural}")
    field_name, what = repeated
    seen: set[str] = set()
    for index, raw in enumerate(data):
        place = f"[{index}]"
        if not isinstance(raw, dict):
            raise refused(original.name, place, "must be an object")
        key = key_of(raw, place)
        if key in seen:
            raise refused(original.name, f"{place}.{field_name}", f"repeats the {what} {key!r}")
        seen.add(key)
        yield index, place, raw, key


@overload
def require(original: Original, mapping: dict[str, Any], key: str, kind: type[Kind], place: str) -> Kind: ...
@overload
def require(original: Original, mapping: dict[str, Any], key: str, kind: type[Kind], place: str,
            *, optional: Literal[True]) -> Kind | None: ...


def require(original: Original, mapping: dict[str, Any], key: str, kind: type[Kind], place: str,
            *, optional: bool = False) -> Kind | None:
    """``mapping[key]`` when it has the JSON type ``kind``, else InvalidParams naming ``place.key``."""
    value = mapping.get(key)
    if value is None:
        if optional:
            return None
        raise refused(original.name, place, f"has no {key!r}")
    if not isinstance(value, kind) or isinstance(value, bool):
        raise refused(original.name, f"{place}.{key}", f"must be {_KIND_NAMES.get(kind, kind.__name__)}")
    return value
