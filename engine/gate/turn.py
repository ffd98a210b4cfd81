"""The recall gate: per user turn, ask the Decision model which stored pages the message needs.

``memory/gate`` takes ``{message}`` for the connection's audience and answers
``{outcome, injected, decisions: [{id, score, tier}], latencyMs}``.  The
steps (spec 000, "Recall gate"; docs/recall-gate.md records the decisions):

1. **Who.** Only sessions that read the private partition: owner-private,
   or a conversation the owner granted read access.  Ungranted
   conversations, sandboxed or revoked callers and agents without a store
   are skipped before any Decision request.  No ``recallGate`` block, or
   ``mode: off``, and the gate does not run at all.
2. **Candidates** (gate_candidates.py): keyword matches with their passages,
   or the label index from which ``choice`` questions shortlist pages.
3. **Score** (gate_scoring.py): one boolean question per candidate, the
   bare message as the state, planned to fit the time left.
4. **Tiers and text.** ``high`` pages are injected in ``live`` mode (at most
   6,000 characters), ``medium`` ones get a pointer line, and a turn where
   every page scored below ``skipHintBelow`` gets the skip hint.

Authority is re-checked before every Decision request (and by the runtime
before every batch, request and retry) and again before the injection is
published.  Any failure or timeout injects nothing: the turn goes on.
Each turn logs exactly one ``knowledge recall gate:`` line with ids, scores
and tiers, never message or record text; turns in the private partition are
also kept in the store's gate log (gate_journal.py), with the message text
only for opted-in, owner-private shadow turns.
"""

from __future__ import annotations

import concurrent.futures
import logging
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, TypeVar

import numpy as np

from ..access.authority import OWNER_PRIVATE, Authority, Caller, Entry, StoreEntry
from ..decision.runtime import MAX_CHOICE_OPTIONS, BooleanQuestion, ChoiceQuestion, DecisionRuntime
from ..core.answers import NotRequired, TypedDict
from ..core.changes import ChangeFeed
from ..core.errors import Denied, DecisionUnavailable, InvalidResponse, KnowledgeError, NotFound
from .candidates import (
    Candidate, CandidateDeadline, CandidateSet, hybrid_candidates, keyword_candidates, model_index, read_page_starts,
    stored_page_vectors, vectors_state,
)
from .journal import GateTurnRecord, record_turn
from .scoring import (
    HIGH, MEDIUM, PUBLISH_RESERVE_S, SKIP_HINT, UNSCORED, Decision, DecisionEntry, cheap_order, plan_gate_scoring,
    render_block, skip_hint_applies, tier_for,
)
from ..state.config import SettingsSource
from ..state.gate_settings import GateSettings
from ..core.ids import utc_now
from ..index.analysis import Analyzer
from ..index.embedding import Embedder, EmbeddingRuntime, text_digest
from ..index.searchable import SearchableStore
from ..search.passages import PassageFinder
from ..core.methods import Method
from ..core.params import Params, String
from ..vault.records import PRIVATE_SCOPE

log = logging.getLogger(__name__)
T = TypeVar("T")

LOG_PREFIX = "knowledge recall gate:"
MESSAGE_MAX_CHARS = 100_000
GATE_PARAMS = Params(String("message", MESSAGE_MAX_CHARS, required=True, what="the user's message text"))
PUBLISH_GRACE_S = 0.05        # scores that land this late still count; later, the turn is a timeout
CHOICE_SHARE = 0.5            # model candidates: the share of the time left spent on choice questions

OFF, SKIPPED = "off", "skipped"
INJECTED, SKIP_HINT_OUTCOME, SHADOW, NONE, UNAVAILABLE, ERROR = (
    "injected", "skip-hint", "shadow", "none", "unavailable", "error")


class GateEngine(StoreEntry[SearchableStore], Protocol):
    """What the gate needs of the engine: the way into a store, the settings, the Decision model and the
    analyzer and passage finder its keyword candidates use."""

    @property
    def settings(self) -> SettingsSource: ...

    @property
    def decision(self) -> DecisionRuntime: ...

    @property
    def analyzer(self) -> Analyzer: ...

    @property
    def passage_finder(self) -> PassageFinder: ...

    @property
    def changes(self) -> ChangeFeed: ...
    def embeddings(self) -> EmbeddingRuntime: ...


