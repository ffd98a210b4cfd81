"""Import… and Export…: bringing an owner's existing memory in, and a store out, from the window.

Both run in the engine as jobs (``operator/import``, ``operator/startExport``;
engine/importers/methods.py), followed with ``JobWatcher`` through
``EngineTasks``, so the window never reads the input or writes the archive
itself and stays usable meanwhile.  The import's progress bar is the job's
``done``/``total`` (conversations, notes, memories, files), its label the
item just finished; Cancel stops it between items, keeping what it imported
(importing the same input again finishes it and repeats nothing).  A bad
input is refused by the engine with the file and the place in it, and
nothing is written.  What the dialogs show at the end says what
``knowledge import`` and ``knowledge export`` print.
"""

from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.importers.summaries import export_summary, import_summary

from ..common.jobs import FINISHED, JobWatcher, progress_fraction
from ..common.widgets import plain_label
from ..tasks import EngineTasks

# format: (shown as, what to choose, is it a folder, the file filter when it is not)
FORMATS: dict[str, tuple[str, str, bool, str]] = {
    "chatgpt": ("ChatGPT data export", "the export's zip, its unzipped folder, or conversations.json", False,
                "ChatGPT export (*.zip *.json)"),
    "claude": ("Claude data export", "the export's zip, its unzipped folder, or conversations.json", False,
               "Claude export (*.zip *.json)"),
    "markdown": ("Markdown notes (Obsidian, basic-memory)", "the folder of notes", True, ""),
    "mem0": ("mem0 / OpenMemory export", "the JSON export (or OpenMemory's zip)", False,
             "mem0 export (*.json *.zip)"),
    "memory-core": ("Agent memory (MEMORY.md and daily notes)", "the agent's workspace folder", True, ""),
}
BAR_STEPS = 1000


def absolute(text: str) -> str:
    """The path the owner typed, made absolute (the engine reads it, from its own working directory)."""
    return os.path.abspath(os.path.expanduser(text.strip())) if text.strip() else ""


def job_progress_text(job: dict[str, Any]) -> str:
    """How far a running import is: ``12/40 conversations: <the item just finished>``."""
    state = job.get("state")
    progress = job.get("progress") or {}
    if state == "cancelling":
        return "Cancelling… (it stops after the item it is on)"
    if progress.get("total") is None:
        return progress.get("message") or "Starting…"
    item = progress.get("message")
    return (f"{int(progress.get('done') or 0):,}/{int(progress['total']):,} {progress.get('unit') or 'items'}"
            + (f": {item}" if item else ""))


def _bar(bar: QProgressBar, job: dict[str, Any]) -> None:
    fraction = progress_fraction(job)
    if job.get("state") in FINISHED:
        bar.setRange(0, BAR_STEPS)
        bar.setValue(BAR_STEPS if job.get("state") == "done" else bar.value())
    elif fraction is None:
        bar.setRange(0, 0)  # busy: the total is not known yet
    else:
        bar.setRange(0, BAR_STEPS)
        bar.setValue(round(fraction * BAR_STEPS))


