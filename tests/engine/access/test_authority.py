"""Callers and authority: who reaches which partition, and who is denied."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from engine.access.authority import AgentCaller, Audience
from engine.core.errors import Denied, InvalidParams, LimitExceeded, NotFound, WritesDisabled
from engine.state.registry import Registry
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
    # `knowledge mcp --agent helper` speaks owner-private unless told otherwise: the refusal says what to use.
    assert "knowledge agents config helper" in raised.value.message and "conversation" in raised.value.message


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


@pytest.mark.parametrize("flag", [1, 0, "true", "false", "", None, [], {}, [True], 1.0])
@pytest.mark.parametrize("kind", ["owner-private", "conversation", "child"])
def test_a_sandboxed_flag_that_is_not_a_json_boolean_is_refused_never_read_as_false(engine, owner, state_dir, flag,
                                                                                    kind):
    """Fail closed: ``sandboxed: 1`` or ``"true"`` once read as "not sandboxed" and got owner-private access."""
    audience = {"kind": "owner-private", "sandboxed": flag}
    if kind == "conversation":
        audience = {"kind": "conversation", "sessionKey": "chat:1", "sessionId": SESSION, "sandboxed": flag}
    elif kind == "child":
        audience = {"kind": "child", "root": {"kind": "owner-private", "sandboxed": flag}}
    for attempt in (lambda c: engine.save_page(c, page("a", "x")), lambda c: engine.search(c, {"query": "x"})):
        with pytest.raises(InvalidParams) as raised:
            attempt(AgentCaller(owner.token, audience))
        assert raised.value.details["field"].endswith(".sandboxed")
    assert vault_snapshot(state_dir.stores) == {}  # refused before anything, even the store, was made


def test_sandboxed_false_is_an_ordinary_audience(engine, owner):
    saved = engine.save_page(AgentCaller(owner.token, {"kind": "owner-private", "sandboxed": False}), page("a", "x"))
    assert saved["revision"] == 1


@pytest.mark.parametrize("audience, field", [
    ({"kind": "owner-private", "sessionKey": "chat:1"}, "audience.sessionKey"),
    ({"kind": "owner-private", "owner": True}, "audience.owner"),
    ({"kind": "conversation", "sessionKey": "chat:1", "sessionId": SESSION, "agent": "other"}, "audience.agent"),
    ({"kind": "child", "root": {"kind": "owner-private"}, "sessionId": SESSION}, "audience.sessionId"),
    ({"kind": "child", "root": {"kind": "owner-private", "extra": 1}}, "audience.root.extra"),
    ({"kind": "child", "root": "owner-private"}, "audience.root"),
    ({"kind": "child"}, "audience.root"),
    ({"kind": 1}, "audience.kind"),
    ({"kind": ["owner-private"]}, "audience.kind"),
    ({"kind": "conversation", "sessionKey": 7, "sessionId": SESSION}, "audience.sessionKey"),
    ({"kind": "conversation", "sessionKey": "chat\x00:1", "sessionId": SESSION}, "audience.sessionKey"),
    ({"kind": "conversation", "sessionKey": "chat\n1", "sessionId": SESSION}, "audience.sessionKey"),
    ({"kind": "conversation", "sessionKey": "chat\ud800", "sessionId": SESSION}, "audience.sessionKey"),
    ({"kind": "conversation", "sessionKey": "chat:1", "sessionId": uuid.UUID(SESSION)}, "audience.sessionId"),
])
def test_audience_fields_must_have_their_exact_types_and_unknown_fields_are_refused(engine, owner, audience, field):
    with pytest.raises(InvalidParams) as raised:
        engine.search(AgentCaller(owner.token, audience), {"query": "x"})
    assert raised.value.details["field"] == field


@pytest.mark.parametrize("instance", [7, "", " ", "a\nb", "a\x00b", "\udc00", ["laptop"]])
def test_instance_ids_must_be_one_clean_line(engine, owner, instance):
    with pytest.raises(InvalidParams) as raised:
        engine.search(AgentCaller(owner.token, {"kind": "owner-private"}, instance), {"query": "x"})
    assert raised.value.details["field"] == "instance"


def test_an_oversize_session_key_or_instance_is_limit_exceeded(engine, owner):
    long_key = {"kind": "conversation", "sessionKey": "k" * 257, "sessionId": SESSION}
    for caller, field in ((AgentCaller(owner.token, long_key), "audience.sessionKey"),
                          (AgentCaller(owner.token, {"kind": "owner-private"}, "x" * 129), "instance")):
        with pytest.raises(LimitExceeded) as raised:
            engine.search(caller, {"query": "x"})
        assert raised.value.details["field"] == field


def test_a_conversation_belongs_to_the_agent_and_session_key_that_first_used_it(engine, owner, state_dir):
    """Session ids are not secret (attribution shows them): presenting one reaches nothing of the conversation
    unless the same agent presents the same session key."""
    helper = engine.add_agent("helper")
    engine.add_agent("outsider", owner=True)
    engine.settings.save(engine.settings.current().with_stores(
        {"team": _named_store("team", ("main", "helper"))}))
    chat = conversation(owner.token, SESSION, key="chat:1")
    note = engine.save_page(chat, page("a", "Chat note"))
    assert note["revision"] == 1
    intruders = {
        "another member agent, same key": conversation(helper, SESSION, key="chat:1"),
        "another member agent, own key": conversation(helper, SESSION, key="helper:1"),
        "the same agent, another key": conversation(owner.token, SESSION, key="chat:2"),
        "a child of another key": AgentCaller(owner.token, {"kind": "child", "root": {
            "kind": "conversation", "sessionKey": "chat:2", "sessionId": SESSION}}),
    }
    vault = only_store(state_dir) / "vault"
    before = vault_snapshot(vault)
    for name, intruder in intruders.items():
        for attempt in (lambda c: engine.get_record(c, note["id"]), lambda c: engine.search(c, {"query": "chat"}),
                        lambda c: engine.save_page(c, page("b", "Planted")), lambda c: engine.health(c),
                        lambda c: engine.resume(c)):
            with pytest.raises(Denied) as raised:
                attempt(intruder)
            assert "another agent or session key" in raised.value.message, name
    assert vault_snapshot(vault) == before
    # The owner of the conversation, and a child delegated by it, still reach it.
    assert engine.get_record(chat, note["id"])["title"] == "Chat note"
    child = AgentCaller(owner.token, {"kind": "child", "root": chat.audience})
    assert engine.get_record(child, note["id"])["title"] == "Chat note"
    # Another member agent's own new conversation is its own.
    mine = conversation(helper, OTHER_SESSION, key="helper:1")
    assert engine.save_page(mine, page("c", "Helper chat"))["revision"] == 1
    with pytest.raises(Denied):
        engine.get_record(conversation(owner.token, OTHER_SESSION, key="helper:1"), note["id"])


def test_a_conversation_binding_is_per_store(engine, owner):
    """An agent with its own isolated store presenting the session id reaches its own empty conversation there."""
    other = engine.add_agent("other", owner=True)
    chat = conversation(owner.token, SESSION)
    engine.save_page(chat, page("a", "Chat note"))
    theirs = conversation(other, SESSION)
    assert engine.search(theirs, {"query": "chat note"})["hits"] == []


def test_conversation_owners_survive_a_restart(state_dir):
    from engine.service import Engine

    with Engine(state_dir, watch=False) as first:
        token = first.add_agent("main", owner=True)
        first.save_page(conversation(token, SESSION, key="chat:1"), page("a", "Chat note"))
    with Engine(state_dir, watch=False) as second:
        with pytest.raises(Denied):
            second.search(conversation(token, SESSION, key="chat:2"), {"query": "chat"})
        assert second.search(conversation(token, SESSION, key="chat:1"), {"query": "chat note"})["hits"]


def _named_store(name: str, agents: tuple[str, ...]):
    from engine.state.config import NamedStore

    return NamedStore(name, name.title(), agents)


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


def test_a_revocation_by_another_process_fences_an_entered_write(engine, owner, state_dir):
    engine.save_page(owner, page("seed", "Seed"))
    entry = engine.enter(owner, write=True)
    entry.recheck()  # the registry's answers for this caller are remembered by now
    before = vault_snapshot(only_store(state_dir) / "vault")
    other = Registry.open(state_dir.registry, state_dir.root)  # as `knowledge agents remove` does, beside the engine
    try:
        other.remove_agent("main")
    finally:
        other.close()
    with pytest.raises(Denied):
        entry.recheck()
    with pytest.raises(Denied):
        entry.write(lambda runtime, authority, catalog: pytest.fail("planned for a revoked caller"))
    assert vault_snapshot(only_store(state_dir) / "vault") == before


def test_a_grant_removed_by_another_process_takes_effect_on_the_next_request(engine, owner, state_dir):
    private = engine.save_page(owner, page("a", "Private note"))
    chat = conversation(owner.token, SESSION, key="chat:granted")
    engine.registry.set_grant("main", "chat:granted", "read")
    assert engine.get_record(chat, private["id"])
    other = Registry.open(state_dir.registry, state_dir.root)
    try:
        other.remove_grant("main", "chat:granted")
    finally:
        other.close()
    with pytest.raises(NotFound):
        engine.get_record(chat, private["id"])


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