class GateStop(Exception):
    """The turn ends without an injection: ``stage`` and ``reason`` are logged (never text)."""

    def __init__(self, stage: str, reason: str, outcome: str = UNAVAILABLE) -> None:
        super().__init__(f"{stage}: {reason}")
        self.stage, self.reason, self.outcome = stage, reason, outcome


@dataclass
class Evaluation:
    """What the gate found for one message, before anything is published."""

    source: str
    model: str | None = None
    offered: int = 0
    candidates: list[Candidate] = field(default_factory=list)   # shortlisted, best first
    documents: dict[str, str] = field(default_factory=dict)      # what was scored, per page id
    decisions: list[Decision] = field(default_factory=list)
    complete: bool = True            # every offered page was considered and every candidate scored
    text: str | None = None          # what live mode injects (page text and pointers, or the skip hint)
    would: str = NONE                # injected | skip-hint | none
    window_tokens: int | None = None
    short_window_tokens: int | None = None   # the cascade: the window of the pages after the long ones
    long_windows: int = 0                    # the cascade: pages that got window_tokens (0: equal windows)
    tokens_scored: int = 0
    vector: Any = None               # the message under the search's embedding model, once computed
    vectors: str | None = None       # hybrid: ready, building, index_failed, or why there is no embedding model


# --- the socket method ---------------------------------------------------------------------------


class GateAnswer(TypedDict):
    """``memory/gate``: the outcome of one turn, what live mode injects, each page's decision; ``stage`` and
    ``reason`` say where a stopped gate stopped."""

    outcome: str
    injected: str | None
    decisions: list[DecisionEntry]
    latencyMs: float
    tokensScored: NotRequired[int]  # absent while the gate is off
    wouldInject: NotRequired[str]  # shadow mode: injected, skip-hint or none
    # hybrid: the store's vectors as the turn read them: ready, building (some records not embedded yet: their
    # pages come from the keyword side only), index_failed, or why there is no embedding model (not_configured,
    # not_installed, failed: the keyword shortlist alone)
    vectors: NotRequired[str]
    stage: NotRequired[str]
    reason: NotRequired[str]


def gate_turn(engine: GateEngine, caller: Caller, params: Any) -> GateAnswer:
    """``memory/gate``: the gate for one user turn; never raises for a failure of the gate itself."""
    clock = engine.decision.clock   # the turn's deadline and latency are on the Decision runtime's clock
    started = clock()
    message = parse_message(params)
    settings = engine.settings.current()
    gate = settings.recall_gate
    if gate is None or gate.mode == OFF:
        return {"outcome": OFF, "injected": None, "decisions": [], "latencyMs": 0}
    gate = in_force(gate, engine.decision)
    deadline = started + gate.timeout_ms / 1000
    evaluation = Evaluation(gate.candidates)
    entry: Entry[SearchableStore] | None = None
    stop: GateStop | None = None
    outcome, injected = NONE, None
    try:
        entry = _enter(engine, caller)
        recheck = authority_check(entry)
        evaluate(engine, engine.decision, entry, message, gate, deadline, recheck, evaluation)
        if gate.mode == "live":
            outcome, injected = _publish(evaluation, deadline, recheck, clock)
        else:
            outcome = SHADOW
    except GateStop as exc:
        stop, outcome = exc, exc.outcome
    except Exception as exc:  # noqa: BLE001 - a gate failure must never fail the turn
        stop = GateStop("gate", _where(exc), ERROR)
        outcome = ERROR
    latency_ms = (clock() - started) * 1000
    _log_line(gate, entry.authority if entry is not None else None, outcome, evaluation, latency_ms, stop)
    if entry is not None and (stop is None or stop.stage != "authority"):
        _keep(entry, gate, message, evaluation, outcome, stop, latency_ms, engine.changes)
    answer: GateAnswer = {"outcome": outcome, "injected": injected,
                              "decisions": [d.to_dict() for d in evaluation.decisions],
                              "latencyMs": round(latency_ms, 1), "tokensScored": evaluation.tokens_scored}
    if gate.mode == "shadow" and stop is None:
        answer["wouldInject"] = evaluation.would
    if evaluation.vectors is not None:
        answer["vectors"] = evaluation.vectors
    if stop is not None:
        answer["stage"], answer["reason"] = stop.stage, stop.reason
    return answer


