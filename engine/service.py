"""The engine: one per state directory, the API every entry point calls.

Each knowledge operation authorizes the caller first (on the caller's
thread), runs on the store's serialized lane with the caller's authority
re-checked just before the work, and checks authority again before it
returns anything.  Callers never name a store, path or scope.

``enter`` (and ``on_store``, for work of one step) is the one way features
reach a store; ``authorize`` alone grants nothing on it.  Features name
what they need of the engine as small protocols (``access.authority.
StoreEntry`` and their own), which this class satisfies.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from typing import Any, Callable, Iterable, TypeVar, cast

from models.installed import ModelStore

from .access.authority import Authority, Authorizer, Caller
from .state.config import SettingsSource
from .store.attachments import ATTACH_MAX_BYTES, kept_name_note
from .store.credentials import CleanContents, refuse_secrets, texts_of
from .index.analysis import Analyzer
from .decision.runtime import DecisionRuntime
from .core.errors import Denied, IndexFailed, InvalidParams, NotFound, StoreUnavailable
from .core.faults import Faults
from .core.params import Params
from .store.githistory import find_git
from .core.ids import format_timestamp, utc_now
from .store.inputs import FLUSH_ID, page_texts, parse_page_input, parse_remember_input
from .vault.ontology import Ontology
from .core.changes import ChangeFeed
from .core.links import with_link, with_record_links
from .core.connections import RecentConnections
from .core.jobs import Jobs
from .store.publication import Plan, request_hash
from .store.groups import PlanReads
from .memory.recall import flush_request_id
from .search.passages import PassageFinder
from .search.hybrid import hybrid_hits
from .store.reads import (
    HISTORY_PARAMS, LOOKUP_PARAMS, READ_PARAMS, RECORD_ID, RECORD_PARAMS, diagnostics, get_record, history,
    as_of, read_reference, record_summary, reference,
)
from .vault.records import PRIVATE_SCOPE
from .state.registry import SCOPES, Grant, Registry, StoreRecord
from .index.embedding import NOT_CONFIGURED, NOT_INSTALLED, EmbeddingRuntime
from .index.similarity import DECISION_LOADERS
from .runtime import StoreRuntime
from .search.keyword import (
    MEMORY_SEARCH_PARAMS, OPERATOR_SEARCH_PARAMS, CursorSigner, GrepAnswer, OwnerHits, OwnerSearchAnswer,
    SearchRequest, parse_query_text, parse_search_request, search, unknown_type_note,
)
from .store.answers import (
    Diagnostics, Health, LookupAnswer, LookupMatch, PageReceipt, Receipt, RecordHistory, RecordRead, ReferenceRead,
    RememberReceipt, ResumeAnswer, StatusAnswer,
)
from .state.statedir import EngineLock, StateDir
from .store.open_store import ReadView
from .store.store import Store, remove_abandoned_builds
from .access.stores import AgentEntry, StoreEntry, StoreResolver
from .store.watcher import VaultWatcher
from .store.writes import WriteContext, plan_remember, plan_save_page
from .sync.remotes import read_remotes
from .sync.round import run_round
from .sync.scheduler import AutoSync, SyncedStore, stores_with_remotes
from .sync.status import SyncRemoteStatus

T = TypeVar("T")



class Engine:
    def __init__(self, state: StateDir, *, watch: bool = True, git: bool = True,
                 faults: Faults | None = None) -> None:
        self.state = state
        self._lock = EngineLock(state)
        self._lock.acquire()
        try:
            # What changed, for the owner's window (operator/subscribe); publishing never waits for it.
            self.changes = ChangeFeed()
            self._runtimes: dict[str, StoreRuntime] = {}
            self._runtimes_lock = threading.Lock()
            # The agents and instances seen connected recently (operator/connections), in memory only.
            self.connections = RecentConnections()
            self.settings = SettingsSource(state.config)
            self.settings.on_changed = self._settings_changed
            self.clean_contents = CleanContents(ATTACH_MAX_BYTES)  # files already scanned for credentials
            self.registry = Registry.open(state.registry, state.root)
            self.resolver = StoreResolver(state, self.registry, self.settings)
            self.resolver.on_created = lambda record: self.changes.publish("stores", storeId=record.store_id)
            self.authorizer = Authorizer(self.registry, self.settings, self.resolver)
            self.ontology = Ontology.shipped()
            self.analyzer = Analyzer()
            self.passage_finder = PassageFinder(self.analyzer)
            self.signer = CursorSigner(self.registry.secret("cursor"))
            self.git_executable = find_git() if git else None
            self.faults = faults
            self.watcher = VaultWatcher() if watch else None
            remove_abandoned_builds(state.stores)
            # Loads the configured Decision model on its own thread at start() or the first question.
            self.decision = DecisionRuntime(self.settings.current, ModelStore(state.models), loaders=DECISION_LOADERS)
            # The embedding model of search_knowledge's semantic modes, loaded on first use.
            self.embeddings = EmbeddingRuntime(self.settings.current, ModelStore(state.models))
            # The operator's long work (model downloads, benchmarks, gate replays), each on its own thread.
            self.jobs = Jobs(lambda job: self.changes.publish("jobs", job=job.id, kind=job.kind, state=job.state))
            # Each store with remotes syncs by itself once serving starts (start_sync); None until then.
            self.autosync: AutoSync | None = None
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

    def stop_work(self) -> None:
        """Have each store's long owner work (a reindex embedding its vectors) end at its next step, so the
        requests waiting on it are answered soon; ``close`` follows (``knowledge serve`` stopping)."""
        with self._runtimes_lock:
            runtimes = list(self._runtimes.values())
        for runtime in runtimes:
            runtime.ask_stop()

    def close(self) -> None:
        if self.autosync is not None:
            self.autosync.stop()  # before the stores close: a round still running then is abandoned, crash-safe
        self.jobs.close()
        self.decision.close()
        with self._runtimes_lock:
            runtimes, self._runtimes = list(self._runtimes.values()), {}
        if self.watcher is not None:
            self.watcher.stop()
        for runtime in runtimes:
            runtime.close()
        self.registry.close()
        self._lock.release()

    # --- sync ---------------------------------------------------------------------------

    def start_sync(self) -> None:
        """Sync each store with remotes by itself from now until ``close`` (engine/sync/scheduler.py): after
        its publications, batched, and on a timer, as config.json's ``sync`` block says."""
        if self.autosync is None:
            self.autosync = AutoSync(self._sync_round, self._synced_stores, lambda: self.settings.current().sync,
                                     self.changes)
            self.autosync.start()

    def _synced_stores(self) -> dict[str, SyncedStore]:
        return stores_with_remotes(self.registry.stores())

    def _sync_round(self, store_id: str, remote: str) -> SyncRemoteStatus:
        record = self.registry.store(store_id)
        if record is None:
            raise NotFound(f"store {store_id} no longer exists", store=store_id)
        [status] = run_round(self.runtime(record), record, remote)
        return status

    def sync_store(self, record: StoreRecord, remote: str | None = None) -> list[SyncRemoteStatus]:
        """A round of the store now, with ``remote`` or every remote it has (the owner's ``sync now``): while
        serving, it waits for an automatic round of the store that runs, and a success ends the remote's
        backoff; the window hears of it on the ``sync`` topic either way."""
        if self.autosync is None:
            self.changes.publish("sync", storeId=record.store_id)
            try:
                return run_round(self.runtime(record), record, remote)
            finally:
                self.changes.publish("sync", storeId=record.store_id)
        remotes = [entry["name"] for entry in read_remotes(record)]
        if remote is not None:
            if remote not in remotes:
                return run_round(self.runtime(record), record, remote)  # its NotFound names the remote
            remotes = [remote]
        return self.autosync.sync_now(record.store_id, tuple(remotes))

    # --- runtimes -----------------------------------------------------------------------

    def _settings_changed(self) -> None:
        """config.json changed: the window hears of it, and each open store's vectors are compared again (what
        they hold follows settings: the Knowledge Base runtime, evidence passages for hybrid gate candidates)."""
        self.changes.publish("stores")
        with self._runtimes_lock:
            runtimes = list(self._runtimes.values())
        for runtime in runtimes:
            runtime.vector_feed.queue()

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
            runtime = StoreRuntime(store, self.settings, self.analyzer, git_executable=self.git_executable,
                                   faults=self.faults, embeddings=self.embeddings, changes=self.changes)
            if self.watcher is not None:
                runtime.watching = self.watcher.watch(record.store_id, store.vault, runtime.mark_dirty)
            self._runtimes[record.store_id] = runtime
            return runtime

    # --- the one way into a store ------------------------------------------------------

    def authorize(self, caller: Caller, *, write: bool = False, scope: str | None = None,
                  create: bool = True) -> Authority:
        """Who ``caller`` is and which partition it reaches, or Denied / WritesDisabled / StoreUnavailable.

        Grants nothing on the store (``enter`` does): for callers that must
        check who asks before anything else, such as what is configured.
        ``create`` lets an agent's first authorized use create its store.
        """
        return self.authorizer.authorize(caller, write=write, create=create, scope=scope)

    def can_save(self, caller: Caller) -> bool:
        """Whether ``caller`` could save knowledge now (the memory prompt's save guidance); grants nothing."""
        return self.authorizer.can_save(caller)

    def enter(self, caller: Caller, *, write: bool = False, scope: str | None = None,
              create: bool = True) -> "EngineEntry":
        """Authorize ``caller`` now; the entry runs work on its store's lane (``EngineEntry.run``)."""
        return EngineEntry(self, caller, self.authorize(caller, write=write, scope=scope, create=create),
                           write=write, scope=scope)

    def on_store(self, caller: Caller, work: Callable[[StoreRuntime, Authority], T], *,
                 write: bool = False, scope: str | None = None, create: bool = True) -> T:
        """Authorize ``caller`` and run ``work(runtime, authority)`` on its store's lane.

        The one way engine features reach a store (``enter`` when the work
        takes several steps): authority is checked before queueing,
        re-checked on the lane right before the work, and checked again
        before the result is returned.
        """
        return self.enter(caller, write=write, scope=scope, create=create).run(work)

    def maintain(self, record: StoreRecord, work: Callable[[StoreRuntime], T]) -> T:
        """Run the owner's own work on ``record``'s store, on its lane: figures, an export, a rebuild.

        The owner reaches every store, so there is no caller to authorize; what an agent or the desktop
        asks goes through ``enter``.  Either way features queue nothing on a lane themselves.
        """
        runtime = self.runtime(record)
        return runtime.call(lambda: work(runtime))

    # --- knowledge: writes --------------------------------------------------------------

    def save_page(self, caller: Caller, params: dict[str, Any]) -> PageReceipt:
        """Create a page, or publish its next revision (``id`` + ``expectedRevision``)."""
        page = parse_page_input(_flush_request(params, "save_page"))
        self.refuse_secrets(page_texts(params, page))
        digest = request_hash("save_page", page.digest_params())
        receipt = cast(PageReceipt, self._publish(caller, page.request_id, digest,
                                                  lambda ctx: plan_save_page(ctx, page, digest)))
        return _said_of_filenames(receipt, params)

    def remember(self, caller: Caller, params: dict[str, Any]) -> RememberReceipt:
        """Save claims (with corrections through ``replaces``) and relationships, each with its excerpt."""
        request = parse_remember_input(_flush_request(params, "remember"))
        self.refuse_secrets(texts_of(params))
        digest = request_hash("remember", request.digest_params())
        return cast(RememberReceipt, self._publish(caller, request.request_id, digest,
                                                   lambda ctx: plan_remember(ctx, request, digest)))

    def refuse_secrets(self, texts: Iterable[tuple[str, str | bytes]]) -> None:
        """Refuse a write whose text holds a credential (``secret_detected``), unless the owner set
        ``allowSecrets``; called after parsing, before anything is queued or journalled.  A value in bytes
        is a file's content, which is not scanned again once found clean (``CleanContents``)."""
        refuse_secrets(texts, allowed=self.settings.current().allow_secrets, clean=self.clean_contents)

    def _publish(self, caller: Caller, request_id: str, digest: str,
                 build: Callable[[WriteContext], Plan]) -> Receipt:
        """An identical retry returns the original receipt before anything is re-validated."""

        def plan(runtime: StoreRuntime, authority: Authority, catalog: PlanReads) -> Plan | Receipt:
            existing = runtime.publisher.existing_receipt(authority.partition, request_id, digest)
            if existing is not None:
                return existing
            ctx = WriteContext(runtime.store, catalog, authority.partition, authority.agent,
                               authority.attribution(), format_timestamp(utc_now()), runtime.source_lines)
            return build(ctx)

        entry = self.enter(caller, write=True)
        receipt = entry.write(plan)
        store = entry.authority.store
        return with_record_links(receipt, store.store_id if store else None, entry.authority.partition)

    def resume(self, caller: Caller) -> ResumeAnswer:
        """Retry the git checkpoint of the caller's store now, and report the caller's partition only.

        The checkpoint commits the whole store's queue, but the reply (state, pending count, last error, the
        commit holding the partition's newest publication) is the partition's: a store-wide commit id or
        count would change with every write of partitions the caller cannot see.
        """
        entry = self.enter(caller, write=True)
        authority = entry.authority
        if authority.store is None:
            raise NotFound("this agent has no store yet", agent=authority.agent)
        checkpoint = self.runtime(authority.store).checkpoint()
        if checkpoint["state"] == "unavailable":
            return {"state": "unavailable", "reason": checkpoint["reason"]}
        summary = entry.run(lambda rt, a: rt.git_summary(a.partition))
        reply: ResumeAnswer = {"state": summary["state"]}
        if summary["state"] == "pending":
            reply["reason"] = summary["lastError"] or "the checkpoint has not reached these publications yet"
            reply["publications"] = summary["pending"]
        else:
            reply["publications"] = checkpoint.get("byPartition", {}).get(authority.partition, 0)
        if summary["commit"] is not None:
            reply["commit"] = summary["commit"]
        if "index" in checkpoint and authority.partition == PRIVATE_SCOPE:
            reply["index"] = checkpoint["index"]  # a damaged git index is the owner's to repair, not a chat's
        return reply

    # --- knowledge: reads ---------------------------------------------------------------

    def get_record(self, caller: Caller, record_id: str, revision: int | None = None,
                   as_of_moment: Any = None) -> RecordRead:
        """The exact read of a record; one of the private partition carries its ``link`` (any revision: the
        link names the record).  A claim with validity says whether it holds as of ``as_of_moment``."""
        request = RECORD_PARAMS.read({"id": record_id, "revision": revision, "asOf": as_of_moment})
        return self.enter(caller).read(lambda rt, a, view: with_link(
            get_record(view.store, view.catalog, a.partition, request["id"], request["revision"], as_of(request)),
            view.store.store_id, a.partition))

    def history(self, caller: Caller, record_id: str) -> RecordHistory:
        record_id = HISTORY_PARAMS.read({"id": record_id})["id"]
        return self.enter(caller).read(lambda rt, a, view: with_link(history(view.catalog, a.partition, record_id),
                                                                     view.store.store_id, a.partition))

    def diagnostics(self, caller: Caller) -> Diagnostics:
        return self.on_store(
            caller, lambda rt, a: diagnostics(rt.store, rt.catalog, a.partition, git=rt.git_summary(a.partition)),
        )

    def search(self, caller: Caller, params: dict[str, Any], *,
               declared: Params = MEMORY_SEARCH_PARAMS, links: bool = False,
               owner: bool = False) -> GrepAnswer | OwnerHits:
        """Keyword BM25 search over the caller's current records (``declared``: what the calling method takes,
        by default ``memory/search``'s parameters). With ``links`` (the native tool), each hit of the private
        partition carries its record's ``link``, and a first page with no hit for a ``type`` the store's ontology
        does not define says so in ``note``; the shared ``memory/search`` stays its contract's projection.
        The ``owner``'s search (the window, ``knowledge search``) does not let function words make a hit alone,
        and its snippets are plain words (engine/search/plain.py); agents' searches match any query word and get
        the fragment as written, as their contract says."""
        request = parse_search_request(params, declared)
        if owner:
            request = self._owners(request)

        def work(runtime: StoreRuntime, authority: Authority, view: ReadView) -> GrepAnswer | OwnerHits:
            index, version, overlay = runtime.indexes.for_search(authority.partition, view.version, view.catalog.db)
            result = search(view.store, view.catalog, index, version, self.analyzer, self.signer,
                            authority.partition, request, overlay)
            if links:
                result["hits"] = [with_link(hit, view.store.store_id, authority.partition) for hit in result["hits"]]
            return result

        entry = self.enter(caller)
        result = entry.read(work)
        if links and not result["hits"] and request.type is not None and request.cursor is None:
            # The ontology is read on the lane, which keeps it current (the snapshot a search reads has no copy).
            type_asked = request.type
            note = entry.run(lambda runtime, authority: unknown_type_note(
                runtime.catalog, authority.partition, runtime.store.ontology(authority.partition), type_asked,
                request.kind))
            if note is not None:
                cast(GrepAnswer, result)["note"] = note
        return result

    def owner_search(self, caller: Caller, params: dict[str, Any]) -> OwnerSearchAnswer:
        """The owner's search (``operator/search``, ``knowledge search``) in the ``mode`` asked: keyword, hybrid
        (engine/search/hybrid.py) or auto, hybrid when an embedding model is loaded; the records whose title or
        alias is exactly the query lead the first page wherever the ranking puts them, and later pages leave them
        out (engine/search/keyword.py's ``named_hits``).  Hybrid answers one page; a later page (a cursor) is
        always keyword's.  The first hybrid search of a store has its vectors follow
        publications from then on (``StoreRuntime.follow_for_owner``)."""
        mode = OPERATOR_SEARCH_PARAMS.read(params)["mode"]
        embedder = self.embeddings.current() if self.embeddings is not None and mode != "keyword" else None
        if embedder is None or params.get("cursor") is not None:
            answer: OwnerSearchAnswer = {**self.search(caller, params, declared=OPERATOR_SEARCH_PARAMS, owner=True),
                                         "mode": "keyword"}
            if embedder is None and mode != "keyword":
                answer["embedding"], answer["hybridUnavailable"] = self._why_no_embedding()
            return answer
        request = self._owners(parse_search_request(params, OPERATOR_SEARCH_PARAMS))

        def work(runtime: StoreRuntime, authority: Authority) -> OwnerSearchAnswer:
            runtime.follow_for_owner()
            partition = authority.partition
            runtime.indexes.catch_up(partition)
            found, ready = hybrid_hits(runtime.store, runtime.catalog, runtime.indexes.get(partition), runtime.vectors,
                                       embedder, self.analyzer, partition, request)
            if not ready:  # a change no publication announced (a note edited or deleted in the vault): catch up
                runtime.vector_feed.queue(partition)
            return {**found, "mode": "hybrid", "vectors": "ready" if ready else "building"}

        return self.on_store(caller, work)

    def _owners(self, request: SearchRequest) -> SearchRequest:
        """``request`` as the owner's search runs it: function words cannot make a hit alone, snippets are
        plain words with the query's meaningful words marked (all of them for a query of function words), and
        the records titled or aliased exactly as the query lead the first page."""
        terms = self.analyzer.query_terms(request.query)
        meaningful = [term for term in terms if term not in self.analyzer.function_terms]
        return replace(request, unmatched_alone=self.analyzer.function_terms,
                       marked=frozenset(meaningful or terms), names_first=True)

    def _why_no_embedding(self) -> tuple[str, str]:
        """The embedding model's state, and why the owner's search cannot be hybrid now in the owner's words,
        with what to do."""
        status = self.embeddings.status() if self.embeddings is not None else None
        if status is None or status.state == NOT_CONFIGURED:
            return NOT_CONFIGURED, "no embedding model is chosen (embeddingModel is null in the settings)"
        name = (status.model or "").partition("/")[2]
        if status.state == NOT_INSTALLED:
            return NOT_INSTALLED, f"the embedding model {name} is not installed: knowledge models pull {name}"
        return status.state, f"the embedding model {name} did not load: {status.reason}"

    def read(self, caller: Caller, params: dict[str, Any]) -> ReferenceRead:
        """Lines of the exact revision a search reference names (``from``, ``lines``)."""
        request = READ_PARAMS.read(params)
        return self.enter(caller).read(lambda rt, a, view: read_reference(
            view.store, view.catalog, a.partition, request["ref"], request["from"], request["lines"], as_of(request)))

    def lookup(self, caller: Caller, name: Any, as_of_moment: Any = None) -> LookupAnswer:
        """Exact lookup by id, title or alias; a name shared by several records resolves to none.  Claims
        that do not hold as of ``as_of_moment`` (default now) are left out."""
        request = LOOKUP_PARAMS.read({"name": name, "asOf": as_of_moment})
        name, moment = request["name"], as_of(request)

        def work(runtime: StoreRuntime, authority: Authority, view: ReadView) -> LookupAnswer:
            ids = view.catalog.lookup(authority.partition, name.strip())
            rows = [view.catalog.rows_for_id(authority.partition, record_id)[0] for record_id in ids]
            rows = [row for row in rows if row.view.valid_at(moment)]
            if len(rows) != 1:
                return {"matches": [], "ambiguous": len(rows) > 1}
            row = rows[0]
            match: LookupMatch = {**record_summary(row), "ref": reference(view.store.store_id, row)}
            return {"matches": [with_link(match, view.store.store_id, authority.partition)], "ambiguous": False}

        return self.enter(caller).read(work)

    def passages(self, caller: Caller, record_id: str, message: str, *, excerpts: int = 4,
                 excerpt_chars: int = 1000, page_chars: int = 2800) -> list[str]:
        """The passages of a current page that best match ``message`` (the recall gate's excerpts)."""
        message = parse_query_text(message)

        def work(runtime: StoreRuntime, authority: Authority) -> list[str]:
            record = get_record(runtime.store, runtime.catalog, authority.partition, record_id)
            if record["status"] != "current":
                raise NotFound("no current record with that id", id=record_id)
            found = self.passage_finder.best(record["body"], message, max_passages=excerpts,
                                             passage_chars=excerpt_chars, page_chars=page_chars)
            return [passage.text for passage in found]

        RECORD_ID.check(record_id, "id")
        return self.on_store(caller, work)

    def status(self, caller: Caller) -> StatusAnswer:
        """Readiness only, for status handles: no counts, scope, ids or paths; never creates a store."""
        try:
            entry = self.enter(caller, create=False)
        except StoreUnavailable:
            return {"ready": False}
        if entry.authority.store is None:
            return {"ready": True}
        try:
            entry.run(lambda rt, a: rt.indexes.catch_up(a.partition))
        except (StoreUnavailable, IndexFailed):
            return {"ready": False}
        return {"ready": True}

    def health(self, caller: Caller) -> Health:
        """Scoped vault and ontology validation for the caller's partition."""
        report = self.diagnostics(caller)
        errors = sum(1 for f in report["findings"] if f.get("severity", "error") == "error")
        return {"ok": errors == 0 and report["pendingPublications"] == 0, "errors": errors,
                "warnings": sum(1 for f in report["findings"] if f.get("severity") == "warning"), **report}

    def reindex(self) -> list[dict[str, Any]]:
        """Rebuild every search index, and the vector index when an embedding model is installed, from its
        catalog (owner maintenance).  The vectors are those the owner's hybrid search reads (long pages' own
        passages included), and follow publications from then on, as after that search (``follow_for_owner``):
        a reindex that left them short of it would leave the search saying a reindex is still wanted."""
        rebuilt = []
        embedder = self.embeddings.current()
        for record in self.registry.stores():

            def rebuild_all(runtime: StoreRuntime, record: StoreRecord = record) -> list[dict[str, Any]]:
                results = []
                if embedder is not None:
                    runtime.follow_for_owner()
                for partition in runtime.store.partitions():
                    runtime.prepare(partition)
                    runtime.indexes.rebuild(partition)
                    count = runtime.indexes.ledger.indexed_count(partition)
                    entry = {"storeId": record.store_id, "partition": partition, "records": count}
                    if embedder is not None:
                        entry["vectors"] = runtime.vectors.rebuild(partition, embedder,
                                                                   stop=runtime.stop_asked).to_dict()
                    results.append(entry)
                return results

            rebuilt.extend(self.maintain(record, rebuild_all))
        return rebuilt

    # --- owner administration -------------------------------------------------------------

    def add_agent(self, name: str, *, owner: bool = False, scopes: tuple[str, ...] = SCOPES) -> str:
        token = self.registry.add_agent(name, owner=owner, scopes=scopes)
        self.changes.publish("stores")
        return token

    def remove_agent(self, name: str) -> None:
        self.registry.remove_agent(name)
        self.changes.publish("stores")
        self.changes.publish("grants", agent=name)

    def set_grant(self, agent: str, session_key: str, access: str) -> Grant:
        """Let the conversations under ``session_key`` of ``agent`` read (or read and save) the private partition."""
        known = self.registry.agent(agent)
        if known is None or not known.active:
            raise NotFound(f"no agent named {agent!r}", agent=agent)
        grant = self.registry.set_grant(agent, session_key, access)
        self.changes.publish("grants", agent=agent)
        return grant

    def remove_grant(self, agent: str, session_key: str) -> None:
        """Revoke a grant; the conversation's next request is authorized without it."""
        self.registry.remove_grant(agent, session_key)
        self.changes.publish("grants", agent=agent)

    def agents(self) -> list[AgentEntry]:
        return [
            {"name": agent.name, "owner": agent.owner, "scopes": list(agent.scopes), "createdAt": agent.created_at,
             "store": self.resolver.agent_view(agent.name)}
            for agent in self.registry.agents()
        ]

    def stores(self) -> list[StoreEntry]:
        return self.resolver.inventory()


