"""The registry's remembered answers: never older than the registry itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import engine
from engine.core.db import Database
from engine.state.registry import MIGRATIONS, Registry


@pytest.fixture(params=["file", "memory"])
def registry(request, tmp_path: Path):
    opened = (Registry.open(tmp_path / "registry.sqlite", tmp_path) if request.param == "file"
              else Registry(Database.open(None, create=True, migrations=MIGRATIONS), tmp_path))
    yield opened
    opened.close()


def statements(registry: Registry) -> list[str]:
    """Every statement the registry's connection runs from now on."""
    ran: list[str] = []
    registry.db.connection.set_trace_callback(ran.append)
    return ran


def test_a_repeated_check_reads_no_table_until_the_registry_changes(registry):
    token = registry.add_agent("main", owner=True)
    registry.new_store(store_id="st_a", kind="isolated", name=None, created_for="main")
    first = (registry.authenticate(token), registry.own_store_of("main"), registry.grant("main", "k"))
    ran = statements(registry)
    assert (registry.authenticate(token), registry.own_store_of("main"), registry.grant("main", "k")) == first
    assert ran == []
    registry.set_grant("main", "k", "read")
    assert registry.grant("main", "k").access == "read"
    assert any("FROM grants" in statement for statement in ran)


def test_every_change_is_seen_by_the_very_next_check(registry):
    token = registry.add_agent("main", owner=True)
    second = registry.add_credential("main")
    assert registry.authenticate(token).name == "main"
    registry.revoke_credential(token)
    assert registry.authenticate(token) is None
    assert registry.authenticate(second).name == "main"

    assert registry.own_store_of("main") is None
    registry.new_store(store_id="st_a", kind="isolated", name=None, created_for="main")
    assert registry.own_store_of("main").store_id == "st_a"
    registry.unbind("main")
    assert registry.own_store_of("main") is None

    registry.new_store(store_id="st_b", kind="isolated", name=None, created_for="main")
    assert registry.store_named("team") is None
    registry.rename_to_named("st_b", "team")
    assert registry.store_named("team").store_id == "st_b" and registry.own_store_of("main") is None

    registry.set_grant("main", "k", "read-and-save")
    assert registry.grant("main", "k").access == "read-and-save"
    registry.set_grant("main", "k", "read")
    assert registry.grant("main", "k").access == "read"
    registry.remove_grant("main", "k")
    assert registry.grant("main", "k") is None

    registry.remove_agent("main")
    assert registry.authenticate(second) is None and not registry.agent("main").active
    again = registry.add_agent("main")
    assert registry.agent("main").active and not registry.agent("main").owner
    assert registry.authenticate(again).name == "main"


def test_a_check_inside_a_transaction_sees_its_changes_and_a_rollback_leaves_nothing_remembered(registry):
    token = registry.add_agent("main", owner=True)
    assert registry.authenticate(token).name == "main"
    with pytest.raises(RuntimeError):
        with registry.db.atomic():
            registry.revoke_credential(token)
            assert registry.authenticate(token) is None
            raise RuntimeError("rolled back")
    assert registry.authenticate(token).name == "main"


def test_a_revocation_by_another_connection_refuses_the_next_check(tmp_path):
    path = tmp_path / "registry.sqlite"
    with_engine, other = Registry.open(path, tmp_path), Registry.open(path, tmp_path)
    try:
        token = with_engine.add_agent("main", owner=True)
        with_engine.set_grant("main", "k", "read")
        assert with_engine.authenticate(token).name == "main" and with_engine.grant("main", "k") is not None
        other.revoke_credential(token)
        other.remove_grant("main", "k")
        assert with_engine.authenticate(token) is None and with_engine.grant("main", "k") is None
    finally:
        with_engine.close()
        other.close()


def test_a_revocation_by_another_process_refuses_the_next_check(tmp_path):
    registry = Registry.open(tmp_path / "registry.sqlite", tmp_path)
    try:
        token = registry.add_agent("main", owner=True)
        assert registry.authenticate(token).name == "main"
        root = str(Path(engine.__file__).resolve().parent.parent)
        script = ("import sys; from pathlib import Path; from engine.state.registry import Registry; "
                  "r = Registry.open(Path(sys.argv[1]) / 'registry.sqlite', Path(sys.argv[1])); "
                  "r.remove_agent('main'); r.close()")
        subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, cwd=root,
                       env={**os.environ, "PYTHONPATH": root})
        assert registry.authenticate(token) is None
    finally:
        registry.close()


def test_one_reading_takes_one_change_stamp_for_every_check_in_it(registry, monkeypatch):
    token = registry.add_agent("main", owner=True)
    registry.new_store(store_id="st_a", kind="isolated", name=None, created_for="main")
    taken = []
    stamp = registry.db.change_stamp
    monkeypatch.setattr(registry.db, "change_stamp", lambda: taken.append(1) or stamp())
    with registry.one_reading():
        with registry.one_reading():  # nested: the outer stamp serves
            assert registry.authenticate(token).name == "main" and registry.own_store_of("main").store_id == "st_a"
        assert registry.grant("main", "k") is None
    assert len(taken) == 1
    registry.authenticate(token)
    assert len(taken) == 2  # outside a block each check takes its own


def test_a_change_committed_before_a_reading_is_seen_by_every_check_in_it_and_one_during_it_by_the_next(registry):
    token = registry.add_agent("main", owner=True)
    registry.set_grant("main", "k", "read")
    with registry.one_reading():  # remembered
        assert registry.authenticate(token).name == "main" and registry.grant("main", "k").access == "read"
    registry.set_grant("main", "k", "read-and-save")
    registry.revoke_credential(token)
    with registry.one_reading():
        assert registry.authenticate(token) is None
        assert registry.grant("main", "k").access == "read-and-save"
        registry.remove_grant("main", "k")  # during the reading: this reading's answers may predate it
    with registry.one_reading():
        assert registry.grant("main", "k") is None


def test_a_change_made_through_the_registry_during_a_reading_is_seen_by_the_checks_after_it(registry):
    registry.add_agent("main", owner=True)
    with registry.one_reading():
        assert registry.own_store_of("main") is None
        registry.new_store(store_id="st_a", kind="isolated", name=None, created_for="main")  # a concurrent first use
        assert registry.own_store_of("main").store_id == "st_a"
