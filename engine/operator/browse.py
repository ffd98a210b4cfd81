"""Browsing one partition as an inspector does: paged lists, links, diffs, sources, approvals.

These are the reads the desktop's Records, Recall approvals and record pages
need beyond the agent tools.  Each runs on the store's lane through
``Engine.on_store`` (so the catalog is in step with the disk and authority
is checked before and after), reads only the catalog and the revision
archive, and pages everything: a partition may hold 100,000 records, and no
answer here grows with it.  The operator methods read the parameters
(``LIST_PARAMS`` and ``APPROVALS_PARAMS`` are declared here); ids and
revision numbers arrive already checked.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Callable, cast

from ..core.answers import JsonObject, JsonValue, NotRequired, TypedDict
from ..core.errors import KnowledgeError, NotFound
from ..vault.evidence import SOURCES_DIR
from ..core.files import read_file, sha256_bytes
from ..core.ids import is_record_id
from ..core.params import Choice, Integer, Name, Params
from ..search.keyword import KINDS_FILTER, refuse_kind_and_kinds
from ..store.catalog_reads import RecordRow, RevisionRow, version_label
from ..store.reads import evidence_locators
from ..store.summaries import RecordSummary, record_summary
from ..vault.record_view import RecordView
from ..vault.records import TITLE_MAX_CHARS
from ..memory.recall import APPROVED_BY, approved_block
from .revisions import FieldChange, structured_diff

if TYPE_CHECKING:  # the engine calls in here; this module only needs its types
    from ..access.authority import Authority, Caller, StoreEntry
    from ..store.open_store import OpenStore

    BrowseEngine = StoreEntry[OpenStore]  # all browsing needs of the engine: the way into a store

KINDS = ("page", "claim", "relationship")
ORDERS = ("updated", "title")
STATUSES = ("current", "all")
LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX = 100, 500
OFFSET_MAX = 10_000_000
TYPE_MAX_CHARS = 200
LINKS_MAX = 500
DIFF_MAX_LINES = 20_000
SOURCE_TEXT_MAX_BYTES = 1_000_000
APPROVALS_LIMIT_DEFAULT, APPROVALS_LIMIT_MAX = 100, 500


# --- answers ------------------------------------------------------------------------------------
# Values copied from a record's frontmatter as the file holds them (an invalid record's may be any JSON)
# are JsonValue; the rest comes from the catalog's typed columns.


class ListedRecord(RecordSummary):
    """A catalog row as lists show it: the record summary, then its state and times."""

    status: str
    lifecycle: str | None
    recordedAt: str | None
    updatedAt: str | None


class RecordPage(TypedDict):
    records: list[ListedRecord]
    total: int
    offset: int
    nextOffset: NotRequired[int]


class TypeCount(TypedDict):
    kind: str | None
    type: str | None
    count: int


class RecordTypes(TypedDict):
    types: list[TypeCount]


class Brief(TypedDict):
    """A record another one names: its title, kind and type when exactly one file holds the id; else
    ``status`` says ``missing`` or ``duplicate`` (``id`` is null when the name is not a string)."""

    id: str | None
    title: str | None
    kind: NotRequired[str | None]
    type: NotRequired[str | None]
    status: NotRequired[str]


class Reference(TypedDict):
    field: str
    record: Brief


class ClaimAbout(ListedRecord):
    claimKind: JsonValue
    assertionOrigin: JsonValue
    evidence: list[JsonObject]


class Connection(TypedDict):
    relation: JsonValue
    direction: str
    via: ListedRecord
    record: Brief


class Backlink(ListedRecord):
    fields: list[str]


class RecordLinks(TypedDict):
    id: str
    evidence: list[JsonObject]
    references: list[Reference]
    claims: list[ClaimAbout]
    connections: list[Connection]
    backlinks: list[Backlink]
    truncated: bool


# "from" is a Python keyword, so this answer is declared in the functional form.
# ``diff`` is the files' exact diff; ``fields`` and ``bodyDiff`` say the same as an owner reads it, where both
# files are records (``readable``): see revisions.py.
RevisionDiff = TypedDict("RevisionDiff", {
    "id": str, "from": int, "to": int, "fromSha256": str, "toSha256": str, "diff": str, "truncated": bool,
    "readable": bool, "fields": list[FieldChange], "bodyDiff": str, "bodyTruncated": bool})


class RetainedSource(TypedDict):
    """A retained original; ``text`` when it is UTF-8 and small enough, else ``problem`` says why not."""

    id: str
    retainedPath: str | None
    mediaType: str | None
    size: int | None
    sha256: str | None
    filename: JsonValue
    origin: JsonValue
    recordedAt: JsonValue
    absolutePath: str
    text: str | None
    verified: NotRequired[bool]
    problem: NotRequired[str]


class Approval(ListedRecord):
    """A current record's approved recall block (the vault checks a current record's block)."""

    summary: str
    triggers: list[str]
    importance: int
    projects: list[str]
    approvedBy: str
    approvedAt: str


class Approvals(TypedDict):
    approvals: list[Approval]
    total: int
    offset: int
    nextOffset: NotRequired[int]


def listed_record(row: RecordRow) -> ListedRecord:
    return {**record_summary(row), "status": row.status, "lifecycle": row.lifecycle,
            "recordedAt": row.recorded_at, "updatedAt": row.updated_at}


# --- Recent and Browse ------------------------------------------------------------------------


LIST_PARAMS = Params(
    Choice("kind", KINDS),
    KINDS_FILTER,
    Name("type", TYPE_MAX_CHARS),
    Name("tag", TITLE_MAX_CHARS),
    Choice("status", STATUSES, default="current"),
    Choice("order", ORDERS, default="updated"),
    Integer("offset", 0, OFFSET_MAX, default=0),
    Integer("limit", 1, LIST_LIMIT_MAX, default=LIST_LIMIT_DEFAULT),
)
APPROVALS_PARAMS = Params(Integer("offset", 0, OFFSET_MAX, default=0),
                          Integer("limit", 1, APPROVALS_LIMIT_MAX, default=APPROVALS_LIMIT_DEFAULT))


class ListRequest(TypedDict):
    kind: str | None
    kinds: tuple[str, ...] | None
    type: str | None
    tag: str | None
    status: str
    order: str
    offset: int
    limit: int


def parse_list_request(params: dict[str, Any]) -> ListRequest:
    """``{kind?, kinds?, type?, tag?, status?, order?, offset?, limit?}``, checked once at the edge."""
    request = cast(ListRequest, LIST_PARAMS.read(params))
    refuse_kind_and_kinds(request["kind"], request["kinds"])
    return request



def list_records(engine: "BrowseEngine", caller: "Caller", params: dict[str, Any]) -> RecordPage:
    """A page of the caller's records, newest first (``order: updated``) or by title; ``tag``: those tagged so
    or with a tag nested in it (``catalog.listing``).

    ``{records: [...], total, offset, nextOffset?}``; ``total`` counts every
    record the filters match, so a list can size itself without loading them.
    """
    request = parse_list_request(params)

    def work(runtime: "OpenStore", authority: "Authority") -> RecordPage:
        kinds = request["kinds"] or ((request["kind"],) if request["kind"] else None)
        total, rows = runtime.catalog.listing(
            authority.partition, current_only=request["status"] == "current", kinds=kinds, type=request["type"],
            tag=request["tag"], order=request["order"], offset=request["offset"], limit=request["limit"])
        result: RecordPage = {"records": [listed_record(row) for row in rows], "total": total,
                                  "offset": request["offset"]}
        if request["offset"] + len(rows) < total:
            result["nextOffset"] = request["offset"] + len(rows)
        return result

    return engine.on_store(caller, work)


def record_types(engine: "BrowseEngine", caller: "Caller") -> RecordTypes:
    """How many current records each (kind, type) holds: the Browse list's headings."""

    def work(runtime: "OpenStore", authority: "Authority") -> RecordTypes:
        counts = runtime.catalog.current_counts(authority.partition)
        return {"types": [{"kind": kind, "type": record_type, "count": count}
                          for (kind, record_type), count in counts.items()]}

    return engine.on_store(caller, work)


