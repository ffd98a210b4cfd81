"""The catalog: what each partition's files hold, kept in step with the disk.

The Markdown files are authoritative; the catalog (in ``state.sqlite``) is
what the engine knows of them.  ``sync`` walks a partition (or re-stats the
paths the watcher reported), re-reads only files whose size, mtime or inode
changed, and records external edits, renames and deletions.  A scan that
cannot finish (too many entries, an unreadable directory) raises instead of
leaving a partial catalog.

A record is *current* when its file is valid and in scope, it is the only
file with its id, its lifecycle is ``active``, it is not a fixture and its
references (evidence sources, relationship endpoints) hold
(``catalog_reads._CURRENT_RULE``).  ``Catalog`` is the writing half; the
typed reads the rest of the engine makes are its base, ``CatalogReads``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Iterator, Protocol

from ..core.db import Database
from ..core.errors import KnowledgeError
from ..vault.evidence import DESCRIPTOR_MAX_BYTES, SourceDescriptor, parse_descriptor
from ..core.files import TreeReader, sha256_bytes, sha256_file
from ..core.findings import Finding, has_errors
from ..vault.frontmatter import RECORD_MAX_BYTES
from ..core.ids import format_timestamp, generated_ids_in, utc_now
from ..vault.record_view import RecordView, view_of
from ..vault.ontology import Ontology
from ..vault.records import Record
from .catalog_reads import VIEW_COLUMNS, CatalogReads, in_chunks, placeholders
from . import walk
from .store import Store
from .outside_edits import SeenVersion, date_outside_edits
from .record_rows import CATALOG_COLUMNS, Catalogued, Unreadable, catalogue, catalogue_files
from .walk import FileStat, descriptor_for, is_descriptor_path, shown_path

# A change touching more ids than this re-checks the whole partition (one pass is cheaper than lookups).
INCREMENTAL_CHECK_MAX = 2_000
# A sync of at least this many new record files feeds them to the search index as it writes them (IndexFeed).
FEED_MIN = 5_000


_UPSERT_RECORD = (
    f"INSERT INTO catalog ({', '.join(CATALOG_COLUMNS)}) "
    f"VALUES ({', '.join(f':{name}' for name in CATALOG_COLUMNS)}) ON CONFLICT(partition, path) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in CATALOG_COLUMNS if name not in ("partition", "path"))
)
# A record fed to the search index during the sync: its row says which revision the index holds.
_UPSERT_INDEXED = (
    f"INSERT INTO catalog ({', '.join(CATALOG_COLUMNS)}, indexed_sha) "
    f"VALUES ({', '.join(f':{name}' for name in CATALOG_COLUMNS)}, :sha256) ON CONFLICT(partition, path) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in (*CATALOG_COLUMNS, "indexed_sha")
                if name not in ("partition", "path"))
)
# An unreadable file has no record: what a view wrote of it before is cleared.
_FORGET_VIEW = ", ".join(f"{name} = {'0' if name == 'fixture' else 'NULL'}" for name in VIEW_COLUMNS)
# The change log's entry for one record (migration 0005's trigger statement, for the ids a sync logs itself).
_LOG_CHANGE = ("INSERT INTO catalog_changes (partition, record_id, catalog_version) VALUES (?, ?, ?) "
               "ON CONFLICT (partition, record_id) DO UPDATE SET catalog_version = excluded.catalog_version")
_KEEP_REVISION = ("INSERT OR IGNORE INTO revisions (partition, record_id, revision, sha256, content, path, origin, "
                  "publication_id, agent, observed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def keep_revision(db: Database, partition: str, record_id: str, revision: int, data: bytes, path: str, *,
                  origin: str, observed_at: str) -> None:
    """Keep one version of a record in the revision archive (once per content), as the catalog keeps each
    revision it sees; a sync merge keeps the version that did not stand this way (origin ``sync``)."""
    db.execute(_KEEP_REVISION, (partition, record_id, revision, sha256_bytes(data), data, path, origin, None, None,
                                observed_at))


REMOVED_BY_SYNC = "removed_by_sync"


def record_removals(db: Database, removals: Iterable[tuple[str, str, str | None]], *, detail: str,
                    at: str) -> None:
    """Record each (partition, path, record id) a sync round removed as an event of the record's history
    (kind ``removed_by_sync``, ``detail`` saying from which machine): a removal that came from another
    machine is shown as what happened, never as a file that silently vanished."""
    db.executemany("INSERT INTO events (partition, kind, path, record_id, detail, at) VALUES (?, ?, ?, ?, ?, ?)",
                   [(partition, REMOVED_BY_SYNC, path, record_id, detail, at)
                    for partition, path, record_id in removals])


def sync_removals(db: Database, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` removals sync rounds made, newest first."""
    return [dict(row) for row in db.all(
        "SELECT partition, path, record_id, detail, at FROM events WHERE kind = ? ORDER BY seq DESC LIMIT ?",
        (REMOVED_BY_SYNC, limit))]


