"""The gate log in figures: outcomes, latency percentiles and the score histogram by tier."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from engine.core.errors import InvalidParams
from engine.gate.turn import gate_turn
from engine.gate.stats import gate_stats
from engine.service import Engine
from tests.engine.gate_helpers import FakeRerank, owner_caller, rerank_engine, seed


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Engine, FakeRerank]]:
    with rerank_engine(tmp_path, {"Alice Martin": 0.92, "Harbour museum": 0.61, "Budget report": 0.12},
                       {"mode": "shadow", "mediumThreshold": 0.5}) as running:
        yield running


def test_scores_are_binned_by_tier_and_outcomes_counted(setup) -> None:
    engine, _ = setup
    caller = owner_caller(engine)
    seed(engine, caller)
    for message in ("mural museum", "budget report museum", "nothing matches zebra"):
        gate_turn(engine, caller, {"message": message})

    stats = gate_stats(engine, {"agent": "main", "bins": 10})
    assert stats["turns"] == stats["total"] == 3
    assert stats["outcomes"] == {"shadow": 3}
    assert sum(stats["wouldInject"].values()) == 3
    assert stats["latencyMs"]["p50"] <= stats["latencyMs"]["p95"] <= stats["latencyMs"]["max"]
    bins = stats["scores"]["bins"]
    assert len(bins) == 10 and bins[0]["from"] == 0.0 and bins[-1]["to"] == 1.0
    assert bins[9]["high"] == 2 and bins[9]["medium"] == 0, "Alice (0.92) twice, high"
    assert bins[6]["medium"] == 2, "Harbour museum (0.61) twice, medium"
    assert bins[1]["low"] == 1, "Budget report (0.12) once, low"
    assert sum(b[t] for b in bins for t in ("high", "medium", "low")) == 5


def test_an_empty_log_and_bad_parameters(setup) -> None:
    engine, _ = setup
    seed(engine, owner_caller(engine, "other"))   # a store, no gate turn yet
    with pytest.raises(InvalidParams):
        gate_stats(engine, {"agent": "other", "bins": 1})
    stats = gate_stats(engine, {"agent": "other"})
    assert stats["turns"] == 0 and stats["latencyMs"] is None and len(stats["scores"]["bins"]) == 20
