"""Threshold tuning from the shadow journal: what each ``highThreshold`` would inject, and how well.

``operator/gateWhatIf`` answers one row per threshold (0.05 to 0.95, and the
one in force): turns and pages it would inject, how many turns the same
cutoff as ``skipHintBelow`` would hint, and precision, recall and F1 over
the turns the owner labelled, with a suggested threshold once five are
labelled.  The table and both charts show the same Qt model.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSplitter, QVBoxLayout, QWidget

from ..common.charts import Chart, Marker, Series
from ..common.models import Column, RowsModel
from ..common.widgets import table
from ..tasks import EngineTasks

WHAT_IF_COLUMNS = [
    Column("highThreshold", lambda r: r.get("threshold"), align_right=True),
    Column("Turns injecting", lambda r: r.get("turnsInjecting"), align_right=True),
    Column("Pages injected", lambda r: r.get("pagesInjected"), align_right=True),
    Column("Pages per turn", lambda r: r.get("pagesPerTurn"), align_right=True),
    Column("Skip-hint turns", lambda r: r.get("skipHintTurns"), align_right=True),
    Column("…that needed a page", lambda r: r.get("skipHintMisses"), align_right=True),
    Column("Precision", lambda r: r.get("precision"), align_right=True),
    Column("Recall", lambda r: r.get("recall"), align_right=True),
    Column("F1", lambda r: r.get("f1"), align_right=True),
]
THRESHOLD, PAGES_PER_TURN, PRECISION, RECALL, F1 = 0, 3, 6, 7, 8


def suggestion_text(result: dict[str, Any]) -> str:
    suggested = result.get("suggested") or {}
    head = f"{result.get('turns', 0):,} journal turns, {result.get('labelled', 0):,} labelled. "
    if suggested.get("threshold") is None:
        return head + f"No suggestion yet: {suggested.get('reason', 'label more turns')}."
    return head + (f"Suggested highThreshold: {suggested['threshold']:.2f} (F1 {suggested['f1']:.2f}, precision "
                   f"{suggested['precision']:.2f}, recall {suggested['recall']:.2f} on the labelled turns).")


class TuningPanel(QWidget):
    """The what-if table, pages per turn and precision/recall by threshold, and the suggestion."""

    sig_what_if_loaded = Signal(object)
    """``operator/gateWhatIf`` answered; the argument is its result."""

    sig_threshold_chosen = Signal(float)
    """The owner chose to try the suggested threshold in the settings form (nothing is saved yet)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self.result: dict[str, Any] | None = None
        self.current_threshold: float | None = None
        self.model = RowsModel(WHAT_IF_COLUMNS, self)
        self.table = table(self.model)
        self.table.set_empty_text("Nothing to tune from yet: the shadow journal holds no scored turns. Run the gate "
                                  "in shadow mode with the journal on, then label turns in Labelling.")
        self.pages_chart = Chart(self.model, THRESHOLD, [Series(PAGES_PER_TURN, "pages per turn")], kind="lines",
                                 title="Pages each threshold would inject per turn", x_title="highThreshold")
        self.quality_chart = Chart(self.model, THRESHOLD, [Series(PRECISION, "precision"), Series(RECALL, "recall"),
                                                          Series(F1, "F1")], kind="lines", y_max=1.0,
                                   title="On the labelled turns", x_title="highThreshold")
        self.suggestion = QLabel()
        self.suggestion.setWordWrap(True)
        self.use_button = QPushButton("&Use the suggestion")
        self.use_button.setToolTip("Put the suggested highThreshold into the Settings tab (save it there)")
        self.use_button.clicked.connect(self._on_use_clicked)
        self.use_button.setEnabled(False)
        top = QHBoxLayout()
        top.addWidget(self.suggestion, 1)
        top.addWidget(self.use_button)
        charts = QSplitter(Qt.Orientation.Horizontal)
        charts.addWidget(self.pages_chart)
        charts.addWidget(self.quality_chart)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(charts)
        splitter.addWidget(self.table)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(splitter, 1)

    def set_agent(self, agent: str | None) -> None:
        self.agent = agent
        self.refresh()

    def set_current_threshold(self, threshold: float | None) -> None:
        self.current_threshold = threshold
        self._mark()

    def refresh(self) -> None:
        if self.agent is None:
            self.model.set_rows([])
            self.suggestion.clear()
            return
        self.tasks.request("operator/gateWhatIf", {"agent": self.agent}, self._on_what_if, owner=self)

    def _on_what_if(self, result: dict[str, Any]) -> None:
        self.result = result
        self.model.set_rows(result.get("thresholds") or [])
        self.table.resizeColumnsToContents()
        self.suggestion.setText(suggestion_text(result))
        self.use_button.setEnabled((result.get("suggested") or {}).get("threshold") is not None)
        self._mark()
        self.sig_what_if_loaded.emit(result)

    def _mark(self) -> None:
        markers = []
        if self.current_threshold is not None:
            markers.append(Marker(self.current_threshold, f"in force {self.current_threshold:.2f}"))
        suggested = ((self.result or {}).get("suggested") or {}).get("threshold")
        if suggested is not None:
            markers.append(Marker(suggested, f"suggested {suggested:.2f}"))
        self.pages_chart.set_markers(markers)
        self.quality_chart.set_markers(markers)

    def _on_use_clicked(self) -> None:
        suggested = ((self.result or {}).get("suggested") or {}).get("threshold")
        if suggested is not None:
            self.sig_threshold_chosen.emit(float(suggested))
