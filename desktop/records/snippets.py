"""The search's Snippet column: a hit's words on up to three lines, the query's words in bold.

The engine sends the owner's snippet as plain words with ``highlights``, the character spans of the words
the query matched (engine/search/plain.py); this delegate lays them out over the column's width, wrapped at
words, and where they need more than ``SNIPPET_LINES`` lines the last shown word is followed by "…".  An
imported conversation's times in it are said in local time (conversations.py).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex, QPointF, QRectF
from PySide6.QtGui import QFont, QPainter, QPalette, QTextCharFormat, QTextLayout, QTextOption
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem, QTableView

from ..common.models import ROW_ROLE
from ..common.times import local_now
from .conversations import shown_snippet

SNIPPET_LINES = 3
PADDING = 4  # px around the text in its cell
ELLIPSIS = "\u2026"


def bold_ranges(text: str, highlights: Any) -> list[QTextLayout.FormatRange]:
    """The ``highlights`` spans that lie within ``text``, as bold format ranges (malformed ones are left out)."""
    ranges = []
    for span in highlights if isinstance(highlights, list) else []:
        if not (isinstance(span, list) and len(span) == 2 and all(isinstance(n, int) for n in span)):
            continue
        start, end = max(0, span[0]), min(len(text), span[1])
        if start < end:
            bold = QTextLayout.FormatRange()
            bold.start, bold.length = start, end - start
            bold.format = QTextCharFormat()
            bold.format.setFontWeight(QFont.Weight.Bold)
            ranges.append(bold)
    return ranges


def laid_out(text: str, highlights: Any, font: QFont, width: float,
             lines: int = SNIPPET_LINES) -> tuple[QTextLayout, str]:
    """``text`` laid out at ``width`` on at most ``lines`` lines, and the text it shows: cut at a word with
    "…" after it when the whole does not fit."""
    shown = text
    while True:
        layout = _layout(shown, bold_ranges(shown, highlights), font, width, lines)
        last = layout.lineAt(layout.lineCount() - 1) if layout.lineCount() else None
        if last is None or last.textStart() + last.textLength() >= len(shown):
            return layout, shown
        # Drop the last word shown (to make room for the ellipsis) and lay it out again; one word alone is cut.
        kept = shown[:last.textStart() + last.textLength()].rstrip(ELLIPSIS).rstrip()
        words = kept.rsplit(None, 1)
        cut = (words[0] if len(words) == 2 else kept[:-2]).rstrip() + ELLIPSIS
        if len(cut) >= len(shown) or not kept:  # no shorter text to try (a column narrower than a letter)
            return layout, shown
        shown = cut


def _layout(text: str, formats: list[QTextLayout.FormatRange], font: QFont, width: float,
            lines: int) -> QTextLayout:
    layout = QTextLayout(text, font)
    layout.setFormats(formats)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    layout.setTextOption(option)
    layout.beginLayout()
    top = 0.0
    for _ in range(lines):
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(width)
        line.setPosition(QPointF(0, top))
        top += line.height()
    layout.endLayout()
    return layout


class SnippetDelegate(QStyledItemDelegate):
    """Paints a search hit's snippet (``ROW_ROLE``'s ``snippet`` and ``highlights``) over up to three lines."""

    def shown_text(self, index: QModelIndex, width: float, font: QFont) -> tuple[list[str], list[str]]:
        """The lines painted for ``index`` at ``width``, and the words in bold (what a test reads)."""
        layout, shown = laid_out(*shown_snippet(index.data(ROW_ROLE) or {}, local_now()), font, width)
        lines = [layout.lineAt(n) for n in range(layout.lineCount())]
        bold = [shown[r.start:r.start + r.length] for r in layout.formats()]
        return [shown[line.textStart():line.textStart() + line.textLength()].strip() for line in lines], bold

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        cell = QStyleOptionViewItem(option)
        self.initStyleOption(cell, index)
        cell.text = ""  # the background, focus and selection as the style draws them; the words drawn here
        widget = option.widget
        style = widget.style() if widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, cell, painter, widget)
        area = QRectF(option.rect).adjusted(PADDING, PADDING / 2, -PADDING, -PADDING / 2)
        layout, _ = laid_out(*shown_snippet(index.data(ROW_ROLE) or {}, local_now()), option.font, area.width())
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        painter.save()
        painter.setClipRect(option.rect)
        painter.setPen(option.palette.color(QPalette.ColorRole.HighlightedText if selected
                                            else QPalette.ColorRole.Text))
        layout.draw(painter, area.topLeft())
        painter.restore()


def show_snippets(view: QTableView, column: int) -> SnippetDelegate:
    """``view``'s ``column`` painted by a ``SnippetDelegate``, its rows tall enough for three lines."""
    delegate = SnippetDelegate(view)
    view.setItemDelegateForColumn(column, delegate)
    view.verticalHeader().setDefaultSectionSize(view.fontMetrics().lineSpacing() * SNIPPET_LINES + PADDING * 2)
    return delegate
