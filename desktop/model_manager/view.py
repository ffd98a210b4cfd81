"""Models: installed and available models, downloads with progress and cancel, verification, and the benchmark.

Everything here happens in the engine: ``operator/models`` lists the
catalogue and the installed models with their sha256 verification;
``operator/pullModel`` and ``operator/benchmarkModel`` start engine jobs
(engine/core/jobs.py) that this view follows and may cancel; and
``operator/setModelSettings`` chooses which installed model the recall gate
(``decisionModel``) or semantic search (``embeddingModel``) uses.  Nothing
is downloaded except by the Download button.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QProgressBar,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from ..common.jobs import JobWatcher, progress_fraction, progress_text
from ..common.models import Column, Row, RowsModel
from ..common.widgets import heading, named, plain_label, table
from ..tasks import EngineTasks
from .benchmark import BenchmarkPanel

VERIFICATION = {"verified": "sha256 verified", "unverified": "unverified (registered, no published sha256)",
                "failed": "FAILED"}


# What an installed model is used for, in the owner's words (the config.json key on hover).
USES = {"decisionModel": "recall gate", "embeddingModel": "search"}


def megabytes(value: Any) -> str:
    return "unknown" if not value else f"{value / 1e6:,.1f} MB"


# A model's name (and a catalogue entry's variant) reads whole in a 1024-wide window: "gte-reranker-…" four times
# named nothing to choose between; so does what it is used for; the other columns give way (the table scrolls to
# them).
INSTALLED_COLUMNS = [
    Column("Model", lambda m: m.get("name"), whole=True),
    Column("Kind", lambda m: m.get("kind")),
    Column("Source", lambda m: m.get("source")),
    Column("Variant", lambda m: m.get("variant")),
    Column("Size", lambda m: megabytes(m.get("bytes")), align_right=True),
    Column("Verification", lambda m: VERIFICATION.get((m.get("verification") or {}).get("status"), "-"),
           tooltip=lambda m: (m.get("verification") or {}).get("message")),
    Column("Used as", lambda m: ", ".join(USES.get(key, key) for key in m.get("usedAs") or []) or "-",
           tooltip=lambda m: ", ".join(m.get("usedAs") or []) or None, whole=True),
    Column("Select as", lambda m: m.get("selectAs")),
    Column("Folder", lambda m: m.get("folder")),
]
AVAILABLE_COLUMNS = [
    Column("Model", lambda v: v.get("model"), whole=True),
    Column("Variant", lambda v: v.get("name") + (" (default)" if v.get("default") else ""), whole=True),
    Column("Kind", lambda v: v.get("kind")),
    Column("Download", lambda v: megabytes(v.get("bytes")), align_right=True),
    Column("Pullable", lambda v: "yes" if v.get("pullable") else "no: no pinned sha256 (or not ONNX)"),
    Column("Installed", lambda v: v.get("installed")),
    Column("License", lambda v: v.get("license")),
    Column("Note", lambda v: v.get("note") or v.get("description")),
]


def available_rows(report: dict[str, Any]) -> list[Row]:
    """One row per catalogue variant, with whether that exact variant is installed."""
    installed = {(m["name"], m.get("variant")) for m in report.get("installed") or []}
    return [{**variant, "model": entry["name"], "kind": entry["kind"], "license": entry["license"],
             "description": entry.get("description"), "default": variant["name"] == entry["defaultVariant"],
             "installed": (entry["name"], variant["name"]) in installed}
            for entry in report.get("catalogue") or [] for variant in entry["variants"]]


def status_text(report: dict[str, Any]) -> str:
    decision = report.get("decision") or {}
    line = f"Recall gate (decisionModel): {report.get('decisionModel') or 'none chosen'}"
    if report.get("decisionModel"):
        line += f" — {decision.get('state')}"
        if decision.get("tokensPerSecond"):
            line += f", {decision['tokensPerSecond']:,.0f} tokens/s measured at load"
        if decision.get("reason"):
            line += f": {decision['reason']}"
    line += f". Semantic search (embeddingModel): {report.get('embeddingModel') or 'off'}."
    for key in ("manifestProblem", "configProblem"):
        if report.get(key):
            line += f" Problem: {report[key]}"
    return line


class ModelsView(QWidget):
    title = "Models"

    sig_content_loaded = Signal(object)
    """``operator/models`` answered; the argument is the report."""

    sig_download_finished = Signal(object)
    """A download job ended (done, failed or cancelled); the argument is the job."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.report: dict[str, Any] | None = None
        self.status = plain_label()
        self.status.setWordWrap(True)
        self.installed_model = RowsModel(INSTALLED_COLUMNS, self)
        self.installed_table = named(table(self.installed_model), "Installed models")
        self.installed_table.selectionModel().selectionChanged.connect(self._update_actions)
        self.available_model = RowsModel(AVAILABLE_COLUMNS, self)
        self.installed_table.set_empty_text("No models installed. Choose one in the catalogue below and "
                                            "Download it (or add a local folder with knowledge models add-local).")
        self.available_table = named(table(self.available_model), "Models to download")
        self.available_table.selectionModel().selectionChanged.connect(self._update_actions)

        self.use_gate_button = QPushButton("Use for the recall &gate")
        self.use_gate_button.setToolTip("Write decisionModel = onnx/NAME (a reranker) or embedding/NAME (an embedding "
                                        "model, scoring by calibrated similarity) to config.json")
        self.use_search_button = QPushButton("Use for semantic &search")
        self.use_search_button.setToolTip("Write embeddingModel = onnx/NAME to config.json")
        self.use_gate_button.clicked.connect(lambda: self._use_selected("decisionModel"))
        self.use_search_button.clicked.connect(lambda: self._use_selected("embeddingModel"))
        self.download_button = QPushButton("&Download")
        self.download_button.setToolTip("Fetch the selected variant at its pinned revision; every file is "
                                        "sha256-verified before it counts")
        self.download_button.clicked.connect(self.download_selected)
        self.cancel_button = QPushButton("&Cancel download")
        self.cancel_button.setEnabled(False)
        self.download_progress = QProgressBar()
        self.download_progress.setRange(0, 1000)
        self.download_status = plain_label("Nothing is downloaded except by Download.")
        self.download_status.setWordWrap(True)
        self.watcher = JobWatcher(tasks, self)
        self.watcher.sig_job_updated.connect(self._on_download_updated)
        self.watcher.sig_job_finished.connect(self._on_download_finished)
        self.cancel_button.clicked.connect(self.watcher.cancel)
        self.benchmark = BenchmarkPanel(tasks)

        installed = QWidget()
        installed_layout = QVBoxLayout(installed)
        installed_layout.setContentsMargins(0, 0, 0, 0)
        installed_layout.addWidget(heading("Installed"))
        installed_layout.addWidget(self.installed_table, 1)
        row = QHBoxLayout()
        row.addWidget(self.use_gate_button)
        row.addWidget(self.use_search_button)
        row.addStretch(1)
        installed_layout.addLayout(row)
        available = QWidget()
        available_layout = QVBoxLayout(available)
        available_layout.setContentsMargins(0, 0, 0, 0)
        available_layout.addWidget(heading("Available (the catalogue, pinned revisions)"))
        available_layout.addWidget(self.available_table, 1)
        row = QHBoxLayout()
        row.addWidget(self.download_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.download_progress, 1)
        available_layout.addLayout(row)
        available_layout.addWidget(self.download_status)
        splitter = QSplitter(Qt.Orientation.Vertical)
        for part in (installed, available, self.benchmark):
            splitter.addWidget(part)
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(splitter, 1)
        self._update_actions()

    # --- data -----------------------------------------------------------------------------------------

    def set_agent(self, agent: str | None) -> None:
        """Models are the engine's, not an agent's: read each time the view is shown, as `knowledge models
        add-local` registers a model without telling the engine."""
        self.refresh()

    def refresh(self) -> None:
        self.installed_model.set_loading()
        self.tasks.request("operator/models", None, self._on_report, on_error=self._on_unread, owner=self)
        if not self.watcher.running:
            self.tasks.request("operator/jobs", {"kind": "pull"}, self._on_jobs, owner=self)
        self.benchmark.adopt_running()

    def _on_unread(self, message: str) -> None:
        """Say in the table that the models were not read (never that none is installed), and in the bar."""
        self.installed_model.set_failed(message)
        self.tasks.sig_error_raised.emit(message)

    def _on_report(self, report: dict[str, Any]) -> None:
        self.report = report
        self.status.setText(status_text(report))
        chosen = self.selected_installed()
        self.installed_model.set_rows(report.get("installed") or [])
        self.available_model.set_rows(available_rows(report))
        for view in (self.installed_table, self.available_table):
            view.resizeColumnsToContents()
        if chosen is not None:
            self.select_installed(chosen["name"])
        self.benchmark.set_models(report)
        self._update_actions()
        self.sig_content_loaded.emit(report)

    def _on_jobs(self, result: dict[str, Any]) -> None:
        running = [job for job in result.get("jobs") or [] if job["state"] in ("running", "cancelling")]
        if running and not self.watcher.running:
            self.watcher.follow(running[0])

    # --- selection --------------------------------------------------------------------------------------

    def selected_installed(self) -> Row | None:
        rows = self.installed_table.selectionModel().selectedRows()
        return self.installed_model.row(rows[0].row()) if rows else None

    def select_installed(self, name: str) -> None:
        for number, row in enumerate(self.installed_model.rows()):
            if row["name"] == name:
                self.installed_table.selectRow(number)

    def selected_variant(self) -> Row | None:
        rows = self.available_table.selectionModel().selectedRows()
        return self.available_model.row(rows[0].row()) if rows else None

    def select_variant(self, model: str, variant: str) -> None:
        for number, row in enumerate(self.available_model.rows()):
            if row["model"] == model and row["name"] == variant:
                self.available_table.selectRow(number)

    def _update_actions(self) -> None:
        installed, variant = self.selected_installed(), self.selected_variant()
        runnable = bool(installed and installed.get("runnable"))
        self.use_gate_button.setEnabled(runnable and installed.get("kind") in ("reranker", "embedding")
                                        and "decisionModel" not in installed.get("usedAs", []))
        self.use_search_button.setEnabled(runnable and installed.get("kind") == "embedding"
                                          and "embeddingModel" not in installed.get("usedAs", []))
        self.download_button.setEnabled(bool(variant and variant.get("pullable")) and not self.watcher.running)
        self.benchmark.set_selected(installed)

    # --- actions ----------------------------------------------------------------------------------------

    def _use_selected(self, setting: str) -> None:
        installed = self.selected_installed()
        if installed is not None:
            value = installed.get("decisionAs", installed["selectAs"]) if setting == "decisionModel" \
                else installed["selectAs"]
            self.tasks.request("operator/setModelSettings", {setting: value}, self._on_report, owner=self)

    def download_selected(self) -> None:
        variant = self.selected_variant()
        if variant is None or not variant.get("pullable") or self.watcher.running:
            return
        self.download_button.setEnabled(False)
        self.watcher.start("operator/pullModel", {"name": variant["model"], "variant": variant["name"]},
                           on_error=self._on_download_refused)

    def _on_download_refused(self, message: str) -> None:
        self.download_status.setText(f"Could not start the download: {message}")
        self._update_actions()

    def _on_download_updated(self, job: dict[str, Any]) -> None:
        fraction = progress_fraction(job)
        if fraction is None:
            self.download_progress.setRange(0, 0)
        else:
            self.download_progress.setRange(0, 1000)
            self.download_progress.setValue(round(fraction * 1000))
        self.download_status.setText(f"{job.get('title')}: {progress_text(job)}")
        self.cancel_button.setEnabled(job.get("state") == "running")
        self.download_button.setEnabled(False)

    def _on_download_finished(self, job: dict[str, Any]) -> None:
        self.download_progress.setRange(0, 1000)
        state = job.get("state")
        self.download_progress.setValue(1000 if state == "done" else self.download_progress.value())
        if state == "done":
            result = job.get("result") or {}
            self.download_status.setText(f"Installed {result.get('name')} ({result.get('variant')}), every file "
                                         f"sha256-verified. Select it with Use for the recall gate.")
        elif state == "cancelled":
            self.download_status.setText("Download cancelled. What arrived is kept: Download again to resume.")
        else:
            self.download_status.setText(f"{job.get('title')}: {progress_text(job)}")
        self._update_actions()
        self.refresh()
        self.sig_download_finished.emit(job)