# --- a record's links -------------------------------------------------------------------------


def record_links(engine: "BrowseEngine", caller: "Caller", record_id: str) -> RecordLinks:
    """What a record page shows around the record itself.

    ``evidence``: where the record's citations are kept; ``references``: the
    records it names (subject, endpoints, replaces, dependencies);
    ``claims``: claims about it, each with its evidence; ``connections``:
    typed relationships in and out; ``backlinks``: every other record that
    names it.  At most 500 referring records are read (``truncated``).
    """
    def work(runtime: "OpenStore", authority: "Authority") -> RecordLinks:
        catalog, partition = runtime.catalog, authority.partition
        own = catalog.rows_for_id(partition, record_id)
        if not own:
            raise NotFound("no record with that id in this partition", id=record_id)
        view = own[0].view
        referring = catalog.mentioning(partition, record_id, LINKS_MAX + 1)
        claims: list[ClaimAbout] = []
        linked: list[tuple[Any, str, Any, Any]] = []  # each relationship: relation, direction, via, far end's id
        backlinks: list[Backlink] = []
        for row in referring[:LINKS_MAX]:
            other = row.view
            fields = _naming_fields(other, record_id)
            if not fields:  # the id only appears inside text, which is not a link
                continue
            summary = listed_record(row)
            if row.kind == "claim" and "subject" in fields:
                claims.append({**summary, "claimKind": other.claim_kind, "assertionOrigin": other.assertion_origin,
                               "evidence": evidence_locators(catalog, partition, other.evidence or ())})
            elif row.kind == "relationship" and fields & {"from", "to"}:
                outgoing = "from" in fields
                linked.append((other.relation, "out" if outgoing else "in", summary,
                               other.to_id if outgoing else other.from_id))
            else:
                backlinks.append({**summary, "fields": sorted(fields)})
        named = _named_ids(view)
        brief = _briefs(catalog, partition, [far for *_, far in linked] + [target for _, target in named])
        connections: list[Connection] = [{"relation": relation, "direction": direction, "via": via,
                                          "record": brief(far)} for relation, direction, via, far in linked]
        references: list[Reference] = [{"field": field, "record": brief(target)} for field, target in named]
        # A typed field's value is a reference only when it names a record (a location may be any word).
        references = [ref for ref in references
                      if not ref["field"].startswith("fields.") or ref["record"].get("status") != "missing"]
        return {"id": record_id, "evidence": evidence_locators(catalog, partition, view.evidence or ()),
                "references": references, "claims": claims, "connections": connections, "backlinks": backlinks,
                "truncated": len(referring) > LINKS_MAX}

    return engine.on_store(caller, work)


