"""Engine reranker settings side by side: the same gate-like turns through ``OnnxReranker``, alternating.

    python scripts/compare_reranker_settings.py MODEL_DIR [--variant model_int8] [--turns 12] [--rounds 4]
        [--pair-tokens 136] NAME=OPTIONS ...

Each ``NAME=OPTIONS`` is a set of ``OnnxOptions`` fields, comma-separated (``today=`` is the defaults;
``fast=spinning=0,max_batch_rows=4``), and may name another graph of the folder (``fused=variant=model_fused_int8``).  Every setting loads its own copy of the model; each turn (ten LoCoMo
session summaries against one LoCoMo question, cut to ``--pair-tokens`` tokens a pair, as the gate's int8
windows are) is scored by every setting in turn, the order rotating, with a fresh query tag per round so the
score cache never answers.  Prints tokens per second overall, the median of the per-turn ratios against the
first setting with its quartiles, and how far each setting's scores are from the first one's.  The machine
may be shared: only the side-by-side ratios mean much.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.decision.onnx import OnnxOptions, OnnxReranker  # noqa: E402
from models.installed import ModelStore  # noqa: E402
from models.local import add_local  # noqa: E402

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.json"


def options_from(text: str) -> OnnxOptions:
    kinds = {f.name: f.type for f in fields(OnnxOptions)}
    values = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        if key == "variant":
            continue  # the graph, not an option (variant_of)
        kind = str(kinds[key])
        values[key] = (value not in ("0", "false", "off")) if "bool" in kind else \
            float(value) if "float" in kind else int(value) if "int" in kind else value
    return OnnxOptions(**values)


def variant_of(text: str, default: str | None) -> str | None:
    """A setting's ``variant=NAME`` (another ONNX graph of the folder, e.g. ``model_fused_int8``), else
    ``--variant``."""
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        if key == "variant":
            return value
    return default


def turns_from(path: Path, count: int) -> list[tuple[str, list[str]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    summaries = [text for sample in data for key, text in sample.get("session_summary", {}).items()
                 if isinstance(text, str)]
    questions = [qa["question"] for sample in data for qa in sample["qa"]]
    step = max(1, len(questions) // count)
    return [(questions[i * step], [summaries[(i * 10 + k) % len(summaries)] for k in range(10)])
            for i in range(count)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("settings", nargs="+")
    parser.add_argument("--variant")
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--pair-tokens", type=int, default=136)
    args = parser.parse_args(argv)
    store = ModelStore(Path(tempfile.mkdtemp(prefix="reranker-settings-")))
    named = [item.partition("=") for item in args.settings]
    models = {variant: add_local(store, Path(args.model), name=f"bench-{number}", variant=variant)
              for number, variant in enumerate(dict.fromkeys(variant_of(text, args.variant) for _, _, text in named))}
    rerankers = {}
    for name, _, text in named:
        reranker = OnnxReranker(models[variant_of(text, args.variant)], options_from(text))
        reranker.load()
        assert reranker.state == "ready", reranker.reason
        rerankers[name] = reranker
    turns = turns_from(LOCOMO, args.turns)
    names = list(rerankers)
    rates: dict[str, list[float]] = {n: [] for n in names}
    totals = {n: [0, 0.0] for n in names}
    scores: dict[str, list[float]] = {n: [] for n in names}
    for round_ in range(args.rounds):
        for index, (query, documents) in enumerate(turns):
            shift = (round_ + index) % len(names)
            for name in names[shift:] + names[:shift]:
                started = time.perf_counter()
                result = rerankers[name].score_pairs(f"[{round_}] {query}", documents,
                                                     deadline=time.monotonic() + 600,
                                                     max_pair_tokens=args.pair_tokens)
                seconds = time.perf_counter() - started
                rates[name].append(result.tokens / seconds)
                totals[name][0] += result.tokens
                totals[name][1] += seconds
                if round_ == 0:
                    scores[name] += [float(s) for s in result.scores if s is not None]
    base = names[0]
    print(f"{args.turns} turns x {args.rounds} rounds, 10 pairs of up to {args.pair_tokens} tokens each")
    print("| setting | tokens/s | per-turn ratio (median, quartiles) | max / mean score difference |")
    print("| --- | --- | --- | --- |")
    for name in names:
        ratios = [a / b for a, b in zip(rates[name], rates[base])]
        q = statistics.quantiles(ratios, n=4)
        diffs = [abs(a - b) for a, b in zip(scores[name], scores[base])] or [0.0]
        print(f"| {name} | {totals[name][0] / totals[name][1]:,.0f} | {statistics.median(ratios):.2f}x "
              f"({q[0]:.2f}-{q[2]:.2f}) | {max(diffs):.4f} / {statistics.fmean(diffs):.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
