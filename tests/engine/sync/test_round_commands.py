"""``knowledge sync now / status / clone`` in this process and beside a serving engine, and the operator
methods behind them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli.commands import main
from engine.core.methods import handlers
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.sync import service as sync_service
from tests.engine.cli.test_beside_engine import run, serving
from tests.engine.sync.round_machines import Machine, bare_repository


def a_remote_holding_dana(tmp_path: Path) -> tuple[str, str]:
    """A bare remote that machine ``a`` synced its store to, one page in it: (the remote's URL, the store id)."""
    remote = bare_repository(tmp_path / "remote.git")
    a = Machine(tmp_path, "a")
    try:
        a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
        a.add_remote(remote)
        a.sync()
        return remote, a.record.store_id
    finally:
        a.close()


def test_sync_now_clone_and_status_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    remote = bare_repository(tmp_path / "remote.git")
    a = Machine(tmp_path, "a")
    try:
        dana = a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
        a.add_remote(remote)
        store_id = a.record.store_id
    finally:
        a.close()
    code, out, err = run(capsys, a.state, ["sync", "now"])
    assert code == 0, err
    assert store_id in out and "origin" in out and " ok" in out

    b = StateDir(tmp_path / "b")
    code, out, err = run(capsys, b, ["sync", "clone", remote, "--agent", "main", "--json"])
    assert code == 0, err
    cloned = json.loads(out)
    assert cloned["storeId"] == store_id and cloned["remote"]["state"] == "ok" and cloned["records"] >= 1
    assert "tokenFile" in cloned
    code, out, err = run(capsys, b, ["sync", "clone", remote, "--agent", "main"])
    assert code == 2 and "already has its own store" in err

    code, out, _ = run(capsys, b, ["sync", "status", "--json"])
    [store] = json.loads(out)["stores"]
    assert store["storeId"] == store_id and store["machineId"] and store["conflictsWaiting"] == 0
    assert [(r["name"], r["state"], r["ahead"], r["behind"]) for r in store["remotes"]] == [("origin", "ok", 0, 0)]
    code, text, _ = run(capsys, b, ["sync", "status"])
    assert code == 0 and "origin" in text and "last success" in text

    with serving(b) as engine:
        code, out, err = run(capsys, b, ["sync", "now", "--agent", "main", "--json"])
        assert code == 0, err
        assert json.loads(out)["stores"][0]["remotes"][0]["state"] == "ok"
        code, beside, _ = run(capsys, b, ["sync", "status"])
        record = engine.registry.store(store_id)
        assert record is not None
        assert (record.path / "vault" / "private").is_dir()
    assert beside.splitlines()[0] == text.splitlines()[0]
    assert dana["id"]


def test_the_owners_agent_is_cloned_with_owner_authority_and_another_is_told_it_has_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    remote, _ = a_remote_holding_dana(tmp_path)
    laptop = StateDir(tmp_path / "laptop")
    laptop.create()
    with serving(laptop) as engine:  # through operator/syncClone, as beside a running engine
        code, out, err = run(capsys, laptop, ["sync", "clone", remote, "--agent", "main", "--owner"])
        assert code == 0, err
        assert "Agent main was added here with owner authority" in out and "no owner authority" not in out
        assert engine.registry.agent("main").owner
    helper = StateDir(tmp_path / "helper")
    code, out, err = run(capsys, helper, ["sync", "clone", remote, "--agent", "helper"])
    assert code == 0, err
    assert "Agent helper was added here;" in out and "has no owner authority here" in out and "--owner" in out


def test_sync_now_with_no_remote_says_so_and_a_failing_remote_exits_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = Machine(tmp_path, "a")
    try:
        a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
    finally:
        a.close()
    code, out, _ = run(capsys, a.state, ["sync", "now"])
    assert code == 0 and "no store has a remote" in out
    assert main(["--state-dir", str(a.state.root), "sync", "remote", "add", "nas", str(tmp_path / "nowhere.git")]) == 0
    capsys.readouterr()
    code, out, _ = run(capsys, a.state, ["sync", "now", "--remote", "nas"])
    assert code == 1 and "failing" in out and "unreachable" in out
    code, out, _ = run(capsys, a.state, ["sync", "now", "--agent", "main", "--remote", "other"])
    assert code == 2


def test_a_refused_clone_leaves_a_new_state_directory_as_it_found_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    remote, _ = a_remote_holding_dana(tmp_path)
    absent = StateDir(tmp_path / "new" / "state")
    code, _, err = run(capsys, absent, ["sync", "clone", str(tmp_path / "nowhere.git"), "--agent", "main"])
    assert code == 2 and "no repository at that address" in err
    code, _, err = run(capsys, absent, ["sync", "clone", remote, "--agent", "Not An Agent"])
    assert code == 2 and "agent must name an agent" in err
    assert not (tmp_path / "new").exists()

    empty = StateDir(tmp_path / "empty")
    empty.root.mkdir()
    code, _, _ = run(capsys, empty, ["sync", "clone", remote, "--agent", "main", "--store-id", "st_nosuchstore"])
    assert code == 2 and list(empty.root.iterdir()) == []

    code, out, err = run(capsys, absent, ["sync", "clone", remote, "--agent", "main"])
    assert code == 0, err
    assert "); 1 record is current." in out, out  # Dana's page
    registry = absent.registry.read_bytes()
    code, _, err = run(capsys, absent, ["sync", "clone", remote, "--agent", "other"])
    assert code == 2 and "is already here" in err
    assert absent.registry.read_bytes() == registry and (absent.root / "tokens" / "main.token").exists()


def test_a_clone_as_a_job_reports_its_steps_and_answers_as_sync_clone_and_a_refusal_fails_it_with_nothing_made(
        tmp_path: Path) -> None:
    remote, store_id = a_remote_holding_dana(tmp_path)
    laptop = Engine(StateDir(tmp_path / "laptop"), watch=False)
    try:
        start = handlers(sync_service.methods(laptop))["startSyncClone"]
        job = start({"url": remote, "agent": "main", "owner": True})
        assert job["kind"] == "clone" and job["state"] == "running"
        done = laptop.jobs.wait(job["id"], 60)
        assert done["state"] == "done", done
        assert done["progress"]["phase"] == "cataloguing" and not done["progress"]["cancellable"]
        assert done["result"]["storeId"] == store_id and done["result"]["owner"] and done["result"]["records"] >= 1
        assert laptop.registry.agent("main").owner

        stores = laptop.registry.stores()
        again = laptop.jobs.wait(start({"url": remote, "agent": "other"})["id"], 60)
        assert again["state"] == "failed" and again["error"]["reason"] == "conflict"
        assert f"store {store_id} is already here" in again["error"]["message"]
        gone = laptop.jobs.wait(start({"url": str(tmp_path / "nowhere.git"), "agent": "third"})["id"], 60)
        assert gone["state"] == "failed", gone
        assert laptop.registry.stores() == stores and laptop.registry.agent("third") is None
        assert laptop.registry.agent("other") is None
    finally:
        laptop.close()


def test_a_conflict_is_told_by_sync_now_listed_with_its_id_and_dismissed_from_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A machine without the window (a home server) reads its conflicts and dismisses them too."""
    remote = bare_repository(tmp_path / "remote.git")
    a, b = Machine(tmp_path, "a"), Machine(tmp_path, "b")
    try:
        dana = a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
        a.add_remote(remote)
        a.sync()
        b.clone(remote)
        a.revise("dana-a", dana["id"], 1, "Dana Whitaker", "Keeps the lighthouse running, says the laptop.")
        b.revise("dana-b", dana["id"], 1, "Dana Whitaker", "Keeps the lighthouse running, says the desktop.")
        a.sync()
        b.sync()
        [conflict] = b.status()["conflicts"]
    finally:
        a.close()
        b.close()

    code, out, err = run(capsys, b.state, ["sync", "now"])
    assert code == 0, err
    assert "1 conflict waiting (knowledge sync status shows them with their diff)" in out
    code, out, err = run(capsys, b.state, ["sync", "status"])
    assert code == 0, err
    assert f"conflict {conflict['id']}: {dana['id']} (revised on two machines from one revision, from " in out
    assert "1 conflict waiting:" in out and "revised_on_both" not in out
    code, out, _ = run(capsys, b.state, ["sync", "status", "--json"])
    assert json.loads(out)["stores"][0]["conflicts"][0]["kind"] == "revised_on_both"  # the code, for programs
    code, out, err = run(capsys, b.state, ["sync", "dismiss", "sc_01NOSUCHCONFLICT"])
    assert code == 2 and "has no sync conflict" in err
    with serving(b.state):
        code, out, err = run(capsys, b.state, ["sync", "dismiss", conflict["id"]])
    assert code == 0, err
    assert out.startswith(f"Dismissed conflict {conflict['id']} of store ") and "0 still waiting" in out
    code, out, _ = run(capsys, b.state, ["sync", "status", "--json"])
    [store] = json.loads(out)["stores"]
    assert store["conflictsWaiting"] == 0
    code, out, _ = run(capsys, b.state, ["sync", "now", "--json"])
    [store] = json.loads(out)["stores"]
    assert store["conflictsWaiting"] == 0
    code, out, err = run(capsys, b.state, ["sync", "dismiss", conflict["id"], "--json"])
    assert code == 0 and json.loads(out)["id"] == conflict["id"]  # again: when it was first dismissed