def _named_ids(view: RecordView) -> list[tuple[str, str]]:
    """(field, record id) for every record the frontmatter names."""
    named = [(key, target) for key, target in (("subject", view.subject), ("from", view.from_id),
                                               ("to", view.to_id), ("replaces", view.replaces))
             if target is not None]
    named += [("dependencies", value) for value in view.dependencies or () if is_record_id(value)]
    if view.fields is not None:
        for name, value in view.fields.items():
            for item in value if isinstance(value, list) else [value]:
                if is_record_id(item):
                    named.append((f"fields.{name}", item))
    return named


def _naming_fields(view: RecordView, record_id: str) -> set[str]:
    return {field.split(".")[0] if field.startswith("fields.") else field
            for field, target in _named_ids(view) if target == record_id}


def _briefs(catalog: Any, partition: str, record_ids: list[Any]) -> Callable[[Any], Brief]:
    """The title, kind, type and status of each record ``record_ids`` names, read at once (a hub note's 500
    links are one query, not 500): ``brief(id)`` of any of them."""
    rows = catalog.rows_for_ids(partition, [value for value in record_ids if isinstance(value, str)])

    def brief(record_id: Any) -> Brief:
        if not isinstance(record_id, str):
            return {"id": None, "title": None}
        found = rows[record_id]
        if len(found) != 1:
            return {"id": record_id, "title": None, "status": "missing" if not found else "duplicate"}
        return {"id": record_id, "title": found[0].title, "kind": found[0].kind, "type": found[0].type,
                "status": found[0].status}

    return brief


# --- revisions --------------------------------------------------------------------------------


KeptVersion = tuple[int, str | None]  # a revision number and, to name one of the versions kept with it, a sha256


