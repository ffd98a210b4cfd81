"""Find the engine that owns a state directory, or start one as a child process.

The window is a client: when no engine runs it starts ``knowledge serve
--port 0`` in its own session (output in ``<state>/engine.log``), so the
engine, and with it the agents' memory, keeps running after the window
closes.  Runs on the tasks' worker thread, never on the GUI thread.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from engine.state.statedir import StateDir

from .client import EngineError, OperatorClient, assert_off_gui_thread

START_TIMEOUT_S = 60.0
POLL_S = 0.05
LOG_NAME = "engine.log"


@dataclass(frozen=True)
class EngineHandle:
    """The engine the window talks to: where it listens, and its pid if this window started it."""

    info: dict[str, Any]
    started_pid: int | None = None

    @property
    def description(self) -> str:
        where = f"127.0.0.1:{self.info.get('port')}"
        how = "started by this window" if self.started_pid else "already running"
        return f"engine pid {self.info.get('pid')} on {where} ({how})"


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_engine(state: StateDir) -> dict[str, Any] | None:
    """engine.json of a live engine for ``state``, else None."""
    info = state.read_engine_info()
    return info if info is not None and _alive(info.get("pid")) else None


def attach_or_start(state: StateDir, *, demo: bool = False, timeout: float = START_TIMEOUT_S) -> EngineHandle:
    """Attach to the running engine, or start one (seeding the demo first when ``demo``)."""
    assert_off_gui_thread("starting the engine")
    info = running_engine(state)
    if info is not None:
        return EngineHandle(info)
    return start_engine(state, demo=demo, timeout=timeout)


def engine_command() -> list[str]:
    """How to run ``knowledge``: this interpreter with the CLI module, or the bundle's own executable."""
    if getattr(sys, "frozen", False):  # a PyInstaller bundle: the executable is the CLI
        return [sys.executable]
    return [sys.executable, "-m", "engine.cli"]


def start_engine(state: StateDir, *, demo: bool = False, timeout: float = START_TIMEOUT_S) -> EngineHandle:
    state.create()
    command = [*engine_command(), "--state-dir", str(state.root), "serve", "--port", "0"]
    if demo:
        command.append("--demo")
    with open(state.root / LOG_NAME, "ab") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = state.read_engine_info()
        if info is not None and info.get("pid") == process.pid and info.get("port"):
            return EngineHandle(info, started_pid=process.pid)
        code = process.poll()
        if code is not None:
            raise EngineError("unreachable", f"The Knowledge engine stopped while starting (exit code {code}): "
                                             f"{_log_tail(state)}")
        time.sleep(POLL_S)  # a worker thread waiting for another process; the GUI stays live
    process.terminate()
    raise EngineError("unreachable", f"The Knowledge engine did not start within {timeout:.0f} s; "
                                     f"see {state.root / LOG_NAME}")


def stop_engine(handle: EngineHandle, state: StateDir | None = None) -> None:
    """Stop the engine (it finishes its work and removes engine.json): one this window started, or,
    given ``state``, the one it attached to while ``engine.json`` still names that process.

    An engine serving inside this very process (an embedding program's) is never signalled.
    """
    if handle.started_pid is not None:
        pid: Any = handle.started_pid
    else:
        current = state.read_engine_info() if state is not None else None
        pid = handle.info.get("pid")
        if current is None or current.get("pid") != pid or current.get("started_at") != handle.info.get("started_at"):
            raise EngineError("unreachable", "The engine this window attached to is no longer the one running; "
                                             "nothing was stopped")
    if pid == os.getpid():
        raise EngineError("refused", "The engine runs inside this program; it stops when the program does")
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)


def connect(state: StateDir, *, demo: bool = False) -> tuple[OperatorClient, EngineHandle]:
    """Attach or start, then open the operator connection (checked with a first request)."""
    handle = attach_or_start(state, demo=demo)
    client = OperatorClient(state)
    client.call("ping")
    return client, handle


def _log_tail(state: StateDir, lines: int = 5) -> str:
    try:
        text = (state.root / LOG_NAME).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "no log"
    return " | ".join(text.strip().splitlines()[-lines:]) or "no output"
