"""``knowledge bench throughput``: writes and reads through the socket, at a small and a large partition.

For each partition size the engine runs as its own process (``knowledge
serve --port 0``) on a fresh state directory whose private partition holds
that many generated note pages (engine/bench/corpus.py), written straight
into the vault as an owner copying a large vault in would.  Measured, in
this order:

- for each size in turn: cataloguing the new files (the first search after
  the start: every file parsed and indexed), the first search after a
  restart on the unchanged vault, ``memory/index`` round trips on the idle
  engine; its engine then stays up;
- one client writing pages (``knowledge_save_page``), then claims
  (``knowledge_remember``), into every size's engine in turn, a block at a
  time, so a shared machine's load falls on every size alike;
- for each size in turn: ``knowledge_grep`` round trips on the idle engine
  (for words those pages hold), 8 clients writing pages together,
  ``knowledge_grep`` from one client while 4 others write pages; then its
  engine stops and the parts of an idle search are timed in this process.

Clients are threads of this process, each with its own TCP connection on
loopback and one request at a time, as in ``knowledge bench socket``.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, cast

from ..access.authority import AgentCaller
from ..core.answers import NotRequired, TypedDict
from ..search.keyword import MEMORY_SEARCH_PARAMS, build_query, parse_search_request, search
from ..service import Engine
from ..state.statedir import StateDir
from ..store.catalog_reads import CatalogReads
from ..store.store import VAULT_DIR
from .corpus import write_partition
from .defaults import THROUGHPUT_SIZES as SIZES
from .socket import WORDS, Latency, RpcClient, _start_engine, machine, owner_state, percentile, run_together

FIRST_QUERY_TIMEOUT_S = 1800  # the first search catalogues and indexes every file
# One client's writes into one size before the next size's turn (docs/benchmarks/throughput.md, "Why the
# 100-record partition wrote slower"): short enough that a shared machine's load, which comes and goes within
# seconds, falls on every size alike.
ONE_CLIENT_BLOCK = 20
ISSUE_FIGURES = {  # what the throughput issue measured before this work (same machine, through the socket)
    "pages_per_s_1": "about 25 (29 into 200 records, 4.8 into 5,200)",
    "remember_per_s_1": "19",
    "pages_per_s_8": "about 20",
    "grep_idle_p50_ms": "about 3",
    "memory_index_ms": "2,200 at 95,000 records",
    "catalogue_s": "about 40 at 100,000 records",
}


class PageRequest(TypedDict):
    """The ``knowledge_save_page`` arguments the benchmark writes."""
    requestId: str
    type: str
    title: str
    body: str


class Writers(TypedDict):
    """``clients`` writers at once: pages written and the rate; with a reader beside them, its latency."""
    clients: int
    pages: int
    pages_per_s: float
    reads: NotRequired[Latency]


class RatedLatency(Latency):
    per_s: float  # requests a second, one after another


class FirstLatency(Latency):
    first_ms: float  # the first request, before any cache is warm


class SizeFigures(TypedDict):
    """Every figure at one store size (``records``)."""
    records: int
    catalogue_s: float
    restart_first_query_s: float
    memory_index: FirstLatency
    pages_1: RatedLatency
    remember_1: RatedLatency
    grep_idle: Latency
    pages_8: Writers
    grep_under_4_writers: Writers
    search_parts: dict[str, float]  # each part of an idle grep, p50 ms


class ThroughputReport(TypedDict):
    sizes: list[SizeFigures]


class _Engine:
    """``knowledge serve`` on ``state``, started and stopped on demand."""

    def __init__(self, state: StateDir, token: str) -> None:
        self.state, self.token = state, token
        self.process: Any = None
        self.port = 0

    def start(self) -> None:
        self.process, self.port = _start_engine(self.state)

    def stop(self) -> None:
        """Stop the engine; nothing to do when it is not running."""
        if self.process is None:
            return
        self.process.terminate()
        self.process.wait(120)
        self.process = None
        self.state.remove_engine_info()  # a clean stop removes it too; the next start must not read a stale port

    def client(self, timeout: float = 60) -> RpcClient:
        return RpcClient(self.port, self.token, timeout=timeout)


def _timed(fn: Callable[[], Any]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def _latencies(fn: Callable[[int], Any], count: int) -> list[float]:
    timings = []
    for index in range(count):
        began = time.perf_counter()
        fn(index)
        timings.append((time.perf_counter() - began) * 1000)
    return timings


def _summary(timings: list[float]) -> Latency:
    return {"n": len(timings), "p50_ms": statistics.median(timings), "p99_ms": percentile(timings, 0.99)}


def _page(tag: str, index: int) -> PageRequest:
    words = " ".join(WORDS[(index * 5 + k) % len(WORDS)] for k in range(10))
    return {"requestId": f"{tag}-{index}", "type": "note", "title": f"{tag} note {index}", "body": words}


def _writers(engine: _Engine, clients: int, seconds: float, tag: str,
             reader: Callable[[RpcClient, int], Any] | None = None) -> Writers:
    """``clients`` threads writing pages for ``seconds`` (and one reading, with ``reader``)."""
    written = [0] * clients
    reads: list[float] = []
    stop_at = [0.0]
    start_line = threading.Barrier(clients + (1 if reader else 0) + 1)

    def write(number: int) -> None:
        client = engine.client()
        start_line.wait()
        index = 0
        while time.perf_counter() < stop_at[0]:
            client.tool("knowledge_save_page", _page(f"{tag}{number}", index))
            index += 1
        written[number] = index
        client.close()

    def read() -> None:
        client = engine.client()
        start_line.wait()
        index = 0
        while time.perf_counter() < stop_at[0]:
            began = time.perf_counter()
            reader(client, index)
            reads.append((time.perf_counter() - began) * 1000)
            index += 1
        client.close()

    workers: list[Callable[[], None]] = [lambda n=n: write(n) for n in range(clients)]
    elapsed = run_together(workers + ([read] if reader is not None else []), start_line, stop_at, seconds)
    result: Writers = {"clients": clients, "pages": sum(written), "pages_per_s": sum(written) / elapsed}
    if reader is not None:
        result["reads"] = _summary(reads)
    return result


def _grep(client: RpcClient, index: int) -> None:
    client.tool("knowledge_grep", {"query": f"{WORDS[index % len(WORDS)]} {WORDS[(index * 7) % len(WORDS)]}"})


@dataclass
class _Size:
    """One partition size on its way through the phases: its engine, the client of the one-client phases and
    the figures so far."""
    records: int
    state: StateDir
    token: str
    engine: _Engine
    client: RpcClient
    figures: dict[str, Any]
    pages: list[float] = field(default_factory=list)
    claims: list[float] = field(default_factory=list)


def _prepare(stack: ExitStack, records: int, round_trips: int, say: Callable[[str], None]) -> _Size:
    """A state directory of ``records`` generated pages, catalogued, restarted, its ``memory/index`` measured;
    its engine left running (until ``stack`` closes) for the one-client phases."""
    state, token = owner_state(Path(stack.enter_context(tempfile.TemporaryDirectory())))
    engine = _Engine(state, token)
    stack.callback(engine.stop)  # before the directory goes, whatever phase fails
    engine.start()
    client = engine.client()
    client.tool("knowledge_save_page", _page("seed", 0))  # the store and its partition
    client.close()
    engine.stop()
    store_dir = next((state.root / "stores").iterdir())
    say(f"{records:,} records: writing the files")
    write_partition(store_dir / VAULT_DIR / "private", records, 0)
    figures: dict[str, Any] = {"records": records}

    engine.start()
    client = engine.client(timeout=FIRST_QUERY_TIMEOUT_S)
    figures["catalogue_s"] = _timed(lambda: _grep(client, 0))
    client.close()
    engine.stop()
    engine.start()
    client = engine.client(timeout=FIRST_QUERY_TIMEOUT_S)
    stack.callback(client.close)
    figures["restart_first_query_s"] = _timed(lambda: _grep(client, 1))
    say(f"{records:,} records: catalogued in {figures['catalogue_s']:.1f} s, "
        f"first query after a restart {figures['restart_first_query_s']:.2f} s")
    as_of = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    first_index = _timed(lambda: client.call("memory/index", {"firstMessageAt": as_of}))
    figures["memory_index"] = {"first_ms": first_index * 1000, **_summary(_latencies(
        lambda i: client.call("memory/index", {"firstMessageAt": as_of}), max(10, round_trips // 10)))}
    return _Size(records, state, token, engine, client, figures)


def _remember(index: int) -> dict[str, Any]:
    return {"requestId": f"claim-{index}", "items": [
        {"text": f"The {WORDS[index % len(WORDS)]} review moved to week {index}.", "claimKind": "fact",
         "excerpt": f"review moved to week {index}"}]}


def _one_client(sizes: list[_Size], round_trips: int) -> None:
    """``round_trips`` pages, then as many claims, into each size: in blocks of ``ONE_CLIENT_BLOCK``, each size
    in turn, the order reversed every round, every size's engine running meanwhile.  So the machine's load at
    any moment (other programs on a shared machine) falls on every size alike, and the sizes' figures compare
    the write paths, not the moments they were measured at.  A size's background work (the index commit, git's)
    may run during another size's block, as it would run during its own next writes."""
    for tool, timings, arguments in (("knowledge_save_page", "pages", lambda i: _page("one", i)),
                                     ("knowledge_remember", "claims", _remember)):
        for round_number, first in enumerate(range(0, round_trips, ONE_CLIENT_BLOCK)):
            count = min(ONE_CLIENT_BLOCK, round_trips - first)
            for size in (sizes if round_number % 2 == 0 else sizes[::-1]):
                getattr(size, timings).extend(_latencies(
                    lambda i, size=size: size.client.tool(tool, arguments(first + i)), count))


