"""One runtime per physical store: a serialized lane, reads beside it, a watcher feed, an index thread, a git queue.

Every write on a store runs on its lane, one at a time, whichever agent
asked: vault scans, evidence checks, SQLite and publication never race each
other.  Pages and claims queued while the lane is busy are planned one after
another and published as one group (``write``; ``engine/store/groups.py``
says which may share a group).  Before each operation the lane finishes any journalled publication,
checks the store's identity, and brings the partition's catalog up to date
with what the watcher saw; after it, the identity is checked again.

A search reads beside the lane (``read``) when none of that has anything to
do: on a snapshot of the last committed catalog, with the index caught up to
it.  The index thread commits to tantivy beside the lane too, and the git
queue runs on its own thread so a slow ``git`` never holds the lane; it
reads the outbox and records commits through the lane.  Vectors follow
publications the same way (``engine/index/vector_feed.py``): the embedding
model runs on its own thread, never on the lane, and only its SQL goes
through the lane.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, TypeVar

from .core.answers import NotRequired, TypedDict
from .index.analysis import Analyzer
from .store.catalog import Catalog
from .store.walk import FileStat
from .store.catalog_reads import CatalogReads
from .store.writes import SourceLines
from .state.config import SettingsSource
from .core.db import sqlite_errno
from .core.errors import IndexFailed, KnowledgeError, StoreUnavailable
from .core.faults import Faults
from .store.githistory import CommitFile, GitError, GitHistory, commit_message, commit_runs
from .store.outbox import GitOutbox
from .index.embedding import Embedder, EmbeddingRuntime
from .index.tantivy_index import SearchIndexes
from .core.changes import ChangeFeed
from .store.answers import GitSummary, Receipt
from .store.publication import Journalled, Plan, Publisher
from .write_groups import WriteGroups
from .store.store import Store
from .store.open_store import NeedsLane, ReadView
from .index.vector_feed import VectorFeed
from .index.vectors import VectorIndex
from .vault.records import PRIVATE_SCOPE

log = logging.getLogger(__name__)
T = TypeVar("T")


class Checkpoint(TypedDict):
    """A git checkpoint of the whole store: ``publications`` committed (``byPartition``), or why not."""

    state: str  # committed, pending or unavailable
    reason: NotRequired[str]
    commit: NotRequired[str | None]
    publications: NotRequired[int]
    byPartition: NotRequired[dict[str, int]]
    index: NotRequired[str]  # the git index lags the history
GIT_RETRY_SECONDS = 60.0
# The git thread looks whether the history wants packing (``GitHistory.tidy``) at its first commit and then
# once this many publications have been committed since: a publication leaves about eight loose objects, and
# git packs at 6,700, so looking after every checkpoint would only start one more git process each time.
TIDY_EVERY_PUBLICATIONS = 200
# After a publication the search index catches up once publications have paused this long, so the
# publications of a burst share one index commit (a tantivy commit costs 10-25 ms of CPU here, whatever it
# holds).  Every search catches up before it answers (or reads the records the index has not committed from
# the catalog beside it, engine/index/overlay.py), so no search misses an acknowledged publication.
INDEX_DELAY_SECONDS = 0.05
# Under a stream of writes with no pause, the index commits at the latest this long after the first
# publication it has not committed, or once this many records wait, whichever comes first: far fewer
# commits than one per pause, while a search's overlay stays a small fraction of OVERLAY_MAX (its cost
# grows with its size; docs/benchmarks/throughput.md, "fewer index commits").
INDEX_MAX_DELAY_SECONDS = 1.0
INDEX_BATCH_RECORDS = 250
# The git thread commits this long after a publication woke it, so the publications of a burst share one
# checkpoint: a checkpoint starts git processes whatever it holds (two now, six before; docs/benchmarks/throughput.md,
# "Where a write's time goes": they took half the engine's CPU per write on two cores).  Receipts say ``pending``
# meanwhile, as they did while the previous checkpoint ran; ``knowledge_resume`` still commits at once.  A second
# rather than a quarter: one client's writes then share a checkpoint four times as widely, and git's processes
# took 1.7 instead of 3.7 ms of CPU per page (docs/benchmarks/throughput.md, issue 31 Build 3 again).
GIT_DELAY_SECONDS = 1.0
FULL = None  # a dirty entry meaning "walk the whole partition"
ECHOES_KEPT = 4096  # files a publication installed whose watcher reports are recognised as the engine's own
ECHOES_CHECKED = 64  # reported files compared with what was installed before a read; more need the lane's sync
class StoreRuntime(WriteGroups):
    def __init__(self, store: Store, settings: SettingsSource, analyzer: Analyzer, *,
                 git_executable: str | None, faults: Faults | None = None,
                 embeddings: EmbeddingRuntime | None = None, changes: ChangeFeed | None = None) -> None:
        self.store = store
        self.changes = changes or ChangeFeed()
        self.settings = settings
        self.catalog = Catalog(store)
        self.catalog.fill_mentions()  # once, for a store catalogued before they were kept
        self.indexes = SearchIndexes(store, self.catalog, analyzer)
        self.embeddings = embeddings
        self.vectors = VectorIndex(store, self.catalog, passages_wanted=self._evidence_passages_wanted,
                                   page_passages_wanted=self._page_passages_wanted)
        self.git = GitHistory(store.vault, git_executable) if git_executable else None
        self.faults = faults or Faults()
        self.publisher = Publisher(store, self.catalog, git_enabled=self._git_enabled, faults=self.faults)
        self.outbox = GitOutbox(store.db)
        self.publisher.on_installing, self.publisher.on_installed = self._installing, self._installed
        self.source_lines = SourceLines()  # cited sources' lines, kept between plans (engine/store/writes.py)
        self._echoes: dict[tuple[str, str], tuple[int, int, int, int]] = {}  # (partition, path) -> stat installed
        self._renaming: dict[tuple[str, str], bool] = {}  # being renamed into place -> whether reported meanwhile
        self._lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"lane-{store.store_id}")
        WriteGroups.__init__(self)
        self._dirty: dict[str, set[str] | None] = {}
        self._dirty_lock = threading.Lock()
        self._synced: dict[str, int] = {}  # partition -> ontology generation it was validated with
        self.watching = False
        self.unavailable: str | None = None
        self._git_lock = threading.Lock()
        # One sync round of this store at a time (engine/sync/round.py), whoever asks: the CLI, the operator, a timer.
        self.sync_lock = threading.Lock()
        self._git_wake = threading.Event()
        self._closing = threading.Event()
        self._stop_asked = threading.Event()  # set first by close: long work on the lane ends at its next step
        self._git_stop = threading.Event()
        self._git_thread: threading.Thread | None = None
        self._untidied: int | None = None  # publications committed since the last tidy; None: none yet
        self._index_pending: set[str] = set()
        self._index_published = 0  # publications announced to the index thread, ever
        self._index_records = 0  # records they wrote since the index thread last took its work
        self._index_wake = threading.Event()
        self._index_thread = threading.Thread(target=self._index_loop, name=f"index-{store.store_id}", daemon=True)
        self._settled = False  # no read beside the lane before recovery and a first check on it
        self._owner_searches = False  # the owner searched in hybrid mode: vectors follow (``follow_for_owner``)
        self.vector_feed = VectorFeed(f"vectors-{store.store_id}", self.vectors, self._vector_model,
                                      store.partitions, self.call, delay=INDEX_DELAY_SECONDS)
        self.recovered = self.call(self._recover)
        self._index_thread.start()
        self.vector_feed.start()
        if self._gate_on():
            self._ready_for_the_gate()
        if self.git is not None:
            self._git_thread = threading.Thread(target=self._git_loop, name=f"git-{store.store_id}", daemon=True)
            self._git_thread.start()
            self._git_wake.set()

    @property
    def store_id(self) -> str:
        return self.store.store_id

    def _git_enabled(self) -> bool:
        return self.git is not None and self.settings.current().writes_enabled

    # --- the lane ------------------------------------------------------------------

    def call(self, fn: Callable[[], T], timeout: float | None = None) -> T:
        """Run ``fn`` on the lane and wait for its result."""
        if self._closing.is_set():
            raise StoreUnavailable("the store is shutting down", store=self.store_id)
        future: Future[T] = self._submit_other(self._storage_boundary, fn)
        return future.result(timeout=timeout)

    def _storage_boundary(self, fn: Callable[[], T]) -> T:
        """Disk and SQLite failures (a full disk, a read-only vault, a vanished file) become one clear
        ``store_unavailable`` error here, once, instead of an internal error."""
        try:
            return fn()
        except (OSError, sqlite3.OperationalError) as exc:
            raise self._unavailable(exc) from exc

    def _unavailable(self, exc: Exception) -> Exception:
        """What ``_storage_boundary`` raises for ``exc`` (other errors are their own answer)."""
        if isinstance(exc, OSError):
            name = errno.errorcode.get(exc.errno or 0, "EIO")
            error = StoreUnavailable(f"the store's disk refused the operation: {exc.strerror or exc} ({name}); "
                                     "nothing was acknowledged", store=self.store_id, errno=name,
                                     file=os.path.basename(exc.filename) if exc.filename else None)
        elif isinstance(exc, sqlite3.OperationalError):
            error = StoreUnavailable(f"the store's database refused the operation: {exc}; nothing was "
                                     "acknowledged", store=self.store_id, errno=sqlite_errno(exc))
        else:
            return exc
        error.__cause__ = exc
        return error

    def _recover(self) -> list[dict[str, Any]]:
        self.store.verify(allow_pending=True)
        outcomes = self.publisher.recover()
        if outcomes:
            log.info("recovered publications: %s", outcomes)
        return outcomes

    def run(self, partition: str, fn: Callable[[], T], *, fence: Callable[[], None] | None = None,
            writes: bool = False, timeout: float | None = None) -> T:
        """Run a partition operation on the lane with recovery, identity checks and catch-up.

        ``fence`` re-checks the caller's authority on the lane, right before
        the work: a caller revoked while queued gets nothing done.  With
        ``timeout`` the wait raises TimeoutError (the operation stays queued;
        callers with a deadline make ``fn`` check it and do nothing late).
        """

        def operation() -> T:
            self.prepare(partition)
            if fence is not None:
                fence()
            result = fn()
            self.store.verify(partition)
            return result

        result = self.call(operation, timeout)
        if writes and self.git is not None:
            self._git_wake.set()
        return result

    def read(self, partition: str, fn: Callable[[ReadView], T], *, fence: Callable[[], None] | None = None,
             timeout: float | None = None) -> T:
        """Run the read ``fn`` beside the lane when nothing needs the lane first, else on it.

        Beside the lane, ``fn`` sees the catalog as of its last committed transaction (a snapshot that
        holds every publication acknowledged before the read began) and never waits for a write.  That
        needs the watcher to be following the partition with nothing it reported still unread, no
        publication left for recovery, and the store's identity unchanged since the lane last checked it
        (``Store.unchanged``); otherwise the read runs on the lane, which catches up and checks first.  So
        does a read that raised ``NeedsLane``.
        """
        if self._beside_lane(partition):
            # No queue to wait in, so no ``fence``: the caller's authority was checked just before this call,
            # and is checked again before the result is returned.
            try:
                result = self._storage_boundary(lambda: self._read_snapshot(partition, fn))
            except NeedsLane:
                pass
            else:
                if self.store.unchanged(partition):
                    return result
        return self.run(partition, lambda: fn(ReadView(self.store, self.catalog, self.catalog.version(partition)[0])),
                        fence=fence, timeout=timeout)

    def _beside_lane(self, partition: str) -> bool:
        with self._dirty_lock:
            unread = self._dirty.get(partition, set())
            unread = unread if unread is FULL or len(unread) > ECHOES_CHECKED else set(unread)
        return (self.watching and self._settled and partition in self._synced and not self._closing.is_set()
                and unread is not FULL and all(self._echo(partition, relpath) for relpath in unread)
                and self.store.unchanged(partition))

    def _read_snapshot(self, partition: str, fn: Callable[[ReadView], T]) -> T:
        with self.store.db.snapshot() as db:
            catalog = CatalogReads(db, self.catalog.kept)  # the lane's kept views, brought up to date by any read
            return fn(ReadView(self.store, catalog, catalog.version(partition)[0]))

    def publish(self, plan: Plan) -> Receipt:
        """On the lane: publish ``plan``; the partition's search index follows shortly (``_index_loop``).

        A failed index update does not undo an acknowledged write: searches
        keep refusing (index_failed) until the index catches up.
        """
        [outcome], _ = self._publish_planned([plan])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _publish_planned(self, plans: list[Plan] | Journalled, following: Callable[[], list[Plan]] | None = None
                         ) -> tuple[list[dict[str, Any] | Exception], Journalled | None]:
        """On the lane: publish ``plans`` as one group (``Publisher.publish_chained``: with ``following``, the
        next group comes back journalled); the indexes, vectors and the owner's window follow."""
        try:
            results, journalled = self.publisher.publish_chained(plans, following)
            outcomes = [self._unavailable(outcome) if isinstance(outcome, Exception) else outcome
                        for outcome in results]
        except BaseException:
            self._settled = False  # perhaps left journalled: reads go through the lane, which recovers first
            raise
        if isinstance(plans, Journalled):
            plans = [publication.plan for publication in plans.publications]
        if any(isinstance(outcome, Exception) for outcome in outcomes):
            self._settled = False
        published = {plan.partition for plan, outcome in zip(plans, outcomes) if not isinstance(outcome, Exception)}
        with self._dirty_lock:
            self._index_pending |= published
            self._index_published += 1
            self._index_records += sum(len(plan.writes) for plan, outcome in zip(plans, outcomes)
                                       if not isinstance(outcome, Exception))
        self._index_wake.set()
        for partition in sorted(published):
            self.vector_feed.queue(partition)  # embedded off the lane (engine/index/vector_feed.py)
            self.changes.publish("publications", storeId=self.store_id, partition=partition)
        return outcomes, journalled

    def _index_loop(self) -> None:
        """Catch the search index up after publications, one commit for every publication of a burst.

        Beside the lane: the catalog is read and the ledger written in short transactions between the
        lane's, and tantivy's commit holds neither, so writes go on while it runs.
        """
        while not self._closing.is_set():
            self._index_wake.wait()
            if self._closing.is_set():
                break
            self._wait_for_pause()
            self._index_wake.clear()
            partitions = self._take_index_pending()
            try:
                self._storage_boundary(lambda: self._catch_up_indexes(partitions))
            except Exception as exc:  # a search catches up (or says index_failed) anyway
                log.warning("search index catch-up failed: %s", exc)

    def _wait_for_pause(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Wait until publications pause for INDEX_DELAY_SECONDS, INDEX_BATCH_RECORDS records wait or
        INDEX_MAX_DELAY_SECONDS have passed (or the store closes).  Polled, so a publication costs the
        index thread no wake-up of its own."""
        started = clock()
        with self._dirty_lock:
            seen = self._index_published
        while not self._closing.wait(INDEX_DELAY_SECONDS):
            with self._dirty_lock:
                published, records = self._index_published, self._index_records
            if (published == seen or records >= INDEX_BATCH_RECORDS
                    or clock() - started >= INDEX_MAX_DELAY_SECONDS):
                return
            seen = published

    def _take_index_pending(self) -> set[str]:
        with self._dirty_lock:
            partitions, self._index_pending = self._index_pending, set()
            self._index_records = 0
        return partitions

    def _close_indexes(self) -> None:
        """Bring the index up to date with the last publications (the next start finds it so), then close it."""
        partitions = self._take_index_pending()
        try:
            self._storage_boundary(lambda: self._catch_up_indexes(partitions))
        except Exception:  # a search catches up (or says index_failed) after the next start
            log.exception("search index catch-up failed while closing")
        self.indexes.close()

    def _catch_up_indexes(self, partitions: set[str]) -> None:
        for partition in sorted(partitions):
            try:
                self.indexes.catch_up(partition)
            except IndexFailed as exc:
                log.warning("search index of %s not updated: %s", partition, exc.message)

    def _vector_model(self) -> Embedder | None:
        """The model vectors follow publications with: none while neither the Knowledge Base runtime, the recall
        gate (``Settings.gate_reads_vectors``) nor the owner's hybrid search (``follow_for_owner``) reads them."""
        settings = self.settings.current()
        wanted = settings.knowledge_runtime_enabled or settings.gate_reads_vectors() or self._owner_searches
        if self.embeddings is None or not wanted:
            return None
        return self.embeddings.current()

    def follow_for_owner(self) -> None:
        """The owner searched this store in hybrid mode: from now on (until the engine stops) its vectors follow
        publications whatever the settings say, and what is missing now is embedded off the lane."""
        if not self._owner_searches:
            self._owner_searches = True
            self.vector_feed.queue()

    def _page_passages_wanted(self) -> bool:
        """Whether the vectors include long pages' own passages: the gate's embedding Decision model scores by them,
        and the owner's hybrid search judges a long page by its nearest passage, not its start."""
        return self.settings.current().gate_scores_index_vectors() or self._owner_searches

    def _evidence_passages_wanted(self) -> bool:
        """Whether the vectors include pages' evidence passages: only a gate taking hybrid candidates asks them."""
        gate = self.settings.current().recall_gate
        return gate is not None and gate.candidates == "hybrid"

    def _gate_on(self) -> bool:
        gate = self.settings.current().recall_gate
        return gate is not None and gate.mode != "off"

    def _ready_for_the_gate(self) -> None:
        """What the gate's first turn would otherwise do itself, done as the store opens, off the caller's way:
        the private partition's catalog brought up to date on the lane (queued, not awaited) and its search
        index opened and caught up by the index thread (docs/recall-gate.md, "No cold first turn")."""
        self._submit_other(self._storage_boundary, lambda: self.prepare(PRIVATE_SCOPE))
        with self._dirty_lock:
            self._index_pending.add(PRIVATE_SCOPE)
        self._index_wake.set()

    def vectors_settled(self, timeout: float | None = None) -> bool:
        """Wait until the vectors have followed every publication so far (benchmarks, tests); False on timeout."""
        return self.vector_feed.settled(timeout)

    def prepare(self, partition: str) -> None:
        """On the lane: recover, verify identity, and bring the catalog up to date."""
        marks: tuple[int, list[int]] | None = self.store.publication_marks()
        if marks[1]:
            self._recover()
            marks = None  # recovery moved them: the check reads them again
        try:
            self.store.verify(partition, marks=marks)
        except StoreUnavailable as exc:
            self.unavailable = exc.message
            raise
        self.unavailable = None
        self._settled = True
        self.store.ontology(partition)
        generation = self.store.ontology_generation if partition == "private" else 0
        with self._dirty_lock:
            dirty = self._dirty.pop(partition, set())
        if dirty is not FULL and len(dirty) <= ECHOES_CHECKED:
            dirty = {relpath for relpath in dirty if not self._echo(partition, relpath)}
        last = self._synced.get(partition)
        try:
            if not self.watching or last != generation:
                # An ontology change revalidates every record, not just changed files.
                self.catalog.sync(partition, force=last is not None and last != generation)
                self._synced[partition] = generation
            elif dirty is FULL:
                self.catalog.sync(partition)
            elif dirty:
                paths = self._dirty_paths(partition, dirty)
                self.catalog.sync(partition, paths)
        except BaseException:
            # The sync rolled back: what the watcher reported is still unread, so the next request retries it
            # rather than serving a catalog that silently lacks those files.
            self._restore_dirty(partition, dirty)
            raise

    def _dirty_paths(self, partition: str, dirty: set[str]) -> list[str] | None:
        """The files to sync for what the watcher reported: each file, and every file under each directory
        reported (``Catalog.paths_under``); None (the whole partition) when a directory is not plain."""
        paths = {relpath for relpath in dirty if not relpath.endswith("/")}
        for directory in sorted(relpath for relpath in dirty if relpath.endswith("/")):
            under = self.catalog.paths_under(partition, directory)
            if under is None:
                return None
            paths.update(under)
        return sorted(paths)

    def _restore_dirty(self, partition: str, dirty: set[str] | None) -> None:
        with self._dirty_lock:
            pending = self._dirty.get(partition, set())
            if dirty is FULL or pending is FULL:
                self._dirty[partition] = FULL
            elif dirty or pending:
                self._dirty[partition] = pending | dirty

    # --- watcher feed -------------------------------------------------------------------

    def mark_dirty(self, vault_relpath: str, *, is_directory: bool = False) -> None:
        """Called from the watcher thread for every change under the vault."""
        parts = vault_relpath.split("/")
        if not parts or parts[0].startswith("."):
            return
        if parts[0] == "ontology.yaml":
            partition, relpath = "private", None
        elif parts[0] == "private":
            partition, relpath = "private", "/".join(parts[1:]) or None
        elif parts[0] == "conversations" and len(parts) >= 2:
            partition, relpath = f"conversation:{parts[1]}", "/".join(parts[2:]) or None
        else:
            return
        if relpath is not None and relpath.rsplit("/", 1)[-1].startswith("."):
            return
        if relpath is not None and not is_directory:
            with self._dirty_lock:
                if (partition, relpath) in self._renaming:  # judged once the install says what it made
                    self._renaming[(partition, relpath)] = True
                    return
            if self._echo(partition, relpath):
                return
        self._mark(partition, relpath, is_directory)

    def _mark(self, partition: str, relpath: str | None, is_directory: bool) -> None:
        with self._dirty_lock:
            pending = self._dirty.get(partition, set())
            if relpath is None or pending is FULL:
                self._dirty[partition] = FULL
            else:  # a directory is walked as a subtree (``_dirty_paths``): what is in it may be unreported
                pending.add(relpath + "/" if is_directory else relpath)
                self._dirty[partition] = pending
        # The catalog catches up on the next read; a watcher asks again and sees the edit.
        self.changes.publish("publications", storeId=self.store_id, partition=partition)

    def _installing(self, partition: str, relpath: str) -> None:
        """A publication is about to rename ``relpath`` into place: the watcher can report the rename before
        ``_installed`` knows the file's stat, so what it reports meanwhile waits for that."""
        with self._dirty_lock:
            self._renaming[(partition, relpath)] = False

    def _installed(self, partition: str, relpath: str, info: FileStat | None) -> None:
        """A publication installed ``relpath`` (on the lane, before its catalog rows are written); None: the
        rename it announced did not happen.  A report that came meanwhile is judged now."""
        with self._dirty_lock:
            reported = self._renaming.pop((partition, relpath), False)
            if info is not None:
                self._echoes.pop((partition, relpath), None)
                self._echoes[(partition, relpath)] = info.stamp
                while len(self._echoes) > ECHOES_KEPT:
                    del self._echoes[next(iter(self._echoes))]
        if reported and not self._echo(partition, relpath):
            self._mark(partition, relpath, False)

    def _echo(self, partition: str, relpath: str) -> bool:
        """Whether the watcher reports the engine's own install of ``relpath``: the file is still exactly as
        a publication installed it (inode, size, mtime, ctime), so the catalog already holds it."""
        with self._dirty_lock:
            installed = self._echoes.get((partition, relpath))
        if installed is None:
            return False
        try:
            return FileStat.of(os.lstat(self.store.partition_root(partition) / relpath)).stamp == installed
        except OSError:
            return False

    # --- git -------------------------------------------------------------------------------

    def _git_loop(self) -> None:
        while not self._git_stop.is_set():
            self._git_wake.wait(timeout=GIT_RETRY_SECONDS)
            if self._git_stop.wait(GIT_DELAY_SECONDS):  # the burst's other publications; or closing
                break
            self._git_wake.clear()
            try:
                committed = self.checkpoint().get("publications")
                if committed:
                    self._tidy_history(committed)
            except KnowledgeError as exc:
                log.warning("git checkpoint skipped: %s", exc.message)
            except RuntimeError:  # the lane shut down under us
                break
            except Exception:  # the queue must outlive any one failure; the outbox keeps the work
                log.exception("git checkpoint failed")

    def _tidy_history(self, committed: int) -> None:
        """Pack the git history once enough checkpoints have left loose objects (off every write's way): looked
        at after the first commit and every ``TIDY_EVERY_PUBLICATIONS``."""
        assert self.git is not None
        if self._untidied is not None:
            self._untidied += committed
            if self._untidied < TIDY_EVERY_PUBLICATIONS:
                return
        self._untidied = 0
        with self._git_lock:
            try:
                self.git.tidy()
            except GitError as exc:
                log.warning("packing the git history failed (the next checkpoint tries again): %s", exc)

    def with_history(self, work: Callable[[], T], *, on_lane: bool = True) -> T:
        """Run ``work`` holding the git lock, so no checkpoint commits meanwhile, and on the lane unless
        ``on_lane`` is false: a sync round's vault step (engine/sync/round.py), which commits, merges and
        installs with nothing else writing, commits inline (``checkpoint(inline=True)``)."""
        with self._git_lock:
            return self.call(work) if on_lane else work()

    def rebuild_catalogue(self) -> int:
        """On the lane: catalogue every partition of a store filled from outside (an archive restored, a store
        cloned by sync) and rebuild its search index; returns its current records."""
        count = 0
        for partition in self.store.partitions():
            self.prepare(partition)
            self.indexes.rebuild(partition)
            count += self.catalog.current_count(partition)
        return count

    def checkpoint(self, *, inline: bool = False) -> Checkpoint:
        """Commit every pending publication now (``knowledge_resume`` and the git thread).

        ``inline``: the caller already holds the git lock and runs on the lane (a sync round,
        engine/sync/round.py), so the commits are made right there."""
        if self.git is None:
            return {"state": "unavailable", "reason": "git is not installed"}
        call: Callable[[Callable[[], Any]], Any] = (lambda fn: fn()) if inline else self.call
        with contextlib.nullcontext() if inline else self._git_lock:
            batch = call(self.outbox.pending)
            if batch and not inline and self.git.head() is None and self.git.has_fetched_history():
                # A first commit here would start a history unrelated to the one fetched (a clone's first
                # round cut short): the next round takes the fetched history first, then commits these.
                return {"state": "pending", "reason": "waiting for the next sync round to take the fetched "
                        "history first", "publications": len(batch)}
            if not batch:
                try:
                    self.git.repair_index()
                except GitError as exc:
                    self.git.index_problem = str(exc)
                return self._with_index({"state": "committed", "commit": self.git.head(), "publications": 0,
                                         "byPartition": {}})
            commit = None
            for run in commit_runs(batch):
                files = [CommitFile(path, data) for entry in run for path, data in entry["files"] if data is not None]
                removals = [path for entry in run for path, data in entry["files"] if data is None]
                seqs = [entry["seq"] for entry in run]
                try:
                    # What the vault holds, for git's first commit, read on the lane: beside it, a publication
                    # could be installed and rolled back, and its files would enter the history unacknowledged.
                    commit = self.git.commit(files, commit_message(run),
                                             existing=lambda: call(self.git.existing_files), removals=removals)
                except GitError as exc:
                    error = str(exc)
                    left = [entry["seq"] for entry in batch if entry["seq"] >= seqs[0]]
                    call(lambda: self.outbox.failed(left, error))
                    if commit is not None:  # the runs before this one are committed: History shows them
                        self.changes.publish("health", storeId=self.store_id)
                    return {"state": "pending", "reason": error, "publications": len(left)}
                call(lambda: self.outbox.committed(seqs, commit))
            committed = Counter(entry["partition"] for entry in batch)
            self.changes.publish("health", storeId=self.store_id)  # the window's History shows the commit
            return self._with_index({"state": "committed", "commit": commit, "publications": len(batch),
                                     "byPartition": dict(committed)})

    def _with_index(self, result: Checkpoint) -> Checkpoint:
        """A checkpoint's result, saying so when the git index lags the history (``git status`` differs)."""
        assert self.git is not None
        if self.git.index_problem:
            result["index"] = f"the git index is behind the history: {self.git.index_problem}"
        return result

    def git_summary(self, partition: str) -> GitSummary:
        """The git queue's state for one partition (diagnostics, ``knowledge_resume``): its pending count, its
        last error and the commit holding its newest publication.  The store's other partitions' writes are
        not the caller's to count or see, so nothing here changes when only they write; call on the lane."""
        if self.git is None:
            return {"state": "unavailable", "reason": "git is not installed"}
        return self.outbox.summary(partition)

    # --- shutdown ------------------------------------------------------------------------------

    def ask_stop(self) -> None:
        """Have owner work on the lane that runs a model (a reindex's vectors) end at its next step; ``close``
        asks first, and an engine about to close asks before it waits for the requests it is answering."""
        self._stop_asked.set()

    def stop_asked(self) -> bool:
        """Whether ``ask_stop`` (or ``close``) was called: long work on the lane ends at its next step."""
        return self._stop_asked.is_set()

    def close(self) -> None:
        """Stop the git queue (after a last checkpoint), drain the lane, close the store."""
        if self._closing.is_set():
            return
        self.ask_stop()
        self._git_stop.set()
        self._git_wake.set()
        if self._git_thread is not None:
            self._git_thread.join(timeout=60)
        if self.git is not None:
            try:
                self.checkpoint()
            except (KnowledgeError, RuntimeError) as exc:
                log.warning("final git checkpoint failed: %s", exc)
            except Exception:  # the outbox keeps the work; closing the store must not stop here
                log.exception("final git checkpoint failed")
        self.vector_feed.stop()  # after the chunk in the model, stored while the lane still takes calls
        self._closing.set()
        self._index_wake.set()
        self._index_thread.join(timeout=60)
        self._lane.submit(self._close_indexes).result()
        self._lane.submit(self.vectors.close).result()
        self._lane.submit(self.publisher.close).result()
        self._lane.submit(self.store.close).result()
        self._lane.shutdown(wait=True)

