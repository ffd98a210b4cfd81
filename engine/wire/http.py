"""MCP's Streamable HTTP transport on loopback, beside the socket: ``knowledge serve --http PORT``.

One endpoint, ``/mcp``.  Every message goes to the same ``Dispatcher`` the socket uses; this module
only moves bytes and applies what HTTP adds, so it holds no MCP method logic:

- **Before any engine work** (in this order): the ``Origin`` header must be absent or a loopback
  origin (else 403), the ``Host`` a loopback name while bound to loopback (else 421: DNS
  rebinding); the body is bounded as the socket bounds a line (64 KiB for a request that opens a
  session, 8 MiB otherwise, 413 past it, declared or not) and must arrive within
  ``SocketBounds.initialize_timeout_s`` (408), a request's head too (the connection is closed);
  at most ``max_connections`` connections are served (503 past it).
- **The credential** is the agent's token as ``Authorization: Bearer <token>`` on every request
  (401 without a valid one); it is added to ``initialize`` under ``params._meta.knowledge.token``,
  as the stdio bridge adds it.  The audience is ``_meta.knowledge.audience`` as on the socket, else
  the ``Knowledge-Audience`` (``owner-private`` or ``conversation``, with ``Knowledge-Session-Key``
  and ``Knowledge-Session-Id``) and ``Knowledge-Instance`` headers, else owner-private, as the
  bridge defaults.
- **The 2025 revisions** (2025-03-26, 2025-06-18, 2025-11-25): a successful ``initialize`` opens a
  session named by ``Mcp-Session-Id``; later requests carry it (400 without it, 404 once it is
  gone or when another credential presents it) and, when they carry ``MCP-Protocol-Version``, the
  version the session negotiated (400 otherwise).  DELETE ends a session; GET opens the session's
  stream (one at a time), on which ``notifications/tools/list_changed`` and ``notifications/resources/*``
  are pushed as the socket pushes them.  A request is answered with JSON, or with one Server-Sent Event
  when the client accepts only ``text/event-stream``; a notification with 202.  A session unused for
  ``idle_timeout_s`` is forgotten (its client gets 404 and initializes again), and at most
  ``max_connections`` sessions are held (503 past it).
- **2026-07-28's single exchange**: a POST with no session whose ``MCP-Protocol-Version`` names a
  revision the dispatcher serves without a handshake (``single_exchange_versions``) is dispatched
  on a session made for that one request from the bearer credential, once the header matches the
  body's ``_meta``, and ``Mcp-Method`` and ``Mcp-Name``, when sent, its method and the tool, prompt or URI
  it names (400, -32020, otherwise); any other version there is 400.  ``subscriptions/listen``
  is answered as an event stream on that session: the acknowledgement, then the tagged notifications the
  socket would push, until the client closes it or cancels it (``notifications/cancelled`` POSTed with the
  same credential), its credential is revoked (a ``denied`` error ends it) or the server stops (the listen
  request's result ends it): engine/wire/http_listen.py.  Listen streams and 2025 GET streams together
  are capped at half ``max_connections`` (503 past it).

The server is uvicorn (h11) with this module's ASGI application, in its own thread with its own
event loop, started and stopped with the engine like the socket server.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import logging
import os
import re
import secrets
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable
from urllib.parse import urlsplit

import uvicorn
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..core.answers import NotRequired, TypedDict
from ..core.ids import canonical_session_id
from .http_listen import HttpListens, either, sse_event
from .listen import LISTEN
from .modern import HANDSHAKE_VERSIONS, MODERN, MODERN_VERSIONS
from .messages import (
    ID_WINDOW, INVALID_REQUEST, PARSE_ERROR, MalformedMessage, encode, error_response, oversize_answer, parse_request,
)
from .messages import Request as Message
from .protocol import CANCELLED, ERROR_CODES, Session, cancelled_request
from .server import PUSH_GATHER_S, SocketBounds
from .tool_list import list_changed_notification

if TYPE_CHECKING:
    from .protocol import Dispatcher

log = logging.getLogger(__name__)

ENDPOINT = "/mcp"
DEFAULT_HOST = "127.0.0.1"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "::1", "localhost"})
HOST_FORM = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%!$&'()*+;=-]+)(:[0-9]*)?")  # RFC 9110's host[:port]
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"  # 2026-07-28: the body's method, mirrored
NAME_HEADER = "mcp-name"  # 2026-07-28: the body's tool or prompt name, or resource URI, mirrored
NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # what Mcp-Name mirrors
SINGLE_EXCHANGE_FROM = "2026-07-28"  # the first revision without a handshake or sessions
VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"  # 2026-07-28: the version in every request's _meta
WORKERS = 16
HEADER_BYTES = 16 * 1024  # a request's head: the h11 parser's own default
GRACEFUL_STOP_S = 5.0
# The JSON-RPC codes a single exchange answers with an HTTP error status (MCP 2026-07-28); any other is 200.
SINGLE_EXCHANGE_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, -32602: 400, -32601: 404, -32020: 400, -32022: 400}
UNSUPPORTED_VERSION, HEADER_MISMATCH = -32022, -32020


def single_exchange_versions() -> tuple[str, ...]:
    """The revisions the dispatcher serves without a session: its versions from 2026-07-28 on."""
    return MODERN_VERSIONS


def handshake_versions() -> tuple[str, ...]:
    return HANDSHAKE_VERSIONS


class HttpInfo(TypedDict):
    """Where MCP clients connect over HTTP (``engine.json``'s ``http``)."""

    url: str
    host: str
    port: int | None


class HeaderAudience(TypedDict):
    """An audience as the ``Knowledge-Audience`` headers give it; the dispatcher checks it like any audience."""

    kind: str
    sessionKey: NotRequired[str | None]
    sessionId: NotRequired[str | None]


class _Oversize(Exception):
    """A body over a session's limit, read through: ``read`` is what ``oversize_answer`` answers it from
    (its first bytes, its last, the limit, its size)."""

    def __init__(self, head: bytes, tail: bytes, limit: int, size: int) -> None:
        super().__init__("message too long")
        self.read = (head, tail, limit, size)


class _Refused(Exception):
    """An HTTP answer before (or instead of) dispatching: a status, a JSON-RPC error body, headers."""

    def __init__(self, status: int, reason: str | None = None, message: str = "", *, request_id: Any = None,
                 code: int | None = None, headers: dict[str, str] | None = None, **data: Any) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers or {}
        self.body = None if reason is None else error_response(
            request_id, code if code is not None else ERROR_CODES.get(reason, INVALID_REQUEST), reason, message,
            **data)

    def answering(self, body: bytes) -> None:
        """Name the request ``body`` holds by its id in this refusal (JSON-RPC's ``null`` only when the body
        names none); the body is read only now, when a request is refused."""
        if self.body is not None and self.body["id"] is None:
            message = _peek(body)
            self.body["id"] = message.id if message is not None else None

    def response(self) -> Response:
        if self.body is None:
            return Response(status_code=self.status, headers=self.headers)
        return Response(encode(self.body), status_code=self.status, headers=self.headers,
                        media_type="application/json")


@dataclass
class HttpSession:
    """A 2025 session: the socket's ``Session`` behind an ``Mcp-Session-Id``, bound to its credential."""

    id: str
    token: str
    protocol: Session
    last_used: float
    in_flight: int = 0  # requests being answered, and the stream while open: never forgotten meanwhile
    streaming: bool = False  # its GET stream is open
    ready: asyncio.Event | None = None  # wakes the open stream: a change came, or a request may have started a watch
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # DELETE, expiry or the server stopping

    def presented_by(self, token: str) -> bool:
        return hmac.compare_digest(self.token.encode(), token.encode())


@dataclass
class _Sessions:
    """The open sessions; touched only on the server's event loop, so no lock."""

    limit: int
    idle_timeout_s: float
    by_id: dict[str, HttpSession] = field(default_factory=dict)

    def expire(self, now: float, forget: Callable[[HttpSession], None]) -> None:
        for session in [s for s in self.by_id.values() if not s.in_flight and now - s.last_used > self.idle_timeout_s]:
            del self.by_id[session.id]
            forget(session)


class McpHttpApp:
    """The ASGI application: MCP's Streamable HTTP over the engine's dispatcher."""

    def __init__(self, dispatcher: Dispatcher, *, bounds: SocketBounds, host: str, workers: int = WORKERS) -> None:
        self.dispatcher = dispatcher
        self.bounds = bounds
        self.host = host
        self.sessions = _Sessions(bounds.max_connections, bounds.idle_timeout_s)
        # Half the connections at most stay open as streams, so requests always find room beside them.
        self.stream_limit = max(1, bounds.max_connections // 2)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="http")
        self.listens = HttpListens(dispatcher, self._pool)  # subscriptions/listen streams (engine/wire/http_listen.py)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan is off; nothing else is served
            return
        request = Request(scope, receive)
        try:
            response = await self._answer(request)
        except _Refused as refusal:
            response = refusal.response()
        except ClientDisconnect:  # gone before its body arrived: nobody to answer
            return
        await response(scope, receive, send)

    def close(self) -> None:
        for session in list(self.sessions.by_id.values()):
            self._forget(session)
        self.sessions.by_id.clear()
        self.listens.close()
        self._pool.shutdown(wait=True, cancel_futures=True)

    # --- one request ---------------------------------------------------------------------------

    async def _answer(self, request: Request) -> Response:
        if request.url.path != ENDPOINT:
            raise _Refused(404, "not_found", f"the MCP endpoint is {ENDPOINT}")
        self._check_origin(request)
        if request.method == "GET":
            return await self._get(request)
        if request.method == "DELETE":
            return await self._delete(request)
        if request.method != "POST":
            raise _Refused(405, headers={"Allow": "GET, POST, DELETE"})
        return await self._post(request)

    def _check_origin(self, request: Request) -> None:
        """A browser page's request carries its Origin: only loopback pages (or the owner's --host) may call."""
        origin = request.headers.get("origin")
        if origin is not None and not self._local(_hostname(origin, url=True)):
            raise _Refused(403, "denied", "requests from this origin are refused: only loopback origins may call")
        if self.host in LOOPBACK_NAMES and not self._local(_hostname(request.headers.get("host", ""), url=False)):
            raise _Refused(421, "denied", "this server answers loopback host names only")

    def _local(self, name: str | None) -> bool:
        return name is not None and (name in LOOPBACK_NAMES or name == self.host)

    async def _post(self, request: Request) -> Response:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise _Refused(415, "invalid_params", "the body must be JSON (Content-Type: application/json)")
        stream = _wants_stream(request.headers.get("accept", ""))
        session_id = request.headers.get(SESSION_HEADER)
        version = request.headers.get(VERSION_HEADER)
        single = session_id is None and version is not None and version >= SINGLE_EXCHANGE_FROM
        # As on the socket: a message that opens a session is small; one within a session (or a single
        # exchange, which is a whole call) may be a long one.
        opening = session_id is None and not single
        try:
            body = await self._read_body(request, self.bounds.unauthenticated_message_bytes if opening
                                         else self.bounds.max_message_bytes)
        except _Oversize as oversize:  # a single exchange is MCP 2026-07-28, a session a 2025 revision
            answer = await asyncio.to_thread(oversize_answer, *oversize.read, modern=single)
            return _reply(answer, stream, single=single)
        try:
            token = await self._authenticate(request)
            if session_id is not None:
                session = self._session(session_id, token)
                if version is not None and version != session.protocol.protocol_version:
                    raise _Refused(400, "invalid_params", f"{VERSION_HEADER} {version!r} is not this session's "
                                   f"version {session.protocol.protocol_version!r}")
        except _Refused as refusal:  # named by the request's id; a long body is not parsed for an unknown sender
            if refusal.status != 401 or len(body) <= self.bounds.unauthenticated_message_bytes:
                refusal.answering(body)
            raise
        if session_id is not None:
            session.in_flight += 1
            try:
                reply = await self._dispatch(session.protocol, body)
            finally:
                session.in_flight -= 1
                session.last_used = _now()
                if session.ready is not None:  # a tools/list may have started the watch the stream pushes
                    session.ready.set()
            return _reply(reply, stream)
        if single:
            message = _peek(body)
            once = self._single_session(request, version, token, message)
            if message is not None and message.method == LISTEN and not message.notification:
                return await self._listen(request, once, token, body, message)
            if message is not None and message.notification and message.method == CANCELLED:
                self.listens.cancel(token, cancelled_request(body))
            return _reply(await self._dispatch(once, body), stream, single=True)
        message = _peek(body)
        if message is None:  # malformed: the dispatcher says how, as on the socket; nothing is opened
            return _reply(await self._dispatch(Session(), body), stream)
        if message.method != "initialize" or message.notification:
            raise _Refused(400, "invalid_params", f"no {SESSION_HEADER}: initialize first (MCP "
                           f"{', '.join(handshake_versions()[1:])}), or send {VERSION_HEADER} of a revision "
                           "without sessions", request_id=message.id)
        return await self._initialize(request, message, token, body, stream)

    async def _initialize(self, request: Request, message: Message, token: str, body: bytes,
                          stream: bool) -> Response:
        self.sessions.expire(_now(), self._forget)
        if len(self.sessions.by_id) >= self.sessions.limit:
            raise _Refused(503, "limit_exceeded", f"the engine already holds {self.sessions.limit} HTTP sessions, "
                           "the most it keeps; end one (DELETE) or try again later", request_id=message.id,
                           limit=self.sessions.limit)
        opened = Session(can_push=True)  # through the session's GET stream
        reply = await self._dispatch(opened, _with_credential(body, message, token, request.headers))
        if not opened.authenticated:  # refused: the answer says why, and no session is kept
            return _reply(reply, stream)
        session = HttpSession(secrets.token_urlsafe(24), token, opened, _now())
        self.sessions.by_id[session.id] = session
        return _reply(reply, stream, headers={"Mcp-Session-Id": session.id})

    def _single_session(self, request: Request, version: str, token: str, message: Message | None) -> Session:
        """The session a single exchange is answered on, once its headers agree with its body."""
        request_id = message.id if message else None
        if version not in single_exchange_versions():
            raise _Refused(400, "invalid_params", "Unsupported protocol version", request_id=request_id,
                           code=UNSUPPORTED_VERSION, supported=[*HANDSHAKE_VERSIONS, *MODERN_VERSIONS], requested=version)
        if message is not None:
            meta = message.params.get("_meta")  # without the envelope the dispatcher names what is missing
            if isinstance(meta, dict) and VERSION_META_KEY in meta and meta[VERSION_META_KEY] != version:
                raise _Refused(400, "invalid_params", f"{VERSION_HEADER} does not match the request's _meta "
                               f"{VERSION_META_KEY}", request_id=request_id, code=HEADER_MISMATCH)
            if request.headers.get(METHOD_HEADER, message.method) != message.method:
                raise _Refused(400, "invalid_params", "Mcp-Method does not match the request's method",
                               request_id=request_id, code=HEADER_MISMATCH)
            name, named_by = request.headers.get(NAME_HEADER), NAMED_BY.get(message.method)
            if name is not None and named_by is not None and _header_text(name) != message.params.get(named_by):
                raise _Refused(400, "invalid_params", f"Mcp-Name does not match the request's {named_by}",
                               request_id=request_id, code=HEADER_MISMATCH)
        # The credential established here, by the transport, for this one request (see docs/protocol.md).
        return Session(token=token, audience=_header_audience(request.headers, request_id),
                       protocol_version=version, instance=request.headers.get("knowledge-instance"),
                       initialized=True, era=MODERN)

    # --- 2026-07-28: subscriptions/listen, its POST answered as an event stream ---------------------

    async def _listen(self, request: Request, once: Session, token: str, body: bytes, message: Message) -> Response:
        """Open the stream on the exchange's own session (engine/wire/http_listen.py writes it); a refusal (a bad
        filter) is answered as JSON."""
        if "text/event-stream" not in _media_types(request.headers.get("accept", "")):
            raise _Refused(406, "invalid_params", "subscriptions/listen is answered as text/event-stream: accept it",
                           request_id=message.id)
        self._check_stream_room(message.id)
        self.listens.opening += 1
        try:
            reply = await self._dispatch(once, body)
        finally:
            self.listens.opening -= 1
        if once.listen is None or reply is None:
            return _reply(reply, False, single=True)
        return self.listens.response(once, token, body, reply)

    def _check_stream_room(self, request_id: Any = None) -> None:
        """At most ``stream_limit`` long-lived streams at once (listen streams and 2025 sessions' GET streams),
        so that listening clients cannot hold every connection the server serves."""
        held = self.listens.opening + len(self.listens.open) + sum(s.streaming for s in self.sessions.by_id.values())
        if held >= self.stream_limit:
            raise _Refused(503, "limit_exceeded", f"the engine already holds {self.stream_limit} open streams over "
                           "HTTP, the most it keeps; close one or try again later", request_id=request_id,
                           limit=self.stream_limit)

    async def _get(self, request: Request) -> Response:
        """The session's stream of notifications: ``notifications/tools/list_changed`` (engine/wire/tool_list.py)."""
        if "text/event-stream" not in _media_types(request.headers.get("accept", "")):
            raise _Refused(406, "invalid_params", "the stream is text/event-stream: accept it")
        token = await self._authenticate(request)
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is None:
            raise _Refused(400, "invalid_params", f"a stream belongs to a session: send its {SESSION_HEADER}")
        session = self._session(session_id, token)
        if session.streaming:
            raise _Refused(409, "conflict", "this session's stream is already open")
        self._check_stream_room()
        return StreamingResponse(self._stream(session), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def _stream(self, session: HttpSession) -> AsyncIterator[bytes]:
        """What the socket pushes to a watching connection (``EngineServer._push_changes``), as Server-Sent Events:
        ``notifications/tools/list_changed`` from the session's first ``tools/list`` on, and
        ``notifications/resources/*`` once it listed resources or subscribed to one (engine/wire/resource_watch.py).
        The engine's writers only add to each watch's bounded queue and wake this; a burst is one reading."""
        if session.streaming:  # two GETs raced past the check: the second ends at once
            return
        loop = asyncio.get_running_loop()
        session.streaming, session.ready = True, asyncio.Event()
        session.in_flight += 1
        ready = session.ready
        watched: dict[str, Any] = {}  # "tools", "resources": the watch this stream woke on
        try:
            yield b": open\n\n"  # the headers go out now, so the client knows its stream is held
            while not session.ended.is_set():
                for kind, watch in (("tools", session.protocol.tool_list), ("resources", session.protocol.resources)):
                    if watch is not None and watched.get(kind) is not watch:
                        watch.subscription.set_waker(lambda: loop.call_soon_threadsafe(ready.set))
                        watched[kind] = watch
                await either(ready, session.ended)
                if session.ended.is_set():
                    break
                await asyncio.sleep(PUSH_GATHER_S)
                ready.clear()
                for kind, watch in watched.items():
                    changes, resync = watch.subscription.take()
                    notifications = await loop.run_in_executor(
                        self._pool, _stream_notifications, kind, watch, changes, resync) if changes or resync else []
                    watch.subscription.done()
                    for notification in notifications:
                        yield sse_event(notification)
        finally:
            for watch in watched.values():
                watch.subscription.set_waker(None)
            session.streaming, session.ready = False, None
            session.in_flight -= 1
            session.last_used = loop.time()

    def end_streams(self) -> None:
        """On the server's loop, before it stops: every open stream ends."""
        for session in self.sessions.by_id.values():
            session.ended.set()
        self.listens.end_all()

    async def _delete(self, request: Request) -> Response:
        token = await self._authenticate(request)
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is None:
            raise _Refused(400, "invalid_params", f"DELETE ends a session: send its {SESSION_HEADER}")
        session = self._session(session_id, token)
        del self.sessions.by_id[session.id]
        self._forget(session)
        return Response(status_code=204)

    # --- bounds, credential, sessions ----------------------------------------------------------

    async def _read_body(self, request: Request, limit: int) -> bytes:
        """The body, never more than ``limit`` bytes held, within the time a message has to arrive.  A body
        over a session's limit from a client with a credential is read through and answered as on the socket
        (``_Oversize``: a tool call gets a tool error naming the argument); any other is refused with 413."""
        declared = request.headers.get("content-length")
        if declared is not None and not declared.isdigit():
            raise _Refused(400, "invalid_params", "Content-Length must be a number of bytes")
        within_session = limit >= self.bounds.max_message_bytes
        over = declared is not None and int(declared) > limit
        if over and not (within_session and await self._credentialed(request)):
            await self._drain(request, limit)
            raise _too_large(limit, self.bounds)
        body = bytearray()
        chunks = request.stream()
        try:
            async with asyncio.timeout(self.bounds.initialize_timeout_s):
                async for chunk in chunks:
                    body += chunk
                    if len(body) > limit:
                        break
                if len(body) > limit and within_session and await self._credentialed(request):
                    head, tail, size = bytes(body[:limit + 1]), bytes(body[-ID_WINDOW:]), len(body)
                    del body[:]
                    async for chunk in chunks:  # read through, holding no more than its last bytes
                        tail, size = (tail + chunk)[-ID_WINDOW:], size + len(chunk)
                    raise _Oversize(head, tail, limit, size)
        except TimeoutError:
            raise _Refused(408, "limit_exceeded", f"the request did not arrive within "
                           f"{self.bounds.initialize_timeout_s:g} s", limit=self.bounds.initialize_timeout_s,
                           headers={"Connection": "close"}) from None
        if len(body) > limit:
            del body[:]
            await self._drain(request, limit, chunks)
            raise _too_large(limit, self.bounds)
        return bytes(body)

    async def _credentialed(self, request: Request) -> bool:
        """Whether the request carries a credential the engine knows (asked only of a body over the limit)."""
        try:
            await self._authenticate(request)
        except _Refused:
            return False
        return True

    async def _drain(self, request: Request, budget: int, chunks: Any = None) -> None:
        """Read and drop up to ``budget`` more bytes (for ``linger_s`` at most), so that a client still
        sending reads the refusal instead of a reset, as the socket lingers on its errors."""
        chunks = chunks if chunks is not None else request.stream()
        try:
            async with asyncio.timeout(self.bounds.linger_s):
                async for chunk in chunks:
                    budget -= len(chunk)
                    if budget <= 0:
                        return
        except (TimeoutError, OSError):
            pass

    async def _authenticate(self, request: Request) -> str:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise _Refused(401, "denied", "send the agent's token as Authorization: Bearer <token>",
                           headers={"WWW-Authenticate": 'Bearer realm="knowledge"'})
        engine = self.dispatcher.engine
        agent = await asyncio.get_running_loop().run_in_executor(self._pool, engine.registry.authenticate, token)
        if agent is None:
            raise _Refused(401, "denied", "missing, unknown or revoked credential",
                           headers={"WWW-Authenticate": 'Bearer realm="knowledge", error="invalid_token"'})
        return token

    def _session(self, session_id: str, token: str) -> HttpSession:
        self.sessions.expire(_now(), self._forget)
        session = self.sessions.by_id.get(session_id)
        if session is None or not session.presented_by(token):  # another credential's session is not named
            raise _Refused(404, "not_found", "no such session (ended or expired): initialize again")
        return session

    def _forget(self, session: HttpSession) -> None:
        session.ended.set()
        if session.protocol.seen is not None:
            self.dispatcher.engine.connections.closed(session.protocol.seen)
        if session.protocol.tool_list is not None:
            session.protocol.tool_list.close()
        if session.protocol.resources is not None:
            session.protocol.resources.close()

    async def _dispatch(self, session: Session, data: bytes) -> dict[str, Any] | None:
        if self.dispatcher.answers_at_once(data):
            return self.dispatcher.handle(session, data)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.dispatcher.handle, session, data)


class HttpServer:
    """The HTTP transport's lifecycle: bind on ``start`` (raising when it cannot), serve on a thread of its
    own, ``stop`` and join."""

    def __init__(self, dispatcher: Dispatcher, *, host: str = DEFAULT_HOST, port: int,
                 bounds: SocketBounds = SocketBounds(), workers: int = WORKERS) -> None:
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.app = McpHttpApp(dispatcher, bounds=bounds, host=host, workers=workers)
        # uvicorn's cap counts the connection being refused too, hence one more than max_connections.
        self._config = uvicorn.Config(
            self.app, http=_head_bounded(bounds.initialize_timeout_s), lifespan="off", ws="none",
            loop="asyncio", log_config=None, access_log=False, server_header=False,
            limit_concurrency=bounds.max_connections + 1, h11_max_incomplete_event_size=HEADER_BYTES,
            timeout_graceful_shutdown=int(GRACEFUL_STOP_S))
        self._server = uvicorn.Server(self._config)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{ENDPOINT}"

    def start(self) -> None:
        listener = _tcp_listener(self.host, self.requested_port, min(self.app.bounds.max_connections, 1024))
        self.port = listener.getsockname()[1]
        # Bound and listening already: a client connecting before the loop runs waits in the backlog.
        self._thread = threading.Thread(target=self._run, args=(listener,), name="http-loop", daemon=True)
        self._thread.start()

    def _run(self, listener: socket.socket) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            await self._server.serve(sockets=[listener])

        try:
            asyncio.run(serve())
        finally:
            listener.close()

    def stop(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            if self._loop is not None:
                try:
                    self._loop.call_soon_threadsafe(self.app.end_streams)
                except RuntimeError:  # the loop has just ended
                    pass
            self._server.should_exit = True
            self._thread.join(timeout=GRACEFUL_STOP_S + 25)
        self.app.close()

    def info(self) -> HttpInfo:
        """Where MCP clients connect over HTTP, for engine.json."""
        return {"url": self.url, "host": self.host, "port": self.port}


def _tcp_listener(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket that names its protocol: asyncio turns Nagle's algorithm off only on sockets whose
    ``proto`` is TCP, and without that each answer's body waits for the client's delayed ACK (about 40 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if os.name == "posix":  # a port left in TIME_WAIT by the last engine is free to bind
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(backlog)
    except BaseException:
        listener.close()
        raise
    return listener


def _head_bounded(timeout_s: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline for each request's head, as the socket has one to initialize:
    a connection that has not sent a whole head within ``timeout_s`` of opening (or of its last answer)
    is closed."""

    class HeadBoundedH11(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            waiting_for = self.cycle
            self._deadline = self.loop.call_later(timeout_s, self._overdue, waiting_for)

        def _overdue(self, waiting_for: Any) -> None:
            if self.cycle is waiting_for and not self.transport.is_closing():  # no new request began
                self.transport.close()

    return HeadBoundedH11


def _reply(reply: dict[str, Any] | None, stream: bool, *, single: bool = False,
           headers: dict[str, str] | None = None) -> Response:
    """A dispatcher's answer as HTTP: 202 for a notification, else the JSON-RPC message, as JSON or as one
    Server-Sent Event; a message that could not be read at all is 400."""
    if reply is None:
        return Response(status_code=202, headers=headers)
    error = reply.get("error")
    status = 200
    if isinstance(error, dict):
        if single:
            status = SINGLE_EXCHANGE_STATUS.get(error.get("code"), 200)
        elif reply.get("id") is None and error.get("code") in (PARSE_ERROR, INVALID_REQUEST):
            status = 400
    if stream and status == 200:
        return Response(sse_event(reply), status_code=status, headers={**(headers or {}), "Cache-Control": "no-cache"},
                        media_type="text/event-stream")
    return Response(encode(reply), status_code=status, headers=headers, media_type="application/json")


def _wants_stream(accept: str) -> bool:
    """Whether the client takes only a Server-Sent Event stream (MCP clients accept both: JSON is sent)."""
    kinds = _media_types(accept)
    return "text/event-stream" in kinds and not kinds & {"application/json", "application/*", "*/*"}


def _media_types(accept: str) -> set[str]:
    return {part.split(";")[0].strip().lower() for part in accept.split(",")}


def _peek(body: bytes) -> Message | None:
    """The request the body holds, or None when it is malformed (the dispatcher then says why)."""
    try:
        return parse_request(body)
    except MalformedMessage:
        return None


def _with_credential(body: bytes, message: Message, token: str, headers: Any) -> bytes:
    """``initialize`` with the bearer credential under ``_meta.knowledge.token``, and the headers' audience and
    instance where the client's ``_meta`` names none (as the stdio bridge adds them).  A malformed ``_meta``
    goes to the dispatcher unchanged, which refuses it."""
    params = dict(message.params)
    meta = params.get("_meta")
    meta = {} if meta is None else meta  # as the dispatcher reads it: [], 0 and "" stay malformed
    knowledge = meta.get("knowledge") if isinstance(meta, dict) else []
    knowledge = {} if knowledge is None else knowledge
    if not isinstance(knowledge, dict):
        return body
    knowledge = {**knowledge, "token": token}
    if "audience" not in knowledge:
        knowledge["audience"] = _header_audience(headers, message.id)
    if "instance" not in knowledge and headers.get("knowledge-instance") is not None:
        knowledge["instance"] = headers["knowledge-instance"]
    params["_meta"] = {**meta, "knowledge": knowledge}
    rebuilt = {"jsonrpc": "2.0", "id": message.id, "method": message.method, "params": params}
    return json.dumps(rebuilt).encode("ascii")  # escapes: a lone surrogate stays one the dispatcher names


def _stream_notifications(kind: str, watch: Any, changes: list[dict[str, Any]], resync: bool) -> list[dict[str, Any]]:
    """What a 2025 session's stream owes its client for a burst of ``kind`` ("tools" or "resources"); on a
    worker, since it reads the store."""
    if kind == "tools":
        return [list_changed_notification()] if watch.changed(changes, resync) else []
    return list(watch.changed(changes, resync))


def _header_text(value: str) -> str | None:
    """A mirrored header's value: as sent, or decoded from MCP's ``=?base64?<UTF-8 as base64>?=`` form (None
    when that is malformed, so it matches nothing)."""
    encoded = re.fullmatch(r"=\?base64\?(.*)\?=", value)
    if encoded is None:
        return value
    try:
        return base64.b64decode(encoded.group(1), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _header_audience(headers: Any, request_id: Any = None) -> HeaderAudience:
    """The audience the ``Knowledge-Audience`` headers name (as ``knowledge mcp``'s flags), else owner-private;
    the dispatcher checks it like any audience.  A conversation whose headers are missing or whose session id
    is no UUID is refused here, naming the header (the dispatcher would name ``_meta``, which the client did not
    send)."""
    kind = headers.get("knowledge-audience", "owner-private")
    if kind != "conversation":
        return {"kind": kind}
    key, session_id = headers.get("knowledge-session-key"), headers.get("knowledge-session-id")
    if not key or not session_id:
        missing = "Knowledge-Session-Key" if not key else "Knowledge-Session-Id"
        raise _Refused(400, "invalid_params", "Knowledge-Audience: conversation needs the Knowledge-Session-Key "
                       f"and Knowledge-Session-Id headers; {missing} is missing", request_id=request_id,
                       field=missing)
    if canonical_session_id(session_id) is None:
        raise _Refused(400, "invalid_params", "Knowledge-Session-Id must be the conversation's session UUID, such as "
                       "0b6a6c55-3f6c-4f54-9a8e-0b1c2d3e4f50", request_id=request_id, field="Knowledge-Session-Id")
    return {"kind": kind, "sessionKey": key, "sessionId": session_id}


def _hostname(value: str, *, url: bool) -> str | None:
    """The host name of an Origin (``scheme://host[:port]``) or a Host header (``host[:port]``); None when it
    has none (``null``, another scheme, a port that is no port, garbage)."""
    if not url and HOST_FORM.fullmatch(value) is None:  # urlsplit reads past what a Host may hold
        return None
    try:
        parts = urlsplit(value if url else f"http://{value}")
        if url and parts.scheme not in ("http", "https"):
            return None
        parts.port  # noqa: B018 - raises for a port that is not a number from 0 to 65535
        return parts.hostname
    except ValueError:
        return None


def _too_large(limit: int, bounds: SocketBounds) -> _Refused:
    hint = "" if limit >= bounds.max_message_bytes else (
        f"; initialize first (messages of up to {bounds.max_message_bytes} bytes are accepted within a session)")
    return _Refused(413, "limit_exceeded", f"a message is longer than {limit} bytes{hint}", limit=limit,
                    headers={"Connection": "close"})


def _now() -> float:
    return asyncio.get_running_loop().time()
