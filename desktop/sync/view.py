"""Sync: each store's remotes, their state in plain words, ahead/behind, and the conflicts waiting.

Everything shown is ``operator/syncStatus`` (``engine/sync/status.py`` ``SyncStatus``: every store, its
remotes and its conflicts); the view reloads it when the engine says sync changed (the ``sync`` topic,
through the window's live updates), so a round finishing elsewhere shows without F5.  The owner adds and
removes a store's remotes (``operator/addSyncRemote``, ``operator/removeSyncRemote``: the engine checks
the name and URL, and a refused one changes nothing), syncs a store now (``operator/syncNow``),
dismisses a conflict once read (``operator/dismissSyncConflict``: both versions stay in the record's
history and in git; only the notice goes), and clones a store from a remote (*Clone a store…*,
``clone_dialog.py``), which is then shown.
"""

from __future__ import annotations

import socket
from datetime import datetime
from typing import Any, Callable

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

from engine.core.words import counted, for_count

from ..common.models import Column, Row, RowsModel
from ..common.times import brief_ago, exact_time, local_now, window_clock
from ..common.widgets import CheckedDialog, SafeTextBrowser, heading, named, plain_label, table, unread_text
from ..partitions.view import store_label
from ..tasks import EngineTasks
from .clone_dialog import CloneDialog, cloned_text
from .words import (
    conflict_html, conflict_kind, conflict_name, count, other_machines, other_machines_tip, remote_state, revision,
)

Clock = Callable[[], datetime]
LOADING = "Loading…"
NO_STORE = ("No store exists yet: a store is created on its agent's first use, or cloned from a remote another "
            "machine syncs with (Clone a store…).")


def remote_columns(now: Clock) -> list[Column]:
    return [
        Column("Remote", lambda r: r.get("name")),
        Column("URL", lambda r: r.get("url"), max_width=320),
        Column("State", lambda r: remote_state(r, now()), stretch=True,
               tooltip=lambda r: (r.get("lastError") or {}).get("message") or remote_state(r, now())),
        Column("Ahead", lambda r: count(r.get("ahead")), align_right=True,
               tooltip=lambda _r: "Commits here that this machine's branch on the remote lacks"),
        Column("Behind", lambda r: count(r.get("behind")), align_right=True,
               tooltip=lambda _r: "Commits of the other machines on the remote not merged here"),
        Column("Other machines", other_machines, max_width=240, tooltip=other_machines_tip),
    ]


def conflict_columns(now: Clock) -> list[Column]:
    return [
        Column("Record", lambda c: c.get("title") or (c.get("standing") or {}).get("path"), stretch=True,
               tooltip=lambda c: (f"Record {c['recordId']}" if c.get("recordId") else "A file that is no record")
               + (f" ({(c.get('standing') or {}).get('path')})" if c.get("title") else "")),
        # The revision and the time read whole in a 1024-wide window ("revision 1.2", "4 min ago"); the title
        # gives way, and reads whole on hover and in the details.
        Column("Stands", lambda c: revision(c.get("standing")), tooltip=lambda c: conflict_kind(c), whole=True),
        Column("Remote", lambda c: c.get("remote")),
        Column("Met", lambda c: brief_ago(c.get("at"), now()), whole=True,
               tooltip=lambda c: exact_time(c.get("at"), now())),
    ]


class AddRemoteDialog(CheckedDialog):
    """A remote's name and URL; the engine checks both, and the dialog stays open with its reason."""

    def __init__(self, store: str, parent: QWidget | None = None) -> None:
        super().__init__("Add a sync remote", f"Store {store} syncs with this git repository from its next round.\n"
                         "Credentials stay with git: an ssh key in ssh-agent, or a credential helper for https.",
                         "Add", parent)
        self.name = QLineEdit()
        self.name.setPlaceholderText("nas, github … (letters, digits, '.', '_' or '-')")
        self.url = QLineEdit()
        self.url.setPlaceholderText("git@host:path.git, https://host/path.git, ssh://…, or an absolute path")
        self.add_field("Name", self.name)
        self.add_field("URL", self.url)

    def params(self) -> dict[str, Any]:
        return {"name": self.name.text(), "url": self.url.text()}



