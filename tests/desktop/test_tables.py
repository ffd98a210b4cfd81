"""Tables size their columns (every header readable, the search's Score and Snippet in view without
dragging anything) and empty ones say what is empty and what to do."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QPushButton

from desktop.common.models import Column, RowsModel
from desktop.common.widgets import NO_STORE_TEXT, DeskTable, table
from tests.desktop.conftest import wait_for_signal


@pytest.fixture
def window(connected_window):
    return connected_window


def in_view(view: DeskTable, column: int) -> bool:
    header = view.horizontalHeader()
    start = header.sectionViewportPosition(column)
    return start >= 0 and start + header.sectionSize(column) <= view.viewport().width()


def headers_readable(view: DeskTable) -> list[str]:
    """The headers narrower than their own text (an empty list when every header can be read)."""
    header, model = view.horizontalHeader(), view.model()
    return [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())
            if header.sectionSize(c) < header.sectionSizeHint(c)]


def test_search_results_show_score_and_snippet_without_dragging_a_splitter(qtbot, window) -> None:
    records = window.records_view
    window.show_view(window.views.index(records))
    records.query.setText("Atlas")
    wait_for_signal(qtbot, records.search_model.sig_page_loaded, records.search)
    results = records.search_table
    model = records.search_model
    columns = {model.headerData(n, Qt.Orientation.Horizontal): n for n in range(model.columnCount())}
    score, snippet = columns["Score"], columns["Snippet"]
    qtbot.waitUntil(lambda: in_view(results, score) and in_view(results, snippet), timeout=5_000)
    assert records.search_model.rowCount() > 0
    assert results.horizontalScrollBar().maximum() == 0  # nothing to scroll to
    assert results.horizontalHeader().sectionSize(snippet) >= 140  # the snippet has room to be read
    assert headers_readable(results) == []


def test_every_table_of_every_view_has_readable_headers(qtbot, window) -> None:
    checked = 0
    for number, view in enumerate(window.views):
        window.show_view(number)
        shown = [t for t in view.findChildren(DeskTable) if t.isVisible()]
        for made in shown:
            qtbot.waitUntil(lambda made=made: headers_readable(made) == [], timeout=5_000)
        checked += len(shown)
    assert checked >= 9  # a table or two in each view with tables (those in hidden tabs are fitted when shown)
    records = window.records_view
    for tab in range(records.modes.count()):
        records.modes.setCurrentIndex(tab)
        for made in (t for t in records.modes.currentWidget().findChildren(DeskTable) if t.isVisible()):
            qtbot.waitUntil(lambda made=made: headers_readable(made) == [], timeout=5_000)


def test_the_text_column_takes_the_spare_width_and_an_owners_drag_is_kept(qtbot) -> None:
    model = RowsModel([Column("Id", lambda r: r["id"]), Column("Summary", lambda r: r["text"], stretch=True),
                       Column("Score", lambda r: r["score"], align_right=True)])
    view = table(model)
    qtbot.addWidget(view)
    view.resize(700, 300)
    view.show()
    qtbot.waitExposed(view)
    model.set_rows([{"id": f"pg_{n}", "text": "word " * 200, "score": n / 10} for n in range(5)])
    qtbot.waitUntil(lambda: view.horizontalHeader().sectionSize(1) > 300, timeout=5_000)
    assert all(in_view(view, c) for c in (0, 2)) and view.horizontalScrollBar().maximum() == 0

    view.horizontalHeader().resizeSection(0, 200)  # the owner drags a column: a resize keeps it
    view.resize(800, 300)
    qtbot.waitUntil(lambda: view.width() == 800, timeout=5_000)
    assert view.horizontalHeader().sectionSize(0) == 200


def painted(view: DeskTable) -> int:
    """How many pixels of the empty viewport differ from its background (the empty state's words)."""
    image = QImage(view.viewport().size(), QImage.Format.Format_ARGB32)
    view.viewport().render(image)
    background = image.pixel(1, 1)
    return sum(1 for x in range(0, image.width(), 2) for y in range(0, min(image.height(), 120), 2)
               if image.pixel(x, y) != background)


def test_empty_views_say_what_is_empty_and_what_to_do(qtbot, window) -> None:
    records = window.records_view
    window.show_view(window.views.index(records))
    assert "press Enter to search main's records" in records.search_table.shown_empty_text()
    records.query.setText("zzqxv")
    wait_for_signal(qtbot, records.search_model.sig_page_loaded, records.search)
    assert records.search_model.rowCount() == 0
    assert records.search_table.shown_empty_text() == "No record of main matches \u201czzqxv\u201d. " \
                                                      "Try fewer or other words."
    qtbot.waitUntil(lambda: painted(records.search_table) > 20, timeout=5_000)  # the words are drawn
    records.search_table.set_empty_text("")
    assert painted(records.search_table) == 0
    assert "Choose a type above" in records.browse_table.shown_empty_text()
    assert window.records_view.page.history_table.shown_empty_text() == "Choose a record to see its revisions."

    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        window.agents_view.add_agent("helper", False)
    window.agents_view.dialog.close()
    window.agent_picker.setCurrentText("helper")
    assert window.agent == "helper"
    qtbot.waitUntil(lambda: not records.recent_model.loading, timeout=10_000)
    assert records.recent_model.rowCount() == 0
    # helper has not written yet, so it has no store: said calmly, never as a problem (test_stale_state.py)
    assert records.recent_table.shown_empty_text() == NO_STORE_TEXT
    window.show_view(window.views.index(window.approvals_view))
    qtbot.waitUntil(lambda: not window.approvals_view.model.loading, timeout=10_000)
    assert window.approvals_view.table.shown_empty_text() == NO_STORE_TEXT
    assert not (window.messages.isVisibleTo(window) and window.messages.error)


def test_an_empty_page_arriving_repaints_loading_as_what_is_empty(qtbot) -> None:
    """A lazy list whose first page comes back empty (no findings, say) paints its empty text at once: "Loading…"
    stayed on the screen until something else repainted the table."""
    from PySide6.QtCore import QEvent, QObject

    from desktop.common.models import PagedModel

    pending: list = []
    model = PagedModel([Column("Finding", lambda r: r.get("message"))])
    view = table(model)
    view.set_empty_text("No findings.")
    qtbot.addWidget(view)
    view.resize(400, 200)
    view.show()
    qtbot.waitExposed(view)
    painted: list[str] = []

    class Painted(QObject):
        def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt's name
            if event.type() == QEvent.Type.Paint:
                painted.append(view.shown_empty_text())
            return False

    watcher = Painted(view)
    view.viewport().installEventFilter(watcher)
    model.set_source(lambda token, deliver, fail: pending.append(deliver))
    qtbot.waitUntil(lambda: painted[-1:] == ["Loading…"], timeout=5_000)

    pending[0]([], None, 0)  # the engine's answer: nothing
    qtbot.waitUntil(lambda: painted[-1:] == ["No findings."], timeout=5_000)


def test_tab_leaves_a_list_for_the_next_control_and_the_arrows_walk_its_rows(qtbot, window) -> None:
    """Keyboard only: Tab in a list goes on to the control after it (Qt's tables walk their cells with Tab,
    so a list of thousands of rows held the keyboard), and Down moves to the next row."""
    records = window.records_view
    window.show_view(window.views.index(records))
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 3, timeout=10_000)
    window.activateWindow()
    qtbot.waitActive(window)
    window.navigation.setFocus()
    qtbot.keyClick(window.navigation, Qt.Key.Key_Tab)  # from the sidebar into the view, no stop between
    assert QApplication.focusWidget() is records.modes.tabBar()
    recent = records.recent_table
    recent.setFocus()
    recent.selectRow(0)
    qtbot.keyClick(recent, Qt.Key.Key_Down)
    assert recent.currentIndex().row() == 1
    qtbot.keyClick(recent, Qt.Key.Key_Tab)
    focused = QApplication.focusWidget()
    assert focused is not recent and not recent.isAncestorOf(focused), focused

    window.show_shortcuts()  # Help › Keyboard shortcuts: its list, then Close
    shortcuts = window.shortcuts_dialog.table
    window.shortcuts_dialog.activateWindow()
    qtbot.waitUntil(window.shortcuts_dialog.isActiveWindow, timeout=5_000)
    shortcuts.setFocus()
    qtbot.waitUntil(shortcuts.hasFocus, timeout=5_000)
    qtbot.keyClick(shortcuts, Qt.Key.Key_Tab)
    assert isinstance(QApplication.focusWidget(), QPushButton)
    window.shortcuts_dialog.close()
