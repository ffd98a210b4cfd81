"""The live window: an agent's write shows without F5, a lost engine is said at once, a new one is reattached.

The engine is real and serves a real socket; the agent is a real socket
client (on a thread of its own, as an agent is a process of its own); the
window learns of the write only from the engine's notifications.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import threading
import uuid
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from PySide6.QtCore import Qt

from desktop import launcher, live
from desktop.live import EngineWatch
from desktop.main_window import MainWindow
from desktop.tasks import EngineTasks
from engine.core.ids import format_timestamp, utc_now
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.wire.server import EngineServer
from tests.helpers import page


class Served:
    """An engine serving a state directory that the test can stop and start again (each time on a new port)."""

    def __init__(self, state: StateDir) -> None:
        self.state = state
        self.engine: Engine | None = None
        self.server: EngineServer | None = None

    def start(self) -> None:
        self.engine = Engine(self.state, watch=False)
        self.server = EngineServer(self.engine, port=0, socket_path=self.state.root / "engine.sock")
        self.server.start()
        self.state.write_engine_info({"pid": os.getpid(), **self.server.info(),
                                      "started_at": format_timestamp(utc_now())})

    def stop(self) -> None:
        if self.server is not None:
            self.state.remove_engine_info()
            self.server.stop()
            self.engine.close()
            self.server = self.engine = None


def serving_a_copy(tmp_path: Path, demo_template: Path) -> Iterator[Served]:
    """The demo store copied into ``tmp_path`` and served until the generator is closed."""
    state = StateDir(tmp_path / "state")
    shutil.copytree(demo_template, state.root, symlinks=True)
    served = Served(state)
    served.start()
    yield served
    served.stop()


@pytest.fixture
def served_again(tmp_path: Path, demo_template: Path) -> Iterator[Served]:
    yield from serving_a_copy(tmp_path, demo_template)


@pytest.fixture
def open_window(qtbot: Any) -> Iterator[Callable[[StateDir], MainWindow]]:
    made: list[tuple[MainWindow, EngineTasks]] = []

    def open_on(state: StateDir) -> MainWindow:
        tasks = EngineTasks()
        window = MainWindow(tasks, state)
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        with qtbot.waitSignal(window.watch.sig_engine_found, timeout=10_000):
            with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
                window.connect_engine()
        made.append((window, tasks))
        return window

    yield open_on
    for window, tasks in made:
        window.close()
        tasks.shutdown()


def agent_call(port: int, token: str, method: str, params: dict, audience: dict | None = None) -> dict:
    """One agent connection: initialize, one request, close (as a separate process would, on its own thread)."""
    result: dict[str, Any] = {}

    def talk() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
            lines = connection.makefile("rb")
            for number, (name, body) in enumerate((
                    ("initialize", {"protocolVersion": "2025-11-25", "_meta": {"knowledge": {
                        "token": token, "audience": audience or {"kind": "owner-private"}}}}),
                    (method, params)), start=1):
                connection.sendall(json.dumps({"jsonrpc": "2.0", "id": number, "method": name,
                                               "params": body}).encode() + b"\n")
                result.update(json.loads(lines.readline()))

    worker = threading.Thread(target=talk, name="test-agent")
    worker.start()
    worker.join(60)
    assert "result" in result, result
    return result["result"]


def save_page(served: Served, token: str, title: str, audience: dict | None = None) -> None:
    answer = agent_call(served.server.port, token, "tools/call",
                        {"name": "knowledge_save_page", "arguments": page(f"live-{uuid.uuid4().hex}", title)},
                        audience)
    assert answer.get("isError") is not True, answer


def titles(model: Any) -> list[str]:
    return [row.get("title") for row in model.rows()]


def test_an_agents_write_over_the_socket_shows_in_the_open_records_view_without_f5(
        qtbot, served_again, open_window, gui_thread_guard) -> None:
    window = open_window(served_again.state)
    window.show_view(window.views.index(window.records_view))
    qtbot.waitUntil(lambda: window.records_view.recent_model.rowCount() > 0, timeout=10_000)
    gui_thread_guard.active = False
    token = served_again.engine.registry.add_credential("main")
    gui_thread_guard.active = True

    with qtbot.waitSignal(window.sig_live_applied, timeout=10_000,
                          check_params_cb=lambda views: "Records" in views):
        save_page(served_again, token, "Written while the owner watches")

    qtbot.waitUntil(lambda: "Written while the owner watches" in titles(window.records_view.recent_model),
                    timeout=10_000)
    assert window.records_view.modes.currentIndex() == 0  # reloaded where it was, not switched


def test_a_burst_of_writes_reloads_a_view_a_few_times_not_once_per_write(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    window.show_view(window.views.index(window.records_view))
    qtbot.waitUntil(lambda: window.records_view.recent_model.rowCount() > 0, timeout=10_000)
    token = served_again.engine.registry.add_credential("main")
    applied: list[Any] = []
    window.sig_live_applied.connect(applied.append)

    for number in range(12):
        save_page(served_again, token, f"Burst page {number}")
    qtbot.waitUntil(lambda: "Burst page 11" in titles(window.records_view.recent_model), timeout=15_000)

    assert 1 <= len(applied) < 12  # gathered: the engine merges, and the window waits for the rest of a burst


def test_a_lost_engine_is_said_at_once_and_a_new_one_is_reattached_with_the_old_error_gone(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    old_port = served_again.server.port
    assert f":{old_port}" in window.connection_label.text()

    with qtbot.waitSignal(window.watch.sig_engine_lost, timeout=10_000):
        served_again.stop()
    assert window.connection_label.text().startswith("Engine lost") and not window.stop_action.isEnabled()
    with qtbot.waitSignal(window.tasks.sig_error_raised, timeout=10_000):
        qtbot.keyClick(window, Qt.Key.Key_F5)  # asking the engine that is gone: an error in the bar
    qtbot.waitUntil(lambda: window.messages.isVisibleTo(window) and window.messages.error, timeout=10_000)

    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=20_000):
        served_again.start()  # a new engine, on a new port: the window finds it by itself
    new_port = served_again.server.port
    assert new_port != old_port
    label = window.connection_label.text()
    assert label.startswith("Connected") and f":{new_port}" in label and f":{old_port}" not in label
    assert not window.messages.isVisibleTo(window)  # the old engine's error is gone

    token = served_again.engine.registry.add_credential("main")
    window.show_view(window.views.index(window.records_view))
    with qtbot.waitSignal(window.sig_live_applied, timeout=10_000):
        save_page(served_again, token, "After the restart")  # and the new engine's changes arrive
    qtbot.waitUntil(lambda: "After the restart" in titles(window.records_view.recent_model), timeout=10_000)


def test_a_window_opened_before_any_engine_attaches_when_one_starts(qtbot, tmp_path, demo_template) -> None:
    state = StateDir(tmp_path / "state")
    shutil.copytree(demo_template, state.root, symlinks=True)
    state.remove_engine_info()
    tasks = EngineTasks()
    window = MainWindow(tasks, state)
    qtbot.addWidget(window)
    served = Served(state)
    try:
        window.watch.start()  # as after a failed first connection
        with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=20_000):
            served.start()
        assert window.connection_label.text().startswith("Connected") and window.agent_picker.currentText() == "main"
    finally:
        window.close()
        tasks.shutdown()
        served.stop()


def test_f5_reloads_every_view_shown_not_only_the_one_in_front(qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    for view in (window.records_view, window.health_view, window.agents_view):
        window.show_view(window.views.index(view))
    qtbot.waitUntil(lambda: window.records_view.recent_model.rowCount() > 0, timeout=10_000)

    with qtbot.waitSignals([window.records_view.recent_model.sig_page_loaded, window.health_view.sig_content_loaded,
                            window.agents_view.sig_inventory_changed], timeout=10_000):
        qtbot.keyClick(window, Qt.Key.Key_F5)


def test_a_change_to_a_view_not_in_front_reloads_it_when_shown(qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    window.show_view(window.views.index(window.records_view))
    qtbot.waitUntil(lambda: window.records_view.recent_model.rowCount() > 0, timeout=10_000)
    window.show_view(window.views.index(window.agents_view))
    token = served_again.engine.registry.add_credential("main")

    with qtbot.waitSignal(window.sig_live_applied, timeout=10_000):
        save_page(served_again, token, "Written out of sight")
    assert "Written out of sight" not in titles(window.records_view.recent_model)

    with qtbot.waitSignal(window.records_view.recent_model.sig_page_loaded, timeout=10_000):
        window.show_view(window.views.index(window.records_view))
    assert "Written out of sight" in titles(window.records_view.recent_model)


def test_a_killed_engine_process_is_lost_at_once_and_the_next_one_started_is_attached(qtbot, tmp_path) -> None:
    state = StateDir(tmp_path / "state")
    tasks = EngineTasks()
    window = MainWindow(tasks, state)
    qtbot.addWidget(window)
    started: list[launcher.EngineHandle] = []
    try:
        with qtbot.waitSignal(window.watch.sig_engine_found, timeout=90_000):
            window.connect_engine()  # no engine runs: the window starts one
        first = window.handle
        assert first.started_pid and window.stop_action.isEnabled()

        with qtbot.waitSignal(window.watch.sig_engine_lost, timeout=10_000):
            os.kill(first.started_pid, signal.SIGKILL)
        os.waitpid(first.started_pid, 0)
        assert window.connection_label.text().startswith(f"Engine lost: engine pid {first.started_pid}")

        worker = threading.Thread(target=lambda: started.append(launcher.start_engine(state)), name="test-launch")
        with qtbot.waitSignal(window.watch.sig_engine_found, timeout=90_000):
            worker.start()
        worker.join(90)
        label = window.connection_label.text()
        assert f"pid {started[0].started_pid}" in label and f"pid {first.started_pid}" not in label
        assert window.handle.started_pid is None  # this window did not start the new engine,
        assert window.stop_action.isEnabled()  # and Ctrl+Shift+Q stops it all the same
    finally:
        window.close()
        tasks.shutdown()
        for handle in started:
            launcher.stop_engine(handle)
            os.waitpid(handle.started_pid, 0)


def test_a_view_first_shown_while_the_engine_is_gone_says_so_not_that_it_is_empty(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    with qtbot.waitSignal(window.watch.sig_engine_lost, timeout=10_000):
        served_again.stop()
    health, approvals = window.health_view, window.approvals_view
    window.show_view(window.views.index(health))
    qtbot.waitUntil(lambda: health.findings_table.shown_empty_text().startswith("Not checked: "), timeout=10_000)
    assert "engine" in health.findings_table.shown_empty_text()
    window.show_view(window.views.index(approvals))
    qtbot.waitUntil(lambda: approvals.table.shown_empty_text().startswith("Not loaded: "), timeout=10_000)
    vocabulary = window.vocabulary_view
    window.show_view(window.views.index(vocabulary))
    qtbot.waitUntil(lambda: vocabulary.definitions_table.shown_empty_text().startswith("Not loaded: "),
                    timeout=10_000)

    with qtbot.waitSignal(window.sig_engine_connected, timeout=15_000):
        served_again.start()  # the window attaches to it and reloads every view shown
    qtbot.waitUntil(lambda: approvals.model.rowCount() == 1, timeout=10_000)
    window.show_view(window.views.index(vocabulary))
    qtbot.waitUntil(lambda: vocabulary.definitions_model.rowCount() > 0, timeout=10_000)
    window.show_view(window.views.index(health))
    qtbot.waitUntil(lambda: health.findings_table.shown_empty_text().startswith("No validation findings"),
                    timeout=10_000)


def test_the_record_shown_reloads_when_an_agent_adds_to_it_and_its_row_stays_selected(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    records = window.records_view
    window.show_view(window.views.index(records))  # where the window opens: its first page may be in already
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    dana = next(row["id"] for row in records.recent_model.rows() if row["title"] == "Dana Whitaker")
    with qtbot.waitSignal(records.page.sig_content_loaded, timeout=10_000):
        records.recent_table.selectRow(titles(records.recent_model).index("Dana Whitaker"))
        records.open_record(dana)
    assert "tea" not in records.page.claims.toPlainText()

    token = served_again.engine.registry.add_credential("main")
    answer = agent_call(served_again.server.port, token, "tools/call", {"name": "knowledge_remember", "arguments": {
        "requestId": "live-claim", "subject": "Dana", "items": [
            {"text": "Dana drinks green tea in the afternoon.", "claimKind": "preference",
             "excerpt": "Green tea for me, please, it is past three."}]}})
    assert answer.get("isError") is not True, answer
    qtbot.waitUntil(lambda: "green tea" in records.page.claims.toPlainText(), timeout=10_000)  # no F5
    assert records.page.record["id"] == dana
    qtbot.waitUntil(lambda: [index.data() for index in records.recent_table.selectionModel().selectedRows()]
                    == ["Dana Whitaker"], timeout=10_000)


# --- the watch's thread never holds the watch ----------------------------------------------------------------


class HeldState(StateDir):
    """A state directory whose engine.json the watch reads only once the test lets it (a wait ``stop`` cannot
    wake, as a connection attempt to an engine that accepts nothing)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reading = threading.Event()
        self.let_go = threading.Event()

    def read_engine_info(self) -> dict[str, Any] | None:
        self.reading.set()
        self.let_go.wait(60)
        return None


