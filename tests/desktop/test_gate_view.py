"""The Recall gate view: settings checked by the engine, the shadow log and histogram, labelling, what-if, replay."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLabel

from desktop.gate import journal_panel
from desktop.gate.log_panel import stats_text
from desktop.gate.settings_form import DOCS, FIELDS
from desktop.gate.view import GateView
from engine.access.authority import AgentCaller
from engine.gate.turn import gate_turn
from engine.operator.gate_operator import handlers
from engine.index.similarity import HIGH_THRESHOLD
from engine.service import Engine
from models.fixtures import TINY_EMBEDDER
from models.installed import ModelStore
from models.local import add_local
from tests.desktop.conftest import wait_for_signal
from tests.desktop.gate_view_helpers import MESSAGES, keep_labelled_turns, read_config, shown, shown_on_main
from tests.desktop.gate_view_helpers import gate_engine  # noqa: F401 (a fixture)
from tests.engine.gate_helpers import ready, write_config


def test_settings_are_checked_by_the_engine_next_to_the_field_and_saved(qtbot, gate_engine, tasks,
                                                                        gui_thread_guard) -> None:
    engine, _ = gate_engine
    view = shown_on_main(qtbot, tasks)
    form = view.settings
    assert form.values()["mode"] == "shadow" and form.values()["journal"] is True
    assert form.values()["highThreshold"] == 0.75 and form.values()["mediumThreshold"] is None
    assert "Decision model rerank/test: ready" in form.status.text()

    blocker = wait_for_signal(qtbot, form.sig_checked, lambda: form.inputs["pageChars"].setValue(10))
    assert blocker.args[0] == {"valid": False, "message": "recallGate.pageChars must be an integer from 200 to 6,000",
                               "field": "recallGate.pageChars"}
    assert form.errors["pageChars"].isVisible() and "200 to 6,000" in form.errors["pageChars"].text()
    assert not form.save_button.isEnabled()

    def pointer_above_high() -> None:
        form.inputs["pageChars"].setValue(2000)
        form.switches["mediumThreshold"].setChecked(True)
        form.inputs["mediumThreshold"].setValue(0.9)

    wait_for_signal(qtbot, form.sig_checked, pointer_above_high)
    assert not form.errors["pageChars"].isVisible() and form.errors["mediumThreshold"].isVisible()
    assert form.errors["mediumThreshold"].text().startswith("⚠ Must be below “Inject at or above”")

    blocker = wait_for_signal(qtbot, form.sig_checked, lambda: form.inputs["mediumThreshold"].setValue(0.5))
    assert blocker.args[0]["valid"] and form.save_button.isEnabled()
    wait_for_signal(qtbot, form.sig_settings_saved, lambda: qtbot.keyClick(form.save_button, Qt.Key.Key_Space))
    assert read_config(engine, gui_thread_guard)["recallGate"] == {
        "mode": "shadow", "journal": True, "mediumThreshold": 0.5, "pageChars": 2000}
    assert form.verdict.text() == "Saved to config.json."
    wait_for_signal(qtbot, form.sig_checked, lambda: None)  # the saved form is checked again, as loaded:
    assert form.verdict.text() == "Saved to config.json."  # the confirmation stays
    wait_for_signal(qtbot, form.sig_checked, lambda: form.inputs["pageChars"].setValue(2100))
    assert form.verdict.text() == "Valid."  # until the form differs from what was saved


def engine_defaults(engine: Engine, guard: Any) -> dict:
    """The engine's own answer for an empty block: every default, highThreshold the one in force."""
    guard.active = False   # the test asks the engine itself, beside the window
    try:
        return handlers(engine)["checkGateSettings"]({"recallGate": {}})["effective"]
    finally:
        guard.active = True


def test_every_setting_says_what_it_does_its_default_and_the_trade_off(qtbot, gate_engine, tasks, monkeypatch,
                                                                       tmp_path, gui_thread_guard) -> None:
    engine, _ = gate_engine
    view = shown_on_main(qtbot, tasks)
    form = view.settings
    qtbot.waitUntil(lambda: form.defaults is not None, timeout=10_000)
    defaults = engine_defaults(engine, gui_thread_guard)
    assert set(form.inputs) == {field.key for field in FIELDS} == set(defaults) == set(form.helps)
    for field in FIELDS:
        shown_help, tip = form.helps[field.key], form.inputs[field.key].toolTip()
        assert shown_help.isVisible(), field.key
        for words in (field.does, field.trade_off):
            assert words and words in shown_help.text() and words in tip, field.key
        assert "Default: " in shown_help.text() and "Default: " in tip, field.key
        assert shown_help.section == field.section and shown_help.more.isVisible(), field.key
    assert "probabilityTrue" not in " ".join(label.text() for label in form.helps.values())
    assert form.switches["mediumThreshold"].toolTip() == form.inputs["mediumThreshold"].toolTip()
    # The defaults are the engine's, as the owner reads them.
    assert defaults["highThreshold"] == 0.75 and defaults["mediumThreshold"] is None
    assert "Default: 0.75, the one for the Decision model rerank/test." in form.helps["highThreshold"].text()
    assert "Default: off." in form.helps["mediumThreshold"].text()
    assert f"Default: {defaults['mode']}." in form.helps["mode"].text()
    assert f"Default: {defaults['maxIndexChars']:,}." in form.helps["maxIndexChars"].text()
    assert "Default: off." in form.helps["journal"].text() and defaults["journal"] is False

    opened: list = []
    form.open_url = opened.append
    form.helps["highThreshold"].more.click()   # the link names its own section
    assert [(url.toLocalFile(), url.fragment()) for url in opened] == [(str(DOCS), "the-default-threshold")]
    monkeypatch.setattr("desktop.gate.settings_form.DOCS", tmp_path / "absent.md")   # an installed wheel
    form.helps["mode"].linkActivated.emit("settings")
    assert len(opened) == 1 and form.general_error.isVisible()
    assert "docs/recall-gate.md, section #settings" in form.general_error.text()


