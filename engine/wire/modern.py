"""MCP 2026-07-28 beside the 2025 revisions: the per-request envelope, the result shape, ``server/discover``.

2026-07-28 has no handshake.  Every request carries its protocol version and the client's capabilities in
``params._meta`` (``io.modelcontextprotocol/protocolVersion``, ``io.modelcontextprotocol/clientCapabilities``,
optionally ``io.modelcontextprotocol/clientInfo``), every result says ``resultType``, and ``server/discover``
tells a client which revisions the server speaks.  ``initialize``, ``ping``, ``resources/subscribe``,
``resources/unsubscribe`` and ``logging/setLevel`` are gone from it.

A socket connection speaks one era, decided by how it starts, as the official SDK's dual-era server does:
``initialize`` opens a handshake connection (2024-11-05 ... 2025-11-25), ``knowledge/authenticate`` a
2026-07-28 one.  Then a request of the other era is refused: an enveloped request on a handshake connection
is -32600, ``initialize`` on a 2026-07-28 connection is -32022 naming the revisions it serves.

The credential is the connection's, never the request's: see ``docs/protocol.md`` ("Authentication without a
handshake").  This module reads and answers; ``protocol.Dispatcher`` routes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.answers import JsonObject, JsonValue, NotRequired, TypedDict

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
ALL_VERSIONS = HANDSHAKE_VERSIONS + MODERN_VERSIONS

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

HANDSHAKE, MODERN = "handshake", "2026-07-28"  # a connection's era, once decided
AUTHENTICATE = "knowledge/authenticate"  # the engine's own: gives a 2026-07-28 connection its credential
DISCOVER = "server/discover"
UNSUPPORTED_PROTOCOL_VERSION = -32022  # MCP 2026-07-28's code; data {supported, requested}
INVALID_REQUEST, INVALID_PARAMS, METHOD_NOT_FOUND = -32600, -32602, -32601
# Methods the revision removed: asked for on a 2026-07-28 request, each is refused as unknown, naming why.
REMOVED_METHODS = frozenset({"initialize", "ping", "notifications/initialized", "resources/subscribe",
                             "resources/unsubscribe", "logging/setLevel"})
# Results 2026-07-28 lets a client cache; every answer here is the caller's own and may change at any moment.
CACHEABLE_METHODS = frozenset({DISCOVER, "tools/list", "resources/list", "resources/templates/list",
                               "resources/read", "prompts/list"})
_ENVELOPE_FIELD = "_meta"


class ServerInfo(TypedDict):
    name: str
    version: str


class Authenticated(TypedDict):
    """``knowledge/authenticate``'s answer."""

    authenticated: bool
    protocolVersions: list[str]


class DiscoverAnswer(TypedDict):
    """``server/discover``'s answer."""

    supportedVersions: list[str]
    capabilities: JsonObject
    ttlMs: int
    cacheScope: str
    resultType: str
    _meta: dict[str, ServerInfo]
    instructions: NotRequired[str]


@dataclass(frozen=True)
class Envelope:
    """What a 2026-07-28 request says of itself."""

    version: str
    capabilities: JsonObject
    client_info: JsonObject | None = None


class EnvelopeError(Exception):
    """A request of the wrong era or with a malformed envelope; ``code`` and ``data`` are its wire error's."""

    def __init__(self, code: int, message: str, reason: str = "invalid_params", **data: JsonValue) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.data = data


def enveloped(method: str, params: dict[str, Any]) -> bool:
    """Whether a request claims 2026-07-28: ``_meta`` holds the protocol-version key.  ``initialize`` never does
    (the handshake does not exist at 2026 revisions, even when a client stamps the envelope on it)."""
    meta = params.get(_ENVELOPE_FIELD)
    return method != "initialize" and isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta


def read_envelope(params: dict[str, Any], supported: tuple[str, ...]) -> Envelope:
    """The request's envelope, checked as the revision says: both required keys, a version string the
    connection serves (``supported``), objects for the capabilities and the client's info."""
    meta = params.get(_ENVELOPE_FIELD)
    if not isinstance(meta, dict):
        raise EnvelopeError(INVALID_PARAMS, f"params._meta must be an object carrying {PROTOCOL_VERSION_KEY!r} and "
                            f"{CLIENT_CAPABILITIES_KEY!r}", field="_meta")
    missing = [key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if key not in meta]
    if missing:
        raise EnvelopeError(INVALID_PARAMS, f"params._meta is missing {', '.join(missing)}: a 2026-07-28 request "
                            "carries its protocol version and the client's capabilities",
                            field=f"_meta.{missing[0]}")
    version = meta[PROTOCOL_VERSION_KEY]
    if not isinstance(version, str):
        raise EnvelopeError(INVALID_PARAMS, "the protocol version must be a string",
                            field=f"_meta.{PROTOCOL_VERSION_KEY}")
    if version not in supported or version not in MODERN_VERSIONS:
        raise EnvelopeError(UNSUPPORTED_PROTOCOL_VERSION, f"unsupported protocol version {version[:40]!r}; "
                            f"this connection serves {', '.join(supported)}",
                            field=f"_meta.{PROTOCOL_VERSION_KEY}", supported=list(supported), requested=version)
    capabilities = meta[CLIENT_CAPABILITIES_KEY]
    if not isinstance(capabilities, dict):
        raise EnvelopeError(INVALID_PARAMS, "the client's capabilities must be an object",
                            field=f"_meta.{CLIENT_CAPABILITIES_KEY}")
    info = meta.get(CLIENT_INFO_KEY)
    if info is not None and not isinstance(info, dict):
        raise EnvelopeError(INVALID_PARAMS, "the client's info must be an object",
                            field=f"_meta.{CLIENT_INFO_KEY}")
    return Envelope(version, capabilities, info)


def versions_served(era: str | None) -> tuple[str, ...]:
    """What a connection can still speak: every revision until its era is decided, then that era's."""
    if era == MODERN:
        return MODERN_VERSIONS
    if era == HANDSHAKE:
        return HANDSHAKE_VERSIONS
    return ALL_VERSIONS


def handshake_refused(params: dict[str, Any]) -> EnvelopeError:
    """``initialize`` on a 2026-07-28 connection: -32022 naming the revision it serves (the SDK re-probes)."""
    requested = params.get("protocolVersion")
    return EnvelopeError(UNSUPPORTED_PROTOCOL_VERSION, "this connection speaks MCP 2026-07-28, which has no "
                         "initialize handshake; open another connection to use the handshake",
                         field="protocolVersion", supported=list(MODERN_VERSIONS),
                         **({"requested": requested} if isinstance(requested, str) else {}))


def envelope_refused() -> EnvelopeError:
    return EnvelopeError(INVALID_REQUEST, "this connection was opened with the initialize handshake (MCP 2024-11-05 "
                         "... 2025-11-25); requests carrying the 2026-07-28 envelope are not accepted on it",
                         field=f"_meta.{PROTOCOL_VERSION_KEY}")


def removed_method(method: str) -> EnvelopeError:
    return EnvelopeError(METHOD_NOT_FOUND, f"{method} was removed in MCP 2026-07-28", reason="not_found")


def modern_result(method: str, result: JsonObject) -> JsonObject:
    """A handler's answer in 2026-07-28's shape: ``resultType`` always; cache hints where the revision has them
    (``ttlMs: 0``, ``cacheScope: "private"``: the answer is the caller's and may change at any moment)."""
    shaped: JsonObject = dict(result)
    if method in CACHEABLE_METHODS:
        shaped.setdefault("ttlMs", 0)
        shaped.setdefault("cacheScope", "private")
    shaped.setdefault("resultType", "complete")
    return shaped


def discover_answer(capabilities: JsonObject, server_info: ServerInfo, era: str | None) -> DiscoverAnswer:
    """``server/discover``: the revisions this connection can speak, the capabilities, who answers."""
    return {"supportedVersions": list(versions_served(era)), "capabilities": capabilities, "ttlMs": 0,
            "cacheScope": "private", "resultType": "complete", "_meta": {SERVER_INFO_KEY: server_info}}
