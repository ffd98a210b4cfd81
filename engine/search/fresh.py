"""Keyword hits of the records the search index has not committed yet (engine/index/overlay.py).

``build_query`` (engine/search/keyword.py) is what tantivy scores committed documents with; this module
scores the overlay's documents with the same clauses (any query word over ``text``, with the title and
alias bonuses; words that cannot match alone only adding; the kind and type filters, which tantivy scores
too) and merges them with the committed hits, whose masked paths (replaced or removed records) are
excluded in the query itself.
"""

from __future__ import annotations

import json
from typing import Protocol

import tantivy

from ..index.analysis import Analyzer
from ..index.overlay import Overlay, OverlayDocument, OverlayScorer
from ..index.tantivy_index import FIELD_ORDER



class SearchRequest(Protocol):
    """What of keyword.py's ``SearchRequest`` the overlay's scoring reads (keyword.py imports this module)."""

    @property
    def kind(self) -> str | None: ...
    @property
    def type(self) -> str | None: ...
    @property
    def kinds(self) -> tuple[str, ...] | None: ...
    @property
    def unmatched_alone(self) -> frozenset[str]: ...

RESCORE_MARGIN = 2  # each costs an explanation (about 0.2 ms here)
# How each query word is scored: field and boost, as build_query's clauses (keyword.py passes its boosts).
Fields = tuple[tuple[str, float], ...]


def _any_of(scorer: OverlayScorer, document: OverlayDocument, terms: list[str], fields: Fields) -> float | None:
    total, matched = 0.0, False
    for term in terms:
        for field_name, boost in fields:
            if term not in document.terms.get(field_name, ()):  # most pairs: nothing to score
                continue
            score = scorer.term(document, field_name, term)
            if score is not None:
                total, matched = total + score * boost, True
    return total if matched else None


def _filters(scorer: OverlayScorer, document: OverlayDocument, request: SearchRequest) -> float | None:
    """What the kind, type and kinds filters add to a document's score, None when one of them excludes it."""
    total = 0.0
    for field_name, value in (("kind", request.kind), ("type", request.type)):
        if value:
            score = scorer.term(document, field_name, value)
            if score is None:
                return None
            total += score
    if request.kinds is not None:
        scores = [score for kind in request.kinds if (score := scorer.term(document, "kind", kind)) is not None]
        if not scores:
            return None
        total += sum(scores)
    return total


def overlay_score(scorer: OverlayScorer, document: OverlayDocument, terms: list[str],
                  request: SearchRequest, fields: Fields, alone_weight: float) -> float | None:
    """``document``'s score for the query ``build_query`` makes of ``terms`` and ``request``; None: no match.
    ``alone_weight``: what the words that cannot match alone add, as a share (keyword.py's)."""
    meaningful = [term for term in terms if term not in request.unmatched_alone]
    if not meaningful or len(meaningful) == len(terms):
        score = _any_of(scorer, document, terms, fields)
    else:
        score = _any_of(scorer, document, meaningful, fields)
        if score is not None:
            alone = [term for term in terms if term in request.unmatched_alone]
            score += alone_weight * (_any_of(scorer, document, alone, fields) or 0.0)
    if score is None:
        return None
    filtered = _filters(scorer, document, request)
    return None if filtered is None else score + filtered


def merged_window(searcher: tantivy.Searcher, schema: tantivy.Schema, query: tantivy.Query, terms: list[str],
                  request: SearchRequest, fields: Fields, alone_weight: float, overlay: Overlay, analyzer: Analyzer,
                  position: int, count: int) -> list[tuple[float, tantivy.Document]]:
    """Hits ``position`` to ``position + count`` of the committed index and the overlay together, best first
    (ties: committed first, as they were indexed earlier)."""
    scored = query  # a hit's explanation: the masks add nothing to a score, and each cost explain a term lookup
    if overlay.masked:
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, query)]
            + [(tantivy.Occur.MustNot, tantivy.Query.term_query(schema, "path", path)) for path in overlay.masked])
    # The committed hits are rescored with the statistics of the index once it commits the overlay (from their
    # explanations), so both kinds rank on one scale; RESCORE_MARGIN more are read in case that lifts one.
    committed = searcher.search(query, position + count + RESCORE_MARGIN, count=False).hits
    scorer = OverlayScorer(overlay, schema, analyzer, terms)
    fresh = [(score, document) for document in overlay.documents
             if (score := overlay_score(scorer, document, terms, request, fields, alone_weight)) is not None]
    merged: list[tuple[float, int, object]] = [
        (scorer.rescore(json.loads(scored.explain(searcher, address).to_json()), FIELD_ORDER), 0, address)
        for _, address in committed]
    merged += [(score, 1, document) for score, document in fresh]
    merged.sort(key=lambda hit: (-hit[0], hit[1]))
    window = []
    for score, source, item in merged[position:position + count]:
        document = searcher.doc(item) if source == 0 else item.stored  # type: ignore[union-attr, arg-type]
        window.append((score, document))
    return window
