"""``notifications/tools/list_changed``: an agent connection hears when the tool list it would get changes.

Two things decide an agent's ``tools/list`` (``ToolRegistry.listed``): whether writes are enabled (the save
tools are listed only then) and the claim kinds of the caller's active ontology (``knowledge_remember``'s
``claimKind`` enum).  ``tool_list_state`` reads both, once, for the list that is answered and for the
comparison that decides a notification, so the two cannot disagree.

A connection is watched from its first ``tools/list`` on (before it, it holds no list that could be
stale).  The watch is a subscription to the engine's change feed (engine/core/changes.py) for the topics
that can change those two: ``stores`` (config.json, membership, a store created), ``grants`` (for its
agent) and ``publications`` (to the partition it reaches: a vault's ``ontology.yaml`` edited is one).  The
socket's push task (engine/wire/server.py) hands each gathered burst to ``ToolListWatch.changed`` on a
worker: the state is read again only when an entry could concern the connection, and the connection is
notified only when its list differs from the one it was last told of (its last ``tools/list`` answer, or
the last notification).  So a burst is one notification at most, a change that leaves the list as it was
is none, and the notification carries nothing: the client lists again.
"""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from ..access.authority import AgentCaller, StoreEntry
from ..core.answers import TypedDict
from ..core.changes import ChangeFeed, Subscription
from ..core.errors import KnowledgeError
from ..state.config import SettingsSource
from ..store.open_store import OpenStore
from ..vault.ontology import Ontology

log = logging.getLogger(__name__)

LIST_CHANGED = "notifications/tools/list_changed"
TOPICS = ("stores", "grants", "publications")  # what can change the writes switch or a partition's claim kinds


class ToolListEngine(StoreEntry[OpenStore], Protocol):
    """What a tool list needs of the engine: the way into a store, the settings, the shipped ontology and the
    change feed."""

    @property
    def settings(self) -> SettingsSource: ...

    @property
    def ontology(self) -> Ontology: ...

    @property
    def changes(self) -> ChangeFeed: ...


class ListChanged(TypedDict):
    jsonrpc: str
    method: str


def list_changed_notification() -> ListChanged:
    return {"jsonrpc": "2.0", "method": LIST_CHANGED}


@dataclass(frozen=True)
class ToolListState:
    """What decides a caller's tool list, and where the caller was when it was read."""

    writes: bool
    claim_kinds: tuple[str, ...]
    agent: str | None = None  # None: the caller was refused (it is then given the shipped claim kinds)
    store_id: str | None = None  # None: no store yet
    partition: str | None = None

    @property
    def fingerprint(self) -> tuple[bool, tuple[str, ...]]:
        """Equal exactly when the two lists are."""
        return self.writes, self.claim_kinds

    def concerns(self, change: dict[str, Any]) -> bool:
        """Whether ``change`` (a change feed entry) could change this caller's list."""
        return concerns_caller(change, self.agent, self.store_id, self.partition)


def concerns_caller(change: dict[str, Any], agent: str | None, store_id: str | None, partition: str | None) -> bool:
    """Whether ``change`` (a change feed entry of ``TOPICS``) could change what a caller reaches, last seen as
    ``agent`` (None: refused) in ``partition`` of ``store_id`` (None: no store yet)."""
    if change["topic"] == "stores":
        return True
    if change["topic"] == "grants":
        return agent is None or change.get("agent") == agent
    return store_id is not None and (change.get("storeId"), change.get("partition")) == (store_id, partition)


def tool_list_state(engine: ToolListEngine, caller: AgentCaller) -> ToolListState:
    """The writes switch and the caller's claim kinds; the shipped kinds while it has no store, or none can be
    read (denied, unavailable), as ``tools/list`` has always answered.  Never creates a store."""
    writes = engine.settings.current().writes_enabled
    shipped = tuple(engine.ontology.claim_kinds)
    try:
        entry = engine.enter(caller, create=False)
    except KnowledgeError:
        return ToolListState(writes, shipped)
    authority = entry.authority
    if authority.store is None:
        return ToolListState(writes, shipped, authority.agent, None, authority.partition)
    try:
        kinds = entry.run(lambda runtime, a: tuple(runtime.store.ontology(a.partition).claim_kinds))
    except KnowledgeError:
        kinds = shipped
    return ToolListState(writes, kinds, authority.agent, authority.store.store_id, authority.partition)


class ToolListWatch:
    """One agent connection's watch on its own tool list (its credential and connection audience)."""

    def __init__(self, engine: ToolListEngine, caller: AgentCaller, subscription: Subscription | None = None) -> None:
        """``subscription``: one a ``subscriptions/listen`` stream shares among its kinds (it closes it); by
        default the watch subscribes for itself."""
        self.caller = caller
        self._engine = engine
        # Subscribed before the first list is read, so that no change falls between the list and the watch.
        self._owns_subscription = subscription is None
        self.subscription = engine.changes.subscribe(TOPICS) if subscription is None else subscription
        self._lock = threading.Lock()
        self._readings = itertools.count()  # orders the readings of the state, wherever they were taken
        self._told: tuple[int, ToolListState] | None = None  # what the connection was last told of

    def read(self) -> tuple[int, ToolListState]:
        """The state now, with its place in the order of readings."""
        with self._lock:
            reading = next(self._readings)
        return reading, tool_list_state(self._engine, self.caller)

    def told(self, reading: int, state: ToolListState) -> None:
        """The connection was answered a list read as ``state`` (unless a later reading was told already)."""
        with self._lock:
            if self._told is None or reading > self._told[0]:
                self._told = (reading, state)

    def changed(self, changes: list[dict[str, Any]], resync: bool) -> bool:
        """Whether the connection is to be notified of ``changes`` (``resync``: anything may have changed);
        runs on a worker, since reading the claim kinds may wait for the store."""
        with self._lock:
            told = self._told
        if told is None or not (resync or any(told[1].concerns(change) for change in changes)):
            return False
        try:
            reading, state = self.read()
        except Exception:  # noqa: BLE001 - a failed reading is this watch's own; the connection goes on
            log.exception("could not read an agent's tool list again")
            return False
        with self._lock:
            assert self._told is not None
            if reading < self._told[0]:  # a tools/list answered meanwhile read it later: the client has that
                return False
            previous, self._told = self._told[1], (reading, state)
        return state.fingerprint != previous.fingerprint

    def close(self) -> None:
        if self._owns_subscription:
            self.subscription.close()
