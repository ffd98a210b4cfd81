"""JSON-RPC 2.0 and MCP over the engine: sessions, routing, and the wire errors.

A connection of the MCP 2025 revisions starts with ``initialize``, whose
``params._meta.knowledge`` carries the agent's token and the audience its host
minted (and optionally a stable, non-secret instance id).  A connection of MCP
2026-07-28, which has no handshake, gets the same credential once with
``knowledge/authenticate`` (the bridge sends it for its client), and then
every request carries its own protocol version and client capabilities
(engine/wire/modern.py).  Either way the credential is the connection's; the
audience holds for the connection unless a request carries its own
``_meta.knowledge.audience``; every request is authorized again by the
engine, so revoking a credential or a grant takes effect on the very next
request.

``error_for`` is the single place where an exception becomes a wire error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .. import __version__
from ..access.authority import AgentCaller, Audience, parse_instance
from ..core.errors import Denied, InvalidParams, KnowledgeError, wire_codes
from ..core.changes import TOPICS, Subscription
from ..core.connections import ConnectionKey
from ..core.params import NO_PARAMS, Params, Value, without_meta
from ..core.methods import Method, operator_handler
from ..operator.methods import PREFIX as OPERATOR_PREFIX
from ..operator.methods import authenticate_operator, operator_methods
from .host_methods import HOST_METHODS
from .tools import ToolRegistry, ToolResult
from .tool_list import ToolListWatch, tool_list_state
from .listen import LISTEN, TOOLS_LIST_CHANGED, ListenKind, ListenStream, ToolListSource, open_stream
from .modern import (AUTHENTICATE, DISCOVER, HANDSHAKE, HANDSHAKE_VERSIONS, MODERN, MODERN_VERSIONS, REMOVED_METHODS,
                     Authenticated, DiscoverAnswer, EnvelopeError, discover_answer, envelope_refused, enveloped,
                     handshake_refused, modern_result, read_envelope, removed_method, versions_served)
from .mcp_features import CAPABILITIES as FEATURE_CAPABILITIES, register_features
from .resource_watch import ResourceWatch
from .messages import MalformedMessage, error_response, is_notification, method_of, parse_request

if TYPE_CHECKING:  # the engine calls in here; this module only needs its type
    from ..service import Engine

log = logging.getLogger(__name__)

PROTOCOL_VERSIONS = HANDSHAKE_VERSIONS  # what initialize negotiates; 2026-07-28 has no handshake
SERVER_NAME = "knowledge-desk"

# JSON-RPC codes per reason, from the error classes themselves (engine/core/errors.py).
ERROR_CODES = wire_codes()
METHOD_NOT_FOUND, INTERNAL_ERROR = -32601, -32603
# What ``_meta.knowledge`` may hold: at initialize the credential, audience and instance id; on a request only
# its own audience (the credential is the connection's).
INITIALIZE_FIELDS = frozenset({"token", "audience", "instance"})
REQUEST_FIELDS = frozenset({"audience"})
OPERATOR_FIELDS = frozenset({"operatorToken"})
# MCP's own methods after initialize take what MCP defines, and refuse anything else like every method.  The
# tool list is never paged, so no cursor was ever issued: one given is refused (MCP: an invalid cursor is
# -32602).  ``task`` asks for task-augmented execution (MCP 2025-11-25); this server declares no tasks
# capability, so the call runs as a plain one, as MCP has such a receiver do.  ``initialize`` alone reads
# what it knows and ignores the rest: a client of a later MCP revision must reach version negotiation.
TOOLS_LIST_PARAMS = Params(Value("cursor", lambda value, field: _no_cursor(value, field)))
TOOLS_CALL_PARAMS = Params(Value("name"), Value("arguments"), Value("task"))
AUTHENTICATE_PARAMS = Params(Value("clientInfo"))
# 2026-07-28's own methods: asked for without its envelope, or on a handshake connection, they are refused.
MODERN_ONLY = frozenset({DISCOVER, LISTEN})
UNAUTHENTICATED = frozenset({"initialize", "ping", AUTHENTICATE, DISCOVER})  # what a connection may ask first
SUBSCRIBE = OPERATOR_PREFIX + "subscribe"
CHANGED = "notifications/operator/changed"  # what a subscribed connection is sent: {changes: [...], resync}
SUBSCRIBE_PARAMS = Params(Value("topics", lambda value, field: _topics(value, field)))
CLIENT_NAME_MAX = 100  # of clientInfo's name and version, as the recent connections show it
IMMEDIATE_MAX_BYTES = 1024  # a ping longer than this (padded) goes to the workers like any other message
CANCELLED = "notifications/cancelled"  # MCP: {requestId, reason?}; the socket acts on it (engine/wire/server.py)


@dataclass
class Session:
    """What a connection established at ``initialize``."""

    token: str | None = None
    audience: Any = None
    instance: str | None = None
    protocol_version: str | None = None
    initialized: bool = False
    operator: bool = False  # authenticated with <state>/operator.token: operator/* methods only
    changes: Subscription | None = None  # after operator/subscribe: the socket pushes what it holds
    seen: ConnectionKey | None = None  # an agent connection, as the engine's recent connections list it
    can_push: bool = False  # served by the socket, which can send notifications (an in-memory caller cannot)
    tool_list: ToolListWatch | None = None  # an agent connection that listed the tools, when it can be pushed to
    era: str | None = None  # HANDSHAKE after initialize, MODERN after knowledge/authenticate (engine/wire/modern.py)
    listen: ListenStream | None = None  # a 2026-07-28 connection's open subscriptions/listen stream
    resources: ResourceWatch | None = None  # one that listed resources or subscribed to one (mcp_features.py)

    @property
    def authenticated(self) -> bool:
        """Whether ``initialize`` succeeded, with an agent's credential or the operator token."""
        return self.token is not None or self.operator


