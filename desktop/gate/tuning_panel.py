"""Threshold tuning from the shadow journal: what each ``highThreshold`` would inject, and how well.

``operator/gateWhatIf`` answers one row per threshold (0.05 to 0.95, and the
one in force): turns and pages it would inject, how many turns the same
cutoff as ``skipHintBelow`` would hint, and precision, recall and F1 over
the turns the owner labelled.  The table and both line charts show the same
Qt model.

Above them the owner explores: the journal's scores as a histogram (by
label: needed, not needed, not labelled yet) with the threshold as a line to
drag.  A second ``gateWhatIf`` asks for every threshold from 0.00 to 1.00 in
steps of 0.01 (the ``SWEEP``), so as the line moves, snapped to those steps,
the figures at that threshold are the engine's, read from that answer, and a
line on each chart follows.  *Use this threshold* puts it into the Settings
form, unsaved.

At the top, the one recommendation, the **proposal for a precision** (``operator/suggestGateThresholds``):
for the precision the owner picks, the ``highThreshold`` (and where they help
``mediumThreshold`` and ``skipHintBelow``) the labels hold, with the
precision and recall they show and how many labels that rests on, or why
there is none.  *Apply the proposal* writes it with the Settings tab's
``operator/setGateSettings`` (onto the saved block) in one action; once the
settings in force hold it, the panel says so.  Its ``highThreshold`` is marked
on the charts with the number Apply writes, as the proposal's line says it
(``gateWhatIf``'s best-F1 ``suggested`` is not shown: two recommendations with
two numbers left the owner to guess which one Apply meant).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFrame,
    QHBoxLayout,
    QPushButton,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.core.words import counted
from engine.gate.suggest import (
    CONFIDENCE, DEFAULT_POINTER_PRECISION, DEFAULT_PRECISION, PRECISION_RANGE, in_force_phrase, tier_phrases,
)

from ..common.charts import Chart, Marker, Series
from ..common.models import Column, RowsModel
from ..common.widgets import named, plain_label, table
from ..tasks import EngineTasks
from .settings_form import FIELDS, threshold_text

# The Settings tab's words, never the config keys (those are on hover), and columns that read whole in the tab of
# a 1008-wide window: the skip hint's turns and the ones of them that needed a page share a column.
INJECT_AT = "Inject at or above"
WHAT_IF_COLUMNS = [
    Column("Inject at", lambda r: r.get("threshold"), align_right=True, text=threshold_text,
           tooltip=lambda r: f"{INJECT_AT} {threshold_text(r.get('threshold', 0))} (highThreshold in config.json)"),
    Column("Turns", lambda r: r.get("turnsInjecting"), align_right=True,
           tooltip=lambda r: f"{counted(r.get('turnsInjecting') or 0, 'turn')} of the journal would inject a page"),
    Column("Pages", lambda r: r.get("pagesInjected"), align_right=True,
           tooltip=lambda r: f"{counted(r.get('pagesInjected') or 0, 'page')} injected over the journal's turns"),
    Column("Per turn", lambda r: r.get("pagesPerTurn"), align_right=True,
           tooltip=lambda r: f"{r.get('pagesPerTurn') or 0:.2f} pages injected per turn"),
    Column("Skip hints", lambda r: skip_hints(r), align_right=True,
           tooltip=lambda r: (f"With the skip hint below {threshold_text(r.get('threshold', 0))}, "
                              f"{counted(r.get('skipHintTurns') or 0, 'turn')} would be hinted; "
                              f"{r.get('skipHintMisses') or 0:,} of them needed a page")),
    Column("Precision", lambda r: r.get("precision"), align_right=True,
           tooltip=lambda r: "No labelled page scored at or above it" if r.get("precision") is None else
           f"Of the pages it would inject on your labelled turns, {r['precision']:.2f} were pages the turn needed"),
    Column("Recall", lambda r: r.get("recall"), align_right=True,
           tooltip=lambda r: "Your labelled turns needed no page" if r.get("recall") is None else
           f"Of the pages your labelled turns needed, {r['recall']:.2f} would be injected"),
    Column("F1", lambda r: r.get("f1"), align_right=True,
           tooltip=lambda r: f"{_figure(r.get('f1'))}: precision and recall in one figure (their harmonic mean); "
                             "high only when both are"),
]
# Said once beside the proposal: the figures in the owner's words, and the statistician's names for them.
PROPOSAL_TIP = ("Precision: the share of the pages injected that your labels say the turn needed. Recall: the share "
                "of the pages your labelled turns needed that would be injected. “At least … with "
                f"{CONFIDENCE} % confidence”: what your labels can vouch for; with few labels it is well below the "
                "precision seen (Wilson's lower bound at one standard error, precisionLow in the engine's answer).")
THRESHOLD, PAGES_PER_TURN, PRECISION, RECALL, F1 = 0, 3, 5, 6, 7
SETTING_WORDS = {field.key: field.label for field in FIELDS}  # "highThreshold": "Inject at or above"
SCORE_COLUMNS = [
    Column("From", lambda b: b.get("from"), align_right=True),
    Column("To", lambda b: b.get("to"), align_right=True),
    Column("Needed", lambda b: b.get("needed"), align_right=True),
    Column("Not needed", lambda b: b.get("notNeeded"), align_right=True),
    Column("Not labelled", lambda b: b.get("unlabelled"), align_right=True),
]
SWEEP = tuple(round(step / 100, 2) for step in range(101))   # 0.00 ... 1.00, the most gateWhatIf takes
DEFAULT_THRESHOLD = 0.75   # the engine's highThreshold default, until the settings say which is in force


def skip_hints(row: dict[str, Any]) -> str:
    """``12 (3 needed a page)``: the turns the skip hint would mark at the row's threshold, and the misses."""
    return f"{row.get('skipHintTurns') or 0:,} ({row.get('skipHintMisses') or 0:,} needed a page)"


