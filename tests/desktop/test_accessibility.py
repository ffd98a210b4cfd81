"""The window for an owner who uses a screen reader or the keyboard alone: every control says what it is for,
and Tab goes through the window in reading order."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractButton, QAbstractScrollArea, QComboBox, QGroupBox, QLabel,
                               QStackedWidget, QTabBar, QTabWidget, QWidget)

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


def unnamed_controls(window: Any) -> dict[str, QWidget]:
    """Every control the keyboard reaches in any view or tab of ``window`` that has neither visible text nor
    an accessible name, by where it is."""
    found: dict[int, QWidget] = {}
    for stack in window.findChildren(QStackedWidget):
        for page in range(stack.count()):
            _reveal(window, stack.widget(page))
            for widget in window.findChildren(QWidget):
                if (widget.isVisible() and widget.focusPolicy() & Qt.FocusPolicy.TabFocus
                        and widget.focusProxy() is None and not _inner_part(widget)):
                    found[id(widget)] = widget
    return {_where(widget): widget for widget in found.values()
            if not widget.accessibleName().strip() and not _visible_text(widget)}


def _where(widget: QWidget) -> str:
    """The widget's class, and the attribute that holds it in the nearest widget above that keeps it."""
    above = widget.parentWidget()
    while above is not None:
        names = [name for name, value in vars(above).items() if value is widget]
        if names:
            return f"{type(above).__name__}.{names[0]} ({type(widget).__name__})"
        above = above.parentWidget()
    return f"{type(widget).__name__} at {hex(id(widget))}"


def test_every_control_in_every_view_says_what_it_is_for(qtbot, connected_window) -> None:
    window = connected_window
    records = window.records_view
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    wait_for_signal(qtbot, records.page.sig_content_loaded,
                    lambda: records.open_record(records.recent_model.rows()[0]["id"]))

    unnamed = unnamed_controls(window)
    for where, widget in unnamed.items():
        print(where, widget.toolTip()[:60] if widget.toolTip() else "", getattr(widget, "placeholderText", lambda: "")())
    assert unnamed == {}