def host_name() -> str:
    """This computer's name as its owner set it (the window runs beside its engine, on the same machine)."""
    return socket.gethostname().split(".")[0] or "this computer"


def machine_tip(store: Row | None) -> str:
    """The store's id for this machine, on hover: the other machines' remotes and rounds name it by that id."""
    machine = (store or {}).get("machineId")
    return (f"Its id in this store's sync: {machine} (the other machines name it so)" if machine else "")

class SyncView(QWidget):
    title = "Sync"

    sig_content_loaded = Signal(object)
    """The engine answered with every store's sync state (``SyncStatus``)."""

    sig_status_reported = Signal(str)
    """A remote was added or removed, a store synced or a conflict dismissed; the argument says what happened."""

    sig_sync_finished = Signal(object)
    """Sync now finished: the engine's answer (``SyncNowAnswer``: each store's remotes after the round)."""

    sig_store_cloned = Signal(object)
    """A store was cloned from a remote: the engine's answer (``SyncCloned``); the view then shows it."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None, *, now: Clock | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.now: Clock = now or local_now
        self.agent: str | None = None
        self.status: dict[str, Any] | None = None  # the last SyncStatus (None: not read yet)
        self.inventory: dict[str, Any] = {"agents": [], "stores": []}
        self._loaded = False  # loads when first shown
        self._syncing = False
        self.dialog: AddRemoteDialog | None = None
        self.clone_dialog: CloneDialog | None = None
        self._cloned: str | None = None  # the store just cloned, to choose once the status lists it

        self.store_picker = named(QComboBox(), "Store")
        self.store_picker.setMinimumContentsLength(30)
        self.store_picker.currentIndexChanged.connect(lambda _: self._show_store())
        self.summary = plain_label()
        self.summary.setWordWrap(True)
        self.remotes_model = RowsModel(remote_columns(lambda: self.now()), self)
        self.remotes_table = named(table(self.remotes_model), "Remotes")
        self.remotes_table.selectionModel().selectionChanged.connect(self._update_actions)
        self.conflicts_model = RowsModel(conflict_columns(lambda: self.now()), self)
        self.conflicts_table = named(table(self.conflicts_model), "Conflicts waiting")
        self.conflicts_table.selectionModel().selectionChanged.connect(self._on_conflict_selected)
        self.details = named(SafeTextBrowser(), "Conflict", "Which version of the chosen conflict stands and what "
                                                            "differs")
        self.details.setPlaceholderText("Select a conflict to see which version stands and what differs.")
        self.sync_button = QPushButton("S&ync now")
        self.sync_button.setToolTip("Fetch, merge and push with every remote of this store")
        self.clone_button = QPushButton("&Clone a store…")
        self.clone_button.setToolTip("Join a store another machine syncs through a git remote: this machine gets "
                                     "its own copy (knowledge sync clone)")
        self.clone_button.clicked.connect(self._on_clone_clicked)
        self.add_button = QPushButton("&Add remote…")
        self.remove_button = QPushButton("&Remove remote")
        self.dismiss_button = QPushButton("&Dismiss")
        self.dismiss_button.setToolTip("Take the conflict off this list; both versions stay in history")
        self.sync_button.clicked.connect(self.sync_now)
        self.add_button.clicked.connect(self._on_add_clicked)
        self.remove_button.clicked.connect(self._on_remove_clicked)
        self.dismiss_button.clicked.connect(self._on_dismiss_clicked)

        picker = QHBoxLayout()
        store_label = plain_label("Store:")
        store_label.setBuddy(self.store_picker)
        picker.addWidget(store_label)
        picker.addWidget(self.store_picker, 1)
        picker.addWidget(self.sync_button)
        picker.addWidget(self.clone_button)
        top, bottom = QWidget(), QWidget()
        top_layout, bottom_layout = QVBoxLayout(top), QVBoxLayout(bottom)
        top_layout.addWidget(heading("Remotes"))
        top_layout.addWidget(self.remotes_table)
        actions = QHBoxLayout()
        actions.addWidget(self.add_button)
        actions.addWidget(self.remove_button)
        actions.addStretch(1)
        top_layout.addLayout(actions)
        bottom_layout.addWidget(heading("Conflicts waiting"))
        conflicts = QSplitter(Qt.Orientation.Horizontal)
        conflicts.addWidget(self.conflicts_table)
        conflicts.addWidget(self.details)
        conflicts.setStretchFactor(0, 1)
        conflicts.setStretchFactor(1, 1)
        bottom_layout.addWidget(conflicts, 1)
        bottom_layout.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignLeft)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(top)
        splitter.addWidget(bottom)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 2)  # a store has a few remotes; a conflict's diff wants the room
        layout = QVBoxLayout(self)
        layout.addLayout(picker)
        layout.addWidget(self.summary)
        layout.addWidget(splitter, 1)
        self._say_loading()
        self._update_actions()
        # "Last synced 3 minutes ago" and a conflict's "met … 7 minutes ago" move on while the view is open, not
        # only when a round ends: said again once a minute, the columns sized again, the reader left in place.
        self.clock = window_clock(self, self._on_clock)

    def _on_clock(self) -> None:
        for view in (self.remotes_table, self.conflicts_table):
            view.refit()  # "just now" becomes "12 min ago": the column widens, never "12 min …"
        self.details.rerender()

    # --- which store ------------------------------------------------------------------------------

    def set_inventory(self, inventory: dict[str, Any]) -> None:
        """The agents and stores, for the stores' names and the agent's store."""
        self.inventory = inventory
        if self.status is not None:
            self._fill_picker()

    def set_agent(self, agent: str | None) -> None:
        """Shown for ``agent``: loads the first time, choosing its store; then the owner's choice is kept."""
        self.agent = agent
        if not self._loaded:
            self._loaded = True
            self.refresh()

    def _agent_store(self) -> str | None:
        entry = next((a for a in self.inventory.get("agents", []) if a.get("name") == self.agent), {})
        return (entry.get("store") or {}).get("storeId")

    def _label(self, store: Row) -> str:
        known = next((s for s in self.inventory.get("stores", []) if s.get("storeId") == store["storeId"]), None)
        if known is not None:
            return f"{store_label(known)} ({store['storeId']})"
        return f"Shared store {store['name']} ({store['storeId']})" if store.get("name") else store["storeId"]

    def _fill_picker(self) -> None:
        chosen = self._cloned or self.store_picker.currentData() or self._agent_store()
        self.store_picker.blockSignals(True)
        self.store_picker.clear()
        for store in (self.status or {}).get("stores") or []:
            self.store_picker.addItem(self._label(store), store["storeId"])
        number = self.store_picker.findData(chosen) if chosen else -1
        self.store_picker.setCurrentIndex(number if number >= 0 else (0 if self.store_picker.count() else -1))
        self.store_picker.blockSignals(False)
        if number >= 0 and chosen == self._cloned:
            self._cloned = None  # shown; from now on the owner's choice is kept

    def store(self) -> Row | None:
        """The chosen store's ``StoreSyncStatus``."""
        chosen = self.store_picker.currentData()
        return next((s for s in (self.status or {}).get("stores") or [] if s["storeId"] == chosen), None)

    # --- data ---------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read every store's sync state again (the choices of store and conflict are kept)."""
        if self.status is None:
            self._say_loading()
        self.tasks.request("operator/syncStatus", {}, self._apply, on_error=self._on_failed, owner=self)

    def _say_loading(self) -> None:
        self.summary.setText(LOADING)
        self.summary.setToolTip("")
        self.remotes_table.set_empty_text(LOADING)
        self.conflicts_table.set_empty_text(LOADING)

    def _on_failed(self, message: str) -> None:
        """Say in the view that the state was not read (never that there is nothing), and in the bar."""
        if self.status is None:
            self.summary.setText(unread_text(message))
            self.summary.setToolTip("")
            self.remotes_table.set_empty_text(unread_text(message))
            self.conflicts_table.set_empty_text(unread_text(message))
        self.tasks.sig_error_raised.emit(message)

    def _apply(self, status: dict[str, Any]) -> None:
        self.status = status
        self._fill_picker()
        self._show_store()
        self.sig_content_loaded.emit(status)

    def _show_store(self) -> None:
        store = self.store()
        kept = self.selected_conflict()
        remote = self.selected_remote()
        self.remotes_model.set_rows((store or {}).get("remotes") or [])
        self.conflicts_model.set_rows((store or {}).get("conflicts") or [])
        self.remotes_table.set_empty_text("No remotes: add one with Add remote… (a git repository this store "
                                          "syncs with, on a server, a NAS or a folder)." if store else NO_STORE)
        self.conflicts_table.set_empty_text("No conflicts waiting: no record was revised on two machines from "
                                            "one revision.")
        self.summary.setText(self._summary(store))
        self.summary.setToolTip(machine_tip(store))
        self._reselect(self.remotes_table, self.remotes_model, remote, "name")
        if not self._reselect(self.conflicts_table, self.conflicts_model, kept, "id"):
            self.details.clear()
        self._update_actions()

    @staticmethod
    def _reselect(view: Any, model: RowsModel, row: Row | None, key: str) -> bool:
        number = next((n for n, r in enumerate(model.rows()) if row is not None and r.get(key) == row.get(key)), -1)
        if number >= 0:
            view.selectRow(number)
        return number >= 0

    def _summary(self, store: Row | None) -> str:  # the machine's id is on hover (machine_tip)
        if store is None:
            return NO_STORE
        if store.get("problem"):
            return f"The sync state of this store could not be read: {store['problem']}"
        remotes = store.get("remotes") or []
        failing = [r for r in remotes if r.get("state") == "failing"]
        said = [f"This machine ({host_name()}) syncs this store." if store.get("machineId") else
                "This machine has not synced this store yet."]
        if failing:
            said.append(f"{len(failing)} of {len(remotes)} {for_count(len(remotes), 'remote', 'remotes')} failing.")
        waiting, shown = store.get("conflictsWaiting") or 0, len(store.get("conflicts") or [])
        if waiting:
            said.append(f"{counted(waiting, 'conflict')} waiting"
                        + (f" (the first {shown:,} shown)." if shown < waiting else "."))
        return " ".join(said)

    def selected_remote(self) -> Row | None:
        return self.remotes_table.selected_row()

    def selected_conflict(self) -> Row | None:
        return self.conflicts_table.selected_row()

    def _on_conflict_selected(self) -> None:
        conflict = self.selected_conflict()
        if conflict is not None:
            self.details.rerender_with(lambda: self.details.show_html(conflict_html(conflict, self.now())))
        self._update_actions()

    def _update_actions(self) -> None:
        store = self.store()
        usable = store is not None and not store.get("problem")
        self.sync_button.setEnabled(usable and bool(store and store.get("remotes")) and not self._syncing)
        self.sync_button.setText("Syncing…" if self._syncing else "S&ync now")
        self.add_button.setEnabled(usable)
        self.remove_button.setEnabled(usable and self.selected_remote() is not None)
        self.dismiss_button.setEnabled(self.selected_conflict() is not None)

    # --- actions (checked by the engine) ------------------------------------------------------------

    def sync_now(self) -> None:
        """Run a round with every remote of the chosen store (on the engine's worker, never the window's)."""
        store = self.store()
        if store is None or self._syncing:
            return
        self._syncing = True
        self._update_actions()
        named = self._label(store)  # "main's own store (st_…)", as the picker names it

        def done(answer: dict[str, Any]) -> None:
            self._syncing = False
            now = self.now()
            remotes = [remote for one in answer.get("stores") or [] for remote in one.get("remotes") or []]
            said = "; ".join(f"{r.get('name')}: {remote_state(r, now, reason=True)}" for r in remotes)
            failing = sum(remote.get("state") == "failing" for remote in remotes)
            if failing:  # a problem, said as one: never "Synced" for a round that failed
                self.tasks.sig_error_raised.emit(
                    f"Sync of {named}: {failing} of {len(remotes)} {for_count(len(remotes), 'remote', 'remotes')} "
                    f"failed: {said}.")
            else:
                self.sig_status_reported.emit(f"Synced {named}: {said}." if said else
                                              answer.get("note") or "No remote to sync with.")
            self.sig_sync_finished.emit(answer)
            self.refresh()

        def failed(message: str) -> None:
            self._syncing = False
            self._update_actions()
            self.tasks.sig_error_raised.emit(message)

        self.tasks.request("operator/syncNow", {"store": store["storeId"]}, done, on_error=failed, owner=self)

    def add_remote(self, params: dict[str, Any], dialog: AddRemoteDialog | None = None) -> None:
        store = self.store()
        if store is None:
            return

        def done(result: dict[str, Any]) -> None:
            if dialog is not None:
                dialog.accept()
            added = result["remote"]
            self.sig_status_reported.emit(f"Remote {added['name']} added to store {result['storeId']}; it syncs "
                                          "from the next round (Sync now).")
            self.refresh()

        def refused(message: str) -> None:
            if dialog is not None:
                dialog.show_problem(message)  # the dialog stays open with the engine's reason
            else:
                self.tasks.sig_error_raised.emit(message)

        self.tasks.request("operator/addSyncRemote", {**params, "store": store["storeId"]}, done,
                           on_error=refused, owner=self)

    def remove_remote(self, name: str) -> None:
        store = self.store()
        if store is None:
            return

        def done(result: dict[str, Any]) -> None:
            self.sig_status_reported.emit(f"Remote {name} removed from store {result['storeId']}; nothing was "
                                          "deleted there.")
            self.refresh()

        self.tasks.request("operator/removeSyncRemote", {"name": name, "store": store["storeId"]}, done, owner=self)

    def dismiss(self, conflict: Row) -> None:
        store = self.store()
        if store is None:
            return

        def done(_: Any) -> None:
            self.sig_status_reported.emit(f"Conflict on {conflict_name(conflict)} dismissed; both versions stay in "
                                          "its history.")
            self.refresh()

        self.tasks.request("operator/dismissSyncConflict", {"store": store["storeId"], "id": conflict["id"]}, done,
                           owner=self)

    def _on_add_clicked(self) -> None:
        store = self.store()
        if store is None:
            return
        dialog = AddRemoteDialog(store["storeId"], self)
        dialog.buttons.accepted.connect(lambda: self.add_remote(dialog.params(), dialog))
        self.dialog = dialog
        dialog.open()

    def _on_clone_clicked(self) -> None:
        if self.clone_dialog is not None and self.clone_dialog.isVisible():
            self.clone_dialog.raise_()
            return
        dialog = CloneDialog(self.tasks, self.inventory.get("agents", []), self)
        dialog.sig_cloned.connect(lambda cloned: self._on_cloned(cloned, dialog.params()["url"]))
        self.clone_dialog = dialog
        dialog.open()

    def _on_cloned(self, cloned: dict[str, Any], url: str) -> None:
        """Show the store cloned: chosen in the picker once the status lists it, and said in the bar."""
        self._cloned = cloned.get("storeId")
        self.sig_status_reported.emit(cloned_text(cloned, url))
        self.sig_store_cloned.emit(cloned)
        self.refresh()

    def _on_remove_clicked(self) -> None:
        remote = self.selected_remote()
        if remote is not None:
            self.remove_remote(remote["name"])

    def _on_dismiss_clicked(self) -> None:
        conflict = self.selected_conflict()
        if conflict is not None:
            self.dismiss(conflict)

