"""Acknowledged records the search index has not committed yet, searched beside it.

A tantivy commit costs 8-13 ms here and tantivy-py has no near-real-time reader, so a search that had to
see every acknowledged publication used to wait for one.  Instead, when the committed index is behind the
catalog version a search reads, the search takes the difference from the catalog (the ledger's backlog and
removals, read in the search's own snapshot) and holds it in memory:

- ``masked``: paths whose committed documents must not answer (removed, superseded, or about to be
  replaced by a newer revision), so an updated or deleted record never shows its old text;
- ``documents``: the current revisions the index lacks, analysed with the index's own analyzer.

The overlay's documents are scored with tantivy's BM25 (k1 1.2, b 0.75, lengths quantised to tantivy's
one-byte field norms) against the statistics the index will have once it commits them: the committed
index's document count, document frequencies and average field lengths (read through ``explain``, which
is the only way tantivy-py shows them) plus the overlay's own.  Like tantivy's, those statistics count a
replaced document until segments merge, so an overlay hit scores what it scores after the commit (to float
rounding).  The committed hits are rescored the same way from their explanations (``OverlayScorer.rescore``),
so both rank on one scale.  See docs/architecture.md, "The uncommitted overlay".

An overlay is derived per catalog version and dropped once the index holds that version; the analysed
documents are kept by (path, sha256) between searches, so a burst of searches analyses each record once.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import tantivy

from .analysis import Analyzer

K1, B = 1.2, 0.75  # tantivy's BM25 parameters
ANALYSED_FIELDS = ("text", "title", "aliases")
RAW_FIELDS = ("kind", "type", "claim_kind")
LEARN_TRIES = 8  # terms tried to find a committed match that shows a field's average length


def _field_norm_table() -> list[int]:
    """tantivy's (and Lucene's) one-byte field lengths: exact up to 24, then 8 steps per power of two."""
    table = []
    for code in range(256):
        if code < 24:
            table.append(code)
            continue
        byte = code - 24
        bits, shift = byte & 0b111, byte >> 3
        table.append(24 + (bits if shift == 0 else (bits | 8) << (shift - 1)))
    return table


FIELD_NORMS = _field_norm_table()


def quantised_length(tokens: int) -> int:
    """The field length tantivy scores with: ``tokens`` rounded down to its one-byte code."""
    return FIELD_NORMS[bisect.bisect_right(FIELD_NORMS, tokens) - 1]


@dataclass(frozen=True)
class OverlayDocument:
    """One current revision the committed index lacks: its terms per field, and the stored fields a hit shows."""

    path: str
    sha256: str
    terms: dict[str, Counter[str]]  # analysed field -> term -> occurrences; raw field -> its one value
    lengths: dict[str, int]  # field -> tokens
    stored: tantivy.Document  # path, id, kind, type, revision, title, body: as a committed document's

    def frequency(self, field_name: str, term: str) -> int:
        counts = self.terms.get(field_name)
        return counts.get(term, 0) if counts is not None else 0


def analyse(analyzer: Analyzer, document: dict[str, Any], sha256: str) -> OverlayDocument:
    """``document`` as engine/index/tantivy_index.py's ``index_document`` builds it, analysed as tantivy would."""
    terms: dict[str, Counter[str]] = {}
    lengths: dict[str, int] = {}
    for name in ANALYSED_FIELDS:
        tokens = analyzer.tantivy.analyze(document[name])
        terms[name], lengths[name] = Counter(tokens), len(tokens)
    for name in RAW_FIELDS:
        if name in document:
            terms[name], lengths[name] = Counter([document[name]]), 1
    stored = tantivy.Document(**{name: document[name] for name in ("path", "id", "kind", "type", "revision",
                                                                      "title", "body")})
    return OverlayDocument(document["path"], sha256, terms, lengths, stored)


