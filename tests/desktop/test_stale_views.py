"""No stale state after a change: the git checkpoint landing, a new agent's token message, and more.

Every case runs through the window's real code against a real engine on a
real socket; the window learns of a change only from the engine's change
notifications.  The git checkpoint is held back (its delay is an hour) and
made explicitly, as ``knowledge_resume`` makes it, so no test waits on time.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from PySide6.QtCore import QAbstractListModel, Qt
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QDialogButtonBox, QLabel, QLineEdit, QPlainTextEdit,
                               QTextEdit)

from desktop.agents.dialogs import TokenDialog

from desktop.main_window import MainWindow
from desktop.records.history import revision_author, revision_time, what_changed
from engine import runtime
from engine.cli import main as cli
from engine.state.statedir import StateDir
from models.fixtures import TINY_RERANKER
from tests.desktop import test_live
from tests.desktop.test_live import Served, agent_call, save_page

served_again, open_window = test_live.served_again, test_live.open_window  # the live tests' fixtures


@pytest.fixture
def served_held(tmp_path: Path, demo_template: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """The demo store served with its git thread held back: commits happen only when a test asks."""
    monkeypatch.setattr(runtime, "GIT_DELAY_SECONDS", 3600.0)  # read by the git thread on each wait
    yield from test_live.serving_a_copy(tmp_path, demo_template)


def git_column(window: MainWindow) -> list[str]:
    """Each revision's Git commit as History says it on hover ("Revision 1: current, published, Git commit …")."""
    history = window.records_view.page.history
    said = [history.model.data(history.model.index(row, 0), Qt.ItemDataRole.ToolTipRole) or ""
            for row in range(history.model.rowCount())]
    return [match.group(1) if (match := re.search(r"Git commit (\w+)", text)) else "" for text in said]


def written(served: Served, token: str, title: str) -> str:
    """An agent saves a page over the socket; the id of the record it wrote."""
    answer = agent_call(served.server.port, token, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": f"stale-{uuid.uuid4().hex}", "type": "person", "title": title, "body": "Body text."}})
    assert answer.get("isError") is not True, answer
    return answer["structuredContent"]["id"]


def resume(served: Served, token: str) -> dict[str, Any]:
    answer = agent_call(served.server.port, token, "tools/call", {"name": "knowledge_resume", "arguments": {}})
    assert answer.get("isError") is not True, answer
    return answer["structuredContent"]


def test_an_open_history_shows_the_git_commit_once_the_checkpoint_lands(qtbot, served_held, open_window) -> None:
    window = open_window(served_held.state)
    records = window.records_view
    window.show_view(window.views.index(records))
    token = served_held.engine.registry.add_credential("main")
    with qtbot.waitSignal(window.sig_live_applied, timeout=10_000):  # the write's own reload, done with
        record_id = written(served_held, token, "Checkpointed later")
    with qtbot.waitSignal(records.page.sig_content_loaded, timeout=10_000):
        records.open_record(record_id)
    assert git_column(window) == [""]  # published, not committed yet: the git thread is held
    health = window.health_view
    with qtbot.waitSignal(health.sig_content_loaded, timeout=10_000):
        window.show_view(window.views.index(health))
    assert "Git checkpoint: pending" in health.summary.toPlainText()
    window.show_view(window.views.index(records))

    assert resume(served_held, token)["state"] == "committed"
    qtbot.waitUntil(lambda: git_column(window)[0] != "", timeout=10_000)
    assert len(git_column(window)) == 1 and records.page.record["id"] == record_id
    with qtbot.waitSignal(health.sig_content_loaded, timeout=10_000):  # hidden when the commit landed
        window.show_view(window.views.index(health))
    assert "Git checkpoint: committed" in health.summary.toPlainText()


def shown_text() -> str:
    """Every text a visible widget of the application shows: labels, fields, documents and table cells."""
    texts: list[str] = []
    for top in QApplication.topLevelWidgets():
        if not top.isVisible():
            continue
        for widget in [top, *top.findChildren(QLabel), *top.findChildren(QLineEdit), *top.findChildren(QPlainTextEdit),
                       *top.findChildren(QTextEdit), *top.findChildren(QAbstractItemView)]:
            if not widget.isVisible():
                continue
            if isinstance(widget, (QLabel, QLineEdit)):
                texts.append(widget.text())
            elif isinstance(widget, (QPlainTextEdit, QTextEdit)):
                texts.append(widget.toPlainText())
            elif isinstance(widget, QAbstractItemView) and widget.model() is not None:
                model = widget.model()
                columns = 1 if isinstance(model, QAbstractListModel) else model.columnCount()
                texts += [str(model.data(model.index(row, column)) or "") for row in range(model.rowCount())
                          for column in range(columns)]
    return "\n".join(texts)


def bar_says(window: MainWindow, words: str) -> bool:
    return window.messages.isVisibleTo(window) and words in window.messages.label.text()


def added_through_the_dialog(window: MainWindow, qtbot: Any, name: str) -> TokenDialog:
    window.add_agent()  # Ctrl+N: Agents & stores, and its Add agent… dialog
    asked = window.agents_view.dialog
    asked.name.setText(name)
    asked.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: isinstance(window.agents_view.dialog, TokenDialog), timeout=10_000)
    return window.agents_view.dialog


