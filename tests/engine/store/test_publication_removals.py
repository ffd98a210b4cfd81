"""Publications that remove files (a sync installs what another machine removed): journalled with the
bytes they remove, checked against them, rolled back by restoring them, recovered forward or back whole,
forgotten by the catalog and committed to git as removals."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine.core.errors import Conflict
from engine.core.db import Database
from engine.core.faults import Faults
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.store.outbox import GitOutbox
from engine.store.publication import FileWrite, Plan, removal
from engine.store.store import STATE_MIGRATIONS
from engine.access.authority import AgentCaller
from tests.engine.store.test_git import git
from tests.engine.store.test_recovery import check_git_matches_disk
from tests.helpers import only_store, page, private_dir, temp_files_left

ROOT = Path(__file__).resolve().parents[3]


def runtime_of(engine: Engine):
    record = engine.registry.own_store_of("main")
    assert record is not None
    return engine.runtime(record)


def two_pages(engine: Engine, owner: AgentCaller) -> tuple[dict, dict]:
    gone = engine.save_page(owner, page("p-gone", "Gone Page", body="Will be removed."))["records"][0]
    kept = engine.save_page(owner, page("p-kept", "Kept Page", body="Will be revised."))["records"][0]
    return ({**gone, "path": engine.get_record(owner, gone["id"])["path"]},
            {**kept, "path": engine.get_record(owner, kept["id"])["path"]})


def catalogued(engine: Engine) -> set[str]:
    """The record ids the private partition's catalog holds, once it is brought up to date."""
    runtime = runtime_of(engine)
    return runtime.call(lambda: (runtime.prepare("private"), {row[0] for row in runtime.store.db.tuples(
        "SELECT record_id FROM catalog WHERE partition = 'private' AND record_id IS NOT NULL")})[1])


def hits(engine: Engine, owner: AgentCaller, query: str) -> set[str]:
    return {hit["id"] for hit in engine.search(owner, {"query": query})["hits"]}


def plan_of(state: StateDir, gone: dict, kept: dict) -> tuple[Plan, dict]:
    private = private_dir(state)
    gone_bytes = (private / gone["path"]).read_bytes()
    kept_bytes = (private / kept["path"]).read_bytes()
    added = kept_bytes.replace(kept["id"].encode(), b"pg_01JADDEDADDEDADDEDADDEDAD").replace(
        b"Kept Page", b"Added Page")
    revised = kept_bytes.replace(b"Will be revised.", b"Revised on another machine.")
    spec = {"writes": [{"path": kept["path"], "id": kept["id"], "data": revised.decode(), "base": kept_bytes.decode()},
                       {"path": "pages/added-page.md", "id": "pg_01JADDEDADDEDADDEDADDEDAD", "data": added.decode(),
                        "base": None}],
            "removals": [{"path": gone["path"], "id": gone["id"], "base": gone_bytes.decode()}]}
    writes = [FileWrite(w["path"], "record", w["data"].encode(), w["id"], None,
                        None if w["base"] is None else w["base"].encode()) for w in spec["writes"]]
    writes.append(removal(gone["path"], "record", gone_bytes, gone["id"]))
    return Plan("private", "sync", None, "sync-test", None, writes), spec


def test_a_removal_is_installed_forgotten_by_the_catalog_and_committed_as_a_removal(engine, owner, state_dir):
    gone, kept = two_pages(engine, owner)
    runtime = runtime_of(engine)
    assert runtime.checkpoint()["state"] == "committed"  # the history holds the two pages first
    plan, _ = plan_of(state_dir, gone, kept)
    receipt = runtime.call(lambda: (runtime.prepare("private"), runtime.publish(plan))[1])
    assert receipt["publicationId"]
    private = private_dir(state_dir)
    assert not (private / gone["path"]).exists()
    assert b"Revised on another machine." in (private / kept["path"]).read_bytes()
    assert catalogued(engine) == {kept["id"], "pg_01JADDEDADDEDADDEDADDEDAD"}
    assert hits(engine, owner, "removed") == set()
    assert hits(engine, owner, "added") == {"pg_01JADDEDADDEDADDEDADDEDAD"}
    assert runtime.checkpoint()["state"] == "committed"  # (the git thread may have committed it already)
    commit = runtime.call(lambda: runtime.store.db.one(
        "SELECT outbox.commit_id FROM outbox JOIN publications ON publications.seq = outbox.publication_seq "
        "WHERE publications.id = ?", (receipt["publicationId"],)))[0]
    vault = only_store(state_dir) / "vault"
    changes = git(vault, "show", "--name-status", "--no-renames", "--format=", commit).splitlines()
    assert f"D\tprivate/{gone['path']}" in changes
    assert f"M\tprivate/{kept['path']}" in changes and "A\tprivate/pages/added-page.md" in changes
    check_git_matches_disk(only_store(state_dir))


