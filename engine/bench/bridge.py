"""``knowledge bench bridge``: what one connected client's ``knowledge mcp`` costs in memory and per call.

Each MCP client that launches the stdio bridge holds one bridge process for as long as it runs, so the
bridge's resident memory is paid once per connected client, and its relaying once per call.  On one
machine, in a throwaway state directory with the demo store and an engine started here:

- memory: the bridge's resident set (``VmRSS``) once ``initialize`` is answered, and again after all the
  calls below, beside a bare interpreter waiting on stdin (what any Python process costs at all);
- per call: the same ``knowledge_grep`` call made by a client on the engine's socket directly (presenting
  the credential in ``initialize`` as a memory-provider host does) and through the bridge, in alternating
  blocks of ``calls`` each, so load on a shared machine falls on both alike; the bridge adds the difference
  of the medians.

Targets (issue 31): at most 25 MiB per connected client and at most 1 ms added per call.  Written to
``docs/benchmarks/bridge.md``.
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
from typing import Any, BinaryIO, Callable

from ..core.answers import TypedDict
from ..state.statedir import StateDir
from ..wire.bridge import connect
from .mcp_start import ROOT, knowledge_command
from .socket import machine

RSS_TARGET_MIB = 25.0
OVERHEAD_TARGET_MS = 1.0
_CLIENT_INFO = {"name": "bench", "version": "1"}
_GREP = {"name": "knowledge_grep", "arguments": {"query": "harbour museum"}}


class BridgeReport(TypedDict):
    """Resident sets in KiB, call times in seconds, by path (``direct``, ``bridge``), and the bridge's command."""
    command: list[str]
    blocks: int
    calls: int
    python_rss_kib: int
    bridge_rss_kib: dict[str, int]  # "initialized", "after_calls"
    seconds: dict[str, list[float]]


