"""Cold start and idle memory of `knowledge desktop`, into docs/benchmarks/desktop.md.

    .venv/bin/python scripts/bench_desktop.py [--runs 5] [--output docs/benchmarks/desktop.md]

Each run starts a fresh process of the real command on a copy of the demo
store, on Qt's offscreen platform unless DISPLAY is set, in two situations:
the engine already running (the window attaches), and no engine (the window
starts one).  It reports the time from launching the command to the first
painted window and to the first records shown, and the resident memory of
the window and the engine after 3 s idle.  A benchmark, not a test.
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


def _one_run(template: Path, *, attach: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="kd-bench-") as temp:
        state = Path(temp) / "state"
        shutil.copytree(template, state, symlinks=True)
        serve = None
        if attach:
            serve = subprocess.Popen([*KNOWLEDGE, "--state-dir", str(state), "serve", "--port", "0"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while not (state / "engine.json").exists():
                time.sleep(0.02)
        report = Path(temp) / "report.json"
        env = dict(os.environ)
        if not env.get("DISPLAY"):
            env["QT_QPA_PLATFORM"] = "offscreen"
        started = time.time()
        subprocess.run([*KNOWLEDGE, "--state-dir", str(state), "desktop", "--startup-report", str(report)],
                       env=env, check=True, timeout=120, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stamps = json.loads(report.read_text(encoding="utf-8"))
        engine = json.loads((state / "engine.json").read_text(encoding="utf-8"))
        if serve is not None:
            serve.terminate()
            serve.wait(timeout=30)
        else:
            os.kill(engine["pid"], 15)
            while (state / "engine.json").exists():
                time.sleep(0.02)
        return {"painted": stamps["paintedAt"] - started, "records": stamps["recordsAt"] - started,
                "window_mib": stamps["windowRssKiB"] / 1024, "engine_mib": stamps["engineRssKiB"] / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks" / "desktop.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kd-bench-demo-") as temp:
        template = Path(temp) / "state"
        subprocess.run([*KNOWLEDGE, "--state-dir", str(template), "demo"], check=True, stdout=subprocess.DEVNULL)
        rows = []
        for attach, label in ((True, "engine already running (attach)"), (False, "window starts the engine")):
            runs = [_one_run(template, attach=attach) for _ in range(args.runs)]
            median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            best = {key: min(run[key] for run in runs) for key in ("painted", "records")}
            rows.append(f"| {label} | {median['painted']:.2f} s (best {best['painted']:.2f}) | "
                        f"{median['records']:.2f} s (best {best['records']:.2f}) | {median['window_mib']:.0f} MiB | "
                        f"{median['engine_mib']:.0f} MiB |")
            print(rows[-1], flush=True)
    platform_name = "the X server in DISPLAY" if os.environ.get("DISPLAY") else "Qt's offscreen platform"
    text = f"""# Desktop: cold start and memory at idle

Measured with `.venv/bin/python scripts/bench_desktop.py --runs {args.runs}` on {_machine()};
rendering on {platform_name}.

Each run launches `knowledge --state-dir STATE desktop` as a fresh process on a copy of the demo store
(`knowledge demo`) and times, from the launch: the first paint of the window, and the first page of the
agent's records shown (connect, operator `initialize`, inventory, first `operator/records` page).
Memory is the resident set (VmRSS) after the window sat idle for 3 s.  Medians of {args.runs} runs.

| situation | first painted window | first records shown | window memory at idle | engine memory at idle |
| --- | --- | --- | --- | --- |
{chr(10).join(rows)}

The window paints before it has any data: attaching to or starting the engine happens on the worker
thread, so the first paint does not wait for the engine.  "Window starts the engine" includes starting
`knowledge serve --port 0` as a child process and waiting for its `engine.json`.
"""
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
