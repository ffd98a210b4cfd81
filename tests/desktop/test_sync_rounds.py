"""The Sync section against the engine's own rounds: the served demo store and a second machine syncing one
store through a bare repository, every request the window's (operator/addSyncRemote, syncNow,
syncStatus, dismissSyncConflict).  Needs the round and automatic sync merged (branches round, autosync)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from PySide6.QtCore import Qt

import engine.sync.round as round_module
from desktop.records.history import labelled
from desktop.sync.view import SyncView
from desktop.tasks import EngineTasks
from engine.access.authority import AgentCaller
from engine.service import Engine
from tests.desktop.conftest import sync_view_on_main
from tests.engine.sync.round_machines import Machine, bare_repository

OTHER_BODY = "Dana runs operations at Northwind Labs. She moved to the Porto office."
OWN_BODY = "Dana runs operations at Northwind Labs. She now leads the Atlas steering group."


@pytest.fixture
def remote(tmp_path: Path) -> str:
    return bare_repository(tmp_path / "remote.git")


@pytest.fixture
def other_machine(tmp_path: Path) -> Iterator[Machine]:
    made = Machine(tmp_path / "machines", "desktop")
    yield made
    made.close()


@pytest.fixture
def view(qtbot: Any, tasks: EngineTasks, served_engine: Engine) -> SyncView:
    return sync_view_on_main(qtbot, tasks, served_engine)


def add_remote(qtbot: Any, view: SyncView, name: str, url: str) -> None:
    view.add_button.click()
    dialog = view.dialog
    dialog.name.setText(name)
    dialog.url.setText(url)
    with qtbot.waitSignal(view.sig_status_reported, timeout=10_000):
        dialog.buttons.accepted.emit()
    qtbot.waitUntil(lambda: name in [r["name"] for r in view.remotes_model.rows()], timeout=10_000)


def sync_now(qtbot: Any, view: SyncView) -> dict[str, Any]:
    with qtbot.waitSignal(view.sig_sync_finished, timeout=60_000) as finished:
        view.sync_button.click()
    qtbot.waitUntil(lambda: view.sync_button.isEnabled(), timeout=10_000)
    return finished.args[0]


def state_of(view: SyncView, name: str) -> str:
    number = next(n for n, row in enumerate(view.remotes_model.rows()) if row["name"] == name)
    return view.remotes_model.index(number, 2).data()


def dana(engine: Engine) -> dict[str, Any]:
    """The demo's page on Dana, as the owner reads it."""
    owner = AgentCaller(engine.registry.add_credential("main"), {"kind": "owner-private"})
    [hit] = [h for h in engine.search(owner, {"query": "Dana Whitaker"})["hits"] if h["title"] == "Dana Whitaker"]
    return engine.get_record(owner, hit["id"]) | {"caller": owner}


def test_a_round_with_a_bare_repository_then_a_conflict_from_another_machine_shown_and_dismissed(
        qtbot, view, served_engine, remote, other_machine, tmp_path) -> None:
    add_remote(qtbot, view, "origin", remote)
    assert state_of(view, "origin") == "Not synced yet"
    answer = sync_now(qtbot, view)
    assert [r["state"] for one in answer["stores"] for r in one["remotes"]] == ["ok"]
    qtbot.waitUntil(lambda: state_of(view, "origin").startswith("Last synced"), timeout=10_000)

    other_machine.clone(remote)  # the owner's second machine joins, and both revise Dana's page
    page = dana(served_engine)
    other_machine.revise("dana-other", page["id"], page["revision"], "Dana Whitaker", OTHER_BODY)
    assert [s["state"] for s in other_machine.sync()] == ["ok"]
    served_engine.save_page(page["caller"], {"requestId": "dana-here", "type": "person",
                                             "title": "Dana Whitaker", "body": OWN_BODY, "id": page["id"],
                                             "expectedRevision": page["revision"]})
    sync_now(qtbot, view)  # merges the other machine's revision with this one's: a conflict
    qtbot.waitUntil(lambda: view.conflicts_model.rowCount() == 1, timeout=10_000)
    conflict = view.conflicts_model.row(0)
    assert conflict["recordId"] == page["id"] and conflict["remote"] == "origin"
    view.conflicts_table.selectRow(0)
    text = view.details.toPlainText()
    assert "Porto office" in text and "Atlas steering group" in text and "Stands: revision" in text

    with qtbot.waitSignal(view.sig_status_reported, timeout=10_000):
        view.dismiss_button.click()
    qtbot.waitUntil(lambda: view.conflicts_model.rowCount() == 0, timeout=10_000)

    add_remote(qtbot, view, "gone", str(tmp_path / "no-such-repository.git"))
    sync_now(qtbot, view)
    qtbot.waitUntil(lambda: state_of(view, "gone").startswith("Failing since"), timeout=10_000)
    assert state_of(view, "gone").endswith(": the remote could not be reached")
    assert state_of(view, "origin").startswith("Last synced")


