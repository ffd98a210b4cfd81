"""Turning validated write requests into publication plans.

Runs on the store's lane, after the catalog has caught up with the disk.
Every file a plan writes is rendered and checked here, against the envelope,
the ontology and the partition's other records, so a plan that reaches the
publisher is whole and valid.
"""

from __future__ import annotations

import re
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable

from .catalog import Catalog, reference_findings
from .groups import PlanReads
from .catalog_reads import RecordRow, record_name_keys
from ..vault.record_view import RecordView, Validity, WrittenCitation, validity_moment
from ..core.errors import Conflict, InvalidParams, KnowledgeError, NotFound, RecordInvalid, StaleRevision
from ..vault.evidence import describe_source, excerpt_line_count
from ..core.files import read_file, sha256_bytes
from ..core.findings import has_errors
from ..vault.frontmatter import RECORD_MAX_BYTES
from ..core.ids import CLAIM_PREFIX, PAGE_PREFIX, RELATIONSHIP_PREFIX, SOURCE_PREFIX, new_id
from .answers import SourceSummary
from .attachments import FileInput
from .inputs import ClaimItem, EvidenceInput, PageInput, RelationshipItem, RememberInput
from ..vault.ontology import Ontology
from .publication import FileWrite, Plan
from ..vault.records import RECORD_FORMAT, TITLE_MAX_CHARS, Record, check_record, parse_record
from .store import Store

QUOTE_MAX_CHARS = 500  # longer excerpts are cited by line range only, not copied into frontmatter
CITED_SOURCE_MAX_BYTES = 64 * 1024 * 1024  # line ranges and quotes are checked against sources up to this size
CATCH_UP_ATTEMPTS = 3  # re-reads of a record that changes on disk while a revision of it is planned
SOURCE_LINES_KEPT = 4  # cited sources whose lines ``SourceLines`` keeps between plans


class SourceLines:
    """The lines of the sources plans cited last, kept between plans (on the store's lane only).

    An import's pages cite their transcripts file a hundred to a file (engine/importers/conversations.py);
    reading and splitting it again for each page was a sixth of the lane's time in a bulk import.  Kept by
    the sha256 the catalog holds, and only when the bytes read have it: an edit the catalog has not seen
    is read afresh, as before.
    """

    def __init__(self, kept: int = SOURCE_LINES_KEPT) -> None:
        self._kept: OrderedDict[tuple[str, str, str], list[str]] = OrderedDict()
        self._size = kept

    def get(self, key: tuple[str, str, str]) -> list[str] | None:
        lines = self._kept.get(key)
        if lines is not None:
            self._kept.move_to_end(key)
        return lines

    def keep(self, key: tuple[str, str, str], lines: list[str]) -> None:
        self._kept[key] = lines
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)


@dataclass
class WriteContext:
    store: Store
    catalog: Catalog | PlanReads
    partition: str
    agent: str
    attribution: dict[str, Any]
    now: str
    source_lines: SourceLines | None = None  # the lane's, kept between plans

    @cached_property
    def ontology(self) -> Ontology:
        """The partition's ontology as the plan first asks for it: one plan is checked against one ontology, and
        the store's check of its file (a stat) is made once a plan, not twice a record."""
        return self.store.ontology(self.partition)


