"""Small charts drawn with QPainter, each reading its numbers from a Qt item model.

QtCharts is not part of PySide6-Essentials (it comes with the much larger
Addons), and these views need only two shapes over 0..1 scores: bars (a
histogram, stacked by tier) and lines (per threshold).  A chart watches its
model's reset/insert/change signals and repaints; it never asks the engine
for anything.  Colours come from the application palette (the highlight and
its blends with the base colour), and lines also differ by dash pattern, so
a chart reads in light and dark mode alike.  Hovering shows the row's values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import QAbstractItemModel, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from .models import VALUE_ROLE

MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 48, 12, 26, 34
DASHES = (Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine, Qt.PenStyle.DashDotLine)


@dataclass(frozen=True)
class Series:
    column: int
    label: str


@dataclass(frozen=True)
class Marker:
    x: float
    label: str


def blend(first: QColor, second: QColor, share: float) -> QColor:
    """``share`` of ``first`` mixed into ``second`` (palette colours only, never a fixed one)."""
    return QColor(round(first.red() * share + second.red() * (1 - share)),
                  round(first.green() * share + second.green() * (1 - share)),
                  round(first.blue() * share + second.blue() * (1 - share)))


def series_colours(palette: QPalette, count: int) -> list[QColor]:
    accent = palette.color(QPalette.ColorRole.Highlight)
    base = palette.color(QPalette.ColorRole.Base)
    text = palette.color(QPalette.ColorRole.Text)
    choices = [accent, blend(accent, base, 0.5), blend(text, base, 0.45), blend(accent, text, 0.5)]
    return [choices[n % len(choices)] for n in range(count)]


class Chart(QWidget):
    """Bars or lines over a 0..1 x axis: ``x_column`` (and ``x_end_column`` for bar widths) and ``series``."""

    def __init__(self, model: QAbstractItemModel, x_column: int, series: list[Series], *, kind: str = "lines",
                 title: str = "", x_title: str = "", y_title: str = "", y_max: float | None = None,
                 x_end_column: int | None = None, y_format: Callable[[float], str] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        assert kind in ("lines", "bars", "stacked")
        self.model, self.x_column, self.x_end_column = model, x_column, x_end_column
        self.series, self.kind = series, kind
        self.title, self.x_title, self.y_title = title, x_title, y_title
        self.fixed_y_max = y_max
        self.y_format = y_format or _number
        self.markers: list[Marker] = []
        self.setMouseTracking(True)
        self.setMinimumHeight(170)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setAccessibleName(title)
        for signal in (model.modelReset, model.rowsInserted, model.rowsRemoved, model.dataChanged,
                       model.layoutChanged):
            signal.connect(self.update)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(420, 220)

    def set_markers(self, markers: list[Marker]) -> None:
        """Vertical lines at thresholds worth pointing out (the suggestion, the setting in force)."""
        self.markers = list(markers)
        self.update()

    # --- reading the model ----------------------------------------------------------------------

    def rows(self) -> list[tuple[float, float | None, list[float | None]]]:
        """(x, x_end, [series values]) per row, as the model holds them."""
        model, found = self.model, []
        for row in range(model.rowCount()):
            x = _float(model.data(model.index(row, self.x_column), VALUE_ROLE))
            if x is None:
                continue
            end = None if self.x_end_column is None else _float(
                model.data(model.index(row, self.x_end_column), VALUE_ROLE))
            values = [_float(model.data(model.index(row, s.column), VALUE_ROLE)) for s in self.series]
            found.append((x, end, values))
        return found

    def y_max(self, rows: list[tuple[float, float | None, list[float | None]]]) -> float:
        if self.fixed_y_max is not None:
            return self.fixed_y_max
        if self.kind == "stacked":
            peak = max((sum(v or 0 for v in values) for _, _, values in rows), default=0.0)
        else:
            peak = max((v for _, _, values in rows for v in values if v is not None), default=0.0)
        return _nice(peak)

    # --- drawing -----------------------------------------------------------------------------------

    def plot_area(self) -> QRectF:
        return QRectF(MARGIN_LEFT, MARGIN_TOP, max(10, self.width() - MARGIN_LEFT - MARGIN_RIGHT),
                      max(10, self.height() - MARGIN_TOP - MARGIN_BOTTOM))

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        palette = self.palette()
        text, muted = palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.PlaceholderText)
        area = self.plot_area()
        rows = self.rows()
        top = self.y_max(rows)
        colours = series_colours(palette, len(self.series))
        self._draw_axes(painter, area, top, text, muted)
        if not rows:
            painter.setPen(muted)
            painter.drawText(area, Qt.AlignmentFlag.AlignCenter, "No data yet")
        elif self.kind == "lines":
            self._draw_lines(painter, area, rows, top, colours)
        else:
            self._draw_bars(painter, area, rows, top, colours)
        self._draw_markers(painter, area, text)
        self._draw_legend(painter, colours, text)
        painter.end()

    def _x(self, area: QRectF, x: float) -> float:
        return area.left() + max(0.0, min(1.0, x)) * area.width()

    def _y(self, area: QRectF, y: float, top: float) -> float:
        return area.bottom() - (max(0.0, y) / top if top else 0.0) * area.height()

    def _draw_axes(self, painter: QPainter, area: QRectF, top: float, text: QColor, muted: QColor) -> None:
        painter.setPen(QPen(muted, 1))
        for step in range(5):
            value = top * step / 4
            y = self._y(area, value, top)
            painter.drawLine(QPointF(area.left(), y), QPointF(area.right(), y))
            painter.drawText(QRectF(0, y - 8, MARGIN_LEFT - 6, 16),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, self.y_format(value))
        for step in range(11):
            x = self._x(area, step / 10)
            painter.drawLine(QPointF(x, area.bottom()), QPointF(x, area.bottom() + 4))
            if step % 2 == 0:
                painter.drawText(QRectF(x - 20, area.bottom() + 4, 40, 14), Qt.AlignmentFlag.AlignCenter,
                                 f"{step / 10:.1f}")
        painter.setPen(text)
        painter.drawText(QRectF(area.left(), area.bottom() + 18, area.width(), 16), Qt.AlignmentFlag.AlignCenter,
                         self.x_title)
        painter.drawText(QRectF(4, 4, self.width() / 2, 18), Qt.AlignmentFlag.AlignLeft, self.title)
        painter.drawRect(area)

    def _draw_lines(self, painter: QPainter, area: QRectF, rows: list, top: float, colours: list[QColor]) -> None:
        for number, (serie, colour) in enumerate(zip(self.series, colours)):
            pen = QPen(colour, 2, DASHES[number % len(DASHES)])
            painter.setPen(pen)
            previous: QPointF | None = None
            for x, _, values in sorted(rows, key=lambda r: r[0]):
                value = values[number]
                if value is None:
                    previous = None
                    continue
                point = QPointF(self._x(area, x), self._y(area, value, top))
                if previous is not None:
                    painter.drawLine(previous, point)
                painter.drawEllipse(point, 2.5, 2.5)
                previous = point

    def _draw_bars(self, painter: QPainter, area: QRectF, rows: list, top: float, colours: list[QColor]) -> None:
        ordered = sorted(rows, key=lambda r: r[0])
        for index, (x, end, values) in enumerate(ordered):
            if end is None:
                end = ordered[index + 1][0] if index + 1 < len(ordered) else min(1.0, x + 0.05)
            left, right = self._x(area, x) + 1, self._x(area, end) - 1
            width = max(1.0, right - left)
            if self.kind == "stacked":
                base = 0.0
                for value, colour in zip(values, colours):
                    if value:
                        y0, y1 = self._y(area, base, top), self._y(area, base + value, top)
                        painter.fillRect(QRectF(left, y1, width, y0 - y1), colour)
                        base += value
            else:
                share = width / max(1, len(values))
                for number, (value, colour) in enumerate(zip(values, colours)):
                    if value:
                        y1 = self._y(area, value, top)
                        painter.fillRect(QRectF(left + number * share, y1, share, area.bottom() - y1), colour)

    def _draw_markers(self, painter: QPainter, area: QRectF, text: QColor) -> None:
        for number, marker in enumerate(self.markers):
            x = self._x(area, marker.x)
            painter.setPen(QPen(text, 1, Qt.PenStyle.DashLine))
            painter.drawLine(QPointF(x, area.top()), QPointF(x, area.bottom()))
            painter.drawText(QRectF(x + 3, area.top() + 2 + 14 * number, 180, 14), Qt.AlignmentFlag.AlignLeft,
                             marker.label)

    def _draw_legend(self, painter: QPainter, colours: list[QColor], text: QColor) -> None:
        right = self.width() - MARGIN_RIGHT
        metrics = painter.fontMetrics()
        for number in reversed(range(len(self.series))):
            label = self.series[number].label
            width = metrics.horizontalAdvance(label)
            right -= width
            painter.setPen(text)
            painter.drawText(QRectF(right, 4, width + 2, 18), Qt.AlignmentFlag.AlignLeft, label)
            right -= 22
            if self.kind == "lines":
                painter.setPen(QPen(colours[number], 2, DASHES[number % len(DASHES)]))
                painter.drawLine(QPointF(right, 13), QPointF(right + 18, 13))
            else:
                painter.fillRect(QRectF(right + 4, 7, 12, 12), colours[number])
            right -= 10

    # --- hovering -------------------------------------------------------------------------------

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        text = self.describe_at(event.position().x())
        if text:
            QToolTip.showText(event.globalPosition().toPoint(), text, self)
        else:
            QToolTip.hideText()

    def describe_at(self, position: float) -> str:
        """The values of the row nearest to ``position`` (a widget x coordinate), for the tooltip."""
        area = self.plot_area()
        rows = self.rows()
        if not rows or not area.left() <= position <= area.right():
            return ""
        x = (position - area.left()) / area.width()
        if self.kind == "lines":
            chosen = min(rows, key=lambda r: abs(r[0] - x))
        else:
            inside = [r for r in rows if r[0] <= x < (r[1] if r[1] is not None else r[0] + 0.05)]
            if not inside:
                return ""
            chosen = inside[0]
        start, end, values = chosen
        where = f"{start:.2f}" if end is None else f"{start:.2f}–{end:.2f}"
        parts = [f"{serie.label}: {'-' if value is None else self.y_format(value)}"
                 for serie, value in zip(self.series, values)]
        return f"{self.x_title} {where}\n" + "\n".join(parts)


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _nice(peak: float) -> float:
    """A round axis top at or above ``peak`` (1, 2, 2.5, 5 times a power of ten)."""
    if peak <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(peak))
    for step in (1, 2, 2.5, 5, 10):
        if peak <= step * power:
            return step * power
    return 10 * power


def _number(value: float) -> str:
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:.2f}"
