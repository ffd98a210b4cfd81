"""Cold start and idle memory of `knowledge desktop`, into docs/benchmarks/desktop.md.

    .venv/bin/python scripts/bench_desktop.py [--runs 5] [--notes 1000 [--store DIR]] [--baseline CHECKOUT]
                                              [--settled] [--output docs/benchmarks/desktop.md]

Each run starts a fresh process of the real command on a copy of the demo
store (or, with ``--notes N``, of a store holding a generated vault of N linked
notes in folders imported with ``knowledge import markdown``), on Qt's offscreen
platform unless DISPLAY is set, in two situations: the engine already running
(the window attaches), and no engine (the window starts one).  It reports the
time from launching the command to the first painted window and to the first
records shown (and how much of that came after the agent inventory arrived), each record page's load for the first ten records listed, and the
resident memory of the window and the engine after 3 s idle, and the CPU time the window's process used
up to its first paint (which the machine's load does not stretch as it does the wall-clock figures).

The window runs as an installed one does: from compiled bytecode (the checkout is compiled first, and
PYTHONDONTWRITEBYTECODE is not passed on).  ``--store DIR`` keeps the imported store in DIR and reuses it
when it is there (the import of 1,000 notes takes minutes); ``--baseline CHECKOUT`` runs the window of
another checkout of the project (``git worktree add /tmp/base main``) in turn with this one's, run for run,
so that both are measured under the same load; the engine is this checkout's in both.

Each run's copy of the store has new inodes and change times, so the engine's first request to it re-reads
and re-validates every file (its catalog's stat stamps no longer match): with 1,000 imported notes that is
most of the time to the first records.  ``--settled`` opens the copy once before the run
(``knowledge search``, outside the timing), so the window meets a store as it is after the engine has seen
it before: what a window started again on an unchanged vault meets.
It rewrites the report's measured part; the sections written by hand below it stay
(engine/bench/report_file.py).
A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine.bench.report_file import write_report

ROOT = Path(__file__).resolve().parents[1]
KNOWLEDGE = [sys.executable, "-m", "engine.cli"]


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import PySide6

    memory = ""
    try:
        kib = int(next(line for line in Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal")).split()[1])
        memory = f", {kib / 1024 / 1024:.0f} GiB memory"
    except (OSError, StopIteration):
        pass
    return (f"{cpu}, {os.cpu_count()} cores{memory}; {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}; PySide6 {PySide6.__version__}")


WORDS = ("vault note sync phone backup folder link graph canvas plugin theme search tag alias template "
         "daily journal publish property base table filter formula outline bookmark workspace hotkey command "
         "embed callout markdown heading list quote code image audio video pdf import export history").split()


def write_vault(root: Path, count: int) -> None:
    """``count`` notes in ten folders, each of about 150 words with three ``[[links]]`` to other notes."""
    for number in range(count):
        words = [WORDS[(number * 7 + step * 13) % len(WORDS)] for step in range(150)]
        links = " ".join(f"[[Note {(number * 31 + hop * 97) % count}]]" for hop in range(1, 4))
        path = root / f"Folder {number % 10}" / f"Note {number}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {number}\n\n{' '.join(words)}.\n\nSee {links}.\n", encoding="utf-8")


def _one_run(template: Path, *, attach: bool, checkout: Path = ROOT, settled: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="kd-bench-") as temp:
        state = Path(temp) / "state"
        shutil.copytree(template, state, symlinks=True)
        if settled:  # the catalog takes the copy's stat stamps, as after any earlier start on these files
            subprocess.run([*KNOWLEDGE, "--state-dir", str(state), "search", "--agent", "main", "vault"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        serve = None
        if attach:
            serve = subprocess.Popen([*KNOWLEDGE, "--state-dir", str(state), "serve", "--port", "0"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while not (state / "engine.json").exists():
                time.sleep(0.02)
        report = Path(temp) / "report.json"
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        if not env.get("DISPLAY"):
            env["QT_QPA_PLATFORM"] = "offscreen"
        started = time.time()
        subprocess.run([*KNOWLEDGE, "--state-dir", str(state), "desktop", "--startup-report", str(report)],
                       env=env, cwd=checkout, check=True, timeout=300, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        stamps = json.loads(report.read_text(encoding="utf-8"))
        engine = json.loads((state / "engine.json").read_text(encoding="utf-8"))
        if serve is not None:
            serve.terminate()
            serve.wait(timeout=30)
        else:
            os.kill(engine["pid"], 15)
            while (state / "engine.json").exists():
                time.sleep(0.02)
        return {"painted": stamps["paintedAt"] - started, "painted_cpu": stamps.get("paintedCpuS", float("nan")),
                "records": stamps["recordsAt"] - started,
                "records_after_inventory": stamps["recordsAt"] - stamps["inventoryAt"],
                "page_ms": statistics.median(stamps["recordPageMs"]), "page_max_ms": max(stamps["recordPageMs"]),
                "window_mib": stamps["windowRssKiB"] / 1024, "engine_mib": stamps["engineRssKiB"] / 1024}


def _template(args: argparse.Namespace, temp: Path) -> Path:
    """The state directory each run copies: the demo store, or ``--notes`` imported notes (kept in ``--store``)."""
    if not args.notes:
        template = temp / "state"
        subprocess.run([*KNOWLEDGE, "--state-dir", str(template), "demo"], check=True, stdout=subprocess.DEVNULL)
        return template
    template = Path(args.store) if args.store else temp / "state"
    if (template / "registry.sqlite").exists():
        print(f"reusing the store in {template}", flush=True)
        return template
    write_vault(temp / "vault", args.notes)
    began = time.perf_counter()
    subprocess.run([*KNOWLEDGE, "--state-dir", str(template), "import", "markdown", str(temp / "vault")],
                   check=True, stdout=subprocess.DEVNULL)
    print(f"imported {args.notes} notes in {time.perf_counter() - began:.1f} s", flush=True)
    return template


def _row(label: str, runs: list[dict]) -> str:
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    best = {key: min(run[key] for run in runs) for key in ("painted", "records")}
    cpu = f"{median['painted_cpu']:.2f} s" if median["painted_cpu"] == median["painted_cpu"] else "not reported"
    return (f"| {label} | {median['painted']:.2f} s (best {best['painted']:.2f}) | {cpu} | "
            f"{median['records']:.2f} s (best {best['records']:.2f}) | "
            f"{median['records_after_inventory']:.2f} s | {median['page_ms']:.0f} ms "
            f"(slowest {max(run['page_max_ms'] for run in runs):.0f}) | {median['window_mib']:.0f} MiB | "
            f"{median['engine_mib']:.0f} MiB |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--notes", type=int, default=0,
                        help="a store of this many imported linked notes instead of the demo store")
    parser.add_argument("--store", help="with --notes: keep the imported store in this directory, reuse it if there")
    parser.add_argument("--baseline", help="another checkout of the project whose window is measured in turn")
    parser.add_argument("--settled", action="store_true",
                        help="open each run's copy of the store once first (outside the timing): its catalog then "
                             "matches the copy's files, as on a window's second start")
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks" / "desktop.md"))
    args = parser.parse_args()
    checkouts = [("this checkout", ROOT)] + ([("baseline", Path(args.baseline).resolve())] if args.baseline else [])
    for _, checkout in checkouts:  # as an installed window runs: from bytecode compiled once
        subprocess.run([sys.executable, "-m", "compileall", "-q", "engine", "desktop", "models"], cwd=checkout,
                       check=True, stdout=subprocess.DEVNULL)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kd-bench-demo-") as temp:
        template = _template(args, Path(temp))
        for attach, situation in ((True, "engine already running (attach)"), (False, "window starts the engine")):
            runs: dict[str, list[dict]] = {name: [] for name, _ in checkouts}
            for _ in range(args.runs):
                for name, checkout in checkouts:
                    runs[name].append(_one_run(template, attach=attach, checkout=checkout, settled=args.settled))
            for name, _ in checkouts:
                rows.append(_row(situation if len(checkouts) == 1 else f"{situation}, {name}", runs[name]))
                print(rows[-1], flush=True)
    platform_name = "the X server in DISPLAY" if os.environ.get("DISPLAY") else "Qt's offscreen platform"
    store = (f"a store of {args.notes:,} generated notes in ten folders, each about 150 words with three "
             "`[[links]]`, imported with `knowledge import markdown`" if args.notes else
             "the demo store (`knowledge demo`)")
    options = ((f" --notes {args.notes}" if args.notes else "") + (" --baseline CHECKOUT" if args.baseline else "")
               + (" --settled" if args.settled else ""))
    settled = (" that the engine had opened once before (`knowledge search`, untimed: its catalog matches the copy's "
               "files)" if args.settled else "")
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    text = f"""# Desktop: cold start, a record page's load, and memory at idle