class _JobDialog(QDialog):
    """What the import and export dialogs share: a job followed through ``JobWatcher``, a progress bar, a
    status line, a summary, a Close button, and the layout that holds them under the dialog's own form."""

    def __init__(self, tasks: EngineTasks, title: str, parent: QWidget | None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.tasks = tasks
        self.watcher = JobWatcher(tasks, self)
        self.progress = QProgressBar()
        self.progress.setRange(0, BAR_STEPS)
        self.progress.setValue(0)
        self.status = plain_label()
        self.status.setWordWrap(True)
        self.summary = plain_label()
        self.summary.setWordWrap(True)
        self.close_buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.close_buttons.rejected.connect(self.reject)

    def _lay_out(self, form: QFormLayout, *controls: QWidget) -> None:
        """The dialog's form, then its buttons beside the progress bar, the status, the summary, Close."""
        row = QHBoxLayout()
        for widget in controls:
            row.addWidget(widget)
        row.addWidget(self.progress, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(self.summary)
        layout.addWidget(self.close_buttons)

    def reject(self) -> None:
        """Close: a job still running goes on in the engine; only cancelling stops it."""
        self.watcher.stop()
        super().reject()


def _path_row(edit: QLineEdit, button: QPushButton) -> QHBoxLayout:
    row = QHBoxLayout()
    row.addWidget(edit, 1)
    row.addWidget(button)
    return row


class ImportDialog(_JobDialog):
    """Choose a format, the file or folder, the receiving agent, a dry run; follow the engine's job."""

    sig_import_finished = Signal(object)
    """The import job ended (done, failed or cancelled); the argument is the job."""

    def __init__(self, tasks: EngineTasks, agents: list[str], agent: str | None,
                 parent: QWidget | None = None) -> None:
        super().__init__(tasks, "Import", parent)
        self.watcher.sig_job_updated.connect(self._on_job_updated)
        self.watcher.sig_job_finished.connect(self._on_job_finished)

        self.format = QComboBox()
        for name, (shown, _, _, _) in FORMATS.items():
            self.format.addItem(shown, name)
        self.format.currentIndexChanged.connect(self._on_format_chosen)
        self.path = QLineEdit()
        self.path.textChanged.connect(lambda _: self._update_buttons())
        self.choose_button = QPushButton("C&hoose…")
        self.choose_button.clicked.connect(self.choose_path)
        self.agent = QComboBox()
        self.agent.setEditable(True)  # a new name: the import registers it as an owner agent
        self.agent.addItems(agents or ["main"])
        self.agent.setCurrentText(agent or (agents[0] if agents else "main"))
        self.agent.setToolTip("The owner agent whose store receives the import; a new name is registered as one")
        self.dry_run = QCheckBox("&Dry run: check the input and count what it would create; write nothing")
        self.dry_run.toggled.connect(lambda _: self._update_buttons())
        self.start_button = QPushButton("&Import")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Ca&ncel import")
        self.cancel_button.setToolTip("Stops after the item it is on; what was imported stays, and importing "
                                      "the same input again finishes it")
        self.cancel_button.clicked.connect(self.watcher.cancel)
        self.cancel_button.setEnabled(False)
        form = QFormLayout()
        format_label = plain_label("F&ormat")
        format_label.setBuddy(self.format)
        form.addRow(format_label, self.format)
        self.path_label = plain_label()
        self.path_label.setBuddy(self.path)
        form.addRow(self.path_label, _path_row(self.path, self.choose_button))
        form.addRow("Into the &store of", self.agent)
        form.addRow(self.dry_run)
        self._lay_out(form, self.start_button, self.cancel_button)
        self._on_format_chosen()
        # An import started earlier (the dialog closed meanwhile) still running in the engine: follow it.
        tasks.request("operator/jobs", {"kind": "import"}, self._on_jobs, on_error=lambda _: None, owner=self)

    def _on_jobs(self, result: dict[str, Any]) -> None:
        running = [job for job in result.get("jobs") or [] if job.get("state") in ("running", "cancelling")]
        if running and not self.watcher.running:
            self.summary.setText(f"Still running in the engine: {running[0].get('title')}")
            self._set_running(True)
            self.watcher.follow(running[0])

    def chosen_format(self) -> str:
        return self.format.currentData()

    def set_format(self, name: str) -> None:
        self.format.setCurrentIndex(self.format.findData(name))

    def _on_format_chosen(self, _index: int = 0) -> None:
        _, what, folder, _ = FORMATS[self.chosen_format()]
        self.path_label.setText("&Folder" if folder else "&File")
        self.path.setPlaceholderText(what)
        self._update_buttons()

    def choose_path(self) -> None:
        _, what, folder, filter_ = FORMATS[self.chosen_format()]
        if folder:
            chosen = QFileDialog.getExistingDirectory(self, f"Choose {what}", self.path.text())
        else:
            chosen, _ = QFileDialog.getOpenFileName(self, f"Choose {what}", self.path.text(),
                                                    f"{filter_};;All files (*)")
        if chosen:
            self.path.setText(chosen)

    def params(self) -> dict[str, Any]:
        return {"format": self.chosen_format(), "path": absolute(self.path.text()),
                "agent": self.agent.currentText().strip() or None, "dryRun": self.dry_run.isChecked()}

    def start(self) -> None:
        if self.watcher.running or not self.path.text().strip():
            return
        self.summary.clear()
        self.status.setText("Starting…")
        self._set_running(True)
        self.watcher.start("operator/import", self.params(), on_error=self._on_refused)

    def _set_running(self, running: bool) -> None:
        for widget in (self.format, self.path, self.choose_button, self.agent, self.dry_run):
            widget.setEnabled(not running)
        self.start_button.setEnabled(not running and bool(self.path.text().strip()))

    def _update_buttons(self) -> None:
        running = self.watcher.running
        self.start_button.setEnabled(not running and bool(self.path.text().strip()))
        self.start_button.setText("&Check" if self.dry_run.isChecked() else "&Import")

    def _on_refused(self, message: str) -> None:  # the engine refused to start it (a parameter)
        self.status.setText(f"Not imported: {message}")
        self._set_running(False)

    def _on_job_updated(self, job: dict[str, Any]) -> None:
        _bar(self.progress, job)
        self.cancel_button.setEnabled(job.get("state") == "running")
        if job.get("state") not in FINISHED:
            self.status.setText(job_progress_text(job))

    def _on_job_finished(self, job: dict[str, Any]) -> None:
        state = job.get("state")
        if state == "done":
            self.status.setText("Finished.")
            self.summary.setText(import_summary(job.get("result") or {}))
        elif state == "cancelled":
            self.status.setText(f"Cancelled: {job_progress_text({**job, 'state': 'running'})}. What was imported "
                                "stays; import the same input again to finish it (nothing is imported twice).")
        else:
            error = job.get("error") or {}
            self.status.setText(f"Not imported: {error.get('message') or 'the engine gave no reason'}")
        self._set_running(False)
        self.cancel_button.setEnabled(False)
        self.sig_import_finished.emit(job)


class ExportDialog(_JobDialog):
    """Choose a store, the archive file and whether to include the git history; the engine writes it."""

    sig_export_finished = Signal(object)
    """The export job ended; the argument is the job."""

    def __init__(self, tasks: EngineTasks, stores: list[dict[str, Any]], store_id: str | None,
                 parent: QWidget | None = None) -> None:
        super().__init__(tasks, "Export a store", parent)
        self.watcher.sig_job_updated.connect(lambda job: _bar(self.progress, job))
        self.watcher.sig_job_finished.connect(self._on_job_finished)

        self.store = QComboBox()
        for store in stores:
            if store.get("storeId"):  # a named store no member has used yet has nothing to export
                self.store.addItem(store_label(store), store["storeId"])
        if store_id is not None and self.store.findData(store_id) >= 0:
            self.store.setCurrentIndex(self.store.findData(store_id))
        self.out = QLineEdit()
        self.out.setPlaceholderText("the archive to write, a new .zip file")
        self.out.textChanged.connect(lambda _: self._update_buttons())
        self.choose_button = QPushButton("C&hoose…")
        self.choose_button.clicked.connect(self.choose_out)
        self.with_history = QCheckBox("Include the vault's &git history")
        self.start_button = QPushButton("&Export")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        self.status.setText("The archive holds the store's records, retained sources, ontology and kept "
                            "revisions, never a token; `knowledge import archive` restores it.")
        form = QFormLayout()
        form.addRow("&Store", self.store)
        out_label = plain_label("&Archive")
        out_label.setBuddy(self.out)
        form.addRow(out_label, _path_row(self.out, self.choose_button))
        form.addRow(self.with_history)
        self._lay_out(form, self.start_button)
        self._update_buttons()

    def choose_out(self) -> None:
        chosen, _ = QFileDialog.getSaveFileName(self, "Export to", self.out.text(),
                                                "Knowledge archive (*.zip);;All files (*)")
        if chosen:
            self.out.setText(chosen if chosen.endswith(".zip") else chosen + ".zip")

    def params(self) -> dict[str, Any]:
        return {"out": absolute(self.out.text()), "store": self.store.currentData(),
                "withHistory": self.with_history.isChecked()}

    def start(self) -> None:
        if self.watcher.running or not self._ready():
            return
        self.summary.clear()
        self.status.setText("Writing the archive…")
        self._set_running(True)
        self.watcher.start("operator/startExport", self.params(), on_error=self._on_refused)

    def _ready(self) -> bool:
        return bool(self.out.text().strip()) and self.store.currentData() is not None

    def _set_running(self, running: bool) -> None:
        for widget in (self.store, self.out, self.choose_button, self.with_history):
            widget.setEnabled(not running)
        self.start_button.setEnabled(not running and self._ready())

    def _update_buttons(self) -> None:
        self.start_button.setEnabled(not self.watcher.running and self._ready())

    def _on_refused(self, message: str) -> None:
        self.status.setText(f"Not exported: {message}")
        self._set_running(False)

    def _on_job_finished(self, job: dict[str, Any]) -> None:
        if job.get("state") == "done":
            self.status.setText("Finished.")
            self.summary.setText(export_summary(job.get("result") or {}))
        else:
            error = job.get("error") or {}
            self.status.setText(f"Not exported: {error.get('message') or job.get('state')}")
        self._set_running(False)
        self.sig_export_finished.emit(job)


def store_label(store: dict[str, Any]) -> str:
    """A store as the owner knows it: a named store by its label, an agent's own by the agent."""
    if store.get("kind") == "named":
        return f"{store.get('label') or store.get('name')} (shared store {store.get('name')})"
    owner = store.get("owner")
    return f"{owner}'s own store" if owner else f"unassigned store {store['storeId']}"
