"""Crash consistency: a real writer process is SIGKILLed at each publication step.

After a restart every write is either whole or absent, every acknowledged
write survived, the catalog matches the disk and git catches up.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine.access.authority import AgentCaller
from engine.vault.frontmatter import parse_document
from engine.vault.records import check_record, parse_record
from engine.state.registry import Registry
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.helpers import only_store, temp_files_left

ROOT = Path(__file__).resolve().parents[3]
WRITES = 7


def register_owner(state: StateDir, tmp_path: Path) -> tuple[str, Path]:
    state.create()
    registry = Registry.open(state.registry, state.root)
    token = registry.add_agent("main", owner=True)
    registry.close()
    token_file = tmp_path / "main.token"
    token_file.write_text(token, encoding="utf-8")
    return token, token_file


def run_writer(state: StateDir, token_file: Path, fault: str | None) -> tuple[int, list[dict]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KNOWLEDGE_FAULT", None)
    if fault:
        env["KNOWLEDGE_FAULT"] = fault
    completed = subprocess.run(
        [sys.executable, "-m", "tests.engine.crash_writer", str(state.root), str(token_file), str(WRITES)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    acknowledged = [json.loads(line) for line in completed.stdout.splitlines() if line.strip()]
    return completed.returncode, acknowledged


def check_whole_state(state: StateDir, caller: AgentCaller, acknowledged: list[dict]) -> dict:
    """Reopen the engine and check every promise; returns the publication states for the caller."""
    with Engine(state, watch=False) as engine:
        # Reading triggers recovery and a full catalog sync.
        for entry in acknowledged:
            for written in entry["receipt"]["records"]:
                record = engine.get_record(caller, written["id"], revision=written["revision"])
                assert record["revision"] == written["revision"]
        diagnostics = engine.diagnostics(caller)
        assert [f for f in diagnostics["findings"] if f.get("severity", "error") == "error"] == []
        assert diagnostics["pendingPublications"] == 0

        store = only_store(state)
        runtime = engine.runtime(engine.registry.own_store_of("main"))
        report = runtime.call(lambda: runtime.catalog.sync("private"))
        assert not report.touched, "the catalog disagreed with the vault after recovery"

        checkpoint = engine.resume(caller)
        assert checkpoint["state"] == "committed"
        check_git_matches_disk(store)
        check_every_file_is_whole(store / "vault" / "private", engine)

    with sqlite3.connect(store / "state.sqlite") as db:
        states = dict(db.execute("SELECT state, COUNT(*) FROM publications GROUP BY state").fetchall())
        manifest = json.loads((store / "vault.json").read_text(encoding="utf-8"))
        applied = db.execute("SELECT COALESCE(MAX(seq), 0) FROM publications WHERE state = 'applied'").fetchone()[0]
    assert manifest["checkpoint"] == applied
    assert "journaled" not in states
    return states


def check_every_file_is_whole(private: Path, engine: Engine) -> None:
    """No half-written record or orphaned evidence: every record parses, every descriptor has its original."""
    for path in private.rglob("*.md"):
        record, findings = parse_record(path.read_bytes(), str(path.relative_to(private)))
        assert record is not None, findings
        assert check_record(record, engine.ontology, str(path.relative_to(private))) == []
    for descriptor in (private / "sources").glob("*.source.yaml"):
        retained = descriptor.read_text(encoding="utf-8").split("retained_path: ", 1)[1].split("\n", 1)[0]
        assert (private / retained).is_file()
    assert not temp_files_left(private.parent.parent), "a temp file of an interrupted write was left behind"


def check_git_matches_disk(store: Path) -> None:
    vault = store / "vault"
    env = {**os.environ, "GIT_DIR": str(vault / ".git"), "GIT_WORK_TREE": str(vault), "GIT_CONFIG_NOSYSTEM": "1"}
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], env=env, cwd=vault,
                            capture_output=True, text=True, check=True)
    assert status.stdout == "", f"git history and the vault differ:\n{status.stdout}"


FAULTS = [
    "journaled:1", "journaled:4",
    "installed:1", "installed:2", "installed:5", "installed:9",
    "checkpointed:1", "checkpointed:3",
    "acknowledged:1", "acknowledged:5",
]


@pytest.mark.parametrize("fault", FAULTS)
def test_sigkill_at_each_publication_step_leaves_whole_writes(tmp_path, fault):
    state = StateDir(tmp_path / "state")
    token, token_file = register_owner(state, tmp_path)
    code, acknowledged = run_writer(state, token_file, fault)
    assert code == -signal.SIGKILL, f"the writer was not killed at {fault}"
    caller = AgentCaller(token, {"kind": "owner-private"})
    states = check_whole_state(state, caller, acknowledged)
    # Every step is after the journal commit, so the interrupted publication is on record:
    # finished by recovery or undone, never left half done.  Once acknowledged, it is applied.
    assert states.get("applied", 0) + states.get("rolled_back", 0) == len(acknowledged) + 1
    if fault.startswith("acknowledged"):
        assert states.get("applied", 0) == len(acknowledged) + 1


def test_recovered_writes_answer_retries_with_their_original_receipt(tmp_path):
    state = StateDir(tmp_path / "state")
    token, token_file = register_owner(state, tmp_path)
    code, acknowledged = run_writer(state, token_file, "checkpointed:3")
    assert code == -signal.SIGKILL
    caller = AgentCaller(token, {"kind": "owner-private"})
    with Engine(state, watch=False) as engine:
        # The third publication reached its checkpoint, so recovery rolls it forward;
        # the writer's retry of that request gets the receipt it never saw.
        third = json.loads(subprocess.run(
            [sys.executable, "-c", "import json, tests.engine.crash_writer as w; "
             "print(json.dumps([p for _, p in w.writes(7)][2]))"],
            cwd=ROOT, capture_output=True, text=True, check=True).stdout)
        retry = engine.remember(caller, third)
        assert retry["requestId"] == third["requestId"]
        assert all(engine.get_record(caller, r["id"])["revision"] >= r["revision"] for r in retry["records"])
    assert len(acknowledged) == 2


def test_writes_after_a_crash_continue_normally(tmp_path):
    state = StateDir(tmp_path / "state")
    token, token_file = register_owner(state, tmp_path)
    code, _ = run_writer(state, token_file, "installed:2")
    assert code == -signal.SIGKILL
    code, acknowledged = run_writer(state, token_file, None)
    assert code == 0 and len(acknowledged) == WRITES + 2
    check_whole_state(state, AgentCaller(token, {"kind": "owner-private"}), acknowledged)


def test_an_interrupted_publication_with_a_foreign_edit_is_rolled_back(tmp_path):
    """If someone edits a file the crashed publication was replacing, recovery undoes it rather than overwrite."""
    state = StateDir(tmp_path / "state")
    token, token_file = register_owner(state, tmp_path)
    # Installs: publication 1 writes files 1-3, publication 2 files 4-6 (a file it retains, its descriptor, the
    # page), publication 3 files 7-12; publication 4 (Dana's second revision) retains its evidence (13, 14) and
    # then replaces dana.md.
    code, acknowledged = run_writer(state, token_file, "installed:14")
    assert code == -signal.SIGKILL and len(acknowledged) == 3
    store = only_store(state)
    private = store / "vault" / "private"
    page = private / "pages" / "people" / "dana.md"
    frontmatter, _ = parse_document(page.read_bytes())
    assert frontmatter["revision"] == 1
    sources_before = sorted(p.name for p in (private / "sources").iterdir())
    page.write_bytes(page.read_bytes().replace(b"Dana runs operations.", b"Edited by the owner."))
    caller = AgentCaller(token, {"kind": "owner-private"})
    with Engine(state, watch=False) as engine:
        record = engine.get_record(caller, frontmatter["id"])
        assert record["body"].startswith("Edited by the owner.") and record["revision"] == 1
    with sqlite3.connect(store / "state.sqlite") as db:
        states = [row[0] for row in db.execute("SELECT state FROM publications ORDER BY seq")]
    assert states == ["applied", "applied", "applied", "rolled_back"]
    sources_after = sorted(p.name for p in (private / "sources").iterdir())
    assert len(sources_after) == len(sources_before) - 2, "the rolled-back evidence files were left behind"


def test_recovery_removes_the_temp_files_an_interrupted_atomic_write_left(tmp_path):
    """Found by the crash harness: a SIGKILL inside an atomic write leaves its hidden temp file behind."""
    state = StateDir(tmp_path / "state")
    token, token_file = register_owner(state, tmp_path)
    code, _ = run_writer(state, token_file, "installed:2")
    assert code == -signal.SIGKILL
    store = only_store(state)
    private = store / "vault" / "private"
    with sqlite3.connect(store / "state.sqlite") as db:
        paths = [row[0] for row in db.execute(
            "SELECT path FROM publication_files JOIN publications ON seq = publication_seq "
            "WHERE state = 'journaled'")]
    planted = [store / ".vault.json.k2j4x9.tmp", store / "staging" / "7ffffffe-3.tmp"]  # another process's
    for relpath in paths:
        target = private / relpath
        if target.parent.is_dir():
            planted.append(target.parent / f".{target.name}.q8w1z0.tmp")
    for path in planted:
        path.write_bytes(b"half a write")
    someone_elses = private / "sources" / ".notes.md.swp"
    someone_elses.write_bytes(b"an editor's swap file")

    with Engine(state, watch=False) as engine:
        engine.diagnostics(AgentCaller(token, {"kind": "owner-private"}))
    assert len(planted) >= 3 and not any(path.exists() for path in planted)
    assert someone_elses.exists()


def run_chain_writer(state: StateDir, token_file: Path, fault: str | None) -> tuple[int, list[dict]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KNOWLEDGE_FAULT", None)
    if fault:
        env["KNOWLEDGE_FAULT"] = fault
    completed = subprocess.run(
        [sys.executable, "-m", "tests.engine.chain_writer", str(state.root), str(token_file)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    acknowledged = [json.loads(line) for line in completed.stdout.splitlines() if line.strip()]
    return completed.returncode, acknowledged


# Publication 1 is the seed page; 2 and 3 the pages, one group; 4 and 5 the claims, journalled in that group's
# acknowledging transaction (tests/engine/chain_writer.py).
CHAIN_FAULTS = {
    # inside the pages' acknowledging transaction, the claims journalled in it: nothing of it committed, so the
    # pages are journalled (with their files and checkpoint) and rolled forward, the claims were never written
    "chained:1": ({"rolled_forward": 2}, 3),
    "chained:2": ({"rolled_forward": 2}, 3),
    # that transaction committed: the pages applied (perhaps answered), the claims journalled with no file yet
    "journaled:4": ({"rolled_forward": 2}, 5),
    # the claims' files being installed, and their own acknowledgement
    "installed:7": ({"rolled_forward": 2}, 5),
    "acknowledged:5": ({}, 5),
}


@pytest.mark.parametrize("fault", CHAIN_FAULTS)
def test_sigkill_around_a_group_journalled_in_the_last_ones_acknowledgement_leaves_whole_writes(tmp_path, fault):
    state = StateDir(tmp_path / "state")
    token, token_file = register_owner(state, tmp_path)
    code, acknowledged = run_chain_writer(state, token_file, fault)
    assert code == -signal.SIGKILL, f"the writer was not killed at {fault}"
    caller = AgentCaller(token, {"kind": "owner-private"})
    with Engine(state, watch=False) as engine:
        runtime = engine.runtime(engine.registry.own_store_of("main"))
        outcomes = [outcome["outcome"] for outcome in runtime.recovered]
    recovered, applied = CHAIN_FAULTS[fault]
    assert {outcome: outcomes.count(outcome) for outcome in set(outcomes)} == recovered
    states = check_whole_state(state, caller, acknowledged)
    assert states == {"applied": applied}
    # The pages' receipts are returned only once their acknowledgement, which the claims' journal shares, is
    # committed; the claims' only once theirs is, after each kill point here.
    answered = {entry["params"]["requestId"] for entry in acknowledged}
    assert answered - {"page-seed"} <= ({"page-dana", "page-northwind"} if applied == 5 else set())


def test_a_group_queued_while_the_last_one_is_acknowledged_is_journalled_in_its_transaction(tmp_path):
    state = StateDir(tmp_path / "state")
    token, token_file = register_owner(state, tmp_path)
    code, acknowledged = run_chain_writer(state, token_file, None)
    assert code == 0 and len(acknowledged) == 5
    states = check_whole_state(state, AgentCaller(token, {"kind": "owner-private"}), acknowledged)
    assert states == {"applied": 5}
