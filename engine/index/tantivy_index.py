"""The search index: one tantivy index per partition, derived from the catalog.

    stores/<store-id>/index/<partition>/

Only current records are indexed.  The index never guesses what changed: it
compares each catalog row with what it last indexed (``indexed_sha``) and
applies the difference, so whatever changed the catalog (a publication, an
edit the watcher saw, a duplicate id appearing elsewhere) reaches the index
the same way.  A version counter bumped with every catalog change tells
whether there is anything to do; searches catch up before they answer, so
no search is older than the last acknowledged publication.  The index can
be deleted at any time and is rebuilt from the catalog.

A catch-up runs on whichever thread needs it (the store's index thread after
publications, a search that finds the index behind), one at a time per
store: the catalog is read and the ledger written in short transactions, and
tantivy's commit, the slow part, holds no database lock, so publications go
on beside it.
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path
import sqlite3
from typing import Any, Callable, Iterator

import tantivy

from .analysis import ANALYZER_NAME, Analyzer, prepare
from .overlay import CommittedStatistics, Overlay, OverlayDocument, analyse
from ..core.db import Database
from ..store.catalog import Catalog
from ..store.record_rows import Catalogued
from ..store.index_ledger import BacklogRow, IndexLedger
from ..core.answers import NotRequired, TypedDict
from ..core.errors import IndexFailed
from ..vault.frontmatter import split_document
from ..store.store import Store

log = logging.getLogger(__name__)
INDEX_DIR = "index"
SCHEMA_VERSION = 4  # bump when the schema or the analysis changes: indexes of other versions are rebuilt
# 4: Chinese and Japanese runs indexed as characters and pairs (engine/index/analysis.py), bodies kept as written
WRITER_HEAP = 50_000_000
PARALLEL_FROM = 5_000  # documents in one catch-up above which the writer gets two threads
# The two threads' heap in all, for such a catch-up: 100,000 notes fill one segment per thread instead of
# three that are merged after the commit (1.4 s of CPU beside the first search); memory is taken as used.
LARGE_WRITER_HEAP = 200_000_000
# A backlog up to this many documents is read in one short transaction and committed to tantivy with no
# database lock held; a larger one (a first build, a rebuild) is streamed, holding the database meanwhile,
# so it never holds every body in memory at once.
GATHER_MAX = 2_000
OPEN_WRITERS_MAX = 4   # partitions whose writer stays open between catch-ups
# A search finding the index behind by at most this many records answers with them held in memory beside it
# (engine/index/overlay.py); a larger backlog (a first build, a rebuild) is committed first, as before.
OVERLAY_MAX = 1_000


# The schema's fields in the order build_schema adds them: tantivy's explanations name a field by this number.
FIELD_ORDER = ("path", "id", "kind", "type", "claim_kind", "lifecycle", "revision", "text", "title", "aliases",
               "body")


def build_schema() -> tantivy.Schema:
    """``text`` holds title, aliases and body together, so each query word is scored once, with one set
    of statistics; ``title`` and ``aliases`` add a small bonus on top (see engine/search/keyword.py).
    ``body`` is only kept, as UTF-8 bytes, as written, for the snippet a hit shows: its words are the ``text``
    field's, so analysing it a second time would only cost indexing time and disk."""
    builder = tantivy.SchemaBuilder()
    for name in ("path", "id", "kind", "type", "claim_kind", "lifecycle"):
        builder.add_text_field(name, stored=name in ("path", "id", "kind", "type"), tokenizer_name="raw")
    builder.add_integer_field("revision", stored=True)
    builder.add_text_field("text", stored=False, tokenizer_name=ANALYZER_NAME)
    builder.add_text_field("title", stored=True, tokenizer_name=ANALYZER_NAME)
    builder.add_text_field("aliases", stored=False, tokenizer_name=ANALYZER_NAME)
    builder.add_bytes_field("body", stored=True)
    return builder.build()


