"""``knowledge bench sync``: what a sync round costs, against issue 28's targets.

Machines are state directories of their own, each with an engine in this process (watching its vault, as
``knowledge serve`` does), syncing one store through a bare repository on disk; one figure is taken again
over a ``git daemon`` on loopback.  Measured, side by side in one run, each the median of ``repeats``:

- ``records`` new records written on machine A (``knowledge_save_page``), then one ``sync now`` on A and one
  on B: each round's time, and B's search then finds every one of them (checked: each record read back on B,
  and a sample found by a word only it holds);
- one new record: A's round and B's round, over the bare repository and over ``git daemon``;
- a round with nothing new on a small store and on the ``clone_records`` store, with the files the engine's
  process opened and the folders it listed during the round;
- ``sync clone`` of the ``clone_records`` store on a fresh state directory until it answers a search
  (engine opened, store cloned, first search answered; the records checked);
- ``knowledge_grep`` p50/p99 from one client beside 4 clients writing pages to ``knowledge serve`` in its
  own process, without and with back-to-back ``operator/syncNow`` rounds of that store.

Where a round's time goes: each round is cut into phases (fetch, check, catalogue, commit, merge, install,
push, status; exclusive times, see ``PHASES``), and the slowest phase of the largest round is run once more
under cProfile.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import json
import os
import pstats
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from ..access.authority import AgentCaller
from ..core.answers import TypedDict
from ..runtime import StoreRuntime
from ..service import Engine
from ..state.statedir import StateDir
from ..store.githistory import GitHistory
from ..store.store import VAULT_DIR
from ..sync import round as sync_round
from ..sync.clone import clone_store
from ..sync.remotes import RemoteBook
from ..sync.service import sync_now
from ..sync.transport import Transport
from ..wire.operator_client import OperatorConnection
from .corpus import write_partition
from .defaults import SYNC_CLONE_RECORDS, SYNC_RECORDS, SYNC_REPEATS, SYNC_SECONDS
from .socket import WORDS, Latency, machine, owner_state
from .throughput import _Engine, _grep, _writers

AGENT = "main"
QUIET_WAIT_S = 300  # how long the benchmark waits for an engine's git thread to commit what was written
SAMPLE = 20         # records of a batch looked for on B by a word only each holds
TARGETS = {"batch_s": 10.0, "one_s": 1.0, "clone_s": 60.0, "quiet_s": 0.3, "grep_ratio": 2.0}


class RoundFigures(TypedDict):
    """One kind of round, repeated: each repetition's seconds, their median, and the median of each phase."""
    seconds: list[float]
    median_s: float
    phases: dict[str, float]


class BatchFigures(TypedDict):
    """``records`` new records on A reaching B: A's round, B's round, and their sum per repetition."""
    records: int
    a: RoundFigures
    b: RoundFigures
    total_s: list[float]
    total_median_s: float
    found_on_b: int


class QuietFigures(TypedDict):
    """A round with nothing new on a store of ``records`` records, and what the engine's process read in it."""
    records: int
    round: RoundFigures
    reads: dict[str, int]  # COUNTED: what the engine's process opened and listed during one such round


class CloneFigures(TypedDict):
    """``sync clone`` of a ``records`` store until its first search answered, per repetition."""
    records: int
    seconds: list[float]
    median_s: float
    source_first_round_s: float
    phases: dict[str, float]  # medians, as a round's (the engine's start and the first search are "other")


class GrepFigures(TypedDict):
    """``knowledge_grep`` beside 4 writers, without and with sync rounds; the rounds run meanwhile."""
    without: list[Latency]
    with_sync: list[Latency]
    p50_without_ms: float
    p50_with_ms: float
    p99_without_ms: float
    p99_with_ms: float
    rounds: int
    round_median_s: float
    pages_per_s_without: float
    pages_per_s_with: float


class SyncReport(TypedDict):
    repeats: int
    load: list[float]  # the 1-minute load average at the start and at the end
    batch: BatchFigures
    one: dict[str, RoundFigures]
    quiet: list[QuietFigures]
    clone: CloneFigures
    grep: GrepFigures
    profile_phase: str
    profile: str


# --- where a round's time goes --------------------------------------------------------------------

