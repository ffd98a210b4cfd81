"""The Sync section: each store's remotes and their state in words, conflicts with their diff, and the actions.

The round's methods (``operator/syncStatus``, ``syncNow``, ``dismissSyncConflict``) and the ``sync`` topic
are served by ``FakeSync`` beside the engine's real ones (tests/desktop/fake_sync.py); adding and removing
a remote are the engine's own methods, over the real ``remotes.json``.
"""

from __future__ import annotations

import socket
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
from PySide6.QtGui import QPalette

from desktop.main_window import MainWindow
from desktop.sync.view import LOADING, SyncView
from desktop.common.diffs import DIFF_COLOURS
from desktop.sync.words import ago, clock_time, remote_state
from desktop.common.widgets import is_dark
from desktop.tasks import EngineTasks
from engine.service import Engine
from engine.sync.remotes import RemoteBook, remotes_file
from tests.desktop.conftest import serving, wait_for_signal
from tests.desktop.fake_sync import FakeSync, conflict

NOW = datetime(2026, 12, 4, 10, 5, 0, tzinfo=timezone.utc)  # the view's clock: every time shown is relative to it
REFUSED_URL = "https://alice:hunter2@git.example.org/notes.git"


@pytest.fixture
def fake_sync() -> FakeSync:
    return FakeSync()


@pytest.fixture
def served_engine(tmp_path: Path, demo_template: Path, fake_sync: FakeSync, monkeypatch: Any) -> Iterator[Engine]:
    """The demo served with the round's methods answered by ``fake_sync`` (replaces conftest's)."""
    with serving(tmp_path / "state", demo_template, register=fake_sync.serve) as engine:
        yield engine


@pytest.fixture
def store(served_engine: Engine) -> str:
    """main's store, with two remotes: nas last synced three minutes ago, github failing since 10:02."""
    book = RemoteBook(served_engine.state, served_engine.resolver)
    made = book.add("nas", "git@nas.local:srv/notes.git", agent="main")["storeId"]
    book.add("github", "https://github.com/me/notes.git", agent="main")
    return made


@pytest.fixture
def states(fake_sync: FakeSync, store: str) -> str:
    fake_sync.set_remote(store, "nas", state="ok", lastAttempt="2026-12-04T10:02:00Z",
                         lastSuccess="2026-12-04T10:02:00Z", ahead=0, behind=2, machines=["m-desktop-02"])
    fake_sync.set_remote(store, "github", state="failing", lastAttempt="2026-12-04T10:02:00Z",
                         lastSuccess="2026-12-03T18:00:00Z", ahead=3, behind=None,
                         lastError={"code": "unreachable", "at": "2026-12-04T10:02:00Z",
                                    "message": "ssh: Could not resolve hostname github.com"})
    fake_sync.add_conflict(store, conflict(1))
    fake_sync.add_conflict(store, conflict(2))
    return store


@pytest.fixture
def view(qtbot: Any, tasks: EngineTasks, served_engine: Engine, states: str) -> SyncView:
    made = SyncView(tasks, now=lambda: NOW)
    qtbot.addWidget(made)
    made.set_inventory({"agents": served_engine.agents(), "stores": served_engine.stores()})
    wait_for_signal(qtbot, made.sig_content_loaded, lambda: made.set_agent("main"))
    return made


def shown(model: Any) -> list[list[str]]:
    return [[model.index(r, c).data() for c in range(model.columnCount())] for r in range(model.rowCount())]


def remote_names(engine: Engine, store: str) -> list[str]:
    """The store's remotes as remotes.json holds them (the engine's own reading)."""
    listing = RemoteBook(engine.state, engine.resolver).listing()["stores"]
    return [remote["name"] for entry in listing if entry["storeId"] == store for remote in entry["remotes"]]


# --- what the owner reads ------------------------------------------------------------------------------


