"""Recall gate: its settings, the shadow log, threshold tuning, labelling the journal, and replay.

Tabs (Alt+letter or Ctrl+Tab):

- **Settings**: mode and every key of the ``recallGate`` block, checked by
  the engine as you type and written only when valid (the one place the
  window writes configuration besides store membership and models).
- **Shadow log**: every gate turn of the agent with its per-page scores and
  tiers; the score histogram by tier; outcome and latency figures.
- **Tuning**: the one recommendation, the thresholds the labels hold for a
  precision the owner picks, applied in one action; and from the shadow
  journal, what each ``highThreshold`` would inject per turn and, on
  labelled turns, precision and recall.
- **Labelling**: which pages each journal turn needed.
- **Replay**: journal turns run again against other settings or another
  model, as an engine job with progress and cancel.

The settings are the engine's (config.json); the log, journal and replays
are the chosen agent's private partition.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from ..tasks import EngineTasks
from .journal_panel import JournalPanel
from .log_panel import GateLogPanel
from .replay_panel import ReplayPanel
from .settings_form import GateSettingsForm
from .tuning_panel import TuningPanel


class GateView(QWidget):
    title = "Recall gate"

    sig_record_requested = Signal(str)
    """A page in the shadow log was opened (its record id)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self._shown_for: dict[int, str | None] = {}
        self.settings = GateSettingsForm(tasks)
        self.log = GateLogPanel(tasks)
        self.tuning = TuningPanel(tasks)
        self.journal = JournalPanel(tasks)
        self.replay = ReplayPanel(tasks, self.settings.values, self.journal.selected_turn_ids)
        self.tabs = QTabWidget()
        for panel, label in ((self.settings, "&Settings"), (self.log, "Shadow &log"), (self.tuning, "&Tuning"),
                             (self.journal, "La&belling"), (self.replay, "Re&play")):
            self.tabs.addTab(panel, label)
        self.tabs.currentChanged.connect(self._on_tab_changed)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)

        self.settings.sig_settings_loaded.connect(self._on_settings_loaded)
        self.settings.sig_settings_saved.connect(lambda _: self._forget(self.tuning))
        self.tuning.sig_proposal_applied.connect(self._on_proposal_applied)
        self.tuning.sig_apply_undone.connect(self._on_apply_undone)
        self._before_apply: dict[str, Any] | None = None   # the recallGate block as written before Apply
        self._applied: dict[str, Any] | None = None        # and as Apply wrote it
        self.tuning.sig_threshold_chosen.connect(self._on_threshold_chosen)
        self.journal.sig_turn_labelled.connect(lambda _: self._forget(self.tuning))
        self.journal.sig_journal_cleared.connect(lambda _: (self._forget(self.tuning), self._forget(self.log)))
        self.log.sig_record_requested.connect(self.sig_record_requested.emit)

    def set_agent(self, agent: str | None) -> None:
        """The window shows this view for ``agent``: the settings read again, the tab in view loaded if not yet."""
        self._reload_settings()
        if agent != self.agent:
            self.agent = agent
            self._load_current()

    def refresh(self) -> None:
        """F5 (or the agent's store created): the settings and the tab in view again, the other tabs when shown."""
        self.settings.load()
        self._shown_for.clear()
        if self.tabs.currentWidget() is not self.settings:
            self._reload(self.tabs.currentWidget())

    def live_refresh(self) -> None:
        """The engine logged turns: the log, tuning and labelling tabs reload; an edit in Settings is kept."""
        for panel in (self.log, self.tuning, self.journal):
            self._forget(panel)

    def show_tab(self, panel: QWidget) -> None:
        self.tabs.setCurrentWidget(panel)

    # --- loading the tab in view, once per agent ----------------------------------------------------

    def _on_tab_changed(self, _index: int) -> None:
        if self.tabs.currentWidget() is self.settings:
            self._reload_settings()
        else:
            self._load_current()

    def _load_current(self) -> None:
        panel = self.tabs.currentWidget()
        if panel is self.settings:
            return
        if self._shown_for.get(id(panel), object()) != self.agent:
            self._reload(panel)

    def _reload_settings(self) -> None:
        """config.json may have been edited by hand (announced only once the engine next reads it, and then
        as a change of ``stores``): read it again, unless the owner is editing the form."""
        if not self.settings.edited():
            self.settings.load()

    def _reload(self, panel: Any) -> None:
        if panel is self.settings:
            self.settings.load()
            return
        self._shown_for[id(panel)] = self.agent
        panel.set_agent(self.agent)

    def _forget(self, panel: QWidget) -> None:
        """``panel`` is out of date: reload it now if it is in view, else when it is next shown."""
        self._shown_for.pop(id(panel), None)
        if self.tabs.currentWidget() is panel:
            self._reload(panel)

    # --- between the tabs ---------------------------------------------------------------------------

    def _on_settings_loaded(self, result: dict[str, Any]) -> None:
        if self._before_apply is not None and result.get("recallGate") != self._applied:
            self._before_apply = self._applied = None   # saved or edited since Apply: Undo would lose that
            self.tuning.set_undo(None)
        effective = result.get("effective") or {}
        self.tuning.set_in_force(result.get("effective"))
        self.tuning.set_current_threshold(effective.get("highThreshold"))
        self.log.set_current_threshold(effective.get("highThreshold"))

    def _on_proposal_applied(self, keys: dict[str, Any]) -> None:
        """Apply writes the proposal's keys; what was written and in force before is kept for Undo."""
        current = self.settings.current or {}
        written, effective = current.get("recallGate"), current.get("effective") or {}
        if isinstance(written, dict):
            self._before_apply, self._applied = dict(written), {**written, **keys}
            self.tuning.set_undo({key: effective.get(key) for key in keys})
        self.settings.apply_changes(keys)

    def _on_apply_undone(self) -> None:
        if self._before_apply is not None:
            self.settings.write_block(self._before_apply)
        self._before_apply = self._applied = None
        self.tuning.set_undo(None)

    def _on_threshold_chosen(self, threshold: float) -> None:
        self.settings.set_value("highThreshold", threshold)
        self.show_tab(self.settings)
