"""``search_knowledge``: the Knowledge Base read contract (spec 004) over this engine's records.

How the spec's nouns map onto a vault (docs/knowledge-base.md says why):

    Knowledge Base       the caller's partition; ``knowledge_base_id`` narrows to one tag in it
    Knowledge item       a record (page, claim or relationship); ``knowledge_item_id`` is its id
    published item       a *current* record: active, valid, in scope, its id unique, not a fixture
    revision             one exact, immutable record revision from the revision archive;
                         ``knowledge_revision_id`` is ``<revision>-<sha256 of its bytes>``
    current_revision_id  the revision the record's file holds now

Two shapes, never mixed. A query search ranks the current revisions of
current records only (``lexical``, ``semantic``, ``hybrid`` or ``rrf``); an
addressed read returns a window of one item's content: its current revision,
or with ``knowledge_revision_id`` that exact revision, as long as the item is
still published. Both are read-only: no write, no event, no audit entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal, Protocol, Union

import tantivy

from ..core.answers import NotRequired, TypedDict
from ..index.analysis import Analyzer
from ..access.authority import Authority, Caller, StoreEntry
from ..index.embedding import Embedder, EmbeddingRuntime
from ..index.searchable import SearchableStore
from ..state.config import SettingsSource
from ..core.errors import IndexFailed, InvalidParams, NotFound, RuntimeDisabled
from ..core.ids import utc_now
from ..core.methods import Method
from ..vault.frontmatter import split_document
from ..core.params import Choice, Integer, Name, Number, Params, RecordId, String
from ..store.reads import fresh_row
from .keyword import QUERY, SearchRequest, build_query

SCOPE = "knowledge:read"
MODES = ("hybrid", "lexical", "semantic", "rrf")
DEFAULT_MODE = "hybrid"
ALPHA_DEFAULT = 0.5
MAX_RESULTS_DEFAULT, MAX_RESULTS_MAX = 10, 50
LIMIT_CHARS_DEFAULT, LIMIT_CHARS_MAX = 4000, 100_000
RESULT_CONTENT_CHARS = 1000  # the start of each query result's content; an addressed read gives the rest
# Reciprocal rank fusion: score = sum over rankings of 1 / (RRF_K + rank). 60 is the constant of Cormack,
# Clarke and Buettcher (SIGIR 2009), which damps the head of each ranking without ignoring the tail.
RRF_K = 60
FUSION_DEPTH = 100    # how deep each ranking goes into hybrid and rrf fusion
QUERY_EMBED_BUDGET = 256  # texts one search may embed to catch the vector index up; the rest waits
BASE_ID_MAX_CHARS = 500
_REVISION_ID = re.compile(r"([1-9][0-9]{0,9})-([0-9a-f]{64})")

# Why the semantic side was answered lexically (the envelope's ``fallback.reason``).
NO_EMBEDDING_MODEL = "no_embedding_model"
EMBEDDING_MODEL_FAILED = "embedding_model_failed"
VECTOR_INDEX_FAILED = "vector_index_failed"
NOT_EMBEDDED_YET = "not_embedded_yet"


TOOL_DESCRIPTION = (
    "Knowledge Base read, in one of two shapes (never both). Query search: 'query' (optionally "
    "'knowledge_base_id' = one of your tags, 'mode' hybrid (default) | lexical | semantic | rrf, 'alpha' 0..1 "
    "where 1 is lexical only, 'max_results' 1-50) ranks the current revision of each published item. Addressed "
    "read: 'knowledge_item_id' (optionally 'knowledge_revision_id' for that exact immutable revision, 'offset' "
    "and 'limit_chars') returns a window of its content. Cite results by their 'reference'."
)
# The two shapes of a call, never mixed: a query search and an addressed read.
QUERY_PARAMS = Params(
    replace(QUERY, description="Query search: what to look for (never query syntax)"),
    Name("knowledge_base_id", BASE_ID_MAX_CHARS, description="Query search: only items carrying this tag"),
    Choice("mode", MODES, default=DEFAULT_MODE),
    Number("alpha", 0, 1, default=ALPHA_DEFAULT,
           description="hybrid only (refused beside another mode): weight of the lexical score (1) against the semantic score (0)"),
    Integer("max_results", 1, MAX_RESULTS_MAX, default=MAX_RESULTS_DEFAULT),
)
READ_PARAMS = Params(
    RecordId("knowledge_item_id", required=True, what="a knowledge item id from a search result",
             description="Addressed read: the item to read"),
    String("knowledge_revision_id", pattern=_REVISION_ID, what="a revision id from a search result or read "
           "(<revision>-<sha256>)", description="Addressed read: that exact revision (default: the item's "
           "current revision)"),
    Integer("offset", 0, default=0, description="Addressed read: first character"),
    Integer("limit_chars", 1, LIMIT_CHARS_MAX, default=LIMIT_CHARS_DEFAULT,
            description="Addressed read: characters to return"),
)
# What the tool takes: either shape's parameters, none required by itself.
TOOL_PARAMS = Params(*QUERY_PARAMS, *READ_PARAMS, note="search_knowledge takes no owner, scope or store").optional()
QUERY_KEYS, READ_KEYS = tuple(QUERY_PARAMS.specs), tuple(READ_PARAMS.specs)


@dataclass(frozen=True)
class QuerySearch:
    query: str
    knowledge_base_id: str | None = None
    mode: str = DEFAULT_MODE
    alpha: float = ALPHA_DEFAULT
    max_results: int = MAX_RESULTS_DEFAULT


@dataclass(frozen=True)
class AddressedRead:
    item_id: str
    revision: tuple[int, str] | None = None  # (revision number, sha256)
    offset: int = 0
    limit_chars: int = LIMIT_CHARS_DEFAULT


def revision_id(revision: int, sha256: str) -> str:
    return f"{revision}-{sha256}"


def reference(item_id: str, revision: int, sha256: str) -> str:
    return f"knowledge:{item_id}@{revision_id(revision, sha256)}"


# --- parsing: validate at the edge ----------------------------------------------------------


def parse_request(args: Any) -> QuerySearch | AddressedRead:
    """One of the two shapes; anything else (a mix, an unknown or caller-supplied scope) is invalid_params."""
    args = TOOL_PARAMS.refuse_unknown(args)
    query_keys = [key for key in QUERY_KEYS if key in args]
    read_keys = [key for key in READ_KEYS if key in args]
    if query_keys and read_keys:
        raise InvalidParams(f"a query search and an addressed read are separate calls: {query_keys[0]} cannot be "
                            f"combined with {read_keys[0]}", field=read_keys[0])
    if read_keys:
        values = READ_PARAMS.read(args)
        raw, revision = values["knowledge_revision_id"], None
        if raw is not None:
            matched = _REVISION_ID.fullmatch(raw)
            revision = (int(matched.group(1)), matched.group(2))
        return AddressedRead(values["knowledge_item_id"], revision, values["offset"], values["limit_chars"])
    if "query" not in args:
        raise InvalidParams("give query (a query search) or knowledge_item_id (an addressed read)", field="query")
    values = QUERY_PARAMS.read(args)
    if "alpha" in args and values["mode"] != "hybrid":  # it would be ignored: the caller meant something else
        raise InvalidParams(f"alpha weighs the lexical against the semantic score in hybrid mode; mode "
                            f"{values['mode']} does not use it: leave alpha out", field="alpha")
    return QuerySearch(values["query"], values["knowledge_base_id"], values["mode"], values["alpha"],
                       values["max_results"])


# --- the handler ------------------------------------------------------------------------------


class KnowledgeEngine(StoreEntry[SearchableStore], Protocol):
    """What search_knowledge needs of the engine: the way into a store, the runtime switch in the settings,
    the embedding model and the analyzer."""

    @property
    def settings(self) -> SettingsSource: ...

    @property
    def embeddings(self) -> EmbeddingRuntime: ...

    @property
    def analyzer(self) -> Analyzer: ...


class KnowledgeItem(TypedDict):
    """A window of one published item's revision (`knowledge_item_id` given)."""

    type: Literal["knowledge"]
    knowledge_item_id: str
    knowledge_revision_id: str
    content: str
    content_offset: int
    content_limit: int
    content_total_chars: int
    content_truncated: bool