def error_for(request_id: Any, exc: BaseException) -> dict[str, Any]:
    """The single exception-to-wire boundary."""
    if isinstance(exc, KnowledgeError):
        return error_response(request_id, exc.code, exc.reason, exc.message,
                              **exc.details)
    log.exception("unexpected error while handling a request")
    return error_response(request_id, INTERNAL_ERROR, "internal", "the engine failed to handle this request")


Handler = Callable[[Session, dict[str, Any]], Any]


_ANY: Any = object()  # end_listen: whichever stream is open


@dataclass(frozen=True)
class Pushed:
    """A handler's answer that is a message of its own instead of a result (``subscriptions/listen``'s
    acknowledgement: the request itself stays unanswered while its stream is open)."""

    message: dict[str, Any]


class Dispatcher:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.tools = ToolRegistry(engine)
        self.methods: dict[str, Handler] = {
            "initialize": self._initialize,
            "ping": lambda session, params: {},  # a liveness probe: whatever it carries, answered at once
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
        }
        # The features' methods, as they declare them (engine/core/methods.py): the hosts' and the operator's.
        for method in HOST_METHODS:
            self.register(method.name, self._agent_method(method))
        for method in operator_methods(engine):
            self.register_operator(method)
        self.methods[SUBSCRIBE] = self._subscribe
        self.methods[AUTHENTICATE] = self._authenticate
        self.methods[DISCOVER] = self._discover
        # What initialize and server/discover declare; a feature package adds its own (resources, prompts ...).
        self.capabilities: dict[str, Any] = {"tools": {"listChanged": True}}
        # subscriptions/listen: the notification kinds honoured (engine/wire/listen.py).
        self.listen_kinds: dict[str, ListenKind] = {}
        self.register_listen(TOOLS_LIST_CHANGED)
        register_features(self)  # resources, prompts, completions, resource subscriptions
        self.capabilities.update(FEATURE_CAPABILITIES)

    def register(self, method: str, handler: Handler) -> None:
        self.methods[method] = handler

    def register_operator(self, method: Method) -> None:
        """Serve ``method`` as ``operator/<name>`` (an operator connection's alone)."""
        self.register(OPERATOR_PREFIX + method.name, operator_handler(method))

    def _agent_method(self, method: Method) -> Handler:
        """A host method as the table holds it: its handler given the request's caller and its arguments
        without ``_meta``.  One that takes no parameters refuses any before the caller is read."""
        def handle(session: Session, params: dict[str, Any]) -> Any:
            if not method.params.names:
                method.params.read(without_meta(params))
            return method.handler(self.engine, self.caller(session, params), without_meta(params))
        return handle

    def register_listen(self, kind: ListenKind) -> None:
        """Honour ``kind.key`` in a ``subscriptions/listen`` filter from now on."""
        self.listen_kinds[kind.key] = kind

    # --- messages ----------------------------------------------------------------------------

    @staticmethod
    def answers_at_once(data: bytes) -> bool:
        """Whether ``data`` is a short ``ping`` or a short notification: neither needs engine work, so the
        socket's event loop handles it itself (with ``handle``) instead of queueing it behind busy workers
        or the connection's own call in progress, and a liveness probe stays fast however loaded the
        stores are."""
        if len(data) > IMMEDIATE_MAX_BYTES:
            return False
        if b'"ping"' in data and method_of(data) == "ping":  # a malformed ping's error is as cheap to answer here
            return True
        return b'"id"' not in data and is_notification(data)  # notifications/cancelled, initialized ...

    def handle(self, session: Session, data: bytes) -> dict[str, Any] | None:
        """One message in, at most one response out; a malformed one gets an error naming the problem."""
        try:
            request = parse_request(data)
        except MalformedMessage as exc:  # transport-level codes (-32700, -32600, -32602), reason invalid_params
            return error_response(exc.request_id, exc.code, "invalid_params", exc.message,
                                  **({"field": exc.field} if exc.field else {}))
        request_id, method, params = request.id, request.method, request.params
        if request.notification:
            self._notification(session, method, params)
            return None
        if session.era == MODERN or method in MODERN_ONLY or enveloped(method, params):
            return self._handle_modern(session, request_id, method, params)
        handler = self.methods.get(method)
        if handler is None:
            return error_response(request_id, METHOD_NOT_FOUND, "not_found", f"unknown method {shown_name(method)}")
        if session.token is None and not session.operator and method not in UNAUTHENTICATED:
            return error_response(request_id, ERROR_CODES["denied"], "denied",
                                  "initialize the connection with a credential first")
        if method not in ("initialize", "ping") and method.startswith(OPERATOR_PREFIX) != session.operator:
            return error_response(request_id, ERROR_CODES["denied"], "denied",
                                  "operator connections call operator/* methods only" if session.operator
                                  else "operator/* methods need the operator token")
        if session.seen is not None:
            self.engine.connections.touched(session.seen)
        try:
            result = handler(session, params)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a wire error, see error_for
            return error_for(request_id, exc)
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def _handle_modern(self, session: Session, request_id: Any, method: str,
                       params: dict[str, Any]) -> dict[str, Any] | None:
        """A request of MCP 2026-07-28, or any request on a connection that speaks it."""
        try:
            if session.era == HANDSHAKE:
                raise envelope_refused() if enveloped(method, params) else EnvelopeError(
                    METHOD_NOT_FOUND, f"{shown_name(method)} is MCP 2026-07-28's; this connection speaks "
                    f"{session.protocol_version}", reason="not_found")
            if not enveloped(method, params):
                if method == "ping":  # the transport's liveness probe (the bridge's keepalive), in either era
                    return {"jsonrpc": "2.0", "id": request_id, "result": {}}
                if method == "initialize":
                    raise handshake_refused(params)
            read_envelope(params, versions_served(session.era))
            if method in REMOVED_METHODS:
                raise removed_method(method)
        except EnvelopeError as exc:
            return error_response(request_id, exc.code, exc.reason, exc.message, **exc.data)
        handler = self.methods.get(method)
        if handler is None and method != LISTEN:
            return error_response(request_id, METHOD_NOT_FOUND, "not_found", f"unknown method {shown_name(method)}")
        if session.token is None and method not in UNAUTHENTICATED:
            return error_response(request_id, ERROR_CODES["denied"], "denied",
                                  "this connection has no credential: authenticate it first with "
                                  "knowledge/authenticate (`knowledge mcp` does that for its client)")
        if method.startswith(OPERATOR_PREFIX):
            return error_response(request_id, ERROR_CODES["denied"], "denied",
                                  "operator/* methods need the operator token")
        if session.seen is not None:
            self.engine.connections.touched(session.seen)
        try:
            result = self._listen(session, request_id, params) if handler is None else handler(session, params)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a wire error, see error_for
            return error_for(request_id, exc)
        if isinstance(result, Pushed):
            return result.message
        return {"jsonrpc": "2.0", "id": request_id, "result": modern_result(method, result)}

    def _notification(self, session: Session, method: str, params: Any) -> None:
        if method == "notifications/initialized" and (session.token is not None or session.operator):
            session.initialized = True
        if method == CANCELLED:  # the client ends its stream this way; a cancelled request is never answered
            self.end_listen(session, _id_key(params.get("requestId")))
        # Other notifications need no answer and change nothing here. A cancellation of a request is the
        # socket's to act on (it alone knows which of the connection's requests wait and which one runs): see
        # cancelled_request.

    def end_listen(self, session: Session, key: tuple[type, Any] | None = _ANY) -> None:
        """Close the connection's ``subscriptions/listen`` stream (the socket stops pushing it): whichever it
        is, or only the one whose request ``key`` names (as ``request_key`` gives it)."""
        stream = session.listen
        if stream is None or (key is not _ANY and (key is None or key != _id_key(stream.request_id))):
            return
        session.listen = None
        if session.era == MODERN:
            session.tool_list = None  # the stream's own watch, closed with it
        stream.close()

    def caller(self, session: Session, params: dict[str, Any]) -> AgentCaller:
        """The request's caller: the session's credential, and its audience unless the request names one."""
        knowledge = _knowledge_meta(params)
        _check_fields(knowledge, REQUEST_FIELDS)
        audience = knowledge.get("audience", session.audience)
        return AgentCaller(session.token, audience, session.instance)

    # --- methods -----------------------------------------------------------------------------

    def _initialize(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        if session.token is not None or session.operator:
            raise InvalidParams("this connection is already initialized")
        knowledge = _knowledge_meta(params)
        if "operatorToken" in knowledge:  # the owner's desktop (operator_api.py)
            _check_fields(knowledge, OPERATOR_FIELDS)
            authenticate_operator(self.engine, knowledge["operatorToken"])
            requested = params.get("protocolVersion")
            session.protocol_version = requested if requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
            session.operator = True
            session.era = HANDSHAKE
            return {"protocolVersion": session.protocol_version, "capabilities": {},
                    "serverInfo": {"name": SERVER_NAME, "version": __version__}, "operator": True}
        requested = params.get("protocolVersion")
        self.open_agent_session(session, knowledge, params.get("clientInfo"),
                                requested if requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1])
        session.era = HANDSHAKE
        return {
            "protocolVersion": session.protocol_version,
            # notifications/tools/list_changed after the connection's first tools/list (engine/wire/tool_list.py)
            "capabilities": self.capabilities,
            "serverInfo": {"name": SERVER_NAME, "version": __version__},
        }

    def open_agent_session(self, session: Session, knowledge: dict[str, Any], client_info: Any,
                           protocol_version: str) -> None:
        """Give ``session`` an agent's credential, audience and instance id (``knowledge``, as
        ``_meta.knowledge`` carries them), once checked; ``Denied`` or ``InvalidParams`` otherwise, changing
        nothing.  ``initialize`` and ``knowledge/authenticate`` both come here, and so may a transport that
        carries the credential itself."""
        _check_fields(knowledge, INITIALIZE_FIELDS)
        token = knowledge.get("token")
        if not isinstance(token, str):
            raise Denied("a credential token (a string) is required")
        agent = self.engine.registry.authenticate(token)
        if agent is None:
            raise Denied("missing, unknown or revoked credential")
        audience = knowledge.get("audience")
        parsed = Audience.parse(audience, where="_meta.knowledge.audience")
        instance = parse_instance(knowledge.get("instance"), field="_meta.knowledge.instance")
        session.protocol_version = protocol_version
        session.token, session.audience, session.instance = token, audience, instance
        session.seen = self.engine.connections.opened(agent.name, instance, _audience_kind(parsed),
                                                      _client_name(client_info))

    def _authenticate(self, session: Session, params: dict[str, Any]) -> Authenticated:
        """``knowledge/authenticate``: the credential of a 2026-07-28 connection, which has no handshake; from
        now on the connection speaks that revision."""
        if session.era is not None:
            raise InvalidParams("this connection is already authenticated" if session.era == MODERN else
                                "this connection was initialized: its credential came with initialize")
        client_info = AUTHENTICATE_PARAMS.read(without_meta(params))["clientInfo"]
        self.open_agent_session(session, _knowledge_meta(params), client_info, MODERN_VERSIONS[-1])
        session.era = MODERN
        return {"authenticated": True, "protocolVersions": list(MODERN_VERSIONS)}

    def _discover(self, session: Session, params: dict[str, Any]) -> DiscoverAnswer:
        """``server/discover``: what this connection can speak, the capabilities, who answers."""
        NO_PARAMS.read(without_meta(params))
        return discover_answer(self.capabilities, {"name": SERVER_NAME, "version": __version__}, session.era)

    def _listen(self, session: Session, request_id: Any, params: dict[str, Any]) -> Pushed:
        """``subscriptions/listen``: open the connection's stream; its acknowledgement is the answer for now."""
        if request_id is None:
            raise InvalidParams("subscriptions/listen needs a request id: the stream is tagged with it", field="id")
        if session.listen is not None:
            raise InvalidParams(f"this connection already listens (request {session.listen.request_id!r}); "
                                "cancel that stream first", field="id")
        for name in without_meta(params):
            if name != "notifications":
                raise InvalidParams(f"unknown parameter {name}", field=name)
        caller = self.caller(session, params)
        stream = open_stream(self.engine, caller, request_id, without_meta(params), self.listen_kinds)
        session.listen = stream  # the socket pushes it (engine/wire/server.py)
        tools = stream.sources.get(TOOLS_LIST_CHANGED.key)
        if isinstance(tools, ToolListSource):  # what tools/list answers is what the stream's watch measures by
            session.tool_list = tools.watch
        return Pushed(stream.acknowledgement())

    def _subscribe(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        """``operator/subscribe``: from now on the connection is sent ``CHANGED`` notifications (engine/core/changes.py)."""
        topics = SUBSCRIBE_PARAMS.read(without_meta(params))["topics"] or list(TOPICS)
        if session.changes is not None:
            raise InvalidParams("this connection is already subscribed")
        session.changes = self.engine.changes.subscribe(topics)
        return {"subscribed": True, "topics": sorted(session.changes.topics), "queueLimit": session.changes.limit,
                "notification": CHANGED}

    def _tools_list(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        TOOLS_LIST_PARAMS.read(without_meta(params))
        caller = self.caller(session, params)
        if session.tool_list is None and session.can_push and session.era != MODERN:  # from now on it hears
            # when its list changes; a 2026-07-28 connection hears only through subscriptions/listen
            session.tool_list = ToolListWatch(self.engine, AgentCaller(session.token, session.audience,
                                                                       session.instance))
        watch = session.tool_list
        if watch is not None and caller == watch.caller:
            reading, state = watch.read()
            watch.told(reading, state)
        else:
            state = tool_list_state(self.engine, caller)
            if watch is not None:  # listed for a request's own audience: the watch follows the connection's
                watch.told(*watch.read())
        return {"tools": self.tools.listed(state.claim_kinds, writes=state.writes)}

    def _tools_call(self, session: Session, params: dict[str, Any]) -> ToolResult:
        """A tool's own failure is its result (``isError``); a request that is not a tool call, or whose
        ``_meta`` is malformed, is a JSON-RPC error like any other method's."""
        read = TOOLS_CALL_PARAMS.read(without_meta(params))
        name, arguments = read["name"], read["arguments"]
        if arguments is None:  # MCP: a tool without arguments may be called without them
            arguments = {}
        elif not isinstance(arguments, dict):  # [], 0, false and "" too: never read as no arguments
            raise InvalidParams("arguments must be an object", field="arguments")
        if not isinstance(name, str):  # missing or null is required; 5 or a list was given, but is no name
            said = "name is required" if name is None else "name must be a string"
            raise InvalidParams(f"{said}: the name of a tool from tools/list", field="name")
        tool = self.tools.get(name)
        if tool is None:
            raise InvalidParams(f"unknown tool {shown_name(name)}", field="name")
        return tool.call(self.engine, self.caller(session, params), arguments)


NAME_SHOWN_MAX = 80  # characters of an unknown method or tool name an error message quotes


def shown_name(name: str) -> str:
    """An unknown method or tool name as an error quotes it: whole when short, else its start and its length,
    so a client sending a name of megabytes does not get it back."""
    if len(name) <= NAME_SHOWN_MAX:
        return repr(name)
    return f"{name[:NAME_SHOWN_MAX]!r}... ({len(name)} characters)"


def cancelled_request(data: bytes) -> tuple[type, Any] | None:
    """The request a ``notifications/cancelled`` line names, as ``request_key`` gives it; None for any other
    line, and for a cancellation without a string or integer ``requestId`` (malformed: ignored, it is a
    notification)."""
    try:
        message = parse_request(data)
    except MalformedMessage:
        return None
    if not message.notification or message.method != CANCELLED:
        return None
    return _id_key(message.params.get("requestId"))


def request_key(data: bytes) -> tuple[type, Any] | None:
    """What a cancellation is matched against: the request's id with its JSON type, so that 1 and "1" are
    different requests; None for a notification, a malformed line, and the two requests that change the
    connection itself: ``initialize``, which MCP says is never cancelled, and ``operator/subscribe`` (its
    answer unsent, the connection would be subscribed with no word of it, and a retry refused)."""
    try:
        message = parse_request(data)
    except MalformedMessage:
        return None
    if message.notification or message.method in ("initialize", SUBSCRIBE):
        return None
    return _id_key(message.id)


def _id_key(request_id: Any) -> tuple[type, Any] | None:
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):  # true is not 1; null names nothing
        return None
    return type(request_id), request_id


def _knowledge_meta(params: dict[str, Any]) -> dict[str, Any]:
    meta = params.get("_meta")
    meta = {} if meta is None else meta  # [], 0, false and "" are malformed, never read as none
    if not isinstance(meta, dict):
        raise InvalidParams("_meta must be an object", field="_meta")
    knowledge = meta.get("knowledge")
    knowledge = {} if knowledge is None else knowledge
    if not isinstance(knowledge, dict):
        raise InvalidParams("_meta.knowledge must be an object", field="_meta.knowledge")
    return knowledge


def _check_fields(knowledge: dict[str, Any], allowed: frozenset[str]) -> None:
    """Refuse what a credential or audience meta must not carry, rather than ignore it (fail closed)."""
    unknown = sorted(str(key) for key in knowledge if key not in allowed)
    if unknown:
        raise InvalidParams(f"unknown field _meta.knowledge.{unknown[0]}", field=f"_meta.knowledge.{unknown[0]}")


def _topics(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(topic, str) and topic in TOPICS
                                                           for topic in value):
        raise InvalidParams(f"{field} must be a non-empty list of {', '.join(TOPICS)}", field=field)
    return list(value)


def changed_notification(changes: list[dict[str, Any]], resync: bool) -> dict[str, Any]:
    """The notification a subscribed operator connection is sent; ``resync``: reload everything."""
    return {"jsonrpc": "2.0", "method": CHANGED, "params": {"changes": changes, "resync": resync}}


def _no_cursor(value: Any, field: str) -> None:
    raise InvalidParams("the tool list is never paged, so no cursor was issued: leave cursor out", field=field)


def _audience_kind(audience: Audience) -> str:
    """How the connection's audience reads in the recent connections: its kind, a child's with its root's."""
    return f"child of {audience.kind}" if audience.delegated else audience.kind


def _client_name(info: Any) -> str | None:
    """The MCP client's ``clientInfo.name`` (and version), one clipped line, or None."""
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        return None
    name = info["name"]
    if isinstance(info.get("version"), str):
        name = f"{name} {info['version']}"
    name = "".join(ch for ch in name if ch.isprintable()).strip()
    return name[:CLIENT_NAME_MAX] or None
