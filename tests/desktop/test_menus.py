"""The menu bar: every action of the window in a menu with its shortcut, one helper to add more, and
Ctrl+Shift+Q stopping the engine even when the window attached to one already running."""

from __future__ import annotations

import os
import threading

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QMainWindow, QWidget

from desktop import launcher
from desktop.main_window import MainWindow
from desktop.menus import MENU_ORDER, MenuBar, plain
from desktop.tasks import EngineTasks
from engine.state.statedir import StateDir
from tests.desktop.conftest import wait_for_signal


@pytest.fixture
def window(connected_window):
    return connected_window


def menu_actions(window: MainWindow) -> list[QAction]:
    found: list[QAction] = []

    def walk(actions: list[QAction]) -> None:
        for action in actions:
            if action.menu() is not None:
                walk(action.menu().actions())
            elif not action.isSeparator():
                found.append(action)

    walk(window.menuBar().actions())
    return found


def test_every_action_of_the_window_is_in_a_menu_with_its_shortcut(qtbot, window) -> None:
    titles = [plain(action.text()) for action in window.menuBar().actions()]
    assert titles == ["File", "Edit", "View", "Engine", "Help"]
    in_menus = menu_actions(window)
    # Every shortcut the window answers to is an action in a menu, and no two actions share one (an
    # ambiguous shortcut triggers neither).
    with_shortcuts = [action for action in window.actions() if not action.shortcut().isEmpty()]
    assert with_shortcuts and all(action in in_menus for action in with_shortcuts)
    keys = [action.shortcut().toString() for action in in_menus if not action.shortcut().isEmpty()]
    assert len(keys) == len(set(keys)), keys
    view_menu = window.menus.menu("View")
    view_actions = [a for a in view_menu.actions() if a in window.view_actions]
    assert [plain(a.text()) for a in view_actions] == [view.title for view in window.views]
    assert [a.shortcut().toString() for a in view_actions] == [f"Ctrl+{n}" for n in (*range(1, 10), 0)]
    shortcuts = {(menu, text): key for menu, text, key in window.menus.shortcuts()}
    native = QKeySequence.SequenceFormat.NativeText
    assert shortcuts[("File", "Quit and stop the engine")] == QKeySequence("Ctrl+Shift+Q").toString(native)
    assert shortcuts[("File", "Quit")] == QKeySequence("Ctrl+Q").toString(native)
    assert shortcuts[("Edit", "Find records…")] == QKeySequence(QKeySequence.StandardKey.Find).toString(native)
    assert shortcuts[("View", "Refresh")] == QKeySequence(QKeySequence.StandardKey.Refresh).toString(native)
    assert ("View", "Choose agent") in shortcuts and ("Engine", "Add agent…") in shortcuts
    assert ("Edit", "Copy a change request") in shortcuts and ("View", "Back") in shortcuts

    window.show_shortcuts()  # the dialog lists what the menus hold
    table = window.shortcuts_dialog.table
    listed = {(table.item(r, 0).text(), table.item(r, 1).text()) for r in range(table.rowCount())}
    assert listed == set(shortcuts)
    window.shortcuts_dialog.close()


def test_the_shortcuts_that_used_to_belong_to_buttons_work_from_anywhere_in_the_window(qtbot, window) -> None:
    window.show_view(window.views.index(window.records_view))
    qtbot.waitUntil(lambda: window.records_view.recent_model.rowCount() > 1, timeout=10_000)
    page, model = window.records_view.page, window.records_view.recent_model
    first, second = model.row(0)["id"], model.row(1)["id"]
    for record_id in (first, second):
        with qtbot.waitSignal(page.sig_content_loaded, timeout=10_000):
            window.open_record(record_id)

    with qtbot.waitSignal(page.sig_change_request_copied, timeout=5_000):
        qtbot.keyClick(window, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert second in QGuiApplication.clipboard().text() and "Nothing was sent" in window.messages.label.text()

    with qtbot.waitSignal(page.sig_content_loaded, timeout=10_000):
        qtbot.keyClick(window, Qt.Key.Key_Left, Qt.KeyboardModifier.AltModifier)  # View › Back
    assert page.record["id"] == first

    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)  # Engine › Add agent…
    assert window.current_view() is window.agents_view
    qtbot.waitUntil(lambda: window.agents_view.dialog is not None and window.agents_view.dialog.isVisible(),
                    timeout=5_000)
    window.agents_view.dialog.reject()


