"""Change notifications: what changed in the engine, for whoever watches (the owner's window).

The engine's writers call ``ChangeFeed.publish`` after a change is done (a
publication acknowledged, a membership or grant edited, a gate turn logged, a
job started or finished); each watcher holds a ``Subscription``.  Publishing
never waits for a watcher: a subscription is a bounded queue, an entry equal
to one already waiting is merged into it (a burst of publications to one
partition is one entry), and when the queue is full it is emptied and marked
*resync*, which tells the watcher to reload everything.  So a slow or dead
watcher costs each write one lock and a few dictionary operations, never a
wait, and holds at most ``limit`` entries of memory.

    topic          data                         when
    publications   storeId, partition           a publication was acknowledged, or a vault file edited outside
    stores         (storeId)                    agents, store membership, settings (config.json), a store created
    grants         agent                        a conversation grant was added or revoked
    gate           storeId, agent               a recall gate turn was logged
    jobs           job, kind, state             an operator job started or finished
    health         storeId                      a git checkpoint committed (or failed)
    models         -                            the installed models' manifest changed (engine/operator/
                                                model_operator.py notices it when it next lists them)
    sync           storeId                      a sync round began or ended, a remote was added or removed, or a
                                                conflict was recorded or dismissed (engine/sync/)

Entries name what changed, never its content: a watcher reads the content
back through its own authorized requests.  The watchers are the socket's
connections: an operator's after ``operator/subscribe``, and an agent's after
its first ``tools/list`` (engine/wire/tool_list.py, which reads its tool list
again when a change could concern it).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterable

log = logging.getLogger(__name__)

TOPICS = ("publications", "stores", "grants", "gate", "jobs", "health", "sync", "models")
QUEUE_LIMIT = 256  # distinct waiting entries per subscription; one more empties it and marks it resync

Waker = Callable[[], None]


class Subscription:
    """One watcher's bounded queue of changes; ``take`` empties it."""

    def __init__(self, feed: "ChangeFeed", topics: frozenset[str], limit: int) -> None:
        self.topics = topics
        self.limit = limit
        self._feed = feed
        self._lock = threading.Lock()
        self._waiting: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._resync = False
        self._waker: Waker | None = None
        self._woken = False  # the waker was called and ``take`` has not run since: no second call
        self.dropped = 0  # entries lost to a full queue, since the subscription began
        self.taken = 0  # calls of ``take``
        self.handled = 0  # of those, the ones its watcher has finished with (sent, or found nothing to send)

    def set_waker(self, waker: Waker | None) -> None:
        """``waker()`` is called (on the publishing thread) when the queue stops being empty; it must not block."""
        with self._lock:
            self._waker = waker
            pending = bool(self._waiting) or self._resync
            self._woken = pending and waker is not None
        if pending and waker is not None:
            _call(waker)

    def offer(self, key: tuple[Any, ...], entry: dict[str, Any]) -> None:
        """Queue ``entry`` (merged with an equal one already waiting); never blocks beyond the lock."""
        if entry["topic"] not in self.topics:
            return
        with self._lock:
            if self._resync:
                self.dropped += 1
                return  # the watcher reloads everything anyway
            if key not in self._waiting and len(self._waiting) >= self.limit:
                self.dropped += len(self._waiting) + 1
                self._waiting.clear()
                self._resync = True
            elif key not in self._waiting:
                self._waiting[key] = entry
            waker = None if self._woken else self._waker
            self._woken = self._woken or waker is not None
        if waker is not None:
            _call(waker)

    def take(self) -> tuple[list[dict[str, Any]], bool]:
        """Everything waiting, oldest first, and whether the watcher must reload everything (``resync``)."""
        with self._lock:
            changes, resync = list(self._waiting.values()), self._resync
            self._waiting.clear()
            self._resync = self._woken = False
            self.taken += 1
        return changes, resync

    def done(self) -> None:
        """The watcher finished with what ``take`` last gave it (``idle`` can then be true)."""
        with self._lock:
            self.handled += 1

    @property
    def idle(self) -> bool:
        """Nothing waits and the watcher has finished with everything it took: whatever it was to send for
        the changes published so far has been sent."""
        with self._lock:
            return not self._waiting and not self._resync and self.handled == self.taken

    def close(self) -> None:
        self._feed.unsubscribe(self)
        self.set_waker(None)


class ChangeFeed:
    """The engine's one source of change notifications; thread-safe, and never blocks a publisher."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscriptions: tuple[Subscription, ...] = ()

    def subscribe(self, topics: Iterable[str] = TOPICS, *, limit: int = QUEUE_LIMIT) -> Subscription:
        chosen = frozenset(topics)
        unknown = chosen - set(TOPICS)
        if unknown:
            raise ValueError(f"unknown topics {sorted(unknown)}")
        subscription = Subscription(self, chosen, limit)
        with self._lock:
            self._subscriptions = (*self._subscriptions, subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscriptions = tuple(s for s in self._subscriptions if s is not subscription)

    @property
    def watched(self) -> bool:
        return bool(self._subscriptions)

    def publish(self, topic: str, **data: Any) -> None:
        """Tell every subscription that ``topic`` changed where ``data`` says (ids only, never content)."""
        assert topic in TOPICS, topic
        subscriptions = self._subscriptions  # a tuple, replaced whole: read without the lock
        if not subscriptions:
            return
        entry = {"topic": topic, **data}
        key = (topic, *sorted((name, str(value)) for name, value in data.items()))
        for subscription in subscriptions:
            subscription.offer(key, entry)


def _call(waker: Waker) -> None:
    try:
        waker()
    except Exception:  # noqa: BLE001 - a watcher's failure is its own; the writer goes on
        log.debug("a change watcher could not be woken", exc_info=True)