class IndexedDocument(TypedDict):
    """One record's fields as the index holds them (``text``, ``title``, ``aliases`` analysed; ``body`` kept)."""

    path: str
    id: str
    revision: int
    kind: str
    type: str
    lifecycle: str
    text: str
    title: str
    aliases: str
    body: bytes
    claim_kind: NotRequired[str]


def index_document(*, path: str, record_id: str, revision: int, kind: str, type_: str, lifecycle: str,
                   title: str, aliases: list[str], body: str) -> IndexedDocument:
    """The fields of one record as the index holds them."""
    alias_text = " \n".join(aliases)
    document: IndexedDocument = {
        "path": path, "id": record_id, "revision": revision, "kind": kind, "type": type_, "lifecycle": lifecycle,
        "text": prepare(f"{title}\n{alias_text}\n{body}"), "title": prepare(title), "aliases": prepare(alias_text),
        "body": body.encode("utf-8"),
    }
    if kind == "claim":
        document["claim_kind"] = type_
    return document


class PartitionIndex:
    """One partition's tantivy index on disk."""

    def __init__(self, directory: Path, schema: tantivy.Schema, analyzer: Analyzer) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.schema = schema
        self.index = tantivy.Index(schema, path=str(directory), reuse=True)
        self.index.register_tokenizer(ANALYZER_NAME, analyzer.tantivy)
        self._writer: tantivy.IndexWriter | None = None
        self._writer_threads = 0

    def apply(self, removals: list[str], additions: Iterator[dict[str, Any]], *, threads: int = 1) -> int:
        """Delete ``removals`` and (re)add ``additions`` in one commit; returns how many were added.

        The writer stays open between commits (opening one, and waiting for its merges, cost more than
        the commit of a single write); segment merges go on in its background threads.
        """
        writer = self.writer(threads)
        added = 0
        try:
            # The ledger lists every path the index may hold a document of among ``removals`` (or has it
            # rebuilt, engine/store/index_ledger.py): an addition deletes nothing of its own.
            for path in removals:
                writer.delete_documents_by_term("path", path)
            for document in additions:
                writer.add_document(tantivy.Document(**document))
                added += 1
            writer.commit()
        except BaseException:
            self._writer = None  # a writer that failed is not trusted with the next commit
            writer.rollback()
            raise
        self.index.reload()
        return added

    def writer(self, threads: int) -> tantivy.IndexWriter:
        """The open writer, opened with ``threads`` indexing threads if it has another number."""
        if self._writer is not None and self._writer_threads != threads:
            self.close()
        if self._writer is None:
            heap = LARGE_WRITER_HEAP if threads > 1 else WRITER_HEAP
            self._writer, self._writer_threads = self.index.writer(heap, threads), threads
        return self._writer

    def discard(self) -> None:
        """Drop what the open writer holds uncommitted, and the writer with it."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            writer.rollback()
        except (OSError, ValueError, RuntimeError) as exc:  # what it held is not committed either way
            log.warning("search index writer of %s rolled back with an error: %s", self.directory.name, exc)

    def close(self) -> None:
        """Let the open writer finish its merges and release the index."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            writer.wait_merging_threads()
        except (OSError, ValueError, RuntimeError) as exc:  # its directory was deleted under it, say
            log.warning("search index writer of %s closed with an error: %s", self.directory.name, exc)

    def searcher(self) -> tantivy.Searcher:
        return self.index.searcher()