def test_each_remote_of_the_agents_store_is_shown_with_its_state_in_words_and_ahead_behind(
        qtbot, view, states, gui_thread_guard, qtmodeltester) -> None:
    assert view.store_picker.currentData() == states
    assert shown(view.remotes_model) == [
        ["nas", "git@nas.local:srv/notes.git", "Last synced 3 minutes ago", "0", "2", "m-desktop-02"],
        ["github", "https://github.com/me/notes.git",
         "Failing since 10:02: the remote could not be reached (last synced 16 hours ago)", "3", "not known yet",
         "none yet"],
    ]
    assert "1 of 2 remotes failing" in view.summary.text()
    # The machine by the name its owner gave the computer; its sync id, which means nothing to them, on hover.
    assert f"This machine ({socket.gethostname().split('.')[0]}) syncs this store." in view.summary.text()
    assert "m-laptop-01" not in view.summary.text() and "m-laptop-01" in view.summary.toolTip()
    assert "2 conflicts waiting" in view.summary.text()
    qtmodeltester.check(view.remotes_model)
    qtmodeltester.check(view.conflicts_model)


def test_a_failing_remotes_error_is_said_in_words_with_the_engines_own_message_beside_it(view) -> None:
    state = view.remotes_model.index(1, 2)
    assert state.data().startswith("Failing since 10:02: the remote could not be reached")
    assert state.data(0x03) == "ssh: Could not resolve hostname github.com"  # Qt.ToolTipRole: the engine's words


def test_a_conflict_shows_which_revision_stands_and_its_diff_coloured(qtbot, view, gui_thread_guard) -> None:
    assert [row[0] for row in shown(view.conflicts_model)] == ["pages/topic/atlas-1.md", "pages/topic/atlas-2.md"]
    assert view.conflicts_model.index(0, 0).data(0x03) == "Record pg_01JEXAMPLE1"  # Qt.ToolTipRole
    assert shown(view.conflicts_model)[0][1:] == ["revision 4", "nas", "7 min ago"]
    view.conflicts_table.selectRow(0)
    html = view.details.toHtml()
    text = view.details.toPlainText()
    assert "pages/topic/atlas-1.md (record pg_01JEXAMPLE1)" in text
    assert "Stands: revision 4 (pages/topic/atlas-1.md)" in text
    assert "Not standing: revision 3" in text and "kept in the record's history" in text
    assert "Revised on two machines from one revision; met syncing with nas 7 minutes ago" in text
    assert "+Cut-over moved to Monday." in text and "-Cut-over on Friday." in text
    dark = is_dark()
    assert DIFF_COLOURS[("added", dark)] in html and DIFF_COLOURS[("removed", dark)] in html
    assert view.dismiss_button.isEnabled()


def test_loading_is_said_until_the_engine_answers(qtbot, tasks, served_engine, states) -> None:
    made = SyncView(tasks, now=lambda: NOW)
    qtbot.addWidget(made)
    made.set_agent("main")  # asks; the answer can only arrive through the event loop, which has not run
    assert made.summary.text() == LOADING
    assert made.remotes_table.shown_empty_text() == LOADING and made.conflicts_table.shown_empty_text() == LOADING
    qtbot.waitUntil(lambda: made.status is not None, timeout=10_000)
    assert made.summary.text() != LOADING and made.remotes_model.rowCount() == 2


def test_a_view_that_could_not_read_the_state_says_so_not_that_there_is_nothing(qtbot, tmp_path) -> None:
    unreachable = EngineTasks()  # no engine
    made = SyncView(unreachable, now=lambda: NOW)
    qtbot.addWidget(made)
    try:
        with qtbot.waitSignal(unreachable.sig_error_raised, timeout=10_000):
            made.set_agent("main")
        assert made.summary.text().startswith("Not loaded: Not connected to a Knowledge engine yet")
        assert made.remotes_table.shown_empty_text().startswith("Not loaded")
    finally:
        unreachable.shutdown()


# --- actions -----------------------------------------------------------------------------------------


def test_dismiss_calls_the_engine_for_the_selected_conflict_and_the_list_follows(
        qtbot, view, fake_sync, states, gui_thread_guard) -> None:
    view.conflicts_table.selectRow(1)
    with qtbot.waitSignal(view.sig_status_reported, timeout=10_000) as reported:
        view.dismiss_button.click()
    assert ("dismissSyncConflict", {"store": states, "id": "sc_0002"}) in fake_sync.calls
    assert "pg_01JEXAMPLE2 dismissed" in reported.args[0]
    qtbot.waitUntil(lambda: view.conflicts_model.rowCount() == 1, timeout=10_000)
    assert view.conflicts_model.row(0)["id"] == "sc_0001" and "1 conflict waiting" in view.summary.text()