class KnowledgeResult(TypedDict):
    knowledge_item_id: str
    knowledge_revision_id: str
    title: str
    content: str
    content_truncated: bool
    reference: str
    score: float


class LexicalFallback(TypedDict):
    """Why results were ranked by keywords alone, and how many."""

    to: Literal["lexical"]
    reason: str
    message: str
    results: int


class KnowledgeSearch(TypedDict):
    type: Literal["knowledge_search"]
    results: list[KnowledgeResult]
    mode: str
    fallback: NotRequired[LexicalFallback]
    index_pending: NotRequired[int]


KnowledgeAnswer = Union[KnowledgeItem, KnowledgeSearch]


def search_knowledge(engine: KnowledgeEngine, caller: Caller, args: dict[str, Any]) -> KnowledgeAnswer:
    """The tool: its parameters, then the runtime switch, then the caller's knowledge:read authority, then one
    of the two shapes.  Bad input is named first, as by every tool; the switch still comes before anything
    reads a store."""
    request = parse_request(args)
    if not engine.settings.current().knowledge_runtime_enabled:
        raise RuntimeDisabled("the Knowledge Base runtime is switched off (knowledgeRuntimeEnabled is false): the "
                              "owner switches it on with `knowledge settings search-knowledge on`; meanwhile "
                              "knowledge_grep searches the same records",
                              error="knowledge_unavailable", code="knowledge_runtime_disabled")
    if isinstance(request, AddressedRead):
        return engine.on_store(caller, lambda runtime, authority: addressed_read(runtime, authority, request),
                               scope=SCOPE)
    return engine.on_store(caller, lambda runtime, authority: query_search(
        runtime, authority, request, engine.embeddings, engine.analyzer), scope=SCOPE)


