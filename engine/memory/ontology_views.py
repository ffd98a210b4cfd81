"""``knowledge_ontology``: the caller's effective ontology, as an agent reads it.

Four views of one partition's ontology (the shipped definitions, plus the
vault's private extensions in the private partition only):

    catalog       names, labels, kinds, descriptions, aliases, provenance and
                  how many current records use each definition
    definitions   fields, allowed values, filing prefixes, endpoint
                  constraints and provenance (optionally record summaries)
    sources       the ontology files themselves, with size and sha256, or
                  the YAML text of one of them (``sourcePath``)
    diagnostics   the inheritance chain and the ontology's findings

Every list is paged (``limit`` 1-100, ``offset``) and every answer carries a
``fingerprint``: the sha256 of its own content, so an agent can tell whether
what it saw before is still what the engine serves.  Parameters are parsed
here, once, before anything is queued on the store's lane.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal, Union, cast

from ..core.answers import JsonObject, NotRequired, TypedDict
from ..core.findings import FindingAnswer
from ..store.catalog import Catalog
from ..store.summaries import RecordSummary, record_summary
from ..core.methods import Method
from ..core.errors import InvalidParams, KnowledgeError, NotFound
from ..core.files import UnsafePath, check_relative_path, read_file
from ..core.params import Choice, Flag, Integer, Name, Params, String
from ..vault.ontology import ONTOLOGY_MAX_BYTES, SHIPPED, Ontology
from ..vault.records import PRIVATE_SCOPE
from ..store.store import EXTENSIONS_FILE, VAULT_DIR, Store

if TYPE_CHECKING:  # the engine calls in here; this module only needs its types
    from ..access.authority import Caller, StoreEntry
    from ..store.open_store import OpenStore

VIEWS = ("catalog", "definitions", "sources", "diagnostics")
KINDS = ("page", "relationship", "claim")
LIMIT_MAX = 100
DEFAULT_LIMITS = {"catalog": 50, "definitions": 10, "sources": 50, "diagnostics": 50}
OFFSET_MAX = 1_000_000
NAME_MAX_CHARS = 200
RECORDS_PER_DEFINITION = 20
SOURCE_CHARS_DEFAULT, SOURCE_CHARS_MIN, SOURCE_CHARS_MAX = 12_000, 256, 65_536
SOURCE_PATH_MAX_CHARS = 256

SHIPPED_SOURCE = "shipped/ontology.yaml"
VAULT_SOURCE = f"{VAULT_DIR}/{EXTENSIONS_FILE}"  # also the provenance Store gives the extension

# Which parameters each view takes (``view`` itself aside).
_VIEW_PARAMS = {
    "catalog": {"kind", "limit", "offset"},
    "definitions": {"name", "kind", "includeRecords", "limit", "offset"},
    "sources": {"sourcePath", "maxChars", "limit", "offset"},
    "diagnostics": {"limit", "offset"},
}

# Record findings that come from the ontology rather than the envelope or the vault.
_RECORD_ONTOLOGY_CODES = {"unknown_type", "unknown_field", "invalid_field", "unknown_relation", "endpoint_type"}

ONTOLOGY_PARAMS = Params(
    Choice("view", VIEWS, default="catalog"),
    Choice("kind", KINDS, description="catalog and definitions: one kind only"),
    Name("name", NAME_MAX_CHARS, description="definitions: a name or alias"),
    Flag("includeRecords", default=False, description="definitions: up to 20 current records per type"),
    Integer("limit", 1, LIMIT_MAX, description="definitions default to 10 per page, other views to 50"),
    Integer("offset", 0, OFFSET_MAX, default=0),
    String("sourcePath", SOURCE_PATH_MAX_CHARS, description="sources: a path from the sources list"),
    Integer("maxChars", SOURCE_CHARS_MIN, SOURCE_CHARS_MAX, default=SOURCE_CHARS_DEFAULT),
)
PARAMS = ONTOLOGY_PARAMS.names
TOOL_INPUT_SCHEMA = ONTOLOGY_PARAMS.schema()


@dataclass(frozen=True)
class OntologyRequest:
    view: str
    kind: str | None = None
    name: str | None = None
    include_records: bool = False
    limit: int = DEFAULT_LIMITS["catalog"]
    offset: int = 0
    source_path: str | None = None
    max_chars: int = SOURCE_CHARS_DEFAULT


def parse_ontology_request(params: Any) -> OntologyRequest:
    """Check the tool's parameters; anything unknown, misplaced or out of range names its field."""
    params = ONTOLOGY_PARAMS.refuse_unknown(params)
    view = ONTOLOGY_PARAMS["view"].take(params)
    misplaced = sorted(set(params) - _VIEW_PARAMS[view] - {"view"})
    if misplaced:
        raise InvalidParams(f"{misplaced[0]} does not apply to the {view} view", field=misplaced[0])
    values = ONTOLOGY_PARAMS.read(params)
    source_path = values["sourcePath"]
    if source_path is not None:
        source_path = _check_source_path(source_path)
        for paging in ("limit", "offset"):
            if paging in params:
                raise InvalidParams(f"{paging} pages the sources list; with sourcePath use maxChars",
                                    field=paging)
    elif "maxChars" in params:
        raise InvalidParams("maxChars applies with sourcePath only", field="maxChars")
    return OntologyRequest(
        view=view, kind=values["kind"], name=values["name"], include_records=values["includeRecords"],
        limit=DEFAULT_LIMITS[view] if values["limit"] is None else values["limit"], offset=values["offset"],
        source_path=source_path, max_chars=values["maxChars"],
    )


