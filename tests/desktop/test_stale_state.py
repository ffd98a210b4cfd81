"""No stale state in the window: an agent with no store yet, views hidden when a change happens, "Loading…".

Every case runs through the window's real code against a real engine on a
real socket; an agent writes as a separate client would, and the window
learns of it only from the engine's change notifications.
"""

from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import Qt

from desktop.common.widgets import NO_STORE_TEXT
from desktop.main_window import MainWindow
from desktop.tasks import EngineTasks
from engine.state.statedir import StateDir
from tests.desktop import test_live
from tests.desktop.test_live import save_page, titles

served_again, open_window = test_live.served_again, test_live.open_window  # the live tests' fixtures


def add_agent_without_store(window: MainWindow, served: Any, qtbot: Any, name: str = "newbie") -> str:
    """Register ``name`` (no store until it first writes) and wait for the window to list it; its token."""
    token = served.engine.add_agent(name, owner=True)
    qtbot.waitUntil(lambda: name in [agent["name"] for agent in window.inventory["agents"]], timeout=10_000)
    entry = next(agent for agent in window.inventory["agents"] if agent["name"] == name)
    assert "storeId" not in entry["store"]  # the engine creates it on the agent's first write
    return token


def choose(window: MainWindow, agent: str) -> None:
    window.agent_picker.setCurrentIndex(window.agent_picker.findText(agent))
    assert window.agent == agent


def problem_shown(window: MainWindow) -> bool:
    return window.messages.isVisibleTo(window) and window.messages.error


def test_an_agent_chosen_before_its_first_write_shows_a_calm_empty_state_until_the_write_lands(
        qtbot, served_again, open_window, gui_thread_guard) -> None:
    window = open_window(served_again.state)
    gui_thread_guard.active = False
    token = add_agent_without_store(window, served_again, qtbot)
    gui_thread_guard.active = True
    records = window.records_view
    window.show_view(window.views.index(records))
    qtbot.waitUntil(lambda: records.recent_model.rowCount() > 0, timeout=10_000)  # main's records first

    choose(window, "newbie")
    qtbot.waitUntil(lambda: records.recent_table.shown_empty_text() == NO_STORE_TEXT, timeout=10_000)
    with qtbot.waitSignal(window.counts.sig_counts_updated, timeout=10_000):
        qtbot.keyClick(window, Qt.Key.Key_F5)  # asked again: still no store, and still no problem
    qtbot.waitUntil(lambda: not records.recent_model.loading, timeout=10_000)
    assert records.recent_table.shown_empty_text() == NO_STORE_TEXT and not problem_shown(window)
    window.show_view(window.views.index(window.health_view))
    qtbot.waitUntil(lambda: window.health_view.findings_table.shown_empty_text() == NO_STORE_TEXT, timeout=10_000)
    assert not problem_shown(window)
    window.show_view(window.views.index(records))

    gui_thread_guard.active = False
    save_page(served_again, token, "The first page newbie wrote")  # the store is created by this write
    gui_thread_guard.active = True
    qtbot.waitUntil(lambda: titles(records.recent_model) == ["The first page newbie wrote"], timeout=10_000)
    assert records.recent_table.shown_empty_text() == "" and not problem_shown(window)
    qtbot.waitUntil(lambda: window.navigation.count_of(records) == 1, timeout=10_000)  # the sidebar agrees


