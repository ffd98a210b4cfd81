"""Agents & stores: inventory, adding an agent (token once, MCP config), the sharing actions, writesEnabled."""

from __future__ import annotations

import json

from PySide6.QtWidgets import QApplication, QDialogButtonBox

from desktop.agents.dialogs import AddAgentDialog, ShareStoreDialog, TokenDialog, UseSharedStoreDialog
from desktop.agents.view import AgentsView
from tests.desktop.conftest import wait_for_signal


def make_view(qtbot, tasks) -> AgentsView:
    view = AgentsView(tasks)
    qtbot.addWidget(view)
    view.show()
    wait_for_signal(qtbot, view.sig_inventory_changed, view.refresh)
    return view


def store_named(view: AgentsView, name: str) -> dict:
    return next(store for store in view.stores_model.rows() if store.get("name") == name)


def agent_row(view: AgentsView, name: str) -> dict:
    return next(agent for agent in view.agents_model.rows() if agent["name"] == name)


def test_agents_and_every_known_store_are_listed(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)

    assert [row["name"] for row in view.agents_model.rows()] == ["main"]
    assert view.agents_model.data(view.agents_model.index(0, 1)) == "owner"
    assert view.stores_model.data(view.stores_model.index(0, 0)) == "isolated store of main"
    store = view.agents_model.index(0, 2)  # in words, the id on hover: never a bare st_01… to read
    assert store.data() == "own isolated store" and store.data(0x03) == view.stores_model.rows()[0]["storeId"]
    assert view.writes_check.isChecked()
    assert view.share_button.isEnabled() and not view.own_button.isEnabled()


def test_adding_an_agent_shows_its_token_once_with_a_client_config(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    wait_for_signal(qtbot, view.sig_status_reported, lambda: view.add_agent("helper", False))

    dialog = view.dialog
    assert isinstance(dialog, TokenDialog) and dialog.isVisible()
    assert dialog.token.text().startswith("kd_")
    config = json.loads(dialog.config.toPlainText())
    assert config["mcpServers"]["knowledge"]["args"][:3] == ["mcp", "--agent", "helper"]
    assert agent_row(view, "helper")["store"]["status"] == "not created"
    assert view.selected_agent()["name"] == "helper"


def test_share_use_shared_and_use_own_store(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    wait_for_signal(qtbot, view.sig_status_reported, lambda: view.add_agent("helper", True))
    isolated_id = view.stores_model.rows()[0]["storeId"]

    view.select_agent("main")
    view.share_button.click()
    dialog = view.dialog
    assert isinstance(dialog, ShareStoreDialog) and list(dialog.others) == ["helper"]
    dialog.name.setText("team")
    dialog.label.setText("Team notes")
    dialog.others["helper"].setChecked(True)
    wait_for_signal(qtbot, view.sig_status_reported, dialog.accept)

    team = store_named(view, "team")
    assert team["storeId"] == isolated_id and team["agents"] == ["main", "helper"]  # renamed, not copied
    assert view.stores_model.data(view.stores_model.index(0, 0)) == "Team notes (team)"

    view.select_agent("helper")
    assert view.own_button.isEnabled()
    view.own_button.click()
    box = view.dialog
    wait_for_signal(qtbot, view.sig_status_reported, lambda: box.button(box.StandardButton.Ok).click())
    assert agent_row(view, "helper")["store"]["status"] == "not created"

    view.select_agent("helper")
    view.shared_button.click()
    chooser = view.dialog
    assert isinstance(chooser, UseSharedStoreDialog) and chooser.chosen() == "team"
    wait_for_signal(qtbot, view.sig_status_reported, chooser.accept)
    assert agent_row(view, "helper")["store"]["storeId"] == isolated_id


def test_writes_enabled_is_edited_and_errors_are_readable(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    wait_for_signal(qtbot, view.sig_status_reported, view.writes_check.click)
    assert view.inventory["settings"]["writesEnabled"] is False and not view.writes_check.isChecked()

    blocker = wait_for_signal(qtbot, tasks.sig_error_raised, lambda: view.add_agent("Not A Name", False))
    assert blocker.args[0].startswith("agent names are") and "Traceback" not in blocker.args[0]


def test_the_token_dialog_copies_to_the_clipboard(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    wait_for_signal(qtbot, view.sig_status_reported, lambda: view.add_agent("helper", False))
    copy_config = [b for b in view.dialog.findChildren(type(view.add_button)) if b.text() == "Copy configuration"]
    copy_config[0].click()
    assert json.loads(QApplication.clipboard().text())["mcpServers"]["knowledge"]["args"][2] == "helper"


def test_a_refused_name_is_said_in_the_add_agent_dialog_which_keeps_it_to_correct(qtbot, tasks,
                                                                                  gui_thread_guard) -> None:
    """Add agent… with a name the engine refuses: the dialog stays open with the reason and the name as typed
    (it closed, the name lost, and the reason went to the bar); corrected, the agent is added and its token
    shown."""
    view = make_view(qtbot, tasks)
    view.add_button.click()
    asked = view.dialog
    assert isinstance(asked, AddAgentDialog) and asked.focusWidget() is asked.name  # typing goes to the name
    asked.name.setText("Bad Name")
    add = asked.buttons.button(QDialogButtonBox.StandardButton.Ok)
    add.click()
    qtbot.waitUntil(lambda: asked.problem.isVisibleTo(asked), timeout=10_000)
    assert asked.problem.text().startswith("agent names are") and asked.isVisible()
    assert asked.name.text() == "Bad Name" and [row["name"] for row in view.agents_model.rows()] == ["main"]

    asked.name.setText("helper")
    add.click()
    qtbot.waitUntil(lambda: isinstance(view.dialog, TokenDialog), timeout=10_000)
    assert not asked.isVisible() and "helper" in [row["name"] for row in view.agents_model.rows()]
