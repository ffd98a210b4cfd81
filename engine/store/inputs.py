"""Typed inputs of the write operations, parsed once at the edge, and the rules every parser applies.

Every entry point (Python API, socket tool, CLI) hands raw parameters to
these parsers; the core only ever sees the frozen dataclasses, already
checked for types, sizes and mutually exclusive fields.

The edge rules, shared by every parameter parser in the engine (writes, recall, attachments, search,
reads, the ontology tool, search_knowledge, the gate):

- ``check_name``: a name-like field (title, alias, tag, type, claimKind, subject, relation, from/to,
  field keys, trigger, project key, filename, requestId) is one line with no control character.
- ``check_text``: multi-line text (body, claim text, excerpt, quote, summary) holds no control
  character but tab, line feed and carriage return.
- ``check_size``, ``check_count``, ``bounded_int``: anything over a maximum (characters, items, or
  a number such as ``limit``) is ``limit_exceeded`` naming the field; a wrong type, an empty
  value or a number under its minimum is ``invalid_params``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from ..core.errors import InvalidParams, LimitExceeded
from ..core.ids import is_record_id
from ..vault.records import ASSERTION_ORIGINS, TITLE_MAX_CHARS

REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
REQUEST_ID_MAX_CHARS = 128
TEXT_MAX_CHARS = 100_000
BODY_MAX_CHARS = 4_000_000
EXCERPT_MAX_CHARS = 1_000_000
NAME_MAX_CHARS = 64  # type, claimKind, relation
ITEMS_MAX = 100
LIST_MAX = 100

# Control characters are Unicode's category Cc: C0 (U+0000-U+001F), DEL (U+007F) and C1 (U+0080-U+009F).
# A name holds none of them, nor U+2028/U+2029 (line and paragraph separators, which str.splitlines() and
# renderers break lines on).  Multi-line text may hold tab, LF and CR, and C1: those turn up in text decoded
# with the wrong code page, which evidence keeps verbatim, and YAML and JSON escape them.  A lone surrogate
# is no character at all, and cannot be written as UTF-8; both refuse it.
_NAME_REFUSED = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_TEXT_REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
_LINE_BREAKS = "\n\r\u2028\u2029"


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


def bounded_int(value: Any, field: str, *, low: int, high: int) -> int:
    """An integer from ``low`` to ``high``; above ``high`` is ``limit_exceeded``, anything else wrong is
    ``invalid_params``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidParams(f"{field} must be an integer from {low} to {high}", field=field)
    if value > high:
        raise LimitExceeded(f"{field} must be at most {high:,}", field=field, limit=high, size=value)
    return value


@dataclass(frozen=True)
class EvidenceInput:
    """A citation: new supporting text to retain (``excerpt``) or an existing source."""

    excerpt: str | None = None
    source: str | None = None
    lines: tuple[int, int] | None = None
    quote: str | None = None


