"""Crash consistency across machines: engines that sync one store are SIGKILLed while agents write and rounds run.

    python -m tests.reliability.sync_crash --machines 2 --kills 100 [--seed N] [--writers 2] [--daemon]

Each machine is a state directory with a real engine process (``knowledge serve --port 0``) and agents
writing over its socket (pages, page revisions, claims, attachments: harness.Writer).  Machine A makes the
store and pushes it to a bare repository on disk (with ``--daemon``, served by ``git daemon`` on
loopback); every other machine joins with ``knowledge sync clone``.  While the agents write, a syncer per
machine asks its engine for a round (``operator/syncNow``) at random moments, and the engine's automatic
sync runs too (config.json's ``sync`` block, at its shortest settings).

The harness kills one machine's engine at a time (the others go on writing and syncing), in turn: after a
random delay, at a publication step (``KNOWLEDGE_FAULT=journaled|installed|checkpointed|acknowledged:<n>``)
and, twice as often, at a step of a sync round (``sync_fetched``, ``sync_installed``, ``sync_committed``,
``sync_pushed``: engine/core/faults.py), so kills land exactly during fetch, merge and install, commit and
push.  After each restart, before the agents reconnect, every receipt acknowledged on that machine since
the previous check is read back exactly (as crash.py does).

At the end every engine is restarted without a fault and rounds run on each machine in turn until no head
moves and every head is the same; then, with the engines stopped:

- every machine's vault files that sync are byte-identical;
- every acknowledged revision, whichever machine acknowledged it, is in every machine's history (its
  revisions table, with the same sha256, and its git history) or superseded there by a higher revision
  of the record;
- ``checks.verify`` per machine (its own agents' receipts, the catalog, the index, the journal, git),
  with the records acknowledged on other machines counted as explained.

Exit status 1 when any promise was broken.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.access.authority import AgentCaller
from engine.core.faults import PUBLICATION_POINTS, SYNC_POINTS
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.sync.merge import is_synced
from engine.sync.remotes import RemoteBook
from engine.sync.service import sync_now
from engine.vault.records import parse_record

from .checks import blob_id, git, verify
from .crash import read_back
from .harness import (
    ROOT, AgentSpec, Connection, EngineGone, EngineProcess, Supervisor, Writer, machine_line, report,
    register_agents,
)

AGENT = "agent0"
REMOTE = "origin"
FAULT_WAIT_S = 20.0   # a fault not reached by then is replaced by a SIGKILL
FINAL_PASSES = 8      # rounds on every machine, at most, before the heads must have settled
# Automatic sync at its shortest (engine/state/sync_settings.py's ranges), beside the syncers' own rounds.
AUTOMATIC = {"automatic": True, "intervalSeconds": 30, "quietSeconds": 1, "batchSeconds": 10}
FAULT_COUNTS = {"journaled": 5, "installed": 12, "checkpointed": 5, "catalogued": 5, "acknowledged": 5,
                "sync_fetched": 3, "sync_installed": 3, "sync_committed": 2, "sync_pushed": 3}


@dataclass
class Machine:
    """One machine: its state directory, its engine process, its agents and its syncer."""

    name: str
    state: StateDir
    writers: list[Writer]
    supervisor: Supervisor
    log: Path
    engine: EngineProcess | None = None
    fault: str | None = None
    checked: dict[str, int] = field(default_factory=dict)
    syncer: "Syncer | None" = None

    @property
    def vault(self) -> Path:
        [vault] = sorted(self.state.stores.glob("*/vault"))
        return vault

    def status_file(self) -> Path:
        return self.vault.parent / "sync" / "status.json"

    def head(self) -> str:
        return git(self.vault, "rev-parse", "refs/heads/main").strip()

    def synced_files(self) -> dict[str, bytes]:
        files = {}
        for path in sorted(self.vault.rglob("*")):
            relpath = path.relative_to(self.vault)
            if path.is_file() and ".git" not in relpath.parts and is_synced(str(relpath)):
                files[str(relpath)] = path.read_bytes()
        return files


class Syncer(threading.Thread):
    """Asks its machine's engine for a round (``operator/syncNow``) at random moments, as the owner would."""

    def __init__(self, machine: Machine, seed: int, max_gap_s: float) -> None:
        super().__init__(name=f"syncer-{machine.name}", daemon=True)
        self.machine = machine
        self.rng = random.Random(seed)
        self.max_gap_s = max_gap_s
        self.rounds: Counter[str] = Counter()  # "ok", "failing: <code>", "interrupted"
        self._halt = threading.Event()

    def halt(self) -> None:
        self._halt.set()

    def run(self) -> None:
        wanted = 0
        while not self._halt.is_set():
            found = self.machine.supervisor.wait_up(wanted)
            if found is None:
                return
            port, wanted = found
            try:
                connection = Connection(port, None, operator_token=_operator_token(self.machine.state))
            except (EngineGone, RuntimeError):
                continue
            try:
                while not self._halt.wait(self.rng.uniform(0.0, self.max_gap_s)):
                    self.rounds.update(round_outcomes(connection.request("operator/syncNow", {})))
            except EngineGone:
                self.rounds["interrupted by a kill"] += 1
            finally:
                connection.close()


