"""Automatic sync in the engine (engine/service.py, engine/sync/scheduler.py, engine/sync/conflicts.py): the
stores it syncs, start and stop, the owner's sync now through the scheduler, the ``sync`` change topic, and
``operator/dismissSyncConflict``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import NotFound
from engine.operator.token_file import ensure_operator_token, read_operator_token
from engine.service import Engine
from engine.state.registry import StoreRecord
from engine.state.sync_settings import SyncSettings
from engine.sync.remotes import RemoteBook, remotes_file
from engine.sync.scheduler import AutoSync, SyncedStore
from engine.sync.status import SyncRemoteStatus
from engine.wire.protocol import Dispatcher, Session
from tests.helpers import page


@pytest.fixture
def record(engine: Engine) -> StoreRecord:
    """main's store, with one page, and the remote nas."""
    token = engine.add_agent("main", owner=True)
    engine.save_page(AgentCaller(token, {"kind": "owner-private"}), page("p-1", "Dana Whitfield"))
    RemoteBook(engine.state, engine.resolver).add("nas", "/srv/git/notes.git")
    [record] = engine.registry.stores()
    return record


def _ask(dispatcher: Dispatcher, session: Session, method: str, params: dict | None = None) -> dict:
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}).encode() + b"\n"
    return dispatcher.handle(session, line)


@pytest.fixture
def operator(engine: Engine) -> tuple[Dispatcher, Session]:
    dispatcher = Dispatcher(engine)
    ensure_operator_token(engine.state)
    session = Session()
    _ask(dispatcher, session, "initialize", {"_meta": {"knowledge": {"operatorToken": read_operator_token(engine.state)}}})
    assert session.operator
    return dispatcher, session


def _vault(engine: Engine, record: StoreRecord) -> dict[str, bytes]:
    vault = record.path / "vault"
    return {str(path.relative_to(vault)): path.read_bytes() for path in sorted(vault.rglob("*"))
            if path.is_file() and ".git" not in path.relative_to(vault).parts}


def test_the_stores_synced_are_those_with_remotes_and_a_readable_remotes_file(engine: Engine,
                                                                                 record: StoreRecord) -> None:
    assert engine._synced_stores() == {record.store_id: SyncedStore(record.name, ("nas",))}
    remotes_file(record).write_text("{", encoding="utf-8")  # broken by hand: left out until corrected
    assert engine._synced_stores() == {}
    remotes_file(record).unlink()
    assert engine._synced_stores() == {}


def test_serving_starts_automatic_sync_and_closing_stops_it(state_dir) -> None:  # type: ignore[no-untyped-def]
    engine = Engine(state_dir, watch=False)
    try:
        engine.start_sync()
        autosync = engine.autosync
        assert autosync is not None and autosync._loop_thread is not None and engine.changes.watched
    finally:
        engine.close()
    assert not autosync._loop_thread.is_alive() and not engine.changes.watched


def test_sync_now_while_serving_goes_through_the_scheduler(engine: Engine, record: StoreRecord) -> None:
    calls: list[tuple[str, str]] = []

    def run_round(store_id: str, remote: str) -> SyncRemoteStatus:
        calls.append((store_id, remote))
        return {"name": remote, "url": "/srv/git/notes.git", "state": "ok", "lastAttempt": None,
                "lastSuccess": None, "lastError": None, "ahead": 0, "behind": 0, "machines": []}

    engine.autosync = AutoSync(run_round, engine._synced_stores, lambda: SyncSettings(), engine.changes,
                               spawn=lambda work: None)
    watcher = engine.changes.subscribe(["sync"])
    assert [status["state"] for status in engine.sync_store(record)] == ["ok"]
    assert engine.sync_store(record, "nas")[0]["name"] == "nas"
    assert calls == [(record.store_id, "nas")] * 2
    assert [change["storeId"] for change in watcher.take()[0]] == [record.store_id]
    with pytest.raises(NotFound):
        engine.sync_store(record, "github")  # no such remote: the round says so
    assert len(calls) == 2


