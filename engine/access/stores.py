"""Which store an agent uses, what stores exist, and how owners change membership.

Every agent has an effective store: its own isolated store, or the one named
store in config.json that lists it.  An agent listed in two named stores is
unavailable until the owner removes the duplicate; it is never resolved by
first match.  Stores are created on an agent's first authorized use only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, cast

from ..core.answers import NotRequired, TypedDict
from ..state.config import NamedStore, Settings, SettingsSource, is_store_name
from ..core.errors import Conflict, InvalidParams, NotFound, StoreUnavailable
from ..core.ids import STORE_PREFIX, new_id
from ..state.registry import Registry, StoreRecord
from ..state.statedir import StateDir
from ..store.store import check_presence, create_store_directory


class StoreEntry(TypedDict):
    """A store as the owner's inventory lists it.  ``storeId`` is null for a named store configured but not
    created yet; ``owner`` is an isolated store's, ``name`` and ``label`` a named store's."""

    storeId: str | None
    kind: str
    createdAt: NotRequired[str]
    status: str
    reason: str | None
    name: NotRequired[str | None]
    label: NotRequired[str | None]
    owner: NotRequired[str | None]
    agents: list[str]
    assigned: bool


class AgentStore(TypedDict):
    """An agent's effective store as the owner sees it: ``ok`` (with its id), ``not created`` or
    ``unavailable`` (with the reason)."""

    status: str
    reason: NotRequired[str]
    storeId: NotRequired[str]
    kind: NotRequired[str]
    name: NotRequired[str | None]


class AgentEntry(TypedDict):
    """A registered agent as the owner's inventory lists it, with its effective store."""

    name: str
    owner: bool
    scopes: list[str]
    createdAt: str
    store: AgentStore


@dataclass(frozen=True)
class StoreStatus:
    state: str  # "ok", "unavailable" or "not created"
    reason: str | None = None


