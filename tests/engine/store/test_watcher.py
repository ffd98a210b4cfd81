"""The vault watcher reports changes, and reading files does not wake it."""

from __future__ import annotations

from pathlib import Path

from engine.store import watcher as watcher_module
from engine.store.watcher import VaultWatcher
from tests.helpers import wait_for


def test_reads_do_not_reach_the_watcher_and_changes_do(tmp_path: Path, monkeypatch) -> None:
    vault = tmp_path / "vault"
    (vault / "private" / "pages").mkdir(parents=True)
    for index in range(20):
        (vault / "private" / "pages" / f"note-{index}.md").write_bytes(b"---\n---\n")
    seen: list[str] = []
    dirty: list[str] = []
    on_any_event = watcher_module._Handler.on_any_event

    def spy(handler, event) -> None:
        seen.append(event.event_type)
        on_any_event(handler, event)

    monkeypatch.setattr(watcher_module._Handler, "on_any_event", spy)
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
