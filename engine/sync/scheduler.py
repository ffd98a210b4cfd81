"""Automatic sync while the engine serves: when each store with remotes runs a round by itself (docs/sync.md,
"Automatic sync").

A store syncs after its publications, batched (a round once ``quietSeconds`` pass without another
publication, and at most one round per ``batchSeconds`` while writes go on: never one push per write), and
on a timer (``intervalSeconds``).  A remote whose round fails is tried again after a wait that doubles with
each failure up to ``backoffMaxSeconds`` and starts over after a success; while it waits, publications
wait with it.  Offline is a normal state: writes go on, and the log gets one line when a remote starts
failing and one when it recovers.  One round of a store at a time: a round asked for while one runs waits
for it.

Two parts, so the decisions are tested without threads or wall-clock time:

- ``SyncPlanner`` decides: it is told what happened (a publication, a round begun or finished, the stores
  and their remotes) with the time it happened, and answers which rounds are due and when the next one
  will be.  It never reads a clock.
- ``AutoSync`` drives it: a thread that listens to the engine's change feed for publications, asks the
  planner what is due, runs those rounds (each on a thread of its own, one per store at most) and sleeps
  until the next one is due or something wakes it.  Its clock, its wake-up and how it starts a round are
  injected; a test calls ``step()`` itself with a clock it moves.

The round itself (fetch, merge, install, push, status.json) is ``run_round(store_id, remote)``, given to
``AutoSync`` (engine/sync/round.py); it is crash-safe, so stopping the engine joins a running round for a
while and then abandons it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Literal, Mapping, Protocol

from ..core.changes import ChangeFeed, Subscription
from ..core.errors import KnowledgeError
from ..core.ids import format_timestamp, utc_now
from ..state.registry import StoreRecord
from ..state.sync_settings import SyncSettings
from .remotes import read_remotes
from .status import SyncError, SyncRemoteStatus

log = logging.getLogger(__name__)

BACKOFF_FIRST_SECONDS = 30   # the wait after a remote's first failure; it doubles with each one after
STARTUP_SECONDS = 10         # the first round of a store comes this long after serving starts (or a remote is added)
IDLE_WAKE_SECONDS = 60       # with nothing due, look at settings and stores (remotes.json edited by hand) this often
STOP_JOIN_SECONDS = 30       # how long stopping waits for a running round before abandoning it
LISTENED_TOPICS = ("publications", "stores", "sync")

RoundReason = Literal["publications", "timer", "retry", "manual"]


@dataclass(frozen=True)
class SyncedStore:
    """A store with remotes, as the planner needs it."""

    name: str | None              # a named store's name (settings may name it so)
    remotes: tuple[str, ...]


@dataclass(frozen=True)
class RoundRequest:
    """A round the planner decided: which remotes of which store, and why (for the log)."""

    store_id: str
    remotes: tuple[str, ...]
    reason: RoundReason


@dataclass(frozen=True)
class RoundOutcome:
    """How one remote's round ended: ``error`` is None when it succeeded."""

    remote: str
    error: SyncError | None


@dataclass(frozen=True)
class Notice:
    """A change of a remote's health worth one line of the log: it started failing, or it recovered."""

    kind: Literal["failing", "recovered"]
    store_id: str
    remote: str
    error: SyncError | None


@dataclass
class _Remote:
    since: float                     # when it was first seen, or its last round ended
    failures: int = 0                # rounds failed in a row
    error: SyncError | None = None   # the last failure's

    def due(self, settings: SyncSettings) -> float:
        if self.failures == 0:
            return self.since + settings.interval_seconds
        return self.since + backoff_seconds(self.failures, settings)

    def waiting(self, now: float, settings: SyncSettings) -> bool:
        """Failing, and its next try is not due yet: nothing, not even a publication, brings it forward."""
        return self.failures > 0 and now < self.due(settings)


@dataclass
class _Store:
    name: str | None
    remotes: dict[str, _Remote]
    first_unsynced: float | None = None    # the oldest publication no round has taken yet
    last_publication: float | None = None
    last_round: float | None = None        # when its last round began
    running: bool = False


def stores_with_remotes(records: list[StoreRecord]) -> dict[str, SyncedStore]:
    """Every store with at least one remote.  A store whose remotes file cannot be read is left out: its
    automatic sync waits until the owner corrects the file (``knowledge sync status`` and doctor say why)."""
    stores = {}
    for record in records:
        try:
            remotes = read_remotes(record)
        except KnowledgeError:
            continue
        if remotes:
            stores[record.store_id] = SyncedStore(record.name, tuple(remote["name"] for remote in remotes))
    return stores


