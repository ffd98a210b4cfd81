"""MCP 2026-07-28 beside the 2025 revisions: the envelope, server/discover, knowledge/authenticate, the eras kept
apart, and subscriptions/listen, in memory and then over a real socket."""

from __future__ import annotations

import dataclasses
import json

import pytest

from engine.wire.listen import ACKNOWLEDGED, SUBSCRIPTION_ID_KEY
from engine.wire.modern import (CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY, SERVER_INFO_KEY,
                                UNSUPPORTED_PROTOCOL_VERSION)
from engine.wire.protocol import Session
from engine.wire.tool_list import LIST_CHANGED
from engine.wire.tools import CORE_TOOLS
from tests.engine.wire.test_change_notifications import Peer
from tests.engine.wire.test_change_notifications import server  # noqa: F401 - the served engine fixture
from tests.engine.wire.test_server import init_params, message
from tests.engine.wire.test_tool_list_changes import set_writes, settled
from tests.engine.wire.test_wire import dispatcher, token  # noqa: F401 - the in-memory dispatcher and agent fixtures
from tests.helpers import tool_answer, wait_for

ALL_TOOLS = {tool.name for tool in CORE_TOOLS}
READ_TOOLS = {tool.name for tool in CORE_TOOLS if not tool.writes}


def envelope(version: str = "2026-07-28", **extra) -> dict:
    return {PROTOCOL_VERSION_KEY: version, CLIENT_CAPABILITIES_KEY: {},
            CLIENT_INFO_KEY: {"name": "probe", "version": "1.0"}, **extra}


def modern(method: str, params: dict | None = None, request_id: int | str | None = 1, **meta) -> bytes:
    return message(method, {**(params or {}), "_meta": envelope(**meta)}, request_id)


def authenticate(token: str, audience: dict | None = None) -> bytes:
    return message("knowledge/authenticate", {"clientInfo": {"name": "host", "version": "2"}, "_meta": {
        "knowledge": {"token": token, "audience": audience or {"kind": "owner-private"}}}}, "auth")


@pytest.fixture
def connected(dispatcher, token) -> Session:
    session = Session()
    assert dispatcher.handle(session, authenticate(token))["result"] == {
        "authenticated": True, "protocolVersions": ["2026-07-28"]}
    return session


def test_discover_answers_before_a_credential_with_every_revision(dispatcher):
    answer = dispatcher.handle(Session(), modern("server/discover"))["result"]
    assert answer["supportedVersions"] == ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
    assert answer["capabilities"] == {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True},
                                      "prompts": {"listChanged": False}, "completions": {}}
    assert answer["_meta"][SERVER_INFO_KEY]["name"] == "knowledge-desk"
    assert (answer["resultType"], answer["ttlMs"], answer["cacheScope"]) == ("complete", 0, "private")


def test_a_fresh_connection_may_still_initialize_after_discover(dispatcher, token):
    session = Session()
    dispatcher.handle(session, modern("server/discover"))
    reply = dispatcher.handle(session, message("initialize", init_params(token)))
    assert reply["result"]["protocolVersion"] == "2025-11-25"


