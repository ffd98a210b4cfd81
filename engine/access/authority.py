"""Who is calling, and which partition of which store they may reach.

One function, ``Authorizer.authorize``, serves every entry point (Python
API, socket, desktop).  Callers never name a store, agent, path or scope:
an agent proves itself with its credential and the audience its host
minted; the engine maps that to exactly one partition.  Features reach
that partition through ``StoreEntry`` (the engine's ``enter`` and
``on_store``), never through the authorizer.

    caller                           partition            writes
    owner-private (owner credential) private              yes
    conversation, no grant           conversation:<id>    yes
    conversation, grant "read"       private              no
    conversation, "read-and-save"    private              yes
    spawned child                    same as its root     same as its root
    operator (the desktop)           an agent's private   never
    preview (what an agent sees)     as that agent        never (by name, no credential)
    missing, stale, foreign, sandboxed                    denied
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Protocol, TypeVar

from ..core.answers import NotRequired, TypedDict
from ..state.config import Settings, SettingsSource
from ..core.errors import Denied, InvalidParams, KnowledgeError, NotFound, WritesDisabled
from ..core.ids import canonical_session_id
from ..core.params import check_name
from ..vault.records import PRIVATE_SCOPE, conversation_scope
from ..state.registry import Agent, Registry, StoreRecord
from .stores import StoreResolver

OWNER_PRIVATE = "owner-private"
CONVERSATION = "conversation"
CHILD = "child"
OPERATOR = "operator"
SESSION_KEY_MAX = 256
INSTANCE_MAX = 128
MEMO_MAX = 1024  # agents' authorizations remembered until the registry or the settings next change
# The fields each audience kind may carry; any other field is refused rather than ignored.
AUDIENCE_FIELDS = {
    OWNER_PRIVATE: {"kind", "sandboxed"},
    CONVERSATION: {"kind", "sandboxed", "sessionKey", "sessionId"},
    CHILD: {"kind", "sandboxed", "root"},
}


class AudienceAnswer(TypedDict):
    """An audience in its wire form: a child's names its root audience."""

    kind: str
    sessionKey: NotRequired[str | None]
    sessionId: NotRequired[str | None]
    root: NotRequired[AudienceAnswer]


class Attribution(TypedDict):
    """Who wrote a revision, as records carry it (``attribution``)."""

    agent: str
    instance: NotRequired[str]
    audience: str
    session: NotRequired[str]
    delegated: NotRequired[bool]


@dataclass(frozen=True)
class Audience:
    """A host-minted memory audience, parsed and checked for shape."""

    kind: str
    session_key: str | None = None
    session_id: str | None = None
    delegated: bool = False

    @classmethod
    def parse(cls, data: Any, *, where: str = "audience") -> "Audience":
        """Parse the wire form, failing closed: every field must have its exact type, unknown fields are
        refused, and a sandboxed audience is denied outright."""
        if isinstance(data, Audience):
            return data
        if not isinstance(data, dict):
            raise Denied("a memory audience is required")
        kind = data.get("kind")
        allowed = AUDIENCE_FIELDS.get(kind) if isinstance(kind, str) else None
        if allowed is None:
            raise InvalidParams("audience kind must be owner-private, conversation or child", field=f"{where}.kind")
        unknown = sorted(str(key) for key in data if key not in allowed)
        if unknown:
            raise InvalidParams(f"unknown audience field {unknown[0]!r}", field=f"{where}.{unknown[0]}")
        sandboxed = data.get("sandboxed", False)
        if not isinstance(sandboxed, bool):
            # Anything but the JSON literals true and false is refused, never read as "not sandboxed".
            raise InvalidParams("sandboxed must be true or false", field=f"{where}.sandboxed")
        if sandboxed:
            raise Denied("sandboxed sessions have no memory access")
        if kind == CHILD:
            root = data.get("root")
            if not isinstance(root, dict) or root.get("kind") == CHILD:
                raise InvalidParams("a child audience names its root audience, not another child",
                                    field=f"{where}.root")
            parent = cls.parse(root, where=f"{where}.root")
            return cls(parent.kind, parent.session_key, parent.session_id, delegated=True)
        if kind == OWNER_PRIVATE:
            return cls(OWNER_PRIVATE)
        key = data.get("sessionKey")
        check_name(key, f"{where}.sessionKey", max_chars=SESSION_KEY_MAX)  # kept as given: grants match it exactly
        session_id = canonical_session_id(data.get("sessionId"))
        if session_id is None:
            raise InvalidParams("a conversation audience needs a sessionId UUID", field=f"{where}.sessionId")
        return cls(CONVERSATION, key, session_id)

    def to_dict(self) -> AudienceAnswer:
        data: AudienceAnswer = {"kind": self.kind}
        if self.kind == CONVERSATION:
            data["sessionKey"], data["sessionId"] = self.session_key, self.session_id
        return {"kind": CHILD, "root": data} if self.delegated else data


