"""Live updates: what the engine says changed, and whether an engine is there at all.

``EngineWatch`` keeps an operator connection of its own, on a thread of its
own: it subscribes (``operator/subscribe``) and reads the notifications the
engine pushes.  The connection closing is the engine gone, reported at once;
then the watch tries the state directory's engine endpoint (``engine.json``)
every ``retry_s`` until an engine answers, and subscribes again.  A quiet
connection is pinged every ``ping_s``, so an engine that stopped answering
without closing is noticed too.  Everything reaches the GUI thread through
queued signals; the request connection (``EngineTasks``) is left alone.  The
thread holds the watch only through a weak reference, so a watch let go (a
window closed) is released on the GUI thread, never on the watch's thread.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import weakref
from typing import Any

from PySide6.QtCore import QObject, Signal

from engine.core.errors import KnowledgeError
from engine.operator.token_file import read_operator_token
from engine.state.statedir import StateDir

from .client import MAX_MESSAGE_BYTES, EngineError, open_socket
from .tasks import THREAD_PREFIX

log = logging.getLogger(__name__)
RETRY_S = 1.0
PING_S = 20.0
STOP_WAIT_S = 10.0  # how long stop() waits for the thread: a connection attempt it cannot wake ends within this
CHANGED = "notifications/operator/changed"  # engine/wire/protocol.py


class EngineLost(Exception):
    """The watched connection ended; the message says how."""


class EngineWatch(QObject):
    """One thread: subscribed to the engine's changes, or waiting for an engine to come back.

    The thread holds nothing of Qt's: its work is a plain ``_Subscription`` with a weak reference to the watch,
    made strong only to emit, under a lock that ``stop`` takes.  Once ``stop`` returns the thread never touches
    the watch again, even when it gave up waiting for the thread to end, and a watch let go is released on the
    GUI thread, where its destruction stops the thread."""

    sig_changes_arrived = Signal(object)
    """The engine pushed ``{"changes": [...], "resync": bool}`` (resync: reload everything)."""

    sig_engine_found = Signal(object)
    """An engine answered and the watch subscribed; the argument is its engine.json."""

    sig_engine_lost = Signal(str)
    """The watched engine went away (the argument says how); the watch retries until one is back."""

    def __init__(self, state: StateDir, *, retry_s: float = RETRY_S, ping_s: float = PING_S,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self._subscription = _Subscription(state, retry_s, ping_s, weakref.ref(self))
        self.destroyed.connect(self._subscription.stop)  # a watch let go (or its parent closed) stops its thread
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._subscription.run, name=f"{THREAD_PREFIX}-watch",
                                            daemon=True)
            self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def stop(self) -> None:
        """End the watch and join its thread (closing the connection wakes a blocked read).  After this the
        thread never emits again, even if it is still leaving a connection attempt after ``STOP_WAIT_S``."""
        self._subscription.stop()
        if self._thread is not None:
            self._thread.join(timeout=STOP_WAIT_S)
            self._thread = None


class _Subscription:
    """What the watch's thread runs: the subscription, and the retries while no engine answers."""

    def __init__(self, state: StateDir, retry_s: float, ping_s: float, watch: weakref.ref[EngineWatch]) -> None:
        self.state = state
        self.retry_s = retry_s
        self.ping_s = ping_s
        self._watch = watch
        self._stop = threading.Event()
        self._emit_lock = threading.Lock()  # held while emitting, and to stop: no emit after stop() returns
        self._socket: socket.socket | None = None
        self._socket_lock = threading.Lock()

    def stop(self) -> None:
        with self._emit_lock:
            self._stop.set()
        with self._socket_lock:
            if self._socket is not None:
                try:
                    self._socket.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _emit(self, signal: str, value: Any) -> None:
        """Emit the watch's ``signal`` (a queued signal: the GUI thread receives it), unless it stopped or is
        gone.  The strong reference lives only for the emit; a watch is stopped before it is let go."""
        with self._emit_lock:
            if self._stop.is_set():
                return
            watch = self._watch()
            if watch is not None:
                getattr(watch, signal).emit(value)

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                connection, lines, info = self._subscribe()
            except (EngineError, KnowledgeError, OSError, ValueError):
                self._stop.wait(self.retry_s)  # no engine yet: try engine.json again shortly
                continue
            self._emit("sig_engine_found", info)
            try:
                self._read(connection, lines)
            except EngineLost as exc:
                self._emit("sig_engine_lost", str(exc))
            finally:
                with self._socket_lock:
                    self._socket = None
                connection.close()
            self._stop.wait(self.retry_s)

    def _subscribe(self) -> tuple[socket.socket, _Lines, dict[str, Any]]:
        info = self.state.read_engine_info()
        if not info:
            raise EngineError("unreachable", "no engine.json")
        token = read_operator_token(self.state)
        connection = open_socket(info)
        try:
            connection.settimeout(self.ping_s)
            with self._socket_lock:
                self._socket = connection
            if self._stop.is_set():
                raise EngineError("unreachable", "the watch is stopping")
            lines = _Lines(connection)
            for request_id, method, params in (
                    (1, "initialize", {"protocolVersion": "2025-11-25", "clientInfo": {"name": "knowledge-desktop"},
                                       "_meta": {"knowledge": {"operatorToken": token}}}),
                    (2, "operator/subscribe", {})):
                connection.sendall(_request(request_id, method, params))
                reply = lines.next_message()
                if "error" in reply:
                    error = reply["error"]
                    raise EngineError((error.get("data") or {}).get("reason", "internal"), error.get("message", ""))
        except (OSError, EngineError, EngineLost, ValueError) as exc:
            with self._socket_lock:
                self._socket = None
            connection.close()
            raise EngineError("unreachable", str(exc)) from exc
        return connection, lines, info

    def _read(self, connection: socket.socket, lines: _Lines) -> None:
        pinged = False
        while not self._stop.is_set():
            try:
                message = lines.next_message()
            except TimeoutError:
                if pinged:  # a ping went unanswered for a whole interval
                    raise EngineLost("the engine stopped answering") from None
                connection.sendall(_request(0, "ping", {}))
                pinged = True
                continue
            except OSError as exc:
                raise EngineLost(f"the connection broke: {exc.strerror or exc}") from exc
            pinged = False
            if message.get("method") == CHANGED:
                self._emit("sig_changes_arrived", message.get("params") or {})


class _Lines:
    """Newline-framed JSON messages off a socket with a timeout (a file object cannot survive one)."""

    def __init__(self, connection: socket.socket) -> None:
        self._connection = connection
        self._buffer = bytearray()

    def next_message(self) -> dict[str, Any]:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                if line.strip():
                    return json.loads(line)
                continue
            if len(self._buffer) > MAX_MESSAGE_BYTES:
                raise EngineLost("the engine sent a message over the size limit")
            data = self._connection.recv(64 * 1024)
            if not data:
                raise EngineLost("the engine closed the connection")
            self._buffer += data


def _request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n"
