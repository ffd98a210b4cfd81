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
from typing import Any, Literal, Mapping

from ..core.answers import NotRequired, TypedDict
from ..core.ids import is_record_id

KINDS = ("page", "claim", "relationship")
LIFECYCLES = ("active", "superseded", "withdrawn", "merged")
ASSERTION_ORIGINS = ("user", "source", "agent_inference")

Kind = Literal["page", "claim", "relationship"]

# Every key of the record format, in the order a record renders them; keys outside it are ``extra``.
CANONICAL_ORDER = (
    "format", "id", "revision", "kind", "title", "type", "recorded_at", "updated_at", "scope",
    "lifecycle", "claim_kind", "subject", "relation", "from", "to", "assertion_origin", "aliases",
    "tags", "dependencies", "replaces", "attribution", "fields", "evidence", "recall",
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
    def detail(self) -> str | None:
        """What kind of page, claim or relationship it is: a page's declared type, a claim's kind, a
        relationship's relation."""
        return {"page": self.type, "claim": self.claim_kind, "relationship": self.relation}.get(self.kind or "")


def view_of(frontmatter: Mapping[str, Any]) -> RecordView:
    """The typed view of one record's frontmatter; never raises, whatever the mapping holds."""
    get = frontmatter.get
    revision = get("revision")
    fixture = get("fixture", False)
    return RecordView(
        raw=frontmatter,
        format=_text(get("format")),
        id=_record_id(get("id")),
        revision=revision if isinstance(revision, int) and not isinstance(revision, bool) and revision >= 1
        else None,
        kind=_one_of(get("kind"), KINDS),
        title=_text(get("title")),
        type=_text(get("type")),
        recorded_at=_text(get("recorded_at")),
        updated_at=_text(get("updated_at")),
        scope=_text(get("scope")),
        lifecycle=_one_of(get("lifecycle"), LIFECYCLES),
        claim_kind=_text(get("claim_kind")),
        subject=_record_id(get("subject")),
        relation=_text(get("relation")),
        from_id=_record_id(get("from")),
        to_id=_record_id(get("to")),
        assertion_origin=_one_of(get("assertion_origin"), ASSERTION_ORIGINS),
        aliases=_texts(get("aliases")),
        tags=_texts(get("tags")),
        dependencies=_texts(get("dependencies")),
        replaces=_record_id(get("replaces")),
        attribution=_mapping(get("attribution")),
        fields=_mapping(get("fields")),
        evidence=_citations(get("evidence")),
        recall=_mapping(get("recall")),
        fixture=fixture if isinstance(fixture, bool) else None,
        extra={key: value for key, value in frontmatter.items() if key not in KNOWN_KEYS},
    )


EMPTY = view_of({})
