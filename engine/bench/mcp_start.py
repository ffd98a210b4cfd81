"""``knowledge bench mcp``: how long an MCP client waits for ``knowledge mcp`` to answer ``initialize``.

A client launches the bridge as a command and sends ``initialize`` at once; some give up after five
seconds.  Side by side, in turns, on one machine:

- a bare ``python -c pass``, what starting the interpreter costs at all;
- ``knowledge mcp`` from launch to its answer to ``initialize``, relayed by a serving engine (started
  here on a throwaway state directory);
- ``knowledge mcp`` from launch to its answer to a MCP 2026-07-28 client's first two requests, the ones
  the official SDK's client sends when left to choose: ``server/discover``, then ``tools/list`` (the first
  that needs the credential, so the bridge authenticates its engine connection before relaying it);
- ``python -c "import engine.cli.commands"``, what the bridge loaded before it was started apart from the
  other commands (every command's imports: the engine, the gate, numpy).

The target: the bridge's median at most twice the bare interpreter's plus 0.3 s.  Written to
``docs/benchmarks/mcp-start.md``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from ..core.answers import TypedDict
from .socket import machine

ROOT = Path(__file__).resolve().parents[2]
INITIALIZE = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"}}}) + "\n").encode()
_ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
             "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}
DISCOVER_THEN_LIST = b"".join((json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": {
    "_meta": _ENVELOPE}}) + "\n").encode() for number, method in ((1, "server/discover"), (2, "tools/list")))


class StartReport(TypedDict):
    """Seconds of each run, by what ran (``python``, ``bridge``, ``commands``), and the bridge's command."""
    rounds: int
    command: list[str]
    runs: dict[str, list[float]]


def knowledge_command() -> list[str]:
    """The ``knowledge`` script beside this interpreter (what a client's configuration names), else the module."""
    script = Path(sys.executable).with_name("knowledge")
    return [str(script)] if script.exists() else [sys.executable, "-m", "engine.cli"]


def _seconds(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def _initialize_seconds(command: list[str], env: dict[str, str], requests: bytes = INITIALIZE) -> float:
    """From launch to the answer to the last of ``requests`` (all written at once, as a client does)."""
    started = time.perf_counter()
    bridge = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert bridge.stdin is not None and bridge.stdout is not None
        bridge.stdin.write(requests)
        bridge.stdin.flush()
        for _ in range(requests.count(b"\n")):
            answer = json.loads(bridge.stdout.readline())
            if "result" not in answer:
                raise RuntimeError(f"knowledge mcp did not answer: {answer}")
        elapsed = time.perf_counter() - started
        bridge.stdin.close()
        bridge.wait(60)
        return elapsed
    finally:
        if bridge.poll() is None:
            bridge.kill()
            bridge.wait()
        bridge.stdout.close()


def measure(rounds: int) -> StartReport:
    folder = Path(tempfile.mkdtemp(prefix="knowledge-bench-mcp-"))
    state = folder / "state"
    env = {**os.environ, "KNOWLEDGE_STATE_DIR": str(state), "PYTHONPATH": str(ROOT)}
    knowledge = knowledge_command()
    subprocess.run([*knowledge, "agents", "add", "main", "--owner"], env=env, check=True, capture_output=True)
    server = subprocess.Popen([*knowledge, "serve", "--port", "0"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        while not (state / "engine.json").exists():
            if server.poll() is not None:
                raise RuntimeError("knowledge serve exited before it served")
            time.sleep(0.05)
        runs: dict[str, list[float]] = {"python": [], "bridge": [], "modern": [], "commands": []}
        for _ in range(rounds):
            runs["python"].append(_seconds([sys.executable, "-c", "pass"], env))
            runs["bridge"].append(_initialize_seconds([*knowledge, "mcp", "--agent", "main"], env))
            runs["modern"].append(_initialize_seconds([*knowledge, "mcp", "--agent", "main"], env,
                                                      DISCOVER_THEN_LIST))
            runs["commands"].append(_seconds([sys.executable, "-c", "import engine.cli.commands"], env))
    finally:
        server.terminate()
        server.wait(60)
        shutil.rmtree(folder, ignore_errors=True)
    return {"rounds": rounds, "command": knowledge, "runs": runs}


def report(result: StartReport, command: str) -> str:
    runs = result["runs"]
    median = {name: statistics.median(values) for name, values in runs.items()}
    worst = {name: max(values) for name, values in runs.items()}
    target = 2 * median["python"] + 0.3
    met = "met" if median["bridge"] <= target else "NOT met"
    met_modern = "met" if median["modern"] <= target else "NOT met"
    lines = [
        "# `knowledge mcp`: launch to the answer to `initialize` (and to a 2026-07-28 client's first requests)", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}",
        f"- Command: `{command}` ({result['rounds']} rounds, the four taken in turn in each round; the bridge is "
        f"`{' '.join(Path(part).name for part in result['command'])} mcp`, relayed by a serving engine)",
        f"- Load average at the end: {', '.join(f'{value:.2f}' for value in os.getloadavg())}", "",
        "| run | median s | slowest s |", "| --- | ---: | ---: |",
        f"| bare `python -c pass` | {median['python']:.3f} | {worst['python']:.3f} |",
        f"| `knowledge mcp`, launch to `initialize` answered | {median['bridge']:.3f} | {worst['bridge']:.3f} |",
        f"| `knowledge mcp`, launch to `server/discover` and `tools/list` answered (2026-07-28) "
        f"| {median['modern']:.3f} | {worst['modern']:.3f} |",
        f"| `python -c \"import engine.cli.commands\"` (what the bridge loaded before) | {median['commands']:.3f} "
        f"| {worst['commands']:.3f} |", "",
        f"Target: the bridge's median at most twice the bare interpreter's plus 0.3 s = {target:.3f} s: **{met}** "
        f"({median['bridge'] / median['python']:.1f}x the bare interpreter; the other commands' imports alone take "
        f"{median['commands'] / median['bridge']:.1f}x the bridge's whole answer).", "",
        f"The same target for a 2026-07-28 client's first two answers (the second after the bridge authenticated "
        f"its engine connection): **{met_modern}** ({median['modern'] / median['python']:.1f}x the bare "
        "interpreter).", "",
    ]
    return "\n".join(lines)