def _check_source_path(value: str) -> str:
    """A relative, plain path: the lookup is by exact name, but tricks are refused outright."""
    try:
        check_relative_path(value)
    except KnowledgeError as exc:
        raise UnsafePath(f"sourcePath is not a plain relative path: {exc.message}", field="sourcePath") from exc
    return value


# --- answers -----------------------------------------------------------------------------------


class Page(TypedDict):
    """A window of a view's list: `nextOffset` while more follow."""

    total: int
    offset: int
    limit: int
    nextOffset: NotRequired[int]


class Fingerprinted(TypedDict):
    fingerprint: str  # the sha256 of the answer's canonical JSON, the fingerprint itself left out


class CatalogEntry(TypedDict):
    name: str
    kind: str
    label: str
    description: str | None
    aliases: list[str]
    provenance: str
    recordCount: int


class CatalogBody(Page):
    view: Literal["catalog"]
    kind: NotRequired[str]
    entries: list[CatalogEntry]


# "from" is a keyword: the functional form declares it.
Definition = TypedDict("Definition", {
    "name": str, "kind": str, "label": str, "description": "str | None", "aliases": list[str],
    "provenance": str,
    "default": NotRequired[bool], "filing": NotRequired[list[str]],  # page types
    "fields": NotRequired[dict[str, JsonObject]],
    "from": NotRequired[list[str]], "to": NotRequired[list[str]],  # relationship types
    "recordCount": NotRequired[int], "records": NotRequired[list[RecordSummary]],  # with includeRecords
    "recordsTruncated": NotRequired[bool],
})


class DefinitionsBody(Page):
    view: Literal["definitions"]
    kind: NotRequired[str]
    name: NotRequired[str]
    definitions: list[Definition]


class SourceFile(TypedDict):
    path: str
    provenance: str
    role: str
    applied: bool
    size: NotRequired[int]
    sha256: NotRequired[str]
    readable: NotRequired[bool]  # false, with the ``problem``, for an extension file that cannot be read
    problem: NotRequired[str]


class SourcesBody(Page):
    view: Literal["sources"]
    sources: list[SourceFile]


class SourceTextBody(TypedDict):
    view: Literal["sources"]
    path: str
    role: str
    size: int
    sha256: str
    text: str
    totalChars: int
    maxChars: int
    truncated: bool
    applied: NotRequired[bool]


class ChainLink(TypedDict):
    provenance: str
    sourcePath: str
    role: str
    applied: bool


class OntologyFinding(FindingAnswer):
    concerns: Literal["definition", "record"]


class DiagnosticsBody(Page):
    view: Literal["diagnostics"]
    chain: list[ChainLink]
    extensionsApply: bool
    errors: int
    findings: list[OntologyFinding]


class CatalogView(CatalogBody, Fingerprinted):
    pass


class DefinitionsView(DefinitionsBody, Fingerprinted):
    pass


class SourcesView(SourcesBody, Fingerprinted):
    pass


class SourceText(SourceTextBody, Fingerprinted):
    pass


class DiagnosticsView(DiagnosticsBody, Fingerprinted):
    pass


OntologyBody = Union[CatalogBody, DefinitionsBody, SourcesBody, SourceTextBody, DiagnosticsBody]
OntologyAnswer = Union[CatalogView, DefinitionsView, SourcesView, SourceText, DiagnosticsView]


def ontology_view(engine: "StoreEntry[OpenStore]", caller: "Caller", params: Any) -> OntologyAnswer:
    """The ``knowledge_ontology`` tool: one view of the caller's partition's effective ontology."""
    request = parse_ontology_request(params)
    return engine.on_store(caller, lambda runtime, authority: build_view(runtime.catalog, authority.partition,
                                                                         request))


