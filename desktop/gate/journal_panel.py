"""Labelling the shadow journal: for each kept turn, which of its pages the message actually needed.

Journal turns (``operator/gateJournal``) carry the message and the pages the
gate scored, with the document each was scored on.  The owner ticks the
pages the turn needed (and may add record ids the gate never offered, which
then count as misses at every threshold) and saves the label with
``operator/labelGateTurn``; labels feed the Tuning tab's precision and
recall.  Labels change only the store's gate state, never knowledge.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.core.ids import is_record_id
from engine.core.words import counted

from ..common.models import ROW_ROLE, VALUE_ROLE, Column, PagedModel, Row
from ..common.times import time_column
from ..common.widgets import heading, named, plain_label, table
from ..tasks import EngineTasks

PAGE_SIZE = 100
SEPARATORS = re.compile(r"[\s,;]+")
ParentIndex = QModelIndex | QPersistentModelIndex


def label_text(turn: Row) -> str:
    needed = turn.get("needed")
    if needed is None:
        return "not labelled"
    return "no page needed" if not needed else f"{len(needed)} needed"


# Short headers and a whole time: in a small window the message keeps the room it is chosen by.
JOURNAL_COLUMNS = [
    replace(time_column("At", "at"), whole=True),
    Column("Message", lambda t: " ".join((t.get("message") or "").split())[:120], stretch=True),
    Column("Label", label_text),
    Column("Pages", lambda t: len(t.get("pages") or []), align_right=True),
    Column("Best", lambda t: max((d["score"] for d in t.get("decisions") or []
                                  if d.get("score") is not None), default=None), align_right=True),
]


class JournalPagesModel(QAbstractTableModel):
    """A journal turn's pages with their scores; the first column's check box is the label being edited."""

    HEADERS = ("Needed", "Page", "Type", "Score", "Tier")
    STRETCH_COLUMN = 1  # the page's title takes the spare width, not its tier

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._pages: list[Row] = []
        self._needed: set[str] = set()

    def set_turn(self, turn: Row | None) -> None:
        """Show ``turn``'s pages (each with its decision), ticked where the saved label says so."""
        self.beginResetModel()
        decisions = {d["id"]: d for d in (turn or {}).get("decisions") or []}
        self._pages = [{**page, "score": decisions.get(page["id"], {}).get("score"),
                        "tier": decisions.get(page["id"], {}).get("tier", "-")}
                       for page in (turn or {}).get("pages") or []]
        self._needed = set((turn or {}).get("needed") or [])
        self.endResetModel()

    def needed(self) -> list[str]:
        """The ticked pages, in the order shown."""
        return [page["id"] for page in self._pages if page["id"] in self._needed]

    def set_needed(self, needed: list[str]) -> None:
        """Tick exactly ``needed`` among the pages shown (a label being edited, kept across a reload)."""
        self._needed = set(needed)
        if self._pages:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._pages) - 1, 0))

    def page(self, number: int) -> Row | None:
        return self._pages[number] if 0 <= number < len(self._pages) else None

    def rowCount(self, parent: ParentIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._pages)

    def columnCount(self, parent: ParentIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.HEADERS)

    def flags(self, index: ParentIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        return flags | Qt.ItemFlag.ItemIsUserCheckable if index.column() == 0 else flags

    def data(self, index: ParentIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self._pages) or index.column() >= len(self.HEADERS):
            return None
        page, column = self._pages[index.row()], index.column()
        if role == Qt.ItemDataRole.CheckStateRole and column == 0:
            return Qt.CheckState.Checked if page["id"] in self._needed else Qt.CheckState.Unchecked
        values = (page["id"] in self._needed, page.get("title") or page["id"], page.get("type"), page.get("score"),
                  page.get("tier"))
        if role == Qt.ItemDataRole.DisplayRole:
            value = values[column]
            if column == 0:
                return "needed" if value else ""
            return f"{value:.3f}" if isinstance(value, float) else ("" if value is None else str(value))
        if role == Qt.ItemDataRole.ToolTipRole and column == 1:
            return f"{page.get('title')} ({page['id']}, revision {page.get('revision')})"
        if role == VALUE_ROLE:
            return values[column]
        if role == ROW_ROLE:
            return page
        return None

    def setData(self, index: ParentIndex, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:  # noqa: N802
        if not index.isValid() or index.column() != 0 or role != Qt.ItemDataRole.CheckStateRole:
            return False
        page_id = self._pages[index.row()]["id"]
        if Qt.CheckState(value) == Qt.CheckState.Checked:
            self._needed.add(page_id)
        else:
            self._needed.discard(page_id)
        self.dataChanged.emit(index, index.siblingAtColumn(0), [role, Qt.ItemDataRole.DisplayRole])
        return True

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return self.HEADERS[section] if 0 <= section < len(self.HEADERS) else None
        return section + 1


class JournalPanel(QWidget):
    """Journal turns, the selected turn's message and pages, and the label actions."""

    sig_journal_loaded = Signal(int)
    """A page of journal turns arrived (how many are shown)."""

    sig_turn_labelled = Signal(object)
    """A label was saved or cleared; the argument is the turn as the engine now has it."""

    sig_journal_cleared = Signal(int)
    """The journal's message texts were dropped (how many turns)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self.filter = named(QComboBox(), "Journal turns shown")
        self.filter.addItem("Every journal turn", None)
        self.filter.addItem("Not labelled yet", False)
        self.filter.addItem("Labelled", True)
        self.filter.currentIndexChanged.connect(lambda _: self.refresh())
        self.journal_model = PagedModel(JOURNAL_COLUMNS, self)
        self._kept: dict[str, Any] | None = None   # the turn being labelled, found again once its page arrives
        self._seeking: tuple[int, str] | None = None   # a label saved on that row: the next unlabelled turn is due
        self.journal_model.sig_page_loaded.connect(self._on_page_loaded)
        self.journal_model.sig_load_failed.connect(self.tasks.sig_error_raised.emit)
        self.journal_table = named(table(self.journal_model), "Journal turns")
        self.journal_table.selectionModel().selectionChanged.connect(self._on_turn_selected)
        self.message = named(QPlainTextEdit(), "Message")
        self.message.setReadOnly(True)
        self.message.setPlaceholderText("The selected turn's message")
        self.pages_model = JournalPagesModel(self)
        self.journal_table.set_empty_text("No journal turns. Turn on Keep a shadow journal (Settings tab) and "
                                          "shadow mode; each turn's message is then kept here for labelling.")
        self.pages_table = named(table(self.pages_model), "Pages the gate scored",
                                 "Tick those the message needed")
        self.pages_table.set_empty_text("Select a turn above to see the pages the gate scored for it.")
        self.pages_table.selectionModel().selectionChanged.connect(self._on_page_selected)
        self.document = named(QPlainTextEdit(), "What the Decision model was shown")
        self.document.setReadOnly(True)
        self.document.setPlaceholderText("What the Decision model was shown for the selected page")
        self.extra = named(QLineEdit(), "Also needed, but not offered", "Record ids, apart by spaces or commas")
        self.extra.setPlaceholderText("Also needed, but not offered: record ids, e.g. pg_01J…")
        self.save_button = QPushButton("Save &label")
        self.none_button = QPushButton("&No page needed")
        self.unlabel_button = QPushButton("Remove l&abel")
        self.clear_button = QPushButton("Clear the &journal…")
        self.clear_button.setToolTip("Forget every kept message text of this agent (scores and labels stay)")
        self.save_button.clicked.connect(self._on_save_clicked)
        self.none_button.clicked.connect(lambda: self.label([]))
        self.unlabel_button.clicked.connect(lambda: self.label(None))
        self.clear_button.clicked.connect(self._on_clear_clicked)
        self.status = plain_label()

        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.filter)
        left_layout.addWidget(self.journal_table, 1)
        left_layout.addWidget(self.clear_button)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(heading("Message"))
        self.message.setMaximumHeight(self.message.fontMetrics().lineSpacing() * 6)
        right_layout.addWidget(self.message)
        pages_heading = heading("Pages the gate scored: tick those the message needed")
        pages_heading.setWordWrap(True)  # on two lines in a small window, never widening the pane
        right_layout.addWidget(pages_heading)
        right_layout.addWidget(self.pages_table, 2)
        right_layout.addWidget(self.document, 1)
        right_layout.addWidget(self.extra)
        buttons = QHBoxLayout()
        for button in (self.save_button, self.none_button, self.unlabel_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        right_layout.addLayout(buttons)
        self.status.setWordWrap(True)  # what a save said, under the buttons: it never widens the pane
        right_layout.addWidget(self.status)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([640, 520])  # the turns' messages first; a turn's pages need less
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)
        self._update_actions()

    def set_agent(self, agent: str | None) -> None:
        if agent != self.agent:
            self._kept = None
            self.journal_table.clearSelection()
        self.agent = agent
        self.refresh()

    def refresh(self) -> None:
        """The journal again (an agent's turn arrived, a label filter, F5): the turn being labelled stays
        selected, with the ticks and ids not saved yet, when it is among the turns shown."""
        self._kept = self._place()
        self._seeking = None
        agent, labelled = self.agent, self.filter.currentData()
        self.pages_model.set_turn(None)
        self.message.clear()
        self.document.clear()
        self._update_actions()
        if agent is None:
            self.journal_model.set_source(None)
            return

        def source(offset: Any, deliver: Any, fail: Any) -> None:
            params: dict[str, Any] = {"agent": agent, "offset": offset or 0, "limit": PAGE_SIZE}
            if labelled is not None:
                params["labelled"] = labelled
            self.tasks.request("operator/gateJournal", params,
                               lambda page: deliver(page["turns"], page.get("nextOffset"), page["total"]),
                               on_error=fail, owner=self)

        self.journal_model.set_source(source)

    def _place(self) -> dict[str, Any] | None:
        """The selected turn and what the owner ticked or typed for it, to find again after a reload."""
        selected = self.selected_turn()
        if selected is None:
            return None
        pages = self.pages_table.selectionModel().selectedRows()
        return {"id": selected[1]["id"], "row": selected[0], "needed": self.pages_model.needed(),
                "extra": self.extra.text(), "status": self.status.text(), "page": pages[0].row() if pages else None}

    def _on_page_loaded(self, count: int) -> None:
        kept = self._kept
        if kept is not None:
            number = next((n for n in range(self.journal_model.rowCount())
                           if (self.journal_model.row(n) or {}).get("id") == kept["id"]), None)
            if number is None and not self.journal_model.exhausted and count <= kept["row"] + PAGE_SIZE:
                self.journal_model.fetchMore(QModelIndex())   # newer turns pushed it onto the next page
            else:
                self._kept = None
            if number is not None:
                self.journal_table.selectRow(number)
                self.journal_table.scrollTo(self.journal_model.index(number, 0))
                self.pages_model.set_needed(kept["needed"])
                self.extra.setText(kept["extra"])
                self.status.setText(kept["status"])
                if kept["page"] is not None:
                    self.pages_table.selectRow(kept["page"])
        self._select_next_unlabelled()
        self.sig_journal_loaded.emit(count)

    def selected_turn(self) -> tuple[int, Row] | None:
        rows = self.journal_table.selectionModel().selectedRows()
        if not rows:
            return None
        turn = self.journal_model.row(rows[0].row())
        return (rows[0].row(), turn) if turn is not None else None

    def selected_turn_ids(self) -> list[str]:
        """Every selected journal turn (the Replay tab can replay just these)."""
        rows = self.journal_table.selectionModel().selectedRows()
        return [turn["id"] for turn in (self.journal_model.row(r.row()) for r in rows) if turn is not None]

    def extra_ids(self) -> tuple[list[str], list[str]]:
        """The record ids typed beside the pages, and anything typed there that is not one."""
        words = [word for word in SEPARATORS.split(self.extra.text()) if word]
        return [w for w in words if is_record_id(w)], [w for w in words if not is_record_id(w)]

    def needed(self) -> list[str]:
        """The ticked pages and the extra record ids, once each."""
        return list(dict.fromkeys(self.pages_model.needed() + self.extra_ids()[0]))

    def _on_save_clicked(self) -> None:
        bad = self.extra_ids()[1]
        if bad:
            self.status.setText(f"Not a record id: {bad[0]!r} (ids look like pg_01J…; separate them with commas).")
            return
        self.label(self.needed())

    def label(self, needed: list[str] | None) -> None:
        selected = self.selected_turn()
        if selected is None or self.agent is None:
            return
        number, turn = selected
        self.tasks.request("operator/labelGateTurn", {"agent": self.agent, "turn": turn["id"], "needed": needed},
                           lambda labelled: self._on_labelled(number, labelled), owner=self)

    def _on_labelled(self, number: int, turn: Row) -> None:
        current = self.journal_model.row(number)
        saved = f"Saved: {label_text(turn)}."
        self.status.setText(saved)
        if current is not None and current["id"] == turn["id"]:
            self.journal_model.replace_row(number, turn)
            self.pages_model.set_turn(turn)
            self._show_extra(turn)
            if turn.get("needed") is not None:   # a label saved: on to the next (a removed one is relabelled here)
                self._seeking = (number, saved)
                self._select_next_unlabelled()
        self.sig_turn_labelled.emit(turn)

    def _unlabelled(self, number: int) -> bool:
        turn = self.journal_model.row(number)
        return turn is not None and turn.get("needed") is None

    def _select_next_unlabelled(self) -> None:
        """Select the first turn below the one just labelled that has no label yet (the next page of the journal
        when the shown ones have none, then from the top), the focus in the list; else say none is left."""
        if self._seeking is None:
            return
        after, saved = self._seeking
        model = self.journal_model
        below = range(after + 1, model.rowCount())
        found = next((n for n in below if self._unlabelled(n)), None)
        if found is None and not model.exhausted:
            if model.canFetchMore(QModelIndex()):
                model.fetchMore(QModelIndex())   # looked at again once the page arrives
            return
        if found is None:
            found = next((n for n in range(after) if self._unlabelled(n)), None)
        self._seeking = None
        if found is None:
            self.status.setText(f"{saved} Every turn shown is labelled.")
            return
        self.journal_table.selectRow(found)
        self.journal_table.scrollTo(model.index(found, 0))
        self.journal_table.setFocus(Qt.FocusReason.OtherFocusReason)
        self.status.setText(f"{saved} This is the next turn not labelled yet.")

    def _on_turn_selected(self) -> None:
        selected = self.selected_turn()
        turn = selected[1] if selected else None
        self.message.setPlainText((turn or {}).get("message") or "")
        self.pages_model.set_turn(turn)
        self.document.clear()
        self._show_extra(turn)
        self.pages_table.resizeColumnsToContents()
        self.status.clear()
        self._update_actions()

    def _show_extra(self, turn: Row | None) -> None:
        offered = {page["id"] for page in (turn or {}).get("pages") or []}
        self.extra.setText(", ".join(i for i in (turn or {}).get("needed") or [] if i not in offered))

    def _on_page_selected(self) -> None:
        rows = self.pages_table.selectionModel().selectedRows()
        page = self.pages_model.page(rows[0].row()) if rows else None
        self.document.setPlainText((page or {}).get("document") or "")

    def _update_actions(self) -> None:
        chosen = self.selected_turn() is not None
        for button in (self.save_button, self.none_button, self.unlabel_button):
            button.setEnabled(chosen)

    def _on_clear_clicked(self) -> None:
        if self.agent is None:
            return
        answer = QMessageBox.question(self, "Clear the journal",
                                      f"Forget every kept message text of {self.agent}'s gate journal? Scores "
                                      "and labels stay; the turns can no longer be labelled or replayed.")
        if answer == QMessageBox.StandardButton.Yes:
            self.clear_journal()

    def clear_journal(self) -> None:
        if self.agent is not None:
            self.tasks.request("operator/clearGateJournal", {"agent": self.agent}, self._on_cleared, owner=self)

    def _on_cleared(self, result: dict[str, Any]) -> None:
        self.status.setText(f"Cleared {counted(result.get('cleared', 0), 'kept message')}.")
        self.refresh()
        self.sig_journal_cleared.emit(int(result.get("cleared", 0)))