def test_a_feature_adds_its_action_to_a_named_menu_with_one_call(qtbot) -> None:
    host = QMainWindow()
    qtbot.addWidget(host)
    menus = MenuBar(host)
    fired: list[bool] = []
    menus.action("Help", "About", lambda: None)
    menus.action("File", "Import…", lambda: fired.append(True), "Ctrl+I")
    menus.action("Graph", "Show the graph", lambda: None, "Ctrl+G")  # a menu not in MENU_ORDER: before Help
    menus.action("View", "Zoom", lambda: None)
    assert [plain(a.text()) for a in host.menuBar().actions()] == ["File", "View", "Graph", "Help"]
    assert "Graph" not in MENU_ORDER
    imported = next(a for a in host.actions() if plain(a.text()) == "Import…")
    assert imported in menus.menu("File").actions()  # in the menu and on the window
    imported.trigger()
    assert fired == [True]
    assert ("File", "Import…", QKeySequence("Ctrl+I").toString(QKeySequence.SequenceFormat.NativeText)) \
        in menus.shortcuts()


def test_ctrl_shift_q_stops_an_engine_the_window_attached_to(qtbot, tmp_path) -> None:
    state = StateDir(tmp_path / "state")
    started: list[launcher.EngineHandle] = []
    worker = threading.Thread(target=lambda: started.append(launcher.start_engine(state)), name="test-launch")
    worker.start()
    qtbot.waitUntil(lambda: not worker.is_alive(), timeout=90_000)
    engine_pid = started[0].started_pid  # an engine this window did not start (as `knowledge serve` would be)
    tasks = EngineTasks()
    window = MainWindow(tasks, state, settings=QSettings(str(tmp_path / "desktop.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    try:
        with qtbot.waitSignal(window.sig_engine_connected, timeout=30_000):
            window.connect_engine()
        assert window.handle.started_pid is None and "already running" in window.connection_label.text()
        assert window.stop_action.isEnabled()

        qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=10_000)
        qtbot.waitUntil(lambda: state.read_engine_info() is None, timeout=30_000)
        _, status = os.waitpid(engine_pid, 0)  # it finished its work and exited on the signal
        assert os.WIFEXITED(status) or os.WIFSIGNALED(status)
    finally:
        tasks.shutdown()
        if launcher.running_engine(state) is not None:
            launcher.stop_engine(started[0])
            os.waitpid(engine_pid, 0)


def test_a_stale_attached_handle_stops_nothing(tmp_path, served) -> None:
    info = {**served.read_engine_info(), "started_at": "2000-01-01T00:00:00Z"}
    with pytest.raises(launcher.EngineError, match="no longer the one running"):
        launcher.stop_engine(launcher.EngineHandle(info), served)
    with pytest.raises(launcher.EngineError, match="inside this program"):  # the served engine is this process
        launcher.stop_engine(launcher.EngineHandle(served.read_engine_info()), served)
    assert served.read_engine_info() is not None


def test_ctrl_q_closes_the_window_and_leaves_the_engine_serving(qtbot, window, served) -> None:
    qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5_000)
    assert served.read_engine_info() is not None  # the engine keeps serving agents


def mnemonics_shown(window: MainWindow) -> dict[str, list[str]]:
    """The Alt+letter of every button, box, tab and labelled field the window shows now, by letter."""
    import re

    from PySide6.QtWidgets import QAbstractButton, QLabel, QTabBar

    found: dict[str, list[str]] = {}

    def add(text: str) -> None:
        marked = re.search(r"(?<!&)&([^&\s])", text)
        if marked:
            found.setdefault(marked.group(1).lower(), []).append(text)

    for widget in window.findChildren(QWidget):
        if not widget.isVisibleTo(window) or widget.window() is not window:
            continue
        if isinstance(widget, QAbstractButton):
            add(widget.text())
        elif isinstance(widget, QTabBar):
            for tab in range(widget.count()):
                if widget.isTabVisible(tab):
                    add(widget.tabText(tab))
        elif isinstance(widget, QLabel) and widget.buddy() is not None:
            add(widget.text())
    return found


def test_no_two_controls_shown_together_answer_the_same_alt_letter(qtbot, window) -> None:
    """Alt+letter reaches one control: two shown at once with the same letter (Records' Folders tab and the
    record page's Note tab both Alt+O; Search and History both Alt+H) made the key reach only the first."""
    records = window.records_view
    for number in range(len(window.views)):
        window.show_view(number)
        if window.views[number] is records:
            qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
            wait_for_signal(qtbot, records.page.sig_content_loaded,
                            lambda: records.open_record(records.recent_model.rows()[0]["id"]))
        twice = {letter: texts for letter, texts in mnemonics_shown(window).items() if len(texts) > 1}
        assert twice == {}, (window.views[number].title, twice)