def test_every_help_is_shown_whole_however_long_its_text_grows(qtbot, gate_engine, tasks,
                                                               gui_thread_guard) -> None:
    """The defaults come after the first paint and lengthen every help, and a help can grow again later
    (the threshold's names the Decision model): each gets the height of the lines it wraps onto (in a form
    layout a help of four lines was cut to three: its row got the height for another width)."""
    view = shown(qtbot, tasks)
    view.resize(900, 600)
    form = view.settings
    wait_for_signal(qtbot, form.sig_settings_loaded, lambda: view.set_agent("main"))
    qtbot.waitUntil(lambda: form.defaults is not None, timeout=10_000)
    words = [help_line.words for help_line in form.helps.values()]
    assert max(label.heightForWidth(label.width()) for label in words) > 2 * label_line_height(words[0])

    def cut() -> list[str]:
        return [key for key, line in form.helps.items()
                if line.words.height() < line.words.heightForWidth(line.words.width())]

    qtbot.waitUntil(lambda: not cut(), timeout=10_000)
    grown = form.helps["excerpts"]
    lines = grown.words.height() // label_line_height(grown.words)
    grown.setText(" ".join([grown.text()] * 3))
    qtbot.waitUntil(lambda: not cut(), timeout=10_000)
    assert grown.words.height() // label_line_height(grown.words) > lines


def label_line_height(label: Any) -> int:
    return label.fontMetrics().lineSpacing()


