"""Bulk writing for imports: an import's items written many at a time, so the store publishes them in groups.

An importer writes item after item through the engine's public write methods, and each one used to wait
for its receipt before the next was planned: every publication was a group of one (a journal transaction,
a checkpoint, an fsync round, an acknowledging transaction and soon an index commit of its own).  Here an
item's writes (``Writer.later``) run on a pool of ``WIDTH`` threads, a window of at most ``2 * WIDTH``
items ahead of the importing thread, so up to ``write_groups.GROUP_MAX`` of them wait on the store's lane
together and are journaled, installed, checkpointed and acknowledged as one group
(``WriteGroups._publish_group``).  Parsing, the credential scan and the authority checks of the next
writes run in those threads while the lane publishes the last group, where the interpreter allows it.

Every guarantee of a single write holds, because each item is still its own publication with its own
request id: a group's journal, install and acknowledgement follow docs/reliability.md, a kill anywhere
leaves each publication journalled (recovery finishes or undoes it) or applied, and running the import
again returns the receipts of what was acknowledged and writes only what was not.  What changes is the
order of acknowledgement within the window: an interrupted import may have acknowledged item 40 and not
item 39; a rerun completes either.

Progress and errors stay on the importing thread: ``then`` (an item's progress report) runs there once
the item and every item before it are written, and the first error stops the import there, with the
items not yet started cancelled.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, TypeVar

T = TypeVar("T")

# Items written at once: enough for the lane to fill a group (write_groups.GROUP_MAX) while earlier ones are
# acknowledged; each is a thread that mostly waits for its receipt.
WIDTH = 64


def done(value: T) -> Future[T]:
    """A future already holding ``value``: an item written on the spot (no pipeline, a dry run)."""
    future: Future[T] = Future()
    future.set_result(value)
    return future


class Pipeline:
    """Items written on a pool of threads, their progress reported in order on the importing thread."""

    def __init__(self, width: int = WIDTH) -> None:
        self.width = width
        self._pool: ThreadPoolExecutor | None = None
        self._window: deque[tuple[Future[object], Callable[[], None] | None]] = deque()

    def submit(self, write: Callable[[], T], then: Callable[[], None] | None = None) -> Future[T]:
        """Start ``write`` (blocking while the window is full); ``then`` is reported once it and every
        earlier item are written.  An earlier item's error is raised here."""
        self._report(2 * self.width - 1)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.width, thread_name_prefix="import-write")
        future = self._pool.submit(write)
        self._window.append((future, then))  # type: ignore[arg-type]
        return future

    def wait(self) -> None:
        """Wait for every item started and report them; raises the first error (``close`` then stops the
        threads)."""
        self._report(0)

    def close(self) -> list[Callable[[], None]]:
        """Stop the threads: the items not yet started are cancelled, those running finish (each whole or not
        written).  Returns the progress reports not yet made of the items written, in order, up to the first
        that failed or never ran: a cancelled import counts what it wrote, not what it had reported."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        unreported = []
        for future, then in self._window:
            if future.cancelled() or future.exception() is not None:
                break
            if then is not None:
                unreported.append(then)
        self._window.clear()
        return unreported

    def _report(self, keep: int) -> None:
        """Report the written items at the head of the window, waiting for the head while more than
        ``keep`` are in it."""
        while self._window and (self._window[0][0].done() or len(self._window) > keep):
            future, then = self._window[0]
            future.result()  # the item's error, if it failed: the import stops here
            self._window.popleft()
            if then is not None:
                then()
