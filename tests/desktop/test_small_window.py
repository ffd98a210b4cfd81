"""The window on a small screen: it fits 1024x640 whatever view is shown, and what it shows there reads
(a record page beside the lists, the gate journal's messages, charts whole)."""

from __future__ import annotations

import json

import pytest

from desktop.approvals.view import APPROVAL_COLUMNS
from desktop.common.models import RowsModel
from desktop.common.widgets import table
from desktop.gate.journal_panel import JOURNAL_COLUMNS
from desktop.gate.log_panel import LOG_COLUMNS
from tests.desktop.conftest import wait_for_signal, window_in_a_fresh_process

SMALL = (1024, 640)


@pytest.fixture
def window(connected_window):
    return connected_window


def test_the_window_shrinks_to_1024_by_640_on_every_view(qtbot, window) -> None:
    wait_for_signal(qtbot, window.models_view.sig_content_loaded, lambda: window.show_view(7))
    for number in range(len(window.views)):
        window.show_view(number)
    window.resize(*SMALL)
    qtbot.waitUntil(lambda: window.width() <= SMALL[0], timeout=5_000)
    hint = window.minimumSizeHint()
    assert hint.width() <= SMALL[0] and hint.height() <= SMALL[1], hint
    too_wide = {view.title: view.minimumSizeHint().width() for view in window.views
                if view.minimumSizeHint().width() > window.stack.width()}
    assert too_wide == {}


def test_a_record_page_keeps_its_room_beside_the_lists_in_a_small_window(qtbot, window) -> None:
    window.resize(*SMALL)
    records = window.records_view
    window.show_view(1)  # Records, where the window opens: its first page may be in already
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    dana = next(r["id"] for r in records.recent_model.rows() if r["title"] == "Dana Whitaker")
    wait_for_signal(qtbot, records.page.sig_content_loaded, lambda: records.open_record(dana))
    qtbot.waitUntil(lambda: window.width() <= SMALL[0], timeout=5_000)
    assert records.page.width() >= 360
    header = records.page.header
    assert header.document().idealWidth() <= header.viewport().width()  # the title is not wrapped letter by letter
    assert records.recent_table.width() > 250  # the lists keep enough for their titles


def test_a_record_pages_header_is_read_whole_without_scrolling_in_a_small_window(qtbot, window) -> None:
    window.resize(*SMALL)
    records = window.records_view
    window.show_view(1)  # Records, where the window opens: its first page may be in already
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    qtbot.waitUntil(lambda: window.width() <= SMALL[0], timeout=5_000)
    claim = next(r for r in records.recent_model.rows() if r["title"].startswith("Dana prefers"))
    wait_for_signal(qtbot, records.page.sig_content_loaded, lambda: records.open_record(claim["id"]))
    header = records.page.header
    qtbot.waitUntil(lambda: "revision" in header.toPlainText(), timeout=5_000)

    qtbot.waitUntil(lambda: header.verticalScrollBar().maximum() == 0, timeout=5_000)  # title and line whole
    assert header.document().size().height() > 72  # the title wraps: more than the header had room for
    assert records.page.body.height() > 2 * header.height()  # and the note keeps the room


def test_search_results_titles_keep_whole_words_in_a_small_window(qtbot, window) -> None:
    from PySide6.QtCore import QRect, Qt

    window.resize(1024, 700)
    records = window.records_view
    window.show_view(1)  # Records, where the window opens: its first page may be in already
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    qtbot.waitUntil(lambda: window.width() <= 1024, timeout=5_000)
    records.query.setText("Atlas status notes")
    wait_for_signal(qtbot, records.search_model.sig_page_loaded, records.search)
    table = records.search_table
    header = table.horizontalHeader()
    qtbot.waitUntil(lambda: header.sectionSize(0) >= 90, timeout=5_000)  # sized once the rows are laid out

    cell = header.sectionSize(0) - 2 * table.style().pixelMetric(table.style().PixelMetric.PM_FocusFrameHMargin) - 2
    rows = records.search_model.rows()[:8]
    assert {row["kind"] for row in rows} == {"page", "claim"}
    for row in rows:  # a page's name on the lines of its row; a claim's sentence begins with whole words
        shown = row["title"] if row["kind"] == "page" else " ".join(row["title"].split()[:3])
        wrapped = table.fontMetrics().boundingRect(QRect(0, 0, cell, 10_000), Qt.TextFlag.TextWordWrap, shown)
        assert wrapped.width() <= cell and wrapped.height() <= table.verticalHeader().defaultSectionSize(), shown
    assert table.wordWrap()
    assert header.sectionSize(1) >= table.sizeHintForColumn(1)  # the kind whole: "page", never "pa…"
    assert header.sectionSize(len(records.search_model.columns) - 1) >= 120  # the snippet keeps room to read