@dataclass
class CommittedStatistics:
    """BM25 statistics of the committed index as tantivy scores with them, learnt through ``explain``.

    ``docs`` is tantivy's N (documents in all segments, replaced ones included until a merge); ``average``
    holds each field's average length, learnt the first time a search needs that field.  Kept while the
    index holds one catalog version; a searcher of a commit that has not been recorded yet may differ by
    that commit, which the scores of the overlay's hits tolerate as they tolerate the replaced documents.
    """

    docs: int | None = None
    average: dict[str, float] = field(default_factory=dict)

    def learn(self, searcher: tantivy.Searcher, schema: tantivy.Schema, field_name: str,
              candidates: Iterable[str]) -> None:
        """Read N and ``field_name``'s average length from the explanation of the first committed match of one
        of the ``candidates`` in that field (a handful at most are tried)."""
        if field_name in self.average:
            return
        for term in itertools.islice(dict.fromkeys(candidates), LEARN_TRIES):
            query = tantivy.Query.term_query(schema, field_name, term)
            hits = searcher.search(query, 1, count=False).hits
            if not hits:
                continue
            constants = _constants(json.loads(query.explain(searcher, hits[0][1]).to_json()))
            if "N" in constants and "avgdl" in constants:
                self.docs = int(constants["N"])
                self.average[field_name] = float(constants["avgdl"])
                return


@dataclass(frozen=True)
class Overlay:
    """What a search at catalog ``version`` adds to and hides from the committed index."""

    version: int
    masked: frozenset[str]
    documents: tuple[OverlayDocument, ...]
    searcher: tantivy.Searcher  # the committed index as the search reads it, taken after its snapshot began
    committed: CommittedStatistics

    def __bool__(self) -> bool:
        return bool(self.masked or self.documents)


_TERM = re.compile(r'Term=Term\(field=(\d+), type=Str, "(.*)"\)$')


def _constants(node: dict[str, Any]) -> dict[str, float]:
    """The named constants of a BM25 explanation by name (``N, total number of docs`` -> N; of two with one
    name, the later in document order), walked without recursion: every committed hit of a search is rescored."""
    constants: dict[str, float] = {}
    pending = [node]
    while pending:
        node = pending.pop()
        details = node.get("details")
        if details:
            pending.extend(reversed(details))
        else:
            constants[node.get("description", "").split(",", 1)[0]] = node.get("value", 0.0)
    return constants


