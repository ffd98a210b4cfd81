"""MCP ``notifications/cancelled`` on the socket: a waiting request is never run, a running one is not answered.

Each connection holds a call with ``test/hold`` until the test releases it, so what waits behind it, and
when, is fixed; the server's ``handle`` is wrapped to tell the test once a cancellation has been dealt with
(the socket acts on one before handing it to the dispatcher, which ignores it).
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Iterator

import pytest

from engine.wire.protocol import cancelled_request, request_key
from engine.wire.server import MAX_WAITING, EngineServer, _Connection
from tests.engine.wire.test_server import Client, init_params, message
from tests.engine.wire.test_server_bounds import PausableTransport

WAIT_S = 10


class Held:
    """``test/hold``: runs until released; ``started`` is set once it runs."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, session, params) -> dict:
        self.started.set()
        return {"held": self.release.wait(WAIT_S)}


class Cancellations:
    """Counts the cancellations the server has dealt with, for the test to wait on."""

    def __init__(self, running: EngineServer) -> None:
        self._handle = running.dispatcher.handle
        self._count = 0
        self._changed = threading.Condition()
        running.dispatcher.handle = self.handle

    def handle(self, session, data: bytes):
        reply = self._handle(session, data)
        if b"notifications/cancelled" in data:
            with self._changed:
                self._count += 1
                self._changed.notify_all()
        return reply

    def wait_for(self, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self._count >= count, WAIT_S), \
                f"{count} cancellations were sent, {self._count} reached the engine while the call ran"


@pytest.fixture
def held() -> Held:
    return Held()


@pytest.fixture
def running(engine, held) -> Iterator[EngineServer]:
    server = EngineServer(engine, port=0, workers=4)
    server.dispatcher.register("test/hold", held)
    server.dispatcher.register("test/echo", lambda session, params: {"echo": params.get("n")})
    server.start()
    yield server
    held.release.set()
    server.stop()


@pytest.fixture
def token(engine) -> str:
    return engine.add_agent("main", owner=True)


def connect(running: EngineServer, token: str) -> Client:
    client = Client.tcp(running)
    assert "result" in client.request("initialize", init_params(token), request_id="init")
    client.sock.settimeout(WAIT_S)
    return client


def send(client: Client, *lines: bytes) -> None:
    client.file.write(b"".join(lines))
    client.file.flush()


def cancel(request_id, **extra) -> bytes:
    return message("notifications/cancelled", {"requestId": request_id, **extra}, request_id=None)


def replies_until(client: Client, last_id) -> list[dict]:
    """Every reply up to and including the one for ``last_id``."""
    replies = []
    while not replies or replies[-1].get("id") != last_id:
        replies.append(json.loads(client.file.readline()))
    return replies


def save(request_id, write_id: str, title: str) -> bytes:
    return message("tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": write_id, "type": "note", "title": title, "body": "Written over the socket."}}, request_id)


def titles_found(client: Client, query: str) -> list[str]:
    hits = client.request("memory/search", {"query": query}, request_id="search")["result"]["hits"]
    return [hit["title"] for hit in hits]


def test_a_waiting_request_that_is_cancelled_never_runs_and_is_never_answered(running, held, token):
    client = connect(running, token)
    seen = Cancellations(running)
    try:
        assert client.request("tools/call", {"name": "knowledge_save_page", "arguments": {
            "requestId": "w0", "type": "note", "title": "Kept note", "body": "Written first."}},
            request_id=0)["result"]["isError"] is False
        send(client, message("test/hold", request_id=1))
        assert held.started.wait(WAIT_S)
        send(client, save(2, "w2", "Cancelled note"), cancel(2, reason="the user gave up"))
        seen.wait_for(1)
        held.release.set()
        send(client, message("test/echo", {"n": 3}, request_id=3))  # runs after whatever was before it
        assert [reply["id"] for reply in replies_until(client, 3)] == [1, 3]
        assert titles_found(client, "note") == ["Kept note"]
        # The client may send the write again (writes are idempotent by their requestId): it is saved once.
        assert client.request("tools/call", {"name": "knowledge_save_page", "arguments": {
            "requestId": "w2", "type": "note", "title": "Cancelled note", "body": "Written over the socket."}},
            request_id=4)["result"]["isError"] is False
        assert sorted(titles_found(client, "note")) == ["Cancelled note", "Kept note"]
    finally:
        client.close()


def test_a_running_request_that_is_cancelled_finishes_unanswered_and_the_next_is_answered(running, held, token):
    client = connect(running, token)
    seen = Cancellations(running)
    try:
        send(client, message("test/hold", request_id=1))
        assert held.started.wait(WAIT_S)
        send(client, cancel(1))
        seen.wait_for(1)
        held.release.set()
        send(client, message("test/echo", {"n": 2}, request_id=2))  # waits for the held call to finish
        assert replies_until(client, 2) == [{"jsonrpc": "2.0", "id": 2, "result": {"echo": 2}}]
        assert client.request("ping", request_id=3) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    finally:
        client.close()


