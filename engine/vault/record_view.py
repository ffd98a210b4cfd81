"""The record's one typed view: every key of ``knowledge-record-v1`` as a typed field, read once.

A ``RecordView`` is built from a record's frontmatter leniently: a value of the wrong type (a
revision that is text, aliases that are not a list of strings, a date that is no date) is ``None``
in the view, and ``records.check_record`` reports it as the record's finding, so a bad file stays
readable and is shown as invalid.  Keys the format does not define are kept, in their order, in
``extra``.  Every surface (catalog, reads, search, recall, the Knowledge Index, importers, the
window) reads records through this view instead of looking keys up in the frontmatter mapping.

The frontmatter mapping itself is kept (``raw``) for what needs the exact text a file holds: the
validator, which must say what is wrong with a value, and rendering, which writes unknown keys back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Callable, Literal, Mapping

from ..core.answers import NotRequired, TypedDict
from ..core.ids import is_record_id, parse_timestamp

KINDS = ("page", "claim", "relationship")
LIFECYCLES = ("active", "superseded", "withdrawn", "merged")
ASSERTION_ORIGINS = ("user", "source", "agent_inference")

Kind = Literal["page", "claim", "relationship"]

# Every key of the record format, in the order a record renders them; keys outside it are ``extra``.
CANONICAL_ORDER = (
    "format", "id", "revision", "kind", "title", "type", "recorded_at", "updated_at", "scope",
    "lifecycle", "claim_kind", "subject", "relation", "from", "to", "assertion_origin", "valid_from",
    "valid_to", "aliases", "tags", "dependencies", "replaces", "attribution", "fields", "evidence", "recall",
)
KNOWN_KEYS = frozenset(CANONICAL_ORDER) | {"fixture"}


class WrittenCitation(TypedDict):
    """A citation as the engine writes it into a record's ``evidence`` list."""

    source: str
    lines: NotRequired[list[int]]
    quote: NotRequired[str]


@dataclass(frozen=True)
class Citation:
    """One citation of retained evidence; ``source`` is None when the file names no descriptor id."""

    at: int                           # its place in the file's evidence list
    source: str | None
    lines: tuple[int, int] | None
    quote: str | None


@dataclass(frozen=True)
class Validity:
    """When a claim holds: from ``start`` (None: always before) until ``end`` inclusive (None: still).

    Both bounds are given as a date (``2026-03-01``) or a date-time with an offset
    (``2026-03-01T09:00:00Z``).  A date bound covers its whole UTC day: a claim valid to
    ``2026-03-31`` still holds at 23:59 that day.  One rule, written here, for every reader."""

    valid_from: str | None
    valid_to: str | None

    @property
    def start(self) -> datetime | None:
        return None if self.valid_from is None else validity_moment(self.valid_from)

    @property
    def end(self) -> datetime | None:
        """The last moment the claim holds (inclusive)."""
        if self.valid_to is None:
            return None
        moment = validity_moment(self.valid_to)
        if moment is not None and is_plain_date(self.valid_to):
            moment += timedelta(days=1) - timedelta(microseconds=1)
        return moment

    @property
    def bounded(self) -> bool:
        return self.valid_from is not None or self.valid_to is not None

    def holds_at(self, moment: datetime) -> bool:
        start, end = self.start, self.end
        return (start is None or start <= moment) and (end is None or moment <= end)

    def as_json(self) -> dict[str, str | None]:
        return {"validFrom": self.valid_from, "validTo": self.valid_to}


ALWAYS = Validity(None, None)


def is_plain_date(text: str) -> bool:
    return len(text) == 10 and text[4] == "-" and text[7] == "-"


def validity_moment(value: object) -> datetime | None:
    """A validity bound (a ``YYYY-MM-DD`` date, or an ISO-8601 date-time with an offset) as the UTC
    moment it starts; None when it is neither."""
    if not isinstance(value, str):
        return None
    if is_plain_date(value):
        try:
            return datetime.combine(date.fromisoformat(value), time(), tzinfo=timezone.utc)
        except ValueError:
            return None
    return parse_timestamp(value)


def validity_problem(valid_from: object, valid_to: object) -> tuple[str, str] | None:
    """(field, problem) when a claim's bounds are not dates or date-times, or end before they start."""
    for field, value in (("valid_from", valid_from), ("valid_to", valid_to)):
        if value is not None and validity_moment(value) is None:
            return field, f"{field} must be a date (YYYY-MM-DD) or an ISO-8601 date-time with an offset"
    interval = Validity(valid_from, valid_to)  # type: ignore[arg-type]  # both checked above
    if interval.start is not None and interval.end is not None and interval.start > interval.end:
        return "valid_to", "valid_to must not be before valid_from"
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _record_id(value: Any) -> str | None:
    return value if is_record_id(value) else None


def _one_of(value: Any, allowed: tuple[str, ...]) -> str | None:
    return value if isinstance(value, str) and value in allowed else None


