"""Resource subscriptions and list changes over a real socket, then through ``knowledge mcp`` with the official
MCP client (SDK 2.3.0): at a 2025 revision listing and reading resources, getting prompts, completing, and
hearing of a subscribed record's change; left to choose (2026-07-28), hearing of it on subscriptions/listen."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from engine.access.authority import AgentCaller
from engine.service import Engine
from engine.wire.resource_watch import LIST_CHANGED, UPDATED
from engine.wire.resources import resource_uri
from tests.engine.wire.test_change_notifications import Peer, agent_peer
from tests.engine.wire.test_change_notifications import server  # noqa: F401 - the served engine fixture
from tests.engine.wire.test_server import init_params
from tests.engine.wire import test_tool_list_changes as tool_list_changes
from tests.engine.wire.served import run_client, served_engine
from tests.helpers import page, wait_for

CHAT = {"kind": "conversation", "sessionKey": "chat:1", "sessionId": "00000000-0000-4000-8000-000000000001"}
OWNER = {"kind": "owner-private"}


def until_reply(peer: Peer, method: str, params: dict | None = None) -> tuple[dict, list[dict]]:
    """Ask, and read up to the reply: the reply and every resource notification written before it."""
    return tool_list_changes.until_reply(peer, method, params, heard=(UPDATED, LIST_CHANGED))


def since_settled(engine: Engine, peer: Peer) -> list[dict]:
    """The resource notifications a connection was sent for what changed before now."""
    return tool_list_changes.since_settled(engine, peer, heard=(UPDATED, LIST_CHANGED))


def updated(uri: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": UPDATED, "params": {"uri": uri}}


LISTED = {"jsonrpc": "2.0", "method": LIST_CHANGED}


def edit_outside(engine: Engine, state_dir: Any, record_id: str) -> None:
    """Append a line to main's private record ``record_id`` by hand, and report it as the vault watcher does."""
    record = engine.resolver.effective("main", create=False)
    vault = state_dir.stores / record.store_id / "vault"
    path = next(p for p in (vault / "private").rglob("*.md") if record_id in p.read_text(encoding="utf-8"))
    path.write_text(path.read_text(encoding="utf-8") + "\nEdited outside.\n", encoding="utf-8")
    engine.runtime(record).mark_dirty(str(path.relative_to(vault)))


def test_a_subscribed_record_is_notified_when_it_changes_and_only_then(engine: Engine, server) -> None:
    token, other = engine.add_agent("main", owner=True), engine.add_agent("other", owner=True)
    owner = AgentCaller(token, OWNER)
    atlas = engine.save_page(owner, page("p1", "Atlas migration", "project"))
    dana = engine.save_page(owner, page("p2", "Dana Whitfield"))
    store = engine.resolver.effective("main", create=False).store_id
    uri = resource_uri(store, atlas["id"])
    agent = agent_peer(server, token)
    try:
        reply, _ = until_reply(agent, "resources/subscribe", {"uri": uri})
        assert reply["result"] == {}
        assert until_reply(agent, "resources/subscribe", {"uri": uri})[0]["result"] == {}  # again: the same
        # Writes elsewhere: another record of its partition, its conversation, another agent's store.
        engine.save_page(owner, page("p2-2", "Dana Whitfield", body="Revised.", id=dana["id"], expectedRevision=1))
        engine.save_page(AgentCaller(token, CHAT), page("p3", "Chat note", "note"))
        engine.save_page(AgentCaller(other, OWNER), page("p4", "Elsewhere", "note"))
        assert since_settled(engine, agent) == []

        engine.save_page(owner, page("p1-2", "Atlas migration", "project", "Revised.", id=atlas["id"],
                                     expectedRevision=1))
        assert agent.read() == updated(uri)
        assert since_settled(engine, agent) == []
        read, _ = until_reply(agent, "resources/read", {"uri": uri})
        assert "Revised." in read["result"]["contents"][0]["text"]

        assert until_reply(agent, "resources/unsubscribe", {"uri": uri})[0]["result"] == {}
        engine.save_page(owner, page("p1-3", "Atlas migration", "project", "Again.", id=atlas["id"],
                                     expectedRevision=2))
        assert since_settled(engine, agent) == []
    finally:
        agent.close()
    wait_for(lambda: not engine.changes.watched, timeout=60)  # a closed connection's watch ends with it


