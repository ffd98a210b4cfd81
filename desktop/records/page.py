"""A record page: the note first (its body rendered, its details beside it), then claims with evidence, its
links, and its history with coloured diffs.

The Note tab gives the body most of the page (``BODY_SHARE`` of the width beside the details, or of the
height below the title when the page is too narrow for both side by side: ``SIDE_BY_SIDE_PX``); the
details say what the record is, its tags and aliases, when it was created and updated (in local time,
relative, the exact time in a tooltip) and who wrote it; raw ids and hashes come last, small.

Read-only, like all knowledge in the window: *Request a change* copies a
message naming the exact record id, revision and content hash for the
owner to paste into the agent's chat; nothing is sent.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import tzinfo
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFontDatabase, QGuiApplication, QResizeEvent, QShowEvent, QTextCursor
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

from ..common.times import Clock, local_now
from ..common.widgets import RECORD_SCHEME, SOURCE_SCHEME, SafeTextBrowser, esc, is_dark, named, plain_label
from ..tasks import EngineTasks, Unreachable
from .conversations import shown_body
from .history import HistoryPanel
from .markdown import (HEADING_SCHEME, WIKILINK_SCHEME, BodyParse, Known, heading_anchor, known_records,
                       names_an_id, wikilink_target)
from .render import TAG_SCHEME, change_request_message, claims_html, details_html, header_html, links_html, tag_of

BODY_SHARE = 0.72  # of the Note tab the body takes (the details the rest)
SIDE_BY_SIDE_PX = 720  # narrower than this, the details go below the body
HEADER_PX = (72, 150)  # the header's height: what a one-line title and its line take, and at most
SHOWN_ID = "shownId"  # a browser's property: the record its content was made for (its place is kept for it)
BODIES_KEPT = 8  # the bodies last made, kept as HTML: a long note opened again is not parsed again
# Beneath a long note's first part while the rest is parsed (a part between the window's events).
REST_COMING_HTML = '<p class="muted">The rest of the note is on its way…</p>'

NOTE_KINDS = ["page", "claim"]  # what the lists show while links are hidden (the operator methods' ``kinds``)


def cited_lines(fragment: str) -> tuple[int, int] | None:
    """The lines an evidence link cites (``source:ID#8-23``), or None."""
    first, dash, last = fragment.partition("-")
    if dash and first.isdigit() and last.isdigit() and 0 < int(first) <= int(last):
        return int(first), int(last)
    return None


class SourceDialog(QDialog):
    """A retained original: its descriptor, whether it still matches its sha256, and its text, opened at the
    lines the record cites (selected), as a reader opens a PDF at the page cited; *Show in folder* opens the
    folder that holds it."""

    def __init__(self, source: dict[str, Any], parent: QWidget | None = None,
                 lines: tuple[int, int] | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Retained original {source.get('filename') or source['id']}")
        self.path = source.get("absolutePath")
        verified = {True: "matches its sha256", False: "NO LONGER MATCHES its sha256"}.get(source.get("verified"),
                                                                                     "not verified")
        text = source.get("text") or ""
        cited = lines if lines and text and 1 <= lines[0] <= lines[1] else None
        info = plain_label(f"{source.get('mediaType')}, {int(source.get('size') or 0):,} bytes, {verified}\n"
                           f"{source.get('retainedPath')} (sha256 {source.get('sha256')})"
                           + (f"\n{source['problem']}" if source.get("problem") else "")
                           + (f"\nThe record cites lines {cited[0]}-{cited[1]}, selected below." if cited else ""))
        info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text = QPlainTextEdit(text)
        self.text.setReadOnly(True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        if cited:
            self._select_lines(*cited)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        open_button = buttons.addButton("&Open with another program", QDialogButtonBox.ButtonRole.ActionRole)
        open_button.clicked.connect(self._on_open_clicked)
        folder_button = buttons.addButton("Show in &folder", QDialogButtonBox.ButtonRole.ActionRole)
        folder_button.setToolTip("Open the folder that holds the retained original in the file manager")
        folder_button.clicked.connect(self._on_folder_clicked)
        open_button.setEnabled(bool(self.path))
        folder_button.setEnabled(bool(self.path))
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(info)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.resize(720, 480)

    def _select_lines(self, first: int, last: int) -> None:
        """Lines ``first`` to ``last`` (from 1) selected, and the cursor at the first, in view once shown."""
        document = self.text.document()
        start = document.findBlockByLineNumber(first - 1)
        end = document.findBlockByLineNumber(min(last, document.blockCount()) - 1)
        if not start.isValid():
            return
        cursor = QTextCursor(end if end.isValid() else start)
        cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock)
        cursor.setPosition(start.position(), QTextCursor.MoveMode.KeepAnchor)  # the cursor at the first line
        self.text.setTextCursor(cursor)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.text.centerCursor()  # the cited lines in the middle of the view, not the file's first lines

    def _on_open_clicked(self) -> None:
        if self.path:
            QDesktopServices.openUrl(QUrl.fromLocalFile(self.path))

    def _on_folder_clicked(self) -> None:
        if self.path:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(Path(self.path).parent)))