def _texts(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None


def _mapping(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _citation(at: int, value: Any) -> Citation | None:
    if not isinstance(value, dict):
        return None
    lines = value.get("lines")
    if not (isinstance(lines, list) and len(lines) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in lines) and 1 <= lines[0] <= lines[1]):
        lines = None
    return Citation(at, _record_id(value.get("source")), None if lines is None else (lines[0], lines[1]),
                    _text(value.get("quote")) or None)


def _citations(value: Any) -> tuple[Citation, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(citation for citation in (_citation(at, item) for at, item in enumerate(value))
                 if citation is not None)


def _bound(value: Any) -> str | None:
    return value if validity_moment(value) is not None else None


@dataclass(frozen=True)
class RecordView:
    """A record's frontmatter, typed.  A field is None when the key is absent or its value has the wrong
    type; ``given`` tells the two apart."""

    raw: Mapping[str, Any]
    format: str | None
    id: str | None
    revision: int | None
    kind: Kind | None
    title: str | None
    type: str | None
    recorded_at: str | None
    updated_at: str | None
    scope: str | None
    lifecycle: str | None
    claim_kind: str | None
    subject: str | None
    relation: str | None
    from_id: str | None
    to_id: str | None
    assertion_origin: str | None
    valid_from: str | None            # a claim's validity: a date or a date-time with an offset
    valid_to: str | None
    aliases: tuple[str, ...] | None
    tags: tuple[str, ...] | None
    dependencies: tuple[str, ...] | None
    replaces: str | None
    attribution: dict[str, Any] | None
    fields: dict[str, Any] | None
    evidence: tuple[Citation, ...] | None
    recall: dict[str, Any] | None
    fixture: bool | None              # False when absent; None when it is not true or false
    extra: dict[str, Any]             # keys the record format does not define, in the file's order

    def given(self, key: str) -> bool:
        """Whether the file holds ``key`` with a value other than null."""
        return self.raw.get(key) is not None

    @property
    def is_fixture(self) -> bool:
        return self.fixture is True

    @property
    def validity(self) -> Validity:
        """A claim's interval; other kinds hold always (the keys are claims' only)."""
        if self.kind != "claim":
            return ALWAYS
        return Validity(self.valid_from, self.valid_to)

    def valid_at(self, moment: datetime) -> bool:
        return self.validity.holds_at(moment)

    @property
    def detail(self) -> str | None:
        """What kind of page, claim or relationship it is: a page's declared type, a claim's kind, a
        relationship's relation."""
        return {"page": self.type, "claim": self.claim_kind, "relationship": self.relation}.get(self.kind or "")


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


# Each key of the record format: the view field it fills and how its value is read (the wrong type: None).
_FIELDS: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    ("format", "format", _text), ("id", "id", _record_id), ("revision", "revision", _positive),
    ("kind", "kind", lambda value: _one_of(value, KINDS)), ("title", "title", _text), ("type", "type", _text),
    ("recorded_at", "recorded_at", _text), ("updated_at", "updated_at", _text), ("scope", "scope", _text),
    ("lifecycle", "lifecycle", lambda value: _one_of(value, LIFECYCLES)), ("claim_kind", "claim_kind", _text),
    ("subject", "subject", _record_id), ("relation", "relation", _text), ("from", "from_id", _record_id),
    ("to", "to_id", _record_id),
    ("assertion_origin", "assertion_origin", lambda value: _one_of(value, ASSERTION_ORIGINS)),
    ("valid_from", "valid_from", _bound), ("valid_to", "valid_to", _bound), ("aliases", "aliases", _texts),
    ("tags", "tags", _texts), ("dependencies", "dependencies", _texts), ("replaces", "replaces", _record_id),
    ("attribution", "attribution", _mapping), ("fields", "fields", _mapping), ("evidence", "evidence", _citations),
    ("recall", "recall", _mapping),
)


_READERS = {key: (field, read) for key, field, read in _FIELDS}
# The view of a mapping without any key of the format: what each reader makes of an absent key.
_ABSENT = {"raw": {}, **{field: read(None) for _, field, read in _FIELDS}, "fixture": _flag(False), "extra": {}}
_new = object.__new__


def view_of(frontmatter: Mapping[str, Any]) -> RecordView:
    """The typed view of one record's frontmatter; never raises, whatever the mapping holds.

    Only the keys the mapping gives are read (a record gives about half of the format's keys), and the view
    is filled in without the frozen dataclass's field-by-field ``__init__``, as ``catalog_reads.record_row``
    fills a row: a sync builds one view per file, and these were half of it.
    """
    values = dict(_ABSENT)
    values["raw"] = frontmatter
    extra: dict[str, Any] = {}
    for key, value in frontmatter.items():
        reader = _READERS.get(key)
        if reader is not None:
            values[reader[0]] = reader[1](value)
        elif key == "fixture":
            values["fixture"] = _flag(value)
        else:
            extra[key] = value
    values["extra"] = extra
    view = _new(RecordView)
    view.__dict__.update(values)
    return view


EMPTY = view_of({})
