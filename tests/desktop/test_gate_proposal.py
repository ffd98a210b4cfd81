"""The Recall gate view's proposal for a precision: applied in one action, shown applied with its four decimals,
compared with the threshold in force, and undone back to the settings as they were."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from desktop.common.models import VALUE_ROLE
from desktop.gate.replay_panel import summary_text as replay_summary
from desktop.gate.tuning_panel import F1 as F1_COLUMN, THRESHOLD as THRESHOLD_COLUMN
from tests.desktop.conftest import wait_for_signal
from tests.desktop.gate_view_helpers import proposal_shown, read_config, shown_on_main
from tests.desktop.gate_view_helpers import gate_engine  # noqa: F401 (a fixture)
from tests.engine.gate_helpers import write_config


def test_the_proposal_for_a_precision_is_applied_in_one_action_and_shown_applied(qtbot, gate_engine, tasks,
                                                                                 gui_thread_guard) -> None:
    engine, _ = gate_engine
    view, proposal = proposal_shown(qtbot, tasks, engine, gui_thread_guard)
    tuning = view.tuning
    # The six real turns are unlabelled; the 35 labelled ones propose 0.6, and a skip hint below 0.4.
    assert proposal["apply"] == {"highThreshold": 0.6, "skipHintBelow": 0.4}
    text = tuning.proposal_label.text()
    assert text.startswith("For precision 0.80: Inject at or above 0.6: precision 1.00") and "35 labelled turns" in text
    assert "Applied" not in text and tuning.apply_button.isEnabled()
    # How sure the labels are, in the owner's words; the statistician's name only on hover.
    assert "precision 1.00 (at least 0.92 with 84 % confidence), recall" in text and "Wilson" not in text
    assert "Wilson's lower bound" in tuning.proposal_label.toolTip()
    qtbot.waitUntil(lambda: tuning.model.rowCount() > 0, timeout=10_000)
    assert tuning.model.index(0, F1_COLUMN).data(Qt.ItemDataRole.ToolTipRole).endswith(
        "precision and recall in one figure (their harmonic mean); high only when both are")
    # Beside it, what the same labels show at the threshold in force, to weigh the proposal against.
    assert text.endswith(" To compare, Inject at or above 0.75 (in force now): precision 1.00, recall 0.80, on 12 "
                         "pages of 12 turns.")
    # One recommendation, one number: the proposal's, marked on every chart as its line says it and Apply writes it.
    said = [label.text() for label in tuning.findChildren(QLabel) if label.isVisibleTo(tuning) and label.text()]
    assert sum("Inject at or above 0.6:" in text for text in said) == 1 and not any("uggest" in text for text in said)
    for chart in (tuning.scores_chart, tuning.pages_chart, tuning.quality_chart):
        assert [(m.x, m.label) for m in chart.markers if m.label.startswith("proposed")] == [(0.6, "proposed 0.6")]

    wait_for_signal(qtbot, view.settings.sig_settings_saved,
                    lambda: qtbot.keyClick(tuning.apply_button, Qt.Key.Key_Space))
    assert read_config(engine, gui_thread_guard)["recallGate"] == {
        "mode": "shadow", "journal": True, "highThreshold": 0.6, "skipHintBelow": 0.4}
    qtbot.waitUntil(lambda: "Applied: in force now." in tuning.proposal_label.text(), timeout=10_000)
    assert "To compare" not in tuning.proposal_label.text()
    assert not tuning.apply_button.isEnabled()
    assert view.settings.values()["highThreshold"] == 0.6 and view.settings.values()["skipHintBelow"] == 0.4
    qtbot.waitUntil(lambda: [m.label for m in tuning.quality_chart.markers] == ["in force 0.60"],
                    timeout=10_000)  # in force now: marked once
    qtbot.waitUntil(lambda: not tasks.busy, timeout=10_000)   # the tuning tab reloaded after the save
    assert "Applied: in force now." in tuning.proposal_label.text()

    blocker = wait_for_signal(qtbot, tuning.sig_proposal_loaded, lambda: tuning.precision_box.setValue(0.95))
    assert blocker.args[0]["precision"] == 0.95 and blocker.args[0]["skipHintBelow"] is None
    assert tuning.proposal_label.text().startswith("For precision 0.95")


def test_an_applied_proposal_keeps_its_four_decimals_when_the_form_is_saved_again(qtbot, gate_engine, tasks,
                                                                                 gui_thread_guard) -> None:
    # Proposals have four decimals (0.0562). The form showed three: after Apply, switching the mode to live and
    # saving wrote 0.056 and 0.053, no longer the proposal, and the charts said "in force 0.06".
    engine, _ = gate_engine
    view = shown_on_main(qtbot, tasks)
    form = view.settings
    wait_for_signal(qtbot, form.sig_settings_saved,
                    lambda: view.tuning.sig_proposal_applied.emit({"highThreshold": 0.0562, "skipHintBelow": 0.0528}))
    assert form.values()["highThreshold"] == 0.0562 and form.values()["skipHintBelow"] == 0.0528
    assert form.inputs["highThreshold"].text() == "0.0562" and not form.edited()
    assert [m.label for m in view.tuning.quality_chart.markers] == ["in force 0.0562"]
    assert [m.label for m in view.log.histogram.markers] == ["inject at 0.0562"]

    form.inputs["mode"].setCurrentText("live")
    blocker = wait_for_signal(qtbot, form.sig_checked, lambda: None)
    assert blocker.args[0]["valid"]
    wait_for_signal(qtbot, form.sig_settings_saved, lambda: qtbot.keyClick(form.save_button, Qt.Key.Key_Space))
    assert read_config(engine, gui_thread_guard)["recallGate"] == {
        "mode": "live", "journal": True, "highThreshold": 0.0562, "skipHintBelow": 0.0528}


def test_the_what_if_table_and_replay_say_an_applied_threshold_with_its_four_decimals(qtbot, gate_engine, tasks,
                                                                                      gui_thread_guard) -> None:
    # The table's Inject at column showed 0.056 for an applied 0.0562 (its tooltip 0.06): the owner could not
    # match the row in force to what Apply wrote.
    view = shown_on_main(qtbot, tasks)
    tuning = view.tuning
    wait_for_signal(qtbot, view.settings.sig_settings_saved,
                    lambda: tuning.sig_proposal_applied.emit({"highThreshold": 0.0562}))
    view.show_tab(tuning)

    def shown_thresholds() -> list[str]:
        return [tuning.model.index(row, THRESHOLD_COLUMN).data() for row in range(tuning.model.rowCount())]

    qtbot.waitUntil(lambda: "0.0562" in shown_thresholds(), timeout=10_000)
    assert shown_thresholds()[:3] == ["0.05", "0.0562", "0.10"]
    row = shown_thresholds().index("0.0562")
    assert tuning.model.index(row, THRESHOLD_COLUMN).data(Qt.ItemDataRole.ToolTipRole) == (
        "Inject at or above 0.0562 (highThreshold in config.json)")
    assert "skip hint below 0.0562," in tuning.model.index(row, 4).data(Qt.ItemDataRole.ToolTipRole)
    assert tuning.model.index(row, THRESHOLD_COLUMN).data(VALUE_ROLE) == 0.0562   # the charts read the number
    assert "injecting at or above 0.0562:" in replay_summary({"settings": {"highThreshold": 0.0562}, "turns": []})


def test_the_proposals_comparison_follows_a_threshold_changed_in_config_json(qtbot, gate_engine, tasks,
                                                                              gui_thread_guard) -> None:
    engine, fake = gate_engine
    view, _ = proposal_shown(qtbot, tasks, engine, gui_thread_guard)
    tuning = view.tuning
    assert "Inject at or above 0.75 (in force now)" in tuning.proposal_label.text()
    gui_thread_guard.active = False   # the owner edits config.json by hand
    try:
        write_config(engine.state, {"mode": "shadow", "journal": True, "highThreshold": 0.2}, model="rerank/test",
                     base_url=fake.url)
    finally:
        gui_thread_guard.active = True
    blocker = wait_for_signal(qtbot, tuning.sig_proposal_loaded, view.settings.load)   # the view read it again
    assert blocker.args[0]["inForce"]["threshold"] == 0.2
    assert tuning.proposal_label.text().endswith(" To compare, Inject at or above 0.2 (in force now): precision "
                                                 "0.48, recall 0.80, on 25 pages of 13 turns.")


def test_an_applied_proposal_can_be_undone_back_to_the_settings_as_they_were(qtbot, gate_engine, tasks,
                                                                              gui_thread_guard) -> None:
    # After Apply nothing said what was in force before, nor how to go back: the form can only write values, so
    # the Decision model's own threshold (no key written) could not be had again from the window.
    engine, _ = gate_engine
    view, _ = proposal_shown(qtbot, tasks, engine, gui_thread_guard)
    tuning = view.tuning
    assert not tuning.undo_button.isVisibleTo(tuning)
    wait_for_signal(qtbot, view.settings.sig_settings_saved, tuning.apply_button.click)
    qtbot.waitUntil(lambda: "Applied: in force now." in tuning.proposal_label.text(), timeout=10_000)
    assert tuning.proposal_label.text().endswith(
        " Before Apply: Inject at or above 0.75 and Skip hint below off; Undo the apply writes the settings back as "
        "they were.")
    assert tuning.undo_button.isVisibleTo(tuning)

    wait_for_signal(qtbot, view.settings.sig_settings_saved,
                    lambda: qtbot.keyClick(tuning.undo_button, Qt.Key.Key_Space))
    assert read_config(engine, gui_thread_guard)["recallGate"] == {"mode": "shadow", "journal": True}
    assert view.settings.values()["highThreshold"] == 0.75 and view.settings.values()["skipHintBelow"] is None
    qtbot.waitUntil(lambda: tuning.apply_button.isEnabled(), timeout=10_000)
    assert "Applied" not in tuning.proposal_label.text() and "Before Apply" not in tuning.proposal_label.text()
    assert not tuning.undo_button.isVisibleTo(tuning)

    # Saved from the form after Apply, the settings are the owner's since: Undo is no longer offered.
    wait_for_signal(qtbot, view.settings.sig_settings_saved, tuning.apply_button.click)
    assert tuning.undo_button.isVisibleTo(tuning)
    wait_for_signal(qtbot, view.settings.sig_settings_loaded, lambda: view.show_tab(view.settings))
    view.settings.inputs["excerpts"].setValue(3)
    wait_for_signal(qtbot, view.settings.sig_checked, lambda: None)
    wait_for_signal(qtbot, view.settings.sig_settings_saved, view.settings.save_button.click)
    assert not tuning.undo_button.isVisibleTo(tuning)
    assert read_config(engine, gui_thread_guard)["recallGate"]["excerpts"] == 3
