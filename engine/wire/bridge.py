"""``knowledge mcp``: a stdio MCP server that relays to the running engine's socket.

Any MCP client can launch it as a command, speaking MCP 2026-07-28 or one of
the 2025 revisions.  Messages pass through unchanged, except that the
credential is added for the client, since MCP clients know nothing of it: a
2025 client's ``initialize`` gets the agent's credential and audience under
``params._meta.knowledge``; a 2026-07-28 client has no handshake, so before
its first request (``server/discover`` aside, which needs no credential) the
bridge authenticates its own engine connection with ``knowledge/authenticate``
and relays the client's requests untouched after that.  The bridge holds no
state and does no work of its own, with three exceptions that keep one MCP
session alive for as long as its client runs, and one for a session that
cannot start:

- a line longer than the engine's message limit is not forwarded (the engine
  would have to close the connection, and every later call would fail); the
  bridge answers it with ``limit_exceeded`` for that call's id itself;
- the engine connection is opened when the client's first message arrives, so
  a client that is slow to initialize does not meet the engine's deadline;
- when the client has been quiet for ``KEEPALIVE_S`` the bridge pings the
  engine (and drops the answer), so the engine's idle timeout never closes a
  session its client is still holding;
- when it cannot reach the engine or read its token, it answers the client's
  requests with a JSON-RPC error naming the cause and the fix
  (``refuse_client``), then exits when the client closes its end: the client
  shows that, not "Connection closed".

It imports only what the relay needs (no engine, gate or model code), so a
client that launches it gets its ``initialize`` answered at once.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from typing import Any, BinaryIO

from ..core.errors import wire_codes
from ..state.statedir import StateDir
from .messages import ID_WINDOW, MAX_MESSAGE_BYTES, encode, error_response, oversize_answer

KEEPALIVE_S = 240.0  # well inside the engine's idle timeout (SocketBounds.idle_timeout_s, 900 s)
_KEEPALIVE = b'{"jsonrpc":"2.0","id":"knowledge-bridge:keepalive","method":"ping"}\n'
_KEEPALIVE_REPLY = b'{"jsonrpc":"2.0","id":"knowledge-bridge:keepalive",'  # as the engine writes it (wire.encode)
_AUTHENTICATE_ID = "knowledge-bridge:authenticate"
_AUTHENTICATE_REPLY = b'{"jsonrpc":"2.0","id":"knowledge-bridge:authenticate",'
# MCP 2026-07-28's per-request protocol version key (engine/wire/modern.py, not imported: the relay stays light).
_ENVELOPE_KEY = "io.modelcontextprotocol/protocolVersion"
_CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
_UNAUTHENTICATED = ("initialize", "server/discover")  # 2026-07-28 requests answered before the credential
_DISCARD_BYTES = 1024 * 1024
_REFUSAL_LINES = 16  # the lines a client that cannot be served is answered for before the bridge exits
ERROR_CODES = wire_codes()


class BridgeError(Exception):
    """The bridge cannot start a session: no engine to reach, no token to present.  The message says what to
    do; ``reason`` is the wire reason the client's first request is answered with."""

    def __init__(self, message: str, reason: str = "engine_unreachable") -> None:
        super().__init__(message)
        self.reason = reason


def connect(state: StateDir, timeout: float = 5.0) -> socket.socket:
    """A connection to the engine that owns ``state``, preferring its POSIX socket."""
    info = state.read_engine_info()
    if not info:
        raise BridgeError(f"no Knowledge engine is running for {state.root}; start one with `knowledge serve` "
                          "(or open the Knowledge Desk window), then reconnect")
    path = info.get("socket")
    if path and hasattr(socket, "AF_UNIX"):
        try:
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.settimeout(timeout)
            client.connect(path)
            client.settimeout(None)
            return client
        except OSError:
            client.close()
    port = info.get("port")
    if not isinstance(port, int):
        raise BridgeError(f"{state.engine_info} names no port: the engine is starting or has stopped; start it "
                          "with `knowledge serve` if it has stopped, then reconnect")
    try:
        client = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as exc:
        raise BridgeError(f"cannot reach the engine on port {port}: {exc.strerror or exc}; if it has stopped, "
                          "start it with `knowledge serve`, then reconnect") from exc
    client.settimeout(None)
    return client