def _operator_token(state: StateDir) -> str:
    return state.operator_token.read_text(encoding="utf-8").strip()


def round_outcomes(reply: dict[str, Any]) -> list[str]:
    """Each remote's outcome of an ``operator/syncNow`` answer: ``ok`` or ``failing: <code>``."""
    if "error" in reply:
        return [f"refused: {reply['error'].get('message')}"]
    outcomes = []
    for store in reply["result"]["stores"]:
        for remote in store["remotes"]:
            error = remote.get("lastError") or {}
            outcomes.append("ok" if remote["state"] == "ok" else f"failing: {error.get('code')}")
    return outcomes


# --- the machines ---------------------------------------------------------------------------------


def _cli(state: StateDir, *args: str) -> str:
    completed = subprocess.run([sys.executable, "-m", "engine.cli", "--state-dir", str(state.root), *args],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
    if completed.returncode != 0:
        raise RuntimeError(f"knowledge {' '.join(args)} failed: {completed.stdout}{completed.stderr}")
    return completed.stdout


def make_machines(scratch: Path, url: str, count: int, writers_each: int, seed: int,
                  pause: float) -> tuple[list[Machine], str]:
    """Machine A makes the store and pushes it; the others join it with ``knowledge sync clone``.  Returns the
    machines and the id of the record A wrote first (so the remote holds a store)."""
    tokens = {}
    first = None
    for number in range(count):
        name = "ABCDEFGH"[number]
        state = StateDir(scratch / name)
        tokens[name] = register_agents(state, 1)[AGENT]
        _automatic_sync(state)
        if number == 0:
            with Engine(state, watch=False) as engine:
                first = engine.save_page(AgentCaller(tokens[name], {"kind": "owner-private"}), {
                    "requestId": "first", "type": "note", "title": "The store every machine syncs",
                    "body": "Made on machine A before any other machine joined."})["id"]
                RemoteBook(state, engine.resolver).add(REMOTE, url, agent=AGENT)
                [store] = sync_now(engine, agent=AGENT)["stores"]
                if any(remote["state"] != "ok" for remote in store["remotes"]):
                    raise RuntimeError(f"machine A's first round failed: {store['remotes']}")
        else:
            _cli(state, "sync", "clone", url, "--agent", AGENT, "--json")
    machines = []
    for number, (name, token) in enumerate(tokens.items()):
        supervisor = Supervisor()
        specs = [_spec(number * writers_each + k, k, token) for k in range(writers_each)]
        writers = [Writer(spec, supervisor, seed=seed * 1000 + int(spec.name[1:]), pause=pause) for spec in specs]
        machines.append(Machine(name, StateDir(scratch / name), writers, supervisor, scratch / f"engine-{name}.log"))
    assert first is not None
    return machines, first


def _spec(number: int, within: int, token: str) -> AgentSpec:
    """Writer ``w<number>`` (unique across machines, so its markers are): the owner-private partition, or a
    conversation of its own, in turn."""
    if within % 2 == 0:
        audience: dict[str, Any] = {"kind": "owner-private"}
    else:
        audience = {"kind": "conversation", "sessionKey": f"chat:{number}", "sessionId": str(uuid.UUID(int=number + 1))}
    return AgentSpec(f"w{number}", AGENT, token, audience)


def _automatic_sync(state: StateDir) -> None:
    config = json.loads(state.config.read_text(encoding="utf-8")) if state.config.exists() else {}
    config["sync"] = AUTOMATIC
    state.config.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def _fault_for(turn: int, rng: random.Random) -> str | None:
    """A machine's turn-th engine: killed at a random moment, at a publication step, or (twice as often) at a
    step of a sync round, each point in turn."""
    kind = turn % 4
    if kind == 0:
        return None
    if kind == 1:
        point = PUBLICATION_POINTS[(turn // 4) % len(PUBLICATION_POINTS)]
    else:
        point = SYNC_POINTS[(turn // 4 * 2 + kind - 2) % len(SYNC_POINTS)]
    return f"{point}:{rng.randint(1, FAULT_COUNTS[point])}"


def _in_a_round(machine: Machine) -> bool:
    """Whether the machine's last round was still running when its engine died (status.json says syncing)."""
    try:
        entries = json.loads(machine.status_file().read_text(encoding="utf-8"))["remotes"]
    except (OSError, ValueError, KeyError):
        return False
    return any(entry["status"].get("state") == "syncing" for entry in entries.values())


def bring_up(machine: Machine, fault: str | None, figures: Counter[str], problems: list[str]) -> int:
    """Start the machine's engine with ``fault``, read back what was acknowledged since its last check and let
    its agents and syncer in.  An engine that dies while starting or reading back (a fault reached by
    recovery) is a kill too; the next start has no fault.  Returns the kills that happened here."""
    kills = 0
    while True:
        engine = EngineProcess(machine.state, fault=fault, log=machine.log)
        port = engine.start()
        if port is None:
            figures["engines that died while starting"] += 1
        else:
            try:
                read_back(port, machine.writers, machine.checked, figures, problems)
            except EngineGone:
                engine.kill()
                figures["kills during recovery"] += 1
            else:
                machine.engine, machine.fault = engine, fault
                machine.supervisor.up(port)
                return kills
        kills += 1
        fault = None


def take_down(machine: Machine, rng: random.Random, max_up_s: float, fault_wait_s: float,
              figures: Counter[str], problems: list[str]) -> None:
    """Wait for the engine's fault (or a random moment), SIGKILL it and count where the kill landed."""
    engine = machine.engine
    assert engine is not None
    if machine.fault:
        deadline = time.monotonic() + fault_wait_s
        while engine.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        point = machine.fault.split(":")[0]
        figures[f"kills at {point}" if not engine.alive() else f"faults not reached in time ({point})"] += 1
    else:
        time.sleep(rng.uniform(0.0, max_up_s))
        figures["kills at random points"] += 1
    code = engine.kill()
    machine.supervisor.down()
    if not machine.fault and _in_a_round(machine):
        figures["random kills that landed in a round"] += 1
    if code not in (-9, 137):
        problems.append(f"machine {machine.name}: the engine exited with {code}, not SIGKILL "
                        f"(fault {machine.fault})")
    machine.engine = None


# --- the end --------------------------------------------------------------------------------------


def final_rounds(machines: list[Machine], figures: Counter[str], problems: list[str]) -> None:
    """Rounds on every machine in turn until a whole pass moves no head and every head is the same."""
    before = [machine.head() for machine in machines]
    for _ in range(FINAL_PASSES):
        for machine in machines:
            assert machine.engine is not None and machine.engine.port is not None
            connection = Connection(machine.engine.port, None, operator_token=_operator_token(machine.state))
            try:
                outcomes = round_outcomes(connection.request("operator/syncNow", {}))
            finally:
                connection.close()
            figures["final rounds"] += 1
            for outcome in outcomes:
                if outcome != "ok":
                    problems.append(f"machine {machine.name}: a final round was not ok: {outcome}")
        after = [machine.head() for machine in machines]
        if after == before and len(set(after)) == 1:
            return
        before = after
    problems.append(f"the heads did not settle after {FINAL_PASSES} passes of final rounds: "
                    f"{dict(zip([m.name for m in machines], before))}")


def check_converged(machines: list[Machine], figures: Counter[str], problems: list[str]) -> None:
    """Every machine's synced vault files byte-identical to the first machine's."""
    reference = machines[0].synced_files()
    figures["vault files compared"] = len(reference)
    for machine in machines[1:]:
        files = machine.synced_files()
        differing = sorted(path for path in set(files) | set(reference) if files.get(path) != reference.get(path))
        if differing:
            problems.append(f"machine {machine.name}'s vault differs from machine {machines[0].name}'s in "
                            f"{len(differing)} files: {differing[:5]}")


def _history(state: StateDir) -> tuple[dict[tuple[str, int], set[str]], dict[str, int]]:
    """A machine's revisions table: the sha256s held for each (record, revision), and each record's highest."""
    with Engine(state, watch=False) as engine:
        [record] = engine.registry.stores()
        runtime = engine.runtime(record)
        rows = runtime.call(lambda: runtime.store.db.all("SELECT record_id, revision, sha256 FROM revisions"))
    held: dict[tuple[str, int], set[str]] = {}
    highest: dict[str, int] = {}
    for row in rows:
        held.setdefault((row["record_id"], row["revision"]), set()).add(row["sha256"])
        highest[row["record_id"]] = max(highest.get(row["record_id"], 0), row["revision"])
    return held, highest


def check_histories(machines: list[Machine], figures: Counter[str], problems: list[str]) -> None:
    """Every acknowledged revision, from whichever machine, in every machine's revisions table (same sha256)
    and git history, or superseded there by a higher revision of the record."""
    histories = {machine.name: _history(machine.state) for machine in machines}
    reachable = {machine.name: {line.split(" ", 1)[0] for line in
                                git(machine.vault, "rev-list", "--objects", "refs/heads/main").splitlines()}
                 for machine in machines}
    for origin in machines:
        with Engine(origin.state, watch=False) as engine:
            [record] = engine.registry.stores()
            runtime = engine.runtime(record)
            contents = {}
            for writer in origin.writers:
                for ack in writer.acks:
                    for written in ack.receipt.get("records", []):
                        key = (written["id"], written["revision"])
                        row = runtime.call(lambda: runtime.store.db.one(
                            "SELECT sha256, content FROM revisions WHERE record_id = ? AND revision = ? "
                            "AND origin = 'publication'", key))
                        if row is None:
                            problems.append(f"machine {origin.name}: its own acknowledged {key} is not in its history")
                            continue
                        contents[key] = (row["sha256"], blob_id(bytes(row["content"])))
        for machine in machines:
            held, highest = histories[machine.name]
            for (record_id, revision), (sha256, blob) in contents.items():
                figures["acknowledged revisions checked across machines"] += 1
                if sha256 in held.get((record_id, revision), set()) and blob in reachable[machine.name]:
                    continue
                if highest.get(record_id, 0) > revision and blob in reachable[machine.name]:
                    figures["acknowledged revisions superseded on a machine"] += 1
                    continue
                problems.append(f"machine {machine.name} lost {record_id} r{revision}, acknowledged on machine "
                                f"{origin.name}: not in its history (highest r{highest.get(record_id)})")


def sync_figures(machines: list[Machine], figures: Counter[str], problems: list[str]) -> None:
    """Merge commits and conflicts.  Each agent writes only on its own machine and revises only its own
    records, so no record is ever revised on two machines: any conflict listed is a false one."""
    # The heads are the same by now: the history's merge commits, counted once.
    figures["merge commits"] = int(git(machines[0].vault, "rev-list", "--merges", "--count", "refs/heads/main"))
    for machine in machines:
        with Engine(machine.state, watch=False) as engine:
            [record] = engine.registry.stores()
            runtime = engine.runtime(record)
            waiting = runtime.call(lambda: runtime.store.db.all(
                "SELECT kind FROM sync_conflicts WHERE dismissed_at IS NULL"))
        figures["conflicts listed"] += len(waiting)
        for row in waiting:
            figures[f"conflicts waiting on machine {machine.name} ({row['kind']})"] += 1
        if waiting:
            problems.append(f"machine {machine.name} lists {len(waiting)} conflicts, but no record was written "
                            "on two machines")


# --- the run --------------------------------------------------------------------------------------


def run(*, machines: int = 2, kills: int = 100, seed: int = 0, writers: int = 2, workdir: Path | None = None,
        max_up_s: float = 1.5, sync_gap_s: float = 1.0, fault_wait_s: float = FAULT_WAIT_S,
        fault_plan: list[str] | None = None, daemon: bool = False, pause: float = 0.0, keep: bool = False,
        verbose: bool = False) -> tuple[dict[str, Any], list[str]]:
    rng = random.Random(seed)
    scratch = Path(tempfile.mkdtemp(prefix="kd-synccrash-", dir=workdir))
    remote = scratch / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    server = _git_daemon(scratch) if daemon else None
    url = f"git://127.0.0.1:{server[1]}/remote.git" if server else str(remote)
    figures: Counter[str] = Counter()
    problems: list[str] = []
    started = time.monotonic()
    fleet: list[Machine] = []
    try:
        fleet, first = make_machines(scratch, url, machines, writers, seed, pause)
        for number, machine in enumerate(fleet):
            bring_up(machine, None, figures, problems)
            machine.syncer = Syncer(machine, seed * 1000 + 900 + number, sync_gap_s)
            machine.syncer.start()
            for writer in machine.writers:
                writer.start()
        turns: Counter[str] = Counter()
        kill = restarts = 0
        while kill < kills:
            machine = fleet[kill % len(fleet)]
            take_down(machine, rng, max_up_s, fault_wait_s, figures, problems)
            kill += 1
            turns[machine.name] += 1
            if fault_plan is None:
                fault = _fault_for(turns[machine.name], rng)
            else:  # the restarts' faults in this order, then random kills
                fault = fault_plan[restarts] if restarts < len(fault_plan) else None
            restarts += 1
            kill += bring_up(machine, fault, figures, problems)
            if verbose:
                print(f"kill {kill}/{kills} on {machine.name}, next {fault or 'random'}: "
                      f"{sum(len(w.acks) for m in fleet for w in m.writers)} acknowledged", file=sys.stderr)
        figures["kills survived"] = kill
        _stop_agents(fleet)
        for machine in fleet:  # every engine again, none with a fault pending
            if machine.engine is not None:
                machine.engine.kill()
                machine.supervisor.down()
            bring_up(machine, None, figures, problems)
        final_rounds(fleet, figures, problems)
        for machine in fleet:
            assert machine.engine is not None
            code = machine.engine.stop()
            if code != 0:
                problems.append(f"machine {machine.name}: the engine's clean stop exited with {code}")
        _collect(fleet, figures, problems)
        check_converged(fleet, figures, problems)
        check_histories(fleet, figures, problems)
        sync_figures(fleet, figures, problems)
        acknowledged = {written["id"] for machine in fleet for writer in machine.writers for ack in writer.acks
                        for written in ack.receipt.get("records", [])} | {first}
        landed = _landed_unacknowledged(fleet[0], acknowledged)
        in_flight = sum(1 for machine in fleet for writer in machine.writers
                        if writer.in_flight is not None and writer.in_flight[0] != "knowledge_attach")
        figures["unacknowledged writes that landed, on any machine"] = len(landed)
        if len(landed) > in_flight:
            problems.append(f"{len(landed)} records nobody was told about, but only {in_flight} requests were in "
                            f"flight on all machines: {sorted(landed)[:5]}")
        for machine in fleet:  # a request in flight on one machine may land on every machine
            verified, found = verify(machine.state, machine.writers, explained=acknowledged | landed)
            for name, value in verified.items():
                figures[name] += value
            problems.extend(f"machine {machine.name}: {problem}" for problem in found)
    finally:
        for machine in fleet:
            machine.supervisor.stop()
            for writer in machine.writers:
                writer.halt()
            if machine.syncer is not None:
                machine.syncer.halt()
            if machine.engine is not None:
                machine.engine.kill()
        if server is not None:  # git daemon's own children too: its process group
            os.killpg(server[0].pid, signal.SIGKILL)
            server[0].wait()
    figures["seconds"] = round(time.monotonic() - started)
    if problems or keep:
        figures["kept for inspection"] = str(scratch)  # type: ignore[assignment]
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return dict(figures), problems


def _landed_unacknowledged(machine: Machine, acknowledged: set[str]) -> set[str]:
    """The records in the machine's vault that no receipt named (the vaults are the same by now)."""
    found = set()
    for path in machine.vault.rglob("*.md"):
        relpath = path.relative_to(machine.vault)
        if ".git" in relpath.parts or any(part.startswith(".") for part in relpath.parts) \
                or not is_synced(str(relpath)):
            continue
        record, _ = parse_record(path.read_bytes(), str(relpath))
        if record is not None and record.id not in acknowledged:
            found.add(record.id)
    return found


def _stop_agents(fleet: list[Machine]) -> None:
    for machine in fleet:
        for writer in machine.writers:
            writer.halt()
        assert machine.syncer is not None
        machine.syncer.halt()
    for machine in fleet:
        machine.supervisor.stop()
    for machine in fleet:
        for writer in machine.writers:
            writer.join(timeout=60)
        assert machine.syncer is not None
        machine.syncer.join(timeout=60)


def _collect(fleet: list[Machine], figures: Counter[str], problems: list[str]) -> None:
    for machine in fleet:
        assert machine.syncer is not None
        for outcome, count in machine.syncer.rounds.items():
            figures[f"syncer rounds {outcome}"] += count
        writers = machine.writers
        figures["requests retried after a kill"] += sum(w.retries for w in writers)
        figures["write errors"] += sum(len(w.errors) for w in writers)
        for writer in writers:
            for error in writer.errors[:3]:
                problems.append(f"machine {machine.name}: {writer.spec.name}: a write failed: {error}")
        for outcome in machine.syncer.rounds:
            if outcome.startswith(("failing: internal", "refused")):
                problems.append(f"machine {machine.name}: a round ended {outcome}")
        logged = machine.log.read_text(encoding="utf-8", errors="replace") if machine.log.exists() else ""
        figures["tracebacks in the engine logs"] += logged.count("Traceback")
        if "Traceback" in logged:
            problems.append(f"machine {machine.name}'s engine logged tracebacks; see {machine.log}")


def _git_daemon(scratch: Path) -> tuple[subprocess.Popen, int]:
    """``git daemon`` on loopback serving the bare repository, push allowed; (process, port)."""
    from tests.engine.sync.gitservers import free_port, wait_for_port
    port = free_port()
    process = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
                                f"--base-path={scratch}", "--listen=127.0.0.1", f"--port={port}", str(scratch)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for_port(port, lambda: process.poll() is None)
    return process, port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=2, choices=(2, 3))
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--writers", type=int, default=2, help="writing agents on each machine")
    parser.add_argument("--max-up", type=float, default=1.5, help="longest run before a random kill (s)")
    parser.add_argument("--sync-gap", type=float, default=1.0, help="longest wait between a syncer's rounds (s)")
    parser.add_argument("--daemon", action="store_true", help="sync through git daemon on loopback, not a path")
    parser.add_argument("--keep", action="store_true", help="keep the machines' state directories")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    print(f"sync crash: {args.machines} machines, {args.writers} writers each, {args.kills} kills, seed {args.seed}, "
          f"{'git daemon' if args.daemon else 'bare repository on disk'}; {machine_line()}")
    figures, problems = run(machines=args.machines, kills=args.kills, seed=args.seed, writers=args.writers,
                            max_up_s=args.max_up, sync_gap_s=args.sync_gap, daemon=args.daemon,
                            keep=args.keep, verbose=args.verbose)
    return report(figures, problems)


if __name__ == "__main__":
    sys.exit(main())
