"""``knowledge sync clone URL --agent A``: a second machine joins a store that syncs through a remote.

The remote holds each store's branches as ``refs/heads/knowledge/<store id>/<machine id>``.  The clone
picks the store (the only one the remote holds, or the one ``storeId`` names when it holds several) and
creates, here, a new store with that store id: its own vault, partition markers and database (this
machine's), an isolated store of the agent, registered like any store; the agent is added when this
state directory does not know it (its token kept in ``tokens/``).  The remote is recorded as the store's
remote ``name`` (default ``origin``), this machine gets its machine id, and a first round fills the vault
from the remote's branches (a fast-forward from nothing, so the vault's history is the remote's) and
catalogues and indexes what came.

Refused with nothing created: an agent that already has a store here, a store id this state directory
already holds, a remote that holds no store (or several and no ``storeId``, or not the one named).  A
first round that fails after the store was created leaves the store (empty or partly filled, every
write journalled) with the round's error in its sync status: ``knowledge sync now`` finishes the job.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Protocol, TypeVar

from ..core.answers import NotRequired, TypedDict
from ..core.errors import Conflict, InvalidParams, NotFound
from ..core.ids import STORE_PREFIX, is_agent_name, is_generated_id
from ..core.jobs import Jobs
from ..core.params import AgentName, Flag, Params, Value
from .round import SyncRuntime
from ..access.stores import StoreResolver
from ..state.registry import Registry, StoreRecord
from ..state.statedir import StateDir
from ..store.store import create_store_directory
from .remotes import NAME_MAX_CHARS, URL_MAX_CHARS, RemoteBook, check_remote_name, check_remote_url
from .round import refused, run_round, sync_dir
from .status import SyncRemoteStatus
from .transport import Transport, machine_id

DEFAULT_REMOTE_NAME = "origin"
T = TypeVar("T")
# A clone's steps, as its job's phases: the remote's stores listed, the first round, the records catalogued.
LISTING, FETCHING, CATALOGUING = "listing", "fetching", "cataloguing"
Phase = Callable[[str, str], None]  # (phase, what it does, in words)


class SyncEngine(Protocol):
    """What sync needs of the engine (engine/service.py's Engine)."""

    @property
    def state(self) -> StateDir: ...

    @property
    def resolver(self) -> StoreResolver: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def git_executable(self) -> str | None: ...

    @property
    def jobs(self) -> Jobs: ...

    def runtime(self, record: StoreRecord) -> SyncRuntime: ...

    def sync_store(self, record: StoreRecord, remote: str | None = None) -> list[SyncRemoteStatus]: ...

    def maintain(self, record: StoreRecord, work: Callable[[SyncRuntime], T]) -> T: ...


class SyncCloned(TypedDict):
    """The store cloned: its id, the agent whose store it is and whether it has owner authority here, this
    machine's id, the remote's status after the first round, the records now current; ``tokenFile`` when the
    agent was added here."""

    storeId: str
    agent: str
    owner: bool
    machineId: str
    remote: SyncRemoteStatus
    records: int
    tokenFile: NotRequired[str]


def _store_id(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.startswith(STORE_PREFIX + "_") or not is_generated_id(value):
        raise InvalidParams(f"{field} must be a store id (st_ and 26 letters or digits)", field=field)
    return value


CLONE = Params(Value("url", check_remote_url, required=True, json={"type": "string", "maxLength": URL_MAX_CHARS}),
               AgentName("agent", required=True, description="the agent whose store the clone becomes"),
               Value("storeId", _store_id, json={"type": "string", "maxLength": 29},
                     description="the store to clone when the remote holds several"),
               Value("name", check_remote_name, json={"type": "string", "maxLength": NAME_MAX_CHARS},
                     description=f"the remote's name here (default: {DEFAULT_REMOTE_NAME})"),
               Flag("owner", default=False, description="add the agent with owner authority (the owner's own agent "
                    "on a second machine: it reads the private partition); an agent already here keeps its own"))


def clone_store(engine: SyncEngine, url: str, agent: str, *, store_id: str | None = None,
                name: str | None = None, owner: bool = False, phase: Phase | None = None) -> SyncCloned:
    """Create this machine's copy of the store the remote at ``url`` holds, for ``agent`` (added with owner
    authority when ``owner`` and this machine does not know it yet); see the module.  ``phase`` hears each
    step begin (``LISTING``, ``FETCHING``, ``CATALOGUING``)."""
    begin: Phase = phase or (lambda _phase, _words: None)
    url, name = check_remote_url(url), check_remote_name(name or DEFAULT_REMOTE_NAME)
    if not is_agent_name(agent):
        raise InvalidParams("agent must name an agent (1-64 lowercase letters, digits, '-' or '_')", field="agent")
    if store_id is not None:
        _store_id(store_id, "storeId")
    book = RemoteBook(engine.state, engine.resolver)
    book.refuse_state_path(url)
    own = engine.registry.own_store_of(agent)
    if own is not None:
        raise Conflict(f"agent {agent!r} already has its own store {own.store_id}; clone for another agent (nothing "
                       "was created)", agent=agent, store=own.store_id)
    known = engine.registry.agent(agent)
    if owner and known is not None and not known.owner:
        raise Conflict(f"agent {agent!r} is registered here without owner authority, and a clone never changes an "
                       "agent's authority: clone for another agent, or remove this one and clone again (nothing was "
                       "created)", agent=agent)
    begin(LISTING, "Reading which stores the remote holds")
    chosen = _chosen_store(engine, url, store_id)
    if engine.registry.store(chosen) is not None:
        raise Conflict(f"store {chosen} is already here; `knowledge sync now --store {chosen}` syncs it (nothing "
                       "was created)", store=chosen)
    token_file = None
    if known is None:
        token = engine.registry.add_agent(agent, owner=owner)
        token_file = str(engine.state.write_agent_token(agent, token))
    create_store_directory(engine.state.stores, chosen)
    record = engine.registry.new_store(store_id=chosen, kind="isolated", name=None, created_for=agent)
    engine.resolver.on_created(record)
    book.add(name, url, store=chosen)
    machine = machine_id(sync_dir(record))
    runtime = engine.runtime(record)
    begin(FETCHING, f"Fetching store {chosen} and filling its vault")
    [status] = run_round(runtime, record, name)
    begin(CATALOGUING, "Cataloguing the records that came")
    answer: SyncCloned = {"storeId": chosen, "agent": agent, "owner": owner if known is None else known.owner,
                          "machineId": machine, "remote": status,
                          "records": engine.maintain(record, lambda runtime: runtime.rebuild_catalogue())}
    if token_file is not None:
        answer["tokenFile"] = token_file
    return answer


def _chosen_store(engine: SyncEngine, url: str, store_id: str | None) -> str:
    """The store id to clone: the only one the remote holds, or ``store_id``, which it must hold."""
    if engine.git_executable is None:
        raise refused("git_missing", "git is not installed on this machine; a store is cloned through git")
    scratch = Path(tempfile.mkdtemp(prefix=".clone-", dir=engine.state.root))
    try:
        # Listing names no store or machine of this state directory: placeholders fill the transport's ids.
        stores = Transport(scratch, engine.git_executable, "listing", "listing", scratch / "none").stores_on(url)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if store_id is not None:
        if store_id not in stores:
            raise NotFound(f"the remote holds no store {store_id} (it holds {_listed(stores)})", store=store_id)
        return store_id
    if not stores:
        raise NotFound("the remote holds no store yet: sync a store into it from another machine first "
                       "(knowledge sync remote add, then knowledge sync now)")
    if len(stores) > 1:
        raise InvalidParams(f"the remote holds several stores ({_listed(stores)}); choose one with --store-id",
                            field="storeId")
    return next(iter(stores))


def _listed(stores: dict[str, Any]) -> str:
    return ", ".join(sorted(stores)) or "none"