# (phase, owner, attribute): the functions timed; a phase's time excludes the phases called inside it on
# the same thread.  The vault step runs on the store's lane (another thread): what it spends outside the
# phases below is "lane, other" (the round's own bookkeeping, reading trees and conflicts).
PHASES: tuple[tuple[str, Any, str], ...] = (
    ("fetch", Transport, "fetch"),
    ("check", Transport, "_check_own"),
    ("check", Transport, "_check_new_commits"),
    ("check", Transport, "_check_sizes"),
    ("fetch", Transport, "_deliver"),
    ("lane", sync_round, "_merge_on_lane"),
    ("catalogue", StoreRuntime, "prepare"),
    ("index all", StoreRuntime, "rebuild_catalogue"),
    ("commit", StoreRuntime, "checkpoint"),
    ("commit", GitHistory, "outside_changes"),
    ("commit", GitHistory, "commit"),
    ("commit", GitHistory, "fast_forward"),
    ("merge", sync_round, "_synced_tree"),
    ("merge", sync_round, "_blob_loader"),
    ("merge", sync_round, "merge_vaults"),
    ("install", sync_round, "_install"),
    ("push", Transport, "push"),
    ("status", sync_round, "_count"),
    ("status", sync_round, "_write_entries"),
)
PHASE_ORDER = ("fetch", "check", "catalogue", "commit", "merge", "install", "lane, other", "push", "status",
               "index all", "other")
OPAQUE = frozenset({"index all"})  # a clone's whole catalogue and index: the phases inside it are its own
PROFILED = {"fetch": (Transport, "fetch"), "check": (Transport, "_check_new_commits"),
            "catalogue": (StoreRuntime, "prepare"), "commit": (StoreRuntime, "checkpoint"),
            "merge": (sync_round, "merge_vaults"), "install": (sync_round, "_install"),
            "lane, other": (sync_round, "_merge_tips"), "push": (Transport, "push"),
            "status": (sync_round, "_count"), "other": (sync_round, "_round_with")}


class PhaseClock:
    """Exclusive seconds per phase while ``timing()`` is open, per thread (a phase nested in another on the
    same thread is taken out of the outer one)."""

    def __init__(self, now: Callable[[], float] = time.perf_counter) -> None:
        self.now = now
        self.spent: dict[str, float] = {}
        self._local = threading.local()
        self._lock = threading.Lock()

    def _wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        clock = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = clock._local.__dict__.setdefault("stack", [])
            if clock._local.__dict__.get("opaque"):
                return fn(*args, **kwargs)
            clock._local.opaque = phase in OPAQUE
            stack.append(0.0)
            began = clock.now()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = clock.now() - began
                clock._local.opaque = False
                inner = stack.pop()
                if stack:
                    stack[-1] += elapsed
                with clock._lock:
                    clock.spent[phase] = clock.spent.get(phase, 0.0) + elapsed - inner
        return timed

    @contextlib.contextmanager
    def timing(self) -> Iterator["PhaseClock"]:
        with contextlib.ExitStack() as patches:
            for phase, owner, name in PHASES:
                original = getattr(owner, name)
                patches.callback(setattr, owner, name, original)
                setattr(owner, name, self._wrap(phase, original))
            yield self

    def phases(self, total: float) -> dict[str, float]:
        """The round's phases in seconds, "lane, other" and "other" being what the timed phases leave."""
        spent = dict(self.spent)
        lane = spent.pop("lane", 0.0)
        on_lane = sum(spent.get(phase, 0.0) for phase in ("catalogue", "commit", "merge", "install"))
        spent["lane, other"] = max(0.0, lane - on_lane)
        spent["other"] = max(0.0, total - lane - sum(spent.get(p, 0.0)
                                                     for p in ("fetch", "check", "push", "status", "index all")))
        return {phase: spent.get(phase, 0.0) for phase in PHASE_ORDER}


@contextlib.contextmanager
def profiled(phase: str, into: list[str]) -> Iterator[None]:
    """cProfile around each call of ``phase``'s function (on whichever thread runs it); the top of the profile
    by cumulative time is appended to ``into``."""
    owner, name = PROFILED[phase]
    original = getattr(owner, name)
    profile = cProfile.Profile()

    def run(*args: Any, **kwargs: Any) -> Any:
        return profile.runcall(original, *args, **kwargs)

    setattr(owner, name, run)
    try:
        yield
    finally:
        setattr(owner, name, original)
        out = io.StringIO()
        pstats.Stats(profile, stream=out).strip_dirs().sort_stats("cumulative").print_stats(25)
        into.append(out.getvalue())


