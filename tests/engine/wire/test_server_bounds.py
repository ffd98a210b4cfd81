"""The socket is bounded before authentication, and a malformed message never ends a connection.

Real sockets against an ``EngineServer`` whose ``SocketBounds`` are shrunk, so every bound is
reached in moments; the figures at full size are in docs/benchmarks/socket-bounds.md.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest

from engine.wire.server import EngineServer, LineTooLong, SocketBounds, _Connection
from engine.wire.messages import UNAUTHENTICATED_MESSAGE_BYTES
from tests.engine.wire.test_server import Client, init_params, message
from tests.helpers import tool_answer, wait_for


@pytest.fixture
def serve(engine):
    """Start a server with the given bounds (stopped after the test)."""
    started: list[EngineServer] = []

    def start(**bounds) -> EngineServer:
        running = EngineServer(engine, port=0, workers=4, bounds=SocketBounds(**bounds))
        running.start()
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


@pytest.fixture
def token(engine) -> str:
    return engine.add_agent("main", owner=True)


def connect(server: EngineServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def read_to_end(sock: socket.socket) -> list[dict]:
    """Every reply until the engine closes the connection."""
    with sock.makefile("rb") as replies:
        return [json.loads(line) for line in replies]


def initialized(server: EngineServer, token: str) -> Client:
    client = Client.tcp(server)
    assert "result" in client.request("initialize", init_params(token))
    return client


def ping_on_a_new_connection(server: EngineServer) -> dict:
    client = Client.tcp(server)
    try:
        return client.request("ping")
    finally:
        client.close()


# --- the connection cap -----------------------------------------------------------------------------


def test_the_cap_refuses_one_connection_more_with_an_error_and_frees_a_slot_on_close(serve, token):
    server = serve(max_connections=2)
    first = initialized(server, token)
    second = Client.tcp(server)  # not initialized: it counts as well
    assert second.request("ping")["result"] == {}
    refused = connect(server)
    replies = read_to_end(refused)  # the error, then the end of the stream
    assert [reply["error"]["data"] for reply in replies] == [{"reason": "limit_exceeded", "limit": 2}]
    assert replies[0]["id"] is None and "2 connections" in replies[0]["error"]["message"]
    assert first.request("ping")["result"] == {} and second.request("ping")["result"] == {}  # still served
    first.close()
    wait_for(lambda: "result" in ping_on_a_new_connection(server))
    second.close()


# --- the initialize deadline and the idle timeout ---------------------------------------------------------


def test_a_connection_that_does_not_initialize_in_time_is_told_and_closed(serve):
    server = serve(initialize_timeout_s=0.5)
    silent = connect(server)
    began = time.monotonic()
    replies = read_to_end(silent)
    assert 0.4 < time.monotonic() - began < 5
    assert replies[0]["error"]["data"]["reason"] == "limit_exceeded"
    assert "did not initialize within 0.5 s" in replies[0]["error"]["message"]


def test_pinging_does_not_extend_the_initialize_deadline(serve):
    server = serve(initialize_timeout_s=0.5)
    client = Client.tcp(server)
    began = time.monotonic()
    answered = 0
    while time.monotonic() - began < 5:
        client.file.write(message("ping"))
        client.file.flush()
        reply = json.loads(client.file.readline() or b"null")
        if reply is None or "error" in reply:
            break
        answered += 1
        time.sleep(0.05)
    assert answered > 0 and time.monotonic() - began < 2
    client.close()


def test_an_initialized_connection_outlives_the_deadline_and_an_idle_one_is_closed_without_a_message(serve, token):
    server = serve(initialize_timeout_s=0.3, idle_timeout_s=0.6)
    busy, idle = initialized(server, token), initialized(server, token)
    began = time.monotonic()
    while time.monotonic() - began < 1.5:  # past the deadline and the idle timeout, never quiet for long
        assert busy.request("ping")["result"] == {}
        time.sleep(0.1)
    assert idle.file.readline() == b""  # closed after 0.6 s quiet, with no stale error to misread later
    busy.close()
    idle.close()


# --- line limits ----------------------------------------------------------------------------------


def test_an_unauthenticated_oversize_line_is_refused_and_closed(serve):
    server = serve()
    with_newline = connect(server)
    with_newline.sendall(b'{"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {"pad": "'
                         + b"a" * UNAUTHENTICATED_MESSAGE_BYTES + b'"}}\n')
    replies = read_to_end(with_newline)
    assert [(r["id"], r["error"]["data"]) for r in replies] == [
        (4, {"reason": "limit_exceeded", "limit": UNAUTHENTICATED_MESSAGE_BYTES})]
    assert "before initialize" in replies[0]["error"]["message"]

@pytest.mark.parametrize("arguments, field", [
    ({"requestId": "big", "type": "note", "title": "Big", "body": "\u4e2d" * 2_000}, "body"),
    ({"requestId": "big", "items": [{"text": "Small.", "claimKind": "fact", "excerpt": "Small."},
                                    {"text": "\u00e9" * 2_000, "claimKind": "fact", "excerpt": "x"}]}, "items[1].text"),
])
def test_an_initialized_oversize_tool_call_is_a_tool_error_naming_the_argument(serve, token, engine, arguments, field):
    """A call within every argument's own limit whose message passes the connection's: the agent's model
    reads which argument made it too long, and the limit; nothing is written."""
    server = serve(max_message_bytes=8_000, unauthenticated_message_bytes=4_000)
    client = initialized(server, token)
    name = "knowledge_save_page" if "body" in arguments else "knowledge_remember"
    client.file.write(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                                  "params": {"name": name, "arguments": arguments}}).encode() + b"\n")
    client.file.flush()
    replies = read_to_end(client.sock)
    assert [reply["id"] for reply in replies] == [9]
    refused = tool_answer(replies[0]["result"])
    assert (refused["reason"], refused["field"], refused["limit"]) == ("limit_exceeded", field, 8_000)
    assert refused["message"].startswith(f"{field} is too long to send")
    again = initialized(server, token)
    found = again.request("tools/call", {"name": "knowledge_grep", "arguments": {"query": "Big Small"}})
    assert tool_answer(found["result"])["hits"] == []
    again.close()


def test_an_initialized_oversize_message_names_the_member_it_passed_the_limit_in(serve, token):
    client = initialized(serve(max_message_bytes=8_000, unauthenticated_message_bytes=4_000), token)
    client.file.write(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "memory/search",
                                  "params": {"query": "a" * 9_000}}).encode() + b"\n")
    client.file.flush()
    [reply] = read_to_end(client.sock)
    assert reply["id"] == 3 and reply["error"]["data"] == {
        "reason": "limit_exceeded", "field": "params.query", "limit": 8_000}


def test_a_sender_that_never_stops_is_cut_off_without_being_read(serve):
    """Before initialize the engine reads the limit, answers, drains as much again and closes: a flood
    of 8 MiB lines costs it 128 KiB each, and the sender's writes start failing."""
    endless = connect(serve())
    endless.sendall(b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"pad": "')
    sent, chunk = 0, b"a" * 65536
    with pytest.raises(OSError):  # broken pipe or reset: the engine closed the connection
        while sent < 256 << 20:
            endless.sendall(chunk)
            sent += len(chunk)
    assert sent < 64 << 20  # what the kernel's buffers took before the close, not what the engine read
    endless.close()


def test_a_line_under_the_small_limit_is_served_before_initialize(serve):
    client = Client.tcp(serve())
    assert client.request("ping", {"pad": "a" * (UNAUTHENTICATED_MESSAGE_BYTES - 100)})["result"] == {}
    assert client.request("ping")["result"] == {}
    client.close()


def test_an_initialized_connection_may_send_megabytes(serve, token):
    client = initialized(serve(), token)
    for _ in range(2):
        assert client.request("ping", {"pad": "a" * (1 << 20)})["result"] == {}
    client.close()


class PausableTransport(asyncio.Transport):
    """What a connection sees of its transport here: whether it paused reading."""

    def __init__(self) -> None:
        super().__init__()
        self.paused = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return False


def test_a_connection_takes_no_more_than_its_limit_of_a_long_line_then_pauses():
    async def scenario() -> tuple[int, bool, int]:
        connection = _Connection(memoryview(bytearray(4096)), limit=10_000)
        transport = PausableTransport()
        connection.connection_made(transport)
        taken = 0
        while not transport.paused and taken < 2_000_000:  # a transport only reads while not paused
            room = connection.get_buffer(-1)
            room[:] = b"x" * len(room)
            connection.buffer_updated(len(room))
            taken += len(room)
        with pytest.raises(LineTooLong):
            await connection.next_line()
        return taken, transport.paused, len(connection._buffer)

    taken, paused, held = asyncio.run(scenario())
    assert taken == 10_001 and paused  # the limit and the one byte that proved the line too long
    assert held == 0  # and nothing kept after the refusal


def test_pipelined_lines_and_a_last_line_without_newline_are_all_answered(serve):
    sock = connect(serve())
    sock.sendall(message("ping", request_id=1) + message("ping", request_id=2)
                 + b'{"jsonrpc": "2.0", "id": 3, "method": "ping"}')
    sock.shutdown(socket.SHUT_WR)
    assert [reply["id"] for reply in read_to_end(sock)] == [1, 2, 3]


# --- malformed messages keep the connection -------------------------------------------------------------


def test_every_malformed_message_is_answered_and_the_connection_goes_on(serve, token):
    client = initialized(serve(), token)
    lines = [
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"knowledge_save_page","arguments":'
         b'{"requestId":"r1","type":"note","title":"\\ud800"}}}\n', 1, -32602),
        (b'{"jsonrpc":"2.0","id":"\\udfff","method":"ping"}\n', None, -32600),
        (b"[" * 100_000 + b"\n", None, -32700),
        (b'{"jsonrpc":"2.0","id":4,"method":"ping","params":{"a":' + b"[" * 70 + b"]" * 70 + b"}}\n", None, -32700),
        (b"\xff\xfe\n", None, -32700),
    ]
    for line, request_id, code in lines:
        client.file.write(line)
        client.file.flush()
        reply = json.loads(client.file.readline())
        assert reply["id"] == request_id and reply["error"]["code"] == code, reply
    assert client.request("ping", request_id=9) == {"jsonrpc": "2.0", "id": 9, "result": {}}
    client.close()


def test_bounds_must_be_positive_and_consistent():
    with pytest.raises(ValueError):
        SocketBounds(max_connections=0)
    with pytest.raises(ValueError):
        SocketBounds(initialize_timeout_s=-1)
    with pytest.raises(ValueError):
        SocketBounds(unauthenticated_message_bytes=2 << 20, max_message_bytes=1 << 20)
