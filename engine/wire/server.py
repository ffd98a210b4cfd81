"""The engine's socket: JSON-RPC 2.0, one message per line, on loopback only.

The event loop runs in its own thread with explicit start/stop/join.  It
only moves bytes: each request is handed to a worker pool where the engine
does the work (authorizing, then queueing on the store's lane), so one slow
store or one slow client never stalls the others.  A short ``ping`` is the
exception: the loop answers it at once, so a liveness probe never waits for
a worker while every worker waits on a busy lane.  A connection's requests
are handled one at a time, in order, and while one is, the loop looks at
the next line: a ping or a notification there is handled at once too (a
stdio client's traffic all shares one connection), anything else waits its
turn in the buffer, so a connection holds no more than its line limit.

MCP's ``notifications/cancelled`` is acted on here, since only the loop
knows which of a connection's requests wait and which one runs.  The loop
looks past the waiting lines for cancellations alone (pings and other
notifications there keep their turn): a waiting request that is cancelled is
taken out of the buffer, never run and never answered; the running one
cannot be stopped halfway, so it finishes and its answer is dropped.  A
cancellation matches a request of its own connection, by id as a JSON value
(``protocol.request_key``); one that names nothing is ignored.

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
import functools
import itertools
import logging
import os
import socket
import threading
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..operator.token_file import ensure_operator_token
from ..core.changes import Subscription
from .protocol import (ERROR_CODES, IMMEDIATE_MAX_BYTES, Dispatcher, Session, cancelled_request,
                       changed_notification, request_key)
from .listen import ListenStream
from .modern import MODERN
from .tool_list import ToolListWatch, list_changed_notification
from .messages import (
    ID_WINDOW, MAX_MESSAGE_BYTES, UNAUTHENTICATED_MESSAGE_BYTES, encode, error_response, oversize_answer, request_id_in,
)

if TYPE_CHECKING:  # the engine calls in here; this module only needs its type
    from ..service import Engine

log = logging.getLogger(__name__)
DEFAULT_PORT = 7431
WORKERS = 32
_UNIX_PATH_MAX = 100
_SCRATCH_BYTES = 64 * 1024  # the most read from a socket at once
# The most lines looked at behind a connection's call: what they cost to track stays small beside the
# buffer itself (a flood of empty lines is many lines), and a cancellation further back comes in its turn.
MAX_WAITING = 1024
PUSH_GATHER_S = 0.05  # how long a change notification waits for the rest of a burst
# What a connection is sent for a burst of changes (maybe nothing); runs on the loop, so work goes to the pool.
Notifier = Callable[[list[dict[str, Any]], bool], Awaitable[list[dict[str, Any]]]]


@dataclass(frozen=True)
class SocketBounds:
    """What one client can make the engine hold; the values are documented in docs/protocol.md."""

    max_connections: int = 256  # open at once, initialized or not; the next one is refused with an error
    initialize_timeout_s: float = 10.0  # from accept to a successful initialize (a program needs milliseconds)
    idle_timeout_s: float = 900.0  # an initialized connection that sends no message this long is closed
    unauthenticated_message_bytes: int = UNAUTHENTICATED_MESSAGE_BYTES
    max_message_bytes: int = MAX_MESSAGE_BYTES
    # After an error that closes the connection, the peer's input is drained for at most this long
    # (and as much again as its line limit), so that closing with it unread (a TCP reset) does not
    # erase the error before the peer reads it.
    linger_s: float = 1.0

    def __post_init__(self) -> None:
        for bound in fields(self):
            if not getattr(self, bound.name) > 0:
                raise ValueError(f"{bound.name} must be positive")
        if self.unauthenticated_message_bytes > self.max_message_bytes:
            raise ValueError("unauthenticated_message_bytes cannot exceed max_message_bytes")


class LineTooLong(Exception):
    """A line passed the connection's limit; ``request_id`` is its id, when its first bytes show it, and
    ``head`` those bytes (the limit's worth and one more)."""

    def __init__(self, request_id: Any, head: bytes = b"") -> None:
        super().__init__("line too long")
        self.request_id = request_id
        self.head = head


_UNREAD = object()  # a request key not read yet


@dataclass
class _Call:
    """The request a connection is handling: its line, and whether it was cancelled while it ran."""

    line: bytes
    cancelled: bool = False

    @functools.cached_property
    def key(self) -> Any:
        """Decoded again only when a cancellation asks (the handler decodes its own copy)."""
        return request_key(self.line)


@dataclass(slots=True)
class _Waiting:
    """A whole line in a connection's buffer, behind the call it is handling, waiting its turn."""

    length: int
    key: Any = _UNREAD


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
        # What every connection's transport reads into, copied out at once (the loop runs one callback at
        # a time); small, so that one loop pass over many busy connections stays short.
        self._scratch = memoryview(bytearray(_SCRATCH_BYTES))
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
        """Stop accepting, close every connection, and join the loop thread (none is left by a start that
        could not bind)."""
        if self._loop is not None and self._stopped is not None and self._thread is not None \
                and self._thread.is_alive():
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
            await asyncio.sleep(0)  # sock_accept does not yield while connections wait: a burst must not hold the loop
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

    async def _open(self, conn: socket.socket) -> _Connection:
        loop = asyncio.get_running_loop()
        _, connection = await loop.connect_accepted_socket(
            lambda: _Connection(self._scratch, self.bounds.unauthenticated_message_bytes), sock=conn)
        return connection

    async def _serve(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        bounds = self.bounds
        session = Session(can_push=True)
        pushing: asyncio.Task | None = None
        pushed: Subscription | None = None  # what ``pushing`` serves
        resource_pushing: asyncio.Task | None = None  # what pushes resources/updated (MCP 2025)
        # The request being handled. Requests are handled one at a time, in order; meanwhile the next line is
        # read, so that a ping (all a stdio client's traffic shares this connection) is answered at once.
        handling: asyncio.Task | None = None
        current: _Call | None = None  # handling's request
        deadline = loop.time() + bounds.initialize_timeout_s
        try:
            connection = await self._open(conn)
        except OSError:  # reset before it could be served
            conn.close()
            return

        def sync_pushing() -> None:
            """Push what the connection now watches: started by the answer that began a watch, stopped (and a
            new one started) when a subscriptions/listen stream ends or another opens."""
            nonlocal pushing, pushed, resource_pushing
            watched = _watched(session)
            if pushing is not None and pushed is not watched:
                pushing.cancel()
                pushing = None
            if pushing is None and watched is not None:
                pushing, pushed = self._start_pushing(connection, session), watched
            if resource_pushing is None and session.resources is not None:
                resource_pushing = self._push_resources(connection, session)

        async def answer(call: _Call) -> None:
            reply = await self._dispatch(session, call.line)
            if reply is not None and not call.cancelled:  # MCP: a cancelled request is not answered
                await connection.write(encode(reply), bounds.idle_timeout_s)
            if call.cancelled:  # a subscriptions/listen cancelled while it was opening ends unacknowledged
                self.dispatcher.end_listen(session, call.key)
            sync_pushing()

        async def finish_handling() -> None:
            nonlocal handling, current
            if handling is not None:
                task, handling, current = handling, None, None
                await task

        def cancel(target: Any) -> None:
            """The running request, or else the first waiting one, that ``target`` names: not answered."""
            if current is not None and current.key == target:
                current.cancelled = True
            else:
                connection.drop_waiting(target, request_key)

        try:
            while True:
                if handling is not None and (handling.done() or not session.authenticated):
                    await finish_handling()  # nothing is read ahead of initialize: the limits depend on it
                authenticated = session.authenticated
                connection.limit = bounds.max_message_bytes if authenticated else bounds.unauthenticated_message_bytes
                try:
                    async with asyncio.timeout(bounds.idle_timeout_s if authenticated else deadline - loop.time()):
                        if handling is not None:  # a line to look at below (left in the buffer), or the call's end
                            await connection.wait_for_line(until=handling)
                        else:
                            line = await connection.next_line()
                except TimeoutError:
                    if handling is not None:  # a long call, not an idle client: its answer, then time it again
                        await finish_handling()
                        continue
                    # An idle connection is closed without a message: a client that reads later sees the
                    # end of the stream (and reconnects), not a stale error in place of its reply.
                    if not authenticated:
                        await connection.close_with(_limit_error(
                            None, f"the connection did not initialize within {bounds.initialize_timeout_s:g} s",
                            bounds.initialize_timeout_s), bounds.unauthenticated_message_bytes, bounds.linger_s)
                    return
                except LineTooLong as exc:
                    await finish_handling()  # the call before it is answered first
                    # An initialized client gets the rest of its line drained (one bug, not an attack);
                    # a connection without a token only as much again as it could have sent.
                    # An initialized client's call is answered naming the member the limit was passed in (a
                    # tool call as a tool error; reading the line's start for it is left off the loop); one
                    # before initialize is told to initialize first.
                    limit = connection.limit
                    if authenticated:
                        answer = await asyncio.to_thread(oversize_answer, exc.head, b"", limit,
                                                         modern=session.era == MODERN)
                    else:
                        answer = _limit_error(exc.request_id, (
                            f"a message before initialize is longer than {limit} bytes; initialize first (messages "
                            f"of up to {bounds.max_message_bytes} bytes are accepted after)"), limit)
                    await connection.close_with(answer, limit, bounds.linger_s)
                    return
                if handling is not None:
                    if handling.done():
                        continue
                    # A ping (or a notification) next in line is answered now, and a cancellation anywhere in the
                    # buffer; anything else waits there for its turn, so the connection holds no more than it did
                    # without reading ahead.
                    short = connection.take_ahead(IMMEDIATE_MAX_BYTES, self._at_once)
                    if short is not None:
                        target = cancelled_request(short)
                        if target is not None:
                            cancel(target)
                        reply = self.dispatcher.handle(session, short)
                        if reply is not None:
                            await connection.write(encode(reply), bounds.idle_timeout_s)
                        sync_pushing()  # a cancellation may have ended the connection's listen stream
                    elif connection.stalled:  # nothing more can be read before the call is answered
                        await finish_handling()
                    continue
                if line is None:
                    return
                if not line.strip():
                    continue
                current = _Call(line)
                handling = asyncio.create_task(answer(current))
        except OSError:
            pass  # reset, broken pipe, or a reply the client would not take in time (TimeoutError)
        finally:
            if handling is not None:
                handling.cancel()
            if pushing is not None:
                pushing.cancel()
            if session.changes is not None:
                session.changes.close()
            self.dispatcher.end_listen(session)
            if session.tool_list is not None:
                session.tool_list.close()
            if resource_pushing is not None:
                resource_pushing.cancel()
            if session.resources is not None:
                session.resources.close()
            if session.seen is not None:
                self.dispatcher.engine.connections.closed(session.seen)
            connection.abort()

    def _start_pushing(self, connection: _Connection, session: Session) -> asyncio.Task | None:
        """The task that pushes what changed, once the connection's last answer started a watch:
        ``operator/subscribe``, an agent's first ``tools/list`` (MCP 2025), or ``subscriptions/listen``."""
        if session.listen is not None:
            return asyncio.create_task(self._push_changes(
                connection, session.listen.subscription, functools.partial(self._listen_changes, session.listen)))
        if session.changes is not None:
            return asyncio.create_task(self._push_changes(connection, session.changes, _operator_changes))
        if session.tool_list is not None:
            return asyncio.create_task(self._push_changes(
                connection, session.tool_list.subscription, functools.partial(self._tool_list_changes,
                                                                              session.tool_list)))
        return None

    def _push_resources(self, connection: _Connection, session: Session) -> asyncio.Task:
        """The task that pushes ``notifications/resources/*`` to a connection that listed or subscribed to
        resources (MCP 2025: engine/wire/resource_watch.py), beside the task of its other watch."""
        assert session.resources is not None
        return asyncio.create_task(self._push_changes(
            connection, session.resources.subscription, functools.partial(self._on_worker,
                                                                          session.resources.changed)))

    async def _push_changes(self, connection: _Connection, subscription: Subscription, notify: Notifier) -> None:
        """Send a watching connection what ``notify`` makes of each burst of changes, for as long as it is open.

        The engine's writers only ever add to the subscription's bounded queue (engine/core/changes.py)
        and wake this task; a client that reads slowly or not at all holds up this task alone, while
        its queue fills, empties and is marked resync.
        """
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        subscription.set_waker(lambda: loop.call_soon_threadsafe(ready.set))
        try:
            while True:
                await ready.wait()
                await asyncio.sleep(PUSH_GATHER_S)  # a burst of writes goes out as one notification
                ready.clear()
                changes, resync = subscription.take()
                for notification in await notify(changes, resync) if changes or resync else []:
                    await connection.write(encode(notification), self.bounds.idle_timeout_s)
                subscription.done()
        except (OSError, RuntimeError):  # the connection closed (TimeoutError included: it stopped reading)
            connection.abort()
        finally:
            subscription.set_waker(None)

    async def _tool_list_changes(self, watch: ToolListWatch, changes: list[dict[str, Any]],
                                 resync: bool) -> list[dict[str, Any]]:
        """An agent's ``notifications/tools/list_changed``, when its list changed (read again on a worker)."""
        changed = await asyncio.get_running_loop().run_in_executor(self._pool, watch.changed, changes, resync)
        return [list_changed_notification()] if changed else []

    async def _listen_changes(self, stream: ListenStream, changes: list[dict[str, Any]],
                              resync: bool) -> list[dict[str, Any]]:
        """What a ``subscriptions/listen`` stream owes its client for a burst (its sources run on a worker)."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, stream.notifications, changes, resync)
        except Exception:  # noqa: BLE001 - a failing source costs its burst, never the connection
            log.exception("a subscriptions/listen stream could not make its notifications")
            return []

    async def _on_worker(self, notify: Callable[[list[dict[str, Any]], bool], list[Any]],
                         changes: list[dict[str, Any]], resync: bool) -> list[dict[str, Any]]:
        """What ``notify`` makes of a burst, worked out on a worker (it reads the store)."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, notify, changes, resync)

    async def _refuse(self, conn: socket.socket) -> None:
        limit = self.bounds.max_connections
        try:
            connection = await self._open(conn)
        except OSError:
            conn.close()
            return
        try:
            await connection.close_with(_limit_error(
                None, f"the engine already serves {limit} connections, the most it holds; try again later", limit),
                self.bounds.unauthenticated_message_bytes, self.bounds.linger_s)
        finally:
            connection.abort()

    def _at_once(self, line: bytes, first: bool) -> bool:
        """Whether a line read ahead of its turn is handled now: a ping or a notification next in line, a
        cancellation anywhere (it has to overtake the request it names)."""
        return (first and self.dispatcher.answers_at_once(line)) or cancelled_request(line) is not None

    async def _dispatch(self, session: Session, data: bytes) -> dict[str, Any] | None:
        if self.dispatcher.answers_at_once(data):  # ping: answered here, never queued behind busy workers
            return self.dispatcher.handle(session, data)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.dispatcher.handle, session, data)


class _Connection(asyncio.BufferedProtocol):
    """One client's socket: newline-framed lines in, replies out, never more of a line held than ``limit``.

    The transport reads into a scratch buffer that every connection shares (the loop runs one
    callback at a time, and each read is copied out at once) and offers no more room than the
    line may still grow by.  Once the buffer holds ``limit`` plus one byte reading pauses, so the
    kernel's flow control holds the sender back, not the engine's memory.  Otherwise reading
    stays on: a stream of short requests costs no registration per message.  A last message
    without its newline is returned at the end of the stream, then None.
    """

    def __init__(self, scratch: memoryview, limit: int) -> None:
        self.limit = limit
        self.transport: asyncio.Transport | None = None
        self._scratch = scratch
        self._buffer = bytearray()
        # While a call is handled, whole lines already looked at wait at the buffer's start: ``_ahead`` bytes.
        self._waiting: deque[_Waiting] = deque()
        self._keys: Counter[Any] = Counter()  # the request keys of the waiting lines read so far
        self._unread = 0  # waiting lines whose key is not read yet: always the last ones
        self._ahead = 0
        self._scanned = 0  # bytes of the buffer, from ``_ahead``, known to hold no newline (an offset)
        self._ended = False
        self._paused = False
        self._discarding: int | None = None  # while closing: input bytes still to drain, else None
        self._waiter: asyncio.Future[None] | None = None  # the serving task, waiting for input
        self._writable: asyncio.Future[None] | None = None  # the serving task, waiting for the peer to read

    # --- the transport's callbacks ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        room = self._discarding if self._discarding is not None else self.limit + 1 - len(self._buffer)
        return self._scratch[:max(1, min(len(self._scratch), room))]

    def buffer_updated(self, nbytes: int) -> None:
        if self._discarding is not None:
            self._discarding -= nbytes
            if self._discarding <= 0:
                self._pause()
                self._wake()
            return
        self._buffer += self._scratch[:nbytes]
        if len(self._buffer) > self.limit:
            self._pause()
            self._wake()
        elif self._waiter is not None and self._buffer.find(b"\n", len(self._buffer) - nbytes) >= 0:
            self._wake()

    def eof_received(self) -> bool:
        self._ended = True
        self._wake()
        return True  # keep our half open: what arrived before the end is still answered

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = True
        self._wake()
        self.resume_writing()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # --- for the serving task ---

    async def next_line(self) -> bytes | None:
        if self._waiting:
            waiting = self._waiting.popleft()
            self._forget(waiting)
            length = waiting.length
            line = bytes(self._buffer[:length])
            del self._buffer[:length]
            self._ahead -= length
            self._scanned -= length
            self._resume()
            return line
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end > self.limit or (end < 0 and len(self._buffer) > self.limit):
                request_id = request_id_in(memoryview(self._buffer)[:ID_WINDOW])
                head = bytes(self._buffer[:self.limit + 1])
                self._buffer = bytearray()  # not held while the connection lingers on its error
                raise LineTooLong(request_id, head)
            if end >= 0:
                line = bytes(self._buffer[:end + 1])
                del self._buffer[:end + 1]
                self._scanned = 0
                self._resume()
                return line
            self._scanned = len(self._buffer)
            if self._ended:
                line, self._buffer = bytes(self._buffer), bytearray()
                return line or None
            self._resume()
            await self._wait()

    async def write(self, data: bytes, timeout_s: float) -> None:
        """Send ``data``; waits (at most ``timeout_s``) only while the peer leaves too much unread."""
        assert self.transport is not None
        if self.transport.is_closing():
            raise ConnectionResetError("the connection is closed")
        self.transport.write(data)
        if self._writable is not None:
            async with asyncio.timeout(timeout_s):
                await self._writable

    async def close_with(self, error: dict[str, Any], drain_bytes: int, linger_s: float) -> None:
        """Send ``error`` and end our side, then drain what the peer still sends, up to ``drain_bytes``
        and ``linger_s``, before the caller closes.

        Closing with the peer's input unread makes the kernel answer with a reset, which can erase
        the error before the peer reads it; a client that wrote a little too much before reading
        still gets it.  The budget keeps a flood cheap: a peer still sending beyond it is reset.
        """
        assert self.transport is not None
        self._buffer = bytearray()
        self._waiting.clear()
        self._keys.clear()
        self._unread = 0
        self._ahead = self._scanned = 0
        self._discarding = drain_bytes
        try:
            self.transport.write(encode(error))
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self._resume()
            async with asyncio.timeout(linger_s):
                while not self._ended and self._discarding > 0:
                    await self._wait()
        except (OSError, RuntimeError):  # TimeoutError included: the linger is over; RuntimeError: closed
            pass

    async def wait_for_line(self, *, until: asyncio.Future[Any]) -> None:
        """Until a whole line not yet looked at (``take_ahead``) is buffered, the stream has ended or the buffer
        holds more than the limit (the next ``next_line`` then answers at once), or ``until`` (the call being
        handled) is done; takes nothing off the buffer.  Waits on the reader's own future, which the call's end
        sets too: no task or ``asyncio.wait`` a request."""
        while not until.done():
            if self._buffer.find(b"\n", self._scanned) >= 0 or self._ended or len(self._buffer) > self.limit:
                return
            self._scanned = len(self._buffer)
            self._resume()
            waiter = self._wait()
            wake = functools.partial(_set_if_pending, waiter)
            until.add_done_callback(wake)
            try:
                await waiter
            finally:
                until.remove_done_callback(wake)
                waiter.cancel()  # when the call's end woke it: more bytes from now on wake the next one

    def take_ahead(self, max_bytes: int, wanted: Callable[[bytes, bool], bool]) -> bytes | None:
        """The next whole line not yet looked at, taken off the buffer, when it is at most ``max_bytes`` and
        ``wanted(line, first)`` (``first``: nothing waits before it); a line not taken stays, in order, and
        waits its turn.  None once no whole line is left to look at."""
        while len(self._waiting) < MAX_WAITING:
            end = self._buffer.find(b"\n", self._scanned)
            if end < 0:
                self._scanned = len(self._buffer)
                return None
            length = end + 1 - self._ahead
            line = bytes(self._buffer[self._ahead:end + 1]) if length <= max_bytes else None
            if line is not None and wanted(line, not self._waiting):
                del self._buffer[self._ahead:end + 1]
                self._scanned = self._ahead
                self._resume()
                return line
            self._waiting.append(_Waiting(length))
            self._unread += 1
            self._ahead = self._scanned = end + 1
        return None

    def drop_waiting(self, key: Any, key_of: Callable[[bytes], Any]) -> bool:
        """Take the first waiting line whose ``key_of`` is ``key`` out of the buffer; whether there was one.
        Each line's key is read once, the first time a cancellation asks."""
        end = self._ahead
        for waiting in itertools.islice(reversed(self._waiting), self._unread):
            waiting.key = key_of(bytes(self._buffer[end - waiting.length:end]))
            self._keys[waiting.key] += 1
            end -= waiting.length
        self._unread = 0
        if not self._keys[key]:
            return False
        start = 0
        for index, waiting in enumerate(self._waiting):
            if waiting.key == key:
                del self._buffer[start:start + waiting.length]
                del self._waiting[index]
                self._forget(waiting)
                self._ahead -= waiting.length
                self._scanned -= waiting.length
                self._resume()
                return True
            start += waiting.length
        raise AssertionError("the keys counted are the waiting lines' keys")

    def _forget(self, waiting: _Waiting) -> None:
        if waiting.key is _UNREAD:
            self._unread -= 1
        else:
            self._keys[waiting.key] -= 1
            if not self._keys[waiting.key]:  # a long connection's old ids are not kept
                del self._keys[waiting.key]

    @property
    def stalled(self) -> bool:
        """Whether nothing more can be looked at until a line is taken: the stream ended, the buffer is full,
        or ``MAX_WAITING`` lines wait."""
        return self._ended or len(self._buffer) > self.limit or len(self._waiting) >= MAX_WAITING

    def abort(self) -> None:
        """Close now; a reply still unsent is dropped (the peer was given its time to read)."""
        if self.transport is not None:
            if self.transport.get_write_buffer_size():
                self.transport.abort()
            else:
                self.transport.close()

    def _wait(self) -> asyncio.Future[None]:
        self._waiter = asyncio.get_running_loop().create_future()
        return self._waiter

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        self._waiter = None

    def _pause(self) -> None:
        if not self._paused and self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
            self._paused = True

    def _resume(self) -> None:
        room = self._discarding if self._discarding is not None else self.limit + 1 - len(self._buffer)
        if self._paused and room > 0 and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()
            self._paused = False


async def _operator_changes(changes: list[dict[str, Any]], resync: bool) -> list[dict[str, Any]]:
    return [changed_notification(changes, resync)]


def _watched(session: Session) -> Subscription | None:
    """The change subscription a connection's push task serves: its listen stream's, the operator's, or its
    tool list watch's (MCP 2025); None while it watches nothing."""
    if session.listen is not None:
        return session.listen.subscription
    if session.changes is not None:
        return session.changes
    return session.tool_list.subscription if session.tool_list is not None else None


def _set_if_pending(future: asyncio.Future[None], _: Any) -> None:
    if not future.done():
        future.set_result(None)


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
