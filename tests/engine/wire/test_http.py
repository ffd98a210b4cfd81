"""MCP's Streamable HTTP transport: the bounds and checks before any engine work, sessions, the official
SDK's client in memory of a real engine, and `knowledge serve --http` as a process."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from engine.access.authority import AgentCaller
from engine.wire import protocol
from engine.wire.http import ENDPOINT, HttpServer
from engine.wire.modern import MODERN_VERSIONS
from engine.wire.protocol import Dispatcher
from engine.wire.server import SocketBounds
from tests.helpers import page, tool_answer, wait_for

ROOT = Path(__file__).resolve().parents[3]
SMALL = SocketBounds(unauthenticated_message_bytes=2048, max_message_bytes=64 * 1024, initialize_timeout_s=5.0,
                     linger_s=0.5)


@pytest.fixture
def serve(engine, request):
    """Start an HTTP server over a fresh dispatcher; it is stopped, and its thread joined, after the test."""

    def start(bounds: SocketBounds = SMALL) -> HttpServer:
        running = HttpServer(Dispatcher(engine), port=0, bounds=bounds, workers=4)
        running.start()
        request.addfinalizer(lambda: _stopped(running))
        return running

    return start


def _stopped(server: HttpServer) -> None:
    server.stop()
    assert not server._thread.is_alive()


@pytest.fixture
def token(engine) -> str:
    return engine.add_agent("main", owner=True)


def rpc(method: str, params: dict | None = None, request_id: int | None = 1) -> bytes:
    body = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        body["id"] = request_id
    return json.dumps(body).encode()


INITIALIZE = rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "test", "version": "1"}})


def post(server: HttpServer, body: bytes, token: str | None = None, headers: dict | None = None,
         method: str = "POST", path: str = ENDPOINT) -> tuple[int, dict, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    sent.update(headers or {})
    try:
        connection.request(method, path, body=body if method == "POST" else None, headers=sent)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def open_session(server: HttpServer, token: str) -> str:
    status, headers, body = post(server, INITIALIZE, token)
    assert status == 200, body
    assert json.loads(body)["result"]["protocolVersion"] == "2025-11-25"
    return headers["mcp-session-id"]


def within(session: str, **extra: str) -> dict:
    return {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25", **extra}


def save(request_id: str, title: str) -> bytes:
    return rpc("tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": request_id, "type": "note", "title": title, "body": "Saved over HTTP."}})


def titles(server: HttpServer, token: str, session: str) -> list[str]:
    status, _, body = post(server, rpc("tools/call", {"name": "knowledge_grep", "arguments": {"query": "HTTP"}}),
                           token, within(session))
    assert status == 200
    return [hit["title"] for hit in json.loads(body)["result"]["structuredContent"]["hits"]]


# --- the official SDK's client ----------------------------------------------------------------------------


def test_the_official_sdk_client_connects_lists_and_calls_tools(serve, token, engine):
    import httpx2
    from mcp import ClientSession
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    server = serve()
    results: dict = {}

    async def session() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as web:
            async with streamable_http_client(server.url, http_client=web) as (read, write):
                async with ClientSession(read, write) as client:
                    results["initialized"] = await client.initialize()
                    results["tools"] = (await client.list_tools()).tools
                    results["saved"] = await client.call_tool("knowledge_save_page", {
                        "requestId": "r1", "type": "note", "title": "Over HTTP", "body": "Saved by the SDK."})
                    results["found"] = await client.call_tool("knowledge_grep", {"query": "SDK"})
                    results["open"] = [entry["open"] for entry in engine.connections.listed()]
            # Left to choose, the client probes 2026-07-28 first and settles on it.
            async with Client(streamable_http_client(server.url, http_client=web), mode="auto") as client:
                results["auto"] = client.protocol_version
                results["auto tools"] = len((await client.list_tools()).tools)
                results["auto found"] = await client.call_tool("knowledge_grep", {"query": "SDK"})

    anyio.run(session)
    assert results["initialized"].server_info.name == "knowledge-desk"
    assert {tool.name for tool in results["tools"]} >= {"knowledge_grep", "knowledge_save_page"}
    assert results["saved"].is_error is False and results["saved"].structured_content["revision"] == 1
    assert [hit["title"] for hit in results["found"].structured_content["hits"]] == ["Over HTTP"]
    assert results["open"] == [1]  # the session shows among the agent's connections while it is held
    assert results["auto"] == MODERN_VERSIONS[-1] and results["auto tools"] == len(results["tools"])
    assert [hit["title"] for hit in results["auto found"].structured_content["hits"]] == ["Over HTTP"]
    assert server.app.sessions.by_id == {}  # the client ended both sessions with DELETE
    assert [entry["open"] for entry in engine.connections.listed()] == [0]


def test_fastmcps_client_connects_with_the_token_as_its_auth(serve, token):
    fastmcp = pytest.importorskip("fastmcp")  # a real client the suite has where its test extras include it

    server = serve()
    results: dict = {}

    async def session() -> None:
        async with fastmcp.Client(server.url, auth=token) as client:
            results["tools"] = {tool.name for tool in await client.list_tools()}
            results["saved"] = await client.call_tool("knowledge_save_page", {
                "requestId": "f1", "type": "note", "title": "From fastmcp", "body": "Saved over HTTP."})

    anyio.run(session)
    assert "knowledge_grep" in results["tools"] and results["saved"].structured_content["revision"] == 1


# --- before any engine work: origin, host, size, time -----------------------------------------------------


@pytest.mark.parametrize("origin", ["http://evil.example", "https://127.0.0.1.evil.example", "null",
                                    "file://", "chrome-extension://abc"])
def test_a_foreign_origin_gets_403_and_nothing_runs(serve, token, origin):
    server = serve()
    session = open_session(server, token)
    status, _, body = post(server, save("foreign", "From a web page over HTTP"), token,
                           within(session, Origin=origin))
    assert status == 403 and json.loads(body)["error"]["data"]["reason"] == "denied"
    status, _, _ = post(server, INITIALIZE, token, {"Origin": origin})
    assert status == 403
    assert titles(server, token, session) == []  # nothing was saved
    assert len(server.app.sessions.by_id) == 1  # and the refused initialize opened no session


@pytest.mark.parametrize("origin", ["http://localhost:5173", "http://127.0.0.1", "http://[::1]:8080"])
def test_a_loopback_origin_or_none_is_accepted(serve, token, origin):
    server = serve()
    status, _, _ = post(server, INITIALIZE, token, {"Origin": origin})
    assert status == 200


def test_a_foreign_host_header_is_refused_while_bound_to_loopback(serve, token):
    server = serve()  # a DNS rebinding page reaches 127.0.0.1 under its own name
    status, _, _ = post(server, INITIALIZE, token, {"Host": f"rebound.example:{server.port}"})
    assert status == 421
    # nor is a Host that only a lenient parser reads as loopback's
    for host in ("localhost:abc", f"localhost:{server.port}, rebound.example", "[::1]x", "localhost:99999",
                 "localhost@rebound.example", "localhost/x"):
        assert post(server, INITIALIZE, token, {"Host": host})[0] == 421, host
    for origin in ("http://localhost:abc", "http://localhost:99999"):
        assert post(server, INITIALIZE, token, {"Origin": origin})[0] == 403, origin
    assert server.app.sessions.by_id == {}
    assert post(server, INITIALIZE, token, {"Host": f"[::1]:{server.port}"})[0] == 200


def test_oversized_bodies_are_refused_before_authentication(serve, token, engine, monkeypatch):
    server = serve()
    checked: list[object] = []
    authenticate = engine.registry.authenticate
    monkeypatch.setattr(engine.registry, "authenticate", lambda value: checked.append(value) or authenticate(value))
    padded = rpc("initialize", {"protocolVersion": "2025-11-25", "pad": "x" * SMALL.unauthenticated_message_bytes})
    for credential in (None, "kd_wrong", token):
        status, headers, body = post(server, padded, credential)
        assert status == 413 and headers["connection"] == "close"
        assert json.loads(body)["error"]["data"] == {"reason": "limit_exceeded",
                                                     "limit": SMALL.unauthenticated_message_bytes}
    assert checked == []  # no credential was looked at
    session = open_session(server, token)
    checked.clear()
    big = save("big", "x" * SMALL.max_message_bytes)
    status, _, body = post(server, big, None, within(session))  # within a session: 8 MiB (here 64 KiB)
    assert status == 413 and json.loads(body)["error"]["data"]["limit"] == SMALL.max_message_bytes
    assert checked == []
    # Under the session's limit, a message longer than the opening one is served.
    middle = save("middle", "Middle over HTTP " + "y" * (SMALL.unauthenticated_message_bytes * 2))
    status, _, body = post(server, middle, token, within(session))
    assert status == 200 and json.loads(body)["result"]["isError"] is True  # the title's own limit, not HTTP's
    assert tool_answer(json.loads(body)["result"])["reason"] == "limit_exceeded"


def test_an_oversize_tool_call_with_a_credential_is_a_tool_error_naming_the_argument(serve, token):
    """Within every argument's own limit, beyond the session's message limit (3 bytes a character as UTF-8):
    read through and answered as a tool error the agent's model reads; nothing is saved."""
    server = serve()
    session = open_session(server, token)
    big = json.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "knowledge_save_page", "arguments": {
        "requestId": "big", "type": "note", "title": "Big over HTTP", "body": "\u4e2d" * 30_000}}, "id": 7},
        ensure_ascii=False).encode()
    assert len(big) > SMALL.max_message_bytes
    status, _, body = post(server, big, token, within(session))
    assert status == 200 and json.loads(body)["id"] == 7
    refused = tool_answer(json.loads(body)["result"])
    assert refused == {"reason": "limit_exceeded", "field": "body", "limit": SMALL.max_message_bytes,
                       "size": len(big), "message": refused["message"]}
    assert titles(server, token, session) == []  # nothing was saved, and the session goes on
    # A single exchange (MCP 2026-07-28): the same refusal, in that revision's shape.
    status, _, body = post(server, big, token, {"MCP-Protocol-Version": "2026-07-28"})
    result = json.loads(body)["result"]
    assert status == 200 and result["resultType"] == "complete" and tool_answer(result) == refused
    # A method that is not a tool call: its JSON-RPC error names the member.
    search = rpc("memory/search", {"query": "q" * SMALL.max_message_bytes})
    status, _, body = post(server, search, token, within(session))
    assert status == 200 and json.loads(body)["error"]["data"] == {
        "reason": "limit_exceeded", "field": "params.query", "limit": SMALL.max_message_bytes, "size": len(search)}


