"""Qt item models that adapt engine answers, and nothing more.

``RowsModel`` shows a list of engine dicts through column definitions;
``PagedModel`` does the same lazily: ``canFetchMore``/``fetchMore`` ask a
page source for the next page, and the rows arrive later (the source runs
the request off the GUI thread) as ``beginInsertRows``/``endInsertRows``.
So a list over 100,000 records only ever holds the pages scrolled to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import QApplication

from ..tasks import Unreachable, says_no_store

Row = dict[str, Any]
ROW_ROLE = Qt.ItemDataRole.UserRole + 1  # the engine dict behind a row
VALUE_ROLE = Qt.ItemDataRole.UserRole + 2  # a cell's value unformatted (numbers for the charts)
MARK_TINT = 0.22  # the opacity of the selection's colour under a marked row
ParentIndex = QModelIndex | QPersistentModelIndex


@dataclass(frozen=True)
class Column:
    title: str
    value: Callable[[Row], Any]
    tooltip: Callable[[Row], Any] | None = None
    align_right: bool = False
    stretch: bool = False  # the text column that takes the table's spare width (else the last one does)
    max_width: int | None = None  # sized to its contents up to this many pixels (else the table's cap)
    whole: bool = False  # never narrowed below its contents to fit the others (a time, who wrote it)
    min_width: int | None = None  # never narrowed below this many pixels (nor its contents, if narrower)
    text: Callable[[Any], str] | None = None  # how the value reads in its cell (else ``text_of``; charts read it raw)


def text_of(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(text_of(item) for item in value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


class RowsModel(QAbstractTableModel):
    """A flat table over engine dicts; ``set_rows`` replaces them (the engine owns the data).

    Between ``set_loading`` (the rows were asked for) and ``set_rows`` or ``set_failed`` the model is
    ``loading``, and its table says "Loading…" rather than that the list is empty."""

    sig_state_changed = Signal()
    """The model started or stopped waiting for rows, or failed to get them (its table repaints what it says)."""

    def __init__(self, columns: list[Column], parent: Any = None) -> None:
        super().__init__(parent)
        self.columns = columns
        self._rows: list[Row] = []
        self._loading = False
        self.failure: str | None = None  # why the rows could not be read (no engine, no store yet)
        self.connecting = False  # the window is connecting: nothing could be asked yet, the table says "Loading…"
        self.marked: str | None = None  # the id of the row ``mark`` set apart (the record open on the page)

    @property
    def loading(self) -> bool:
        return self._loading

    def set_loading(self) -> None:
        """The rows were asked for: until they arrive the table says "Loading…" (the rows it holds stay)."""
        self._loading, self.failure = True, None
        self.sig_state_changed.emit()

    def set_connecting(self, connecting: bool) -> None:
        """The window is connecting to the engine (or no longer): until then nothing is asked, and the table
        says "Loading…" rather than what it says when it has nothing (no agents, choose an agent)."""
        if connecting != self.connecting:
            self.connecting = connecting
            self.sig_state_changed.emit()

    def set_failed(self, message: str) -> None:
        """The rows could not be read: the table says why (``unread_text``) instead of that it is empty."""
        self._loading, self.failure = False, message
        self.sig_state_changed.emit()

    def rowCount(self, parent: ParentIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: ParentIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.columns)

    def data(self, index: ParentIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self._rows) or index.column() >= len(self.columns):
            return None
        row, column = self._rows[index.row()], self.columns[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            value = column.value(row)
            return column.text(value) if column.text is not None and value is not None else text_of(value)
        if role == Qt.ItemDataRole.ToolTipRole:
            return text_of(column.tooltip(row)) if column.tooltip else text_of(column.value(row)) or None
        if role == Qt.ItemDataRole.TextAlignmentRole and column.align_right:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == ROW_ROLE:
            return row
        if self.marked is not None and row.get("id") == self.marked:
            if role == Qt.ItemDataRole.FontRole and index.column() == 0:  # the title: the others stay whole
                font = QFont()
                font.setBold(True)
                return font
            if role == Qt.ItemDataRole.BackgroundRole:
                tint = QApplication.palette().color(QPalette.ColorRole.Highlight)
                tint.setAlphaF(MARK_TINT)
                return tint
            if role == Qt.ItemDataRole.AccessibleDescriptionRole:
                return "open on the page"
        if role == VALUE_ROLE:
            return column.value(row)
        return None

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return self.columns[section].title if 0 <= section < len(self.columns) else None
        return section + 1

    def mark(self, record_id: str | None) -> None:
        """The row of ``record_id`` (the record open on the page) on a light tint of the selection's colour,
        its first column in bold, wherever the selection is (the arrow keys move it without opening a
        record); None: no row."""
        if record_id == self.marked:
            return
        self.marked = record_id
        if self._rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._rows) - 1, len(self.columns) - 1),
                                  [Qt.ItemDataRole.FontRole, Qt.ItemDataRole.BackgroundRole,
                                   Qt.ItemDataRole.AccessibleDescriptionRole])

    def set_rows(self, rows: list[Row]) -> None:
        self.beginResetModel()
        self._rows = list(rows)
        self._loading, self.failure = False, None
        self.endResetModel()

    def replace_row(self, number: int, row: Row) -> None:
        """One row changed in the engine (a labelled turn, say): show its new version."""
        if 0 <= number < len(self._rows):
            self._rows[number] = row
            self.dataChanged.emit(self.index(number, 0), self.index(number, len(self.columns) - 1))

    def row(self, number: int) -> Row | None:
        return self._rows[number] if 0 <= number < len(self._rows) else None

    def rows(self) -> list[Row]:
        return list(self._rows)


# A page source: given the token of the page to fetch (None for the first), fetch it and call
# ``deliver(rows, next_token, total)`` later; ``next_token`` None means there are no more pages.
Deliver = Callable[[list[Row], Any, "int | None"], None]
PageSource = Callable[[Any, Deliver, Callable[[str], None]], None]


class PagedModel(RowsModel):
    """A lazy table: pages are fetched as views scroll, through an asynchronous page source."""

    sig_page_loaded = Signal(int)
    """A page arrived; the argument is how many rows the model now holds."""

    sig_load_failed = Signal(str)
    """A page could not be fetched; the argument is a readable message."""

    def __init__(self, columns: list[Column], parent: Any = None) -> None:
        super().__init__(columns, parent)
        self._source: PageSource | None = None
        self._next: Any = None
        self._exhausted = True
        self._generation = 0
        self.total: int | None = None

    def set_source(self, source: PageSource | None) -> None:
        """Drop every row and start over from ``source`` (the first page is fetched at once)."""
        self._generation += 1
        self.beginResetModel()
        self._rows, self._source, self._next, self.total, self.failure = [], source, None, None, None
        self._exhausted, self._loading = source is None, False
        self.endResetModel()
        if source is not None:
            self.fetchMore(QModelIndex())

    @property
    def source_set(self) -> bool:
        """Whether the model lists something (a source was given), even if it has no rows."""
        return self._source is not None

    @property
    def exhausted(self) -> bool:
        return self._exhausted

    def canFetchMore(self, parent: ParentIndex = QModelIndex()) -> bool:  # noqa: B008
        return not parent.isValid() and not self._exhausted and not self._loading

    def fetchMore(self, parent: ParentIndex = QModelIndex()) -> None:  # noqa: B008
        if not self.canFetchMore(parent) or self._source is None:
            return
        self._loading = True
        generation = self._generation
        self._source(self._next, lambda rows, token, total: self._on_page(generation, rows, token, total),
                     lambda message: self._on_failed(generation, message))

    def _on_page(self, generation: int, rows: list[Row], next_token: Any, total: int | None) -> None:
        if generation != self._generation:
            return  # an answer for a list that was replaced meanwhile
        self._loading = False
        self._next, self._exhausted = next_token, next_token is None
        if total is not None:
            self.total = total
        if rows:
            first = len(self._rows)
            self.beginInsertRows(QModelIndex(), first, first + len(rows) - 1)
            self._rows.extend(rows)
            self.endInsertRows()
        else:  # no row to insert, so no view repaints by itself: its "Loading…" must give way to what it says empty
            self.sig_state_changed.emit()
        self.sig_page_loaded.emit(len(self._rows))

    def _on_failed(self, generation: int, message: str) -> None:
        if generation != self._generation:
            return
        self._loading = False
        self._exhausted = True
        # No engine answered, or the agent has no store yet: the table says so; else the engine said why: empty.
        self.failure = message if isinstance(message, Unreachable) or says_no_store(message) else None
        self.sig_load_failed.emit(message)
