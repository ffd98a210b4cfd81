"""The Decision runtime: typed questions answered by the configured Decision model under a deadline.

``decisionModel`` in config.json picks the provider:

    onnx/<installed model>   in-process onnxruntime + tokenizers (onnx.py)
    rerank/<model id>        POST <models.providers.rerank.baseUrl>/rerank (rerank.py)
    embedding/<installed embedding model>   calibrated cosine similarity (engine/index/similarity.py, handed
                             in by the engine as the loader of that kind)

Both are a ``ScoringProvider`` (provider.py): the runtime asks every
provider the same questions, and each answers what it can.

Questions:

- ``boolean``: would this document help answer the state (the bare user
  message)? The answer's ``probability_true`` is the reranker's relevance,
  ``sigmoid(logit)`` for an ONNX cross-encoder; a provider that can only say
  yes or no answers ``value=True`` with ``probability_true=None``.
- ``choice``: which of up to 254 options fit the state, best first, with a
  "None of these" option that cuts the ranking: options scoring at or below
  it are not chosen.

Every call takes an absolute ``deadline`` in the runtime's ``clock`` (``time.monotonic`` unless
the caller hands in another, as tests do to make a plan independent of the machine's load).
Work that would not finish by then is not started: those questions come
back as unscored, never with partial results. A model that is not
configured, still loading or failed raises ``DecisionUnavailable`` at once.
Loading happens on a background thread, started by ``start()`` (``knowledge
serve`` calls it) or the first status check or question, and again whenever
``decisionModel`` changes; a question never waits for it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from models.errors import ModelError
from models.installed import ModelStore

from ..state.config import Settings
from .onnx import OnnxOptions, OnnxReranker
from models.installed import InstalledModel

from .provider import (
    FAILED, NOT_CONFIGURED, READY, LoadingProvider, PageScorer, PairScorer, PairScores, ScoresOnly, ScoringProvider,
)
from .rerank import EndpointForms, RerankProvider
from ..core.answers import NotRequired, TypedDict
from ..core.errors import DecisionUnavailable, InvalidParams

log = logging.getLogger(__name__)

MAX_CHOICE_OPTIONS = 254
NONE_OF_THESE = "None of these"
BeforeDispatch = Callable[[], None] | None


class DecisionStatusAnswer(TypedDict):
    """The Decision runtime's status as answers carry it (``reason`` when failed; the figures for onnx)."""

    state: str
    model: str | None
    reason: NotRequired[str]
    tokensPerSecond: NotRequired[float]
    maxPairTokens: NotRequired[int]


@dataclass(frozen=True)
class DecisionStatus:
    state: str                      # not_configured | loading | ready | failed
    model: str | None = None        # the decisionModel value it serves
    reason: str | None = None       # why it failed
    tokens_per_second: float | None = None   # measured throughput (onnx only)
    max_pair_tokens: int | None = None       # the model's longest pair (onnx only)

    def to_dict(self) -> DecisionStatusAnswer:
        data: dict[str, Any] = {"state": self.state, "model": self.model}
        for key, value in (("reason", self.reason), ("tokensPerSecond", self.tokens_per_second),
                           ("maxPairTokens", self.max_pair_tokens)):
            if value is not None:
                data[key] = round(value, 1) if isinstance(value, float) else value
        return data  # type: ignore[return-value]


@dataclass(frozen=True)
class BooleanQuestion:
    """Would ``document`` (e.g. a page title and excerpt) help answer the state? ``key`` is echoed back."""

    document: str
    key: str


@dataclass(frozen=True)
class BooleanAnswer:
    key: str
    value: bool
    probability_true: float | None      # None: the provider answered without a probability
    cached: bool = False


@dataclass(frozen=True)
class BooleanResult:
    model: str
    answers: tuple[BooleanAnswer, ...]  # the scored questions, in question order
    unscored: tuple[str, ...]           # keys left unscored at the deadline, in question order
    tokens_scored: int
    elapsed_ms: float


@dataclass(frozen=True)
class ChoiceQuestion:
    """Pick the ``options`` (at most 254) that fit the state, at most ``top`` of them, best first."""

    options: tuple[str, ...]
    top: int = 10
    none_option: str = NONE_OF_THESE


@dataclass(frozen=True)
class ChoiceResult:
    model: str
    chosen: tuple[int, ...]             # option indexes, best first; empty: "None of these" won
    scores: dict[int, float] = field(default_factory=dict)   # every scored option
    none_score: float | None = None     # None: the none option went unscored, so the ranking is uncut
    unscored: tuple[int, ...] = ()
    tokens_scored: int = 0
    elapsed_ms: float = 0.0


