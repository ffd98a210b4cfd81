"""Partitions: for each store, its private partition and every conversation partition, and the grants.

A conversation's records are its own: the specification exposes no operator
browsing of conversation partitions, so this view shows figures only (the
session, its agent, when it was made, its record and publication counts,
the last publication, its grant) and opens no record.  Grants are added and
revoked here; the engine checks them (``engine/operator/partitions.py``).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.core.words import for_count

from ..common.models import Column, Row, RowsModel
from ..common.times import time_column
from ..common.widgets import CheckedDialog, heading, named, plain_label, table
from ..tasks import EngineTasks

ACCESS = (("read", "Read the private partition"), ("read-and-save", "Read and save in the private partition"))


def _grant(row: Row) -> str:
    grant = row.get("grant")
    if row.get("kind") == "private":
        return ""
    return f"{grant['access']} (uses the private partition)" if grant else "none"


def _notes(row: Row) -> int | None:
    """The current pages and claims: what the sidebar's Records counts and Records lists (links hidden)."""
    records, links = row.get("records"), row.get("links")
    return records - links if isinstance(records, int) and isinstance(links, int) else records


def _counted(row: Row) -> str:
    return (f"{row.get('records'):,} current records: {_notes(row):,} notes and claims and "
            f"{row.get('links') or 0:,} links between them" if isinstance(row.get("links"), int) else "")


PARTITION_COLUMNS = [
    Column("Partition", lambda r: "Private" if r.get("kind") == "private" else f"Conversation {r.get('sessionId')}"),
    Column("Agent", lambda r: r.get("agent") or ("" if r.get("kind") == "private" else "unknown")),
    Column("Session key", lambda r: r.get("sessionKey") or ("" if r.get("kind") == "private" else "kept as a hash"),
           tooltip=lambda r: r.get("sessionKey") or "The engine keeps only a hash of a conversation's session key; "
                                                    "it is shown once a grant names it."),
    time_column("Created", "createdAt"),
    Column("Notes and claims", _notes, align_right=True, tooltip=_counted),
    Column("Links", lambda r: r.get("links"), align_right=True, tooltip=_counted),
    Column("Publications", lambda r: r.get("publications"), align_right=True),
    time_column("Last publication", "lastPublicationAt", missing="never"),
    Column("Grant", _grant),
]
GRANT_COLUMNS = [
    Column("Agent", lambda g: g.get("agent")),
    Column("Session key", lambda g: g.get("sessionKey")),
    Column("Access", lambda g: g.get("access")),
    time_column("Granted", "createdAt"),
    Column("Conversations", lambda g: len(g.get("conversations") or []), align_right=True),
]


def store_label(store: dict[str, Any]) -> str:
    if store.get("kind") == "named":
        return f"Shared store {store.get('label') or store.get('name')}"
    return f"{store.get('owner') or 'unbound'}'s own store"


class GrantDialog(CheckedDialog):
    """A grant: which agent, which session key, what access (for one conversation, when opened from its row)."""

    def __init__(self, agents: list[str], *, agent: str | None = None, session_id: str | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__("Grant a conversation" if session_id else "Add a grant",
                         "A granted conversation reads the private partition instead of its own, on its next "
                         "request; revoking the grant returns it to its own partition."
                         + (f"\nConversation {session_id}: the engine checks the key is the one it is bound "
                            "under." if session_id else ""), "Grant", parent)
        self.session_id = session_id
        self.agent = QComboBox()
        self.agent.addItems(agents)
        if agent is not None:
            self.agent.setCurrentText(agent)
            self.agent.setEnabled(False)
        self.session_key = QLineEdit()
        self.session_key.setPlaceholderText("the session key the agent's host presents, exactly")
        self.access = QComboBox()
        for value, text in ACCESS:
            self.access.addItem(text, value)
        self.add_field("Agent", self.agent)
        self.add_field("Session key", self.session_key)
        self.add_field("Access", self.access)

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"agent": self.agent.currentText(), "sessionKey": self.session_key.text(),
                                  "access": self.access.currentData()}
        if self.session_id:
            params["sessionId"] = self.session_id
        return params