class OverlayScorer:
    """BM25 of overlay documents with the statistics the index will have once it commits them."""

    def __init__(self, overlay: Overlay, schema: tantivy.Schema, analyzer: Analyzer, hints: Iterable[str] = ()
                 ) -> None:
        self.overlay = overlay
        self.hints = tuple(hints)  # the query's terms: likely to have committed matches in every field
        self.analyzer = analyzer
        self.committed = overlay.committed
        self.searcher = overlay.searcher
        self.schema = schema
        self._weights: dict[tuple[str, str], float] = {}
        self._averages: dict[str, float] = {}
        self._overlay_frequencies: dict[tuple[str, str], int] = {}
        self._clauses: dict[tuple[str | None, tuple[str, ...]], tuple[str, str] | None] = {}
        self._norms: dict[tuple[float, int], float] = {}  # (average length, tokens) -> BM25's length norm

    def _docs(self) -> int:
        committed = self.committed.docs if self.committed.docs is not None else self.searcher.num_docs
        return committed + len(self.overlay.documents)

    def _average(self, field_name: str) -> float:
        if field_name in self._averages:
            return self._averages[field_name]
        committed_docs = self.committed.docs if self.committed.docs is not None else self.searcher.num_docs
        own = sum(document.lengths.get(field_name, 0) for document in self.overlay.documents)
        total = committed_docs + len(self.overlay.documents)
        known = self.committed.average.get(field_name)
        if known is None:  # no committed match has shown this field's average: the overlay's own stands in
            return (own / len(self.overlay.documents) if self.overlay.documents else 1.0) or 1.0
        self._averages[field_name] = ((known * committed_docs + own) / total if total else 1.0) or 1.0
        return self._averages[field_name]

    def _overlay_frequency(self, field_name: str, term: str) -> int:
        """How many of the overlay's documents hold ``term`` in ``field_name`` (counted once per scorer: every
        committed hit's rescoring asks it for each of its terms)."""
        key = (field_name, term)
        if key not in self._overlay_frequencies:
            self._overlay_frequencies[key] = sum(1 for document in self.overlay.documents
                                                 if term in document.terms.get(field_name, ()))
        return self._overlay_frequencies[key]

    def _idf(self, field_name: str, term: str) -> float:
        key = (field_name, term)
        if key not in self._weights:
            frequency = self.searcher.doc_freq(field_name, term) + self._overlay_frequency(field_name, term)
            docs = self._docs()
            self._weights[key] = math.log(1 + (docs - frequency + 0.5) / (frequency + 0.5))
        return self._weights[key]

    def _candidates(self, field_name: str, term: str) -> Iterator[str]:
        """Terms likely to have a committed match in ``field_name``: ``term``, the query's, the words of a
        committed title (each is in ``title`` and ``text``), the overlay's own terms of that field."""
        yield term
        yield from self.hints
        if field_name in ("text", "title"):
            for _, address in self.searcher.search(tantivy.Query.all_query(), 1, count=False).hits:
                yield from self.analyzer.terms(self.searcher.doc(address).get_first("title") or "")
        for document in self.overlay.documents:
            yield from document.terms.get(field_name, ())

    def term(self, document: OverlayDocument, field_name: str, term: str) -> float | None:
        """``term``'s BM25 score in ``document``'s ``field_name``; None when it does not occur there."""
        frequency = document.frequency(field_name, term)
        if not frequency:
            return None
        if field_name not in self.committed.average:
            self.committed.learn(self.searcher, self.schema, field_name, self._candidates(field_name, term))
        tokens, average = document.lengths.get(field_name, 0), self._average(field_name)
        norm = self._norms.get((average, tokens))
        if norm is None:  # the same for every document of that length: a search asks it of each
            norm = self._norms[(average, tokens)] = K1 * (1 - B + B * quantised_length(tokens) / average)
        return (K1 + 1) * self._idf(field_name, term) * frequency / (frequency + norm)

    def rescore(self, explanation: dict[str, Any], fields: tuple[str, ...]) -> float:
        """A committed hit's score recomputed from its explanation (``Query.explain``) with the statistics the
        index will have once it commits the overlay, as the overlay's own hits are scored: the committed and
        the overlay's hits then rank on one scale.  ``fields``: the schema's fields by number."""
        description = explanation.get("description", "")
        children = explanation.get("details") or []
        if description.startswith("TermQuery"):
            return self._rescored_term(explanation, fields)
        if description.startswith("Boost x"):
            boost = float(description[len("Boost x"):].split(" ", 1)[0])
            return boost * sum(self.rescore(child, fields) for child in children)
        if description.startswith("BooleanClause"):
            return sum(self.rescore(child, fields) for child in children)
        return float(explanation.get("value", 0.0))  # nothing this scorer knows: tantivy's own value

    def _rescored_term(self, explanation: dict[str, Any], fields: tuple[str, ...]) -> float:
        clause = self._clause(next(iter(explanation.get("context", ())), None), fields)
        constants = _constants(explanation)
        if clause is None or not ("freq" in constants and "dl" in constants and "n" in constants):
            return float(explanation.get("value", 0.0))
        field_name, term = clause
        frequency, length = constants["freq"], constants["dl"]
        if self.committed.docs is None and "N" in constants:
            self.committed.docs = int(constants["N"])
        if field_name not in self.committed.average and "avgdl" in constants:
            self.committed.average[field_name] = float(constants["avgdl"])
        documents = self._docs()
        df = int(constants["n"]) + self._overlay_frequency(field_name, term)
        idf = math.log(1 + (documents - df + 0.5) / (df + 0.5))
        norm = K1 * (1 - B + B * length / self._average(field_name))
        return (K1 + 1) * idf * frequency / (frequency + norm)

    def _clause(self, context: str | None, fields: tuple[str, ...]) -> tuple[str, str] | None:
        """The field and term a TermQuery's explanation names in its first ``context``; None when it names
        none of ``fields``.  Parsed once per scorer: every committed hit explains the same clauses."""
        key = (context, fields)
        if key not in self._clauses:
            found = _TERM.match(context) if context is not None else None
            self._clauses[key] = None if found is None or int(found.group(1)) >= len(fields) \
                else (fields[int(found.group(1))], json.loads(f'"{found.group(2)}"'))
        return self._clauses[key]
