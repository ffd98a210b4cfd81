"""Wire parameters: the edge rules, the declarations, and the one reader every method uses.

A tool, host method or operator method declares what it takes once, as ``Params`` of specs::

    WINDOW = Params(Integer("offset", 0, OFFSET_MAX, default=0), Integer("limit", 1, 500, default=100))
    WINDOW.read({"limit": 20})     # {"offset": 0, "limit": 20}
    WINDOW.schema()                # the JSON Schema object tools/list publishes for it

``Params.read`` refuses an unknown key (``unknown parameter <key>``, naming ``field``), then reads each
declared parameter in order: absent gives its default, a required one is refused, and a given one is
checked for its exact type (``True`` is no integer) and its bounds, and returned as its typed value.
``Params.schema`` builds the JSON Schema from the same specs, so a tool's published bounds are its
checked bounds (tests/engine/wire/test_tool_params.py holds the two together).

Null is absent for every optional parameter, at any depth: ``{"limit": null}`` reads as ``{}``, and the
published schema says so (``anyOf`` the value's schema and ``{"type": "null"}``).  A client in a strict
mode (OpenAI's, the Agents SDK's ``convert_schemas_to_strict``) lists every property as required and
sends null for what it leaves out; such a call reads as the same call without them.  A required
parameter's null is refused naming it, unless its own schema admits null (``knowledge_recall``'s
``recall``).  Checks that span parameters (``id`` with ``expectedRevision``, a query search or an
addressed read) stay with the parser that reads them.

The edge rules every spec applies:

- a **name** (``check_name``: title, alias, tag, type, claimKind, subject, relation, trigger, project key,
  label, request id ...) is one line with no control character;
- **multi-line text** (``check_text``: body, claim text, excerpt, quote, summary) holds no control
  character but tab, line feed and carriage return;
- anything over a maximum (characters, entries, or a number such as ``limit``) is ``limit_exceeded``
  naming the field (``check_size``, ``check_count``, ``Integer``); a wrong type, an empty value or a
  number under its minimum is ``invalid_params``.  A scale (``Integer(scale=True)``, ``Number``) is not a
  size: outside its range either way is ``invalid_params``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any, Callable, ClassVar, Iterator, Mapping

from .answers import JsonObject
from .errors import InvalidParams, LimitExceeded
from .ids import ID_MAX_CHARS, ID_REGEX, is_agent_name, is_record_id

# The largest integer a record's frontmatter or SQLite holds: an integer parameter declared without an upper
# bound (a revision, an offset) stops here, so no count, revision or position beyond it reaches a query.
INTEGER_MAX = 2**63 - 1
REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
REQUEST_ID_MAX_CHARS = 128

# Control characters are Unicode's category Cc: C0 (U+0000-U+001F), DEL (U+007F) and C1 (U+0080-U+009F).
# A name holds none of them, nor U+2028/U+2029 (line and paragraph separators, which str.splitlines() and
# renderers break lines on).  Multi-line text may hold tab, LF and CR, and C1: those turn up in text decoded
# with the wrong code page, which evidence keeps verbatim, and YAML and JSON escape them.  A lone surrogate
# is no character at all, and cannot be written as UTF-8; both refuse it.
_NAME_REFUSED = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_TEXT_REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
_LINE_BREAKS = "\n\r\u2028\u2029"


# --- the edge rules ------------------------------------------------------------------------------


def _shown(field: str, index: int | None) -> str:
    return field if index is None else f"{field}[{index}]"


def refuse_controls(value: str, field: str, *, one_line: bool, index: int | None = None) -> None:
    """``InvalidParams`` naming the field and the code point of the first character the rule refuses.

    ``index``: the value is that entry of the list ``field``; the error names the list (as these
    errors always have) and carries the index.
    """
    found = (_NAME_REFUSED if one_line else _TEXT_REFUSED).search(value)
    if found is None:
        return
    char, shown = found.group(), _shown(field, index)
    if one_line and char in _LINE_BREAKS:
        raise InvalidParams(f"{shown} must be one line", field=field, index=index)
    what = ("a NUL character" if char == "\x00" else "a lone surrogate" if "\ud800" <= char <= "\udfff"
            else f"the control character U+{ord(char):04X}")
    raise InvalidParams(f"{shown} contains {what}", field=field, index=index, codepoint=f"U+{ord(char):04X}")


def check_size(value: str, field: str, max_chars: int, *, index: int | None = None) -> None:
    if len(value) > max_chars:
        raise LimitExceeded(f"{_shown(field, index)} is longer than {max_chars:,} characters", field=field,
                            index=index, limit=max_chars, size=len(value))


def check_count(value: list[Any], field: str, max_items: int, what: str = "entries") -> None:
    if len(value) > max_items:
        raise LimitExceeded(f"{field} holds more than {max_items} {what}", field=field, limit=max_items,
                            size=len(value))


def check_name(value: Any, field: str, *, max_chars: int, required: bool = True,
               index: int | None = None) -> str | None:
    """A name-like field: a non-empty, one-line string without control characters; returned stripped."""
    shown = _shown(field, index)
    if value is None:
        if required:
            raise InvalidParams(f"{shown} is required", field=field, index=index)
        return None
    if not isinstance(value, str):
        raise InvalidParams(f"{shown} must be a string", field=field, index=index)
    check_size(value, field, max_chars, index=index)
    refuse_controls(value, field, one_line=True, index=index)
    if not value.strip():
        raise InvalidParams(f"{shown} must not be empty", field=field, index=index)
    return value.strip()


def check_text(value: Any, field: str, *, max_chars: int, required: bool = False) -> str | None:
    """Multi-line text: a string without control characters other than tab, LF and CR; returned as is."""
    if value is None:
        if required:
            raise InvalidParams(f"{field} is required", field=field)
        return None
    if not isinstance(value, str):
        raise InvalidParams(f"{field} must be a string", field=field)
    check_size(value, field, max_chars)
    refuse_controls(value, field, one_line=False)
    if required and not value.strip():
        raise InvalidParams(f"{field} must not be empty", field=field)
    return value


def check_query(value: Any, field: str, *, max_bytes: int | None = None, max_chars: int | None = None) -> str:
    """What a user typed to look for: non-empty text without control characters (tab and newlines aside)."""
    if not isinstance(value, str):
        raise InvalidParams(f"{field} must be a string", field=field)
    if max_bytes is not None and len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise LimitExceeded(f"{field} is longer than {max_bytes} bytes", field=field, limit=max_bytes)
    if max_chars is not None:
        check_size(value, field, max_chars)
    if any(unicodedata.category(ch) in ("Cc", "Cs") and ch not in "\t\n\r" for ch in value):
        raise InvalidParams(f"{field} contains control characters or binary data", field=field)
    if not value.strip():
        raise InvalidParams(f"{field} must not be empty", field=field)
    return value


def parse_request_id(value: Any, field: str = "requestId") -> str:
    if isinstance(value, str):
        check_size(value, field, REQUEST_ID_MAX_CHARS)
        refuse_controls(value, field, one_line=True)
    if not isinstance(value, str) or not REQUEST_ID.fullmatch(value):
        raise InvalidParams(f"{field} must be 1-128 letters, digits, '_', '.', ':' or '-'", field=field)
    return value


def without_meta(params: Any) -> Any:
    """A request's parameters without the protocol's ``_meta`` (the credential and audience, read apart)."""
    return {key: value for key, value in params.items() if key != "_meta"} if isinstance(params, dict) else params


# --- the specs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One parameter: its name, whether it must be given, what absent (or null) reads as, and its description.

    ``NULL_IS_ABSENT``: a required parameter of this kind given as null is refused as missing (``title is
    required``); other kinds check the null as a value (``limit must be an integer ...``, or a ``Value``
    whose check reads null).
    """

    name: str
    _: KW_ONLY
    required: bool = False
    default: Any = None
    description: str | None = None

    NULL_IS_ABSENT: ClassVar[bool] = False

    def take(self, params: Mapping[str, Any], where: str = "") -> Any:
        """This parameter's value in ``params`` (``where`` prefixes the field an error names)."""
        field = where + self.name
        value = params.get(self.name)
        if value is None and (self.name not in params or not self.required or self.NULL_IS_ABSENT):
            if self.required:
                raise InvalidParams(f"{field} is required", field=field)
            return self.default
        return self.check(value, field)

    def check(self, value: Any, field: str) -> Any:
        """The given value, checked and typed; raises naming ``field``."""
        raise NotImplementedError

    def schema(self) -> JsonObject:
        """This parameter's JSON Schema."""
        raise NotImplementedError

    def _schema(self, kind: Any, **constraints: Any) -> JsonObject:
        schema: dict[str, Any] = {"type": kind}
        if self.description:
            schema["description"] = self.description
        schema.update((key, value) for key, value in constraints.items() if value is not None)
        if isinstance(self.default, (bool, int, float, str)) and self.default != "":
            schema["default"] = self.default
        return schema


