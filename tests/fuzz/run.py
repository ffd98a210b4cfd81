"""Coverage-guided fuzzing of the engine's input surfaces with atheris.

    pip install atheris==3.0.0
    python -m tests.fuzz.run TARGET [--runs N] [--seconds S]     # TARGET: record, ontology, query, socket

Crashing inputs are written to tests/fuzz/regressions/<target>/; commit them with the fix, and
tests/engine/test_fuzz_regressions.py replays them on every CI run.  libFuzzer's last line
(``#N DONE cov: ...``) gives the executions; each crash is printed as ``crash <name>: <error>``.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

REGRESSIONS = Path(__file__).parent / "regressions"
CORPUS = Path(__file__).parent / "corpus"  # seed inputs; copied, so the fuzzer's finds stay out of the tree


def main() -> int:
    import atheris

    with atheris.instrument_imports():
        import engine  # noqa: F401 - instrument the engine's modules before the targets import them
        from tests.fuzz import targets

    parser = argparse.ArgumentParser()
    parser.add_argument("target", choices=sorted(targets.TARGETS))
    parser.add_argument("--runs", type=int, default=0)
    parser.add_argument("--seconds", type=int, default=60)
    args = parser.parse_args()
    target = targets.TARGETS[args.target]
    out = REGRESSIONS / args.target
    out.mkdir(parents=True, exist_ok=True)
    def one_input(data: bytes) -> None:
        try:
            target(data)
        except Exception as exc:  # noqa: BLE001 - every other failure is a finding
            name = hashlib.sha256(data).hexdigest()[:16]
            (out / name).write_bytes(data)
            print(f"crash {name}: {type(exc).__name__}: {exc}", file=sys.stderr)

    atheris_args = [sys.argv[0], f"-max_total_time={args.seconds}", "-max_len=4096"]
    if args.runs:
        atheris_args.append(f"-runs={args.runs}")
    seeds = CORPUS / args.target
    if seeds.is_dir():
        working = Path(tempfile.mkdtemp(prefix=f"fuzz-{args.target}-"))
        shutil.copytree(seeds, working, dirs_exist_ok=True)
        atheris_args.append(str(working))
    atheris.Setup(atheris_args, one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