def test_a_listing_connection_hears_when_its_own_partition_changes(engine: Engine, server) -> None:
    token, other = engine.add_agent("main", owner=True), engine.add_agent("other", owner=True)
    owner = AgentCaller(token, OWNER)
    engine.save_page(owner, page("p1", "Atlas migration", "project"))
    agent = agent_peer(server, token)
    chat = Peer(server.port)
    assert "result" in chat.ask("initialize", init_params(token, CHAT))
    try:
        for peer in (agent, chat):
            assert "resources" in until_reply(peer, "resources/list")[0]["result"]
        engine.save_page(AgentCaller(other, OWNER), page("p4", "Elsewhere", "note"))
        assert since_settled(engine, agent) == [] and since_settled(engine, chat) == []
        engine.save_page(owner, page("p2", "Dana Whitfield"))
        assert agent.read() == LISTED
        assert since_settled(engine, agent) == [] and since_settled(engine, chat) == []
        engine.save_page(AgentCaller(token, CHAT), page("p3", "Chat note", "note"))
        assert chat.read() == LISTED
        assert since_settled(engine, agent) == []
    finally:
        agent.close()
        chat.close()


def test_another_partitions_record_cannot_be_subscribed_to(engine: Engine, server) -> None:
    token, other = engine.add_agent("main", owner=True), engine.add_agent("other", owner=True)
    atlas = engine.save_page(AgentCaller(token, OWNER), page("p1", "Atlas migration", "project"))
    elsewhere = engine.save_page(AgentCaller(other, OWNER), page("p4", "Elsewhere", "note"))
    store = engine.resolver.effective("main", create=False).store_id
    other_store = engine.resolver.effective("other", create=False).store_id
    chat = Peer(server.port)
    assert "result" in chat.ask("initialize", init_params(token, CHAT))
    agent = agent_peer(server, token)
    try:
        for peer, uri in ((chat, resource_uri(store, atlas["id"])), (agent, resource_uri(other_store, elsewhere["id"])),
                          (agent, resource_uri(store, elsewhere["id"]))):
            refused = until_reply(peer, "resources/subscribe", {"uri": uri})[0]["error"]
            assert refused["code"] == -32002 and refused["data"]["reason"] == "not_found", refused
            assert "Atlas" not in str(refused) and "Elsewhere" not in str(refused)
        engine.save_page(AgentCaller(token, OWNER), page("p1-2", "Atlas migration", "project", "Revised.",
                                                         id=atlas["id"], expectedRevision=1))
        assert since_settled(engine, chat) == [] and since_settled(engine, agent) == []
    finally:
        chat.close()
        agent.close()


