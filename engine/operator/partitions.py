"""The partitions view: each store's private partition and conversation partitions, and the grants.

A conversation partition is its agent's and session's (docs/protocol.md), and
the specification exposes no operator browsing of it.  So what the owner is
shown of one is figures only: its session id, the agent that owns it, when
it was made, how many current records it holds (and how many of them are
links), how many publications it had and when the last one was; never a
record, title or id from it.  The session key is kept only as a hash (it
binds the conversation), so it is shown when a grant names it, and
otherwise not at all.

Grants belong to an agent and a session key (``registry.sqlite``, table
``grants``): a granted conversation reads the private partition (``read``)
or also saves there (``read-and-save``) instead of using its own.  The
operator adds and revokes them here; the engine checks the agent, the key
(the same rules as an audience's ``sessionKey``) and, when the grant is made
from a conversation's row, that the key is the one the conversation is
bound under.

    method                 params                                      changes
    operator/partitions    store                                       -
    operator/grants        agent?                                      -
    operator/setGrant      agent, sessionKey, access?, sessionId?      registry grants
    operator/removeGrant   agent, sessionKey                           registry grants
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, TypeVar

from ..core.answers import NotRequired, TypedDict

from ..access.authority import SESSION_KEY_MAX
from ..access.stores import StoreEntry, StoreResolver
from ..core.errors import ErrorAnswer, InvalidParams, KnowledgeError, NotFound
from ..core.ids import canonical_session_id
from ..core.methods import Method
from ..core.params import AgentName, Choice, Params, String, Value, check_name
from ..state.registry import GRANT_ACCESS, Conversation, Grant, RegisteredGrant, Registry, StoreRecord
from ..store.catalog_reads import CatalogReads, PartitionSummary
from ..store.store import Store
from ..vault.records import PRIVATE_SCOPE, conversation_scope

CONVERSATION_PREFIX = conversation_scope("")
T = TypeVar("T")


class StoreLane(Protocol):
    """A store's runtime, as far as this view needs it: the store."""

    @property
    def store(self) -> Store: ...


class PartitionsEngine(Protocol):
    """What the partitions view needs of the engine."""

    @property
    def registry(self) -> Registry: ...

    @property
    def resolver(self) -> StoreResolver: ...

    def stores(self) -> list[StoreEntry]: ...

    def maintain(self, record: StoreRecord, work: Callable[[StoreLane], T]) -> T: ...

    def set_grant(self, agent: str, session_key: str, access: str) -> Grant: ...

    def remove_grant(self, agent: str, session_key: str) -> None: ...


class GrantAnswer(RegisteredGrant):
    """A grant with the conversations known to be bound under its session key (by session id)."""

    conversations: list[str]


class GrantAccess(TypedDict):
    access: str
    createdAt: str


class PartitionFigures(TypedDict):
    partition: str
    records: int
    links: int
    publications: int
    lastPublicationAt: str | None


class PartitionAnswer(PartitionFigures):
    """One partition, figures only: a conversation's names its session, agent and grant, never a record."""

    kind: str
    createdAt: str | None
    sessionId: NotRequired[str]
    agent: NotRequired[str | None]
    sessionKey: NotRequired[str | None]
    grant: NotRequired[GrantAccess | None]


class NoEntry(TypedDict, closed=True):
    """``{}``: the inventory no longer lists the store (it went between the two reads)."""


class Partitions(TypedDict):
    """``store`` is the store's inventory entry; ``problem`` when its catalog could not be read."""

    store: StoreEntry | NoEntry
    partitions: list[PartitionAnswer]
    grants: list[GrantAnswer]
    problem: NotRequired[ErrorAnswer]


class Grants(TypedDict):
    grants: list[RegisteredGrant]


class GrantSet(TypedDict):
    grant: GrantAnswer
    grants: list[GrantAnswer]


class GrantsLeft(TypedDict):
    grants: list[GrantAnswer]


def _session_key(value: Any, field: str) -> str:
    check_name(value, field, max_chars=SESSION_KEY_MAX)
    return value  # kept as given: a grant matches the audience's key exactly


def _session_id(value: Any, field: str) -> str:
    canonical = canonical_session_id(value)
    if canonical is None:
        raise InvalidParams(f"{field} must be a session UUID", field=field)
    return canonical


STORE = Params(String("store", 64, required=True, min_chars=1, what="a store id"))
GRANTS = Params(AgentName("agent"))
GRANT_KEY = Params(AgentName("agent", required=True), Value("sessionKey", _session_key, required=True))
SET_GRANT = GRANT_KEY + Params(Choice("access", choices=GRANT_ACCESS, default="read"),
                               Value("sessionId", _session_id))


