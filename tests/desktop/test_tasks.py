"""The operator client and the worker: requests run off the GUI thread, errors arrive readable."""

from __future__ import annotations

import os
import threading

import pytest

from desktop.client import EngineError, GuiThreadViolation, OperatorClient
from desktop.tasks import EngineTasks, readable
from engine.core.errors import NotFound


def test_the_client_refuses_to_send_on_the_gui_thread(qapp, served) -> None:
    client = OperatorClient(served)
    with pytest.raises(GuiThreadViolation):
        client.call("operator/inventory")
    client.close()


def test_requests_run_on_the_worker_and_answer_on_the_gui_thread(qtbot, tasks, gui_thread_guard) -> None:
    threads: list[str] = []
    answers: list[dict] = []

    def on_done(result: dict) -> None:
        threads.append(threading.current_thread().name)
        answers.append(result)

    tasks.run(lambda: threads.append(threading.current_thread().name), lambda _: None)
    with qtbot.waitSignal(tasks.sig_busy_changed, check_params_cb=lambda busy: not busy, timeout=10_000):
        tasks.request("operator/inventory", None, on_done)

    assert threads[0].startswith("desktop-engine") and threads[1] == threading.main_thread().name
    assert answers[0]["agents"][0]["name"] == "main"


def test_engine_errors_reach_the_error_handler_as_readable_messages(qtbot, tasks, gui_thread_guard) -> None:
    messages: list[str] = []
    with qtbot.waitSignal(tasks.sig_busy_changed, check_params_cb=lambda busy: not busy, timeout=10_000):
        tasks.request("operator/records", {"agent": "nobody"}, lambda _: None, on_error=messages.append)
    assert messages == ["no agent named 'nobody'"]

    with qtbot.waitSignal(tasks.sig_error_raised, timeout=10_000) as raised:
        tasks.request("operator/records", {"agent": "main", "limit": 0}, lambda _: None)
    assert "limit must be an integer" in raised.args[0] and "Traceback" not in raised.args[0]


def test_a_loose_token_file_is_reported_with_the_fix(qtbot, served, gui_thread_guard) -> None:
    os.chmod(served.operator_token, 0o644)
    tasks = EngineTasks(connect=lambda: OperatorClient(served))
    try:
        with qtbot.waitSignal(tasks.sig_error_raised, timeout=10_000) as raised:
            tasks.request("operator/inventory", None, lambda _: None)
    finally:
        tasks.shutdown()
    assert "chmod 600" in raised.args[0]


def test_no_engine_is_a_readable_error(qtbot, tmp_path, gui_thread_guard) -> None:
    from engine.state.statedir import StateDir

    tasks = EngineTasks(connect=lambda: OperatorClient(StateDir(tmp_path / "empty")))
    try:
        with qtbot.waitSignal(tasks.sig_error_raised, timeout=10_000) as raised:
            tasks.request("ping", None, lambda _: None)
    finally:
        tasks.shutdown()
    assert raised.args[0].startswith("No Knowledge engine is running")


def test_results_for_a_deleted_view_are_dropped(qtbot, tasks, gui_thread_guard) -> None:
    from PySide6.QtWidgets import QWidget

    import shiboken6

    owner = QWidget()
    called: list[object] = []
    tasks.request("ping", None, called.append, owner=owner)
    shiboken6.delete(owner)  # the view is gone before its answer arrives
    qtbot.waitUntil(lambda: not tasks.busy, timeout=10_000)
    assert called == []


def test_readable_never_shows_a_traceback() -> None:
    assert readable(EngineError("denied", "wrong operator token")) == "wrong operator token"
    assert readable(NotFound("no record with that id")) == "no record with that id"
    assert readable(ValueError("boom")) == "Unexpected problem (ValueError): boom"


def test_emitting_signals_keeps_the_interpreter_sound(qapp) -> None:
    """PySide6 6.12.0 dropped a reference to True on every emit, and the interpreter aborted once it hit zero."""
    import sys

    tasks = EngineTasks()
    try:
        before = sys.getrefcount(True)
        for _ in range(200):
            tasks.sig_busy_changed.emit(True)
        after = sys.getrefcount(True)
    finally:
        tasks.shutdown()
    assert after >= before - 10
