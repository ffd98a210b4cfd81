"""Replaying journal turns against other settings or another Decision model.

A replay runs every chosen turn through the gate again, against the vault
as it is now, with nothing injected, logged or journaled.  Each turn takes
up to its ``timeoutMs``, and another model must load first, so the engine
runs it as a job (``operator/startGateReplay``): this panel shows its
progress, can cancel it between turns, and shows each turn's kept and new
decisions with precision and recall at the replayed ``highThreshold``.
"""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.core.words import counted

from ..common.jobs import JobWatcher, progress_fraction, progress_text
from ..common.models import Column, Row, RowsModel
from ..common.widgets import named, plain_label, table
from ..tasks import EngineTasks
from .settings_form import threshold_text

MAX_TURNS = 50


def _high(decisions: list[Row]) -> list[str]:
    return [d["id"] for d in decisions if d.get("tier") == "high"]


def _change(turn: Row) -> str:
    kept, new = set(_high(turn.get("original") or [])), set(turn.get("inject") or [])
    if kept == new:
        return "same"
    parts = []
    if new - kept:
        parts.append(f"+{len(new - kept)}")
    if kept - new:
        parts.append(f"-{len(kept - new)}")
    return " ".join(parts)


def _needed(turn: Row) -> str:
    needed = turn.get("needed")
    return "not labelled" if needed is None else str(len(needed))


RESULT_COLUMNS = [
    Column("Message", lambda t: " ".join((t.get("message") or "").split())[:100]),
    Column("Needed", _needed, align_right=True),
    Column("Kept: injected", lambda t: len(_high(t.get("original") or [])), align_right=True),
    Column("Replayed: injected", lambda t: len(t.get("inject") or []), align_right=True),
    Column("Change", _change),
    Column("Latency ms", lambda t: t.get("latencyMs"), align_right=True),
    Column("Problem", lambda t: f"{t['stage']}: {t.get('reason')}" if t.get("stage") else ""),
]


def summary_text(result: dict[str, Any]) -> str:
    what_if = result.get("whatIf") or {}
    settings = result.get("settings") or {}
    turns = result.get("turns") or []
    changed = sum(1 for turn in turns if _change(turn) != "same")
    text = (f"Replayed {counted(len(turns), 'turn')} with {result.get('model') or 'no model'}, injecting at or "
            f"above {threshold_text(settings.get('highThreshold', 0))}: "
            f"{counted(what_if.get('pagesInjected', 0), 'page')} injected, {counted(changed, 'turn')} changed.")
    if what_if.get("precision") is not None or what_if.get("recall") is not None:
        text += (f" On the labelled turns: precision {_share(what_if.get('precision'))}, "
                 f"recall {_share(what_if.get('recall'))}.")
    return text


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


