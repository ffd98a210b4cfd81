"""Small widgets every view uses: safe text browsers, the message bar, tables and HTML helpers.

Nothing here hard-codes a colour: text, links and highlights come from the
application palette, so the window follows the system's light or dark mode,
and HTML is re-rendered when the palette changes.
"""

from __future__ import annotations

import html
from typing import Any, Callable

from PySide6.QtCore import QEvent, Qt, QUrl, Signal
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableView,
    QTextBrowser,
    QWidget,
)

RECORD_SCHEME = "record"
SOURCE_SCHEME = "source"


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
            f"pre, .quote {{ background-color: {alternate}; }} td {{ padding: 2px 8px 2px 0; }}")


class SafeTextBrowser(QTextBrowser):
    """A read-only browser for untrusted text: never loads a resource, never follows a link itself.

    Images or style sheets named in stored Markdown could point at any local
    file; ``loadResource`` refuses them all, so rendering a record never
    reads the disk.  Clicked links are reported through ``sig_link_activated``.
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

    def loadResource(self, kind: int, name: QUrl) -> Any:  # noqa: N802 - Qt's name
        return None

    def show_html(self, body: str) -> None:
        self.document().setDefaultStyleSheet(palette_css())
        self.setHtml(body)

    def show_markdown(self, text: str) -> None:
        self.document().setDefaultStyleSheet(palette_css())
        self.setMarkdown(text)

    def rerender_with(self, render: Callable[[], None]) -> None:
        """Remember how the content was made, to redo it when the palette changes."""
        self._render = render
        render()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._render is not None:
            self._render()


class MessageBar(QFrame):
    """A dismissible line above the views for errors and confirmations (never a traceback)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QPushButton("Dismiss")
        close.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(close)
        self.error = False
        self.hide()

    def show_error(self, message: str) -> None:
        self._show(message, error=True)

    def show_info(self, message: str) -> None:
        self._show(message, error=False)

    def clear_error(self) -> None:
        """Hide the bar if it shows an error (a confirmation stays until dismissed)."""
        if self.error:
            self.error = False
            self.hide()

    def _show(self, message: str, *, error: bool) -> None:
        self.error = error
        palette = QGuiApplication.palette()
        role = QPalette.ColorRole.ToolTipBase if not error else QPalette.ColorRole.Highlight
        text_role = QPalette.ColorRole.ToolTipText if not error else QPalette.ColorRole.HighlightedText
        own = self.palette()
        own.setColor(QPalette.ColorRole.Window, palette.color(role))
        own.setColor(QPalette.ColorRole.WindowText, palette.color(text_role))
        self.setPalette(own)
        self.label.setText(("Problem: " if error else "") + message)
        self.show()


def table(model: Any, *, stretch_last: bool = True) -> QTableView:
    """A read-only, row-selecting table over one of our models."""
    view = QTableView()
    view.setModel(model)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    view.setAlternatingRowColors(True)
    view.setWordWrap(False)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(view.fontMetrics().height() + 8)
    view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    view.horizontalHeader().setStretchLastSection(stretch_last)
    return view


def heading(text: str) -> QLabel:
    label = QLabel(text)
    font = label.font()
    font.setBold(True)
    font.setPointSizeF(font.pointSizeF() * 1.15)
    label.setFont(font)
    return label