def backoff_seconds(failures: int, settings: SyncSettings) -> float:
    """The wait before trying a remote again after ``failures`` failures in a row: 30 s, doubling, capped."""
    return float(min(BACKOFF_FIRST_SECONDS * 2 ** min(failures - 1, 32), settings.backoff_max_seconds))


class SyncPlanner:
    """The decisions of automatic sync, for one state directory; told the time, never reading a clock.

    Not thread-safe: ``AutoSync`` calls it under its lock."""

    def __init__(self, settings: SyncSettings) -> None:
        self.settings = settings
        self._stores: dict[str, _Store] = {}

    def set_stores(self, stores: Mapping[str, SyncedStore], now: float) -> None:
        """The stores with remotes now; a store or remote seen for the first time syncs ``STARTUP_SECONDS``
        from now, and what a known one went through (failures, waiting publications) is kept."""
        for store_id in list(self._stores):
            if store_id not in stores and not self._stores[store_id].running:
                del self._stores[store_id]
        for store_id, synced in stores.items():
            state = self._stores.setdefault(store_id, _Store(synced.name, {}))
            state.name = synced.name
            first = now + STARTUP_SECONDS - self.settings.interval_seconds
            state.remotes = {remote: state.remotes.get(remote) or _Remote(first) for remote in synced.remotes}

    def published(self, store_id: str, now: float) -> None:
        """A publication was acknowledged in the store (or a vault file edited outside the engine)."""
        state = self._stores.get(store_id)
        if state is None:
            return  # no remotes: nothing to sync
        if state.first_unsynced is None:
            state.first_unsynced = now
        state.last_publication = now

    def _automatic(self, store_id: str, state: _Store) -> bool:
        return self.settings.automatic_for(store_id, state.name)

    def _publications_due(self, state: _Store) -> float | None:
        """When the store's waiting publications make a round due (None: none wait)."""
        if state.first_unsynced is None or state.last_publication is None:
            return None
        settings = self.settings
        at = min(state.last_publication + settings.quiet_seconds, state.first_unsynced + settings.batch_seconds)
        if state.last_round is not None:
            at = max(at, state.last_round + settings.batch_seconds)
        return at

    def _due(self, state: _Store, now: float) -> tuple[tuple[str, ...], RoundReason] | None:
        """The remotes a round of the store would take now, and why; None when nothing is due."""
        timed = [name for name, remote in state.remotes.items() if remote.due(self.settings) <= now]
        publications = self._publications_due(state)
        if not timed and (publications is None or publications > now):
            return None
        remotes = tuple(sorted(name for name, remote in state.remotes.items()
                               if not remote.waiting(now, self.settings)))
        if not remotes:
            return None  # every remote waits out a failure: the publications wait with them
        if timed and all(state.remotes[name].failures for name in timed):
            return remotes, "retry"
        return remotes, "timer" if timed else "publications"

    def take_due(self, now: float) -> list[RoundRequest]:
        """The rounds due now, each store's marked running (call ``finished`` for each)."""
        requests = []
        for store_id, state in sorted(self._stores.items()):
            if state.running or not self._automatic(store_id, state):
                continue
            due = self._due(state, now)
            if due is not None:
                requests.append(RoundRequest(store_id, *due))
                self.begin(store_id, now)
        return requests

    def busy(self, store_id: str) -> bool:
        """A round of the store runs now."""
        state = self._stores.get(store_id)
        return state is not None and state.running

    def begin(self, store_id: str, now: float) -> None:
        """A round of the store begins now (one ``take_due`` decided, or the owner's ``sync now``): it commits
        every publication made so far, so none waits any more."""
        state = self._stores.get(store_id)
        if state is None:
            return
        assert not state.running, store_id
        state.running = True
        state.last_round = now
        state.first_unsynced = state.last_publication = None

    def finished(self, store_id: str, outcomes: list[RoundOutcome], now: float) -> list[Notice]:
        """The round ended with these outcomes, one per remote it took; answers the changes worth a log line."""
        state = self._stores.get(store_id)
        if state is None:
            return []
        state.running = False
        notices = []
        for outcome in outcomes:
            remote = state.remotes.get(outcome.remote)
            if remote is None:
                continue  # removed while the round ran
            remote.since = now
            if outcome.error is None:
                if remote.failures:
                    notices.append(Notice("recovered", store_id, outcome.remote, None))
                remote.failures, remote.error = 0, None
            else:
                if not remote.failures:
                    notices.append(Notice("failing", store_id, outcome.remote, outcome.error))
                remote.failures += 1
                remote.error = outcome.error
        return notices

    def next_due(self, now: float) -> float | None:
        """When the next round of a store not running now comes due (None: none will without a publication)."""
        times = []
        for store_id, state in self._stores.items():
            if state.running or not self._automatic(store_id, state):
                continue
            times.extend(remote.due(self.settings) for remote in state.remotes.values())
            publications = self._publications_due(state)
            if publications is not None and any(not remote.waiting(max(now, publications), self.settings)
                                                for remote in state.remotes.values()):
                times.append(publications)
        return min(times, default=None)