# --- machines -------------------------------------------------------------------------------------


class Machine:
    """A state directory with its engine in this process (watching its vault) and the owner agent ``main``."""

    def __init__(self, root: Path, name: str) -> None:
        self.state = StateDir(root / name)
        self.engine = Engine(self.state, watch=True)
        self.owner = AgentCaller(self.engine.add_agent(AGENT, owner=True), {"kind": "owner-private"})

    def close(self) -> None:
        self.engine.close()

    @property
    def runtime(self) -> StoreRuntime:
        record = self.engine.registry.own_store_of(AGENT)
        assert record is not None
        return self.engine.runtime(record)

    def add_remote(self, name: str, url: str) -> None:
        RemoteBook(self.state, self.engine.resolver).add(name, url, agent=AGENT)

    def save(self, tag: str, index: int, word: str = "") -> str:
        body = " ".join(WORDS[(index * 5 + k) % len(WORDS)] for k in range(10)) + (f" {word}" if word else "")
        return self.engine.save_page(self.owner, {"requestId": f"{tag}-{index}", "type": "note",
                                                  "title": f"{tag} note {index}", "body": body})["id"]

    def sync(self, remote: str) -> float:
        """One round with ``remote``; its seconds.  A round that fails stops the benchmark."""
        began = time.perf_counter()
        [store] = sync_now(self.engine, agent=AGENT, remote=remote)["stores"]
        elapsed = time.perf_counter() - began
        for status in store["remotes"]:
            if status["state"] != "ok":
                raise RuntimeError(f"the sync round failed: {status['lastError']}")
        return elapsed

    def quiet(self) -> None:
        """Wait until the git thread has committed every publication (the writes are not the round's work)."""
        deadline = time.monotonic() + QUIET_WAIT_S
        runtime = self.runtime
        while runtime.outbox.pending():
            if time.monotonic() > deadline:
                raise RuntimeError("the engine's git thread did not commit the writes in time")
            time.sleep(0.1)

    def search_ids(self, query: str) -> list[str]:
        return [hit["id"] for hit in self.engine.search(self.owner, {"query": query, "limit": 50})["hits"]]

    def records(self) -> int:
        runtime = self.runtime
        return sum(runtime.catalog.current_count(partition) for partition in runtime.store.partitions())


def _bare(path: Path) -> str:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return str(path)


def _word(batch: int, index: int) -> str:
    """A made-up word only record ``index`` of ``batch`` holds (letters only, so the analyzer keeps it whole)."""
    letters = "bcdfghjklmnpqrstvwxz"
    digits = ""
    for value in (batch, index):
        for _ in range(4):
            value, rest = divmod(value, len(letters))
            digits += letters[rest]
    return "zyq" + digits


def _round(clock_rounds: list[tuple[float, dict[str, float]]], run: Callable[[], float]) -> float:
    clock = PhaseClock()
    with clock.timing():
        seconds = run()
    clock_rounds.append((seconds, clock.phases(seconds)))
    return seconds


def _figures(rounds: list[tuple[float, dict[str, float]]]) -> RoundFigures:
    seconds = [s for s, _ in rounds]
    return {"seconds": seconds, "median_s": statistics.median(seconds),
            "phases": {phase: statistics.median(p[phase] for _, p in rounds) for phase in PHASE_ORDER}}


@contextlib.contextmanager
def _counting(vault: Path) -> Iterator[dict[str, int]]:
    """What this process (every thread) opened and listed while open, through audit events: files and folders
    of the vault's partitions, of its ``.git``, and any other path (file descriptors are not counted)."""
    counts = dict.fromkeys(COUNTED, 0)
    _AUDIT["vault"], _AUDIT["counts"] = str(vault) + os.sep, counts
    try:
        yield counts
    finally:
        _AUDIT["counts"] = None


COUNTED = ("vault files opened", "vault folders listed", ".git files opened", ".git folders listed",
           "other files opened", "other folders listed")