def shown_table(qtbot, model, width: int, height: int):
    """The window's table of ``model``, shown at ``width`` x ``height``."""
    view = table(model)
    qtbot.addWidget(view)
    view.resize(width, height)
    view.show()
    qtbot.waitExposed(view)
    return view


def test_the_journal_gives_its_spare_width_to_the_message(qtbot) -> None:
    model = RowsModel(JOURNAL_COLUMNS)
    view = shown_table(qtbot, model, 700, 300)
    model.set_rows([{"id": f"gt_{n}", "at": "2026-12-02T01:01:42Z", "message": "How is the Atlas migration going "
                     "and who at Northwind works on it this week?", "needed": None, "pages": [], "decisions": []}
                    for n in range(3)])
    message = [column.title for column in JOURNAL_COLUMNS].index("Message")
    header = view.horizontalHeader()
    qtbot.waitUntil(lambda: header.sectionSize(message) > 250, timeout=5_000)
    assert all(header.sectionSize(message) > header.sectionSize(c) for c in range(model.columnCount()) if c != message)


def test_a_journal_turns_pages_give_their_spare_width_to_the_title(qtbot) -> None:
    from desktop.gate.journal_panel import JournalPagesModel

    model = JournalPagesModel()
    view = shown_table(qtbot, model, 700, 300)
    model.set_turn({"pages": [{"id": f"pg_{n}", "title": "Blue-green deployment of the order-events service",
                               "type": "concept"} for n in range(3)],
                    "decisions": [{"id": f"pg_{n}", "score": 0.5, "tier": "model"} for n in range(3)]})
    page = JournalPagesModel.HEADERS.index("Page")
    header = view.horizontalHeader()
    qtbot.waitUntil(lambda: header.sectionSize(page) > 300, timeout=5_000)
    assert all(header.sectionSize(page) > header.sectionSize(c) for c in range(model.columnCount()) if c != page)


def test_a_narrow_chart_wraps_its_title_and_key_instead_of_pushing_the_plot_out_of_view(qtbot) -> None:
    from desktop.common.charts import Chart, Series
    from desktop.common.models import Column

    model = RowsModel([Column("x", lambda r: r["x"]), Column("a", lambda r: r["a"]), Column("b", lambda r: r["b"]),
                       Column("c", lambda r: r["c"])])
    chart = Chart(model, 0, [Series(1, "precision"), Series(2, "recall"), Series(3, "F1")], kind="lines",
                  title="On the labelled turns", x_title="highThreshold", y_max=1.0)
    qtbot.addWidget(chart)
    chart.resize(300, 220)
    chart.show()
    qtbot.waitExposed(chart)
    model.set_rows([{"x": n / 10, "a": 0.5, "b": 0.6, "c": 0.55} for n in range(1, 10)])
    plot = chart.ensure_plot()
    box = plot.getPlotItem().getViewBox()
    qtbot.waitUntil(lambda: plot.viewport().width() >= 290, timeout=5_000)

    def inside() -> bool:
        right = plot.mapFromScene(box.sceneBoundingRect().topRight()).x()
        below = plot.getPlotItem().geometry().bottom()  # the x axis and its title, under the data
        return 0 < right <= plot.viewport().width() and below <= plot.viewport().height() + 1

    qtbot.waitUntil(inside, timeout=5_000)  # the whole 0..1 axis is in view, not cut at the widget's edge
    title = plot.getPlotItem().titleLabel
    assert title.item.boundingRect().width() <= plot.viewport().width(), "the key is wrapped, not cut off"
    chart.resize(900, 220)
    qtbot.waitUntil(lambda: title.item.boundingRect().height() < 30, timeout=5_000)  # one line again when it fits


