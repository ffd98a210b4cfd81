"""Vectors that follow publications off the lane: one thread per store runtime.

A publication queues its partition and is acknowledged at once; this thread
runs one catch-up per queued partition (``VectorIndex.catch_up`` with
``lane``): its SQL on the store's lane a chunk at a time, the embedding model
here in between, so a write never waits for the model and the publications of
a burst share the catch-up's batches. A search still catches up (a bounded
number) before it answers and says what still waits (``index_pending``,
``not_embedded_yet``), so no search silently misses an acknowledged record.

At the start every partition is compared once (a version check where nothing
changed), so what the last close left, or what was written while the runtime
was off, is embedded without waiting for a search.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from ..core.errors import KnowledgeError
from .embedding import Embedder
from .vectors import OnLane, VectorIndex

log = logging.getLogger(__name__)
EVERY = None  # queued: every partition


class VectorFeed:
    """The thread that embeds what publications added; ``stop`` lets the chunk in the model finish."""

    def __init__(self, name: str, vectors: VectorIndex, embedder: Callable[[], Embedder | None],
                 partitions: Callable[[], list[str]], lane: OnLane, *, delay: float) -> None:
        self._vectors = vectors
        self._embedder = embedder      # the model to use now, None while the runtime is off or none is installed
        self._partitions = partitions  # every partition of the store (called through ``lane``)
        self._lane = lane
        self._delay = delay            # lets a burst of publications gather before a catch-up
        self._lock = threading.Lock()
        self._pending: set[str] | None = EVERY
        self._wake = threading.Event()
        self._wake.set()
        self._idle = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def queue(self, partition: str | None = EVERY) -> None:
        """Catch ``partition`` up soon (``EVERY``: each partition of the store)."""
        with self._lock:
            if partition is EVERY:
                self._pending = EVERY
            elif self._pending is not EVERY:
                self._pending.add(partition)
            self._idle.clear()
        self._wake.set()

    def settled(self, timeout: float | None = None) -> bool:
        """Wait until the vectors have followed everything queued so far (benchmarks, tests); False on timeout."""
        return self._idle.wait(timeout)

    def stop(self, timeout: float = 60.0) -> None:
        """Stop after the chunk in the model (stored through the lane, which must still be open); what is
        left waits for the next start or search."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                break
            time.sleep(self._delay)
            self._wake.clear()
            with self._lock:
                partitions, self._pending = self._pending, set()
            try:
                self._catch_up(partitions)
            except Exception:  # the thread must outlive any one failure; the next queue or search retries
                log.exception("vector catch-up failed")
            with self._lock:
                if not self._pending:
                    self._idle.set()
        self._idle.set()

    def _catch_up(self, partitions: set[str] | None) -> None:
        embedder = self._embedder()
        if embedder is None:
            return
        for partition in sorted(self._lane(self._partitions) if partitions is EVERY else partitions):
            if self._stop.is_set():
                return
            try:
                self._vectors.catch_up(partition, embedder, lane=self._lane, stop=self._stop.is_set)
            except KnowledgeError as exc:  # IndexFailed, or a store that became unavailable
                log.warning("vector index of %s not updated: %s", partition, exc.message)