class _PlanBuilder:
    """Collects the files of one publication and checks each record as it is added."""

    def __init__(self, ctx: WriteContext) -> None:
        self.ctx = ctx
        self.writes: list[FileWrite] = []
        self.sources_by_text: dict[str, str] = {}
        self.new_sources: set[str] = set()  # the sources this publication retains
        self.retained: list[SourceSummary] = []  # of those, the files a page's citations sent
        self.new_pages: dict[str, str] = {}
        self.taken_paths: set[str] = set()
        self.names: set[str] = set()
        self._source_lines: dict[str, list[str]] = {}

    def retain_excerpt(self, text: str) -> WrittenCitation:
        """Keep supporting text as a source file; returns the citation for it."""
        source_id = self.sources_by_text.get(text)
        if source_id is None:
            source_id = self._retain(text.encode("utf-8"), "text/plain", None)["id"]
            self.sources_by_text[text] = source_id
        citation: WrittenCitation = {"source": source_id, "lines": [1, excerpt_line_count(text)]}
        if len(text) <= QUOTE_MAX_CHARS:
            citation["quote"] = text
        return citation

    def _retain(self, data: bytes, media_type: str, filename: str | None) -> SourceSummary:
        """A new source of this publication: the file and its descriptor."""
        source_id = new_id(SOURCE_PREFIX)
        descriptor = describe_source(source_id, data, media_type=media_type, origin=self.ctx.attribution,
                                     recorded_at=self.ctx.now, filename=filename)
        self.writes.append(FileWrite(descriptor.retained_path, "source", data))
        self.writes.append(FileWrite(descriptor.descriptor_path, "descriptor", descriptor.render()))
        self.new_sources.add(source_id)
        return {"id": source_id, "sha256": descriptor.sha256, "size": descriptor.size, "mediaType": media_type,
                "filename": filename, "retainedPath": descriptor.retained_path}

    def citation(self, evidence: EvidenceInput | FileInput, at: str) -> WrittenCitation:
        """The citation as written; ``at`` is where the call gave it (``items[0].evidence[1]``), which an
        error names."""
        if isinstance(evidence, FileInput):  # retained in this publication, as knowledge_attach would
            retained = self._retain(evidence.content, evidence.media_type, evidence.filename)
            self.retained.append(retained)
            return {"source": retained["id"]}
        if evidence.excerpt is not None:
            return self.retain_excerpt(evidence.excerpt)
        if self.ctx.catalog.source(self.ctx.partition, evidence.source) is None:
            raise NotFound("no retained source with that id in this partition", field=f"{at}.source",
                           source=evidence.source)
        citation: WrittenCitation = {"source": evidence.source}
        if evidence.lines or evidence.quote:
            self._check_citation(evidence, at)
        if evidence.lines:
            citation["lines"] = list(evidence.lines)
        if evidence.quote:
            citation["quote"] = evidence.quote
        return citation

    def citations(self, evidence: Iterable[EvidenceInput | FileInput], at: str) -> list[WrittenCitation]:
        """Each citation as written, ``at`` naming the list in the call (``items[0].evidence``)."""
        return [self.citation(one, f"{at}[{index}]") for index, one in enumerate(evidence)]

    def _check_citation(self, evidence: EvidenceInput, at: str) -> None:
        """A cited line range must exist in the source, and a quote must stand in the cited lines."""
        lines = self._lines_of(evidence.source, at)
        first, last = evidence.lines or (1, len(lines))
        if last > len(lines):
            raise InvalidParams(f"the source has {len(lines)} lines; lines {first}-{last} do not exist",
                                field=f"{at}.lines", source=evidence.source)
        if evidence.quote and evidence.quote not in "\n".join(lines[first - 1:last]):
            raise InvalidParams("the quote does not appear in the cited lines of the source",
                                field=f"{at}.quote", source=evidence.source)

    def _lines_of(self, source_id: str, at: str) -> list[str]:
        if source_id not in self._source_lines:
            row = self.ctx.catalog.source(self.ctx.partition, source_id)
            key = (self.ctx.partition, source_id, row.sha256 or "")
            kept = self.ctx.source_lines.get(key) if self.ctx.source_lines is not None else None
            if kept is not None:
                self._source_lines[source_id] = kept
                return kept
            data, _ = read_file(self.ctx.store.partition_root(self.ctx.partition), row.retained_path,
                                max_bytes=CITED_SOURCE_MAX_BYTES)
            try:
                self._source_lines[source_id] = data.decode("utf-8").splitlines()
            except UnicodeDecodeError as exc:
                raise InvalidParams("lines and quotes can only cite text sources", field=at,
                                    source=source_id) from exc
            if self.ctx.source_lines is not None and row.sha256 and sha256_bytes(data) == row.sha256:
                self.ctx.source_lines.keep(key, self._source_lines[source_id])
        return self._source_lines[source_id]

    def add_record(self, frontmatter: dict[str, Any], body: str, path: str, *, base: bytes | None,
                   at: str | None = None) -> Record:
        """Check one record and add its file to the plan; returns the record as checked.  ``at`` is the item of
        the call the record comes from (``items[2]``), which a refusal names."""
        record = Record(frontmatter, body)
        try:
            rendered = record.render_and_copy()
        except KnowledgeError:
            rendered = None  # rendered again once the checks are made: their error comes first
        # The record its bytes read back as, when it is a copy of this one (the flat writer's), is the one checked:
        # the same values, so the same findings, and its view, built here once, is the one the catalog takes.
        checked = rendered[1] if rendered is not None and rendered[2] and rendered[1] is not None else record
        view = checked.view
        ontology = self.ctx.ontology
        record_type = checked.effective_type(ontology, path)
        findings = check_record(checked, ontology, path)
        if not has_errors(findings):
            findings += reference_findings(view, view.kind, record_type, self._pages_named(view, record_type),
                                           self._sources_cited(view), ontology, path)
        if has_errors(findings):
            errors = [f.to_dict() for f in findings if f.severity == "error"]
            field = errors[0].get("field")
            raise RecordInvalid(f"the record is not valid: {errors[0]['message']}"
                                + (f" ({field})" if field else ""), errors, field=at)
        data, read, _ = rendered if rendered is not None else record.render_and_copy()
        self.writes.append(FileWrite(path, "record", data, view.id, view.revision, base, read=read))
        if view.kind == "page":
            self.new_pages[view.id] = record_type
        self.taken_paths.add(path)
        self.names.update(record_name_keys(view))
        return checked

    def _pages_named(self, view: RecordView, record_type: str | None) -> dict[str, str]:
        """Types of the current pages this record refers to (and pages this plan creates)."""
        wanted = {view.from_id, view.to_id, view.subject}
        if record_type is not None:
            wanted |= {target for _, target, _ in self.ctx.ontology.page_field_refs(record_type, view.fields)}
        types = {}
        for page_id in wanted - {None}:
            if page_id in self.new_pages:
                types[page_id] = self.new_pages[page_id]
                continue
            rows = self.ctx.catalog.current(self.ctx.partition, kind="page", record_ids=[page_id])
            if rows:
                types[page_id] = rows[0].type
        return types

    def _sources_cited(self, view: RecordView) -> set[str]:
        cited = {citation.source for citation in view.evidence or () if citation.source is not None}
        return {source for source in cited if source in self.new_sources
                or self.ctx.catalog.source(self.ctx.partition, source) is not None}

    def unique_path(self, directory: str, stem: str) -> str:
        catalog, partition = self.ctx.catalog, self.ctx.partition
        root = self.ctx.store.partition_root(partition)
        candidate, counter = f"{directory}{stem}.md", 1
        while (candidate in self.taken_paths or catalog.path_in_use(partition, candidate)
               or (root / candidate).exists()):
            counter += 1
            candidate = f"{directory}{stem}-{counter}.md"
        return candidate

    def plan(self, operation: str, request_id: str, digest: str, receipt: dict[str, Any]) -> Plan:
        return Plan(self.ctx.partition, operation, request_id, digest, self.ctx.agent, self.writes, receipt,
                    frozenset(self.names))


