"""Planning the gate's scoring to its deadline, and the injected block, on the tiny ONNX fixture."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest

from engine.index.analysis import Analyzer
from engine.state.config import Settings
from engine.decision.runtime import DecisionRuntime
from engine.decision.onnx import OnnxOptions
from engine.gate.candidates import Candidate
from engine.gate.scoring import (
    BLOCK_MAX_CHARS, MIN_WINDOW_TOKENS, WINDOW_STEP, plan_gate_scoring, render_block,
)
from engine.state.gate_settings import GateSettings
from engine.search.passages import PassageFinder
from models.fixtures import TINY_RERANKER
from models.installed import ModelStore
from models.local import add_local

MESSAGE = "when is the budget report for the museum due"
FINDER = PassageFinder(Analyzer())


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[DecisionRuntime]:
    store = ModelStore(tmp_path / "models")
    add_local(store, TINY_RERANKER, name="tiny")
    # A fixed pretend throughput makes the token budget exact: 1,000 tokens/s.
    runtime = DecisionRuntime(lambda: Settings(decision_model="onnx/tiny"), store,
                              OnnxOptions(tokens_per_second=1000))
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
    plan = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), time.monotonic() + 60)
    assert plan.planned == 3 and plan.window_tokens is None
    assert plan.documents == [f"{c.title}\n{c.excerpt}" for c in pages]


def test_a_short_budget_windows_every_excerpt_and_fits_the_time_left(runtime: DecisionRuntime) -> None:
    pages = candidates(4)
    deadline = time.monotonic() + 0.6
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
    assert time.monotonic() + runtime.estimate_seconds(lengths) <= deadline


def test_a_very_short_budget_scores_the_best_candidates_first_and_leaves_the_rest(runtime: DecisionRuntime) -> None:
    pages = candidates(10)
    plan = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), time.monotonic() + 0.25)
    assert 0 < plan.planned < 10 and len(plan.documents) == plan.planned
    assert plan.documents[0].startswith("Page 0\n"), "the best keyword candidates come first"
    nothing = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), time.monotonic() + 0.01)
    assert (nothing.planned, nothing.documents) == (0, [])


def test_windows_are_stable_so_repeated_turns_hit_the_score_cache(runtime: DecisionRuntime) -> None:
    pages = candidates(4)
    first = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), time.monotonic() + 0.6)
    again = plan_gate_scoring(runtime, MESSAGE, pages, FINDER, GateSettings(), time.monotonic() + 0.6)
    assert first.documents == again.documents


def test_the_block_is_capped_and_clipped_pages_end_with_an_ellipsis() -> None:
    pages = [Candidate(f"pg_{i}", 1, "note", f"Page {i}", f"Page {i}", excerpt="word " * 700) for i in range(4)]
    text = render_block(pages, [])
    assert text is not None and len(text) <= BLOCK_MAX_CHARS
    assert text.count("### Page") == 2 and text.endswith("…")
    assert render_block([], []) is None