def test_a_body_that_does_not_arrive_in_time_gets_408(serve, token):
    server = serve(SocketBounds(initialize_timeout_s=0.3, linger_s=0.1))
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:
        raw.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Authorization: Bearer " + token.encode() + b"\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"")
        answer = _read_all(raw)
    assert answer.startswith(b"HTTP/1.1 408 ")


def test_a_connection_that_never_sends_a_whole_head_is_closed(serve):
    server = serve(SocketBounds(initialize_timeout_s=0.3))
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:
        raw.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert _read_all(raw) == b""  # closed without an answer
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:
        raw.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"p" * (17 * 1024))
        assert _read_all(raw).startswith(b"HTTP/1.1 400 ")  # a head growing past 16 KiB is not held


def test_connections_past_the_cap_get_503(serve, token):
    server = serve(SocketBounds(max_connections=2))
    held = [socket.create_connection(("127.0.0.1", server.port), timeout=30)]
    try:
        wait_for(lambda: len(server._server.server_state.connections) == 1, timeout=30)
        assert post(server, INITIALIZE, token)[0] == 200  # the second connection is served
        held.append(socket.create_connection(("127.0.0.1", server.port), timeout=30))
        wait_for(lambda: len(server._server.server_state.connections) == 2, timeout=30)
        status, _, _ = post(server, INITIALIZE, token)
        assert status == 503  # the third is not
    finally:
        for raw in held:
            raw.close()
    wait_for(lambda: not server._server.server_state.connections, timeout=30)
    assert post(server, INITIALIZE, token)[0] == 200


