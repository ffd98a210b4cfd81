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
from typing import Any, Callable

from models.installed import InstalledModel

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


def benchmark_model(model: InstalledModel, progress: Progress, *, timeout_ms: int, max_candidates: int,
                    options: OnnxOptions | None = None) -> dict[str, Any]:
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
                options: OnnxOptions) -> dict[str, Any]:
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
             steps: int) -> dict[str, Any]:
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