class SearchIndexes:
    """The indexes of one store's partitions; safe from any thread (one catch-up at a time)."""

    def __init__(self, store: Store, catalog: Catalog, analyzer: Analyzer) -> None:
        self.store = store
        self.catalog = catalog
        self.ledger = IndexLedger(store.db)
        self.analyzer = analyzer
        self.schema = build_schema()
        self._open: dict[str, PartitionIndex] = {}
        self._writing: list[str] = []  # partitions whose index holds an open writer, most recent last
        self._indexed: dict[str, int] = {}  # partition -> the catalog version its open index holds
        self._lock = threading.RLock()  # held through a whole catch-up, and by anything that opens or drops
        self._failed: set[str] = set()  # partitions whose last catch-up failed: searches catch up (and say so)
        self._analysed: dict[str, dict[tuple[str, str], OverlayDocument]] = {}  # partition -> (path, sha) -> doc
        self._statistics: dict[str, tuple[int, CommittedStatistics]] = {}  # partition -> (version held, stats)
        catalog.feeds = self.open_feed

    def open_feed(self, partition: str) -> SyncFeed | None:
        """A feed of a large sync's new records into ``partition``'s index (``SyncFeed``), holding the lock
        until it commits or is abandoned; None while a catch-up runs, when a rebuild is due or the last
        catch-up failed: the sync's records then reach the index by a catch-up, as any change does."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            if partition in self._failed or self.ledger.unlisted_left(partition):
                self._lock.release()
                return None
            index = self._get(partition)
        except IndexFailed:
            self._lock.release()
            return None
        except BaseException:
            self._lock.release()
            raise
        return SyncFeed(self.ledger, partition, index, lambda failed: self._feed_ended(partition, failed))

    def _feed_ended(self, partition: str, failed: bool) -> None:
        """A feed ended (committed, abandoned or ``failed``); the lock it held is released."""
        try:
            if failed:
                self._failed.add(partition)  # searches catch up, and the mark has the index rebuilt
            else:
                self._wrote(partition)
        finally:
            self._lock.release()

    def directory(self, partition: str) -> Path:
        return self.store.root / INDEX_DIR / f"{partition.replace(':', '-')}.v{SCHEMA_VERSION}"

    def get(self, partition: str) -> PartitionIndex:
        with self._lock:
            return self._get(partition)

    def _get(self, partition: str) -> PartitionIndex:
        index = self._open.get(partition)
        if index is not None and index.directory.is_dir():
            return index
        self._drop(partition)
        directory = self.directory(partition)
        if not directory.is_dir():
            self._forget_indexed(partition)
            self._remove_other_versions(partition)
        try:
            index = PartitionIndex(directory, self.schema, self.analyzer)
        except (OSError, ValueError, RuntimeError) as exc:
            log.warning("search index of %s is unusable (%s); rebuilding it", partition, exc)
            shutil.rmtree(directory, ignore_errors=True)
            self._forget_indexed(partition)
            try:
                index = PartitionIndex(directory, self.schema, self.analyzer)
            except (OSError, ValueError, RuntimeError) as again:
                raise IndexFailed(f"the search index could not be created: {again}", partition=partition) from again
        self._open[partition] = index
        return index

    def _remove_other_versions(self, partition: str) -> None:
        """Indexes this partition had under an older schema are derived data: drop them."""
        prefix = partition.replace(":", "-")
        root = self.store.root / INDEX_DIR
        if root.is_dir():
            for entry in root.iterdir():
                stem = entry.name.rsplit(".v", 1)[0]
                if entry.is_dir() and stem == prefix and entry != self.directory(partition):
                    shutil.rmtree(entry, ignore_errors=True)

    def _forget_indexed(self, partition: str) -> None:
        """The index is gone: everything must be indexed again."""
        self._drop(partition)
        self.ledger.forget(partition)

    def _drop(self, partition: str) -> None:
        self._indexed.pop(partition, None)
        index = self._open.pop(partition, None)
        if partition in self._writing:
            self._writing.remove(partition)
        if index is not None:
            index.close()

    def _wrote(self, partition: str) -> None:
        """``partition``'s writer was just used: keep it open, and close the least recently used beyond
        OPEN_WRITERS_MAX (each holds its own memory arena and merge threads)."""
        if partition in self._writing:
            self._writing.remove(partition)
        self._writing.append(partition)
        while len(self._writing) > OPEN_WRITERS_MAX:
            self._open[self._writing.pop(0)].close()

    def close(self) -> None:
        with self._lock:
            for partition in list(self._open):
                self._drop(partition)

    def rebuild(self, partition: str) -> int:
        """Throw the partition's index away and build it again from the catalog."""
        with self._lock:
            self._drop(partition)
            shutil.rmtree(self.directory(partition), ignore_errors=True)
            self._forget_indexed(partition)
            return self.catch_up(partition)

    def at_least(self, partition: str, version: int) -> tuple[PartitionIndex, int]:
        """The partition's index once it holds catalog version ``version`` or later, and the version it holds.

        Asks no database when the open index is already that new (a search beside the lane); otherwise
        catches up, or waits for the catch-up another thread is running.
        """
        with self._lock:
            index = self._open.get(partition)
            held = self._indexed.get(partition, -1)
            if index is not None and held >= version and index.directory.is_dir():
                return index, held
            held = self.catch_up(partition)
            return self._open[partition], held

    def for_search(self, partition: str, version: int, db: Database) -> tuple[PartitionIndex, int, Overlay | None]:
        """What a search at catalog ``version`` answers from: the committed index, the version its answer holds,
        and the overlay of the acknowledged records the index has not committed yet (None when it holds them all).

        Never waits for a commit while the index is open, has not failed and is behind by at most OVERLAY_MAX
        records: the overlay is read from ``db`` (the search's snapshot; the store's own database on the lane
        is read through a snapshot of its own, so the backlog and the removals are read at one state).
        Otherwise as ``at_least``.
        """
        index = self._open.get(partition)
        held = self._indexed.get(partition, -1)
        if index is not None and index.directory.is_dir() and partition not in self._failed:
            if held >= version:
                return index, held, None
            if db is self.store.db:
                with db.snapshot() as snapshot:
                    overlay = self._overlay(partition, version, index, held, snapshot)
            else:
                overlay = self._overlay(partition, version, index, held, db)
            if overlay is not None:
                return index, version, overlay
        index, held = self.at_least(partition, version)
        return index, held, None

    def _overlay(self, partition: str, version: int, index: PartitionIndex, held: int,
                 db: Database) -> Overlay | None:
        ledger = IndexLedger(db)
        if ledger.unlisted_left(partition):  # rows say indexed what tantivy has not committed yet (SyncFeed)
            return None
        keys = ledger.backlog_keys(partition, OVERLAY_MAX + 1)
        if len(keys) > OVERLAY_MAX:
            return None
        masked = set(ledger.removals(partition))
        masked.update(path for path, _ in keys)  # their committed documents, if any, are older revisions
        analysed = self._analysed.get(partition, {})
        # Only the records no earlier search analysed are read with their content: under a stream of writes
        # each search reads the few published since the last one, not the whole backlog again.
        for row in ledger.backlog_rows(partition, [path for path, sha in keys if (path, sha) not in analysed]):
            indexed = self._document(row)
            if indexed is not None:
                analysed[(row.path, row.sha256)] = analyse(self.analyzer, dict(indexed), row.sha256)
        kept = {key: analysed[key] for key in keys if key in analysed}
        self._analysed[partition] = kept  # what the index committed meanwhile is dropped here
        known = self._statistics.get(partition)
        if known is None or known[0] != held:
            known = held, CommittedStatistics()
            self._statistics[partition] = known
        return Overlay(version, frozenset(masked), tuple(kept.values()), index.searcher(), known[1])

    def catch_up(self, partition: str) -> int:
        """Apply every catalog change the index has not seen; returns the catalog version it now holds.

        Raises IndexFailed (and leaves the catalog marked un-indexed) when
        tantivy refuses, so a search never answers from a stale index.
        """
        try:
            held = self._catch_up(partition)
        except IndexFailed:
            self._failed.add(partition)
            raise
        self._failed.discard(partition)
        self._analysed.pop(partition, None)  # the overlay of the versions now committed is not needed
        return held

    def _catch_up(self, partition: str) -> int:
        with self._lock:
            catalog_version, index_version = self.catalog.version(partition)
            if catalog_version == index_version and partition in self._open:
                self._indexed[partition] = index_version
                return index_version
            index = self.get(partition)
            if self.ledger.unlisted_left(partition):
                log.warning("a catch-up of %s stopped after its commit; rebuilding its search index", partition)
                self._drop(partition)
                shutil.rmtree(self.directory(partition), ignore_errors=True)
                # The ledger forgets what the old index held even when the folder is left behind: the old
                # reader, seeing its meta.json gone, may have made a lock file in it again meanwhile.
                self._forget_indexed(partition)
                index = self.get(partition)  # a new, empty index
            while True:
                with self.store.db.atomic():  # what to apply, read at one catalog version and written ahead
                    catalog_version, _ = self.catalog.version(partition)
                    # Written ahead: the paths about to be (re)indexed or deleted count as removals until the
                    # catalog records them below.  tantivy commits first, so a crash between its commit and
                    # the catalog's would otherwise leave documents the catalog never learned were indexed
                    # (and a record superseded after the restart searchable for good); the next catch-up
                    # deletes them and re-adds what is current.
                    self.ledger.write_ahead(partition)
                    removed = self.ledger.removals(partition)
                    count = self.ledger.backlog_count(partition)
                    gathered = list(self.ledger.backlog(partition)) if count <= GATHER_MAX else None
                if gathered is not None:
                    # Nothing to commit (what a large sync fed was committed with it): the ledger only records.
                    done = self._apply(index, partition, removed, iter(gathered), count) if removed or gathered \
                        else ([], [])
                    self.ledger.record(partition, removed, *done, catalog_version)
                    break
                # Streamed, with a larger page cache: the backlog cannot change until it is recorded.  It is
                # the one written ahead unless the catalog changed in between (the lane wrote): then again.
                with self.ledger.large_catch_up(), self.store.db.atomic():
                    if self.ledger.removals(partition) == removed and not self.ledger.held_backlog(partition):
                        done = self._apply(index, partition, removed, self.ledger.backlog(partition), count)
                        self.ledger.record(partition, removed, *done, catalog_version)
                        break
            self._wrote(partition)
            self._indexed[partition] = catalog_version
            return catalog_version

    def _apply(self, index: PartitionIndex, partition: str, removed: list[str],
               backlog: Iterator[BacklogRow], count: int
               ) -> tuple[list[str], list[tuple[str, str]]]:
        """Commit ``removed`` and ``backlog`` to tantivy: (the backlog's paths, the (sha256, path) pairs indexed)."""
        paths: list[str] = []
        indexed: list[tuple[str, str]] = []

        def documents() -> Iterator[dict[str, Any]]:
            for row in backlog:
                paths.append(row.path)
                document = self._document(row)
                if document is not None:
                    indexed.append((row.sha256, row.path))
                    yield document

        try:
            index.apply(removed, documents(), threads=2 if count >= PARALLEL_FROM else 1)
        except (OSError, ValueError, RuntimeError) as exc:
            raise IndexFailed(f"the search index could not be updated: {exc}", partition=partition) from exc
        return paths, indexed

    def _document(self, row: BacklogRow) -> dict[str, Any] | None:
        if row.content is None:
            log.warning("no stored revision for %s; it stays out of the index until re-read", row.path)
            return None
        _, body = split_document(row.content.decode("utf-8"))
        return index_document(
            path=row.path, record_id=row.record_id, revision=row.revision, kind=row.kind,
            type_=row.type or "", lifecycle=row.lifecycle, title=row.title,
            aliases=[a for a in row.aliases if isinstance(a, str)], body=body,
        )