def parse_message(params: Any) -> str:
    return GATE_PARAMS.read(params)["message"]


def _enter(engine: GateEngine, caller: Caller) -> Entry[SearchableStore]:
    """The private partition, or a skip (never a Decision request) for everyone else."""
    try:
        entry = engine.enter(caller, create=False)
    except (Denied, NotFound) as exc:
        raise GateStop("audience", "denied", SKIPPED) from exc
    except KnowledgeError as exc:
        raise GateStop("audience", exc.reason, SKIPPED) from exc
    if entry.authority.partition != PRIVATE_SCOPE:
        raise GateStop("audience", "not_granted", SKIPPED)
    if entry.authority.store is None:
        raise GateStop("audience", "no_store", SKIPPED)
    return entry


def authority_check(entry: Entry[SearchableStore]) -> Callable[[], None]:
    """Raises Denied once the caller no longer reads the same private partition (a revoked grant ...)."""
    return entry.recheck


# --- finding and scoring -----------------------------------------------------------------------------


def evaluate(engine: GateEngine, decision: DecisionRuntime, entry: Entry[SearchableStore], message: str,
             gate: GateSettings, deadline: float, recheck: Callable[[], None],
             evaluation: Evaluation | None = None) -> Evaluation:
    """Candidates, scores, tiers and the text live mode would inject (publishes nothing).

    Store work runs through ``entry``; ``recheck`` runs before every
    Decision request.  ``evaluation`` is filled as the steps go, so a turn
    that stops midway still logs what it had found (counts, unscored
    candidates).
    """
    evaluation = evaluation or Evaluation(gate.candidates)
    gate = in_force(gate, decision)
    status = decision.status()
    evaluation.model = status.model
    if status.state != "ready":
        raise GateStop("model", status.state)
    if not message.strip():
        return evaluation   # nothing to match, and nothing to hint about
    embedder = engine.embeddings.current() if gate.candidates == "hybrid" else None
    if gate.candidates == "hybrid" and embedder is None:
        evaluation.vectors = engine.embeddings.status().state   # why not: the keyword shortlist alone
    if embedder is not None:
        vector = evaluation.vector = _message_vector(embedder, decision, message)

        def hybrid(rt: SearchableStore, a: Authority) -> tuple[CandidateSet, str]:
            state = vectors_state(rt, a.partition, embedder)
            return hybrid_candidates(
                rt, a.partition, engine.analyzer, engine.passage_finder, message, vector,
                max_candidates=gate.max_candidates, excerpts=gate.excerpts, excerpt_chars=gate.excerpt_chars,
                page_chars=gate.page_chars, deadline=deadline, clock=decision.clock), state

        found, evaluation.vectors = _on_lane(entry, deadline, decision.clock, hybrid)
        evaluation.offered, evaluation.candidates = found.offered, found.candidates
    elif gate.candidates in ("keyword", "hybrid"):   # hybrid without an embedding model: the keyword shortlist
        found = _on_lane(entry, deadline, decision.clock, lambda rt, a: keyword_candidates(
            rt, a.partition, engine.analyzer, engine.passage_finder, message, max_candidates=gate.max_candidates,
            excerpts=gate.excerpts, excerpt_chars=gate.excerpt_chars, page_chars=gate.page_chars,
            deadline=deadline, clock=decision.clock))
        evaluation.offered, evaluation.candidates = found.offered, found.candidates
    else:
        _model_candidates(decision, entry, message, gate, deadline, recheck, evaluation)
    if evaluation.candidates:
        _score(engine, decision, entry, message, gate, deadline, recheck, evaluation)
    evaluation.would, evaluation.text = _would(evaluation, gate)
    return evaluation


