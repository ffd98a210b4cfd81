"""Where a reranker's ONNX graph spends its time: onnxruntime's profiler, summed per operator type.

    python scripts/profile_reranker.py MODEL.onnx [--rows 10] [--tokens 136] [--threads 2]

Random token ids (cost does not depend on which tokens are read), the engine's session settings
(``ORT_ENABLE_ALL``, one inter-op thread, sequential).  Prints the share of kernel time per operator type over
four runs after one warm-up.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--rows", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=136)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_profiling = True
    options.profile_file_prefix = tempfile.mkdtemp(prefix="reranker-profile-") + "/run"
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(0).integers(1000, 13000, size=(args.rows, args.tokens), dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    session.run(None, feeds)
    seconds = []
    for _ in range(4):
        started = time.perf_counter()
        session.run(None, feeds)
        seconds.append(time.perf_counter() - started)
    with open(session.end_profiling(), encoding="utf-8") as events:
        profile = json.load(events)
    per_op: collections.Counter[str] = collections.Counter()
    for event in profile:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            per_op[event["args"].get("op_name", "?")] += event["dur"]
    total = sum(per_op.values())
    print(f"{args.rows} x {args.tokens} tokens, runs of {', '.join(f'{s:.3f}' for s in seconds)} s")
    print("| operator | share of kernel time |")
    print("| --- | --- |")
    for op, microseconds in per_op.most_common(15):
        print(f"| {op} | {microseconds / total:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
