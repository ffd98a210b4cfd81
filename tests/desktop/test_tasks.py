"""The operator client and the worker: requests run off the GUI thread, errors arrive readable."""

from __future__ import annotations

import os
import threading
import weakref
from types import FrameType
from typing import Any, Iterator

import pytest

from desktop import tasks as tasks_module
from desktop.client import EngineError, GuiThreadViolation, OperatorClient
from desktop.tasks import EngineTasks, readable
from engine.core.errors import NotFound

MAIN = threading.main_thread().name


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


# --- callbacks die on the GUI thread ---------------------------------------------------------------
# A callback can own a Qt object (a lambda capturing a widget), which must never be destroyed off the GUI thread,
# so the worker must never hold the last reference to one.  ``worker_held`` makes the worker the last to let go of
# whatever it still holds: it waits as it leaves each job until the test has seen the answer arrive.


@pytest.fixture
def worker_held() -> Iterator[threading.Event]:
    """A worker started from now on waits, as it leaves each job (before it lets go of what the job held), until
    the event yielded is set."""
    let_go = threading.Event()

    def hold_on_leaving_a_job(frame: FrameType, event: str, _arg: object) -> None:
        if event == "return" and frame.f_code.co_filename == tasks_module.__file__ and (
                frame.f_back is None or frame.f_back.f_code.co_filename != tasks_module.__file__):
            let_go.wait(60)

    threading.setprofile(hold_on_leaving_a_job)
    try:
        yield let_go
    finally:
        threading.setprofile(None)
        let_go.set()


class Dying:
    """A callable that records its calls, and in ``died_on`` the thread it is finally released on."""

    def __init__(self, answer: Any = None) -> None:
        self.answer = answer
        self.calls: list[Any] = []
        self.died_on: list[str] = []
        weakref.finalize(self, note_thread, self.died_on)

    def __call__(self, *args: Any) -> Any:
        self.calls.append(args)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def note_thread(names: list[str]) -> None:
    names.append(threading.current_thread().name)


@pytest.fixture
def held_tasks(worker_held: threading.Event) -> Iterator[EngineTasks]:
    """An ``EngineTasks`` whose worker is held as it leaves each job (``worker_held``), shut down after the test
    (the worker let go first, so a test that failed before letting it go never waits on it)."""
    tasks = EngineTasks()
    try:
        yield tasks
    finally:
        worker_held.set()
        tasks.shutdown()


def let_go_on_the_gui_thread(qtbot: Any, worker_held: threading.Event, *died: list[str]) -> None:
    """Let the worker leave its job, only now, after the GUI thread is done with the answer; then every
    callable whose ``died_on`` is in ``died`` is released, each on the GUI thread."""
    worker_held.set()
    qtbot.waitUntil(lambda: all(died), timeout=10_000)
    assert died == ([MAIN],) * len(died)


def test_an_answer_and_its_work_are_let_go_on_the_gui_thread_whoever_finishes_last(
        qtbot, held_tasks, worker_held) -> None:
    work, on_done, on_error = Dying("done"), Dying(), Dying()
    calls, died = on_done.calls, (work.died_on, on_done.died_on, on_error.died_on)
    held_tasks.run(work, on_done, on_error=on_error)
    del work, on_done, on_error
    qtbot.waitUntil(lambda: calls == [("done",)], timeout=10_000)
    let_go_on_the_gui_thread(qtbot, worker_held, *died)


def test_an_error_handler_is_let_go_on_the_gui_thread_whoever_finishes_last(qtbot, held_tasks, worker_held) -> None:
    on_done, on_error = Dying(), Dying()
    messages, died = on_error.calls, (on_done.died_on, on_error.died_on)
    held_tasks.run(Dying(NotFound("no record with that id")), on_done, on_error=on_error)
    del on_done, on_error
    qtbot.waitUntil(lambda: messages == [("no record with that id",)], timeout=10_000)
    let_go_on_the_gui_thread(qtbot, worker_held, *died)


def test_the_callbacks_of_a_closed_view_are_let_go_on_the_gui_thread_uncalled(qtbot, held_tasks, worker_held) -> None:
    from PySide6.QtWidgets import QWidget

    import shiboken6

    started, finish = threading.Event(), threading.Event()
    owner = QWidget()
    on_done, on_error = Dying(), Dying()
    calls, died = (on_done.calls, on_error.calls), (on_done.died_on, on_error.died_on)
    held_tasks.run(lambda: started.set() or finish.wait(60), on_done, on_error=on_error, owner=owner)
    del on_done, on_error
    assert started.wait(10)
    shiboken6.delete(owner)  # the view closes while its request runs
    finish.set()
    qtbot.waitUntil(lambda: not held_tasks.busy, timeout=10_000)
    let_go_on_the_gui_thread(qtbot, worker_held, *died)
    assert calls == ([], [])


def test_jobs_cancelled_by_the_shutdown_let_go_of_their_callbacks_on_the_gui_thread(qtbot) -> None:
    tasks = EngineTasks()
    started, finish = threading.Event(), threading.Event()
    running, waiting = Dying(), Dying()
    calls, died = (running.calls, waiting.calls), (running.died_on, waiting.died_on)
    tasks.run(lambda: started.set() or finish.wait(60), running)
    tasks.run(lambda: None, waiting)
    del running, waiting
    assert started.wait(10)
    finish.set()
    tasks.shutdown()  # the running job ends; the waiting one never starts
    qtbot.waitUntil(lambda: all(died), timeout=10_000)
    assert calls == ([], []) and died == ([MAIN],) * 2
    assert not tasks.busy