def test_a_remote_with_a_credential_in_its_url_is_refused_by_the_engine_and_nothing_changes(
        qtbot, view, served_engine, states) -> None:
    remotes = remotes_file(served_engine.resolver.registry.store(states))
    before = RemoteBook(served_engine.state, served_engine.resolver).listing()
    view.add_button.click()
    dialog = view.dialog
    assert dialog is not None
    dialog.name.setText("backup")
    dialog.url.setText(REFUSED_URL)
    dialog.buttons.accepted.emit()
    qtbot.waitUntil(lambda: dialog.problem.isVisibleTo(dialog), timeout=10_000)
    assert "git keeps credentials itself" in dialog.problem.text() and "hunter2" not in dialog.problem.text()
    assert dialog.isVisible()  # open, with the engine's reason, to correct
    assert RemoteBook(served_engine.state, served_engine.resolver).listing() == before
    assert "hunter2" not in remotes.read_text(encoding="utf-8")
    assert [row["name"] for row in view.remotes_model.rows()] == ["nas", "github"]


def test_a_remote_added_and_removed_shows_in_the_list(qtbot, view, served_engine, states) -> None:
    view.add_button.click()
    dialog = view.dialog
    dialog.name.setText("backup")
    dialog.url.setText("ssh://me@backup.lan/srv/notes.git")
    with qtbot.waitSignal(view.sig_status_reported, timeout=10_000):
        dialog.buttons.accepted.emit()
    qtbot.waitUntil(lambda: view.remotes_model.rowCount() == 3, timeout=10_000)
    assert shown(view.remotes_model)[2][:3] == ["backup", "ssh://me@backup.lan/srv/notes.git", "Not synced yet"]
    assert not dialog.isVisible()

    view.remotes_table.selectRow(0)
    assert view.remove_button.isEnabled()
    with qtbot.waitSignal(view.sig_status_reported, timeout=10_000) as reported:
        view.remove_button.click()
    assert reported.args[0].startswith("Remote nas removed")
    qtbot.waitUntil(lambda: [r["name"] for r in view.remotes_model.rows()] == ["github", "backup"], timeout=10_000)
    assert remote_names(served_engine, states) == ["github", "backup"]


def test_removing_a_remote_removed_meanwhile_shows_the_engines_error_and_changes_nothing(
        qtbot, view, served_engine, states) -> None:
    view.remotes_table.selectRow(0)
    RemoteBook(served_engine.state, served_engine.resolver).remove("nas", store=states)  # the command line, say
    with qtbot.waitSignal(view.tasks.sig_error_raised, timeout=10_000) as raised:
        view.remove_button.click()
    assert "has no remote named 'nas'" in raised.args[0]
    assert remote_names(served_engine, states) == ["github"]


def test_sync_now_runs_a_round_of_the_chosen_store_and_says_how_each_remote_ended(
        qtbot, view, fake_sync, states, gui_thread_guard) -> None:
    with qtbot.waitSignal(view.sig_sync_finished, timeout=10_000) as finished:
        view.sync_button.click()
        assert not view.sync_button.isEnabled() and view.sync_button.text() == "Syncing…"
    assert ("syncNow", {"store": states}) in fake_sync.calls
    assert [r["state"] for r in finished.args[0]["stores"][0]["remotes"]] == ["ok", "ok"]
    qtbot.waitUntil(lambda: [row[2] for row in shown(view.remotes_model)] == ["Last synced just now"] * 2,
                    timeout=10_000)
    assert view.sync_button.isEnabled()


# --- live ----------------------------------------------------------------------------------------------


