"""Recall approvals: every approved recall block of an agent's private partition, read-only.

Approving belongs to the owner's conversation with the agent
(``knowledge_recall``), so this view only shows what was approved, by whom
and when, most important first.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from engine.core.words import counted

from ..common.models import ROW_ROLE, Column, PagedModel
from ..common.times import time_column
from ..common.widgets import named, plain_label, table
from ..tasks import EngineTasks

PAGE_SIZE = 100

APPROVAL_COLUMNS = [
    # What the agent is told comes first: in a small window the summary keeps room to be read, the others
    # give way, and each reads whole on hover.
    Column("Record", lambda a: a.get("title") or a.get("id"), tooltip=lambda a: a.get("title") or a.get("id")),
    Column("Summary", lambda a: a.get("summary"), tooltip=lambda a: a.get("summary"), stretch=True, min_width=240),
    Column("Triggers", lambda a: a.get("triggers") or "-"),
    Column("Importance", lambda a: a.get("importance"), align_right=True),
    Column("Projects", lambda a: a.get("projects") or "-"),
    Column("Approved by", lambda a: a.get("approvedBy")),
    time_column("Approved at", "approvedAt"),
]


class ApprovalsView(QWidget):
    title = "Recall approvals"

    sig_content_loaded = Signal(int)
    """A page of approvals arrived (how many are shown)."""

    sig_record_requested = Signal(str)
    """An approval was opened (the record id)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self.model = PagedModel(APPROVAL_COLUMNS, self)
        self.model.sig_page_loaded.connect(self._on_page)
        self.model.sig_load_failed.connect(self.tasks.sig_error_raised.emit)
        self.table = named(table(self.model), "Approved recall blocks", "Enter opens the record of one")
        self.table.activated.connect(self._on_activated)
        self.table.set_empty_text("Choose an agent in the toolbar (Ctrl+L) to see its approved recall blocks.")
        self.summary = plain_label()
        layout = QVBoxLayout(self)
        layout.addWidget(plain_label("Approved in the owner's conversations with the agent (knowledge_recall); "
                                     "read-only here. Open a row to see its record."))
        layout.addWidget(self.table, 1)
        layout.addWidget(self.summary)

    def set_agent(self, agent: str | None) -> None:
        if agent != self.agent:
            self.agent = agent
            self.table.set_empty_text(
                f"No approved recall blocks for {agent} yet. The owner approves one in a conversation with the "
                "agent (knowledge_recall); it is listed here." if agent else
                "Choose an agent in the toolbar (Ctrl+L) to see its approved recall blocks.")
            self.refresh()

    def refresh(self) -> None:
        agent = self.agent
        if agent is None:
            self.model.set_source(None)
            return

        def source(offset: Any, deliver: Any, fail: Any) -> None:
            self.tasks.request("operator/approvals", {"agent": agent, "offset": offset or 0, "limit": PAGE_SIZE},
                               lambda page: deliver(page["approvals"], page.get("nextOffset"), page["total"]),
                               on_error=fail, owner=self)

        self.model.set_source(source)

    def _on_page(self, count: int) -> None:
        self.table.resizeColumnsToContents()
        total = self.model.total or 0
        self.summary.setText(counted(total, "approved recall block") if total else "No approved recall blocks yet.")
        self.sig_content_loaded.emit(count)

    def _on_activated(self, index: QModelIndex) -> None:
        row = index.data(ROW_ROLE)
        if row is not None:
            self.sig_record_requested.emit(row["id"])