def test_an_authenticated_connection_serves_enveloped_requests_with_result_types(dispatcher, connected):
    listed = dispatcher.handle(connected, modern("tools/list"))["result"]
    assert {tool["name"] for tool in listed["tools"]} == ALL_TOOLS
    assert (listed["resultType"], listed["ttlMs"], listed["cacheScope"]) == ("complete", 0, "private")
    saved = dispatcher.handle(connected, modern("tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "r1", "type": "note", "title": "Harbour office", "body": "Opens at nine."}}))["result"]
    assert saved["resultType"] == "complete" and saved["structuredContent"]["revision"] == 1
    found = dispatcher.handle(connected, modern("tools/call", {"name": "knowledge_grep", "arguments": {
        "query": "harbour"}}))["result"]
    assert [hit["title"] for hit in found["structuredContent"]["hits"]] == ["Harbour office"]
    assert "ttlMs" not in found  # a tool call is not cacheable
    assert dispatcher.handle(connected, modern("memory/status"))["result"] == {"ready": True,
                                                                                "resultType": "complete"}


def test_discover_on_an_authenticated_connection_names_only_its_revision(dispatcher, connected):
    assert dispatcher.handle(connected, modern("server/discover"))["result"]["supportedVersions"] == ["2026-07-28"]


def test_the_connection_is_listed_with_the_client_it_named(engine, dispatcher, connected):
    (seen,) = engine.connections.listed()
    assert seen["client"] == "host 2" and seen["agent"] == "main"


@pytest.mark.parametrize("meta, code, field", [
    ({PROTOCOL_VERSION_KEY: "2026-07-28"}, -32602, f"_meta.{CLIENT_CAPABILITIES_KEY}"),
    ({PROTOCOL_VERSION_KEY: 20260728, CLIENT_CAPABILITIES_KEY: {}}, -32602, f"_meta.{PROTOCOL_VERSION_KEY}"),
    ({PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: []}, -32602, f"_meta.{CLIENT_CAPABILITIES_KEY}"),
    ({PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}, CLIENT_INFO_KEY: "x"}, -32602,
     f"_meta.{CLIENT_INFO_KEY}"),
    ({PROTOCOL_VERSION_KEY: "2025-11-25", CLIENT_CAPABILITIES_KEY: {}}, UNSUPPORTED_PROTOCOL_VERSION,
     f"_meta.{PROTOCOL_VERSION_KEY}"),
])
def test_a_malformed_envelope_is_refused_naming_the_key(dispatcher, connected, meta, code, field):
    reply = dispatcher.handle(connected, message("tools/list", {"_meta": meta}))
    assert reply["error"]["code"] == code and reply["error"]["data"]["field"] == field


def test_an_unsupported_version_names_what_the_connection_serves(dispatcher, connected):
    fresh = dispatcher.handle(Session(), modern("server/discover", version="2027-01-01"))["error"]
    assert fresh["code"] == UNSUPPORTED_PROTOCOL_VERSION and fresh["data"]["requested"] == "2027-01-01"
    assert fresh["data"]["supported"][-1] == "2026-07-28" and "2025-11-25" in fresh["data"]["supported"]
    locked = dispatcher.handle(connected, modern("tools/list", version="2027-01-01"))["error"]
    assert locked["data"]["supported"] == ["2026-07-28"]


@pytest.mark.parametrize("method", ["ping", "resources/subscribe", "resources/unsubscribe", "logging/setLevel"])
def test_methods_the_revision_removed_are_refused_for_it(dispatcher, connected, method):
    reply = dispatcher.handle(connected, modern(method))
    assert reply["error"]["code"] == -32601 and "removed in MCP 2026-07-28" in reply["error"]["message"]


def test_a_bare_ping_still_answers_on_a_2026_connection(dispatcher, connected):
    assert dispatcher.handle(connected, message("ping", request_id=5)) == {"jsonrpc": "2.0", "id": 5, "result": {}}


def test_the_eras_are_kept_apart(dispatcher, connected, token):
    refused = dispatcher.handle(connected, message("initialize", init_params(token)))["error"]
    assert refused["code"] == UNSUPPORTED_PROTOCOL_VERSION and refused["data"]["supported"] == ["2026-07-28"]
    assert refused["data"]["requested"] == "2025-11-25"
    missing = dispatcher.handle(connected, message("tools/list"))["error"]
    assert missing["code"] == -32602 and missing["data"]["field"] == "_meta"
    handshake = Session()
    dispatcher.handle(handshake, message("initialize", init_params(token)))
    assert dispatcher.handle(handshake, modern("tools/list"))["error"]["code"] == -32600
    assert dispatcher.handle(handshake, message("server/discover"))["error"]["code"] == -32601
    assert dispatcher.handle(handshake, authenticate(token))["error"]["data"]["reason"] == "invalid_params"
    assert dispatcher.handle(connected, authenticate(token))["error"]["data"]["reason"] == "invalid_params"


def test_requests_without_the_credential_are_denied_and_a_refused_one_changes_nothing(dispatcher, token):
    session = Session()
    assert dispatcher.handle(session, modern("tools/list"))["error"]["data"]["reason"] == "denied"
    assert dispatcher.handle(session, authenticate("kd_wrong"))["error"]["data"]["reason"] == "denied"
    bad_audience = dispatcher.handle(session, authenticate(token, {"kind": "owner-private", "x": 1}))
    assert bad_audience["error"]["data"] == {"reason": "invalid_params", "field": "_meta.knowledge.audience.x"}
    assert session.era is None and session.token is None
    assert dispatcher.handle(session, message("initialize", init_params(token)))["result"]["protocolVersion"]


def test_every_request_is_authorized_again(engine, dispatcher, connected):
    assert "result" in dispatcher.handle(connected, modern("tools/call", {"name": "knowledge_grep",
                                                                         "arguments": {"query": "x"}}))
    engine.remove_agent("main")
    reply = dispatcher.handle(connected, modern("tools/call", {"name": "knowledge_grep", "arguments": {"query": "x"}}))
    assert reply["result"]["isError"] is True and tool_answer(reply["result"])["reason"] == "denied"


def test_a_request_may_not_carry_its_own_credential(dispatcher, connected, token):
    reply = dispatcher.handle(connected, modern("tools/list", knowledge={"token": token}))
    assert reply["error"]["data"] == {"reason": "invalid_params", "field": "_meta.knowledge.token"}


@pytest.mark.parametrize("params, field", [
    ({}, "notifications"),
    ({"notifications": []}, "notifications"),
    ({"notifications": {"toolsListChanged": "yes"}}, "notifications.toolsListChanged"),
    ({"notifications": {}, "extra": 1}, "extra"),
])
def test_listen_checks_its_filter(dispatcher, connected, params, field):
    reply = dispatcher.handle(connected, modern("subscriptions/listen", params, request_id="listen-1"))
    assert reply["error"]["data"]["field"] == field and connected.listen is None


def test_listen_acknowledges_what_it_honours_and_only_that(engine, dispatcher, connected):
    ack = dispatcher.handle(connected, modern("subscriptions/listen", {"notifications": {
        "toolsListChanged": True, "promptsListChanged": True}}, request_id="listen-1"))
    assert ack == {"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": {
        "notifications": {"toolsListChanged": True}, "_meta": {SUBSCRIPTION_ID_KEY: "listen-1"}}}
    again = dispatcher.handle(connected, modern("subscriptions/listen", {"notifications": {}}, request_id=2))
    assert again["error"]["data"]["reason"] == "invalid_params"  # one stream at a time
    dispatcher.handle(connected, message("notifications/cancelled", {"requestId": "listen-1"}, None))
    assert connected.listen is None and not engine.changes.watched


def test_listen_is_for_2026_connections_only(dispatcher, token):
    reply = dispatcher.handle(Session(), message("subscriptions/listen", {"notifications": {}}))
    assert reply["error"]["code"] == -32602  # no envelope
    handshake = Session()
    dispatcher.handle(handshake, message("initialize", init_params(token)))
    refused = dispatcher.handle(handshake, modern("subscriptions/listen", {"notifications": {}}))
    assert refused["error"]["code"] == -32600


# --- over a real socket --------------------------------------------------------------------------------------


def modern_peer(server, token: str) -> Peer:
    peer = Peer(server.port)
    assert peer.ask("knowledge/authenticate", json.loads(authenticate(token))["params"])["result"]["authenticated"]
    return peer


def read_until(peer: Peer, request_id) -> tuple[dict, list[dict]]:
    seen = []
    while True:
        received = peer.read()
        if received.get("id") == request_id:
            return received, seen
        seen.append(received)


def test_listen_streams_tool_list_changes_tagged_until_cancelled(engine, server, token):
    peer = modern_peer(server, token)
    try:
        peer.socket.sendall(modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, "s1"))
        assert peer.read()["method"] == ACKNOWLEDGED  # first, before anything tagged with its id
        set_writes(engine, False)
        assert peer.read() == {"jsonrpc": "2.0", "method": LIST_CHANGED, "params": {
            "_meta": {SUBSCRIPTION_ID_KEY: "s1"}}}
        listed, seen = read_until(peer, peer.socket.sendall(modern("tools/list", request_id=2)) or 2)
        assert {tool["name"] for tool in listed["result"]["tools"]} == READ_TOOLS and seen == []

        peer.socket.sendall(message("notifications/cancelled", {"requestId": "s1"}, None))
        wait_for(lambda: not engine.changes.watched, timeout=60)  # the stream ended; the request is not answered
        set_writes(engine, True)
        wait_for(lambda: settled(engine), timeout=60)
        peer.socket.sendall(modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, "s2"))
        _, seen = read_until(peer, peer.socket.sendall(modern("tools/list", request_id=3)) or 3)
        assert [note["params"]["_meta"][SUBSCRIPTION_ID_KEY] for note in seen] == ["s2"]  # its ack alone
        set_writes(engine, False)
        assert peer.read()["params"]["_meta"] == {SUBSCRIPTION_ID_KEY: "s2"}
    finally:
        peer.close()
    wait_for(lambda: not engine.changes.watched, timeout=60)  # a closed connection's stream ends with it


def test_a_2026_connection_hears_nothing_outside_a_stream(engine, server, token):
    peer = modern_peer(server, token)
    try:
        peer.ask("tools/list", {"_meta": envelope()}, request_id=2)
        assert not engine.changes.watched  # listing starts no watch in this revision
        engine.settings.save(dataclasses.replace(engine.settings.current(), writes_enabled=False))
        _, seen = read_until(peer, peer.socket.sendall(message("ping", request_id=3)) or 3)
        assert seen == []
    finally:
        peer.close()