@dataclass(frozen=True)
class PublishedRecord:
    """One record file a publication installed, as ``Catalog.index_published`` catalogues it."""

    partition: str
    path: str
    data: bytes
    info: FileStat
    publication_id: str
    agent: str | None
    read: Record | None = None
    sha256: str | None = None  # of ``data``, where the publication has it already


@dataclass
class SyncReport:
    """What a sync changed; empty lists mean the catalog already matched the disk."""

    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def touched(self) -> bool:
        return bool(self.changed or self.removed)


class IndexFeed(Protocol):
    """A search index taking a large sync's new records as the sync writes them (engine/index/tantivy_index.py
    ``SyncFeed``).  In the sync's transaction: ``begin`` (the new paths), ``takes`` and ``add`` per chunk,
    ``settle`` after the cross-checks; ``commit`` after the catalog's COMMIT, else ``abandon``."""

    def begin(self, paths: list[str]) -> None: ...
    def takes(self, entry: Catalogued) -> bool: ...
    def add(self, entries: list[Catalogued]) -> None: ...
    def settle(self) -> None: ...
    def commit(self) -> None: ...
    def abandon(self) -> None: ...


class Catalog(CatalogReads):
    """Catalog reads and writes for one store; used from the store's lane only."""

    def __init__(self, store: Store) -> None:
        super().__init__(store.db)
        self.store = store
        # Opens a partition's IndexFeed, or None when the index cannot take one now (set by the search index).
        self.feeds: Callable[[str], IndexFeed | None] | None = None

    # --- sync ------------------------------------------------------------------

    def sync(self, partition: str, paths: Iterable[str] | None = None, *, force: bool = False) -> SyncReport:
        """Bring the partition's catalog in line with the disk.

        ``paths`` limits the work to files the watcher reported; None walks
        the whole partition.  ``force`` re-reads files whose stat did not
        change (the ontology they were validated against did).
        """
        root = self.store.partition_root(partition)
        report = SyncReport()
        forced: set[str] = set()
        if paths is None:
            known = self._known_stats(partition)
            candidates, rejected = walk.walk_partition(root)
            present = set(candidates) | {finding.path for finding in rejected}
            missing = [path for path in known if path not in present]
        else:
            paths = set(paths)
            examined = sorted({descriptor_for(path) for path in paths})
            known = self._known_stats(partition, [shown_path(relpath) for relpath in examined])
            candidates, rejected, missing = {}, [], []
            for relpath in examined:
                if relpath not in paths:
                    forced.add(relpath)
                current = walk.stat_one(root, relpath)
                if current is None:
                    if shown_path(relpath) in known:
                        missing.append(shown_path(relpath))
                elif isinstance(current, Finding):
                    rejected.append(current)
                else:
                    candidates[relpath] = current
        first_sync = self.db.one("SELECT 1 FROM scans WHERE partition = ?", (partition,)) is None
        stale = {relpath: info for relpath, info in candidates.items()
                 if force or relpath in forced or known.get(relpath) != info}
        if not force:
            stale = self._restamp_unchanged(partition, root, stale, known, forced)
        if not (first_sync or stale or rejected or missing):
            return report  # the disk matches: no transaction, so a read never needs to write (a full disk)
        cache = self.db.large_cache() if len(stale) > INCREMENTAL_CHECK_MAX else nullcontext()
        descriptors = {relpath for relpath in stale if is_descriptor_path(relpath)}
        fresh = [relpath for relpath in stale if relpath not in known and relpath not in descriptors]
        with self._feeding(partition, fresh) as feed, cache, self.db.atomic():
            # What the changed paths held before: records naming those ids are re-checked too (a full check,
            # forced or the first, checks every record anyway).
            full = force or first_sync
            # (A path the catalog does not know, a new file, held nothing: it is not looked up.)
            before = set() if full else self._ids_at(
                partition, [*(relpath for relpath in stale if relpath in known),
                            *(finding.path or "" for finding in rejected), *missing])
            ontology = self.store.ontology(partition)  # one ontology for the whole sync
            ordered = sorted(stale.items())
            report.changed.extend(relpath for relpath, _ in ordered)
            with TreeReader(root) as reader:
                for relpath, info in ordered:
                    if relpath in descriptors:
                        self._load_descriptor(partition, reader, relpath, info)
            records = [(relpath, info) for relpath, info in ordered if relpath not in descriptors]
            if feed is not None:
                feed.begin(fresh)
            seen: list[SeenVersion] = []  # versions not written by the engine, seen by this sync
            with closing(catalogue_files(root, partition, ontology, records)) as chunks, \
                    self._logging_changes(partition) as written:
                for chunk in chunks:  # the workers parse the next chunks while this one is written
                    for entry in chunk:
                        if isinstance(entry, Unreadable):
                            self._record_rejected(partition, entry.finding, entry.info)
                    catalogued = [entry for entry in chunk if isinstance(entry, Catalogued)]
                    self._write_catalogued(catalogued, known, feed)
                    written.extend(entry.row["record_id"] for entry in catalogued if entry.row["record_id"] is not None)
                    if not first_sync:
                        seen.extend(SeenVersion.of(entry) for entry in catalogued if entry.revision is not None)
            date_outside_edits(self.db, partition, seen)
            for finding in rejected:
                if self._record_rejected(partition, finding):
                    report.changed.append(finding.path or "")
            removed_ids = {}
            for relpath in missing:
                record_id = self._forget(partition, relpath)
                report.removed.append(relpath)
                if record_id is not None:
                    removed_ids[record_id] = relpath
            if not first_sync:
                report.events = self._record_events(partition, report, removed_ids)
            if report.touched:
                self.refresh_cross_checks(partition, report.changed, gone=before, full=full)
            if feed is not None:
                feed.settle()
            self.db.execute(
                "INSERT INTO scans (partition, synced_at) VALUES (?, ?) "
                "ON CONFLICT(partition) DO UPDATE SET synced_at = excluded.synced_at",
                (partition, format_timestamp(utc_now())),
            )
        return report

    @contextmanager
    def _logging_changes(self, partition: str) -> Iterator[list[str]]:
        """A block of the sync's transaction that logs the records it writes itself: the ids it adds to the list
        are stamped with the partition's catalog version when it ends, as the insert trigger would have stamped
        each, which leaves them to this meanwhile (migration 0010).  One statement in id order appends to the
        log's two B-trees where the trigger's inserts, in path order, landed anywhere in them: about a fifth of
        the upsert of 100,000 new rows.  A block that raises leaves the marker to the transaction's rollback."""
        written: list[str] = []
        self.db.execute("INSERT INTO catalog_changes_deferred (partition) VALUES (?)", (partition,))
        yield written
        row = self.db.one("SELECT catalog_version FROM partition_state WHERE partition = ?", (partition,))
        version = row["catalog_version"] if row is not None else 0
        self.db.executemany(_LOG_CHANGE, [(partition, record_id, version) for record_id in sorted(set(written))])
        self.db.execute("DELETE FROM catalog_changes_deferred WHERE partition = ?", (partition,))

    @contextmanager
    def _feeding(self, partition: str, fresh: list[str]) -> Iterator[IndexFeed | None]:
        """The search index's feed for a sync adding ``fresh`` record files, when they are many and the index
        takes them: committed when the block (the sync's transaction) ends, abandoned when it raises."""
        feed = None
        if len(fresh) >= FEED_MIN and self.feeds is not None and not self.db.connection.in_transaction:
            feed = self.feeds(partition)
        if feed is None:
            yield None
            return
        try:
            yield feed
        except BaseException:
            feed.abandon()
            raise
        feed.commit()

    def paths_under(self, partition: str, directory: str) -> list[str] | None:
        """The files a sync of the subtree ``directory`` must look at (the watcher reported the directory
        made, moved in or out, or removed, and so perhaps not each file in it): those on disk under it now,
        and those the catalog knows under it.  None when the directory, or a directory above it, is not a
        plain directory (a symlink, say): the caller walks the whole partition, which reports it."""
        root = self.store.partition_root(partition)
        prefix = directory.strip("/") + "/"
        probe, present = root, True
        for part in prefix[:-1].split("/"):
            probe = probe / part
            try:
                info = os.lstat(probe)
            except (FileNotFoundError, NotADirectoryError):
                present = False  # removed: only what the catalog knows under it is looked at
                break
            if not stat.S_ISDIR(info.st_mode):
                return None
        found, rejected = walk.walk_partition(root / prefix) if present else ({}, [])
        paths = {prefix + relpath for relpath in found} | {prefix + f.path for f in rejected if f.path}
        past = prefix[:-1] + chr(ord("/") + 1)  # every path that starts with the prefix sorts before this one
        for table in ("catalog", "sources"):
            paths.update(row[0] for row in self.db.tuples(
                f"SELECT path FROM {table} WHERE partition = ? AND path >= ? AND path < ?", (partition, prefix, past)))
        return sorted(paths)

    def refresh_cross_checks(self, partition: str, changed: list[str], *, gone: set[str] = frozenset(),
                             full: bool = False) -> None:
        """Re-derive duplicate flags and reference checks after ``changed`` files changed.

        Only what the change can affect is checked again: the changed files, and the records whose
        references name an id the change touched (one the changed files hold now, or ``gone``: one they
        or removed files held before).  ``full`` (an ontology change, a first scan) checks everything,
        as does the first change of a partition whose references were never recorded.
        """
        touched: set[str] = set()
        if not full:
            touched = self._ids_at(partition, changed) | set(gone)
            state = self.db.one("SELECT refs_ready FROM partition_state WHERE partition = ?", (partition,))
            full = state is None or not state["refs_ready"] or len(touched) > INCREMENTAL_CHECK_MAX
        if full:
            self._recompute_duplicates(partition)
            self.recheck_references(partition)
        else:
            self._recompute_duplicates(partition, touched)
            self.recheck_references(partition, sorted(set(changed) | self._naming(partition, touched)))
        self.db.execute(
            "INSERT INTO partition_state (partition, catalog_version, refs_ready) VALUES (?, 1, 1) "
            "ON CONFLICT(partition) DO UPDATE SET catalog_version = catalog_version + 1, refs_ready = 1",
            (partition,),
        )

    def _ids_at(self, partition: str, paths: list[str]) -> set[str]:
        """The record ids and source ids the catalog holds at ``paths``."""
        ids: set[str] = set()
        for chunk in in_chunks(sorted(set(paths))):
            marks = placeholders(chunk)
            # No "record_id IS NOT NULL" here: SQLite would then walk the (partition, record_id) index instead
            # of looking the paths up by the primary key.
            ids.update(row[0] for row in self.db.tuples(
                f"SELECT record_id FROM catalog WHERE partition = ? AND path IN ({marks}) "
                f"UNION SELECT source_id FROM sources WHERE partition = ? AND path IN ({marks})",
                (partition, *chunk, partition, *chunk)))
        ids.discard(None)
        return ids

    def _naming(self, partition: str, ids: set[str]) -> set[str]:
        """Paths of the records whose reference checks look up any of ``ids``."""
        paths: set[str] = set()
        for chunk in in_chunks(sorted(ids)):
            # No DISTINCT (the set removes repeats): with it SQLite walks every reference of the partition in
            # path order instead of looking the targets up, a cost that grew with the vault at every write.
            paths.update(row[0] for row in self.db.tuples(
                f"SELECT path FROM refs WHERE partition = ? AND target IN ({placeholders(chunk)})",
                (partition, *chunk)))
        return paths

    def _restamp_unchanged(self, partition: str, root: Path, stale: dict[str, FileStat],
                           known: dict[str, tuple[int, int, int, int]], forced: set[str]) -> dict[str, FileStat]:
        """``stale`` less the record files whose stamp changed but whose bytes did not, which get their new stamp
        without being parsed and checked again.

        A copied, restored or checked-out vault gives every file a new inode and ctime (and often mtime): its
        first sync used to re-read the whole partition.  A record file of the size the catalog knows is hashed
        first; the same sha256 as catalogued means the same record, so only the stamp changes.  Descriptors
        are read again whatever (their check looks at the retained original beside them), as are files the
        watcher's report forced."""
        same_size = [relpath for relpath, info in stale.items()
                     if relpath not in forced and not is_descriptor_path(relpath)
                     and relpath in known and known[relpath][1] == info.size]
        if not same_size:
            return stale
        catalogued = {}
        for chunk in in_chunks(same_size):
            catalogued.update(self.db.tuples(
                f"SELECT path, sha256 FROM catalog WHERE partition = ? AND path IN ({placeholders(chunk)}) "
                "AND sha256 IS NOT NULL", (partition, *chunk)))
        restamped: dict[str, FileStat] = {}
        with TreeReader(root) as reader:
            for relpath in same_size:
                if relpath not in catalogued:
                    continue
                try:
                    data, real = reader.read(relpath, max_bytes=RECORD_MAX_BYTES)
                except KnowledgeError:
                    continue  # read again below, which records why it cannot be
                info = FileStat.of(real)
                if info == stale[relpath] and sha256_bytes(data) == catalogued[relpath]:
                    restamped[relpath] = info
        if restamped:
            with self.db.atomic():
                self.db.executemany(
                    "UPDATE catalog SET ino = ?, file_size = ?, mtime_ns = ?, ctime_ns = ? WHERE partition = ? "
                    "AND path = ?", [(*info, partition, relpath) for relpath, info in restamped.items()])
        return {relpath: info for relpath, info in stale.items() if relpath not in restamped}

    def _known_stats(self, partition: str, paths: list[str] | None = None) -> dict[str, tuple[int, int, int, int]]:
        """What the catalog last saw of each file (of ``paths``, or every one): (inode, size, mtime, ctime)."""
        known = {}
        for table in ("catalog", "sources"):
            select = f"SELECT path, ino, file_size, mtime_ns, ctime_ns FROM {table} WHERE partition = ?"
            batches = [self.db.tuples(select, (partition,))] if paths is None else [
                self.db.tuples(f"{select} AND path IN ({placeholders(chunk)})", (partition, *chunk))
                for chunk in in_chunks(paths)]
            for rows in batches:
                known.update((path, (ino, size, mtime, ctime)) for path, ino, size, mtime, ctime in rows)
        return known

    def index_published(self, records: list[PublishedRecord]) -> None:
        """Catalog the record files a group of publications installed, from the exact bytes it installed and, as
        ``read``, the record ``parse_record`` reads from them (kept from rendering them): each partition's
        ontology read once, every row written by one statement per table."""
        ontologies: dict[str, Ontology] = {}
        pending = []
        for entry in records:
            ontology = ontologies.get(entry.partition)
            if ontology is None:
                ontology = ontologies[entry.partition] = self.store.ontology(entry.partition)
            pending.append(catalogue(entry.partition, entry.path, entry.data, entry.info, ontology,
                                     entry.publication_id, entry.agent, read=entry.read, sha256=entry.sha256))
        self._write_catalogued(pending)

    def _write_catalogued(self, pending: list[Catalogued], known: Container[str] | None = None,
                          feed: IndexFeed | None = None) -> None:
        """Write ``pending``: a statement per table for all of them, in their order.  ``known``: the paths among
        them the catalog may hold names of (a path it had no row for has none); None, any of them.  ``feed``:
        the search index's, given the records it takes (their rows say it holds them)."""
        if not pending:
            return
        fed = [entry for entry in pending if feed.takes(entry)] if feed is not None else []
        self.db.executemany(_KEEP_REVISION, [entry.revision for entry in pending if entry.revision is not None])
        if feed is not None and fed:
            self.db.executemany(_UPSERT_INDEXED, [entry.row for entry in fed])
            if len(fed) < len(pending):
                taken = {id(entry) for entry in fed}
                self.db.executemany(_UPSERT_RECORD, [entry.row for entry in pending if id(entry) not in taken])
            feed.add(fed)
        else:
            self.db.executemany(_UPSERT_RECORD, [entry.row for entry in pending])
        replaced = [(entry.row["partition"], entry.row["path"]) for entry in pending
                    if known is None or entry.row["path"] in known]
        self.db.executemany("DELETE FROM names WHERE partition = ? AND path = ?", replaced)
        self.db.executemany("INSERT INTO names (partition, path, key) VALUES (?, ?, ?)",
                            [(entry.row["partition"], entry.row["path"], key)
                             for entry in pending for key in entry.names])
        self.db.executemany("DELETE FROM mentions WHERE partition = ? AND path = ?", replaced)
        self.db.executemany("INSERT INTO mentions (partition, path, target) VALUES (?, ?, ?)",
                            [(entry.row["partition"], entry.row["path"], target) for entry in pending
                             for target in _mentioned(entry.row["frontmatter"], entry.row["record_id"])])

    def fill_mentions(self) -> None:
        """Record the ids every catalogued frontmatter holds, once, for a store catalogued before ``mentions``
        was kept (its migration leaves a mark in ``meta``); until then ``mentioning`` reads every frontmatter."""
        if self.db.one("SELECT 1 FROM meta WHERE key = 'mentions_unfilled'") is not None:
            with self.db.atomic():
                self.db.execute("DELETE FROM mentions")
                self.db.executemany("INSERT INTO mentions (partition, path, target) VALUES (?, ?, ?)",
                                    ((partition, path, target) for partition, path, record_id, frontmatter in
                                     self.db.iterate_tuples("SELECT partition, path, record_id, frontmatter "
                                                            "FROM catalog WHERE frontmatter IS NOT NULL")
                                     for target in _mentioned(frontmatter, record_id)))
                self.db.execute("DELETE FROM meta WHERE key = 'mentions_unfilled'")
        self._mentions_filled = True

    def _load_descriptor(self, partition: str, reader: TreeReader, relpath: str, info: FileStat) -> None:
        try:
            data, real = reader.read(relpath, max_bytes=DESCRIPTOR_MAX_BYTES)
        except KnowledgeError as exc:
            self._store_source(partition, relpath, None, [Finding("source_invalid", exc.message, path=relpath)],
                               info)
            return
        self.index_descriptor(partition, relpath, data, FileStat.of(real))

    def index_descriptor(self, partition: str, relpath: str, data: bytes, info: FileStat) -> None:
        """Catalog a source descriptor and check that its retained original is there."""
        descriptor, findings = parse_descriptor(data, relpath)
        if descriptor is not None:
            retained = self.store.partition_root(partition) / descriptor.retained_path
            try:
                retained_info = os.lstat(retained)
            except FileNotFoundError:
                retained_info = None
            if retained_info is None or not stat.S_ISREG(retained_info.st_mode):
                findings.append(Finding("source_missing", "the retained original is missing", path=relpath))
            elif retained_info.st_nlink > 1:
                findings.append(Finding("source_invalid", "the retained original has more than one hard link",
                                        path=relpath))
            elif retained_info.st_size != descriptor.size:
                findings.append(Finding("source_changed", "the retained original's size differs from its "
                                        "descriptor", path=relpath))
        self._store_source(partition, relpath, descriptor, findings, info)

    def _store_source(self, partition: str, relpath: str, descriptor: SourceDescriptor | None,
                      findings: list[Finding], info: FileStat) -> None:
        self.db.execute(
            "INSERT INTO sources (partition, source_id, path, retained_path, sha256, size, media_type, status, "
            "descriptor, findings, file_size, mtime_ns, ctime_ns, ino) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(partition, path) DO UPDATE SET source_id = excluded.source_id, "
            "retained_path = excluded.retained_path, sha256 = excluded.sha256, size = excluded.size, "
            "media_type = excluded.media_type, status = excluded.status, descriptor = excluded.descriptor, "
            "findings = excluded.findings, file_size = excluded.file_size, mtime_ns = excluded.mtime_ns, "
            "ctime_ns = excluded.ctime_ns, ino = excluded.ino",
            (
                partition, descriptor.id if descriptor else relpath, relpath,
                descriptor.retained_path if descriptor else None, descriptor.sha256 if descriptor else None,
                descriptor.size if descriptor else None, descriptor.media_type if descriptor else None,
                "invalid" if has_errors(findings) else "ok",
                json.dumps(descriptor.to_dict()) if descriptor else None,
                json.dumps([finding.to_dict() for finding in findings]), info.size, info.mtime_ns, info.ctime_ns,
                info.ino,
            ),
        )

    def _record_rejected(self, partition: str, finding: Finding, info: FileStat | None = None) -> bool:
        """Keep a rejected entry visible to diagnostics; True when that is news."""
        encoded = json.dumps([finding.to_dict()])
        previous = self.db.one(
            "SELECT file_status, findings FROM catalog WHERE partition = ? AND path = ?", (partition, finding.path)
        )
        if previous is not None and previous["file_status"] == "unreadable" and previous["findings"] == encoded:
            return False
        self.db.execute("DELETE FROM sources WHERE partition = ? AND path = ?", (partition, finding.path))
        self.db.execute("DELETE FROM names WHERE partition = ? AND path = ?", (partition, finding.path))
        self.db.execute("DELETE FROM mentions WHERE partition = ? AND path = ?", (partition, finding.path))
        self.db.execute(
            "INSERT INTO catalog (partition, path, file_status, findings, file_size, mtime_ns, ctime_ns, ino) "
            "VALUES (?, ?, 'unreadable', ?, ?, ?, ?, ?) ON CONFLICT(partition, path) DO UPDATE SET "
            f"{_FORGET_VIEW}, file_status = 'unreadable', findings = excluded.findings, "
            "file_size = excluded.file_size, ctime_ns = excluded.ctime_ns, mtime_ns = excluded.mtime_ns, "
            "ino = excluded.ino, sha256 = NULL",
            (partition, finding.path, encoded, info.size if info else None, info.mtime_ns if info else None,
             info.ctime_ns if info else None, info.ino if info else None),
        )
        return True

    def forget_paths(self, partition: str, paths: list[str]) -> set[str]:
        """Forget files a publication removed, as a sync forgets files deleted outside the engine; returns the
        ids they held (for ``refresh_cross_checks``'s ``gone``)."""
        held = self._ids_at(partition, paths)
        for relpath in paths:
            self._forget(partition, relpath)
        return held

    def _forget(self, partition: str, relpath: str) -> str | None:
        row = self.db.one("SELECT record_id, indexed_sha FROM catalog WHERE partition = ? AND path = ?",
                          (partition, relpath))
        if row is not None and row["indexed_sha"] is not None:
            self.db.execute("INSERT OR IGNORE INTO index_removals (partition, path) VALUES (?, ?)",
                            (partition, relpath))
        self.db.execute("DELETE FROM catalog WHERE partition = ? AND path = ?", (partition, relpath))
        self.db.execute("DELETE FROM sources WHERE partition = ? AND path = ?", (partition, relpath))
        self.db.execute("DELETE FROM names WHERE partition = ? AND path = ?", (partition, relpath))
        self.db.execute("DELETE FROM refs WHERE partition = ? AND path = ?", (partition, relpath))
        self.db.execute("DELETE FROM mentions WHERE partition = ? AND path = ?", (partition, relpath))
        return row["record_id"] if row is not None else None

    def _record_events(self, partition: str, report: SyncReport,
                       removed_ids: dict[str, str]) -> list[dict[str, Any]]:
        """External edits, renames and deletions, as the history shows them."""
        now = format_timestamp(utc_now())
        removed_ids = dict(removed_ids)
        events = []
        held: dict[str, str | None] = {}
        for chunk in in_chunks(report.changed):
            held.update(self.db.tuples(
                f"SELECT path, record_id FROM catalog WHERE partition = ? AND path IN ({placeholders(chunk)})",
                (partition, *chunk)))
        for relpath in report.changed:
            record_id = held.get(relpath)
            if record_id is not None and record_id in removed_ids:
                events.append({"kind": "renamed", "path": relpath, "record_id": record_id,
                               "detail": removed_ids.pop(record_id)})
            else:
                events.append({"kind": "edited", "path": relpath, "record_id": record_id, "detail": None})
        for record_id, relpath in removed_ids.items():
            events.append({"kind": "deleted", "path": relpath, "record_id": record_id, "detail": None})
        self.db.executemany(
            "INSERT INTO events (partition, kind, path, record_id, detail, at) VALUES (?, ?, ?, ?, ?, ?)",
            [(partition, e["kind"], e["path"], e["record_id"], e["detail"], now) for e in events],
        )
        return events

    # --- cross-record checks ----------------------------------------------------

    def _recompute_duplicates(self, partition: str, ids: set[str] | None = None) -> None:
        """A record id held by more than one readable file is a duplicate: for ``ids``, or every id."""
        duplicated = (
            "(record_id IN (SELECT record_id FROM catalog WHERE partition = :p AND record_id IS NOT NULL "
            "AND file_status IN ('ok', 'invalid') {only} GROUP BY record_id HAVING COUNT(*) > 1))"
        )
        if ids is None:
            everything = duplicated.format(only="")
            self.db.execute(f"UPDATE catalog SET duplicate = {everything} WHERE partition = :p "
                            f"AND duplicate != {everything}", {"p": partition})
            return
        for chunk in in_chunks(sorted(ids)):
            values = {"p": partition, **{f"i{n}": record_id for n, record_id in enumerate(chunk)}}
            among = f"AND record_id IN ({', '.join(f':i{n}' for n in range(len(chunk)))})"
            these = duplicated.format(only=among)
            self.db.execute(f"UPDATE catalog SET duplicate = {these} WHERE partition = :p {among} "
                            f"AND duplicate != {these}", values)

    def recheck_references(self, partition: str, paths: list[str] | None = None) -> None:
        """Evidence sources, relationship endpoints and page references must resolve in the partition.

        ``paths`` limits the check to those files; None checks every file.  The ids each check looks up
        are recorded (``refs``), so a later change finds the records it can affect.
        """
        ontology = self.store.ontology(partition)
        select = (f"SELECT path, kind, type, record_id, {_REFERENCE_VALUES}, xref_ok, xref_findings FROM catalog "
                  "WHERE partition = ? AND file_status = 'ok'")
        if paths is None:
            rows = self.db.tuples(select, (partition,))
            self.db.execute("DELETE FROM refs WHERE partition = ?", (partition,))
        else:
            rows = []
            for chunk in in_chunks(paths):
                marks = placeholders(chunk)
                rows += self.db.tuples(f"{select} AND path IN ({marks})", (partition, *chunk))
                self.db.execute(f"DELETE FROM refs WHERE partition = ? AND path IN ({marks})", (partition, *chunk))
        parsed = [(row, _referring_view(row[1], row[3], None if row[4] is None else json.loads(row[4])))
                  for row in rows]
        targets = {row[0]: reference_targets(view) if view is not None else set() for row, view in parsed}
        wanted = None if paths is None else set().union(*targets.values())
        pages, sources = self._targets(partition, wanted)
        updates = []
        for (path, kind, record_type, _, _, xref_ok, xref_findings), view in parsed:
            if view is None:  # names no other record: no lookup, no finding
                encoded = "[]"
                if xref_ok != 1 or xref_findings != encoded:
                    updates.append((1, encoded, partition, path))
                continue
            findings = reference_findings(view, kind, record_type, pages, sources, ontology, path)
            encoded = json.dumps([finding.to_dict() for finding in findings])
            ok = int(not has_errors(findings))
            if ok != xref_ok or encoded != xref_findings:
                updates.append((ok, encoded, partition, path))
        self.db.executemany(
            "UPDATE catalog SET xref_ok = ?, xref_findings = ? WHERE partition = ? AND path = ?", updates
        )
        self.db.executemany("INSERT INTO refs (partition, path, target) VALUES (?, ?, ?)",
                            [(partition, path, target) for path, named in targets.items() for target in named])

    def _targets(self, partition: str, ids: set[str] | None) -> tuple[dict[str, str], set[str]]:
        """The partition's pages (id -> type) and retained source ids: those among ``ids``, or all."""
        page_sql = ("SELECT record_id, type FROM catalog WHERE partition = ? AND kind = 'page' AND "
                    "file_status = 'ok' AND duplicate = 0")
        source_sql = "SELECT source_id FROM sources WHERE partition = ? AND status = 'ok'"
        if ids is None:
            return ({row[0]: row[1] for row in self.db.tuples(page_sql, (partition,))},
                    {row[0] for row in self.db.tuples(source_sql, (partition,))})
        pages: dict[str, str] = {}
        sources: set[str] = set()
        for chunk in in_chunks(sorted(ids)):
            marks = placeholders(chunk)
            pages.update((row[0], row[1]) for row in self.db.tuples(
                f"{page_sql} AND record_id IN ({marks})", (partition, *chunk)))
            sources.update(row[0] for row in self.db.tuples(
                f"{source_sql} AND source_id IN ({marks})", (partition, *chunk)))
        return pages, sources

    def verify_sources(self, partition: str) -> list[dict[str, Any]]:
        """Stream-hash every retained original whose file changed since it was last verified.

        Returns findings for originals that no longer match their descriptor.
        """
        root = self.store.partition_root(partition)
        findings = []
        for row in self.db.all(
            "SELECT path, retained_path, sha256, verified_stamp FROM sources WHERE partition = ? AND status = 'ok'",
            (partition,),
        ):
            try:
                info = FileStat.of(os.lstat(root / row["retained_path"]))
                stamp = json.dumps(info.stamp)
                if stamp == row["verified_stamp"]:
                    continue
                digest, _ = sha256_file(root, row["retained_path"])
            except (OSError, KnowledgeError) as exc:
                message = exc.message if isinstance(exc, KnowledgeError) else exc.strerror
                findings.append(Finding("source_missing", f"the retained original cannot be read: {message}",
                                        path=row["path"]).to_dict())
                continue
            if digest != row["sha256"]:
                findings.append(Finding("source_changed", "the retained original no longer matches its sha256",
                                        path=row["path"]).to_dict())
            else:
                try:  # a cache of the check, never a reason for the check to fail (a full disk)
                    self.db.execute("UPDATE sources SET verified_stamp = ? WHERE partition = ? AND path = ?",
                                    (stamp, partition, row["path"]))
                except sqlite3.OperationalError:
                    pass
        return findings

    # --- diagnostics ----------------------------------------------------------------

    def findings(self, partition: str) -> list[dict[str, Any]]:
        """Every finding in the partition: files, references, sources; errors first."""
        collected: list[dict[str, Any]] = []
        for row in self.db.all(
            "SELECT path, record_id, file_status, duplicate, findings, xref_findings FROM catalog "
            "WHERE partition = ? ORDER BY path", (partition,)
        ):
            for item in json.loads(row["findings"]) + json.loads(row["xref_findings"]):
                item.setdefault("path", row["path"])
                collected.append(item)
            if row["duplicate"]:
                collected.append(Finding("duplicate_id", f"id {row['record_id']} is used by more than one file; "
                                         "exact lookups return none", path=row["path"],
                                         record_id=row["record_id"]).to_dict())
        for row in self.db.all(
            "SELECT path, findings FROM sources WHERE partition = ? ORDER BY path", (partition,)
        ):
            collected.extend(json.loads(row["findings"]))
        collected.sort(key=lambda item: (item.get("severity", "error") != "error", item.get("path", "")))
        return collected


