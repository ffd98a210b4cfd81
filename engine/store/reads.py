"""Exact reads, history and diagnostics of one partition (beside the store's lane where they can be).

Exact reads re-read the file, so an edit made outside the engine is seen
(and recorded in the history) by the very next read.  Historical, withdrawn,
invalid and fixture records stay reachable here; only withheld records
(scope missing or not this partition's) are never served.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .catalog import Catalog
from .catalog_reads import CatalogReads, RecordRow
from .answers import Diagnostics, EvidenceLocator, GitSummary, RecordHistory, RecordRead, ReferenceRead, Revision
from .summaries import PROVIDER, Reference, record_summary, reference
from ..core.errors import ForeignReference, InvalidParams, KnowledgeError, NotFound, StaleRevision
from ..core.files import read_file, sha256_bytes
from ..core.findings import truncated
from ..vault.evidence import displayable_filename
from ..vault.frontmatter import RECORD_MAX_BYTES
from ..core.params import Integer, Params, Query, RecordId, Value
from ..core.ids import utc_now
from ..vault.record_view import EMPTY, Citation, RecordView, validity_moment
from ..vault.records import TITLE_MAX_CHARS, parse_record
from .open_store import NeedsLane
from .store import Store

READ_LINES_DEFAULT, READ_LINES_MAX = 100, 200
EVIDENCE_LOCATORS_MAX = 20


def _view(data: bytes, path: str, *, status: str, findings: list[dict[str, Any]],
          moment: datetime | None = None) -> RecordRead:
    record, parse_findings = parse_record(data, path)
    digest = sha256_bytes(data)
    if record is None:
        return {"sha256": digest, "status": status, "path": path,
                "findings": [f.to_dict() for f in parse_findings]}
    summary = record_summary(record.view)
    read: RecordRead = {
        "sha256": digest, "status": status, "path": path, "id": summary["id"], "revision": summary["revision"],
        "kind": summary["kind"], "title": summary["title"], "frontmatter": record.frontmatter, "body": record.body,
        "findings": findings,
    }
    validity = record.view.validity
    if validity.bounded:  # a claim with validFrom or validTo says whether it holds at the moment asked
        read["validity"] = {**validity.as_json(), "holds": validity.holds_at(moment or utc_now())}
    return read


@dataclass(frozen=True)
class RecordFile:
    """One kept revision of a record as a file: its exact bytes, where it lies, its revision and status
    (``current``, or why it is not; ``historical`` for an earlier revision)."""

    content: bytes
    path: str
    revision: int | None
    status: str
    findings: list[dict[str, Any]]


def get_record(store: Store, catalog: CatalogReads, partition: str, record_id: str,
               revision: int | None = None, moment: datetime | None = None) -> RecordRead:
    found = record_file(store, catalog, partition, record_id, revision)
    return _view(found.content, found.path, status=found.status, findings=found.findings, moment=moment)


def record_file(store: Store, catalog: CatalogReads, partition: str, record_id: str,
                revision: int | None = None, *, fields: tuple[str, str] = ("id", "revision")) -> RecordFile:
    """The newest file of ``record_id`` (re-read, so an edit outside the engine is seen), or its kept
    ``revision``; NotFound for a withheld, unknown or duplicated id, naming the parameter that gave the id or
    the revision (``fields``)."""
    id_field, revision_field = fields
    rows = catalog.rows_for_id(partition, record_id)
    if len(rows) > 1:
        raise NotFound("that id is used by more than one file; exact lookups return none", field=id_field,
                       id=record_id, duplicate=True)
    if revision is None:
        if not rows:
            raise NotFound("no record with that id in this partition", field=id_field, id=record_id)
        row = fresh_row(store, catalog, partition, rows[0])
        if row is None or row.record_id != record_id or row.file_status == "withheld":
            raise NotFound("no record with that id in this partition", field=id_field, id=record_id)
        return RecordFile(_bytes_of(store, catalog, partition, row), row.path, row.revision, row.status,
                          row.findings)
    stored = catalog.revision(partition, record_id, revision)
    if stored is None:
        raise NotFound("no such revision of that record in this partition", field=revision_field, id=record_id,
                       revision=revision)
    current = rows[0] if rows else None
    is_current = current is not None and current.revision == revision and current.sha256 == stored.sha256
    status = current.status if current is not None and is_current else "historical"
    return RecordFile(stored.content, stored.path, revision, status, [])


def fresh_row(store: Store, catalog: CatalogReads, partition: str, row: RecordRow) -> RecordRow | None:
    """Re-read a record's file; if it changed on disk, catalog the change first (on the lane: a read beside
    it, whose catalog is a snapshot, is done again there)."""
    try:
        data, _ = read_file(store.partition_root(partition), row.path, max_bytes=RECORD_MAX_BYTES)
    except KnowledgeError:
        data = None
    if data is None or sha256_bytes(data) != row.sha256:
        if not isinstance(catalog, Catalog):
            raise NeedsLane()
        catalog.sync(partition, [row.path], force=True)
        return catalog.row_at(partition, row.path)
    return row


def _bytes_of(store: Store, catalog: CatalogReads, partition: str, row: RecordRow) -> bytes:
    """The file of ``row`` read again; beside the lane, bytes other than the row's (a publication installed
    since the snapshot, not yet acknowledged perhaps) send the read to the lane."""
    data, _ = read_file(store.partition_root(partition), row.path, max_bytes=RECORD_MAX_BYTES)
    if not isinstance(catalog, Catalog) and sha256_bytes(data) != row.sha256:
        raise NeedsLane()
    return data


def history(catalog: CatalogReads, partition: str, record_id: str) -> RecordHistory:
    """Every revision kept of a record, who wrote it, and edits seen outside the engine."""
    revisions = catalog.revisions(partition, record_id)
    if not revisions and not catalog.rows_for_id(partition, record_id):
        raise NotFound("no record with that id in this partition", field="id", id=record_id)
    entries: list[Revision] = []
    for row in revisions:
        record, _ = parse_record(row.content, row.path)
        view = record.view if record is not None else EMPTY
        entries.append({
            "revision": row.revision, "sha256": row.sha256, "origin": row.origin,
            "publicationId": row.publication_id, "observedAt": row.observed_at,
            "updatedAt": view.updated_at, "lifecycle": view.lifecycle, "title": view.title,
            "attribution": view.attribution, "git": {"commit": row.commit_id} if row.commit_id else None,
        })
    return {"id": record_id, "revisions": entries, "events": catalog.events(partition, record_id)}


def diagnostics(store: Store, catalog: Catalog, partition: str, *, git: GitSummary) -> Diagnostics:
    """Scoped validation: the partition's files, its ontology, and its publications' state (journal, git)."""
    ontology = store.ontology(partition)
    findings = [f.to_dict() for f in ontology.findings] + catalog.findings(partition)
    findings += catalog.verify_sources(partition)
    return {
        **truncated(findings),
        "files": catalog.file_counts(partition),
        "ontology": {"sources": list(ontology.sources)},
        "pendingPublications": len(store.pending_publications(partition)),
        "git": git,
    }



# --- reads by reference (the shared memory read contract) -----------------------------------


def parse_reference(value: Any, field: str = "ref") -> Reference:
    if not isinstance(value, dict) or value.get("provider") != PROVIDER:
        raise InvalidParams("ref must be a Knowledge reference from a search hit", field=field)
    revision = value.get("revision")
    if (not isinstance(value.get("store"), str) or not isinstance(value.get("id"), str)
            or isinstance(revision, bool) or not isinstance(revision, int)
            or not isinstance(value.get("sha256"), str)):
        raise InvalidParams("ref needs store, id, revision and sha256", field=field)
    return value


def parse_as_of(value: Any, field: str = "asOf") -> datetime:
    """The moment a read, search or lookup answers as of: a date (its start, UTC) or a date-time with an
    offset.  A moment this reader already gave (a tool's parameters, handed on to the engine) is kept."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value
    moment = validity_moment(value)
    if moment is None:
        raise InvalidParams("asOf must be a date (YYYY-MM-DD) or an ISO-8601 date-time with an offset",
                            field=field)
    return moment


def as_of(values: dict[str, Any]) -> datetime:
    """A request's ``asOf``: the moment it names, else now."""
    return values["asOf"] if values.get("asOf") is not None else utc_now()


# Reads, searches and lookups leave out claims that do not hold at this moment (docs/record-format.md).
AS_OF = Value("asOf", parse_as_of,
              json={"type": "string", "description": "Answer as of this date or date-time (default: now); "
                    "claims that do not hold then are left out"})
# ``memory/read``: lines of the exact revision a search hit's reference names.
READ_PARAMS = Params(
    Value("ref", parse_reference, required=True),
    Integer("from", 1, default=1),
    Integer("lines", 1, READ_LINES_MAX, default=READ_LINES_DEFAULT),
    AS_OF,
)
# The exact read of a record (``knowledge_record``, ``operator/record``) and the history of one.
RECORD_ID = RecordId("id", required=True, description="A record id, e.g. pg_01J...")
REVISION = Integer("revision", 1, description="An exact earlier revision (default: the current one)")
RECORD_PARAMS = Params(RECORD_ID, REVISION, AS_OF)
HISTORY_PARAMS = Params(RECORD_ID)
# ``knowledge_lookup``: a name is compared with ids, titles and aliases, so none longer than a title resolves.
LOOKUP_PARAMS = Params(Query("name", max_chars=TITLE_MAX_CHARS, required=True,
                             description="A record id, or a title or alias (case, spacing and how accents are composed do not matter)"),
                       AS_OF)


def read_reference(store: Store, catalog: CatalogReads, partition: str, ref: Reference,
                   start: int, count: int, moment: datetime | None = None) -> ReferenceRead:
    """Lines of the exact current revision a reference names; a changed revision is refused."""
    if ref["store"] != store.store_id:
        raise ForeignReference("the reference belongs to another store", field="ref")
    rows = catalog.rows_for_id(partition, ref["id"])
    if len(rows) != 1:
        raise NotFound("no active record with that id in this partition", field="ref", id=ref["id"])
    row = fresh_row(store, catalog, partition, rows[0])
    if row is None or row.record_id != ref["id"] or not row.is_current:
        raise NotFound("no active record with that id in this partition; historical, withdrawn and invalid "
                       "records are read with the exact and history reads", field="ref", id=ref["id"])
    if row.revision != ref["revision"] or row.sha256 != ref["sha256"]:
        raise StaleRevision("the record changed since it was referenced; search again", field="ref", id=ref["id"],
                            revision=row.revision, sha256=row.sha256)
    if not row.view.valid_at(moment or utc_now()):
        raise NotFound("the claim does not hold at that time (see its validFrom and validTo); the exact read "
                       "shows it", id=ref["id"], **row.view.validity.as_json())
    data = _bytes_of(store, catalog, partition, row)
    record, _ = parse_record(data, row.path)
    assert record is not None  # a current row parsed when it was cataloged, and the bytes are the same
    lines = render_lines(record.view, record.body)
    window = lines[start - 1:start - 1 + count]
    evidence = evidence_locators(catalog, partition, record.view.evidence or ())
    return {
        "ref": reference(store.store_id, row), "title": row.title, "kind": row.kind,
        "from": start, "lines": len(window), "totalLines": len(lines),
        "truncated": start - 1 + count < len(lines), "text": "\n".join(window),
        "evidence": evidence[:EVIDENCE_LOCATORS_MAX], "evidenceTruncated": len(evidence) > EVIDENCE_LOCATORS_MAX,
    }


def render_lines(view: RecordView, body: str) -> list[str]:
    """The rendered record reads address: title, attribution, then the body."""
    # Formatted, never concatenated: the view's fields are text or None whatever the file holds.
    attribution = view.attribution or {}
    who = f"{attribution.get('agent', 'unknown')}"
    if attribution.get("instance"):
        who += f" ({attribution['instance']})"
    kind = view.kind or "record"
    detail = view.type or view.claim_kind or view.relation
    described = f"{kind}, {detail}" if detail else f"{kind}"
    origin = view.assertion_origin
    header = (f"{described}; revision {view.revision}; recorded by {who}"
              f"{f'; said by the {origin}' if origin else ''}; updated {view.updated_at}")
    return [f"# {view.title or ''}", header, ""] + body.splitlines()


def evidence_locators(catalog: CatalogReads, partition: str, citations: tuple[Citation, ...]) -> list[EvidenceLocator]:
    """Where each cited piece of evidence is kept, for the native tools to open."""
    locators: list[EvidenceLocator] = []
    for citation in citations:
        source = catalog.source(partition, citation.source) if citation.source is not None else None
        locator: EvidenceLocator = {"source": citation.source}
        if citation.lines is not None:
            locator["lines"] = list(citation.lines)
        if citation.quote is not None:
            locator["quote"] = citation.quote
        if source is not None:
            locator["retainedPath"] = source.retained_path
            if (filename := displayable_filename(source.descriptor.get("filename"))) is not None:
                locator["filename"] = filename
            locator.update(mediaType=source.media_type, sha256=source.sha256, size=source.size)
        locators.append(locator)
    return locators
