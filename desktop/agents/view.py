"""Agents & stores: every agent with its effective store, every known store, and the sharing actions.

The only view that changes anything, and only owner administration: adding
an agent, store membership (Share this store, Use shared store, Use own
store, with exactly the spec's semantics, carried out by the engine) and
whether agents may save.  Each change answers with the fresh inventory.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QHBoxLayout,
    QMessageBox,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from ..common.models import Column, Row, RowsModel
from ..common.widgets import heading, named, table
from ..tasks import EngineTasks
from .dialogs import AddAgentDialog, ShareStoreDialog, TokenDialog, UseSharedStoreDialog


def _store_of(agent: Row) -> str:
    """The agent's store as the owner calls it: a named store's name, else its own isolated store (the id on
    hover, as in Every known store below)."""
    store = agent.get("store") or {}
    if store.get("status") == "not created":
        where = store.get("name") or "own isolated store"
        return f"{where} (created on first use)"
    return store.get("name") or ("own isolated store" if store.get("kind") == "isolated" else store.get("storeId")) \
        or ""


def _store_name(store: Row) -> str:
    if store.get("kind") == "named":
        label, name = store.get("label"), store.get("name")
        return f"{label} ({name})" if label and label != name else name or ""
    return f"isolated store of {store.get('owner') or 'nobody'}"


AGENT_COLUMNS = [
    Column("Agent", lambda a: a["name"]),
    Column("Role", lambda a: "owner" if a.get("owner") else "agent"),
    Column("Effective store", _store_of, tooltip=lambda a: (a.get("store") or {}).get("storeId")),
    Column("Kind", lambda a: (a.get("store") or {}).get("kind")),
    Column("Status", lambda a: (a.get("store") or {}).get("status")),
    Column("Reason", lambda a: (a.get("store") or {}).get("reason")),
]
STORE_COLUMNS = [
    Column("Store", _store_name),
    Column("Kind", lambda s: s.get("kind")),
    Column("Members", lambda s: s.get("agents") or "-"),
    Column("Assigned", lambda s: "yes" if s.get("assigned") else "unassigned"),
    Column("Status", lambda s: s.get("status")),
    Column("Reason", lambda s: s.get("reason") if s.get("status") != "ok" else ""),
    Column("Store id", lambda s: s.get("storeId")),
]


class AgentsView(QWidget):
    title = "Agents & stores"

    sig_inventory_changed = Signal(object)
    """The engine answered with its agents, stores and settings (after a refresh or a change)."""

    sig_status_reported = Signal(str)
    """A change went through; the argument says what happened."""

    sig_status_withdrawn = Signal(str)
    """What was reported (the argument) no longer holds: "copy its token now" once the token is gone."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.inventory: dict[str, Any] = {"agents": [], "stores": [], "settings": {}}
        self.dialog: QDialog | None = None
        self.agents_model = RowsModel(AGENT_COLUMNS, self)
        self.stores_model = RowsModel(STORE_COLUMNS, self)
        self.agents_table = named(table(self.agents_model), "Agents")
        self.stores_table = named(table(self.stores_model), "Every known store")
        self.agents_table.selectionModel().selectionChanged.connect(self._update_actions)
        self.agents_table.set_empty_text("No agents yet. Add one with Add agent… (Ctrl+N); its token is shown once, "
                                         "with a ready configuration for its MCP client.")
        self.stores_table.set_empty_text("No stores yet: an agent's own store is created the first time it is used.")

        self.add_button = QPushButton("&Add agent…")
        self.add_button.setToolTip("Register an agent; its token is shown once (Engine › Add agent…, Ctrl+N)")
        self.share_button = QPushButton("&Share this store…")
        self.shared_button = QPushButton("&Use shared store…")
        self.own_button = QPushButton("Use &own store")
        self.writes_check = QCheckBox("Agents may save knowledge (writesEnabled)")
        self.add_button.clicked.connect(self._on_add_clicked)
        self.share_button.clicked.connect(self._on_share_clicked)
        self.shared_button.clicked.connect(self._on_use_shared_clicked)
        self.own_button.clicked.connect(self._on_use_own_clicked)
        self.writes_check.clicked.connect(self.set_writes_enabled)

        actions = QHBoxLayout()
        for button in (self.add_button, self.share_button, self.shared_button, self.own_button):
            actions.addWidget(button)
        actions.addStretch(1)
        title = QHBoxLayout()  # the switch beside the heading, so the buttons' row fits a narrow window
        title.addWidget(heading("Agents"))
        title.addStretch(1)
        title.addWidget(self.writes_check)
        top, bottom = QWidget(), QWidget()
        top_layout, bottom_layout = QVBoxLayout(top), QVBoxLayout(bottom)
        top_layout.addLayout(title)
        top_layout.addWidget(self.agents_table)
        top_layout.addLayout(actions)
        bottom_layout.addWidget(heading("Every known store"))
        bottom_layout.addWidget(self.stores_table)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(top)
        splitter.addWidget(bottom)
        layout = QVBoxLayout(self)
        layout.addWidget(splitter)
        self._update_actions()

    # --- data --------------------------------------------------------------------------------

    def refresh(self) -> None:
        self.expect_inventory()
        self.tasks.request("operator/inventory", None, self._apply, on_error=self._on_unread, owner=self)

    def expect_inventory(self) -> None:
        """The inventory was asked for (or the window is connecting): the tables say "Loading…" until it is
        here, rather than that there are no agents."""
        for model in (self.agents_model, self.stores_model):
            model.set_loading()

    def load_failed(self, message: str) -> None:
        """No inventory could be read: the tables say why (the engine gone, say), not that they are empty."""
        for model in (self.agents_model, self.stores_model):
            model.set_failed(message)

    def _on_unread(self, message: str) -> None:
        self.load_failed(message)
        self.tasks.sig_error_raised.emit(message)  # the window's bar says it too, as for any request

    def _apply(self, inventory: dict[str, Any]) -> None:
        selected = self.selected_agent()
        self.inventory = inventory
        self.agents_model.set_rows(inventory["agents"])
        self.stores_model.set_rows(inventory["stores"])
        self.agents_table.resizeColumnsToContents()
        self.stores_table.resizeColumnsToContents()
        self.writes_check.setChecked(bool(inventory["settings"].get("writesEnabled")))
        names = [agent["name"] for agent in inventory["agents"]]
        if names:
            self.select_agent(selected["name"] if selected and selected["name"] in names else names[0])
        self._update_actions()
        self.sig_inventory_changed.emit(inventory)

    def selected_agent(self) -> Row | None:
        rows = self.agents_table.selectionModel().selectedRows() if self.agents_table.selectionModel() else []
        return self.agents_model.row(rows[0].row()) if rows else None

    def select_agent(self, name: str) -> None:
        for number, row in enumerate(self.agents_model.rows()):
            if row["name"] == name:
                self.agents_table.selectRow(number)
                return

    def _named_stores(self) -> list[tuple[str, str]]:
        return [(s["name"], s.get("label") or s["name"]) for s in self.inventory["stores"]
                if s.get("kind") == "named" and s.get("name")]

    def _update_actions(self) -> None:
        agent = self.selected_agent()
        store = (agent or {}).get("store") or {}
        isolated = store.get("kind") == "isolated"
        self.share_button.setEnabled(agent is not None and isolated and store.get("status") == "ok")
        self.shared_button.setEnabled(agent is not None and any(
            name != store.get("name") for name, _ in self._named_stores()))
        self.own_button.setEnabled(agent is not None and store.get("kind") == "named")

    # --- changes (the only writes an operator makes) --------------------------------------------

    def add_agent(self, name: str, owner: bool, dialog: AddAgentDialog | None = None) -> None:
        """Register ``name``; a refusal is said in ``dialog``, which stays open as typed, else in the bar."""
        def added(result: dict[str, Any]) -> None:
            if dialog is not None:
                dialog.accept()
            self._on_agent_added(result)

        def refused(message: str) -> None:
            if dialog is not None and dialog.isVisible():
                dialog.show_problem(message)
            else:
                self.tasks.sig_error_raised.emit(message)

        self.tasks.request("operator/addAgent", {"name": name, "owner": owner}, added, on_error=refused, owner=self)

    def share_store(self, agent: str, name: str, label: str | None, others: list[str]) -> None:
        params: dict[str, Any] = {"agent": agent, "name": name, "others": others}
        if label:
            params["label"] = label
        self._change("operator/shareStore", params, f"{agent}'s store is now the shared store {name}.")

    def use_shared_store(self, agent: str, name: str) -> None:
        self._change("operator/useSharedStore", {"agent": agent, "name": name}, f"{agent} now uses {name}.")

    def use_own_store(self, agent: str) -> None:
        self._change("operator/useOwnStore", {"agent": agent},
                     f"{agent} uses its own store again (a new empty one if it had none).")

    def set_writes_enabled(self, enabled: bool) -> None:
        self._change("operator/setSettings", {"writesEnabled": bool(enabled)},
                     "Agents may save knowledge." if enabled else "Knowledge writes are off for every agent.")

    def _change(self, method: str, params: dict[str, Any], done: str) -> None:
        def applied(inventory: dict[str, Any]) -> None:
            self._apply(inventory)
            self.sig_status_reported.emit(done)

        def failed(message: str) -> None:
            self.tasks.sig_error_raised.emit(message)
            self.refresh()  # show what the engine holds, e.g. the checkbox's real state

        self.tasks.request(method, params, applied, on_error=failed, owner=self)

    def _on_agent_added(self, result: dict[str, Any]) -> None:
        self._apply(result)
        self.select_agent(result["agent"])
        said = f"Agent {result['agent']} added; copy its token now."
        dialog = TokenDialog(result, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # the token is held nowhere once it closes
        dialog.finished.connect(lambda _result: self._token_closed(dialog, said))
        self.dialog = dialog
        dialog.open()
        self.sig_status_reported.emit(said)

    def _token_closed(self, dialog: TokenDialog, said: str) -> None:
        """The token dialog closed: its token is not shown again, so "copy its token now" no longer holds."""
        if self.dialog is dialog:
            self.dialog = None
        self.sig_status_withdrawn.emit(said)

    # --- dialogs -----------------------------------------------------------------------------

    def _on_add_clicked(self) -> None:
        dialog = AddAgentDialog(self)
        dialog.buttons.accepted.connect(
            lambda: self.add_agent(dialog.name.text().strip(), dialog.owner.isChecked(), dialog))
        self.dialog = dialog
        dialog.open()

    def _on_share_clicked(self) -> None:
        agent = self.selected_agent()
        if agent is None:
            return
        others = [a["name"] for a in self.inventory["agents"] if a["name"] != agent["name"]]
        dialog = ShareStoreDialog(agent["name"], others, self)
        dialog.accepted.connect(lambda: self.share_store(agent["name"], dialog.name.text().strip(),
                                                         dialog.label.text().strip() or None,
                                                         dialog.chosen_others()))
        self.dialog = dialog
        dialog.open()

    def _on_use_shared_clicked(self) -> None:
        agent = self.selected_agent()
        if agent is None:
            return
        current = (agent.get("store") or {}).get("name")
        dialog = UseSharedStoreDialog(agent["name"], [n for n in self._named_stores() if n[0] != current], self)
        dialog.accepted.connect(lambda: self.use_shared_store(agent["name"], dialog.chosen()))
        self.dialog = dialog
        dialog.open()

    def _on_use_own_clicked(self) -> None:
        agent = self.selected_agent()
        if agent is None:
            return
        box = QMessageBox(QMessageBox.Icon.Question, "Use own store",
                          f"{agent['name']} returns to its previous isolated store, or to a new empty one created "
                          "on its first use. Nothing from the shared store is copied or removed.",
                          QMessageBox.StandardButton.Ok | QMessageBox.StandardButton.Cancel, self)
        box.buttonClicked.connect(lambda button: self.use_own_store(agent["name"])
                                  if box.standardButton(button) == QMessageBox.StandardButton.Ok else None)
        self.dialog = box
        box.open()
