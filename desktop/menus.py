"""The window's menu bar: every action in a named menu, with its shortcut, in a fixed menu order.

``MenuBar.add(menu, action)`` puts a ``QAction`` into the named menu
(creating the menu in its place in ``MENU_ORDER``; a name not listed goes
before Help) and onto the window, so its shortcut works wherever focus is
in the window. A feature adds its own actions with one call each and never
touches the others. *Keyboard shortcuts* (Help) lists what the menus hold,
so it stays true as actions are added.

Only File has an Alt mnemonic (Alt+F): the views already use most letters
for their own buttons and tabs (Alt+S, Alt+H ...), and from an open menu
the arrow keys reach every other one.
"""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QMainWindow,
    QMenu,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

MENU_ORDER = ("File", "Edit", "View", "Records", "Engine", "Help")
TITLES = {"File": "&File"}  # the one mnemonic (see the module docstring)


class MenuBar:
    """Named menus on a main window's menu bar; ``add`` is how every feature contributes an action."""

    def __init__(self, window: QMainWindow) -> None:
        self.window = window
        self.bar = window.menuBar()
        self.menus: dict[str, QMenu] = {}

    def menu(self, name: str) -> QMenu:
        """The menu called ``name``, made in its place in ``MENU_ORDER`` the first time."""
        if name in self.menus:
            return self.menus[name]
        made = QMenu(TITLES.get(name, name), self.bar)
        made.setObjectName(f"menu{name.replace(' ', '')}")
        made.menuAction().setObjectName(f"menu{name.replace(' ', '')}Action")
        after = self._rank(name)
        later = [other for other in self.menus if self._rank(other) > after]
        if not later:
            self.bar.addMenu(made)
        else:
            self.bar.insertMenu(self.menus[min(later, key=self._rank)].menuAction(), made)
        self.menus[name] = made
        return made

    def _rank(self, name: str) -> float:
        if name in MENU_ORDER:
            return MENU_ORDER.index(name)
        return MENU_ORDER.index("Help") - 0.5  # unknown menus sit just before Help, in the order they came

    def add(self, menu: str, action: QAction, *, separator_before: bool = False) -> QAction:
        """Put ``action`` into ``menu`` and onto the window (its shortcut then works anywhere in it)."""
        target = self.menu(menu)
        if separator_before and target.actions():
            target.addSeparator()
        target.addAction(action)
        self.window.addAction(action)
        return action

    def action(self, menu: str, text: str, slot: Callable[..., Any], shortcut: QKeySequence | str | None = None,
               *, tip: str | None = None, separator_before: bool = False) -> QAction:
        """Make an action (text, shortcut, what it does) and add it to ``menu``."""
        made = QAction(text, self.window)
        if shortcut is not None:
            made.setShortcut(QKeySequence(shortcut))
        if tip:
            made.setStatusTip(tip)
            made.setToolTip(tip)
        made.triggered.connect(slot)
        return self.add(menu, made, separator_before=separator_before)

    def shortcuts(self) -> list[tuple[str, str, str]]:
        """Every action in the menus with a shortcut: (menu, action text, shortcut), in menu order."""
        rows: list[tuple[str, str, str]] = []
        for name in sorted(self.menus, key=self._rank):
            rows.extend(_shortcuts_in(name, self.menus[name]))
        return rows


def _shortcuts_in(path: str, menu: QMenu) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    for action in menu.actions():
        if action.menu() is not None:
            rows.extend(_shortcuts_in(f"{path} › {plain(action.text())}", action.menu()))
        elif not action.isSeparator() and not action.shortcut().isEmpty():
            rows.append((path, plain(action.text()),
                         action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)))
    return rows


def plain(text: str) -> str:
    """An action's text without its mnemonic marker (``&&`` stays a literal ``&``)."""
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&")


class ShortcutsDialog(QDialog):
    """Every shortcut the menus hold, read from the menus themselves."""

    def __init__(self, rows: list[tuple[str, str, str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.table = QTableWidget(len(rows), 3)
        self.table.setHorizontalHeaderLabels(["Menu", "Action", "Shortcut"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setTabKeyNavigation(False)  # Tab goes on to Close, as in every table
        for number, row in enumerate(rows):
            for column, text in enumerate(row):
                self.table.setItem(number, column, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setStretchLastSection(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table, 1)
        layout.addWidget(buttons)
        self.resize(560, 520)
