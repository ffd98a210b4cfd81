"""Import… and Export…: bringing an owner's existing memory in, and a store out, from the window.

Both run in the engine as jobs (``operator/import``, ``operator/startExport``;
engine/importers/methods.py), followed with ``JobWatcher`` through
``EngineTasks``, so the window never reads the input or writes the archive
itself and stays usable meanwhile.  The import's status names the job's
phase (reading, checking, writing, linking, indexing) with the job's own
counts, its progress bar the phase's ``done``/``total`` (busy where the
phase has no total, and while indexing); Cancel is enabled only while the
job says it can be cancelled (``cancellable``: not in its last phase,
indexing, when everything is written), and stops it between items, keeping
what it imported (importing the same input again finishes it and repeats
nothing).  A bad input is refused by the engine with the file and the place
in it, and nothing is written.  What the dialogs show at the end says what
``knowledge import`` and ``knowledge export`` print, in a summary that
scrolls inside the dialog (which the owner can resize); an import's summary
then lists the notes whose pages' edits it kept (a Markdown folder imported
again after its pages were edited in the store, and likewise an agent
workspace's memory files; *Replace edits made in the store* takes the notes
instead), what was left out and why (a Markdown folder's unresolved links
and the notes whose frontmatter could not be read, note by note, each note a
link to its page) and links to what was made
(``sig_show_requested``: the main window opens Records on it, and sets the
dialog aside so that the owner sees it; File › Import… shows the dialog again
as it was, its summary with it, until the owner closes it).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Collection
from html import escape
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QShowEvent
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
    QTextBrowser,
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
    "markdown": ("Markdown notes (Obsidian, Logseq, basic-memory)", "the folder of notes", True, ""),
    "mem0": ("mem0 / OpenMemory export", "the JSON export (or OpenMemory's zip)", False,
             "mem0 export (*.json *.zip)"),
    "memory-core": ("Agent memory (MEMORY.md and daily notes)", "the agent's workspace folder", True, ""),
}
BAR_STEPS = 1000
SUMMARY_MIN_HEIGHT = 120  # px: a few lines of the summary; the rest scrolls
SUMMARY_SCREEN_SHARE = 0.7  # of the screen's height and width the dialog may grow to, to show its summary
SUMMARY_WIDTH_PX = 720  # the width it grows to for a summary (a note's path and its links on a line)
LEFT_OUT_SHOWN = 500  # notes listed with their unresolved links; the rest are counted
# The type of page each import makes, and what the owner calls those pages: the summary's link browses them,
# not every page of the store.
MADE_PAGES = {"chatgpt": ("source", "conversations"), "claude": ("source", "conversations and projects"),
              "memory-core": ("note", "memory notes")}
# The formats whose import leaves a page revised in the store since as it is (``keptEdits``), unless told to
# replace such edits (``replaceEdits``; engine/importers/formats.py, ``keeps_edits``).
KEEPS_EDITS = {"markdown", "memory-core"}


def absolute(text: str) -> str:
    """The path the owner typed, made absolute (the engine reads it, from its own working directory)."""
    return os.path.abspath(os.path.expanduser(text.strip())) if text.strip() else ""


# An import job's phases (engine/importers/methods.py), as the status names them.
PHASES = {"reading": "Reading", "checking": "Checking for credentials", "writing": "Writing",
          "linking": "Linking", "indexing": "Indexing for search"}
SHOW_SCHEME = "show"  # the summary's links to what was made: show:<agent>/record/<id>, .../browse/<kind>,
# .../folder/<an imported folder, URL-quoted>


def job_progress_text(job: dict[str, Any]) -> str:
    """How far a running import is, in its phase: ``Writing: 12/40 conversations: <the item just finished>``."""
    state = job.get("state")
    progress = job.get("progress") or {}
    if state == "cancelling":
        return "Cancelling… (it stops after the item it is on)"
    phase, item = progress.get("phase") or "", progress.get("message")
    done, total, unit = int(progress.get("done") or 0), progress.get("total"), progress.get("unit") or "items"
    if phase == "checking":
        return f"Checking for credentials: {done:,} {unit} checked" + (f": {item}" if item else "")
    if phase == "indexing":
        written = f": {int(total):,} {unit} written" if total is not None else ""
        return f"Indexing for search{written}; this last step cannot be cancelled"
    if total is None:
        return item or "Starting…"
    counted = f"{done:,}/{int(total):,} {unit}" + (" linked" if phase == "linking" else "")
    return (f"{PHASES[phase]}: " if phase in PHASES else "") + counted + (f": {item}" if item else "")


def can_cancel(job: dict[str, Any]) -> bool:
    """Whether Cancel can stop the job now: running, and not in a last phase that cannot stop."""
    return job.get("state") == "running" and (job.get("progress") or {}).get("cancellable") is not False


def _bar(bar: QProgressBar, job: dict[str, Any]) -> None:
    fraction = progress_fraction(job)
    if job.get("state") in FINISHED:  # done: full; cancelled or failed: as far as it got, as the words say
        kept = bar.value() if fraction is None else round(fraction * BAR_STEPS)
        bar.setRange(0, BAR_STEPS)
        bar.setValue(BAR_STEPS if job.get("state") == "done" else kept)
    elif fraction is None or (job.get("progress") or {}).get("phase") == "indexing":
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
        # The summary scrolls inside the dialog, however long (hundreds of unresolved links); the dialog grows
        # to show it when it arrives (``grow_to_summary``), and the owner can make it larger still.
        self.summary = QTextBrowser()
        self.summary.setOpenLinks(False)
        self.summary.setMinimumHeight(SUMMARY_MIN_HEIGHT)
        self.setSizeGripEnabled(True)
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
        layout.addWidget(self.summary, 1)
        layout.addWidget(self.close_buttons)

    def grow_to_summary(self) -> None:
        """The dialog made larger, once the summary arrives, to show as much of it as fits on the screen: at
        most ``SUMMARY_SCREEN_SHARE`` of its height and width (the rest scrolls; never made smaller)."""
        screen = self.screen()
        room = screen.availableGeometry() if screen is not None else None
        if room is None:
            return
        width = max(self.width(), min(SUMMARY_WIDTH_PX, int(room.width() * SUMMARY_SCREEN_SHARE)))
        self.summary.document().setTextWidth(self.summary.viewport().width() + width - self.width())
        wanted = self.summary.document().size().height() + 2 * self.summary.frameWidth() + 4
        height = max(self.height(), min(int(room.height() * SUMMARY_SCREEN_SHARE),
                                        int(self.height() - self.summary.height() + wanted)))
        self.resize(width, height)
        frame = self.frameGeometry()  # kept on the screen: moved up or left where it grew past the edge
        self.move(max(room.left(), min(frame.left(), room.right() - frame.width())),
                  max(room.top(), min(frame.top(), room.bottom() - frame.height())))

    def offer_close(self) -> None:
        """A job done: Enter closes the dialog (it ran the same job again: the whole input read once more to
        find nothing new), until the form is changed (``offer_start``)."""
        close = self.close_buttons.button(QDialogButtonBox.StandardButton.Close)
        close.setDefault(True)
        close.setFocus()

    def offer_start(self, start: QPushButton) -> None:
        """The form changed: Enter starts the job it now describes."""
        start.setDefault(True)

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

    sig_show_requested = Signal(str, str, str)
    """The owner followed a link of the summary: the agent, ``record``, ``folder`` or ``browse``, then the
    record's id, the folder, or the kind of record to browse (``page/source``: with its type)."""

    def __init__(self, tasks: EngineTasks, agents: list[str], agent: str | None,
                 parent: QWidget | None = None, *, not_owners: Collection[str] = ()) -> None:
        """``agents``: the owner agents, whose stores an import may go into; ``not_owners``: the other agents,
        refused by name before anything is read."""
        super().__init__(tasks, "Import", parent)
        self.not_owners = set(not_owners)
        self.kept_aside = False  # hidden while the owner follows a link of its summary
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
        self.agent.setCurrentText(agent if agent in agents else (agents[0] if agents else "main"))
        self.agent.setToolTip("The owner agent whose store receives the import; a new name is registered as one")
        self.dry_run = QCheckBox("&Dry run: check the input and count what it would create; write nothing")
        self.dry_run.toggled.connect(lambda _: self._update_buttons())
        self.replace_edits = QCheckBox("&Replace edits made in the store: a changed note or memory file gets its "
                                       "text even where its page was edited since")
        self.replace_edits.setToolTip("Without it, a note or memory file that changed since an earlier import "
                                      "is left as it is where its page was revised here since (by you or an "
                                      "agent), and the summary lists it; the edits stay in History either way")
        self.replace_edits.toggled.connect(lambda _: self._update_buttons())
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
        form.addRow(self.replace_edits)
        self._lay_out(form, self.start_button, self.cancel_button)
        self.summary.anchorClicked.connect(self._on_summary_link)
        self._on_format_chosen()
        # An import started earlier (the dialog closed meanwhile) still running in the engine: follow it.
        tasks.request("operator/jobs", {"kind": "import"}, self._on_jobs, on_error=lambda _: None, owner=self)

    def follow(self, inventory: dict[str, Any]) -> None:
        """The agents now (one added or removed meanwhile, here or with the CLI): the list follows, and what the
        owner chose or typed stays."""
        names = owner_agents(inventory) or ["main"]
        self.not_owners = {row["name"] for row in inventory.get("agents", [])} - set(names)
        if [self.agent.itemText(n) for n in range(self.agent.count())] == names:
            return
        chosen = self.agent.currentText()
        self.agent.clear()
        self.agent.addItems(names)
        self.agent.setCurrentText(chosen)

    def _on_jobs(self, result: dict[str, Any]) -> None:
        running = [job for job in result.get("jobs") or [] if job.get("state") in ("running", "cancelling")]
        if running and not self.watcher.running:
            self.summary.setPlainText(f"Still running in the engine: {running[0].get('title')}")
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
        self.replace_edits.setVisible(self.chosen_format() in KEEPS_EDITS)
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
        params = {"format": self.chosen_format(), "path": absolute(self.path.text()),
                  "agent": self.agent.currentText().strip() or None, "dryRun": self.dry_run.isChecked()}
        if self.chosen_format() in KEEPS_EDITS:  # the other formats have no edits to keep, and refuse it
            params["replaceEdits"] = self.replace_edits.isChecked()
        return params

    def start(self) -> None:
        if self.watcher.running or not self.path.text().strip():
            return
        self.summary.clear()
        agent = self.agent.currentText().strip()
        if agent in self.not_owners:
            self.status.setText(f"Not imported: {agent} is not an owner agent, and an import goes into an owner "
                                "agent's store. Choose one, or type a new name to register one.")
            return
        self.status.setText("Starting…")
        self._set_running(True)
        self.watcher.start("operator/import", self.params(), on_error=self._on_refused)

    def _set_running(self, running: bool) -> None:
        for widget in (self.format, self.path, self.choose_button, self.agent, self.dry_run, self.replace_edits):
            widget.setEnabled(not running)
        self.start_button.setEnabled(not running and bool(self.path.text().strip()))

    def _update_buttons(self) -> None:
        running = self.watcher.running
        self.start_button.setEnabled(not running and bool(self.path.text().strip()))
        self.start_button.setText("&Check" if self.dry_run.isChecked() else "&Import")
        self.offer_start(self.start_button)

    def _on_refused(self, message: str) -> None:  # the engine refused to start it (a parameter)
        self.status.setText(f"Not imported: {message}")
        self._set_running(False)

    def _on_job_updated(self, job: dict[str, Any]) -> None:
        _bar(self.progress, job)
        self.cancel_button.setEnabled(can_cancel(job))
        if job.get("state") not in FINISHED:
            self.status.setText(job_progress_text(job))

    def _on_job_finished(self, job: dict[str, Any]) -> None:
        state = job.get("state")
        if state == "done":
            self.status.setText("Finished.")
            self.summary.setHtml(import_summary_html(job.get("result") or {}))
            self.grow_to_summary()
            self.offer_close()
        elif state == "cancelled":
            self.status.setText(f"Cancelled: {job_progress_text({**job, 'state': 'running'})}. What was imported "
                                "stays; import the same input again to finish it (nothing is imported twice).")
        else:
            error = job.get("error") or {}
            self.status.setText(f"Not imported: {error.get('message') or 'the engine gave no reason'}")
        self._set_running(False)
        self.cancel_button.setEnabled(False)
        self.sig_import_finished.emit(job)

    def set_aside(self) -> None:
        """Hidden, with its summary, while the owner reads what a link of it shows; ``kept_aside`` stays true
        until it is shown again (File › Import… shows this dialog, not a new one)."""
        self.hide()
        self.kept_aside = True

    def showEvent(self, event: QShowEvent) -> None:
        self.kept_aside = False
        super().showEvent(event)

    def _on_summary_link(self, url: QUrl) -> None:
        if url.scheme() != SHOW_SCHEME:
            return
        agent, _, rest = url.path().partition("/")
        what, _, target = rest.partition("/")
        if what in ("record", "browse", "folder") and target:
            self.sig_show_requested.emit(agent, what, target)


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
        self._list_stores(stores, store_id)
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

    def _list_stores(self, stores: list[dict[str, Any]], store_id: str | None) -> None:
        self.store.clear()
        for store in stores:
            if store.get("storeId"):  # a named store no member has used yet has nothing to export
                self.store.addItem(store_label(store), store["storeId"])
        if store_id is not None and self.store.findData(store_id) >= 0:
            self.store.setCurrentIndex(self.store.findData(store_id))

    def follow(self, inventory: dict[str, Any]) -> None:
        """The stores now (an agent's made, one renamed or removed meanwhile): the list follows, and the store
        chosen stays chosen while it is there."""
        stores = inventory.get("stores", [])
        listed = [(self.store.itemText(n), self.store.itemData(n)) for n in range(self.store.count())]
        if listed == [(store_label(store), store["storeId"]) for store in stores if store.get("storeId")]:
            return
        self._list_stores(stores, self.store.currentData())
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
        self.offer_start(self.start_button)

    def _on_refused(self, message: str) -> None:
        self.status.setText(f"Not exported: {message}")
        self._set_running(False)

    def _on_job_finished(self, job: dict[str, Any]) -> None:
        if job.get("state") == "done":
            self.status.setText("Finished.")
            self.summary.setPlainText(export_summary(job.get("result") or {}))
            self.offer_close()
        else:
            error = job.get("error") or {}
            self.status.setText(f"Not exported: {error.get('message') or job.get('state')}")
        self._set_running(False)
        self.sig_export_finished.emit(job)


