"""``subscriptions/listen`` (MCP 2026-07-28): one request opens a stream of change notifications.

The client names what it wants in ``params.notifications`` (``toolsListChanged: true``, and whatever other
kinds are registered: ``resourcesListChanged``, ``resourceSubscriptions: [uri, ...]`` ...).  The engine first
sends ``notifications/subscriptions/acknowledged`` naming the subset it honours (a kind it does not serve is
left out, never refused), then each notification of those kinds, every one tagged
``_meta["io.modelcontextprotocol/subscriptionId"]`` with the listen request's id.  The request itself is not
answered while the stream is open; the client ends it with ``notifications/cancelled`` naming that id (and a
cancelled request is never answered), or by closing the connection.  A connection holds one stream at a time.

Each kind is a ``ListenKind``, registered with ``Dispatcher.register_listen``: the change-feed topics it needs
and ``open``, which checks the requested value and builds the kind's ``ListenSource`` for the connection's
caller.  The stream subscribes to the engine's change feed (engine/core/changes.py) once, for all its kinds'
topics; the socket's push task (engine/wire/server.py) hands it each gathered burst on a worker, and each
source turns the burst into the notifications it owes (none when nothing it watches changed).  Notifications
name what changed, never content.  Built in: ``toolsListChanged``, fed by the tool list watch
(engine/wire/tool_list.py) exactly as the 2025 revisions' ``notifications/tools/list_changed``; the MCP features
add ``resourcesListChanged`` and ``resourceSubscriptions``, fed by the resource watch
(engine/wire/resource_watch.py) exactly as ``resources/list`` and ``resources/subscribe`` are for the 2025
revisions.  A 2026-07-28 connection is sent these notifications on its stream and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from ..access.authority import AgentCaller
from ..core.answers import JsonObject, NotRequired, TypedDict
from ..core.changes import Subscription
from ..core.errors import InvalidParams
from .resource_watch import WatchEngine
from .tool_list import LIST_CHANGED, TOPICS as TOOL_LIST_TOPICS, ToolListEngine, ToolListWatch


class Engine(ToolListEngine, WatchEngine, Protocol):
    """What a kind is opened with: the engine, as far as the tool list and the resource watch need it."""


LISTEN = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"


class Notification(TypedDict):
    """A notification as the stream sends it (a source gives ``method`` and ``params``; the stream tags it)."""

    jsonrpc: NotRequired[str]
    method: str
    params: NotRequired[JsonObject]


class ListenSource(Protocol):
    """One kind's part of an open stream."""

    def notifications(self, changes: list[dict[str, Any]], resync: bool) -> list[Notification]:
        """What this kind owes the client for a burst of changes: ``{method, params?}`` each, untagged."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ListenKind:
    """A filter key the engine honours: its change-feed topics, and how to open it for a caller.

    ``open(engine, caller, requested, subscription)`` checks ``requested`` (raising ``InvalidParams`` naming
    ``notifications.<key>``) and returns what is honoured (the value echoed in the acknowledgement) with the
    source, or None when the request asks for nothing (``false``, an empty list)."""

    key: str
    topics: tuple[str, ...]
    open: Callable[[Engine, AgentCaller, Any, Subscription], tuple[Any, ListenSource] | None]


class ListenStream:
    """One open ``subscriptions/listen`` stream of a connection."""

    def __init__(self, request_id: Any, subscription: Subscription, sources: dict[str, ListenSource],
                 honoured: dict[str, Any]) -> None:
        self.request_id = request_id
        self.subscription = subscription
        self.sources = sources
        self.honoured = honoured

    def _tagged(self, method: str, params: JsonObject | None = None) -> Notification:
        tagged: JsonObject = dict(params or {})
        meta = tagged.get("_meta")
        tagged["_meta"] = {**(meta if isinstance(meta, dict) else {}), SUBSCRIPTION_ID_KEY: self.request_id}
        return {"jsonrpc": "2.0", "method": method, "params": tagged}

    def acknowledgement(self) -> Notification:
        """The stream's first message: the kinds honoured."""
        return self._tagged(ACKNOWLEDGED, {"notifications": self.honoured})

    def notifications(self, changes: list[dict[str, Any]], resync: bool) -> list[Notification]:
        """Every source's notifications for a burst, tagged; runs on a worker (a source may read a store)."""
        return [self._tagged(note["method"], note.get("params")) for source in self.sources.values()
                for note in source.notifications(changes, resync)]

    def close(self) -> None:
        for source in self.sources.values():
            source.close()
        self.subscription.close()


def open_stream(engine: Engine, caller: AgentCaller, request_id: Any, params: dict[str, Any],
                kinds: dict[str, ListenKind]) -> ListenStream:
    """Check ``params.notifications`` and open a stream for the kinds honoured (it may honour none)."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise InvalidParams("notifications must be an object naming the notifications wanted, e.g. "
                            '{"toolsListChanged": true}', field="notifications")
    chosen = [kinds[key] for key in wanted if key in kinds]
    topics = {topic for kind in chosen for topic in kind.topics}
    # Subscribed before any source reads its first state, so that no change falls between the two.
    subscription = engine.changes.subscribe(topics)
    sources: dict[str, ListenSource] = {}
    honoured: dict[str, Any] = {}
    try:
        for kind in chosen:
            opened = kind.open(engine, caller, wanted[kind.key], subscription)
            if opened is not None:
                honoured[kind.key], sources[kind.key] = opened
    except BaseException:
        for source in sources.values():
            source.close()
        subscription.close()
        raise
    return ListenStream(request_id, subscription, sources, honoured)


class ToolListSource:
    """``toolsListChanged``: ``notifications/tools/list_changed`` when the caller's tool list changes."""

    def __init__(self, watch: ToolListWatch) -> None:
        self.watch = watch

    def notifications(self, changes: list[dict[str, Any]], resync: bool) -> list[Notification]:
        return [{"method": LIST_CHANGED}] if self.watch.changed(changes, resync) else []

    def close(self) -> None:
        self.watch.close()


def _open_tool_list(engine: Engine, caller: AgentCaller, requested: Any,
                    subscription: Subscription) -> tuple[bool, ListenSource] | None:
    if not isinstance(requested, bool):
        raise InvalidParams("notifications.toolsListChanged must be true or false",
                            field="notifications.toolsListChanged")
    if not requested:
        return None
    watch = ToolListWatch(engine, caller, subscription=subscription)
    watch.told(*watch.read())  # the list as it is now is what later changes are measured against
    return True, ToolListSource(watch)


TOOLS_LIST_CHANGED = ListenKind("toolsListChanged", TOOL_LIST_TOPICS, _open_tool_list)
