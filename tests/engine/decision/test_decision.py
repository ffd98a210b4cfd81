"""The Decision runtime with the ``onnx`` provider, on the tiny ModernBERT fixture through onnxruntime."""

from __future__ import annotations

import json
import math
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import onnxruntime
import pytest
from tokenizers import Tokenizer

from engine.state.config import Settings, SettingsSource
from engine.decision.runtime import (BooleanQuestion, ChoiceQuestion, DecisionRuntime, MAX_CHOICE_OPTIONS)
from engine.decision.onnx import OnnxOptions, OnnxReranker, PairScores
from engine.core.errors import DecisionUnavailable, InvalidParams
from engine.service import Engine
from engine.state.statedir import StateDir
from models.fixtures import TINY_RERANKER
from models.installed import ModelStore
from models.local import add_local

QUERY = "who painted the museum piece in march"
DOCUMENTS = [
    "Alice painted it in March for the museum.",
    "The budget report was due on Friday; Bob sent the invoice after the meeting. " * 3,
    "garden",
    "Carol flies to the concert on Sunday and takes the guitar with her.",
    "Kitchen recipe: bread, coffee and tea for the holiday.",
    "Dave moved the project deadline to April after the session with the owner. " * 6,
]


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    store = ModelStore(tmp_path / "state" / "models")
    add_local(store, TINY_RERANKER, name="tiny")
    return store


def make_runtime(store: ModelStore, **options: Any) -> DecisionRuntime:
    runtime = DecisionRuntime(lambda: Settings(decision_model="onnx/tiny"), store, OnnxOptions(**options))
    assert runtime.wait_ready(60).state == "ready", runtime.status()
    return runtime


@pytest.fixture
def runtime(store: ModelStore) -> Iterator[DecisionRuntime]:
    runtime = make_runtime(store)
    yield runtime
    runtime.close()


def questions(documents: list[str] = DOCUMENTS) -> list[BooleanQuestion]:
    return [BooleanQuestion(document, f"page-{index}") for index, document in enumerate(documents)]


def later(seconds: float = 30.0) -> float:
    return time.monotonic() + seconds


