"""``knowledge bench write-phases``: where one client's ``knowledge_save_page`` and ``knowledge_remember`` spend
their time, phase by phase.

The engine runs in this process, served on a loopback socket as ``knowledge serve`` serves it; the client is a
separate process (``python -m engine.bench.write_phases client``) writing one request at a time, so it takes no
share of this process's interpreter lock.  Each phase is a function of the write's path wrapped in a clock for
the run (nothing in the engine knows of it): a phase's time is its own, the phases it calls excluded, so the
rows add up to the time the threads spent.  With several clients (the third argument) as many client processes
write at once, each one request at a time, so the lane publishes their writes in groups: a lane phase's calls
per write then say how many writes a group held.  The caller's thread (socket worker) and the store's lane are
timed; so are the index commit and git's commit, which run beside the lane on threads of their own and are
shown per write to say what they cost, not as part of a write's wait.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..core.answers import TypedDict
from .socket import WORDS, RpcClient, machine, owner_state

WARM_UP_WRITES = 30
# The caller's wait for the lane, less the lane's own work for the write: queueing and the two thread hand-offs.
HAND_OFF = "hand-off to the lane and back (wait less the lane's work)"


@dataclass(frozen=True)
class Phase:
    """A function of the write path timed as ``label``; ``whole``: what it calls is counted in it, not apart."""

    label: str
    module: str
    attribute: str  # "name" or "Class.method"
    whole: bool = False
    when: Callable[..., bool] | None = None  # timed only for calls it accepts (``Database.execute("COMMIT")``)


# Order: the order of the table.  Caller's thread first, then the lane, then beside it.
PHASES = (
    Phase("request: JSON-RPC parse, method lookup, reply", "engine.wire.protocol", "Dispatcher.handle"),
    Phase("input: parse, validate, request digest", "engine.service", "parse_page_input"),
    Phase("input: parse, validate, request digest", "engine.service", "parse_remember_input"),
    Phase("input: parse, validate, request digest", "engine.service", "request_hash"),
    Phase("secrets scan", "engine.service", "Engine.refuse_secrets"),
    Phase("authorize", "engine.service", "Engine.enter"),
    Phase("answer: record links, receipt as JSON text", "engine.service", "with_record_links"),
    Phase("answer: record links, receipt as JSON text", "engine.wire.tools", "tool_result"),
    Phase(HAND_OFF, "engine.write_groups", "WriteGroups.write"),
    Phase("lane: group bookkeeping, notifications", "engine.write_groups", "WriteGroups._publish_group"),
    Phase("lane: catch-up before (recovery check, identity, catalog sync)", "engine.runtime", "StoreRuntime.prepare"),
    Phase("lane: identity check after", "engine.write_groups", "WriteGroups._verify_after"),
    Phase("lane: idempotency (requestId) lookup", "engine.store.publication", "Publisher.existing_receipt"),
    Phase("lane: plan: build, check records", "engine.service", "plan_save_page"),
    Phase("lane: plan: build, check records", "engine.service", "plan_remember"),
    Phase("lane: plan: render Markdown", "engine.vault.records", "Record.render"),
    Phase("lane: plan: render Markdown", "engine.vault.records", "Record.render_and_copy"),
    Phase("lane: publication: checks, journal SQL, waits for what syncs beside", "engine.store.publication",
          "Publisher.publish_chained"),
    Phase("lane: install: compare, temp files, renames", "engine.store.publication", "Publisher._install_group"),
    Phase("lane: fsync of files", "os", "fsync"),
    Phase("lane: fsync of directories", "engine.store.publication", "fsync_dir", whole=True),
    Phase("lane: checkpoint in vault.json (write, 2 fsyncs)", "engine.store.store", "Store.set_checkpoint",
          whole=True),
    Phase("lane: acknowledge: catalog rows, outbox, applied", "engine.store.publication", "Publisher._acknowledge"),
    Phase("lane: acknowledge: reference re-check", "engine.store.catalog", "Catalog.refresh_cross_checks"),
    Phase("lane: SQLite COMMIT (WAL fsync)", "engine.bench.write_phases", "TimedConnection.execute",
          when=lambda connection, sql, *rest: sql == "COMMIT"),
    Phase("lane: receipt read back", "engine.store.publication", "Publisher.receipt"),
    Phase("lane: git outbox bookkeeping (for the git thread)", "engine.store.outbox", "GitOutbox.committed"),
    Phase("lane: git outbox bookkeeping (for the git thread)", "engine.store.outbox", "GitOutbox.pending"),
    Phase("beside: watcher events handled (the engine's own files and git's)", "engine.store.watcher",
          "_Handler.on_any_event"),
    Phase("beside: search index catch-up (tantivy commit)", "engine.index.tantivy_index", "SearchIndexes.catch_up",
          whole=True),
    Phase("beside: git commit", "engine.store.githistory", "GitHistory.commit", whole=True),
)


class PhaseFigures(TypedDict):
    """One kind of write: the client's round trips and each phase's time per write (ms) and calls per write."""
    writes: int
    round_trip_p50_ms: float
    round_trip_mean_ms: float
    per_s: float
    cpu_ms: float  # the engine process's CPU time per write, every thread (and git's processes) included
    cpu_by_thread: dict[str, float]  # of which each kind of thread's, ms per write (git: its processes)
    phases: dict[str, float]
    calls: dict[str, float]


class PhasesReport(TypedDict):
    machine: str
    load: str
    clients: int  # client processes writing at once
    kinds: dict[str, PhaseFigures]


class PhaseClock:
    """Exclusive time per phase label, summed over threads; a phase's callees' time is taken out of it."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def reset(self) -> None:
        with self._lock:
            self.seconds.clear()
            self.calls.clear()

    def _stack(self) -> list[list[Any]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def wrap(self, phase: Phase, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = self._stack()
            if (stack and stack[-1][2]) or (phase.when is not None and not phase.when(*args, **kwargs)):
                return fn(*args, **kwargs)  # inside a phase counted whole, or a call not timed
            label = phase.label
            if label.startswith("lane: ") and threading.current_thread().name.startswith("sync-"):
                label = "beside, overlapping the lane: " + label[len("lane: "):]
            frame = [0.0, label, phase.whole]  # [callees' seconds, label, whole]
            stack.append(frame)
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - began
                stack.pop()
                if stack:
                    stack[-1][0] += elapsed
                with self._lock:
                    self.seconds[label] += elapsed - frame[0]
                    self.calls[label] += 1
        timed.__wrapped__ = fn  # type: ignore[attr-defined]
        return timed


class TimedConnection:
    """A SQLite connection whose ``execute`` is a phase of its own (its COMMIT is the WAL's fsync)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def execute(self, sql: str, *params: Any) -> Any:
        return self._connection.execute(sql, *params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


def instrument(clock: PhaseClock) -> Callable[[], None]:
    """Wrap every phase's function; returns the undo."""
    import importlib
    from ..core.db import Database
    undo: list[Callable[[], None]] = []
    database_init = Database.__init__

    def timed_init(database: Any, connection: Any, path: Any) -> None:
        database_init(database, TimedConnection(connection), path)
    Database.__init__ = timed_init  # type: ignore[method-assign]
    undo.append(lambda: setattr(Database, "__init__", database_init))
    for phase in PHASES:
        owner: Any = importlib.import_module(phase.module)
        *path, name = phase.attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        setattr(owner, name, clock.wrap(phase, original))
        undo.append(lambda owner=owner, name=name, original=original: setattr(owner, name, original))
    return lambda: [step() for step in reversed(undo)] and None


def _page(index: int) -> dict[str, Any]:
    words = " ".join(WORDS[(index * 5 + k) % len(WORDS)] for k in range(10))
    return {"requestId": f"phase-page-{index}", "type": "note", "title": f"phase note {index}", "body": words}


def _claim(index: int) -> dict[str, Any]:
    return {"requestId": f"phase-claim-{index}", "items": [
        {"text": f"The {WORDS[index % len(WORDS)]} review moved to week {index}.", "claimKind": "fact",
         "excerpt": f"review moved to week {index}"}]}


def client_main(port: int, token: str, kind: str, count: int, first: int) -> None:
    """The client process: ``count`` writes of ``kind`` one after another; prints their round trips (ms)."""
    client = RpcClient(port, token)
    tool, build = ("knowledge_save_page", _page) if kind == "page" else ("knowledge_remember", _claim)
    timings = []
    for index in range(first, first + count):
        began = time.perf_counter()
        client.tool(tool, build(index))
        timings.append((time.perf_counter() - began) * 1000)
    client.close()
    print(json.dumps({"timings": timings, "cpu": time.process_time()}))


_client_cpu = [0.0]  # the client processes' CPU, which ``os.times`` counts among this process's children


def _client(port: int, token: str, kind: str, count: int, first: int) -> list[float]:
    out = subprocess.run([sys.executable, "-m", "engine.bench.write_phases", "client", str(port), token, kind,
                          str(count), str(first)], check=True, capture_output=True, text=True)
    answer = json.loads(out.stdout)
    _client_cpu[0] += answer["cpu"]
    return answer["timings"]


def _clients(port: int, token: str, kind: str, count: int, first: int, clients: int) -> list[float]:
    """``clients`` client processes at once, ``count`` writes in all; every write's round trip."""
    if clients == 1:
        return _client(port, token, kind, count, first)
    share = count // clients
    with ThreadPoolExecutor(clients) as pool:
        parts = list(pool.map(lambda n: _client(port, token, kind, share, first + n * share), range(clients)))
    return [timing for part in parts for timing in part]


def measure(writes: int, *, records: int = 100, clients: int = 1,
            say: Callable[[str], None] = lambda line: None) -> PhasesReport:
    from ..service import Engine
    from ..store.store import VAULT_DIR
    from ..wire.server import EngineServer
    from .corpus import write_partition

    clock = PhaseClock()
    kinds: dict[str, PhaseFigures] = {}
    writes -= writes % clients  # an equal share each
    with tempfile.TemporaryDirectory() as scratch:
        state, token = owner_state(Path(scratch))
        undo = instrument(clock)
        try:
            with _serving(Engine, EngineServer, state) as port:
                _client(port, token, "page", 1, 10**6)  # the store and its partition
            if records > 1:
                write_partition(next((state.root / "stores").iterdir()) / VAULT_DIR / "private", records - 1, 0)
            with _serving(Engine, EngineServer, state) as port:
                first = 0
                for kind in ("page", "remember"):
                    _client(port, token, kind, WARM_UP_WRITES, first)
                    first += WARM_UP_WRITES
                    time.sleep(0.5)  # the warm-up's index commit and git commit out of the way
                    clock.reset()
                    cpu, threads, children = _cpu_seconds(), _thread_cpu(), _children_seconds()
                    began = time.perf_counter()
                    timings = _clients(port, token, kind, writes, first, clients)
                    elapsed = time.perf_counter() - began
                    first += writes
                    time.sleep(0.3)  # the last index catch-up (50 ms later) and git commit
                    cpu = _cpu_seconds() - cpu
                    after = _thread_cpu()
                    by_thread = {name: (after.get(name, 0.0) - threads.get(name, 0.0)) * 1000 / writes
                                 for name in after}
                    git = _children_seconds() - children
                    by_thread["git processes"] = git * 1000 / writes
                    by_thread["threads outside Python (tantivy, watcher)"] = \
                        cpu * 1000 / writes - sum(by_thread.values())
                    kinds[kind] = {
                        "writes": writes, "round_trip_p50_ms": statistics.median(timings),
                        "round_trip_mean_ms": statistics.fmean(timings),
                        # each client one request at a time: ``clients`` writes in flight for a mean round trip
                        # (their processes' start is not counted)
                        "per_s": clients * 1000 / statistics.fmean(timings),
                        "cpu_ms": cpu * 1000 / writes,
                        "cpu_by_thread": by_thread,
                        "phases": _per_write(clock.seconds, writes),
                        "calls": {label: count / writes for label, count in clock.calls.items()},
                    }
                    say(f"{kind}: {kinds[kind]['per_s']:.0f}/s, p50 {kinds[kind]['round_trip_p50_ms']:.1f} ms "
                        f"(client process ran {elapsed:.1f} s)")
        finally:
            undo()
    return {"machine": machine(), "load": " ".join(f"{value:.2f}" for value in os.getloadavg()), "clients": clients,
            "kinds": kinds}


def _cpu_seconds() -> float:
    """CPU time of this process's threads and of the processes it waited for (git)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system - _client_cpu[0]


def _children_seconds() -> float:
    times = os.times()
    return times.children_user + times.children_system - _client_cpu[0]


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's threads so far, summed by kind (the name without store id or number)."""
    import re
    ticks = os.sysconf("SC_CLK_TCK")
    seconds: dict[str, float] = defaultdict(float)
    for thread in threading.enumerate():
        try:
            fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kind = re.sub(r"[-_]?(st_[0-9A-Z]+|\d+)", "", thread.name).strip("-_") or thread.name
        seconds[kind] += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return seconds


def _per_write(seconds: dict[str, float], writes: int) -> dict[str, float]:
    """Milliseconds per write by phase; the hand-off is the caller's wait less what the lane did meanwhile."""
    phases = {label: total * 1000 / writes for label, total in seconds.items()}
    lane = sum(ms for label, ms in phases.items() if label.startswith("lane: "))
    phases[HAND_OFF] = max(0.0, phases.get(HAND_OFF, 0.0) - lane)
    return phases


class _serving:
    """An in-process engine served on a loopback port, as ``knowledge serve`` does; yields the port."""

    def __init__(self, engine_class: Any, server_class: Any, state: Any) -> None:
        self.engine = engine_class(state)
        self.server = server_class(self.engine, port=0, socket_path=None)

    def __enter__(self) -> int:
        self.server.start()
        return self.server.port

    def __exit__(self, *exc: Any) -> None:
        self.server.stop()
        self.engine.close()


def _labels(kinds: dict[str, PhaseFigures]) -> Iterator[str]:
    """The phases' labels in the table's order, those measured on the sync threads after the lane's."""
    seen: set[str] = set()
    for phase in PHASES:
        if phase.label not in seen:
            seen.add(phase.label)
            yield phase.label
    for figures in kinds.values():
        for label in figures["phases"]:
            if label not in seen:
                seen.add(label)
                yield label


def report(result: PhasesReport, command: str) -> str:
    kinds = result["kinds"]
    lines = [f"- Command: `{command}` (load average at the end: {result['load']}; {result['machine']})", "",
             "| phase (ms per write; calls per write) | " + " | ".join(f"`{k}`" for k in kinds) + " |",
             "| --- | " + " | ".join("---:" for _ in kinds) + " |"]
    for label in _labels(kinds):
        cells = []
        for figures in kinds.values():
            ms, calls = figures["phases"].get(label, 0.0), figures["calls"].get(label, 0.0)
            cells.append(f"{ms:.2f} ({calls:.1f})" if calls else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("| **round trip at the client, mean (p50)** | " + " | ".join(
        f"**{f['round_trip_mean_ms']:.2f}** ({f['round_trip_p50_ms']:.2f})" for f in kinds.values()) + " |")
    lines.append("| engine CPU per write, all threads and git, ms (the 0.3 s after the run included) | " + " | ".join(
        f"{f['cpu_ms']:.2f}" for f in kinds.values()) + " |")
    for name in sorted({name for f in kinds.values() for name in f["cpu_by_thread"]}):
        if any(f["cpu_by_thread"].get(name, 0.0) >= 0.05 for f in kinds.values()):
            lines.append(f"| - of which {name} | " + " | ".join(
                f"{f['cpu_by_thread'].get(name, 0.0):.2f}" for f in kinds.values()) + " |")
    clients = "one client" if result["clients"] == 1 else f"{result['clients']} clients in all"
    lines.append(f"| writes a second, {clients} | " + " | ".join(f"{f['per_s']:.0f}" for f in kinds.values()) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    if argv and argv[0] == "client":
        client_main(int(argv[1]), argv[2], argv[3], int(argv[4]), int(argv[5]))
        return
    writes = int(argv[0]) if argv else 300
    records = int(argv[1]) if len(argv) > 1 else 100
    clients = int(argv[2]) if len(argv) > 2 else 1
    result = measure(writes, records=records, clients=clients, say=lambda line: print(line, file=sys.stderr))
    print(report(result, f"python -m engine.bench.write_phases {writes} {records}"
                         + (f" {clients}" if clients > 1 else "")))


if __name__ == "__main__":  # the module's own copy, whose TimedConnection the phases name
    from engine.bench.write_phases import main as _main
    _main(sys.argv[1:])