def resident_kib(pid: int) -> int:
    """``VmRSS`` of a running process, in KiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"process {pid} reports no VmRSS")


class _LineClient:
    """One JSON-RPC request at a time over a pair of byte streams, answers read line by line."""

    def __init__(self, send: Callable[[bytes], object], reader: BinaryIO) -> None:
        self.send = send
        self.reader = reader
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode()
                  + b"\n")
        answer = json.loads(self.reader.readline())
        if "result" not in answer:
            raise RuntimeError(f"{method} was not answered: {answer}")
        return answer

    def timed_calls(self, count: int) -> list[float]:
        times = []
        for _ in range(count):
            started = time.perf_counter()
            self.call("tools/call", _GREP)
            times.append(time.perf_counter() - started)
        return times


def _initialize_params(knowledge: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": _CLIENT_INFO}
    if knowledge is not None:
        params["_meta"] = {"knowledge": knowledge}
    return params


def _credential(state: StateDir) -> dict[str, Any]:
    """What the bridge adds to ``initialize`` for the agent ``main`` (engine/cli/mcp_command.py
    ``session_knowledge``): the direct client presents the same."""
    token = (state.tokens / "main.token").read_text(encoding="utf-8").strip()
    return {"token": token, "audience": {"kind": "owner-private"}, "instance": "bench-direct"}


def measure(blocks: int, calls: int, command: list[str] | None = None) -> BridgeReport:
    folder = Path(tempfile.mkdtemp(prefix="knowledge-bench-bridge-"))
    state_path = folder / "state"
    env = {**os.environ, "KNOWLEDGE_STATE_DIR": str(state_path), "PYTHONPATH": str(ROOT)}
    knowledge = knowledge_command()
    bridge_command = [*(command or knowledge), "mcp", "--agent", "main", "--instance", "bench-bridge"]
    subprocess.run([*knowledge, "demo"], env=env, check=True, capture_output=True)
    server = subprocess.Popen([*knowledge, "serve", "--port", "0"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    bridge = python = engine = None
    try:
        while not (state_path / "engine.json").exists():
            if server.poll() is not None:
                raise RuntimeError("knowledge serve exited before it served")
            time.sleep(0.05)
        state = StateDir.resolve(str(state_path))
        engine = connect(state)
        direct = _LineClient(engine.sendall, engine.makefile("rb"))
        direct.call("initialize", _initialize_params(_credential(state)))
        # Another launcher runs the code it was installed with, not this checkout's.
        bridge_env = env if command is None else {name: value for name, value in env.items() if name != "PYTHONPATH"}
        bridge = subprocess.Popen(bridge_command, env=bridge_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert bridge.stdin is not None and bridge.stdout is not None
        stdin = bridge.stdin

        def send(line: bytes) -> None:
            stdin.write(line)
            stdin.flush()

        relayed = _LineClient(send, bridge.stdout)
        relayed.call("initialize", _initialize_params())
        initialized = resident_kib(bridge.pid)
        python = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        time.sleep(0.5)  # the bare interpreter has started and waits on stdin
        python_rss = resident_kib(python.pid)
        seconds: dict[str, list[float]] = {"direct": [], "bridge": []}
        for block in range(blocks):
            order = ("direct", "bridge") if block % 2 == 0 else ("bridge", "direct")
            for path in order:
                seconds[path] += (direct if path == "direct" else relayed).timed_calls(calls)
        after = resident_kib(bridge.pid)
        stdin.close()
        bridge.wait(60)
    finally:
        for process in (bridge, python):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        if engine is not None:
            engine.close()
        server.terminate()
        server.wait(60)
        shutil.rmtree(folder, ignore_errors=True)
    return {"command": bridge_command, "blocks": blocks, "calls": calls, "python_rss_kib": python_rss,
            "bridge_rss_kib": {"initialized": initialized, "after_calls": after}, "seconds": seconds}


def report(result: BridgeReport, command: str) -> str:
    median_ms = {path: statistics.median(values) * 1000 for path, values in result["seconds"].items()}
    p95_ms = {path: statistics.quantiles(values, n=20)[18] * 1000 for path, values in result["seconds"].items()}
    added = median_ms["bridge"] - median_ms["direct"]
    rss = {moment: kib / 1024 for moment, kib in result["bridge_rss_kib"].items()}
    worst_rss = max(rss.values())
    rss_met = "met" if worst_rss <= RSS_TARGET_MIB else "NOT met"
    overhead_met = "met" if added <= OVERHEAD_TARGET_MS else "NOT met"
    total = result["blocks"] * result["calls"]
    lines = [
        "# `knowledge mcp`: memory per connected client and time added per call", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}",
        f"- Command: `{command}`; the bridge measured is `{' '.join(Path(part).name for part in result['command'])}`",
        f"- Load average at the end: {', '.join(f'{value:.2f}' for value in os.getloadavg())}",
        "- Setup: a throwaway state directory with the demo store, `knowledge serve --port 0` started by the "
        "benchmark; each call is `tools/call` `knowledge_grep` for \"harbour museum\", one at a time. The direct "
        "client is the benchmark's own connection to the engine's socket, presenting the agent's credential in "
        f"`initialize` as a memory-provider host does; blocks of {result['calls']} calls alternate between it and "
        f"the bridge, {total} calls each in all.", "",
        "| measured | figure | target |", "| --- | ---: | --- |",
        f"| bridge resident set once `initialize` is answered | {rss['initialized']:.1f} MiB | |",
        f"| bridge resident set after {total} calls | {rss['after_calls']:.1f} MiB | at most {RSS_TARGET_MIB:.0f} MiB: "
        f"**{rss_met}** |",
        f"| a bare `python` waiting on stdin, for comparison | {result['python_rss_kib'] / 1024:.1f} MiB | |",
        f"| call on the socket directly, median / p95 | {median_ms['direct']:.3f} / {p95_ms['direct']:.3f} ms | |",
        f"| call through the bridge, median / p95 | {median_ms['bridge']:.3f} / {p95_ms['bridge']:.3f} ms | |",
        f"| added by the bridge (difference of the medians) | {added:.3f} ms | at most {OVERHEAD_TARGET_MS:.0f} ms: "
        f"**{overhead_met}** |", "",
    ]
    return "\n".join(lines)