def build_view(catalog: Catalog, partition: str, request: OntologyRequest) -> OntologyAnswer:
    """Runs on the store's lane, after the partition's catalog caught up with the disk."""
    store = catalog.store
    ontology = store.ontology(partition)
    result: OntologyBody
    if request.view == "catalog":
        result = _catalog(catalog, partition, ontology, request)
    elif request.view == "definitions":
        result = _definitions(catalog, partition, ontology, request)
    elif request.view == "sources":
        result = _source_text(store, partition, ontology, request) if request.source_path else \
            cast(SourcesBody, _page("sources", _source_list(store, partition, ontology), request))
    else:
        result = _diagnostics(catalog, partition, ontology, request)
    return fingerprinted(result)


def fingerprinted(result: OntologyBody) -> OntologyAnswer:
    """Add the sha256 of the answer's canonical JSON (the fingerprint itself excluded)."""
    body = {key: value for key, value in result.items() if key != "fingerprint"}
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return cast(OntologyAnswer, {**body, "fingerprint": hashlib.sha256(canonical.encode("utf-8")).hexdigest()})


def _page(view: str, items: list[dict[str, Any]], request: OntologyRequest, key: str | None = None,
          **extra: Any) -> dict[str, Any]:
    window = items[request.offset:request.offset + request.limit]
    result: dict[str, Any] = {"view": view, **extra, key or view: window, "total": len(items),
                              "offset": request.offset, "limit": request.limit}
    if request.offset + request.limit < len(items):
        result["nextOffset"] = request.offset + request.limit
    return result


# --- catalog and definitions ---------------------------------------------------------------


def _provenance_of_claim_kind(store: Store, ontology: Ontology, name: str) -> str:
    """Claim kinds carry no provenance of their own; an extension can only add new ones."""
    return SHIPPED if name in store.shipped.claim_kinds else ontology.sources[-1]


def _definitions_of(store: Store, ontology: Ontology, kind: str | None) -> list[dict[str, Any]]:
    """Every definition in a stable order: page types, relationship types, claim kinds, each as defined."""
    entries: list[dict[str, Any]] = []
    if kind in (None, "page"):
        for page_type in ontology.page_types.values():
            entries.append({
                "name": page_type.name, "kind": "page", "label": page_type.label,
                "description": page_type.description, "aliases": list(page_type.aliases),
                "provenance": page_type.provenance,
                "default": page_type.name == ontology.default_page_type,
                "filing": list(page_type.filing),
                "fields": {name: spec.to_dict() for name, spec in page_type.fields.items()},
            })
    if kind in (None, "relationship"):
        for relation in ontology.relation_types.values():
            entries.append({
                "name": relation.name, "kind": "relationship", "label": relation.label,
                "description": relation.description, "aliases": [], "provenance": relation.provenance,
                "from": list(relation.from_types), "to": list(relation.to_types),
            })
    if kind in (None, "claim"):
        for name, description in ontology.claim_kinds.items():
            entries.append({
                "name": name, "kind": "claim", "label": name.replace("_", " "), "description": description,
                "aliases": [], "provenance": _provenance_of_claim_kind(store, ontology, name),
            })
    return entries


def _catalog(catalog: Catalog, partition: str, ontology: Ontology, request: OntologyRequest) -> CatalogBody:
    # The catalog's ``type`` is a page's effective type, a claim's kind or a relationship's relation.
    counts = catalog.current_counts(partition)
    entries = [
        {key: entry[key] for key in ("name", "kind", "label", "description", "aliases", "provenance")}
        | {"recordCount": counts.get((entry["kind"], entry["name"]), 0)}
        for entry in _definitions_of(catalog.store, ontology, request.kind)
    ]
    extra = {"kind": request.kind} if request.kind else {}
    return cast(CatalogBody, _page("catalog", entries, request, key="entries", **extra))


def _definitions(catalog: Catalog, partition: str, ontology: Ontology, request: OntologyRequest) -> DefinitionsBody:
    entries = _definitions_of(catalog.store, ontology, request.kind)
    if request.name is not None:
        entries = _named(entries, request.name)
        if not entries:
            what = f"{request.kind} definition" if request.kind else \
                "page type, relationship type or claim kind"
            raise NotFound(f"no {what} is named {request.name!r} in this partition's ontology", field="name",
                           name=request.name)
    result = cast(DefinitionsBody, _page("definitions", entries, request,
                                         **({"kind": request.kind} if request.kind else {}),
                                         **({"name": request.name} if request.name else {})))
    if request.include_records:
        counts = catalog.current_counts(partition)
        for entry in result["definitions"]:
            rows = catalog.current(partition, kind=entry["kind"], type=entry["name"],
                                   limit=RECORDS_PER_DEFINITION + 1)
            entry["recordCount"] = counts.get((entry["kind"], entry["name"]), 0)
            entry["records"] = [record_summary(row) for row in rows[:RECORDS_PER_DEFINITION]]
            entry["recordsTruncated"] = len(rows) > RECORDS_PER_DEFINITION
    return result


