"""An agent's authorization remembered between the checks of its requests: reused only while the registry and the
settings it was concluded from are unchanged, and the store's files looked at every time."""

from __future__ import annotations

import json
import shutil
import uuid
from typing import Callable

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import Denied, InvalidParams, StoreUnavailable, WritesDisabled
from engine.service import Engine
from engine.state.registry import Registry
from engine.state.statedir import StateDir
from tests.helpers import conversation, only_store, page

SESSION = str(uuid.uuid4())


def statements(engine: Engine) -> list[str]:
    """Every statement the registry's connection runs from now on."""
    ran: list[str] = []
    engine.registry.db.connection.set_trace_callback(ran.append)
    return ran


def test_a_repeated_authorization_reads_no_registry_table_and_answers_alike(engine, owner):
    engine.save_page(owner, page("a", "Note"))
    chat = conversation(owner.token, SESSION)
    first = [engine.authorize(caller, write=True) for caller in (owner, chat)]
    engine.authorize(chat, write=True)  # its conversation claimed by the first, under the stamp before it
    ran = statements(engine)
    assert [engine.authorize(caller, write=True) for caller in (owner, chat)] == first
    assert ran == []
    # What a request asks is part of what is remembered: a read of the same caller is decided apart.
    assert engine.authorize(owner).can_write is True and engine.authorize(chat, create=False) == first[1]


def _in_other_process_registry(state_dir: StateDir, change: Callable[[Registry], None]) -> None:
    other = Registry.open(state_dir.registry, state_dir.root)  # as a second process's connection would
    try:
        change(other)
    finally:
        other.close()


def test_every_registry_change_re_decides_the_very_next_authorization(engine, owner, state_dir):
    engine.save_page(owner, page("a", "Note"))
    chat = conversation(owner.token, SESSION, key="chat:granted")
    assert engine.authorize(chat, write=True).partition == f"conversation:{SESSION}"

    engine.registry.set_grant("main", "chat:granted", "read")
    granted = engine.authorize(chat)
    assert (granted.partition, granted.can_write, granted.grant) == ("private", False, "read")
    with pytest.raises(Denied):
        engine.authorize(chat, write=True)

    _in_other_process_registry(state_dir, lambda other: other.set_grant("main", "chat:granted", "read-and-save"))
    assert engine.authorize(chat, write=True).grant == "read-and-save"

    _in_other_process_registry(state_dir, lambda other: other.remove_grant("main", "chat:granted"))
    assert engine.authorize(chat, write=True).partition == f"conversation:{SESSION}"

    second = AgentCaller(engine.registry.add_credential("main"), {"kind": "owner-private"})
    assert engine.authorize(second, write=True) == engine.authorize(owner, write=True)
    engine.registry.revoke_credential(owner.token)
    with pytest.raises(Denied):
        engine.authorize(owner, write=True)
    assert engine.authorize(second, write=True).partition == "private"

    _in_other_process_registry(state_dir, lambda other: other.remove_agent("main"))
    with pytest.raises(Denied):
        engine.authorize(second)


def test_a_settings_change_re_decides_the_very_next_authorization(engine, owner, state_dir):
    engine.authorize(owner, write=True)  # the store created: the registry changed
    isolated = engine.authorize(owner, write=True).store
    ran = statements(engine)
    assert engine.authorize(owner, write=True).store == isolated and ran == []  # remembered
    state_dir.config.write_text(json.dumps({"writesEnabled": False}), encoding="utf-8")
    with pytest.raises(WritesDisabled):
        engine.authorize(owner, write=True)
    assert engine.authorize(owner).store == isolated  # reads go on
    state_dir.config.write_text(json.dumps({"stores": {"team": {"agents": ["main"]}}}), encoding="utf-8")
    named = engine.authorize(owner, write=True).store
    assert named is not None and named.name == "team" and named != isolated


def test_a_store_that_lost_its_files_is_unavailable_to_a_remembered_authorization(engine, owner, state_dir):
    engine.save_page(owner, page("a", "Note"))
    engine.authorize(owner, write=True)
    ran = statements(engine)
    engine.authorize(owner, write=True)
    assert ran == []  # remembered
    (only_store(state_dir) / "vault.json").unlink()
    with pytest.raises(StoreUnavailable):
        engine.authorize(owner, write=True)
    shutil.rmtree(only_store(state_dir))
    with pytest.raises(StoreUnavailable):
        engine.authorize(owner)


def test_an_authorization_inside_a_registry_transaction_is_neither_remembered_nor_reused(engine, owner):
    chat = conversation(engine.registry.add_credential("main"), SESSION, key="chat:granted")
    engine.authorize(owner, write=True)
    engine.authorize(chat)
    with pytest.raises(RuntimeError):
        with engine.registry.db.atomic():
            engine.registry.revoke_credential(owner.token)
            with pytest.raises(Denied):  # the transaction's own change is seen, not the remembered answer
                engine.authorize(owner, write=True)
            engine.registry.set_grant("main", "chat:granted", "read")
            assert engine.authorize(chat).grant == "read"
            raise RuntimeError("rolled back")
    # The rollback leaves the stamp where the transaction's changes moved it: what was concluded inside it must
    # not be found under that stamp.
    assert engine.authorize(owner, write=True).partition == "private"
    assert engine.authorize(chat).partition == f"conversation:{SESSION}"
    assert engine.authorize(chat).grant is None


def test_a_remembered_caller_with_a_malformed_audience_or_instance_is_refused_as_before(engine, owner):
    engine.authorize(owner, write=True)
    with pytest.raises(InvalidParams):
        engine.authorize(AgentCaller(owner.token, {"kind": "owner-private", "extra": 1}))
    with pytest.raises(InvalidParams):
        engine.authorize(AgentCaller(owner.token, {"kind": "owner-private"}, instance="two\nlines"))
    with pytest.raises(Denied):
        engine.authorize(AgentCaller(owner.token, {"kind": "owner-private", "sandboxed": True}))
    # An unknown credential is refused as one whatever its audience carries: the credential is checked first.
    with pytest.raises(Denied) as raised:
        engine.authorize(AgentCaller("kd_unknown", {"kind": "owner-private", "extra": 1}))
    assert "credential" in raised.value.message
