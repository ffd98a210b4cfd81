"""What this machine can score: the Models view's one-click benchmark of an installed ONNX model.

The benchmark loads its own copy of the model (every file re-hashed, as any
load does; the engine's own Decision model is left alone), scores batches of
synthetic (message, page) pairs of fixed token lengths through the
runtime's own scoring path, and turns the measured throughput into what the
recall gate's budget holds: the tokens a turn can score at a given
``timeoutMs``, planned the way the gate plans (``gate_scoring.py``: the
publishing reserve, the per-batch overhead, the runtime's safety factor
and the padding slack), and what that means for ``maxCandidates`` pages.

It competes with the engine for the CPU while it runs (seconds), so the
figures are a little pessimistic on a busy machine, never optimistic.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..core.answers import NotRequired, TypedDict

from models.installed import PINNED, InstalledModel, RecordedFile

from ..decision.onnx import READY, OnnxOptions, OnnxReranker
from ..gate.scoring import MIN_WINDOW_TOKENS, PADDING_SLACK, PUBLISH_RESERVE_S, WINDOW_STEP

LENGTHS = (64, 128, 256)           # pair lengths measured (the gate's pairs are mostly 60-150 tokens)
PAIRS_PER_ROUND = 8                # one batch, as the gate sends them
MIN_SECONDS_PER_LENGTH = 1.0
MAX_ROUNDS = 4
HEADLINE_LENGTH = 128
BUDGET_TIMEOUTS_MS = (500, 1000, 1500, 3000, 5000, 10000)
# A typical turn: a short message, and a page title before each excerpt.
TYPICAL_MESSAGE = "What did Alice say about the harbour museum mural last week?"
TYPICAL_TITLE = "Harbour museum\n"
FILLER = ("The harbour museum shows the mural Alice painted in March. Opening hours are ten to six, closed on "
          "Mondays. The quarterly budget report is due on Friday, and the order-events schema is nearly done. ")

Progress = Callable[..., None]   # progress(done, total, message=...), raises to cancel


# --- answers ---------------------------------------------------------------------------------------


class LengthMeasure(TypedDict):
    """Throughput at one pair length."""

    pairTokens: int
    pairs: int
    tokens: int
    seconds: float
    tokensPerSecond: float


class GateBudget(TypedDict):
    """What one gate turn of ``timeoutMs`` can score (``windowTokens`` null: fewer pages than asked)."""

    timeoutMs: int
    tokens: int
    candidatesScored: int
    windowTokens: int | None


class Fidelity(TypedDict):
    """How far a variant's probabilities are from fp32's on the same pairs."""

    pairs: int
    maxDifference: float
    meanDifference: float
    sameFirst: float


class Recommendation(TypedDict):
    recommendation: str | None
    why: str


class VariantMeasure(TypedDict):
    name: str
    variant: str
    onnx: str | None
    tokensPerSecond: float
    fidelity: Fidelity | None
    speedup: float | None


class VariantComparison(Recommendation):
    pairTokens: int
    rounds: int
    variants: list[VariantMeasure]
    reference: str | None
    fastest: str


class Benchmark(TypedDict):
    """A model's measured throughput and the gate budgets it allows; ``variants`` when asked to compare."""

    model: str
    variant: str
    loadSeconds: float
    threads: int
    tokensPerSecond: float
    lengths: list[LengthMeasure]
    timeoutMs: int
    maxCandidates: int
    pairOverheadTokens: int
    budget: GateBudget
    budgets: list[GateBudget]
    variants: NotRequired[VariantComparison]