@dataclass(frozen=True)
class AgentCaller:
    """An agent: its credential, the audience its host declared, and an optional instance id."""

    token: str | None
    audience: Any
    instance: str | None = None


@dataclass(frozen=True)
class OperatorCaller:
    """The local owner at the desktop, browsing one agent's private partition read-only."""

    agent: str


@dataclass(frozen=True)
class PreviewCaller:
    """The owner previewing what ``agent`` gets in ``audience`` (its memory prompt and index).

    Authorized like that agent, by name instead of a credential; it never
    writes and never creates a store.
    """

    agent: str
    audience: Any


Caller = AgentCaller | OperatorCaller | PreviewCaller


@dataclass(frozen=True)
class Authority:
    """What an authorized caller reaches: one partition of one store."""

    agent: str
    store: StoreRecord | None
    partition: str
    can_write: bool
    kind: str
    audience: Audience | None = None
    grant: str | None = None
    instance: str | None = None

    def attribution(self) -> Attribution:
        """Who wrote a revision, as records carry it."""
        data: dict[str, Any] = {"agent": self.agent}   # built in the key order records are written in
        if self.instance:
            data["instance"] = self.instance
        data["audience"] = self.kind
        if self.audience is not None and self.audience.session_id:
            data["session"] = self.audience.session_id
        if self.audience is not None and self.audience.delegated:
            data["delegated"] = True
        return data  # type: ignore[return-value]


R = TypeVar("R", covariant=True)  # what work on a store's lane is handed: the store as a feature needs it
T = TypeVar("T")


class Entry(Protocol[R]):
    """An authorized caller at its store: work runs on the store's lane, authority re-checked around it.

    ``Engine.enter`` makes one.  Work that takes several steps (the recall
    gate's shortlist, questions and injection under one deadline) runs each
    through the same entry, and ``recheck`` between them.
    """

    @property
    def authority(self) -> Authority: ...

    def run(self, work: Callable[[R, Authority], T], *, timeout: float | None = None) -> T:
        """``work(store, authority)`` on the lane; authority re-checked right before it and before returning.

        Raises NotFound when the agent has no store yet; with ``timeout`` a
        busy lane raises TimeoutError (the work stays queued)."""
        ...

    def write(self, plan: Callable[[R, Authority, Any], Any]) -> Any:
        """Publish what ``plan(store, authority, catalog)`` plans (a Plan, or the receipt of an identical retry)
        together with the writes queued beside it (group commit); returns the receipt."""
        ...

    def read(self, work: Callable[[R, Authority, Any], T]) -> T:
        """``work(store, authority, view)`` on the catalog's last committed snapshot beside the lane when it can
        be, else on the lane; authority re-checked around it, as ``run``."""
        ...

    def recheck(self) -> None:
        """Authorize the caller again (never creating a store); Denied when it reaches another partition."""
        ...


