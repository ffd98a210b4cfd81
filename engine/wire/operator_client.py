"""The owner's side of an operator connection: blocking JSON-RPC to the engine that serves a state directory.

The desktop window and the command line both reach a running engine through
``OperatorConnection``: it finds the engine in ``engine.json`` (the POSIX
socket first, then the loopback port), initializes with the contents of
``<state>/operator.token``, and sends one request at a time.  An engine error
arrives as ``OperatorError`` carrying the wire's ``reason``, message and
data, so a caller shows exactly what the engine said; an engine that cannot
be reached (or a connection that broke) is one too, with reason
``unreachable``.  Neither is a ``KnowledgeError``: they are the engine's
answers as a client receives them, not errors the engine raises.
"""

from __future__ import annotations

import itertools
import json
import socket
from typing import Any, BinaryIO

from ..core.answers import JsonObject, JsonValue
from ..operator.token_file import read_operator_token
from ..state.statedir import StateDir
from .messages import MAX_MESSAGE_BYTES

CONNECT_TIMEOUT_S = 5.0
REPLY_TIMEOUT_S = 120.0
PROTOCOL_VERSION = "2025-11-25"


UNREACHABLE = "unreachable"


class OperatorError(Exception):
    """A failure to show the owner: ``reason`` from the engine's fixed vocabulary, or ``unreachable``."""

    def __init__(self, reason: str, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.data = data or {}


class OperatorConnection:
    """One operator connection to the engine that owns ``state`` (reconnects once if it dropped)."""

    def __init__(self, state: StateDir, *, client_name: str = "knowledge",
                 reply_timeout_s: float | None = REPLY_TIMEOUT_S) -> None:
        self.state = state
        self.client_name = client_name
        self.reply_timeout_s = reply_timeout_s
        self._socket: socket.socket | None = None
        self._replies: BinaryIO | None = None
        self._ids = itertools.count(1)

    def call(self, method: str, params: dict[str, Any] | None = None) -> JsonValue:
        """The ``result`` of ``method``: the answer that operator method declares (engine/operator/methods.py).

        A connection that breaks (the engine restarted, or went away while it answered) is tried once more,
        then said as broken; an engine that is not there at all is ``unreachable`` from ``connect``."""
        try:
            return self._attempt(method, params or {})
        except (OSError, ConnectionError, EOFError):
            self.close()  # the engine restarted or went away: one fresh attempt
        try:
            return self._attempt(method, params or {})
        except (OSError, ConnectionError, EOFError) as exc:
            self.close()
            raise OperatorError(UNREACHABLE, f"The connection to the Knowledge engine broke: {exc}") from exc

    def _attempt(self, method: str, params: dict[str, Any]) -> JsonValue:
        if self._socket is None:
            self.connect()
        return self._exchange(method, params)

    def connect(self) -> None:
        """Open the socket and initialize as the operator (a token file problem arrives as a readable Denied)."""
        info = self.state.read_engine_info()
        if not info:
            raise OperatorError(UNREACHABLE, f"No Knowledge engine is running for {self.state.root}.")
        token = read_operator_token(self.state)
        self._socket = open_socket(info, self.reply_timeout_s)
        self._replies = self._socket.makefile("rb")
        self._exchange("initialize", {"protocolVersion": PROTOCOL_VERSION, "clientInfo": {"name": self.client_name},
                                      "_meta": {"knowledge": {"operatorToken": token}}})

    def close(self) -> None:
        if self._replies is not None:
            self._replies.close()
        if self._socket is not None:
            self._socket.close()
        self._socket = self._replies = None

    def __enter__(self) -> "OperatorConnection":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _exchange(self, method: str, params: dict[str, Any]) -> JsonValue:
        assert self._socket is not None and self._replies is not None
        request_id = next(self._ids)
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
                          ensure_ascii=False).encode("utf-8") + b"\n"
        self._socket.sendall(line)
        message = self._next_reply()
        if "error" in message:
            error = message["error"]
            data = error.get("data") or {}
            raise OperatorError(data.get("reason", "internal"), error.get("message", "the engine failed"), data)
        if message.get("id") != request_id:
            raise ConnectionError("a reply to another request arrived")
        return message.get("result")

    def _next_reply(self) -> JsonObject:
        """The next reply, past any notification the engine pushed in between (they carry no id)."""
        assert self._replies is not None
        while True:
            reply = self._replies.readline(MAX_MESSAGE_BYTES + 1)
            if not reply:
                raise ConnectionError("the engine closed the connection")
            if not reply.endswith(b"\n") and len(reply) <= MAX_MESSAGE_BYTES:
                raise ConnectionError("the engine closed the connection in the middle of its answer")
            message = json.loads(reply)
            if "id" in message or "method" not in message:
                return message


def open_socket(info: dict[str, Any], reply_timeout_s: float | None = REPLY_TIMEOUT_S) -> socket.socket:
    """A socket to the engine that engine.json describes: its POSIX socket, else its loopback port."""
    path = info.get("socket")
    if path and hasattr(socket, "AF_UNIX"):
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            client.settimeout(CONNECT_TIMEOUT_S)
            client.connect(path)
            client.settimeout(reply_timeout_s)
            return client
        except OSError:
            client.close()
    port = info.get("port")
    if not isinstance(port, int):
        raise OperatorError(UNREACHABLE, "engine.json names no port; is the engine running?")
    try:
        client = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise OperatorError(UNREACHABLE, f"Cannot reach the Knowledge engine on port {port}: {exc.strerror or exc}") from exc
    client.settimeout(reply_timeout_s)
    return client