class DecisionRuntime:
    """One per engine. ``settings`` returns the settings in force (re-read on every call)."""

    def __init__(self, settings: Callable[[], Settings], models: ModelStore,
                 options: OnnxOptions | None = None,
                 providers: dict[str, Callable[[str, Settings], PairScorer]] | None = None,
                 loaders: dict[str, Callable[[InstalledModel], LoadingProvider]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``providers`` adds provider kinds beyond onnx/ and rerank/ (a factory per prefix); an added
        kind only scores: it has no tokenizer or throughput to plan with.  ``loaders`` adds kinds served
        by an installed model (``embedding/``: the engine passes engine/index/similarity.py's), loaded on a
        background thread as onnx/ models are.  ``clock`` is what deadlines are measured on, here and in the
        onnx/ and rerank/ providers."""
        self.clock = clock
        self._settings = settings
        self._models = models
        self._options = options or OnnxOptions()
        self._extra_providers = dict(providers or {})
        self._loaders_by_kind = dict(loaders or {})
        self._forms = EndpointForms()
        self._lock = threading.Lock()
        self._configured: str | None = None
        self._provider: ScoringProvider | None = None
        self._failure: str | None = None
        self._manifest_stamp: tuple[int, int] | None = None
        self._loaders: list[threading.Thread] = []
        self._closed = False

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> DecisionStatus:
        """Bring the provider in line with ``decisionModel``, loading a model in the background."""
        return self.status()

    def status(self) -> DecisionStatus:
        provider, configured, failure = self._current()
        if configured is None:
            return DecisionStatus(NOT_CONFIGURED)
        if provider is None:
            return DecisionStatus(FAILED, configured, failure)
        return DecisionStatus(provider.state, configured, provider.reason, provider.tokens_per_second,
                              provider.max_pair_tokens)

    def wait_ready(self, timeout: float) -> DecisionStatus:
        """Block until a loading model is ready or failed (CLI, benchmarks and tests; never a request)."""
        provider, _, _ = self._current()
        if provider is not None:
            provider.wait_loaded(timeout)
        return self.status()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            loaders, self._loaders = self._loaders, []
        for loader in loaders:
            loader.join()

    def _current(self) -> tuple[ScoringProvider | None, str | None, str | None]:
        settings = self._settings()
        wanted = settings.decision_model
        with self._lock:
            if self._needs_new_provider(wanted, settings):
                self._configured, self._provider, self._failure = wanted, None, None
                self._manifest_stamp = self._manifest_state()
                if wanted is not None and not self._closed:
                    self._provider, self._failure = self._make_provider(wanted, settings)
            self._loaders = [loader for loader in self._loaders if loader.is_alive()]
            return self._provider, self._configured, self._failure

    def _needs_new_provider(self, wanted: str | None, settings: Settings) -> bool:
        if wanted != self._configured:
            return True
        if self._provider is not None and not self._provider.serves(settings):
            return True   # e.g. the owner moved the rerank endpoint
        broken = wanted is not None and (self._provider is None or self._provider.state == FAILED)
        # A missing or damaged model is tried again once the owner pulls or adds it (the manifest changes).
        return broken and self._manifest_state() != self._manifest_stamp

    def _manifest_state(self) -> tuple[int, int] | None:
        try:
            info = self._models.manifest_path.stat()
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_size)

    def _make_provider(self, wanted: str, settings: Settings) -> tuple[ScoringProvider | None, str | None]:
        kind, _, name = wanted.partition("/")
        if kind in self._extra_providers:
            return ScoresOnly(self._extra_providers[kind](name, settings)), None
        if kind == "rerank":
            return RerankProvider(settings.rerank_base_url or "", name, self._forms, self.clock), None
        if kind != "onnx" and kind not in self._loaders_by_kind:
            return None, f"{kind}/ models are not served here"
        try:
            model = self._models.get(name)
        except ModelError as exc:
            log.warning("decision model %s cannot be used: %s", wanted, exc.message)
            return None, exc.message
        provider: LoadingProvider = (self._loaders_by_kind[kind](model) if kind in self._loaders_by_kind
                                     else OnnxReranker(model, self._options, self.clock))
        loader = threading.Thread(target=provider.load, name=f"decision-load-{name}", daemon=True)
        self._loaders.append(loader)
        loader.start()
        return provider, None

    def _ready_provider(self) -> ScoringProvider:
        provider, configured, failure = self._current()
        if configured is None:
            raise DecisionUnavailable("no decisionModel is configured", kind=NOT_CONFIGURED)
        if provider is None:
            raise DecisionUnavailable(f"decision model {configured} failed: {failure}", kind=FAILED,
                                      model=configured)
        if provider.state != READY:
            raise DecisionUnavailable(f"decision model {configured} is {provider.state}"
                                      + (f": {provider.reason}" if provider.reason else ""),
                                      kind=provider.state, model=configured)
        return provider

    # --- what a caller needs to plan ---------------------------------------------------------

    def page_scorer(self) -> PageScorer | None:
        """The ready ``embedding/`` model, which scores whole pages by their vectors (None: another kind)."""
        provider, _, _ = self._current()
        return provider if isinstance(provider, PageScorer) and provider.state == READY else None

    def now(self) -> float:
        """The time on the clock deadlines are measured on (seconds)."""
        return self.clock()

    def tokens_per_second(self) -> float | None:
        """Measured throughput of the loaded ONNX model (None for rerank endpoints or before it is ready)."""
        provider, _, _ = self._current()
        return provider.tokens_per_second if provider is not None and provider.state == READY else None

    def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        """Tokens per text under the loaded model's tokenizer, without special tokens (None: no tokenizer)."""
        return self._ready_provider().count_tokens(texts)

    def pair_tokens(self, state: str, documents: Sequence[str], max_pair_tokens: int | None = None
                    ) -> list[int] | None:
        """Tokens of each (state, document) pair as it would be scored, special tokens included (None: no tokenizer)."""
        return self._ready_provider().pair_tokens(state, documents, max_pair_tokens)

    def estimate_seconds(self, pair_tokens: Sequence[int]) -> float | None:
        """Seconds to score pairs of these token lengths one by one (None: no measured throughput)."""
        return self._ready_provider().seconds_to_score(pair_tokens)

    # --- questions ----------------------------------------------------------------------------

    def ask_boolean(self, state: str, questions: Sequence[BooleanQuestion], *, deadline: float,
                    max_pair_tokens: int | None = None, before_dispatch: BeforeDispatch = None) -> BooleanResult:
        """One independent boolean question per document, all against the same state."""
        started = self.clock()
        keys = [question.key for question in questions]
        if len(set(keys)) != len(keys):
            raise InvalidParams("boolean question keys must be unique", field="questions")
        provider = self._ready_provider()
        scored = self._score(provider, state, [q.document for q in questions], deadline, max_pair_tokens,
                             before_dispatch)
        answers, unscored = [], []
        for index, (question, score) in enumerate(zip(questions, scored.scores)):
            if score is None:
                unscored.append(question.key)
            elif isinstance(score, bool):
                answers.append(BooleanAnswer(question.key, score, None, index in scored.cached))
            else:
                answers.append(BooleanAnswer(question.key, score >= 0.5, score, index in scored.cached))
        return BooleanResult(self._configured or "", tuple(answers), tuple(unscored), scored.tokens,
                             (self.clock() - started) * 1000)

    def ask_choice(self, state: str, question: ChoiceQuestion, *, deadline: float,
                   max_pair_tokens: int | None = None, before_dispatch: BeforeDispatch = None) -> ChoiceResult:
        """Rank the options against the state; those scoring above the none option are chosen."""
        started = self.clock()
        if not 1 <= len(question.options) <= MAX_CHOICE_OPTIONS:
            raise InvalidParams(f"a choice question has 1-{MAX_CHOICE_OPTIONS} options", field="options")
        if question.top < 1:
            raise InvalidParams("top must be at least 1", field="top")
        provider = self._ready_provider()
        # The none option goes first: providers serve earlier documents first when time is short.
        documents = [question.none_option, *question.options]
        scored = self._score(provider, state, documents, deadline, max_pair_tokens, before_dispatch)
        none_score, option_scores = scored.scores[0], scored.scores[1:]
        scores = {index: float(score) for index, score in enumerate(option_scores) if score is not None}
        unscored = tuple(index for index, score in enumerate(option_scores) if score is None)
        if isinstance(none_score, bool) or any(isinstance(score, bool) for score in option_scores):
            chosen = [index for index, score in enumerate(option_scores) if score is True]
            none_value = None
        else:
            cut = none_score if none_score is not None else float("-inf")
            chosen = sorted((index for index, score in scores.items() if score > cut),
                            key=lambda index: (-scores[index], index))
            none_value = none_score
        return ChoiceResult(self._configured or "", tuple(chosen[:question.top]), scores, none_value, unscored,
                            scored.tokens, (self.clock() - started) * 1000)

    def _score(self, provider: ScoringProvider, state: str, documents: list[str], deadline: float,
               max_pair_tokens: int | None, before_dispatch: BeforeDispatch) -> PairScores:
        if not isinstance(state, str) or not state.strip():
            raise InvalidParams("the state (user message) must be non-empty text", field="state")
        if not documents:
            return PairScores(scores=[])
        return provider.score_pairs(state, documents, deadline=deadline, max_pair_tokens=max_pair_tokens,
                                    before_dispatch=before_dispatch)