def _mentioned(frontmatter: str | None, record_id: str | None) -> set[str]:
    """The generated ids a row's frontmatter text holds (``mentions``), less its own: a record is never among
    those that mention its id, nor is another file with that id."""
    return generated_ids_in(frontmatter) - {record_id} if frontmatter is not None else set()


# The frontmatter keys whose view fields reference_targets and reference_findings read (an absent key and a
# null one are the same): a check takes only these out of each row's frontmatter, with SQLite's JSON reader.
# The id is the row's record_id (the view's id of the same value); the others come as one JSON array, or NULL
# where all of them are null (most notes), which spares decoding it.
REFERENCE_KEYS = ("id", "evidence", "from", "to", "relation", "subject", "replaces", "fields")
_REFERENCE_VALUES = (f"NULLIF(json_extract(frontmatter, {', '.join(repr(f'$.{key}') for key in REFERENCE_KEYS[1:])}), "
                     f"'[{','.join(['null'] * (len(REFERENCE_KEYS) - 1))}]')")


def _referring_view(kind: str, record_id: str | None, others: list[Any] | None) -> RecordView | None:
    """The view ``reference_findings`` checks, from a row's id and its other ``REFERENCE_KEYS`` values (None:
    all null); None for a page or claim whose other values are all null (most notes): it names no record, so
    it has nothing to check (a relationship always has, its endpoints)."""
    if others is None:
        others = [None] * (len(REFERENCE_KEYS) - 1)
    if kind != "relationship" and all(value is None for value in others):
        return None
    return view_of(dict(zip(REFERENCE_KEYS, [record_id, *others])))