def test_answers_are_not_held_back_by_nagles_algorithm(serve):
    server = serve()  # else each answer's body waits about 40 ms for the client's delayed ACK
    with socket.create_connection(("127.0.0.1", server.port), timeout=30):
        wait_for(lambda: len(server._server.server_state.connections) == 1, timeout=30)
        [connection] = server._server.server_state.connections
        served = connection.transport.get_extra_info("socket")
        assert served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


# --- the credential ---------------------------------------------------------------------------------------


def test_no_or_a_wrong_token_gets_401(serve, token, engine):
    server = serve()
    for credential, headers in ((None, {}), ("kd_not-a-token", {}), (None, {"Authorization": f"Basic {token}"})):
        status, answer, body = post(server, INITIALIZE, credential, headers)
        assert status == 401 and answer["www-authenticate"].startswith("Bearer")
        assert json.loads(body)["error"]["data"]["reason"] == "denied"
        assert json.loads(body)["id"] == 1  # the request it answers
    session = open_session(server, token)
    assert post(server, rpc("tools/list"), None, within(session))[0] == 401
    engine.remove_agent("main")  # revoked: the next request is refused, session or not
    assert post(server, rpc("tools/list"), token, within(session))[0] == 401
    assert server.app.sessions.by_id.keys() == {session}