def test_a_round_ending_elsewhere_shows_in_the_open_sync_section_without_f5(
        qtbot, connected_window: MainWindow, fake_sync, states) -> None:
    window = connected_window
    window.sync_view.now = lambda: NOW
    with qtbot.waitSignal(window.sync_view.sig_content_loaded, timeout=10_000):
        window.show_view(window.views.index(window.sync_view))
    assert window.sync_view.remotes_model.rowCount() == 2
    fake_sync.set_remote(states, "github", state="ok", lastSuccess="2026-12-04T10:04:00Z", lastError=None)
    fake_sync.add_conflict(states, conflict(3))
    with qtbot.waitSignal(window.sig_live_applied, timeout=10_000,
                          check_params_cb=lambda titles: "Sync" in titles):
        fake_sync.changed(states)  # what a round, automatic or asked by the command line, publishes
    qtbot.waitUntil(lambda: window.sync_view.conflicts_model.rowCount() == 3, timeout=10_000)
    assert shown(window.sync_view.remotes_model)[1][2] == "Last synced 1 minute ago"


def test_relative_times_move_on_with_the_views_clock_not_only_when_a_round_ends(
        qtbot, view, fake_sync, states) -> None:
    view.resize(760, 600)  # the view's size in a 1024x700 window
    view.show()
    table, header = view.conflicts_table, view.conflicts_table.horizontalHeader()
    met = [column.title for column in view.conflicts_model.columns].index("Met")
    qtbot.waitUntil(lambda: header.sectionSize(met) >= table.sizeHintForColumn(met), timeout=5_000)
    view.conflicts_table.selectRow(0)
    assert "met syncing with nas 7 minutes ago" in view.details.toPlainText()
    fitted, read = header.sectionSize(met), len(fake_sync.calls)

    later = NOW + timedelta(minutes=50)  # the view left open for 50 minutes, no round meanwhile
    view.now = lambda: later
    assert table.sizeHintForColumn(met) > fitted  # "57 min ago" is wider than "7 min ago"
    view.clock.timeout.emit()  # the view's clock ticks (once a minute)

    assert header.sectionSize(met) >= table.sizeHintForColumn(met)  # never "57 min …"
    assert "met syncing with nas 57 minutes ago" in view.details.toPlainText()
    assert shown(view.remotes_model)[0][2] == "Last synced 53 minutes ago"
    assert len(fake_sync.calls) == read  # said again from what was read, not read again
    assert view.clock.isActive() and view.clock.interval() <= 60_000


def test_a_dismissed_conflicts_details_stay_cleared_when_the_clock_ticks(qtbot, view, states) -> None:
    view.conflicts_table.selectRow(0)
    assert "atlas-1.md" in view.details.toPlainText()
    with qtbot.waitSignal(view.sig_content_loaded, timeout=10_000):
        view.dismiss_button.click()
    assert view.details.toPlainText() == ""
    view.clock.timeout.emit()
    assert view.details.toPlainText() == ""  # never the dismissed conflict again
    view.setPalette(QPalette(view.palette().color(QPalette.ColorRole.Base).darker()))  # nor on a theme change
    assert view.details.toPlainText() == ""


# --- words -------------------------------------------------------------------------------------------


def test_times_are_said_relative_to_now_in_its_zone() -> None:
    assert ago("2026-12-04T10:04:40Z", NOW) == "just now"
    assert ago("2026-12-04T10:04:00Z", NOW) == "1 minute ago"
    assert ago("2026-12-04T07:05:00Z", NOW) == "3 hours ago"
    assert ago("2026-12-03T08:00:00Z", NOW) == "yesterday 08:00"
    assert ago("2026-11-30T08:00:00Z", NOW) == "on 2026-11-30 08:00"
    assert clock_time("2026-12-04T10:02:00+01:00", NOW) == "09:02"
    assert ago(None, NOW) == "at an unknown time"


def test_a_remote_never_synced_or_syncing_and_an_unknown_finding_are_said_plainly() -> None:
    base = {"name": "nas", "url": "/srv/notes.git", "lastAttempt": None, "lastSuccess": None, "lastError": None,
            "ahead": None, "behind": None, "machines": []}
    assert remote_state({**base, "state": "never"}, NOW) == "Not synced yet"
    assert remote_state({**base, "state": "syncing"}, NOW) == "Syncing now…"
    failing = {**base, "state": "failing",
               "lastError": {"code": "something_new", "message": "The remote said no.", "at": "2026-12-04T09:00:00Z"}}
    assert remote_state(failing, NOW) == "Failing since 09:00: The remote said no"