class ReplayPanel(QWidget):
    """Choose turns, settings and model; run the replay as an engine job; compare the decisions."""

    sig_replay_finished = Signal(object)
    """The replay job ended (done, failed or cancelled); the argument is the job."""

    def __init__(self, tasks: EngineTasks, form_values: Callable[[], dict[str, Any]],
                 selected_turns: Callable[[], list[str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self.form_values, self.selected_turns = form_values, selected_turns
        self.watcher = JobWatcher(tasks, self)
        self.watcher.sig_job_updated.connect(self._on_job_updated)
        self.watcher.sig_job_finished.connect(self._on_job_finished)

        self.which = named(QComboBox(), "Turns to replay")
        self.which.addItem("The newest journal turns", "newest")
        self.which.addItem("The turns selected in Labelling", "selected")
        self.count = named(QSpinBox(), "How many of the newest turns")
        self.count.setRange(1, MAX_TURNS)
        self.count.setValue(20)
        self.count.setSuffix(" turns")
        self.which.currentIndexChanged.connect(lambda _: self.count.setEnabled(self.which.currentData() == "newest"))
        turns_row = QHBoxLayout()
        turns_row.addWidget(self.which, 1)
        turns_row.addWidget(self.count)
        self.use_form = QCheckBox("the values in the Settings tab, saved or not")
        self.use_form.setChecked(True)
        self.model_choice = named(QComboBox(), "Decision model")
        self.model_choice.setToolTip("Another installed model is loaded for the replay only; the engine's own "
                                     "Decision model is untouched")
        self.start_button = QPushButton("&Replay")
        self.start_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("&Cancel replay")
        self.cancel_button.clicked.connect(self.watcher.cancel)
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.status = plain_label("Replays run in the engine; nothing is injected, logged or journaled.")
        self.status.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Turns", turns_row)
        form.addRow("Settings", self.use_form)
        form.addRow("Decision model", self.model_choice)
        controls = QHBoxLayout()
        controls.addWidget(self.start_button)
        controls.addWidget(self.cancel_button)
        controls.addWidget(self.progress, 1)
        self.results_model = RowsModel(RESULT_COLUMNS, self)
        self.results_table = named(table(self.results_model), "Replayed turns")
        self.results_table.set_empty_text("No replay yet. Choose turns in Labelling, or replay the newest, with "
                                          "Replay above.")
        self.summary = plain_label()
        self.summary.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(form)
        layout.addLayout(controls)
        layout.addWidget(self.status)
        layout.addWidget(self.summary)
        layout.addWidget(self.results_table, 1)

    def set_agent(self, agent: str | None) -> None:
        if agent != self.agent:
            self.results_model.set_rows([])
            self.summary.clear()
        self.agent = agent
        self.refresh()

    def refresh(self) -> None:
        """The models to choose from, and a replay still running in the engine (to follow it again)."""
        self.tasks.request("operator/models", None, self._on_models, owner=self)
        if not self.watcher.running:
            self.tasks.request("operator/jobs", {"kind": "replay"}, self._on_jobs, owner=self)

    def _on_models(self, report: dict[str, Any]) -> None:
        chosen = self.model_choice.currentData()
        self.model_choice.clear()
        engine_model = report.get("decisionModel")
        self.model_choice.addItem(f"The engine's: {engine_model or 'none chosen'}", None)
        for model in report.get("installed") or []:
            decision_as = model.get("decisionAs", model["selectAs"])
            if model.get("runnable") and model.get("kind") in ("reranker", "embedding") and decision_as != engine_model:
                self.model_choice.addItem(decision_as, decision_as)
        index = self.model_choice.findData(chosen)
        self.model_choice.setCurrentIndex(max(0, index))

    def _on_jobs(self, result: dict[str, Any]) -> None:
        running = [job for job in result.get("jobs") or [] if job["state"] in ("running", "cancelling")
                   and job.get("key") == f"replay:{self.agent}"]
        if running and not self.watcher.running:
            self.watcher.follow(running[0])

    def params(self) -> dict[str, Any] | None:
        """The request for ``operator/startGateReplay``, or None (with the reason shown) when there is none."""
        if self.agent is None:
            return None
        params: dict[str, Any] = {"agent": self.agent}
        if self.which.currentData() == "selected":
            turns = self.selected_turns()[:MAX_TURNS]
            if not turns:
                self.status.setText("Select journal turns in the Labelling tab first.")
                return None
            params["turns"] = turns
        if self.use_form.isChecked():
            overrides = {k: v for k, v in self.form_values().items() if k != "mode"}
            params["recallGate"] = overrides
        if self.model_choice.currentData():
            params["decisionModel"] = self.model_choice.currentData()
        return params

    def start(self) -> None:
        params = self.params()
        if params is None or self.watcher.running:
            return
        if self.which.currentData() == "newest":
            self.tasks.request("operator/gateJournal", {"agent": params["agent"], "limit": self.count.value()},
                               lambda page: self._start_with([t["id"] for t in page["turns"]], params),
                               on_error=self._on_failed, owner=self)
        else:
            self._start_with(params["turns"], params)

    def _start_with(self, turns: list[str], params: dict[str, Any]) -> None:
        if not turns:
            self.status.setText("The journal has no turns to replay: turn the journal on in Settings and let "
                                "the agent's host run some shadow turns.")
            return
        self.results_model.set_rows([])
        self.summary.clear()
        self.start_button.setEnabled(False)
        self.watcher.start("operator/startGateReplay", {**params, "turns": turns}, on_error=self._on_failed)

    def _on_failed(self, message: str) -> None:
        self.status.setText(f"Could not replay: {message}")
        self.start_button.setEnabled(True)

    def _on_job_updated(self, job: dict[str, Any]) -> None:
        fraction = progress_fraction(job)
        if fraction is None:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(round(fraction * 1000))
        self.status.setText(progress_text(job))
        running = job.get("state") in ("running", "cancelling")
        self.cancel_button.setEnabled(job.get("state") == "running")
        self.start_button.setEnabled(not running)

    def _on_job_finished(self, job: dict[str, Any]) -> None:
        self.progress.setRange(0, 1000)
        self.progress.setValue(1000 if job.get("state") == "done" else 0)
        if job.get("state") == "done":
            result = job.get("result") or {}
            self.results_model.set_rows(result.get("turns") or [])
            self.results_table.resizeColumnsToContents()
            self.summary.setText(summary_text(result))
        self.sig_replay_finished.emit(job)
