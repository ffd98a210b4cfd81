"""The gate log in figures, for the desktop's charts: outcomes, latency and the score distribution.

``operator/gateStats {agent, bins?, limit?}`` reads the newest ``limit`` rows
of the agent's gate log (``gate_turns``, at most the 5,000 a partition keeps)
and answers:

    turns        how many rows were read (of ``total``)
    outcomes     turns per outcome; ``wouldInject`` per shadow verdict
    latencyMs    p50, p95 and max over the turns (null without turns)
    scores       ``bins`` equal-width score bins over 0..1, each with its decisions per tier
                 (high, medium, low); ``unscored`` and ``noProbability`` count the decisions without a score

The window's Qt models only show these rows; the counting happens here,
next to the data.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..access.authority import OperatorCaller, StoreEntry
from ..core.answers import TypedDict
from .journal import KEEP_TURNS
from ..core.methods import Method
from ..core.params import AGENT, Integer, Params

if TYPE_CHECKING:
    from ..store.open_store import OpenStore
    from ..store.store import Store

DEFAULT_BINS = 20
TIERS = ("high", "medium", "low")
STATS_PARAMS = AGENT + Params(Integer("bins", 2, 100, default=DEFAULT_BINS, scale=True),
                             Integer("limit", 1, KEEP_TURNS, default=KEEP_TURNS, scale=True))


# "from" is a keyword: the functional form declares it.  One bin of scores, counted per tier.
TierBin = TypedDict("TierBin", {"from": float, "to": float, "high": int, "medium": int, "low": int})


class Latency(TypedDict):
    p50: float
    p95: float
    max: float


class ScoreBins(TypedDict):
    bins: list[TierBin]
    unscored: int
    noProbability: int  # decisions answered yes/no without a probability


class GateStats(TypedDict):
    """``operator/gateStats``: the newest ``turns`` of the partition's ``total`` kept."""

    turns: int
    total: int
    outcomes: dict[str, int]
    wouldInject: dict[str, int]
    latencyMs: Latency | None
    scores: ScoreBins


def methods(engine: "StoreEntry[OpenStore]") -> tuple[Method, ...]:
    """``operator/gateStats`` (engine/core/methods.py)."""
    return (Method("gateStats", STATS_PARAMS, GateStats, lambda params: gate_stats(engine, params)),)


def gate_stats(engine: "StoreEntry[OpenStore]", params: dict[str, Any]) -> GateStats:
    values = STATS_PARAMS.read(params)
    return engine.on_store(OperatorCaller(values["agent"]), lambda runtime, authority: summarize(
        runtime.store, authority.partition, values["bins"], values["limit"]))


def summarize(store: "Store", partition: str, bins: int, limit: int) -> GateStats:
    total = store.db.one("SELECT COUNT(*) AS n FROM gate_turns WHERE partition = ?", (partition,))["n"]
    rows = store.db.all("SELECT outcome, would, latency_ms, decisions FROM gate_turns WHERE partition = ? "
                        "ORDER BY seq DESC LIMIT ?", (partition, limit))
    outcomes: Counter[str] = Counter()
    would: Counter[str] = Counter()
    latencies: list[float] = []
    histogram = [{"from": round(n / bins, 4), "to": round((n + 1) / bins, 4), **{tier: 0 for tier in TIERS}}
                 for n in range(bins)]
    unscored = no_probability = 0
    for row in rows:
        outcomes[row["outcome"]] += 1
        if row["would"]:
            would[row["would"]] += 1
        latencies.append(float(row["latency_ms"]))
        for decision in json.loads(row["decisions"]):
            score, tier = decision.get("score"), decision.get("tier")
            if tier == "unscored":
                unscored += 1
            elif score is None:
                no_probability += 1
            else:
                slot = histogram[min(bins - 1, max(0, int(float(score) * bins)))]
                slot[tier if tier in TIERS else "low"] += 1
    return {"turns": len(rows), "total": total, "outcomes": dict(outcomes), "wouldInject": dict(would),
            "latencyMs": _latency(latencies),
            "scores": {"bins": histogram, "unscored": unscored, "noProbability": no_probability}}


def _latency(values: list[float]) -> Latency | None:
    if not values:
        return None
    ordered = sorted(values)

    def percentile(share: float) -> float:
        return round(ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))], 1)

    return {"p50": percentile(0.5), "p95": percentile(0.95), "max": round(ordered[-1], 1)}
