"""The window for an owner who uses a screen reader or the keyboard alone: every control says what it is for,
and Tab goes through the window in reading order."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractButton, QApplication, QComboBox, QGroupBox, QLabel, QStackedWidget, QTabBar,
                               QTabWidget, QWidget)

from tests.desktop.conftest import wait_for_signal


def _reveal(window: Any, widget: QWidget) -> None:
    """``widget`` shown: each stack above it (a tab, a view of the window) turned to it."""
    chain = []
    while widget is not None and widget is not window:
        chain.append(widget)
        widget = widget.parentWidget()
    for child in reversed(chain):
        stack = child.parentWidget()
        if not isinstance(stack, QStackedWidget) or stack.indexOf(child) < 0:
            continue
        if stack is window.stack:
            window.show_view(window.views.index(child))
        elif isinstance(stack.parentWidget(), QTabWidget):
            stack.parentWidget().setCurrentWidget(child)
        else:
            stack.setCurrentWidget(child)


def _visible_text(widget: QWidget) -> str:
    """What the widget says of itself on screen: a button's or a label's text, a group's title, a tab bar's tabs;
    for a field, the text of the label that names it (its buddy: what a screen reader reads for it)."""
    if isinstance(widget, QAbstractButton):
        return widget.text().replace("&", "").strip()
    if isinstance(widget, QLabel):
        return widget.text().strip()
    if isinstance(widget, QGroupBox):
        return widget.title().strip()
    if isinstance(widget, QTabBar):
        tabs = [widget.tabText(n).strip() for n in range(widget.count())]
        return " ".join(tabs) if all(tabs) else ""
    buddies = [label for label in widget.window().findChildren(QLabel) if label.buddy() is widget]
    return " ".join(label.text().replace("&", "").strip() for label in buddies)


def _inner_part(widget: QWidget) -> bool:
    """A part Qt makes inside a control (a spin box's line edit, a combo box's list, a tab bar's scroll
    buttons): the control it belongs to is what the owner reaches and hears."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QComboBox):
            return True
        parent = parent.parentWidget()
    name = widget.objectName()
    return name.startswith("qt_") and name != "qt_tabwidget_tabbar" or name in ("ScrollLeftButton",
                                                                                  "ScrollRightButton")


def reachable_controls(window: Any) -> list[QWidget]:
    """Every control the keyboard reaches (a Tab stop) in any view and tab of ``window``, each shown in turn."""
    found: dict[int, QWidget] = {}
    for stack in window.findChildren(QStackedWidget):
        for page in range(stack.count()):
            _reveal(window, stack.widget(page))
            found.update((id(widget), widget) for widget in _tab_stops(window))
    return list(found.values())


def _tab_stops(within: QWidget) -> list[QWidget]:
    return [widget for widget in within.findChildren(QWidget)
            if widget.isVisible() and widget.focusPolicy() & Qt.FocusPolicy.TabFocus
            and widget.focusProxy() is None and not _inner_part(widget)]


def _where(widget: QWidget) -> str:
    """The widget's class, and the attribute that holds it in the nearest widget above that keeps it."""
    above = widget.parentWidget()
    while above is not None:
        names = [name for name, value in vars(above).items() if value is widget]
        if names:
            return f"{type(above).__name__}.{names[0]} ({type(widget).__name__})"
        above = above.parentWidget()
    return f"{type(widget).__name__} at {hex(id(widget))}"


def _record_shown(qtbot: Any, window: Any) -> None:
    records = window.records_view
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    wait_for_signal(qtbot, records.page.sig_content_loaded,
                    lambda: records.open_record(records.recent_model.rows()[0]["id"]))


