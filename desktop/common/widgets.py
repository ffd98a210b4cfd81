"""Small widgets every view uses: safe text browsers, the message bar, tables and HTML helpers.

Text, links and highlights come from the application palette, so the window
follows the light or dark theme in force, and HTML is re-rendered when the
palette changes.  The one colour set here is the message bar's (red for a
problem, blue for a confirmation), chosen for the light or dark palette.
"""

from __future__ import annotations

import html
from typing import Any, Callable, TypeVar

from PySide6.QtCore import QEvent, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QStyle,
    QTableView,
    QTextBrowser,
    QWidget,
)

from ..tasks import Unreachable, says_no_store

RECORD_SCHEME = "record"
SOURCE_SCHEME = "source"
W = TypeVar("W", bound=QWidget)


def esc(value: Any) -> str:
    """Stored text is data: always escaped before it reaches HTML."""
    return html.escape("" if value is None else str(value), quote=True)


def palette_css() -> str:
    """A style sheet for HTML documents in the current palette's colours."""
    palette = QGuiApplication.palette()
    text = palette.color(QPalette.ColorRole.Text).name()
    link = palette.color(QPalette.ColorRole.Link).name()
    muted = palette.color(QPalette.ColorRole.PlaceholderText).name()
    alternate = palette.color(QPalette.ColorRole.AlternateBase).name()
    return (f"body {{ color: {text}; }} a {{ color: {link}; }} .muted {{ color: {muted}; }} "
            f"h2, h3 {{ margin-top: 12px; margin-bottom: 4px; }} "
            f"pre, .quote, .embed {{ background-color: {alternate}; }} td {{ padding: 2px 8px 2px 0; }} "
            # A long code line wraps at the pane's width, its spaces kept: on one line it widened the whole
            # document, and the note's prose scrolled sideways with it.
            "pre { white-space: pre-wrap; } "
            f".tag {{ color: {link}; }}")


