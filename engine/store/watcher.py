"""Watching vaults for edits made outside the engine (watchdog).

The watcher only marks what changed; the store's lane re-reads those files
before its next operation.  If the platform cannot watch (no inotify
watches left, say), the runtime falls back to walking the partition before
every operation, which is slower but just as correct.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Callable

from watchdog.events import (
    DirCreatedEvent, DirDeletedEvent, DirModifiedEvent, DirMovedEvent, FileClosedEvent, FileCreatedEvent,
    FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileSystemEvent, FileSystemEventHandler,
)
from watchdog.observers import Observer

try:
    from watchdog.observers.inotify import InotifyObserver
except ImportError:  # not Linux: every directory event counts
    InotifyObserver = type(None)  # type: ignore[misc, assignment]

log = logging.getLogger(__name__)

MarkDirty = Callable[..., None]
# Every event but a file opened or closed unwritten: reading changes nothing, and asking inotify for those
# woke the observer twice for every file the engine reads itself (100,000 of them on a first scan).
CHANGES = [FileCreatedEvent, FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent,
           DirCreatedEvent, DirDeletedEvent, DirModifiedEvent, DirMovedEvent]


class _Handler(FileSystemEventHandler):
    def __init__(self, vault: Path, mark_dirty: MarkDirty, *, entries_reported: bool) -> None:
        self.vault = str(vault)
        self.mark_dirty = mark_dirty
        self.entries_reported = entries_reported

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        if event.is_directory and event.event_type == "modified" and self.entries_reported:
            # inotify reports every entry created, deleted or moved in a directory, and watchdog adds a
            # "directory modified" event for the parent beside each one; that event says nothing new, and
            # taking it for "rescan the partition" made every write walk the whole partition.
            return
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if not raw:
                continue
            path = os.fsdecode(raw)
            relative = os.path.relpath(path, self.vault)
            if relative == "." or relative.startswith(".."):
                continue
            self.mark_dirty(relative.replace(os.sep, "/"), is_directory=event.is_directory)


class VaultWatcher:
    """One observer thread for every store of the engine."""

    def __init__(self) -> None:
        self._observer = Observer()
        self._observer.daemon = True
        self._watches: dict[str, object] = {}
        self._lock = threading.Lock()
        self._started = False

    def watch(self, key: str, vault: Path, mark_dirty: MarkDirty) -> bool:
        """Start watching ``vault``; False when the platform refuses (the caller then rescans)."""
        with self._lock:
            try:
                if not self._started:
                    self._observer.start()
                    self._started = True
                handler = _Handler(vault, mark_dirty, entries_reported=isinstance(self._observer, InotifyObserver))
                self._watches[key] = self._observer.schedule(handler, str(vault), recursive=True,
                                                             event_filter=CHANGES)
            except OSError as exc:
                log.warning("cannot watch %s (%s); every operation will rescan instead", vault, exc)
                return False
            return True

    def unwatch(self, key: str) -> None:
        with self._lock:
            watch = self._watches.pop(key, None)
            if watch is not None:
                try:
                    self._observer.unschedule(watch)
                except (KeyError, OSError):
                    pass

    def stop(self) -> None:
        with self._lock:
            if self._started:
                self._observer.stop()
                self._observer.join(timeout=10)
                self._started = False