def test_a_session_answers_only_the_credential_that_opened_it(serve, token, engine):
    server = serve()
    session = open_session(server, token)
    other = engine.add_agent("other", owner=True)
    status, _, body = post(server, rpc("tools/list"), other, within(session))
    assert status == 404 and json.loads(body)["error"]["data"]["reason"] == "not_found"
    assert post(server, b"", other, within(session), method="DELETE")[0] == 404
    assert post(server, rpc("tools/list"), token, within(session))[0] == 200


def test_the_audience_is_taken_from_meta_or_the_headers_and_bounded_by_the_credential(serve, token, engine):
    server = serve()
    sandboxed = rpc("initialize", {"protocolVersion": "2025-11-25", "_meta": {"knowledge": {
        "audience": {"kind": "owner-private", "sandboxed": True}}}})
    status, headers, body = post(server, sandboxed, token)  # _meta.knowledge.audience, as on the socket
    assert status == 200 and json.loads(body)["error"]["data"]["reason"] == "denied"
    assert "mcp-session-id" not in headers and server.app.sessions.by_id == {}
    guest = engine.add_agent("guest")  # no owner authority: owner-private (the default) is denied, per request
    session = open_session(server, guest)
    status, _, body = post(server, rpc("tools/call", {"name": "knowledge_grep", "arguments": {"query": "x"}}),
                           guest, within(session))
    assert tool_answer(json.loads(body)["result"])["reason"] == "denied"
    conversation = {"Knowledge-Audience": "conversation", "Knowledge-Session-Key": "chat:1",
                    "Knowledge-Session-Id": "0b7d3c52-8e0a-4f7e-9a55-2b1d6f0c9e11", "Knowledge-Instance": "laptop"}
    status, headers, _ = post(server, INITIALIZE, guest, conversation)
    session = headers["mcp-session-id"]
    assert server.app.sessions.by_id[session].protocol.audience == {
        "kind": "conversation", "sessionKey": "chat:1", "sessionId": "0b7d3c52-8e0a-4f7e-9a55-2b1d6f0c9e11"}
    assert server.app.sessions.by_id[session].protocol.instance == "laptop"
    status, _, body = post(server, save("c1", "Conversation note over HTTP"), guest, within(session))
    assert json.loads(body)["result"]["isError"] is False
    assert titles(server, guest, session) == ["Conversation note over HTTP"]


def test_the_operator_token_opens_nothing_over_http(serve, token, engine):
    from engine.operator.token_file import ensure_operator_token

    server = serve()
    ensure_operator_token(engine.state)
    operator = engine.state.operator_token.read_text(encoding="utf-8").strip()
    as_operator = rpc("initialize", {"protocolVersion": "2025-11-25",
                                     "_meta": {"knowledge": {"operatorToken": operator}}})
    status, headers, body = post(server, as_operator, token)  # beside an agent's bearer: refused, as on the socket
    assert json.loads(body)["error"]["data"]["reason"] == "invalid_params" and "mcp-session-id" not in headers
    assert post(server, as_operator, operator)[0] == 401  # the operator token is no agent's credential


# --- the 2025 revisions: sessions --------------------------------------------------------------------------