def reference_targets(view: RecordView) -> set[str]:
    """Every id ``reference_findings`` may look up for this record (a superset is fine: a record
    is only checked again needlessly): cited sources, endpoints, subject, and ids in typed fields."""
    named: list[Any] = [view.from_id, view.to_id, view.subject]
    named += [citation.source for citation in view.evidence or ()]
    for value in (view.fields or {}).values():
        named += value if isinstance(value, list) else [value]
    return {target for target in named if isinstance(target, str)}


def reference_findings(view: RecordView, kind: str, record_type: str | None, pages: dict[str, str],
                       sources: set[str], ontology, path: str) -> list[Finding]:
    """Cross-record checks for one record against the partition's pages and sources."""
    findings: list[Finding] = []
    record_id = view.id
    for citation in view.evidence or ():
        if citation.source not in sources:
            findings.append(Finding("evidence_source", f"evidence source {citation.source!r} is not "
                                    "retained in this partition", path=path, field=f"evidence[{citation.at}]",
                                    record_id=record_id))
    if kind == "relationship":
        ends = {}
        for end, target in (("from", view.from_id), ("to", view.to_id)):
            ends[end] = pages.get(target) if target is not None else None
            if ends[end] is None:
                findings.append(Finding("dangling", f"'{end}' page {target!r} is not a page in this partition",
                                        path=path, field=end, record_id=record_id))
        for finding in ontology.check_endpoints(view.relation, ends["from"], ends["to"]):
            findings.append(Finding(finding.code, finding.message, path=path, field=finding.field,
                                    record_id=record_id))
    elif kind == "claim":
        target = view.subject
        if target is not None and target not in pages:
            findings.append(Finding("dangling", f"subject page {target!r} is not in this partition",
                                    severity="warning", path=path, field="subject", record_id=record_id))
    elif kind == "page" and record_type is not None:
        for name, target, allowed in ontology.page_field_refs(record_type, view.fields):
            actual = pages.get(target)
            if actual is None:
                findings.append(Finding("dangling", f"field {name} names page {target!r}, which is not in this "
                                        "partition", severity="warning", path=path, field=f"fields.{name}",
                                        record_id=record_id))
            elif allowed and actual not in allowed:
                findings.append(Finding("endpoint_type", f"field {name} must name a {' or '.join(allowed)} page",
                                        path=path, field=f"fields.{name}", record_id=record_id))
    return findings

