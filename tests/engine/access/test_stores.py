"""Stores as spec 003 describes them: isolation, sharing, membership, creation and loss."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import Conflict, Denied, NotFound, StoreUnavailable
from engine.service import Engine
from tests.helpers import operator, page


def agent(engine: Engine, name: str) -> AgentCaller:
    return AgentCaller(engine.add_agent(name, owner=True), {"kind": "owner-private"})


def write_config(state_dir, stores: dict) -> None:
    state_dir.config.write_text(json.dumps({"stores": stores}), encoding="utf-8")


def titles(engine: Engine, caller: AgentCaller, receipt_ids: list[str]) -> list[str]:
    return [engine.get_record(caller, record_id)["title"] for record_id in receipt_ids]


def test_each_agent_gets_its_own_isolated_store(engine):
    alice, bob = agent(engine, "alice"), agent(engine, "bob")
    mine = engine.save_page(alice, page("a", "Alice's note"))
    engine.save_page(bob, page("b", "Bob's note"))
    with pytest.raises(NotFound):
        engine.get_record(bob, mine["id"])
    stores = engine.stores()
    assert sorted(s["owner"] for s in stores) == ["alice", "bob"]
    assert len({s["storeId"] for s in stores}) == 2


def test_stores_are_created_on_first_authorized_use_only(engine, state_dir):
    agent(engine, "alice")
    assert engine.agents()[0]["store"]["status"] == "not created"
    assert engine.stores() == []
    with pytest.raises(NotFound):
        engine.diagnostics(operator("alice"))
    with pytest.raises(Denied):
        engine.get_record(AgentCaller("kd_wrong", {"kind": "owner-private"}), "pg_x")
    assert not state_dir.stores.exists() or not any(state_dir.stores.iterdir())


def test_agents_in_one_named_store_share_it(engine, state_dir):
    alice, bob = agent(engine, "alice"), agent(engine, "bob")
    write_config(state_dir, {"team": {"label": "Team", "agents": ["alice", "bob"]}})
    saved = engine.save_page(alice, page("a", "Shared plan", type_="project"))
    record = engine.get_record(bob, saved["id"])
    assert record["title"] == "Shared plan"
    # History keeps each revision's author in a shared store.
    engine.save_page(bob, page("b", "Shared plan", type_="project", id=saved["id"], expectedRevision=1))
    authors = [r["attribution"]["agent"] for r in engine.history(alice, saved["id"])["revisions"]]
    assert authors == ["alice", "bob"]
    [team] = [s for s in engine.stores() if s["kind"] == "named"]
    assert team["name"] == "team" and team["agents"] == ["alice", "bob"] and team["label"] == "Team"


def test_an_agent_in_two_named_stores_is_unavailable_not_first_match(engine, state_dir):
    alice = agent(engine, "alice")
    write_config(state_dir, {"one": {"agents": ["alice"]}, "two": {"agents": ["alice"]}})
    with pytest.raises(StoreUnavailable) as raised:
        engine.save_page(alice, page("a", "Note"))
    assert "one, two" in raised.value.message
    assert engine.agents()[0]["store"]["status"] == "unavailable"
    assert not state_dir.stores.exists() or not any(state_dir.stores.iterdir())
    write_config(state_dir, {"one": {"agents": ["alice"]}, "two": {"agents": []}})
    assert engine.save_page(alice, page("a", "Note"))["revision"] == 1


def test_an_empty_named_store_stays_listed(engine, state_dir):
    write_config(state_dir, {"archive": {"label": "Archive", "agents": []}})
    [entry] = engine.stores()
    assert entry["name"] == "archive" and entry["status"] == "not created" and entry["agents"] == []


def test_membership_edits_apply_in_place_without_restart(engine, state_dir):
    alice = agent(engine, "alice")
    own = engine.save_page(alice, page("a", "In my own store"))
    write_config(state_dir, {"team": {"agents": ["alice"]}})
    shared = engine.save_page(alice, page("b", "In the team store"))
    with pytest.raises(NotFound):
        engine.get_record(alice, own["id"])
    write_config(state_dir, {"team": {"agents": []}})
    assert engine.get_record(alice, own["id"])["title"] == "In my own store"
    with pytest.raises(NotFound):
        engine.get_record(alice, shared["id"])


def test_a_removed_named_entry_leaves_its_storage_listed_as_unassigned(engine, state_dir):
    alice = agent(engine, "alice")
    write_config(state_dir, {"team": {"agents": ["alice"]}})
    saved = engine.save_page(alice, page("a", "Team note"))
    write_config(state_dir, {})
    [named] = [s for s in engine.stores() if s["kind"] == "named"]
    assert named["name"] == "team" and named["assigned"] is False and named["status"] == "ok"
    # It can be joined again, with its records intact.
    engine.resolver.use_shared_store("alice", "team")
    assert engine.get_record(alice, saved["id"])["title"] == "Team note"


def test_invalid_config_keeps_the_last_valid_membership(engine, state_dir):
    alice = agent(engine, "alice")
    write_config(state_dir, {"team": {"agents": ["alice"]}})
    saved = engine.save_page(alice, page("a", "Team note"))
    state_dir.config.write_text('{"stores": {"team": {"agents": "alice"', encoding="utf-8")
    assert engine.get_record(alice, saved["id"])["title"] == "Team note"
    assert "JSON" in engine.settings.problem


# --- Stores & sharing actions -------------------------------------------------------------------


def test_share_this_store_renames_it_and_the_sharer_gets_a_new_empty_store_later(engine, state_dir):
    alice, bob = agent(engine, "alice"), agent(engine, "bob")
    saved = engine.save_page(alice, page("a", "Alice's note"))
    [before] = engine.stores()
    engine.resolver.share_store("alice", "team", label="Team", others=("bob",))
    # Renamed, not copied: the same store id is now the named store, and bob reads alice's records.
    [after] = engine.stores()
    assert after["storeId"] == before["storeId"] and after["kind"] == "named" and after["agents"] == ["alice", "bob"]
    assert engine.get_record(bob, saved["id"])["title"] == "Alice's note"
    # Use own store: alice returns to a new, empty store; nothing is copied or removed from the shared one.
    engine.resolver.use_own_store("alice")
    with pytest.raises(NotFound):
        engine.get_record(alice, saved["id"])
    assert engine.get_record(bob, saved["id"])["title"] == "Alice's note"
    assert len([s for s in engine.stores() if s["kind"] == "isolated"]) == 1


def test_use_shared_store_moves_nothing_and_use_own_store_returns_to_the_old_one(engine, state_dir):
    alice, bob = agent(engine, "alice"), agent(engine, "bob")
    mine = engine.save_page(bob, page("b", "Bob's own"))
    engine.save_page(alice, page("a", "Alice's"))
    engine.resolver.share_store("alice", "team")
    engine.resolver.use_shared_store("bob", "team")
    with pytest.raises(NotFound):
        engine.get_record(bob, mine["id"])
    engine.resolver.use_own_store("bob")
    assert engine.get_record(bob, mine["id"])["title"] == "Bob's own"


def test_sharing_actions_refuse_what_the_spec_does_not_allow(engine):
    agent(engine, "alice")
    with pytest.raises(NotFound):
        engine.resolver.share_store("alice", "team")  # no store of its own yet
    with pytest.raises(NotFound):
        engine.resolver.use_shared_store("alice", "nowhere")
    with pytest.raises(Conflict):
        engine.resolver.use_own_store("alice")


# --- lost stores fail closed and are never re-created ---------------------------------------------


@pytest.mark.parametrize("lose", ["directory", "manifest", "database"])
def test_a_store_that_lost_its_parts_is_unavailable_and_never_recreated(state_dir, lose):
    with Engine(state_dir, watch=False) as engine:
        alice = agent(engine, "alice")
        saved = engine.save_page(alice, page("a", "Note"))
        [entry] = engine.stores()
    store = state_dir.stores / entry["storeId"]
    if lose == "directory":
        shutil.rmtree(store)
    elif lose == "manifest":
        (store / "vault.json").unlink()
    else:
        (store / "state.sqlite").unlink()
    with Engine(state_dir, watch=False) as engine:
        for attempt in (lambda: engine.get_record(alice, saved["id"]), lambda: engine.save_page(alice, page("b", "x"))):
            with pytest.raises(StoreUnavailable):
                attempt()
        [listed] = engine.stores()
        assert listed["status"] == "unavailable" and lose in listed["reason"]
    lost = {"directory": store, "manifest": store / "vault.json", "database": store / "state.sqlite"}[lose]
    assert not lost.exists(), f"the lost {lose} was re-created"
    assert [p.name for p in state_dir.stores.iterdir()] == ([] if lose == "directory" else [entry["storeId"]])


def test_losing_the_database_under_a_running_engine_fails_closed(engine, state_dir):
    alice = agent(engine, "alice")
    saved = engine.save_page(alice, page("a", "Note"))
    [entry] = engine.stores()
    (state_dir.stores / entry["storeId"] / "state.sqlite").unlink()
    with pytest.raises(StoreUnavailable):
        engine.get_record(alice, saved["id"])
    assert not (state_dir.stores / entry["storeId"] / "state.sqlite").exists()


def test_a_manifest_deleted_while_a_write_is_published_is_never_written_anew(engine, state_dir, monkeypatch):
    """Found by the fault harness under load: vault.json deleted between the publication's read of the
    manifest and its checkpoint write was re-created, and the store went on as if nothing had happened."""
    from engine.vault import manifest as manifest_module

    alice = agent(engine, "alice")
    engine.save_page(alice, page("a", "Note"))
    [entry] = engine.stores()
    manifest_path = state_dir.stores / entry["storeId"] / "vault.json"
    real_write = manifest_module.atomic_write

    def deleted_meanwhile(path, data, **options):
        if path == manifest_path:
            manifest_path.unlink()  # the outside deletion lands while the new manifest is being written
        return real_write(path, data, **options)

    monkeypatch.setattr(manifest_module, "atomic_write", deleted_meanwhile)
    with pytest.raises(StoreUnavailable) as raised:
        engine.save_page(alice, page("b", "Second note"))
    monkeypatch.undo()
    assert "vault.json" in raised.value.message
    assert not manifest_path.exists()
    with pytest.raises(StoreUnavailable):
        engine.save_page(alice, page("c", "Third note"))
    assert not manifest_path.exists()
    assert [s["status"] for s in engine.stores()] == ["unavailable"]


def test_manifest_identity_is_checked_before_each_query(engine, state_dir):
    alice = agent(engine, "alice")
    saved = engine.save_page(alice, page("a", "Note"))
    [entry] = engine.stores()
    manifest_path = state_dir.stores / entry["storeId"] / "vault.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "vaultId": "vt_someone_else"}))
    with pytest.raises(StoreUnavailable) as raised:
        engine.get_record(alice, saved["id"])
    assert "identity" in raised.value.message
    manifest_path.write_text(json.dumps(manifest))
    assert engine.get_record(alice, saved["id"])["title"] == "Note"


def test_an_older_vault_with_a_newer_database_fails_closed(engine, state_dir):
    alice = agent(engine, "alice")
    saved = engine.save_page(alice, page("a", "Note"))
    [entry] = engine.stores()
    manifest_path = state_dir.stores / entry["storeId"] / "vault.json"
    old = manifest_path.read_text()
    engine.save_page(alice, page("b", "Later"))
    manifest_path.write_text(old)  # a vault.json restored from before the second publication
    with pytest.raises(StoreUnavailable) as raised:
        engine.get_record(alice, saved["id"])
    assert "older than its database" in raised.value.message
    with pytest.raises(StoreUnavailable):
        engine.save_page(alice, page("c", "Refused"))
    assert json.loads(manifest_path.read_text()) == json.loads(old), "a conflicting checkpoint was replaced"


def test_a_swapped_partition_directory_fails_closed(engine, state_dir):
    alice, bob = agent(engine, "alice"), agent(engine, "bob")
    saved = engine.save_page(alice, page("a", "Alice"))
    engine.save_page(bob, page("b", "Bob"))
    by_owner = {s["owner"]: s["storeId"] for s in engine.stores()}
    alice_private = state_dir.stores / by_owner["alice"] / "vault" / "private"
    bob_private = state_dir.stores / by_owner["bob"] / "vault" / "private"
    shutil.rmtree(alice_private)
    shutil.copytree(bob_private, alice_private)
    with pytest.raises(StoreUnavailable) as raised:
        engine.get_record(alice, saved["id"])
    assert "does not belong" in raised.value.message


def test_store_identity_lives_in_the_registry(engine, state_dir):
    alice = agent(engine, "alice")
    engine.save_page(alice, page("a", "Note"))
    with sqlite3.connect(state_dir.registry) as db:
        rows = db.execute("SELECT store_id, kind, path FROM stores").fetchall()
        binding = db.execute("SELECT agent, store_id FROM bindings").fetchall()
    assert rows[0][1] == "isolated" and rows[0][2] == f"stores/{rows[0][0]}"
    assert binding == [("alice", rows[0][0])]


def test_concurrent_first_uses_create_exactly_one_store(engine, state_dir):
    import threading

    alice = agent(engine, "alice")
    receipts, errors = [], []

    def save(index: int) -> None:
        try:
            receipts.append(engine.save_page(alice, page(f"r{index}", f"Note {index}", type_="note")))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == [] and len(receipts) == 8
    assert len(engine.stores()) == 1 and len(list(state_dir.stores.iterdir())) == 1
