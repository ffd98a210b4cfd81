"""Clone a store from the Sync section: a real bare repository another machine synced a store into, the
engine's own clone job (operator/startSyncClone) on the real socket, and refusals that change nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from desktop.sync.clone_dialog import CloneDialog
from desktop.sync.view import SyncView
from desktop.tasks import EngineTasks
from engine.service import Engine
from tests.desktop.conftest import sync_view_on_main
from tests.engine.sync.round_machines import Machine, bare_repository


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A bare repository holding the store of another machine's ``main``: (its path, the store id)."""
    url = bare_repository(tmp_path / "remote.git")
    other = Machine(tmp_path / "machines", "desktop")
    try:
        other.save("lighthouse", "Lighthouse keeping", "Keeps the lighthouse running.")
        other.add_remote(url)
        assert [status["state"] for status in other.sync()] == ["ok"]
        yield url, other.record.store_id
    finally:
        other.close()


@pytest.fixture
def view(qtbot: Any, tasks: EngineTasks, served_engine: Engine) -> SyncView:
    return sync_view_on_main(qtbot, tasks, served_engine)


def open_clone(view: SyncView, url: str, agent: str, *, owner: bool = False) -> CloneDialog:
    view.clone_button.click()
    dialog = view.clone_dialog
    assert dialog is not None and dialog.isVisible()
    dialog.url.setText(url)
    dialog.agent.setText(agent)
    dialog.owner.setChecked(owner)
    return dialog


def what_exists(engine: Engine, guard: Any) -> tuple[Any, ...]:
    """The stores and agents this state directory knows, and its stores' folders and everything else at its top
    (the test's own reads, off the window)."""
    guard.active = False
    try:
        return (sorted(record.store_id for record in engine.registry.stores()),
                sorted(agent["name"] for agent in engine.agents()),
                sorted(path.name for path in engine.state.stores.iterdir()),
                sorted(path.name for path in engine.state.root.iterdir()))
    finally:
        guard.active = True


def test_a_store_is_cloned_from_a_bare_repository_off_the_window_and_shown(
        qtbot, view, served_engine, remote, gui_thread_guard) -> None:
    url, store_id = remote
    assert view.clone_button.isEnabled()
    dialog = open_clone(view, url, "laptop", owner=True)
    assert dialog.agent.placeholderText() and not CloneDialog._free_default(served_engine.agents())  # main has one
    with qtbot.waitSignal(view.sig_store_cloned, timeout=60_000) as cloned, \
            qtbot.waitSignal(view.sig_status_reported, timeout=60_000) as reported:
        dialog.buttons.accepted.emit()
        assert dialog.running and not dialog.url.isEnabled()  # asked of the engine, never run on this thread
        assert not dialog.buttons.button(QDialogButtonBox.StandardButton.Cancel).isEnabled()
        dialog.reject()  # Escape while it runs: the clone is not left half way
        assert dialog.isVisible()
    answer = cloned.args[0]
    assert answer["storeId"] == store_id and answer["owner"] and answer["records"] >= 1
    assert reported.args[0].startswith(f"Store {store_id} cloned from {url} for agent laptop: ")
    assert "no owner authority" not in reported.args[0]
    assert not dialog.isVisible()
    qtbot.waitUntil(lambda: view.store_picker.currentData() == store_id, timeout=10_000)
    qtbot.waitUntil(lambda: [r["name"] for r in view.remotes_model.rows()] == ["origin"], timeout=10_000)
    assert view.remotes_model.index(0, 2).data().startswith("Last synced")
    gui_thread_guard.active = False  # the test's own look at what the engine made
    record = served_engine.registry.store(store_id)
    assert record is not None and served_engine.registry.agent("laptop").owner
    assert any("Lighthouse keeping" in path.read_text(encoding="utf-8")
               for path in (record.path / "vault" / "private").rglob("*.md"))


@pytest.mark.parametrize("case", ["credential", "unreachable", "no-store", "store-here"])
def test_a_clone_refused_says_why_in_plain_words_keeps_the_dialog_open_and_changes_nothing(
        qtbot, view, served_engine, remote, tmp_path, case, gui_thread_guard) -> None:
    url, store_id = remote
    if case == "store-here":  # cloned once already: a second clone of the same store is refused
        dialog = open_clone(view, url, "laptop", owner=True)
        with qtbot.waitSignal(view.sig_store_cloned, timeout=60_000):
            dialog.buttons.accepted.emit()
    gui_thread_guard.active = False
    empty = bare_repository(tmp_path / "empty.git")
    gui_thread_guard.active = True
    asked, said = {
        "credential": ("https://me:secret@example.com/notes.git", "Not cloned: url carries a password"),
        "unreachable": (str(tmp_path / "nowhere.git"), "Not cloned: the remote could not be reached: there is no "
                                                       "repository at that address. Nothing was created here."),
        "no-store": (empty, "Not cloned: the remote holds no store yet"),
        "store-here": (url, f"Not cloned: store {store_id} is already here"),
    }[case]
    before = what_exists(served_engine, gui_thread_guard)
    dialog = open_clone(view, asked, "tablet")
    dialog.buttons.accepted.emit()
    qtbot.waitUntil(lambda: not dialog.running and dialog.problem.isVisibleTo(dialog), timeout=60_000)
    assert dialog.problem.text().startswith(said), dialog.problem.text()
    assert "secret" not in dialog.problem.text()
    assert dialog.isVisible() and dialog.url.isEnabled() and dialog.url.text() == asked  # open to correct
    assert what_exists(served_engine, gui_thread_guard) == before


def test_the_clone_dialog_reads_whole_and_opens_with_the_url_to_type(qtbot, view) -> None:
    view.clone_button.click()
    dialog = view.clone_dialog
    qtbot.waitExposed(dialog)
    explanation = dialog.explanation
    assert explanation.geometry().right() <= dialog.contentsRect().right()
    assert explanation.height() >= explanation.heightForWidth(explanation.width())  # every line shown
    qtbot.waitUntil(lambda: dialog.focusWidget() is dialog.url, timeout=5_000)
    qtbot.keyClicks(dialog.focusWidget(), "/srv/notes.git")
    assert dialog.url.text() == "/srv/notes.git"
    order, widget = [dialog.url], dialog.url
    while len(order) < 5:  # Tab's order: the next widget in the chain that takes the focus by it
        widget = widget.nextInFocusChain()
        if widget.focusPolicy() & Qt.FocusPolicy.TabFocus:
            order.append(widget)
    assert order == [dialog.url, dialog.agent, dialog.owner, dialog.store_id, dialog.remote_name]


def test_a_clone_whose_engine_went_away_does_not_say_nothing_was_created(qtbot, view) -> None:
    view.clone_button.click()
    dialog = view.clone_dialog
    dialog.watcher.sig_job_finished.emit({"id": "job_1", "state": "failed", "error": {
        "reason": "unreachable", "message": "the connection to the engine was lost"}})  # as a failed poll ends it
    assert dialog.problem.text().startswith("The engine could not be asked how the clone ended: the connection")
    assert "Nothing was created" not in dialog.problem.text() and dialog.isVisible() and not dialog.running
