"""The Knowledge Desk window: an agent selector, the views, and the message bar.

The window is a client of the engine: it attaches to the running engine or
starts one (on the worker thread), then every view asks through
``EngineTasks``.  Views scoped to an agent load when they are shown, for the
agent chosen in the toolbar.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSize, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QMainWindow,
    QStackedWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from engine.state.statedir import StateDir

from . import launcher
from .agents.view import AgentsView
from .approvals.view import ApprovalsView
from .common.widgets import MessageBar
from .gate.view import GateView
from .health.view import HealthView
from .model_manager.view import ModelsView
from .preview.view import PreviewView
from .records.view import RecordsView
from .tasks import EngineTasks
from .vocabulary.view import VocabularyView


class MainWindow(QMainWindow):
    sig_engine_connected = Signal(str)
    """The operator connection is open (a description of the engine)."""

    def __init__(self, tasks: EngineTasks, state: StateDir, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.state = state
        self.handle: launcher.EngineHandle | None = None
        self.agent: str | None = None
        self.setWindowTitle(f"Knowledge Desk — {state.root}")
        self.resize(QSize(1280, 800))

        self.agents_view = AgentsView(tasks)
        self.records_view = RecordsView(tasks)
        self.vocabulary_view = VocabularyView(tasks)
        self.approvals_view = ApprovalsView(tasks)
        self.preview_view = PreviewView(tasks)
        self.health_view = HealthView(tasks)
        self.gate_view = GateView(tasks)
        self.models_view = ModelsView(tasks)
        self.views: list[QWidget] = [self.agents_view, self.records_view, self.vocabulary_view,
                                     self.approvals_view, self.preview_view, self.health_view, self.gate_view,
                                     self.models_view]

        self.navigation = QListWidget()
        self.navigation.setFixedWidth(190)
        self.stack = QStackedWidget()
        for number, view in enumerate(self.views, start=1):
            self.navigation.addItem(view.title)
            self.navigation.item(number - 1).setToolTip(f"{view.title} (Ctrl+{number})")
            self.stack.addWidget(view)
        self.navigation.currentRowChanged.connect(self._on_view_chosen)
        self.messages = MessageBar()
        central = QWidget()
        central_layout = QVBoxLayout(central)
        central_layout.setContentsMargins(4, 4, 4, 4)
        central_layout.addWidget(self.messages)
        body = QHBoxLayout()
        body.addWidget(self.navigation)
        body.addWidget(self.stack, 1)
        central_layout.addLayout(body, 1)
        self.setCentralWidget(central)

        self.agent_picker = QComboBox()
        self.agent_picker.setMinimumContentsLength(16)
        self.agent_picker.setToolTip("Whose private partition the views show (Ctrl+L)")
        self.agent_picker.currentIndexChanged.connect(self._on_agent_chosen)
        self._build_actions()
        self.connection_label = QLabel("Connecting to the Knowledge engine…")
        self.statusBar().addPermanentWidget(self.connection_label)

        tasks.sig_error_raised.connect(self.messages.show_error)
        tasks.sig_busy_changed.connect(self._on_busy_changed)
        self.agents_view.sig_inventory_changed.connect(self._on_inventory)
        self.agents_view.sig_status_reported.connect(self.messages.show_info)
        self.records_view.page.sig_change_request_copied.connect(self._on_change_request_copied)
        self.vocabulary_view.sig_record_requested.connect(self.open_record)
        self.approvals_view.sig_record_requested.connect(self.open_record)
        self.gate_view.sig_record_requested.connect(self.open_record)
        self.navigation.setCurrentRow(0)

    def _build_actions(self) -> None:
        toolbar = QToolBar("Main")
        toolbar.setMovable(False)
        self.addToolBar(toolbar)
        toolbar.addWidget(QLabel(" Agent: "))
        toolbar.addWidget(self.agent_picker)

        def action(text: str, shortcut: QKeySequence | str, slot: Any, *, on_toolbar: bool = False) -> QAction:
            made = QAction(text, self)
            made.setShortcut(QKeySequence(shortcut))
            made.triggered.connect(slot)
            self.addAction(made)
            if on_toolbar:
                toolbar.addAction(made)
            return made

        self.refresh_action = action("Refresh", QKeySequence.StandardKey.Refresh, self.refresh, on_toolbar=True)
        action("Search records", QKeySequence.StandardKey.Find, self.focus_search, on_toolbar=True)
        action("Choose agent", "Ctrl+L", self.agent_picker.setFocus)
        action("Quit", QKeySequence.StandardKey.Quit, self.close)
        self.stop_action = action("Quit and stop the engine", "Ctrl+Shift+Q", self.quit_and_stop_engine)
        self.stop_action.setEnabled(False)
        for number in range(1, len(self.views) + 1):
            action(f"View {number}", f"Ctrl+{number}", lambda _=False, n=number: self.show_view(n - 1))

    # --- engine --------------------------------------------------------------------------------

    def connect_engine(self, *, demo: bool = False) -> None:
        """Attach to (or start) the engine on the worker thread, then load the first view."""
        self.tasks.run(lambda: launcher.connect(self.state, demo=demo), self._on_connected,
                       on_error=self._on_connect_failed)

    def _on_connected(self, connection: tuple[Any, launcher.EngineHandle]) -> None:
        client, self.handle = connection
        self.tasks.use_client(client)
        self.connection_label.setText(f"Connected: {self.handle.description}")
        self.stop_action.setEnabled(self.handle.started_pid is not None)
        self.sig_engine_connected.emit(self.handle.description)
        self.agents_view.refresh()

    def _on_connect_failed(self, message: str) -> None:
        self.connection_label.setText("Not connected")
        self.messages.show_error(f"Could not connect to the Knowledge engine: {message}")

    def quit_and_stop_engine(self) -> None:
        handle = self.handle
        if handle is not None and handle.started_pid is not None:
            self.tasks.run(lambda: launcher.stop_engine(handle), lambda _: self.close())
        else:
            self.close()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        self.tasks.shutdown()
        super().closeEvent(event)

    # --- views and agent ------------------------------------------------------------------------

    def show_view(self, number: int) -> None:
        self.navigation.setCurrentRow(number)

    def current_view(self) -> QWidget:
        return self.stack.currentWidget()

    def _on_view_chosen(self, number: int) -> None:
        if number < 0:
            return
        self.stack.setCurrentIndex(number)
        view = self.views[number]
        if hasattr(view, "set_agent"):
            view.set_agent(self.agent)

    def _on_inventory(self, inventory: dict[str, Any]) -> None:
        names = [agent["name"] for agent in inventory["agents"]]
        current = self.agent if self.agent in names else _default_agent(inventory["agents"])
        self.agent_picker.blockSignals(True)
        self.agent_picker.clear()
        self.agent_picker.addItems(names)
        self.agent_picker.setCurrentIndex(names.index(current) if current in names else -1)
        self.agent_picker.blockSignals(False)
        self._set_agent(current)
        if not names:
            self.messages.show_info("No agents yet: add one with Add agent… (Ctrl+N).")

    def _on_agent_chosen(self, _index: int) -> None:
        self._set_agent(self.agent_picker.currentText() or None)

    def _set_agent(self, agent: str | None) -> None:
        self.agent = agent
        view = self.current_view()
        if hasattr(view, "set_agent"):
            view.set_agent(agent)

    def refresh(self) -> None:
        view = self.current_view()
        view.refresh()  # type: ignore[attr-defined]

    def focus_search(self) -> None:
        self.show_view(self.views.index(self.records_view))
        self.records_view.focus_search()

    def open_record(self, record_id: str) -> None:
        self.show_view(self.views.index(self.records_view))
        self.records_view.open_record(record_id)

    def _on_change_request_copied(self, message: str) -> None:
        self.messages.show_info("Copied a change request to the clipboard; paste it into the agent's chat. "
                                "Nothing was sent.")

    def _on_busy_changed(self, busy: bool) -> None:
        self.statusBar().showMessage("Working…" if busy else "")


def _default_agent(agents: list[dict[str, Any]]) -> str | None:
    owners = [agent["name"] for agent in agents if agent.get("owner")]
    names = [agent["name"] for agent in agents]
    return "main" if "main" in names else (owners or names or [None])[0]