def test_every_help_link_names_a_section_of_the_gate_docs() -> None:
    headings = re.findall(r"^#+ (.+)$", DOCS.read_text(encoding="utf-8"), flags=re.MULTILINE)
    anchors = {re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-") for heading in headings}
    assert "the-default-threshold" in anchors
    assert {field.section for field in FIELDS} <= anchors


@pytest.fixture
def embedding_engine(served_engine: Engine) -> Engine:
    """The demo store with a shadow gate, no highThreshold written, and the tiny embedding model as Decision model."""
    state = served_engine.state
    add_local(ModelStore(state.models), TINY_EMBEDDER, name="encoder")
    write_config(state, {"mode": "shadow"}, model="embedding/encoder")
    ready(served_engine)
    return served_engine


def test_the_threshold_default_shown_is_the_embedding_decision_models(qtbot, embedding_engine, tasks,
                                                                       gui_thread_guard) -> None:
    view = shown_on_main(qtbot, tasks)
    form = view.settings
    qtbot.waitUntil(lambda: form.defaults is not None, timeout=10_000)
    threshold = engine_defaults(embedding_engine, gui_thread_guard)["highThreshold"]
    assert threshold == HIGH_THRESHOLD != 0.75
    said = f"Default: {threshold:.2f}, the one for the Decision model embedding/encoder."
    assert said in form.helps["highThreshold"].text() and said in form.inputs["highThreshold"].toolTip()
    assert form.values()["highThreshold"] == threshold, "no highThreshold written: the model's is in force"


def test_a_pointer_line_above_the_decision_models_inject_line_is_refused_though_none_is_written(
        qtbot, embedding_engine, tasks, gui_thread_guard) -> None:
    view = shown_on_main(qtbot, tasks)
    form = view.settings
    qtbot.waitUntil(lambda: form.defaults is not None, timeout=10_000)
    assert form.values()["highThreshold"] == HIGH_THRESHOLD < 0.7 < 0.75   # the model's, not the spec's 0.75
    form.switches["mediumThreshold"].setChecked(True)
    form.inputs["mediumThreshold"].setValue(0.7)
    wait_for_signal(qtbot, form.sig_checked, lambda: qtbot.keyClick(form.save_button, Qt.Key.Key_Space))
    said = form.errors["mediumThreshold"].text()
    assert said.startswith(f"⚠ Must be below “Inject at or above”, {HIGH_THRESHOLD:g} here"), said
    assert form.verdict.text() == "Not valid: see the field marked ⚠."
    qtbot.waitUntil(lambda: not tasks.busy, timeout=10_000)
    assert read_config(embedding_engine, gui_thread_guard)["recallGate"] == {"mode": "shadow"}


def test_an_invalid_form_is_never_written(qtbot, gate_engine, tasks, gui_thread_guard) -> None:
    engine, _ = gate_engine
    view = shown_on_main(qtbot, tasks)
    form = view.settings
    form.inputs["timeoutMs"].setValue(50)
    wait_for_signal(qtbot, form.sig_checked, form.save)
    assert form.errors["timeoutMs"].isVisible() and "100 to 10,000" in form.errors["timeoutMs"].text()
    qtbot.waitUntil(lambda: not tasks.busy, timeout=10_000)
    assert read_config(engine, gui_thread_guard)["recallGate"] == {"mode": "shadow", "journal": True}


def test_a_pointer_line_above_the_inject_line_is_said_in_the_forms_words_and_not_saved(qtbot, gate_engine, tasks,
                                                                                      gui_thread_guard) -> None:
    engine, _ = gate_engine
    view = shown_on_main(qtbot, tasks)
    form = view.settings
    form.inputs["highThreshold"].setValue(0.5)
    form.switches["mediumThreshold"].setChecked(True)
    form.inputs["mediumThreshold"].setValue(0.7)
    wait_for_signal(qtbot, form.sig_checked, lambda: qtbot.keyClick(form.save_button, Qt.Key.Key_Space))
    said = form.errors["mediumThreshold"].text()
    assert form.errors["mediumThreshold"].isVisible() and not form.general_error.isVisible()
    assert said.startswith("⚠ Must be below “Inject at or above”"), said
    labels = {field.label for field in FIELDS}
    assert {"Inject at or above", "Pointer line from", "Skip hint below"} <= labels
    assert not re.search(r"recallGate|[a-z][A-Z]", said), "no config key shows in the form's error"
    assert form.verdict.text() == "Not valid: see the field marked ⚠."
    qtbot.waitUntil(lambda: not tasks.busy, timeout=10_000)
    assert read_config(engine, gui_thread_guard)["recallGate"] == {"mode": "shadow", "journal": True}


def test_the_shadow_log_shows_scores_and_tiers_and_a_histogram(qtbot, qtmodeltester, gate_engine, tasks,
                                                               gui_thread_guard) -> None:
    view = shown(qtbot, tasks)
    log = view.log
    with qtbot.waitSignals([log.sig_stats_loaded, log.log_model.sig_page_loaded], timeout=10_000):
        view.set_agent("main")
        view.show_tab(log)
    assert log.log_model.rowCount() == 6 and "6 turns (6 shadow)" in log.summary.text()
    outcome = [column.title for column in log.log_model.columns].index("Outcome")
    outcomes = [log.log_model.data(log.log_model.index(row, outcome)) for row in range(6)]
    assert set(outcomes) <= {"would inject", "would send a skip hint", "would add nothing"}, outcomes
    assert log.log_model.index(0, outcome).data(0x03).startswith("Shadow mode: nothing was injected; live mode would ")

    first = log.log_model.row(0)   # the newest turn: "blue-green deployment for atlas"
    log.log_table.selectRow(0)
    assert log.decisions_model.rowCount() == len(first["decisions"]) > 0
    tiers = {log.decisions_model.data(log.decisions_model.index(n, 1)) for n in range(log.decisions_model.rowCount())}
    assert "high" in tiers
    # Each page by its title, the id on hover: never a column of pg_01… ids to read.
    shown_pages = [log.decisions_model.index(n, 2) for n in range(log.decisions_model.rowCount())]
    assert "Atlas Migration" in [index.data() for index in shown_pages]
    assert [index.data(0x03) for index in shown_pages] == [d["id"] for d in first["decisions"]]
    blocker = wait_for_signal(qtbot, view.sig_record_requested,
                              lambda: log.decisions_table.activated.emit(log.decisions_model.index(0, 0)))
    assert blocker.args == [first["decisions"][0]["id"]]

    bins = log.histogram_model.rows()
    assert len(bins) == 20
    high = sum(1 for row in range(6) for d in log.log_model.row(row)["decisions"] if d["tier"] == "high")
    assert sum(b["high"] for b in bins) == high and bins[18]["high"] == high, "0.91 falls in 0.90-0.95"
    chart_rows = log.histogram.rows()
    assert len(chart_rows) == 20 and chart_rows[18][2][0] == high, "the chart reads the model"
    assert "high: " in log.histogram.describe_at(log.histogram.plot_area().left()
                                                 + 0.92 * log.histogram.plot_area().width())
    assert not log.histogram.grab().isNull()
    qtbot.waitUntil(lambda: view.settings.current is not None, timeout=10_000)
    assert [(m.x, m.label) for m in log.histogram.markers] == [(0.75, "inject at 0.75")], "the setting in force"
    for model in (log.log_model, log.decisions_model, log.histogram_model):
        qtmodeltester.check(model, force_py=True)


def label_every_turn(qtbot: Any, view: GateView, needed_title: str) -> None:
    journal = view.journal
    for row in range(journal.journal_model.rowCount()):
        journal.journal_table.selectRow(row)
        pages = journal.pages_model
        for number in range(pages.rowCount()):
            if pages.page(number)["title"] == needed_title:
                pages.setData(pages.index(number, 0), Qt.CheckState.Checked.value, Qt.ItemDataRole.CheckStateRole)
        wait_for_signal(qtbot, journal.sig_turn_labelled, journal.save_button.click)


def test_labelling_turns_feeds_the_what_if_charts(qtbot, qtmodeltester, gate_engine, tasks,
                                                  gui_thread_guard) -> None:
    view = shown(qtbot, tasks)
    journal = view.journal
    view.set_agent("main")
    wait_for_signal(qtbot, journal.sig_journal_loaded, lambda: view.show_tab(journal))
    assert journal.journal_model.rowCount() == 6
    journal.journal_table.selectRow(0)
    assert journal.message.toPlainText() == MESSAGES[-1]
    assert {journal.pages_model.page(n)["title"] for n in range(journal.pages_model.rowCount())} >= {
        "Atlas Migration"}
    journal.pages_table.selectRow(0)
    assert journal.document.toPlainText().startswith(journal.pages_model.page(0)["title"] + "\n")
    journal.extra.setText("Atlas!")
    journal.save_button.click()
    assert journal.status.text().startswith("Not a record id: 'Atlas!'")
    journal.extra.clear()

    label_every_turn(qtbot, view, "Atlas Migration")
    assert all(journal.journal_model.data(journal.journal_model.index(n, 2)) in ("1 needed", "no page needed")
               for n in range(6))
    qtmodeltester.check(journal.pages_model, force_py=True)
    qtmodeltester.check(journal.journal_model, force_py=True)

    tuning = view.tuning
    with qtbot.waitSignal(tuning.sig_proposal_loaded, timeout=10_000):
        blocker = wait_for_signal(qtbot, tuning.sig_what_if_loaded, lambda: view.show_tab(tuning))
    result = blocker.args[0]
    assert result["labelled"] == 6
    # Six labels are too few for a proposal: the tab says why, and recommends nothing else meanwhile.
    assert "no proposal yet" in tuning.proposal_label.text() and not tuning.apply_button.isEnabled()
    rows = tuning.model.rows()
    assert [row["threshold"] for row in rows] == sorted(row["threshold"] for row in rows)
    line = tuning.quality_chart.rows()
    assert len(line) == len(rows) and {m.label.split()[0] for m in tuning.quality_chart.markers} == {"in"}
    assert not tuning.quality_chart.grab().isNull() and not tuning.pages_chart.grab().isNull()
    qtmodeltester.check(tuning.model, force_py=True)

    tuning.explore(0.8)
    qtbot.keyClick(tuning.use_threshold_button, Qt.Key.Key_Space)
    assert view.tabs.currentWidget() is view.settings
    assert view.settings.values()["highThreshold"] == 0.8


def test_a_turn_being_labelled_stays_selected_with_its_ticks_when_the_agent_sends_another(
        qtbot, gate_engine, tasks, gui_thread_guard) -> None:
    # Every turn an agent sent reloaded the Labelling tab: the turn the owner was labelling lost its selection,
    # its ticks and the ids typed, with nothing saved, while the agent kept talking.
    engine, _ = gate_engine
    view = shown(qtbot, tasks)
    journal = view.journal
    view.set_agent("main")
    wait_for_signal(qtbot, journal.sig_journal_loaded, lambda: view.show_tab(journal))
    journal.journal_table.selectRow(2)
    chosen = journal.selected_turn()[1]
    pages = journal.pages_model
    pages.setData(pages.index(0, 0), Qt.CheckState.Checked.value, Qt.ItemDataRole.CheckStateRole)
    ticked = pages.needed()
    journal.pages_table.selectRow(0)
    journal.extra.setText("pg_01JD8PZ3A6QF0W2C9E4R7T1M5K")
    assert ticked and chosen["needed"] is None

    gui_thread_guard.active = False   # the agent's turn, beside the window
    try:
        caller = AgentCaller(engine.registry.add_credential("main"), {"kind": "owner-private"})
        assert gate_turn(engine, caller, {"message": "Atlas cut-over and Dana"})["outcome"] == "shadow"
    finally:
        gui_thread_guard.active = True
    wait_for_signal(qtbot, journal.sig_journal_loaded, view.live_refresh)   # what the window does on the change
    assert journal.journal_model.rowCount() == 7
    assert journal.selected_turn() == (3, chosen)   # one row down: the new turn is first
    assert journal.message.toPlainText() == chosen["message"]
    assert journal.pages_model.needed() == ticked and journal.extra.text() == "pg_01JD8PZ3A6QF0W2C9E4R7T1M5K"
    assert journal.document.toPlainText().startswith(pages.page(0)["title"])
    wait_for_signal(qtbot, journal.sig_turn_labelled, journal.save_button.click)
    assert journal.journal_model.row(3)["needed"] == [*ticked, "pg_01JD8PZ3A6QF0W2C9E4R7T1M5K"]

    view.set_agent("other")   # another agent's journal never selects a turn of this one's
    view.set_agent("main")
    qtbot.waitUntil(lambda: journal.journal_model.rowCount() == 7, timeout=10_000)
    assert journal.selected_turn() is None


def test_saving_a_label_moves_on_to_the_next_turn_not_labelled_with_the_focus_in_the_list(
        qtbot, gate_engine, tasks, gui_thread_guard) -> None:
    # After a save the turn just labelled stayed selected: the owner had to find the next one by hand.
    view = shown(qtbot, tasks)
    journal = view.journal
    view.set_agent("main")
    wait_for_signal(qtbot, journal.sig_journal_loaded, lambda: view.show_tab(journal))
    journal.journal_table.selectRow(3)
    wait_for_signal(qtbot, journal.sig_turn_labelled, journal.none_button.click)
    journal.journal_table.selectRow(1)
    journal.save_button.setFocus()   # as a click on it leaves it
    pages = journal.pages_model
    pages.setData(pages.index(0, 0), Qt.CheckState.Checked.value, Qt.ItemDataRole.CheckStateRole)
    ticked = pages.needed()
    wait_for_signal(qtbot, journal.sig_turn_labelled, journal.save_button.click)
    assert journal.journal_model.row(1)["needed"] == ticked
    assert journal.selected_turn()[0] == 2 and journal.message.toPlainText() == journal.journal_model.row(2)["message"]
    assert view.window().focusWidget() is journal.journal_table
    assert journal.status.text() == "Saved: 1 needed. This is the next turn not labelled yet."

    wait_for_signal(qtbot, journal.sig_turn_labelled, journal.none_button.click)
    assert journal.selected_turn()[0] == 4, "row 3 is labelled already: passed over"
    wait_for_signal(qtbot, journal.sig_turn_labelled, journal.none_button.click)
    assert journal.selected_turn()[0] == 5
    wait_for_signal(qtbot, journal.sig_turn_labelled, journal.none_button.click)
    assert journal.selected_turn()[0] == 0, "none left below: the first one above"
    wait_for_signal(qtbot, journal.sig_turn_labelled, journal.none_button.click)
    assert journal.selected_turn()[0] == 0, "every turn labelled: the last one stays selected"
    assert journal.status.text() == "Saved: no page needed. Every turn shown is labelled."

    wait_for_signal(qtbot, journal.sig_turn_labelled, journal.unlabel_button.click)
    assert journal.selected_turn()[0] == 0 and journal.status.text() == "Saved: not labelled."   # to label again


def test_the_next_turn_not_labelled_is_looked_for_on_the_journals_next_page(qtbot, gate_engine, tasks,
                                                                           gui_thread_guard, monkeypatch) -> None:
    monkeypatch.setattr(journal_panel, "PAGE_SIZE", 2)
    journal = journal_panel.JournalPanel(tasks)   # not shown: its list never asks for the next page itself
    qtbot.addWidget(journal)
    wait_for_signal(qtbot, journal.sig_journal_loaded, lambda: journal.set_agent("main"))
    assert journal.journal_model.rowCount() == 2 and not journal.journal_model.exhausted
    journal.journal_table.selectRow(1)
    with qtbot.waitSignal(journal.sig_journal_loaded, timeout=10_000):
        wait_for_signal(qtbot, journal.sig_turn_labelled, journal.none_button.click)
    assert journal.journal_model.rowCount() == 4 and journal.selected_turn()[0] == 2
    assert journal.status.text() == "Saved: no page needed. This is the next turn not labelled yet."


def drag(chart: Any, start: float, end: float, steps: int = 12) -> None:
    """Press on the data area at x value ``start``, move in ``steps`` to ``end`` with the button held, release.

    pyqtgraph ignores moves that come within 10 ms of the last one (its mouse rate limit), as a hand's do not.
    """
    QTest.qWait(50)   # pyqtgraph lays out its axes for new data on the next events; aim after that
    viewport = chart.plot.viewport()
    y = chart.plot_area().center().y()
    points = [QPointF(chart.position_of(start + (end - start) * n / steps), y) for n in range(steps + 1)]
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    moves = [(QEvent.Type.MouseButtonPress, points[0], left, left)]
    moves += [(QEvent.Type.MouseMove, point, none, left) for point in points[1:]]
    moves.append((QEvent.Type.MouseButtonRelease, points[-1], left, none))
    for kind, point, button, buttons in moves:
        QApplication.sendEvent(viewport, QMouseEvent(kind, point, viewport.mapToGlobal(point), button, buttons,
                                                     Qt.KeyboardModifier.NoModifier))
        QTest.qWait(20)


def test_dragging_the_threshold_over_the_histogram_shows_the_engines_figures_live(qtbot, gate_engine, tasks,
                                                                                  gui_thread_guard) -> None:
    engine, _ = gate_engine
    view = shown(qtbot, tasks)
    view.set_agent("main")
    wait_for_signal(qtbot, view.journal.sig_journal_loaded, lambda: view.show_tab(view.journal))
    label_every_turn(qtbot, view, "Atlas Migration")
    tuning = view.tuning
    blocker = wait_for_signal(qtbot, tuning.sig_sweep_loaded, lambda: view.show_tab(tuning))
    sweep = blocker.args[0]
    assert [row["threshold"] for row in sweep["thresholds"]] == [n / 100 for n in range(101)]
    assert tuning.explored == 0.75, "the line starts at the threshold in force"

    gui_thread_guard.active = False   # the test reads the journal itself, beside the window
    try:
        journal = handlers(engine)["gateJournal"]({"agent": "main", "limit": 200})["turns"]

        def engine_figures(threshold: float) -> dict:
            table = handlers(engine)["gateWhatIf"]({"agent": "main", "thresholds": [threshold]})
            return next(row for row in table["thresholds"] if row["threshold"] == threshold)
        expected = {n / 100: engine_figures(n / 100) for n in range(40, 96)}
    finally:
        gui_thread_guard.active = True

    # The histogram counts the journal's scores by label: every needed page is Atlas, at 0.91.
    bins = tuning.scores_chart.rows()
    scored = [d for turn in journal for d in turn["decisions"] if d.get("score") is not None]
    needed = [d for turn in journal for d in turn["decisions"] if d.get("score") is not None
              and d["id"] in (turn.get("needed") or [])]
    assert sum(sum(v or 0 for v in values) for _, _, values in bins) == len(scored)
    assert bins[18][2][0] == len(needed) > 0 and sum(values[0] or 0 for _, _, values in bins) == len(needed)

    seen: list[tuple[float, str]] = []
    tuning.sig_threshold_explored.connect(lambda value: seen.append((value, tuning.figures.text())))
    drag(tuning.scores_chart, 0.75, 0.5)
    assert len(seen) >= 6 and seen[-1][0] == tuning.explored == 0.5, "the figures follow the line as it moves"
    assert [value for value, _ in seen] == sorted((value for value, _ in seen), reverse=True)
    for value, text in seen:
        row = expected[value]
        assert f"Inject at or above {value:.2f}, over" in text and f"{row['pagesPerTurn']:.2f} pages per turn" in text
        assert f"precision {row['precision']:.2f}, recall {row['recall']:.2f}" in text
        assert not re.search(r"\b1 (pages|turns|journal turns)\b", text), text  # "1 page; 1 turn would inject"
    assert any(value > 0.66 for value, _ in seen) and any(value <= 0.66 for value, _ in seen)
    assert expected[0.7]["precision"] == 1.0 and expected[0.5]["precision"] < 1.0, "Dana (0.66) is never needed"
    assert tuning.threshold_box.value() == 0.5
    assert tuning.pages_chart.cursor_value() == tuning.quality_chart.cursor_value() == 0.5, \
        "the line charts follow too"

    drag(tuning.scores_chart, 0.5, 0.83)
    assert tuning.explored == 0.83 and "precision 1.00, recall 1.00" in tuning.figures.text()
    tuning.threshold_box.stepUp()
    assert tuning.explored == 0.84 and tuning.scores_chart.handle_value() == 0.84

    before = read_config(engine, gui_thread_guard)
    qtbot.keyClick(tuning.use_threshold_button, Qt.Key.Key_Space)
    assert view.tabs.currentWidget() is view.settings
    assert view.settings.values()["highThreshold"] == 0.84
    assert read_config(engine, gui_thread_guard) == before, "choosing a threshold saves nothing"


def test_replay_against_another_model_runs_as_a_job(qtbot, qtmodeltester, gate_engine, tasks,
                                                    gui_thread_guard) -> None:
    view = shown(qtbot, tasks)
    replay = view.replay
    view.set_agent("main")
    view.show_tab(replay)
    qtbot.waitUntil(lambda: replay.model_choice.count() == 2, timeout=10_000)
    replay.model_choice.setCurrentIndex(replay.model_choice.findData("onnx/tiny"))
    updates: list[dict] = []
    replay.watcher.sig_job_updated.connect(updates.append)
    blocker = wait_for_signal(qtbot, replay.sig_replay_finished, replay.start_button.click, timeout=60_000)
    job = blocker.args[0]
    assert job["state"] == "done" and job["result"]["model"] == "onnx/tiny"
    assert updates[0]["state"] in ("running", "done") and replay.progress.value() == 1000
    assert replay.results_model.rowCount() == 6
    assert {replay.results_model.data(replay.results_model.index(n, 0)) for n in range(6)} == set(MESSAGES)
    assert replay.summary.text().startswith("Replayed 6 turns with onnx/tiny, injecting at or above ")
    qtmodeltester.check(replay.results_model, force_py=True)


def test_a_replay_can_be_cancelled_between_turns(qtbot, gate_engine, tasks, gui_thread_guard) -> None:
    engine, fake = gate_engine
    view = shown(qtbot, tasks)
    replay = view.replay
    view.set_agent("main")
    view.show_tab(replay)
    qtbot.waitUntil(lambda: replay.model_choice.count() >= 1, timeout=10_000)
    entered, release = threading.Event(), threading.Event()
    respond = fake.respond

    def slow(request: dict) -> Any:
        entered.set()
        release.wait(30)
        return respond(request)

    fake.respond = slow
    sent = len(fake.requests)
    try:
        replay.start_button.click()
        qtbot.waitUntil(lambda: entered.is_set() and replay.cancel_button.isEnabled(), timeout=10_000)
        qtbot.waitUntil(lambda: "Replaying turn 1 of 6" in replay.status.text(), timeout=10_000)
        with qtbot.waitSignal(replay.sig_replay_finished, timeout=30_000) as blocker:
            replay.cancel_button.click()
            qtbot.waitUntil(lambda: replay.status.text().startswith("Cancelling"), timeout=10_000)
            release.set()
    finally:
        release.set()
    assert blocker.args[0]["state"] == "cancelled" and replay.status.text() == "Cancelled."
    assert len(fake.requests) == sent + 1 and replay.results_model.rowCount() == 0
    assert replay.start_button.isEnabled()


def test_the_journal_reads_its_messages_in_a_small_window_before_and_after_a_label(qtbot, gate_engine, tasks,
                                                                                  gui_thread_guard) -> None:
    view = GateView(tasks)
    qtbot.addWidget(view)
    view.resize(760, 600)  # the view's size in a 1024x700 window
    view.show()
    journal = view.journal
    view.set_agent("main")
    wait_for_signal(qtbot, journal.sig_journal_loaded, lambda: view.show_tab(journal))
    table, titles = journal.journal_table, [column.title for column in journal.journal_model.columns]
    header, message, at = table.horizontalHeader(), titles.index("Message"), titles.index("At")

    def reads() -> bool:
        return header.sectionSize(message) >= 180 and header.sectionSize(at) >= table.sizeHintForColumn(at)

    qtbot.waitUntil(reads, timeout=5_000)  # never "15:…" beside "Atlas m…"
    journal.journal_table.selectRow(0)
    wait_for_signal(qtbot, journal.sig_turn_labelled, journal.none_button.click)
    assert journal.status.text() == "Saved: no page needed. This is the next turn not labelled yet."
    qtbot.waitUntil(lambda: journal.status.width() >= journal.status.minimumSizeHint().width(), timeout=5_000)
    table.fit_columns()
    assert reads()  # what the save says takes no width from the messages


def test_the_tuning_tab_never_draws_a_chart_over_the_threshold_line_in_a_small_window(qtbot, gate_engine, tasks,
                                                                                       gui_thread_guard) -> None:
    engine, _ = gate_engine
    keep_labelled_turns(engine, gui_thread_guard)
    view = GateView(tasks)
    qtbot.addWidget(view)
    view.resize(760, 500)  # the view in a 1024x640 window, or 1024x700 with the message bar shown
    view.show()
    tuning = view.tuning
    wait_for_signal(qtbot, view.settings.sig_settings_loaded, lambda: view.set_agent("main"))
    wait_for_signal(qtbot, tuning.sig_proposal_loaded, lambda: view.show_tab(tuning))
    wait_for_signal(qtbot, view.settings.sig_settings_saved, tuning.apply_button.click)
    qtbot.waitUntil(lambda: "Applied: in force now." in tuning.proposal_label.text(), timeout=10_000)
    qtbot.waitUntil(lambda: not tasks.busy, timeout=10_000)

    def bottom(widget: Any) -> int:
        return widget.mapTo(tuning, widget.rect().bottomLeft()).y()

    def top(widget: Any) -> int:
        return widget.mapTo(tuning, widget.rect().topLeft()).y()

    # The proposal's four lines take room from the charts, never from what is drawn beneath them.
    assert bottom(tuning.scores_chart) < min(top(tuning.threshold_box), top(tuning.figures))
    assert bottom(tuning.figures) < top(tuning.pages_chart) and bottom(tuning.pages_chart) < top(tuning.table)
    assert tuning.figures.height() >= tuning.figures.heightForWidth(tuning.figures.width())  # its lines whole


def test_the_shadow_logs_columns_read_whole_in_a_small_window(qtbot, gate_engine, tasks) -> None:
    view = GateView(tasks)
    qtbot.addWidget(view)
    view.resize(745, 600)  # the view's size in the 1008x720 window of a 1024x768 screen
    view.show()
    log = view.log
    with qtbot.waitSignals([log.sig_stats_loaded, log.log_model.sig_page_loaded], timeout=10_000):
        view.set_agent("main")
        view.show_tab(log)
    table, titles = log.log_table, [column.title for column in log.log_model.columns]

    def cut() -> list[str]:
        header = table.horizontalHeader()
        return [title for number, title in enumerate(titles)
                if header.sectionSize(number) < max(table.sizeHintForColumn(number), header.sectionSizeHint(number))]

    # Never "shadow (would: inje…)" beside a Mode column saying shadow, nor "owner-…", "embed…" or "1 high, 5…".
    qtbot.waitUntil(lambda: cut() == [], timeout=5_000)
    assert table.horizontalScrollBar().maximum() == 0, "all of it in the log's width"
    row = {title: log.log_model.index(0, number) for number, title in enumerate(titles)}
    assert row["Audience"].data() == "owner" and "owner-private" in row["Audience"].data(0x03)
    assert row["Model"].data() == "test" and row["Model"].data(0x03) == "rerank/test"
    assert row["Latency"].data().endswith(" ms") and "." not in row["Latency"].data()  # "1,797 ms", not "1797.200"

    # The threshold in force, marked on the histogram beside the log, is labelled whole inside the plot.
    import pyqtgraph as pg

    histogram = log.histogram
    qtbot.waitUntil(lambda: bool(histogram.markers), timeout=10_000)
    log.set_current_threshold(0.55)  # a line mid-axis, where "highThreshold 0.55" had room on neither side

    def label_cut() -> bool:
        area = histogram.plot.getPlotItem().getViewBox().sceneBoundingRect()
        labels = [item.label.sceneBoundingRect() for item in histogram.plot.getPlotItem().items
                  if isinstance(item, pg.InfiniteLine)]
        return not labels or any(label.left() < area.left() - 1 or label.right() > area.right() + 1
                                 for label in labels)

    qtbot.waitUntil(lambda: histogram.plot is not None and histogram.plot.width() < 300, timeout=5_000)
    qtbot.waitUntil(lambda: not label_cut(), timeout=5_000)  # never "ighThreshold 0.55" behind the axis


def test_the_shadow_logs_summary_says_what_shadow_turns_would_do_in_the_outcome_columns_words() -> None:
    # "Shadow verdicts: 40 injected, 25 none" read as 40 pages injected, beside a column saying "would inject".
    text = stats_text({"turns": 65, "outcomes": {"shadow": 65}, "wouldInject": {"injected": 40, "none": 25},
                       "latencyMs": {"p50": 10, "p95": 133, "max": 512}})
    assert text == ("65 turns (65 shadow). Latency p50 10 ms, p95 133 ms, max 512 ms. In shadow mode: 40 would "
                    "inject, 25 would add nothing.")


def test_the_figures_say_one_page_and_one_turn_in_the_singular() -> None:
    from desktop.gate.tuning_panel import figures_text

    row = {"threshold": 0.55, "pagesPerTurn": 0.2, "pagesInjected": 1, "turnsInjecting": 1}
    text = figures_text({"turns": 5, "labelled": 0}, row, 0.55)
    assert "over 5 journal turns: 0.20 pages per turn (1 page; 1 turn would inject)." in text
    text = figures_text({"turns": 1, "labelled": 0}, {**row, "pagesInjected": 2, "turnsInjecting": 0}, 0.55)
    assert "over 1 journal turn: 0.20 pages per turn (2 pages; 0 turns would inject)." in text


def test_the_tuning_table_reads_whole_in_the_settings_words_in_a_small_window(qtbot, gate_engine, tasks,
                                                                             gui_thread_guard) -> None:
    engine, _ = gate_engine
    keep_labelled_turns(engine, gui_thread_guard)
    view = GateView(tasks)
    qtbot.addWidget(view)
    view.resize(745, 600)  # the view's size in the 1008x720 window of a 1024x768 screen
    view.show()
    tuning = view.tuning
    wait_for_signal(qtbot, view.settings.sig_settings_loaded, lambda: view.set_agent("main"))
    view.show_tab(tuning)
    qtbot.waitUntil(lambda: tuning.model.rowCount() > 0 and tuning.sweep is not None
                    and tuning.proposal is not None, timeout=10_000)
    table, titles = tuning.table, [column.title for column in tuning.model.columns]

    def cut() -> list[str]:
        header = table.horizontalHeader()
        return [title for number, title in enumerate(titles)
                if header.sectionSize(number) < max(table.sizeHintForColumn(number), header.sectionSizeHint(number))]

    qtbot.waitUntil(lambda: cut() == [], timeout=5_000)
    assert table.horizontalScrollBar().maximum() == 0, "every figure in the tab's width"
    # The owner reads the Settings tab's words; the config key is on hover.
    said = [label.text() for label in tuning.findChildren(QLabel) if label.isVisibleTo(tuning)]
    said += titles + [*tuning.scores_chart.handle_words(), tuning.threshold_box.accessibleName(),
                      tuning.use_threshold_button.toolTip(), tuning.precision_box.toolTip()]
    said += [chart.x_title for chart in (tuning.pages_chart, tuning.quality_chart)]
    assert not [text for text in said if "highThreshold" in text or "skipHintBelow" in text]
    assert "Inject at or above 0.6: precision 1.00" in tuning.proposal_label.text()
    assert tuning.figures.text().startswith(f"Inject at or above {tuning.explored:.2f}, over ")
    first = {title: tuning.model.index(0, number) for number, title in enumerate(titles)}
    row = tuning.model.rows()[0]
    assert "highThreshold" in first["Inject at"].data(0x03)  # Qt.ToolTipRole
    skip = first["Skip hints"]
    assert skip.data() == f"{row['skipHintTurns']:,} ({row['skipHintMisses']:,} needed a page)"
