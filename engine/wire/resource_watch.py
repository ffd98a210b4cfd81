"""Resource subscriptions: ``notifications/resources/updated`` and ``.../list_changed``, for both eras.

An agent connection that subscribed to a record's URI (``resources/subscribe``) is sent
``notifications/resources/updated`` with that URI when the record's newest file changes (a new revision,
an edit outside the engine, its removal); one that listed the resources (``resources/list``) is sent
``notifications/resources/list_changed`` when its partition's catalog changes.  Both are fed from the
engine's change feed (engine/core/changes.py), as the tool list is (engine/wire/tool_list.py): the watch
subscribes to the topics that can change what the connection reaches (``publications`` to its own
partition, ``stores``, ``grants`` of its agent); the socket's push task hands it each gathered burst on a
worker, and only a burst that could concern it is read again.

Every reading goes through ``Engine.enter`` with the connection's credential and audience, so authority
is checked again for each notification: a refused caller (its credential revoked, its grant removed) is
sent nothing.  What is compared is the caller's own partition only (a subscribed record's revision and
hash, the partition's catalog version), and a notification carries only a URI the connection itself
subscribed to, or nothing: never an id, title or count of another partition.  The client reads back.

A subscription is read with the audience of the request that made it (the connection's, unless the
request named its own); the list follows the connection's audience.  An exact revision's URI never
changes, so it is accepted and never notified.

MCP 2026-07-28 has no ``resources/subscribe``: its client asks on its ``subscriptions/listen`` stream
(engine/wire/listen.py) for ``resourcesListChanged`` and ``resourceSubscriptions``, and each is this same watch
opened for the stream's caller on the stream's shared change subscription (``listen_list_changed``,
``listen_subscriptions``; registered by engine/wire/mcp_features.py).  A URI that caller cannot read is left
out of what the stream honours, where ``resources/subscribe`` answers it not found.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union

from ..access.authority import AgentCaller, Authority
from ..core.errors import InvalidParams, KnowledgeError, LimitExceeded, NotFound
from ..core.answers import TypedDict
from ..core.changes import ChangeFeed, Subscription
from ..store.open_store import OpenStore, ReadView
from .resources import ResourceAddress, ResourceEngine, parse_resource_uri
from .tool_list import TOPICS, concerns_caller

log = logging.getLogger(__name__)

UPDATED = "notifications/resources/updated"  # the methods of the two notifications below
LIST_CHANGED = "notifications/resources/list_changed"
SUBSCRIPTIONS_MAX = 1000  # URIs one connection may watch

Fingerprint = tuple[int | None, str | None] | None  # a record's (revision, sha256); None: no such record


@dataclass(frozen=True)
class Reading:
    """Where the caller was, its partition's catalog version, and each watched URI's fingerprint."""

    agent: str | None
    store_id: str | None
    partition: str | None
    version: int
    prints: dict[str, Fingerprint] = field(default_factory=dict)

    @property
    def place(self) -> tuple[str | None, str | None, int]:
        """Equal exactly when the listed resources are."""
        return self.store_id, self.partition, self.version

    def concerns(self, change: dict[str, Any]) -> bool:
        """Whether ``change`` (a change feed entry) could change what this caller reaches."""
        return concerns_caller(change, self.agent, self.store_id, self.partition)


class UpdatedParams(TypedDict):
    uri: str


class UpdatedNotification(TypedDict):
    jsonrpc: Literal["2.0"]
    method: Literal["notifications/resources/updated"]
    params: UpdatedParams


class ListChangedNotification(TypedDict):
    jsonrpc: Literal["2.0"]
    method: Literal["notifications/resources/list_changed"]


ResourceNotification = Union[UpdatedNotification, ListChangedNotification]


def updated_notification(uri: str) -> UpdatedNotification:
    return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}


def list_changed_notification() -> ListChangedNotification:
    return {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}


class WatchEngine(ResourceEngine, Protocol):
    """What a watch needs of the engine: the way in, and the change feed."""

    @property
    def changes(self) -> ChangeFeed: ...


class ResourceWatch:
    """One agent connection's subscribed URIs (each with the caller that subscribed: the connection's
    audience, or a request's own) and its listed resources (the connection's audience)."""

    def __init__(self, engine: WatchEngine, caller: AgentCaller, subscription: Subscription | None = None) -> None:
        """``caller``: the connection's own (a ``subscriptions/listen`` stream's caller, for a stream's watch).
        ``subscription``: one a stream shares among its kinds (it closes it); by default the watch subscribes
        for itself."""
        self.caller = caller
        self._engine = engine
        # Subscribed before anything is read, so that no change falls between a reading and the watch.
        self._owns_subscription = subscription is None
        self.subscription = engine.changes.subscribe(TOPICS) if subscription is None else subscription
        self._lock = threading.Lock()
        self._readings = itertools.count()
        self._watched: dict[str, tuple[ResourceAddress, AgentCaller]] = {}
        self._told: dict[str, tuple[int, Fingerprint]] = {}  # per URI: what the client was last told of
        self._listed: tuple[int, Reading] | None = None  # the listing the client was last told of
        self._last: dict[CallerKey, Reading] = {}  # where each caller was at its latest reading

    @property
    def uris(self) -> list[str]:
        with self._lock:
            return sorted(self._watched)

    def _read(self, caller: AgentCaller, addresses: dict[str, ResourceAddress]) -> tuple[int, Reading]:
        """``caller``'s place and the fingerprints of ``addresses`` now, with the reading's place in the order
        of readings; raises as the caller's own request would (Denied ...)."""
        with self._lock:
            reading = next(self._readings)
        entry = self._engine.enter(caller, create=False)
        authority = entry.authority

        def look(store: OpenStore, a: Authority, view: ReadView) -> Reading:
            return Reading(a.agent, view.store.store_id, a.partition, view.version,
                           {uri: _fingerprint(view, a.partition, address) for uri, address in addresses.items()})

        state = entry.read(look) if authority.store is not None else Reading(
            authority.agent, None, authority.partition, 0, dict.fromkeys(addresses))
        with self._lock:
            self._last[caller_key(caller)] = state
        return reading, state

    def subscribe(self, address: ResourceAddress, caller: AgentCaller) -> None:
        """Watch ``address`` for ``caller`` from now on (again: nothing changes); NotFound when ``caller``
        cannot read it."""
        if not self.watch({address.uri: address}, caller, field="uri"):
            raise NotFound("no such resource for this caller", uri=address.uri)

    def watch(self, addresses: dict[str, ResourceAddress], caller: AgentCaller, field: str) -> list[str]:
        """Watch those of ``addresses`` that ``caller`` can read, from now on, read together; the URIs watched.
        ``LimitExceeded`` naming ``field`` (nothing watched) when they would take the connection past
        ``SUBSCRIPTIONS_MAX``; raises as the caller's own request would (Denied ...) when it is refused."""
        with self._lock:
            size = len(self._watched.keys() | addresses.keys())
            if size > SUBSCRIPTIONS_MAX:
                raise LimitExceeded(f"a connection may subscribe to at most {SUBSCRIPTIONS_MAX} resources",
                                    field=field, limit=SUBSCRIPTIONS_MAX, size=size)
        reading, state = self._read(caller, addresses)
        readable = [uri for uri, address in addresses.items()
                    if state.store_id == address.store_id and state.prints[uri] is not None]
        with self._lock:
            for uri in readable:
                self._watched[uri] = (addresses[uri], caller)
                told = self._told.get(uri)
                if told is None or reading > told[0]:
                    self._told[uri] = (reading, state.prints[uri])
        return readable

    def unsubscribe(self, address: ResourceAddress) -> None:
        with self._lock:
            self._watched.pop(address.uri, None)
            self._told.pop(address.uri, None)

    def listed(self) -> None:
        """The connection was answered a ``resources/list`` page: it hears when its partition changes."""
        try:
            reading, state = self._read(self.caller, {})
        except KnowledgeError:
            return
        with self._lock:
            if self._listed is None or reading > self._listed[0]:
                self._listed = (reading, state)

    def changed(self, changes: list[dict[str, Any]], resync: bool) -> list[ResourceNotification]:
        """The notifications ``changes`` call for (``resync``: anything may have changed); runs on a worker."""
        with self._lock:
            groups: dict[CallerKey, tuple[AgentCaller, dict[str, ResourceAddress]]] = {}
            if self._listed is not None:
                groups[caller_key(self.caller)] = (self.caller, {})
            for uri, (address, caller) in self._watched.items():
                groups.setdefault(caller_key(caller), (caller, {}))[1][uri] = address
            last = dict(self._last)
        notifications: list[ResourceNotification] = []
        for key, (caller, addresses) in groups.items():
            seen = last.get(key)
            if not resync and seen is not None and not any(seen.concerns(change) for change in changes):
                continue
            try:
                reading, state = self._read(caller, addresses)
            except KnowledgeError:  # refused now (revoked, ungranted): told nothing, as its requests are
                continue
            except Exception:  # noqa: BLE001 - a failed reading is this watch's own; the connection goes on
                log.exception("could not read an agent's resources again")
                continue
            notifications += self._compare(caller, reading, state)
        return notifications

    def _compare(self, caller: AgentCaller, reading: int, state: Reading) -> list[ResourceNotification]:
        """What the client is to be told of ``state`` (read as ``reading``), remembered as told."""
        notifications: list[ResourceNotification] = []
        with self._lock:
            for uri, fingerprint in state.prints.items():
                told = self._told.get(uri)
                if uri not in self._watched or told is None or reading < told[0]:
                    continue
                self._told[uri] = (reading, fingerprint)
                if fingerprint != told[1]:
                    notifications.append(updated_notification(uri))
            if caller == self.caller and self._listed is not None and reading > self._listed[0]:
                previous, self._listed = self._listed[1], (reading, state)
                if state.place != previous.place:
                    notifications.append(list_changed_notification())
        return notifications

    def close(self) -> None:
        if self._owns_subscription:
            self.subscription.close()


