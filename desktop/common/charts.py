"""Charts over a 0..1 x axis, drawn with pyqtgraph, each reading its numbers from a Qt item model.

Two shapes are needed: bars (a histogram, stacked by tier or by label) and
lines (per threshold).  A chart watches its model's reset/insert/change
signals and redraws from the model; it never asks the engine for anything.
Beside the data, a chart can hold *markers* (fixed dashed lines: the
setting in force, the suggestion), a *handle* (a line the owner drags, the
Tuning tab's threshold; ``sig_handle_moved``) and a *cursor* (a line the
caller moves to follow a handle on another chart).  Colours come from the
application palette (the highlight and its blends with the base colour),
and lines also differ by dash pattern, so a chart reads in light and dark
mode alike; a palette change restyles it.  Hovering shows the row's
values.  Panning, zooming and pyqtgraph's context menu are off: the axes
are the thresholds' 0..1.

The pyqtgraph plot inside a ``Chart`` is made when the chart is first shown
(``ensure_plot``): importing pyqtgraph loads Qt's OpenGL, SVG and test
libraries, about a quarter of a second, which the window's start should not
wait for when no chart is in view.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import QAbstractItemModel, QEvent, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPalette, QResizeEvent, QShowEvent
from PySide6.QtWidgets import QSizePolicy, QToolTip, QVBoxLayout, QWidget

from .models import VALUE_ROLE

X_PAD = 0.02   # room for the 0.0 and 1.0 tick labels
TITLE_ROW_PX = 30.0     # the title line's height in pyqtgraph (one line)
TITLE_MARGIN_PX = 16.0  # the plot's margins around the title, which sits beside the y axis
DASHES = (Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine, Qt.PenStyle.DashDotLine)
Row = tuple[float, "float | None", "list[float | None]"]


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


_PLOT_CLASS: Any = None


def _pg() -> Any:
    import pyqtgraph

    return pyqtgraph


def _plot_class() -> Any:
    """The pyqtgraph widget class a chart draws in (pyqtgraph is imported here, on first use)."""
    global _PLOT_CLASS
    if _PLOT_CLASS is not None:
        return _PLOT_CLASS
    pg = _pg()

    class FormattedAxis(pg.AxisItem):
        """A y axis whose tick labels use the chart's number format."""

        def __init__(self, orientation: str, formatter: Callable[[float], str]) -> None:
            super().__init__(orientation)
            self.formatter = formatter

        def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:  # noqa: N802
            return [self.formatter(value * scale) for value in values]

    class Plot(pg.PlotWidget):
        def __init__(self, chart: "Chart") -> None:
            super().__init__(chart, axisItems={"left": FormattedAxis("left", chart.y_format)})
            self.chart = chart
            plot = self.getPlotItem()
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.setMouseEnabled(x=False, y=False)
            plot.setXRange(-X_PAD, 1.0 + X_PAD, padding=0.0)
            plot.getAxis("bottom").setTicks([[(step / 5, f"{step / 5:.1f}") for step in range(6)],
                                             [(step / 10, "") for step in range(11)]])
            plot.showGrid(x=False, y=True, alpha=0.25)
            self.setMouseTracking(True)
            self.setAccessibleName(chart.title)

        def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
            super().mouseMoveEvent(event)
            text = "" if event.buttons() != Qt.MouseButton.NoButton else self.chart.describe_at(
                event.position().x())
            if text:
                QToolTip.showText(event.globalPosition().toPoint(), text, self)
            else:
                QToolTip.hideText()

        def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
            if getattr(self, "chart", None) is not None and self.chart.plot is self:
                self.chart.fit_title(event.size().width())  # before the plot item takes the new size
            super().resizeEvent(event)

        def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
            super().changeEvent(event)
            if getattr(self, "chart", None) is not None and self.chart.plot is self and event.type() in (
                    QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
                self.chart.restyle()

    _PLOT_CLASS = Plot
    return Plot


CHART_MIN_HEIGHT = 120  # px: the plot still reads beside its title, key and axes


class Chart(QWidget):
    """Bars or lines over a 0..1 x axis: ``x_column`` (and ``x_end_column`` for bar widths) and ``series``."""

    sig_handle_moved = Signal(float)
    """The handle moved (dragged, or set); the argument is its value."""

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
        self.plot: Any = None                               # the pyqtgraph PlotWidget, once shown
        self._handle: tuple[float, str, str] | None = None  # value, label format, tooltip
        self._cursor: float | None = None
        self._handle_line: Any = None
        self._cursor_line: Any = None
        self._marker_lines: list[Any] = []
        self._data_items: list[Any] = []
        self._empty: Any = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        # Small enough that a view's words (which wrap, and grow) take room from the plot when the window is
        # short, never overlapping it: a splitter squeezes a pane below its minimum by drawing it over the next.
        self.setMinimumHeight(CHART_MIN_HEIGHT)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setAccessibleName(title)
        for signal in (model.modelReset, model.rowsInserted, model.rowsRemoved, model.dataChanged,
                       model.layoutChanged):
            signal.connect(lambda *_: self.redraw())

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(420, 220)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        self.ensure_plot()
        super().showEvent(event)

    def ensure_plot(self) -> Any:
        """The pyqtgraph plot, made (with the markers, handle and cursor set so far) on first use."""
        if self.plot is None:
            pg = _pg()
            self.plot = _plot_class()(self)
            self.layout().addWidget(self.plot)
            self.plot.setVisible(True)   # made while its chart is being shown, so Qt would leave it hidden
            self._empty = pg.TextItem("No data yet", anchor=(0.5, 0.5))
            self.plot.getPlotItem().getViewBox().sigResized.connect(lambda *_: self.fit_labels())
            if self._handle is not None:
                self._make_handle(*self._handle)
            if self._cursor is not None:
                self._cursor_line = pg.InfiniteLine(pos=self._cursor, angle=90, movable=False)
                self.plot.getPlotItem().addItem(self._cursor_line)
            self.restyle()
        return self.plot

    # --- markers, the handle and the cursor --------------------------------------------------------

    def set_markers(self, markers: list[Marker]) -> None:
        """Fixed lines at thresholds worth pointing out (the suggestion, the setting in force)."""
        self.markers = list(markers)
        if self.plot is None:
            return
        pg, item = _pg(), self.plot.getPlotItem()
        for line in self._marker_lines:
            item.removeItem(line)
        text = self.palette().color(QPalette.ColorRole.Text)
        self._marker_lines = []
        for number, marker in enumerate(self.markers):
            line = pg.InfiniteLine(pos=marker.x, angle=90, movable=False,
                                   pen=pg.mkPen(text, width=1, style=Qt.PenStyle.DashLine), label=marker.label,
                                   labelOpts={"position": 0.8 - 0.12 * number, "color": text})
            item.addItem(line)
            self._marker_lines.append(line)
        self.fit_labels()

    def add_handle(self, value: float, label: str = "{value:.2f}", tooltip: str = "") -> None:
        """A vertical line the owner drags along 0..1 (``sig_handle_moved``); one per chart."""
        self._handle = (value, label, tooltip)
        if self.plot is not None:
            self._make_handle(value, label, tooltip)

    def _make_handle(self, value: float, label: str, tooltip: str) -> None:
        pg = _pg()
        line = pg.InfiniteLine(pos=value, angle=90, movable=True, bounds=(0.0, 1.0), label=label,
                               labelOpts={"position": 0.96})
        line.setCursor(Qt.CursorShape.SizeHorCursor)
        line.setToolTip(tooltip)
        line.sigPositionChanged.connect(self._on_handle_moved)
        self.plot.getPlotItem().addItem(line)
        self._handle_line = line
        self.fit_labels()

    def _on_handle_moved(self, line: Any) -> None:
        self._handle = (line.value(), *self._handle[1:]) if self._handle else None
        self.fit_labels()
        self.sig_handle_moved.emit(float(line.value()))

    def fit_labels(self) -> None:
        """Put each line's label on the side of its line where it has room inside the plot: to the right, or to
        the left when the plot is too narrow on that side (a small window), never cut at the plot's edge."""
        if self.plot is None:
            return
        box = self.plot.getPlotItem().getViewBox()
        area = box.sceneBoundingRect()
        for line in [*self._marker_lines, *([self._handle_line] if self._handle_line is not None else [])]:
            at = box.mapViewToScene(QPointF(line.value(), 0)).x()
            width = line.label.boundingRect().width()
            room_right, room_left = area.right() - at, at - area.left()
            right = room_right >= width or room_right >= room_left
            line.label.anchors = [(0.0, 0.5) if right else (1.0, 0.5)] * 2
            line.label.updatePosition()

    def handle_words(self) -> tuple[str, str]:
        """The handle's label (a format of ``value``) and its tooltip; empty without a handle."""
        return (self._handle[1], self._handle[2]) if self._handle else ("", "")

    def handle_value(self) -> float | None:
        """Where the handle is (the drawn line's value, once drawn)."""
        if self._handle_line is not None:
            return float(self._handle_line.value())
        return None if self._handle is None else float(self._handle[0])

    def set_handle_value(self, value: float) -> None:
        """Move the handle (kept within 0..1); ``sig_handle_moved`` follows when it moved."""
        if self._handle is None:
            return
        value = min(1.0, max(0.0, float(value)))
        if self._handle_line is not None:
            self._handle_line.setValue(value)   # reports through _on_handle_moved
        elif value != self._handle[0]:
            self._handle = (value, *self._handle[1:])
            self.sig_handle_moved.emit(value)

    def add_cursor(self, value: float) -> None:
        """A fixed line that the caller moves (``set_cursor_value``) to follow a handle on another chart."""
        self._cursor = value
        if self.plot is not None and self._cursor_line is None:
            self._cursor_line = _pg().InfiniteLine(pos=value, angle=90, movable=False)
            self.plot.getPlotItem().addItem(self._cursor_line)
            self.restyle()

    def set_cursor_value(self, value: float) -> None:
        self._cursor = value
        if self._cursor_line is not None:
            self._cursor_line.setValue(value)

    def cursor_value(self) -> float | None:
        """Where the cursor is (the drawn line's value, once drawn)."""
        return float(self._cursor_line.value()) if self._cursor_line is not None else self._cursor

    # --- reading the model ----------------------------------------------------------------------

    def rows(self) -> list[Row]:
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

    def y_max(self, rows: list[Row]) -> float:
        if self.fixed_y_max is not None:
            return self.fixed_y_max
        if self.kind == "stacked":
            peak = max((sum(v or 0 for v in values) for _, _, values in rows), default=0.0)
        else:
            peak = max((v for _, _, values in rows for v in values if v is not None), default=0.0)
        return _nice(peak)

    # --- drawing -----------------------------------------------------------------------------------

    def redraw(self) -> None:
        """Replace the data items with what the model holds now (markers, handle and cursor stay)."""
        if self.plot is None:
            return
        item = self.plot.getPlotItem()
        for data in self._data_items:
            item.removeItem(data)
        self._data_items = []
        rows = self.rows()
        top = self.y_max(rows)
        item.setYRange(0.0, top * (1.04 if self.kind == "lines" else 1.0), padding=0.0)   # a line at the top shows
        colours = series_colours(self.palette(), len(self.series))
        if not rows:
            self._empty.setColor(self.palette().color(QPalette.ColorRole.PlaceholderText))
            self._empty.setPos(0.5, top / 2)
            self._add(self._empty)
        elif self.kind == "lines":
            self._draw_lines(rows, colours)
        else:
            self._draw_bars(rows, colours)

    def _add(self, data: Any) -> None:
        self.plot.getPlotItem().addItem(data)
        self._data_items.append(data)

    def legend_html(self) -> str:
        """The title with the series' key beside it (outside the data area, so it never covers a bar)."""
        palette = self.palette()
        text = palette.color(QPalette.ColorRole.Text).name()
        keys = []
        for number, (serie, colour) in enumerate(zip(self.series, series_colours(palette, len(self.series)))):
            mark = "■" if self.kind != "lines" else ("━━", "╍╍", "┅┅", "━╍")[number % len(DASHES)]
            keys.append(f'<span style="color:{colour.name()}">{mark}</span>&nbsp;{html.escape(serie.label)}')
        # A space after the gaps: where the chart is narrow, the key wraps there (fit_title), between its entries.
        return (f'<span style="color:{text}">{html.escape(self.title)}'
                f'{"&nbsp;&nbsp; " if keys else ""}{"&nbsp; ".join(keys)}</span>')

    def fit_title(self, width: float | None = None) -> None:
        """Wrap the title line to the plot's width when it is wider (one line again when it fits).

        pyqtgraph keeps a title's natural width as the plot's minimum, so a title and key wider than a
        narrow chart would push the axes and the data past the widget's edge, where they are cut off.
        """
        if self.plot is None:
            return
        item = self.plot.getPlotItem()
        label, text = item.titleLabel, item.titleLabel.item
        room = max(80.0, (self.plot.width() if width is None else width) - item.getAxis("left").width()
                   - TITLE_MARGIN_PX)
        before = text.textWidth()
        text.setTextWidth(-1)
        wrap = room if text.boundingRect().width() > room else -1.0
        text.setTextWidth(wrap)
        height = max(TITLE_ROW_PX, text.boundingRect().height())
        if wrap != before or label.maximumHeight() != height:
            label.setMaximumHeight(height)
            item.layout.setRowFixedHeight(0, height)
            label.updateMin()

    def _draw_lines(self, rows: list[Row], colours: list[QColor]) -> None:
        pg = _pg()
        ordered = sorted(rows, key=lambda r: r[0])
        xs = [x for x, _, _ in ordered]
        for number, (serie, colour) in enumerate(zip(self.series, colours)):
            ys = [math.nan if values[number] is None else values[number] for _, _, values in ordered]
            if all(math.isnan(y) for y in ys):
                continue  # nothing to draw (pyqtgraph warns "All-NaN slice encountered" placing no point)
            self._add(pg.PlotDataItem(xs, ys, pen=pg.mkPen(colour, width=2, style=DASHES[number % len(DASHES)]),
                                      symbol="o", symbolSize=5, symbolBrush=colour, symbolPen=colour,
                                      connect="finite"))

    def _draw_bars(self, rows: list[Row], colours: list[QColor]) -> None:
        pg = _pg()
        ordered = sorted(rows, key=lambda r: r[0])
        spans = []
        for index, (x, end, _) in enumerate(ordered):
            if end is None:
                end = ordered[index + 1][0] if index + 1 < len(ordered) else min(1.0, x + 0.05)
            gap = min(0.002, (end - x) / 10)
            spans.append((x + gap, end - gap))
        base = [0.0] * len(ordered)
        count = max(1, len(self.series))
        for number, (serie, colour) in enumerate(zip(self.series, colours)):
            values = [values[number] or 0.0 for _, _, values in ordered]
            if self.kind == "stacked":
                x0 = [left for left, _ in spans]
                x1 = [right for _, right in spans]
                y0, y1 = list(base), [b + v for b, v in zip(base, values)]
                base = y1
            else:
                x0 = [left + (right - left) * number / count for left, right in spans]
                x1 = [left + (right - left) * (number + 1) / count for left, right in spans]
                y0, y1 = [0.0] * len(values), values
            self._add(pg.BarGraphItem(x0=x0, x1=x1, y0=y0, y1=y1, brush=colour, pen=pg.mkPen(None)))

    # --- the palette -----------------------------------------------------------------------------

    def restyle(self) -> None:
        """Take every colour from the palette again (after a change to it), and redraw."""
        if self.plot is None:
            return
        pg, palette = _pg(), self.palette()
        text, muted = palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.PlaceholderText)
        accent = palette.color(QPalette.ColorRole.Highlight)
        self.plot.setBackground(palette.color(QPalette.ColorRole.Base))
        item = self.plot.getPlotItem()
        item.setTitle(self.legend_html(), justify="left")
        self.fit_title()
        for name, label in (("bottom", self.x_title), ("left", self.y_title)):
            axis = item.getAxis(name)
            axis.setPen(muted)
            axis.setTextPen(text)
            if label:
                item.setLabel(name, label, color=text)
        if self._handle_line is not None:
            self._handle_line.setPen(pg.mkPen(accent, width=3))
            self._handle_line.setHoverPen(pg.mkPen(accent, width=5))
            self._handle_line.label.setColor(text)
        if self._cursor_line is not None:
            self._cursor_line.setPen(pg.mkPen(accent, width=2))
        self.redraw()
        self.set_markers(self.markers)

    # --- where things are, and hovering --------------------------------------------------------

    def plot_area(self) -> QRectF:
        """The data area in the plot's viewport coordinates."""
        plot = self.ensure_plot()
        box = plot.getPlotItem().getViewBox()
        return QRectF(plot.mapFromScene(box.sceneBoundingRect()).boundingRect())

    def x_at(self, position: float) -> float:
        """The x value under a viewport x coordinate."""
        area = self.plot_area()
        (low, high), _ = self.plot.getPlotItem().getViewBox().viewRange()
        return low + (position - area.left()) / max(1.0, area.width()) * (high - low)

    def position_of(self, x: float) -> float:
        """The viewport x coordinate of an x value (the inverse of ``x_at``)."""
        area = self.plot_area()
        (low, high), _ = self.plot.getPlotItem().getViewBox().viewRange()
        return area.left() + (x - low) / ((high - low) or 1.0) * area.width()

    def describe_at(self, position: float) -> str:
        """The values of the row nearest to ``position`` (a viewport x coordinate), for the tooltip."""
        area = self.plot_area()
        rows = self.rows()
        if not rows or not area.left() <= position <= area.right():
            return ""
        x = self.x_at(position)
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