class SyncFeed:
    """A large sync's new records, given to the partition's tantivy writer as the sync writes their rows.

    A folder of new files was catalogued, committed, then read back out of the catalog into tantivy; fed here,
    tantivy's indexing threads work beside the sync and nothing is read back.  What keeps it safe (the ledger's
    rule, engine/store/index_ledger.py):

    - only paths the index cannot hold a document of are fed (no catalog row, no removal pending): an addition
      deletes nothing;
    - the sync's transaction marks the partition (``index_unlisted``) before any row says a record is indexed,
      and the fed rows say so (``indexed_sha``) in that same transaction;
    - a record the sync's cross-checks leave not current is deleted from the writer before its commit, and its
      row says it is not indexed;
    - tantivy commits after the catalog's COMMIT, and the mark is cleared after tantivy's commit.  A crash
      before the catalog's COMMIT loses the rows and the uncommitted documents alike; one after it and before
      the mark is cleared leaves the mark, and the next catch-up rebuilds the index from the catalog.

    The feed holds the indexes' lock from its opening to its end, so no catch-up runs in between, and a search
    that finds the partition marked waits for it instead of answering beside the uncommitted documents.
    """

    def __init__(self, ledger: IndexLedger, partition: str, index: PartitionIndex,
                 done: Callable[[bool], None]) -> None:
        self.ledger = ledger
        self.partition = partition
        self.index = index
        self._done = done
        self._wanted: set[str] = set()
        self._fed: set[str] = set()
        self._writer: tantivy.IndexWriter | None = None  # None before ``begin``, and once broken

    def begin(self, paths: list[str]) -> None:
        self._wanted = set(paths) - set(self.ledger.pending_removals(self.partition))
        try:
            writer = self.index.writer(2)
        except (OSError, ValueError, RuntimeError) as exc:  # nothing fed: the records reach it by a catch-up
            log.warning("the search index of %s takes no new records during the sync (%s)", self.partition, exc)
            return
        self.ledger.mark_unlisted(self.partition)
        self._writer = writer

    def takes(self, entry: Catalogued) -> bool:
        row = entry.row
        return (self._writer is not None and entry.body is not None and row["path"] in self._wanted
                and row["file_status"] == "ok" and row["lifecycle"] == "active" and not row["fixture"])

    def add(self, entries: list[Catalogued]) -> None:
        writer = self._writer
        if writer is None:
            return
        try:
            for entry in entries:
                row = entry.row
                writer.add_document(tantivy.Document(**index_document(
                    path=row["path"], record_id=row["record_id"], revision=row["revision"], kind=row["kind"],
                    type_=row["type"] or "", lifecycle=row["lifecycle"], title=row["title"],
                    aliases=entry.aliases, body=entry.body or "")))
                self._fed.add(row["path"])
        except (OSError, ValueError, RuntimeError) as exc:  # the sync goes on; the mark has the index rebuilt
            self._broken("stopped taking new records", exc)

    def settle(self) -> None:
        """In the sync's transaction, after its cross-checks: what they left not current leaves the writer."""
        if self._writer is None:
            return
        gone = [path for path in self.ledger.stale(self.partition) if path in self._fed]
        try:
            for path in gone:
                self._writer.delete_documents_by_term("path", path)
        except (OSError, ValueError, RuntimeError) as exc:
            self._broken("could not drop records", exc)
            return
        self.ledger.unindex(self.partition, gone)

    def commit(self) -> None:
        """After the catalog's COMMIT: tantivy's, then the mark cleared."""
        failed = self._writer is None and bool(self._wanted)  # broken, or it never began: the mark may be set
        try:
            if self._writer is not None:
                self._writer.commit()
                self.index.index.reload()
                self.ledger.clear_unlisted(self.partition)
        except (OSError, ValueError, RuntimeError, sqlite3.Error) as exc:
            self._broken("did not commit the new records", exc)
            failed = True
        finally:
            self._done(failed)

    def _broken(self, what: str, exc: Exception) -> None:
        """The writer failed: what it holds is dropped, nothing more is fed, and the mark has the index rebuilt."""
        log.warning("the search index of %s %s (%s); it will be rebuilt", self.partition, what, exc)
        self._writer = None
        self.index.discard()

    def abandon(self) -> None:
        """The sync rolled back: so do the documents fed."""
        try:
            self.index.discard()
        finally:
            self._done(False)  # the catalog and the index are as they were
