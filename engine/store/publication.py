"""Publication: how a validated write reaches the disk without ever being half done.

1. The caller validates and builds a ``Plan`` (exact bytes of every file).
2. Journal: the plan, with each file's new and previous bytes, is committed
   to ``state.sqlite`` before anything on disk changes.
3. Install: evidence first, then records; each file is compared against the
   bytes the plan was built from (an edit made meanwhile is a conflict,
   never overwritten) and replaced atomically.
4. Checkpoint: the manifest records the publication's sequence number.
5. Acknowledge: one transaction marks it applied, updates the catalog and
   the revision history and queues the exact bytes for git.  Only then does
   the caller get a receipt.

Publications that were planned together (``publish_together``: plans that touch no common file or
record) share each step: one journal transaction, one checkpoint, one acknowledging transaction, and
one sync of each directory they installed into.  One that fails is rolled back alone.

Steps 3 and 4 overlap: once the journal is committed, the checkpoint is written beside the installs
(``_checkpoint_beside``); the group's new files are written to temp files and synced on the sync threads,
all at once, and renamed once all are, and the directories are synced at once after, while the checkpoint is
still being written, so a write waits for about two rounds of fsync between its two transactions instead of
four or more.  Only the journal's order matters for
recovery: a checkpoint naming a journalled publication is explained by the journal whether or not
its files were installed, and the acknowledging transaction waits for both.

When writes are queued as a group is acknowledged, the next group is planned and journalled inside that
acknowledging transaction (``publish_chained``'s ``following``): one COMMIT makes one group applied and the
next journalled, instead of two in a row.  Both orders recovery relies on hold: a group's journal is durable
before any of its files is touched (they are installed after that COMMIT), and a group's receipts are returned
only once its acknowledgement is durable (after that COMMIT too).  A crash before the COMMIT leaves the first
group journalled with its files and checkpoint, rolled forward by recovery, and the next one never journalled;
after it, the next one journalled with none of its files installed yet, rolled forward or back like any.

Recovery finishes or undoes any journalled publication: forward when every
file holds either its old or its new bytes, back when someone else changed
one of them meanwhile.  Either way the store ends in a whole state.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .answers import GitState, Receipt
from .catalog import Catalog, PublishedRecord
from .walk import FileStat
from ..core.errors import Conflict, InvalidParams, KnowledgeError, NotFound, StoreUnavailable
from ..core.faults import CHAINED, Faults
from ..core.files import (UnsafePath, StagedFile, ensure_dirs, fsync_dir, present_inside,
                          remove_inside, resolve_inside, sha256_bytes, sha256_if_present, stage_synced, stage_written,
                          write_inside)
from ..core.syncfs import SyncPoint, file_system_sync
from ..core.ids import PUBLICATION_PREFIX, format_timestamp, new_id, utc_now
from .store import Store, partition_dir
from ..vault.records import PRIVATE_SCOPE, Record

# Installation order: evidence before what cites it, the ontology before the records it validates.
ROLE_ORDER = {"source": 0, "descriptor": 1, "ontology": 2, "record": 3}
# The one file of role "ontology": the vault's extensions, its path relative to the vault (not a partition);
# only a private-partition plan writes it (the extensions apply there alone).
ONTOLOGY_PATH = "ontology.yaml"
# Threads that sync beside the lane: the checkpoint, and a group's new files and directories.  An fsync waits for
# the disk with the interpreter lock released, and the file system commits syncs that arrive together in one round.
SYNC_WORKERS = 16
# A group with at least this many new files makes them durable with one sync of the vault's file system once all
# are written, instead of an fsync each (core/syncfs.py): a bulk import's groups (three files a note, up to 64
# notes), not a single write's one to three files, which would flush other programs' data for no round saved.
SYNCFS_FILES = 32
ALREADY: Any = object()  # ``Publisher._stage``: a file that holds what the plan wants already
# A retry's publication, found through the partial index on (partition, request_id): its condition is repeated
# so SQLite may use it, and ``+state`` keeps the planner off the index on state, which walks every applied
# publication (25 ms at 50,000 of them, on every write that carries a requestId).
APPLIED_BY_REQUEST = ("SELECT * FROM publications WHERE partition = ? AND request_id = ? "
                      "AND state != 'rolled_back' AND +state = 'applied'")


@dataclass
class FileWrite:
    """One file a publication installs, with the bytes it replaces (None: a new file).

    With ``removes`` it removes the file instead: ``base`` holds the bytes it removes (checked like any
    write's base, and put back by a roll-back) and ``data`` is unused."""

    path: str
    role: str
    data: bytes
    record_id: str | None = None
    revision: int | None = None
    base: bytes | None = None
    removes: bool = False
    # A record's bytes as ``parse_record`` reads them, kept from rendering them (None: the catalog parses them).
    read: Record | None = field(default=None, repr=False, compare=False)
    # ``new_sha256`` with the very bytes object it was computed from: a publication asks it when it journals,
    # installs and catalogues the file, and an attachment's megabytes were hashed each time.
    _hashed: tuple[bytes, str] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def new_sha256(self) -> str | None:
        """The sha256 of the bytes the file holds once installed; None: no file."""
        if self.removes:
            return None
        hashed, data = self._hashed, self.data
        if hashed is None or hashed[0] is not data:
            digest = sha256_bytes(data)
            if type(data) is not bytes:  # a buffer that may change: hashed every time
                return digest
            hashed = self._hashed = (data, digest)
        return hashed[1]

    @property
    def base_sha256(self) -> str | None:
        return sha256_bytes(self.base) if self.base is not None else None


@dataclass
class Plan:
    partition: str
    operation: str
    request_id: str | None
    request_hash: str
    agent: str | None
    writes: list[FileWrite]
    receipt: dict[str, Any] = field(default_factory=dict)
    names: frozenset[str] = frozenset()  # the name keys (titles, aliases) of the records it writes


@dataclass
class _Publication:
    """One plan on its way through a group: its journal row, the files it installed, what refused it."""

    plan: Plan
    writes: list[FileWrite]  # in installation order
    seq: int = 0
    publication_id: str = ""
    installed: dict[str, FileStat] = field(default_factory=dict)
    error: Exception | None = None
    receipt: str = ""  # as journalled (JSON text)
    git: GitState | None = None  # the git state its acknowledgement gave it
    # Paths found empty by the walk made just before the journal (``_check_installable``): the first comparison
    # of a new file, which the one right before its rename makes again (recovery compares every file afresh).
    absent: set[str] = field(default_factory=set)


@dataclass
class Journalled:
    """The next group, journalled inside the last one's acknowledging transaction (``publish_chained``); those
    refused before or by their journal carry their ``error``."""

    publications: list[_Publication]

    def __len__(self) -> int:
        return len(self.publications)


def _outcome(work: Future[Any] | None) -> Exception | None:
    """Wait for ``work``; the exception it raised, if any."""
    if work is None:
        return None
    try:
        work.result()
    except Exception as exc:
        return exc
    return None


def _made_here(stage: Callable[[Path, str, bytes], StagedFile], root: Path, relpath: str, data: bytes
               ) -> Future[StagedFile]:
    """``stage`` (``stage_synced`` or ``stage_written``) on this thread, its outcome as a future's."""
    made: Future[StagedFile] = Future()
    try:
        made.set_result(stage(root, relpath, data))
    except Exception as exc:
        made.set_exception(exc)
    return made


def _staged(asked: list[tuple[_Publication, FileWrite, Future[StagedFile] | None]]
            ) -> list[tuple[_Publication, FileWrite, StagedFile | None]]:
    """The temp files ``asked`` for, once every one is written and synced (None: a removal); one the disk would
    not write or sync refuses its publication, and is left out."""
    staged: list[tuple[_Publication, FileWrite, StagedFile | None]] = []
    for publication, write, work in asked:
        error = _outcome(work)
        if error is not None:
            publication.error = publication.error or error
            continue
        staged.append((publication, write, None if work is None else work.result()))
    return staged


def removal(path: str, role: str, base: bytes, record_id: str | None = None) -> FileWrite:
    """A write that removes the file at ``path``, which holds ``base``."""
    return FileWrite(path, role, b"", record_id, None, base, removes=True)


def request_hash(operation: str, params: dict[str, Any]) -> str:
    """A stable digest of what was asked, to tell a retry from a different request."""
    canonical = json.dumps({"operation": operation, "params": params}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Publisher:
    def __init__(self, store: Store, catalog: Catalog, *, git_enabled: Callable[[], bool],
                 faults: Faults | None = None) -> None:
        self.store = store
        self.catalog = catalog
        self.db = store.db
        self.git_enabled = git_enabled
        self.faults = faults or Faults()
        # Told each file a publication installed, with its stat as installed (the watcher's echo of it is no news),
        # and, before each rename, the file about to be renamed (told installed then, or None if it was not).
        self.on_installed: Callable[[str, str, FileStat | None], None] = lambda partition, path, info: None
        self.on_installing: Callable[[str, str], None] = lambda partition, path: None
        self._syncs: ThreadPoolExecutor | None = None  # started by the first publication
        self._syncfs = file_system_sync()  # None: every temp file is fsynced on its own

    def close(self) -> None:
        """Stop the sync threads (every group waited for its own work, so none is left)."""
        if self._syncs is not None:
            self._syncs.shutdown(wait=True)

    def _beside(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        if self._syncs is None:
            self._syncs = ThreadPoolExecutor(max_workers=SYNC_WORKERS,
                                             thread_name_prefix=f"sync-{self.store.store_id}")
        return self._syncs.submit(fn, *args)

    # --- requests and receipts ---------------------------------------------------

    def existing_receipt(self, partition: str, request_id: str | None, digest: str) -> Receipt | None:
        """The original receipt of an identical retry; a conflict if the id was used for other content."""
        if request_id is None:
            return None
        row = self.db.one(APPLIED_BY_REQUEST, (partition, request_id))
        if row is None:
            return None
        if row["request_hash"] != digest:
            raise Conflict("this requestId was already used for a different request; use a fresh one",
                           requestId=request_id)
        return self.receipt(row["seq"])

    def published(self, partition: str, request_ids: list[str]) -> set[str]:
        """Which of ``request_ids`` an applied publication of ``partition`` carries (an import finishing what an
        earlier run began asks this of many writes at once, rather than sending each as a retry)."""
        return {request_id for request_id in request_ids
                if self.db.one(APPLIED_BY_REQUEST, (partition, request_id)) is not None}

    def applied_receipt(self, partition: str, request_id: str) -> Receipt | None:
        """The receipt of the applied publication of ``partition`` carrying ``request_id``, None when there is
        none: what a retry of that request would be answered (a dry run of an import asks it of each write)."""
        row = self.db.one(APPLIED_BY_REQUEST, (partition, request_id))
        return None if row is None else self.receipt(row["seq"])

    def published_any(self, partition: str, prefix: str) -> bool:
        """Whether an applied publication of ``partition`` carries a request id starting with ``prefix`` (an
        import asks, before its first write, whether an earlier run of its format published anything)."""
        beyond = prefix[:-1] + chr(ord(prefix[-1]) + 1)  # the first id past every one starting with ``prefix``
        return self.db.one("SELECT 1 FROM publications WHERE partition = ? AND request_id >= ? AND request_id < ? "
                           "AND state != 'rolled_back' AND +state = 'applied' LIMIT 1",
                           (partition, prefix, beyond)) is not None

    def receipt(self, seq: int) -> Receipt:
        row = self.db.one("SELECT receipt FROM publications WHERE seq = ?", (seq,))
        if row is None:
            raise NotFound("no such publication")
        receipt: Receipt = json.loads(row["receipt"])
        receipt["git"] = self.git_state(seq)
        return receipt

    def git_state(self, seq: int) -> GitState:
        row = self.db.one("SELECT state, commit_id FROM outbox WHERE publication_seq = ?", (seq,))
        if row is None:
            return {"state": "unavailable"}
        if row["state"] == "committed":
            return {"state": "committed", "commit": row["commit_id"]}
        return {"state": "pending"}

    # --- publishing ----------------------------------------------------------------

    def publish(self, plan: Plan) -> Receipt:
        outcome = self.publish_together([plan])[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def publish_together(self, plans: list[Plan]) -> list[Receipt | Exception]:
        """Publish ``plans`` as one group; returns each plan's receipt, or the error that refused it.

        The plans must touch no common file or record (``PlanTouches``), so each one's outcome is its
        own: a plan refused or rolled back leaves the others to be acknowledged.
        """
        return self.publish_chained(plans)[0]

    def publish_chained(self, plans: list[Plan] | Journalled, following: Callable[[], list[Plan]] | None = None
                        ) -> tuple[list[Receipt | Exception], Journalled | None]:
        """``publish_together``, for ``plans`` or a group ``Journalled`` already; with ``following``, the plans it
        returns, called inside this group's acknowledging transaction, are journalled in that transaction and
        returned to be published next (None: nothing followed).  ``following`` is asked only when every plan of
        this group reached its acknowledgement; should that transaction fail, the next group fails with it."""
        if isinstance(plans, Journalled):
            group = plans.publications
            live = [publication for publication in group if publication.error is None]
        else:
            group = self._checked(plans)
            live = self._journal_live(group)
        for _ in live:
            self.faults.reach("journaled")
        checkpoint = self._checkpoint_beside(live)
        directories: set[Path] = set()
        sync_error: Exception | None = None
        try:
            self._install_group(live, directories)
            try:  # while the checkpoint is still being written
                self._report_installed([publication for publication in live if publication.error is None],
                                       directories)
            except Exception as exc:
                sync_error = exc
        finally:  # nothing is rolled back, nor the lane left, while the checkpoint is being written
            checkpoint_error = _outcome(checkpoint)
        installed = [publication for publication in live if publication.error is None]
        refused = [publication for publication in live if publication.error is not None]
        for publication in refused:  # rolled back alone: no other member touches its files
            self._roll_back_one(publication)
        failure = checkpoint_error or sync_error  # a checkpoint or a directory the disk would not write
        if failure is not None:
            for publication in reversed(installed):
                publication.error = failure
                self._roll_back_one(publication)
            installed = []
        chained: list[Journalled] = []

        def journal_following() -> None:  # inside the acknowledging transaction
            assert following is not None
            chained.append(self._journal_following(following))

        if installed:
            # Only a group acknowledged whole is followed: a refused member may be left journalled, for recovery.
            then = journal_following if following is not None and len(installed) == len(group) else None
            try:
                self._acknowledge(installed, then=then)
            except Exception as exc:
                for publication in reversed(installed):
                    publication.error = exc
                    self._roll_back_one(publication)
                installed = []
                for publication in chained[0].publications if chained else []:  # journalled in that transaction
                    publication.error = publication.error or exc
        for _ in installed:
            self.faults.reach("acknowledged")
        return ([publication.error or self._acknowledged_receipt(publication) for publication in group],
                chained[0] if chained and chained[0].publications else None)

    def _checked(self, plans: list[Plan]) -> list[_Publication]:
        """``plans`` as publications, their files in installation order, those that cannot be installed refused."""
        group = [_Publication(plan, sorted(plan.writes, key=lambda write: ROLE_ORDER[write.role]))
                 for plan in plans]
        for publication in group:
            try:
                publication.absent = self._check_installable(publication.plan.partition, publication.writes)
            except KnowledgeError as exc:
                publication.error = exc
        return group

    def _journal_following(self, following: Callable[[], list[Plan]]) -> Journalled:
        """Inside an acknowledging transaction: the plans ``following`` returns, journalled in a savepoint of it
        (a journal that fails refuses them and leaves the acknowledgement to commit)."""
        group = self._checked(following())
        for _ in self._journal_live(group):
            self.faults.reach(CHAINED)
        return Journalled(group)

    def _journal_live(self, group: list[_Publication]) -> list[_Publication]:
        """Journal the publications of ``group`` not refused yet, in one transaction; those the journal
        fails carry its error.  The ones journalled."""
        live = [publication for publication in group if publication.error is None]
        if live:
            try:
                self._journal(live)
            except Exception as exc:
                for publication in live:
                    publication.error = exc
                live = []
        return live

    def _acknowledged_receipt(self, publication: _Publication) -> Receipt:
        """What ``receipt`` reads back for a publication just acknowledged, from what was just written: the
        receipt as journalled, and git's state as the acknowledgement queued it."""
        if publication.git is None:
            return self.receipt(publication.seq)
        receipt: Receipt = json.loads(publication.receipt)
        receipt["git"] = publication.git
        return receipt

    def _journal(self, group: list[_Publication]) -> None:
        """Step 2 for every publication of the group, in one transaction."""
        now = format_timestamp(utc_now())
        with self.db.atomic():
            files = []
            for publication in group:
                plan = publication.plan
                publication.publication_id = new_id(PUBLICATION_PREFIX)
                receipt = {"publicationId": publication.publication_id, "requestId": plan.request_id,
                           **plan.receipt}
                publication.receipt = json.dumps(receipt)
                publication.seq = self.db.execute(
                    "INSERT INTO publications (id, partition, operation, request_id, request_hash, agent, "
                    "state, receipt, created_at) VALUES (?, ?, ?, ?, ?, ?, 'journaled', ?, ?)",
                    (publication.publication_id, plan.partition, plan.operation, plan.request_id,
                     plan.request_hash, plan.agent, publication.receipt, now),
                ).lastrowid
                files += [(publication.seq, ordinal, w.path, w.role, w.record_id, w.revision, w.new_sha256,
                           None if w.removes else w.data, w.base_sha256, w.base, int(w.removes))
                          for ordinal, w in enumerate(publication.writes)]
                self.faults.attempt("journaled")
            self.db.executemany(  # the group's files in one statement, committed with their publications
                "INSERT INTO publication_files (publication_seq, ordinal, path, role, record_id, revision, "
                "new_sha256, new_bytes, base_sha256, base_bytes, removes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                files)

    def _complete(self, publication: _Publication) -> None:
        """Steps 3 to 5 for one journalled publication (recovery rolls one forward with this)."""
        directories: set[Path] = set()
        self._install(publication, directories)
        self._report_installed([publication], directories)
        self._acknowledge([publication])

    def _install(self, publication: _Publication, directories: set[Path]) -> None:
        """Step 3 for one publication (``_install_group``); raises what refused it."""
        self._install_group([publication], directories)
        if publication.error is not None:
            raise publication.error

    def _install_group(self, group: list[_Publication], directories: set[Path]) -> None:
        """Step 3: install the group's files, each compared with the bytes it was planned on; what refuses a
        publication is its ``error``, and the files it installed stay for its roll-back.  The directories
        whose entries changed are added to ``directories`` for ``_report_installed`` to sync.

        Every new file is written to a temp file and synced on the sync threads, all at once, then renamed in
        installation order once all are: a publication of three files, or a group of eight pages, waits for one
        round of fsync instead of one per file, and the lane for no file's creation (a file system that is
        committing its journal for someone's fsync makes a creation wait: a third of the lane's samples at
        1,000 notes when the lane made them itself, py-spy, load 6-8).  The group's first file is made on the
        lane, as the lone file of a single write is: handing it to a thread made such a write slower.  A group
        of ``SYNCFS_FILES`` new files or more has them written and closed, not synced, and makes them durable
        with one sync of their file system once all are (``_sync_written``)."""
        asked: list[tuple[_Publication, FileWrite, Future[StagedFile] | None]] = []
        folders: set[tuple[Path, str]] = set()  # made or found already, for this group
        partitions: set[str] = set()  # made or found already, for this group
        point = self._sync_point(group)  # before any temp file is written: it reports errors from then on
        for publication in group:
            try:
                if publication.plan.partition not in partitions:
                    self.store.ensure_partition(publication.plan.partition)
                    partitions.add(publication.plan.partition)
                asked += [(publication, write, staging) for write, staging in self._stage(
                    publication, folders, here=not any(work is not None for _, _, work in asked),
                    synced=point is None) if staging is not ALREADY]
            except Exception as exc:
                publication.error = exc
        try:
            staged = _staged(asked)
            if point is not None:
                self._sync_written(staged, point)
            for publication, write, staging in staged:
                if publication.error is None:
                    try:
                        self._put_in_place(publication, write, staging, directories)
                    except Exception as exc:
                        publication.error = exc
        finally:  # every temp file waited for (none is left being made), those not installed removed
            if point is not None:
                point.close()
            for _, _, work in asked:
                if work is not None and _outcome(work) is None and not work.result().settled:
                    work.result().discard()

    def _stage(self, publication: _Publication, folders: set[tuple[Path, str]], *, here: bool, synced: bool = True
               ) -> list[tuple[FileWrite, Future[StagedFile] | None]]:
        """Compare each file of ``publication`` with its planned base and have its new bytes written to a temp
        file beside it and synced (None: a removal; ``ALREADY``: a file that is as the plan wants it already),
        its folder made first unless in ``folders``; with ``here`` the first such file is made on the lane;
        without ``synced`` the temp files are written and closed only (``_sync_written`` syncs them).  On
        an error, the temp files asked for are waited for and removed.  Its partition's folder is made already."""
        stage = partial(stage_synced if synced else stage_written, staging=self.store.staging)
        partition = publication.plan.partition
        staged: list[tuple[FileWrite, Future[StagedFile] | None]] = []
        try:
            for write in publication.writes:
                current = None if write.path in publication.absent else self._current_sha(partition, write)
                if current == write.new_sha256:
                    if not write.removes:
                        info = self._stat_installed(self._root(partition, write), write)
                        publication.installed[write.path] = info
                        self.on_installed(partition, write.path, info)
                    staged.append((write, ALREADY))
                    continue
                self._expect_base(write, current)
                self.faults.attempt("installed")
                if write.removes:
                    staged.append((write, None))
                    continue
                root = self._root(partition, write)
                parent = write.path.rpartition("/")[0]
                if parent and (root, parent) not in folders:
                    ensure_dirs(root, parent)  # here, not on two sync threads at once
                    folders.add((root, parent))
                if here and not any(isinstance(work, Future) for _, work in staged):
                    staged.append((write, _made_here(stage, root, write.path, write.data)))
                else:
                    staged.append((write, self._beside(stage, root, write.path, write.data)))
        except BaseException:
            for _, staging in staged:
                if isinstance(staging, Future) and _outcome(staging) is None:
                    staging.result().discard()
            raise
        return staged

    def _sync_point(self, group: list[_Publication]) -> SyncPoint | None:
        """The vault's file system, to be synced once for a group of ``SYNCFS_FILES`` new files or more; None: each
        file is fsynced as it is written (a smaller group, no ``syncfs`` here, or the store's folder unreadable)."""
        if self._syncfs is None:
            return None
        files = sum(not write.removes for publication in group if publication.error is None
                    for write in publication.writes)
        if files < SYNCFS_FILES:
            return None
        try:
            return SyncPoint(self.store.root, self._syncfs)
        except OSError:
            return None

    def _sync_written(self, staged: list[tuple[_Publication, FileWrite, StagedFile | None]], point: SyncPoint
                      ) -> None:
        """Make the group's temp files, all written, durable before any is renamed (``SyncPoint.make_durable``: one
        sync of their file system); one whose sync failed refuses its publication, as an fsync that fails does."""
        written = [(publication, staging) for publication, _, staging in staged if staging is not None]
        failed = point.make_durable([staging.temp for _, staging in written], self._beside)
        if point.refused:
            self._syncfs = None  # the kernel would refuse it again
        for publication, staging in written:
            if staging.temp in failed:
                publication.error = publication.error or failed[staging.temp]

    def _put_in_place(self, publication: _Publication, write: FileWrite, staging: StagedFile | None,
                      directories: set[Path]) -> None:
        """Rename one synced file over its target (compared with its base again right before), or remove it."""
        partition = publication.plan.partition
        root = self._root(partition, write)
        if staging is None:
            self._remove(root, partition, write, directories)
        else:
            # Compared again right before the rename: an edit made while the new bytes were synced is a
            # conflict too, not a version lost without the engine ever seeing it.
            self.on_installing(partition, write.path)
            info = None
            try:
                info = publication.installed[write.path] = FileStat.of(staging.install(
                    check=lambda: self._expect_base(write, self._current_sha(partition, write)),
                    directories=directories))
            finally:
                # Told at once, not after the group's directories are synced: the watcher reports the rename
                # within a millisecond, and a search seeing a report that is not the engine's own install
                # would wait for the whole group on the lane (the grep tail beside writers, issue 31).
                self.on_installed(partition, write.path, info)
        self.faults.reach("installed")

    def _remove(self, root: Path, partition: str, write: FileWrite, directories: set[Path]) -> None:
        """Remove one file of a publication, compared with the bytes it was planned on right before."""
        target = resolve_inside(root, write.path)
        self._expect_base(write, self._current_sha(partition, write))
        try:
            os.unlink(target)
        except FileNotFoundError:  # removed by someone else since the comparison: what was wanted
            pass
        directories.add(target.parent)

    def _checkpoint_beside(self, group: list[_Publication]) -> Future[None] | None:
        """Step 4 begun beside step 3: the checkpoint names the group's last journalled publication while its
        files are installed.  ``_acknowledge`` sets it again (a no-op unless a member was refused meanwhile)."""
        if not group:
            return None
        return self._beside(self.store.set_checkpoint, max(publication.seq for publication in group))

    def _report_installed(self, group: list[_Publication], directories: set[Path]) -> None:
        """Make the group's renames durable, each directory synced once and all at once (``_install`` told
        ``on_installed`` as each was renamed)."""
        if len(directories) > 1:
            for sync in [self._beside(fsync_dir, directory) for directory in sorted(directories)]:
                sync.result()
        elif directories:
            fsync_dir(next(iter(directories)))

    def _acknowledge(self, group: list[_Publication], *, then: Callable[[], None] | None = None) -> None:
        """Steps 4 and 5: one checkpoint naming the group's last publication, then one transaction that
        catalogues every file as installed (a later edit is seen by the next catalog sync), re-checks
        what refers to them, queues them for git and marks each publication applied; ``then`` runs last
        inside that transaction (the next group's journal, ``publish_chained``)."""
        for _ in group:
            self.faults.attempt("checkpointed")
        self.store.set_checkpoint(max(publication.seq for publication in group))
        for _ in group:
            self.faults.reach("checkpointed")
        written: dict[str, list[str]] = {}
        git_states: dict[int, GitState] = {}
        with self.db.atomic():
            gone: dict[str, set[str]] = {}
            records: list[PublishedRecord] = []
            for publication in group:
                partition = publication.plan.partition
                removed = [write.path for write in publication.writes if write.removes]
                if removed:  # forgotten as an outside deletion is: its record or source leaves the catalog
                    gone.setdefault(partition, set()).update(self.catalog.forget_paths(partition, removed))
                for write in publication.writes:
                    if write.removes or write.role == "ontology":
                        continue
                    info = publication.installed[write.path]
                    if write.role == "record":
                        records.append(PublishedRecord(partition, write.path, write.data, info,
                                                       publication.publication_id, publication.plan.agent,
                                                       write.read, write.new_sha256))
                    elif write.role == "descriptor":
                        self.catalog.index_descriptor(partition, write.path, write.data, info)
                written.setdefault(partition, []).extend(write.path for write in publication.writes)
            self.catalog.index_published(records)
            for partition, paths in written.items():
                self.catalog.refresh_cross_checks(partition, paths, gone=gone.get(partition, set()))
            for _ in group:
                self.faults.reach("catalogued")
            # One statement a table for the group (git asked once): the same rows as one a publication, in the
            # same transaction, which a fault injected at any publication's step rolls back whole.
            now = format_timestamp(utc_now())
            seqs = [(publication.seq,) for publication in group]
            if self.git_enabled():
                self.db.executemany(
                    "INSERT INTO outbox (publication_seq, state, updated_at) VALUES (?, 'pending', ?)",
                    [(seq, now) for seq, in seqs])
                git_states.update((seq, {"state": "pending"}) for seq, in seqs)
            else:  # nothing will read the journalled bytes again
                self.db.executemany("DELETE FROM publication_files WHERE publication_seq = ?", seqs)
                git_states.update((seq, {"state": "unavailable"}) for seq, in seqs)
            self.db.executemany("UPDATE publications SET state = 'applied', finished_at = ? WHERE seq = ?",
                                [(now, seq) for seq, in seqs])
            for _ in group:
                self.faults.attempt("acknowledged")
            if then is not None:
                then()
        for publication in group:  # only once the transaction is committed
            publication.git = git_states[publication.seq]

    def _roll_back_one(self, publication: _Publication) -> bool:
        return self._roll_back(publication.seq, publication.plan.partition, publication.writes,
                               reason=str(publication.error))

    def _check_installable(self, partition: str, writes: list[FileWrite]) -> set[str]:
        """Refuse, before anything is journaled, a write whose path passes a symlinked or non-directory
        component of the vault (a ``claims/`` that is a symlink), naming that component: the engine never
        writes through a symlink, and reporting it as an edit race would send the owner looking elsewhere.
        Returns the paths the walk found nothing at (``_Publication.absent``)."""
        absent = set()
        for write in writes:
            root = self._root(partition, write)
            if write.role == "ontology" and (partition != PRIVATE_SCOPE or write.path != ONTOLOGY_PATH):
                raise InvalidParams(f"only the private partition writes {ONTOLOGY_PATH}", path=write.path)
            try:
                if not present_inside(root, write.path):
                    absent.add(write.path)
            except UnsafePath as exc:
                where = f"{partition_dir(partition)}/{exc.details.get('component', write.path)}"
                what = "a symlink (symlinks are never followed)" if exc.details.get("problem") == "symlink" \
                    else "not a directory"
                raise StoreUnavailable(
                    f"the vault's {where} is {what}; nothing is written there until it is a real directory "
                    "(knowledge doctor names it); nothing was written", path=write.path,
                    component=exc.details.get("component"), problem=exc.details.get("problem"),
                    recordId=write.record_id) from exc
        return absent

    @staticmethod
    def _expect_base(write: FileWrite, current: str | None) -> None:
        if current != write.base_sha256:
            raise Conflict("the file changed on disk after it was read; nothing was overwritten",
                           path=write.path, recordId=write.record_id)

    def _expect_ours(self, partition: str, write: FileWrite) -> None:
        """Undo only our own bytes: an edit made since the install is left alone."""
        if self._current_sha(partition, write) != write.new_sha256:
            raise Conflict("the file changed on disk after it was installed; it is left as edited",
                           path=write.path, recordId=write.record_id)

    @staticmethod
    def _stat_installed(root: Path, write: FileWrite) -> FileStat:
        try:
            return FileStat.of(os.lstat(root / write.path))
        except FileNotFoundError as exc:  # moved or deleted on disk since it was compared
            raise Conflict("the file was moved or deleted on disk while it was published; nothing was "
                           "overwritten", path=write.path, recordId=write.record_id) from exc

    def _root(self, partition: str, write: FileWrite) -> Path:
        """The folder a write's path is relative to: the vault for the ontology, else the partition's."""
        return self.store.vault if write.role == "ontology" else self.store.partition_root(partition)

    def _current_sha(self, partition: str, write: FileWrite) -> str | None:
        try:
            return sha256_if_present(self._root(partition, write), write.path)
        except UnsafePath:
            return "unsafe"

    def _roll_back(self, seq: int, partition: str, writes: list[FileWrite], *, reason: str) -> bool:
        """Undo what was installed; a file someone else changed meanwhile is left alone.

        Returns False (and leaves the publication journalled, blocking reads
        until recovery) when the disk refuses the undo.
        """
        try:
            for write in reversed(writes):
                root = self._root(partition, write)
                if self._current_sha(partition, write) != write.new_sha256:
                    continue
                if write.base is None:
                    remove_inside(root, write.path)
                    continue
                try:
                    write_inside(root, write.path, write.base, check=lambda: self._expect_ours(partition, write),
                                 staging=self.store.staging)
                except Conflict:
                    continue  # edited since the comparison above: left as edited
            # The manifest's checkpoint goes back before the journal says rolled back: a manifest that cannot
            # be written (moved away, a full disk) leaves the publication pending, which the manifest may still
            # name, and recovery finishes the undo later; the other order left a checkpoint no journal entry
            # explains, and the store unavailable for good.
            self.store.set_checkpoint(self.store.applied_checkpoint())
            with self.db.atomic():
                self.db.execute(
                    "UPDATE publications SET state = 'rolled_back', finished_at = ?, detail = ? WHERE seq = ?",
                    (format_timestamp(utc_now()), reason[:500], seq),
                )
        except (OSError, KnowledgeError):
            return False
        return True

    # --- recovery --------------------------------------------------------------------

    def _remove_leftover_temp_files(self, partition: str, writes: list[FileWrite]) -> None:
        """A crash in the middle of an atomic write leaves its hidden temp file (``.<name>.<pid>-<n>.tmp``)
        beside the target; recovery removes those of the publication's own files and of the manifest."""
        targets = [(self.store.root, self.store.manifest_path.name)]
        for write in writes:
            root = self._root(partition, write)
            parent, _, name = write.path.rpartition("/")
            try:
                targets.append((resolve_inside(root, parent) if parent else root, name))
            except (UnsafePath, KnowledgeError):
                continue
        for directory, name in targets:
            for leftover in directory.glob(f".{glob.escape(name)}.*.tmp"):
                try:
                    leftover.unlink()
                except OSError:
                    pass

    def recover(self) -> list[dict[str, Any]]:
        """Roll every journalled publication forward or back; returns what happened to each."""
        outcomes = []
        for row in self.db.all("SELECT * FROM publications WHERE state = 'journaled' ORDER BY seq"):
            seq, partition = row["seq"], row["partition"]
            writes = [
                FileWrite(path=f["path"], role=f["role"], data=f["new_bytes"] or b"", record_id=f["record_id"],
                          revision=f["revision"], base=f["base_bytes"], removes=bool(f["removes"]))
                for f in self.db.all(
                    "SELECT * FROM publication_files WHERE publication_seq = ? ORDER BY ordinal", (seq,)
                )
            ]
            foreign = [
                write.path for write in writes
                if self._current_sha(partition, write) not in (write.new_sha256, write.base_sha256)
            ]
            outcome = {"publicationId": row["id"], "requestId": row["request_id"]}
            self._remove_leftover_temp_files(partition, writes)
            if foreign:
                done = self._roll_back(seq, partition, writes,
                                       reason=f"files changed outside the engine: {', '.join(foreign)}")
                outcome["outcome"] = "rolled_back" if done else "pending"
            else:
                plan = Plan(partition, row["operation"], row["request_id"], row["request_hash"], row["agent"],
                            writes)
                try:
                    self._complete(_Publication(plan, writes, seq=seq, publication_id=row["id"]))
                    outcome["outcome"] = "rolled_forward"
                except (OSError, KnowledgeError) as exc:
                    done = self._roll_back(seq, partition, writes, reason=str(exc))
                    outcome["outcome"] = "rolled_back" if done else "pending"
            outcomes.append(outcome)
        return outcomes