def test_a_removal_of_a_file_edited_since_planning_is_refused_and_rolled_back_whole(engine, owner, state_dir):
    gone, kept = two_pages(engine, owner)
    runtime = runtime_of(engine)
    plan, _ = plan_of(state_dir, gone, kept)
    private = private_dir(state_dir)
    edited = (private / gone["path"]).read_bytes() + b"\nAn edit made meanwhile.\n"
    (private / gone["path"]).write_bytes(edited)
    before_kept = (private / kept["path"]).read_bytes()
    with pytest.raises(Conflict, match="changed on disk"):
        runtime.call(lambda: runtime.publish(plan))
    assert (private / gone["path"]).read_bytes() == edited
    assert (private / kept["path"]).read_bytes() == before_kept
    assert not (private / "pages" / "added-page.md").exists()


def test_a_failed_publication_puts_a_removed_file_back(state_dir):
    with Engine(state_dir, watch=False, faults=Faults("acknowledged:1:enospc")) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.faults.point = None  # the pages below are published without a fault
        gone, kept = two_pages(engine, owner)
        runtime = runtime_of(engine)
        plan, _ = plan_of(state_dir, gone, kept)
        private = private_dir(state_dir)
        gone_bytes = (private / gone["path"]).read_bytes()
        runtime.publisher.faults = Faults("acknowledged:1:enospc")
        with pytest.raises(Exception, match="full"):
            runtime.call(lambda: runtime.publish(plan))
        assert (private / gone["path"]).read_bytes() == gone_bytes
        assert not (private / "pages" / "added-page.md").exists()
        assert gone["id"] in catalogued(engine)


FAULTS = ["journaled:1", "installed:1", "installed:2", "installed:3", "checkpointed:1", "acknowledged:1"]


@pytest.mark.parametrize("fault", FAULTS)
def test_sigkill_during_a_removal_is_rolled_forward_whole(tmp_path, fault):
    """Every file holds its old or its new bytes after the kill: recovery finishes the publication."""
    state, gone, kept, spec, _ = killed_writer(tmp_path, fault)
    private = private_dir(state)
    with Engine(state, watch=False) as engine:
        assert catalogued(engine) == {kept["id"], "pg_01JADDEDADDEDADDEDADDEDAD"}  # recovery runs first
        assert not (private / gone["path"]).exists()
        assert (private / kept["path"]).read_bytes().decode() == spec["writes"][0]["data"]
        assert (private / "pages" / "added-page.md").read_bytes().decode() == spec["writes"][1]["data"]
        committed_after_restart(engine, state)
    assert sync_publications(state) == ["applied"]


def test_sigkill_during_a_removal_then_an_edit_is_rolled_back_whole(tmp_path):
    """Killed after two of three files, then the owner edits one of them: recovery undoes the rest and
    the file the removal had not reached yet is still there."""
    state, gone, kept, spec, before = killed_writer(tmp_path, "installed:2")
    private = private_dir(state)
    edited = b"An owner's edit of a half-installed file.\n"
    (private / kept["path"]).write_bytes(edited)
    with Engine(state, watch=False) as engine:
        catalogued(engine)
        assert (private / gone["path"]).read_bytes() == before[gone["path"]]
        assert (private / kept["path"]).read_bytes() == edited  # someone else's bytes: left alone
        assert not (private / "pages" / "added-page.md").exists()
        committed_after_restart(engine, state, kept["path"])
    assert sync_publications(state) == ["rolled_back"]


def test_sigkill_after_a_removal_then_its_restoration_by_hand_is_rolled_back(tmp_path):
    """Killed once the removal was done; the owner puts the file back with other bytes: that is someone
    else's change, so the publication is undone around it."""
    state, gone, kept, spec, before = killed_writer(tmp_path, "installed:3")
    private = private_dir(state)
    (private / gone["path"]).write_bytes(before[gone["path"]] + b"\nRestored by hand.\n")
    with Engine(state, watch=False) as engine:
        catalogued(engine)
        assert (private / kept["path"]).read_bytes() == before[kept["path"]]
        assert not (private / "pages" / "added-page.md").exists()
        assert (private / gone["path"]).read_bytes().endswith(b"Restored by hand.\n")
        committed_after_restart(engine, state, gone["path"])
    assert sync_publications(state) == ["rolled_back"]


