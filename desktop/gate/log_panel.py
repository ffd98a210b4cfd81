"""The shadow log: every gate turn of the agent (outcome, latency, counts), each turn's per-page scores and
tiers, and the score distribution of the whole log as a histogram by tier.

The log comes a page at a time from ``operator/gateLog`` (it never holds
message text); the figures come from ``operator/gateStats``, counted by the
engine, and the histogram draws from the Qt model that shows them.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from ..common.charts import Chart, Marker, Series
from ..common.models import ROW_ROLE, Column, PagedModel, Row, RowsModel
from ..common.times import time_column
from ..common.widgets import heading, named, plain_label, table
from ..tasks import EngineTasks
from .settings_form import threshold_text

PAGE_SIZE = 100
TIERS = ("high", "medium", "low", "unscored")


# What a shadow turn's live verdict (``wouldInject``) would have done: "would …" says the turn was in shadow mode,
# so the log needs no Mode column, and each reads whole in a 1024-wide window.
WOULD = {"injected": "would inject", "skip-hint": "would send a skip hint", "none": "would add nothing"}
# Who the turn's conversation was with, in the owner's words (the engine's kind on hover).
AUDIENCES = {"owner-private": "owner", "conversation": "conversation"}
MODES = {"shadow": "Shadow mode: nothing was injected", "live": "Live mode"}


def _verdict(turn: Row) -> str:
    outcome, would = turn.get("outcome") or "", turn.get("wouldInject")
    if would and outcome == "shadow":
        return WOULD.get(would, f"would: {would}")
    if would:
        return f"{outcome} (would: {would})"
    if turn.get("stage"):
        return f"{outcome} ({turn['stage']}: {turn.get('reason')})"
    return outcome


def _verdict_tooltip(turn: Row) -> str:
    mode = MODES.get(str(turn.get("mode")), f"Mode {turn.get('mode')}")
    if turn.get("outcome") == "shadow" and turn.get("wouldInject"):
        return f"{mode}; live mode {_verdict(turn)}"
    return f"{mode}: {_verdict(turn)}"


def _audience_tooltip(turn: Row) -> str:
    kind = turn.get("audience")
    said = {"owner-private": "The owner's own conversation", "conversation": "A conversation with others"}
    return f"{said.get(str(kind), 'Audience')} ({kind})"


def _latency(turn: Row) -> str | None:
    latency = turn.get("latencyMs")
    return None if latency is None else f"{latency:,.0f} ms"


def _model_name(turn: Row) -> str | None:
    """``all-minilm-l6-v2-int8`` for ``embedding/all-minilm-l6-v2-int8``: the provider is on hover."""
    model = turn.get("model")
    return str(model).rsplit("/", 1)[-1] if model else model


def _tiers(turn: Row) -> str:
    counts = {tier: 0 for tier in TIERS}
    for decision in turn.get("decisions") or []:
        counts[decision.get("tier", "low")] = counts.get(decision.get("tier", "low"), 0) + 1
    return ", ".join(f"{count} {tier}" for tier, count in counts.items() if count) or "-"


def _best(turn: Row) -> float | None:
    scores = [d["score"] for d in turn.get("decisions") or [] if d.get("score") is not None]
    return max(scores) if scores else None


# Every column reads whole in a 1024-wide window (the log 724 px wide): the Outcome takes what is left.
LOG_COLUMNS = [
    time_column("At", "at"),
    Column("Audience", lambda t: AUDIENCES.get(str(t.get("audience")), t.get("audience")),
           tooltip=_audience_tooltip, whole=True),
    Column("Outcome", _verdict, stretch=True, whole=True, tooltip=_verdict_tooltip),
    Column("Latency", _latency, align_right=True, whole=True),
    Column("Offered", lambda t: t.get("offered"), align_right=True),
    Column("Scored pages", _tiers, whole=True),
    Column("Best", _best, align_right=True, tooltip=lambda t: "The best score of the turn's pages"),
    Column("Model", _model_name, tooltip=lambda t: t.get("model"), whole=True),
    Column("Journal", lambda t: t.get("journaled")),
]
DECISION_COLUMNS = [
    Column("Score", lambda d: d.get("score") if d.get("score") is not None else d.get("answer", "-"),
           align_right=True),
    Column("Tier", lambda d: d.get("tier")),
    Column("Record", lambda d: d.get("title") or d.get("id"), tooltip=lambda d: d.get("id")),
]
HISTOGRAM_COLUMNS = [
    Column("From", lambda b: b.get("from"), align_right=True),
    Column("To", lambda b: b.get("to"), align_right=True),
    Column("High", lambda b: b.get("high"), align_right=True),
    Column("Medium", lambda b: b.get("medium"), align_right=True),
    Column("Low", lambda b: b.get("low"), align_right=True),
]


def stats_text(stats: dict[str, Any]) -> str:
    if not stats.get("turns"):
        return ("No gate turns yet. The gate logs a turn each time an agent's host calls memory/gate with a "
                "recallGate block written and a Decision model chosen.")
    outcomes = ", ".join(f"{count:,} {name}" for name, count in sorted(stats["outcomes"].items()))
    # In the Outcome column's words: "40 injected" read as pages injected, in a mode that injects nothing.
    would = ", ".join(f"{count:,} {WOULD.get(name, name)}"
                      for name, count in sorted((stats.get("wouldInject") or {}).items()))
    latency = stats.get("latencyMs") or {}
    scores = stats.get("scores") or {}
    text = (f"{stats['turns']:,} turns ({outcomes}). Latency p50 {latency.get('p50', 0):,.0f} ms, "
            f"p95 {latency.get('p95', 0):,.0f} ms, max {latency.get('max', 0):,.0f} ms.")
    if would:
        text += f" In shadow mode: {would}."
    if scores.get("unscored") or scores.get("noProbability"):
        text += (f" {scores.get('unscored', 0):,} pages went unscored at the deadline, "
                 f"{scores.get('noProbability', 0):,} answered without a probability.")
    return text


class GateLogPanel(QWidget):
    """The agent's gate log, a selected turn's decisions, and the score histogram."""

    sig_stats_loaded = Signal(object)
    """``operator/gateStats`` answered (the figures behind the summary and the histogram)."""

    sig_record_requested = Signal(str)
    """A decision's record was opened (its id)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self.log_model = PagedModel(LOG_COLUMNS, self)
        self.log_model.sig_load_failed.connect(self.tasks.sig_error_raised.emit)
        self.log_table = named(table(self.log_model), "Gate turns")
        self.log_table.selectionModel().selectionChanged.connect(self._on_turn_selected)
        self.log_model.sig_page_loaded.connect(lambda *_: self.log_table.resizeColumnsToContents())
        self.decisions_model = RowsModel(DECISION_COLUMNS, self)
        self.log_table.set_empty_text("No gate turns logged yet. With the gate in shadow or live mode (Settings "
                                      "tab), every turn an agent's host asks about is logged here.")
        self.decisions_table = named(table(self.decisions_model), "Pages scored in the chosen turn")
        self.decisions_table.set_empty_text("Select a turn above to see the pages it scored.")
        self.decisions_table.activated.connect(self._on_decision_activated)
        self.decisions_table.setToolTip("Open a row to see the record")
        self.histogram_model = RowsModel(HISTOGRAM_COLUMNS, self)
        self.histogram = Chart(self.histogram_model, 0, [Series(2, "high"), Series(3, "medium"), Series(4, "low")],
                               kind="stacked", x_end_column=1, title="Scores in the gate log",
                               x_title="probability", y_title="pages")
        self.summary = plain_label()
        self.summary.setWordWrap(True)

        turn = QWidget()
        turn_layout = QVBoxLayout(turn)
        turn_layout.setContentsMargins(0, 0, 0, 0)
        turn_layout.addWidget(heading("Scores of the selected turn"))
        turn_layout.addWidget(self.decisions_table)
        lower = QSplitter(Qt.Orientation.Horizontal)
        lower.addWidget(turn)
        lower.addWidget(self.histogram)
        lower.setStretchFactor(1, 2)
        lower.setSizes([460, 700])
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.log_table)
        splitter.addWidget(lower)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(splitter, 1)

    def set_agent(self, agent: str | None) -> None:
        self.agent = agent
        self.refresh()

    def set_current_threshold(self, threshold: float | None) -> None:
        """Mark the ``highThreshold`` in force on the histogram (what scores at or above it inject), in the words of
        the Settings tab ("Inject at or above"): short enough to fit beside the line in a narrow pane."""
        self.histogram.set_markers([] if threshold is None else [Marker(threshold, f"inject at {threshold_text(threshold)}")])

    def refresh(self) -> None:
        agent = self.agent
        self.decisions_model.set_rows([])
        if agent is None:
            self.log_model.set_source(None)
            self.histogram_model.set_rows([])
            self.summary.clear()
            return

        def source(offset: Any, deliver: Any, fail: Any) -> None:
            self.tasks.request("operator/gateLog", {"agent": agent, "offset": offset or 0, "limit": PAGE_SIZE},
                               lambda page: deliver(page["turns"], page.get("nextOffset"), page["total"]),
                               on_error=fail, owner=self)

        self.log_model.set_source(source)
        self.tasks.request("operator/gateStats", {"agent": agent}, self._on_stats, owner=self)

    def _on_stats(self, stats: dict[str, Any]) -> None:
        self.summary.setText(stats_text(stats))
        self.histogram_model.set_rows((stats.get("scores") or {}).get("bins") or [])
        self.sig_stats_loaded.emit(stats)

    def _on_turn_selected(self) -> None:
        rows = self.log_table.selectionModel().selectedRows()
        turn = self.log_model.row(rows[0].row()) if rows else None
        self.decisions_model.set_rows((turn or {}).get("decisions") or [])
        self.decisions_table.resizeColumnsToContents()

    def _on_decision_activated(self, index: QModelIndex) -> None:
        decision = index.data(ROW_ROLE)
        if decision is not None and decision.get("id"):
            self.sig_record_requested.emit(decision["id"])
