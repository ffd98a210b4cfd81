"""Crash consistency at scale: agents write over the socket while the engine is SIGKILLed again and again.

    python -m tests.reliability.crash --agents 4 --kills 30 [--seed N] [--keep DIR]

A real engine process (``knowledge serve --port 0``) serves several agents (two credentials, so two
stores, each with a private and a conversation partition), each writing pages, page revisions,
claims (some correcting earlier ones) and attachments.  The harness kills the engine with SIGKILL:
half the time after a random delay, half the time at a chosen publication step through
``KNOWLEDGE_FAULT=<step>:<n>`` (journaled, installed, checkpointed, catalogued, chained, acknowledged, in turn;
``chained``: inside a group's acknowledging transaction once the next group is journalled in it).  After
each restart, before the agents reconnect, every receipt acknowledged since the previous check is
read back exactly over the socket; the agents then retry their unanswered requests with the same
requestId.  At the end ``checks.verify`` checks every acknowledged receipt against the vault, the
catalog, the search index and git.  Exit status 1 when any promise was broken.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from engine.state.statedir import StateDir

from .checks import verify
from .harness import (
    Connection, EngineGone, EngineProcess, Supervisor, Writer, agent_specs, machine_line, report,
    register_agents,
)

POINTS = ("journaled", "installed", "checkpointed", "catalogued", "chained", "acknowledged")
FAULT_WAIT_S = 20.0  # a fault the writers do not reach by then is replaced by a SIGKILL


def _fault_for(kill: int, rng: random.Random) -> str:
    point = POINTS[(kill // 2) % len(POINTS)]
    return f"{point}:{rng.randint(1, 12 if point == 'installed' else 5)}"


def read_back(port: int, writers: list[Writer], checked: dict[str, int], figures: Counter[str],
               problems: list[str]) -> None:
    """Read every receipt acknowledged since the last check, exactly, through the restarted engine."""
    connections: dict[str, Connection] = {}
    try:
        for writer in writers:
            acks = writer.acks[checked.get(writer.spec.name, 0):]
            for ack in acks:
                for written in ack.receipt.get("records", []):
                    connection = connections.get(writer.spec.name)
                    if connection is None:
                        connection = connections[writer.spec.name] = Connection(
                            port, writer.spec.token, writer.spec.audience)
                    ok, body = connection.tool("knowledge_record", {"id": written["id"],
                                                                    "revision": written["revision"]})
                    figures["receipts read back after a restart"] += 1
                    if not ok or body.get("revision") != written["revision"]:
                        problems.append(f"after a restart {writer.spec.name}'s acknowledged {written['id']} "
                                        f"r{written['revision']} reads as {body}")
            checked[writer.spec.name] = checked.get(writer.spec.name, 0) + len(acks)
    finally:
        for connection in connections.values():
            connection.close()


def run(*, agents: int = 4, kills: int = 30, seed: int = 0, workdir: Path | None = None,
        max_up_s: float = 1.5, verbose: bool = False) -> tuple[dict[str, Any], list[str]]:
    rng = random.Random(seed)
    scratch = Path(tempfile.mkdtemp(prefix="kd-crash-", dir=workdir))
    state = StateDir(scratch / "state")
    tokens = register_agents(state, max(1, min(agents, 2)))
    supervisor = Supervisor()
    writers = [Writer(spec, supervisor, seed=seed * 1000 + n) for n, spec in enumerate(agent_specs(tokens, agents))]
    for writer in writers:
        writer.start()
    figures: Counter[str] = Counter()
    problems: list[str] = []
    checked: dict[str, int] = {}
    log = scratch / "engine.log"
    started = time.monotonic()
    try:
        kill = 0
        while kill < kills:
            fault = _fault_for(kill, rng) if kill % 2 else None
            engine = EngineProcess(state, fault=fault, log=log)
            port = engine.start()
            if port is None:
                figures["engines that died while starting"] += 1
                kill += 1
                continue
            try:
                read_back(port, writers, checked, figures, problems)
            except EngineGone:  # a fault reached while recovery rolled a publication forward
                engine.kill()
                figures["kills during recovery"] += 1
                kill += 1
                continue
            supervisor.up(port)
            if fault:
                deadline = time.monotonic() + FAULT_WAIT_S
                while engine.alive() and time.monotonic() < deadline:
                    time.sleep(0.01)
                figures["kills at a publication step" if not engine.alive() else "faults not reached in time"] += 1
                if not engine.alive():
                    figures[f"kills at {fault.partition(':')[0]}"] += 1
            else:
                time.sleep(rng.uniform(0.0, max_up_s))
                figures["kills at random points"] += 1
            code = engine.kill()
            supervisor.down()
            if code not in (-9, 137):
                problems.append(f"kill {kill}: the engine exited with {code}, not SIGKILL (fault {fault})")
            kill += 1
            if verbose:
                print(f"kill {kill}/{kills} ({fault or 'random'}): "
                      f"{sum(len(w.acks) for w in writers)} acknowledged", file=sys.stderr)
        supervisor.stop()
        for writer in writers:
            writer.halt()
        for writer in writers:
            writer.join(timeout=60)
        figures["kills survived"] = kill
        figures["requests retried after a kill"] = sum(w.retries for w in writers)
        figures["write errors"] = sum(len(w.errors) for w in writers)
        for writer in writers:
            for error in writer.errors[:3]:
                problems.append(f"{writer.spec.name}: a write failed: {error}")
        verified, found = verify(state, writers)
        figures.update(verified)
        problems.extend(found)
        logged = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        figures["tracebacks in the engine log"] = logged.count("Traceback")
        if logged.count("Traceback"):
            problems.append("the engine logged tracebacks; see " + str(log))
    finally:
        supervisor.stop()
        for writer in writers:
            writer.halt()
    figures["seconds"] = round(time.monotonic() - started)
    if problems:
        figures["kept for inspection"] = str(scratch)  # type: ignore[assignment]
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return dict(figures), problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-up", type=float, default=1.5, help="longest run between random kills (s)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    print(f"crash: {args.agents} agents, {args.kills} kills, seed {args.seed}; {machine_line()}")
    figures, problems = run(agents=args.agents, kills=args.kills, seed=args.seed, max_up_s=args.max_up,
                            verbose=args.verbose)
    return report(figures, problems)


if __name__ == "__main__":
    sys.exit(main())