def _finish(size: _Size, *, seconds: float, round_trips: int, say: Callable[[str], None]) -> SizeFigures:
    """The phases after the one-client writes, on ``size``'s engine alone; then its engine stops."""
    figures, engine, client = size.figures, size.engine, size.client
    figures["pages_1"] = {**_summary(size.pages), "per_s": len(size.pages) / (sum(size.pages) / 1000)}
    figures["remember_1"] = {**_summary(size.claims), "per_s": len(size.claims) / (sum(size.claims) / 1000)}
    # After the writes: the generated pages hold none of the query words, the written ones do, so these
    # searches find hits and fetch their rows, documents and snippets.
    figures["grep_idle"] = _summary(_latencies(lambda i: _grep(client, i), round_trips))
    say(f"{size.records:,} records: one client {figures['pages_1']['per_s']:.0f} pages/s, "
        f"{figures['remember_1']['per_s']:.0f} remember/s")
    figures["pages_8"] = _writers(engine, 8, seconds, "eight")
    figures["grep_under_4_writers"] = _writers(engine, 4, seconds, "four", reader=_grep)
    say(f"{size.records:,} records: 8 clients {figures['pages_8']['pages_per_s']:.0f} pages/s; grep beside 4 "
        f"writers p50 {figures['grep_under_4_writers']['reads']['p50_ms']:.1f} ms")
    client.close()
    engine.stop()
    figures["search_parts"] = search_parts(size.state, size.token, round_trips)
    return cast(SizeFigures, figures)