def in_force(gate: GateSettings, decision: DecisionRuntime) -> GateSettings:
    """The settings a turn runs with: without the owner's ``highThreshold``, an ``embedding/`` Decision model's
    documented one (its scores are calibrated similarities); a reranker keeps the spec's default."""
    scorer = decision.page_scorer()
    return gate.in_force(scorer.default_high_threshold if scorer is not None else None)


def _message_vector(embedder: Embedder, decision: DecisionRuntime, message: str) -> np.ndarray:
    """The message's vector under the search's embedding model ``embedder``.

    An ``embedding/`` Decision model with the same weights is handed the vector, so the turn still embeds
    the message once.
    """
    vector = embedder.embed([message])[0]
    scorer = decision.page_scorer()
    if scorer is not None and scorer.fingerprint == embedder.fingerprint:
        scorer.remember({text_digest(message): vector})
    return vector


def _similarities(engine: GateEngine, decision: DecisionRuntime, entry: Entry[SearchableStore], message: str,
                  candidates: list[Candidate], deadline: float, evaluation: Evaluation) -> dict[str, float] | None:
    """Cosine similarity of the message and each candidate page under the search's embedding model, from the page
    vectors the store's vector index holds (a page without one is left out; None: no embedding model)."""
    embedder = engine.embeddings.current()
    if embedder is None:
        return None
    if evaluation.vector is None:
        evaluation.vector = _message_vector(embedder, decision, message)
    digests = {c.id: text_digest(c.page_text) for c in candidates if c.page_text}
    stored = _on_lane(entry, deadline, decision.clock, lambda rt, a: stored_page_vectors(
        rt, embedder.fingerprint, list(set(digests.values()))))
    message_vector = np.asarray(evaluation.vector, dtype=np.float32)
    found = {}
    for page_id, digest in digests.items():
        vector = stored.get(digest)
        if vector is not None:
            page = np.frombuffer(vector, dtype=np.float32)
            if page.shape == message_vector.shape:
                found[page_id] = float(np.dot(message_vector, page))
    return found


def _on_lane(entry: Entry[SearchableStore], deadline: float, clock: Callable[[], float],
             work: Callable[[SearchableStore, Authority], T]) -> T:
    """Store work within the deadline (on ``clock``); a busy lane or revoked authority ends the turn."""
    remaining = deadline - clock()
    if remaining <= 0:
        raise GateStop("candidates", "timeout")
    try:
        return entry.run(work, timeout=remaining)
    except (concurrent.futures.TimeoutError, CandidateDeadline) as exc:
        raise GateStop("candidates", "timeout") from exc
    except Denied as exc:
        raise GateStop("authority", "revoked") from exc
    except KnowledgeError as exc:
        raise GateStop("candidates", exc.reason) from exc


def _model_candidates(decision: DecisionRuntime, entry: Entry[SearchableStore], message: str, gate: GateSettings,
                      deadline: float, recheck: Callable[[], None], evaluation: Evaluation) -> None:
    index = _on_lane(entry, deadline, decision.clock, lambda rt, a: model_index(
        rt, a.partition, max_index_chars=gate.max_index_chars, now=utc_now(), deadline=deadline,
        clock=decision.clock))
    entries = index.candidates
    evaluation.offered = len(entries)
    shortlist = entries
    if len(entries) > gate.max_candidates:
        now = decision.now()
        choice_deadline = now + (deadline - now) * CHOICE_SHARE
        ranked: list[tuple[float, int]] = []
        for start in range(0, len(entries), MAX_CHOICE_OPTIONS):
            chunk = entries[start:start + MAX_CHOICE_OPTIONS]
            result = _ask(recheck, "choice", lambda: decision.ask_choice(
                message, ChoiceQuestion(tuple(c.label for c in chunk), top=gate.max_candidates),
                deadline=choice_deadline, before_dispatch=recheck))
            evaluation.tokens_scored += result.tokens_scored
            if result.unscored:
                evaluation.complete = False   # options left unscored at the deadline were never considered
            ranked += [(-result.scores.get(option, 0.0), start + option) for option in result.chosen]
        shortlist = [entries[position] for _, position in sorted(ranked)[:gate.max_candidates]]
    evaluation.candidates = _on_lane(entry, deadline, decision.clock, lambda rt, a: read_page_starts(
        rt, a.partition, shortlist, gate.page_chars, deadline, decision.clock)) if shortlist else []