def dies_on(watch: EngineWatch) -> list[str]:
    """The name of the thread ``watch`` is released on, once it is."""
    names: list[str] = []
    weakref.finalize(watch, lambda: names.append(threading.current_thread().name))
    return names


def test_a_watch_let_go_while_its_thread_runs_is_released_on_the_gui_thread_and_its_thread_ends(
        qapp, tmp_path) -> None:
    watch = EngineWatch(StateDir(tmp_path / "no engine"), retry_s=60)
    died_on = dies_on(watch)
    watch.start()
    thread = watch._thread
    del watch  # as a window let go without closing: nothing but its thread could still hold the watch
    assert died_on == [threading.main_thread().name]
    thread.join(10)  # its destruction stopped the thread, which was waiting a minute to retry
    assert not thread.is_alive()


def test_a_stopped_watch_is_not_held_by_a_thread_that_has_not_ended_yet(qapp, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(live, "STOP_WAIT_S", 0)
    state = HeldState(tmp_path / "state")
    watch = EngineWatch(state)
    died_on = dies_on(watch)
    watch.start()
    thread = watch._thread
    assert state.reading.wait(10)
    watch.stop()  # gives up waiting: the thread is still in its read
    assert thread.is_alive()
    del watch
    assert died_on == [threading.main_thread().name]
    state.let_go.set()
    thread.join(10)
    assert not thread.is_alive()
