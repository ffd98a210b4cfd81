"""A real engine for real MCP clients: ``knowledge serve`` in a child process, and the ``knowledge mcp`` bridge
to it as an MCP SDK stdio server."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import anyio

from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Served:
    """A serving engine's state directory: its CLI, and the bridge parameters for an agent."""

    cli: list[str]
    env: dict[str, str]

    def run(self, *args: str) -> None:
        subprocess.run([*self.cli, *args], check=True, env=self.env, capture_output=True, cwd=ROOT)

    def bridge(self, agent: str = "main") -> Any:
        from mcp.client.stdio import StdioServerParameters

        return StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=self.env,
                                     args=[*self.cli[1:], "mcp", "--agent", agent])


@contextlib.contextmanager
def served_engine(tmp_path: Path, owner_agent: str = "main") -> Iterator[Served]:
    """``knowledge serve --port 0`` over a fresh state directory with ``owner_agent`` registered as an owner."""
    state = tmp_path / "state"
    served = Served([sys.executable, "-m", "engine.cli", "--state-dir", str(state)],
                    {**os.environ, "PYTHONPATH": str(ROOT)})
    served.run("agents", "add", owner_agent, "--owner")
    serve = subprocess.Popen([*served.cli, "serve", "--port", "0"], env=served.env, cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (state / "engine.json").exists(), timeout=60)
        yield served
    finally:
        serve.terminate()
        serve.wait(30)


def run_client(served: Served, heard: type, before: Callable[[Any], Awaitable[None]],
               after: Callable[[Any], Awaitable[None]] | None = None) -> list[Any]:
    """The official MCP client through ``knowledge mcp``: ``before(client)`` (it initializes, and makes a
    change), then a wait for a notification of type ``heard``, then ``after(client)``; the notifications heard."""
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    notified: list[Any] = []

    async def session() -> None:
        arrived = anyio.Event()

        async def on_message(incoming: Any) -> None:
            if isinstance(incoming, heard):
                notified.append(incoming)
                arrived.set()

        async with stdio_client(served.bridge()) as (read, write):
            async with ClientSession(read, write, message_handler=on_message) as client:
                await before(client)
                with anyio.fail_after(60):  # a hang guard: the wait is for the notification itself
                    await arrived.wait()
                if after is not None:
                    await after(client)

    anyio.run(session)
    return notified