class EngineEntry:
    """An authorized caller at its store (``Engine.enter``); implements ``access.authority.Entry``."""

    def __init__(self, engine: Engine, caller: Caller, authority: Authority, *, write: bool,
                 scope: str | None) -> None:
        self._engine, self._caller, self._write, self._scope = engine, caller, write, scope
        self._authority = authority
        # Entries whose ``recheck`` answers alike: the same caller, asking the same, where it was let in.
        self._fence_key = (engine.authorizer, type(caller), repr(caller), write, scope, authority.partition,
                           authority.store.store_id if authority.store is not None else None)

    @property
    def authority(self) -> Authority:
        """What the caller was authorized for when it entered; ``run`` and ``recheck`` hold it to that."""
        return self._authority

    def run(self, work: Callable[[StoreRuntime, Authority], T], *, timeout: float | None = None) -> T:
        """``work(runtime, authority)`` on the store's lane, authority re-checked right before it and after."""
        authority = self.authority
        if authority.store is None:
            raise NotFound("this agent has no store yet; it is created on the agent's first use",
                           agent=authority.agent)
        runtime = self._engine.runtime(authority.store)
        result = runtime.run(authority.partition, lambda: work(runtime, authority), fence=self.recheck,
                             writes=self._write, timeout=timeout)
        self.recheck()
        return result

    def write(self, plan: Callable[[StoreRuntime, Authority, PlanReads], Plan | Receipt]) -> Receipt:
        """Publish what ``plan(runtime, authority, catalog)`` plans, on the store's lane together with the
        writes queued beside it (``StoreRuntime.write``), authority re-checked right before and after."""
        authority = self.authority
        if authority.store is None:
            raise NotFound("this agent has no store yet; it is created on the agent's first use",
                           agent=authority.agent)
        runtime = self._engine.runtime(authority.store)
        receipt = runtime.write(authority.partition, lambda catalog: plan(runtime, authority, catalog),
                                fence=self.recheck, fence_key=self._fence_key)
        self.recheck()
        return receipt

    def read(self, work: Callable[[StoreRuntime, Authority, ReadView], T]) -> T:
        """``work(runtime, authority, view)`` beside the store's lane when it can be (``StoreRuntime.read``),
        authority re-checked right before it and after, as ``run``."""
        authority = self.authority
        if authority.store is None:
            raise NotFound("this agent has no store yet; it is created on the agent's first use",
                           agent=authority.agent)
        runtime = self._engine.runtime(authority.store)
        result = runtime.read(authority.partition, lambda view: work(runtime, authority, view), fence=self.recheck)
        self.recheck()
        return result

    def recheck(self) -> None:
        """Authorize again, never creating a store; Denied once the caller reaches another partition or store."""
        again = self._engine.authorize(self._caller, write=self._write, scope=self._scope, create=False)
        if again.partition != self.authority.partition or again.store != self.authority.store:
            raise Denied("the caller's authority changed while the request waited")