def test_a_session_is_required_after_initialize_and_ends_with_delete(serve, token):
    server = serve()
    status, _, body = post(server, rpc("tools/list", request_id=7), token)
    assert status == 400 and json.loads(body)["id"] == 7
    assert post(server, rpc("tools/list"), token, within("no-such-session"))[0] == 404
    session = open_session(server, token)
    status, _, body = post(server, rpc("notifications/initialized", request_id=None), token, within(session))
    assert (status, body) == (202, b"")
    assert server.app.sessions.by_id[session].protocol.initialized
    status, _, body = post(server, rpc("tools/list", request_id=8), token,
                           within(session, **{"MCP-Protocol-Version": "2025-06-18"}))
    assert status == 400 and json.loads(body)["id"] == 8  # not the version this session negotiated
    assert post(server, b"", token, within(session), method="PUT")[0] == 405
    assert post(server, b"", token, within(session), method="DELETE")[0] == 204
    status, _, body = post(server, rpc("tools/list", request_id="after"), token, within(session))
    assert status == 404 and json.loads(body)["id"] == "after"  # the request it answers, as JSON-RPC asks
    status, _, body = post(server, b"{not json", token, within(session))
    assert status == 404 and json.loads(body)["id"] is None


def test_answers_are_json_or_one_server_sent_event(serve, token):
    server = serve()
    session = open_session(server, token)
    status, headers, body = post(server, rpc("ping", request_id=3), token, within(session, Accept="text/event-stream"))
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    assert body == b'event: message\ndata: {"jsonrpc":"2.0","id":3,"result":{}}\n\n'
    status, headers, body = post(server, rpc("ping", request_id=4), token, within(session))
    assert headers["content-type"] == "application/json" and json.loads(body)["result"] == {}


def test_malformed_messages_are_answered_as_on_the_socket(serve, token):
    server = serve()
    session = open_session(server, token)
    status, _, body = post(server, b"{not json", token, within(session))
    assert status == 400 and json.loads(body)["error"]["code"] == -32700
    status, _, body = post(server, rpc("tools/list"), token, within(session, **{"Content-Type": "text/plain"}))
    assert status == 415
    status, _, body = post(server, rpc("no/such"), token, within(session))
    assert status == 200 and json.loads(body)["error"]["data"]["reason"] == "not_found"
    assert post(server, rpc("ping"), token, path="/other")[0] == 404
    # Before a session too: the dispatcher names what is wrong, and nothing is opened.
    status, _, body = post(server, b'{"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": '
                                   b'{"_meta": {"knowledge": {"instance": "\\ud800"}}}}', token)
    assert status == 200 and json.loads(body)["error"]["data"] == {"reason": "invalid_params",
                                                                   "field": "params._meta.knowledge.instance"}
    status, _, body = post(server, b"[]", token)
    assert status == 400 and json.loads(body)["error"]["code"] == -32600
    assert list(server.app.sessions.by_id) == [session]


def test_idle_sessions_are_forgotten_and_capped(serve, token, engine):
    server = serve(SocketBounds(max_connections=2, idle_timeout_s=3600))
    first, second = open_session(server, token), open_session(server, token)
    status, _, body = post(server, INITIALIZE, token)
    assert status == 503 and json.loads(body)["error"]["data"]["reason"] == "limit_exceeded"
    server.app.sessions.by_id[first].last_used -= 7200  # idle past the timeout: forgotten on the next look
    assert post(server, rpc("tools/list"), token, within(first))[0] == 404
    assert open_session(server, token) and second in server.app.sessions.by_id