_AUDIT: dict[str, Any] = {"counts": None, "vault": "", "installed": False}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    counts = _AUDIT["counts"]
    if counts is None or event not in ("open", "os.scandir", "os.listdir") or not args:
        return
    path = args[0]
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return  # a file descriptor: a pipe to git, or a folder already open
    path = os.path.abspath(path)
    vault = _AUDIT["vault"]
    where = ("other" if not (path + os.sep).startswith(vault)
             else ".git" if (path + os.sep).startswith(vault + ".git" + os.sep) else "vault")
    counts[f"{where} {'files opened' if event == 'open' else 'folders listed'}"] += 1


def _quiet_round(machine_: Machine, remote: str, repeats: int) -> QuietFigures:
    if not _AUDIT["installed"]:
        sys.addaudithook(_audit)
        _AUDIT["installed"] = True
    machine_.quiet()
    machine_.sync(remote)  # whatever was left is taken first: the rounds below have nothing new
    rounds: list[tuple[float, dict[str, float]]] = []
    for _ in range(repeats):
        _round(rounds, lambda: machine_.sync(remote))
    with _counting(machine_.runtime.store.vault) as counts:
        machine_.sync(remote)
    return {"records": machine_.records(), "round": _figures(rounds), "reads": counts}


# --- git daemon -----------------------------------------------------------------------------------