def import_summary_html(result: dict[str, Any]) -> str:
    """The import's summary (``import_summary``'s words), then a link to what was made, the notes whose pages'
    edits were kept, and what was left out and why: a Markdown folder's links that name nothing, and its notes
    whose frontmatter was not read, by note, each note a link to its page."""
    agent = result.get("agent") or ""
    pages = result.get("pages") if isinstance(result.get("pages"), dict) else {}
    made = (result.get("imported") or {}) if agent and not result.get("dryRun") else {}  # a dry run made nothing
    parts = [f"<p>{escape(line)}</p>" for line in import_summary(result).splitlines()]
    kind = "page" if made.get("pages") else "claim" if made.get("claims") else None
    folder = PurePath(result["folder"]).name if made and isinstance(result.get("folder"), str) else ""
    if folder:  # a Markdown folder: its notes as they were on disk
        parts.append(f'<p><a href="{SHOW_SCHEME}:{escape(agent)}/folder/{quote(folder)}">Show the notes of '
                     f"{escape(folder)} in Records</a> (Folders).</p>")
    elif kind == "page" and result.get("format") in MADE_PAGES:
        made_type, called = MADE_PAGES[result["format"]]
        parts.append(f'<p><a href="{SHOW_SCHEME}:{escape(agent)}/browse/page/{made_type}">Show the {called} in '
                     f"{escape(agent)}&#39;s store</a> (Records, Browse by type › {made_type}).</p>")
    elif kind is not None:
        parts.append(f'<p><a href="{SHOW_SCHEME}:{escape(agent)}/browse/{kind}">Show the {kind}s of '
                     f"{escape(agent)}&#39;s store in Records</a> (Browse by type).</p>")

    def link(path: str) -> str:
        return _note_link(agent, path, pages.get(path) if made else None)

    kept = {_kept_at(edit): edit for edit in result.get("keptEdits") or []}  # pages (or claims) made earlier

    # The edits kept come first: the owner decides whether the notes (or memory files) should replace them.
    memory_core = result.get("format") == "memory-core"
    inputs, records = ("memory files (or list items)", "pages (or claims)") if memory_core else ("notes", "pages")
    parts += _by_note("Kept your edits:", f"these {inputs} changed since an earlier import, but their {records} "
                      "were revised in the store since, so they were left as they are (the edits stay in History); "
                      f"import again with Replace edits made in the store to take the {inputs}' text anyway.",
                      {place: edit["why"] for place, edit in kept.items()},
                      lambda place: _note_link(agent, place, kept[place]["id"] if agent else None))
    # Notes whose frontmatter was lost come before the links left as text: the owner corrects those files.
    parts += _by_note("Frontmatter not read:", "these notes were imported with the title of their file name, their "
                      "frontmatter kept as written at the end of the page; correct it in the file and import again "
                      "to read it.", result.get("unreadFrontmatter") or {}, link)
    parts += _by_note("Fields not read:", "these notes were imported without the frontmatter fields named here, "
                      "kept at the end of the page; correct them in the file and import again to read them.",
                      result.get("unreadFields") or {}, link)
    parts += _by_note("Left out:", "these links name no note or file of the folder; they stay as text in the note.",
                      {path: link_list(links) for path, links in (result.get("unresolved") or {}).items()}, link)
    left_out = result.get("leftOut") or []
    if left_out:  # symbolic links, and whatever else the format does not read: the lines above say which
        parts.append("<p><b>Not imported</b> (the lines above say why):</p><ul>"
                     + "".join(f"<li>{escape(path)}</li>" for path in left_out) + "</ul>")
    return "".join(parts)