def direct_probability(query: str, document: str) -> float:
    """The same pair scored without the runtime: the tokenizer's own pair template, one row, sigmoid."""
    tokenizer = Tokenizer.from_file(str(TINY_RERANKER / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return probability_of(tokenizer.encode(query, document).ids)


def probability_of(ids: list[int]) -> float:
    session = onnxruntime.InferenceSession(str(TINY_RERANKER / "onnx" / "model.onnx"),
                                           providers=["CPUExecutionProvider"])
    logits = session.run(None, {"input_ids": np.array([ids], dtype=np.int64),
                                "attention_mask": np.ones((1, len(ids)), dtype=np.int64)})[0]
    return 1 / (1 + math.exp(-float(logits[0, 0])))


# --- status and loading -------------------------------------------------------------------------


def test_without_a_decision_model_the_runtime_is_not_configured(store: ModelStore) -> None:
    runtime = DecisionRuntime(lambda: Settings(), store)
    assert runtime.status().state == "not_configured"
    with pytest.raises(DecisionUnavailable) as raised:
        runtime.ask_boolean(QUERY, questions(), deadline=later())
    assert raised.value.details["kind"] == "not_configured"


def test_the_model_loads_off_the_request_path_and_reports_its_throughput(store: ModelStore) -> None:
    runtime = DecisionRuntime(lambda: Settings(decision_model="onnx/tiny"), store)
    try:
        first = runtime.status()
        assert first.state in ("loading", "ready") and first.model == "onnx/tiny"
        loaders = [t for t in threading.enumerate() if t.name == "decision-load-tiny"]
        assert first.state == "ready" or loaders, "loading must happen on its own thread"
        ready = runtime.wait_ready(60)
        assert ready.state == "ready" and ready.tokens_per_second and ready.tokens_per_second > 0
        assert ready.max_pair_tokens == 512   # from the model's config.json
        assert runtime.tokens_per_second() == ready.tokens_per_second
        assert ready.to_dict()["state"] == "ready"
    finally:
        runtime.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("decision-load")]


def test_a_model_that_is_not_installed_fails_and_recovers_once_it_is_added(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "models")
    runtime = DecisionRuntime(lambda: Settings(decision_model="onnx/later"), store)
    try:
        status = runtime.status()
        assert status.state == "failed" and "no installed model named 'later'" in (status.reason or "")
        with pytest.raises(DecisionUnavailable) as raised:
            runtime.ask_boolean(QUERY, questions(), deadline=later())
        assert raised.value.details["kind"] == "failed"
        add_local(store, TINY_RERANKER, name="later")
        assert runtime.wait_ready(60).state == "ready"
    finally:
        runtime.close()


def test_a_file_changed_after_registration_is_never_loaded(tmp_path: Path) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(TINY_RERANKER, folder)
    store = ModelStore(tmp_path / "models")
    add_local(store, folder, name="tiny")
    data = bytearray((folder / "onnx" / "model.onnx").read_bytes())
    data[-1] ^= 0xFF
    (folder / "onnx" / "model.onnx").write_bytes(bytes(data))
    runtime = DecisionRuntime(lambda: Settings(decision_model="onnx/tiny"), store)
    try:
        status = runtime.wait_ready(60)
        assert status.state == "failed" and "changed since it was registered" in (status.reason or "")
    finally:
        runtime.close()


def test_safetensors_only_models_fail_with_a_reason(tmp_path: Path) -> None:
    folder = tmp_path / "st"
    shutil.copytree(TINY_RERANKER, folder)
    shutil.rmtree(folder / "onnx")
    (folder / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    store = ModelStore(tmp_path / "models")
    add_local(store, folder, name="st")
    runtime = DecisionRuntime(lambda: Settings(decision_model="onnx/st"), store)
    try:
        status = runtime.wait_ready(60)
        assert status.state == "failed" and "runs ONNX only" in (status.reason or "")
    finally:
        runtime.close()


# --- scores ---------------------------------------------------------------------------------


def test_probabilities_are_the_sigmoid_of_the_models_own_pair_encoding(runtime: DecisionRuntime) -> None:
    result = runtime.ask_boolean(QUERY, questions(), deadline=later())

    assert [answer.key for answer in result.answers] == [f"page-{i}" for i in range(len(DOCUMENTS))]
    assert result.unscored == () and result.tokens_scored > 0 and result.model == "onnx/tiny"
    for answer, document in zip(result.answers, DOCUMENTS):
        assert 0.0 <= answer.probability_true <= 1.0
        assert answer.value == (answer.probability_true >= 0.5)
        assert answer.probability_true == pytest.approx(direct_probability(QUERY, document), abs=1e-5)
    assert len({round(a.probability_true, 6) for a in result.answers}) > 1


def test_scores_are_deterministic_across_loads(store: ModelStore) -> None:
    first, second = make_runtime(store), make_runtime(store)
    try:
        one = first.ask_boolean(QUERY, questions(), deadline=later())
        two = second.ask_boolean(QUERY, questions(), deadline=later())
    finally:
        first.close()
        second.close()
    assert [a.probability_true for a in one.answers] == [a.probability_true for a in two.answers]


def test_batching_by_length_gives_the_scores_of_one_pair_at_a_time(store: ModelStore) -> None:
    batched, single = make_runtime(store), make_runtime(store, max_batch_rows=1)
    try:
        many = batched.ask_boolean(QUERY, questions(), deadline=later())
        ones = single.ask_boolean(QUERY, questions(), deadline=later())
        provider = batched._current()[0]
        fresh = provider.score_pairs("another query entirely", DOCUMENTS, deadline=later())
    finally:
        batched.close()
        single.close()
    assert any(len(batch) > 1 for batch in fresh.batches), "the batched runtime never batched"
    for a, b in zip(many.answers, ones.answers):
        assert a.probability_true == pytest.approx(b.probability_true, abs=1e-5)


def test_batches_group_similar_lengths_and_keep_the_callers_priority(store: ModelStore) -> None:
    provider = OnnxReranker(store.get("tiny"), OnnxOptions(max_batch_rows=3, max_batch_tokens=10_000))
    lengths = [40, 10, 42, 11, 12, 41, 100, 13]

    batches = provider.plan_batches(lengths)

    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert batches == [[0, 5, 2], [1, 3, 4], [6], [7]]
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) * longest - sum(lengths[i] for i in batch) <= 0.25 * len(batch) * longest


def test_pairs_are_truncated_to_the_token_budget_keeping_the_query(runtime: DecisionRuntime) -> None:
    provider = runtime._current()[0]
    tokenizer = Tokenizer.from_file(str(TINY_RERANKER / "tokenizer.json"))
    query_ids = tokenizer.encode(QUERY, add_special_tokens=False).ids
    long_document = DOCUMENTS[5]

    (pair,) = provider._encode(QUERY, [long_document], 48)

    assert len(pair) == 48
    assert pair[0] == tokenizer.token_to_id("[CLS]") and pair[-1] == tokenizer.token_to_id("[SEP]")
    assert pair[1:1 + len(query_ids)] == query_ids and pair[1 + len(query_ids)] == tokenizer.token_to_id("[SEP]")
    (short,) = provider._encode(QUERY, ["garden"], 48)
    assert len(short) < 48   # nothing is padded or cut when the pair fits
    long_query = " ".join([QUERY] * 20)
    (both,) = provider._encode(long_query, [long_document], 48)
    assert len(both) == 48 and both.count(tokenizer.token_to_id("[SEP]")) == 2

    result = runtime.ask_boolean(QUERY, questions([long_document, "garden"]), deadline=later(), max_pair_tokens=48)
    assert result.tokens_scored == 48 + len(short)
    assert result.answers[0].probability_true == pytest.approx(probability_of(pair), abs=1e-5)


def test_a_budget_below_the_template_is_refused(runtime: DecisionRuntime) -> None:
    with pytest.raises(InvalidParams):
        runtime.ask_boolean(QUERY, questions(), deadline=later(), max_pair_tokens=4)


def test_scores_are_cached_per_model_budget_query_and_document(runtime: DecisionRuntime) -> None:
    first = runtime.ask_boolean(QUERY, questions(), deadline=later())
    again = runtime.ask_boolean(QUERY, questions(), deadline=later())
    assert all(answer.cached for answer in again.answers) and again.tokens_scored == 0
    assert [a.probability_true for a in again.answers] == [a.probability_true for a in first.answers]
    # Cached answers need no time: even a deadline already reached returns them.
    assert len(runtime.ask_boolean(QUERY, questions(), deadline=time.monotonic()).answers) == len(DOCUMENTS)
    other_budget = runtime.ask_boolean(QUERY, questions(), deadline=later(), max_pair_tokens=32)
    assert not any(answer.cached for answer in other_budget.answers)
    other_query = runtime.ask_boolean("a different message", questions(), deadline=later())
    assert not any(answer.cached for answer in other_query.answers)


def test_keys_must_be_unique_and_the_state_non_empty(runtime: DecisionRuntime) -> None:
    with pytest.raises(InvalidParams):
        runtime.ask_boolean(QUERY, [BooleanQuestion("a", "k"), BooleanQuestion("b", "k")], deadline=later())
    with pytest.raises(InvalidParams):
        runtime.ask_boolean("   ", questions(), deadline=later())


def test_count_tokens_and_estimates_help_a_caller_size_windows(runtime: DecisionRuntime) -> None:
    counts = runtime.count_tokens(["garden", DOCUMENTS[5]])
    assert counts is not None and 0 < counts[0] < counts[1]
    estimate = runtime.estimate_seconds([64, 128])
    assert estimate is not None and estimate > 0
    pairs = runtime.pair_tokens(QUERY, ["garden", DOCUMENTS[5]], max_pair_tokens=40)
    query_tokens = runtime.count_tokens([QUERY])[0]
    assert pairs == [query_tokens + counts[0] + 3, 40]
    result = runtime.ask_boolean(QUERY, questions(["garden", DOCUMENTS[5]]), deadline=later(), max_pair_tokens=40)
    assert result.tokens_scored == sum(pairs)


# --- deadlines ------------------------------------------------------------------------------------


def test_a_deadline_too_short_scores_nothing_and_reports_everything_unscored(runtime: DecisionRuntime) -> None:
    result = runtime.ask_boolean(QUERY, questions(), deadline=time.monotonic())
    assert result.answers == () and result.tokens_scored == 0
    assert result.unscored == tuple(f"page-{i}" for i in range(len(DOCUMENTS)))


class BatchClock:
    """A clock that moves only when a batch is dispatched, by that batch's estimated cost (in order)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.costs: list[float] = []

    def __call__(self) -> float:
        return self.now

    def dispatch(self) -> None:
        self.now += self.costs.pop(0) if self.costs else 0.0


def test_the_deadline_stops_between_batches_and_cuts_the_one_that_does_not_fit(store: ModelStore) -> None:
    # A fixed throughput makes each batch's estimate exact: 1,000 tokens/s x 1.2 safety; the clock makes each
    # batch take exactly its estimate, however busy the machine is.
    clock = BatchClock()
    runtime = DecisionRuntime(lambda: Settings(decision_model="onnx/tiny"), store,
                              OnnxOptions(tokens_per_second=1000.0, max_batch_rows=3), clock=clock)
    assert runtime.wait_ready(60).state == "ready", runtime.status()
    try:
        provider = runtime._current()[0]
        long_text = " ".join([DOCUMENTS[5]] * 6)
        short, long = ["garden", "bread"], [long_text, long_text + " again", long_text + " and again"]
        documents = short + long
        encoded = provider._encode(QUERY, documents, provider.max_pair_tokens)
        plan = provider.plan_batches([len(ids) for ids in encoded])
        assert plan == [[0, 1], [2, 3, 4]]
        first_cost = provider.estimate_seconds(2, max(len(encoded[0]), len(encoded[1])))
        longest = max(len(encoded[i]) for i in (2, 3))
        one_long, two_long = provider.estimate_seconds(1, len(encoded[2])), provider.estimate_seconds(2, longest)
        gap = two_long - one_long
        assert first_cost + 0.05 < gap / 2, "the first batch must leave a clear margin"

        # Time for the first batch and one row of the second (not two): the second is cut to its best row.
        clock.costs = [first_cost]
        result = runtime.ask_boolean(QUERY, questions(documents), deadline=clock() + first_cost + one_long + gap / 2,
                                     before_dispatch=clock.dispatch)
        assert [answer.key for answer in result.answers] == ["page-0", "page-1", "page-2"]
        assert result.unscored == ("page-3", "page-4")

        # Time for the first batch only: the second is not started at all.
        fresh = [f"{text} (fresh)" for text in documents]   # nothing from the score cache
        encoded = provider._encode(QUERY, fresh, provider.max_pair_tokens)
        first_cost = provider.estimate_seconds(2, max(len(encoded[0]), len(encoded[1])))
        assert provider.estimate_seconds(1, len(encoded[2])) > first_cost + 0.1
        clock.costs = [first_cost]
        result = runtime.ask_boolean(QUERY, questions(fresh), deadline=clock() + first_cost + 0.04,
                                     before_dispatch=clock.dispatch)
    finally:
        runtime.close()
    assert [answer.key for answer in result.answers] == ["page-0", "page-1"]
    assert result.unscored == ("page-2", "page-3", "page-4")
    assert all(0 <= answer.probability_true <= 1 for answer in result.answers)


class _RunsUntilTerminated:
    """A session whose run goes on until its RunOptions are terminated, then fails as onnxruntime does.

    No wall-clock race: the run waits on the flag, not on a duration. If nothing ever terminates it,
    it gives up after a minute and answers logits, which the test then rejects.
    """

    def __init__(self, session: Any) -> None:
        self.session = session
        self.waited = threading.Event()

    def run(self, names: Any, feeds: dict[str, Any], run_options: Any) -> list[Any]:
        give_up = time.monotonic() + 60
        while not run_options.terminate and time.monotonic() < give_up:
            time.sleep(0.005)
        self.waited.set()
        if run_options.terminate:
            raise RuntimeError("Exiting due to terminate flag being set to true.")
        return self.session.run(names, feeds)


def test_a_run_still_going_at_the_deadline_is_terminated(runtime: DecisionRuntime) -> None:
    # What happens when a batch's estimate was too optimistic: onnxruntime is told to stop at the deadline.
    provider = runtime._current()[0]
    ids = np.full((4, 16), 7, dtype=np.int64)
    assert provider._run(ids, np.ones_like(ids), None) is not None

    real = provider._session
    provider._session = slow = _RunsUntilTerminated(real)
    try:
        assert provider._run(ids, np.ones_like(ids), time.monotonic() + 0.05) is None
    finally:
        provider._session = real
    assert slow.waited.is_set()


def test_a_run_that_starts_after_its_deadline_is_refused_by_onnxruntime(runtime: DecisionRuntime) -> None:
    # The real session: terminated before it starts, onnxruntime stops without scoring anything.
    provider = runtime._current()[0]
    ids = np.full((4, 16), 7, dtype=np.int64)
    assert provider._run(ids, np.ones_like(ids), time.monotonic() - 1) is None
    assert provider._run(ids, np.ones_like(ids), None) is not None


def test_before_dispatch_runs_before_every_batch_and_can_stop_the_call(store: ModelStore) -> None:
    runtime = make_runtime(store, max_batch_rows=1)
    calls: list[int] = []
    try:
        runtime.ask_boolean(QUERY, questions(DOCUMENTS[:3]), deadline=later(), before_dispatch=lambda: calls.append(1))
        assert len(calls) == 3

        def revoked() -> None:
            raise PermissionError("authority revoked")

        with pytest.raises(PermissionError):
            runtime.ask_boolean("fresh query", questions(DOCUMENTS[:3]), deadline=later(), before_dispatch=revoked)
    finally:
        runtime.close()


# --- choice questions -------------------------------------------------------------------------------


def test_a_choice_ranks_the_options_above_the_none_option(runtime: DecisionRuntime) -> None:
    options = tuple(DOCUMENTS)
    result = runtime.ask_choice(QUERY, ChoiceQuestion(options, top=3), deadline=later())

    assert result.none_score is not None and set(result.scores) == set(range(len(options)))
    above = sorted((i for i, s in result.scores.items() if s > result.none_score), key=lambda i: -result.scores[i])
    assert list(result.chosen) == above[:3]
    assert result.unscored == ()


def test_choice_questions_are_bounded(runtime: DecisionRuntime) -> None:
    with pytest.raises(InvalidParams):
        runtime.ask_choice(QUERY, ChoiceQuestion(tuple(["x"] * (MAX_CHOICE_OPTIONS + 1))), deadline=later())
    with pytest.raises(InvalidParams):
        runtime.ask_choice(QUERY, ChoiceQuestion(()), deadline=later())
    full = runtime.ask_choice(QUERY, ChoiceQuestion(tuple(f"label {i}" for i in range(MAX_CHOICE_OPTIONS))),
                              deadline=later())
    assert len(full.scores) + len(full.unscored) == MAX_CHOICE_OPTIONS


class YesNoProvider:
    """A provider that can only say yes or no."""

    state, reason, tokens_per_second = "ready", None, None

    def score_pairs(self, query: str, documents: list[str], **_: Any) -> PairScores:
        return PairScores(scores=["garden" in document for document in documents])


def test_a_provider_without_probabilities_answers_true_with_none(store: ModelStore) -> None:
    runtime = DecisionRuntime(lambda: Settings(decision_model="yesno/x"), store,
                              providers={"yesno": lambda name, settings: YesNoProvider()})
    result = runtime.ask_boolean(QUERY, questions(["garden", "kitchen"]), deadline=later())
    assert [(a.value, a.probability_true) for a in result.answers] == [(True, None), (False, None)]
    choice = runtime.ask_choice(QUERY, ChoiceQuestion(("garden tools", "kitchen")), deadline=later())
    assert choice.chosen == (0,) and choice.none_score is None


# --- configuration and the engine -------------------------------------------------------------------


def test_an_invalid_decision_model_is_reported_and_the_last_valid_one_stays(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"decisionModel": "onnx/tiny"}), encoding="utf-8")
    source = SettingsSource(config)
    assert source.current().decision_model == "onnx/tiny"
    for bad in ({"decisionModel": "gpt/tiny"}, {"decisionModel": "rerank/m"},
                {"decisionModel": "rerank/m", "models": {"providers": {"rerank": {"baseUrl": "file:///x"}}}}):
        config.write_text(json.dumps(bad), encoding="utf-8")
        settings = source.current()
        assert settings.decision_model == "onnx/tiny" and source.problem, bad
    config.write_text(json.dumps({"decisionModel": "rerank/BAAI/bge", "models": {"providers": {"rerank": {
        "baseUrl": "http://127.0.0.1:8080/", "models": [{"id": "BAAI/bge"}]}}}}), encoding="utf-8")
    settings = source.current()
    assert (settings.decision_model, settings.rerank_base_url, source.problem) == (
        "rerank/BAAI/bge", "http://127.0.0.1:8080", None)


def test_the_engine_loads_the_configured_model_and_joins_the_loader_on_close(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    add_local(ModelStore(state.models), TINY_RERANKER, name="tiny")
    state.create()
    state.config.write_text(json.dumps({"decisionModel": "onnx/tiny"}), encoding="utf-8")
    with Engine(state, watch=False) as engine:
        engine.stores()
        assert not [t for t in threading.enumerate() if t.name.startswith("decision-load")], \
            "an engine that is only opened (doctor, reindex ...) must not load the model"
        assert engine.decision.wait_ready(60).state == "ready"
        result = engine.decision.ask_boolean(QUERY, questions(DOCUMENTS[:2]), deadline=later())
        assert len(result.answers) == 2
    assert not [t for t in threading.enumerate() if t.name.startswith("decision-load")]
