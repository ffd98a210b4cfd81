"""What the Decision runtime asks of a provider: pair scores under a deadline, and what planning needs.

``ScoringProvider`` is the protocol the runtime talks to; the in-process
ONNX reranker (``onnx.py``) and a ``/rerank`` endpoint (``rerank.py``)
implement it, each answering the planning questions it can (only the ONNX
model has a tokenizer and a measured throughput).  A provider kind added
through ``DecisionRuntime(providers=...)`` need only score (``PairScorer``);
``ScoresOnly`` gives it the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence, runtime_checkable

from ..state.config import Settings

NOT_CONFIGURED, LOADING, READY, FAILED = "not_configured", "loading", "ready", "failed"


@dataclass
class PairScores:
    """One provider call: a score per document (None: not scored before the deadline)."""

    scores: list[float | bool | None]
    tokens: int = 0
    cached: set[int] = field(default_factory=set)   # indexes answered from the score cache
    batches: list[list[int]] | None = None   # document indexes of each batch that ran, in order


class PairScorer(Protocol):
    """Scores (query, document) pairs: a probability in 0..1, a bare yes/no, or None when not scored in time."""

    @property
    def state(self) -> str: ...              # loading | ready | failed

    @property
    def reason(self) -> str | None: ...      # why it failed

    @property
    def tokens_per_second(self) -> float | None: ...   # measured throughput, when there is one

    def score_pairs(self, query: str, documents: Sequence[str], *, deadline: float,
                    max_pair_tokens: int | None = None,
                    before_dispatch: Callable[[], None] | None = None) -> PairScores:
        """Score what fits before ``deadline``; ``before_dispatch`` runs before each request or batch."""
        ...


class ScoringProvider(PairScorer, Protocol):
    """A provider as the runtime uses it: scoring, and the answers planning and lifecycle need."""

    @property
    def max_pair_tokens(self) -> int | None: ...   # the longest pair the model takes (None: not known)

    def wait_loaded(self, timeout: float | None = None) -> bool:
        """Block until loading finished (at once when there is nothing to load)."""
        ...

    def serves(self, settings: Settings) -> bool:
        """Whether this provider still serves ``settings`` (False: the runtime makes a new one)."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        """Tokens of each text without special tokens (None: no tokenizer)."""
        ...

    def pair_tokens(self, query: str, documents: Sequence[str],
                    max_pair_tokens: int | None = None) -> list[int] | None:
        """Tokens of each (query, document) pair as scored, special tokens included (None: no tokenizer)."""
        ...

    def seconds_to_score(self, pair_tokens: Sequence[int]) -> float | None:
        """Seconds to score pairs of these lengths one by one (None: no measured throughput)."""
        ...


class Untokenized:
    """What a provider without a tokenizer or a throughput model answers: nothing to load, no counts."""

    def wait_loaded(self, timeout: float | None = None) -> bool:
        return True

    def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        return None

    def pair_tokens(self, query: str, documents: Sequence[str],
                    max_pair_tokens: int | None = None) -> list[int] | None:
        return None

    def seconds_to_score(self, pair_tokens: Sequence[int]) -> float | None:
        return None


class ScoresOnly(Untokenized):
    """A ``PairScorer`` as a ``ScoringProvider``: nothing to load, no tokenizer, no throughput model."""

    max_pair_tokens: int | None = None

    def __init__(self, scorer: PairScorer) -> None:
        self.scorer = scorer

    @property
    def state(self) -> str:
        return self.scorer.state

    @property
    def reason(self) -> str | None:
        return self.scorer.reason

    @property
    def tokens_per_second(self) -> float | None:
        return self.scorer.tokens_per_second

    def score_pairs(self, query: str, documents: Sequence[str], *, deadline: float,
                    max_pair_tokens: int | None = None,
                    before_dispatch: Callable[[], None] | None = None) -> PairScores:
        return self.scorer.score_pairs(query, documents, deadline=deadline, max_pair_tokens=max_pair_tokens,
                                       before_dispatch=before_dispatch)

    def serves(self, settings: Settings) -> bool:
        return True


class LoadingProvider(ScoringProvider, Protocol):
    """A provider over an installed model, loaded on the runtime's loader thread."""

    def load(self) -> None: ...


@runtime_checkable
class PageScorer(Protocol):
    """A provider that scores whole page texts by vectors independent of the message (an embedding model):
    the gate sends page texts and hands it vectors already computed under ``fingerprint``."""

    @property
    def fingerprint(self) -> str: ...

    def remember(self, vectors: Mapping[str, object]) -> None: ...

    def known(self, digests: Sequence[str]) -> set[str]: ...

    def digests(self, documents: Sequence[str]) -> list[str]:
        """The text digests of the vectors the documents are scored by (their passages')."""
        ...

    @property
    def default_high_threshold(self) -> float:
        """The model's documented ``highThreshold``, in force when ``recallGate`` sets none."""
        ...