def test_copy_its_token_now_is_said_with_the_token_and_gone_with_it(qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    dialog = added_through_the_dialog(window, qtbot, "helper")
    token = dialog.token.text()
    assert token.startswith("kd_") and token in shown_text()
    assert bar_says(window, "Agent helper added; copy its token now.")

    dialog.reject()  # Close (or Escape)
    assert not bar_says(window, "copy its token")
    assert token not in shown_text() and window.agents_view.dialog is None
    for view in window.views:  # every view, the new agent chosen: the token is never shown again
        window.show_view(window.views.index(view))
    window.agent_picker.setCurrentText("helper")
    qtbot.waitUntil(lambda: not window.agents_view.agents_model.loading, timeout=10_000)
    window.connect_agent_action.trigger()  # Connect an agent…, for helper: its configurations, never its token
    qtbot.waitUntil(lambda: window.connect_dialog.audience_note.text().startswith("helper has owner"),
                    timeout=10_000)
    assert token not in shown_text()
    assert not bar_says(window, "copy its token")


def test_a_confirmation_is_gone_when_the_owner_moves_on_and_no_agents_yet_once_there_is_one(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    window.show_view(window.views.index(window.agents_view))
    window.copy_change_request()  # no record open: the bar says where to open one
    assert bar_says(window, "Open a record in Records")
    window.show_view(window.views.index(window.records_view))
    assert not window.messages.isVisibleTo(window)

    window.copy_change_request()
    window.agent_picker.setCurrentIndex(-1)  # no agent chosen: another agent than the one it was said for
    assert not window.messages.isVisibleTo(window)

    window.messages.show_info("No agents yet: add one with Add agent… (Ctrl+N).")  # as said to an empty engine
    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        served_again.engine.add_agent("later", owner=True)  # added with the CLI
    assert not window.messages.isVisibleTo(window)


def edit_outside(served: Served, record_id: str, change: Any) -> None:
    """``change`` main's private record file ``record_id`` by hand (given its path), and report it as the vault
    watcher does."""
    store = served.engine.resolver.effective("main", create=False)
    vault = served.state.stores / store.store_id / "vault"
    path = next(p for p in (vault / "private").rglob("*.md") if f"id: {record_id}\n" in p.read_text(encoding="utf-8"))
    change(path)
    served.engine.runtime(store).mark_dirty(str(path.relative_to(vault)))


def test_a_record_deleted_outside_while_shown_says_so_in_place_with_its_history_and_no_problem(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    records = window.records_view
    window.show_view(window.views.index(records))
    token = served_again.engine.registry.add_credential("main")
    with qtbot.waitSignal(window.sig_live_applied, timeout=10_000):
        record_id = written(served_again, token, "Deleted by hand")
    with qtbot.waitSignal(records.page.sig_content_loaded, timeout=10_000):
        records.open_record(record_id)
    graph = records.show_connections(records.page.record)  # Show connections: a window of its own
    qtbot.addWidget(graph)
    qtbot.waitUntil(lambda: graph.view.graph is not None, timeout=10_000)

    with qtbot.waitSignal(records.page.sig_content_loaded, timeout=10_000):  # its History, read again
        edit_outside(served_again, record_id, Path.unlink)  # the owner deletes the note in a file manager
    qtbot.waitUntil(lambda: "No longer in this partition" in records.page.header.toPlainText(), timeout=10_000)
    assert "Deleted by hand" in records.page.header.toPlainText() and records.page.history.model.rowCount() == 1
    assert not records.page.request_button.isEnabled() and records.page.body.toPlainText() == ""
    assert record_id not in [row["id"] for row in records.recent_model.rows()]
    assert not window.messages.isVisibleTo(window)  # a change, shown where it happened: no problem
    qtbot.waitUntil(lambda: graph.status.text().startswith("Not loaded: "), timeout=10_000)
    assert graph.status.text().endswith("What is drawn is as it was before.")

    with qtbot.waitSignal(records.page.sig_content_loaded, timeout=10_000):  # another change: read again
        later = written(served_again, token, "Written afterwards")
    qtbot.waitUntil(lambda: later in [row["id"] for row in records.recent_model.rows()], timeout=10_000)
    assert "No longer in this partition" in records.page.header.toPlainText()
    assert "Deleted by hand" in records.page.header.toPlainText()  # still named, not by its id
    assert not window.messages.isVisibleTo(window)


def test_a_record_that_could_not_be_opened_is_no_problem_once_another_one_is(qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    records = window.records_view
    window.show_view(window.views.index(records))
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)
    with qtbot.waitSignal(window.tasks.sig_error_raised, timeout=10_000):
        records.open_record("pg_01J00000000000000000000000")  # a link to a record that is not there
    assert window.messages.error and window.messages.isVisibleTo(window)

    with qtbot.waitSignal(records.page.sig_content_loaded, timeout=10_000):
        records.open_record(records.recent_model.rows()[0]["id"])
    assert not window.messages.isVisibleTo(window)

    window.tasks.sig_error_raised.emit("the partition could not be read")  # a problem of something else
    with qtbot.waitSignal(records.page.sig_content_loaded, timeout=10_000):
        records.open_record(records.recent_model.rows()[1]["id"])
    assert window.messages.error and window.messages.isVisibleTo(window)  # not the page's to take back


def test_the_open_settings_follow_a_change_made_with_the_cli_in_every_field_not_edited(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    window.settings_action.trigger()  # Engine › Settings…
    dialog = window.settings_dialog
    qtbot.waitUntil(dialog.save_button.isEnabled, timeout=10_000)
    assert dialog.writes.isChecked() and not dialog.search_knowledge.isChecked()
    dialog.search_knowledge.setChecked(True)  # the owner's edit, not saved yet

    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000,
                          check_params_cb=lambda inventory: not inventory["settings"]["writesEnabled"]):
        assert cli(["--state-dir", str(served_again.state.root), "settings", "writes", "off"]) == 0
    assert not dialog.writes.isChecked()  # as the engine now has it: Save would not turn writes back on
    assert dialog.search_knowledge.isChecked()  # the edit stays

    with qtbot.waitSignal(dialog.sig_settings_saved, timeout=10_000) as saved:
        dialog.buttons.button(dialog.buttons.StandardButton.Save).click()
    settings = saved.args[0]["settings"]
    assert settings["knowledgeRuntimeEnabled"] and not settings["writesEnabled"]
    assert not window.agents_view.writes_check.isChecked()


def write_gate_block(state: StateDir, block: dict[str, Any]) -> None:
    """The owner pastes what `knowledge gate suggest` proposes into config.json, in a text editor."""
    path = state.root / "config.json"
    config = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"schemaVersion": 1}
    path.write_text(json.dumps({**config, "recallGate": block}), encoding="utf-8")


def test_the_gate_settings_read_config_json_again_when_shown_unless_the_form_is_being_edited(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    gate, form = window.gate_view, window.gate_view.settings
    with qtbot.waitSignal(form.sig_settings_loaded, timeout=10_000):
        window.show_view(window.views.index(gate))
    assert form.values()["mode"] == "off" and form.current.get("recallGate") is None

    write_gate_block(served_again.state, {"mode": "shadow", "highThreshold": 0.9})  # no change is announced
    window.show_view(window.views.index(window.records_view))
    with qtbot.waitSignal(form.sig_settings_loaded, timeout=10_000):
        window.show_view(window.views.index(gate))
    assert form.values()["mode"] == "shadow" and form.values()["highThreshold"] == 0.9

    write_gate_block(served_again.state, {"mode": "shadow", "highThreshold": 0.85})  # with the view in front
    with qtbot.waitSignal(form.sig_settings_loaded, timeout=10_000):
        assert cli(["--state-dir", str(served_again.state.root), "settings", "show"]) == 0  # the engine reads it
    assert form.values()["highThreshold"] == 0.85

    form.set_value("highThreshold", 0.8)  # the owner's edit, not saved
    write_gate_block(served_again.state, {"mode": "live", "highThreshold": 0.95})
    gate.show_tab(gate.log)
    with qtbot.waitSignal(gate.log.log_model.sig_page_loaded, timeout=10_000):
        window.show_view(window.views.index(window.records_view))
        window.show_view(window.views.index(gate))
    gate.show_tab(form)
    assert form.values()["highThreshold"] == 0.8 and form.values()["mode"] == "shadow"  # kept, not replaced


def test_an_open_connect_an_agent_lists_agents_added_and_removed_meanwhile(qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    window.connect_agent_action.trigger()  # Engine › Connect an agent…, on main
    dialog = window.connect_dialog
    qtbot.waitUntil(lambda: dialog.audience_note.text().startswith("main has owner"), timeout=10_000)
    root = str(served_again.state.root)

    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        assert cli(["--state-dir", root, "agents", "add", "helper", "--owner"]) == 0
    assert "helper" in [dialog.agent_picker.itemText(n) for n in range(dialog.agent_picker.count())]
    assert dialog.agent_picker.currentText() == "main"  # the agent chosen stays chosen

    dialog.agent_picker.setCurrentText("helper")
    qtbot.waitUntil(lambda: dialog.audience_note.text().startswith("helper has owner"), timeout=10_000)
    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        assert cli(["--state-dir", root, "agents", "remove", "helper"]) == 0
    assert "helper" not in [dialog.agent_picker.itemText(n) for n in range(dialog.agent_picker.count())]
    qtbot.waitUntil(lambda: dialog.audience_note.text().startswith("main has owner"), timeout=10_000)


def models_in_front(qtbot: Any, window: MainWindow) -> list[str]:
    """Models shown and loaded; the names it lists."""
    with qtbot.waitSignal(window.models_view.sig_content_loaded, timeout=10_000):
        window.show_view(window.views.index(window.models_view))
    return [row["name"] for row in window.models_view.installed_model.rows()]


def test_models_registered_with_the_cli_show_when_the_models_view_is_shown_again(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    models = window.models_view
    before = models_in_front(qtbot, window)
    root = str(served_again.state.root)  # the CLI writes the models' manifest; shown again, Models reads it
    assert cli(["--state-dir", root, "models", "add-local", str(TINY_RERANKER), "--name", "tiny"]) == 0

    window.show_view(window.views.index(window.records_view))
    with qtbot.waitSignal(models.sig_content_loaded, timeout=10_000):
        window.show_view(window.views.index(models))
    assert [row["name"] for row in models.installed_model.rows()] == sorted([*before, "tiny"])
    assert window.navigation.count_of(models) == len(before) + 1


def choices(combo: Any) -> list[str]:
    return [combo.itemText(n) for n in range(combo.count())]


def test_the_open_import_and_export_dialogs_offer_an_agent_and_a_store_made_meanwhile(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    root = str(served_again.state.root)
    window.import_action.trigger()  # File › Import…
    window.export_action.trigger()  # File › Export…
    importing, exporting = window.import_dialog, window.export_dialog
    importing.agent.setCurrentText("typed")  # the owner's name for a new agent, not imported yet
    stores_before = choices(exporting.store)
    chosen_store = exporting.store.currentData()

    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        assert cli(["--state-dir", root, "agents", "add", "helper", "--owner"]) == 0
    assert "helper" in choices(importing.agent)
    assert importing.agent.currentText() == "typed"  # what the owner typed stays

    token = served_again.engine.registry.add_credential("helper")
    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000,
                          check_params_cb=lambda inventory: any(
                              (agent.get("store") or {}).get("storeId") for agent in inventory["agents"]
                              if agent["name"] == "helper")):
        written(served_again, token, "Helper's first page")  # its first write makes its store
    assert "helper's own store" in choices(exporting.store)
    assert len(choices(exporting.store)) == len(stores_before) + 1
    assert exporting.store.currentData() == chosen_store  # the store chosen stays chosen


def test_a_model_registered_with_the_cli_shows_at_once_in_the_models_view_in_front_and_in_the_count(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    models = window.models_view
    before = models_in_front(qtbot, window)
    root = str(served_again.state.root)

    with qtbot.waitSignal(models.sig_content_loaded, timeout=10_000,
                          check_params_cb=lambda report: "tiny" in [m["name"] for m in report["installed"]]):
        assert cli(["--state-dir", root, "models", "add-local", str(TINY_RERANKER), "--name", "tiny"]) == 0
    assert [row["name"] for row in models.installed_model.rows()] == sorted([*before, "tiny"])
    qtbot.waitUntil(lambda: window.navigation.count_of(models) == len(before) + 1, timeout=10_000)

    window.show_view(window.views.index(window.records_view))  # elsewhere, the sidebar still counts it
    with qtbot.waitSignal(window.sig_live_applied, timeout=10_000,
                          check_params_cb=lambda titles: models.title in titles):
        assert cli(["--state-dir", root, "models", "add-local", str(TINY_RERANKER), "--name", "tinier"]) == 0
    qtbot.waitUntil(lambda: window.navigation.count_of(models) == len(before) + 2, timeout=10_000)


def recent(records: Any) -> list[str]:
    return [row["id"] for row in records.recent_model.rows()]


def test_an_outside_edit_that_keeps_the_revision_number_is_its_own_revision_in_history_and_first_in_recent(
        qtbot, served_held, open_window) -> None:
    served_again = served_held  # no checkpoint commit reloads the page while a revision is chosen
    window = open_window(served_again.state)
    records = window.records_view
    window.show_view(window.views.index(records))
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 1, timeout=10_000)
    record_id = records.recent_model.rows()[0]["id"]
    with qtbot.waitSignal(records.page.sig_content_loaded, timeout=10_000):
        records.open_record(record_id)
    history = records.page.history
    numbers = [row["revision"] for row in history.model.rows()]

    def dated_long_ago(path: Path) -> None:  # an editor that writes the next number and its own date
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"revision: \d+", f"revision: {numbers[-1] + 1}", text, count=1)
        path.write_text(re.sub(r"updated_at: .*", "updated_at: '2020-01-05T09:00:00Z'", text, count=1),
                        encoding="utf-8")

    with qtbot.waitSignal(window.sig_live_applied, timeout=10_000):
        edit_outside(served_again, record_id, dated_long_ago)
    qtbot.waitUntil(lambda: recent(records)[-1:] == [record_id], timeout=10_000)  # dated before every other

    def edited_by_hand(path: Path) -> None:  # Obsidian, say: the body changes, the number and date stay
        path.write_text(path.read_text(encoding="utf-8") + "\nAdded in the editor.\n", encoding="utf-8")

    with qtbot.waitSignal(window.sig_live_applied, timeout=10_000):
        edit_outside(served_again, record_id, edited_by_hand)
    number = numbers[-1] + 1
    qtbot.waitUntil(lambda: history.model.rowCount() == len(numbers) + 2, timeout=10_000)
    shown_numbers = [str(history.model.data(history.model.index(n, 0))) for n in range(history.model.rowCount())]
    assert shown_numbers[-2:] == [f"{number}", f"{number}.1"]  # the edit has a number of its own
    seen = history.model.rows()[-1]
    assert (seen["origin"], what_changed(seen)) == ("external", "body")
    assert revision_time(seen) == seen["observedAt"]  # dated when the engine saw the edit, not the file's date
    assert revision_author(seen) == "outside the engine"  # not the agent the file still names
    qtbot.waitUntil(lambda: f"revision {number}.1, edited outside the engine" in records.page.header.toPlainText(),
                    timeout=10_000)  # the page names the version shown as History does

    with qtbot.waitSignal(history.sig_diff_loaded, timeout=10_000) as shown:
        history.table.selectRow(history.model.rowCount() - 1)  # the edit, against the version before it
    assert f"Revision {number} → revision {number}.1" in shown.args[0]
    assert "+Added in the editor." in shown.args[0]
    # The body diff names the two versions as the title and the History list do, never by a sha256.
    assert f"--- revision {number}\n+++ revision {number}.1" in shown.args[0]

    qtbot.waitUntil(lambda: recent(records)[:1] == [record_id], timeout=10_000)
    listed = {row["id"]: row["updatedAt"] for row in records.recent_model.rows()}
    assert listed[record_id] == seen["observedAt"]  # Recent's Updated: when the edit was seen


def test_the_import_dialog_offers_owner_agents_only_and_refuses_another_before_reading_anything(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    root = str(served_again.state.root)
    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        assert cli(["--state-dir", root, "agents", "add", "reader"]) == 0  # not an owner agent
    window.agent_picker.setCurrentText("reader")  # the agent in view when the owner opens File › Import…
    window.import_action.trigger()
    importing = window.import_dialog

    assert choices(importing.agent) == ["main"] and importing.agent.currentText() == "main"
    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        assert cli(["--state-dir", root, "agents", "add", "scribe"]) == 0  # another, added meanwhile
    assert choices(importing.agent) == ["main"]

    importing.path.setText(root)
    importing.agent.setCurrentText("reader")  # typed by hand
    importing.start_button.click()
    assert importing.status.text() == ("Not imported: reader is not an owner agent, and an import goes into an "
                                       "owner agent's store. Choose one, or type a new name to register one.")
    assert not importing.watcher.running and importing.start_button.isEnabled()