def test_a_removal_rolled_back_after_it_was_done_restores_the_file(tmp_path):
    """Killed once the removal was done; the revised file is then edited: the roll back restores the
    removed file's bytes."""
    state, gone, kept, spec, before = killed_writer(tmp_path, "installed:3")
    private = private_dir(state)
    (private / kept["path"]).write_bytes(b"Edited after the kill.\n")
    with Engine(state, watch=False) as engine:
        catalogued(engine)
        assert (private / gone["path"]).read_bytes() == before[gone["path"]]
        assert not (private / "pages" / "added-page.md").exists()
        committed_after_restart(engine, state, kept["path"])
    assert sync_publications(state) == ["rolled_back"]


def killed_writer(tmp_path: Path, fault: str) -> tuple[StateDir, dict, dict, dict, dict[str, bytes]]:
    """A store with two pages committed, and a writer process killed at ``fault`` while it publishes a
    removal, a revision and an addition."""
    state = StateDir(tmp_path / "state")
    with Engine(state, watch=False) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        gone, kept = two_pages(engine, owner)
        assert engine.resume(owner)["state"] == "committed"
        _, spec = plan_of(state, gone, kept)
    spec_file = tmp_path / "plan.json"
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    private = private_dir(state)
    before = {path: (private / path).read_bytes() for path in (gone["path"], kept["path"])}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KNOWLEDGE_FAULT": fault}
    completed = subprocess.run([sys.executable, "-m", "tests.engine.store.removal_writer", str(state.root),
                                str(spec_file)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert completed.returncode == -signal.SIGKILL, completed.stderr[-2000:]
    return state, gone, kept, spec, before


def committed_after_restart(engine: Engine, state: StateDir, edited: str | None = None) -> None:
    """The next checkpoint commits what recovery left, and the history matches the vault but for the file the
    owner edited (an outside edit, which the next sync round commits)."""
    runtime = runtime_of(engine)
    assert runtime.checkpoint()["state"] == "committed"
    if edited is None:
        check_git_matches_disk(only_store(state))
    else:
        vault = only_store(state) / "vault"
        assert git(vault, "status", "--porcelain", "--untracked-files=all") == f"M private/{edited}"
    assert not temp_files_left(only_store(state))


def sync_publications(state: StateDir) -> list[str]:
    with sqlite3.connect(only_store(state) / "state.sqlite") as db:
        return [row[0] for row in db.execute("SELECT state FROM publications WHERE operation = 'sync'")]


def test_only_the_private_partition_writes_the_ontology(engine, owner, state_dir):
    from engine.core.errors import InvalidParams

    engine.save_page(owner, page("p-first", "First Page"))
    runtime = runtime_of(engine)
    chat = "conversation:0b1e3c1e-8f4a-4c57-9d1a-2f3c4d5e6f70"
    for partition, path in ((chat, "ontology.yaml"), ("private", "pages/ontology.yaml")):
        plan = Plan(partition, "sync", None, "h", None, [FileWrite(path, "ontology", b"format: x\n")])
        with pytest.raises(InvalidParams, match="only the private partition"):
            runtime.call(lambda: runtime.publisher.publish(plan))
    assert not (only_store(state_dir) / "vault" / "ontology.yaml").exists()


def test_the_outbox_yields_a_removal_without_bytes_and_the_ontology_at_the_vault_root():
    db = Database.open(None, create=True, migrations=STATE_MIGRATIONS)
    db.execute("INSERT INTO publications (id, partition, operation, request_hash, state, receipt, created_at) "
               "VALUES ('pub_1', 'conversation:0b1e3c1e-8f4a-4c57-9d1a-2f3c4d5e6f70', 'sync', 'h', 'applied', '{}', "
               "'now')")
    db.executemany("INSERT INTO publication_files (publication_seq, ordinal, path, role, new_sha256, new_bytes, "
                   "base_sha256, base_bytes, removes) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)", [
                       (0, "pages/a.md", "record", "s", b"new", None, None, 0),
                       (1, "pages/b.md", "record", None, None, "t", b"old", 1)])
    db.execute("INSERT INTO outbox (publication_seq, state, updated_at) VALUES (1, 'pending', 'now')")
    [entry] = GitOutbox(db).pending()
    folder = "conversations/0b1e3c1e-8f4a-4c57-9d1a-2f3c4d5e6f70"
    assert entry["files"] == [(f"{folder}/pages/a.md", b"new"), (f"{folder}/pages/b.md", None)]
    db.execute("UPDATE publications SET partition = 'private'")
    db.execute("UPDATE publication_files SET role = 'ontology', path = 'ontology.yaml' WHERE ordinal = 1")
    assert GitOutbox(db).pending()[0]["files"][1] == ("ontology.yaml", None)
