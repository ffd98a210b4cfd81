"""The desktop's one way to the engine: a JSON-RPC connection as the local operator.

Blocking by design, and so never used on the GUI thread: every ``call``
first checks the calling thread and raises ``GuiThreadViolation`` there (the
views reach it through ``desktop.tasks.EngineTasks``, which runs it on a
worker thread).  Engine errors arrive as ``EngineError`` with the wire's
``reason`` and a message meant for people.
"""

from __future__ import annotations

import itertools
import json
import socket
from typing import Any

from PySide6.QtCore import QCoreApplication, QThread

from engine.operator.methods import read_operator_token
from engine.state.statedir import StateDir

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
CONNECT_TIMEOUT_S = 5.0
REPLY_TIMEOUT_S = 120.0


class GuiThreadViolation(AssertionError):
    """Socket, file or database work was attempted on the GUI thread."""


class EngineError(Exception):
    """A failure to show the owner: ``reason`` from the engine's fixed vocabulary, or ``unreachable``."""

    def __init__(self, reason: str, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.data = data or {}


def assert_off_gui_thread(what: str) -> None:
    app = QCoreApplication.instance()
    if app is not None and QThread.currentThread() == app.thread():
        raise GuiThreadViolation(f"{what} on the GUI thread; run it through EngineTasks")


class OperatorClient:
    """One operator connection to the engine that owns ``state`` (reconnects once if it dropped)."""

    def __init__(self, state: StateDir) -> None:
        self.state = state
        self._socket: socket.socket | None = None
        self._replies: Any = None
        self._ids = itertools.count(1)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        assert_off_gui_thread(f"engine request {method}")
        if self._socket is None:
            self._connect()
        try:
            return self._exchange(method, params or {})
        except (OSError, ConnectionError, EOFError):
            self.close()  # the engine restarted or went away: one fresh attempt
        self._connect()
        try:
            return self._exchange(method, params or {})
        except (OSError, ConnectionError, EOFError) as exc:
            self.close()
            raise EngineError("unreachable", f"The connection to the Knowledge engine broke: {exc}") from exc

    def close(self) -> None:
        if self._replies is not None:
            self._replies.close()
        if self._socket is not None:
            self._socket.close()
        self._socket = self._replies = None

    # --- wire ----------------------------------------------------------------------------------

    def _connect(self) -> None:
        assert_off_gui_thread("connecting to the engine")
        info = self.state.read_engine_info()
        if not info:
            raise EngineError("unreachable", f"No Knowledge engine is running for {self.state.root}.")
        token = read_operator_token(self.state)  # a file problem arrives as a readable Denied
        self._socket = open_socket(info)
        self._replies = self._socket.makefile("rb")
        self._exchange("initialize", {"protocolVersion": "2025-11-25", "clientInfo": {"name": "knowledge-desktop"},
                                      "_meta": {"knowledge": {"operatorToken": token}}})

    def _exchange(self, method: str, params: dict[str, Any]) -> Any:
        assert self._socket is not None
        request_id = next(self._ids)
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
                          ensure_ascii=False).encode("utf-8") + b"\n"
        self._socket.sendall(line)
        message = self._next_reply()
        if "error" in message:
            error = message["error"]
            data = error.get("data") or {}
            raise EngineError(data.get("reason", "internal"), error.get("message", "the engine failed"), data)
        if message.get("id") != request_id:
            raise ConnectionError("a reply to another request arrived")
        return message.get("result")


    def _next_reply(self) -> dict[str, Any]:
        """The next reply, past any notification the engine pushed in between (they carry no id)."""
        while True:
            reply = self._replies.readline(MAX_MESSAGE_BYTES + 1)
            if not reply:
                raise ConnectionError("the engine closed the connection")
            message = json.loads(reply)
            if "id" in message or "method" not in message:
                return message


def open_socket(info: dict[str, Any]) -> socket.socket:
    """A socket to the engine that engine.json describes: its POSIX socket, else its TCP port."""
    path = info.get("socket")
    if path and hasattr(socket, "AF_UNIX"):
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            client.settimeout(CONNECT_TIMEOUT_S)
            client.connect(path)
            client.settimeout(REPLY_TIMEOUT_S)
            return client
        except OSError:
            client.close()
    port = info.get("port")
    if not isinstance(port, int):
        raise EngineError("unreachable", "engine.json names no port; is the engine running?")
    try:
        client = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise EngineError("unreachable", f"Cannot reach the Knowledge engine on port {port}: "
                                         f"{exc.strerror or exc}") from exc
    client.settimeout(REPLY_TIMEOUT_S)
    return client
