"""The vault watcher reports changes, and reading files does not wake it."""

from __future__ import annotations

import shutil
from pathlib import Path

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