def current_record(ctx: WriteContext, record_id: str, *, kind: str,
                   field: str | None = None) -> tuple[RecordRow, Record, bytes]:
    """The one current record with this id, freshly read from disk.

    A file that no longer holds what the catalog last read (an edit the watcher has not reported
    yet) is catalogued first, so the edit is in the revision history before anything is planned on
    top of it: the plan's base is always a version the engine has kept.
    """
    for _ in range(CATCH_UP_ATTEMPTS):
        rows = ctx.catalog.rows_for_id(ctx.partition, record_id)
        if len(rows) > 1:
            raise NotFound("that id is used by more than one file; exact lookups return none", field=field,
                           id=record_id)
        if not rows:
            raise NotFound(f"no {kind} with that id in this partition", field=field, id=record_id)
        if rows[0].kind != kind:  # an id of the wrong kind is said as such, not as one that does not exist
            raise NotFound(f"that id names a {rows[0].kind}, not a {kind}", field=field, id=record_id)
        row = rows[0]
        data, _ = read_file(ctx.store.partition_root(ctx.partition), row.path, max_bytes=RECORD_MAX_BYTES)
        if sha256_bytes(data) == row.sha256:
            break
        ctx.catalog.sync(ctx.partition, [row.path], force=True)
    else:
        raise Conflict("the record keeps changing on disk; read it again", id=record_id)
    record, _ = parse_record(data, row.path)
    if record is None or row.file_status != "ok":
        raise Conflict("the record's file is not valid; fix it before revising", id=record_id, path=row.path)
    if record.revision != row.revision:
        raise Conflict("the record changed on disk; read it again", id=record_id)
    return row, record, data


