"""Connect an agent: ready configurations for the common MCP clients, and who connected recently.

Each tab is what ``knowledge agents config NAME --client C`` prints, asked of
the engine (``operator/agentConfig``, the same ``client_config.agent_setup``),
so an agent without owner authority gets the conversation audience that
works for it, with the grant that would open its private partition.  The
list below is the engine's ``operator/connections``: the agents and
instances seen connected since the engine started, refreshed every few
seconds while the dialog is open.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ..common.times import clock_time, exact_time, local_now
from ..common.widgets import plain_label
from ..tasks import EngineTasks

# (client as `knowledge agents config --client` names it, the tab's title), in the order shown.
CLIENT_TABS = (("claude", "Claude Desktop"), ("claude-code", "Claude Code"), ("cursor", "Cursor"),
               ("vscode", "VS Code"), ("codex", "Codex"), ("openclaw", "OpenClaw"),
               ("generic", "Any MCP client (stdio)"))
CONNECTION_COLUMNS = (("agent", "Agent"), ("instance", "Instance"), ("audience", "Audience"), ("client", "Client"),
                      ("firstSeen", "First seen"), ("lastSeen", "Last seen"), ("open", "Open now"))
SEEN_KEYS = ("firstSeen", "lastSeen")  # engine timestamps
REFRESH_MS = 5000


class ClientTab(QWidget):
    """One client's configuration, where it goes, and a copy button."""

    def __init__(self, client: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.client = client
        self.where = plain_label()
        self.where.setWordWrap(True)
        self.config = QPlainTextEdit()
        self.config.setReadOnly(True)
        self.config.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.copy_button = QPushButton("Copy")
        self.copy_button.setEnabled(False)
        self.copy_button.clicked.connect(self.copy)
        layout = QVBoxLayout(self)
        layout.addWidget(self.where)
        layout.addWidget(self.config, 1)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.copy_button)
        layout.addLayout(row)

    def show_setup(self, setup: dict[str, Any]) -> None:
        self.where.setText(("Run it in " if self.client == "claude-code" else "Paste it into ") + setup["where"] + ".")
        self.config.setPlainText(setup["config"])
        self.copy_button.setEnabled(True)

    def show_problem(self, message: str) -> None:
        self.where.setText(message)
        self.config.clear()
        self.copy_button.setEnabled(False)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.config.toPlainText())


