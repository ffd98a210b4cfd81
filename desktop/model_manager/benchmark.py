"""The one-click benchmark: what the owner's machine can score with an installed ONNX model.

``operator/benchmarkModel`` measures the model's tokens per second in the
engine (as a job this panel follows and may cancel) and sizes the recall
gate's budget from it: how many tokens one turn of ``timeoutMs`` holds, and
whether that is enough for ``maxCandidates`` pages.  *Compare variants* also
measures every variant of the model this machine holds (fp32, int8 ...) side
by side, with each one's scores against fp32's on the same pairs, and says
which to use: the fastest whose scores stay close to fp32's
(engine/operator/model_benchmark.py, ``recommend``).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.core.words import counted

from ..common.jobs import JobWatcher, progress_fraction, progress_text
from ..common.models import Column, Row, RowsModel
from ..common.widgets import heading, named, plain_label, table
from ..tasks import EngineTasks

LENGTH_COLUMNS = [
    Column("Pair tokens", lambda r: r.get("pairTokens"), align_right=True),
    Column("Pairs", lambda r: r.get("pairs"), align_right=True),
    Column("Seconds", lambda r: r.get("seconds"), align_right=True),
    Column("Tokens/s", lambda r: r.get("tokensPerSecond"), align_right=True),
]



def _fidelity(row: Row, key: str, percent: bool = False) -> Any:
    measured = row.get("fidelity")
    if not measured:
        return "-"
    return f"{measured[key]:.0%}" if percent else f"{measured[key]:.4f}"


VARIANT_COLUMNS = [
    Column("Variant", lambda r: r.get("variant")),
    Column("Installed as", lambda r: r.get("name")),
    Column("Tokens/s", lambda r: r.get("tokensPerSecond"), align_right=True),
    Column("x fp32", lambda r: f"{r['speedup']:.2f}x" if r.get("speedup") else "-", align_right=True),
    Column("Max score difference", lambda r: _fidelity(r, "maxDifference"), align_right=True),
    Column("Mean score difference", lambda r: _fidelity(r, "meanDifference"), align_right=True),
    Column("Same page first", lambda r: _fidelity(r, "sameFirst", percent=True), align_right=True),
]
BUDGET_COLUMNS = [
    Column("timeoutMs", lambda r: r.get("timeoutMs"), align_right=True),
    Column("Tokens per turn", lambda r: r.get("tokens"), align_right=True),
    Column("Pages scored", lambda r: r.get("candidatesScored"), align_right=True),
    Column("Excerpt window (tokens)", lambda r: r.get("windowTokens") or "the 32-token minimum", align_right=True),
]


def budget_text(result: dict[str, Any]) -> str:
    """The answer in a sentence: throughput, and what the gate's budget holds on this machine."""
    budget = result.get("budget") or {}
    head = (f"{result.get('model')} ({result.get('variant')}): {result.get('tokensPerSecond', 0):,.0f} tokens/s "
            f"on {counted(result.get('threads') or 0, 'thread')}, loaded in {result.get('loadSeconds', 0):,.1f} s. ")
    candidates = result.get("maxCandidates")
    body = f"At timeoutMs {budget.get('timeoutMs', 0):,} one gate turn can score about {budget.get('tokens', 0):,} tokens"
    if budget.get("windowTokens"):
        return head + body + f": all {candidates} pages with ~{budget['windowTokens']}-token excerpts."
    return head + body + (f": only {budget.get('candidatesScored', 0)} of {candidates} pages, with the shortest "
                          "excerpts. Raise timeoutMs or lower maxCandidates for all of them.")


def variants_text(compared: dict[str, Any] | None) -> str:
    """The recommendation in a sentence or two (empty when the variants were not compared)."""
    if not compared:
        return ""
    rows = compared.get("variants") or []
    if len(rows) < 2:
        return ("Only one variant of this model is on this machine, so there is nothing to compare. Pull or add "
                "another (for example int8 beside fp32) and compare again.")
    return f"Use {compared.get('recommendation')}: {compared.get('why')}"