def check_expected_version(ctx: WriteContext, page: PageInput, row: RecordRow) -> None:
    """Refuse a revision planned on a version its writer did not read (``stale_revision``, its ``field`` the
    argument that named that version, beside the ``revision`` and ``sha256`` the file holds now).

    ``row`` holds the file's bytes as read from disk just now (``current_record``).  With ``expectedSha256``
    the file must hold exactly that version.  A number alone stands for the version the engine first kept
    with it: an edit made outside the engine that kept the number (docs/record-format.md) is a version the
    writer could not have read by number, so the writer is told to read the record again and name the
    version it read by its sha256.
    """
    seen = {"id": row.record_id, "revision": row.revision, "sha256": row.sha256}
    if row.revision != page.expected_revision:
        raise StaleRevision(f"the page is at revision {row.revision}, not {page.expected_revision}; read it again",
                            field="expectedRevision", **seen)
    if page.expected_sha256 is not None:
        if page.expected_sha256 != row.sha256:
            raise StaleRevision(f"the page changed since the version you read (revision {row.revision} now has "
                                "other bytes); read it again and revise with the sha256 you read",
                                field="expectedSha256", **seen)
        return
    first = ctx.catalog.first_kept_sha256(ctx.partition, row.record_id, row.revision)
    if first is not None and first != row.sha256:
        raise StaleRevision(f"the page was edited outside the engine after revision {row.revision} was written "
                            "(the file kept its number); read it again and revise with expectedRevision and "
                            "expectedSha256, the sha256 you read", field="expectedRevision", editedOutside=True,
                            **seen)


def resolve_page(ctx: WriteContext, name: str, field: str) -> str:
    """A page id from an id, title or alias; ambiguous or unknown names resolve to nothing, an error naming
    ``field``."""
    matches = ctx.catalog.lookup(ctx.partition, name, kind="page")
    if len(matches) != 1:
        reason = "matches more than one page" if matches else "matches no current page"
        raise NotFound(f"{name!r} {reason} in this partition", field=field, name=name)
    return matches[0]


def slugify(title: str) -> str:
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    return slug[:60].rstrip("-") or "page"


