"""Callers and authority: who reaches which partition, and who is denied."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from engine.authority import AgentCaller, Audience
from engine.errors import Denied, InvalidParams, NotFound, WritesDisabled
from tests.helpers import claim, conversation, only_store, operator, page, vault_snapshot

SESSION = str(uuid.uuid4())
OTHER_SESSION = str(uuid.uuid4())


@pytest.fixture
def helper_token(engine) -> str:
    """An agent without owner authority."""
    return engine.add_agent("helper")


def test_owner_private_needs_owner_authority(engine, owner, helper_token):
    assert engine.save_page(owner, page("a", "Private note"))["revision"] == 1
    with pytest.raises(Denied) as raised:
        engine.save_page(AgentCaller(helper_token, {"kind": "owner-private"}), page("b", "Sneaky"))
    assert "owner authority" in raised.value.message


def test_conversations_get_their_own_partitions(engine, owner, state_dir):
    token = owner.token
    private = engine.save_page(owner, page("a", "Private note"))
    chat = conversation(token, SESSION)
    in_chat = engine.save_page(chat, page("b", "Chat note"))
    other = conversation(token, OTHER_SESSION, key="chat:2")
    assert engine.get_record(chat, in_chat["id"])["title"] == "Chat note"
    assert engine.get_record(owner, private["id"])["title"] == "Private note"
    for caller, hidden in ((chat, private), (other, in_chat), (owner, in_chat)):
        with pytest.raises(NotFound):
            engine.get_record(caller, hidden["id"])
    path = only_store(state_dir) / "vault" / "conversations" / SESSION / "pages" / "people" / "chat-note.md"
    assert f"scope: conversation:{SESSION}" in path.read_text(encoding="utf-8")


def test_read_grant_reads_the_private_partition_but_cannot_save(engine, owner):
    private = engine.save_page(owner, page("a", "Private note"))
    chat = conversation(owner.token, SESSION, key="chat:granted")
    engine.registry.set_grant("main", "chat:granted", "read")
    assert engine.get_record(chat, private["id"])["title"] == "Private note"
    with pytest.raises(Denied):
        engine.save_page(chat, page("b", "Not allowed"))


def test_read_and_save_grant_writes_the_private_partition(engine, owner):
    chat = conversation(owner.token, SESSION, key="chat:granted")
    engine.registry.set_grant("main", "chat:granted", "read-and-save")
    saved = engine.save_page(chat, page("b", "Saved under grant"))
    record = engine.get_record(owner, saved["id"])
    assert record["frontmatter"]["scope"] == "private"
    assert record["frontmatter"]["attribution"] == {"agent": "main", "audience": "conversation", "session": SESSION}


def test_revoking_a_grant_takes_effect_on_the_next_request(engine, owner):
    private = engine.save_page(owner, page("a", "Private note"))
    chat = conversation(owner.token, SESSION, key="chat:granted")
    engine.registry.set_grant("main", "chat:granted", "read")
    assert engine.get_record(chat, private["id"])
    engine.registry.remove_grant("main", "chat:granted")
    with pytest.raises(NotFound):
        engine.get_record(chat, private["id"])


def test_a_spawned_child_reaches_its_roots_partition(engine, owner):
    chat_note = engine.save_page(conversation(owner.token, SESSION), page("a", "Chat note"))
    child = AgentCaller(owner.token, {"kind": "child", "root": {
        "kind": "conversation", "sessionKey": "chat:1", "sessionId": SESSION}})
    assert engine.get_record(child, chat_note["id"])["title"] == "Chat note"
    saved = engine.save_page(child, page("b", "From the child"))
    assert engine.get_record(child, saved["id"])["frontmatter"]["attribution"]["delegated"] is True
    owner_child = AgentCaller(owner.token, {"kind": "child", "root": {"kind": "owner-private"}})
    with pytest.raises(NotFound):
        engine.get_record(owner_child, chat_note["id"])


@pytest.mark.parametrize("audience", [
    None,
    {"kind": "owner-private", "sandboxed": True},
    {"kind": "child", "root": {"kind": "owner-private", "sandboxed": True}},
    "owner-private",
])
def test_missing_or_sandboxed_audiences_are_denied(engine, owner, audience):
    with pytest.raises(Denied):
        engine.save_page(AgentCaller(owner.token, audience), page("a", "x"))


@pytest.mark.parametrize("audience, field", [
    ({"kind": "conversation", "sessionKey": "chat:1", "sessionId": "../../private"}, "audience.sessionId"),
    ({"kind": "conversation", "sessionKey": "", "sessionId": SESSION}, "audience.sessionKey"),
    ({"kind": "conversation", "sessionId": SESSION}, "audience.sessionKey"),
    ({"kind": "operator"}, "audience.kind"),
    ({"kind": "child", "root": {"kind": "child", "root": {"kind": "owner-private"}}}, "audience.root"),
])
def test_malformed_audiences_are_invalid(engine, owner, audience, field):
    with pytest.raises(InvalidParams) as raised:
        engine.save_page(AgentCaller(owner.token, audience), page("a", "x"))
    assert raised.value.details["field"] == field


@pytest.mark.parametrize("token", [None, "", "kd_not-a-real-token", "x" * 10_000, 42])
def test_missing_or_foreign_credentials_are_denied(engine, owner, token):
    with pytest.raises(Denied):
        engine.get_record(AgentCaller(token, {"kind": "owner-private"}), "pg_anything")


def test_a_removed_agent_is_denied_and_its_store_kept(engine, owner, state_dir):
    saved = engine.save_page(owner, page("a", "Note"))
    engine.remove_agent("main")
    with pytest.raises(Denied):
        engine.get_record(owner, saved["id"])
    assert [s["status"] for s in engine.stores()] == ["ok"]


def test_credential_scopes_bound_what_an_agent_may_do(engine):
    reader = AgentCaller(engine.add_agent("reader", owner=True, scopes=("memory:read",)), {"kind": "owner-private"})
    with pytest.raises(Denied) as raised:
        engine.save_page(reader, page("a", "x"))
    assert "memory:write" in raised.value.message


def test_writes_disabled_refuses_saves_but_reads_go_on(engine, owner, state_dir):
    saved = engine.save_page(owner, page("a", "Note"))
    state_dir.config.write_text(json.dumps({"writesEnabled": False}), encoding="utf-8")
    with pytest.raises(WritesDisabled):
        engine.save_page(owner, page("b", "Refused"))
    with pytest.raises(WritesDisabled):
        engine.remember(owner, {"requestId": "m", "items": [claim("x", "y")]})
    assert engine.get_record(owner, saved["id"])["title"] == "Note"


def test_the_operator_reads_private_partitions_and_never_writes(engine, owner):
    saved = engine.save_page(owner, page("a", "Note"))
    assert engine.get_record(operator("main"), saved["id"])["title"] == "Note"
    with pytest.raises(Denied):
        engine.save_page(operator("main"), page("b", "x"))
    with pytest.raises(NotFound):
        engine.get_record(operator("nobody"), saved["id"])


def test_revocation_while_queued_fences_the_write(engine, owner, state_dir):
    engine.save_page(owner, page("seed", "Seed"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    before = vault_snapshot(only_store(state_dir) / "vault")
    release, started = threading.Event(), threading.Event()

    def block_the_lane():
        started.set()
        release.wait(10)

    blocker = runtime._lane.submit(block_the_lane)
    started.wait(5)
    outcome: dict = {}

    def write():
        try:
            outcome["receipt"] = engine.save_page(owner, page("late", "Written after revocation?"))
        except Denied as exc:
            outcome["denied"] = exc

    writer = threading.Thread(target=write)
    writer.start()
    # The write is authorized and queued behind the blocker; now the owner revokes the agent.
    engine.registry.remove_agent("main")
    release.set()
    writer.join(10)
    blocker.result(5)
    assert "denied" in outcome and "receipt" not in outcome
    assert vault_snapshot(only_store(state_dir) / "vault") == before


def test_audience_parsing_round_trips():
    parsed = Audience.parse({"kind": "conversation", "sessionKey": "k", "sessionId": SESSION.upper()})
    assert parsed.session_id == SESSION
    assert Audience.parse(parsed.to_dict()) == parsed
    child = Audience.parse({"kind": "child", "root": {"kind": "owner-private"}})
    assert child.delegated and child.to_dict() == {"kind": "child", "root": {"kind": "owner-private"}}


def test_instance_ids_are_recorded_in_attribution(engine, owner):
    caller = AgentCaller(owner.token, {"kind": "owner-private"}, instance="laptop-main")
    saved = engine.save_page(caller, page("a", "Note"))
    attribution = engine.get_record(owner, saved["id"])["frontmatter"]["attribution"]
    assert attribution == {"agent": "main", "instance": "laptop-main", "audience": "owner-private"}
    with pytest.raises(InvalidParams):
        engine.save_page(AgentCaller(owner.token, {"kind": "owner-private"}, instance="two\nlines"), page("b", "x"))
