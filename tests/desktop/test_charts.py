"""Charts: pyqtgraph plots drawn from a Qt model, with markers, a draggable handle, and the palette's colours."""

from __future__ import annotations

import math
import warnings

import pyqtgraph as pg
from PySide6.QtGui import QColor, QPalette

from desktop.common.charts import Chart, Marker, Series, series_colours
from desktop.common.models import Column, RowsModel
from tests.desktop.conftest import window_in_a_fresh_process

COLUMNS = [Column("x", lambda r: r["x"]), Column("to", lambda r: r.get("to")), Column("a", lambda r: r.get("a")),
           Column("b", lambda r: r.get("b"))]


def drawn(chart: Chart, kind: type) -> list:
    return [item for item in chart.ensure_plot().getPlotItem().items if isinstance(item, kind)]


def test_the_plot_is_made_when_the_chart_is_first_shown(qtbot) -> None:
    model = RowsModel(COLUMNS)
    chart = Chart(model, 0, [Series(2, "a")], kind="lines")
    qtbot.addWidget(chart)
    chart.set_markers([Marker(0.3, "m")])
    chart.add_handle(0.4)
    chart.add_cursor(0.6)
    model.set_rows([{"x": 0.1, "a": 0.5}])
    assert chart.plot is None and chart.rows() == [(0.1, None, [0.5])], "the model is read without a plot"
    chart.set_handle_value(0.45)
    chart.set_cursor_value(0.65)
    chart.show()
    assert chart.plot is not None and chart.plot.isVisible()
    lines = sorted(line.value() for line in drawn(chart, pg.InfiniteLine))
    assert lines == [0.3, 0.45, 0.65], "what was set before is drawn"
    assert list(drawn(chart, pg.PlotDataItem)[0].getData()[1]) == [0.5]


def test_lines_follow_the_model_with_a_gap_where_a_value_is_missing(qtbot) -> None:
    model = RowsModel(COLUMNS)
    chart = Chart(model, 0, [Series(2, "a"), Series(3, "b")], kind="lines", y_max=1.0, title="T", x_title="x")
    qtbot.addWidget(chart)
    assert drawn(chart, pg.PlotDataItem) == [] and drawn(chart, pg.TextItem), "No data yet"
    model.set_rows([{"x": 0.5, "a": 0.2, "b": None}, {"x": 0.1, "a": 0.9, "b": 0.4}])
    first, second = drawn(chart, pg.PlotDataItem)
    xs, ys = first.getData()
    assert list(xs) == [0.1, 0.5] and list(ys) == [0.9, 0.2], "sorted by x, as the model holds them"
    _, gap = second.getData()
    assert gap[0] == 0.4 and math.isnan(gap[1]) and not drawn(chart, pg.TextItem)
    model.set_rows([{"x": 0.3, "a": 0.7, "b": 0.6}])
    assert [list(item.getData()[1]) for item in drawn(chart, pg.PlotDataItem)] == [[0.7], [0.6]]



def test_a_series_without_a_value_draws_nothing_and_pyqtgraph_is_never_handed_it(qtbot) -> None:
    """A line with no value at all (precision where nothing is labelled) draws no line and no point, its key
    kept: pyqtgraph, handed points none of which is a number, warns "All-NaN slice encountered" placing them."""
    model = RowsModel(COLUMNS)
    chart = Chart(model, 0, [Series(2, "a"), Series(3, "b")], kind="lines", y_max=1.0, title="T")
    qtbot.addWidget(chart)
    chart.show()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.set_rows([{"x": 0.5, "a": 0.2}, {"x": 0.1, "a": 0.9}])
        for item in drawn(chart, pg.PlotDataItem):
            item.scatter.dataBounds(1)  # where pyqtgraph places the points, to paint them
        chart.plot.grab()
    [line] = drawn(chart, pg.PlotDataItem)
    assert list(line.getData()[1]) == [0.9, 0.2] and line.opts["symbolBrush"] == series_colours(chart.palette(), 2)[0]
    assert "&nbsp;b</span>" in chart.legend_html()

def test_stacked_bars_stack_and_a_hover_names_the_bar(qtbot) -> None:
    model = RowsModel(COLUMNS)
    chart = Chart(model, 0, [Series(2, "a"), Series(3, "b")], kind="stacked", x_end_column=1, x_title="score")
    qtbot.addWidget(chart)
    chart.resize(500, 300)
    chart.show()
    model.set_rows([{"x": 0.0, "to": 0.5, "a": 2, "b": 3}, {"x": 0.5, "to": 1.0, "a": 1, "b": 0}])
    lower, upper = drawn(chart, pg.BarGraphItem)
    assert list(lower.opts["y1"]) == [2, 1] and list(upper.opts["y0"]) == [2, 1] and list(upper.opts["y1"]) == [5, 1]
    assert chart.y_max(chart.rows()) == 5
    area = chart.plot_area()
    assert chart.describe_at(chart.position_of(0.25)) == "score 0.00–0.50\na: 2\nb: 3"
    assert chart.describe_at(chart.position_of(0.75)) == "score 0.50–1.00\na: 1\nb: 0"
    assert chart.describe_at(area.right() + 5) == ""