def test_the_sdk_client_hears_on_its_stream_that_the_tool_list_changed(serve, token, engine):
    import dataclasses

    import httpx2
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client

    server = serve()
    results: dict = {}

    async def session() -> None:
        changed = anyio.Event()

        async def on_message(incoming) -> None:
            if isinstance(incoming, types.ToolListChangedNotification):
                changed.set()

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as web:
            async with streamable_http_client(server.url, http_client=web) as (read, write):
                async with ClientSession(read, write, message_handler=on_message) as client:
                    initialized = await client.initialize()
                    results["capability"] = initialized.capabilities.tools.list_changed
                    results["before"] = len((await client.list_tools()).tools)
                    opened = next(iter(server.app.sessions.by_id.values()))
                    with anyio.fail_after(60):  # hang guards: the waits are for the stream and the notification
                        while not (opened.streaming and opened.protocol.tool_list is not None):
                            await anyio.sleep(0.01)
                    await anyio.to_thread.run_sync(lambda: engine.settings.save(
                        dataclasses.replace(engine.settings.current(), writes_enabled=False)))
                    with anyio.fail_after(60):
                        await changed.wait()
                    results["after"] = len((await client.list_tools()).tools)

    anyio.run(session)
    assert results["capability"] is True and results["after"] < results["before"]


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")  # in 2026-07-28; this is a 2025 session
def test_the_sdk_client_hears_on_its_stream_of_a_subscribed_record_and_the_list(serve, token, engine):
    """A 2025 session declares resources.subscribe and listChanged: over HTTP, as on the socket, the record it
    subscribed to and the list it read are pushed on its stream when they change, and nothing once it ends."""
    import httpx2
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client

    server = serve()
    owner = AgentCaller(token, {"kind": "owner-private"})
    saved = engine.save_page(owner, page("w1", "Watched over HTTP", "note"))
    watching = len(engine.changes._subscriptions)
    results: dict = {"updated": [], "listed": 0}

    async def session() -> None:
        heard = anyio.Event()

        async def on_message(incoming) -> None:
            if isinstance(incoming, types.ResourceUpdatedNotification):
                results["updated"].append(str(incoming.params.uri))
            elif isinstance(incoming, types.ResourceListChangedNotification):
                results["listed"] += 1
            if results["updated"] and results["listed"]:
                heard.set()

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as web:
            async with streamable_http_client(server.url, http_client=web) as (read, write):
                async with ClientSession(read, write, message_handler=on_message) as client:
                    initialized = await client.initialize()
                    results["capability"] = initialized.capabilities.resources
                    uri = (await client.list_resources()).resources[0].uri
                    await client.subscribe_resource(uri)
                    opened = next(iter(server.app.sessions.by_id.values()))
                    with anyio.fail_after(60):  # hang guard: the wait is for the stream to be open
                        while not opened.streaming:
                            await anyio.sleep(0.01)
                    await anyio.to_thread.run_sync(lambda: engine.save_page(owner, page(
                        "w2", "Watched over HTTP", "note", "Revised.", id=saved["id"], expectedRevision=1)))
                    with anyio.fail_after(60):
                        await heard.wait()
                    results["uri"] = str(uri)

    anyio.run(session)
    assert results["capability"].subscribe and results["capability"].list_changed
    assert results["updated"] == [results["uri"]] and results["listed"] == 1
    assert len(engine.changes._subscriptions) == watching  # the ended session's watches are closed


def test_a_stream_needs_its_session_and_is_one_per_session(serve, token):
    server = serve()
    session = open_session(server, token)
    stream = {"Accept": "text/event-stream"}
    assert post(server, b"", token, stream, method="GET")[0] == 400
    assert post(server, b"", token, within(session, Accept="application/json"), method="GET")[0] == 406
    assert post(server, b"", None, within(session, **stream), method="GET")[0] == 401
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:
        raw.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer "
                    f"{token}\r\nMcp-Session-Id: {session}\r\n\r\n".encode())
        head = b""
        while b": open\n\n" not in head:
            head += raw.recv(65536)
        assert head.startswith(b"HTTP/1.1 200 ") and b"text/event-stream" in head
        assert post(server, b"", token, within(session, **stream), method="GET")[0] == 409
        assert post(server, b"", token, within(session), method="DELETE")[0] == 204
        rest = b""
        while not rest.endswith(b"0\r\n\r\n"):  # the ended session's stream ends (the connection may stay)
            rest += raw.recv(65536)
    assert server.app.sessions.by_id == {}
    session = open_session(server, token)
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:
        raw.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer "
                    f"{token}\r\nMcp-Session-Id: {session}\r\n\r\n".encode())
        while not server.app.sessions.by_id[session].streaming:
            raw.recv(65536)
        server.stop()  # an open stream does not hold the engine up: it ends, and the thread is joined
        assert not server._thread.is_alive()
        _read_all(raw)


# --- 2026-07-28: one exchange, no session ------------------------------------------------------------------


def modern(method: str, params: dict | None = None, version: str = "2026-07-28") -> bytes:
    return rpc(method, {**(params or {}), "_meta": {"io.modelcontextprotocol/protocolVersion": version,
                                                     "io.modelcontextprotocol/clientCapabilities": {}}})


