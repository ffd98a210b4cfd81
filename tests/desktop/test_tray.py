"""The tray: the engine's state, the window, quitting the engine.

The offscreen platform has no system tray, so ``DeskTray`` makes no icon
there; its state, tooltip and menu are the same object either way, and are
what these tests drive, with a real engine that is stopped and started
again and, for *Quit the engine*, a real engine process.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest
from PySide6.QtWidgets import QSystemTrayIcon

from desktop.main_window import MainWindow
from desktop.tasks import EngineTasks
from desktop.tray import CONNECTED, LOST
from engine.state.statedir import StateDir
from tests.desktop import test_live

served_again = test_live.served_again  # the live tests' fixture: a demo engine to stop and start again


@pytest.fixture
def window(qtbot, served_again) -> Iterator[MainWindow]:
    tasks = EngineTasks()
    made = MainWindow(tasks, served_again.state)
    qtbot.addWidget(made)
    made.show()
    with qtbot.waitSignal(made.watch.sig_engine_found, timeout=10_000):
        made.connect_engine()
    yield made
    made.close()
    tasks.shutdown()


def test_the_tray_follows_the_engine_connected_lost_and_back(qtbot, served_again, window) -> None:
    tray = window.tray
    assert (tray.icon is None) == (not QSystemTrayIcon.isSystemTrayAvailable())
    assert tray.state == CONNECTED and f":{served_again.server.port}" in tray.tooltip
    assert tray.stop_engine_action.isEnabled()
    assert [action.text() for action in tray.menu.actions() if action.text()] == [
        tray.status_action.text(), "Show Knowledge Desk", "Quit the engine", "Quit Knowledge Desk"]

    with qtbot.waitSignal(tray.sig_state_changed, timeout=10_000) as changed:
        served_again.stop()
    assert changed.args == [LOST] and tray.tooltip.startswith("Knowledge Desk: engine lost")
    assert not tray.stop_engine_action.isEnabled() and tray.status_action.text().startswith("Engine lost")

    with qtbot.waitSignal(tray.sig_state_changed, timeout=20_000) as changed:
        served_again.start()
    assert changed.args == [CONNECTED] and f":{served_again.server.port}" in tray.tooltip

    window.showMinimized()
    tray.show_action.trigger()
    assert window.isVisible() and not window.isMinimized()


def test_quitting_an_engine_inside_this_process_is_refused_in_words(qtbot, served_again, window) -> None:
    assert window.handle.info["pid"] == os.getpid()
    window.tray.stop_engine_action.trigger()
    assert window.messages.error and "inside this window's process" in window.messages.label.text()
    assert window.isVisible() and served_again.state.read_engine_info() is not None


def test_quit_the_engine_stops_the_engine_process_and_closes_the_window(qtbot, tmp_path) -> None:
    state = StateDir(tmp_path / "state")
    tasks = EngineTasks()
    window = MainWindow(tasks, state)
    qtbot.addWidget(window)
    window.show()
    try:
        with qtbot.waitSignal(window.tray.sig_state_changed, timeout=90_000):
            window.connect_engine()  # no engine runs: the window starts one, a process of its own
        pid = window.handle.started_pid
        assert pid and window.tray.state == CONNECTED

        window.tray.stop_engine_action.trigger()
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=30_000)
        os.waitpid(pid, 0)  # the engine process ended
        assert state.read_engine_info() is None  # and removed engine.json as a clean stop does
    finally:
        window.close()
        tasks.shutdown()