def test_markers_a_bounded_handle_and_cursors(qtbot) -> None:
    chart = Chart(RowsModel(COLUMNS), 0, [Series(2, "a")])
    qtbot.addWidget(chart)
    chart.ensure_plot()
    chart.set_markers([Marker(0.75, "in force 0.75"), Marker(0.4, "suggested 0.40")])
    assert sorted(line.value() for line in drawn(chart, pg.InfiniteLine)) == [0.4, 0.75]
    chart.set_markers([Marker(0.6, "in force 0.60")])
    assert [line.value() for line in drawn(chart, pg.InfiniteLine)] == [0.6], "old markers are removed"
    moved: list[float] = []
    chart.sig_handle_moved.connect(moved.append)
    chart.add_handle(0.5)
    chart.set_handle_value(1.7)
    handle = next(line for line in drawn(chart, pg.InfiniteLine) if line.movable)
    assert handle.value() == chart.handle_value() == 1.0 and moved == [1.0], "the handle stays on the 0..1 axis"
    chart.add_cursor(0.2)
    chart.set_cursor_value(0.3)
    cursor = next(line for line in drawn(chart, pg.InfiniteLine) if not line.movable and line.value() != 0.6)
    assert cursor.value() == chart.cursor_value() == 0.3


def test_a_palette_change_restyles_the_chart(qtbot) -> None:
    chart = Chart(RowsModel(COLUMNS), 0, [Series(2, "a")], title="Scores")
    qtbot.addWidget(chart)
    dark = QPalette(chart.palette())
    dark.setColor(QPalette.ColorRole.Base, QColor("#101418"))
    dark.setColor(QPalette.ColorRole.Text, QColor("#e0e4e8"))
    chart.ensure_plot()
    chart.setPalette(dark)
    assert chart.plot.backgroundBrush().color().name() == "#101418"
    assert "#e0e4e8" in chart.plot.getPlotItem().titleLabel.text
    assert chart.plot.getPlotItem().getAxis("bottom").textPen().color().name() == "#e0e4e8"


def test_the_window_starts_without_importing_pyqtgraph(tmp_path) -> None:
    """The plot library loads when a chart is first shown, not while the window starts."""
    printed = window_in_a_fresh_process(tmp_path / "state", (
        "loaded = 'pyqtgraph' in sys.modules\n"
        "window.show_view(window.views.index(window.gate_view))\nwindow.gate_view.show_tab(window.gate_view.tuning)\n"
        "app.processEvents()\n"
        "print(loaded, 'pyqtgraph' in sys.modules)"))
    assert printed[-2:] == ["False", "True"], printed


def test_a_lines_label_stays_inside_the_plot_whatever_its_width(qtbot) -> None:
    model = RowsModel(COLUMNS)
    chart = Chart(model, 0, [Series(2, "a")], kind="stacked", x_end_column=1, x_title="probability")
    qtbot.addWidget(chart)
    model.set_rows([{"x": 0.0, "to": 0.5, "a": 2}, {"x": 0.5, "to": 1.0, "a": 1}])
    chart.set_markers([Marker(0.55, "highThreshold 0.55"), Marker(0.2, "in force 0.20")])
    chart.add_handle(0.95, "highThreshold {value:.2f}")

    def cut() -> list[str]:
        """The labels that reach past the plot's edges (none, once the chart is laid out at its size)."""
        area = chart.plot.getPlotItem().getViewBox().sceneBoundingRect()
        return [line.label.toPlainText() for line in drawn(chart, pg.InfiniteLine)
                if not area.left() - 1 <= line.label.sceneBoundingRect().left() <= area.right()
                or line.label.sceneBoundingRect().right() > area.right() + 1]

    chart.show()
    for width in (280, 700, 290):  # a narrow pane (a 1024-wide window), a wide one, and narrow again
        chart.resize(width, 240)
        qtbot.waitUntil(lambda: chart.plot.getPlotItem().getViewBox().sceneBoundingRect().height() > 100
                        and chart.plot.width() == width, timeout=5_000)
        qtbot.waitUntil(lambda: not cut(), timeout=5_000)
    chart.set_handle_value(0.05)
    assert not cut()
    chart.set_handle_value(0.62)
    assert not cut()