@pytest.mark.parametrize("version", ["2026-12-01", "2099-01-01"])
def test_a_revision_without_sessions_the_dispatcher_does_not_serve_is_refused(serve, token, version):
    server = serve()
    status, _, body = post(server, modern("tools/list", version=version), token,
                           {"MCP-Protocol-Version": version, "Mcp-Method": "tools/list"})
    error = json.loads(body)["error"]
    assert status == 400 and error["code"] == -32022 and error["data"]["requested"] == version
    # a client falls back to one it speaks, or to initialize
    assert error["data"]["supported"] == [*protocol.PROTOCOL_VERSIONS, *MODERN_VERSIONS]


def test_a_single_exchange_runs_through_the_dispatcher_without_a_session(serve, token):
    server = serve()
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
    status, answer, body = post(server, modern("tools/list"), token, headers)
    assert status == 200 and "mcp-session-id" not in answer
    assert {tool["name"] for tool in json.loads(body)["result"]["tools"]} >= {"knowledge_grep"}
    assert server.app.sessions.by_id == {}
    status, _, body = post(server, modern("tools/list", version="2025-11-25"), token, headers)
    assert status == 400 and json.loads(body)["error"]["code"] == -32020  # header and _meta disagree
    # without the envelope, as on the socket: -32602 naming what is missing (the header has nothing to disagree with)
    for params, field in (({}, "_meta"), ({"_meta": {}}, "_meta.io.modelcontextprotocol/protocolVersion")):
        status, _, body = post(server, rpc("tools/list", params), token, headers)
        error = json.loads(body)["error"]
        assert status == 400 and error["code"] == -32602 and error["data"]["field"] == field, body
    status, _, body = post(server, modern("tools/list"), token, {**headers, "Mcp-Method": "tools/call"})
    assert status == 400 and json.loads(body)["error"]["code"] == -32020
    assert post(server, modern("tools/list"), None, headers)[0] == 401
    status, _, body = post(server, modern("no/such"), token, {**headers, "Mcp-Method": "no/such"})
    assert status == 404 and json.loads(body)["error"]["code"] == -32601


