"""The recall gate's candidates: which pages a user message might need, read on the store's lane.

Three sources (``recallGate.candidates``):

- ``keyword``: BM25 over each current page's title, aliases and body (the
  search index, title matches boosted), keeping the top ``maxCandidates``
  pages that share at least one word with the message.  Each carries its
  best passages (``PassageFinder``: at most ``excerpts`` passages of
  ``excerptChars``, ``pageChars`` in all).
- ``hybrid``: the keyword shortlist joined with the pages whose vectors in
  the store's vector index are nearest to the message's (the search's
  embedding model), merged by reciprocal rank to ``maxCandidates``: pages
  that share no word with the message can be offered too;
- ``model``: the page label index (type, title, one exact lookup name),
  most connected first, up to ``maxIndexChars``; the Decision model picks
  the shortlist (engine/gate/turn.py).

Both apply the Knowledge Index's label rules: ``source`` and ``artifact``
pages are never candidates, nor is a page whose title reads like an
instruction or contains markup.  Nothing here writes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import tantivy

from ..index.analysis import Analyzer
from ..index.embedding import Embedder
from ..index.searchable import SearchableStore
from ..index.vectors import embedding_text
from ..store.catalog_reads import RecordRow
from ..vault.frontmatter import split_document
from ..memory.knowledge_index import UNLISTED_PAGE_TYPES, page_lookup_name, ranked_page_labels
from ..core.errors import KnowledgeError
from ..core.labels import clip, is_unsafe_label
from ..search.passages import ELLIPSIS, PassageFinder
from ..search.keyword import SearchRequest, build_query

TITLE_MAX_CHARS = 200
# Hits fetched beyond maxCandidates, so pages skipped for an unsafe title can be replaced.
FETCH_EXTRA = 20
RRF_K = 60             # hybrid: reciprocal rank fusion's constant (as search_knowledge's rrf mode)
SEMANTIC_FETCH = 100   # hybrid: nearest records read from the vector index, of which pages are kept
# What a hybrid turn's answer and log line say of the vectors it read (``vectors``); without an embedding model it
# is the embedding runtime's state instead (not_configured, not_installed, failed).
VECTORS_READY, VECTORS_BUILDING, VECTORS_INDEX_FAILED = "ready", "building", "index_failed"


class CandidateDeadline(Exception):
    """The gate's deadline passed while candidates were being read."""


@dataclass
class Candidate:
    """One page the Decision model is asked about."""

    id: str
    revision: int
    type: str
    title: str                       # a safe, one-line label
    name: str                        # what knowledge_lookup resolves to this page
    excerpt: str = ""                # keyword: the passages; model: the start of the page (pageChars)
    passages: list[str] = field(default_factory=list)
    label: str = ""                  # model: the label offered to the choice question
    document: str = ""               # what is scored (set by the scoring plan)
    page_text: str = ""              # title and body, as the vector index embeds it (embedding/ models score it)


@dataclass
class CandidateSet:
    candidates: list[Candidate]
    offered: int                     # pages offered: keyword matches, or labels in the model's index
    eligible: int = 0                # model: pages that could have been listed


def keyword_candidates(runtime: SearchableStore, partition: str, analyzer: Analyzer, finder: PassageFinder,
                       message: str, *, max_candidates: int, excerpts: int, excerpt_chars: int,
                       page_chars: int, deadline: float, content_words_only: bool = False,
                       clock: Callable[[], float] = time.monotonic) -> CandidateSet:
    """The best keyword matches with their passages (on the lane); ``content_words_only`` leaves the message's
    function words out of the query (hybrid), so a page sharing only "the" is no match."""
    _check(deadline, clock)
    terms = analyzer.query_terms(message)
    if content_words_only:
        terms = [term for term in terms if term not in analyzer.function_terms]
    if not terms:
        return CandidateSet([], 0)
    runtime.indexes.catch_up(partition)
    index = runtime.indexes.get(partition)
    schema = index.schema
    query = tantivy.Query.boolean_query(
        [(tantivy.Occur.Must, build_query(schema, terms, SearchRequest(query=message, kind="page")))]
        + [(tantivy.Occur.MustNot, tantivy.Query.term_query(schema, "type", kind)) for kind in UNLISTED_PAGE_TYPES])
    searcher = index.searcher()
    result = searcher.search(query, max_candidates + FETCH_EXTRA, count=True)
    paths = [searcher.doc(address)["path"][0] for _, address in result.hits]
    rows = {row.path: row for row in runtime.catalog.current(partition, kind="page", paths=paths)}
    candidates: list[Candidate] = []
    skipped = 0
    for path in paths:
        row = rows.get(path)
        if row is None or row.type in UNLISTED_PAGE_TYPES or is_unsafe_label(row.title):
            skipped += 1
            continue
        if len(candidates) == max_candidates:
            continue   # only counted: offered is every eligible match seen
        _check(deadline, clock)
        candidates.append(_with_passages(runtime, partition, finder, message, row, excerpts, excerpt_chars,
                                         page_chars))
    # Matches past the fetched hits are counted as offered without their titles being checked.
    return CandidateSet(candidates, int(result.count or 0) - skipped)


