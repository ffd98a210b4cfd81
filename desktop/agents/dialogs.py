"""The dialogs of Agents & stores: add an agent (its token shown once), and the three sharing actions."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..common.widgets import CheckedDialog, plain_label


class AddAgentDialog(CheckedDialog):
    """An agent's name and authority; the engine checks the name, and the dialog stays open with its reason
    (the name as typed) until one is accepted."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Add an agent", "An agent is a program that reads and saves knowledge here (Claude "
                         "Desktop, Cursor, OpenClaw …); its token is shown once, when it is added.", "Add", parent)
        self.name = QLineEdit()
        self.name.setPlaceholderText("lowercase letters, digits, - or _")
        self.owner = QCheckBox("Owner authority (its owner-private conversations reach the private partition)")
        self.owner.setChecked(True)
        self.add_field("Name", self.name)
        self.add_field("", self.owner)


class TokenDialog(QDialog):
    """Shows a new agent's token once, with a ready-to-paste MCP client configuration."""

    def __init__(self, result: dict[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Agent {result['agent']} added")
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.token = QLineEdit(result["token"])
        self.token.setReadOnly(True)
        self.token.setFont(mono)
        self.config = QPlainTextEdit(json.dumps(result["mcpConfig"], indent=2))
        self.config.setReadOnly(True)
        self.config.setFont(mono)
        copy_token = QPushButton("Copy token")
        copy_token.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.token.text()))
        copy_config = QPushButton("Copy configuration")
        copy_config.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.config.toPlainText()))
        layout = QVBoxLayout(self)
        layout.addWidget(plain_label("This token is shown once. It is also kept, readable by you only, in "
                                     f"{result['tokenFile']}, where the MCP bridge finds it."))
        layout.addWidget(self.token)
        layout.addWidget(copy_token)
        layout.addWidget(plain_label("Paste into your MCP client's configuration (Claude Desktop, Claude Code, Cursor, "
                                     "Codex ...); the engine must be running:"))
        layout.addWidget(self.config)
        layout.addWidget(copy_config)
        done = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        done.rejected.connect(self.reject)
        layout.addWidget(done)


class ShareStoreDialog(QDialog):
    """Share this store: the agent's isolated store becomes a named store (renamed, not copied)."""

    def __init__(self, agent: str, candidates: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Share {agent}'s store")
        self.name = QLineEdit()
        self.name.setPlaceholderText("e.g. team (lowercase letters, digits, - or _)")
        self.label = QLineEdit()
        self.label.setPlaceholderText("shown to people; defaults to the name")
        box = QGroupBox("Also use it for")
        box_layout = QVBoxLayout(box)
        self.others = {name: QCheckBox(name) for name in candidates}
        for check in self.others.values():
            box_layout.addWidget(check)
        if not candidates:
            box_layout.addWidget(plain_label("no other agents yet"))
        form = QFormLayout(self)
        form.addRow(plain_label(f"{agent}'s isolated store is renamed into the named store, not copied. Agents added "
                                "here switch to it; nothing of theirs is moved or merged."))
        form.addRow("Store name", self.name)
        form.addRow("Label", self.label)
        form.addRow(box)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Share this store")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def chosen_others(self) -> list[str]:
        return [name for name, check in self.others.items() if check.isChecked()]


class UseSharedStoreDialog(QDialog):
    """Use shared store: move an agent to an existing named store; nothing is moved or merged."""

    def __init__(self, agent: str, names: list[tuple[str, str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Use a shared store for {agent}")
        self.store = QComboBox()
        for name, label in names:
            self.store.addItem(f"{label} ({name})" if label != name else name, name)
        form = QFormLayout(self)
        form.addRow(plain_label(f"{agent} will read and save in the chosen store. Nothing from its current store is "
                                "moved or merged; the current store stays listed."))
        form.addRow("Named store", self.store)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Use shared store")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def chosen(self) -> str:
        return self.store.currentData()