@pytest.mark.parametrize("made, text", [(APPROVAL_COLUMNS, "Summary"), (LOG_COLUMNS, "Outcome")])
def test_a_wide_window_gives_its_spare_width_to_the_text_not_to_a_timestamp(qtbot, made, text) -> None:
    model = RowsModel(made)
    view = shown_table(qtbot, model, 1400, 300)
    model.set_rows([{"title": "Dana prefers the Atlas status notes weekly, on Fridays, says the owner",
                     "summary": "Dana wants the Atlas status notes weekly, on Fridays, never on Mondays, in writing",
                     "approvedAt": "2026-12-02T01:36:27Z", "at": "2026-12-02T01:36:27Z", "mode": "shadow",
                     "outcome": "injected", "decisions": []}])
    column = [c.title for c in made].index(text)
    header = view.horizontalHeader()
    qtbot.waitUntil(lambda: header.sectionSize(column) > 400, timeout=5_000)


def test_a_record_lists_updated_column_reads_whole_beside_the_titles_in_a_small_window(qtbot, window,
                                                                                       monkeypatch) -> None:
    from datetime import timedelta

    from desktop.common.times import local_now, moment
    from desktop.records import view as records_module

    clock = {"now": local_now()}
    monkeypatch.setattr(records_module, "local_now", lambda: clock["now"])  # the clock the list reads
    window.resize(1024, 700)
    records = window.records_view
    window.show_view(1)  # Records, where the window opens: its first page may be in already
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    qtbot.waitUntil(lambda: window.width() <= 1024, timeout=5_000)
    newest = moment(records.recent_model.row(0)["updatedAt"], clock["now"])
    clock["now"] = newest + timedelta(minutes=42, seconds=30)  # the newest record was updated 42 minutes ago
    table = records.recent_table
    updated = [column.title for column in records.recent_model.columns].index("Updated")
    assert records.recent_model.index(0, updated).data() == "42 min ago"
    header = table.horizontalHeader()
    table.fit_columns()
    assert header.sectionSize(updated) >= table.sizeHintForColumn(updated)  # never "42 minutes …"
    assert header.sectionSize(1) >= table.sizeHintForColumn(1)  # nor "cla…" for a claim
    status = [column.title for column in records.recent_model.columns].index("Status")
    assert header.sectionSize(status) >= table.sizeHintForColumn(status)  # nor "curr…"
    assert table.horizontalScrollBar().maximum() == 0  # all of it in the list's width
    assert header.sectionSize(0) >= 130  # and the titles keep their room


def test_the_updated_column_widens_as_the_clock_moves_its_times_on(qtbot, window, monkeypatch) -> None:
    """Fitted while its records read "just now", the list's Updated column is sized again when the window's
    clock makes them "42 min ago" (it read "42 min …" until the list was loaded again)."""
    from datetime import timedelta

    from desktop.common.times import local_now, moment
    from desktop.records import view as records_module

    clock = {"now": local_now()}
    monkeypatch.setattr(records_module, "local_now", lambda: clock["now"])
    records = window.records_view
    window.show_view(1)
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    table, header = records.recent_table, records.recent_table.horizontalHeader()
    updated = [column.title for column in records.recent_model.columns].index("Updated")
    clock["now"] = moment(records.recent_model.row(0)["updatedAt"], clock["now"])
    table.fit_columns()
    assert records.recent_model.index(0, updated).data() == "just now"
    fitted = header.sectionSize(updated)
    clock["now"] += timedelta(minutes=42, seconds=30)
    assert table.sizeHintForColumn(updated) > fitted  # "42 min ago" is wider than "just now"
    records.clock.timeout.emit()
    assert header.sectionSize(updated) >= table.sizeHintForColumn(updated)


def test_brief_times_are_short_and_say_the_same_as_the_long_ones() -> None:
    from datetime import datetime, timezone

    from desktop.common.times import brief_ago

    now = datetime(2026, 12, 4, 14, 0, tzinfo=timezone.utc)
    assert brief_ago("2026-12-04T13:59:30Z", now) == "just now"
    assert brief_ago("2026-12-04T13:18:00Z", now) == "42 min ago"
    assert brief_ago("2026-12-04T11:00:00Z", now) == "3 h ago"
    assert brief_ago("2026-12-03T09:00:00Z", now) == "yesterday"
    assert brief_ago("2026-11-20T09:15:00Z", now) == "2026-11-20"
    assert brief_ago(None, now) == "unknown"