class RecordPage(QWidget):
    sig_record_requested = Signal(str)
    """The owner followed a link to another record (its id)."""

    sig_change_request_copied = Signal(str)
    """A change request was copied to the clipboard (the message)."""

    sig_record_link_activated = Signal(str)
    """The owner followed a record link an agent wrote (``knowledge://record/...``, not yet checked)."""

    sig_content_loaded = Signal(str)
    """A record, its links and its history are shown (the record id)."""

    sig_body_shown = Signal(str)
    """A record's body is shown whole (the record id): with its links, or, for a long note shown a part first,
    once the rest is parsed."""

    sig_diff_loaded = Signal(str)
    """A comparison of two revisions is shown in History (its text as shown)."""

    sig_connections_requested = Signal(object)
    """The owner asked for the graph of this record's connections (the record)."""

    sig_tag_requested = Signal(str)
    """The owner clicked one of the record's tags: the notes holding it are wanted (the tag, without ``#``)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None, *, now: Clock | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.now: Clock = now or local_now  # what "3 minutes ago" is counted from (local time)
        self.agent: str | None = None
        self.record: dict[str, Any] | None = None
        self.shown_id: str | None = None  # the record on the page: loading, shown, or no longer readable
        self._problem: str | None = None  # what the bar was told when a record chosen could not be read
        self._heading_wanted: str | None = None  # a [[Note#Heading]] followed: the heading to show it at
        self.links: dict[str, Any] | None = None
        self._links_settled = False  # the links asked with the record answered or failed: the body can be made
        self._history_settled = False  # the history asked with the record answered or failed: the page is loaded
        self._rest_coming = False  # a long note's first part is shown, the rest to be parsed once the page loaded
        self._parsed: BodyParse | None = None  # a body parsed (in part, for a long one) and not yet made
        # A long note new on the page shows its first part at once, the rest parsed a part a tick once the page
        # has loaded (nothing slow on the GUI thread at a time, and the engine's answers not kept waiting behind
        # it): a 200 KB note's first screen is read in a tenth of a second.
        self.rest_timer = QTimer(self)
        self.rest_timer.setInterval(0)
        self.rest_timer.timeout.connect(self._on_rest_tick)
        # The bodies last made, by (text, what its links resolve to, dark palette): a note opened again
        # (Alt+Left, a link back) is shown from here when neither its text nor its links changed.
        self._bodies: OrderedDict[tuple[str, tuple[Any, ...], bool], str] = OrderedDict()
        # The record read last, the zone it was shown in and its body as shown (``shown_body``): made once for
        # each record read, not again each time its body is shown (its links arrived, a long note's rest parsed).
        self._body_text: tuple[dict[str, Any] | None, tzinfo | None, str] = (None, None, "")
        self.dialog: QDialog | None = None
        self._generation = 0

        self.header = named(SafeTextBrowser(), "Record title", "The record's title, kind, when it was updated "
                                                               "and its revision")
        self.header.setFixedHeight(HEADER_PX[0])
        self.header.document().documentLayout().documentSizeChanged.connect(self._fit_header)
        self.request_button = QPushButton("Request a &change")
        self.request_button.setToolTip("Copy a message for the agent's chat naming this exact record, revision "
                                       "and content hash (Edit › Copy a change request, Ctrl+Shift+C). "
                                       "Nothing is sent.")
        self.request_button.clicked.connect(self.copy_change_request)
        self.graph_button = QPushButton("Show connections")
        self.graph_button.setToolTip("A graph of this record, its relationships and the records it links to, to "
                                     "click through (View › Show connections, Ctrl+Shift+G)")
        self.graph_button.clicked.connect(self._on_graph_clicked)
        self.body = named(SafeTextBrowser(), "Note", "The record's text as written, its links to other records "
                                                     "followed with Enter")
        self.details = named(SafeTextBrowser(), "Details", "Type, tags, aliases, dates, who wrote it, fields, "
                                                           "evidence, and its id and hash")
        self.details.setMinimumWidth(200)
        self.claims = named(SafeTextBrowser(), "Claims and evidence")
        self.connections = named(SafeTextBrowser(), "Links", "The records this one links to and those that link "
                                                             "to it")
        for browser in (self.header, self.details, self.body, self.claims, self.connections):
            browser.sig_link_activated.connect(self._on_link_activated)
        self.history = HistoryPanel(tasks, self, now=lambda: self.now())
        self.history_model, self.history_table, self.diff = self.history.model, self.history.table, self.history.diff
        self.history.sig_diff_loaded.connect(self.sig_diff_loaded)
        self._note_sized = False  # the body's share is set once the page has a size

        self.note = QSplitter(Qt.Orientation.Horizontal)
        self.note.setChildrenCollapsible(False)
        self.note.addWidget(self.body)
        self.note.addWidget(self.details)
        self.note.setStretchFactor(0, 3)
        self.note.setStretchFactor(1, 1)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.note, "N&ote")
        self.tabs.addTab(self.claims, "Claims && &evidence")
        self.tabs.addTab(self.connections, "&Links")
        self.tabs.addTab(self.history, "&History")
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
        self.rest_timer.stop()
        self.record = self.links = self.shown_id = None
        self._links_settled = self._history_settled = self._rest_coming = False
        self.request_button.setEnabled(False)
        self.graph_button.setEnabled(False)
        self._say_in_header('<div class="muted">Choose a record on the left.</div>')
        self.header.setToolTip("")
        self._heading_wanted = None
        for browser in (self.details, self.body, self.claims, self.connections):
            browser.clear()
            browser.setProperty(SHOWN_ID, None)
        for browser in (self.body, self.claims, self.connections):
            browser.setPlaceholderText("")  # no record: nothing to say of it
        self.history.clear()

    def _say_in_header(self, said: str) -> None:
        """The header says ``said``, and says it again when the palette changes (never the last record's)."""
        self.header.rerender_with(lambda: self.header.show_html(said))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._lay_out_note()

    def _fit_header(self) -> None:
        """The header as tall as its title and line need (a long title wraps in a narrow page), within
        ``HEADER_PX``: read whole, without scrolling, and the note keeps the room."""
        margins = 2 * self.header.frameWidth() + self.header.contentsMargins().top() + \
            self.header.contentsMargins().bottom()
        needed = int(self.header.document().size().height()) + margins + 1
        self.header.setFixedHeight(max(HEADER_PX[0], min(HEADER_PX[1], needed)))

    def _lay_out_note(self) -> None:
        """The details beside the body when the page is wide enough, else below it; the body keeps most."""
        wide = self.width() >= SIDE_BY_SIDE_PX
        orientation = Qt.Orientation.Horizontal if wide else Qt.Orientation.Vertical
        if self.note.orientation() != orientation or not self._note_sized:
            self.note.setOrientation(orientation)
            self.details.setMinimumWidth(200 if wide else 0)
            room = self.width() if wide else max(self.height() - self.header.maximumHeight(), 200)
            self.note.setSizes([int(room * BODY_SHARE), room - int(room * BODY_SHARE)])
            self._note_sized = True

    # --- loading -------------------------------------------------------------------------------

    def show_record(self, agent: str, record_id: str) -> None:
        self.clear()
        self.agent, self.shown_id = agent, record_id
        self._say_in_header('<div class="muted">Loading…</div>')
        for browser in (self.body, self.claims, self.connections):
            browser.setPlaceholderText("Loading…")
        self.history.model.set_loading()
        self._load(record_id)

    def refresh(self) -> None:
        """The record shown, loaded again in place (an agent wrote, a file changed): what is shown stays until
        the new answers replace it, and a revision chosen in History stays chosen, its diff shown again.  A
        record that can no longer be read (deleted, moved out) says so in place, with its History; it is
        shown again if it comes back."""
        if self.shown_id is None or self.agent is None:
            return
        self._generation += 1
        self._links_settled = self._history_settled = False  # what is shown stays until read again
        self._load(self.shown_id, keep_revisions=self.history.chosen_revisions(), again=True)

    def _load(self, record_id: str, *, keep_revisions: list[tuple[Any, Any]] | None = None,
              again: bool = False) -> None:
        generation = self._generation
        params = {"agent": self.agent, "id": record_id}

        def current(check: Any) -> Any:
            return lambda result: check(result) if generation == self._generation else None

        def unreadable(message: str) -> None:
            if generation != self._generation:
                return
            if again and not isinstance(message, Unreachable):
                self._show_gone(message)  # a change took it away: a fact shown in place, not a problem
                return
            self.clear()
            self._problem = message
            self.tasks.sig_error_raised.emit(message)

        def unread(shown: Callable[[str], Any]) -> Callable[[str], None]:
            """Links or history not read: ``shown`` says so in place (no longer "Loading…"), and the bar when
            the owner chose the record (if the record is unreadable too, ``unreadable`` has cleared the page and
            this answer is dropped)."""
            def failed(message: str) -> None:
                shown(message)
                if not again:
                    self.tasks.sig_error_raised.emit(message)
            return current(failed)

        def links_unread(_message: str) -> None:
            for browser in (self.claims, self.connections):
                browser.setPlaceholderText("")
            self._links_settled = True
            if self.record is not None:
                self._show_body()  # its [[links]] unresolved, as a record with no links reads them

        self.tasks.request("operator/record", params, current(self._on_record), on_error=unreadable, owner=self)
        self.tasks.request("operator/links", params, current(self._on_links), on_error=unread(links_unread),
                           owner=self)

        def history_unread(message: str) -> None:
            self.history.model.set_failed(message)
            self._on_history_settled()

        self.tasks.request("operator/history", params,
                           current(lambda history: self._on_history(history, keep_revisions)),
                           on_error=unread(history_unread), owner=self)

    def _show_gone(self, message: str) -> None:
        """The record shown can no longer be read: say so where it was, keep its History (what it was)."""
        revisions = self.history.model.rows()  # what it was called: still known once gone
        title = (self.record or {}).get("title") or (revisions[-1].get("title") if revisions else None) \
            or self.shown_id
        self.record = self.links = None
        self.request_button.setEnabled(False)
        self.graph_button.setEnabled(False)
        said = (f"<h2>{esc(title)}</h2><div><b>No longer in this partition</b> (deleted or moved out). History "
                "shows what it was.</div>")
        self._say_in_header(said)
        self.header.setToolTip(message)
        for browser in (self.details, self.body, self.claims, self.connections):
            browser.clear()
        self.body.setPlaceholderText("")

    def _on_record(self, record: dict[str, Any]) -> None:
        if self._problem is not None:  # another record is read: the one that could not be is behind
            self.tasks.sig_error_withdrawn.emit(self._problem)
            self._problem = None
        self.record = record
        self.request_button.setEnabled(True)
        self.graph_button.setEnabled(True)
        self._show_header()
        self._show_details()
        # Parsed now, while the engine reads its links; made and laid out once, when they are in (the
        # [[links]] to records named there then link to their ids): a long note is made once, not twice.
        text = self._shown_text()
        if not any(key[0] == text for key in self._bodies) and (self._parsed is None or self._parsed.text != text):
            self.rest_timer.stop()  # another text: what was being parsed is not shown
            self._parsed = BodyParse(text)  # opened again: parsed only if its links changed
            self._parsed.parse_next()  # the first part (a short note's whole)
        if self._links_settled:
            self._show_body()

    def _show_header(self) -> None:
        """The header of the record shown, with History's name and date of the version shown once History has
        it (an edit made outside the engine that kept the file's number is ``1.1``, dated when seen)."""
        record = self.record or {}
        version = next((row for row in self.history.model.rows() if row.get("sha256") == record.get("sha256")), None)
        self.header.rerender_with(lambda: self.header.show_html(header_html(record, self.now(), version)))

    def _want_heading(self, record_id: str, heading: str) -> None:
        """The record asked for (``sig_record_requested``, which loads it) is shown at ``heading``."""
        if heading and self.shown_id == record_id:
            self._heading_wanted = heading

    def refresh_times(self) -> None:
        """The header's, details' and History's "3 minutes ago" counted anew (the window's clock ticks)."""
        if self.record is not None:
            self.header.rerender()
            self.details.rerender()
        self.history.table.refit()

    def _on_links(self, links: dict[str, Any]) -> None:
        self.links = links
        self._links_settled = True
        if self.record is not None:
            self._show_details()
            self._show_body()  # [[links]] to the records named here now resolve to their ids
        self._render(self.claims, lambda: self.claims.show_html(claims_html(links)))
        self._render(self.connections, lambda: self.connections.show_html(links_html(links)))
        self._heading_wanted = None  # the body's last making for this record: the owner scrolls from here

    def _show_details(self) -> None:
        record, links = self.record or {}, self.links
        self._render(self.details, lambda: self.details.show_html(details_html(record, links, self.now())))

    def _show_body(self) -> None:
        text, known = self._shown_text(), known_records(self.links)
        self.body.setPlaceholderText("This record has no body.")
        parsing = self._parsed if self._parsed is not None and self._parsed.text == text else None
        if (parsing is not None and not parsing.done and self._body_key(text, known) not in self._bodies
                and self.body.property(SHOWN_ID) != self.shown_id and self._heading_wanted is None):
            # A long note new on the page: its first part now, the rest as it is parsed (_on_rest_tick). A
            # note read again in place, or opened at a heading, is made whole (the reader's place is in it).
            first = parsing.render(known) + REST_COMING_HTML
            self._render(self.body, lambda: self.body.show_html(first))
            self._rest_coming = True
            if self._history_settled:
                self.rest_timer.start()
            return
        self.rest_timer.stop()
        self._rest_coming = False
        self._render(self.body, lambda: self.body.show_html(self._body_html(text, known)))
        if self._heading_wanted is not None:  # opened by a [[Note#Heading]] link: at that heading
            self.body.scrollToAnchor(heading_anchor(self._heading_wanted))
        if self.shown_id is not None:
            self.sig_body_shown.emit(self.shown_id)

    def _on_rest_tick(self) -> None:
        """The next part of the long note shown parsed; all parsed, the note is shown whole where the reader is."""
        if self._parsed is None or self.record is None:
            self.rest_timer.stop()
            return
        self._parsed.parse_next()
        if self._parsed.done:
            self._show_body()

    def _shown_text(self) -> str:
        """The body of the record on the page as shown (``shown_body``: an imported conversation's times in the
        local zone), made once for each record read and zone."""
        now = self.now()
        record, zone, text = self._body_text
        if record is not self.record or zone != now.tzinfo:
            text = shown_body(self.record or {}, now)
            self._body_text = (self.record, now.tzinfo, text)
        return text

    @staticmethod
    def _body_key(text: str, known: Known) -> tuple[str, tuple[Any, ...], bool]:
        """What a body's HTML is made of: its text, what its links resolve to, and the palette in force."""
        return (text, tuple(sorted((name, record["id"], record.get("title")) for name, record in known.items())),
                is_dark())

    def _body_html(self, text: str, known: Known) -> str:
        """A body's HTML, its links resolved against ``known``, in the palette in force: as made before for
        the same text and links, else rendered (and parsed, what the last parse has not)."""
        key = self._body_key(text, known)
        html = self._bodies.get(key)
        if html is None:
            if self._parsed is None or self._parsed.text != text:
                self._parsed = BodyParse(text)
            self._parsed.parse_all()
            html = self._bodies[key] = self._parsed.render(known)
            self._parsed = None  # kept as HTML now (a 200 KB note's tokens take about 9 MB)
            while len(self._bodies) > BODIES_KEPT:
                self._bodies.popitem(last=False)
        self._bodies.move_to_end(key)
        return html

    def _render(self, browser: SafeTextBrowser, render: Callable[[], None]) -> None:
        """``render`` into ``browser``; the same record made again (read again after a change, its links
        arrived) leaves the reader where they were in it, a record newly shown starts at its top."""
        browser.rerender_with(render, keep_place=browser.property(SHOWN_ID) == self.shown_id)
        browser.setProperty(SHOWN_ID, self.shown_id)

    def _on_history(self, history: dict[str, Any], keep_revisions: list[tuple[Any, Any]] | None = None) -> None:
        self.history.show_history(self.agent or "", history, keep_revisions)
        if self.record is not None and self.record.get("id") == history["id"]:
            self._show_header()
        self._on_history_settled()
        self.sig_content_loaded.emit(history["id"])

    def _on_history_settled(self) -> None:
        """The page has loaded: the rest of a long note shown in part is parsed now."""
        self._history_settled = True
        if self._rest_coming:
            self.rest_timer.start()

    def show_diff(self, old: int, new: int) -> None:
        """Compare two revisions of the record shown (History shows the comparison)."""
        self.history.show_diff(old, new)

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
            self._want_heading(target, url.fragment())
        elif scheme == HEADING_SCHEME and target:  # a heading of the note shown
            self.tabs.setCurrentWidget(self.note)
            self.body.scrollToAnchor(heading_anchor(target))
        elif scheme == WIKILINK_SCHEME and self.agent:
            name = wikilink_target(target)
            if name:
                self.follow_wikilink(name, url.fragment())
        elif scheme == TAG_SCHEME and tag_of(target):
            self.sig_tag_requested.emit(tag_of(target))
        elif scheme == SOURCE_SCHEME and target and self.agent:
            self.open_source(target, cited_lines(url.fragment()))
        elif scheme == LINK_SCHEME:  # a cited record, perhaps of another agent's store: the window decides
            self.sig_record_link_activated.emit(url.toString())
        elif scheme in ("http", "https"):
            QDesktopServices.openUrl(url)

    def follow_wikilink(self, name: str, heading: str = "") -> None:
        """Open the record ``[[name]]`` means: the note the import resolved that name to in the note shown
        (by file name or path, as Obsidian: ``operator/noteLink``), else the one with that title (or id), else
        the best search match among notes and claims (never a link between two notes); at ``heading`` (a
        ``heading_key``) when the link names one."""
        agent, shown = self.agent, self.shown_id

        def resolved(answer: dict[str, Any]) -> None:
            if answer.get("id"):
                self.sig_record_requested.emit(answer["id"])
                self._want_heading(answer["id"], heading)
            else:
                self._follow_by_title(agent, name, heading)

        if shown:
            self.tasks.request("operator/noteLink", {"agent": agent, "from": shown, "name": name}, resolved,
                               on_error=lambda _message: self._follow_by_title(agent, name, heading), owner=self)
        else:
            self._follow_by_title(agent, name, heading)

    def _follow_by_title(self, agent: str | None, name: str, heading: str) -> None:

        def found(result: dict[str, Any]) -> None:
            hits = result.get("hits") or []
            exact = [hit for hit in hits if hit.get("id") == name
                     or str(hit.get("title") or "").casefold() == name.casefold()]
            if exact or hits:
                self.sig_record_requested.emit((exact or hits)[0]["id"])
                self._want_heading((exact or hits)[0]["id"], heading)
            elif names_an_id(name):
                self.sig_record_requested.emit(name)  # perhaps an id the search does not match on
            else:
                self.tasks.sig_error_raised.emit(f"No record in {agent}'s private partition is called "
                                                 f"\"{name}\" or matches it.")

        self.tasks.request("operator/search", {"agent": agent, "query": name, "limit": 10, "kinds": NOTE_KINDS},
                           found, owner=self)

    def open_source(self, source_id: str, lines: tuple[int, int] | None = None) -> None:
        """The retained original ``source_id``, at ``lines`` when the evidence cites some."""
        def shown(source: dict[str, Any]) -> None:
            self.dialog = SourceDialog(source, self, lines)
            self.dialog.open()

        self.tasks.request("operator/source", {"agent": self.agent, "source": source_id}, shown, owner=self)
