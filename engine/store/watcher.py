"""Watching vaults for edits made outside the engine (watchdog).

The watcher only marks what changed; the store's lane re-reads those files
before its next operation.  If the platform cannot watch (no inotify
watches left, say), the runtime falls back to walking the partition before
every operation, which is slower but just as correct.

Only the vault's own entries and its partition folders are watched, not
``vault/.git``: git's writes were two thirds of the events a page's
publication caused, each one handled and thrown away.  A partition folder
made (or moved in) after the watch began gets its watch when the vault's
watch reports it, before it is reported as changed.
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

# The vault's folders watched with everything in them; its other entries are watched one level deep.
PARTITION_FOLDERS = ("private", "conversations")

MarkDirty = Callable[..., None]
# Every event but a file opened or closed unwritten: reading changes nothing, and asking inotify for those
# woke the observer twice for every file the engine reads itself (100,000 of them on a first scan).
CHANGES = [FileCreatedEvent, FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent,
           DirCreatedEvent, DirDeletedEvent, DirModifiedEvent, DirMovedEvent]
# inotify reports each entry of a directory itself, so the "directory modified" event watchdog adds beside
# each one says nothing new (``_Handler`` drops it); left out, it is not queued and dispatched at all, which
# halves the events an install makes the observer's threads handle.  inotify is asked for the same kernel
# events either way (the other kinds' masks cover what ``DirModifiedEvent`` adds).
INOTIFY_CHANGES = [kind for kind in CHANGES if kind is not DirModifiedEvent]


class _Handler(FileSystemEventHandler):
    def __init__(self, vault: Path, mark_dirty: MarkDirty, *, entries_reported: bool,
                 folder_appeared: Callable[[str], None] = lambda folder: None) -> None:
        self.vault = str(vault)
        self.mark_dirty = mark_dirty
        self.entries_reported = entries_reported
        self.folder_appeared = folder_appeared

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        if event.is_directory and event.event_type == "modified" and self.entries_reported:
            # inotify reports every entry created, deleted or moved in a directory, and watchdog adds a
            # "directory modified" event for the parent beside each one; that event says nothing new, and
            # taking it for "rescan the partition" made every write walk the whole partition.
            return
        if event.is_directory and event.event_type in ("created", "moved"):
            appeared = os.fsdecode(getattr(event, "dest_path", "") or event.src_path)
            if os.path.dirname(appeared) == self.vault and os.path.basename(appeared) in PARTITION_FOLDERS:
                self.folder_appeared(os.path.basename(appeared))  # watched before it is marked changed
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
        self._lock = threading.Lock()  # starting and stopping the observer
        # key -> folder ("" for the vault) -> watch.  Never held while calling the observer, whose thread holds
        # its own lock while it reports and schedules a partition folder made later (``_watch_folder``).
        self._watches: dict[str, dict[str, object]] = {}
        self._table = threading.Lock()
        self._started = False
        self._changes = INOTIFY_CHANGES if isinstance(self._observer, InotifyObserver) else CHANGES

    def watch(self, key: str, vault: Path, mark_dirty: MarkDirty) -> bool:
        """Start watching ``vault``; False when the platform refuses (the caller then rescans)."""
        with self._lock:
            try:
                if not self._started:
                    self._observer.start()
                    self._started = True
                handler = _Handler(vault, mark_dirty, entries_reported=isinstance(self._observer, InotifyObserver),
                                   folder_appeared=lambda folder: self._watch_folder(key, vault, folder, handler))
                with self._table:
                    self._watches[key] = {}
                self._keep(key, "", self._observer.schedule(handler, str(vault), recursive=False,
                                                            event_filter=self._changes))
                for folder in PARTITION_FOLDERS:
                    if (vault / folder).is_dir():
                        self._watch_folder(key, vault, folder, handler)
            except OSError as exc:
                log.warning("cannot watch %s (%s); every operation will rescan instead", vault, exc)
                self.unwatch(key)
                return False
            return True

    def _watch_folder(self, key: str, vault: Path, folder: str, handler: _Handler) -> None:
        """Watch a partition folder and all in it, anew: one removed and made again lost its old watch."""
        with self._table:
            watches = self._watches.get(key)
            old = watches.pop(folder, None) if watches is not None else None
        if watches is None:  # unwatched meanwhile
            return
        self._unschedule(old)
        try:
            watch = self._observer.schedule(handler, str(vault / folder), recursive=True,
                                            event_filter=self._changes)
        except OSError as exc:  # gone again already; its appearance is reported all the same
            log.info("cannot watch %s (%s)", vault / folder, exc)
            return
        self._keep(key, folder, watch)

    def _keep(self, key: str, folder: str, watch: object) -> None:
        with self._table:
            watches = self._watches.get(key)
            if watches is not None:
                watches[folder] = watch
                return
        self._unschedule(watch)  # unwatched meanwhile

    def _unschedule(self, watch: object | None) -> None:
        if watch is not None:
            try:
                self._observer.unschedule(watch)
            except (KeyError, OSError):
                pass

    def unwatch(self, key: str) -> None:
        with self._table:
            watches = self._watches.pop(key, {})
        for watch in watches.values():
            self._unschedule(watch)

    def stop(self) -> None:
        with self._lock:
            if self._started:
                self._observer.stop()
                self._observer.join(timeout=10)
                self._started = False