def refuse_client(error: BridgeError, stdin: BinaryIO, stdout: BinaryIO, first: bytes | None = None) -> None:
    """Answer the client's requests (``first``, then each line it sends that is one) with ``error``, until it
    closes its end or has sent ``_REFUSAL_LINES`` lines.

    A client launches the bridge and sends its first request at once; answering it with the cause and the fix
    is the one way the owner sees why, where a bridge that just exits shows only "Connection closed".  Every
    request is answered, not only the first: a client that negotiates its revision tries ``server/discover``
    and then falls back to ``initialize``, and that one must hear the cause too."""
    line = first
    for _ in range(_REFUSAL_LINES):
        if line is None:
            line = stdin.readline(MAX_MESSAGE_BYTES + 1)
        if not line:
            return
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and "id" in message and isinstance(message.get("method"), str):
            stdout.write(encode(error_response(message["id"], ERROR_CODES[error.reason], error.reason, str(error))))
            stdout.flush()
        line = None


def with_credentials(line: bytes, knowledge: dict[str, Any]) -> bytes:
    """Add the credential to an ``initialize`` request; every other line passes through untouched."""
    if b'"initialize"' not in line:  # not worth decoding: a tool call may be megabytes
        return line
    try:
        message = json.loads(line)
    except ValueError:
        return line
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return line
    params = message.get("params")
    if not isinstance(params, dict):
        params = message["params"] = {}
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        meta = params["_meta"] = {}
    meta["knowledge"] = knowledge
    # ASCII escapes: a lone surrogate the client sent stays an escape the engine can name, not an encode error.
    return json.dumps(message).encode("ascii") + b"\n"


def modern_request(line: bytes) -> dict[str, Any] | None:
    """The request a line holds when it is a 2026-07-28 request that needs the credential (not
    ``server/discover``, which a client may send before choosing its revision); else None."""
    if _ENVELOPE_KEY.encode() not in line:  # not worth decoding otherwise
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or "id" not in message or message.get("method") in _UNAUTHENTICATED:
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return message if isinstance(meta, dict) and _ENVELOPE_KEY in meta else None


def authenticate_line(knowledge: dict[str, Any], request: dict[str, Any]) -> bytes:
    """``knowledge/authenticate`` for the bridge's engine connection, naming the client as its envelope does."""
    params: dict[str, Any] = {"_meta": {"knowledge": knowledge}}
    info = request["params"]["_meta"].get(_CLIENT_INFO_KEY)
    if isinstance(info, dict):
        params["clientInfo"] = info
    return json.dumps({"jsonrpc": "2.0", "id": _AUTHENTICATE_ID, "method": "knowledge/authenticate",
                       "params": params}).encode("ascii") + b"\n"