def benchmark_model(model: InstalledModel, progress: Progress, *, timeout_ms: int, max_candidates: int,
                    options: OnnxOptions | None = None) -> Benchmark:
    """Load ``model``, measure its tokens per second, and size the gate's budget at ``timeout_ms``."""
    steps = 1 + len(LENGTHS)
    progress(0, steps, message=f"Verifying and loading {model.name}")
    started = time.monotonic()
    reranker = OnnxReranker(model, options or OnnxOptions())
    reranker.load()
    if reranker.state != READY:
        raise ValueError(f"model {model.name} could not be loaded: {reranker.reason}")
    load_seconds = time.monotonic() - started
    lengths = [length for length in LENGTHS if length <= reranker.max_pair_tokens] or [reranker.max_pair_tokens]
    document = _long_document(reranker, max(lengths))
    measured = []
    for step, length in enumerate(lengths, start=1):
        progress(step, steps, message=f"Scoring pairs of {length} tokens")
        measured.append(_measure(reranker, document, length, progress, step, steps))
    progress(steps, steps, message="Done")
    headline = next((row for row in measured if row["pairTokens"] == HEADLINE_LENGTH), measured[-1])
    rate = headline["tokensPerSecond"]
    fixed = reranker.pair_tokens(TYPICAL_MESSAGE, [""])[0] + reranker.count_tokens([TYPICAL_TITLE])[0]
    timeouts = sorted({*BUDGET_TIMEOUTS_MS, timeout_ms})
    return {
        "model": model.name, "variant": model.variant, "loadSeconds": round(load_seconds, 2),
        "threads": _threads(reranker.options), "tokensPerSecond": round(rate, 1),
        "lengths": measured, "timeoutMs": timeout_ms, "maxCandidates": max_candidates,
        "pairOverheadTokens": fixed,
        "budget": gate_budget(rate, timeout_ms, max_candidates, fixed, reranker.options),
        "budgets": [gate_budget(rate, ms, max_candidates, fixed, reranker.options) for ms in timeouts],
    }


