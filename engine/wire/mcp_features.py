"""MCP's resources, prompts, completions and resource subscriptions, registered on the dispatcher.

The methods (each answers a declared TypedDict; the modules say what they serve):

    resources/list, resources/templates/list, resources/read     engine/wire/resources.py
    resources/subscribe, resources/unsubscribe                   engine/wire/resource_watch.py
    subscriptions/listen: resourcesListChanged, resourceSubscriptions   (the same watch, MCP 2026-07-28)
    prompts/list, prompts/get                                    engine/wire/prompts.py
    completion/complete                                          engine/wire/completions.py

Every one is an agent's (the dispatcher refuses operator connections), reads its parameters through the
one reader (an unknown parameter is refused naming it), and authorizes the request's caller again.

A connection hears of resources in its own revision's way only: a 2025 one after ``resources/list`` or
``resources/subscribe``, a 2026-07-28 one on its ``subscriptions/listen`` stream alone (listing starts no watch).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from ..access.authority import AgentCaller, Caller, Entry
from ..core.errors import InvalidParams
from ..core.params import without_meta
from ..store.open_store import OpenStore
from . import completions, prompts, resources
from .listen import ListenKind
from .modern import MODERN
from .resource_watch import (LIST_KEY, SUBSCRIPTIONS_KEY, TOPICS, ResourceWatch, WatchEngine, listen_list_changed,
                             listen_subscriptions)


class FeatureEntry(resources.ReadEntry, Entry[OpenStore], Protocol):
    """An authorized caller at its store, on the lane or beside it."""


class FeatureEngine(WatchEngine, prompts.PromptsEngine, Protocol):
    """What the features need of the engine, together."""

    def enter(self, caller: Caller, *, write: bool = False, scope: str | None = None,
              create: bool = True) -> FeatureEntry: ...


class Session(Protocol):
    """What the features keep on a connection (``protocol.Session``)."""

    token: str | None
    audience: Any
    instance: str | None
    can_push: bool  # served by the socket, which can send notifications
    era: str | None  # the connection's MCP era (engine/wire/modern.py)
    resources: ResourceWatch | None


class MethodTable(Protocol):
    """The dispatcher, as the features register on it."""

    @property
    def engine(self) -> FeatureEngine: ...

    def caller(self, session: Any, params: dict[str, Any]) -> AgentCaller: ...

    def register(self, method: str, handler: Callable[[Any, dict[str, Any]], Any]) -> None: ...

    def register_listen(self, kind: ListenKind) -> None: ...


# What ``initialize`` and ``server/discover`` declare beside the tools, true in both eras: subscriptions and list
# changes are pushed by the socket, after resources/subscribe and resources/list (2025) or on a
# subscriptions/listen stream that asks for them (2026-07-28: resourceSubscriptions, resourcesListChanged).
CAPABILITIES = {"resources": {"subscribe": True, "listChanged": True}, "prompts": {"listChanged": False},
                "completions": {}}


def register_features(dispatcher: MethodTable) -> None:
    engine = dispatcher.engine

    def list_resources(session: Session, params: dict[str, Any]) -> resources.ResourceList:
        cursor = resources.LIST_PARAMS.read(without_meta(params))["cursor"]
        caller = dispatcher.caller(session, params)
        answer = resources.list_resources(engine, caller, cursor)
        watch = session.resources
        if watch is None and session.can_push and session.era != MODERN:  # 2026-07-28 hears only on its stream
            watch = session.resources = ResourceWatch(engine, _connection_caller(session))
        if watch is not None and caller == watch.caller:  # a request's own audience: the list follows the connection's
            watch.listed()  # from now on it hears when its partition's list changes
        return answer

    def templates(session: Session, params: dict[str, Any]) -> resources.ResourceTemplateList:
        resources.TEMPLATES_PARAMS.read(without_meta(params))
        return resources.resource_templates(engine, dispatcher.caller(session, params))

    def read(session: Session, params: dict[str, Any]) -> resources.ResourceRead:
        address = resources.URI_PARAMS.read(without_meta(params))["uri"]
        return resources.read_resource(engine, dispatcher.caller(session, params), address)

    def subscribe(session: Session, params: dict[str, Any]) -> resources.Empty:
        address = resources.URI_PARAMS.read(without_meta(params))["uri"]
        caller = dispatcher.caller(session, params)
        engine.authorize(caller, create=False)  # a refused caller is told so before anything else
        if not session.can_push:
            raise InvalidParams("this connection cannot be sent notifications: subscribe over the socket or "
                                "knowledge mcp", field="uri")
        if session.resources is None:
            session.resources = ResourceWatch(engine, _connection_caller(session))
        session.resources.subscribe(address, caller)
        return {}

    def unsubscribe(session: Session, params: dict[str, Any]) -> resources.Empty:
        address = resources.URI_PARAMS.read(without_meta(params))["uri"]
        caller = dispatcher.caller(session, params)
        engine.authorize(caller, create=False)
        if session.resources is not None:
            session.resources.unsubscribe(address)
        return {}

    def list_prompts(session: Session, params: dict[str, Any]) -> prompts.PromptList:
        prompts.LIST_PARAMS.read(without_meta(params))
        return prompts.list_prompts(engine, dispatcher.caller(session, params))

    def get_prompt(session: Session, params: dict[str, Any]) -> prompts.PromptAnswer:
        read = prompts.GET_PARAMS.read(without_meta(params))
        return prompts.get_prompt(engine, dispatcher.caller(session, params), read["name"], read["arguments"])

    def complete(session: Session, params: dict[str, Any]) -> completions.CompletionAnswer:
        return completions.complete(engine, dispatcher.caller(session, params), without_meta(params))

    for method, handler in (("resources/list", list_resources), ("resources/templates/list", templates),
                            ("resources/read", read), ("resources/subscribe", subscribe),
                            ("resources/unsubscribe", unsubscribe), ("prompts/list", list_prompts),
                            ("prompts/get", get_prompt), ("completion/complete", complete)):
        dispatcher.register(method, handler)
    dispatcher.register_listen(ListenKind(LIST_KEY, TOPICS, listen_list_changed))
    dispatcher.register_listen(ListenKind(SUBSCRIPTIONS_KEY, TOPICS, listen_subscriptions))


def _connection_caller(session: Session) -> AgentCaller:
    """The connection's own caller: its credential and the audience it initialized with."""
    return AgentCaller(session.token, session.audience, session.instance)