def _flush_request(params: Any, operation: str) -> Any:
    """During a pre-compaction flush a save may give ``flushId`` instead of ``requestId``.

    The request id is then derived from the flush id and the page title or
    the claim texts, so the flush's identical retry returns the original receipt.
    Neither given is refused saying both: the published schema requires neither on its own.
    """
    if not isinstance(params, dict):
        return params
    if params.get("requestId") is None and params.get("flushId") is None:
        raise InvalidParams("requestId is required: a fresh id of your choosing for this write (an identical "
                            "retry with the same id returns the first receipt); during a pre-compaction flush, "
                            "the host's flushId instead", field="requestId")
    if "flushId" not in params:
        return params
    flush_id = FLUSH_ID.take(params)  # checked even beside a requestId: the schema promises its form
    params = {key: value for key, value in params.items() if key != "flushId"}
    if flush_id is None or params.get("requestId") is not None:  # a null requestId is none given
        return params
    if operation == "save_page":
        texts = [params.get("title")]
    else:
        items = params.get("items") if isinstance(params.get("items"), list) else []
        texts = [item.get("text") or " ".join(str(item.get(k, "")) for k in ("relation", "from", "to"))
                 for item in items if isinstance(item, dict)]
    params["requestId"] = flush_request_id(flush_id, operation, texts)
    return params


def _said_of_filenames(receipt: PageReceipt, params: dict[str, Any]) -> PageReceipt:
    """The page's receipt, with a note on each file its evidence sent whose display name kept is not the
    ``filename`` given (``sources`` are those files, in order)."""
    evidence = params.get("evidence")
    files = [(index, entry) for index, entry in enumerate(evidence if isinstance(evidence, list) else [])
             if isinstance(entry, dict) and "content" in entry]
    notes = [note for (index, entry), source in zip(files, receipt.get("sources") or [])
             if (note := kept_name_note(f"evidence[{index}].filename", entry.get("filename"), source["filename"]))]
    return {**receipt, "note": "; ".join(notes)} if notes else receipt
