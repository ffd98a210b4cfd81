"""``knowledge bench owner-locomo``: the owner's search alone on LoCoMo, keyword and hybrid, per half.

``knowledge bench search`` measures every engine and mode in about nine minutes; this asks LoCoMo's questions
of the owner's search (``Engine.owner_search``: the window and ``knowledge search``) only, in keyword and
hybrid mode, the two alternating question by question, top 10.  With ``--state-dir`` the LoCoMo import and
its vectors are kept and reused, so a second run (of this code or another checkout's) answers the same
questions over the same vectors: rankings compared side by side then differ by the code alone.

Recall@1, @5 and @10 are the share of a question's gold records in the top k (as ``bench search``'s recall@5
and @10), over the questions with gold records, for the first five conversations, the last five, and all: one half to
choose a weight on, the other to check it.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ..core.answers import TypedDict
from ..core.errors import InvalidParams
from ..importers.locomo import owner_caller
from ..service import Engine
from .search import Options, prepare_locomo
from .socket import machine

MODES = ("keyword", "hybrid")
LIMIT = 10
DEPTHS = (1, 5, 10)
BENCH_MODEL = "bench-embedder"


class ModeFigures(TypedDict):
    """One mode: recall@1, @5 and @10 (percent) per half of the conversations, and median ms per search."""
    recall: dict[str, dict[str, float]]
    median_ms: float


class OwnerReport(TypedDict):
    questions: int
    halves: dict[str, list[str]]  # the conversations of each half
    modes: dict[str, ModeFigures]
    load: list[float]


def run(data: Path, model_dir: Path, state_dir: Path | None = None,
        say: Callable[[str], None] = print) -> OwnerReport:
    with tempfile.TemporaryDirectory(prefix="knowledge-bench-owner-") as work:
        dataset = prepare_locomo(Options(data=data, state_dir=state_dir), Path(work))
        _register(dataset.state, model_dir)
        asked = [question for question in dataset.questions if question["record_ids"]]
        samples = list(dict.fromkeys(question["sample"] for question in asked))
        halves = {"first five": samples[:5], "last five": samples[5:], "all": samples}
        found: dict[str, list[list[str]]] = {mode: [] for mode in MODES}
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        with Engine(dataset.state, watch=True, git=False) as engine, owner_caller(
                engine, instance="knowledge-bench") as (caller, _):
            embedder = engine.embeddings.current()
            if embedder is None:
                raise InvalidParams(f"the embedding model in {model_dir} did not load: "
                                    f"{engine.embeddings.status().reason}", field="--embedding-model")
            runtime = engine.runtime(engine.authorize(caller, create=False).store)
            say(f"locomo: {dataset.records} records, vectors with {model_dir.name} ...")
            runtime.call(lambda: runtime.vectors.rebuild(dataset.partition, embedder))
            engine.owner_search(caller, {"query": asked[0]["question"], "mode": "hybrid"})  # page passages follow
            runtime.vector_feed.settled(600)
            say(f"locomo: {len(asked)} questions x {len(MODES)} modes ...")
            for number, question in enumerate(asked):
                for mode in MODES[number % 2:] + MODES[:number % 2]:
                    began = time.perf_counter()
                    answer = engine.owner_search(caller, {"query": question["question"], "mode": mode,
                                                          "limit": LIMIT})
                    times[mode].append(time.perf_counter() - began)
                    found[mode].append([hit["id"] for hit in answer["hits"]])
    modes: dict[str, ModeFigures] = {}
    for mode in MODES:
        scores = [{f"recall@{k}": _recall(question["record_ids"], hits, k) for k in DEPTHS}
                  for question, hits in zip(asked, found[mode])]
        recall = {half: {f"@{k}": _mean_percent([score[f"recall@{k}"] for score, question in zip(scores, asked)
                                                 if question["sample"] in members]) for k in DEPTHS}
                  for half, members in halves.items()}
        modes[mode] = {"recall": recall, "median_ms": 1000 * statistics.median(times[mode])}
        say(f"{mode}: recall@10 " + ", ".join(f"{half} {figures['@10']:.1f}" for half, figures in recall.items()))
    return {"questions": len(asked), "halves": halves, "modes": modes, "load": list(os.getloadavg())}


def _recall(gold: list[str], hits: list[str], k: int) -> float:
    """The share of ``gold`` among the first ``k`` of ``hits``."""
    return len(set(hits[:k]) & set(gold)) / len(set(gold))


def _mean_percent(values: list[float]) -> float:
    return 100 * statistics.fmean(values) if values else math.nan  # a half without questions: nothing to say


def _register(state: Any, model_dir: Path) -> None:
    """The model folder registered in the benchmark's state directory and chosen there."""
    from models.installed import ModelStore
    from models.local import add_local

    add_local(ModelStore(state.models), model_dir, name=BENCH_MODEL, replace=True)
    config = json.loads(state.config.read_text(encoding="utf-8")) if state.config.is_file() else {}
    config.update(knowledgeRuntimeEnabled=True, embeddingModel=f"onnx/{BENCH_MODEL}")
    state.config.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def report(result: OwnerReport, command: str) -> str:
    lines = [
        "# The owner's search on LoCoMo: keyword and hybrid, per half", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}; load average at the end {', '.join(f'{v:.2f}' for v in result['load'])}",
        f"- Command: `{command}`",
        f"- {result['questions']} questions with gold records; first five conversations: "
        f"{', '.join(result['halves']['first five'])}; last five: {', '.join(result['halves']['last five'])}.", "",
        "| mode | " + " | ".join(f"recall@{k} {half}" for half in ("first five", "last five", "all") for k in DEPTHS)
        + " | median ms |", "| --- |" + " ---: |" * (3 * len(DEPTHS) + 1),
    ]
    for mode, figures in result["modes"].items():
        cells = [f"{figures['recall'][half][k]:.1f}"
                 for half in ("first five", "last five", "all") for k in (f"@{k}" for k in DEPTHS)]
        lines.append(f"| owner {mode} | {' | '.join(cells)} | {figures['median_ms']:.1f} |")
    return "\n".join(lines) + "\n"