def test_a_round_that_failed_is_said_as_a_problem_never_as_synced(qtbot, view, fake_sync, gui_thread_guard) -> None:
    fake_sync.after_sync = {"state": "failing", "lastAttempt": "2026-12-04T10:02:00Z", "lastError": {
        "code": "unreachable", "message": "the remote could not be reached: the connection was refused",
        "at": "2026-12-04T10:02:00Z"}}
    reported: list[str] = []
    view.sig_status_reported.connect(reported.append)
    with qtbot.waitSignal(view.tasks.sig_error_raised, timeout=10_000) as raised:
        view.sync_button.click()
    # The store as the picker names it ("main's own store (st_…)"), never a bare id.
    assert raised.args[0].startswith(f"Sync of {view.store_picker.currentText()}: 2 of 2 remotes failed: nas: "
                                     "Failing since ")
    assert not raised.args[0].startswith("Sync of st_")
    assert "the remote could not be reached" in raised.args[0] and reported == []


def test_a_round_that_failed_says_the_engines_reason_in_the_message_bar(qtbot, view, fake_sync,
                                                                        gui_thread_guard) -> None:
    """The table's State cell keeps the short phrase (the reason is its tooltip); the bar, which has no
    tooltip, says why: "could not be reached" alone sends an owner to the network when git needs credentials."""
    reason = ("the remote could not be reached: it asks for credentials git has none for (give git a credential "
              "helper, or use an ssh address and key)")
    fake_sync.after_sync = {"state": "failing", "lastAttempt": "2026-12-04T10:02:00Z", "lastError": {
        "code": "unreachable", "message": reason, "at": "2026-12-04T10:02:00Z"}}
    with qtbot.waitSignal(view.tasks.sig_error_raised, timeout=10_000) as raised:
        view.sync_button.click()
    assert f"nas: Failing since {clock_time('2026-12-04T10:02:00Z', view.now())}: {reason}" in raised.args[0]
    assert raised.args[0].count("the remote could not be reached") == 2  # once per remote, never twice for one


def test_the_conflict_panes_hint_wraps_in_a_small_window_rather_than_being_cut(qtbot, view) -> None:
    view.resize(760, 600)  # the view's size in a 1024x700 window
    view.show()
    view.conflicts_table.clearSelection()
    view.details.clear()
    qtbot.waitUntil(lambda: view.details.isVisible() and view.details.width() < 400, timeout=5_000)
    hint = view.details.placeholderText()
    width = view.details.viewport().width()
    assert view.details.fontMetrics().horizontalAdvance(hint) > width, "the hint is longer than the pane is wide"
    image = view.details.viewport().grab().toImage()
    base = view.details.palette().color(QPalette.ColorRole.Base).rgb()
    inked = [y for y in range(image.height()) if any(image.pixel(x, y) != base for x in range(image.width()))]
    first_line = view.details.document().documentMargin() + view.details.fontMetrics().lineSpacing()
    assert inked and max(inked) > first_line + 2, "its words go on below the first line"


def test_a_conflicts_revision_and_time_read_whole_in_a_small_window(qtbot, view, fake_sync, states) -> None:
    view.resize(760, 600)  # the view's size in a 1024x700 window
    view.show()
    fake_sync.add_conflict(states, {**conflict(3), "title": "Atlas migration plan for the Porto office move",
                                    "standing": {**conflict(3)["standing"], "revision": 1, "label": "1.2"}})
    with qtbot.waitSignal(view.sig_content_loaded, timeout=10_000):
        view.refresh()
    table, header = view.conflicts_table, view.conflicts_table.horizontalHeader()
    titles = [column.title for column in view.conflicts_model.columns]
    assert "revision 1.2" in [view.conflicts_model.index(n, 1).data() for n in range(view.conflicts_model.rowCount())]
    for name in ("Stands", "Met"):  # never "revision …" beside "4 minute…"
        column = titles.index(name)
        qtbot.waitUntil(lambda: header.sectionSize(column) >= table.sizeHintForColumn(column), timeout=5_000)
