"""Bundle size and cold start of the bundled app versus `python -m engine.cli`, into docs/benchmarks/packaging.md.

    packaging/build && python scripts/bench_packaging.py [--runs 5]

Each start is timed from process launch: `--version` to exit, `serve` to the first answered ping, and
`desktop --demo` (offscreen) to the first painted window.  Runs alternate bundle and interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from engine.bench.report_file import write_report

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "dist" / "knowledge-desk"


def directory_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def engine_info(state: Path) -> dict | None:
    try:
        return json.loads((state / "engine.json").read_text())
    except (OSError, ValueError):
        return None


def time_version(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([*command, "--version"], check=True, capture_output=True)
    return time.perf_counter() - start


def time_serve(command: list[str]) -> float:
    state = Path(tempfile.mkdtemp()) / "state"
    start = time.perf_counter()
    process = subprocess.Popen([*command, "--state-dir", str(state), "serve", "--port", "0"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            info = engine_info(state)
            if info and info.get("port"):
                try:
                    with socket.create_connection(("127.0.0.1", info["port"]), timeout=5) as connection:
                        stream = connection.makefile("rwb")
                        stream.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
                        stream.flush()
                        if json.loads(stream.readline()).get("result") == {}:
                            return time.perf_counter() - start
                except OSError:
                    pass
            time.sleep(0.005)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def time_desktop(command: list[str]) -> float:
    scratch = Path(tempfile.mkdtemp())
    state, report = scratch / "state", scratch / "startup.json"
    start = time.time()
    subprocess.run([*command, "--state-dir", str(state), "desktop", "--demo", "--startup-report", str(report)],
                   check=True, capture_output=True, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"}, timeout=180)
    info = engine_info(state)
    if info:
        os.kill(info["pid"], signal.SIGTERM)
    return json.loads(report.read_text())["paintedAt"] - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks" / "packaging.md"))
    args = parser.parse_args()
    bundled = [str(BUNDLE / "knowledge")]
    interpreted = [sys.executable, "-m", "engine.cli"]
    results: dict[str, dict[str, list[float]]] = {}
    for name, measure in (("--version", time_version), ("serve to first ping", time_serve),
                          ("desktop to first paint", time_desktop)):
        results[name] = {"bundle": [], "python -m": []}
        for _ in range(args.runs):
            results[name]["bundle"].append(measure(bundled))
            results[name]["python -m"].append(measure(interpreted))
    archive = next((ROOT / "dist").glob("knowledge-desk-*.tar.gz"))
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    lines = [
        "# Packaging: bundle size and cold start", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores ({cpu}), {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}",
        f"- Command: `packaging/build && python scripts/bench_packaging.py --runs {args.runs}`",
        "- Bundle: PyInstaller one-folder (`packaging/knowledge.spec`), no model weights inside.", "",
        "| artefact | size |", "| --- | ---: |",
        f"| `dist/knowledge-desk/` | {directory_size(BUNDLE) / 2**20:.0f} MiB |",
        f"| `{archive.name}` | {archive.stat().st_size / 2**20:.0f} MiB |", "",
        f"Cold start, median of {args.runs} alternating runs (seconds; the desktop runs offscreen and "
        "starts its own engine with the demo store):", "",
        "| start | bundle | `python -m engine.cli` | ratio |", "| --- | ---: | ---: | ---: |",
    ]
    for name, timings in results.items():
        bundle, python = statistics.median(timings["bundle"]), statistics.median(timings["python -m"])
        lines.append(f"| {name} | {bundle:.2f} | {python:.2f} | {bundle / python:.2f} |")
    text = "\n".join(lines) + "\n"
    write_report(args.output, text)  # the sections written by hand below the figures stay
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