def test_every_control_in_every_view_and_tab_says_what_it_is_for(qtbot, connected_window) -> None:
    """A list, a field, a choice or a pane of text has an accessible name in the owner's words (or the label
    that names it on screen); a button, a box or a tab says what it does in its own text."""
    window = connected_window
    _record_shown(qtbot, window)

    reached = reachable_controls(window)

    records, gate = window.records_view, window.gate_view
    assert {id(widget) for widget in (window.navigation, window.agent_picker, records.query, records.search_table,
                                      records.folders_tree, records.page.body, records.page.history_table,
                                      window.sync_view.conflicts_table)} <= {id(widget) for widget in reached}
    assert len(reached) > 100  # every view and every tab in it, those inside another tab too
    unnamed = sorted(_where(widget) for widget in reached
                     if not widget.accessibleName().strip() and not _visible_text(widget))
    assert unnamed == []
    assert records.page.body.accessibleName() == "Note" and window.navigation.accessibleName() == "Views"
    more = [button for button in gate.findChildren(QAbstractButton) if button.text() == "More…"]
    assert len(more) >= 10 and len({button.accessibleName() for button in more}) == len(more)  # each its own
    assert all(button.accessibleName().startswith("More about ") for button in more)


def _tab_round(qtbot: Any, window: Any) -> list[QWidget]:
    """The controls Tab goes through from the toolbar's agent picker until it comes back to it (a text pane with
    links takes a Tab for each, as a browser does, then lets the next go on)."""
    window.activateWindow()
    window.agent_picker.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is window.agent_picker)
    went: list[QWidget] = []
    for _ in range(500):
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        now = QApplication.focusWidget()
        if now is window.agent_picker:
            return went
        if went and now is went[-1]:
            continue  # the next link in the same pane
        assert now not in went, f"Tab came back to {_where(now)} before the agent picker"
        went.append(now)
    raise AssertionError("Tab never came back to the agent picker")


def test_tab_goes_through_each_view_in_reading_order_and_back_to_the_toolbar(qtbot, connected_window) -> None:
    """From the toolbar, Tab goes to the views' list, then through the view shown from the top left down, every
    control of it once, and back to the toolbar: none is out of reach, none holds the keyboard."""
    window = connected_window
    _record_shown(qtbot, window)
    records, page = window.records_view, window.records_view.page

    window.show_view(window.views.index(records))
    assert _tab_round(qtbot, window) == [
        window.navigation, records.modes.tabBar(), records.recent_table, records.show_links["recent"],
        records.include_all, page.header, page.request_button, page.graph_button, page.tabs.tabBar(), page.body,
        page.details]
    records.modes.setCurrentIndex(2)  # Search
    went = _tab_round(qtbot, window)
    assert went[:6] == [window.navigation, records.modes.tabBar(), records.query, records.search_mode,
                        went[4], records.search_table] and went[4].text() == "&Search"

    for number, view in enumerate(window.views):
        window.show_view(number)
        went = _tab_round(qtbot, window)
        stops = [widget for widget in _tab_stops(view) if widget.isEnabled()]
        assert went[0] is window.navigation and {id(widget) for widget in went[1:]} == {id(w) for w in stops}, (
            view.title, [_where(widget) for widget in went], [_where(widget) for widget in stops])


def test_an_empty_list_says_to_a_screen_reader_what_it_paints(qtbot) -> None:
    """What an empty table paints ("No agents yet. Add one with Add agent…") is its accessible description too,
    after what it is for; once it has rows, what it is for alone."""
    from desktop.common.models import Column, RowsModel
    from desktop.common.widgets import named, table

    model = RowsModel([Column("Name", lambda row: row["name"])])
    agents = named(table(model), "Agents", "Every registered agent")
    qtbot.addWidget(agents)
    agents.set_empty_text("No agents yet. Add one with Add agent… (Ctrl+N).")
    assert agents.accessibleDescription() == "Every registered agent. No agents yet. Add one with Add agent… (Ctrl+N)."
    model.set_loading()
    assert agents.accessibleDescription() == "Every registered agent. Loading…"
    model.set_rows([{"name": "main"}])
    assert agents.accessibleDescription() == "Every registered agent"
    model.set_rows([])
    assert agents.accessibleDescription().endswith("No agents yet. Add one with Add agent… (Ctrl+N).")