Measured with `.venv/bin/python scripts/bench_desktop.py --runs {args.runs}{options}` on {_machine()};
rendering on {platform_name}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load} at the end.

Each run launches `knowledge --state-dir STATE desktop` as a fresh process on a copy of {store}{settled}, and times,
from the launch: the first paint of the window, and the first page of the agent's records shown (connect,
operator `initialize`, inventory, first `operator/records` page), and of that the time from the inventory
shown to the first records shown (the window's requests after it, less the start's and the connection's). Then it opens the first ten records listed,
one after the other, each timed from asking for it to its page shown (its record, links and history answered
and drawn): the median of those ten, and the slowest of all runs. Memory is the resident set (VmRSS) after the
window sat idle for 3 s; "CPU to first paint" is the user and system time the window's process had used when
it first painted (interpreter start, imports, building the window), which the machine's load stretches far
less than the wall-clock figures.  The window runs from compiled bytecode, as an installed one does.
Medians of {args.runs} runs{", this checkout's and the baseline's in turn" if args.baseline else ""}. Targets
(issue 30, with 1,000 imported notes): first paint at most 1.5 s, a record page's load at most 150 ms.

| situation | first painted window | CPU to first paint | first records shown | of which after the inventory | a record page's load | window memory at idle | engine memory at idle |
| --- | --- | --- | --- | --- | --- | --- | --- |
{chr(10).join(rows)}

The window paints before it has any data: attaching to or starting the engine happens on the worker
thread, so the first paint does not wait for the engine.  "Window starts the engine" includes starting
`knowledge serve --port 0` as a child process and waiting for its `engine.json`.
"""
    write_report(args.output, text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
