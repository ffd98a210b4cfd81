"""Measure onnxruntime session settings for a cross-encoder ONNX file (figures for docs/models.md).

Usage: python scripts/onnx_settings.py MODEL.onnx [--quick]

Inputs are random token ids (the cost of a transformer does not depend on
which tokens it reads), so a locally generated full-size ModernBERT-base with
random weights measures the real model's compute. Prints one Markdown table
row per setting: median seconds of 10 pairs and tokens per second.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import onnxruntime as ort


def session(path: str, threads: int, level: str, spinning: bool = True) -> tuple[ort.InferenceSession, float]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    started = time.perf_counter()
    created = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
    return created, time.perf_counter() - started


def timed(run: ort.InferenceSession, pairs: int, length: int, rows: int, repeats: int) -> float:
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 30000, size=(pairs, length), dtype=np.int64)
    mask = np.ones_like(ids)

    def once() -> float:
        started = time.perf_counter()
        for start in range(0, pairs, rows):
            run.run(None, {"input_ids": ids[start:start + rows], "attention_mask": mask[start:start + rows]})
        return time.perf_counter() - started

    once()  # allocation
    return statistics.median(once() for _ in range(repeats))


def main(argv: list[str]) -> int:
    path, quick = argv[1], "--quick" in argv
    repeats = 1 if quick else 3
    print("| threads | optimization | spinning | pairs x tokens | rows per run | load s | seconds | tokens/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    cases = [(1, "ORT_ENABLE_ALL", True, 128, 10), (2, "ORT_ENABLE_ALL", True, 128, 10),
             (2, "ORT_ENABLE_ALL", False, 128, 10), (2, "ORT_ENABLE_EXTENDED", True, 128, 10),
             (2, "ORT_ENABLE_BASIC", True, 128, 10), (2, "ORT_DISABLE_ALL", True, 128, 10),
             (2, "ORT_ENABLE_ALL", True, 128, 1), (2, "ORT_ENABLE_ALL", True, 128, 5),
             (2, "ORT_ENABLE_ALL", True, 64, 10), (2, "ORT_ENABLE_ALL", True, 256, 10),
             (2, "ORT_ENABLE_ALL", True, 512, 10)]
    if quick:
        cases = cases[1:2]
    loaded: dict[tuple[int, str, bool], tuple[ort.InferenceSession, float]] = {}
    for threads, level, spinning, length, rows in cases:
        key = (threads, level, spinning)
        if key not in loaded:
            loaded.clear()
            loaded[key] = session(path, threads, level, spinning)
        run, load_s = loaded[key]
        seconds = timed(run, 10, length, rows, repeats)
        print(f"| {threads} | {level} | {'on' if spinning else 'off'} | 10 x {length} | {rows} | {load_s:.1f} | "
              f"{seconds:.2f} | {10 * length / seconds:,.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