def whole_number(value: Any) -> int | None:
    """``value`` as an int where JSON Schema's ``integer`` admits it, else None.

    JSON Schema counts any number with no fractional part as an integer, so ``5.0`` passes a client's check of
    a tool's ``inputSchema`` and is read as 5 here too; ``true`` is not 1, and ``5.5`` or a string is no integer.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


@dataclass(frozen=True)
class Integer(Spec):
    """An integer from ``low`` to ``high`` (``INTEGER_MAX`` when ``high`` is None).

    Over ``high`` is ``limit_exceeded`` (a size, such as ``limit``), unless ``scale``: then 11 is as wrong
    as 0 (``importance``, a timeout), ``invalid_params``.
    """

    low: int = 0
    high: int | None = None
    _: KW_ONLY
    scale: bool = False

    def check(self, value: Any, field: str) -> int:
        value = whole_number(value)
        over = value is not None and value > self.highest
        if value is None or value < self.low or (over and self.scale):
            raise InvalidParams(f"{field} must be {self.expected}", field=field)
        if over:
            raise LimitExceeded(f"{field} must be at most {self.highest:,}", field=field, limit=self.highest,
                                size=value)
        return value

    @property
    def highest(self) -> int:
        return self.high if self.high is not None else INTEGER_MAX

    @property
    def expected(self) -> str:
        if self.high is not None:
            return f"an integer from {self.low:,} to {self.high:,}"
        return {0: "a non-negative integer", 1: "a positive integer"}.get(self.low,
                                                                          f"an integer of at least {self.low:,}")

    def schema(self) -> JsonObject:
        return self._schema("integer", minimum=self.low, maximum=self.highest)


@dataclass(frozen=True)
class Number(Spec):
    """A number (an integer or a float) from ``low`` to ``high``, returned as a float."""

    low: float = 0.0
    high: float = 1.0

    def check(self, value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not self.low <= value <= self.high:
            raise InvalidParams(f"{field} must be a number from {self.low:g} to {self.high:g}", field=field)
        return float(value)

    def schema(self) -> JsonObject:
        return self._schema("number", minimum=self.low, maximum=self.high)


@dataclass(frozen=True)
class Flag(Spec):
    """The JSON literal true or false (1, "true" or null are refused, never read as a flag)."""

    def check(self, value: Any, field: str) -> bool:
        if not isinstance(value, bool):
            raise InvalidParams(f"{field} must be true or false", field=field)
        return value

    def schema(self) -> JsonObject:
        return self._schema("boolean")


@dataclass(frozen=True)
class Choice(Spec):
    """One of a fixed set of strings."""

    choices: tuple[str, ...] = ()

    def check(self, value: Any, field: str) -> str:
        if not isinstance(value, str) or value not in self.choices:
            raise InvalidParams(f"{field} must be one of {', '.join(self.choices)}", field=field)
        return value

    def schema(self) -> JsonObject:
        return self._schema("string", enum=list(self.choices))


@dataclass(frozen=True)
class Choices(Spec):
    """A non-empty list of distinct strings from a fixed set (a filter naming several kinds at once)."""

    choices: tuple[str, ...] = ()

    NULL_IS_ABSENT: ClassVar[bool] = True

    def check(self, value: Any, field: str) -> tuple[str, ...]:
        if (not isinstance(value, list) or not value or len(value) != len(set(map(str, value)))
                or any(not isinstance(item, str) or item not in self.choices for item in value)):
            raise InvalidParams(f"{field} must be a non-empty list of distinct values from "
                                f"{', '.join(self.choices)}", field=field)
        return tuple(value)

    def schema(self) -> JsonObject:
        return self._schema("array", items={"type": "string", "enum": list(self.choices)}, minItems=1,
                            maxItems=len(self.choices), uniqueItems=True)


@dataclass(frozen=True)
class Name(Spec):
    """A name (``check_name``): one line of 1-``max_chars`` characters, returned stripped.

    ``blank``: an empty or blank optional value is taken as given (no name) rather than refused.
    """

    max_chars: int = 0
    _: KW_ONLY
    blank: bool = False

    NULL_IS_ABSENT: ClassVar[bool] = True

    def check(self, value: Any, field: str) -> str | None:
        if self.blank and isinstance(value, str) and not value.strip():
            refuse_controls(value, field, one_line=True)
            return value
        return check_name(value, field, max_chars=self.max_chars)

    def schema(self) -> JsonObject:
        return self._schema("string", minLength=None if self.blank else 1, maxLength=self.max_chars)


@dataclass(frozen=True)
class Text(Spec):
    """Multi-line text (``check_text``) of at most ``max_chars`` characters, returned as given.

    ``strip``: returned stripped, and measured and checked for emptiness once stripped.
    """

    max_chars: int = 0
    _: KW_ONLY
    strip: bool = False

    NULL_IS_ABSENT: ClassVar[bool] = True

    def check(self, value: Any, field: str) -> str | None:
        if not self.strip:
            return check_text(value, field, max_chars=self.max_chars, required=self.required)
        if not isinstance(value, str):
            raise InvalidParams(f"{field} must be a string", field=field)
        refuse_controls(value, field, one_line=False)
        value = value.strip()
        check_size(value, field, self.max_chars)
        if self.required and not value:
            raise InvalidParams(f"{field} must not be empty", field=field)
        return value

    def schema(self) -> JsonObject:
        return self._schema("string", minLength=1 if self.required else None, maxLength=self.max_chars)


@dataclass(frozen=True)
class Query(Spec):
    """What someone types to look for (``check_query``): any non-empty text without control characters,
    bounded in UTF-8 bytes (``max_bytes``) or characters (``max_chars``)."""

    _: KW_ONLY
    max_bytes: int | None = None
    max_chars: int | None = None

    def check(self, value: Any, field: str) -> str:
        return check_query(value, field, max_bytes=self.max_bytes, max_chars=self.max_chars)

    def schema(self) -> JsonObject:
        return self._schema("string", minLength=1, maxLength=self.max_chars or self.max_bytes)


@dataclass(frozen=True)
class String(Spec):
    """A string taken as given (a cursor, a path, a token, a revision id): at most ``max_chars`` characters
    (``limit_exceeded`` past them), at least ``min_chars``, and matching ``pattern`` when one is given.
    ``what`` says in the error what it must be."""

    max_chars: int | None = None
    _: KW_ONLY
    min_chars: int = 0
    pattern: re.Pattern[str] | None = None
    what: str = "a string"

    NULL_IS_ABSENT: ClassVar[bool] = True

    def check(self, value: Any, field: str) -> str:
        if not isinstance(value, str):
            raise InvalidParams(f"{field} must be {self.what}", field=field)
        if self.max_chars is not None:
            check_size(value, field, self.max_chars)
        if len(value) < self.min_chars or (self.pattern is not None and not self.pattern.fullmatch(value)):
            raise InvalidParams(f"{field} must be {self.what}", field=field)
        return value

    def schema(self) -> JsonObject:
        return self._schema("string", minLength=self.min_chars or None, maxLength=self.max_chars,
                            pattern=f"^{self.pattern.pattern}$" if self.pattern is not None else None)


@dataclass(frozen=True)
class RequestId(Spec):
    """A caller's request id (``parse_request_id``): 1-128 letters, digits, '_', '.', ':' or '-'."""

    NULL_IS_ABSENT: ClassVar[bool] = True

    def check(self, value: Any, field: str) -> str:
        return parse_request_id(value, field)

    def schema(self) -> JsonObject:
        return self._schema("string", maxLength=REQUEST_ID_MAX_CHARS, pattern=f"^{REQUEST_ID.pattern}$")


