"""The tray icon: the engine's state at a glance, the window, and quitting the engine.

``DeskTray`` always holds the state (connecting, connected, lost), the
tooltip and the menu, whether or not the platform has a tray; the
``QSystemTrayIcon`` itself is made only where
``QSystemTrayIcon.isSystemTrayAvailable()`` says one exists, so without a
tray (a bare X server, the offscreen platform) nothing is shown and nothing
fails.  The state follows the window's live watch: connected when the
window's operator connection opens or an engine is found again, lost the
moment the watch connection closes.

*Quit the engine* stops the engine the window is connected to, whoever
started it (the owner asked for it by name), and then the window: agents
lose their memory provider until an engine runs again.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QIcon
from PySide6.QtWidgets import QMenu, QStyle, QSystemTrayIcon

from . import launcher
from .common.widgets import bring_forward

if TYPE_CHECKING:
    from .main_window import MainWindow

APP_ICON = "dev.knowledgedesk.KnowledgeDesk"  # the icon the desktop entry installs (packaging/linux)
CONNECTING, CONNECTED, LOST = "connecting", "connected", "lost"


class DeskTray(QObject):
    """The tray's state and menu, and the icon where the platform has a tray."""

    sig_state_changed = Signal(str)
    """The engine's state as the tray shows it: connecting, connected or lost."""

    def __init__(self, window: "MainWindow") -> None:
        super().__init__(window)
        self.window = window
        self.state = CONNECTING
        self.tooltip = "Knowledge Desk: connecting to the Knowledge engine…"
        self.menu = QMenu()
        self.status_action = self.menu.addAction(self.tooltip)
        self.status_action.setEnabled(False)
        self.menu.addSeparator()
        self.show_action = QAction("Show Knowledge Desk", self.menu)
        self.show_action.triggered.connect(self.show_window)
        self.menu.addAction(self.show_action)
        self.menu.addSeparator()
        self.stop_engine_action = QAction("Quit the engine", self.menu)
        self.stop_engine_action.setToolTip("Stop the Knowledge engine (agents lose their memory until it runs "
                                           "again) and close the window")
        self.stop_engine_action.triggered.connect(self.stop_engine)
        self.stop_engine_action.setEnabled(False)
        self.menu.addAction(self.stop_engine_action)
        self.quit_action = QAction("Quit Knowledge Desk", self.menu)
        self.quit_action.setToolTip("Close the window; the engine keeps serving agents")
        self.quit_action.triggered.connect(window.close)
        self.menu.addAction(self.quit_action)
        self.icon: QSystemTrayIcon | None = None
        if QSystemTrayIcon.isSystemTrayAvailable():
            self.icon = QSystemTrayIcon(self._icon(), self)
            self.icon.setContextMenu(self.menu)
            self.icon.setToolTip(self.tooltip)
            self.icon.activated.connect(self._on_activated)
            self.icon.show()
        window.sig_engine_connected.connect(self._on_connected)
        window.watch.sig_engine_found.connect(lambda _info: self._on_connected(self._description()))
        window.watch.sig_engine_lost.connect(self._on_lost)
        window.destroyed.connect(self.menu.deleteLater)

    # --- state -------------------------------------------------------------------------------------

    def _description(self) -> str:
        handle = self.window.handle
        return handle.description if handle is not None else "the Knowledge engine"

    def _on_connected(self, description: str) -> None:
        self._set(CONNECTED, f"Knowledge Desk: connected to {description}")

    def _on_lost(self, reason: str) -> None:
        self._set(LOST, f"Knowledge Desk: engine lost ({reason}); reconnecting when one is back")

    def _set(self, state: str, tooltip: str) -> None:
        changed = state != self.state
        self.state, self.tooltip = state, tooltip
        self.status_action.setText(tooltip.removeprefix("Knowledge Desk: ").capitalize())
        self.stop_engine_action.setEnabled(state == CONNECTED)
        if self.icon is not None:
            self.icon.setToolTip(tooltip)
            self.icon.setIcon(self._icon())
        if changed:
            self.sig_state_changed.emit(state)

    def _icon(self) -> QIcon:
        style = self.window.style()
        if self.state == LOST:
            return style.standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning)
        return QIcon.fromTheme(APP_ICON, style.standardIcon(QStyle.StandardPixmap.SP_ComputerIcon))

    # --- actions -----------------------------------------------------------------------------------

    def _on_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason == QSystemTrayIcon.ActivationReason.Trigger:
            self.show_window()

    def show_window(self) -> None:
        bring_forward(self.window)

    def stop_engine(self) -> None:
        """Stop the engine the window is connected to (on the worker thread), then close the window."""
        handle = self.window.handle
        if handle is None or self.state != CONNECTED:
            return
        pid = handle.info.get("pid")
        if pid == os.getpid():  # an engine serving inside this very process stops with the window
            self.window.messages.show_error("The engine runs inside this window's process; close the window.")
            return
        target = launcher.EngineHandle(handle.info, started_pid=pid if isinstance(pid, int) else None)
        self.window.tasks.run(lambda: launcher.stop_engine(target), lambda _: self.window.close())