class SafeTextBrowser(QTextBrowser):
    """A read-only browser for untrusted text: never loads a resource, never follows a link itself.

    Images or style sheets named in stored Markdown could point at any local
    file; ``loadResource`` refuses them all, so rendering a record never
    reads the disk.  Clicked links are reported through ``sig_link_activated``.
    Its placeholder wraps at the pane's width (Qt draws a text edit's on one
    line, cut at a narrow pane's edge).
    """

    sig_link_activated = Signal(QUrl)
    """The owner clicked a link (record:ID, source:ID, or a web address)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setReadOnly(True)
        self.anchorClicked.connect(self.sig_link_activated.emit)
        self._render: Callable[[], None] | None = None
        self._placeholder = ""

    def setPlaceholderText(self, text: str) -> None:  # noqa: N802 - Qt's name
        """Shown, wrapped, while the browser holds nothing (drawn here: Qt's would be cut on one line)."""
        self._placeholder = text
        self.viewport().update()

    def placeholderText(self) -> str:  # noqa: N802 - Qt's name
        return self._placeholder

    def paintEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().paintEvent(event)
        if self._placeholder and self.document().isEmpty():
            painter = QPainter(self.viewport())
            painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            margin = int(self.document().documentMargin())
            area = self.viewport().rect().adjusted(margin, margin, -margin, -margin)
            painter.drawText(area, int(Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWordWrap), self._placeholder)
            painter.end()

    def loadResource(self, kind: int, name: QUrl) -> Any:  # noqa: N802 - Qt's name
        return None

    def show_html(self, body: str) -> None:
        self.document().setDefaultStyleSheet(palette_css())
        self.setHtml(body)

    def show_markdown(self, text: str) -> None:
        self.document().setDefaultStyleSheet(palette_css())
        self.setMarkdown(text)

    def rerender_with(self, render: Callable[[], None], *, keep_place: bool = False) -> None:
        """Remember how the content was made, to redo it when the palette changes; ``keep_place``: the
        reader is left where they were in it (the same content made again), else it starts at its top."""
        self._render = render
        self._keeping_place(render) if keep_place else render()

    def clear(self) -> None:
        """Nothing shown, and nothing made again when the palette changes or the clock ticks (``rerender``)."""
        self._render = None
        super().clear()

    def rerender(self) -> None:
        """Make the content again as it was made (its "3 minutes ago" counted anew), the reader left where
        they were in it."""
        if self._render is not None:
            self._keeping_place(self._render)

    def _keeping_place(self, render: Callable[[], None]) -> None:
        bars = (self.verticalScrollBar(), self.horizontalScrollBar())
        kept = [bar.value() for bar in bars]
        render()
        for bar, value in zip(bars, kept):
            bar.setValue(value)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._render is not None:
            self._render()


# The message bar's own colours (background, text), for a light and a dark palette: a problem is
# red, a confirmation blue, and each text reaches a WCAG contrast above 7:1 on its background.
BAR_COLOURS = {
    ("error", False): ("#f8d7da", "#58151c"),
    ("error", True): ("#5a1d22", "#fbe3e5"),
    ("info", False): ("#dbe9f7", "#0b2e4f"),
    ("info", True): ("#1d3a57", "#e3eefa"),
}


def is_dark(palette: QPalette | None = None) -> bool:
    """Whether ``palette`` (the application's by default) is a dark one: light text on a dark window."""
    palette = palette or QGuiApplication.palette()
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


class MessageBar(QFrame):
    """A dismissible line above the views for errors and confirmations (never a traceback).

    A confirmation is about the moment it was said: the window hides it when
    the owner moves on (``clear_info``), and whoever said one that stops
    holding takes it back by its text.

    It has colours of its own, red for a problem and blue for a confirmation,
    chosen for the palette in force (light or dark) and chosen again when it
    changes, so a problem never looks like a selected row.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        self.label = plain_label()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.dismiss_button = QPushButton("Dismiss")
        self.dismiss_button.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.dismiss_button)
        self.error = False
        self.message = ""
        self._colouring = False
        self.hide()

    def show_error(self, message: str) -> None:
        self._show(message, error=True)

    def show_info(self, message: str) -> None:
        self._show(message, error=False)

    def clear_error(self, message: str | None = None) -> None:
        """Hide the bar if it shows an error (``message``: only that one); a confirmation stays."""
        if self.error and (message is None or message == self.message):
            self.error = False
            self.hide()

    def clear_info(self, message: str | None = None) -> None:
        """Hide the bar if it shows a confirmation (``message``: only that one); a problem stays."""
        if not self.error and (message is None or message == self.message):
            self.hide()

    def colours(self) -> tuple[str, str]:
        """(background, text) for what the bar shows, in the palette in force."""
        return BAR_COLOURS[("error" if self.error else "info", is_dark())]

    def _show(self, message: str, *, error: bool) -> None:
        self.error, self.message = error, message
        self._apply_colours()
        self.label.setText(("Problem: " if error else "") + message)
        self.show()

    def _apply_colours(self) -> None:
        background, text = self.colours()
        own = self.palette()
        for role, colour in ((QPalette.ColorRole.Window, background), (QPalette.ColorRole.WindowText, text),
                             (QPalette.ColorRole.Text, text)):
            own.setColor(role, QColor(colour))
        self._colouring = True  # setPalette sends a PaletteChange of its own
        try:
            self.setPalette(own)
            self.label.setPalette(own)
        finally:
            self._colouring = False

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange) \
                and not self._colouring:
            self._apply_colours()


MAX_COLUMN_PX = 260  # a column sized to its contents is at most this wide; the text column takes the rest
MIN_TEXT_COLUMN_PX = 140  # what the text column keeps before the others are narrowed


NO_STORE_TEXT = ("This agent has no store yet: it is created the first time the agent saves knowledge, and what "
                 "it saves shows here then, without F5.")


def unread_text(message: str, *, said: str = "Not loaded", again: str = "It loads again") -> str:
    """What a view shows in place of what it could not read: ``said`` and why; when no engine answered
    (``Unreachable``), that it is read again once one does.  An agent with no store yet is no failure: that is
    said calmly (``NO_STORE_TEXT``), and the window reloads the view when the store is created."""
    if says_no_store(message):
        return NO_STORE_TEXT
    tail = f" {again} when the engine answers (F5 reloads)." if isinstance(message, Unreachable) else ""
    return f"{said}: {message.rstrip('.')}.{tail}"


class DeskTable(QTableView):
    """A read-only, row-selecting table that sizes its columns and says when it is empty.

    Columns are sized to their header and contents (at most
    ``MAX_COLUMN_PX``), and one text column (the first ``Column`` marked
    ``stretch``, else the last) takes the width that is left; when the others
    do not fit beside it, the widest are narrowed first, never below their
    header's width (nor below their contents for a ``Column`` marked
    ``whole``, nor below its ``min_width``), so every header can be read and the last columns are in
    view without dragging anything.  ``resizeColumnsToContents`` does the
    same, and it happens by itself when the model is reset or its first rows
    arrive, and when the table is resized (until the owner drags a column).

    With no rows, the table shows ``empty_text`` (what is empty and what to
    do), "Loading…" while its model waits for the engine (a lazy model's
    first page, or rows asked with ``RowsModel.set_loading``), or why they
    could not be read (the engine gone, the agent's store not created yet),
    never that the list is empty when it was not read.  A screen reader hears that message too: it is the
    table's accessible description while it shows (after the description it was given, if any).
    """

    def __init__(self, model: Any, *, stretch_last: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setModel(model)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        # Tab leaves the table for the next control, as in a file manager: the arrows move between rows, and a
        # list of thousands of rows (a lazy one grows as it is walked) is not a trap for the keyboard.
        self.setTabKeyNavigation(False)
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        header.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.stretch_column = self._stretch_column(model) if stretch_last else None
        if self.stretch_column is not None:
            header.setSectionResizeMode(self.stretch_column, QHeaderView.ResizeMode.Stretch)
        self.empty_text = ""
        self._description = ""  # what the table is for, said by a screen reader before what it says empty
        self._fitting = False
        self._dragged = False  # the owner sized a column: leave the sizes alone on resize
        header.sectionResized.connect(self._on_section_resized)
        model.modelReset.connect(self._on_rows_replaced)
        model.layoutChanged.connect(self._on_rows_replaced)
        model.rowsInserted.connect(self._on_rows_inserted)
        if hasattr(model, "sig_load_failed"):
            model.sig_load_failed.connect(lambda _message: self.viewport().update())
        if hasattr(model, "sig_state_changed"):
            model.sig_state_changed.connect(self.viewport().update)
        for said in (model.modelReset, model.layoutChanged, model.rowsInserted, model.rowsRemoved,
                     getattr(model, "sig_load_failed", None), getattr(model, "sig_state_changed", None)):
            if said is not None:
                said.connect(self._say_empty)

    @staticmethod
    def _stretch_column(model: Any) -> int | None:
        """The column given the spare width: a ``Column`` marked ``stretch``, a model's ``STRETCH_COLUMN``,
        else the last."""
        if isinstance(getattr(model, "STRETCH_COLUMN", None), int):
            return model.STRETCH_COLUMN
        columns = getattr(model, "columns", None)
        if columns:
            marked = [number for number, column in enumerate(columns) if getattr(column, "stretch", False)]
            return marked[0] if marked else len(columns) - 1
        count = model.columnCount()
        return count - 1 if count else None

    def selected_row(self) -> dict[str, Any] | None:
        """The engine dict behind the selected row (None: none selected)."""
        rows = self.selectionModel().selectedRows()
        return self.model().row(rows[0].row()) if rows else None

    def set_empty_text(self, text: str) -> None:
        """What to say while the table has no rows: what is empty, and what to do about it."""
        self.empty_text = text
        self.viewport().update()
        self._say_empty()

    def setAccessibleDescription(self, description: str) -> None:  # noqa: N802 - Qt's name
        """What the table is for; while it has no rows, what it paints follows it for a screen reader."""
        self._description = description
        self._say_empty()

    def _say_empty(self, *_: Any) -> None:
        description, empty = self._description, self.shown_empty_text()
        if description and empty and not description.endswith((".", "!", "?", "…")):
            description += "."  # two sentences, said as two
        said = " ".join(part for part in (description, empty) if part)
        if said != self.accessibleDescription():
            super().setAccessibleDescription(said)

    def shown_empty_text(self) -> str:
        """The message the table paints now ("" while it has rows)."""
        model = self.model()
        if model is None or model.rowCount() > 0:
            return ""
        if getattr(model, "loading", False) or getattr(model, "connecting", False):
            return "Loading…"
        failure = getattr(model, "failure", None)
        if failure:
            return unread_text(failure)
        return self.empty_text

    def resizeColumnsToContents(self) -> None:  # noqa: N802 - Qt's name, given our sizing
        self.fit_columns()

    def fit_columns(self) -> None:
        """Size every column to its header and contents, the text column taking what is left."""
        model, header = self.model(), self.horizontalHeader()
        if model is None or model.columnCount() == 0:
            return
        shown = [c for c in range(model.columnCount()) if not header.isSectionHidden(c)]
        floors = {c: header.sectionSizeHint(c) for c in shown}  # the header's text, margins and sort arrow
        columns = getattr(model, "columns", [])
        caps = [getattr(column, "max_width", None) or MAX_COLUMN_PX for column in columns]
        widths = {c: max(floors[c], min(self.sizeHintForColumn(c), caps[c] if c < len(caps) else MAX_COLUMN_PX))
                  for c in shown}
        floors.update({c: widths[c] for c in shown if c < len(columns) and getattr(columns[c], "whole", False)})
        floors.update({c: max(floors[c], min(widths[c], columns[c].min_width)) for c in shown
                       if c < len(columns) and getattr(columns[c], "min_width", None)})
        stretch = self.stretch_column if self.stretch_column in widths else None
        if stretch is not None:
            # The width the columns share, leaving room for a vertical scroll bar that may appear.
            available = (self.width() - 2 * self.frameWidth()
                         - self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent))
            others = [c for c in shown if c != stretch]
            excess = sum(widths[c] for c in others) + max(floors[stretch], MIN_TEXT_COLUMN_PX) - available
            while excess > 0:  # narrow the widest of the others, never below its header
                room = sorted((c for c in others if widths[c] > floors[c]), key=lambda c: -widths[c])
                if not room:
                    break
                widest = room[0]
                second = widths[room[1]] if len(room) > 1 else floors[widest]
                cut = min(excess, widths[widest] - floors[widest], max(1, widths[widest] - second))
                widths[widest] -= cut
                excess -= cut
            left = available - sum(widths[c] for c in others)
            mode = QHeaderView.ResizeMode.Stretch if left >= floors[stretch] else QHeaderView.ResizeMode.Interactive
            header.setSectionResizeMode(stretch, mode)
            if mode == QHeaderView.ResizeMode.Stretch:
                del widths[stretch]  # the header stretches it over what is left
            # else too narrow for all of them: the text column keeps its own width, and the table scrolls
        self._fitting = True
        try:
            for column, width in widths.items():
                header.resizeSection(column, width)
        finally:
            self._fitting = False
        self._dragged = False

    def refit(self) -> None:
        """The cells' text changed in place (a relative time moved on, "just now" to "42 min ago"): paint them
        again and size the columns again, as on a resize, unless the owner has sized one."""
        if not self._dragged:
            self.fit_columns()
        self.viewport().update()

    def _on_section_resized(self, column: int, _old: int, _new: int) -> None:
        if not self._fitting and column != self.stretch_column:
            self._dragged = True

    def _on_rows_replaced(self) -> None:
        QTimer.singleShot(0, self, self.fit_columns)  # once the view has laid the new rows out

    def _on_rows_inserted(self, _parent: Any, first: int, _last: int) -> None:
        if first == 0:  # the first page; later pages keep the sizes the owner sees
            QTimer.singleShot(0, self, self.fit_columns)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        if not self._dragged:
            self.fit_columns()

    def paintEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().paintEvent(event)
        text = self.shown_empty_text()
        if not text:
            return
        painter = QPainter(self.viewport())
        painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
        area = self.viewport().rect().adjusted(24, 24, -24, -24)
        painter.drawText(area, int(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop
                                   | Qt.TextFlag.TextWordWrap), text)
        painter.end()


def table(model: Any, *, stretch_last: bool = True) -> DeskTable:
    """A read-only, row-selecting table over one of our models (see ``DeskTable``)."""
    return DeskTable(model, stretch_last=stretch_last)


def named(widget: W, name: str, description: str = "") -> W:
    """``widget`` with the name a screen reader says for it, and what it is for where the name alone does not
    say: for a control no text of its own names (a list, a field, a choice, a pane of text)."""
    widget.setAccessibleName(name)
    if description:
        widget.setAccessibleDescription(description)
    return widget


def plain_label(text: str = "") -> QLabel:
    """A label that shows its text as written.  Qt reads a label's text as rich text when it looks like
    HTML, and what the window shows (a record's title, a source's media type, an engine's message) may come
    from a vault or an archive: it is data, never markup."""
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


class CheckedDialog(QDialog):
    """A form whose values the engine checks: an explanation, the fields (``add_field``), then the engine's
    reason for a refusal (``show_problem``, the dialog staying open to correct) above OK and Cancel.
    The caller connects ``buttons.accepted`` to its request and accepts the dialog when the engine does."""

    def __init__(self, title: str, explanation: str, ok_text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.problem = plain_label()
        self.problem.setWordWrap(True)
        self.problem.hide()
        self.form = QFormLayout(self)
        self.explanation = plain_label(explanation)
        self.explanation.setWordWrap(True)  # within the dialog's width, whatever its length
        self._fields: list[QWidget] = []
        self.form.addRow(self.explanation)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText(ok_text)
        self.buttons.rejected.connect(self.reject)
        self.form.addRow(self.problem)
        self.form.addRow(self.buttons)

    def add_field(self, label: str, field: QWidget) -> None:
        """A labelled field, above the problem line and the buttons; the first has the focus when the dialog
        opens (the buttons were made first, so Qt would give it to them), and Tab goes down the fields."""
        self.form.insertRow(self.form.rowCount() - 2, label, field)
        if field.focusPolicy() == Qt.FocusPolicy.NoFocus:
            return
        if self._fields:
            QWidget.setTabOrder(self._fields[-1], field)
        else:
            field.setFocus()
        QWidget.setTabOrder(field, self.buttons)
        self._fields.append(field)

    def show_problem(self, message: str) -> None:
        self.problem.setText(message)
        self.problem.show()


def heading(text: str) -> QLabel:
    label = plain_label(text)
    font = label.font()
    font.setBold(True)
    font.setPointSizeF(font.pointSizeF() * 1.15)
    label.setFont(font)
    return label


def bring_forward(window: QWidget) -> None:
    """Show ``window`` in front of the others, restored if it was minimised."""
    if window.isMinimized():
        window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()
