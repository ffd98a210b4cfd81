"""The owner's settings: the search_knowledge switch, writes, and the workspace roots attachments may read.

The form holds the settings the engine reported (``operator/inventory``)
and sends all of them at once (``operator/setSettings``); the engine checks
every value before it writes config.json, so a refused value (a relative
path, '..', a folder that does not exist) is said in the dialog, which stays
open with the edit, and nothing changes.  Settings changed meanwhile (with
``knowledge settings``, or in the Agents view) reach the form, in every field
the owner has not edited here: Save never puts back a value it did not show.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..common.widgets import plain_label
from ..tasks import EngineTasks


class SettingsDialog(QDialog):
    sig_settings_loaded = Signal(object)
    """The engine's settings arrived and fill the form."""

    sig_settings_saved = Signal(object)
    """The engine accepted and wrote the settings (the fresh inventory)."""

    sig_save_refused = Signal(str)
    """The engine refused a value (its message); nothing was written."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self._loaded: dict[str, Any] | None = None  # the engine's values the form was last filled with
        self._problem_said = False  # the message says config.json has a problem
        self.setWindowTitle("Settings")
        self.resize(640, 480)
        self.search_knowledge = QCheckBox("Offer search_knowledge to agents (the Knowledge Base search; "
                                          "knowledgeRuntimeEnabled)")
        self.writes = QCheckBox("Agents may save knowledge (writesEnabled; off: the save tools are withdrawn)")
        roots_box = QGroupBox("Workspace roots: folders knowledge_attach_file may read files from")
        self.roots = QListWidget()
        self.new_root = QLineEdit()
        self.new_root.setPlaceholderText("an absolute folder path, e.g. /home/me/projects")
        self.new_root.returnPressed.connect(self.add_root)
        add = QPushButton("Add")
        add.clicked.connect(self.add_root)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_root)
        roots_layout = QVBoxLayout(roots_box)
        roots_layout.addWidget(plain_label("None: agents attach files as base64 (knowledge_attach) only."))
        roots_layout.addWidget(self.roots)
        row = QHBoxLayout()
        row.addWidget(self.new_root, 1)
        row.addWidget(add)
        row.addWidget(browse)
        row.addWidget(self.remove_button)
        roots_layout.addLayout(row)
        self.message = plain_label()
        self.message.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Close)
        self.save_button = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        self.save_button.setEnabled(False)
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.search_knowledge)
        layout.addWidget(self.writes)
        layout.addWidget(roots_box, 1)
        layout.addWidget(self.message)
        layout.addWidget(self.buttons)
        self.load()

    def load(self) -> None:
        self.message.setText("Asking the engine…")
        self.tasks.request("operator/inventory", None, self._on_loaded,
                           on_error=lambda message: self.message.setText(f"Problem: {message}"), owner=self)

    def _on_loaded(self, inventory: dict[str, Any]) -> None:
        self._fill(inventory["settings"])
        self._say_problem(inventory["settings"])
        self.save_button.setEnabled(True)
        self.sig_settings_loaded.emit(inventory["settings"])

    @Slot(object)
    def follow(self, inventory: dict[str, Any]) -> None:
        """The engine's settings now (another window, the CLI): each field not edited here shows them."""
        if self._loaded is None:
            return  # the form's own load is on its way, and brings the newest
        engine, shown, before = _values(inventory["settings"]), self.values(), self._loaded
        self._fill({**inventory["settings"], **{key: shown[key] for key in shown if shown[key] != before[key]}})
        self._loaded = engine
        if inventory["settings"].get("problem") or self._problem_said:  # said, or no longer so
            self._say_problem(inventory["settings"])

    def _fill(self, settings: dict[str, Any]) -> None:
        self._loaded = _values(settings)
        self.search_knowledge.setChecked(bool(settings["knowledgeRuntimeEnabled"]))
        self.writes.setChecked(bool(settings["writesEnabled"]))
        self.roots.clear()
        self.roots.addItems(settings.get("workspaceRoots") or [])

    def _say_problem(self, settings: dict[str, Any]) -> None:
        problem = settings.get("problem")
        self._problem_said = bool(problem)
        self.message.setText(f"config.json has a problem: {problem} (the last valid settings stay in force)"
                             if problem else "")

    # --- editing ---------------------------------------------------------------------------------

    def add_root(self) -> None:
        path = self.new_root.text().strip()
        if path and path not in self.workspace_roots():
            self.roots.addItem(path)  # the engine checks it on Save
        self.new_root.clear()

    def remove_root(self) -> None:
        for item in self.roots.selectedItems():
            self.roots.takeItem(self.roots.row(item))

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "A workspace root")
        if path:
            self.new_root.setText(path)
            self.add_root()

    def workspace_roots(self) -> list[str]:
        return [self.roots.item(row).text() for row in range(self.roots.count())]

    def values(self) -> dict[str, Any]:
        return {"knowledgeRuntimeEnabled": self.search_knowledge.isChecked(), "writesEnabled": self.writes.isChecked(),
                "workspaceRoots": self.workspace_roots()}

    def save(self) -> None:
        self.message.setText("Saving…")
        self.tasks.request("operator/setSettings", self.values(), self._on_saved, on_error=self._on_refused,
                           owner=self)

    def _on_saved(self, inventory: dict[str, Any]) -> None:
        self._fill(inventory["settings"])
        self.message.setText("Saved: the engine applies them from the next request on.")
        self.sig_settings_saved.emit(inventory)

    def _on_refused(self, message: str) -> None:
        self.message.setText(f"Not saved: {message}")  # the form keeps the edit to correct
        self.sig_save_refused.emit(message)


def _values(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings the form edits, as ``SettingsDialog.values`` gives them."""
    return {"knowledgeRuntimeEnabled": bool(settings["knowledgeRuntimeEnabled"]),
            "writesEnabled": bool(settings["writesEnabled"]),
            "workspaceRoots": list(settings.get("workspaceRoots") or [])}
