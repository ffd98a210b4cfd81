"""``knowledge mcp``: a stdio MCP server that relays to the running engine's socket.

Any MCP client can launch it as a command.  Messages pass through unchanged,
except that the client's ``initialize`` gets the agent's credential and
audience added under ``params._meta.knowledge``, since MCP clients know
nothing of them.  The bridge holds no state and does no work of its own.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from typing import Any, BinaryIO

from .statedir import StateDir


class BridgeError(Exception):
    """The bridge cannot reach an engine; the message says what to do."""


def connect(state: StateDir, timeout: float = 5.0) -> socket.socket:
    """A connection to the engine that owns ``state``, preferring its POSIX socket."""
    info = state.read_engine_info()
    if not info:
        raise BridgeError(f"no Knowledge engine is running for {state.root}; start one with `knowledge serve`")
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
        raise BridgeError("engine.json names no port; is the engine running?")
    try:
        client = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as exc:
        raise BridgeError(f"cannot reach the engine on port {port}: {exc.strerror or exc}") from exc
    client.settimeout(None)
    return client


def with_credentials(line: bytes, knowledge: dict[str, Any]) -> bytes:
    """Add the credential to an ``initialize`` request; every other line passes through untouched."""
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
    return json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"


def run_bridge(state: StateDir, knowledge: dict[str, Any], stdin: BinaryIO | None = None,
               stdout: BinaryIO | None = None) -> int:
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    engine = connect(state)

    def upstream() -> None:
        try:
            for line in iter(stdin.readline, b""):
                engine.sendall(with_credentials(line, knowledge))
        except OSError:
            pass
        finally:
            try:
                engine.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    sender = threading.Thread(target=upstream, name="mcp-upstream", daemon=True)
    sender.start()
    with engine.makefile("rb") as replies:
        for line in replies:
            stdout.write(line)
            stdout.flush()
    engine.close()
    return 0