class StoreEntry(Protocol[R]):
    """The one way into a store, as a feature names it instead of taking the whole engine.

    ``create`` says whether an agent's first authorized use creates its
    store; ``authorize`` grants nothing on the store and serves callers that
    must learn who asks before anything else (what is configured, whether a
    store exists).
    """

    def authorize(self, caller: Caller, *, write: bool = False, scope: str | None = None,
                  create: bool = True) -> Authority: ...

    def enter(self, caller: Caller, *, write: bool = False, scope: str | None = None,
              create: bool = True) -> Entry[R]: ...

    def on_store(self, caller: Caller, work: Callable[[R, Authority], T], *, write: bool = False,
                 scope: str | None = None, create: bool = True) -> T: ...


@dataclass(frozen=True)
class _Remembered:
    """An agent's authorization as concluded from the registry at ``stamp`` and from ``settings``."""

    stamp: tuple[int, int]
    settings: Settings
    authority: Authority


class Authorizer:
    """Every request is authorized several times (before it queues, on the lane, before it answers), so an
    agent's authorization is remembered with what it was concluded from: the registry's change stamp and the
    settings in force.  It is reused only while both are unchanged, which every check looks at again (a change
    to the registry by any process, or to config.json, refuses or re-decides the very next check), and the
    store's directory, manifest and database are looked at on every check, remembered or not."""

    def __init__(self, registry: Registry, settings: SettingsSource, resolver: StoreResolver) -> None:
        self.registry = registry
        self.settings = settings
        self.resolver = resolver
        self._memo: dict[Hashable, _Remembered] = {}
        self._memo_stamp: tuple[int, int] | None = None
        self._memo_lock = threading.Lock()

    def authorize(self, caller: Caller, *, write: bool = False, create: bool = True,
                  scope: str | None = None) -> Authority:
        """Resolve a caller to its partition, or raise Denied / WritesDisabled / StoreUnavailable.

        ``create`` allows an agent's first authorized use to create its store;
        operators never create one. ``scope`` is the credential scope the
        surface needs (default ``memory:read``, or ``memory:write`` to write).
        """
        if isinstance(caller, OperatorCaller):
            return self._operator(caller, write=write)
        if isinstance(caller, PreviewCaller):
            if write:
                raise Denied("a preview of what an agent sees never writes")
            return self._as_agent(self._previewed(caller), caller.audience, None, write=False, create=False,
                                  scope=scope)
        if not isinstance(caller, AgentCaller):
            raise Denied("unknown caller")
        with self.registry.one_reading() as stamp:  # one change stamp for the check's token, grant and store lookups
            settings = self.settings.current()
            key = _memo_key(caller, write=write, create=create, scope=scope)
            remembered = self._recall(key, stamp, settings)
            if remembered is not None:
                if remembered.store is not None:  # looked at again, as ``StoreResolver.effective`` does
                    self.resolver.check(remembered.store)
                return remembered
            agent = self.registry.authenticate(caller.token)
            if agent is None:
                raise Denied("missing, unknown or revoked credential")
            authority = self._as_agent(agent, caller.audience, caller.instance, write=write, create=create,
                                       scope=scope, settings=settings)
            self._remember(key, stamp, settings, authority)
            return authority

    def _recall(self, key: Hashable | None, stamp: tuple[int, int], settings: Settings) -> Authority | None:
        """The authorization remembered for ``key``, if concluded at this very registry stamp and settings."""
        if key is None or self.registry.in_transaction:
            return None
        with self._memo_lock:
            remembered = self._memo.get(key)
        if remembered is None or remembered.stamp != stamp or remembered.settings is not settings:
            return None
        return remembered.authority

    def _remember(self, key: Hashable | None, stamp: tuple[int, int], settings: Settings,
                  authority: Authority) -> None:
        if key is None or self.registry.in_transaction:  # what was read may not be committed
            return
        with self._memo_lock:
            if stamp != self._memo_stamp:  # what was concluded at an older stamp can never be reused
                self._memo.clear()
                self._memo_stamp = stamp
            if len(self._memo) < MEMO_MAX:
                self._memo[key] = _Remembered(stamp, settings, authority)

    def can_save(self, caller: Caller) -> bool:
        """Whether ``caller`` could save knowledge now (the memory prompt's save guidance); grants nothing."""
        try:
            if isinstance(caller, PreviewCaller):
                self._as_agent(self._previewed(caller), caller.audience, None, write=True, create=False)
            else:
                self.authorize(caller, write=True, create=False)
        except (Denied, WritesDisabled, NotFound):
            return False
        return True

    def _previewed(self, caller: PreviewCaller) -> Agent:
        agent = self.registry.agent(caller.agent)
        if agent is None or not agent.active:
            raise NotFound(f"no agent named {caller.agent!r}", agent=caller.agent)
        return agent

    def _as_agent(self, agent: Agent, audience_data: Any, instance_data: Any, *, write: bool,
                  create: bool, scope: str | None = None, settings: Settings | None = None) -> Authority:
        audience = Audience.parse(audience_data)
        scope = scope or ("memory:write" if write else "memory:read")
        if scope not in agent.scopes:
            raise Denied(f"this credential lacks the {scope} scope")
        instance = parse_instance(instance_data)
        partition, can_write, grant = self._partition_for(agent, audience)
        settings = settings or self.settings.current()
        if write:
            if not settings.writes_enabled:
                raise WritesDisabled("the owner has turned Knowledge writes off")
            if not can_write:
                raise Denied("this conversation's grant is read-only")
        store = self.resolver.effective(agent.name, create=create, settings=settings)
        if store is not None and partition != PRIVATE_SCOPE:
            self._check_conversation_owner(store, agent, audience, create=create)
        return Authority(agent.name, store, partition, can_write, audience.kind, audience, grant, instance)

    def _partition_for(self, agent: Agent, audience: Audience) -> tuple[str, bool, str | None]:
        if audience.kind == OWNER_PRIVATE:
            if not agent.owner:
                raise Denied(f"this credential has no owner authority; speak for a conversation instead (audience "
                             f"kind conversation: `knowledge agents config {agent.name}` prints such a configuration)")
            return PRIVATE_SCOPE, True, None
        grant = self.registry.grant(agent.name, audience.session_key or "")
        if grant is None:
            return conversation_scope(audience.session_id or ""), True, None
        return PRIVATE_SCOPE, grant.access == "read-and-save", grant.access

    def _check_conversation_owner(self, store: StoreRecord, agent: Agent, audience: Audience, *,
                                  create: bool) -> None:
        """A conversation partition is its owner's: the agent and session key that first used it in this store.

        Another agent of a shared store, or the same agent under another session key, presenting the session
        id is denied, so a session id seen in attribution reaches nothing.
        """
        assert audience.session_id is not None and audience.session_key is not None
        if not self.registry.claim_conversation(store.store_id, audience.session_id, agent.name,
                                                audience.session_key, create=create):
            raise Denied("this conversation belongs to another agent or session key")

    def _operator(self, caller: OperatorCaller, *, write: bool) -> Authority:
        if write:
            raise Denied("the operator reads knowledge; only agents write it")
        agent = self.registry.agent(caller.agent)
        if agent is None or not agent.active:
            raise NotFound(f"no agent named {caller.agent!r}", agent=caller.agent)
        store = self.resolver.effective(agent.name, create=False)
        return Authority(agent.name, store, PRIVATE_SCOPE, False, OPERATOR)


def _memo_key(caller: AgentCaller, *, write: bool, create: bool, scope: str | None) -> Hashable | None:
    """What an agent's authorization is a function of, besides the registry and the settings: its credential,
    its audience and instance id as they parse, and what it asks.  None when they do not parse (the check
    itself then refuses them, in its own order)."""
    if not isinstance(caller.token, str):
        return None
    try:
        audience, instance = Audience.parse(caller.audience), parse_instance(caller.instance)
    except KnowledgeError:
        return None
    return caller.token, audience, instance, write, create, scope


def parse_instance(value: Any, *, field: str = "instance") -> str | None:
    """An agent's stable, non-secret instance id: one line of at most 128 characters, or None."""
    return check_name(value, field, max_chars=INSTANCE_MAX, required=False)