def test_a_conflict_with_an_outside_edit_names_its_versions_as_history_does_and_dismiss_says_the_title(
        qtbot, view, served_engine, remote, other_machine) -> None:
    add_remote(qtbot, view, "origin", remote)
    sync_now(qtbot, view)
    other_machine.clone(remote)
    page = dana(served_engine)
    other_machine.revise("dana-other", page["id"], page["revision"], "Dana Whitaker", OTHER_BODY)
    assert [s["state"] for s in other_machine.sync()] == ["ok"]
    store = served_engine.resolver.effective("main", create=False)
    vault = served_engine.state.stores / store.store_id / "vault"
    path = next(p for p in (vault / "private").rglob("*.md") if f"id: {page['id']}\n" in p.read_text(encoding="utf-8"))
    path.write_text(path.read_text(encoding="utf-8") + "\nEdited in a text editor.\n", encoding="utf-8")
    served_engine.runtime(store).mark_dirty(str(path.relative_to(vault)))  # as the vault watcher reports it

    sync_now(qtbot, view)  # the edit here (kept as revision n.1) meets the other machine's revision n+1
    qtbot.waitUntil(lambda: view.conflicts_model.rowCount() == 1, timeout=10_000)
    conflict = view.conflicts_model.row(0)
    histories: list[dict[str, Any]] = []
    view.tasks.request("operator/history", {"agent": "main", "id": page["id"]}, histories.append)
    qtbot.waitUntil(lambda: bool(histories), timeout=10_000)
    named = {row["sha256"]: row["label"] for row in labelled(histories[0]["revisions"])}  # as History shows them
    sides = {conflict["standing"]["sha256"]: conflict["standing"]["label"],
             conflict["other"]["sha256"]: conflict["other"]["label"]}
    assert sorted(sides.values()) == [f"{page['revision']}.1", f"{page['revision'] + 1}"]
    assert all(named[sha256] == label for sha256, label in sides.items())
    assert view.conflicts_model.index(0, 0).data() == "Dana Whitaker"
    view.conflicts_table.selectRow(0)
    text = view.details.toPlainText()
    assert text.startswith("Dana Whitaker (private/")
    assert f"revision {page['revision']}.1 (" in text and "edited outside the engine, seen" in text
    assert f"revision {page['revision']} (" not in text  # the number the edit kept names another version

    with qtbot.waitSignal(view.sig_status_reported, timeout=10_000) as reported:
        view.dismiss_button.click()
    assert reported.args[0] == "Conflict on Dana Whitaker dismissed; both versions stay in its history."


def test_the_other_machines_are_named_by_their_computers_names_and_an_older_one_by_its_id(
        qtbot, view, served_engine, remote, other_machine, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(round_module, "this_machine_name", lambda: "study-pc")
    add_remote(qtbot, view, "origin", remote)
    sync_now(qtbot, view)
    monkeypatch.setattr(round_module, "this_machine_name", lambda: "kitchen-laptop")
    other_machine.clone(remote)
    kitchen = other_machine.status()["machineId"]
    older = Machine(tmp_path / "older", "older")   # an older engine's machine records no name
    try:
        monkeypatch.setattr(round_module, "this_machine_name", lambda: "")
        older.clone(remote)
        old_id = older.status()["machineId"]
    finally:
        older.close()
    monkeypatch.setattr(round_module, "this_machine_name", lambda: "study-pc")
    sync_now(qtbot, view)
    column = next(n for n in range(view.remotes_model.columnCount())
                  if view.remotes_model.headerData(n, Qt.Orientation.Horizontal) == "Other machines")
    cell = view.remotes_model.index(0, column)
    qtbot.waitUntil(lambda: "kitchen-laptop" in (cell.data() or ""), timeout=10_000)
    assert sorted(cell.data().split(", ")) == sorted(["kitchen-laptop", old_id])
    tip = cell.data(Qt.ItemDataRole.ToolTipRole)
    assert f"kitchen-laptop: sync id {kitchen}" in tip
    assert f"{old_id}: no name recorded (it runs an older version of Knowledge Desk)" in tip
    monkeypatch.setattr(round_module, "this_machine_name", lambda: "kitchen-laptop")
    assert [s["machineNames"] for s in other_machine.sync()] == [{view.store()["machineId"]: "study-pc"}]
