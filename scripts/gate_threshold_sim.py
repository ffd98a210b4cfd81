"""Thresholds from labels, simulated (engine/bench/gate_thresholds.py): the table in docs/benchmarks/gate-quality.md.

    .venv/bin/python scripts/gate_threshold_sim.py [--seeds 200]

For each data shape and asked precision: over ``--seeds`` seeded stores, a
highThreshold is proposed from 50 labelled turns, and its precision measured
on the next 50 turns of the same store and in the long run.  Prints a
Markdown table; the same seeds give the same figures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.bench.gate_thresholds import SHAPES, summarize  # noqa: E402

PRECISIONS = (0.7, 0.8, 0.9)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200, help="stores per shape and precision (default 200)")
    args = parser.parse_args()
    print("| shape | asked | proposed | next 50 turns within 0.05 | mean on next 50 | below by > 0.05 "
          "| long run within 0.05 | mean long run | oracle threshold, next 50 within 0.05 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for shape in SHAPES:
        for precision in PRECISIONS:
            r = summarize(shape, precision, args.seeds)
            print(f"| {shape.name} | {precision:.1f} | {r.proposed}/{r.seeds} | {r.within}/{r.seeds} "
                  f"({r.within / r.seeds:.0%}) | {r.mean_realized:.3f} | {r.below} | {r.expected_within}/{r.seeds} "
                  f"({r.expected_within / r.seeds:.0%}) | {r.mean_expected:.3f} | {r.oracle_within}/{r.seeds} "
                  f"({r.oracle_within / r.seeds:.0%}) |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
