"""Thresholds from labels, simulated: does a ``highThreshold`` proposed from 50 labelled turns give the asked
precision on the next 50 turns of the same store?

A store's turns are drawn from a known mixture (``Shape``): each turn offers
``candidates`` pages; with ``quiet`` probability it needs none, else one or
two, each of them offered (scored) with ``offered`` probability; a needed
page's score is Beta(``needed``) and every other page's Beta(``other``).  The
proposal (engine/gate/suggest.py) is made from the first ``train`` turns'
labels, and its precision measured on the next ``test`` turns' labels
(``realized``) and on a large sample of the same mixture (``expected``: what
the threshold gives in the long run).  Seeded: the same seed, the same
figures.  ``scripts/gate_threshold_sim.py`` prints the table for
docs/benchmarks/gate-quality.md.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass
from statistics import mean
from typing import Any, Sequence

from ..gate.suggest import propose

LONG_RUN_TURNS = 20_000


@dataclass(frozen=True)
class Shape:
    name: str
    needed: tuple[float, float]     # Beta(a, b) of a needed page's score
    other: tuple[float, float]      # Beta(a, b) of every other page's score
    quiet: float = 0.3              # turns needing no page (small talk, unrelated tasks)
    offered: float = 0.9            # a needed page is among the scored candidates
    candidates: int = 10


SHAPES = (
    # A cross-encoder's probabilities: needed pages high, the rest low, spread over 0..1.
    Shape("reranker", needed=(4.0, 1.5), other=(1.0, 6.0)),
    # The embedding model on long transcripts (issue 29): every score low, needed pages' median ~0.045.
    Shape("embedding", needed=(2.5, 50.0), other=(1.2, 100.0)),
    # Mostly off-topic turns, and needed pages often missed by the shortlist.
    Shape("off-topic", needed=(3.0, 2.0), other=(1.0, 4.0), quiet=0.6, offered=0.7),
)


def draw_turns(shape: Shape, rng: random.Random, count: int, start: int = 0) -> list[dict[str, Any]]:
    """``count`` labelled turns as the gate log keeps them (decisions with scores, ``needed`` ids)."""
    turns = []
    for number in range(start, start + count):
        wanted = 0 if rng.random() < shape.quiet else (1 if rng.random() < 0.7 else 2)
        needed = [f"pg_{number}_n{k}" for k in range(wanted)]
        offered = [page for page in needed if rng.random() < shape.offered]
        decisions = [{"id": page, "score": rng.betavariate(*shape.needed)} for page in offered]
        decisions += [{"id": f"pg_{number}_o{k}", "score": rng.betavariate(*shape.other)}
                      for k in range(shape.candidates - len(offered))]
        rng.shuffle(decisions)
        turns.append({"id": f"gt_{number}", "decisions": decisions, "needed": needed})
    return turns


class PrecisionCurve:
    """The precision of ``turns``' labels at any threshold: pages at or above it that were needed."""

    def __init__(self, turns: Sequence[dict[str, Any]]) -> None:
        pages = sorted((d["score"], d["id"] in set(turn["needed"])) for turn in turns for d in turn["decisions"])
        self.scores = [score for score, _ in pages]
        self.hits_above = [0] * (len(pages) + 1)   # needed pages from position n on
        for position in range(len(pages) - 1, -1, -1):
            self.hits_above[position] = self.hits_above[position + 1] + pages[position][1]

    def threshold_for(self, precision: float, settle: int = 200) -> float:
        """The lowest score from which down the precision first falls below ``precision`` (past the top
        ``settle`` pages): on a long run, the threshold an oracle would choose."""
        for position in range(len(self.scores) - settle, -1, -1):
            if self.hits_above[position] < precision * (len(self.scores) - position):
                return self.scores[position + 1]
        return self.scores[0]

    def at(self, threshold: float) -> float | None:
        start = bisect.bisect_left(self.scores, threshold)
        injected = len(self.scores) - start
        return self.hits_above[start] / injected if injected else None


@dataclass(frozen=True)
class Trial:
    seed: int
    threshold: float | None
    realized: float | None      # on the next ``test`` turns (None: nothing injected there, or no proposal)
    expected: float | None      # in the long run


def run_trial(shape: Shape, seed: int, precision: float, train: int = 50, test: int = 50,
              long_run: PrecisionCurve | None = None) -> Trial:
    rng = random.Random(f"{shape.name}:{seed}")
    labelled = draw_turns(shape, rng, train)
    following = draw_turns(shape, rng, test, start=train)
    proposal = propose(labelled, precision)["highThreshold"]
    if proposal is None:
        return Trial(seed, None, None, None)
    threshold = proposal["threshold"]
    return Trial(seed, threshold, PrecisionCurve(following).at(threshold),
                 long_run.at(threshold) if long_run is not None else None)


@dataclass(frozen=True)
class Summary:
    shape: str
    precision: float
    seeds: int
    proposed: int
    within: int                 # realized within ``tolerance`` of the asked precision
    expected_within: int        # long-run precision within ``tolerance``
    mean_realized: float
    mean_expected: float
    below: int                  # realized below the asked precision by more than ``tolerance``
    oracle_within: int          # the long run's own threshold, realized on the same next turns within ``tolerance``


def summarize(shape: Shape, precision: float, seeds: int, tolerance: float = 0.05, train: int = 50,
              test: int = 50) -> Summary:
    long_run = PrecisionCurve(draw_turns(shape, random.Random(f"{shape.name}:long-run"), LONG_RUN_TURNS))
    trials = [run_trial(shape, seed, precision, train, test, long_run) for seed in range(seeds)]
    realized = [t.realized for t in trials if t.realized is not None]
    oracle = long_run.threshold_for(precision)
    oracle_realized = [_next_turns(shape, seed, train, test).at(oracle) for seed in range(seeds)]
    expected = [t.expected for t in trials if t.expected is not None]
    return Summary(shape.name, precision, seeds, sum(t.threshold is not None for t in trials),
                   sum(abs(value - precision) <= tolerance for value in realized),
                   sum(abs(value - precision) <= tolerance for value in expected),
                   mean(realized) if realized else float("nan"), mean(expected) if expected else float("nan"),
                   sum(value < precision - tolerance for value in realized),
                   sum(value is not None and abs(value - precision) <= tolerance for value in oracle_realized))


def _next_turns(shape: Shape, seed: int, train: int, test: int) -> PrecisionCurve:
    """The same next turns a trial of ``seed`` measures on."""
    rng = random.Random(f"{shape.name}:{seed}")
    draw_turns(shape, rng, train)
    return PrecisionCurve(draw_turns(shape, rng, test, start=train))