def _score(engine: GateEngine, decision: DecisionRuntime, entry: Entry[SearchableStore], message: str,
           gate: GateSettings, deadline: float, recheck: Callable[[], None], evaluation: Evaluation) -> None:
    candidates = evaluation.candidates
    score_by = deadline - PUBLISH_RESERVE_S
    pages = decision.page_scorer() if gate.candidates != "model" else None   # model: labels, as for any model
    if pages is not None:
        # An embedding model scores whole pages: their vectors do not depend on the message, so the ones the
        # store's vector index (or an earlier turn) holds are reused and the turn embeds only the message.
        documents, planned = [c.page_text for c in candidates], len(candidates)
        digests = pages.digests(documents)   # a long page is scored by its passages, each with its own vector
        known = pages.known(digests)
        wanted = [digest for digest in digests if digest not in known]
        if wanted:
            stored = _on_lane(entry, deadline, decision.clock,
                              lambda rt, a: stored_page_vectors(rt, pages.fingerprint, wanted))
            pages.remember(stored)
    elif gate.candidates != "model":
        if gate.long_windows and decision.tokens_per_second() is not None:
            # The cascade: the likeliest pages by a cheap score first, so they get the long windows. Keyword
            # candidates join their BM25 rank with the similarity; hybrid ones already rank by both.
            similarities = None if gate.candidates == "hybrid" else _similarities(
                engine, decision, entry, message, candidates, deadline, evaluation)
            candidates = evaluation.candidates = cheap_order(candidates, similarities)
        plan = _ask(recheck, "plan", lambda: plan_gate_scoring(decision, message, candidates, engine.passage_finder,
                                                               gate, score_by))
        documents, planned = plan.documents, plan.planned
        evaluation.window_tokens = plan.window_tokens
        evaluation.short_window_tokens, evaluation.long_windows = plan.short_window_tokens, plan.long_windows
    else:
        documents, planned = [c.label for c in candidates], len(candidates)
    questions = [BooleanQuestion(document, c.id) for document, c in zip(documents, candidates[:planned])]
    evaluation.documents = {c.id: document for document, c in zip(documents, candidates)}
    if pages is not None:   # whole pages: the journal keeps their first pageChars (about what the model reads)
        evaluation.documents = {key: text[:gate.page_chars] for key, text in evaluation.documents.items()}
    answers: dict[str, Any] = {}
    if questions:
        result = _ask(recheck, "score", lambda: decision.ask_boolean(message, questions, deadline=score_by,
                                                                     before_dispatch=recheck))
        answers = {answer.key: answer for answer in result.answers}
        evaluation.tokens_scored += result.tokens_scored
    decisions = []
    for candidate in candidates:
        answer = answers.get(candidate.id)
        if answer is None:
            decisions.append(Decision(candidate.id, None, UNSCORED))
            evaluation.complete = False
        else:
            decisions.append(Decision(candidate.id, answer.probability_true, tier_for(answer, gate),
                                      answer.value if answer.probability_true is None else None))
    evaluation.decisions = decisions
    if not answers:
        raise GateStop("score", "timeout")


def _ask(recheck: Callable[[], None], stage: str, ask: Callable[[], T]) -> T:
    """One Decision request, authority re-checked first; provider failures end the turn without text."""
    try:
        recheck()
        return ask()
    except Denied as exc:
        raise GateStop("authority", "revoked") from exc
    except DecisionUnavailable as exc:
        raise GateStop(stage, str(exc.details.get("kind", "unavailable"))) from exc
    except InvalidResponse as exc:
        raise GateStop(stage, "invalid-response") from exc


def _would(evaluation: Evaluation, gate: GateSettings) -> tuple[str, str | None]:
    """What live mode injects: matched pages and pointers, else maybe the skip hint, else nothing."""
    by_id = {c.id: c for c in evaluation.candidates}
    ranked = sorted(evaluation.decisions, key=lambda d: (d.score is None, -(d.score or 0.0)))
    pages = [by_id[d.id] for d in ranked if d.tier == HIGH]
    pointers = [by_id[d.id] for d in ranked if d.tier == MEDIUM]
    text = render_block(pages, pointers)
    if text is not None:
        return INJECTED, text
    if skip_hint_applies(evaluation.decisions, gate, evaluation.complete):
        return SKIP_HINT_OUTCOME, SKIP_HINT
    return NONE, None