def gate_budget(tokens_per_second: float, timeout_ms: int, max_candidates: int, fixed_tokens: int,
                options: OnnxOptions) -> GateBudget:
    """What one gate turn of ``timeout_ms`` can score at this throughput (the plan of gate_scoring.py).

    ``fixed_tokens`` is what every pair costs before its excerpt (the
    message, the template's special tokens and a title).  ``windowTokens``
    is the excerpt each of ``max_candidates`` pages would get (None: not
    even ``MIN_WINDOW_TOKENS`` each, so fewer pages are scored:
    ``candidatesScored``).
    """
    per_token = options.safety / tokens_per_second
    batches = max(1, math.ceil(max_candidates / 8))
    available = timeout_ms / 1000 - PUBLISH_RESERVE_S - batches * options.fixed_overhead_s
    tokens = int(max(0.0, available) / per_token * PADDING_SLACK)
    share = tokens // max(1, max_candidates) - fixed_tokens
    window = share // WINDOW_STEP * WINDOW_STEP if share >= MIN_WINDOW_TOKENS else None
    scored = max_candidates if window is not None else min(max_candidates,
                                                           tokens // (fixed_tokens + MIN_WINDOW_TOKENS))
    return {"timeoutMs": timeout_ms, "tokens": tokens, "candidatesScored": scored, "windowTokens": window}


def _measure(reranker: OnnxReranker, document: str, length: int, progress: Progress, step: int,
             steps: int) -> LengthMeasure:
    tokens, seconds, rounds = 0, 0.0, 0
    while rounds < MAX_ROUNDS and (rounds == 0 or seconds < MIN_SECONDS_PER_LENGTH):
        progress(step, steps, message=f"Scoring pairs of {length} tokens (round {rounds + 1})")
        # A fresh message each round: the runtime's score cache must not answer for the model.
        query = f"Benchmark {length}-{rounds}-{time.monotonic_ns()}: {TYPICAL_MESSAGE}"
        documents = [f"Page {n}. {document}" for n in range(PAIRS_PER_ROUND)]
        started = time.perf_counter()
        scored = reranker.score_pairs(query, documents, deadline=time.monotonic() + 600, max_pair_tokens=length)
        seconds += time.perf_counter() - started
        tokens += scored.tokens
        rounds += 1
    rate = tokens / seconds if seconds > 0 else 0.0
    return {"pairTokens": length, "pairs": rounds * PAIRS_PER_ROUND, "tokens": tokens,
            "seconds": round(seconds, 3), "tokensPerSecond": round(rate, 1)}


def _long_document(reranker: OnnxReranker, tokens: int) -> str:
    """A page text of at least ``tokens`` tokens under the model's tokenizer (pairs are cut to each length)."""
    text = FILLER
    while reranker.count_tokens([text])[0] < tokens:
        text += FILLER
    return text


def _threads(options: OnnxOptions) -> int:
    if options.intra_op_threads:
        return options.intra_op_threads
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# --- the variants of one model, side by side ------------------------------------------------------------

VARIANT_ROUNDS = 3                  # rounds of PAIRS_PER_ROUND x HEADLINE_LENGTH per variant, alternating
MAX_DIFFERENCE = 0.05               # a variant further than this from fp32 on any pair is not recommended ...
MIN_SAME_FIRST = 0.8                # ... nor one that puts another page first in more than a fifth of the queries
# Fidelity inputs: every query against every page, cut to HEADLINE_LENGTH tokens a pair.
FIDELITY_QUERIES = (
    "What did Alice say about the harbour museum mural last week?",
    "When is the quarterly budget report due?",
    "Which database does the billing service use?",
    "How long should roses be pruned in winter?",
    "Who is on call for the payments outage this weekend?",
    "What did the doctor recommend after the knee surgery?",
)
FIDELITY_PAGES = (
    "Harbour museum\nThe harbour museum shows the mural Alice painted in March; she talked about it on Tuesday.",
    "Budget report\nThe quarterly budget report is due on Friday; finance reviews it the week after.",
    "Billing service\nBilling moved from MySQL to Postgres in May; the migration finished two weeks late.",
    "Garden\nRoses need pruning in late winter, just above an outward-facing bud, to a third of their height.",
    "On-call rota\nPayments is covered by Sam this weekend and by Priya from Monday; escalate to the lead.",
    "Knee surgery\nAfter the operation the doctor recommended six weeks of physiotherapy and no running.",
    "Holiday plans\nThe family drives to the coast in August and stays in a cottage near the lighthouse.",
    "Book club\nThis month the club reads a novel about a lighthouse keeper; the meeting is on Thursday.",
)


def model_variants(model: InstalledModel, installed: Iterable[InstalledModel],
                   entries: Mapping[str, Any]) -> list[InstalledModel]:
    """The runnable variants of ``model`` this machine holds, ``model`` first.

    A registered folder (add-local): every installed model registered from the same folder.  A catalogue model:
    every variant of its entry whose ONNX file is in the model's folder, checked against the catalogue's pin
    when it loads (a file that does not match is refused, as any load refuses it).
    """
    found = [model]
    if model.source == "catalogue" and model.name in entries:
        entry = entries[model.name]
        for name, variant in entry.variants.items():
            weights = variant.weights
            if (name == model.variant or not weights.pinned or not weights.path.endswith(".onnx")
                    or not model.path(weights.path).is_file()):
                continue
            files = tuple(RecordedFile(f.path, f.size or 0, f.sha256 or "", PINNED) for f in entry.files_for(name))
            found.append(replace(model, variant=name, onnx=weights.path, files=files))
    else:
        found += [other for other in installed if other.name != model.name and other.runnable
                  and Path(other.folder).resolve() == Path(model.folder).resolve()]
    return found


def is_full_precision(model: InstalledModel) -> bool:
    """The fp32 graph: the reference the other variants' fidelity is measured against."""
    return model.variant in ("fp32", "model") or model.onnx == "onnx/model.onnx"


def compare_variants(variants: list[InstalledModel], progress: Progress, *,
                     options: OnnxOptions | None = None) -> VariantComparison:
    """Each variant's tokens per second (alternating rounds on the same pairs) and, against the fp32 variant,
    its scores on the same fidelity pairs; with the recommendation (``recommend``)."""
    steps = len(variants) + VARIANT_ROUNDS + 1
    loaded = []
    for step, variant in enumerate(variants):
        progress(step, steps, message=f"Verifying and loading {variant.name} ({variant.variant})")
        reranker = OnnxReranker(variant, options or OnnxOptions())
        reranker.load()
        if reranker.state != READY:
            raise ValueError(f"variant {variant.variant} of {variant.name} could not be loaded: {reranker.reason}")
        loaded.append(reranker)
    length = min([HEADLINE_LENGTH] + [r.max_pair_tokens for r in loaded])
    document = _long_document(loaded[0], length)
    totals = [[0, 0.0] for _ in loaded]
    for round_ in range(VARIANT_ROUNDS):
        progress(len(variants) + round_, steps, message=f"Scoring every variant, round {round_ + 1}")
        order = list(range(len(loaded)))
        order = order[round_ % len(order):] + order[:round_ % len(order)]   # who goes first rotates
        for index in order:
            query = f"Benchmark {round_}-{index}-{time.monotonic_ns()}: {TYPICAL_MESSAGE}"
            documents = [f"Page {n}. {document}" for n in range(PAIRS_PER_ROUND)]
            started = time.perf_counter()
            scored = loaded[index].score_pairs(query, documents, deadline=time.monotonic() + 600,
                                               max_pair_tokens=length)
            totals[index][1] += time.perf_counter() - started
            totals[index][0] += scored.tokens
    progress(steps - 1, steps, message="Comparing the scores with fp32")
    scores = [[list(r.score_pairs(query, FIDELITY_PAGES, deadline=time.monotonic() + 600,
                                  max_pair_tokens=length).scores) for query in FIDELITY_QUERIES] for r in loaded]
    reference = next((i for i, v in enumerate(variants) if is_full_precision(v)), None)
    rows: list[VariantMeasure] = []
    for index, (variant, (tokens, seconds)) in enumerate(zip(variants, totals)):
        row: VariantMeasure = {"name": variant.name, "variant": variant.variant, "onnx": variant.onnx,
                               "tokensPerSecond": round(tokens / seconds, 1) if seconds > 0 else 0.0,
                               "fidelity": None, "speedup": None}   # the speedup is set once all are measured
        if reference is not None:
            row["fidelity"] = fidelity(scores[index], scores[reference])
        rows.append(row)
    progress(steps, steps, message="Done")
    fastest = max(rows, key=lambda r: r["tokensPerSecond"])
    for row in rows:
        row["speedup"] = round(row["tokensPerSecond"] / rows[reference]["tokensPerSecond"], 2) \
            if reference is not None and rows[reference]["tokensPerSecond"] else None
    return {"pairTokens": length, "rounds": VARIANT_ROUNDS, "variants": rows,
            "reference": variants[reference].variant if reference is not None else None,
            "fastest": fastest["variant"], **recommend(rows, reference)}


def fidelity(ours: list[list[Any]], theirs: list[list[Any]]) -> Fidelity:
    """How far one variant's probabilities are from the reference's on the same pairs, and how often both put
    the same page first for a query."""
    differences, same_first = [], 0
    for mine, reference in zip(ours, theirs):
        differences += [abs(float(a) - float(b)) for a, b in zip(mine, reference)]
        same_first += max(range(len(mine)), key=lambda i: mine[i]) == max(range(len(reference)),
                                                                           key=lambda i: reference[i])
    return {"pairs": len(differences), "maxDifference": round(max(differences), 4),
            "meanDifference": round(sum(differences) / len(differences), 4),
            "sameFirst": round(same_first / len(ours), 3)}


def recommend(rows: list[VariantMeasure], reference: int | None) -> Recommendation:
    """The fastest variant whose scores stay close to fp32's (``MAX_DIFFERENCE``, ``MIN_SAME_FIRST``).

    Without an fp32 variant to compare with, the fastest, its fidelity unmeasured.  ``recommendation`` is
    the variant, ``why`` one sentence for the owner.
    """
    if not rows:
        return {"recommendation": None, "why": "No variant was measured."}
    fastest = max(rows, key=lambda r: r["tokensPerSecond"])
    if reference is None:
        return {"recommendation": fastest["variant"],
                "why": f"{fastest['variant']} scored the most tokens per second here "
                       f"({fastest['tokensPerSecond']:,.0f}); with no fp32 variant installed beside it, how far "
                       "its scores move could not be measured."}

    def close(row: VariantMeasure) -> bool:
        measured = row["fidelity"]
        return measured is not None and measured["maxDifference"] <= MAX_DIFFERENCE and \
            measured["sameFirst"] >= MIN_SAME_FIRST

    eligible = [row for index, row in enumerate(rows) if index == reference or close(row)]
    chosen = max(eligible, key=lambda r: r["tokensPerSecond"])
    base = rows[reference]
    measured = chosen["fidelity"]
    if chosen is base or measured is None:   # any other chosen variant passed close(): its fidelity is measured
        why = f"{chosen['variant']} (full precision) is the fastest variant here that keeps fp32's scores"
    else:
        why = (f"{chosen['variant']} scored {chosen['tokensPerSecond'] / base['tokensPerSecond']:.1f}x fp32's tokens "
               f"per second here; on the same pairs its probabilities differ from fp32's by "
               f"{measured['meanDifference']:.3f} on average and {measured['maxDifference']:.3f} at most, and it "
               f"puts the same page first for {measured['sameFirst']:.0%} of the queries")
    if fastest is not chosen:
        why += (f"; {fastest['variant']} was faster still but moved the scores too far "
                f"(more than {MAX_DIFFERENCE} or another page first in over {1 - MIN_SAME_FIRST:.0%} of queries)")
    return {"recommendation": chosen["variant"], "why": why + "."}
