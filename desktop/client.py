"""The desktop's one way to the engine: a JSON-RPC connection as the local operator.

The connection itself is the engine's (``engine.wire.operator_client``, which
the command line uses too); the desktop adds one rule: it is blocking by
design, and so never used on the GUI thread.  Every ``call`` first checks the
calling thread and raises ``GuiThreadViolation`` there (the views reach it
through ``desktop.tasks.EngineTasks``, which runs it on a worker thread).
Engine errors arrive as ``EngineError`` with the wire's ``reason`` and a
message meant for people.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QCoreApplication, QThread

from engine.state.statedir import StateDir
from engine.wire.messages import MAX_MESSAGE_BYTES
from engine.wire.operator_client import OperatorConnection, open_socket
from engine.wire.operator_client import OperatorError as EngineError

__all__ = ["MAX_MESSAGE_BYTES", "EngineError", "GuiThreadViolation", "OperatorClient", "assert_off_gui_thread",
           "open_socket"]


class GuiThreadViolation(AssertionError):
    """Socket, file or database work was attempted on the GUI thread."""


def assert_off_gui_thread(what: str) -> None:
    app = QCoreApplication.instance()
    if app is not None and QThread.currentThread() == app.thread():
        raise GuiThreadViolation(f"{what} on the GUI thread; run it through EngineTasks")


class OperatorClient(OperatorConnection):
    """One operator connection to the engine that owns ``state``, never used on the GUI thread."""

    def __init__(self, state: StateDir) -> None:
        super().__init__(state, client_name="knowledge-desktop")

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        assert_off_gui_thread(f"engine request {method}")
        return super().call(method, params)

    def connect(self) -> None:
        assert_off_gui_thread("connecting to the engine")
        super().connect()