def methods(engine: PartitionsEngine) -> tuple[Method, ...]:
    """The partitions view's ``operator/*`` methods (engine/core/methods.py)."""
    def partitions_of(params: dict[str, Any]) -> Partitions:
        return partitions(engine, STORE.read(params)["store"])

    def grants(params: dict[str, Any]) -> Grants:
        return {"grants": [grant.to_dict() for grant in engine.registry.grants(GRANTS.read(params)["agent"])]}

    def grant(params: dict[str, Any]) -> GrantSet:
        return set_grant(engine, SET_GRANT.read(params))

    def revoke(params: dict[str, Any]) -> GrantsLeft:
        return remove_grant(engine, GRANT_KEY.read(params))

    return (Method("partitions", STORE, Partitions, partitions_of), Method("grants", GRANTS, Grants, grants),
            Method("setGrant", SET_GRANT, GrantSet, grant), Method("removeGrant", GRANT_KEY, GrantsLeft, revoke))


def partitions(engine: PartitionsEngine, store_id: str) -> Partitions:
    """The store's partitions and its members' grants; nothing is created, no record is read."""
    record = engine.registry.store(store_id)
    if record is None:
        raise NotFound(f"no store with id {store_id!r}", store=store_id)
    entry: StoreEntry | NoEntry = next((store for store in engine.stores() if store.get("storeId") == store_id),
                                       NoEntry())
    members = list(entry.get("agents") or [])
    grants = [grant for agent in members for grant in engine.registry.grants(agent)]
    answer: Partitions = {"store": entry, "partitions": [], "grants": []}
    if entry.get("status") != "ok":
        return answer
    try:
        summaries = engine.maintain(record, lambda runtime: CatalogReads(runtime.store.db).partition_summaries())
    except KnowledgeError as exc:
        answer["problem"] = exc.to_dict()
        return answer
    conversations = {c.session_id: c for c in engine.registry.conversations(store_id)}
    answer["partitions"] = [_partition(summary, record.created_at, conversations, grants) for summary in summaries]
    answer["grants"] = [_grant(grant, [c.session_id for c in conversations.values()
                                       if c.agent == grant.agent and c.is_under(grant.session_key)])
                        for grant in grants]
    return answer


def set_grant(engine: PartitionsEngine, values: dict[str, Any]) -> GrantSet:
    agent, key, session_id = values["agent"], values["sessionKey"], values["sessionId"]
    if session_id is not None:
        _check_bound(engine, agent, key, session_id)
    grant = engine.set_grant(agent, key, values["access"])
    return {"grant": _grant(grant, [session_id] if session_id else []),
            "grants": [_grant(g, []) for g in engine.registry.grants(agent)]}


def remove_grant(engine: PartitionsEngine, values: dict[str, Any]) -> GrantsLeft:
    engine.remove_grant(values["agent"], values["sessionKey"])
    return {"grants": [_grant(g, []) for g in engine.registry.grants(values["agent"])]}


# --- helpers ---------------------------------------------------------------------------------------


def _check_bound(engine: PartitionsEngine, agent: str, key: str, session_id: str) -> None:
    """A grant made from a conversation's row must name the key that conversation is bound under."""
    store = engine.resolver.effective(agent, create=False)
    bound = next((c for c in engine.registry.conversations(store.store_id) if c.session_id == session_id),
                 None) if store is not None else None
    if bound is None or bound.agent != agent:
        raise NotFound(f"agent {agent!r} has no conversation {session_id} in its store", agent=agent,
                       sessionId=session_id)
    if not bound.is_under(key):
        raise InvalidParams("that is not the session key this conversation is bound under", field="sessionKey",
                            sessionId=session_id)


def _partition(summary: PartitionSummary, store_created_at: str, conversations: dict[str, Conversation],
               grants: list[Grant]) -> PartitionAnswer:
    row: PartitionFigures = {"partition": summary.partition, "records": summary.records,
                             "links": summary.links,
                             "publications": summary.publications, "lastPublicationAt": summary.last_publication_at}
    if summary.partition == PRIVATE_SCOPE:
        return {**row, "kind": "private", "createdAt": store_created_at}
    session_id = summary.partition.removeprefix(CONVERSATION_PREFIX)
    bound = conversations.get(session_id)
    grant = next((g for g in grants if bound is not None and g.agent == bound.agent
                  and bound.is_under(g.session_key)), None)
    return {**row, "kind": "conversation", "sessionId": session_id, "agent": bound.agent if bound else None,
            "createdAt": summary.created_at or (bound.created_at if bound else None),
            "sessionKey": grant.session_key if grant else None,
            "grant": {"access": grant.access, "createdAt": grant.created_at} if grant else None}


def _grant(grant: Grant, session_ids: list[str]) -> GrantAnswer:
    return {**grant.to_dict(), "conversations": session_ids}