CallerKey = tuple[Any, ...]


def caller_key(caller: AgentCaller) -> CallerKey:
    """A caller as a dictionary key (its audience is a JSON object)."""
    return caller.token, json.dumps(caller.audience, sort_keys=True), caller.instance


def _fingerprint(view: ReadView, partition: str, address: ResourceAddress) -> Fingerprint:
    """What a URI reads as, in short: its record's newest (revision, sha256), or the kept revision's."""
    if address.store_id != view.store.store_id:
        return None
    if address.revision is not None:
        kept = view.catalog.revision(partition, address.record_id, address.revision)
        return None if kept is None else (kept.revision, kept.sha256)
    rows = view.catalog.rows_for_id(partition, address.record_id)
    return (rows[0].revision, rows[0].sha256) if len(rows) == 1 else None


# --- MCP 2026-07-28: the same watch on a subscriptions/listen stream (engine/wire/listen.py) ---------------------

LIST_KEY, SUBSCRIPTIONS_KEY = "resourcesListChanged", "resourceSubscriptions"  # the stream filter's keys


class ResourceListenSource:
    """A stream's ``resourcesListChanged`` or ``resourceSubscriptions``: what its watch owes the stream's caller,
    decided exactly as for a 2025 connection (``ResourceWatch.changed``)."""

    def __init__(self, watch: ResourceWatch) -> None:
        self.watch = watch

    def notifications(self, changes: list[dict[str, Any]], resync: bool) -> list[ResourceNotification]:
        return self.watch.changed(changes, resync)

    def close(self) -> None:
        self.watch.close()


