"""``knowledge bench socket``: round trips and throughput of the agent socket.

The engine runs as its own process (``knowledge serve --port 0``), as it does
for real agents; the load comes from client threads in this process, each
with its own connection, speaking newline-delimited JSON-RPC over loopback.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from ..core.answers import JsonObject, TypedDict
from ..state.registry import Registry
from ..state.statedir import StateDir

WORDS = ("harbour", "lighthouse", "ferry", "schedule", "budget", "migration", "release", "contract", "invoice",
         "roadmap", "incident", "review", "hiring", "launch", "audit", "design", "pricing", "support")


class Latency(TypedDict):
    """Round trips timed one after another: the median and 99th percentile in milliseconds, and how many."""
    p50_ms: float
    p99_ms: float
    n: int


class Throughput(TypedDict):
    """``clients`` clients at once for the run's seconds: requests answered, errors, rate and latency."""
    clients: int
    requests: int
    errors: int
    requests_per_s: float
    p50_ms: float
    p99_ms: float


class SocketReport(TypedDict):
    """The agent socket benchmark: the store's size, one client's round trips per tool, throughput by clients."""
    pages: int
    latency: dict[str, Latency]
    throughput: list[Throughput]


class RpcClient:
    def __init__(self, port: int, token: str, *, timeout: float = 60) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.file = self.sock.makefile("rwb")
        self.next_id = 0
        self.call("initialize", {"protocolVersion": "2025-11-25",
                                 "_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"}}}})

    def call(self, method: str, params: dict[str, Any]) -> JsonObject:
        """The method's result as the engine sent it (its shape is the method's)."""
        self.next_id += 1
        self.file.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                    "params": params}).encode() + b"\n")
        self.file.flush()
        reply = json.loads(self.file.readline())
        if "error" in reply or reply["result"].get("isError"):
            raise RuntimeError(f"{method} failed: {reply}")
        return reply["result"]

    def tool(self, name: str, arguments: dict[str, Any]) -> JsonObject:
        return self.call("tools/call", {"name": name, "arguments": arguments})

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _start_engine(state: StateDir, checkout: Path | None = None) -> tuple[subprocess.Popen, int]:
    """``knowledge serve --port 0`` on ``state`` in its own process (from ``checkout``'s code when given, as
    ``python -m`` finds it there first): the process and its port."""
    process = subprocess.Popen([sys.executable, "-m", "engine.cli", "--state-dir", str(state.root), "serve",
                                "--port", "0"], cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = state.read_engine_info()
        if info and info.get("port"):
            return process, info["port"]
        time.sleep(0.05)
    process.kill()
    raise RuntimeError("the engine did not start")


def _seed(client: RpcClient, pages: int) -> None:
    for index in range(pages):
        words = " ".join(WORDS[(index * 7 + k) % len(WORDS)] for k in range(12))
        client.tool("knowledge_save_page", {"requestId": f"seed-{index}", "type": "note",
                                            "title": f"Note {index} {WORDS[index % len(WORDS)]}",
                                            "aliases": [f"note-{index}"], "body": words})


def _round_trips(client: RpcClient, count: int) -> dict[str, Latency]:
    timings: dict[str, list[float]] = {"knowledge_lookup": [], "knowledge_grep": []}
    for index in range(count):
        for name, arguments in (("knowledge_lookup", {"name": f"note-{index % 50}"}),
                                ("knowledge_grep", {"query": f"{WORDS[index % len(WORDS)]} schedule"})):
            start = time.perf_counter()
            client.tool(name, arguments)
            timings[name].append((time.perf_counter() - start) * 1000)
    return {name: {"p50_ms": statistics.median(values), "p99_ms": percentile(values, 0.99), "n": len(values)}
            for name, values in timings.items()}


def _throughput(port: int, token: str, clients: int, seconds: float) -> Throughput:
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    start_line = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def worker(number: int) -> None:
        client = RpcClient(port, token)
        mine: list[float] = []
        start_line.wait()
        index = number
        while time.perf_counter() < stop_at[0]:
            index += clients
            name, arguments = (("knowledge_lookup", {"name": f"note-{index % 50}"}) if index % 2 else
                               ("knowledge_grep", {"query": f"{WORDS[index % len(WORDS)]} budget"}))
            began = time.perf_counter()
            try:
                client.tool(name, arguments)
            except RuntimeError:
                with lock:
                    errors[0] += 1
                continue
            mine.append((time.perf_counter() - began) * 1000)
        client.close()
        with lock:
            latencies.extend(mine)

    elapsed = run_together([lambda n=n: worker(n) for n in range(clients)], start_line, stop_at, seconds)
    return {"clients": clients, "requests": len(latencies), "errors": errors[0],
            "requests_per_s": len(latencies) / elapsed, "p50_ms": statistics.median(latencies),
            "p99_ms": percentile(latencies, 0.99)}


def run_together(workers: list[Callable[[], None]], start_line: threading.Barrier, stop_at: list[float],
                 seconds: float) -> float:
    """Run ``workers`` (each waits at ``start_line``, then works until ``stop_at[0]``) for ``seconds``;
    returns the seconds from the start line until the last one finished."""
    threads = [threading.Thread(target=worker) for worker in workers]
    for thread in threads:
        thread.start()
    stop_at[0] = time.perf_counter() + seconds
    start_line.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began


def owner_state(scratch: Path) -> tuple[StateDir, str]:
    """A fresh state directory under ``scratch`` with one owner agent, and that agent's token."""
    state = StateDir(scratch / "state")
    state.create()
    registry = Registry.open(state.registry, state.root)
    token = registry.add_agent("bench", owner=True)
    registry.close()
    return state, token


@contextmanager
def serving_engine() -> Iterator[tuple[subprocess.Popen, int, str]]:
    """A ``knowledge serve --port 0`` process on a fresh state directory with one owner agent:
    (the process, its port, the agent's token); stopped and removed on exit."""
    with tempfile.TemporaryDirectory() as scratch:
        state, token = owner_state(Path(scratch))
        process, port = _start_engine(state)
        try:
            yield process, port, token
        finally:
            process.terminate()
            process.wait(60)


def run(*, pages: int = 500, round_trips: int = 300, seconds: float = 5.0,
        concurrency: tuple[int, ...] = (1, 8, 32)) -> SocketReport:
    with serving_engine() as (_, port, token):
        client = RpcClient(port, token)
        _seed(client, pages)
        latency = _round_trips(client, round_trips)
        client.close()
        throughput = [_throughput(port, token, clients, seconds) for clients in concurrency]
    return {"pages": pages, "latency": latency, "throughput": throughput}


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores ({model}), Python {platform.python_version()}"


def report(result: SocketReport, command: str) -> str:
    lines = [
        "# Agent socket benchmark", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}",
        f"- Command: `{command}`",
        f"- Setup: `knowledge serve --port 0` in its own process; {result['pages']} pages in the agent's store; "
        "each client a thread with its own TCP connection on loopback, one request at a time.", "",
        "## Round trip, one client", "",
        "| tool | requests | p50 ms | p99 ms |", "| --- | ---: | ---: | ---: |",
    ]
    for name, figures in result["latency"].items():
        lines.append(f"| `{name}` | {figures['n']} | {figures['p50_ms']:.2f} | {figures['p99_ms']:.2f} |")
    lines += ["", "## Throughput, lookups and greps alternating", "",
              "| clients | requests | errors | requests/s | p50 ms | p99 ms |",
              "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in result["throughput"]:
        lines.append(f"| {row['clients']} | {row['requests']} | {row['errors']} | {row['requests_per_s']:.0f} | "
                     f"{row['p50_ms']:.2f} | {row['p99_ms']:.2f} |")
    return "\n".join(lines) + "\n"
