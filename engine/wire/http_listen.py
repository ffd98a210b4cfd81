"""``subscriptions/listen`` over Streamable HTTP (MCP 2026-07-28): the listen POST's response is the stream.

engine/wire/http.py checks the POST as any single exchange and has the dispatcher open the stream on the
session made for that request (engine/wire/listen.py: the kinds, their sources, the tags); this module
keeps the open streams and writes each as Server-Sent Events: the acknowledgement, then what the socket
pushes a listening connection (``EngineServer._push_changes``): the engine's writers only add to the
stream's bounded change queue and wake it, a burst is gathered, and its sources make their notifications
on a worker.  Before anything goes out, and whenever agents or grants change, the bearer credential is
checked again; a revoked one's stream ends with a ``denied`` error.  A stream ends when the client closes
its response, when it is cancelled (``notifications/cancelled`` POSTed with the same credential: the
request stays unanswered), or when the server stops (MCP's graceful close: the listen request's result).
A quiet stream sends a comment every ``LISTEN_KEEPALIVE_S``.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from starlette.responses import StreamingResponse

from ..core.changes import Subscription
from .listen import SUBSCRIPTION_ID_KEY, ListenStream, Notification
from .messages import encode, error_response
from .protocol import ERROR_CODES, Session, request_key
from .server import PUSH_GATHER_S

if TYPE_CHECKING:
    from .protocol import Dispatcher

log = logging.getLogger(__name__)

# A quiet stream sends a comment this often, as the SDK's server does: a client's read timeout (the SDK's
# recommended one is 300 s) then never takes a quiet stream for a dead one.
LISTEN_KEEPALIVE_S = 15.0
AUTHORITY_TOPICS = ("stores", "grants")  # an agent removed, a grant revoked: a stream checks its credential
KEEPALIVE = b": keepalive\n\n"


@dataclass(eq=False)
class Listening:
    """One open stream: its POST's response, on the session made for that request."""

    token: str
    key: tuple[type, Any] | None  # the listen request's id, as a cancellation names it
    session: Session  # its ``listen`` is the stream
    authority: Subscription  # AUTHORITY_TOPICS: wakes the stream to check its credential again
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # cancelled, or the server stopping
    graceful: bool = False  # the server ends it: the listen request is answered

    def presented_by(self, token: str) -> bool:
        return hmac.compare_digest(self.token.encode(), token.encode())


class ListenResponse(StreamingResponse):
    """A stream's response; ``on_end`` runs however it ends (finished, client gone, never started)."""

    def __init__(self, content: AsyncIterator[bytes], on_end: Callable[[], None]) -> None:
        super().__init__(content, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        self._on_end = on_end

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_end()


class HttpListens:
    """The HTTP server's open listen streams; touched only on its event loop, so no lock."""

    def __init__(self, dispatcher: Dispatcher, pool: Executor) -> None:
        self.dispatcher = dispatcher
        self._pool = pool
        self.open: set[Listening] = set()
        self.opening = 0  # streams the dispatcher is opening: they count under the cap already
        self.keepalive_s = LISTEN_KEEPALIVE_S

    def response(self, session: Session, token: str, body: bytes, acknowledgement: dict[str, Any]) -> ListenResponse:
        """The response of a listen the dispatcher opened on ``session`` (answering ``acknowledgement``)."""
        listening = Listening(token, request_key(body), session, self.dispatcher.engine.changes.subscribe(
            AUTHORITY_TOPICS))
        self.open.add(listening)
        return ListenResponse(self._events(listening, acknowledgement), lambda: self.end(listening))

    async def _events(self, listening: Listening, acknowledgement: dict[str, Any]) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        stream, ready = listening.session.listen, asyncio.Event()
        assert stream is not None
        for subscription in (stream.subscription, listening.authority):
            subscription.set_waker(lambda: loop.call_soon_threadsafe(ready.set))
        yield sse_event(acknowledgement)
        while True:
            try:
                async with asyncio.timeout(self.keepalive_s):
                    await either(ready, listening.ended)
            except TimeoutError:
                yield KEEPALIVE
                continue
            if listening.ended.is_set():
                break
            await asyncio.sleep(PUSH_GATHER_S)  # a burst of writes goes out as one notification
            ready.clear()
            revocations, overflowed = listening.authority.take()
            listening.authority.done()
            changes, resync = stream.subscription.take()
            notes = await self._notifications(stream, changes, resync) if changes or resync else []
            stream.subscription.done()
            if (notes or revocations or overflowed) and not await self._still_valid(listening.token):
                yield sse_event(error_response(stream.request_id, ERROR_CODES["denied"], "denied",
                                               "the credential was revoked: this stream has ended"))
                return
            for note in notes:
                yield sse_event(dict(note))
        if listening.graceful:  # MCP's graceful close: the listen request's result, tagged like the stream
            yield sse_event({"jsonrpc": "2.0", "id": stream.request_id, "result": {
                "_meta": {SUBSCRIPTION_ID_KEY: stream.request_id}, "resultType": "complete"}})

    async def _notifications(self, stream: ListenStream, changes: list[dict[str, Any]],
                             resync: bool) -> list[Notification]:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, stream.notifications, changes, resync)
        except Exception:  # noqa: BLE001 - a failing source costs its burst, never the stream
            log.exception("a subscriptions/listen stream could not make its notifications")
            return []

    async def _still_valid(self, token: str) -> bool:
        registry = self.dispatcher.engine.registry
        return await asyncio.get_running_loop().run_in_executor(self._pool, registry.authenticate, token) is not None

    def cancel(self, token: str, key: tuple[type, Any] | None) -> None:
        """``notifications/cancelled`` naming an open stream of the same credential ends it, unanswered."""
        for listening in self.open:
            if key is not None and listening.key == key and listening.presented_by(token):
                listening.ended.set()

    def end(self, listening: Listening) -> None:
        self.open.discard(listening)
        listening.authority.close()
        self.dispatcher.end_listen(listening.session)

    def end_all(self) -> None:
        """On the server's loop, before it stops: every stream ends gracefully."""
        for listening in self.open:
            listening.graceful = True
            listening.ended.set()

    def close(self) -> None:
        for listening in list(self.open):
            self.end(listening)


def sse_event(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as a Server-Sent Event (compact JSON holds no newline)."""
    return b"event: message\ndata: " + encode(message).rstrip(b"\n") + b"\n\n"


async def either(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