# --- the driver ---------------------------------------------------------------------------------------


RunRound = Callable[[str, str], SyncRemoteStatus]   # (store id, remote name) -> the remote's status after it
Spawn = Callable[[Callable[[], None]], "threading.Thread | None"]


class Wakeup(Protocol):
    """What the driver sleeps on: ``wait`` returns early once ``set`` is called (then it is clear again)."""

    def wait(self, timeout: float | None) -> None: ...

    def set(self) -> None: ...


class EventWakeup:
    """The driver's wake-up in the engine: a threading.Event."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def wait(self, timeout: float | None) -> None:
        self._event.wait(timeout)
        self._event.clear()

    def set(self) -> None:
        self._event.set()


def _thread(work: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=work, name="sync-round", daemon=True)
    thread.start()
    return thread


@dataclass
class _Manual:
    store_id: str
    done: threading.Event = field(default_factory=threading.Event)


class AutoSync:
    """Runs each store's rounds by itself while the engine serves (module docstring)."""

    def __init__(self, run_round: RunRound, stores: Callable[[], Mapping[str, SyncedStore]],
                 settings: Callable[[], SyncSettings], changes: ChangeFeed, *,
                 clock: Callable[[], float] = time.monotonic, wakeup: Wakeup | None = None,
                 spawn: Spawn = _thread) -> None:
        self._run_round = run_round
        self._stores = stores
        self._settings = settings
        self._changes = changes
        self._clock = clock
        self._wakeup = wakeup or EventWakeup()
        self._spawn = spawn
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when a store's round ends
        self.planner = SyncPlanner(settings())
        self._subscription: Subscription | None = None
        self._stale = True   # the stores and their remotes must be read again
        self._read_at: float | None = None  # when they were last read (a hand edit of remotes.json is seen then)
        self._stopping = False
        self._loop_thread: threading.Thread | None = None
        self._rounds: list[threading.Thread] = []

    # --- life -----------------------------------------------------------------------------------------

    def listen(self) -> None:
        """Hear of publications and of store and remote changes from now on (``start`` does it first)."""
        if self._subscription is None:
            self._subscription = self._changes.subscribe(LISTENED_TOPICS)
            self._subscription.set_waker(self._wakeup.set)

    def start(self) -> None:
        """Listen, and run the loop on a thread of its own until ``stop``."""
        self.listen()
        self._loop_thread = threading.Thread(target=self._loop, name="sync-scheduler", daemon=True)
        self._loop_thread.start()

    def stop(self, timeout: float = STOP_JOIN_SECONDS) -> None:
        """Start no more rounds; wait up to ``timeout`` for those running (each is crash-safe: one still
        running then is abandoned, and the next round finishes its work)."""
        with self._lock:
            self._stopping = True
            rounds = list(self._rounds)
        self._wakeup.set()
        if self._subscription is not None:
            self._subscription.close()
        deadline = time.monotonic() + timeout
        for thread in ([self._loop_thread] if self._loop_thread else []) + rounds:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive() and thread is not self._loop_thread:
                log.warning("a sync round still running at shutdown was abandoned; the next round finishes it")

    def _loop(self) -> None:
        while True:
            with self._lock:
                if self._stopping:
                    return
            try:
                wait = self.step()
            except Exception:  # noqa: BLE001 - the scheduler outlives any one failure; rounds are crash-safe
                log.exception("automatic sync failed to plan its rounds")
                wait = IDLE_WAKE_SECONDS
            self._wakeup.wait(wait)

    # --- one step -------------------------------------------------------------------------------------

    def step(self) -> float:
        """Take what changed, start the rounds due now, and answer how long to sleep before the next one."""
        changes, resync = self._subscription.take() if self._subscription is not None else ([], False)
        if self._subscription is not None:
            self._subscription.done()
        if resync or any(change["topic"] != "publications" for change in changes):
            self._stale = True
        if self._read_at is not None and self._clock() - self._read_at >= IDLE_WAKE_SECONDS:
            self._stale = True
        stores = self._read_stores() if self._stale else None
        settings = self._settings()
        with self._lock:
            now = self._clock()
            self.planner.settings = settings
            if stores is not None:
                self.planner.set_stores(stores, now)
            for change in changes:
                if change["topic"] == "publications":
                    self.planner.published(change["storeId"], now)
            requests = [] if self._stopping else self.planner.take_due(now)
            next_due = self.planner.next_due(now)
        for request in requests:
            self._start_round(request)
        return IDLE_WAKE_SECONDS if next_due is None else min(IDLE_WAKE_SECONDS, max(0.0, next_due - now))

    def _read_stores(self) -> Mapping[str, SyncedStore] | None:
        try:
            stores = self._stores()
        except Exception:  # noqa: BLE001 - read again on the next change; the rounds known go on
            log.exception("automatic sync could not list the stores' remotes")
            return None
        self._stale = False
        self._read_at = self._clock()
        return stores

    def _start_round(self, request: RoundRequest) -> None:
        def work() -> None:
            self._run(request.store_id, request.remotes, request.reason)

        thread = self._spawn(work)
        if thread is not None:
            with self._lock:
                self._rounds = [alive for alive in self._rounds if alive.is_alive()] + [thread]

    def _run(self, store_id: str, remotes: tuple[str, ...], reason: RoundReason) -> list[SyncRemoteStatus]:
        """Run the round the planner began (or ``sync_now`` did) and tell the planner how it ended."""
        log.debug("sync of store %s with %s (%s)", store_id, ", ".join(remotes), reason)
        self._changes.publish("sync", storeId=store_id)
        outcomes, statuses = [], []
        try:
            for remote in remotes:
                status, error = self._one(store_id, remote)
                outcomes.append(RoundOutcome(remote, error))
                if status is not None:
                    statuses.append(status)
        finally:
            with self._lock:
                notices = self.planner.finished(store_id, outcomes, self._clock())
                self._idle.notify_all()
            self._changes.publish("sync", storeId=store_id)
            self._wakeup.set()
        for notice in notices:
            _log_notice(notice)
        return statuses

    def _one(self, store_id: str, remote: str) -> tuple[SyncRemoteStatus | None, SyncError | None]:
        try:
            status = self._run_round(store_id, remote)
        except KnowledgeError as exc:
            finding = getattr(exc, "finding", None)
            code = getattr(finding, "code", None) or exc.reason
            return None, {"code": code, "message": exc.message, "at": format_timestamp(utc_now())}
        except Exception as exc:  # noqa: BLE001 - one round's failure is that remote's, never the scheduler's
            log.debug("sync round of store %s with %s failed", store_id, remote, exc_info=True)
            return None, {"code": "internal", "message": f"{type(exc).__name__}: {exc}",
                          "at": format_timestamp(utc_now())}
        return status, status["lastError"] if status["state"] == "failing" else None

    # --- the owner's sync now -------------------------------------------------------------------------

    def sync_now(self, store_id: str, remotes: tuple[str, ...]) -> list[SyncRemoteStatus]:
        """A round of the store now with ``remotes``, on the caller's thread, whatever the backoff: it waits
        for an automatic round of the store that runs, and a success resets the remote's backoff."""
        with self._lock:
            while self.planner.busy(store_id):
                self._idle.wait()
            self.planner.begin(store_id, self._clock())
        return self._run(store_id, remotes, "manual")


def _log_notice(notice: Notice) -> None:
    if notice.kind == "recovered":
        log.info("sync of store %s with remote %s works again", notice.store_id, notice.remote)
    else:
        error = notice.error or {"code": "unknown", "message": "no reason given"}
        log.warning("sync of store %s with remote %s is failing (%s: %s); it is tried again, less often while "
                    "it fails, and writes go on", notice.store_id, notice.remote, error["code"], error["message"])