def test_a_cancellation_naming_no_request_changes_nothing(running, held, token):
    """Ids match as JSON values: "1" is not 1, nor are 1.0 and true; a malformed cancellation is ignored."""
    client = connect(running, token)
    seen = Cancellations(running)
    while_running = [cancel("1"), cancel(1.0), cancel(True), cancel(None), cancel(99),
                     message("notifications/cancelled", {}, request_id=None)]
    while_waiting = [cancel("2"), cancel(99)]
    try:
        send(client, message("test/hold", request_id=1))
        assert held.started.wait(WAIT_S)
        send(client, *while_running)
        send(client, message("test/echo", {"n": 2}, request_id=2), *while_waiting,
             message("notifications/cancelled", {"requestId": {"id": 2}}, request_id=None))
        seen.wait_for(len(while_running) + len(while_waiting))
        held.release.set()
        assert replies_until(client, 2) == [{"jsonrpc": "2.0", "id": 1, "result": {"held": True}},
                                            {"jsonrpc": "2.0", "id": 2, "result": {"echo": 2}}]
        send(client, cancel(3))  # an answered request
        assert client.request("test/echo", {"n": 3}, request_id=3)["result"] == {"echo": 3}
    finally:
        client.close()


def test_a_cancelled_request_between_others_leaves_them_and_their_order(running, held, token):
    client = connect(running, token)
    seen = Cancellations(running)
    try:
        send(client, message("test/hold", request_id=1))
        assert held.started.wait(WAIT_S)
        send(client, message("test/echo", {"n": 2}, request_id=2), message("ping", request_id="p"),
             message("test/echo", {"n": 3}, request_id=3), message("test/echo", {"n": 4}, request_id=4),
             cancel(3), cancel(3))  # the second names nothing any more
        seen.wait_for(2)
        held.release.set()
        assert [reply["id"] for reply in replies_until(client, 4)] == [1, 2, "p", 4]
    finally:
        client.close()


def connection_holding(*lines: bytes) -> _Connection:
    connection = _Connection(memoryview(bytearray(4096)), limit=1_000_000)
    connection.connection_made(PausableTransport())
    data = b"".join(lines)
    connection.get_buffer(-1)[:len(data)] = data
    connection.buffer_updated(len(data))
    return connection


def test_a_waiting_line_is_taken_out_of_the_buffer_and_the_rest_come_in_order():
    lines = [message("test/echo", request_id=n) for n in (1, 2, 3)]
    connection = connection_holding(*lines, cancel(2), b"{partial")
    assert connection.take_ahead(1024, lambda line, first: cancelled_request(line) is not None) == cancel(2)
    assert connection.drop_waiting((int, 2), request_key) is True
    assert connection.drop_waiting((int, 2), request_key) is False  # taken already
    assert connection.drop_waiting((str, "1"), request_key) is False

    async def rest() -> list[bytes]:
        taken = [await connection.next_line(), await connection.next_line()]
        connection.eof_received()
        return taken + [await connection.next_line()]

    assert asyncio.run(rest()) == [lines[0], lines[2], b"{partial"]


def test_no_more_than_max_waiting_lines_are_looked_at_behind_a_call():
    """A flood of empty lines costs the bookkeeping of MAX_WAITING, not one entry per line."""
    connection = connection_holding(b"\n" * 3000)
    assert connection.take_ahead(1024, lambda line, first: False) is None
    assert len(connection._waiting) == MAX_WAITING and connection.stalled


def test_one_connection_cannot_cancel_another_connections_request(running, held, token):
    client, other = connect(running, token), connect(running, token)
    seen = Cancellations(running)
    try:
        send(client, message("test/hold", request_id=1))
        assert held.started.wait(WAIT_S)
        send(client, message("test/echo", {"n": 2}, request_id=2))
        send(other, cancel(1), cancel(2))
        seen.wait_for(2)
        assert other.request("ping", request_id=1)["result"] == {}
        held.release.set()
        assert [reply["id"] for reply in replies_until(client, 2)] == [1, 2]
    finally:
        client.close()
        other.close()


@pytest.mark.parametrize("line, key", [
    (message("tools/call", request_id=1), (int, 1)),
    (message("tools/call", request_id="1"), (str, "1")),
    (message("tools/call", request_id=None), None),  # a notification
    (message("initialize", request_id=1), None),  # MCP: never cancelled
    (message("operator/subscribe", request_id=1), None),  # it changes the connection, like initialize
    (b'{"jsonrpc": "2.0", "id": null, "method": "tools/call"}\n', None),
    (b"{not json\n", None),
])
def test_a_request_is_matched_by_its_id_as_a_json_value(line, key):
    assert request_key(line) == key
    assert cancelled_request(cancel(1)) == (int, 1) and cancelled_request(cancel("1")) == (str, "1")
    assert cancelled_request(cancel(True)) is None and cancelled_request(cancel(1.0)) is None
    assert cancelled_request(message("notifications/cancelled", {"requestId": 1}, request_id=5)) is None  # a request