def search_parts(state: StateDir, token: str, count: int) -> dict[str, float]:
    """Where an idle ``knowledge_grep`` spends its time, each part timed alone in this process (p50 ms) on
    the state the socket phases left, with the watcher on as ``knowledge serve`` runs it."""
    caller = AgentCaller(token, {"kind": "owner-private"})
    with Engine(state, watch=True) as engine:
        entry = engine.enter(caller)
        runtime = engine.runtime(entry.authority.store)
        partition = entry.authority.partition
        queries = [{"query": f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]}"} for i in range(count)]
        engine.search(caller, queries[0])  # through the lane once: the partition is followed from here on
        request = parse_search_request(queries[0], MEMORY_SEARCH_PARAMS)
        index, version = runtime.indexes.at_least(partition, 0)
        terms = engine.analyzer.query_terms(request.query)

        def query_only(_: int) -> None:
            index.searcher().search(build_query(index.schema, terms, request), request.limit + 1, count=False)

        def hits(_: int) -> None:
            with runtime.store.db.snapshot() as db:
                search(runtime.store, CatalogReads(db), index, version, engine.analyzer, engine.signer, partition,
                       request)

        parts = {
            "tantivy_ms": query_only,
            "search_ms": hits,  # the query, its stored documents and snippets, and the catalog rows of the hits
            "authorize_ms": lambda _: engine.authorize(caller),
            "identity_ms": lambda _: runtime.store.unchanged(partition),
            "engine_search_ms": lambda i: engine.search(caller, queries[i]),
        }
        return {name: statistics.median(_latencies(part, count)) for name, part in parts.items()}


def run(*, sizes: tuple[int, ...] = SIZES, seconds: float = 5.0, round_trips: int = 200,
        say: Callable[[str], None] = lambda line: None) -> ThroughputReport:
    with ExitStack() as stack:
        prepared = [_prepare(stack, records, round_trips, say) for records in sizes]
        _one_client(prepared, round_trips)
        return {"sizes": [_finish(size, seconds=seconds, round_trips=round_trips, say=say) for size in prepared]}


