"""Knowledge records (``knowledge-record-v1``): pages, claims, relationships.

A record is one Markdown file: frontmatter plus body.  This module parses
and renders records and checks them against the envelope and the ontology.
It knows nothing of partitions on disk or of other records; cross-record
checks (duplicate ids, evidence sources, relationship endpoints) belong to
the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..core.answers import JsonObject
from ..core.errors import InvalidParams, LimitExceeded
from ..core.findings import Finding
from .frontmatter import parse_document, render_and_copy, render_document
from ..core.ids import canonical_session_id, is_record_id, parse_timestamp
from .ontology import Ontology
from .record_view import (  # noqa: F401 - the record format's vocabularies, named where records are
    ASSERTION_ORIGINS, CANONICAL_ORDER, KINDS, LIFECYCLES, RecordView, validity_problem, view_of,
)

RECORD_FORMAT = "knowledge-record-v1"
TITLE_MAX_CHARS = 500
RECALL_SUMMARY_MAX = 500
RECALL_LIST_MAX = 20
PRIVATE_SCOPE = "private"



def conversation_scope(session_id: str) -> str:
    return f"conversation:{session_id}"


def is_valid_scope(scope: object) -> bool:
    if scope == PRIVATE_SCOPE:
        return True
    if isinstance(scope, str) and scope.startswith("conversation:"):
        session = scope.removeprefix("conversation:")
        return canonical_session_id(session) == session
    return False


@dataclass
class Record:
    """A parsed record: the whole frontmatter (unknown keys included), its typed view, and the body."""

    frontmatter: dict[str, Any]
    body: str

    @cached_property
    def view(self) -> RecordView:
        return view_of(self.frontmatter)

    @property
    def id(self) -> str | None:
        return self.view.id

    @property
    def revision(self) -> int | None:
        return self.view.revision

    @property
    def kind(self) -> str | None:
        return self.view.kind

    @property
    def title(self) -> str | None:
        return self.view.title

    @property
    def scope(self) -> str | None:
        return self.view.scope

    @property
    def lifecycle(self) -> str | None:
        return self.view.lifecycle

    @property
    def is_fixture(self) -> bool:
        return self.view.is_fixture

    def ordered_frontmatter(self) -> JsonObject:
        ordered = {key: self.frontmatter[key] for key in CANONICAL_ORDER if key in self.frontmatter}
        ordered.update((key, value) for key, value in self.frontmatter.items() if key not in ordered)
        return ordered

    def render(self) -> bytes:
        return render_document(self.ordered_frontmatter(), self.body)

    def render_and_read(self) -> tuple[bytes, "Record | None"]:
        """``render``'s bytes and the record ``parse_record`` reads from them (None: parse them to know)."""
        data, read, _ = self.render_and_copy()
        return data, read

    def render_and_copy(self) -> tuple[bytes, "Record | None", bool]:
        """``render_and_read``, and whether the record read is a copy of this one (``frontmatter.render_and_copy``):
        then every check of this record holds of it, and its typed view is built once, for both."""
        data, read, copied = render_and_copy(self.ordered_frontmatter(), self.body)
        return data, Record(*read) if read is not None else None, copied

    def effective_type(self, ontology: Ontology, path: str) -> str | None:
        """A page's type: its ``type`` field, else classified by its path (never rewritten)."""
        return effective_type(self.view, ontology, path)


def effective_type(view: RecordView, ontology: Ontology, path: str) -> str | None:
    """A page's type: its declared ``type``, else classified by its path (never rewritten)."""
    if view.kind != "page":
        return None
    return view.type if view.type else ontology.classify(path)


def parse_record(data: bytes, path: str) -> tuple[Record | None, list[Finding]]:
    """Parse bytes into a Record; a document we cannot read becomes one finding."""
    try:
        frontmatter, body = parse_document(data)
    except (InvalidParams, LimitExceeded) as exc:
        code = "too_large" if isinstance(exc, LimitExceeded) else "syntax"
        return None, [Finding(code, exc.message, path=path, line=exc.details.get("line"))]
    return Record(frontmatter, body), []


def check_scope(record: Record, partition_scope: str) -> Finding | None:
    """A record whose scope is missing, invalid or not its partition's is withheld."""
    view = record.view
    if not view.given("scope"):
        return Finding("scope_missing", "record has no scope; withheld", field="scope")
    scope = view.raw["scope"]
    if not is_valid_scope(view.scope):
        return Finding("scope_invalid", f"scope {scope!r} is not valid; withheld", field="scope")
    if scope != partition_scope:
        return Finding(
            "scope_mismatch", f"scope {scope!r} does not match partition {partition_scope!r}; withheld",
            field="scope",
        )
    return None