def one_line_title(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_MAX_CHARS else line[: TITLE_MAX_CHARS - 1].rstrip() + "…"


# --- save_page ----------------------------------------------------------------------


def plan_save_page(ctx: WriteContext, page: PageInput, digest: str) -> Plan:
    if page.type not in ctx.ontology.page_types:
        raise InvalidParams(f"page type {page.type!r} is not in the ontology", field="type")
    builder = _PlanBuilder(ctx)
    citations = builder.citations(page.evidence, "evidence")
    if page.id is None:
        record_id = new_id(PAGE_PREFIX)
        path = builder.unique_path(ctx.ontology.filing_dir(page.type), slugify(page.title))
        frontmatter: dict[str, Any] = {
            "format": RECORD_FORMAT, "id": record_id, "revision": 1, "kind": "page", "title": page.title,
            "type": page.type, "recorded_at": ctx.now, "updated_at": ctx.now, "scope": ctx.partition,
            "lifecycle": "active",
        }
        base, body = None, ""
    else:
        row, existing, base = current_record(ctx, page.id, kind="page", field="id")
        check_expected_version(ctx, page, row)
        if existing.lifecycle != "active":
            raise Conflict(f"the page is {existing.lifecycle}; only active pages are revised", id=page.id)
        record_id, path, body = page.id, row.path, existing.body  # the body left out is kept
        frontmatter = dict(existing.frontmatter)
        frontmatter.update(revision=existing.revision + 1, title=page.title, type=page.type, updated_at=ctx.now)
        citations = list(existing.view.raw.get("evidence") or []) + citations  # the file's own, as written
        kept = frontmatter.get("fields") if page.fields is None else None
        strange = [name for name in kept if name not in ctx.ontology.page_types[page.type].fields] \
            if isinstance(kept, dict) else []
        if strange:  # fields left out are kept: said as such when a new type has no place for them
            raise InvalidParams(f"fields left out are kept from revision {existing.revision}, and {page.type} pages "
                                f"have no field {strange[0]!r}: give fields for a {page.type} page, or fields {{}} "
                                "to drop them", field="fields")
    for key, value in (("aliases", page.aliases), ("tags", page.tags)):
        if value:
            frontmatter[key] = list(value)
        elif value is not None:
            frontmatter.pop(key, None)
    if page.fields is not None:
        frontmatter["fields"] = page.fields
    if citations:
        frontmatter["evidence"] = citations
    frontmatter["attribution"] = ctx.attribution
    record = builder.add_record(frontmatter, body if page.body is None else page.body, path, base=base)
    receipt: dict[str, Any] = {"id": record_id, "revision": record.revision,
                               "records": [{"id": record_id, "revision": record.revision, "kind": "page"}]}
    if builder.retained:
        receipt["sources"] = builder.retained
    return builder.plan("save_page", page.request_id, digest, receipt)


# --- remember -----------------------------------------------------------------------


def plan_remember(ctx: WriteContext, request: RememberInput, digest: str) -> Plan:
    builder = _PlanBuilder(ctx)
    subject = resolve_page(ctx, request.subject, "subject") if request.subject else None
    items, records = [], []
    superseded: set[str] = set()
    for index, item in enumerate(request.items):
        at = f"items[{index}]"  # what an error names, as the parameter reader's do
        if isinstance(item, ClaimItem):
            record_id, revision, extra = _claim(ctx, builder, item, at, subject, superseded)
        else:
            record_id, revision, extra = _relationship(ctx, builder, item, at)
        items.append({"id": record_id, "revision": revision})
        records.append({"id": record_id, "revision": revision, "kind": "claim" if isinstance(item, ClaimItem)
                        else "relationship"})
        records.extend(extra)
    receipt = {"items": items, "records": records}
    return builder.plan("remember", request.request_id, digest, receipt)


def _claim(ctx: WriteContext, builder: _PlanBuilder, item: ClaimItem, at: str, subject: str | None,
           superseded: set[str]) -> tuple[str, int, list[dict[str, Any]]]:
    if item.claim_kind not in ctx.ontology.claim_kinds:
        raise InvalidParams(f"claimKind must be one of {list(ctx.ontology.claim_kinds)}", field=f"{at}.claimKind")
    item_subject = resolve_page(ctx, item.subject, f"{at}.subject") if item.subject else subject
    extra = []
    if item.replaces is not None:
        if item.replaces in superseded:
            raise InvalidParams("two items replace the same claim", field=f"{at}.replaces")
        row, old, base = current_record(ctx, item.replaces, kind="claim", field=f"{at}.replaces")
        if old.lifecycle != "active":
            raise Conflict(f"the claim is already {old.lifecycle}", field=f"{at}.replaces", id=item.replaces)
        old_fm = dict(old.frontmatter)
        old_fm.update(revision=old.revision + 1, updated_at=ctx.now, attribution=ctx.attribution)
        if item.valid_from is None:
            old_fm["lifecycle"] = "superseded"
        else:  # the correction holds from validFrom on: the corrected claim stays true until then
            old_fm["valid_to"] = _ended(old.view.validity, item.valid_from, item.replaces, f"{at}.validFrom")
        builder.add_record(old_fm, old.body, row.path, base=base, at=f"{at}.replaces")
        superseded.add(item.replaces)
        extra.append({"id": item.replaces, "revision": old.revision + 1, "kind": "claim"})
        if item_subject is None and old.view.subject is not None:
            item_subject = old.view.subject
    record_id = new_id(CLAIM_PREFIX)
    frontmatter: dict[str, Any] = {
        "format": RECORD_FORMAT, "id": record_id, "revision": 1, "kind": "claim",
        "title": one_line_title(item.text), "recorded_at": ctx.now, "updated_at": ctx.now,
        "scope": ctx.partition, "lifecycle": "active", "claim_kind": item.claim_kind,
    }
    if item_subject:
        frontmatter["subject"] = item_subject
    frontmatter["assertion_origin"] = item.assertion_origin
    if item.valid_from is not None:
        frontmatter["valid_from"] = item.valid_from
    if item.valid_to is not None:
        frontmatter["valid_to"] = item.valid_to
    if item.replaces:
        frontmatter["replaces"] = item.replaces
    frontmatter["attribution"] = ctx.attribution
    frontmatter["evidence"] = builder.citations(item.evidence, f"{at}.evidence")
    builder.add_record(frontmatter, item.text, f"claims/{record_id}.md", base=None, at=at)
    return record_id, 1, extra


def _ended(validity: Validity, end: str, claim_id: str, field: str) -> str:
    """The ``valid_to`` a corrected claim gets when its correction holds from ``end`` on: ``end``, unless the
    claim already stopped holding before then (it keeps its own end)."""
    moment = validity_moment(end)
    if validity.start is not None and moment is not None and moment < validity.start:
        raise InvalidParams("validFrom is before the corrected claim starts to hold; supersede it instead "
                            "(leave validFrom out)", field=field, id=claim_id)
    if validity.valid_to is not None and validity.end is not None and moment is not None and validity.end < moment:
        return validity.valid_to
    return end


def _relationship(ctx: WriteContext, builder: _PlanBuilder, item: RelationshipItem,
                  at: str) -> tuple[str, int, list[dict[str, Any]]]:
    relation = ctx.ontology.relation_types.get(item.relation)
    if relation is None:
        raise InvalidParams(f"relation {item.relation!r} is not in the ontology", field=f"{at}.relation")
    ends = {}
    for end, name in (("from", item.from_page), ("to", item.to_page)):
        ends[end] = resolve_page(ctx, name, f"{at}.{end}")
    titles = {end: ctx.catalog.current(ctx.partition, kind="page", record_ids=[page_id])[0].title
              for end, page_id in ends.items()}
    record_id = new_id(RELATIONSHIP_PREFIX)
    frontmatter: dict[str, Any] = {
        "format": RECORD_FORMAT, "id": record_id, "revision": 1, "kind": "relationship",
        "title": one_line_title(f"{titles['from']} {relation.label} {titles['to']}"),
        "recorded_at": ctx.now, "updated_at": ctx.now, "scope": ctx.partition, "lifecycle": "active",
        "relation": item.relation, "from": ends["from"], "to": ends["to"],
        "assertion_origin": item.assertion_origin, "attribution": ctx.attribution,
        "evidence": builder.citations(item.evidence, f"{at}.evidence"),
    }
    builder.add_record(frontmatter, "", f"relationships/{record_id}.md", base=None, at=at)
    return record_id, 1, []
