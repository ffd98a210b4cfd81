"""``python -m engine.bench.git_history``: what a vault's git history costs after many checkpoints.

Two vaults side by side take the same checkpoints in turn, each the engine's ``GitHistory.commit`` of
two files (the next revision of one of 500 pages, and a new claim): one never packs its history (as
before ``GitHistory.tidy``), the other runs ``tidy`` as the git thread does, after the first checkpoint and
every ``TIDY_EVERY_PUBLICATIONS`` (a checkpoint here commits one publication).
Written to ``docs/benchmarks/git-history.md``: loose objects and disk used by ``.git``, the commit's
median over the last 200 checkpoints, ``git log`` of one page's history, and what ``tidy`` cost.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from ..runtime import TIDY_EVERY_PUBLICATIONS
from ..store.githistory import CommitFile, GitHistory
from .defaults import GIT_HISTORY_CHECKPOINTS, GIT_HISTORY_OUTPUT
from .socket import machine
from .report_file import write_report

ROOT = Path(__file__).resolve().parents[2]
PAGES = 500
LAST = 200
TIDIED = f"tidy every {TIDY_EVERY_PUBLICATIONS} checkpoints"


def _checkpoint(history: GitHistory, index: int) -> float:
    files = [CommitFile(f"private/pages/notes/page-{index % PAGES}.md", f"revision {index}\n".encode() * 40),
             CommitFile(f"private/claims/cl_{index:08d}.md", f"claim {index}: the team ships on Fridays\n".encode())]
    started = time.perf_counter()
    history.commit(files, f"Knowledge: checkpoint {index}")
    return time.perf_counter() - started


def _disk(git_dir: Path) -> tuple[int, int]:
    """(files, bytes the disk holds for them) under ``git_dir``."""
    files = used = 0
    for folder, _, names in os.walk(git_dir):
        for name in names:
            files += 1
            used += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return files, used


def _counted(history: GitHistory) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in history._run("count-objects", "-v").splitlines())


def _log_ms(history: GitHistory) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        history.log("private/pages/notes/page-7.md", limit=1000)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def measure(checkpoints: int) -> dict[str, dict[str, float | int | str]]:
    git = shutil.which("git")
    if git is None:
        raise SystemExit("git is not installed: there is no history to measure")
    root = Path(tempfile.mkdtemp(prefix="kd-bench-git-"))
    try:
        histories = {}
        for name in ("never packed", TIDIED):
            vault = root / name.replace(" ", "-") / "vault"
            vault.mkdir(parents=True)
            histories[name] = GitHistory(vault, git)
        commits: dict[str, list[float]] = {name: [] for name in histories}
        tidies: list[float] = []
        for index in range(checkpoints):
            for name, history in histories.items():
                commits[name].append(_checkpoint(history, index))
                if name == TIDIED and index % TIDY_EVERY_PUBLICATIONS == 0:
                    started = time.perf_counter()
                    history.tidy()
                    tidies.append(time.perf_counter() - started)
        results: dict[str, dict[str, float | int | str]] = {}
        for name, history in histories.items():
            counted = _counted(history)
            files, used = _disk(history.git_dir)
            results[name] = {
                "loose objects": int(counted["count"]), "packed objects": int(counted["in-pack"]),
                "packs": int(counted["packs"]), ".git files": files, ".git MiB on disk": round(used / 2**20, 1),
                f"commit median, last {LAST} (ms)": round(statistics.median(commits[name][-LAST:]) * 1000, 1),
                "log of one page, median of 5 (ms)": round(_log_ms(history), 1),
            }
        results[TIDIED].update({
            "tidy median (ms)": round(statistics.median(tidies) * 1000, 1),
            "tidy slowest (ms)": round(max(tidies) * 1000, 1),
            "tidies that packed (over 1 s)": sum(1 for t in tidies if t > 1.0),
        })
        return results
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(results: dict[str, dict[str, float | int | str]], checkpoints: int, command: str) -> str:
    names = list(results)
    rows = list(dict.fromkeys(key for result in results.values() for key in result))
    lines = [
        "# Git history after many checkpoints",
        "",
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine()}",
        f"- Command: `{command}`",
        f"- What runs: {checkpoints} checkpoints of two files each, through `GitHistory.commit`, into two vaults "
        "side by side, in turn; see the module's docstring and docs/architecture.md (Git).",
        "",
        "| | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---:" for _ in names) + " |",
    ]
    for row in rows:
        lines.append(f"| {row} | " + " | ".join(str(results[name].get(row, "")) for name in names) + " |")
    never, tidy = (results[name] for name in names)
    lines += [
        "",
        f"Disk: {float(never['.git MiB on disk']) / max(float(tidy['.git MiB on disk']), 0.1):.0f}x less with tidy; "
        f"one page's log {float(never['log of one page, median of 5 (ms)']) / float(tidy['log of one page, median of 5 (ms)']):.1f}x "
        "faster.",
        "",
    ]
    return "\n".join(lines)


def command(program: str, checkpoints: int) -> str:
    """The command line that gives these figures, as the report quotes it."""
    return program + (f" --checkpoints {checkpoints}" if checkpoints != GIT_HISTORY_CHECKPOINTS else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=GIT_HISTORY_CHECKPOINTS, help="checkpoints each vault takes")
    parser.add_argument("--out", type=Path, default=ROOT / GIT_HISTORY_OUTPUT, help="where the figures are written")
    args = parser.parse_args(argv)
    results = measure(args.checkpoints)
    text = report(results, args.checkpoints, command("python -m engine.bench.git_history", args.checkpoints))
    write_report(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
