"""The vault watcher reports changes, and reading files does not wake it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pytest

from engine.access.authority import AgentCaller
from engine.core.files import StagingFolder, write_inside
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.store import watcher as watcher_module
from engine.store.watcher import VaultWatcher
from tests.helpers import only_store, page, private_dir, wait_for


def events_seen(monkeypatch, field: str) -> list[str]:
    """``field`` of every event the watcher's handler is given, in order."""
    seen: list[str] = []
    on_any_event = watcher_module._Handler.on_any_event

    def spy(handler, event) -> None:
        seen.append(getattr(event, field))
        on_any_event(handler, event)

    monkeypatch.setattr(watcher_module._Handler, "on_any_event", spy)
    return seen


def test_reads_do_not_reach_the_watcher_and_changes_do(tmp_path: Path, monkeypatch) -> None:
    vault = tmp_path / "vault"
    (vault / "private" / "pages").mkdir(parents=True)
    for index in range(20):
        (vault / "private" / "pages" / f"note-{index}.md").write_bytes(b"---\n---\n")
    seen = events_seen(monkeypatch, "event_type")
    dirty: list[str] = []
    watcher = VaultWatcher()
    try:
        assert watcher.watch("store", vault, lambda relpath, is_directory=False: dirty.append(relpath))
        for path in sorted((vault / "private" / "pages").iterdir()):
            path.read_bytes()
        (vault / "private" / "pages" / "written.md").write_bytes(b"---\n---\n")
        wait_for(lambda: "private/pages/written.md" in dirty)
    finally:
        watcher.stop()
    assert "opened" not in seen and "closed_no_write" not in seen, seen
    assert all(relpath.endswith("written.md") or relpath == "private/pages" for relpath in dirty), dirty


def test_gits_folder_is_not_watched_and_partition_folders_are(tmp_path: Path, monkeypatch) -> None:
    vault = tmp_path / "vault"
    (vault / ".git" / "objects").mkdir(parents=True)
    (vault / "private").mkdir()
    seen = events_seen(monkeypatch, "src_path")
    dirty: list[str] = []
    watcher = VaultWatcher()
    try:
        assert watcher.watch("store", vault, lambda relpath, is_directory=False: dirty.append(relpath))
        (vault / ".git" / "objects" / "ab").mkdir()
        (vault / ".git" / "objects" / "ab" / "cdef").write_bytes(b"blob")
        (vault / "ontology.yaml").write_bytes(b"types: {}\n")
        (vault / "private" / "written.md").write_bytes(b"---\n---\n")
        wait_for(lambda: "private/written.md" in dirty and "ontology.yaml" in dirty)
    finally:
        watcher.stop()
    assert not [path for path in seen if "/.git" in path], seen


