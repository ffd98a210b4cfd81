"""What the benchmarks default to, apart from the benchmarks themselves: ``knowledge --help`` shows these
defaults without loading a benchmark (each one imports much of the engine and runs only under ``bench``)."""

from __future__ import annotations

from pathlib import Path

LOCOMO_DATA = Path("..") / "shared" / "data" / "locomo10.json"  # from the repository root
SEARCH_OUTPUT = Path("docs") / "benchmarks" / "search.md"
GATE_OUTPUT = Path("docs") / "benchmarks" / "gate.md"
IMPORTS_OUTPUT = Path("docs/benchmarks/imports.md")
GIT_HISTORY_OUTPUT = Path("docs/benchmarks/git-history.md")
GIT_HISTORY_CHECKPOINTS = 3000
THROUGHPUT_SIZES = (100, 95_000)  # a partition scan stops at 100,000 entries, directories included
CATALOGUING_RECORDS = 99_890  # issue 31's figure: with the store's own files, just under a scan's 100,000 entries
CATALOGUING_OUTPUT = Path("docs/benchmarks/cataloguing.md")
SYNC_OUTPUT = Path("docs/benchmarks/sync.md")
SYNC_RECORDS, SYNC_CLONE_RECORDS, SYNC_REPEATS, SYNC_SECONDS = 1000, 10_000, 3, 5.0  # issue 28's sizes