def test_adding_or_removing_a_remote_is_told_on_the_sync_topic(engine: Engine, record: StoreRecord,
                                                               operator: tuple[Dispatcher, Session]) -> None:
    dispatcher, session = operator
    watcher = engine.changes.subscribe(["sync"])
    assert "result" in _ask(dispatcher, session, "operator/addSyncRemote", {"name": "usb", "url": "/media/usb/n.git"})
    assert watcher.take()[0] == [{"topic": "sync", "storeId": record.store_id}]
    assert "result" in _ask(dispatcher, session, "operator/removeSyncRemote", {"name": "usb"})
    assert watcher.take()[0] == [{"topic": "sync", "storeId": record.store_id}]
    assert "error" in _ask(dispatcher, session, "operator/removeSyncRemote", {"name": "usb"})
    assert watcher.take()[0] == []  # nothing changed, nothing told


def _conflict(engine: Engine, record: StoreRecord, conflict_id: str) -> None:
    """A conflict as a merge records it (engine/sync/install.py record_conflicts)."""
    runtime = engine.runtime(record)
    runtime.call(lambda: runtime.store.db.execute(
        "INSERT INTO sync_conflicts (id, partition, record_id, kind, standing_path, standing_revision, "
        "standing_sha256, other_path, other_revision, other_sha256, diff, remote, machine, at) "
        "VALUES (?, 'private', 'p-1', 'revised_on_both', 'pages/person/dana.md', 3, ?, 'pages/person/dana.md', 3, "
        "?, '-a\n+b\n', 'nas', 'mc_other', '2026-12-04T03:00:00Z')", (conflict_id, "a" * 64, "b" * 64)))


def test_dismissing_a_conflict_leaves_waiting_and_changes_no_vault_file(
        engine: Engine, record: StoreRecord, operator: tuple[Dispatcher, Session]) -> None:
    dispatcher, session = operator
    _conflict(engine, record, "sc_1")
    _conflict(engine, record, "sc_2")
    vault = _vault(engine, record)
    watcher = engine.changes.subscribe(["sync"])
    answer = _ask(dispatcher, session, "operator/dismissSyncConflict", {"id": "sc_1"})["result"]
    assert answer["storeId"] == record.store_id and answer["id"] == "sc_1" and answer["conflictsWaiting"] == 1
    assert watcher.take()[0] == [{"topic": "sync", "storeId": record.store_id}]
    again = _ask(dispatcher, session, "operator/dismissSyncConflict", {"id": "sc_1", "store": record.store_id})
    assert again["result"] == answer  # already dismissed: when it was, nothing changed
    assert _vault(engine, record) == vault
    runtime = engine.runtime(record)
    rows = runtime.call(lambda: runtime.store.db.all("SELECT id, dismissed_at FROM sync_conflicts ORDER BY id"))
    assert [(row["id"], row["dismissed_at"]) for row in rows] == [("sc_1", answer["dismissedAt"]), ("sc_2", None)]


@pytest.mark.parametrize("params, reason", [
    ({"id": "sc_404"}, "not_found"), ({}, "invalid_params"), ({"id": ""}, "invalid_params"),
    ({"id": 7}, "invalid_params"), ({"id": "sc_1", "store": "nope"}, "not_found"),
    ({"id": "sc_1", "agent": "main", "store": "x"}, "invalid_params"),
])
def test_a_bad_dismissal_is_refused_and_changes_nothing(
        engine: Engine, record: StoreRecord, operator: tuple[Dispatcher, Session], params: dict, reason: str) -> None:
    dispatcher, session = operator
    _conflict(engine, record, "sc_1")
    refused = _ask(dispatcher, session, "operator/dismissSyncConflict", params)
    assert refused["error"]["data"]["reason"] == reason, refused
    runtime = engine.runtime(record)
    assert runtime.call(lambda: runtime.store.db.one("SELECT dismissed_at FROM sync_conflicts"))[0] is None


def test_dismissing_needs_the_operator(engine: Engine, record: StoreRecord, tmp_path: Path) -> None:
    dispatcher = Dispatcher(engine)
    refused = _ask(dispatcher, Session(), "operator/dismissSyncConflict", {"id": "sc_1"})
    assert "error" in refused