def check_record(record: Record, ontology: Ontology, path: str) -> list[Finding]:
    """Envelope and ontology checks for one record on its own.

    The typed view decides what a value is: a key the file gives whose view field is None has the wrong
    type, and that is its finding here.  Only checks beyond the type (a title on one line, a claim kind
    the ontology knows) and messages that quote an item (evidence, recall) look at the file's values.
    """
    view = record.view
    findings: list[Finding] = []

    def problem(code: str, message: str, field: str | None = None, severity: str = "error") -> None:
        findings.append(Finding(code, message, severity=severity, path=path, field=field, record_id=view.id))

    def wrong_type(key: str) -> bool:
        return view.given(key) and getattr(view, _VIEW_FIELD.get(key, key)) is None

    if view.format != RECORD_FORMAT:
        problem("envelope", f"format must be {RECORD_FORMAT}", "format")
    if view.id is None:
        problem("envelope", "id must be a string of letters, digits, '_', '-' or '.'", "id")
    if view.revision is None:
        problem("envelope", "revision must be a positive integer", "revision")
    kind = view.kind
    if kind is None:
        problem("envelope", f"kind must be one of {list(KINDS)}", "kind")
    title = view.title
    if title is None or not title.strip() or "\n" in title or len(title) > TITLE_MAX_CHARS:
        problem("envelope", f"title must be one non-empty line of at most {TITLE_MAX_CHARS} characters", "title")
    for key in ("recorded_at", "updated_at"):
        if parse_timestamp(getattr(view, key)) is None:
            problem("envelope", f"{key} must be an ISO-8601 UTC timestamp", key)
    if view.lifecycle is None:
        problem("envelope", f"lifecycle must be one of {list(LIFECYCLES)}", "lifecycle")
    for key in ("aliases", "tags", "dependencies"):
        if wrong_type(key):
            problem("envelope", f"{key} must be a list of strings", key)
    if wrong_type("attribution"):
        problem("envelope", "attribution must be a mapping", "attribution")
    if view.fixture is None:
        problem("envelope", "fixture must be true or false", "fixture")

    if kind == "page":
        if wrong_type("type"):  # never silently re-classified
            problem("envelope", "type must be a page type name", "type")
        page_type = effective_type(view, ontology, path)
        for finding in ontology.check_fields(page_type, view.raw.get("fields")):
            problem(finding.code, finding.message, finding.field)
        if "evidence" in view.raw:
            _check_evidence(view.raw["evidence"], problem, required=False)
    elif kind == "claim":
        if view.claim_kind is None or view.claim_kind not in ontology.claim_kinds:
            problem("envelope", f"claim_kind must be one of {list(ontology.claim_kinds)}", "claim_kind")
        for key in ("subject", "replaces"):
            if wrong_type(key):
                problem("envelope", f"{key} must be a record id", key)
        _check_origin(view, problem)
        _check_evidence(view.raw.get("evidence"), problem, required=True)
        invalid = validity_problem(view.raw.get("valid_from"), view.raw.get("valid_to"))
        if invalid is not None:
            problem("validity", invalid[1], invalid[0])
    elif kind == "relationship":
        relation = view.relation
        if relation is None or relation not in ontology.relation_types:
            problem("unknown_relation", f"relation {view.raw.get('relation')!r} is not in the ontology", "relation")
        for end in ("from", "to"):
            if getattr(view, _VIEW_FIELD[end]) is None:
                problem("envelope", f"{end} must be a page id", end)
        _check_origin(view, problem)
        _check_evidence(view.raw.get("evidence"), problem, required=True)

    if kind != "claim":
        for key in ("valid_from", "valid_to"):
            if key in view.raw:
                problem("validity", f"{key} is for claims only", key)
    if "recall" in view.raw:
        _check_recall(view.raw["recall"], problem)
    return findings


# Frontmatter keys whose view field has another name (``from`` is a Python keyword).
_VIEW_FIELD = {"from": "from_id", "to": "to_id"}


def _check_origin(view: RecordView, problem) -> None:
    if view.assertion_origin is None:
        problem("envelope", f"assertion_origin must be one of {list(ASSERTION_ORIGINS)}", "assertion_origin")


def _check_evidence(evidence: Any, problem, *, required: bool) -> None:
    if evidence is None or evidence == []:
        if required:
            problem("evidence_missing", "claims and relationships must cite evidence", "evidence")
        return
    if not isinstance(evidence, list):
        problem("evidence", "evidence must be a list of citations", "evidence")
        return
    for index, citation in enumerate(evidence):
        where = f"evidence[{index}]"
        if not isinstance(citation, dict) or not is_record_id(citation.get("source")):
            problem("evidence", "each citation needs a source descriptor id", where)
            continue
        lines = citation.get("lines")
        if lines is not None and not _is_line_range(lines):
            problem("evidence", "lines must be [first, last] with 1 <= first <= last", f"{where}.lines")
        quote = citation.get("quote")
        if quote is not None and (not isinstance(quote, str) or not quote):
            problem("evidence", "quote must be a non-empty string", f"{where}.quote")


def _is_line_range(lines: Any) -> bool:
    return (
        isinstance(lines, list) and len(lines) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in lines)
        and 1 <= lines[0] <= lines[1]
    )


def check_recall_block(recall: Any) -> list[tuple[str, str]]:
    """(field, problem) pairs for an approved recall block; empty when it is valid."""
    if not isinstance(recall, dict):
        return [("recall", "recall must be a mapping")]
    problems = []
    summary = recall.get("summary")
    if not isinstance(summary, str) or not 1 <= len(summary.strip()) <= RECALL_SUMMARY_MAX:
        problems.append(("recall.summary", f"summary must be 1-{RECALL_SUMMARY_MAX} characters"))
    for key in ("triggers", "projects"):
        value = recall.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            problems.append((f"recall.{key}", f"{key} must be a list of non-empty strings"))
        elif len(value) > RECALL_LIST_MAX:
            problems.append((f"recall.{key}", f"at most {RECALL_LIST_MAX} {key}"))
    importance = recall.get("importance", 5)
    if isinstance(importance, bool) or not isinstance(importance, int) or not 1 <= importance <= 10:
        problems.append(("recall.importance", "importance must be an integer from 1 to 10"))
    if "approved_at" in recall and parse_timestamp(recall["approved_at"]) is None:
        problems.append(("recall.approved_at", "approved_at must be an ISO-8601 UTC timestamp"))
    return problems


def _check_recall(recall: Any, problem) -> None:
    for field, message in check_recall_block(recall):
        problem("recall", message, field)