@dataclass(frozen=True)
class PageInput:
    request_id: str
    type: str
    title: str
    body: str
    aliases: tuple[str, ...] | None = None  # None keeps a revised page's aliases
    tags: tuple[str, ...] | None = None
    fields: dict[str, Any] | None = None
    evidence: tuple[EvidenceInput, ...] = ()
    id: str | None = None
    expected_revision: int | None = None

    def digest_params(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ClaimItem:
    text: str
    claim_kind: str
    evidence: tuple[EvidenceInput, ...]
    assertion_origin: str = "user"
    replaces: str | None = None
    subject: str | None = None


@dataclass(frozen=True)
class RelationshipItem:
    relation: str
    from_page: str
    to_page: str
    evidence: tuple[EvidenceInput, ...]
    assertion_origin: str = "user"


@dataclass(frozen=True)
class RememberInput:
    request_id: str
    items: tuple[ClaimItem | RelationshipItem, ...]
    subject: str | None = None

    def digest_params(self) -> dict[str, Any]:
        return asdict(self)


def _string(params: dict[str, Any], key: str, *, required: bool = True, max_chars: int = TEXT_MAX_CHARS,
            one_line: bool = False, where: str = "") -> str | None:
    """``params[key]`` as a name (``one_line``, stripped) or as multi-line text (as given)."""
    field = f"{where}{key}"
    if one_line:
        value = params.get(key)
        if not required and isinstance(value, str) and not value.strip():
            refuse_controls(value, field, one_line=True)
            return value  # an empty optional name is no name (as it always was)
        return check_name(value, field, max_chars=max_chars, required=required)
    return check_text(params.get(key), field, max_chars=max_chars, required=required)


def _strings(params: dict[str, Any], key: str) -> tuple[str, ...] | None:
    """Aliases or tags: at most ``LIST_MAX`` names, stripped, duplicates dropped."""
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidParams(f"{key} must be a list of strings", field=key)
    check_count(value, key, LIST_MAX)
    cleaned = [check_name(item, key, max_chars=TITLE_MAX_CHARS, index=index) for index, item in enumerate(value)]
    return tuple(dict.fromkeys(cleaned))


def parse_request_id(value: Any, field: str = "requestId") -> str:
    if isinstance(value, str):
        check_size(value, field, REQUEST_ID_MAX_CHARS)
        refuse_controls(value, field, one_line=True)
    if not isinstance(value, str) or not REQUEST_ID.fullmatch(value):
        raise InvalidParams(f"{field} must be 1-128 letters, digits, '_', '.', ':' or '-'", field=field)
    return value


def parse_fields(value: Any) -> dict[str, Any] | None:
    """A page's typed fields: an object whose keys, at every depth, are names; string values are text.

    The ontology checks which fields a type has and what they hold; this is the edge rule for
    every key and string in them, walked with an explicit stack so no depth exhausts Python's.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidParams("fields must be an object", field="fields")
    stack: list[tuple[str, Any]] = [("fields", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            check_text(item, path, max_chars=BODY_MAX_CHARS)  # the record's own size limit bounds the rest
        elif isinstance(item, dict):
            for index, (key, child) in enumerate(item.items()):
                check_name(key, f"{path}.<key {index}>", max_chars=TITLE_MAX_CHARS)
                stack.append((f"{path}.{key}", child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
    return dict(value)


def _record_ref(value: Any, field: str) -> str:
    if not is_record_id(value):
        raise InvalidParams(f"{field} must be a record id", field=field)
    return value


def _origin(params: dict[str, Any], where: str) -> str:
    origin = params.get("assertionOrigin", "user")
    if origin == "agent_inference":
        raise InvalidParams(
            "agent inference is never stored as a claim; record your analysis on a page instead",
            field=f"{where}assertionOrigin",
        )
    if origin not in ASSERTION_ORIGINS:
        raise InvalidParams("assertionOrigin must be 'user' or 'source'", field=f"{where}assertionOrigin")
    return origin


def _check_keys(params: dict[str, Any], allowed: set[str], where: str = "") -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise InvalidParams(f"unknown parameter {where}{unknown[0]}", field=f"{where}{unknown[0]}")


def parse_evidence(value: Any, prefix: str = "") -> tuple[EvidenceInput, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidParams(f"evidence must be a list of at most {LIST_MAX} citations", field=f"{prefix}evidence")
    check_count(value, f"{prefix}evidence", LIST_MAX, "citations")
    citations = []
    for index, item in enumerate(value):
        where = f"{prefix}evidence[{index}]."
        if not isinstance(item, dict):
            raise InvalidParams("each citation must be an object", field=f"{prefix}evidence[{index}]")
        _check_keys(item, {"excerpt", "source", "lines", "quote"}, where)
        excerpt = _string(item, "excerpt", required=False, max_chars=EXCERPT_MAX_CHARS, where=where)
        source = item.get("source")
        if (excerpt is None) == (source is None):
            raise InvalidParams("a citation gives either an excerpt to retain or an existing source id",
                                field=f"{prefix}evidence[{index}]")
        if source is not None:
            _record_ref(source, f"{where}source")
        lines = item.get("lines")
        if lines is not None:
            if (not isinstance(lines, list) or len(lines) != 2
                    or not all(isinstance(n, int) and not isinstance(n, bool) for n in lines)
                    or not 1 <= lines[0] <= lines[1]):
                raise InvalidParams("lines must be [first, last] with 1 <= first <= last", field=f"{where}lines")
            lines = (lines[0], lines[1])
        quote = _string(item, "quote", required=False, where=where)
        citations.append(EvidenceInput(excerpt, source, lines, quote))
    return tuple(citations)


def parse_page_input(params: dict[str, Any]) -> PageInput:
    if not isinstance(params, dict):
        raise InvalidParams("parameters must be an object")
    _check_keys(params, {"requestId", "type", "title", "body", "aliases", "tags", "fields", "evidence", "id",
                         "expectedRevision"})
    page_id = params.get("id")
    if page_id is not None:
        _record_ref(page_id, "id")
    expected = params.get("expectedRevision")
    if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int) or expected < 1):
        raise InvalidParams("expectedRevision must be a positive integer", field="expectedRevision")
    if page_id is not None and expected is None:
        raise InvalidParams("revising a page needs expectedRevision", field="expectedRevision")
    if page_id is None and expected is not None:
        raise InvalidParams("expectedRevision only applies with id", field="expectedRevision")
    page_type = _string(params, "type", one_line=True, max_chars=NAME_MAX_CHARS)
    title = _string(params, "title", one_line=True, max_chars=TITLE_MAX_CHARS)
    body = _string(params, "body", required=False, max_chars=BODY_MAX_CHARS) or ""
    return PageInput(
        request_id=parse_request_id(params.get("requestId")),
        type=page_type, title=title, body=body,
        aliases=_strings(params, "aliases"), tags=_strings(params, "tags"),
        fields=parse_fields(params.get("fields")),
        evidence=parse_evidence(params.get("evidence")), id=page_id, expected_revision=expected,
    )


def _item_evidence(raw: dict[str, Any], where: str) -> tuple[EvidenceInput, ...]:
    """An item's support: the ``excerpt`` to retain, or ``evidence`` citing retained sources."""
    if "evidence" in raw:
        if "excerpt" in raw:
            raise InvalidParams("give either excerpt or evidence, not both", field=f"{where}evidence")
        evidence = parse_evidence(raw["evidence"], where)
        if not evidence:
            raise InvalidParams("evidence must cite at least one source", field=f"{where}evidence")
        return evidence
    excerpt = _string(raw, "excerpt", max_chars=EXCERPT_MAX_CHARS, where=where)
    return (EvidenceInput(excerpt=excerpt),)


def parse_remember_input(params: dict[str, Any]) -> RememberInput:
    if not isinstance(params, dict):
        raise InvalidParams("parameters must be an object")
    _check_keys(params, {"requestId", "subject", "items"})
    items_raw = params.get("items")
    if not isinstance(items_raw, list) or not items_raw:
        raise InvalidParams("items must be a non-empty list", field="items")
    check_count(items_raw, "items", ITEMS_MAX, "items (the most one call saves)")
    items: list[ClaimItem | RelationshipItem] = []
    for index, raw in enumerate(items_raw):
        where = f"items[{index}]."
        if not isinstance(raw, dict):
            raise InvalidParams("each item must be an object", field=f"items[{index}]")
        evidence = _item_evidence(raw, where)
        if "relation" in raw:
            _check_keys(raw, {"relation", "from", "to", "excerpt", "evidence", "assertionOrigin"}, where)
            items.append(RelationshipItem(
                relation=_string(raw, "relation", one_line=True, max_chars=NAME_MAX_CHARS, where=where),
                from_page=_string(raw, "from", one_line=True, max_chars=TITLE_MAX_CHARS, where=where),
                to_page=_string(raw, "to", one_line=True, max_chars=TITLE_MAX_CHARS, where=where),
                evidence=evidence, assertion_origin=_origin(raw, where),
            ))
            continue
        _check_keys(raw, {"text", "claimKind", "excerpt", "evidence", "assertionOrigin", "replaces", "subject"}, where)
        replaces = raw.get("replaces")
        if replaces is not None:
            _record_ref(replaces, f"{where}replaces")
        items.append(ClaimItem(
            text=_string(raw, "text", where=where).strip(),
            claim_kind=_string(raw, "claimKind", one_line=True, max_chars=NAME_MAX_CHARS, where=where),
            evidence=evidence, assertion_origin=_origin(raw, where), replaces=replaces,
            subject=_string(raw, "subject", required=False, one_line=True, max_chars=TITLE_MAX_CHARS,
                            where=where),
        ))
    return RememberInput(
        request_id=parse_request_id(params.get("requestId")), items=tuple(items),
        subject=_string(params, "subject", required=False, one_line=True, max_chars=TITLE_MAX_CHARS),
    )