@pytest.mark.parametrize("revoked", [False, True])
def test_an_edit_outside_the_engine_is_notified_unless_the_credential_was_revoked(engine: Engine, server,
                                                                                  state_dir, revoked) -> None:
    token = engine.add_agent("main", owner=True)
    atlas = engine.save_page(AgentCaller(token, OWNER), page("p1", "Atlas migration", "project"))
    uri = resource_uri(engine.resolver.effective("main", create=False).store_id, atlas["id"])
    agent = agent_peer(server, token)
    try:
        assert until_reply(agent, "resources/subscribe", {"uri": uri})[0]["result"] == {}
        assert "result" in until_reply(agent, "resources/list")[0]
        if revoked:
            engine.remove_agent("main")
        edit_outside(engine, state_dir, atlas["id"])  # the watch reads again (refused, once revoked)
        if revoked:
            assert since_settled(engine, agent) == []
            refused, _ = until_reply(agent, "resources/read", {"uri": uri})
            assert refused["error"]["data"]["reason"] == "denied"
        else:
            assert agent.read() == updated(uri) and agent.read() == LISTED
            read, _ = until_reply(agent, "resources/read", {"uri": uri})
            assert "Edited outside." in read["result"]["contents"][0]["text"]
    finally:
        agent.close()


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")  # in 2026-07-28; this is a 2025 session
def test_the_official_mcp_client_lists_reads_completes_gets_prompts_and_hears_of_changes(tmp_path) -> None:
    from mcp import types

    results: dict[str, Any] = {}
    with served_engine(tmp_path) as served:

        async def before(client: Any) -> None:
            initialized = await client.initialize()
            results["version"] = initialized.protocol_version
            results["subscribe"] = initialized.capabilities.resources.subscribe
            saved = await client.call_tool("knowledge_save_page", {
                "requestId": "r1", "type": "project", "title": "Atlas migration", "body": "First.",
                "aliases": ["northwind/atlas"]})
            record = results["record"] = saved.structured_content
            listed = await client.list_resources()
            results["listed"] = [(str(r.uri), r.name, r.title, r.mime_type) for r in listed.resources]
            templates = await client.list_resource_templates()
            results["templates"] = [t.uri_template for t in templates.resource_templates]
            results["text"] = (await client.read_resource(record["link"])).contents[0].text
            results["prompts"] = [p.name for p in (await client.list_prompts()).prompts]
            got = await client.get_prompt("knowledge_memory", {"projectKey": "northwind/atlas"})
            results["prompt"] = got.messages[0].content.text
            index = await client.get_prompt("knowledge_index", {"firstMessageAt": "2999-01-01T00:00:00Z"})
            results["index"] = index.messages[0].content.text
            completed = await client.complete(types.ResourceTemplateReference(
                type="ref/resource", uri=templates.resource_templates[0].uri_template), {"name": "record", "value": "north"})
            results["completed"] = completed.completion.values
            await client.subscribe_resource(record["link"])
            await client.call_tool("knowledge_save_page", {
                "requestId": "r2", "type": "project", "title": "Atlas migration", "body": "Second.",
                "id": record["id"], "expectedRevision": 1})

        notified = run_client(served, types.ResourceUpdatedNotification, before)
    record = results["record"]
    assert results["version"].startswith("2025-") and results["subscribe"] is True
    assert results["listed"] == [(record["link"], record["id"], "Atlas migration", "text/markdown")]
    assert results["templates"] == ["knowledge://record/{store}/{record}",
                                    "knowledge://record/{store}/{record}/revision/{revision}"]
    assert results["text"].startswith("---\n") and "First." in results["text"]
    assert results["prompts"] == ["knowledge_memory", "knowledge_index"]
    assert 'project key "northwind/atlas"' in results["prompt"]
    assert results["index"].startswith("## Knowledge Index") and "Atlas migration" in results["index"]
    assert results["completed"] == [record["id"]]
    assert [str(notification.params.uri) for notification in notified] == [record["link"]]


def test_a_subscription_made_for_a_requests_own_audience_is_read_with_it(engine: Engine, server) -> None:
    token = engine.add_agent("main", owner=True)
    owner, chat = AgentCaller(token, OWNER), AgentCaller(token, CHAT)
    note = engine.save_page(chat, page("p3", "Chat note", "note"))
    atlas = engine.save_page(owner, page("p1", "Atlas migration", "project"))
    store = engine.resolver.effective("main", create=False).store_id
    agent = agent_peer(server, token)  # initialized for the private partition
    as_chat = {"_meta": {"knowledge": {"audience": CHAT}}}
    try:
        note_uri, atlas_uri = resource_uri(store, note["id"]), resource_uri(store, atlas["id"])
        assert until_reply(agent, "resources/subscribe", {"uri": note_uri, **as_chat})[0]["result"] == {}
        refused = until_reply(agent, "resources/subscribe", {"uri": atlas_uri, **as_chat})[0]["error"]
        assert refused["data"]["reason"] == "not_found"  # the conversation does not reach the private page
        engine.save_page(owner, page("p1-2", "Atlas migration", "project", "Revised.", id=atlas["id"],
                                     expectedRevision=1))
        assert since_settled(engine, agent) == []
        engine.save_page(chat, page("p3-2", "Chat note", "note", "Revised.", id=note["id"], expectedRevision=1))
        assert agent.read() == updated(note_uri)
        assert since_settled(engine, agent) == []
    finally:
        agent.close()


