"""A record page: fields, the body as Markdown, claims with evidence, its links, and history with diffs.

Read-only, like all knowledge in the window: *Request a change* copies a
message naming the exact record id, revision and content hash for the
owner to paste into the agent's chat; nothing is sent.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.core.links import SCHEME as LINK_SCHEME

from ..common.models import Column, RowsModel
from ..common.widgets import RECORD_SCHEME, SOURCE_SCHEME, SafeTextBrowser, plain_label, table
from ..tasks import EngineTasks
from .markdown import WIKILINK_SCHEME, body_html, known_records, names_an_id, wikilink_target
from .render import change_request_message, claims_html, fields_html, header_html, links_html

HISTORY_COLUMNS = [
    Column("Revision", lambda r: r.get("revision"), align_right=True),
    Column("Updated", lambda r: r.get("updatedAt") or r.get("observedAt")),
    Column("Lifecycle", lambda r: r.get("lifecycle")),
    Column("Origin", lambda r: r.get("origin")),
    Column("Written by", lambda r: written_by(r.get("attribution"))),
    Column("Git", lambda r: ((r.get("git") or {}).get("commit") or "")[:10]),
    Column("Title", lambda r: r.get("title")),
]


def written_by(attribution: Any) -> str | None:
    """The agent and, when it declared one, its stable instance id: ``main (laptop-main)``."""
    if not isinstance(attribution, dict) or not attribution.get("agent"):
        return None
    instance = attribution.get("instance")
    return f"{attribution['agent']} ({instance})" if instance else str(attribution["agent"])


class SourceDialog(QDialog):
    """A retained original: its descriptor, whether it still matches its sha256, and its text."""

    def __init__(self, source: dict[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Retained original {source.get('filename') or source['id']}")
        self.path = source.get("absolutePath")
        verified = {True: "matches its sha256", False: "NO LONGER MATCHES its sha256"}.get(source.get("verified"),
                                                                                     "not verified")
        info = plain_label(f"{source.get('mediaType')}, {int(source.get('size') or 0):,} bytes, {verified}\n"
                           f"{source.get('retainedPath')} (sha256 {source.get('sha256')})"
                           + (f"\n{source['problem']}" if source.get("problem") else ""))
        info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text = QPlainTextEdit(source.get("text") or "")
        self.text.setReadOnly(True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        open_button = buttons.addButton("Open with another program", QDialogButtonBox.ButtonRole.ActionRole)
        open_button.clicked.connect(self._on_open_clicked)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(info)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.resize(720, 480)

    def _on_open_clicked(self) -> None:
        if self.path:
            QDesktopServices.openUrl(QUrl.fromLocalFile(self.path))


class RecordPage(QWidget):
    sig_record_requested = Signal(str)
    """The owner followed a link to another record (its id)."""

    sig_change_request_copied = Signal(str)
    """A change request was copied to the clipboard (the message)."""

    sig_record_link_activated = Signal(str)
    """The owner followed a record link an agent wrote (``knowledge://record/...``, not yet checked)."""

    sig_content_loaded = Signal(str)
    """A record, its links and its history are shown (the record id)."""

    sig_diff_loaded = Signal(str)
    """A diff between two revisions is shown (the diff text)."""

    sig_connections_requested = Signal(object)
    """The owner asked for the graph of this record's connections (the record)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self.record: dict[str, Any] | None = None
        self.links: dict[str, Any] | None = None
        self.dialog: QDialog | None = None
        self._generation = 0

        self.header = SafeTextBrowser()
        self.header.setMaximumHeight(96)
        self.request_button = QPushButton("Request a &change")
        self.request_button.setToolTip("Copy a message for the agent's chat naming this exact record, revision "
                                       "and content hash (Edit › Copy a change request, Ctrl+Shift+C). "
                                       "Nothing is sent.")
        self.request_button.clicked.connect(self.copy_change_request)
        self.graph_button = QPushButton("Show connections")
        self.graph_button.setToolTip("A graph of this record, its relationships and the records it links to, to "
                                     "click through (View › Show connections, Ctrl+Shift+G)")
        self.graph_button.clicked.connect(self._on_graph_clicked)
        self.fields = SafeTextBrowser()
        self.body = SafeTextBrowser()
        self.claims = SafeTextBrowser()
        self.connections = SafeTextBrowser()
        for browser in (self.header, self.fields, self.body, self.claims, self.connections):
            browser.sig_link_activated.connect(self._on_link_activated)
        self.history_model = RowsModel(HISTORY_COLUMNS, self)
        self.history_table = table(self.history_model)
        self.history_table.set_empty_text("Choose a record to see its revisions.")
        self.history_table.selectionModel().selectionChanged.connect(self._on_revision_selected)
        self.diff = QPlainTextEdit()
        self.diff.setReadOnly(True)
        self.diff.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.diff.setPlaceholderText("Select a revision to see what changed since the one before it.")

        overview = QSplitter(Qt.Orientation.Vertical)
        overview.addWidget(self.fields)
        overview.addWidget(self.body)
        history = QSplitter(Qt.Orientation.Vertical)
        history.addWidget(self.history_table)
        history.addWidget(self.diff)
        self.tabs = QTabWidget()
        self.tabs.addTab(overview, "&Record")
        self.tabs.addTab(self.claims, "Claims && &evidence")
        self.tabs.addTab(self.connections, "Li&nks")
        self.tabs.addTab(history, "&History")
        top = QHBoxLayout()
        top.addWidget(self.header, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.request_button)
        buttons.addWidget(self.graph_button)
        buttons.addStretch(1)
        top.addLayout(buttons)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.tabs, 1)
        self.clear()

    def clear(self) -> None:
        self._generation += 1
        self.record = self.links = None
        self.request_button.setEnabled(False)
        self.graph_button.setEnabled(False)
        self.header.show_html('<div class="muted">Choose a record on the left.</div>')
        for browser in (self.fields, self.body, self.claims, self.connections):
            browser.clear()
        self.history_model.set_rows([])
        self.diff.clear()

    # --- loading -------------------------------------------------------------------------------

    def show_record(self, agent: str, record_id: str) -> None:
        self.clear()
        self.agent = agent
        self._load(record_id)

    def refresh(self) -> None:
        """The record shown, loaded again in place (an agent wrote): what is shown stays until the new answers
        replace it, and a revision chosen in History stays chosen, its diff shown again.  A record that can no
        longer be read leaves the page empty, as choosing it would."""
        if self.record is None or self.agent is None:
            return
        rows = self.history_table.selectionModel().selectedRows()
        chosen = self.history_model.row(rows[0].row()) if rows else None
        self._generation += 1
        self._load(self.record["id"], keep_revision=chosen["revision"] if chosen else None)

    def _load(self, record_id: str, *, keep_revision: int | None = None) -> None:
        generation = self._generation
        params = {"agent": self.agent, "id": record_id}

        def current(check: Any) -> Any:
            return lambda result: check(result) if generation == self._generation else None

        def unreadable(message: str) -> None:
            if generation == self._generation:
                self.clear()
                self.tasks.sig_error_raised.emit(message)

        self.tasks.request("operator/record", params, current(self._on_record), on_error=unreadable, owner=self)
        self.tasks.request("operator/links", params, current(self._on_links), owner=self)
        self.tasks.request("operator/history", params,
                           current(lambda history: self._on_history(history, keep_revision)), owner=self)

    def _on_record(self, record: dict[str, Any]) -> None:
        self.record = record
        self.request_button.setEnabled(True)
        self.graph_button.setEnabled(True)
        self.header.rerender_with(lambda: self.header.show_html(header_html(record)))
        self.fields.rerender_with(lambda: self.fields.show_html(fields_html(record, self.links)))
        self._show_body()

    def _on_links(self, links: dict[str, Any]) -> None:
        self.links = links
        if self.record is not None:
            record = self.record
            self.fields.rerender_with(lambda: self.fields.show_html(fields_html(record, links)))
            self._show_body()  # [[links]] to the records named here now resolve to their ids
        self.claims.rerender_with(lambda: self.claims.show_html(claims_html(links)))
        self.connections.rerender_with(lambda: self.connections.show_html(links_html(links)))

    def _show_body(self) -> None:
        record, known = self.record or {}, known_records(self.links)
        self.body.rerender_with(lambda: self.body.show_html(body_html(record.get("body") or "", known)))

    def _on_history(self, history: dict[str, Any], keep_revision: int | None = None) -> None:
        self.history_model.set_rows(history["revisions"])
        self.history_table.resizeColumnsToContents()
        kept = next((n for n, row in enumerate(history["revisions"]) if row.get("revision") == keep_revision), None)
        if kept is not None:
            self.history_table.selectRow(kept)  # its diff is asked for again
        self.sig_content_loaded.emit(history["id"])

    def _on_revision_selected(self) -> None:
        rows = self.history_table.selectionModel().selectedRows()
        revision = self.history_model.row(rows[0].row()) if rows else None
        if revision is None or self.record is None:
            return
        number = revision["revision"]
        self.show_diff(max(1, number - 1), number)

    def show_diff(self, old: int, new: int) -> None:
        if self.record is None or self.agent is None:
            return
        generation = self._generation

        def shown(result: dict[str, Any]) -> None:
            if generation != self._generation:
                return
            text = result["diff"] or f"Revision {old} and revision {new} hold the same bytes."
            self.diff.setPlainText(text + ("\n… (diff truncated)" if result.get("truncated") else ""))
            self.sig_diff_loaded.emit(self.diff.toPlainText())

        self.tasks.request("operator/diff", {"agent": self.agent, "id": self.record["id"], "from": old, "to": new},
                           shown, owner=self)

    # --- actions -------------------------------------------------------------------------------

    def copy_change_request(self) -> str | None:
        if self.record is None or self.agent is None:
            return None
        message = change_request_message(self.agent, self.record)
        QGuiApplication.clipboard().setText(message)
        self.sig_change_request_copied.emit(message)
        return message

    def _on_graph_clicked(self) -> None:
        if self.record is not None:
            self.sig_connections_requested.emit(self.record)

    def _on_link_activated(self, url: QUrl) -> None:
        scheme, target = url.scheme(), url.path()
        if scheme == RECORD_SCHEME and target:
            self.sig_record_requested.emit(target)
        elif scheme == WIKILINK_SCHEME and self.agent:
            name = wikilink_target(target)
            if name:
                self.follow_wikilink(name)
        elif scheme == SOURCE_SCHEME and target and self.agent:
            self.open_source(target)
        elif scheme == LINK_SCHEME:  # a cited record, perhaps of another agent's store: the window decides
            self.sig_record_link_activated.emit(url.toString())
        elif scheme in ("http", "https"):
            QDesktopServices.openUrl(url)

    def follow_wikilink(self, name: str) -> None:
        """Open the record ``[[name]]`` means: the one with that title (or id), else the best search match."""
        agent = self.agent

        def found(result: dict[str, Any]) -> None:
            hits = result.get("hits") or []
            exact = [hit for hit in hits if hit.get("id") == name
                     or str(hit.get("title") or "").casefold() == name.casefold()]
            if exact or hits:
                self.sig_record_requested.emit((exact or hits)[0]["id"])
            elif names_an_id(name):
                self.sig_record_requested.emit(name)  # perhaps an id the search does not match on
            else:
                self.tasks.sig_error_raised.emit(f"No record in {agent}'s private partition is called "
                                                 f"\"{name}\" or matches it.")

        self.tasks.request("operator/search", {"agent": agent, "query": name, "limit": 10}, found, owner=self)

    def open_source(self, source_id: str) -> None:
        def shown(source: dict[str, Any]) -> None:
            self.dialog = SourceDialog(source, self)
            self.dialog.open()

        self.tasks.request("operator/source", {"agent": self.agent, "source": source_id}, shown, owner=self)