def hybrid_candidates(runtime: SearchableStore, partition: str, analyzer: Analyzer, finder: PassageFinder,
                      message: str, vector: Any, *, max_candidates: int, excerpts: int, excerpt_chars: int,
                      page_chars: int, deadline: float, clock: Callable[[], float] = time.monotonic
                      ) -> CandidateSet:
    """The keyword shortlist joined with the pages nearest to the message's ``vector`` (on the lane).

    The keyword shortlist counts content words only (docs/recall-gate.md: on LoCoMo no gold page was
    shortlisted through function words alone, while most off-topic messages reached such pages). Both
    shortlists are ``max_candidates`` long; they are merged by reciprocal rank (a page on both counts twice,
    ties go to the keyword rank) and cut to ``max_candidates``.
    """
    keyword = keyword_candidates(runtime, partition, analyzer, finder, message, max_candidates=max_candidates,
                                 excerpts=excerpts, excerpt_chars=excerpt_chars, page_chars=page_chars,
                                 deadline=deadline, content_words_only=True, clock=clock)
    _check(deadline, clock)
    semantic = nearest_pages(runtime, partition, vector, max_candidates)
    ranks: dict[str, float] = {}
    for rank, page_id in enumerate(c.id for c in keyword.candidates):
        ranks[page_id] = ranks.get(page_id, 0.0) + 1 / (RRF_K + rank + 1)
    for rank, row in enumerate(semantic):
        ranks[row.record_id] = ranks.get(row.record_id, 0.0) + 1 / (RRF_K + rank + 1)
    keyword_rank = {c.id: rank for rank, c in enumerate(keyword.candidates)}
    order = sorted(ranks, key=lambda page_id: (-ranks[page_id], keyword_rank.get(page_id, max_candidates)))
    chosen = order[:max_candidates]
    by_id = {c.id: c for c in keyword.candidates}
    rows = {row.record_id: row for row in semantic}
    candidates = []
    for page_id in chosen:
        if page_id not in by_id:
            _check(deadline, clock)
            by_id[page_id] = _with_passages(runtime, partition, finder, message, rows[page_id], excerpts,
                                            excerpt_chars, page_chars)
        candidates.append(by_id[page_id])
    only_semantic = sum(1 for row in semantic if row.record_id not in keyword_rank)
    return CandidateSet(candidates, keyword.offered + only_semantic)


def vectors_state(runtime: SearchableStore, partition: str, embedder: Embedder) -> str:
    """How far the store's vectors under ``embedder`` are (on the lane): ``ready`` when they follow every current
    record (with evidence passages), ``building`` while the vector feed still has some to embed, ``index_failed``
    when the file cannot be read (hybrid then takes the keyword shortlist alone)."""
    try:
        return VECTORS_READY if runtime.vectors.follows_catalog(partition, embedder) else VECTORS_BUILDING
    except KnowledgeError:
        return VECTORS_INDEX_FAILED


