"""The engine's socket: JSON-RPC 2.0, one message per line, on loopback only.

The event loop runs in its own thread with explicit start/stop/join.  It
only moves bytes: each request is handed to a worker pool where the engine
does the work (authorizing, then queueing on the store's lane), so one slow
store or one slow client never stalls the others.  A short ``ping`` is the
exception: the loop answers it at once, so a liveness probe never waits for
a worker while every worker waits on a busy lane.  Messages are UTF-8 JSON
objects of at most 8 MiB; a longer line gets an error and the connection is
closed, since the stream cannot be resynchronised.

    TCP      127.0.0.1:<port>      (default 7431; 0 picks a free port)
    POSIX    <state>/engine.sock   (mode 0600)
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .operator_api import ensure_operator_token
from .protocol import Dispatcher, Session, error_response
from .service import Engine

log = logging.getLogger(__name__)
DEFAULT_PORT = 7431
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
WORKERS = 32
_UNIX_PATH_MAX = 100


class EngineServer:
    def __init__(self, engine: Engine, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 socket_path: Path | None = None, workers: int = WORKERS) -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError("the engine only listens on loopback")
        self.engine = engine
        self.host = host
        self.requested_port = port
        self.socket_path = socket_path if socket_path is not None and len(str(socket_path)) < _UNIX_PATH_MAX \
            else None
        self.port: int | None = None
        self.dispatcher = Dispatcher(engine)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._startup_error: BaseException | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[asyncio.Task] = set()

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
        try:
            tcp = await asyncio.start_server(self._serve, self.host, self.requested_port,
                                             limit=MAX_MESSAGE_BYTES + 1, reuse_address=True)
            self._servers.append(tcp)
            self.port = tcp.sockets[0].getsockname()[1]
            if self.socket_path is not None and hasattr(socket, "AF_UNIX"):
                self._servers.append(await self._start_unix())
        except OSError as exc:
            self._startup_error = exc
            for server in self._servers:
                server.close()
            self._ready.set()
            return
        self._ready.set()
        await self._stopped.wait()
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()

    async def _start_unix(self) -> asyncio.base_events.Server:
        assert self.socket_path is not None
        try:
            self.socket_path.unlink()  # we own the state directory's lock, so any old socket is stale
        except FileNotFoundError:
            pass
        previous = os.umask(0o077)
        try:
            server = await asyncio.start_unix_server(self._serve, path=str(self.socket_path),
                                                     limit=MAX_MESSAGE_BYTES + 1)
        finally:
            os.umask(previous)
        os.chmod(self.socket_path, 0o600)
        return server

    # --- connections -------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        session = Session()
        try:
            while True:
                try:
                    line = await reader.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:
                    if exc.partial.strip():  # a last message without its newline
                        await self._respond(writer, await self._dispatch(session, exc.partial))
                    break
                except asyncio.LimitOverrunError:
                    await self._send(writer, error_response(None, -32600, "limit_exceeded",
                                                            f"a message is longer than {MAX_MESSAGE_BYTES} bytes"))
                    break
                if not line.strip():
                    continue
                await self._respond(writer, await self._dispatch(session, line))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, asyncio.CancelledError):
                pass

    async def _dispatch(self, session: Session, data: bytes) -> dict[str, Any] | None:
        if self.dispatcher.answers_at_once(data):  # ping: answered here, never queued behind busy workers
            return self.dispatcher.handle(session, data)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.dispatcher.handle, session, data)

    async def _respond(self, writer: asyncio.StreamWriter, response: dict[str, Any] | None) -> None:
        if response is not None:
            await self._send(writer, response)

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        writer.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
        await writer.drain()
