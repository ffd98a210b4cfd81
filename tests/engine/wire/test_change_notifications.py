"""operator/subscribe over a real socket: what changed is pushed, and a client that never reads holds up nothing."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any, Iterator

import pytest

from engine.access.authority import AgentCaller
from engine.operator.token_file import ensure_operator_token, read_operator_token
from engine.service import Engine
from engine.wire.protocol import CHANGED
from engine.wire.server import EngineServer
from tests.helpers import page, wait_for


def line(method: str, params: dict | None = None, request_id: int | None = 1) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        body["id"] = request_id
    return json.dumps(body).encode() + b"\n"


class Peer:
    """One client connection, read line by line."""

    def __init__(self, port: int, *, receive_buffer: int | None = None) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:  # set before connecting, so the window the engine sees is small
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.socket.settimeout(30)
        self.socket.connect(("127.0.0.1", port))
        self.lines = self.socket.makefile("rb")

    def ask(self, method: str, params: dict | None = None, request_id: int = 1) -> dict[str, Any]:
        self.socket.sendall(line(method, params, request_id))
        while True:
            message = self.read()
            if message.get("id") == request_id:
                return message

    def read(self) -> dict[str, Any]:
        data = self.lines.readline()
        assert data, "the engine closed the connection"
        return json.loads(data)

    def notifications(self, until: Any) -> list[dict[str, Any]]:
        """Notifications read until ``until(params)`` is true of one."""
        seen = []
        while True:
            message = self.read()
            if message.get("method") == CHANGED:
                seen.append(message["params"])
                if until(message["params"]):
                    return seen

    def close(self) -> None:
        self.lines.close()
        self.socket.close()


@pytest.fixture
def server(engine: Engine) -> Iterator[EngineServer]:
    served = EngineServer(engine, port=0)
    served.start()
    yield served
    served.stop()


def operator_peer(engine: Engine, server: EngineServer, **options: Any) -> Peer:
    ensure_operator_token(engine.state)
    peer = Peer(server.port, **options)
    reply = peer.ask("initialize", {"protocolVersion": "2025-11-25",
                                    "_meta": {"knowledge": {"operatorToken": read_operator_token(engine.state)}}})
    assert reply["result"]["operator"] is True
    return peer


def agent_peer(server: EngineServer, token: str) -> Peer:
    peer = Peer(server.port)
    reply = peer.ask("initialize", {"protocolVersion": "2025-11-25",
                                    "_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"}}}})
    assert "result" in reply, reply
    return peer


def has(topic: str) -> Any:
    return lambda params: any(change["topic"] == topic for change in params["changes"])


def test_an_agents_write_and_an_owners_grant_are_pushed_to_the_subscribed_window(engine: Engine, server) -> None:
    token = engine.add_agent("main", owner=True)
    window = operator_peer(engine, server)
    agent = agent_peer(server, token)
    try:
        answer = window.ask("operator/subscribe")["result"]
        assert answer["subscribed"] is True and "publications" in answer["topics"]

        saved = agent.ask("tools/call", {"name": "knowledge_save_page",
                                         "arguments": page("live-1", "Dana Whitfield")})
        assert saved["result"].get("isError") is not True, saved
        pushed = window.notifications(has("publications"))[-1]
        store_id = engine.resolver.effective("main", create=False).store_id
        assert {"topic": "publications", "storeId": store_id, "partition": "private"} in pushed["changes"]
        assert pushed["resync"] is False
        assert "title" not in json.dumps(pushed) and "Dana" not in json.dumps(pushed)  # ids only, never content

        window.ask("operator/setGrant", {"agent": "main", "sessionKey": "chat:9", "access": "read"}, request_id=2)
        assert {"topic": "grants", "agent": "main"} in window.notifications(has("grants"))[-1]["changes"]
    finally:
        agent.close()
        window.close()
    wait_for(lambda: not engine.changes.watched)  # a closed connection's subscription ends with it


def test_a_window_that_never_reads_does_not_hold_up_writes_and_is_told_to_resync(engine: Engine, server) -> None:
    owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
    stalled = operator_peer(engine, server, receive_buffer=4096)
    stalled.ask("operator/subscribe")
    subscription = wait_for(lambda: engine.changes._subscriptions)[0]
    finished = threading.Event()
    receipts: list[dict] = []

    def write_while_nobody_reads() -> None:
        # Rounds far below the queue's bound, each given time to be sent: only a connection that stopped
        # taking what it is sent lets the queue fill up and overflow.
        for number in range(400):
            receipts.append(engine.save_page(owner, page(f"stall-{number}", f"Person {number}")))
            for other in range(100):
                engine.changes.publish("grants", agent=f"agent-{number}-{other}-" + "x" * 1000)
            if subscription.dropped:
                break
            threading.Event().wait(0.06)
        finished.set()

    writer = threading.Thread(target=write_while_nobody_reads)
    writer.start()
    writer.join(120)  # a guard against a hang, not a timing: the writes must not wait for the reader
    try:
        assert finished.is_set(), "writes were held up by a client that does not read"
        assert subscription.dropped > 0 and len(subscription._waiting) <= subscription.limit
        assert all(receipt["revision"] == 1 for receipt in receipts)

        stalled.socket.settimeout(60)
        told = stalled.notifications(lambda params: params["resync"])  # reading again, it is told to reload
        assert told[-1]["resync"] is True
    finally:
        stalled.close()


def test_only_operator_connections_subscribe_and_only_once_to_known_topics(engine: Engine, server) -> None:
    token = engine.add_agent("main", owner=True)
    agent = agent_peer(server, token)
    window = operator_peer(engine, server)
    try:
        assert agent.ask("operator/subscribe")["error"]["data"]["reason"] == "denied"
        refused = window.ask("operator/subscribe", {"topics": ["records"]})
        assert refused["error"]["data"]["reason"] == "invalid_params" and not engine.changes.watched
        assert window.ask("operator/subscribe", {"topics": ["gate"]}, request_id=2)["result"]["topics"] == ["gate"]
        again = window.ask("operator/subscribe", request_id=3)
        assert again["error"]["data"]["reason"] == "invalid_params"
    finally:
        agent.close()
        window.close()
