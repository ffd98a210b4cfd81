"""The window: attaching to the engine, keyboard access to every view, readable failures, the launcher."""

from __future__ import annotations

import json
import os
import threading

import pytest
from PySide6.QtCore import Qt

from desktop import launcher
from desktop.client import GuiThreadViolation, OperatorClient
from desktop.main_window import MainWindow
from desktop.tasks import EngineTasks
from engine.state.statedir import StateDir
from tests.desktop import conftest
from tests.desktop.conftest import wait_for_signal


@pytest.fixture
def window(qtbot, served):
    tasks = EngineTasks()
    made = MainWindow(tasks, served)
    qtbot.addWidget(made)
    made.show()
    qtbot.waitExposed(made)
    yield made
    tasks.shutdown()


def test_the_window_opens_on_the_agents_notes(qtbot, window, gui_thread_guard) -> None:
    assert window.current_view() is window.records_view  # the notes first, not the agents and stores
    with qtbot.waitSignal(window.records_view.recent_model.sig_page_loaded, timeout=10_000):
        window.connect_engine()  # the inventory names the agent, and Records reads its recent records
    assert window.agent_picker.currentText() == "main" and window.records_view.recent_model.rowCount() > 0
    assert window.current_view() is window.records_view


def test_with_no_agent_yet_the_window_goes_where_one_is_added(qtbot, served_engine, window_settings) -> None:
    for agent in served_engine.agents():
        served_engine.remove_agent(agent["name"])
    tasks = EngineTasks()
    made = MainWindow(tasks, served_engine.state, settings=window_settings)
    qtbot.addWidget(made)
    made.show()
    qtbot.waitExposed(made)
    try:
        with qtbot.waitSignal(made.agents_view.sig_inventory_changed, timeout=10_000):
            made.connect_engine()
        assert made.current_view() is made.agents_view  # no notes to open on
        assert made.messages.isVisibleTo(made) and "No agents yet" in made.messages.label.text()
    finally:
        tasks.shutdown()


def test_the_window_attaches_and_every_view_is_one_shortcut_away(qtbot, window, gui_thread_guard) -> None:
    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        window.connect_engine()
    assert window.handle.started_pid is None and "already running" in window.connection_label.text()
    # Ctrl+Shift+Q stops an engine the window attached to as well (test_menus.py stops a real one).
    assert window.agent_picker.currentText() == "main" and window.stop_action.isEnabled()

    expected = [window.agents_view, window.records_view, window.vocabulary_view, window.approvals_view,
                window.preview_view, window.health_view, window.gate_view, window.models_view,
                window.partitions_view]
    for number, view in enumerate(expected, start=1):
        qtbot.keyClick(window, getattr(Qt.Key, f"Key_{number}"), Qt.KeyboardModifier.ControlModifier)
        assert window.current_view() is view
    assert window.health_view.agent == "main"  # agent-scoped views load for the chosen agent when shown

    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert window.current_view() is window.records_view and window.records_view.modes.currentIndex() == 2
    with qtbot.waitSignal(window.records_view.search_model.sig_page_loaded, timeout=10_000):
        qtbot.keyClicks(window.records_view.query, "Northwind")
        qtbot.keyClick(window.records_view.query, Qt.Key.Key_Return)
    assert window.records_view.search_model.rowCount() > 0
    # No embedding model here: the search says so, and its link leads to Models.
    assert window.records_view.models_link.isVisible()
    window.records_view.models_link.click()
    assert window.current_view() is window.models_view

    with qtbot.waitSignal(window.records_view.recent_model.sig_page_loaded, timeout=10_000):
        qtbot.keyClick(window, Qt.Key.Key_F5)


def test_records_opened_from_other_views_and_change_requests_are_confirmed(qtbot, window, gui_thread_guard) -> None:
    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        window.connect_engine()
    window.show_view(3)
    approvals = window.approvals_view
    qtbot.waitUntil(lambda: approvals.model.rowCount() == 1, timeout=10_000)
    record_id = approvals.model.row(0)["id"]

    page = window.records_view.page
    wait_for_signal(qtbot, page.sig_content_loaded, lambda: approvals.sig_record_requested.emit(record_id))
    assert window.current_view() is window.records_view and page.record["id"] == record_id
    qtbot.keyClick(page.request_button, Qt.Key.Key_Space)
    assert "Nothing was sent" in window.messages.label.text() and not window.messages.error


def test_an_unreachable_engine_is_reported_in_words(qtbot, tmp_path, gui_thread_guard) -> None:
    state = StateDir(tmp_path / "state")
    gui_thread_guard.active = False
    state.create()
    state.write_engine_info({"pid": os.getpid(), "port": 1, "socket": None})
    (state.root / "operator.token").write_text("kdo_x\n", encoding="utf-8")
    os.chmod(state.root / "operator.token", 0o600)
    gui_thread_guard.active = True
    tasks = EngineTasks()
    made = MainWindow(tasks, state)
    qtbot.addWidget(made)
    try:
        made.connect_engine()
        qtbot.waitUntil(lambda: made.messages.isVisibleTo(made), timeout=10_000)
    finally:
        tasks.shutdown()
    assert made.messages.error and "Could not connect to the Knowledge engine" in made.messages.label.text()
    assert "Traceback" not in made.messages.label.text() and made.connection_label.text() == "Not connected"


def test_the_launcher_starts_an_engine_that_outlives_the_window_until_stopped(qtbot, tmp_path) -> None:
    state = StateDir(tmp_path / "state")
    results: dict = {}

    def work() -> None:
        client, handle = launcher.connect(state, demo=True)
        results["inventory"] = client.call("operator/inventory")
        results["handle"] = handle
        client.close()

    worker = threading.Thread(target=work, name="test-launcher")
    worker.start()
    qtbot.waitUntil(lambda: not worker.is_alive(), timeout=90_000)
    handle = results["handle"]
    try:
        assert handle.started_pid and state.read_engine_info()["pid"] == handle.started_pid
        assert [agent["name"] for agent in results["inventory"]["agents"]] == ["main"]
        assert launcher.running_engine(state) is not None  # a second window would attach to it
    finally:
        launcher.stop_engine(handle)
    qtbot.waitUntil(lambda: state.read_engine_info() is None, timeout=30_000)
    os.waitpid(handle.started_pid, 0)


def test_the_guard_catches_storage_and_network_work_on_the_gui_thread(qapp, served) -> None:
    guard = conftest._GUARD
    guard.violations, guard.active = [], True
    try:
        with open(served.config if served.config.exists() else served.engine_info, "rb"):
            pass
        with pytest.raises(GuiThreadViolation):
            OperatorClient(served).call("ping")
    finally:
        guard.active = False
        caught, guard.violations = guard.violations, []
    assert len(caught) == 1 and caught[0].startswith("open(")
    assert json.loads(served.engine_info.read_text(encoding="utf-8"))["port"]
