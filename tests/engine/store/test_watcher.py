"""The vault watcher reports changes, and reading files does not wake it."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.store import watcher as watcher_module
from engine.store.watcher import VaultWatcher
from tests.helpers import wait_for


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
