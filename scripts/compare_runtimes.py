"""A reranker's ONNX graphs under onnxruntime, and under OpenVINO where it is installed, side by side.

    SCRATCH_PYTHON scripts/compare_runtimes.py MODEL_DIR [--variants model model_int8 model_fused_int8]
        [--openvino bf16 f32] [--batches 8] [--rounds 4] [--rows 4]

The same batches of random token ids (lengths 100-136, a padded row in each) run through every runtime in
turn, the order rotating batch by batch, two threads each.  Prints tokens per second (median over batches),
the median of the per-batch ratios against ``model_int8`` under onnxruntime, and each runtime's logit
difference to the fp32 graph under onnxruntime.  OpenVINO is not a project dependency: run this with a
scratch Python that has ``openvino`` and ``onnxruntime``; ``--openvino`` names the inference precisions it
compiles the fp32 graph at (``bf16`` uses AMX-BF16 where the CPU has it).  The machine may be shared: only
the side-by-side ratios mean much.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

Runner = Callable[[dict[str, np.ndarray]], np.ndarray]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--variants", nargs="+", default=["model", "model_int8", "model_fused_int8"])
    parser.add_argument("--openvino", nargs="*", default=["bf16"], metavar="PRECISION")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--rows", type=int, default=4)
    args = parser.parse_args(argv[1:])
    folder = args.model_dir / "onnx"
    runners = {f"onnxruntime {variant}": onnxruntime_runner(folder / f"{variant}.onnx") for variant in args.variants}
    for precision in args.openvino:
        runners[f"openvino {precision}"] = openvino_runner(folder / "model.onnx", precision)
    rng = np.random.default_rng(1)
    batches = []
    for _ in range(args.batches):
        length = int(rng.integers(100, 137))
        ids = rng.integers(5, 50000, size=(args.rows, length), dtype=np.int64)
        mask = np.ones_like(ids)
        mask[0, length - int(rng.integers(1, 30)):] = 0
        batches.append({"input_ids": ids, "attention_mask": mask})
    for feeds in batches[:2]:
        for run in runners.values():
            run(feeds)
    names = list(runners)
    rates: dict[str, list[float]] = {name: [] for name in names}
    logits: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for round_number in range(args.rounds):
        for index, feeds in enumerate(batches):
            turn = (index + round_number) % len(names)
            for name in names[turn:] + names[:turn]:
                started = time.perf_counter()
                values = runners[name](feeds)
                rates[name].append(feeds["input_ids"].size / (time.perf_counter() - started))
                if round_number == 0:
                    logits[name].append(values)
    baseline = rates.get("onnxruntime model_int8") or rates[names[0]]
    reference = np.concatenate(logits["onnxruntime model"]) if "onnxruntime model" in logits else None
    print(f"{args.batches} batches x {args.rounds} rounds, {args.rows} rows of 100-136 tokens")
    print("| runtime | tokens/s (median) | per-batch ratio to onnxruntime model_int8 (median) "
          "| logit difference to fp32 (max / mean) |")
    print("| --- | ---: | --- | --- |")
    for name in names:
        ratio = float(np.median(np.array(rates[name]) / np.array(baseline)))
        difference = "-"
        if reference is not None:
            gap = np.abs(np.concatenate(logits[name]) - reference)
            difference = f"{gap.max():.4f} / {gap.mean():.4f}"
        print(f"| {name} | {np.median(rates[name]):,.0f} | {ratio:.2f}x | {difference} |")
    return 0


def onnxruntime_runner(path: Path) -> Runner:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(None, feeds)[0].ravel()


def openvino_runner(path: Path, precision: str) -> Runner:
    import openvino

    core = openvino.Core()
    compiled = core.compile_model(core.read_model(str(path)), "CPU", {
        "INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": 2, "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()
    return lambda feeds: next(iter(request.infer(feeds).values())).ravel()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