def test_a_partition_folder_made_after_the_watch_began_is_watched_whole(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    dirty: list[str] = []
    watcher = VaultWatcher()
    try:
        assert watcher.watch("store", vault, lambda relpath, is_directory=False: dirty.append(relpath))
        for attempt in range(2):  # made, then removed and made again
            (vault / "conversations").mkdir()
            # The vault's entries are reported in order, and the folder's watch is in place before its report.
            (vault / f"marker-{attempt}").write_bytes(b"")
            wait_for(lambda: f"marker-{attempt}" in dirty)
            assert "conversations" in dirty
            (vault / "conversations" / "c1").mkdir()
            (vault / "conversations" / "c1" / f"note-{attempt}.md").write_bytes(b"---\n---\n")
            wait_for(lambda: f"conversations/c1/note-{attempt}.md" in dirty)
            shutil.rmtree(vault / "conversations")
    finally:
        watcher.stop()


def test_directory_modified_events_are_not_dispatched_and_inotify_is_asked_the_same(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    """The "directory modified" events the handler drops under inotify are not queued at all, and leaving
    them out asks the kernel for the same events, so no change to a file goes unreported."""
    inotify = pytest.importorskip("watchdog.observers.inotify")

    def mask(kinds) -> int:
        return inotify.InotifyEmitter.get_event_mask_from_filter(SimpleNamespace(_event_filter=kinds))

    assert mask(watcher_module.INOTIFY_CHANGES) == mask(watcher_module.CHANGES)
    vault = tmp_path / "vault"
    (vault / "private" / "pages").mkdir(parents=True)
    kinds = events_seen(monkeypatch, "event_type")
    directories = events_seen(monkeypatch, "is_directory")
    dirty: list[str] = []
    watcher = VaultWatcher()
    try:
        assert watcher.watch("store", vault, lambda relpath, is_directory=False: dirty.append(relpath))
        staged = vault / "private" / "pages" / ".staged.md"
        staged.write_bytes(b"---\n---\n")
        staged.rename(vault / "private" / "pages" / "installed.md")
        wait_for(lambda: "private/pages/installed.md" in dirty)
    finally:
        watcher.stop()
    assert "moved" in kinds and ("modified", True) not in list(zip(kinds, directories)), kinds


def _events_until_sentinel(monkeypatch, vault: Path, write: Callable[[], None], folder: Path, *,
                           watch: bool = True) -> list[tuple[str, str]]:
    """The (kind, path) of every event a watcher's handler is given while ``write`` runs, up to a sentinel file
    written after it in ``folder`` (inotify reports a watch's events in order); paths vault-relative.  With
    ``watch`` a watcher of ``vault`` is started for it, else the one already watching is listened to."""
    seen: list[tuple[str, str]] = []
    on_any_event = watcher_module._Handler.on_any_event

    def spy(handler, event) -> None:
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if raw:
                seen.append((event.event_type, os.path.relpath(os.fsdecode(raw), vault)))
        on_any_event(handler, event)

    monkeypatch.setattr(watcher_module._Handler, "on_any_event", spy)
    watcher = VaultWatcher()
    try:
        if watch:
            assert watcher.watch("store", vault, lambda relpath, is_directory=False: None)
        write()
        sentinel = folder / "sentinel.txt"
        sentinel.write_bytes(b"")
        wait_for(lambda: any(path.endswith("sentinel.txt") for _, path in seen))
    finally:
        watcher.stop()
    monkeypatch.undo()
    return [(kind, path) for kind, path in seen if not path.endswith("sentinel.txt")]


def test_a_file_installed_through_the_staging_folder_is_one_event_for_the_watcher(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """A temp file made beside its target is seen made, written, closed and renamed; made in a staging folder
    out of the watch, the rename into place is the watcher's one event, a file created where it lands."""
    vault = tmp_path / "vault"
    pages = vault / "private" / "pages"
    pages.mkdir(parents=True)
    staging = StagingFolder.open(tmp_path / "staging", vault)
    assert staging is not None
    staged = _events_until_sentinel(
        monkeypatch, vault, lambda: write_inside(vault / "private", "pages/staged.md", b"---\n---\n", staging=staging),
        pages)
    assert staged == [("created", "private/pages/staged.md")], staged
    beside = _events_until_sentinel(
        monkeypatch, vault, lambda: write_inside(vault / "private", "pages/beside.md", b"---\n---\n"), pages)
    assert len(beside) > 1 and ("moved", "private/pages/beside.md") in beside, beside


def test_a_page_the_engine_writes_is_one_watcher_event_and_an_outside_edit_is_still_seen(
        state_dir: StateDir, monkeypatch) -> None:
    with Engine(state_dir, watch=True) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("r0", "Seed"))  # the partition made, its folders watched
        private = private_dir(state_dir)
        created: dict = {}
        events = _events_until_sentinel(
            monkeypatch, private.parent, lambda: created.update(engine.save_page(owner, page("r1", "Dana"))),
            private, watch=False)
        assert events == [("created", "private/pages/people/dana.md")], events
        # The temp file was made beside the vault, not in it: git, sync, exports and catalog walks never see it.
        assert (only_store(state_dir) / "staging").is_dir() and not list((only_store(state_dir) / "staging").iterdir())
        assert not [path for path in private.parent.rglob("*") if path.name == "staging" or path.suffix == ".tmp"]
        path = private / "pages" / "people" / "dana.md"
        path.write_bytes(path.read_bytes().replace(b"Body text.", b"Edited by hand."))
        wait_for(lambda: engine.get_record(owner, created["id"])["body"] == "Edited by hand.\n")