def _publish(evaluation: Evaluation, deadline: float, recheck: Callable[[], None],
             clock: Callable[[], float]) -> tuple[str, str | None]:
    if evaluation.text is None:
        return NONE, None
    if clock() > deadline + PUBLISH_GRACE_S:
        raise GateStop("publish", "timeout")
    try:
        recheck()
    except KnowledgeError as exc:
        raise GateStop("authority", "revoked") from exc
    return evaluation.would, evaluation.text


# --- the log line and the gate log ----------------------------------------------------------------------


def _log_line(gate: GateSettings, authority: Authority | None, outcome: str, evaluation: Evaluation,
              latency_ms: float, stop: GateStop | None) -> None:
    """Exactly one info line per turn: ids, scores, tiers and counts; never message or record text."""
    parts = [LOG_PREFIX, f"agent={authority.agent if authority else '-'}", f"mode={gate.mode}",
             f"candidates={gate.candidates}"]
    if evaluation.vectors is not None:
        parts.append(f"vectors={evaluation.vectors}")
    parts.append(f"outcome={outcome}")
    if gate.mode == "shadow" and stop is None:
        parts.append(f"would={evaluation.would}")
    if stop is not None:
        parts += [f"stage={stop.stage}", f"reason={stop.reason}"]
    parts += [f"latency_ms={latency_ms:.0f}", f"offered={evaluation.offered}",
              f"shortlisted={len(evaluation.candidates)}"]
    if evaluation.window_tokens is not None:
        parts.append(f"window_tokens={evaluation.window_tokens}")
    if evaluation.long_windows:
        parts.append(f"long_windows={evaluation.long_windows} short_window_tokens={evaluation.short_window_tokens}")
    decisions = " ".join(f"{d.id}:{'-' if d.score is None else f'{d.score:.3f}'}:{d.tier}"
                         for d in evaluation.decisions)
    parts.append(f"decisions=[{decisions}]")
    log.info(" ".join(parts))


def _keep(entry: Entry[SearchableStore], gate: GateSettings, message: str, evaluation: Evaluation, outcome: str,
          stop: GateStop | None, latency_ms: float, changes: ChangeFeed) -> None:
    """The turn in the store's gate log; the message text only in the opted-in, owner-private journal."""
    authority = entry.authority
    journal = gate.journal and gate.mode == "shadow" and authority.kind == OWNER_PRIVATE and stop is None
    turn = GateTurnRecord(
        agent=authority.agent, audience=authority.kind, mode=gate.mode, source=gate.candidates,
        model=evaluation.model, outcome=outcome, would=evaluation.would if gate.mode == "shadow" else None,
        stage=stop.stage if stop else None, reason=stop.reason if stop else None, latency_ms=latency_ms,
        offered=evaluation.offered, shortlisted=len(evaluation.candidates),
        decisions=[d.to_dict() for d in evaluation.decisions], settings=gate.to_config(),
        message=message if journal else None,
        candidates=[{"id": c.id, "revision": c.revision, "type": c.type, "title": c.title,
                     "document": evaluation.documents.get(c.id)} for c in evaluation.candidates] if journal else None)
    try:
        entry.run(lambda rt, a: record_turn(rt.store, a.partition, turn))
    except (KnowledgeError, OSError) as exc:
        log.warning("recall gate turn not kept in the gate log: %s", getattr(exc, "reason", type(exc).__name__))
        return
    store = authority.store
    changes.publish("gate", storeId=store.store_id if store is not None else None, agent=authority.agent)


def _where(exc: BaseException) -> str:
    """The exception's type and where it was raised: enough to find a bug, without any text it carries."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return type(exc).__name__
    last = frames[-1]
    return f"{type(exc).__name__}@{last.filename.rsplit('/', 1)[-1]}:{last.lineno}"


HOST_METHODS = (Method("memory/gate", GATE_PARAMS, GateAnswer, gate_turn),)