@pytest.mark.parametrize("screen, expected, at", [((1024, 768), (1008, 720), (0, 0)),
                                                 ((1920, 1080), (1280, 800), (312, 116))])
def test_the_window_opens_within_the_screen_it_is_on(tmp_path, screen, expected, at) -> None:
    """On a 1024x768 screen the window opens on it, its frame too, not running off its right and bottom edges;
    on a large one it opens at its own size.  It asks for its place, centred in the screen's free area, rather
    than leaving it to the window manager, which cascades a second window down and off a small screen.
    A fresh process, for a screen of that size."""
    config = tmp_path / "screen.json"
    config.write_text(json.dumps({"screens": [{"name": "screen", "x": 0, "y": 0, "width": screen[0],
                                               "height": screen[1], "logicalDpi": 96, "logicalBaseDpi": 96,
                                               "dpr": 1}]}), encoding="utf-8")
    printed = window_in_a_fresh_process(
        tmp_path / "state", "from PySide6.QtCore import Qt\n"
        "print(window.width(), window.height(), window.x(), window.y(), window.testAttribute(Qt.WA_Moved))",
        platform=f"offscreen:configfile={config}")
    assert tuple(int(n) for n in printed[-5:-3]) == expected, printed
    assert tuple(int(n) for n in printed[-3:-1]) == at and printed[-1] == "True", printed


def test_the_search_summary_keeps_the_lists_width_beside_the_models_link_in_a_small_window(qtbot, window) -> None:
    window.resize(1008, 720)  # the window on a 1024x768 screen
    records = window.records_view
    window.show_view(window.views.index(records))
    records.modes.setCurrentIndex(2)
    records.query.setText("Northwind")
    with qtbot.waitSignal(records.search_model.sig_page_loaded, timeout=10_000):
        records.search()
    qtbot.waitUntil(lambda: records.models_link.isVisible(), timeout=5_000)  # no embedding model here
    summary, listing = records.search_summary, records.search_table
    qtbot.waitUntil(lambda: summary.width() >= listing.width() - 2, timeout=5_000)  # not a column of a few words


def test_a_models_name_and_variant_read_whole_in_a_small_window(qtbot, window) -> None:
    window.resize(1008, 720)  # the window on a 1024x768 screen
    models = window.models_view
    wait_for_signal(qtbot, models.sig_content_loaded, lambda: window.show_view(window.views.index(models)))
    listing = models.available_table  # the catalogue (nothing is installed in the demo)
    titles = [column.title for column in listing.model().columns]
    assert listing.model().rowCount() > 1
    for name in ("Model", "Variant"):  # never "gte-reranker-…" four times over
        column = titles.index(name)
        qtbot.waitUntil(lambda: listing.horizontalHeader().sectionSize(column) >= listing.sizeHintForColumn(column),
                        timeout=5_000)


def test_historys_columns_read_whole_on_the_record_page_in_a_small_window(qtbot, window) -> None:
    window.resize(1008, 720)  # the window on a 1024x768 screen
    records = window.records_view
    window.show_view(window.views.index(records))
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    dana = next(r["id"] for r in records.recent_model.rows() if r["title"] == "Dana Whitaker")
    wait_for_signal(qtbot, records.page.sig_content_loaded, lambda: records.open_record(dana))
    page = records.page
    page.tabs.setCurrentWidget(page.history)
    table, header = page.history_table, page.history_table.horizontalHeader()
    qtbot.waitUntil(lambda: page.history_model.rowCount() > 0 and table.isVisible(), timeout=10_000)
    titles = [column.title for column in page.history_model.columns]

    def cut() -> list[str]:
        return [title for number, title in enumerate(titles)
                if header.sectionSize(number) < max(table.sizeHintForColumn(number), header.sectionSizeHint(number))]

    qtbot.waitUntil(lambda: cut() == [] and table.horizontalScrollBar().maximum() == 0, timeout=5_000)  # "What cha…"
    assert "Changed" in titles
    # The lifecycle, how it was written and its Git commit are said on hover and above the diff, not off the edge.
    hover = page.history_model.index(0, 0).data(0x03)
    assert hover.startswith("Revision 1: active, published, ")
    row = page.history_model.row(0)  # nothing the removed columns showed is lost: the publication, the whole commit
    assert f"publication {row['publicationId']}" in hover
    assert not row.get("git", {}).get("commit") or f"commit {row['git']['commit']}" in hover
    shown = wait_for_signal(qtbot, page.sig_diff_loaded, lambda: table.selectRow(0)).args[0]
    assert "Revision 1: active, published, " in shown and ("Git commit " in shown or "not in Git yet" in shown)