def listen_list_changed(engine: WatchEngine, caller: AgentCaller, requested: Any,
                        subscription: Subscription) -> tuple[bool, ResourceListenSource] | None:
    """``resourcesListChanged: true``: ``notifications/resources/list_changed`` whenever the caller's partition's
    list changes from what it is now."""
    field = f"notifications.{LIST_KEY}"
    if not isinstance(requested, bool):
        raise InvalidParams(f"{field} must be true or false", field=field)
    if not requested:
        return None
    engine.authorize(caller, create=False)  # a refused caller is refused here, as its requests are
    watch = ResourceWatch(engine, caller, subscription)
    watch.listed()  # the list as it is now is what later changes are measured against
    return True, ResourceListenSource(watch)


def listen_subscriptions(engine: WatchEngine, caller: AgentCaller, requested: Any,
                         subscription: Subscription) -> tuple[list[str], ResourceListenSource] | None:
    """``resourceSubscriptions: [uri, ...]``: ``notifications/resources/updated`` for each URI the caller can
    read now; the honoured URIs (a URI it cannot read, of another partition or of no record, is left out, as
    ``resources/subscribe`` would answer it not found).  A malformed list or URI is refused naming it, and so
    is a list longer than a connection may watch."""
    field = f"notifications.{SUBSCRIPTIONS_KEY}"
    if not isinstance(requested, list):
        raise InvalidParams(f"{field} must be a list of resource URIs", field=field)
    addresses: dict[str, ResourceAddress] = {}
    for n, value in enumerate(requested):
        address = parse_resource_uri(value, f"{field}[{n}]")
        addresses[address.uri] = address
    if not addresses:
        return None
    engine.authorize(caller, create=False)
    watch = ResourceWatch(engine, caller, subscription)
    try:
        honoured = watch.watch(addresses, caller, field)
    except BaseException:
        watch.close()
        raise
    if not honoured:
        watch.close()
        return None
    return honoured, ResourceListenSource(watch)