# --- addressed reads ----------------------------------------------------------------------------


def addressed_read(runtime: SearchableStore, authority: Authority, request: AddressedRead) -> KnowledgeItem:
    """A window of a published item's current revision, or of the exact revision it names."""
    store, catalog, partition = runtime.store, runtime.catalog, authority.partition
    rows = catalog.rows_for_id(partition, request.item_id)
    row = fresh_row(store, catalog, partition, rows[0]) if len(rows) == 1 else None
    if row is None or row.record_id != request.item_id or not row.is_current:
        raise NotFound("no published knowledge item with that id in your knowledge base",
                       field="knowledge_item_id", id=request.item_id)
    revision, sha256 = request.revision or (row.revision, row.sha256)
    stored = catalog.revision(partition, request.item_id, revision, sha256)
    if stored is None:
        raise NotFound("that item has no such revision", field="knowledge_revision_id", id=request.item_id)
    _, body = split_document(stored.text)
    window = body[request.offset:request.offset + request.limit_chars]
    return {
        "type": "knowledge", "knowledge_item_id": request.item_id,
        "knowledge_revision_id": revision_id(revision, sha256), "content": window,
        "content_offset": request.offset, "content_limit": request.limit_chars, "content_total_chars": len(body),
        "content_truncated": request.offset + request.limit_chars < len(body),
    }


# --- query search -------------------------------------------------------------------------------


@dataclass
class _Semantic:
    """The semantic side of one query: a ranking and similarities, or why there is none."""

    ranking: list[tuple[str, float]] = field(default_factory=list)
    similarity: Callable[[list[str]], dict[str, float]] = lambda paths: {}
    fallback: str | None = None
    message: str | None = None
    pending: int = 0


