"""Planning the gate's scoring to its deadline, and the injected block, on the tiny ONNX fixture."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from engine.index.analysis import Analyzer
from engine.state.config import Settings
from engine.decision.runtime import DecisionRuntime
from engine.decision.onnx import OnnxOptions
from engine.gate.candidates import Candidate
from engine.gate.scoring import (
    BLOCK_MAX_CHARS, MIN_WINDOW_TOKENS, WINDOW_STEP, cheap_order, plan_gate_scoring, render_block,
)
from engine.state.gate_settings import GateSettings
from engine.search.passages import PassageFinder
from models.fixtures import TINY_RERANKER
from models.installed import ModelStore
from models.local import add_local

NOW = 1000.0       # the runtime's clock stands still: a plan depends on its budget, never on the machine's load
MESSAGE = "when is the budget report for the museum due"
FINDER = PassageFinder(Analyzer())


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[DecisionRuntime]:
    store = ModelStore(tmp_path / "models")
    add_local(store, TINY_RERANKER, name="tiny")
    # A fixed pretend throughput and a clock that stands still make the token budget exact: 1,000 tokens/s.
    runtime = DecisionRuntime(lambda: Settings(decision_model="onnx/tiny"), store,
                              OnnxOptions(tokens_per_second=1000), clock=lambda: NOW)
    assert runtime.wait_ready(60).state == "ready"
    yield runtime
    runtime.close()


def candidates(count: int, paragraphs: int = 6) -> list[Candidate]:
    result = []
    for index in range(count):
        text = "\n\n".join(f"Paragraph {p} of page {index}: the budget report for the museum is due on "
                           f"Friday, says the owner after the meeting about coffee and tea." for p in range(paragraphs))
        result.append(Candidate(f"pg_{index}", 1, "note", f"Page {index}", f"Page {index}", excerpt=text))
    return result


def tokens(runtime: DecisionRuntime, document: str) -> int:
    return runtime.pair_tokens(MESSAGE, [document])[0]


def test_with_time_enough_every_candidate_is_scored_on_its_whole_excerpt(runtime: DecisionRuntime) -> None:
    pages = candidates(3, paragraphs=1)
    plan = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), NOW + 60)
    assert plan.planned == 3 and plan.window_tokens is None
    assert plan.documents == [f"{c.title}\n{c.excerpt}" for c in pages]


def test_a_short_budget_windows_every_excerpt_and_fits_the_time_left(runtime: DecisionRuntime) -> None:
    pages = candidates(4)
    deadline = NOW + 0.6
    plan = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), deadline)
    assert plan.planned == 4 and plan.window_tokens is not None
    assert plan.window_tokens >= MIN_WINDOW_TOKENS and plan.window_tokens % WINDOW_STEP == 0
    lengths = [tokens(runtime, document) for document in plan.documents]
    assert sum(lengths) <= plan.budget_tokens <= 0.6 * 1000
    for page, document in zip(pages, plan.documents):
        title, excerpt = document.split("\n", 1)
        assert title == page.title and "budget report" in excerpt and len(excerpt) < len(page.excerpt)
        assert runtime.count_tokens([excerpt])[0] <= plan.window_tokens
    # Estimated with the runtime's own cost model, the planned pairs finish before the deadline.
    assert NOW + runtime.estimate_seconds(lengths) <= deadline


def test_a_very_short_budget_scores_the_best_candidates_first_and_leaves_the_rest(runtime: DecisionRuntime) -> None:
    pages = candidates(10)
    plan = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), NOW + 0.25)
    assert 0 < plan.planned < 10 and len(plan.documents) == plan.planned
    assert plan.documents[0].startswith("Page 0\n"), "the best keyword candidates come first"
    nothing = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), NOW + 0.01)
    assert (nothing.planned, nothing.documents) == (0, [])


def test_windows_are_stable_so_repeated_turns_hit_the_score_cache(runtime: DecisionRuntime) -> None:
    pages = candidates(4)
    first = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), NOW + 0.6)
    again = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), NOW + 0.6)
    assert first.documents == again.documents


def test_the_plan_measures_the_time_left_on_the_runtimes_clock(runtime: DecisionRuntime) -> None:
    pages = candidates(4)
    early = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), NOW + 0.3)
    runtime.clock = lambda: NOW + 0.3   # the same time left, 0.3 s later on the runtime's clock
    late = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), NOW + 0.6)
    assert late.budget_tokens == early.budget_tokens and late.documents == early.documents
    assert plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), NOW + 0.3).planned == 0


def test_the_block_is_capped_and_clipped_pages_end_with_an_ellipsis() -> None:
    pages = [Candidate(f"pg_{i}", 1, "note", f"Page {i}", f"Page {i}", excerpt="word " * 700) for i in range(4)]
    text = render_block(pages, [])
    assert text is not None and len(text) <= BLOCK_MAX_CHARS
    assert text.count("### Page") == 2 and text.endswith("…")
    assert render_block([], []) is None


# --- the cascade: long windows for the likeliest pages ------------------------------------------------------


def excerpt_tokens(runtime: DecisionRuntime, document: str) -> int:
    return runtime.count_tokens([document.split("\n", 1)[1]])[0]


def test_the_cascade_gives_the_first_pages_long_windows_and_the_rest_the_minimum(runtime: DecisionRuntime) -> None:
    pages = candidates(8)
    deadline = NOW + 1.2
    equal = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), deadline)
    cascade = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(long_windows=3), deadline)
    assert equal.planned == cascade.planned == 8 and equal.long_windows == 0 and equal.short_window_tokens is None
    assert (cascade.long_windows, cascade.short_window_tokens) == (3, MIN_WINDOW_TOKENS)
    assert cascade.window_tokens % WINDOW_STEP == 0 and cascade.window_tokens >= 2 * equal.window_tokens
    long = [excerpt_tokens(runtime, d) for d in cascade.documents[:3]]
    short = [excerpt_tokens(runtime, d) for d in cascade.documents[3:]]
    assert all(equal.window_tokens < n <= cascade.window_tokens for n in long), (long, equal.window_tokens)
    assert all(n <= MIN_WINDOW_TOKENS for n in short) and all("budget" in d for d in cascade.documents)
    assert [d.split("\n", 1)[0] for d in cascade.documents] == [c.title for c in pages], "the caller's order stays"
    # The same budget: the cascade moves tokens between pages, it does not spend more.
    lengths = [tokens(runtime, d) for d in cascade.documents]
    assert sum(lengths) <= cascade.budget_tokens
    assert NOW + runtime.estimate_seconds(lengths) <= deadline


def test_without_long_windows_the_plan_is_the_equal_windows_one(runtime: DecisionRuntime) -> None:
    pages = candidates(6)
    deadline = NOW + 0.8
    assert plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(long_windows=0), deadline).documents == \
        plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), deadline).documents
    # As many long windows as planned pages is the equal split too.
    every = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(long_windows=10), deadline)
    assert every.long_windows == 0 and every.short_window_tokens is None
    assert every.documents == plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), deadline).documents


def test_the_cheap_order_ranks_by_shortlist_similarity_or_both() -> None:
    pages = [Candidate(f"pg_{i}", 1, "note", f"Page {i}", f"Page {i}") for i in range(5)]
    similarities = {"pg_0": 0.1, "pg_1": 0.2, "pg_2": 0.9, "pg_4": 0.8}   # pg_3 has no vector

    def ids(order: list[Candidate]) -> list[str]:
        return [c.id for c in order]

    assert ids(cheap_order(pages, similarities, "shortlist")) == ["pg_0", "pg_1", "pg_2", "pg_3", "pg_4"]
    assert ids(cheap_order(pages, similarities, "similarity")) == ["pg_2", "pg_4", "pg_1", "pg_0", "pg_3"]
    # Reciprocal rank: shortlist places 0-4 and similarity places (pg_2, pg_4, pg_1, pg_0) add up.
    assert ids(cheap_order(pages, similarities, "fused")) == ["pg_2", "pg_0", "pg_1", "pg_4", "pg_3"]
    for how in ("shortlist", "similarity", "fused"):
        assert ids(cheap_order(pages, None, how)) == ids(pages) == ids(cheap_order(pages, {}, how))
    with pytest.raises(ValueError):
        cheap_order(pages, similarities, "bm25")
