"""``knowledge bench socket --bounds``: what connections without a token can make the engine hold.

The engine runs as its own process (``knowledge serve --port 0``); its memory is read from
``/proc/<pid>/status``: VmRSS sampled every 20 ms, and VmHWM, the kernel's own high-water mark,
which also catches a peak between samples.  The attack runs in a second process (``python -m
engine.bench.socket_bounds``), one thread per connection, so it never competes with the probe
for this process's GIL.  The probe is an initialized connection here that pings every 10 ms
from before the first phase to after the last.

Each phase is bounded and stops by itself; every connection ends by itself (the engine answers
and closes it, or its deadline does):

- ``flood``: N connections at once, each sending an 8 MiB line with no newline, then reading;
- ``reflood``: the same N attackers starting over on a new connection each time the engine cuts
  one off, for a few seconds: a sustained attack, beyond the target;
- ``hold``: N connections each sending just under the unauthenticated line limit, then waiting
  until the engine's initialize deadline closes them: the most they can make it buffer;
- ``cap``: more idle connections than the engine's cap; how many are served and how many refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from ..core.answers import TypedDict
from ..wire.server import SocketBounds
from .socket import RpcClient, machine, percentile, serving_engine

MIB = 1024 * 1024
PHASES = ("flood", "reflood", "hold", "cap")
PING_INTERVAL_S = 0.01
SAMPLE_INTERVAL_S = 0.02


class Attack(TypedDict):
    """How the attempts of one phase ended (by outcome), and how long each connection lived."""
    outcomes: dict[str, int]
    attempts: int
    lifetime_median_s: float
    lifetime_max_s: float


class Phase(Attack):
    """One phase: the attack, the engine's memory before, at its peak and after (KiB), and the pings an
    initialized agent got through meanwhile (milliseconds; None when none did)."""
    phase: str
    connections: int
    seconds: float
    rss_before_kib: int
    rss_peak_kib: int
    rss_after_kib: int
    hwm_before_kib: int
    hwm_after_kib: int
    pings: int
    ping_p50_ms: float | None
    ping_p99_ms: float | None
    ping_max_ms: float | None


class BoundsReport(TypedDict):
    """The socket bounds benchmark: the attack's size, the bounds in force, every phase, the probe's pings."""
    connections: int
    message_bytes: int
    flood_s: float
    bounds: dict[str, float]  # SocketBounds' fields
    phases: list[Phase]
    pings_total: int
    ping_errors: list[str]


def run(*, connections: int = 200, message_bytes: int = 8 * MIB, flood_s: float = 5.0) -> BoundsReport:
    """Start an engine, warm it with an agent's ordinary work, then run every phase against it."""
    bounds = SocketBounds()
    with serving_engine() as (process, port, token):
        probe = _Probe(port, token)
        time.sleep(1.0)  # let the warm-up's garbage settle before the baseline
        phases = []
        for phase, count in (("flood", connections), ("reflood", connections), ("hold", connections),
                             ("cap", bounds.max_connections + max(connections // 4, 10))):
            phases.append(_measure(process.pid, port, probe, phase, count, message_bytes, bounds, flood_s))
            time.sleep(1.0)
        probe.stop()
    return {"connections": connections, "message_bytes": message_bytes, "flood_s": flood_s,
            "bounds": dataclasses.asdict(bounds),
            "phases": phases, "pings_total": len(probe.latencies), "ping_errors": probe.errors}


class _Probe:
    """An initialized agent connection pinging every 10 ms; each answer's time is kept with its moment."""

    def __init__(self, port: int, token: str) -> None:
        self.client = RpcClient(port, token)
        self.client.tool("knowledge_save_page", {"requestId": "warm", "type": "note", "title": "Warm-up",
                                                 "body": "An ordinary page, so the store is open."})
        self.client.tool("knowledge_grep", {"query": "ordinary"})
        self.latencies: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-probe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(PING_INTERVAL_S):
            began = time.perf_counter()
            try:
                self.client.call("ping", {})
            except (OSError, RuntimeError, ValueError) as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                return
            self.latencies.append((time.monotonic(), (time.perf_counter() - began) * 1000))

    def between(self, start: float, end: float) -> list[float]:
        return [ms for at, ms in self.latencies if start <= at <= end]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.client.close()


def _measure(pid: int, port: int, probe: _Probe, phase: str, count: int, message_bytes: int,
             bounds: SocketBounds, flood_s: float) -> Phase:
    before = _memory(pid)
    peak = [before["VmRSS"]]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(SAMPLE_INTERVAL_S):
            peak[0] = max(peak[0], _memory(pid)["VmRSS"])

    sampler = threading.Thread(target=sample, name="bench-sampler", daemon=True)
    sampler.start()
    began = time.monotonic()
    attack = subprocess.run([sys.executable, "-m", "engine.bench.socket_bounds", "--port", str(port), "--phase",
                             phase, "--connections", str(count), "--bytes", str(message_bytes), "--hold-bytes",
                             str(bounds.unauthenticated_message_bytes - 100), "--seconds", str(flood_s)],
                            capture_output=True, text=True, timeout=600)
    ended = time.monotonic()
    done.set()
    sampler.join(10)
    if attack.returncode != 0:
        raise RuntimeError(f"the {phase} attack failed: {attack.stderr.strip()[-2000:]}")
    after = _memory(pid)
    pings = probe.between(began, ended)
    return {"phase": phase, "connections": count, "seconds": ended - began, **json.loads(attack.stdout),
            "rss_before_kib": before["VmRSS"], "rss_peak_kib": max(peak[0], after["VmRSS"]),
            "rss_after_kib": after["VmRSS"], "hwm_before_kib": before["VmHWM"], "hwm_after_kib": after["VmHWM"],
            "pings": len(pings), "ping_p50_ms": statistics.median(pings) if pings else None,
            "ping_p99_ms": percentile(pings, 0.99) if pings else None, "ping_max_ms": max(pings, default=None)}


def _memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of ``pid`` in KiB (Linux)."""
    figures = {"VmRSS": 0, "VmHWM": 0}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in figures:
            figures[name] = int(value.split()[0])
    return figures


# --- the attacking process ---------------------------------------------------------------------------


def attack(port: int, phase: str, connections: int, message_bytes: int, hold_bytes: int,
           seconds: float) -> Attack:
    """Run ``phase`` on ``connections`` at once; how each attempt ended, and how long it lived.

    A reflood attacker starts over on a new connection each time the engine cuts it off, until
    ``seconds`` have passed; the other phases make one attempt per connection.
    """
    head = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"'
    payload = head + b"a" * (message_bytes - len(head))  # never a newline
    outcomes: Counter[str] = Counter()
    lifetimes: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def one() -> str:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        except OSError as exc:
            return f"connect failed ({type(exc).__name__})"
        try:
            try:
                if phase in ("flood", "reflood"):
                    sock.sendall(payload)
                elif phase == "hold":
                    sock.sendall(payload[:hold_bytes])
            except OSError as exc:
                return f"cut off while sending ({type(exc).__name__})"
            with sock.makefile("rb") as replies:
                line = replies.readline()
                ended = replies.read() == b""
            return _outcome(line) + ("" if ended else ", left open")
        except OSError as exc:
            return f"reset before an answer ({type(exc).__name__})"
        finally:
            sock.close()

    def attacker() -> None:
        while True:
            began = time.monotonic()
            outcome = one()
            with lock:
                outcomes[outcome] += 1
                lifetimes.append(time.monotonic() - began)
            if phase != "reflood" or time.monotonic() >= deadline:
                return

    threads = [threading.Thread(target=attacker) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"outcomes": dict(outcomes), "attempts": len(lifetimes), "lifetime_median_s": statistics.median(lifetimes),
            "lifetime_max_s": max(lifetimes)}


def _outcome(line: bytes) -> str:
    if not line:
        return "closed without an answer"
    message = json.loads(line).get("error", {}).get("message", "")
    for words, outcome in (("connections", "refused at the cap"), ("initialize within", "closed at the deadline"),
                           ("longer than", "refused as oversize")):
        if words in message:
            return outcome
    return f"answered: {message[:60]}"


# --- the report ----------------------------------------------------------------------------------------


def lscpu_model() -> str:
    try:
        listing = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown CPU"
    for line in listing.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def report(result: BoundsReport, command: str) -> str:
    bounds = result["bounds"]
    lines = [
        "# Socket bounds before authentication", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}; `lscpu` model name: {lscpu_model()}",
        f"- Command: `{command}`",
        f"- Bounds (`SocketBounds` defaults): {bounds['max_connections']} connections, "
        f"{bounds['initialize_timeout_s']:g} s to initialize, {bounds['idle_timeout_s']:g} s idle, "
        f"{bounds['unauthenticated_message_bytes'] // 1024} KiB per message before initialize, "
        f"{bounds['max_message_bytes'] // MIB} MiB after.",
        "- Setup: `knowledge serve --port 0` in its own process, warmed by one agent's save and search; the "
        "attack in a second process, one thread and one loopback TCP connection per attacker, none with a "
        "token; an initialized agent connection pinging every 10 ms throughout. Memory from "
        "`/proc/<pid>/status`: VmRSS sampled every 20 ms, VmHWM the kernel's high-water mark.",
        "- Phases:",
        f"  - **flood**: {result['connections']} connections at once, each sending a line of "
        f"{result['message_bytes'] // MIB} MiB with no newline, then reading (the target's attack);",
        f"  - **reflood**: the same attackers starting over on a new connection whenever the engine cuts one "
        f"off, for {result['flood_s']:g} s (sustained, beyond the target);",
        "  - **hold**: as many connections each sending 100 bytes less than the limit before initialize, "
        "then waiting for the engine to close them: the most they can make it buffer;",
        "  - **cap**: more idle connections than the cap (the probe holds one slot).",
        "",
        "| phase | connections | attempts | seconds | how they ended | RSS before MiB | peak MiB | rise MiB | "
        "VmHWM after MiB | pings | ping p50 ms | p99 ms | max ms |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in result["phases"]:
        ended = "; ".join(f"{count} {outcome}" for outcome, count in sorted(row["outcomes"].items()))
        lines.append(
            f"| {row['phase']} | {row['connections']} | {row['attempts']} | {row['seconds']:.1f} | {ended} | "
            f"{row['rss_before_kib'] / 1024:.1f} | {row['rss_peak_kib'] / 1024:.1f} | "
            f"{(row['rss_peak_kib'] - row['rss_before_kib']) / 1024:.1f} | {row['hwm_after_kib'] / 1024:.1f} | "
            f"{row['pings']} | {_ms(row['ping_p50_ms'])} | {_ms(row['ping_p99_ms'])} | {_ms(row['ping_max_ms'])} |")
    flood = next(row for row in result["phases"] if row["phase"] == "flood")
    flood_rise = (max(flood["rss_peak_kib"], flood["hwm_after_kib"]) - flood["rss_before_kib"]) / 1024
    baseline = result["phases"][0]["rss_before_kib"]
    worst_rise = max(max(row["rss_peak_kib"], row["hwm_after_kib"]) for row in result["phases"]) / 1024 \
        - baseline / 1024
    worst = max(result["phases"], key=lambda row: row["ping_max_ms"] or 0.0)
    lines += [
        "",
        f"Target: {result['connections']} unauthenticated connections each sending "
        f"{result['message_bytes'] // MIB} MiB without a newline raise the engine's memory by under 64 MiB, "
        "while an initialized client's ping stays under 50 ms.",
        "",
        f"- flood: memory rose {flood_rise:.1f} MiB (the larger of the sampled peak and VmHWM, over the RSS "
        f"before), ping max {_ms(flood['ping_max_ms'])} ms: "
        f"{'met' if flood_rise < 64 and (flood['ping_max_ms'] or 0) < 50 else 'NOT met'}.",
        f"- Every phase: memory at most {worst_rise:.1f} MiB over the RSS before the first (VmHWM, which also "
        f"holds any peak between samples); slowest ping {_ms(worst['ping_max_ms'])} ms ({worst['phase']}); "
        f"{result['pings_total']} pings in all, errors: {'; '.join(result['ping_errors']) or 'none'}.",
        "",
        "\"Cut off while sending\": these attackers write their whole line before reading anything. The "
        "engine reads the limit and one byte, sends `limit_exceeded`, drains as much again and closes, so "
        "the rest of the attacker's write fails; a client that overshoots by less than the limit and then "
        "reads gets the error (tests/engine/wire/test_server_bounds.py). In the reflood, 200 attacker threads "
        "reconnecting without pause share the two cores with the engine and the probe.",
    ]
    return "\n".join(lines) + "\n"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _main() -> None:
    parser = argparse.ArgumentParser(description="the attacking side of knowledge bench socket --bounds")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--phase", choices=PHASES, required=True)
    parser.add_argument("--connections", type=int, required=True)
    parser.add_argument("--bytes", type=int, required=True)
    parser.add_argument("--hold-bytes", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args()
    threading.stack_size(256 * 1024)  # hundreds of threads that only wait on sockets
    print(json.dumps(attack(args.port, args.phase, args.connections, args.bytes, args.hold_bytes, args.seconds)))


if __name__ == "__main__":
    _main()