def report(result: ThroughputReport, command: str) -> str:
    sizes = result["sizes"]
    header = "| measured | " + " | ".join(f"{s['records']:,} records" for s in sizes) + " | the issue's figure |"
    rule = "| --- | " + " | ".join("---:" for _ in sizes) + " | --- |"

    def row(label: str, cell: Callable[[SizeFigures], str], issue: str = "") -> str:
        return f"| {label} | " + " | ".join(cell(s) for s in sizes) + f" | {issue} |"

    lines = [
        "# Throughput benchmark", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}",
        f"- Command: `{command}`",
        "- Setup: `knowledge serve --port 0` in its own process on a fresh state directory; the private "
        "partition holds the generated note pages (engine/bench/corpus.py) plus what the run writes; clients are "
        "threads with their own TCP connection on loopback, one request at a time; every size's engine runs during the "
        f"one-client writes, which go to each size in turn, {ONE_CLIENT_BLOCK} requests a block, the order reversed "
        "every round.", "",
        header, rule,
        row("cataloguing the new files (first search), s", lambda s: f"{s['catalogue_s']:.1f}",
            ISSUE_FIGURES["catalogue_s"]),
        row("first search after a restart, unchanged vault, s", lambda s: f"{s['restart_first_query_s']:.2f}"),
        row("`knowledge_grep` idle, p50 / p99 ms",
            lambda s: f"{s['grep_idle']['p50_ms']:.2f} / {s['grep_idle']['p99_ms']:.2f}",
            ISSUE_FIGURES["grep_idle_p50_ms"]),
        row("`memory/index` first / p50 of repeats, ms",
            lambda s: f"{s['memory_index']['first_ms']:.0f} / {s['memory_index']['p50_ms']:.2f}",
            ISSUE_FIGURES["memory_index_ms"]),
        row("one client, `knowledge_save_page` per s (p50 ms)",
            lambda s: f"{s['pages_1']['per_s']:.0f} ({s['pages_1']['p50_ms']:.1f})", ISSUE_FIGURES["pages_per_s_1"]),
        row("one client, `knowledge_remember` per s (p50 ms)",
            lambda s: f"{s['remember_1']['per_s']:.0f} ({s['remember_1']['p50_ms']:.1f})",
            ISSUE_FIGURES["remember_per_s_1"]),
        row("8 clients, pages per s in total", lambda s: f"{s['pages_8']['pages_per_s']:.0f}",
            ISSUE_FIGURES["pages_per_s_8"]),
        row("`knowledge_grep` beside 4 writing clients, p50 / p99 ms",
            lambda s: f"{s['grep_under_4_writers']['reads']['p50_ms']:.1f} / "
                      f"{s['grep_under_4_writers']['reads']['p99_ms']:.1f}"),
        row("(the 4 writers meanwhile, pages per s)", lambda s: f"{s['grep_under_4_writers']['pages_per_s']:.0f}"),
    ]
    parts = [("the tantivy query alone", "tantivy_ms"),
             ("`keyword.search`: the query, stored documents, snippets, catalog rows", "search_ms"),
             ("one authorization (`Engine.search` makes two)", "authorize_ms"),
             ("one identity check beside the lane (two per search)", "identity_ms"),
             ("`Engine.search` in all", "engine_search_ms")]
    lines += ["", "Where an idle `knowledge_grep` spends its time (each part timed alone in the benchmark's process "
                  "on the state the socket phases left, p50 ms; the rest of a round trip is the socket, JSON and "
                  "the server's dispatch):", "",
              "| part | " + " | ".join(f"{s['records']:,} records" for s in sizes) + " |",
              "| --- | " + " | ".join("---:" for _ in sizes) + " |"]
    lines += [f"| {label} | " + " | ".join(f"{s['search_parts'][key]:.3f}" for s in sizes) + " |"
              for label, key in parts]
    lines += ["| `knowledge_grep` round trip (above) | "
              + " | ".join(f"{s['grep_idle']['p50_ms']:.3f}" for s in sizes) + " |"]
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        ratio = large["pages_1"]["p50_ms"] / small["pages_1"]["p50_ms"]
        lines += ["", f"A write into {large['records']:,} records costs {ratio:.2f}x a write into "
                      f"{small['records']:,} (p50 of one client's `knowledge_save_page`)."]
    return "\n".join(lines) + "\n"