def _figure(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def figures_text(result: dict[str, Any] | None, row: dict[str, Any] | None, threshold: float) -> str:
    """What the gate would do at ``threshold`` over the journal, in a sentence or two (``row``: the sweep's)."""
    if result is None or row is None:
        return f"{INJECT_AT} {threshold:.2f}: loading the journal's figures…"
    turns, labelled = result.get("turns", 0), result.get("labelled", 0)
    if not turns:
        return (f"{INJECT_AT} {threshold:.2f}: no journal turns yet. Turn on the shadow journal in Settings; "
                "each shadow turn is kept for tuning.")
    text = (f"{INJECT_AT} {threshold:.2f}, over {counted(turns, 'journal turn')}: {row['pagesPerTurn']:.2f} "
            f"pages per turn ({counted(row['pagesInjected'], 'page')}; {counted(row['turnsInjecting'], 'turn')} "
            "would inject).")
    if not labelled:
        return text + " Label turns in the Labelling tab to see precision and recall."
    return text + (f" On the {labelled:,} labelled turns: precision {_figure(row.get('precision'))}, "
                   f"recall {_figure(row.get('recall'))}, F1 {_figure(row.get('f1'))}.")


def proposal_text(result: dict[str, Any], done: bool = False) -> str:
    """The engine's proposal for the asked precision, or why there is none, in a sentence or three; beside it
    what the same labels show at the threshold in force (unless ``done``: the proposal is in force)."""
    asked = f"For precision {result.get('precision', DEFAULT_PRECISION):.2f}"
    rests = (f"{result.get('labelled', 0):,} labelled turns ({result.get('neededScored', 0):,} needed pages scored)")
    high, now = result.get("highThreshold"), in_force_phrase(result, SETTING_WORDS)
    if high is None:
        return f"{asked}: no proposal yet, {result.get('reason', 'label more turns')}." + (
            f" Your labels so far, at {now}." if now else "")
    parts = tier_phrases(result, SETTING_WORDS)
    off = [f"“{SETTING_WORDS.get(key, key)}”" for key, value in (result.get("apply") or {}).items()
           if value is None]
    text = f"{asked}: " + "; ".join(parts) + f"; from {rests}."
    if off:
        text += " Applying turns " + " and ".join(off) + " off."
    if done:
        return text + " Applied: in force now."
    return text + (f" To compare, {now}." if now else "")


def proposed_threshold(proposal: dict[str, Any] | None) -> float | None:
    """The ``highThreshold`` *Apply the proposal* writes (None: the proposal has none)."""
    value = ((proposal or {}).get("apply") or {}).get("highThreshold")
    return None if value is None else float(value)


def applied(proposal: dict[str, Any] | None, effective: dict[str, Any] | None) -> bool:
    """Whether the settings in force hold every key of the proposal."""
    keys = (proposal or {}).get("apply") or {}
    return bool(keys) and effective is not None and all(
        effective.get(key) is None if value is None else
        effective.get(key) is not None and abs(float(effective[key]) - float(value)) < 1e-9
        for key, value in keys.items())


class _FittedPane(QWidget):
    """The histogram and the threshold's line beneath it: its minimum counts that line's words at the width
    they wrap to, so the splitter never squeezes the pane and draws the chart over them."""

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = super().minimumSizeHint()
        layout = self.layout()
        if layout is not None and self.width() > 0:
            hint.setHeight(max(hint.height(), layout.minimumHeightForWidth(self.width())))
        return hint


class _FittedContent(QWidget):
    """The panel's content in its scroll area: as tall as the viewport, scrolled only when shorter than its
    words (at the width they wrap to) and the panes' minimums; never squeezed below them."""

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt's name
        layout = self.layout()
        return layout.minimumHeightForWidth(width) if layout is not None else super().heightForWidth(width)


class TuningPanel(QWidget):
    """The proposal for a precision, the threshold explorer, the what-if table, pages per turn and
    precision/recall."""

    sig_what_if_loaded = Signal(object)
    """``operator/gateWhatIf`` answered; the argument is its result."""

    sig_sweep_loaded = Signal(object)
    """The sweep (every threshold in steps of 0.01) answered; the argument is its result."""

    sig_threshold_explored = Signal(float)
    """The explored threshold moved (dragged, typed or set); the figures shown are for it."""

    sig_threshold_chosen = Signal(float)
    """The owner chose to try a threshold in the settings form (nothing is saved yet)."""

    sig_proposal_loaded = Signal(object)
    """``operator/suggestGateThresholds`` answered; the argument is its result."""

    sig_proposal_applied = Signal(object)
    """The owner applied the proposal; the argument is the ``recallGate`` keys to write."""

    sig_apply_undone = Signal()
    """The owner asked for the settings as they were before the proposal was applied."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self.result: dict[str, Any] | None = None
        self.sweep: dict[str, Any] | None = None
        self.sweep_rows: dict[float, dict[str, Any]] = {}
        self.current_threshold: float | None = None
        self.proposal: dict[str, Any] | None = None
        self.in_force: dict[str, Any] | None = None
        self.explored = DEFAULT_THRESHOLD
        self._explored_by_owner = False
        self._moving = False
        self.model = RowsModel(WHAT_IF_COLUMNS, self)
        self.table = named(table(self.model), "What each threshold would do")
        self.table.set_empty_text("Nothing to tune from yet: the shadow journal holds no scored turns. Run the gate "
                                  "in shadow mode with the journal on, then label turns in Labelling.")
        self.scores_model = RowsModel(SCORE_COLUMNS, self)
        self.scores_chart = Chart(self.scores_model, 0, [Series(2, "needed"), Series(3, "not needed"),
                                                         Series(4, "not labelled")], kind="stacked", x_end_column=1,
                                  title="Journal scores: drag the threshold", x_title="probability",
                                  y_title="pages")
        self.scores_chart.add_handle(self.explored, "inject at {value:.2f}",
                                     "Drag to see what the gate would inject at or above this score")
        self.scores_chart.sig_handle_moved.connect(self.explore)
        self.pages_chart = Chart(self.model, THRESHOLD, [Series(PAGES_PER_TURN, "pages per turn")], kind="lines",
                                 title="Pages each threshold would inject per turn", x_title="inject at or above")
        self.quality_chart = Chart(self.model, THRESHOLD, [Series(PRECISION, "precision"), Series(RECALL, "recall"),
                                                          Series(F1, "F1")], kind="lines", y_max=1.0,
                                   title="On the labelled turns", x_title="inject at or above")
        for chart in (self.pages_chart, self.quality_chart):
            chart.add_cursor(self.explored)
        self.precision_box = QDoubleSpinBox()
        self.precision_box.setRange(*PRECISION_RANGE)   # what operator/suggestGateThresholds and the command line take
        self.precision_box.setDecimals(2)
        self.precision_box.setSingleStep(0.05)
        self.precision_box.setValue(DEFAULT_PRECISION)
        self.precision_box.setAccessibleName("Precision asked for")
        self.precision_box.setToolTip("The share of injected pages that should be pages a turn needed; the "
                                      "proposal is the lowest score to inject at that your labels hold at it. "
                                      f"At {DEFAULT_POINTER_PRECISION:.2f} or below, no pointer lines are proposed")
        self.precision_box.valueChanged.connect(self._on_precision_changed)
        precision_label = plain_label("&Precision:")
        precision_label.setBuddy(self.precision_box)
        self.proposal_label = plain_label()
        self.proposal_label.setWordWrap(True)
        self.proposal_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.proposal_label.setToolTip(PROPOSAL_TIP)
        self.apply_button = QPushButton("&Apply the proposal")
        self.apply_button.setToolTip("Write the proposed thresholds to config.json now (Settings' save)")
        self.apply_button.clicked.connect(self._on_apply_clicked)
        self.apply_button.setEnabled(False)
        self.before: dict[str, Any] | None = None   # the applied keys as they were in force before Apply
        self.undo_button = QPushButton("U&ndo the apply")
        self.undo_button.setToolTip("Write the recall gate settings back as they were before Apply")
        self.undo_button.clicked.connect(self.sig_apply_undone.emit)
        self.undo_button.hide()

        self.threshold_box = QDoubleSpinBox()
        self.threshold_box.setRange(0.0, 1.0)
        self.threshold_box.setDecimals(2)
        self.threshold_box.setSingleStep(0.01)
        self.threshold_box.setValue(self.explored)
        self.threshold_box.setAccessibleName("Explored threshold: inject at or above")
        self.threshold_box.setToolTip("The threshold explored (the line on the histogram); arrows move it by 0.01")
        self.threshold_box.valueChanged.connect(self.explore)
        box_label = plain_label("Th&reshold:")
        box_label.setBuddy(self.threshold_box)
        self.figures = plain_label()
        self.figures.setWordWrap(True)
        self.figures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.use_threshold_button = QPushButton("Use t&his threshold")
        self.use_threshold_button.setToolTip("Put the explored threshold into the Settings tab's Inject at or above "
                                             "(save it there)")
        self.use_threshold_button.clicked.connect(self._on_use_threshold_clicked)
        self.use_threshold_button.setEnabled(False)

        proposal = QHBoxLayout()
        proposal.addWidget(precision_label)
        proposal.addWidget(self.precision_box)
        proposal.addWidget(self.proposal_label, 1)
        actions = QVBoxLayout()   # one above the other: the proposal's words keep the width
        actions.addWidget(self.apply_button)
        actions.addWidget(self.undo_button)
        actions.addStretch(1)
        proposal.addLayout(actions)
        controls = QHBoxLayout()
        controls.addWidget(box_label)
        controls.addWidget(self.threshold_box)
        controls.addWidget(self.figures, 1)
        controls.addWidget(self.use_threshold_button)
        explorer = _FittedPane()
        explorer_layout = QVBoxLayout(explorer)
        explorer_layout.setContentsMargins(0, 0, 0, 0)
        explorer_layout.addWidget(self.scores_chart, 1)
        explorer_layout.addLayout(controls)
        charts = QSplitter(Qt.Orientation.Horizontal)
        charts.addWidget(self.pages_chart)
        charts.addWidget(self.quality_chart)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(explorer)
        splitter.addWidget(charts)
        splitter.addWidget(self.table)
        splitter.setSizes([300, 240, 200])
        content = _FittedContent()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(proposal)
        layout.addWidget(splitter, 1)
        # A window too short for the proposal's lines and the charts scrolls: squeezed, the splitter would draw
        # the histogram over the threshold line beneath it.
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # no Tab stop of its own: Tab goes into the panel
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(content)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        self._show_figures()

    def set_agent(self, agent: str | None) -> None:
        self.agent = agent
        self.refresh()

    def set_current_threshold(self, threshold: float | None) -> None:
        self.current_threshold = threshold
        self._mark()
        if threshold is not None and not self._explored_by_owner:
            self.explore(threshold, by_owner=False)

    def refresh(self) -> None:
        if self.agent is None:
            self.result = self.sweep = None
            self.sweep_rows = {}
            self.model.set_rows([])
            self.scores_model.set_rows([])
            self.proposal = None
            self.proposal_label.clear()
            self.apply_button.setEnabled(False)
            self._show_figures()
            return
        self.propose()
        self.tasks.request("operator/gateWhatIf", {"agent": self.agent}, self._on_what_if, owner=self)
        self.tasks.request("operator/gateWhatIf", {"agent": self.agent, "thresholds": list(SWEEP)}, self._on_sweep,
                           owner=self)

    # --- the proposal for a precision ----------------------------------------------------------------

    def propose(self) -> None:
        """Ask the engine for the thresholds the labels hold at the precision in the box."""
        if self.agent is None:
            return
        self.tasks.request("operator/suggestGateThresholds",
                           {"agent": self.agent, "precision": round(self.precision_box.value(), 2)},
                           self._on_proposal, owner=self)

    def set_undo(self, before: dict[str, Any] | None) -> None:
        """``before``: the applied keys as they were in force before Apply (the undo is offered); None: none."""
        self.before = before
        self.undo_button.setVisible(before is not None)
        self._show_proposal()

    def set_in_force(self, effective: dict[str, Any] | None) -> None:
        """The settings in force (loaded or just saved): the proposal says whether they hold it."""
        self.in_force = effective
        compared = ((self.proposal or {}).get("inForce") or {}).get("threshold")
        if compared is not None and (effective or {}).get("highThreshold") is not None \
                and abs(float(effective["highThreshold"]) - compared) > 1e-9:
            self.propose()   # its comparison was read at another threshold (config.json changed since)
        self._show_proposal()

    def _on_precision_changed(self, *_: Any) -> None:
        if self.proposal is None or abs(self.proposal.get("precision", 0) - self.precision_box.value()) > 1e-9:
            self.propose()

    def _on_proposal(self, result: dict[str, Any]) -> None:
        self.proposal = result
        self._show_proposal()
        self.sig_proposal_loaded.emit(result)

    def _show_proposal(self) -> None:
        if self.proposal is None:
            return
        done = applied(self.proposal, self.in_force)
        text = proposal_text(self.proposal, done)
        if self.before is not None:
            was = " and ".join(f"{SETTING_WORDS.get(key, key)} {'off' if value is None else threshold_text(value)}"
                               for key, value in self.before.items())
            text += f" Before Apply: {was}; Undo the apply writes the settings back as they were."
        self.proposal_label.setText(text)
        self.apply_button.setEnabled(bool(self.proposal.get("apply")) and not done)
        self._mark()

    def _on_apply_clicked(self) -> None:
        keys = (self.proposal or {}).get("apply") or {}
        if keys:
            self.apply_button.setEnabled(False)   # until the settings written say whether they hold it
            self.sig_proposal_applied.emit(dict(keys))

    def _on_what_if(self, result: dict[str, Any]) -> None:
        self.result = result
        self.model.set_rows(result.get("thresholds") or [])
        self.table.resizeColumnsToContents()
        self._mark()
        self.sig_what_if_loaded.emit(result)

    def _on_sweep(self, result: dict[str, Any]) -> None:
        self.sweep = result
        self.sweep_rows = {round(row["threshold"], 2): row for row in result.get("thresholds") or []}
        self.scores_model.set_rows(result.get("scores") or [])
        self._show_figures()
        self.sig_sweep_loaded.emit(result)

    # --- exploring a threshold ----------------------------------------------------------------------

    def explore(self, value: float, by_owner: bool = True) -> None:
        """Move the explored threshold to ``value`` (snapped to 0.01): the line, the box and the figures."""
        threshold = round(min(1.0, max(0.0, float(value))), 2)
        if self._moving:
            return
        self._moving = True
        try:
            self._explored_by_owner = self._explored_by_owner or by_owner
            changed = threshold != self.explored
            self.explored = threshold
            if abs((self.scores_chart.handle_value() or 0.0) - threshold) > 1e-9:
                self.scores_chart.set_handle_value(threshold)
            for chart in (self.pages_chart, self.quality_chart):
                chart.set_cursor_value(threshold)
            if abs(self.threshold_box.value() - threshold) > 1e-9:
                self.threshold_box.setValue(threshold)
        finally:
            self._moving = False
        if changed:
            self._show_figures()
            self.sig_threshold_explored.emit(threshold)

    def figures_at(self, threshold: float) -> dict[str, Any] | None:
        """The sweep's row for ``threshold`` (what the engine computed at it), once the sweep is loaded."""
        return self.sweep_rows.get(round(threshold, 2))

    def _show_figures(self) -> None:
        row = self.figures_at(self.explored)
        self.figures.setText(figures_text(self.sweep, row, self.explored))
        self.use_threshold_button.setEnabled(self.agent is not None)

    # --- markers and choosing ----------------------------------------------------------------------

    def _mark(self) -> None:
        markers = []
        if self.current_threshold is not None:
            markers.append(Marker(self.current_threshold, f"in force {threshold_text(self.current_threshold)}"))
        proposed = proposed_threshold(self.proposal)
        if proposed is not None and not applied(self.proposal, self.in_force):
            markers.append(Marker(proposed, f"proposed {proposed:g}"))  # the number Apply writes, as its line says
        self.pages_chart.set_markers(markers)
        self.quality_chart.set_markers(markers)
        self.scores_chart.set_markers(markers)

    def _on_use_threshold_clicked(self) -> None:
        self.sig_threshold_chosen.emit(self.explored)