@contextlib.contextmanager
def git_daemon(base: Path) -> Iterator[int]:
    """``git daemon`` serving the repositories under ``base`` on a free loopback port, push allowed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull}
    process = subprocess.Popen(["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
                                "--export-all", "--enable=receive-pack", f"--base-path={base}", str(base)],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("git daemon did not start")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)


# --- the measurements -----------------------------------------------------------------------------


def _two_machines(root: Path, repeats: int, records: int, say: Callable[[str], None],
                  profiles: list[str]) -> tuple[BatchFigures, dict[str, RoundFigures], QuietFigures, str]:
    remote = _bare(root / "remote.git")
    (root / "served").mkdir()
    daemon_repo = _bare(root / "served" / "notes.git")
    with contextlib.ExitStack() as stack, git_daemon(root / "served") as port:
        a = Machine(root, "a")
        stack.callback(a.close)
        a.save("seed", 0)
        a.add_remote("origin", remote)
        a.add_remote("daemon", f"git://127.0.0.1:{port}/notes.git")
        a.sync("origin")
        b = Machine(root, "b")
        stack.callback(b.close)
        clone_store(b.engine, remote, AGENT)
        b.add_remote("daemon", f"git://127.0.0.1:{port}/notes.git")
        a.sync("daemon")
        b.sync("daemon")
        assert Path(daemon_repo).is_dir()

        a_rounds: list[tuple[float, dict[str, float]]] = []
        b_rounds: list[tuple[float, dict[str, float]]] = []
        found = 0
        for batch in range(repeats):
            say(f"sync: {records:,} new records on A, batch {batch + 1} of {repeats}")
            ids = [a.save(f"batch{batch}", index, _word(batch, index)) for index in range(records)]
            a.quiet()
            _round(a_rounds, lambda: a.sync("origin"))
            _round(b_rounds, lambda: b.sync("origin"))
            found = _check_arrived(b, ids, batch)
            say(f"sync: A's round {a_rounds[-1][0]:.2f} s, B's round {b_rounds[-1][0]:.2f} s; "
                f"B finds all {found:,}")
        batch_figures: BatchFigures = {
            "records": records, "a": _figures(a_rounds), "b": _figures(b_rounds),
            "total_s": [x[0] + y[0] for x, y in zip(a_rounds, b_rounds)], "total_median_s": 0.0,
            "found_on_b": found}
        batch_figures["total_median_s"] = statistics.median(batch_figures["total_s"])
        slowest = max(PHASE_ORDER, key=lambda phase: max(batch_figures["a"]["phases"][phase],
                                                         batch_figures["b"]["phases"][phase]))
        say(f"sync: profiling the slowest phase ({slowest}) of one more batch")
        ids = [a.save("profiled", index, _word(repeats, index)) for index in range(records)]
        a.quiet()
        a_side = batch_figures["a"]["phases"][slowest] >= batch_figures["b"]["phases"][slowest]
        with profiled(slowest, profiles) if a_side else contextlib.nullcontext():
            a.sync("origin")
        with contextlib.nullcontext() if a_side else profiled(slowest, profiles):
            b.sync("origin")
        _check_arrived(b, ids, repeats)
        profile_phase = f"{slowest}, machine {'A' if a_side else 'B'}"

        one: dict[str, RoundFigures] = {}
        for remote_name in ("origin", "daemon"):
            say(f"sync: one new record, over {remote_name}")
            a.sync(remote_name)  # the batches above went through origin only: this remote catches up first
            b.sync(remote_name)
            a_one: list[tuple[float, dict[str, float]]] = []
            b_one: list[tuple[float, dict[str, float]]] = []
            for index in range(repeats):
                record_id = a.save(f"one-{remote_name}", index, _word(repeats + 1, index))
                a.quiet()
                _round(a_one, lambda: a.sync(remote_name))
                _round(b_one, lambda: b.sync(remote_name))
                b.engine.get_record(b.owner, record_id)
            one[f"A, {remote_name}"], one[f"B, {remote_name}"] = _figures(a_one), _figures(b_one)
        say("sync: rounds with nothing new")
        quiet = _quiet_round(a, "origin", repeats)
    return batch_figures, one, quiet, profile_phase


def _check_arrived(b: Machine, ids: list[str], batch: int) -> int:
    """Every record of the batch is current on B, and a sample is found by B's search by a word only it holds."""
    for record_id in ids:
        b.engine.get_record(b.owner, record_id)
    step = max(1, len(ids) // SAMPLE)
    for index in range(0, len(ids), step):
        hits = b.search_ids(_word(batch, index))
        if ids[index] not in hits:
            raise RuntimeError(f"B's search does not find record {ids[index]} after the rounds")
    return len(ids)


def _clone(root: Path, repeats: int, records: int, say: Callable[[str], None]) -> tuple[CloneFigures, QuietFigures]:
    remote = _bare(root / "large.git")
    source = Machine(root, "source")
    try:
        source.save("seed", 0)
        partition = _private_dir(source)
        say(f"sync: writing {records:,} records into the source vault")
        queries = write_partition(partition, records, 5, seed=1)
        source.add_remote("origin", remote)
        began = time.perf_counter()
        source.sync("origin")
        first_round = time.perf_counter() - began
        say(f"sync: the source's first round (its {records:,} files committed and pushed) {first_round:.1f} s")
        quiet = _quiet_round(source, "origin", repeats)
    finally:
        source.close()
    seconds = []
    rounds: list[tuple[float, dict[str, float]]] = []
    for attempt in range(repeats):
        state = StateDir(root / f"joined-{attempt}")
        clock = PhaseClock()
        with clock.timing():
            began = time.perf_counter()
            engine = Engine(state, watch=True)
            try:
                owner = AgentCaller(engine.add_agent(AGENT, owner=True), {"kind": "owner-private"})
                cloned = clone_store(engine, remote, AGENT)
                hits = engine.search(owner, {"query": queries[0]["query"], "limit": 50})["hits"]
                seconds.append(time.perf_counter() - began)
            finally:
                engine.close()
        rounds.append((seconds[-1], clock.phases(seconds[-1])))
        if cloned["records"] < records or queries[0]["source"] not in [hit["id"] for hit in hits]:
            raise RuntimeError(f"the clone holds {cloned['records']} records and its search missed the query's record")
        say(f"sync: clone {attempt + 1} of {repeats}: {seconds[-1]:.1f} s, {cloned['records']:,} records")
        shutil.rmtree(state.root, ignore_errors=True)
    return {"records": records, "seconds": seconds, "median_s": statistics.median(seconds),
            "source_first_round_s": first_round, "phases": _figures(rounds)["phases"]}, quiet


def _private_dir(machine_: Machine) -> Path:
    record = machine_.engine.registry.own_store_of(AGENT)
    assert record is not None
    return record.path / VAULT_DIR / "private"


def _grep_beside_writers(root: Path, repeats: int, seconds: float, say: Callable[[str], None]) -> GrepFigures:
    state, token = owner_state(root / "served-engine")
    state.config.write_text(json.dumps({"sync": {"automatic": False}}), encoding="utf-8")
    remote = _bare(root / "grep.git")
    engine = _Engine(state, token)
    engine.start()
    try:
        client = engine.client()
        for index in range(200):
            client.tool("knowledge_save_page", {"requestId": f"seed-{index}", "type": "note",
                                                "title": f"seed {index}", "body": " ".join(
                                                    WORDS[(index * 3 + k) % len(WORDS)] for k in range(12))})
        client.close()
        operator = OperatorConnection(state, client_name="bench-sync", reply_timeout_s=600)
        try:
            operator.call("operator/addSyncRemote", {"name": "origin", "url": remote, "agent": "bench"})
            _sync_via(operator)
            without: list[Any] = []
            with_sync: list[Any] = []
            round_seconds: list[float] = []
            for phase in range(repeats):
                say(f"sync: grep beside 4 writers, {phase + 1} of {repeats}")
                without.append(_writers(engine, 4, seconds, f"w{phase}", reader=_grep))
                with_sync.append(_with_rounds(engine, operator, seconds, f"s{phase}", round_seconds))
        finally:
            operator.close()
    finally:
        engine.stop()
    reads_without = [w["reads"] for w in without]
    reads_with = [w["reads"] for w in with_sync]
    return {"without": reads_without, "with_sync": reads_with,
            "p50_without_ms": statistics.median(r["p50_ms"] for r in reads_without),
            "p50_with_ms": statistics.median(r["p50_ms"] for r in reads_with),
            "p99_without_ms": statistics.median(r["p99_ms"] for r in reads_without),
            "p99_with_ms": statistics.median(r["p99_ms"] for r in reads_with),
            "rounds": len(round_seconds),
            "round_median_s": statistics.median(round_seconds) if round_seconds else 0.0,
            "pages_per_s_without": statistics.median(w["pages_per_s"] for w in without),
            "pages_per_s_with": statistics.median(w["pages_per_s"] for w in with_sync)}


def _sync_via(operator: OperatorConnection) -> float:
    began = time.perf_counter()
    answer = operator.call("operator/syncNow", {"agent": "bench"})
    if answer["failing"]:
        raise RuntimeError(f"the served engine's sync round failed: {answer}")
    return time.perf_counter() - began


def _with_rounds(engine: _Engine, operator: OperatorConnection, seconds: float, tag: str,
                 round_seconds: list[float]) -> Any:
    """4 writers and the grep client, while rounds run one after another through the operator connection."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def rounds() -> None:
        try:
            while not stop.is_set():
                round_seconds.append(_sync_via(operator))
        except BaseException as exc:  # noqa: BLE001 - reported after the phase
            failures.append(exc)

    thread = threading.Thread(target=rounds)
    thread.start()
    try:
        result = _writers(engine, 4, seconds, tag, reader=_grep)
    finally:
        stop.set()
        thread.join()
    if failures:
        raise failures[0]
    return result


def run(*, records: int = SYNC_RECORDS, clone_records: int = SYNC_CLONE_RECORDS, repeats: int = SYNC_REPEATS,
        seconds: float = SYNC_SECONDS,
        say: Callable[[str], None] = lambda line: None) -> SyncReport:
    if shutil.which("git") is None:
        raise SystemExit("git is not installed: there is nothing to sync with")
    profiles: list[str] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="kd-bench-sync-") as scratch:
        root = Path(scratch)
        batch, one, small_quiet, profile_phase = _two_machines(root / "two", repeats, records, say, profiles)
        clone, large_quiet = _clone(root / "clone", repeats, clone_records, say)
        grep = _grep_beside_writers(root / "grep", repeats, seconds, say)
    return {"repeats": repeats, "load": [load_before, os.getloadavg()[0]], "batch": batch, "one": one, "quiet": [small_quiet, large_quiet], "clone": clone,
            "grep": grep, "profile_phase": profile_phase, "profile": profiles[0] if profiles else ""}


# --- the report -----------------------------------------------------------------------------------


def _met(value: float, target: float) -> str:
    return "met" if value <= target else "**missed**"


def _seconds(values: list[float]) -> str:
    return ", ".join(f"{value:.2f}" for value in values)


def _p50s(latencies: list[Latency]) -> str:
    return ", ".join(f"{latency['p50_ms']:.1f}" for latency in latencies)


def report(result: SyncReport, command: str) -> str:
    batch, one, clone, grep = result["batch"], result["one"], result["clone"], result["grep"]
    small, large = result["quiet"]
    ratio = grep["p50_with_ms"] / grep["p50_without_ms"] if grep["p50_without_ms"] else float("inf")
    one_worst = max(figures["median_s"] for name, figures in one.items() if name.endswith("origin"))
    repeats = result["repeats"]
    lines = [
        "# Sync benchmark", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}",
        f"- Command: `{command}`",
        f"- Load: 1-minute load average {result['load'][0]:.1f} at the start, {result['load'][1]:.1f} at the end "
        f"({os.cpu_count()} cores, shared with other work while it ran)",
        "- Setup: each machine a state directory of its own with its engine in the benchmark's process (watching "
        "its vault, as `knowledge serve` does), syncing the agent `main`'s store through a bare repository on "
        "disk (`origin`) and, for one row, the same kind of repository served by `git daemon` on loopback "
        "(`daemon`). A round is `sync now` for that store and remote (engine/sync/service.py `sync_now`). "
        "Before a timed round the engine's git thread has committed the writes. Records are written with "
        "`knowledge_save_page` in-process; the clone's store is generated notes (engine/bench/corpus.py) "
        "written into the vault and committed by the source's first round. The grep rows run `knowledge serve` "
        "in its own process with automatic sync off, and the rounds come back to back over the operator "
        f"socket (`operator/syncNow`). Every figure is the median of {repeats} repetitions.", "",
        "## Against the issue's targets", "",
        "| target | measured (median) | each repetition | |", "| --- | ---: | --- | --- |",
        f"| {batch['records']:,} new records on A reach B's search: A's round + B's round ≤ 10 s | "
        f"{batch['total_median_s']:.2f} s ({batch['a']['median_s']:.2f} + {batch['b']['median_s']:.2f}) | "
        f"{_seconds(batch['total_s'])} | {_met(batch['total_median_s'], TARGETS['batch_s'])} |",
        f"| one new record: each round ≤ 1 s (bare repository) | A {one['A, origin']['median_s']:.2f} s, "
        f"B {one['B, origin']['median_s']:.2f} s | A {_seconds(one['A, origin']['seconds'])}; "
        f"B {_seconds(one['B, origin']['seconds'])} | {_met(one_worst, TARGETS['one_s'])} |",
        f"| (the same over `git daemon` on loopback) | A {one['A, daemon']['median_s']:.2f} s, "
        f"B {one['B, daemon']['median_s']:.2f} s | A {_seconds(one['A, daemon']['seconds'])}; "
        f"B {_seconds(one['B, daemon']['seconds'])} | |",
        f"| `sync clone` of {clone['records']:,} records until a search answers ≤ 60 s | "
        f"{clone['median_s']:.1f} s | {_seconds(clone['seconds'])} | {_met(clone['median_s'], TARGETS['clone_s'])} |",
    ]
    for quiet in (small, large):
        lines.append(f"| a round with nothing new ≤ 0.3 s ({quiet['records']:,} records) | "
                     f"{quiet['round']['median_s']:.2f} s | {_seconds(quiet['round']['seconds'])} | "
                     f"{_met(quiet['round']['median_s'], TARGETS['quiet_s'])} |")
    lines += [
        f"| `knowledge_grep` p50 beside 4 writers, with rounds ≤ 2x without | {grep['p50_with_ms']:.1f} ms vs "
        f"{grep['p50_without_ms']:.1f} ms ({ratio:.2f}x) | with: "
        f"{_p50s(grep['with_sync'])}; without: {_p50s(grep['without'])} | {_met(ratio, TARGETS['grep_ratio'])} |",
        "",
        f"B's search found every one of the {batch['found_on_b']:,} records of each batch after the two rounds "
        f"(each read back on B by id, and {SAMPLE} of them found by a word only that record holds); each one-record "
        "round was followed by reading the record back on B; each clone was checked to hold every record and to "
        "find a generated query's own record.", "",
        "## A round with nothing new: no walk of the vault", "",
        "| store | round, median s | " + " | ".join(COUNTED) + " |",
        "| ---: | ---: | " + " | ".join("---:" for _ in COUNTED) + " |",
    ]
    for quiet in (small, large):
        lines.append(f"| {quiet['records']:,} records | {quiet['round']['median_s']:.3f} | "
                     + " | ".join(str(quiet["reads"][name]) for name in COUNTED) + " |")
    lines += [
        "",
        "Files and folders are counted through Python's audit events (`open`, `os.scandir`, `os.listdir`) in every "
        "thread of the process during one round (\"other\" is the store's `sync/` files: remotes, tips, status, "
        "machine id; file descriptors such as git's pipes are not counted). git, which the round runs as child processes, is not counted: "
        "`update-index --refresh` stats each tracked file (reading only those whose stat changed) and `ls-files "
        "--others` lists the partitions' folders to find files edited by hand; the round's time at both store "
        "sizes above is how much that costs.", "",
        "## `knowledge_grep` beside 4 writing clients", "",
        "| | without sync | with rounds back to back |", "| --- | ---: | ---: |",
        f"| p50 ms | {grep['p50_without_ms']:.1f} | {grep['p50_with_ms']:.1f} |",
        f"| p99 ms | {grep['p99_without_ms']:.1f} | {grep['p99_with_ms']:.1f} |",
        f"| the writers' pages per s | {grep['pages_per_s_without']:.0f} | {grep['pages_per_s_with']:.0f} |",
        "",
        f"{grep['rounds']} rounds ran during the phases with sync (median {grep['round_median_s']:.2f} s each, each "
        "committing and pushing what the writers had written since the last). Automatic sync runs far fewer: at "
        "most one round per `batchSeconds` (60 s by default) while writes go on.", "",
        "## Where a round's time goes", "",
        "Exclusive seconds per phase, medians (engine/bench/sync.py `PHASES` names the functions each covers: "
        "fetch is `git fetch` into the quarantine and delivery into the vault's repository; check the transport's "
        "checks of new commits; catalogue the catalog's catch-up before the merge; index all a clone's cataloguing "
        "of every file and building of the search index; commit the pending "
        "publications, the outside-edits scan, the merge commit or fast-forward; merge reading trees and blobs "
        "and the merge by record; install the journalled publications; status the ahead/behind counts and "
        "status.json; for a clone, other is opening the engine and the first search).", "",
    ]
    columns = [(f"A, {batch['records']:,} new", batch["a"]), (f"B, {batch['records']:,} new", batch["b"])]
    columns += [(f"{name}, one new", figures) for name, figures in one.items()]
    columns += [(f"nothing new, {q['records']:,}", q["round"]) for q in (small, large)]
    columns += [(f"clone of {clone['records']:,}", {"seconds": clone["seconds"], "median_s": clone["median_s"],
                                                   "phases": clone["phases"]})]
    lines += ["| phase | " + " | ".join(name for name, _ in columns) + " |",
              "| --- | " + " | ".join("---:" for _ in columns) + " |"]
    for phase in PHASE_ORDER:
        lines.append(f"| {phase} | " + " | ".join(f"{figures['phases'][phase]:.3f}" for _, figures in columns) + " |")
    lines.append("| round | " + " | ".join(f"{figures['median_s']:.3f}" for _, figures in columns) + " |")
    lines += [
        "",
        f"The source of the clone took {clone['source_first_round_s']:.1f} s for its first round (catalogue "
        f"{clone['records']:,} files written by hand, commit them as outside edits, push), not counted above.", "",
        f"### cProfile of the slowest phase ({result['profile_phase']}), one more {batch['records']:,}-record round",
        "", "```", result["profile"].strip(), "```", "",
    ]
    return "\n".join(lines)


def command(program: str, records: int, clone_records: int, repeats: int, seconds: float) -> str:
    """The command line that gives these figures, as the report quotes it."""
    parts = [program]
    for flag, value, default in (("--records", records, SYNC_RECORDS), ("--clone-records", clone_records,
                                 SYNC_CLONE_RECORDS), ("--repeats", repeats, SYNC_REPEATS),
                                 ("--seconds", seconds, SYNC_SECONDS)):
        if value != default:
            parts.append(f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}")
    return " ".join(parts)