@dataclass(frozen=True)
class RecordId(Spec):
    """A record, source or vault id (``what`` names which in the error)."""

    _: KW_ONLY
    what: str = "a record id"

    NULL_IS_ABSENT: ClassVar[bool] = True

    def check(self, value: Any, field: str) -> str:
        if not is_record_id(value):
            raise InvalidParams(f"{field} must be {self.what}", field=field)
        return value

    def schema(self) -> JsonObject:
        return self._schema("string", maxLength=ID_MAX_CHARS, pattern=f"^{ID_REGEX}$")


@dataclass(frozen=True)
class AgentName(Spec):
    """An agent's name, as the registry spells them."""

    NULL_IS_ABSENT: ClassVar[bool] = True

    def check(self, value: Any, field: str) -> str:
        if not is_agent_name(value):
            raise InvalidParams(f"{field} must name an agent", field=field)
        return value

    def schema(self) -> JsonObject:
        return self._schema("string")


@dataclass(frozen=True)
class Names(Spec):
    """A list of at most ``max_items`` names of at most ``max_chars`` each: stripped, duplicates dropped.

    An entry's error names the list and carries its ``index``."""

    max_items: int = 0
    max_chars: int = 0

    NULL_IS_ABSENT: ClassVar[bool] = True

    def check(self, value: Any, field: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise InvalidParams(f"{field} must be a list of at most {self.max_items} strings", field=field)
        check_count(value, field, self.max_items)
        cleaned = [check_name(item, field, max_chars=self.max_chars, index=index) for index, item in enumerate(value)]
        return tuple(dict.fromkeys(cleaned))  # type: ignore[arg-type]  # check_name returned every one

    def schema(self) -> JsonObject:
        return self._schema("array", items={"type": "string", "minLength": 1, "maxLength": self.max_chars},
                            maxItems=self.max_items)


@dataclass(frozen=True)
class Objects(Spec):
    """A list of ``min_items``-``max_items`` objects, each read by ``of`` (or by the ``Params`` that ``pick``
    chooses for it), its fields named ``<name>[<index>].<key>``; ``build(values, raw, where)`` turns each
    into what the parser returns and checks what spans its fields."""

    of: Params | None = None
    _: KW_ONLY
    max_items: int = 0
    min_items: int = 0
    what: str = "entries"
    pick: Callable[[dict[str, Any]], Params] | None = None
    build: Callable[[dict[str, Any], dict[str, Any], str], Any] | None = None

    NULL_IS_ABSENT: ClassVar[bool] = True

    def check(self, value: Any, field: str) -> tuple[Any, ...]:
        if not isinstance(value, list) or len(value) < self.min_items:
            count = f"{self.min_items}-{self.max_items}" if self.min_items else f"at most {self.max_items}"
            raise InvalidParams(f"{field} must be a list of {count} {self.what}", field=field)
        check_count(value, field, self.max_items, self.what)
        found = []
        for index, raw in enumerate(value):
            where = f"{field}[{index}]"
            if not isinstance(raw, dict):
                raise InvalidParams(f"{where} must be an object", field=where)
            assert self.of is not None
            if self.pick is not None:  # its shape is chosen by the keys given: one published, given null, is not
                raw = {key: value for key, value in raw.items() if value is not None or key not in self.of.specs}
            shape = self.pick(raw) if self.pick is not None else self.of
            values = shape.read(raw, where=f"{where}.")
            found.append(self.build(values, raw, f"{where}.") if self.build is not None else values)
        return tuple(found)

    def schema(self) -> JsonObject:
        assert self.of is not None
        return self._schema("array", items=self.of.schema(required=self.pick is None),
                            minItems=self.min_items or None, maxItems=self.max_items)


@dataclass(frozen=True)
class Value(Spec):
    """Anything the method's own code checks (an audience, a reference, typed fields, a settings block):
    ``check(value, field)`` reads it when given; ``json`` is its schema."""

    check_value: Callable[[Any, str], Any] | None = None
    _: KW_ONLY
    json: Mapping[str, Any] | None = None

    def check(self, value: Any, field: str) -> Any:
        return self.check_value(value, field) if self.check_value is not None else value

    def schema(self) -> JsonObject:
        schema = dict(self.json or {})
        if self.description:
            schema.setdefault("description", self.description)
        return schema


# --- the reader ----------------------------------------------------------------------------------


class Params:
    """What a method takes: its specs, in the order they are read.

    ``note`` is added to the unknown-parameter error (a hint at what the method does not take).
    """

    def __init__(self, *specs: Spec, note: str = "") -> None:
        self.specs: dict[str, Spec] = {spec.name: spec for spec in specs}
        self.note = note

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.specs)

    def __iter__(self) -> Iterator[Spec]:
        return iter(self.specs.values())

    def __getitem__(self, name: str) -> Spec:
        return self.specs[name]

    def __add__(self, other: Params) -> Params:
        """Both declarations: a spec of ``other`` replaces one of the same name."""
        return Params(*{**self.specs, **other.specs}.values(), note=other.note or self.note)

    def optional(self) -> Params:
        """The same parameters, none of them required (a method whose required ones depend on its shape)."""
        return Params(*(replace(spec, required=False) for spec in self), note=self.note)

    def read(self, params: Any, *, where: str = "") -> dict[str, Any]:
        """Every declared parameter's value (its default when absent); unknown keys are refused first.

        ``where`` prefixes every field named in an error (``recall.``, ``items[2].``)."""
        params = self.refuse_unknown(params, where=where)
        return {name: spec.take(params, where) for name, spec in self.specs.items()}

    def refuse_unknown(self, params: Any, *, where: str = "") -> JsonObject:
        """``params`` (``{}`` for None) without the optional ones given as null, unless it is no object or
        holds a key not declared here.  What a handler checks by the keys given, it checks on this."""
        if params is None:
            return {}
        if not isinstance(params, dict):
            raise InvalidParams(f"{where.removesuffix('.') or 'parameters'} must be an object",
                                **({"field": where.removesuffix(".")} if where else {}))
        unknown = sorted(str(key) for key in params if key not in self.specs)
        if unknown:
            raise InvalidParams(f"unknown parameter {where}{unknown[0]}{'; ' + self.note if self.note else ''}",
                                field=f"{where}{unknown[0]}")
        return {key: value for key, value in params.items() if value is not None or self.specs[key].required}

    def schema(self, *, required: bool = True) -> JsonObject:
        """The JSON Schema of these parameters (``required=False``: list none as required); an optional
        one admits null, which it reads as absent."""
        listed = [spec.name for spec in self if spec.required and required]
        return {"type": "object",
                "properties": {spec.name: spec.schema() if spec.name in listed else admitting_null(spec.schema())
                               for spec in self},
                "required": listed, "additionalProperties": False}


def admitting_null(schema: JsonObject) -> JsonObject:
    """``schema`` or null: ``anyOf`` the two, never a list of types (docs/protocol-tools.md, "Schemas and strict
    mode").  Its title and description stay beside ``anyOf``; its ``default`` goes with the value's schema,
    since Vertex AI refuses a ``default`` beside ``anyOf``.  A schema that admits null already is returned as is."""
    if ("type" not in schema and "anyOf" not in schema and "enum" not in schema) or schema.get("type") == "null" \
            or any(member.get("type") == "null" for member in schema.get("anyOf", ())):
        return schema
    notes = {key: schema[key] for key in ("title", "description") if key in schema}
    value = {key: item for key, item in schema.items() if key not in notes}
    return {**notes, "anyOf": [value, {"type": "null"}]}


NO_PARAMS = Params()
AGENT = Params(AgentName("agent", required=True))  # every operator method that reads one agent's partition
