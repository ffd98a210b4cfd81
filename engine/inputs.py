"""Typed inputs of the write operations, parsed once at the edge.

Every entry point (Python API, socket tool, CLI) hands raw parameters to
these parsers; the core only ever sees the frozen dataclasses, already
checked for types, sizes and mutually exclusive fields.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from .errors import InvalidParams
from .ids import is_record_id
from .records import ASSERTION_ORIGINS, TITLE_MAX_CHARS

REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
TEXT_MAX_CHARS = 100_000
EXCERPT_MAX_CHARS = 1_000_000
ITEMS_MAX = 100
LIST_MAX = 100


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
    value = params.get(key)
    field = f"{where}{key}"
    if value is None:
        if required:
            raise InvalidParams(f"{field} is required", field=field)
        return None
    if not isinstance(value, str):
        raise InvalidParams(f"{field} must be a string", field=field)
    if required and not value.strip():
        raise InvalidParams(f"{field} must not be empty", field=field)
    if len(value) > max_chars:
        raise InvalidParams(f"{field} is longer than {max_chars} characters", field=field)
    if one_line and ("\n" in value or "\r" in value):
        raise InvalidParams(f"{field} must be one line", field=field)
    if "\x00" in value:
        raise InvalidParams(f"{field} contains a NUL character", field=field)
    return value


def _strings(params: dict[str, Any], key: str) -> tuple[str, ...] | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > LIST_MAX:
        raise InvalidParams(f"{key} must be a list of at most {LIST_MAX} strings", field=key)
    cleaned = []
    for item in value:
        if not isinstance(item, str) or not item.strip() or "\n" in item or len(item) > TITLE_MAX_CHARS:
            raise InvalidParams(f"{key} must hold non-empty one-line strings", field=key)
        cleaned.append(item.strip())
    return tuple(dict.fromkeys(cleaned))


def parse_request_id(value: Any) -> str:
    if not isinstance(value, str) or not REQUEST_ID.fullmatch(value):
        raise InvalidParams("requestId must be 1-128 letters, digits, '_', '.', ':' or '-'", field="requestId")
    return value


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
    if not isinstance(value, list) or len(value) > LIST_MAX:
        raise InvalidParams(f"evidence must be a list of at most {LIST_MAX} citations", field=f"{prefix}evidence")
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
    fields = params.get("fields")
    if fields is not None and not isinstance(fields, dict):
        raise InvalidParams("fields must be an object", field="fields")
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
    page_type = _string(params, "type", one_line=True, max_chars=64)
    title = _string(params, "title", one_line=True, max_chars=TITLE_MAX_CHARS)
    body = _string(params, "body", required=False, max_chars=4_000_000) or ""
    return PageInput(
        request_id=parse_request_id(params.get("requestId")),
        type=page_type.strip(), title=title.strip(), body=body,
        aliases=_strings(params, "aliases"), tags=_strings(params, "tags"),
        fields=dict(fields) if fields is not None else None,
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
    if len(items_raw) > ITEMS_MAX:
        raise InvalidParams(f"at most {ITEMS_MAX} items per call", field="items")
    items: list[ClaimItem | RelationshipItem] = []
    for index, raw in enumerate(items_raw):
        where = f"items[{index}]."
        if not isinstance(raw, dict):
            raise InvalidParams("each item must be an object", field=f"items[{index}]")
        evidence = _item_evidence(raw, where)
        if "relation" in raw:
            _check_keys(raw, {"relation", "from", "to", "excerpt", "evidence", "assertionOrigin"}, where)
            items.append(RelationshipItem(
                relation=_string(raw, "relation", one_line=True, max_chars=64, where=where),
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
            claim_kind=_string(raw, "claimKind", one_line=True, max_chars=64, where=where),
            evidence=evidence, assertion_origin=_origin(raw, where), replaces=replaces,
            subject=_string(raw, "subject", required=False, one_line=True, max_chars=TITLE_MAX_CHARS,
                            where=where),
        ))
    return RememberInput(
        request_id=parse_request_id(params.get("requestId")), items=tuple(items),
        subject=_string(params, "subject", required=False, one_line=True, max_chars=TITLE_MAX_CHARS),
    )