def query_search(runtime: SearchableStore, authority: Authority, request: QuerySearch,
                 embeddings: EmbeddingRuntime, analyzer: Analyzer) -> KnowledgeSearch:
    """Rank the current revisions of current records (of one tag, with knowledge_base_id)."""
    partition = authority.partition
    runtime.indexes.catch_up(partition)
    base = _base_paths(runtime, partition, request.knowledge_base_id)
    depth = request.max_results if request.mode in ("lexical", "semantic") else max(FUSION_DEPTH,
                                                                                     request.max_results)
    lexical = lexical_ranking(runtime, partition, analyzer, request.query, depth, base)
    semantic = _Semantic() if request.mode == "lexical" else _semantic_side(
        runtime, partition, request.query, depth, base, embeddings)
    ranked, fell_back = fuse(request, lexical, semantic, lambda paths: lexical_scores(
        runtime, partition, analyzer, request.query, paths))
    found = _results(runtime, partition, ranked, request.max_results, base)
    fallback_results = sum(1 for path, _ in found if path in fell_back)
    envelope: KnowledgeSearch = {"type": "knowledge_search", "results": [result for _, result in found],
                                "mode": request.mode}
    if semantic.fallback is not None or fallback_results:
        envelope["fallback"] = {"to": "lexical", "reason": semantic.fallback or NOT_EMBEDDED_YET,
                                "message": semantic.message or "some results have no vector yet; their semantic "
                                "score is their lexical score", "results": fallback_results}
    if semantic.pending:
        envelope["index_pending"] = semantic.pending
    return envelope


def _base_paths(runtime: SearchableStore, partition: str, base: str | None) -> list[str] | None:
    """The current records carrying the tag ``base``; None means the whole partition."""
    if base is None:
        return None
    paths = [row.path for row in runtime.catalog.current(partition, tag=base)]
    if not paths:
        raise NotFound("no knowledge base with that id: no published item of yours carries that tag",
                       field="knowledge_base_id")
    return paths


def _restricted(schema: tantivy.Schema, query: tantivy.Query, paths: list[str] | None) -> tantivy.Query:
    if paths is None:
        return query
    only = tantivy.Query.const_score_query(tantivy.Query.term_set_query(schema, "path", paths), 0.0)
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, only)])


def lexical_ranking(runtime: SearchableStore, partition: str, analyzer: Analyzer, text: str, depth: int,
                    paths: list[str] | None) -> list[tuple[str, float]]:
    """(path, BM25 score), best first: the engine's own keyword ranking (engine/search/keyword.py)."""
    terms = analyzer.query_terms(text)
    if not terms:
        return []
    index = runtime.indexes.get(partition)
    query = _restricted(index.schema, build_query(index.schema, terms, SearchRequest(text)), paths)
    searcher = index.searcher()
    return [(searcher.doc(address)["path"][0], float(score))
            for score, address in searcher.search(query, depth, count=False).hits]


def lexical_scores(runtime: SearchableStore, partition: str, analyzer: Analyzer, text: str,
                   paths: list[str]) -> dict[str, float]:
    """Exact BM25 scores of ``paths`` (absent: no query word matches)."""
    return dict(lexical_ranking(runtime, partition, analyzer, text, max(1, len(paths)), paths)) if paths else {}


def _semantic_side(runtime: SearchableStore, partition: str, text: str, depth: int, base: list[str] | None,
                   embeddings: EmbeddingRuntime) -> _Semantic:
    embedder: Embedder | None = embeddings.current()
    if embedder is None:
        status = embeddings.status()
        failed = status.state == "failed"
        return _Semantic(fallback=EMBEDDING_MODEL_FAILED if failed else NO_EMBEDDING_MODEL,
                         message=f"semantic search is unavailable ({status.reason or status.state}); results "
                                 "are ranked lexically")
    try:
        progress = runtime.vectors.catch_up(partition, embedder, budget=QUERY_EMBED_BUDGET)
        vector = embedder.embed([text])[0]
        ranking = runtime.vectors.nearest(partition, vector, depth, base)
    except IndexFailed as exc:
        return _Semantic(fallback=VECTOR_INDEX_FAILED, message=f"{exc.message}; results are ranked lexically")
    return _Semantic(ranking=ranking, similarity=lambda paths: runtime.vectors.similarities(partition, vector, paths),
                     pending=progress.pending)


