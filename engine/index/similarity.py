"""The ``embedding`` Decision provider: an embedding model answers the boolean question by calibrated similarity.

It lives with the embedding model (the index layer, above the Decision runtime); the engine hands it to
``DecisionRuntime`` as the loader of the ``embedding/`` kind (``DECISION_LOADERS``).

``decisionModel: "embedding/<installed embedding model>"`` (the catalogue's
``all-minilm-l6-v2-int8`` installs from PyPI, so an owner without the model
hub still has a Decision model).  Each page of a turn scores

    probabilityTrue = sigmoid(CALIBRATION's coefficients . the page's Features + b)

over what is known at turn time without another model run (``turn_features``): ``s``, the cosine
similarity of the message's vector and the page's best passage (``page_passages``: a short page is one
passage, its whole text; a long one is cut into titled 120-word passages, so a long page is judged by the
part that matches, not by the first 256 tokens); how far ``s`` stands above the best of the turn's other
candidates, below its best and above its mean; the page's passage count; its place in the shortlist (BM25
for keyword candidates, the fused rank for hybrid ones); the share of the message's content words the page
holds, each weighted by how rare it is among the turn's candidates; and the share of the names the message
mentions that the page holds.  ``CALIBRATION`` was fitted by logistic regression on LoCoMo conversations 0-4
in two page shapes (session summaries and session transcripts; engine/bench/gate_shapes.py), and
``HIGH_THRESHOLD`` is the documented ``highThreshold`` the gate uses when the owner sets none
(docs/recall-gate.md).  A page's score depends on the shortlist it came in.

The passage cut does not depend on the message, so passage vectors are kept
by their text's sha256 (``remember`` takes those the store's vector index
already holds: its feed caches long pages' passages when this model is also
the search's ``embeddingModel``), and a turn whose pages are known costs one
embedding, the message's.  A cross-encoder is stronger; this is the
offline, cheap one.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np

from models.installed import InstalledModel

from ..core.words import counted
from ..decision.provider import FAILED, LOADING, READY, PairScores, Untokenized
from .analysis import FUNCTION_WORDS, Analyzer
from .embedding import Embedder, EmbeddingStopped, text_digest

log = logging.getLogger(__name__)

KIND = "embedding"
VECTOR_CACHE_SIZE = 8192      # page vectors kept (384 floats each: 12 MB)
PAGE_TERMS_CACHE_SIZE = 1024  # pages whose distinct terms a scorer keeps for the word features (analyzing ten
                              # 17 KB pages took 10-115 ms on the shared 2-core machine, by its load; cached 0.2 ms)
MIN_DIMENSIONS = 8            # fewer numbers per text: a reranker's logits, not an embedding


PASSAGE_WORDS = 120           # words of a long page's passage (about 160 tokens: inside the model's 256)
PASSAGE_STRIDE = 100          # a passage starts this many words after the one before (20 words shared)
SINGLE_PASSAGE_WORDS = 180    # a page body this long or shorter is one passage: the whole text, as indexed


def page_passages(text: str) -> list[str]:
    """The passages a page is scored by: its whole text when its body is short (the vector the store's index
    holds), else its title with each ``PASSAGE_WORDS``-word passage of its body, every word in at least one.

    ``text`` is the page's vector text (``embedding_text``: the title, a blank line, the body). The cut does not
    depend on the message, so passage vectors are kept by their text's sha256 like page vectors.
    """
    title, separator, body = text.partition("\n\n")
    if not separator:
        title, body = "", text
    words = body.split()
    if len(words) <= SINGLE_PASSAGE_WORDS:
        return [text]
    head = f"{title}\n\n" if title else ""
    starts = range(0, max(1, len(words) - PASSAGE_WORDS + PASSAGE_STRIDE), PASSAGE_STRIDE)
    return [head + " ".join(words[start:start + PASSAGE_WORDS]) for start in starts]


_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*")
_POSSESSIVE = re.compile(r"['’]s$")


def message_names(message: str) -> set[str]:
    """The names a message mentions: capitalised words that do not start a sentence (nor the message), function
    words excluded, possessive ``'s`` dropped, lowercased ("What did Caroline's mother say?" -> {"caroline"})."""
    names = set()
    for match in _CAPITALISED.finditer(message):
        before = message[:match.start()].rstrip()
        if not before or before[-1] in ".!?:\n\"":
            continue
        word = _POSSESSIVE.sub("", match.group()).lower()
        if word and word not in FUNCTION_WORDS:
            names.add(word)
    return names


