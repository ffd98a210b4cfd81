"""The engine's socket: JSON-RPC 2.0, one message per line, on loopback only.

The event loop runs in its own thread with explicit start/stop/join.  It
only moves bytes: each request is handed to a worker pool where the engine
does the work (authorizing, then queueing on the store's lane), so one slow
store or one slow client never stalls the others.  A short ``ping`` is the
exception: the loop answers it at once, so a liveness probe never waits for
a worker while every worker waits on a busy lane.

The loop frames lines itself, straight off the socket, and never holds more
of a line than the connection may send, so what a client sends cannot grow
the engine's memory.  ``SocketBounds`` says how much that is: before a
connection has initialized, small messages and a deadline to initialize;
after, messages of up to 8 MiB and an idle timeout; and a cap on open
connections.  A line over the limit gets ``limit_exceeded`` and the
connection is closed, since the rest of that line cannot be told from the
next message.

    TCP      127.0.0.1:<port>      (default 7431; 0 picks a free port)
    POSIX    <state>/engine.sock   (mode 0600)
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .operator_api import ensure_operator_token
from .protocol import ERROR_CODES, Dispatcher, Session, error_response
from .service import Engine
from .wire import MAX_MESSAGE_BYTES, UNAUTHENTICATED_MESSAGE_BYTES, encode, request_id_in

log = logging.getLogger(__name__)
DEFAULT_PORT = 7431
WORKERS = 32
_UNIX_PATH_MAX = 100
_RECV_BYTES = 256 * 1024  # the most read from a socket at once
_ID_WINDOW = 64 * 1024  # how much of an oversize line is searched for its id


@dataclass(frozen=True)
class SocketBounds:
    """What one client can make the engine hold; the values are documented in docs/protocol.md."""

    max_connections: int = 256  # open at once, initialized or not; the next one is refused with an error
    initialize_timeout_s: float = 10.0  # from accept to a successful initialize (a program needs milliseconds)
    idle_timeout_s: float = 900.0  # an initialized connection that sends no message this long is closed
    unauthenticated_message_bytes: int = UNAUTHENTICATED_MESSAGE_BYTES
    max_message_bytes: int = MAX_MESSAGE_BYTES
    # After an error that closes the connection, the peer's unread input is drained this long, so
    # that closing with it unread (a TCP reset) does not erase the error before the peer reads it.
    linger_s: float = 1.0

    def __post_init__(self) -> None:
        for bound in fields(self):
            if not getattr(self, bound.name) > 0:
                raise ValueError(f"{bound.name} must be positive")
        if self.unauthenticated_message_bytes > self.max_message_bytes:
            raise ValueError("unauthenticated_message_bytes cannot exceed max_message_bytes")


class LineTooLong(Exception):
    """A line passed the connection's limit; ``head`` is its start, kept to find the request's id."""

    def __init__(self, head: bytes) -> None:
        super().__init__("line too long")
        self.head = head


class EngineServer:
    def __init__(self, engine: Engine, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 socket_path: Path | None = None, workers: int = WORKERS,
                 bounds: SocketBounds = SocketBounds()) -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError("the engine only listens on loopback")
        self.engine = engine
        self.host = host
        self.requested_port = port
        self.socket_path = socket_path if socket_path is not None and len(str(socket_path)) < _UNIX_PATH_MAX \
            else None
        self.bounds = bounds
        self.port: int | None = None
        self.dispatcher = Dispatcher(engine)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._startup_error: BaseException | None = None
        self._listeners: list[socket.socket] = []
        self._connections: set[asyncio.Task] = set()  # served connections: what the cap counts
        self._refusals: set[asyncio.Task] = set()  # connections over the cap, lingering on their error
        self._discard = bytearray(_RECV_BYTES)  # where drained input goes; shared, since it is never read
        self._cap_warned_at = float("-inf")

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start listening; returns once the sockets are bound (raises if they cannot be).

        Creates ``<state>/operator.token`` for the owner's desktop first, when it is missing.
        """
        ensure_operator_token(self.engine.state)
        self._thread = threading.Thread(target=self._run, name="rpc-loop", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            raise self._startup_error

    def stop(self) -> None:
        """Stop accepting, close every connection, and join the loop thread."""
        if self._loop is not None and self._stopped is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(timeout=30)
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.socket_path is not None:
            try:
                self.socket_path.unlink()
            except FileNotFoundError:
                pass

    def info(self) -> dict[str, Any]:
        """Where agents connect, for engine.json."""
        return {"port": self.port, "socket": str(self.socket_path) if self.socket_path else None}

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stopped = asyncio.Event()
        backlog = min(self.bounds.max_connections, 1024)  # a burst of connects up to the cap is not dropped
        try:
            self._listeners.append(_tcp_listener(self.host, self.requested_port, backlog))
            self.port = self._listeners[0].getsockname()[1]
            if self.socket_path is not None and hasattr(socket, "AF_UNIX"):
                self._listeners.append(_unix_listener(self.socket_path, backlog))
        except OSError as exc:
            self._startup_error = exc
            for listener in self._listeners:
                listener.close()
            self._ready.set()
            return
        accepting = [asyncio.create_task(self._accept(listener)) for listener in self._listeners]
        self._ready.set()
        await self._stopped.wait()
        for task in accepting:
            task.cancel()
        await asyncio.gather(*accepting, return_exceptions=True)
        for listener in self._listeners:
            listener.close()
        tasks = self._connections | self._refusals
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError as exc:  # out of file descriptors, or a peer gone before accept: go on shortly
                log.warning("accepting a connection failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            try:
                conn.setblocking(False)
                if conn.family in (socket.AF_INET, socket.AF_INET6):
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # replies are one write each
            except OSError:  # reset already
                conn.close()
                continue
            if len(self._connections) < self.bounds.max_connections:
                _track(self._connections, self._serve(conn))
                continue
            if loop.time() - self._cap_warned_at > 60:  # once a minute at most: a flood must not flood the log
                self._cap_warned_at = loop.time()
                log.warning("%d connections are open, the most the engine serves; refusing more",
                            self.bounds.max_connections)
            if len(self._refusals) < self.bounds.max_connections:
                _track(self._refusals, self._refuse(conn))
            else:  # refusals are piling up too: no error line, just the closed socket
                conn.close()

    # --- connections -------------------------------------------------------------------------

    async def _serve(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        bounds = self.bounds
        session = Session()
        lines = _Lines(conn)
        deadline = loop.time() + bounds.initialize_timeout_s
        try:
            while True:
                authenticated = session.authenticated
                limit = bounds.max_message_bytes if authenticated else bounds.unauthenticated_message_bytes
                try:
                    async with asyncio.timeout(bounds.idle_timeout_s if authenticated else deadline - loop.time()):
                        line = await lines.next(limit)
                except TimeoutError:
                    # An idle connection is closed without a message: a client that reads later sees the
                    # end of the stream (and reconnects), not a stale error in place of its reply.
                    if not authenticated:
                        await self._close_with(conn, _limit_error(
                            None, f"the connection did not initialize within {bounds.initialize_timeout_s:g} s",
                            bounds.initialize_timeout_s))
                    return
                except LineTooLong as exc:
                    request_id = request_id_in(exc.head)
                    await self._close_with(conn, _limit_error(request_id, (
                        f"a message is longer than {limit} bytes" if authenticated else
                        f"a message before initialize is longer than {limit} bytes; initialize first (messages "
                        f"of up to {bounds.max_message_bytes} bytes are accepted after)"), limit))
                    return
                if line is None:
                    return
                if not line.strip():
                    continue
                reply = await self._dispatch(session, line)
                if reply is not None:
                    async with asyncio.timeout(bounds.idle_timeout_s):  # a client that never reads is let go
                        await loop.sock_sendall(conn, encode(reply))
        except OSError:
            pass  # reset, broken pipe, or a reply the client would not take in time (TimeoutError)
        finally:
            conn.close()

    async def _refuse(self, conn: socket.socket) -> None:
        limit = self.bounds.max_connections
        try:
            await self._close_with(conn, _limit_error(
                None, f"the engine already serves {limit} connections, the most it holds; try again later", limit))
        finally:
            conn.close()

    async def _close_with(self, conn: socket.socket, error: dict[str, Any]) -> None:
        """Send ``error``, then drain what the peer still sends (for at most ``linger_s``) until it closes."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.bounds.linger_s):
                await loop.sock_sendall(conn, encode(error))
                conn.shutdown(socket.SHUT_WR)
                while await loop.sock_recv_into(conn, self._discard):
                    pass
        except OSError:  # TimeoutError included: the linger is over
            pass

    async def _dispatch(self, session: Session, data: bytes) -> dict[str, Any] | None:
        if self.dispatcher.answers_at_once(data):  # ping: answered here, never queued behind busy workers
            return self.dispatcher.handle(session, data)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.dispatcher.handle, session, data)


class _Lines:
    """Newline-framed messages read straight off a socket, never holding more than the limit asked for.

    A line longer than the limit raises ``LineTooLong`` as soon as its limit plus one byte has
    arrived, without reading the rest.  At the end of the stream a last message without its
    newline is returned as it is, then None.
    """

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already known to hold no newline
        self._ended = False

    async def next(self, limit: int) -> bytes | None:
        loop = asyncio.get_running_loop()
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end > limit or (end < 0 and len(self._buffer) > limit):
                raise LineTooLong(bytes(self._buffer[:_ID_WINDOW]))
            if end >= 0:
                line = bytes(self._buffer[:end + 1])
                del self._buffer[:end + 1]
                self._scanned = 0
                return line
            self._scanned = len(self._buffer)
            if self._ended:
                line, self._buffer = bytes(self._buffer), bytearray()
                return line or None
            chunk = await loop.sock_recv(self._conn, min(_RECV_BYTES, limit + 1 - len(self._buffer)))
            if chunk:
                self._buffer += chunk
            else:
                self._ended = True


def _track(tasks: set[asyncio.Task], work: Any) -> None:
    task = asyncio.get_running_loop().create_task(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


def _limit_error(request_id: Any, message: str, limit: float) -> dict[str, Any]:
    return error_response(request_id, ERROR_CODES["limit_exceeded"], "limit_exceeded", message, limit=limit)


def _tcp_listener(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family, backlog=backlog)  # SO_REUSEADDR on POSIX
    listener.setblocking(False)
    return listener


def _unix_listener(path: Path, backlog: int) -> socket.socket:
    try:
        path.unlink()  # we own the state directory's lock, so any old socket is stale
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o077)
    try:
        listener.bind(str(path))
    except OSError:
        listener.close()
        raise
    finally:
        os.umask(previous)
    os.chmod(path, 0o600)
    listener.listen(backlog)
    listener.setblocking(False)
    return listener
