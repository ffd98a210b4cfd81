"""``subscriptions/listen`` over Streamable HTTP (MCP 2026-07-28): the POST answered as an event stream, with the
official SDK's client and raw HTTP; cancelling, revocation, the server stopping, and the cap on open streams."""

from __future__ import annotations

import dataclasses
import http.client
import json
import socket

import anyio

from engine.wire.http import ENDPOINT, HttpServer
from engine.wire.modern import MODERN_VERSIONS
from tests.engine.wire import test_http as http_tests
from tests.helpers import wait_for

SMALL = http_tests.SMALL
serve, token = http_tests.serve, http_tests.token  # the HTTP tests' fixtures
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}


def modern(method: str, params: dict | None = None, request_id: object = 1) -> bytes:
    body = {"jsonrpc": "2.0", "method": method, "params": {
        **(params or {}), "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                    "io.modelcontextprotocol/clientCapabilities": {}}}}
    if request_id is not None:
        body["id"] = request_id
    return json.dumps(body).encode()


def listen_body(request_id: object = "listen-1", **wanted: object) -> bytes:
    return modern("subscriptions/listen", {"notifications": wanted or {"toolsListChanged": True}}, request_id)


def post(server: HttpServer, body: bytes, token: str | None, headers: dict | None = None,
         method: str = "POST") -> tuple[int, dict, bytes]:
    with Stream(server, body, token, headers, method) as response:
        return response.status, response.headers, response.raw.read()


class Stream:
    """One request whose response is read as it comes: ``events()`` yields each Server-Sent Event's message."""

    def __init__(self, server: HttpServer, body: bytes, token: str | None, headers: dict | None = None,
                 method: str = "POST") -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)  # a hang guard
        sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers if headers is not None else HEADERS)
        self.connection.request(method, ENDPOINT, body=body if method == "POST" else None, headers=sent)
        self.raw = self.connection.getresponse()
        self.status = self.raw.status
        self.headers = {k.lower(): v for k, v in self.raw.getheaders()}

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.connection.close()

    def next_event(self) -> dict | None:
        """The next message on the stream; None once the stream has ended."""
        data: list[bytes] = []
        while True:
            line = self.raw.readline()
            if not line:
                return None
            line = line.rstrip(b"\r\n")
            if line.startswith(b"data: "):
                data.append(line[len(b"data: "):])
            elif not line and data:
                return json.loads(b"\n".join(data))


def open_session(server: HttpServer, token: str) -> str:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
    status, headers, _ = post(server, json.dumps(initialize).encode(), token, {})
    assert status == 200
    return headers["mcp-session-id"]


def switch_writes(engine, enabled: bool) -> None:
    engine.settings.save(dataclasses.replace(engine.settings.current(), writes_enabled=enabled))


def test_the_sdk_client_left_to_choose_listens_over_http_and_hears_the_tool_list_change(serve, token, engine):
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.client.subscriptions import ToolsListChanged

    server = serve()
    seen: dict = {}

    async def session() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as web:
            async with Client(streamable_http_client(server.url, http_client=web), mode="auto") as client:
                seen["version"] = client.protocol_version
                seen["before"] = {tool.name for tool in (await client.list_tools()).tools}
                async with client.listen(tools_list_changed=True) as stream:
                    seen["honoured"] = stream.honored
                    seen["open"] = len(server.app.listens.open)
                    await anyio.to_thread.run_sync(switch_writes, engine, False)
                    with anyio.fail_after(60):  # a hang guard: the event comes once the engine saved the settings
                        seen["event"] = await stream.__anext__()
                    seen["after"] = {tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools}
                with anyio.fail_after(60):  # leaving the listen closes its response; the server lets it go
                    while server.app.listens.open:
                        await anyio.sleep(0.01)

    anyio.run(session)
    assert seen["version"] == MODERN_VERSIONS[-1] and seen["honoured"].tools_list_changed is True
    assert seen["open"] == 1 and isinstance(seen["event"], ToolsListChanged)
    assert "knowledge_save_page" in seen["before"] and seen["after"] < seen["before"]
    assert "knowledge_save_page" not in seen["after"]


def test_the_listen_post_is_answered_as_an_event_stream_of_tagged_notifications(serve, token, engine):
    server = serve()
    with Stream(server, listen_body(toolsListChanged=True, noSuchKind=True), token) as stream:
        assert stream.status == 200 and stream.headers["content-type"].startswith("text/event-stream")
        assert "mcp-session-id" not in stream.headers
        acknowledged = stream.next_event()
        assert acknowledged == {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
            "notifications": {"toolsListChanged": True}, "_meta": {SUBSCRIPTION_ID: "listen-1"}}}
        switch_writes(engine, False)
        changed = stream.next_event()
        assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                           "params": {"_meta": {SUBSCRIPTION_ID: "listen-1"}}}
        switch_writes(engine, False)  # the list is as it was told: nothing is sent for it
        switch_writes(engine, True)
        assert stream.next_event()["method"] == "notifications/tools/list_changed"
        server.stop()  # the server ends the stream gracefully: the listen request's result is its last message
        assert stream.next_event() == {"jsonrpc": "2.0", "id": "listen-1", "result": {
            "_meta": {SUBSCRIPTION_ID: "listen-1"}, "resultType": "complete"}}
        assert stream.next_event() is None
    assert server.app.listens.open == set()


