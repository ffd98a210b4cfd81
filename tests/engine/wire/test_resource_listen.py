"""Resource notifications for MCP 2026-07-28: ``resourcesListChanged`` and ``resourceSubscriptions`` on a
``subscriptions/listen`` stream, in memory and then over a real socket (the official client through
``knowledge mcp`` is in test_resource_subscriptions.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.access.authority import AgentCaller
from engine.service import Engine
from engine.wire.listen import ACKNOWLEDGED, SUBSCRIPTION_ID_KEY
from engine.wire.resource_watch import LIST_CHANGED, UPDATED
from engine.wire.resources import resource_uri
from tests.engine.wire.test_change_notifications import server  # noqa: F401 - the served engine fixture
from tests.engine.wire.test_modern import connected, envelope, modern, modern_peer  # noqa: F401 - fixture
from tests.engine.wire.test_server import message
from tests.engine.wire.test_tool_list_changes import since_settled as settled_notes, until_reply
from tests.engine.wire.test_wire import dispatcher, token  # noqa: F401 - the in-memory dispatcher and agent fixtures
from tests.helpers import page, wait_for

OWNER = {"kind": "owner-private"}
CHAT = {"kind": "conversation", "sessionKey": "chat:1", "sessionId": "00000000-0000-4000-8000-000000000001"}
HEARD = (UPDATED, LIST_CHANGED)


def listen(notifications: dict, request_id: Any = "s1") -> bytes:
    return modern("subscriptions/listen", {"notifications": notifications}, request_id=request_id)


def tagged(method: str, stream: Any = "s1", **params: Any) -> dict:
    return {"jsonrpc": "2.0", "method": method, "params": {**params, "_meta": {SUBSCRIPTION_ID_KEY: stream}}}


def records(engine: Engine, token: str) -> dict[str, str]:
    """URIs: ``atlas`` and ``dana`` (main's private partition), ``chat`` (its conversation partition),
    ``elsewhere`` (another agent's store), ``foreign`` (that store's record id under main's store); and
    ``other``, the other agent's token."""
    other = engine.add_agent("other", owner=True)
    owner = AgentCaller(token, OWNER)
    atlas = engine.save_page(owner, page("p1", "Atlas migration", "note"))
    dana = engine.save_page(owner, page("p2", "Dana Whitfield", "note"))
    chat = engine.save_page(AgentCaller(token, CHAT), page("p3", "Chat note", "note"))
    elsewhere = engine.save_page(AgentCaller(other, OWNER), page("p4", "Elsewhere", "note"))
    store = engine.resolver.effective("main", create=False).store_id
    other_store = engine.resolver.effective("other", create=False).store_id
    return {"atlas": resource_uri(store, atlas["id"]), "dana": resource_uri(store, dana["id"]),
            "chat": resource_uri(store, chat["id"]), "elsewhere": resource_uri(other_store, elsewhere["id"]),
            "foreign": resource_uri(store, elsewhere["id"]), "other": other}


def revise(engine: Engine, token: str, uri: str, title: str, audience: dict = OWNER, revision: int = 1) -> None:
    record_id = uri.rsplit("/", 1)[1]
    engine.save_page(AgentCaller(token, audience), page(f"r-{record_id}-{revision}", title, "note", "Revised.",
                                                        id=record_id, expectedRevision=revision))


# --- in memory ----------------------------------------------------------------------------------------------


def test_the_acknowledgement_names_the_uris_honoured_and_leaves_out_what_the_caller_cannot_read(
        engine, dispatcher, connected, token):
    uris = records(engine, token)
    asked = [uris["atlas"], uris["chat"], uris["elsewhere"], uris["foreign"], uris["atlas"] + "/revision/1",
             uris["atlas"]]
    ack = dispatcher.handle(connected, listen({"resourcesListChanged": True, "resourceSubscriptions": asked}))
    assert ack == tagged(ACKNOWLEDGED, notifications={
        "resourcesListChanged": True, "resourceSubscriptions": [uris["atlas"], uris["atlas"] + "/revision/1"]})
    assert "Elsewhere" not in json.dumps(ack) and "Chat note" not in json.dumps(ack)
    dispatcher.handle(connected, message("notifications/cancelled", {"requestId": "s1"}, None))
    assert connected.listen is None and not engine.changes.watched


def test_a_list_of_uris_the_caller_cannot_read_is_left_out_whole(engine, dispatcher, connected, token):
    uris = records(engine, token)
    ack = dispatcher.handle(connected, listen({"resourceSubscriptions": [uris["chat"], uris["elsewhere"]],
                                               "resourcesListChanged": False}))
    assert ack == tagged(ACKNOWLEDGED, notifications={})
    assert dispatcher.handle(connected, listen({"resourceSubscriptions": []}, "s2"))["error"]  # one stream at a time


@pytest.mark.parametrize("notifications, field", [
    ({"resourcesListChanged": "yes"}, "notifications.resourcesListChanged"),
    ({"resourceSubscriptions": "knowledge://record/x/y"}, "notifications.resourceSubscriptions"),
    ({"resourceSubscriptions": [7]}, "notifications.resourceSubscriptions[0]"),
    ({"resourceSubscriptions": ["RECORD", "file:///etc/passwd"]}, "notifications.resourceSubscriptions[1]"),
    ({"toolsListChanged": True, "resourceSubscriptions": ["URI/revision/0"]}, "notifications.resourceSubscriptions[0]"),
])
def test_a_malformed_filter_is_refused_naming_it_and_opens_nothing(engine, dispatcher, connected, token,
                                                                      notifications, field):
    uris = records(engine, token)
    notifications = json.loads(json.dumps(notifications).replace("RECORD", uris["atlas"]).replace(
        "URI", uris["atlas"]))
    reply = dispatcher.handle(connected, listen(notifications))
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["field"] == field, reply
    assert connected.listen is None and not engine.changes.watched


def test_a_stream_watches_no_more_uris_than_a_connection_may(engine, dispatcher, connected, token, monkeypatch):
    from engine.wire import resource_watch

    monkeypatch.setattr(resource_watch, "SUBSCRIPTIONS_MAX", 1)
    uris = records(engine, token)
    reply = dispatcher.handle(connected, listen({"resourceSubscriptions": [uris["atlas"], uris["dana"]]}))
    assert reply["error"]["data"] == {"reason": "limit_exceeded", "field": "notifications.resourceSubscriptions",
                                      "limit": 1, "size": 2}
    assert connected.listen is None and not engine.changes.watched
    ack = dispatcher.handle(connected, listen({"resourceSubscriptions": [uris["atlas"], uris["atlas"]]}))
    assert ack["params"]["notifications"] == {"resourceSubscriptions": [uris["atlas"]]}  # one URI, named twice


@pytest.mark.parametrize("notifications", [{"resourcesListChanged": True}, {"resourceSubscriptions": ["ATLAS"]}])
def test_a_refused_caller_opens_no_stream(engine, dispatcher, connected, token, notifications):
    atlas = records(engine, token)["atlas"]
    engine.remove_agent("main")
    reply = dispatcher.handle(connected, listen(json.loads(json.dumps(notifications).replace("ATLAS", atlas))))
    assert reply["error"]["data"]["reason"] == "denied"
    assert connected.listen is None and not engine.changes.watched


def test_discover_declares_for_2026_exactly_what_listen_honours(dispatcher, connected):
    capabilities = dispatcher.handle(connected, modern("server/discover"))["result"]["capabilities"]
    # Each notification a capability promises is a stream filter key the engine honours (and no other).
    promised = {key for key, (feature, flag) in {
        "toolsListChanged": ("tools", "listChanged"), "promptsListChanged": ("prompts", "listChanged"),
        "resourcesListChanged": ("resources", "listChanged"), "resourceSubscriptions": ("resources", "subscribe"),
    }.items() if capabilities.get(feature, {}).get(flag)}
    assert promised == set(dispatcher.listen_kinds) == {"toolsListChanged", "resourcesListChanged",
                                                        "resourceSubscriptions"}


# --- over a real socket -------------------------------------------------------------------------------------


def since_settled(engine: Engine, peer: Any) -> list[dict]:
    return settled_notes(engine, peer, heard=HEARD)


def test_a_stream_hears_of_its_subscribed_record_and_its_partitions_list_only(engine, server, token):
    uris = records(engine, token)
    peer = modern_peer(server, token)
    try:
        peer.socket.sendall(listen({"resourceSubscriptions": [uris["atlas"], uris["elsewhere"]]}))
        assert peer.read() == tagged(ACKNOWLEDGED, notifications={"resourceSubscriptions": [uris["atlas"]]})
        # Writes elsewhere: another record of its partition, its conversation, another agent's store.
        revise(engine, token, uris["dana"], "Dana Whitfield")
        revise(engine, token, uris["chat"], "Chat note", CHAT)
        revise(engine, uris["other"], uris["elsewhere"], "Elsewhere")
        assert since_settled(engine, peer) == []
        revise(engine, token, uris["atlas"], "Atlas migration")
        assert peer.read() == tagged(UPDATED, uri=uris["atlas"])
        assert since_settled(engine, peer) == []

        peer.socket.sendall(message("notifications/cancelled", {"requestId": "s1"}, None))
        wait_for(lambda: not engine.changes.watched, timeout=60)  # the stream ended: nothing more is heard
        peer.socket.sendall(listen({"resourcesListChanged": True}, "s2"))
        assert peer.read() == tagged(ACKNOWLEDGED, "s2", notifications={"resourcesListChanged": True})
        revise(engine, token, uris["atlas"], "Atlas migration", revision=2)  # not subscribed on this stream
        assert peer.read() == tagged(LIST_CHANGED, "s2")  # its partition's list changed (a new revision)
        engine.save_page(AgentCaller(uris["other"], OWNER), page("p5", "Elsewhere again", "note"))
        engine.save_page(AgentCaller(token, CHAT), page("p6", "Chat again", "note"))
        assert since_settled(engine, peer) == []
        engine.save_page(AgentCaller(token, OWNER), page("p7", "Harbour office", "note"))
        assert peer.read() == tagged(LIST_CHANGED, "s2")
    finally:
        peer.close()
    wait_for(lambda: not engine.changes.watched, timeout=60)  # a closed connection's stream ends with it


def test_a_2026_connection_hears_of_resources_only_on_its_stream(engine, server, token):
    uris = records(engine, token)
    peer = modern_peer(server, token)
    try:
        listed, _ = until_reply(peer, "resources/list", {"_meta": envelope()}, heard=HEARD)
        assert uris["atlas"] in {entry["uri"] for entry in listed["result"]["resources"]}
        assert not engine.changes.watched  # listing starts no watch in this revision
        refused, _ = until_reply(peer, "resources/subscribe", {"uri": uris["atlas"], "_meta": envelope()},
                                 heard=HEARD)
        assert refused["error"]["code"] == -32601  # removed in 2026-07-28
        revise(engine, token, uris["atlas"], "Atlas migration")
        engine.save_page(AgentCaller(token, OWNER), page("p7", "Harbour office", "note"))
        assert since_settled(engine, peer) == []
    finally:
        peer.close()


@pytest.mark.parametrize("revoked", [False, True])
def test_authority_is_checked_again_for_every_notification(engine, server, state_dir, token, revoked):
    from tests.engine.wire.test_resource_subscriptions import edit_outside

    uris = records(engine, token)
    peer = modern_peer(server, token)
    try:
        peer.socket.sendall(listen({"resourceSubscriptions": [uris["atlas"]], "resourcesListChanged": True}))
        assert peer.read()["method"] == ACKNOWLEDGED
        if revoked:
            engine.remove_agent("main")
        edit_outside(engine, state_dir, uris["atlas"].rsplit("/", 1)[1])
        if revoked:
            assert since_settled(engine, peer) == []
        else:
            assert [peer.read(), peer.read()] == [tagged(UPDATED, uri=uris["atlas"]), tagged(LIST_CHANGED)]
            assert since_settled(engine, peer) == []
    finally:
        peer.close()