def test_a_search_for_an_agent_with_no_store_yet_says_it_searched_nothing_instead_of_searching_forever(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    add_agent_without_store(window, served_again, qtbot)
    records = window.records_view
    window.show_view(window.views.index(records))
    records.query.setText("status notes")
    with qtbot.waitSignal(records.search_model.sig_page_loaded, timeout=10_000):
        records.search()
    assert records.search_summary.text().startswith(f"{records.search_model.rowCount()} matching records")

    with qtbot.waitSignal(records.search_model.sig_load_failed, timeout=10_000):
        choose(window, "newbie")  # the query stays typed, and is asked of newbie's store, which is not there
    assert records.search_table.shown_empty_text() == NO_STORE_TEXT
    assert records.search_summary.text() == "Not searched: newbie has no store yet."
    assert not problem_shown(window)


def test_a_view_hidden_when_the_store_was_created_shows_the_write_when_opened_as_the_sidebar_counts(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    token = add_agent_without_store(window, served_again, qtbot)
    records, health = window.records_view, window.health_view
    choose(window, "newbie")
    for view in (records, health):  # both shown while there was no store
        window.show_view(window.views.index(view))
    qtbot.waitUntil(lambda: records.recent_table.shown_empty_text() == NO_STORE_TEXT, timeout=10_000)
    qtbot.waitUntil(lambda: health.findings_table.shown_empty_text() == NO_STORE_TEXT, timeout=10_000)
    window.show_view(window.views.index(window.agents_view))

    save_page(served_again, token, "Written while Records was hidden")
    qtbot.waitUntil(lambda: window.navigation.count_of(records) == 1, timeout=10_000)
    assert titles(records.recent_model) == []  # hidden: it reloads when shown, not before

    with qtbot.waitSignal(records.recent_model.sig_page_loaded, timeout=10_000):
        window.show_view(window.views.index(records))
    assert titles(records.recent_model) == ["Written while Records was hidden"]
    assert records.recent_model.rowCount() == window.navigation.count_of(records)
    with qtbot.waitSignal(health.sig_content_loaded, timeout=10_000):
        window.show_view(window.views.index(health))
    assert health.findings_table.shown_empty_text() != NO_STORE_TEXT
    assert not problem_shown(window)


def test_a_problem_in_the_bar_does_not_outlive_f5_or_a_change_of_agent(qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    add_agent_without_store(window, served_again, qtbot)
    window.tasks.sig_error_raised.emit("the partition could not be read")
    assert problem_shown(window)
    choose(window, "newbie")  # a problem met for main is not newbie's
    assert not problem_shown(window)

    window.tasks.sig_error_raised.emit("the partition could not be read")
    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        qtbot.keyClick(window, Qt.Key.Key_F5)
    assert not problem_shown(window)  # every view asked again, and none met a problem
    window.tasks.sig_error_raised.emit("this agent has no store yet; it is created on the agent's first use")
    assert not problem_shown(window)  # no store yet is a state, never a problem


def test_a_hidden_gate_tab_reloads_when_shown_after_f5(qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    gate = window.gate_view
    window.show_view(window.views.index(gate))
    with qtbot.waitSignal(gate.log.log_model.sig_page_loaded, timeout=10_000):
        gate.show_tab(gate.log)
    gate.show_tab(gate.settings)
    qtbot.keyClick(window, Qt.Key.Key_F5)

    with qtbot.waitSignal(gate.log.log_model.sig_page_loaded, timeout=10_000):
        gate.show_tab(gate.log)  # it was loaded for this agent before F5: F5 made it stale


def test_the_agents_tables_say_loading_while_connecting_and_why_when_no_engine_answered(
        qtbot, served, tmp_path, window_settings) -> None:
    tasks = EngineTasks()
    window = MainWindow(tasks, served, settings=window_settings)
    qtbot.addWidget(window)
    try:
        records = window.records_view
        assert records.recent_table.shown_empty_text().startswith("Choose an agent")  # before any connection
        window.connect_engine()  # its answer comes through the event loop, which has not run yet
        agents = window.agents_view
        for shown in (agents.agents_table, agents.stores_table, records.recent_table, records.types_table,
                      window.approvals_view.table):
            assert shown.shown_empty_text() == "Loading…"
        window.show_view(window.views.index(records))  # chosen while connecting: no agent yet, still loading
        assert records.recent_table.shown_empty_text() == "Loading…"
        qtbot.waitUntil(lambda: agents.agents_model.rowCount() > 0 and records.recent_model.rowCount() > 0,
                        timeout=10_000)
        assert not agents.agents_model.loading and window.agent == "main"
        assert records.browse_table.shown_empty_text().startswith("Choose a type above")  # no longer loading
    finally:
        window.close()
        tasks.shutdown()

    state = StateDir(tmp_path / "unreachable")
    state.create()
    state.write_engine_info({"pid": os.getpid(), "port": 1, "socket": None})
    (state.root / "operator.token").write_text("kdo_x\n", encoding="utf-8")
    os.chmod(state.root / "operator.token", 0o600)
    tasks = EngineTasks()
    window = MainWindow(tasks, state, settings=window_settings)
    qtbot.addWidget(window)
    try:
        window.connect_engine()
        qtbot.waitUntil(lambda: window.agents_view.agents_table.shown_empty_text().startswith("Not loaded: "),
                        timeout=10_000)
    finally:
        window.close()
        tasks.shutdown()


def test_tables_that_wait_for_the_engine_say_loading_not_that_they_are_empty(
        qtbot, connected_window) -> None:
    window = connected_window
    health, models, partitions = window.health_view, window.models_view, window.partitions_view
    for view in (health, models, partitions):
        window.show_view(window.views.index(view))
    qtbot.waitUntil(lambda: not (health.findings_model.loading or models.installed_model.loading
                                 or partitions.grants_model.loading), timeout=10_000)
    health.refresh()
    models.refresh()
    partitions.refresh()  # the answers come through the event loop, which has not run yet
    assert health.findings_table.shown_empty_text() == "Loading…"
    assert models.installed_table.shown_empty_text() == "Loading…"
    assert partitions.grants_table.shown_empty_text() == "Loading…"
    qtbot.waitUntil(lambda: not (health.findings_model.loading or models.installed_model.loading
                                 or partitions.grants_model.loading), timeout=10_000)
    assert health.findings_table.shown_empty_text().startswith("No validation findings")
    assert models.installed_table.shown_empty_text().startswith("No models installed")
