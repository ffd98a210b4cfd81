"""notifications/tools/list_changed: an agent connection hears when the tool list it would get changes, and
only then; over a real socket, then through ``knowledge mcp`` with the official MCP client."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio

from engine.access.authority import AgentCaller
from engine.operator.token_file import ensure_operator_token, read_operator_token
from engine.service import Engine
from engine.wire.protocol import Dispatcher, Session
from engine.wire.tool_list import LIST_CHANGED
from engine.wire.tools import CORE_TOOLS
from tests.engine.wire.test_change_notifications import Peer, agent_peer, operator_peer
from tests.engine.wire.test_change_notifications import server  # noqa: F401 - the served engine fixture
from tests.engine.wire.test_server import init_params, message
from tests.engine.wire.served import run_client, served_engine
from tests.helpers import page, wait_for

NOTIFICATION = {"jsonrpc": "2.0", "method": LIST_CHANGED}
CHAT = {"kind": "conversation", "sessionKey": "chat:1", "sessionId": "00000000-0000-4000-8000-000000000001"}


def until_reply(peer: Peer, method: str, params: dict | None = None, request_id: int = 7,
                heard: tuple[str, ...] = (LIST_CHANGED,)) -> tuple[dict, list[dict]]:
    """Ask, and read up to the reply: the reply and every notification of ``heard`` (by default
    tools/list_changed) written before it."""
    peer.socket.sendall(message(method, params, request_id))
    notified = []
    while True:
        received = peer.read()
        if received.get("id") == request_id:
            return received, notified
        if received.get("method") in heard:
            notified.append(received)


def names(reply: dict) -> set[str]:
    return {tool["name"] for tool in reply["result"]["tools"]}


def claim_kinds(reply: dict) -> list[str]:
    tools = {tool["name"]: tool for tool in reply["result"]["tools"]}
    item = tools["knowledge_remember"]["inputSchema"]["properties"]["items"]["items"]
    return item["properties"]["claimKind"]["anyOf"][0]["enum"]  # or null: a relationship gives none


def settled(engine: Engine) -> bool:
    """Every connection's watch has finished with every change published so far (sent what it had to)."""
    return all(subscription.idle for subscription in engine.changes._subscriptions)


def since_settled(engine: Engine, peer: Peer, heard: tuple[str, ...] = (LIST_CHANGED,)) -> list[dict]:
    """The notifications a connection was sent for what changed before now: everything its watch had to send
    is written before the ping's answer (one socket, in order)."""
    wait_for(lambda: settled(engine), timeout=60)  # a hang guard: the wait is for the watches, not a time
    reply, notified = until_reply(peer, "ping", request_id=99, heard=heard)
    assert reply["result"] == {}
    return notified


def set_writes(engine: Engine, enabled: bool) -> None:
    engine.settings.save(dataclasses.replace(engine.settings.current(), writes_enabled=enabled))


ALL_TOOLS = {tool.name for tool in CORE_TOOLS}
READ_TOOLS = {tool.name for tool in CORE_TOOLS if not tool.writes}


def test_agents_are_told_the_list_may_change_and_the_operator_is_not(engine: Engine) -> None:
    dispatcher = Dispatcher(engine)
    token = engine.add_agent("main", owner=True)
    agent = Session()
    reply = dispatcher.handle(agent, message("initialize", init_params(token)))
    assert reply["result"]["capabilities"] == {"tools": {"listChanged": True},
                                               "resources": {"subscribe": True, "listChanged": True},
                                               "prompts": {"listChanged": False}, "completions": {}}
    ensure_operator_token(engine.state)
    reply = dispatcher.handle(Session(), message("initialize", {"protocolVersion": "2025-11-25", "_meta": {
        "knowledge": {"operatorToken": read_operator_token(engine.state)}}}))
    assert reply["result"]["operator"] is True and reply["result"]["capabilities"] == {}
    # An in-memory caller cannot be sent anything, so its listing starts no watch.
    assert names(dispatcher.handle(agent, message("tools/list"))) == ALL_TOOLS and not engine.changes.watched


def test_switching_writes_off_then_on_notifies_a_listing_connection_once_each_time(engine: Engine, server) -> None:
    token = engine.add_agent("main", owner=True)
    agent = agent_peer(server, token)
    window = operator_peer(engine, server)
    try:
        listed, notified = until_reply(agent, "tools/list")
        assert names(listed) == ALL_TOOLS and notified == []
        assert len(ALL_TOOLS) == 11 and len(READ_TOOLS) == 5

        assert "result" in window.ask("operator/setSettings", {"writesEnabled": False})
        assert agent.read() == NOTIFICATION  # nothing else was on the way to this connection
        assert since_settled(engine, agent) == []  # once
        listed, notified = until_reply(agent, "tools/list")
        assert names(listed) == READ_TOOLS and notified == []

        assert "result" in window.ask("operator/setSettings", {"writesEnabled": True}, request_id=2)
        assert agent.read() == NOTIFICATION
        assert since_settled(engine, agent) == []
        listed, notified = until_reply(agent, "tools/list")
        assert names(listed) == ALL_TOOLS and notified == []
    finally:
        agent.close()
        window.close()
    wait_for(lambda: not engine.changes.watched, timeout=60)  # a closed connection's watch ends with it