def revision_diff(engine: "BrowseEngine", caller: "Caller", record_id: str, old: KeptVersion,
                  new: KeptVersion) -> RevisionDiff:
    """A unified diff between two kept versions of a record, over their exact file bytes; a number without a
    sha256 is its newest version (an edit outside the engine keeps the number)."""
    def kept(runtime: "OpenStore", partition: str, version: KeptVersion) -> RevisionRow:
        row = runtime.catalog.revision(partition, record_id, *version)
        if row is None:
            raise NotFound("no such revision of that record in this partition", id=record_id, revision=version[0])
        return row

    def work(runtime: "OpenStore", authority: "Authority") -> RevisionDiff:
        before = kept(runtime, authority.partition, old)
        after = kept(runtime, authority.partition, new)
        versions = runtime.catalog.revisions(authority.partition, record_id)
        old_label, new_label = version_label(versions, before), version_label(versions, after)
        lines = list(difflib.unified_diff(before.content.decode("utf-8", errors="replace").splitlines(),
                                          after.content.decode("utf-8", errors="replace").splitlines(),
                                          f"revision {old_label}", f"revision {new_label}", lineterm=""))
        return cast(RevisionDiff, {
            "id": record_id, "from": old[0], "to": new[0], "fromSha256": before.sha256, "toSha256": after.sha256,
            "diff": "\n".join(lines[:DIFF_MAX_LINES]), "truncated": len(lines) > DIFF_MAX_LINES,
            **structured_diff(before, after, (old_label, new_label), DIFF_MAX_LINES)})

    return engine.on_store(caller, work)


# --- retained originals -----------------------------------------------------------------------


def read_source(engine: "BrowseEngine", caller: "Caller", source_id: str) -> RetainedSource:
    """A retained original: its descriptor, whether it still matches its sha256, and its text.

    Text is returned for originals up to 1,000,000 bytes that decode as
    UTF-8; ``absolutePath`` lets the owner open the file with another program.
    """
    def work(runtime: "OpenStore", authority: "Authority") -> RetainedSource:
        row = runtime.catalog.source(authority.partition, source_id)
        if row is None:
            raise NotFound("no retained source with that id in this partition", source=source_id)
        root = runtime.store.partition_root(authority.partition)
        descriptor = row.descriptor
        result: RetainedSource = {
            "id": source_id, "retainedPath": row.retained_path, "mediaType": row.media_type,
            "size": row.size, "sha256": row.sha256, "filename": descriptor.get("filename"),
            "origin": descriptor.get("origin"), "recordedAt": descriptor.get("recorded_at"),
            "absolutePath": str(root / row.retained_path), "text": None,
        }
        if not str(row.retained_path).startswith(f"{SOURCES_DIR}/"):
            raise NotFound("the source's retained path is outside sources/", source=source_id)
        if (row.size or 0) > SOURCE_TEXT_MAX_BYTES:
            result["problem"] = f"larger than {SOURCE_TEXT_MAX_BYTES:,} bytes; open it with another program"
            return result
        try:
            data, _ = read_file(root, row.retained_path, max_bytes=SOURCE_TEXT_MAX_BYTES)
        except KnowledgeError as exc:
            result["problem"] = exc.message
            return result
        result["verified"] = sha256_bytes(data) == row.sha256
        try:
            result["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            result["problem"] = "not UTF-8 text; open it with another program"
        return result

    return engine.on_store(caller, work)


# --- recall approvals -------------------------------------------------------------------------


def approvals(engine: "BrowseEngine", caller: "Caller", params: dict[str, Any]) -> Approvals:
    """Every approved recall block of the partition's current records, most important first.

    Read-only: approving belongs to the owner's conversation with the agent
    (``knowledge_recall``).  ``{approvals: [...], total, offset, nextOffset?}``.
    """
    window = APPROVALS_PARAMS.read(params)
    offset, limit = window["offset"], window["limit"]

    def work(runtime: "OpenStore", authority: "Authority") -> Approvals:
        found: list[Approval] = []
        for row in runtime.catalog.current(authority.partition, with_recall=True):
            block = approved_block(row.view)
            if block is None:
                continue
            found.append({**listed_record(row), "summary": block["summary"], "triggers": block["triggers"],
                          "importance": block["importance"], "projects": block["projects"],
                          "approvedBy": APPROVED_BY,  # approved_block answers only the service's blocks
                          "approvedAt": block["approved_at"]})
        found.sort(key=lambda item: (-item["importance"], item["id"]))
        window = found[offset:offset + limit]
        result: Approvals = {"approvals": window, "total": len(found), "offset": offset}
        if offset + len(window) < len(found):
            result["nextOffset"] = offset + len(window)
        return result

    return engine.on_store(caller, work)
