"""The cascade against equal windows: gate turns alternating between ``longWindows`` 0 and N in one engine.

    python scripts/gate_cascade_latency.py STATE_DIR MODEL_DIR [--variant model_int8] [--questions 100]
        [--long-windows 3] [--timeout-ms 1500]

``STATE_DIR`` holds the LoCoMo store with the embedding model as the search's ``embeddingModel`` (``knowledge
bench gate --state-dir STATE_DIR --model all-minilm-l6-v2-int8`` leaves one); ``MODEL_DIR`` is a reranker folder
(scripts/make_fullsize_reranker.py), registered as the Decision model.  Each question is asked once with each
setting, the order alternating; the score cache is off so no turn is answered from an earlier one.  Prints per
setting the whole call's p50/p95/max, the share inside ``timeoutMs`` (and 50 ms more), tokens scored per turn,
unscored candidates, and in how many turns windows were planned (the cascade only changes those).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.bench import metrics  # noqa: E402
from engine.bench.gate import DEFAULT_DATA, LOAD_TIMEOUT_S, _pick  # noqa: E402
from engine.decision.onnx import OnnxOptions  # noqa: E402
from engine.decision.runtime import DecisionRuntime  # noqa: E402
from engine.gate.turn import gate_turn  # noqa: E402
from engine.importers.locomo import load_locomo, owner_caller  # noqa: E402
from engine.service import Engine  # noqa: E402
from engine.state.config import parse_settings  # noqa: E402
from engine.state.statedir import StateDir  # noqa: E402
from models.installed import ModelStore  # noqa: E402
from models.local import add_local  # noqa: E402


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("state")
    parser.add_argument("model")
    parser.add_argument("--variant")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--long-windows", type=int, default=3)
    parser.add_argument("--timeout-ms", type=int, default=1500)
    args = parser.parse_args(argv)
    state = StateDir(Path(args.state))
    add_local(ModelStore(state.models), Path(args.model), name="cascade-reranker", replace=True,
              variant=args.variant)
    config = json.loads(state.config.read_text(encoding="utf-8"))
    config.update(decisionModel="onnx/cascade-reranker",
                  recallGate={"mode": "shadow", "journal": False, "timeoutMs": args.timeout_ms})
    state.config.write_text(json.dumps(config), encoding="utf-8")
    settings = {n: parse_settings({**config, "recallGate": {**config["recallGate"], "longWindows": n}})
                for n in (0, args.long_windows)}
    data = load_locomo(Path(__file__).resolve().parents[1] / DEFAULT_DATA)
    questions = _pick([qa["question"] for sample in data for qa in sample["qa"]], args.questions)
    lines = Lines()
    logger = logging.getLogger("engine.gate.turn")
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    turns: dict[int, list[dict]] = {n: [] for n in settings}
    with Engine(state) as engine, owner_caller(engine, "main", "cascade") as (caller, _):
        engine.decision.close()
        engine.decision = DecisionRuntime(engine.settings.current, ModelStore(state.models),
                                          OnnxOptions(cache_entries=0))
        status = engine.decision.wait_ready(LOAD_TIMEOUT_S)
        print(f"{status.model} {status.state}: {status.tokens_per_second:.0f} tokens/s at load", flush=True)
        engine.runtime(engine.authorizer.authorize(caller).store).vectors_settled(LOAD_TIMEOUT_S)
        gate_turn(engine, caller, {"message": "warm-up: what did they talk about last time?"})
        for index, question in enumerate(questions):
            for n in (list(settings) if index % 2 == 0 else list(settings)[::-1]):
                engine.settings.save(settings[n])
                started = time.perf_counter()
                answer = gate_turn(engine, caller, {"message": question})
                wall = (time.perf_counter() - started) * 1000
                tiers = [d["tier"] for d in answer["decisions"]]
                window = re.search(r"window_tokens=(\d+)", lines.last)
                turns[n].append({"wall": wall, "tokens": answer.get("tokensScored", 0),
                                 "unscored": tiers.count("unscored"), "candidates": len(tiers),
                                 "window": int(window[1]) if window else None,
                                 "cascade": "long_windows=" in lines.last,
                                 "outcome": answer["outcome"] + (f" ({answer['stage']}: {answer['reason']})"
                                                                 if answer.get("stage") else "")})
        engine.settings.save(parse_settings(config))
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    print("| longWindows | p50 | p95 | max | inside timeoutMs (+50 ms) | tokens per turn (median) | unscored per turn "
          "| turns with windows planned (median window) | outcomes |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, rows in turns.items():
        walls = sorted(row["wall"] for row in rows)
        windows = [row["window"] for row in rows if row["window"]]
        outcomes: dict[str, int] = {}
        for row in rows:
            outcomes[row["outcome"]] = outcomes.get(row["outcome"], 0) + 1
        budget = args.timeout_ms
        print(f"| {n} | {metrics.percentile(walls, 0.5):.0f} ms | {metrics.percentile(walls, 0.95):.0f} ms | "
              f"{walls[-1]:.0f} ms | {sum(w <= budget for w in walls) / len(walls):.0%} "
              f"({sum(w <= budget + 50 for w in walls) / len(walls):.0%}) | "
              f"{statistics.median(row['tokens'] for row in rows):.0f} | "
              f"{statistics.fmean(row['unscored'] for row in rows):.2f} | {len(windows)} "
              f"({statistics.median(windows) if windows else '-'}) | "
              + ", ".join(f"{key} {count}" for key, count in sorted(outcomes.items())) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