class PartitionsView(QWidget):
    title = "Partitions"

    sig_content_loaded = Signal(object)
    """The engine answered with a store's partitions and grants."""

    sig_status_reported = Signal(str)
    """A grant was added or revoked; the argument says what happened."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self.answer: dict[str, Any] = {}
        self.inventory: dict[str, Any] = {"agents": [], "stores": []}
        self._loaded = False  # loads when first shown
        self.dialog: GrantDialog | None = None
        self.store_picker = named(QComboBox(), "Store")
        self.store_picker.setMinimumContentsLength(30)
        self.store_picker.currentIndexChanged.connect(lambda _: self.refresh())
        self.summary = plain_label()
        self.summary.setWordWrap(True)
        self.partitions_model = RowsModel(PARTITION_COLUMNS, self)
        self.grants_model = RowsModel(GRANT_COLUMNS, self)
        self.partitions_table = named(table(self.partitions_model), "Partitions")
        self.grants_table = named(table(self.grants_model), "Conversation grants")
        self.partitions_table.selectionModel().selectionChanged.connect(self._update_actions)
        self.partitions_table.set_empty_text("No partitions to show: choose a store above. A store's partitions "
                                             "appear once an agent has used it.")
        self.grants_table.set_empty_text("No grants. A granted conversation reads the private partition; add one "
                                         "with Add a grant…, or choose a conversation above and Grant this "
                                         "conversation…")
        self.grants_table.selectionModel().selectionChanged.connect(self._update_actions)
        self.grant_row_button = QPushButton("&Grant this conversation…")
        self.add_button = QPushButton("&Add a grant…")
        self.revoke_button = QPushButton("&Revoke grant")
        self.grant_row_button.clicked.connect(self._on_grant_row_clicked)
        self.add_button.clicked.connect(self._on_add_clicked)
        self.revoke_button.clicked.connect(self._on_revoke_clicked)

        picker = QHBoxLayout()
        store_label = plain_label("Store:")
        store_label.setBuddy(self.store_picker)
        picker.addWidget(store_label)
        picker.addWidget(self.store_picker, 1)
        top, bottom = QWidget(), QWidget()
        top_layout, bottom_layout = QVBoxLayout(top), QVBoxLayout(bottom)
        top_layout.addWidget(heading("Partitions"))
        top_layout.addWidget(plain_label("A conversation's records are its own: the window shows their figures, never "
                                         "the records."))
        top_layout.addWidget(self.partitions_table)
        top_layout.addWidget(self.grant_row_button, 0, Qt.AlignmentFlag.AlignLeft)
        bottom_layout.addWidget(heading("Conversation grants of this store's agents"))
        bottom_layout.addWidget(self.grants_table)
        actions = QHBoxLayout()
        actions.addWidget(self.add_button)
        actions.addWidget(self.revoke_button)
        actions.addStretch(1)
        bottom_layout.addLayout(actions)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(top)
        splitter.addWidget(bottom)
        layout = QVBoxLayout(self)
        layout.addLayout(picker)
        layout.addWidget(self.summary)
        layout.addWidget(splitter, 1)
        self._update_actions()

    # --- which store ------------------------------------------------------------------------------

    def set_inventory(self, inventory: dict[str, Any]) -> None:
        """The stores to choose from (those that exist); the choice is kept while it still exists."""
        self.inventory = inventory
        chosen = self.store_picker.currentData()
        stores = [s for s in inventory.get("stores", []) if s.get("storeId")]
        self.store_picker.blockSignals(True)
        self.store_picker.clear()
        for store in stores:
            self.store_picker.addItem(f"{store_label(store)} ({store['storeId']})", store["storeId"])
        self.store_picker.blockSignals(False)
        self._choose(chosen or self._store_of(inventory, self.agent))
        if self._loaded and self.store_picker.currentData() != chosen:
            self.refresh()

    def set_agent(self, agent: str | None) -> None:
        """Shown for ``agent``: its store is chosen the first time, then the owner's choice is kept."""
        self.agent = agent
        if not self._loaded:
            self._loaded = True
            self._choose(self._store_of(self.inventory, agent))
            self.refresh()

    @staticmethod
    def _store_of(inventory: dict[str, Any], agent: str | None) -> str | None:
        entry = next((a for a in inventory.get("agents", []) if a.get("name") == agent), {})
        return (entry.get("store") or {}).get("storeId")

    def _choose(self, store_id: str | None) -> None:
        number = self.store_picker.findData(store_id) if store_id else -1
        self.store_picker.blockSignals(True)
        self.store_picker.setCurrentIndex(number if number >= 0 else (0 if self.store_picker.count() else -1))
        self.store_picker.blockSignals(False)

    # --- data ---------------------------------------------------------------------------------

    def refresh(self) -> None:
        store_id = self.store_picker.currentData()
        if not store_id:
            self._apply({"store": {}, "partitions": [], "grants": []})
            self.summary.setText("No store exists yet: a store is created on its agent's first use.")
            return
        for model in (self.partitions_model, self.grants_model):
            model.set_loading()
        self.tasks.request("operator/partitions", {"store": store_id}, self._apply, on_error=self._on_unread,
                           owner=self)

    def _on_unread(self, message: str) -> None:
        """Say in the tables that the store was not read (never that it has no partitions), and in the bar."""
        for model in (self.partitions_model, self.grants_model):
            model.set_failed(message)
        self.tasks.sig_error_raised.emit(message)

    def _apply(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.partitions_model.set_rows(answer.get("partitions") or [])
        self.grants_model.set_rows(answer.get("grants") or [])
        for view in (self.partitions_table, self.grants_table):
            view.resizeColumnsToContents()
        store = answer.get("store") or {}
        conversations = sum(1 for row in answer.get("partitions") or [] if row.get("kind") == "conversation")
        if store and store.get("status") != "ok":
            self.summary.setText(f"This store is {store.get('status')}: {store.get('reason') or ''}")
        elif store:
            members = ", ".join(store.get("agents") or []) or "no agent"
            self.summary.setText(f"Used by {members}; {conversations} "
                                 f"{for_count(conversations, 'conversation partition', 'conversation partitions')}.")
        self._update_actions()
        self.sig_content_loaded.emit(answer)

    @property
    def _agents(self) -> list[str]:
        return list((self.answer.get("store") or {}).get("agents") or [])

    def selected_partition(self) -> Row | None:
        return self.partitions_table.selected_row()

    def selected_grant(self) -> Row | None:
        return self.grants_table.selected_row()

    def _update_actions(self) -> None:
        row = self.selected_partition()
        self.grant_row_button.setEnabled(row is not None and row.get("kind") == "conversation"
                                         and bool(row.get("agent")) and not row.get("grant"))
        self.add_button.setEnabled(bool(self._agents))
        self.revoke_button.setEnabled(self.selected_grant() is not None)

    # --- grants (checked by the engine) ----------------------------------------------------------

    def set_grant(self, params: dict[str, Any], dialog: GrantDialog | None = None) -> None:
        def done(_: dict[str, Any]) -> None:
            if dialog is not None:
                dialog.accept()
            self.sig_status_reported.emit(f"Conversations under {params['sessionKey']!r} of {params['agent']} may "
                                          f"now {params['access']} the private partition.")
            self.refresh()

        def failed(message: str) -> None:
            if dialog is not None:
                dialog.show_problem(message)  # the dialog stays open with the engine's reason
            else:
                self.tasks.sig_error_raised.emit(message)

        self.tasks.request("operator/setGrant", params, done, on_error=failed, owner=self)

    def revoke_grant(self, agent: str, session_key: str) -> None:
        def done(_: dict[str, Any]) -> None:
            self.sig_status_reported.emit(f"Grant for {session_key!r} of {agent} revoked; it takes effect on the "
                                          "conversation's next request.")
            self.refresh()

        self.tasks.request("operator/removeGrant", {"agent": agent, "sessionKey": session_key}, done, owner=self)

    def _open(self, dialog: GrantDialog) -> None:
        dialog.buttons.accepted.connect(lambda: self.set_grant(dialog.params(), dialog))
        self.dialog = dialog
        dialog.open()

    def _on_grant_row_clicked(self) -> None:
        row = self.selected_partition()
        if row is not None and row.get("agent"):
            self._open(GrantDialog(self._agents or [row["agent"]], agent=row["agent"], session_id=row["sessionId"],
                                   parent=self))

    def _on_add_clicked(self) -> None:
        self._open(GrantDialog(self._agents, agent=None, parent=self))

    def _on_revoke_clicked(self) -> None:
        grant = self.selected_grant()
        if grant is not None:
            self.revoke_grant(grant["agent"], grant["sessionKey"])