def _named(entries: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Definitions with exactly that name; failing that, those with it as an alias (case-folded)."""
    exact = [entry for entry in entries if entry["name"] == name]
    if exact:
        return exact
    folded = name.casefold()
    return [entry for entry in entries if any(alias.casefold() == folded for alias in entry["aliases"])]


# --- sources --------------------------------------------------------------------------------


def _shipped_bytes() -> bytes:
    return resources.files("engine.vault").joinpath("ontology.yaml").read_bytes()


def _vault_source_present(store: Store, partition: str) -> bool:
    return partition == PRIVATE_SCOPE and os.path.lexists(store.vault / EXTENSIONS_FILE)


def _read_vault_source(store: Store) -> bytes:
    """The extension file, read like the ontology loader reads it: no symlinks, no hardlinks, 64 KiB."""
    data, _ = read_file(store.vault, EXTENSIONS_FILE, max_bytes=ONTOLOGY_MAX_BYTES)
    return data


def _source_list(store: Store, partition: str, ontology: Ontology) -> list[dict[str, Any]]:
    shipped = _shipped_bytes()
    sources = [{"path": SHIPPED_SOURCE, "provenance": SHIPPED, "role": "shipped", "size": len(shipped),
                "sha256": hashlib.sha256(shipped).hexdigest(), "applied": True}]
    if _vault_source_present(store, partition):
        entry: dict[str, Any] = {"path": VAULT_SOURCE, "provenance": VAULT_SOURCE, "role": "extension",
                                 "applied": VAULT_SOURCE in ontology.sources}
        try:
            data = _read_vault_source(store)
        except KnowledgeError as exc:  # listed all the same, so the agent learns why it does not apply
            entry.update(readable=False, problem=exc.message)
        else:
            entry.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
        sources.append(entry)
    return sources


def _source_text(store: Store, partition: str, ontology: Ontology, request: OntologyRequest) -> SourceTextBody:
    """One listed source file's YAML; no other path is ever opened."""
    if request.source_path == SHIPPED_SOURCE:
        data, role = _shipped_bytes(), "shipped"
    elif request.source_path == VAULT_SOURCE and _vault_source_present(store, partition):
        data, role = _read_vault_source(store), "extension"
    else:
        raise NotFound("no ontology source file with that path; the sources view lists them", field="sourcePath",
                       sourcePath=request.source_path)
    text = data.decode("utf-8", errors="replace")
    result: SourceTextBody = {
        "view": "sources", "path": request.source_path, "role": role, "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(), "text": text[:request.max_chars],
        "totalChars": len(text), "maxChars": request.max_chars, "truncated": len(text) > request.max_chars,
    }
    if role == "extension":
        result["applied"] = VAULT_SOURCE in ontology.sources
    return result


# --- diagnostics ---------------------------------------------------------------------------


def _diagnostics(catalog: Catalog, partition: str, ontology: Ontology, request: OntologyRequest) -> DiagnosticsBody:
    chain = [{"provenance": SHIPPED, "sourcePath": SHIPPED_SOURCE, "role": "shipped", "applied": True}]
    if _vault_source_present(catalog.store, partition):
        chain.append({"provenance": VAULT_SOURCE, "sourcePath": VAULT_SOURCE, "role": "extension",
                      "applied": VAULT_SOURCE in ontology.sources})
    findings = [{**finding.to_dict(), "concerns": "definition"} for finding in ontology.findings]
    findings += [
        {**finding, "concerns": "record"} for finding in catalog.findings(partition)
        if finding.get("code") in _RECORD_ONTOLOGY_CODES
        or (finding.get("code") == "envelope" and finding.get("field") == "claim_kind")
    ]
    errors = sum(1 for finding in findings if finding.get("severity", "error") == "error")
    return cast(DiagnosticsBody, _page("diagnostics", findings, request, key="findings", chain=chain,
                                       extensionsApply=partition == PRIVATE_SCOPE, errors=errors))


TOOLS = (
    Method(
        "knowledge_ontology", ONTOLOGY_PARAMS, OntologyAnswer, ontology_view, title="Knowledge vocabulary",
        description="The vocabulary of your vault: page types with their fields and filing, relationship types with "
        "endpoint constraints, claim kinds; views catalog (default), definitions, sources and diagnostics, paged, "
        "each page with a fingerprint.",
    ),
)