def test_a_client_that_does_not_list_again_is_told_of_each_change_from_the_last_it_was_told(engine, server) -> None:
    agent = agent_peer(server, engine.add_agent("main", owner=True))
    try:
        until_reply(agent, "tools/list")
        set_writes(engine, False)
        assert agent.read() == NOTIFICATION
        set_writes(engine, True)  # back to the list it has: still a change from the one it was last told of
        assert agent.read() == NOTIFICATION
        assert since_settled(engine, agent) == []
    finally:
        agent.close()


def test_changes_that_leave_the_list_the_same_send_nothing(engine: Engine, server) -> None:
    token = engine.add_agent("main", owner=True)
    owner = AgentCaller(token, {"kind": "owner-private"})
    engine.save_page(owner, page("first", "Dana Whitfield"))
    agent = agent_peer(server, token)
    try:
        until_reply(agent, "tools/list")
        set_writes(engine, True)  # config.json saved, writes as they were
        engine.settings.save(engine.settings.current().with_knowledge_runtime(True))  # another switch
        engine.save_page(owner, page("second", "Eli Moreno"))  # a publication to its own partition
        engine.set_grant("main", "chat:1", "read")  # a grant of its own agent
        engine.add_agent("other")  # another agent
        assert since_settled(engine, agent) == []
        listed, notified = until_reply(agent, "tools/list")
        assert names(listed) == ALL_TOOLS and notified == []
    finally:
        agent.close()


def test_a_connection_that_never_listed_the_tools_is_not_watched(engine: Engine, server) -> None:
    """Decision (docs/protocol.md): until its first tools/list a connection holds no list that could be stale."""
    agent = agent_peer(server, engine.add_agent("main", owner=True))
    try:
        assert agent.ask("ping")["result"] == {}
        assert not engine.changes.watched
        set_writes(engine, False)
        listed, notified = until_reply(agent, "tools/list")
        assert names(listed) == READ_TOOLS and notified == []
        assert engine.changes.watched
    finally:
        agent.close()


def test_a_claim_kind_change_notifies_only_the_connections_whose_list_changes(engine, server, state_dir) -> None:
    token = engine.add_agent("main", owner=True)
    engine.save_page(AgentCaller(token, {"kind": "owner-private"}), page("first", "Dana Whitfield"))
    other_token = engine.add_agent("other", owner=True)
    engine.save_page(AgentCaller(other_token, {"kind": "owner-private"}), page("elsewhere", "Eli Moreno"))
    private = agent_peer(server, token)
    chat = Peer(server.port)  # the same agent, in one of its conversations: private extensions do not apply
    assert "result" in chat.ask("initialize", init_params(token, CHAT))
    other = agent_peer(server, other_token)  # another agent's store
    try:
        shipped = list(engine.ontology.claim_kinds)
        for peer in (private, chat, other):
            listed, _ = until_reply(peer, "tools/list")
            assert claim_kinds(listed) == shipped
        record = engine.resolver.effective("main", create=False)
        (state_dir.stores / record.store_id / "vault" / "ontology.yaml").write_text(
            "claim_kinds:\n  rumour: Something heard second hand.\n", encoding="utf-8")
        engine.runtime(record).mark_dirty("ontology.yaml")  # as the vault watcher reports the edit

        assert private.read() == NOTIFICATION
        assert since_settled(engine, private) == []
        listed, _ = until_reply(private, "tools/list")
        assert claim_kinds(listed) == [*shipped, "rumour"]
        assert since_settled(engine, chat) == [] and since_settled(engine, other) == []
        assert claim_kinds(until_reply(chat, "tools/list")[0]) == shipped

        engine.set_grant("main", "chat:1", "read")  # the conversation now reads the private partition
        assert chat.read() == NOTIFICATION
        assert claim_kinds(until_reply(chat, "tools/list")[0]) == [*shipped, "rumour"]
        assert since_settled(engine, private) == [] and since_settled(engine, other) == []
    finally:
        for peer in (private, chat, other):
            peer.close()


def test_the_official_mcp_client_hears_of_the_change_and_lists_again(tmp_path) -> None:
    from mcp import types

    results: dict[str, Any] = {}
    with served_engine(tmp_path) as served:

        async def before(client: Any) -> None:
            initialized = await client.initialize()
            results["capability"] = initialized.capabilities.tools.list_changed
            results["before"] = {tool.name for tool in (await client.list_tools()).tools}
            await anyio.to_thread.run_sync(lambda: served.run("settings", "writes", "off"))

        async def after(client: Any) -> None:
            results["after"] = {tool.name for tool in (await client.list_tools()).tools}

        run_client(served, types.ToolListChangedNotification, before, after)
    assert results["capability"] is True
    assert results["before"] == ALL_TOOLS and results["after"] == READ_TOOLS