def _by_note(heading: str, said: str, notes: dict[str, str], link: Callable[[str], str]) -> list[str]:
    """A list of the summary, one line a note (a link to its page) with what is said of it, the first
    ``LEFT_OUT_SHOWN`` of them; nothing when ``notes`` is empty."""
    if not notes:
        return []
    parts = [f"<p><b>{escape(heading)}</b> {escape(said)}</p><ul>"]
    parts += [f"<li>{link(path)}: {escape(what)}</li>" for path, what in list(notes.items())[:LEFT_OUT_SHOWN]]
    parts.append("</ul>")
    if len(notes) > LEFT_OUT_SHOWN:
        parts.append(f"<p>… and {len(notes) - LEFT_OUT_SHOWN:,} more notes (knowledge import --json lists every "
                     "one).</p>")
    return parts


def _kept_at(edit: dict[str, Any]) -> str:
    """Where a kept edit's input is: a note's path, a memory file's (with the line of a list item whose claim
    was kept: ``MEMORY.md, line 4``)."""
    return f"{edit['path']}, line {edit['line']}" if isinstance(edit.get("line"), int) else edit["path"]


def _note_link(agent: str, path: str, page: Any) -> str:
    """A note of the summary by its path, a link to its page when the import made one."""
    if isinstance(page, str):
        return f'<a href="{SHOW_SCHEME}:{escape(agent)}/record/{escape(page)}">{escape(path)}</a>'
    return escape(path)


def owner_agents(inventory: dict[str, Any]) -> list[str]:
    """The owner agents of ``inventory``: an import writes into an owner agent's private partition."""
    return [row["name"] for row in inventory.get("agents", []) if row.get("owner")]


def link_list(links: list[str]) -> str:
    """A note's links that name nothing, each as the note writes it, once, in the order written, with how often
    it is written when more than once: ``[[File.base]] (2×), [2.3 电平](2.3%20电平.md)``."""
    counts = Counter(links)
    return ", ".join(link + (f" ({counts[link]}×)" if counts[link] > 1 else "") for link in counts)


def store_label(store: dict[str, Any]) -> str:
    """A store as the owner knows it: a named store by its label, an agent's own by the agent."""
    if store.get("kind") == "named":
        return f"{store.get('label') or store.get('name')} (shared store {store.get('name')})"
    owner = store.get("owner")
    return f"{owner}'s own store" if owner else f"unassigned store {store['storeId']}"