def test_an_mcp_name_that_disagrees_with_the_body_is_refused_and_nothing_runs(serve, token, engine):
    """MCP 2026-07-28 mirrors a tools/call's name, a prompts/get's name and a resources/read's URI in
    Mcp-Name, so that what routes or inspects a request by its headers sees what the body will run."""
    server = serve()
    call = modern("tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "named", "type": "note", "title": "Named in the body", "body": "Only the body named it."}})
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
    for name in ("knowledge_grep", "=?base64?a25vd2xlZGdlX2dyZXA=?=", "=?base64?not base64?="):
        status, _, body = post(server, call, token, {**headers, "Mcp-Name": name})
        assert status == 400 and json.loads(body)["error"]["code"] == -32020, body
    status, _, body = post(server, modern("prompts/get", {"name": "knowledge_memory"}), token,
                           {**headers, "Mcp-Method": "prompts/get", "Mcp-Name": "knowledge_index"})
    assert status == 400 and json.loads(body)["error"]["code"] == -32020
    status, _, body = post(server, modern("resources/read", {"uri": "knowledge://record/st_x/pg_y"}), token,
                           {**headers, "Mcp-Method": "resources/read", "Mcp-Name": "knowledge://record/st_x/pg_z"})
    assert status == 400 and json.loads(body)["error"]["code"] == -32020
    grep = modern("tools/call", {"name": "knowledge_grep", "arguments": {"query": "body"}})
    status, _, body = post(server, grep, token, headers)  # refused, nothing was saved
    assert status == 200 and tool_answer(json.loads(body)["result"])["hits"] == []
    # the name as sent, base64-encoded as MCP encodes it, or left out: served
    for name in ("knowledge_save_page", "=?base64?a25vd2xlZGdlX3NhdmVfcGFnZQ==?=", None):
        sent = headers if name is None else {**headers, "Mcp-Name": name}
        status, _, body = post(server, call, token, sent)
        assert status == 200 and tool_answer(json.loads(body)["result"])["requestId"] == "named", body
    status, _, body = post(server, grep, token, headers)
    assert [hit["title"] for hit in tool_answer(json.loads(body)["result"])["hits"]] == ["Named in the body"]


# --- `knowledge serve --http` ---------------------------------------------------------------------------------


def test_serve_http_binds_to_loopback_by_default_and_serves_the_sdk_client(tmp_path):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    added = subprocess.run([sys.executable, "-m", "engine.cli", "--state-dir", str(state), "agents", "add", "main",
                            "--owner", "--json"], check=True, env=env, capture_output=True, cwd=ROOT)
    token = json.loads(added.stdout)["token"]
    serve = subprocess.Popen([sys.executable, "-m", "engine.cli", "--state-dir", str(state), "serve", "--port", "0",
                              "--http", "0"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results: dict = {}
    try:
        wait_for(lambda: (state / "engine.json").exists(), timeout=60)
        info = json.loads((state / "engine.json").read_text())["http"]
        results["listening"] = _listening_address(serve.pid, info["port"])

        async def session() -> None:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as web:
                async with streamable_http_client(info["url"], http_client=web) as (read, write):
                    async with ClientSession(read, write) as client:
                        await client.initialize()
                        results["tools"] = len((await client.list_tools()).tools)

        anyio.run(session)
    finally:
        serve.terminate()
        _, errors = serve.communicate(timeout=60)
    assert serve.returncode == 0, errors
    assert info["host"] == "127.0.0.1" and info["url"] == f"http://127.0.0.1:{info['port']}/mcp"
    assert results["listening"] in (None, "127.0.0.1")  # None: no /proc to read the socket from
    assert results["tools"] >= 5


def test_host_without_http_is_refused(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "engine.cli", "--state-dir", str(tmp_path / "state"), "serve",
                           "--host", "0.0.0.0"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--http PORT" in done.stderr


def _read_all(raw: socket.socket) -> bytes:
    data = b""
    while chunk := raw.recv(65536):
        data += chunk
    return data


def _listening_address(pid: int, port: int) -> str | None:
    """The address a process listens on ``port`` at, from /proc (Linux), or None where there is none."""
    table = Path(f"/proc/{pid}/net/tcp")
    if not table.exists():
        return None
    for line in table.read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:  # LISTEN
            return socket.inet_ntoa(bytes.fromhex(address)[::-1])
    raise AssertionError(f"nothing listens on port {port}")


def test_serve_http_on_a_port_another_program_holds_exits_4_saying_what_to_pass(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "engine.cli", "--state-dir", str(tmp_path / "state"), "serve",
                               "--port", "0", "--http", str(port)], env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 4 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"knowledge: cannot listen for HTTP on 127.0.0.1:{port}: ") and "--http 0" in line
    assert not (tmp_path / "state" / "engine.json").exists()


@pytest.mark.parametrize("headers, field", [
    ({"Knowledge-Audience": "conversation"}, "Knowledge-Session-Key"),
    ({"Knowledge-Audience": "conversation", "Knowledge-Session-Key": "chat:1"}, "Knowledge-Session-Id"),
    ({"Knowledge-Audience": "conversation", "Knowledge-Session-Key": "chat:1", "Knowledge-Session-Id": "chat-1"},
     "Knowledge-Session-Id"),
])
def test_a_conversation_the_headers_name_badly_is_refused_naming_the_header(serve, token, engine, headers, field):
    """Not ``_meta.knowledge.audience.sessionId``: the client sent headers, and the header is what to fix."""
    server = serve()
    guest = engine.add_agent("guest")
    status, answered, body = post(server, INITIALIZE, guest, headers)
    error = json.loads(body)["error"]
    assert status == 400 and error["data"] == {"reason": "invalid_params", "field": field}
    assert json.loads(body)["id"] == 1
    assert field in error["message"] and "mcp-session-id" not in answered and server.app.sessions.by_id == {}
    modern = rpc("tools/call", {"name": "knowledge_grep", "arguments": {"query": "x"}})
    status, _, body = post(server, modern, guest, {**headers, "MCP-Protocol-Version": MODERN_VERSIONS[0]})
    assert status == 400 and json.loads(body)["error"]["data"]["field"] == field
    named = rpc("initialize", {"protocolVersion": "2025-11-25", "_meta": {"knowledge": {"audience": {
        "kind": "conversation", "sessionKey": "chat:1", "sessionId": "0b7d3c52-8e0a-4f7e-9a55-2b1d6f0c9e11"}}}})
    status, answered, _ = post(server, named, guest, headers)  # _meta names the audience: the headers are not read
    assert status == 200 and "mcp-session-id" in answered
