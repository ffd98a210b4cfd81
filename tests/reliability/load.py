"""Load: many agents searching and writing at once, while a prober checks the engine still answers.

    python -m tests.reliability.load --agents 32 --seconds 60 [--seed N] [--verify]

A real engine process (``knowledge serve --port 0``) serves ``--agents`` agent threads of the harness,
each with its own loopback connection, over four credentials (so four stores, each with a private
partition shared by several agents and one conversation partition per conversation agent).  Each
agent loops until the time is up: 60 % searches (``knowledge_grep``, and ``search_knowledge`` in
lexical mode) for words its own and other agents' writes hold, 40 % writes (pages, page revisions,
claims, some correcting earlier ones, and attachments, as in the crash harness).  A separate prober
connection sends ``ping`` every 100 ms and times each answer; a sampler reads the engine's resident
memory (``VmRSS`` in ``/proc/<pid>/status``) once a second.

It reports requests served, errors and the error rate, p50/p99 latency per kind of request, the
ping latencies, and the engine's memory at the start (every agent connected and wrote once), its peak and at
the end.  ``--verify`` then stops the engine and checks every acknowledged receipt against the vault,
catalog, index and git (``checks.verify``).  Exit status 1 when a ping took longer than
``--ping-limit-ms`` (100 by default), any request failed, or the engine logged a traceback.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import queue
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from engine.state.statedir import StateDir

from .checks import verify
from .harness import (
    Connection, EngineGone, EngineProcess, Supervisor, Writer, agent_specs, machine_line, percentile,
    print_table, register_agents,
)

CREDENTIALS = 4
SEARCH_SHARE = 0.6
PING_EVERY_S = 0.1
WORDS = ("harbour", "ferry", "schedule", "lighthouse", "budget", "review", "claim", "holds", "excerpt",
         "revision", "page", "attachment")
KINDS = {"knowledge_grep": "search (knowledge_grep)", "search_knowledge": "search (search_knowledge)",
         "knowledge_save_page": "write (save_page)", "knowledge_remember": "write (remember)",
         "knowledge_attach": "write (attach)"}


class LoadAgent(threading.Thread):
    """One agent: its own connection, searches and writes in a random mix until ``deadline``."""

    def __init__(self, writer: Writer, port: int, deadline: float, *, seed: int, ready: threading.Barrier) -> None:
        super().__init__(name=f"load-{writer.spec.name}", daemon=True)
        self.writer = writer
        self.port = port
        self.deadline = deadline
        self.rng = random.Random(seed)
        self.ready = ready
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []
        self.seen_markers: list[str] = []

    def run(self) -> None:
        spec = self.writer.spec
        try:
            connection = Connection(self.port, spec.token, spec.audience, instance=spec.name)
        except (EngineGone, RuntimeError) as exc:
            self.errors.append(f"connect: {exc}")
            self.ready.abort()
            return
        try:
            self._write(connection)  # a warm-up write: the stores exist before the clock starts
            self.latencies.clear()
            self.ready.wait()
            while time.monotonic() < self.deadline:
                if self.rng.random() < SEARCH_SHARE:
                    self._search(connection)
                else:
                    self._write(connection)
        except threading.BrokenBarrierError:
            pass
        except EngineGone as exc:
            self.errors.append(f"the engine went away: {exc}")
        finally:
            connection.close()

    def _search(self, connection: Connection) -> None:
        words = self.rng.sample(WORDS, 2)
        if self.seen_markers and self.rng.random() < 0.5:
            words = [self.rng.choice(self.seen_markers)]
        query = " ".join(words)
        if self.rng.random() < 2 / 3:
            tool, arguments = "knowledge_grep", {"query": query, "limit": 10}
        else:
            tool, arguments = "search_knowledge", {"query": query, "mode": "lexical", "max_results": 10}
        started = time.perf_counter()
        ok, body = connection.tool(tool, arguments)
        self.latencies[tool].append(time.perf_counter() - started)
        if not ok:
            self.errors.append(f"{tool}: {body.get('reason')}: {body.get('message')}")

    def _write(self, connection: Connection) -> None:
        writer = self.writer
        started = time.perf_counter()
        ok, body = writer.write_once(connection)
        latency = time.perf_counter() - started
        tool = writer.acks[-1].operation if ok else writer.errors[-1]["tool"]
        self.latencies[tool].append(latency)
        if ok:
            self.seen_markers.extend(writer.acks[-1].markers.values())
            del self.seen_markers[:-20]
        else:
            self.errors.append(f"{tool}: {body.get('reason')}: {body.get('message')}")


def probe(port: int, token: str, stop: Any, results: Any, count: Any) -> None:
    """The prober, in a process of its own (so the agents' threads never delay its clock): ``ping``
    every 100 ms on its own connection until ``stop`` is set, counting the answers in ``count``; puts
    (seconds into the run, latency) pairs and any error on ``results``."""
    pings: list[tuple[float, float]] = []
    errors: list[str] = []
    try:
        connection = Connection(port, token, {"kind": "owner-private"}, instance="prober")
    except (EngineGone, RuntimeError) as exc:
        results.put(([], [f"the prober could not connect: {exc}"]))
        return
    started = time.monotonic()
    try:
        while not stop.is_set():
            sent = time.perf_counter()
            reply = connection.request("ping")
            latency = time.perf_counter() - sent
            pings.append((time.monotonic() - started, latency))
            count.value += 1
            if reply.get("result") != {}:
                errors.append(f"ping answered {reply}")
            stop.wait(max(0.0, PING_EVERY_S - latency))
    except EngineGone as exc:
        errors.append(f"the engine went away: {exc}")
    finally:
        connection.close()
    results.put((pings, errors))


class Prober:
    """Runs ``probe`` in a child process and samples the engine's memory once a second meanwhile."""

    def __init__(self, engine: EngineProcess, token: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.engine = engine
        self._stop = context.Event()
        self._results = context.Queue()
        self._count = context.Value("i", 0)
        assert engine.port is not None
        self._process = context.Process(target=probe, args=(engine.port, token, self._stop, self._results,
                                                            self._count), name="prober", daemon=True)
        self._sampler = threading.Thread(target=self._sample, name="rss-sampler", daemon=True)
        self.pings: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.rss: list[int] = []

    def start(self) -> None:
        self._process.start()
        self._sampler.start()

    @property
    def answered(self) -> int:
        """The pings answered so far."""
        return self._count.value

    def alive(self) -> bool:
        return self._process.is_alive()

    def _sample(self) -> None:
        while not self._stop.wait(1.0 if self.rss else 0.0):
            self.rss.append(self.engine.rss_kib())

    def finish(self) -> None:
        if self._stop.is_set() or not self._process.is_alive() and self._process.exitcode is None:
            self._stop.set()
            return  # already finished, or never started
        self._stop.set()
        try:
            self.pings, self.errors = self._results.get(timeout=60)
        except queue.Empty:
            self.errors = ["the prober did not report"]
        self._process.join(timeout=10)
        self._sampler.join(timeout=10)


def _write_config(state: StateDir) -> None:
    """search_knowledge is served only with the Knowledge Base runtime on (lexical mode needs no model)."""
    state.config.write_text(json.dumps({"schemaVersion": 1, "knowledgeRuntimeEnabled": True}) + "\n",
                            encoding="utf-8")


def run(*, agents: int = 32, seconds: float = 60.0, seed: int = 0, ping_limit_ms: float | None = 100.0,
        min_pings: int = 0, check: bool = False) -> tuple[dict[str, Any], list[str]]:
    """Load the engine for ``seconds``, and on until the prober has had ``min_pings`` answers (so a slow
    machine runs longer rather than pinging less).  A ping slower than ``ping_limit_ms`` is a problem;
    None: the latencies are reported, not judged."""
    scratch = Path(tempfile.mkdtemp(prefix="kd-load-"))
    state = StateDir(scratch / "state")
    tokens = register_agents(state, CREDENTIALS)
    _write_config(state)
    writers = [Writer(spec, Supervisor(), seed=seed * 1000 + n) for n, spec in enumerate(agent_specs(tokens, agents))]
    engine = EngineProcess(state, log=scratch / "engine.log")
    problems: list[str] = []
    port = engine.start()
    assert port is not None, "the engine did not start"
    prober = Prober(engine, tokens[sorted(tokens)[0]])
    ready = threading.Barrier(agents + 1)
    load = [LoadAgent(writer, port, float("inf"), seed=seed * 7919 + n, ready=ready)
            for n, writer in enumerate(writers)]
    try:
        for agent in load:
            agent.start()
        try:
            ready.wait(timeout=120)  # every agent connected and wrote once
        except threading.BrokenBarrierError:
            problems.append("an agent could not connect or warm up")
        begun = time.monotonic()
        start_rss = engine.rss_kib()
        prober.start()
        _until(lambda: time.monotonic() >= begun + seconds and prober.answered >= min_pings,
               give_up=lambda: not prober.alive() or time.monotonic() > begun + seconds + 300)
        if prober.answered < min_pings:
            problems.append(f"the prober had {prober.answered} answers of the {min_pings} the run waits for")
        for agent in load:
            agent.deadline = 0.0  # every agent stops after the request it is making
        for agent in load:
            agent.join(timeout=120)
        elapsed = time.monotonic() - begun
        end_rss = engine.rss_kib()
        if any(agent.is_alive() for agent in load):
            problems.append("an agent did not finish within two minutes of the end")
    finally:
        prober.finish()
        for agent in load:
            agent.deadline = 0.0
        stopped = engine.stop()
    if stopped != 0:
        problems.append(f"the engine did not stop cleanly (exit status {stopped})")
    figures = _figures(load, prober, agents=agents, elapsed=elapsed, rss=(start_rss, end_rss),
                       ping_limit_ms=ping_limit_ms)
    figures["writes acknowledged"] = sum(len(writer.acks) for writer in writers)
    errors: Counter[str] = Counter(error for agent in load for error in agent.errors)
    problems.extend(f"{count} x {message}" for message, count in errors.most_common(10))
    problems.extend(prober.errors)
    slow = [(round(at, 1), _ms(latency)) for at, latency in prober.pings
            if ping_limit_ms is not None and latency * 1000 > ping_limit_ms]
    if slow:
        problems.append(f"{len(slow)} pings took longer than {ping_limit_ms:.0f} ms (seconds into the run, ms): "
                        f"{slow[:10]}")
    if not prober.pings:
        problems.append("the prober got no answer at all")
    if check:
        verified, found = verify(state, writers)
        figures.update({f"verify: {name}": value for name, value in verified.items()})
        problems.extend(found)
    logged = (scratch / "engine.log").read_text(encoding="utf-8", errors="replace")
    if "Traceback" in logged:
        problems.append(f"the engine logged a traceback; see {scratch / 'engine.log'}")
    if problems:
        figures["kept for inspection"] = str(scratch)
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return figures, problems


def _figures(load: list[LoadAgent], prober: Prober, *, agents: int, elapsed: float, rss: tuple[int, int],
             ping_limit_ms: float | None) -> dict[str, Any]:
    latencies: dict[str, list[float]] = defaultdict(list)
    for agent in load:
        for tool, values in agent.latencies.items():
            latencies[tool].extend(values)
    served = sum(len(values) for values in latencies.values())
    errors = sum(len(agent.errors) for agent in load)
    figures: dict[str, Any] = {
        "agents": agents, "seconds": round(elapsed, 1), "requests served": served,
        "requests per second": round(served / elapsed, 1) if elapsed else 0.0,
        "errors": errors, "error rate": f"{errors / served:.4%}" if served else "n/a",
    }
    for tool in sorted(latencies, key=lambda name: KINDS.get(name, name)):
        values = latencies[tool]
        figures[f"{KINDS.get(tool, tool)}: count, p50, p99, max ms"] = (
            len(values), _ms(percentile(values, 0.5)), _ms(percentile(values, 0.99)), _ms(max(values)))
    pings = [latency for _, latency in prober.pings]
    figures["pings"] = len(pings)
    figures["ping p50, p99, max ms"] = (_ms(percentile(pings, 0.5)), _ms(percentile(pings, 0.99)),
                                        _ms(max(pings, default=0.0)))
    if ping_limit_ms is not None:
        figures[f"pings over {ping_limit_ms:.0f} ms"] = sum(1 for latency in pings if latency * 1000 > ping_limit_ms)
    start_rss, end_rss = rss
    figures["engine RSS start, peak, end MiB"] = (_mib(start_rss), _mib(max(prober.rss + [start_rss, end_rss])),
                                                  _mib(end_rss))
    figures["engine RSS growth MiB"] = _mib(end_rss - start_rss)
    if prober.rss:  # sampled once a second: a leak keeps climbing, a warm-up levels off
        samples = prober.rss
        figures["engine RSS at 0/25/50/75/100 % of the run MiB"] = tuple(
            _mib(samples[min(len(samples) - 1, int(fraction * len(samples)))]) for fraction in (0, .25, .5, .75, 1))
    return figures


def _until(done: Any, give_up: Any) -> None:
    """Wait until ``done()`` (or ``give_up()``), looking ten times a second: the run's own pace, not a
    verdict."""
    while not done() and not give_up():
        time.sleep(0.1)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _mib(kib: int) -> float:
    return round(kib / 1024, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ping-limit-ms", type=float, default=100.0)
    parser.add_argument("--min-pings", type=int, default=10,
                        help="run on past --seconds until the prober has had this many answers (default 10)")
    parser.add_argument("--verify", action="store_true", help="check every acknowledged write afterwards")
    args = parser.parse_args(argv)
    print(f"load: {args.agents} agents, {args.seconds:.0f} s, seed {args.seed}; {machine_line()}")
    figures, problems = run(agents=args.agents, seconds=args.seconds, seed=args.seed,
                            ping_limit_ms=args.ping_limit_ms, min_pings=args.min_pings, check=args.verify)
    print_table(list(figures.items()))
    for problem in problems:
        print("PROBLEM:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