class Features(NamedTuple):
    """What a candidate is calibrated by, all known at turn time without another model run."""

    similarity: float      # the page's best passage's cosine with the message
    lead: float            # similarity - the best of the turn's other candidates (the similarity itself when alone)
    below: float           # the turn's best similarity - similarity (0 for the best page)
    spread: float          # similarity - the mean similarity of the turn's candidates
    log_passages: float    # log of the page's passage count (the best-of-many edge of long pages)
    rank: float            # log(1 + place in the shortlist): keyword candidates by BM25, hybrid by their fused rank
    overlap: float         # share of the message's content words in the page, each weighted by its rarity in the turn
    names: float           # share of the message's names (``message_names``) in the page (0 when it has none)


def turn_features(similarities: Sequence[float], passages: Sequence[int], message: str = "",
                  documents: Sequence[str] = (), analyzer: Analyzer | None = None,
                  page_terms: Sequence[frozenset[str]] | None = None) -> list[Features]:
    """One turn's ``Features``, candidates in shortlist order.  Without ``documents`` the two word features are 0.

    ``overlap`` weights each of the message's content terms (the engine analyzer's, function words excluded) by
    ``log((n + 1) / (1 + pages of the turn holding it))``, so a word every candidate shares counts for nothing
    and a word one page alone holds counts most; a page alone in its turn scores 0.  ``page_terms``: each
    document's distinct analyzer terms when the caller keeps them (``SimilarityScorer`` does, by text digest).
    """
    count = len(similarities)
    best = max(similarities, default=0.0)
    mean = sum(similarities) / count if count else 0.0
    overlap, names = [0.0] * count, [0.0] * count
    if documents and message:
        analyzer = analyzer or Analyzer()
        if page_terms is None:
            page_terms = [frozenset(analyzer.terms(document)) for document in documents]
        wanted = set(analyzer.query_terms(message)) - analyzer.function_terms
        weights = {term: math.log((count + 1) / (1 + sum(term in terms for terms in page_terms))) for term in wanted}
        total = sum(weights.values())
        mentioned = [set(analyzer.terms(name)) for name in message_names(message)]
        mentioned = [terms for terms in mentioned if terms]
        for position, terms in enumerate(page_terms):
            overlap[position] = sum(weights[term] for term in wanted & terms) / total if total > 0 else 0.0
            names[position] = sum(name <= terms for name in mentioned) / len(mentioned) if mentioned else 0.0
    out = []
    for position, (similarity, passage_count) in enumerate(zip(similarities, passages)):
        others = max((s for other, s in enumerate(similarities) if other != position), default=0.0)
        out.append(Features(similarity, similarity - others, best - similarity, similarity - mean,
                            math.log(max(passage_count, 1)), math.log1p(position), overlap[position],
                            names[position]))
    return out


@dataclass(frozen=True)
class Calibration:
    """``probabilityTrue = sigmoid(a * similarity + gap * lead + passages * log(passage count) + below * below +
    spread * spread + rank * rank + overlap * overlap + names * names + b)`` over a candidate's ``Features``.

    A page that stands out of its shortlist (``lead``, ``spread``), ranks high in it, holds the message's rarer
    words and its names scores higher than one of ten alike; the passage term offsets the best-of-many advantage
    of long pages.
    """

    a: float
    b: float
    gap: float = 0.0
    passages: float = 0.0
    below: float = 0.0
    spread: float = 0.0
    rank: float = 0.0
    overlap: float = 0.0
    names: float = 0.0

    def score(self, f: Features) -> float:
        z = (self.a * f.similarity + self.gap * f.lead + self.passages * f.log_passages + self.below * f.below
             + self.spread * f.spread + self.rank * f.rank + self.overlap * f.overlap + self.names * f.names + self.b)
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)

    def probability(self, similarity: float, lead: float = 0.0, passages: int = 1) -> float:
        """A candidate's probability from its similarity terms alone (the other features 0)."""
        return self.score(Features(similarity, lead, 0.0, 0.0, math.log(max(passages, 1)), 0.0, 0.0, 0.0))

    def probabilities(self, similarities: Sequence[float], passages: Sequence[int], message: str = "",
                      documents: Sequence[str] = (), analyzer: Analyzer | None = None,
                      page_terms: Sequence[frozenset[str]] | None = None) -> list[float]:
        """One turn's probabilities, candidates in shortlist order (``turn_features``)."""
        return [self.score(f) for f in turn_features(similarities, passages, message, documents, analyzer,
                                                     page_terms)]

    def coefficients(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in COEFFICIENTS}