def run_bridge(state: StateDir, knowledge: dict[str, Any], stdin: BinaryIO | None = None,
               stdout: BinaryIO | None = None, keepalive_s: float = KEEPALIVE_S) -> int:
    """Relay until the client closes stdin (after the engine's last answers) or the engine goes away.

    Where no engine can be reached, the client's first request is answered with the reason, and the
    ``BridgeError`` is raised for the command to say on stderr too."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    try:
        connect(state).close()  # fail at once, with a clear message, when no engine is reachable
    except BridgeError as exc:
        refuse_client(exc, stdin, stdout)
        raise
    relay = _Relay(state, knowledge, stdout, keepalive_s)
    sender = threading.Thread(target=relay.upstream, args=(stdin,), name="mcp-upstream", daemon=True)
    sender.start()
    relay.opened.wait()
    if relay.failure is not None:
        refuse_client(relay.failure, stdin, stdout, first=relay.unsent)
        raise relay.failure
    if relay.engine is not None:
        relay.downstream()
    return 0


class _Relay:
    """One MCP session: the client's lines up to the engine, the engine's answers back."""

    def __init__(self, state: StateDir, knowledge: dict[str, Any], stdout: BinaryIO, keepalive_s: float) -> None:
        self.state = state
        self.knowledge = knowledge
        self.stdout = stdout
        self.keepalive_s = keepalive_s
        self.engine: socket.socket | None = None
        self.failure: BridgeError | None = None
        self.unsent: bytes | None = None  # the client's line that found no engine to go to
        self.opened = threading.Event()  # the engine connection is open, or there will be none
        self._sending = threading.Lock()  # one line at a time to the engine (client lines and keepalives)
        self._writing = threading.Lock()  # one line at a time to the client (answers and the bridge's errors)
        self._last_sent = time.monotonic()
        self._done = threading.Event()
        self.era: str | None = None  # "handshake" or "2026-07-28", once the client's first request showed it
        self._authenticated = threading.Event()  # the engine answered knowledge/authenticate (or went away)
        self._authentication: dict[str, Any] | None = None  # that answer

    def upstream(self, stdin: BinaryIO) -> None:
        try:
            while True:
                line = stdin.readline(MAX_MESSAGE_BYTES + 1)
                if not line:
                    break
                if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
                    self._refuse_oversize(line, stdin)
                    continue
                if self.engine is None and not self._open():
                    self.unsent = line
                    return
                if self.era is None and not self._settle_era(line):
                    continue
                self._send(with_credentials(line, self.knowledge))
        except OSError:
            pass
        finally:
            self._done.set()
            self.opened.set()
            if self.engine is not None:
                try:
                    self.engine.shutdown(socket.SHUT_WR)  # the engine answers what it has, then closes
                except OSError:
                    pass

    def downstream(self) -> None:
        assert self.engine is not None
        try:
            with self.engine.makefile("rb") as replies:
                for line in replies:
                    if line.startswith(_AUTHENTICATE_REPLY):
                        self._authentication = json.loads(line)
                        self._authenticated.set()
                    elif not line.startswith(_KEEPALIVE_REPLY):
                        self._write(line)
        except OSError:
            pass  # the client stopped reading, or the engine reset: the session is over either way
        finally:
            self._done.set()
            self._authenticated.set()
            self.engine.close()

    def _settle_era(self, line: bytes) -> bool:
        """Whether to forward ``line``, a line before the client's revision is known.  ``initialize`` settles the
        handshake; the first 2026-07-28 request that needs the credential has the bridge authenticate its
        engine connection first, and is answered with the engine's refusal instead when that fails."""
        if b'"initialize"' in line and with_credentials(line, self.knowledge) is not line:
            self.era = "handshake"
            return True
        request = modern_request(line)
        if request is None:
            return True
        self._authenticated.clear()
        self._send(authenticate_line(self.knowledge, request))
        self._authenticated.wait()
        answer, self._authentication = self._authentication, None
        if answer is None:  # the engine went away: the relay ends
            return False
        if "error" in answer:
            self._write(encode({"jsonrpc": "2.0", "id": request["id"], "error": answer["error"]}))
            return False
        self.era = "2026-07-28"
        return True

    def _open(self) -> bool:
        try:
            self.engine = connect(self.state)
        except BridgeError as exc:
            self.failure = exc
            return False
        self.opened.set()
        threading.Thread(target=self._keepalive, name="mcp-keepalive", daemon=True).start()
        return True

    def _send(self, line: bytes) -> None:
        assert self.engine is not None
        with self._sending:
            self.engine.sendall(line)
            self._last_sent = time.monotonic()

    def _keepalive(self) -> None:
        while not self._done.wait(self.keepalive_s / 4):
            if time.monotonic() - self._last_sent >= self.keepalive_s:
                try:
                    self._send(_KEEPALIVE)
                except OSError:
                    return

    def _refuse_oversize(self, head: bytes, stdin: BinaryIO) -> None:
        """Read the rest of the line without keeping it, and answer the call that sent it (naming the member
        the limit was passed in, as the engine does: a tool call gets a tool error)."""
        tail, size = head[-ID_WINDOW:], len(head)
        while not tail.endswith(b"\n"):
            more = stdin.readline(_DISCARD_BYTES)
            if not more:
                break
            tail, size = (tail + more)[-ID_WINDOW:], size + len(more)
        self._write(encode(oversize_answer(head, tail, MAX_MESSAGE_BYTES, size - tail.endswith(b"\n"),
                                           modern=self.era != "handshake")))  # a 2025 client initializes first

    def _write(self, line: bytes) -> None:
        with self._writing:
            self.stdout.write(line)
            self.stdout.flush()