def nearest_pages(runtime: SearchableStore, partition: str, vector: Any, count: int) -> list[RecordRow]:
    """The ``count`` eligible pages nearest to ``vector`` among its ``SEMANTIC_FETCH`` nearest records and
    evidence passages, nearest first (on the lane): a page is as near as the nearest of its own vector and its
    evidence passages' (engine/index/vectors.py). Claims share the vector index with pages, so a page further
    away than that many records is not offered; restricting the search to every page's path instead cost 3-5x
    as much here."""
    try:
        nearest = dict(runtime.vectors.nearest(partition, vector, SEMANTIC_FETCH))
        for path, similarity in runtime.vectors.nearest_passages(partition, vector, SEMANTIC_FETCH):
            nearest[path] = max(similarity, nearest.get(path, similarity))
    except KnowledgeError:
        return []   # no usable vector index: the keyword shortlist alone
    paths = sorted(nearest, key=lambda path: -nearest[path])
    rows = {row.path: row for row in runtime.catalog.current(partition, kind="page", paths=paths)}
    eligible = [rows[path] for path in paths if path in rows and rows[path].type not in UNLISTED_PAGE_TYPES
                and not is_unsafe_label(rows[path].title)]
    return eligible[:count]


def _with_passages(runtime: SearchableStore, partition: str, finder: PassageFinder, message: str, row: RecordRow,
                   excerpts: int, excerpt_chars: int, page_chars: int) -> Candidate:
    body = _body(runtime, partition, row)
    passages = [p.text for p in finder.best(body, message, max_passages=excerpts, passage_chars=excerpt_chars,
                                            page_chars=page_chars)]
    candidate = _candidate(runtime, partition, row)
    candidate.page_text = embedding_text(row.title, body)
    candidate.passages = passages
    candidate.excerpt = "\n\n".join(passages)
    return candidate


def stored_page_vectors(runtime: SearchableStore, model: str, digests: list[str]) -> dict[str, bytes]:
    """The vectors the store's vector index already holds for these page texts under ``model`` (on the lane)."""
    try:
        return runtime.vectors.cached_vectors(model, digests)
    except KnowledgeError:
        return {}   # a damaged or busy derived file: the Decision model embeds the pages itself


def model_index(runtime: SearchableStore, partition: str, *, max_index_chars: int, now: Any,
                deadline: float, clock: Callable[[], float] = time.monotonic) -> CandidateSet:
    """Every label that fits ``maxIndexChars``, most connected first (on the lane)."""
    _check(deadline, clock)
    labels, eligible = ranked_page_labels(runtime.store, runtime.catalog, partition, now, max_index_chars)
    candidates = [Candidate(label.id, 0, label.type, label.title, label.name, label=label.label)
                  for label in labels]
    return CandidateSet(candidates, len(candidates), eligible)


def read_page_starts(runtime: SearchableStore, partition: str, candidates: list[Candidate], page_chars: int,
                     deadline: float, clock: Callable[[], float] = time.monotonic) -> list[Candidate]:
    """The shortlisted pages as they are now, each with the start of its body (on the lane)."""
    _check(deadline, clock)
    rows = {row.record_id: row for row in runtime.catalog.current(partition, kind="page",
                                                                  record_ids=[c.id for c in candidates])}
    fresh = []
    for candidate in candidates:
        row = rows.get(candidate.id)
        if row is None or row.type in UNLISTED_PAGE_TYPES or is_unsafe_label(row.title):
            continue   # gone, retyped or retitled since the index was read
        page = _candidate(runtime, partition, row)
        page.label = candidate.label
        body = _body(runtime, partition, row)
        page.page_text = embedding_text(row.title, body)
        page.excerpt = page_start(body, page_chars)
        fresh.append(page)
    return fresh


def page_start(body: str, limit: int) -> str:
    """The first ``limit`` characters of a page body, cut at a word boundary."""
    text = body.strip()
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - len(ELLIPSIS))
    end = cut if cut > limit // 2 else limit - len(ELLIPSIS)
    return text[:end].rstrip() + ELLIPSIS


def _check(deadline: float, clock: Callable[[], float]) -> None:
    """``deadline`` is on ``clock`` (the Decision runtime's, in a turn)."""
    if clock() >= deadline:
        raise CandidateDeadline


def _candidate(runtime: SearchableStore, partition: str, row: RecordRow) -> Candidate:
    name = page_lookup_name(runtime.catalog, partition, row.record_id, row.title, row.view)
    return Candidate(row.record_id, row.revision, row.type or "page", clip(row.title, TITLE_MAX_CHARS), name)


def _body(runtime: SearchableStore, partition: str, row: RecordRow) -> str:
    """The page body of the catalogued revision (the archive holds exactly the bytes the catalog hashed)."""
    stored = runtime.catalog.revision(partition, row.record_id, row.revision, row.sha256)
    if stored is None:
        return ""
    _, body = split_document(stored.text)
    return body