def screen_config(tmp_path, width: int, height: int) -> str:
    config = tmp_path / f"screen-{width}x{height}.json"
    config.write_text(json.dumps({"screens": [{"name": "screen", "x": 0, "y": 0, "width": width, "height": height,
                                               "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}),
                      encoding="utf-8")
    return f"offscreen:configfile={config}"


def test_the_window_opens_at_the_size_and_place_it_was_closed_at_kept_on_a_smaller_screen(tmp_path) -> None:
    """Closed at 1100x700 on a 1920x1080 screen, the window opens again at that size and place (as every notes
    app does); closed at 1800x1000, it opens on a 1024x768 screen made smaller to fit it and inside it.
    Fresh processes, the settings in the test's HOME."""
    large, small = screen_config(tmp_path, 1920, 1080), screen_config(tmp_path, 1024, 768)
    state = tmp_path / "state"
    closed_at = ("window.resize(1100, 700)\nwindow.move(150, 90)\napp.processEvents()\nwindow.close()\n"
                 "app.processEvents()\n")
    shown = "print(window.width(), window.height(), window.x(), window.y())"
    window_in_a_fresh_process(state, closed_at, platform=large)
    assert window_in_a_fresh_process(state, shown, platform=large)[-4:] == ["1100", "700", "150", "90"]

    window_in_a_fresh_process(state, closed_at.replace("1100, 700", "1800, 1000").replace("150, 90", "60, 40"),
                              platform=large)
    width, height, x, y = (int(n) for n in window_in_a_fresh_process(state, shown, platform=small)[-4:])
    assert (width, height) == (1008, 720)  # the screen's free area, less a frame's room
    assert 0 <= x and x + width <= 1024 and 0 <= y and y + height <= 768


def test_on_an_800_by_600_screen_the_window_fits_and_only_the_widest_views_scroll(qtbot, window) -> None:
    """The window on an 800x600 screen (or a laptop's at 200 %): it fits the screen's free area less a frame's
    room (784x552), where it stayed 1006 px wide, its right side off the screen.  The sidebar shows its
    icons alone, each name and count on hover; Records, the view a notes app is for, and most others fit
    beside it; a view wider than what is left (Models) scrolls inside the window."""
    records = window.records_view
    window.show_view(window.views.index(records))
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    window.resize(784, 552)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == (784, 552), timeout=5_000)
    sidebar = window.navigation
    qtbot.waitUntil(lambda: sidebar.width() < 60, timeout=5_000)
    qtbot.waitUntil(lambda: sidebar.item(1).toolTip().startswith("Records: "), timeout=10_000)  # its count
    assert not sidebar.horizontalScrollBar().isVisible()  # its icons fit its width
    assert sidebar.visualItemRect(sidebar.item(1)).width() <= sidebar.viewport().width()
    assert sidebar.item(1).toolTip().endswith(" (Ctrl+2)")
    area = window.view_area
    fitting = []
    for number, view in enumerate(window.views):
        window.show_view(number)
        qtbot.waitUntil(lambda: window.stack.width() >= area.viewport().width(), timeout=5_000)
        if window.stack.width() <= area.viewport().width() and window.stack.height() <= area.viewport().height():
            fitting.append(view.title)
    assert {"Agents & stores", "Records", "Vocabulary", "What the agent sees", "Health", "Recall gate",
            "Partitions", "Sync"} <= set(fitting), fitting

    window.resize(1008, 720)  # a 1024x768 screen: the sidebar's names and counts again
    qtbot.waitUntil(lambda: sidebar.width() == 230, timeout=5_000)
