"""The engine: one per state directory, the API every entry point calls.

Each knowledge operation authorizes the caller first (on the caller's
thread), runs on the store's serialized lane with the caller's authority
re-checked just before the work, and checks authority again before it
returns anything.  Callers never name a store, path or scope.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, TypeVar

from .authority import Authority, Authorizer, Caller
from .config import SettingsSource
from .errors import Denied, InvalidParams, NotFound
from .faults import Faults
from .githistory import find_git
from .ids import format_timestamp, is_record_id, utc_now
from .inputs import parse_page_input, parse_remember_input
from .ontology import Ontology
from .publication import Plan, request_hash
from .reads import diagnostics, get_record, history
from .registry import SCOPES, Registry, StoreRecord
from .runtime import StoreRuntime
from .statedir import EngineLock, StateDir
from .store import Store, remove_abandoned_builds
from .stores import StoreResolver
from .watcher import VaultWatcher
from .writes import WriteContext, plan_remember, plan_save_page

T = TypeVar("T")


class Engine:
    def __init__(self, state: StateDir, *, watch: bool = True, git: bool = True,
                 faults: Faults | None = None) -> None:
        self.state = state
        self._lock = EngineLock(state)
        self._lock.acquire()
        try:
            self.settings = SettingsSource(state.config)
            self.registry = Registry.open(state.registry, state.root)
            self.resolver = StoreResolver(state, self.registry, self.settings)
            self.authorizer = Authorizer(self.registry, self.settings, self.resolver)
            self.ontology = Ontology.shipped()
            self.git_executable = find_git() if git else None
            self.faults = faults
            self._runtimes: dict[str, StoreRuntime] = {}
            self._runtimes_lock = threading.Lock()
            self.watcher = VaultWatcher() if watch else None
            remove_abandoned_builds(state.stores)
        except BaseException:
            self._lock.release()
            raise

    @classmethod
    def open(cls, state_dir: str | os.PathLike[str] | None = None, **options: Any) -> "Engine":
        return cls(StateDir.resolve(state_dir), **options)

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        with self._runtimes_lock:
            runtimes, self._runtimes = list(self._runtimes.values()), {}
        if self.watcher is not None:
            self.watcher.stop()
        for runtime in runtimes:
            runtime.close()
        self.registry.close()
        self._lock.release()

    # --- runtimes -----------------------------------------------------------------------

    def runtime(self, record: StoreRecord) -> StoreRuntime:
        """The store's one runtime, opened on first use (and reopened after an outage)."""
        with self._runtimes_lock:
            runtime = self._runtimes.get(record.store_id)
            if runtime is not None and runtime.unavailable is None:
                return runtime
            self.resolver.check(record)
            if runtime is not None:
                runtime.close()
                if self.watcher is not None:
                    self.watcher.unwatch(record.store_id)
            store = Store.open(record, self.ontology)
            runtime = StoreRuntime(store, self.settings, git_executable=self.git_executable, faults=self.faults)
            if self.watcher is not None:
                runtime.watching = self.watcher.watch(record.store_id, store.vault, runtime.mark_dirty)
            self._runtimes[record.store_id] = runtime
            return runtime

    def _on_store(self, caller: Caller, work: Callable[[StoreRuntime, Authority], T], *,
                  write: bool = False) -> T:
        authority = self.authorizer.authorize(caller, write=write)
        if authority.store is None:
            raise NotFound("this agent has no store yet; it is created on the agent's first use",
                           agent=authority.agent)
        runtime = self.runtime(authority.store)

        def fence() -> None:
            again = self.authorizer.authorize(caller, write=write, create=False)
            if again.partition != authority.partition or again.store != authority.store:
                raise Denied("the caller's authority changed while the request waited")

        result = runtime.run(authority.partition, lambda: work(runtime, authority), fence=fence, writes=write)
        fence()
        return result

    # --- knowledge: writes --------------------------------------------------------------

    def save_page(self, caller: Caller, params: dict[str, Any]) -> dict[str, Any]:
        """Create a page, or publish its next revision (``id`` + ``expectedRevision``)."""
        page = parse_page_input(params)
        digest = request_hash("save_page", page.digest_params())
        return self._publish(caller, page.request_id, digest, lambda ctx: plan_save_page(ctx, page, digest))

    def remember(self, caller: Caller, params: dict[str, Any]) -> dict[str, Any]:
        """Save claims (with corrections through ``replaces``) and relationships, each with its excerpt."""
        request = parse_remember_input(params)
        digest = request_hash("remember", request.digest_params())
        return self._publish(caller, request.request_id, digest, lambda ctx: plan_remember(ctx, request, digest))

    def _publish(self, caller: Caller, request_id: str, digest: str,
                 build: Callable[[WriteContext], Plan]) -> dict[str, Any]:
        """An identical retry returns the original receipt before anything is re-validated."""

        def work(runtime: StoreRuntime, authority: Authority) -> dict[str, Any]:
            existing = runtime.publisher.existing_receipt(authority.partition, request_id, digest)
            if existing is not None:
                return existing
            ctx = WriteContext(runtime.store, runtime.catalog, authority.partition, authority.agent,
                               authority.attribution(), format_timestamp(utc_now()))
            return runtime.publisher.publish(build(ctx))

        return self._on_store(caller, work, write=True)

    def resume(self, caller: Caller) -> dict[str, Any]:
        """Retry the git checkpoint of the caller's store now."""
        authority = self.authorizer.authorize(caller, write=True)
        if authority.store is None:
            raise NotFound("this agent has no store yet", agent=authority.agent)
        return self.runtime(authority.store).checkpoint()

    # --- knowledge: reads ---------------------------------------------------------------

    def get_record(self, caller: Caller, record_id: str, revision: int | None = None) -> dict[str, Any]:
        _check_id(record_id)
        if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int) or revision < 1):
            raise InvalidParams("revision must be a positive integer", field="revision")
        return self._on_store(caller, lambda rt, a: get_record(rt.store, rt.catalog, a.partition, record_id,
                                                                revision))

    def history(self, caller: Caller, record_id: str) -> dict[str, Any]:
        _check_id(record_id)
        return self._on_store(caller, lambda rt, a: history(rt.store, rt.catalog, a.partition, record_id))

    def diagnostics(self, caller: Caller) -> dict[str, Any]:
        return self._on_store(
            caller, lambda rt, a: diagnostics(rt.store, rt.catalog, a.partition, git=rt.git_summary()),
        )

    # --- owner administration -------------------------------------------------------------

    def add_agent(self, name: str, *, owner: bool = False, scopes: tuple[str, ...] = SCOPES) -> str:
        return self.registry.add_agent(name, owner=owner, scopes=scopes)

    def remove_agent(self, name: str) -> None:
        self.registry.remove_agent(name)

    def agents(self) -> list[dict[str, Any]]:
        return [
            {"name": agent.name, "owner": agent.owner, "scopes": list(agent.scopes), "createdAt": agent.created_at,
             "store": self.resolver.agent_view(agent.name)}
            for agent in self.registry.agents()
        ]

    def stores(self) -> list[dict[str, Any]]:
        return self.resolver.inventory()


def _check_id(record_id: Any) -> None:
    if not is_record_id(record_id):
        raise InvalidParams("id must be a record id", field="id")