class StoreResolver:
    def __init__(self, state: StateDir, registry: Registry, settings: SettingsSource) -> None:
        self.state = state
        self.registry = registry
        self.settings = settings
        self._creating = threading.Lock()  # concurrent first uses must create one store, not two
        self.on_created: Callable[[StoreRecord], None] = lambda record: None  # the engine's change feed

    def effective(self, agent: str, *, create: bool, settings: Settings | None = None) -> StoreRecord | None:
        """The agent's effective store; created only when ``create`` (an authorized use).

        Returns None when the store does not exist yet and ``create`` is false.  ``settings``: the settings
        in force as the caller read them a moment ago (one read of config.json per check).
        """
        names = (settings or self.settings.current()).named_stores_of(agent)
        if len(names) > 1:
            raise StoreUnavailable(
                f"agent {agent!r} is listed in more than one named store ({', '.join(names)}); "
                "remove the duplicate from config.json", agent=agent, stores=names,
            )
        def existing() -> StoreRecord | None:
            return self.registry.store_named(names[0]) if names else self.registry.own_store_of(agent)

        record = existing()
        if record is None and create:
            with self._creating:
                record = existing()
                if record is None:
                    record = self._create(kind="named" if names else "isolated", name=names[0] if names else None,
                                          created_for=None if names else agent)
        if record is not None:
            self.check(record)
        return record

    def select(self, *, store: str | None, agent: str | None, default_agent: str) -> StoreRecord:
        """The existing store ``store`` (a named store's name, or any store's id) or ``agent`` (that agent's
        effective store) names; with neither, ``default_agent``'s.  Nothing is created."""
        if store is not None and agent is not None:
            raise InvalidParams("name a store (--store) or an agent (--agent), not both", field="store")
        if store is not None:
            record = (self.registry.store(store) if store.startswith(STORE_PREFIX + "_")
                      else self.registry.store_named(store))
            if record is None:
                raise NotFound(f"no store {store!r} in {self.state.root} (`knowledge stores list` shows them)",
                               store=store)
            return record
        agent = agent or default_agent
        record = self.effective(agent, create=False)
        if record is None:
            raise NotFound(f"agent {agent!r} has no store in {self.state.root}; name one with --store or --agent "
                           "(`knowledge stores list` shows them)", agent=agent)
        return record

    def check(self, record: StoreRecord) -> None:
        """Fail closed, and remember why, when a store lost its directory, manifest or database."""
        try:
            check_presence(record)
        except StoreUnavailable as exc:
            self.registry.set_recovery(record.store_id, "unavailable", exc.message)
            raise

    def _create(self, *, kind: str, name: str | None, created_for: str | None) -> StoreRecord:
        store_id = new_id(STORE_PREFIX)
        create_store_directory(self.state.stores, store_id)
        record = self.registry.new_store(store_id=store_id, kind=kind, name=name, created_for=created_for)
        self.on_created(record)
        return record

    def status(self, record: StoreRecord) -> StoreStatus:
        try:
            check_presence(record)
        except StoreUnavailable as exc:
            return StoreStatus("unavailable", exc.message)
        return StoreStatus("ok")

    # --- inventory ----------------------------------------------------------------

    def inventory(self) -> list[StoreEntry]:
        """Every known store: used and unused isolated ones, named ones, unassigned ones."""
        settings = self.settings.current()
        stores: list[StoreEntry] = []
        seen_names = set()
        for record in self.registry.stores():
            status = self.status(record)
            entry: dict[str, Any] = {  # completed below: a named store's keys or an isolated one's
                "storeId": record.store_id, "kind": record.kind, "createdAt": record.created_at,
                "status": status.state, "reason": status.reason,
            }
            if record.kind == "named":
                seen_names.add(record.name)
                configured = settings.stores.get(record.name or "")
                entry.update(name=record.name, label=configured.label if configured else record.name,
                             agents=list(configured.agents) if configured else [],
                             assigned=configured is not None)
            else:
                owner = self.registry.bound_agent(record.store_id)
                bound = self.registry.agent(owner) if owner is not None else None
                in_use = bound is not None and bound.active and not settings.named_stores_of(owner)
                entry.update(owner=owner, agents=[owner] if in_use else [], assigned=in_use)
            stores.append(cast(StoreEntry, entry))
        for name, configured in sorted(settings.stores.items()):
            if name not in seen_names:
                stores.append({
                    "storeId": None, "kind": "named", "name": name, "label": configured.label,
                    "agents": list(configured.agents), "assigned": True, "status": "not created",
                    "reason": "created on a member's first use",
                })
        return stores

    def agent_view(self, agent: str) -> AgentStore:
        """An agent's effective store as the owner sees it, without creating anything."""
        try:
            record = self.effective(agent, create=False)
        except StoreUnavailable as exc:
            return {"status": "unavailable", "reason": exc.message}
        names = self.settings.current().named_stores_of(agent)
        if record is None:
            return {"status": "not created", "kind": "named" if names else "isolated",
                    "name": names[0] if names else None}
        return {"status": "ok", "storeId": record.store_id, "kind": record.kind, "name": record.name}

    # --- membership edits (owner only) -------------------------------------------

    def share_store(self, agent: str, name: str, *, label: str | None = None,
                    others: tuple[str, ...] = ()) -> None:
        """Turn the agent's isolated store into named store ``name`` and add ``others``.

        The store is renamed, not copied; agents already in another named
        store switch to this one.
        """
        if not is_store_name(name):
            raise InvalidParams("store names are 1-64 lowercase letters, digits, '-' or '_'", field="name")
        settings = self.settings.current()
        if settings.named_stores_of(agent):
            raise Conflict(f"agent {agent!r} already uses a named store", agent=agent)
        if name in settings.stores or self.registry.store_named(name) is not None:
            raise Conflict(f"a store named {name!r} already exists", store=name)
        record = self.registry.own_store_of(agent)
        if record is None:
            raise NotFound(f"agent {agent!r} has no store of its own yet to share", agent=agent)
        self.check(record)
        for member in (agent, *others):
            if self.registry.agent(member) is None:
                raise NotFound(f"no agent named {member!r}", agent=member)
        members = tuple(dict.fromkeys((agent, *others)))
        stores = _without(settings.stores, members)
        stores[name] = NamedStore(name, label or name, members)
        self.registry.rename_to_named(record.store_id, name)
        self.settings.save(settings.with_stores(stores))

    def use_shared_store(self, agent: str, name: str) -> None:
        """Move an agent to an existing named store; nothing is moved or merged."""
        settings = self.settings.current()
        if self.registry.agent(agent) is None:
            raise NotFound(f"no agent named {agent!r}", agent=agent)
        existing = settings.stores.get(name)
        if existing is None and self.registry.store_named(name) is None:
            raise NotFound(f"no store named {name!r}", store=name)
        stores = _without(settings.stores, (agent,))
        current = stores.get(name) or NamedStore(name, name, ())
        stores[name] = NamedStore(name, current.label, current.agents + (agent,))
        self.settings.save(settings.with_stores(stores))

    def use_own_store(self, agent: str) -> None:
        """Return an agent to its previous isolated store, or to a new empty one on first use."""
        settings = self.settings.current()
        if not settings.named_stores_of(agent):
            raise Conflict(f"agent {agent!r} already uses its own store", agent=agent)
        self.settings.save(settings.with_stores(_without(settings.stores, (agent,))))


def _without(stores: dict[str, NamedStore], agents: tuple[str, ...]) -> dict[str, NamedStore]:
    return {
        name: NamedStore(name, store.label, tuple(a for a in store.agents if a not in agents))
        for name, store in stores.items()
    }