class ConnectAgentDialog(QDialog):
    sig_setup_loaded = Signal(str)
    """Every client's configuration arrived for this agent."""

    sig_connections_loaded = Signal(int)
    """The recent connections were listed (how many)."""

    sig_copied = Signal(str)
    """A configuration was copied to the clipboard (the client)."""

    def __init__(self, tasks: EngineTasks, agents: list[dict[str, Any]], agent: str | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.setWindowTitle("Connect an agent")
        self.resize(820, 640)
        self.agent_picker = QComboBox()
        self.agents = {row["name"]: row for row in agents}
        self.agent_picker.addItems(list(self.agents))
        if agent in self.agents:
            self.agent_picker.setCurrentText(agent)
        self.agent_picker.currentTextChanged.connect(self._on_agent_chosen)
        self.instance = QLineEdit()
        self.instance.setPlaceholderText("default: AGENT-HOSTNAME")
        self.instance.setToolTip("A stable, non-secret id of this agent instance, recorded in the attribution of "
                                 "what it writes (--instance)")
        self.session_key = QLineEdit()
        self.session_key.setPlaceholderText("default: the instance id")
        self.session_key.setToolTip("For an agent without owner authority: the session key of its conversation, "
                                    "which grants name (--session-key)")
        for field in (self.instance, self.session_key):
            field.editingFinished.connect(self._on_field_edited)
        self.audience_note = plain_label()
        self.audience_note.setWordWrap(True)
        self.audience_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.tabs = QTabWidget()
        self.client_tabs: dict[str, ClientTab] = {}
        for client, title in CLIENT_TABS:
            tab = ClientTab(client)
            tab.copy_button.clicked.connect(lambda _=False, c=client: self.sig_copied.emit(c))
            self.client_tabs[client] = tab
            self.tabs.addTab(tab, title)
        self.connections = QTableWidget(0, len(CONNECTION_COLUMNS))
        self.connections.setHorizontalHeaderLabels([title for _, title in CONNECTION_COLUMNS])
        self.connections.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.connections.setTabKeyNavigation(False)  # Tab goes on to Refresh and Close, as in every table
        self.connections.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.connections.verticalHeader().setVisible(False)
        self.connections.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.connections.horizontalHeader().setStretchLastSection(True)
        self.connections_note = plain_label()
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.load_connections)
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.load_connections)

        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        top.addWidget(plain_label("Agent:"))
        top.addWidget(self.agent_picker, 1)
        top.addWidget(plain_label("Instance id:"))
        top.addWidget(self.instance, 1)
        top.addWidget(plain_label("Session key:"))
        top.addWidget(self.session_key, 1)
        layout.addLayout(top)
        self.no_agents = plain_label("No agents yet: add one in Agents & stores (Add agent…), then connect it here.")
        self.no_agents.setVisible(not self.agents)
        layout.addWidget(self.no_agents)
        layout.addWidget(self.audience_note)
        layout.addWidget(self.tabs, 2)
        heading = QHBoxLayout()
        heading.addWidget(plain_label("Seen connected since the engine started:"), 1)
        heading.addWidget(refresh)
        layout.addLayout(heading)
        layout.addWidget(self.connections, 1)
        layout.addWidget(self.connections_note)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self._pending: set[str] = set()
        self._asked: tuple[str, str] = ("", "")
        self.load_setup(self.agent_picker.currentText())
        self.load_connections()

    @Slot(object)
    def follow(self, inventory: dict[str, Any]) -> None:
        """The agents now (one added or removed meanwhile, here or with the CLI): the list follows, and the
        agent chosen stays chosen while it is there."""
        agents = {row["name"]: row for row in inventory.get("agents", [])}
        chosen = self.agent_picker.currentText()
        self.agents = agents
        self.no_agents.setVisible(not agents)
        if [self.agent_picker.itemText(n) for n in range(self.agent_picker.count())] == list(agents):
            return
        self.agent_picker.blockSignals(True)
        self.agent_picker.clear()
        self.agent_picker.addItems(list(agents))
        if chosen in agents:
            self.agent_picker.setCurrentText(chosen)
        self.agent_picker.blockSignals(False)
        if self.agent_picker.currentText() != chosen:  # it was removed (or there was none): another one's
            self._on_agent_chosen(self.agent_picker.currentText())

    # --- configurations ---------------------------------------------------------------------------

    def _on_agent_chosen(self, agent: str) -> None:
        self.instance.clear()
        self.session_key.clear()
        self.load_setup(agent)

    def _on_field_edited(self) -> None:
        asked = (self.instance.text().strip(), self.session_key.text().strip())
        if asked != self._asked:
            self.load_setup(self.agent_picker.currentText())

    def load_setup(self, agent: str) -> None:
        if not agent:  # none yet, or the last one removed meanwhile
            self.audience_note.clear()
            for tab in self.client_tabs.values():
                tab.show_problem("No agent to connect.")
            return
        owner = bool(self.agents.get(agent, {}).get("owner"))
        self.session_key.setEnabled(not owner)  # an owner agent uses the owner-private audience
        if owner:
            self.session_key.clear()
        self._asked = (self.instance.text().strip(), self.session_key.text().strip())
        params: dict[str, Any] = {"agent": agent}
        if self._asked[0]:
            params["instance"] = self._asked[0]
        if self._asked[1]:
            params["sessionKey"] = self._asked[1]
        self._pending = {client for client, _ in CLIENT_TABS}
        for client, tab in self.client_tabs.items():
            tab.show_problem("Asking the engine…")
            self.tasks.request("operator/agentConfig", {**params, "client": client},
                               lambda setup, a=agent, c=client: self._on_setup(a, c, setup),
                               on_error=lambda message, a=agent, c=client: self._on_setup_failed(a, c, message),
                               owner=self)

    def _on_setup(self, agent: str, client: str, setup: dict[str, Any]) -> None:
        if agent != self.agent_picker.currentText():
            return  # an answer for the agent chosen before
        self.client_tabs[client].show_setup(setup)
        if client == CLIENT_TABS[0][0]:
            self.audience_note.setText(audience_note(setup))
        self._arrived(agent, client)

    def _on_setup_failed(self, agent: str, client: str, message: str) -> None:
        if agent == self.agent_picker.currentText():
            self.client_tabs[client].show_problem(f"Problem: {message}")
            self._arrived(agent, client)

    def _arrived(self, agent: str, client: str) -> None:
        self._pending.discard(client)
        if not self._pending:
            self.sig_setup_loaded.emit(agent)

    # --- recent connections -----------------------------------------------------------------------

    def load_connections(self) -> None:
        self.tasks.request("operator/connections", None, self._on_connections,
                           on_error=lambda message: self.connections_note.setText(f"Problem: {message}"),
                           owner=self)

    def _on_connections(self, result: dict[str, Any]) -> None:
        rows = result["connections"]
        self.connections.setRowCount(len(rows))
        for number, row in enumerate(rows):
            for column, (key, _) in enumerate(CONNECTION_COLUMNS):
                value = row.get(key)
                if key in SEEN_KEYS and value:  # the owner's local time, the exact moment on hover
                    item = QTableWidgetItem(clock_time(value, local_now()))
                    item.setToolTip(exact_time(value, local_now()))
                else:
                    item = QTableWidgetItem("" if value is None else str(value))
                self.connections.setItem(number, column, item)
        self.connections_note.setText(
            "No agent has connected since the engine started." if not rows else
            f"{len(rows)} seen (the engine keeps the {result['limit']} most recent, in memory only).")
        self.sig_connections_loaded.emit(len(rows))

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self._timer.start()

    def hideEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        self._timer.stop()
        super().hideEvent(event)


def audience_note(setup: dict[str, Any]) -> str:
    """What the configuration gives the agent, in words (as `knowledge agents config` says on stderr)."""
    token = "" if setup["tokenFileExists"] else (
        f" Its token file {setup['tokenFile']} is missing: remove and add the agent again to get a new token.")
    if setup["owner"]:
        return (f"{setup['agent']} has owner authority: these configurations reach its store's private knowledge "
                f"(instance id {setup['instance']}).{token}")
    key = setup["audience"]["sessionKey"]
    return (f"{setup['agent']} has no owner authority, so these configurations give it a conversation of its own "
            f"(session key {key}): what it saves stays in that conversation. To have it work in its store's "
            f"private knowledge instead, grant that session key in Partitions, or run: {setup['grantCommand']}."
            f"{token}")