# Calibration's coefficient for each of Features' fields, in order, then the intercept (what a fit solves for).
COEFFICIENTS = ("a", "gap", "below", "spread", "passages", "rank", "overlap", "names", "b")
# Fitted by `python -m engine.bench.gate_shapes --fit` on LoCoMo conversations 0-4 in two page shapes (session
# summaries, and session transcripts scored by their passages): the logistic regression of "gold" on ``Features``
# over every (question, keyword-shortlisted page) pair, gold being one of the question's gold pages (the sessions
# of its evidence turns).  docs/benchmarks/gate-quality.md reports on conversations 5-9 and off-topic turns the fit
# never saw.
CALIBRATION = Calibration(a=0.014, gap=12.001, below=3.587, spread=0.878, passages=-0.06, rank=-1.259,
                          overlap=1.994, names=2.505, b=-3.25)
# The documented highThreshold of this Decision model (used when recallGate sets none): the lowest threshold
# whose precision was at least 0.75 on both shapes of the fit conversations (docs/recall-gate.md).
HIGH_THRESHOLD = 0.55


class SimilarityScorer(Untokenized):
    """A loaded embedding model scoring pairs by calibrated cosine similarity (a ``ScoringProvider``)."""

    max_pair_tokens: int | None = None
    tokens_per_second: float | None = None
    default_high_threshold: float = HIGH_THRESHOLD   # recallGate sets no highThreshold: this one is in force

    def __init__(self, model: InstalledModel, calibration: Calibration = CALIBRATION,
                 cache_size: int = VECTOR_CACHE_SIZE) -> None:
        self.model = model
        self.calibration = calibration
        self.embedder = Embedder(model)   # the measured run settings (one thread was no faster a turn)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()
        self.analyzer = Analyzer()
        self._terms: OrderedDict[str, frozenset[str]] = OrderedDict()   # page text digest -> its distinct terms
        self._state = LOADING
        self._reason: str | None = None
        self._loaded = threading.Event()
        self.embedded_texts = 0      # texts run through the model by score_pairs (the message included)

    # --- lifecycle ------------------------------------------------------------------------------

    def load(self) -> None:
        try:
            self.embedder.load()
            if self.embedder.dimensions < MIN_DIMENSIONS:
                raise ValueError(f"{self.model.name} answers {counted(self.embedder.dimensions, 'number')} per text: "
                                 "it is not an embedding model (a reranker is selected as onnx/NAME)")
            self._state = READY
            log.info("decision model embedding/%s ready: %d dimensions", self.model.name, self.embedder.dimensions)
        except Exception as exc:  # onnxruntime, tokenizers and the hash check raise their own types
            self._reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            self._state = FAILED
            log.warning("decision model embedding/%s failed to load: %s", self.model.name, self._reason)
        finally:
            self._loaded.set()

    def wait_loaded(self, timeout: float | None = None) -> bool:
        return self._loaded.wait(timeout)

    @property
    def state(self) -> str:
        return self._state

    @property
    def reason(self) -> str | None:
        return self._reason

    def serves(self, settings: object) -> bool:
        return True

    @property
    def fingerprint(self) -> str:
        """What the page vectors are keyed by (the same as the store's vector index uses for this model)."""
        return self.embedder.fingerprint

    # --- page vectors ---------------------------------------------------------------------------

    def remember(self, vectors: Mapping[str, bytes | np.ndarray]) -> None:
        """Vectors already computed under ``fingerprint`` (text sha256 -> unit vector)."""
        dimensions = self.embedder.dimensions
        with self._cache_lock:
            for digest, vector in vectors.items():
                array = np.frombuffer(vector, dtype=np.float32) if isinstance(vector, bytes) else \
                    np.asarray(vector, dtype=np.float32)
                if array.shape == (dimensions,):
                    self._keep(digest, array)

    def known(self, digests: Sequence[str]) -> set[str]:
        with self._cache_lock:
            return {digest for digest in digests if digest in self._cache}

    def digests(self, documents: Sequence[str]) -> list[str]:
        return passage_digests(documents)

    def _keep(self, digest: str, vector: np.ndarray) -> None:
        self._cache[digest] = vector
        self._cache.move_to_end(digest)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    # --- scoring --------------------------------------------------------------------------------

    def score_pairs(self, query: str, documents: Sequence[str], *, deadline: float,
                    max_pair_tokens: int | None = None,
                    before_dispatch: Callable[[], None] | None = None) -> PairScores:
        """Each document scored by its best passage (``page_passages``), calibrated within the turn; one embedding
        run for the message and the passages not seen before, left between two of its batches once the deadline
        has passed: the documents whose passages were all embedded by then are scored (calibrated among
        themselves), the others are None, and the vectors run are kept for the next turn."""
        if time.monotonic() >= deadline:
            return PairScores(scores=[None] * len(documents))
        cut = [page_passages(document) for document in documents]
        digests = [[text_digest(text) for text in passages] for passages in cut]   # each passage hashed once
        texts_by_digest = {digest: text for passages, named in zip(cut, digests)
                           for digest, text in zip(named, passages)}
        with self._cache_lock:
            cached = {digest: self._cache[digest] for digest in texts_by_digest if digest in self._cache}
            for digest in cached:
                self._cache.move_to_end(digest)
            message = self._cache.get(text_digest(query))   # handed over by a hybrid candidate step
        missing = [digest for digest in texts_by_digest if digest not in cached]
        texts = ([] if message is not None else [query]) + [texts_by_digest[digest] for digest in missing]
        if before_dispatch is not None:
            before_dispatch()
        vectors: list[np.ndarray | None]
        try:
            vectors = list(self.embedder.embed(texts, stop=lambda: time.monotonic() >= deadline))
        except EmbeddingStopped as stopped:
            vectors = stopped.vectors
        self.embedded_texts += sum(vector is not None for vector in vectors)
        if message is None:
            message, vectors = vectors[0], vectors[1:]
        with self._cache_lock:
            for digest, vector in zip(missing, vectors):
                if vector is not None:
                    self._keep(digest, vector)
                    cached[digest] = vector
        whole = [index for index, named in enumerate(digests)
                 if message is not None and all(digest in cached for digest in named)]
        scores: list[float | bool | None] = [None] * len(documents)
        if whole:
            similarities = [max(float(np.dot(message, cached[digest])) for digest in digests[index])
                            for index in whole]
            chosen = [documents[index] for index in whole]
            probabilities = self.calibration.probabilities(
                similarities, [len(cut[index]) for index in whole], query, chosen, self.analyzer,
                self._page_terms(chosen))
            for index, probability in zip(whole, probabilities):
                scores[index] = probability
        return PairScores(scores=scores)


    def _page_terms(self, documents: Sequence[str]) -> list[frozenset[str]]:
        """Each document's distinct analyzer terms, kept by text digest (pages recur from turn to turn)."""
        digests = [text_digest(document) for document in documents]
        with self._cache_lock:
            known = {digest: self._terms[digest] for digest in digests if digest in self._terms}
        out = []
        for digest, document in zip(digests, documents):
            if digest not in known:
                known[digest] = frozenset(self.analyzer.terms(document))
            out.append(known[digest])
        with self._cache_lock:
            for digest in digests:
                self._terms[digest] = known[digest]
                self._terms.move_to_end(digest)
            while len(self._terms) > PAGE_TERMS_CACHE_SIZE:
                self._terms.popitem(last=False)
        return out


def passage_digests(documents: Sequence[str]) -> list[str]:
    """The sha256 of every passage the documents are scored by (what ``remember`` and ``known`` are keyed by)."""
    return list(dict.fromkeys(text_digest(text) for document in documents for text in page_passages(document)))


# What the engine's Decision runtime loads for each model kind besides onnx/ (an installed model -> provider).
DECISION_LOADERS = {KIND: SimilarityScorer}