def normalized(scores: dict[str, float]) -> dict[str, float]:
    """Min-max normalisation to 0..1 over the given scores (all equal: 1.0, or 0.0 when they are 0)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high - low < 1e-12:
        return {key: 1.0 if high > 0 else 0.0 for key in scores}
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def fuse(request: QuerySearch, lexical: list[tuple[str, float]], semantic: _Semantic,
         exact_lexical: Callable[[list[str]], dict[str, float]]) -> tuple[list[tuple[str, float]], set[str]]:
    """The mode's ranking as (path, score), best first, and the candidates whose semantic side was lexical."""
    mode = request.mode
    if mode == "lexical" or (semantic.fallback is not None and mode == "semantic"):
        top = lexical[0][1] if lexical else 1.0
        ranked = [(path, min(1.0, score / top) if top > 0 else 0.0) for path, score in lexical]
        return ranked, ({path for path, _ in ranked} if mode == "semantic" else set())
    if mode == "semantic":
        return list(semantic.ranking), set()
    if mode == "rrf":
        ranked = rrf([[path for path, _ in lexical], [path for path, _ in semantic.ranking]])
        return ranked, ({path for path, _ in ranked} if semantic.fallback is not None else set())
    # hybrid: exact lexical and semantic scores of every candidate either ranking brought. Lexical scores are
    # divided by the best (as in lexical mode: no shared word stays 0), similarities min-max normalised.
    pool = list(dict.fromkeys([path for path, _ in lexical] + [path for path, _ in semantic.ranking]))
    exact = exact_lexical(pool) if pool else {}
    top = max(exact.values(), default=0.0)
    lexical_norm = {path: min(1.0, exact.get(path, 0.0) / top) if top > 0 else 0.0 for path in pool}
    similar = semantic.similarity(pool) if semantic.fallback is None else {}
    semantic_norm = normalized(similar)
    combined, fell_back = [], set()
    for path in pool:
        if path in semantic_norm:
            semantic_value = semantic_norm[path]
        else:  # no vector for this candidate: its semantic side is its lexical score
            semantic_value = lexical_norm[path]
            fell_back.add(path)
        combined.append((path, request.alpha * lexical_norm[path] + (1.0 - request.alpha) * semantic_value))
    combined.sort(key=lambda item: (-item[1], item[0]))
    return combined, fell_back


def rrf(rankings: list[list[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: each ranking adds 1 / (k + rank) (rank from 1) to the items it holds."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def _results(runtime: SearchableStore, partition: str, ranked: list[tuple[str, float]], limit: int,
             base: list[str] | None) -> list[tuple[str, dict[str, Any]]]:
    """The top ``limit`` as (path, result object); anything not current (or not in the base) now is dropped, and
    so is a claim that does not hold now (its validFrom ahead, or its validTo passed)."""
    allowed = set(base) if base is not None else None
    now = utc_now()
    results: list[tuple[str, dict[str, Any]]] = []
    position = 0
    while len(results) < limit and position < len(ranked):
        batch = [path for path, _ in ranked[position:position + limit * 2]
                 if allowed is None or path in allowed]
        scores = dict(ranked[position:position + limit * 2])
        position += limit * 2
        if not batch:
            continue
        rows = {row.path: (row, content)
                for row, content in runtime.catalog.current_with_content(partition, batch) if content is not None}
        for path in batch:
            if path not in rows or len(results) >= limit or not rows[path][0].view.valid_at(now):
                continue
            row, content = rows[path]
            _, body = split_document(content.decode("utf-8"))
            results.append((path, {
                "knowledge_item_id": row.record_id,
                "knowledge_revision_id": revision_id(row.revision, row.sha256),
                "title": row.title, "content": body[:RESULT_CONTENT_CHARS],
                "content_truncated": len(body) > RESULT_CONTENT_CHARS,
                "reference": reference(row.record_id, row.revision, row.sha256),
                "score": round(scores[path], 6),
            }))
    return results


TOOLS = (
    Method("search_knowledge", TOOL_PARAMS, KnowledgeAnswer, search_knowledge, title="Search the Knowledge Base",
           description=TOOL_DESCRIPTION),
)
