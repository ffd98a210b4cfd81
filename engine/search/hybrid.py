"""The owner's hybrid search: keyword and the installed embedding model, fused, for the window and the CLI.

Agents have ``search_knowledge`` (spec 004) for this; the owner's search answers in the shape of
``operator/search`` (engine/search/keyword.py's hits), so the window and ``knowledge search`` show either
mode alike.  The candidates are the keyword search's best ``HYBRID_DEPTH`` (function words cannot match
alone: the owner's rule), the ``HYBRID_DEPTH`` records of the kinds asked nearest the question's vector (the
question without the asker's framing, ``asked_about``: "how do I sync my vault" as "sync my vault"), and the
long pages holding one of the ``HYBRID_DEPTH`` page passages nearest it, as near as those records (a page's
own vector holds only its first 256 tokens; its passages, engine/index/vectors.py, find it by the part that
answers).  Each gets its exact keyword score (divided by the best) and its cosine similarity, a long page's
that of its own vector or its nearest passage, whichever is nearer (min-max normalised over the candidates, as
``search_knowledge``'s hybrid does), weighed ``HYBRID_ALPHA`` to ``1 - HYBRID_ALPHA``.  While some records
still wait for their vectors (an import being embedded; the answer says so), the vectors can judge only part
of the candidates: a candidate without a vector yet counts its keyword score twice, and the similarity's
weight shrinks by the share of the keyword's candidates that have a vector (``semantic_weight``), so that
records the vectors alone brought (the nearest of the few embedded, however unrelated, min-max normalised to
the top) do not outrank the keyword's answers that wait for theirs; with every candidate's vector it is
``1 - HYBRID_ALPHA``.
A claim drawn from a page's source (a conversation's session page and the claims that cite its transcript:
both cite one retained source) gains ``EVIDENCE_PAGE_WEIGHT`` times that page's fused score among the pages
the candidates' claims cite: a question asks about a moment or a topic the page holds as a whole, where one
claim's few words miss it.  A claim no page shares a source with, whose subject the question names (the
subject's title or an alias, word for word among the question's words: "what did Dana say about the lease"),
gains ``NAMED_SUBJECT_BONUS`` instead: the embedding model hardly tells one person from another; on top of
the page's score the bonus lowered recall (docs/benchmarks/search.md).  Scores are query-local (the best is 1.0),
``minScore`` cuts relative to it; one page of at most ``limit`` hits, no cursor, led by the records titled or
aliased exactly as the query wherever the fusion puts them (engine/search/keyword.py's ``named_hits``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import tantivy

from ..core.errors import InvalidParams
from ..core.ids import utc_now
from ..index.analysis import Analyzer
from ..index.embedding import Embedder
from ..index.tantivy_index import PartitionIndex
from ..index.vectors import VectorIndex
from ..store.catalog_reads import CatalogReads, RecordRow
from ..store.store import Store
from .keyword import (
    SearchAnswer, SearchHit, SearchRequest, build_query, hit_of, indexed_document, named_hits, passes_filters,
    snippet_generator, snippet_marker,
)
from .knowledge_base import normalized

HYBRID_DEPTH = 50
HYBRID_ALPHA = 0.5
# Chosen on LoCoMo's first five conversations (docs/benchmarks/search.md): the weight over 0.3-2.0, the bonus
# first, before the evidence page's score, then kept only where a claim has no evidence page.
EVIDENCE_PAGE_WEIGHT = 0.7
NAMED_SUBJECT_BONUS = 0.1
ASKERS = "I we you"  # the asker as a question's subject: "how do I", "can we", "how do you" (``asked_about``)


def hybrid_hits(store: Store, catalog: CatalogReads, index: PartitionIndex, vectors: VectorIndex, embedder: Embedder,
                analyzer: Analyzer, partition: str, request: SearchRequest) -> tuple[SearchAnswer, bool]:
    """The best ``request.limit`` hits, and whether every current record of the partition had its vector (run on
    the store's lane, as ``search_knowledge`` is: the vector index is read where the feed writes it)."""
    terms = analyzer.query_terms(request.query)
    if not terms:
        raise InvalidParams("the query has no words to search for", field="query")
    query = build_query(index.schema, terms, request)
    searcher = index.searcher()
    lexical = {searcher.doc(address)["path"][0]: float(score)
               for score, address in searcher.search(query, HYBRID_DEPTH, count=False).hits}
    ready = vectors.follows_catalog(partition, embedder)
    vector = embedder.embed([asked_about(analyzer, request.query)])[0]
    held = vectors.holds_file()  # none before the first catch-up: nothing to read, and nothing is created
    moment = request.as_of or utc_now()
    rows: dict[str, RecordRow] = {}
    read: set[str] = set()

    def keep(paths: list[str]) -> list[str]:
        """Those of ``paths`` the request wants (current, of its kinds, valid at ``moment``), each row read once."""
        unread = [path for path in paths if path not in read]
        read.update(unread)
        rows.update((row.path, row) for row in catalog.current(partition, paths=unread)
                    if passes_filters(row, request) and row.view.valid_at(moment))
        return [path for path in paths if path in rows]

    kinds = request.kinds if request.kind is None else (request.kind,)  # the nearest of the kinds asked, not
    # the nearest of all filtered afterwards (a vault's links would crowd its notes out)
    near = vectors.nearest(partition, vector, HYBRID_DEPTH, kinds=kinds) if held else []
    wanted = set(keep([path for path, _ in near]))
    nearest = {path: similarity for path, similarity in near if path in wanted}
    # A long page comes in by a passage as near as the records that came in by their own vectors.
    floor = min(nearest.values()) if len(nearest) == HYBRID_DEPTH else -1.0
    passages = [path for path, similarity in vectors.nearest_page_passages(partition, vector, HYBRID_DEPTH)
                if similarity >= floor] if held else []
    pool = keep(list(dict.fromkeys([*lexical, *nearest, *passages])))
    found_by_keyword = [path for path in pool if path in lexical]
    beyond = [path for path in pool if path not in lexical]  # brought by the vectors: their exact keyword score
    if beyond:
        lexical.update(_scores_of(searcher, index.schema, query, beyond))
    top = max((lexical.get(path, 0.0) for path in pool), default=0.0)
    keyword = {path: min(1.0, lexical.get(path, 0.0) / top) if top > 0 else 0.0 for path in pool}
    similar = _similarities(vectors, partition, vector, pool) if held else {}
    weight = semantic_weight(found_by_keyword, similar)
    semantic = normalized(similar)
    context = _evidence_page_scores(catalog, searcher, index.schema, terms, request, vectors, partition, vector,
                                    [rows[path] for path in pool], held, weight)
    named = _named_subjects(catalog, analyzer, partition, terms, [rows[path] for path in pool if path not in context])
    fused = sorted(((_fused(keyword[path], semantic.get(path), weight) + EVIDENCE_PAGE_WEIGHT * context.get(path, 0.0)
                     + (NAMED_SUBJECT_BONUS if path not in context and rows[path].view.subject in named else 0.0),
                     path) for path in pool), key=lambda item: (-item[0], item[1]))
    best = fused[0][0] if fused else 0.0
    snippets = snippet_generator(searcher, index.schema, terms, request)
    marker = snippet_marker(analyzer, request)
    named = named_hits(store.store_id, catalog, searcher, index.schema, partition, request, moment, snippets, marker)
    hits: list[SearchHit] = list(named.values())  # the records titled exactly as the query lead, the rest follow
    for score, path in fused:
        relative = score / best if best > 0 else 0.0
        if len(hits) == request.limit or relative < request.min_score:
            break
        document = indexed_document(searcher, index.schema, path) if path not in named else None
        if document is not None:
            hits.append(hit_of(store.store_id, rows[path], document, snippets, relative, marker))
    return {"hits": hits}, ready


def asked_about(analyzer: Analyzer, query: str) -> str:
    """``query`` as the vectors compare it with the notes: without the asker's framing, its leading function words
    up to the last "I", "we" or "you" among them ("how do I sync my vault" is embedded as "sync my vault"); as
    asked when it has none ("when did Dana move", "where does the app keep its settings") or nothing after it.
    Notes state what they are about and how to do it; "how do I" asks about the asker, not the subject (chosen on
    the vault benchmark's questions of even index: docs/benchmarks/search-vault.md, last section)."""
    words = query.split()
    askers = set(analyzer.terms(ASKERS))
    framing = 0
    for number, word in enumerate(words):
        terms = set(analyzer.terms(word))
        if not terms <= analyzer.function_terms:
            break
        if terms and terms <= askers:
            framing = number + 1
    return " ".join(words[framing:]) if framing < len(words) else query


def semantic_weight(found_by_keyword: list[str], similar: dict[str, float]) -> float:
    """The weight of the similarity in the fused score: ``1 - HYBRID_ALPHA`` times the share of the keyword's
    candidates that have a vector (all of them, or no keyword candidate: the whole weight).  A partly embedded
    partition's vectors judge only some candidates, and min-max normalisation puts the nearest of those at the
    top however far they are: weighed whole, records only the vectors brought went ahead of the keyword's
    answers still waiting for their vectors."""
    if not found_by_keyword:
        return 1 - HYBRID_ALPHA
    judged = sum(path in similar for path in found_by_keyword)
    return (1 - HYBRID_ALPHA) * judged / len(found_by_keyword)


def _fused(keyword: float, semantic: float | None, weight: float) -> float:
    """A candidate's keyword and semantic scores, both 0..1, the semantic weighed ``weight``
    (``semantic_weight``); one without a vector counts its keyword score twice."""
    return (1 - weight) * keyword + weight * (keyword if semantic is None else semantic)


def _similarities(vectors: VectorIndex, partition: str, vector: np.ndarray, paths: list[str]) -> dict[str, float]:
    """Each of ``paths``' cosine similarity to ``vector``, a long page's that of its own vector or of its nearest
    passage, whichever is nearer (its vector holds only its start)."""
    similar = vectors.similarities(partition, vector, paths)
    for path, passage in vectors.page_passage_similarities(partition, vector, paths).items():
        similar[path] = max(similar.get(path, passage), passage)
    return similar


def _evidence_page_scores(catalog: CatalogReads, searcher: tantivy.Searcher, schema: tantivy.Schema,
                          terms: list[str], request: SearchRequest, vectors: VectorIndex, partition: str,
                          vector: np.ndarray, candidates: list[RecordRow], held: bool,
                          weight: float) -> dict[str, float]:
    """For each claim of ``candidates`` that a current page shares a cited source with, the best such page's
    fused score (keyword over the best of these pages, similarity min-max over them, as the candidates'), by
    the claim's path.  The pages are scored whatever kinds the request lists: they lend their score, they are
    not hits."""
    cited = {row.path: {citation.source for citation in row.view.evidence or () if citation.source}
             for row in candidates if row.kind == "claim"}
    sources = sorted(set().union(*cited.values())) if cited else []
    pages_of: dict[str, list[str]] = {}
    for source, path in catalog.pages_citing(partition, sources) if sources else []:
        pages_of.setdefault(source, []).append(path)
    pages = sorted({path for paths in pages_of.values() for path in paths})
    if not pages:
        return {}
    unfiltered = build_query(schema, terms, replace(request, kind=None, kinds=None, type=None))
    lexical = _scores_of(searcher, schema, unfiltered, pages)
    top = max(lexical.values(), default=0.0)
    semantic = normalized(_similarities(vectors, partition, vector, pages) if held else {})
    score = {path: _fused(lexical.get(path, 0.0) / top if top > 0 else 0.0, semantic.get(path), weight)
             for path in pages}
    return {claim: max(score[path] for source in cites for path in pages_of.get(source, ()))
            for claim, cites in cited.items() if any(source in pages_of for source in cites)}


def _named_subjects(catalog: CatalogReads, analyzer: Analyzer, partition: str, terms: list[str],
                    candidates: list[RecordRow]) -> set[str]:
    """The subjects of ``candidates`` (claims) that the query of ``terms`` names: every word of the subject's
    title or of an alias is among them, and not only function words (a person called Will is not named by
    "will")."""
    asked = set(terms)
    named = set()
    for subject in {row.view.subject for row in candidates if row.view.subject is not None}:
        for row in catalog.rows_for_id(partition, subject):
            names = [row.view.title, *(row.view.aliases or ())] if row.is_current else []
            for name in names:
                words = set(analyzer.query_terms(name or ""))  # the name as the query would say it
                if words and words <= asked and not words <= analyzer.function_terms:
                    named.add(subject)
    return named


def _scores_of(searcher: tantivy.Searcher, schema: tantivy.Schema, query: tantivy.Query,
               paths: list[str]) -> dict[str, float]:
    only = tantivy.Query.const_score_query(tantivy.Query.term_set_query(schema, "path", paths), 0.0)
    restricted = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, only)])
    return {searcher.doc(address)["path"][0]: float(score)
            for score, address in searcher.search(restricted, len(paths), count=False).hits}