def test_a_listen_that_cannot_be_opened_is_answered_as_json_and_holds_nothing(serve, token, engine):
    server = serve()
    status, _, body = post(server, listen_body(), token, {**HEADERS, "Accept": "application/json"})
    assert status == 406 and json.loads(body)["id"] == "listen-1"
    status, headers, body = post(server, modern("subscriptions/listen", {"notifications": []}, "l"), token)
    error = json.loads(body)["error"]
    assert status == 400 and headers["content-type"] == "application/json"
    assert error["code"] == -32602 and error["data"]["field"] == "notifications"
    # sent as a notification it is one: acknowledged with 202, and nothing opens
    assert post(server, modern("subscriptions/listen", {"notifications": {}}, None), token)[0] == 202
    assert post(server, listen_body(), None)[0] == 401
    assert post(server, listen_body(), "kd_unknown")[0] == 401
    assert server.app.listens.open == set() and engine.changes.watched is False


def test_a_cancelled_stream_ends_unanswered_and_only_its_credential_can_cancel_it(serve, token, engine):
    server = serve()
    other = engine.add_agent("other", owner=True)
    cancel = modern("notifications/cancelled", {"requestId": "listen-1"}, None)
    cancel_headers = {"MCP-Protocol-Version": "2026-07-28"}
    with Stream(server, listen_body(), token) as stream:
        assert stream.next_event()["method"] == "notifications/subscriptions/acknowledged"
        assert post(server, cancel, other, cancel_headers)[0] == 202  # another credential names nothing here
        assert post(server, modern("notifications/cancelled", {"requestId": 1}, None), token,
                    cancel_headers)[0] == 202  # nor does another id (1 is not "listen-1")
        assert len(server.app.listens.open) == 1 and not next(iter(server.app.listens.open)).ended.is_set()
        assert post(server, cancel, token, cancel_headers)[0] == 202
        assert stream.next_event() is None  # the stream ended, and the request was not answered
    wait_for(lambda: not server.app.listens.open)
    assert engine.changes.watched is False  # its subscriptions are closed


def test_a_revoked_credentials_stream_ends_with_denied(serve, token, engine):
    server = serve()
    other = engine.add_agent("other", owner=True)
    with Stream(server, listen_body(), other) as doomed, Stream(server, listen_body("keeps"), token) as kept:
        assert doomed.next_event()["method"] == "notifications/subscriptions/acknowledged"
        assert kept.next_event()["method"] == "notifications/subscriptions/acknowledged"
        engine.remove_agent("other")
        ended = doomed.next_event()
        assert ended["id"] == "listen-1" and ended["error"]["data"]["reason"] == "denied"
        assert doomed.next_event() is None
        wait_for(lambda: len(server.app.listens.open) == 1)
        switch_writes(engine, False)  # the other credential's stream goes on
        assert kept.next_event()["params"]["_meta"] == {SUBSCRIPTION_ID: "keeps"}


def test_open_streams_are_capped_with_503(serve, token, engine):
    server = serve(dataclasses.replace(SMALL, max_connections=4))  # streams: half the connections
    assert server.app.stream_limit == 2
    streaming, idle = open_session(server, token), open_session(server, token)
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw, \
            Stream(server, listen_body(), token) as first:
        raw.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer "
                    f"{token}\r\nMcp-Session-Id: {streaming}\r\n\r\n".encode())
        assert first.next_event()["method"] == "notifications/subscriptions/acknowledged"
        head = b""
        while b": open\n\n" not in head:  # the 2025 session's GET stream is the second stream held
            head += raw.recv(65536)
        status, _, body = post(server, listen_body("third"), token)
        assert status == 503 and json.loads(body)["error"]["data"]["reason"] == "limit_exceeded"
        assert json.loads(body)["id"] == "third"
        status, _, body = post(server, b"", token, {"Mcp-Session-Id": idle, "Accept": "text/event-stream"},
                               method="GET")  # a 2025 session's stream counts under the same cap
        assert status == 503 and json.loads(body)["error"]["data"]["limit"] == 2
        post(server, modern("notifications/cancelled", {"requestId": "listen-1"}, None), token,
             {"MCP-Protocol-Version": "2026-07-28"})
        assert first.next_event() is None
        wait_for(lambda: not server.app.listens.open)
        with Stream(server, listen_body("again"), token) as again:  # a closed stream's room is free again
            assert again.next_event()["params"]["_meta"] == {SUBSCRIPTION_ID: "again"}


def test_a_quiet_stream_sends_keepalive_comments(serve, token):
    server = serve()
    server.app.listens.keepalive_s = 0.05  # nothing else happens, so what follows the acknowledgement is a comment
    with Stream(server, listen_body(), token) as stream:
        assert stream.next_event()["method"] == "notifications/subscriptions/acknowledged"
        assert stream.raw.readline() == b": keepalive\n" and stream.raw.readline() == b"\n"