def test_a_connection_holds_a_bounded_number_of_subscriptions(engine: Engine, server, monkeypatch) -> None:
    from engine.wire import resource_watch

    monkeypatch.setattr(resource_watch, "SUBSCRIPTIONS_MAX", 1)
    token = engine.add_agent("main", owner=True)
    owner = AgentCaller(token, OWNER)
    first, second = (engine.save_page(owner, page(f"p{n}", f"Page {n}", "note")) for n in (1, 2))
    store = engine.resolver.effective("main", create=False).store_id
    agent = agent_peer(server, token)
    try:
        assert until_reply(agent, "resources/subscribe", {"uri": resource_uri(store, first["id"])})[0]["result"] == {}
        refused = until_reply(agent, "resources/subscribe", {"uri": resource_uri(store, second["id"])})[0]["error"]
        assert refused["data"] == {"reason": "limit_exceeded", "field": "uri", "limit": 1, "size": 2}
        engine.save_page(owner, page("p2-2", "Page 2", "note", "Revised.", id=second["id"], expectedRevision=1))
        assert since_settled(engine, agent) == []  # the refused one was never watched
        assert until_reply(agent, "resources/subscribe", {"uri": resource_uri(store, first["id"])})[0]["result"] == {}
    finally:
        agent.close()


def test_the_official_client_left_to_choose_listens_for_a_records_updates(tmp_path) -> None:
    """MCP 2026-07-28 (the SDK's own choice): ``resourceSubscriptions`` on ``subscriptions/listen``, through
    ``knowledge mcp``; a record of another partition is left out of the acknowledgement and never heard of."""
    from mcp import Client
    from mcp.client.subscriptions import ResourceUpdated

    seen: dict[str, Any] = {}
    with served_engine(tmp_path) as served:
        served.run("agents", "add", "other", "--owner")

        async def save(client: Any, request_id: str, title: str, **extra: Any) -> dict[str, Any]:
            saved = await client.call_tool("knowledge_save_page", {
                "requestId": request_id, "type": "note", "title": title, "body": request_id, **extra})
            assert saved.is_error is False, saved
            return saved.structured_content

        async def session() -> None:
            async with Client(served.bridge("main")) as client, Client(served.bridge("other")) as other:
                seen["version"] = client.protocol_version
                atlas = seen["atlas"] = await save(client, "a1", "Atlas migration")
                elsewhere = seen["elsewhere"] = await save(other, "o1", "Elsewhere")
                async with client.listen(resource_subscriptions=[atlas["link"], elsewhere["link"]]) as stream:
                    seen["honoured"] = stream.honored.resource_subscriptions
                    await save(other, "o2", "Elsewhere", id=elsewhere["id"], expectedRevision=1)
                    await save(client, "a2", "Atlas migration", id=atlas["id"], expectedRevision=1)
                    with anyio.fail_after(60):  # a hang guard: the event comes when the push task runs
                        seen["event"] = await stream.__anext__()
                seen["text"] = (await client.read_resource(atlas["link"], cache_mode="bypass")).contents[0].text

        anyio.run(session)
    assert seen["version"] == "2026-07-28"
    assert seen["honoured"] == [seen["atlas"]["link"]]
    assert seen["event"] == ResourceUpdated(uri=seen["atlas"]["link"])  # the first heard: never the other's
    assert "a2" in seen["text"]