class BenchmarkPanel(QWidget):
    """Pick a model, Benchmark, read the budget."""

    sig_benchmark_finished = Signal(object)
    """The benchmark job ended; the argument is the job (its ``result`` when done)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.result: dict[str, Any] | None = None
        self.model_choice = named(QComboBox(), "Model to benchmark")
        # Sized by a short name, not by the longest model's: the row stretches it where there is room, and the
        # window still fits a 1024-pixel-wide screen.
        self.model_choice.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model_choice.setMinimumContentsLength(12)
        self.timeout = named(QSpinBox(), "Budget per turn")
        self.timeout.setRange(0, 10_000)
        self.timeout.setSingleStep(100)
        self.timeout.setSpecialValueText("the gate's timeoutMs")
        self.timeout.setSuffix(" ms")
        self.timeout.setToolTip("The budget per turn to size (0: the recall gate's setting)")
        self.run_button = QPushButton("&Benchmark")
        self.run_button.setToolTip("Measure the selected model's tokens per second on this machine (seconds)")
        self.run_button.clicked.connect(self.run)
        self.compare_button = QPushButton("Compare &variants")
        self.compare_button.setToolTip("Benchmark every variant of the selected model on this machine (fp32, "
                                       "int8 ...) side by side, with how far each one's scores are from fp32's")
        self.compare_button.clicked.connect(self.compare)
        self.cancel_button = QPushButton("Cancel bench&mark")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.status = plain_label("Measures the model in the engine; the gate keeps running meanwhile.")
        self.status.setWordWrap(True)
        self.answer = plain_label()
        self.answer.setWordWrap(True)
        self.answer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.recommendation = plain_label()
        self.recommendation.setWordWrap(True)
        self.recommendation.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.variants_model = RowsModel(VARIANT_COLUMNS, self)
        self.lengths_model = RowsModel(LENGTH_COLUMNS, self)
        self.budgets_model = RowsModel(BUDGET_COLUMNS, self)
        self.watcher = JobWatcher(tasks, self)
        self.watcher.sig_job_updated.connect(self._on_updated)
        self.watcher.sig_job_finished.connect(self._on_finished)
        self.cancel_button.clicked.connect(self.watcher.cancel)

        controls = QHBoxLayout()
        controls.addWidget(plain_label("Model"))
        controls.addWidget(self.model_choice, 1)
        controls.addWidget(plain_label("Budget"))
        controls.addWidget(self.timeout)
        controls.addWidget(self.run_button)
        controls.addWidget(self.compare_button)
        controls.addWidget(self.cancel_button)
        tables = QSplitter(Qt.Orientation.Horizontal)
        tables.addWidget(named(table(self.lengths_model), "Tokens per second by length"))
        tables.addWidget(named(table(self.budgets_model), "What fits each budget"))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(heading("Benchmark: what this machine can score"))
        layout.addLayout(controls)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.answer)
        layout.addWidget(self.recommendation)
        self.variants_table = named(table(self.variants_model), "Variants compared")
        self.variants_table.hide()
        layout.addWidget(self.variants_table)
        layout.addWidget(tables, 1)
        self._update_actions()

    def set_models(self, report: dict[str, Any]) -> None:
        """The installed ONNX models to choose from (the Decision model first)."""
        chosen = self.model_choice.currentData()
        names = [m["name"] for m in report.get("installed") or [] if m.get("runnable")]
        selected = (report.get("decisionModel") or "").removeprefix("onnx/")
        names.sort(key=lambda name: (name != selected, name))
        self.model_choice.clear()
        for name in names:
            self.model_choice.addItem(name + (" (the recall gate's)" if name == selected else ""), name)
        self.model_choice.setCurrentIndex(max(0, self.model_choice.findData(chosen)))
        self._update_actions()

    def set_selected(self, installed: Row | None) -> None:
        """Follow the Installed table's selection."""
        if installed is not None and installed.get("runnable"):
            index = self.model_choice.findData(installed["name"])
            if index >= 0:
                self.model_choice.setCurrentIndex(index)

    def adopt_running(self) -> None:
        """Follow a benchmark that is still running in the engine (the window was reopened)."""
        if not self.watcher.running:
            self.tasks.request("operator/jobs", {"kind": "benchmark"}, self._on_jobs, owner=self)

    def _on_jobs(self, result: dict[str, Any]) -> None:
        running = [job for job in result.get("jobs") or [] if job["state"] in ("running", "cancelling")]
        if running and not self.watcher.running:
            self.watcher.follow(running[0])

    def run(self, compare_variants: bool = False) -> None:
        name = self.model_choice.currentData()
        if not name or self.watcher.running:
            return
        params: dict[str, Any] = {"name": name}
        if self.timeout.value():
            params["timeoutMs"] = self.timeout.value()
        if compare_variants:
            params["compareVariants"] = True
        self.run_button.setEnabled(False)
        self.compare_button.setEnabled(False)
        self.watcher.start("operator/benchmarkModel", params, on_error=self._on_refused)

    def compare(self) -> None:
        """The benchmark, plus every variant of the model side by side and the one to use."""
        self.run(compare_variants=True)

    def _on_refused(self, message: str) -> None:
        self.status.setText(f"Could not start the benchmark: {message}")
        self._update_actions()

    def _on_updated(self, job: dict[str, Any]) -> None:
        fraction = progress_fraction(job)
        self.progress.setValue(round((fraction or 0) * 1000))
        self.status.setText(progress_text(job))
        self.cancel_button.setEnabled(job.get("state") == "running")
        self.run_button.setEnabled(False)
        self.compare_button.setEnabled(False)

    def _on_finished(self, job: dict[str, Any]) -> None:
        if job.get("state") == "done":
            self.result = job.get("result") or {}
            self.answer.setText(budget_text(self.result))
            self.lengths_model.set_rows(self.result.get("lengths") or [])
            self.budgets_model.set_rows(self.result.get("budgets") or [])
            compared = self.result.get("variants")
            self.recommendation.setText(variants_text(compared))
            self.variants_model.set_rows((compared or {}).get("variants") or [])
            self.variants_table.setVisible(bool(compared))
            self.progress.setValue(1000)
        self.status.setText(progress_text(job))
        self._update_actions()
        self.sig_benchmark_finished.emit(job)

    def _update_actions(self) -> None:
        self.run_button.setEnabled(self.model_choice.count() > 0 and not self.watcher.running)
        self.compare_button.setEnabled(self.run_button.isEnabled())
        if not self.watcher.running:
            self.cancel_button.setEnabled(False)
