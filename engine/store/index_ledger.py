"""What the search index has seen of the catalog: the catalog's side of a catch-up.

Each catalog row remembers the sha256 it was last indexed with
(``indexed_sha``); ``index_removals`` holds paths whose documents must go,
written ahead of a catch-up so a crash between tantivy's commit and the
catalog's never leaves a document the catalog does not know about; and
``partition_state.index_version`` is the catalog version the index last
caught up with.  The index (engine/index/tantivy_index.py) asks and
records through this class only.

The rule the index relies on: a path the index may hold a document of has a
catalog row with ``indexed_sha`` set, or a row in ``index_removals``, or
``partition_state.index_unlisted`` is set.  So a catch-up deletes by path
only what ``removals`` lists: a row with neither mark was never added, or was
deleted by a commit the ledger recorded.
"""

from __future__ import annotations

import json
from typing import ContextManager, Iterator, NamedTuple, Sequence

from ..core.db import Database
from .catalog_reads import CURRENT, placeholders

# Current rows the index lacks or holds in another revision; indexed rows no longer current.  Both are
# the conditions of partial indexes (migration 0004_index_backlog), so neither query reads every row.
_BACKLOG = f"c.partition = ? AND {CURRENT} AND c.indexed_sha IS NOT c.sha256"
_STALE = f"c.partition = ? AND c.indexed_sha IS NOT NULL AND NOT ({CURRENT})"
# What a document is made of, with the bytes of the catalogued revision (NULL until the archive keeps it).  A
# current record's aliases are a list of strings or absent (engine/vault/records.py check_record); only the
# list is read out of the frontmatter, not the whole of it.
_BACKLOG_ROWS = (
    "SELECT c.path, c.record_id, c.revision, c.kind, c.type, c.lifecycle, c.title, c.sha256, "
    "CASE json_type(c.frontmatter, '$.aliases') WHEN 'array' THEN json_extract(c.frontmatter, '$.aliases') END, "
    "r.content FROM catalog c LEFT JOIN revisions r "
    "ON r.partition = c.partition AND r.record_id = c.record_id AND r.revision = c.revision AND r.sha256 = c.sha256 "
    f"WHERE {_BACKLOG}"
)

PATHS_PER_STATEMENT = 500  # SQLite's bound parameters per statement stay well under its limit

# Backlog rows the index cannot hold: never indexed, or deleted by a recorded commit, and no removal pending.
_UNLISTED = (f"{_BACKLOG} AND c.indexed_sha IS NULL AND NOT EXISTS "
             "(SELECT 1 FROM index_removals r WHERE r.partition = c.partition AND r.path = c.path)")
# A catch-up adding at least this many unlisted rows (a folder of new files, a rebuild) does not write each
# ahead as a removal: it sets ``index_unlisted`` instead, and a catch-up that finds the mark left behind (a
# crash between tantivy's commit and ``record``) rebuilds the index, the one way to find documents no row
# lists.  Written ahead, 100,000 new files cost 100,000 removal rows and delete terms (about 2 s of CPU); a
# smaller catch-up still writes them ahead, so a crash in it costs those deletes, not a rebuild.
UNLISTED_MIN = 5_000


class BacklogRow(NamedTuple):
    """A current record the index lacks or holds in another revision: what its document is made of."""

    path: str
    record_id: str
    revision: int
    kind: str
    type: str | None
    lifecycle: str
    title: str
    sha256: str
    aliases: list[str]
    content: bytes | None  # None while the archive has not kept that revision yet


class IndexLedger:
    def __init__(self, db: Database) -> None:
        self.db = db

    def forget(self, partition: str) -> None:
        """The index is gone: every record must be indexed again."""
        with self.db.atomic():
            self.db.execute("UPDATE catalog SET indexed_sha = NULL WHERE partition = ? AND indexed_sha IS NOT NULL",
                            (partition,))
            self.db.execute("DELETE FROM index_removals WHERE partition = ?", (partition,))
            self.db.execute(
                "INSERT INTO partition_state (partition, index_version) VALUES (?, -1) "
                "ON CONFLICT(partition) DO UPDATE SET index_version = -1, index_unlisted = 0", (partition,),
            )

    def unlisted_left(self, partition: str) -> bool:
        """Whether a catch-up that added rows without writing them ahead never recorded its commit: the index
        may hold documents no catalog row lists, and only a rebuild removes them."""
        row = self.db.one("SELECT index_unlisted FROM partition_state WHERE partition = ?", (partition,))
        return row is not None and bool(row["index_unlisted"])

    def held_backlog(self, partition: str) -> bool:
        """Whether a backlog row still says the index holds it: one that changed since ``write_ahead``."""
        return self.db.one(f"SELECT 1 FROM catalog c WHERE {_BACKLOG} AND c.indexed_sha IS NOT NULL LIMIT 1",
                           (partition,)) is not None

    def large_catch_up(self) -> ContextManager[None]:
        """A larger page cache while one catch-up reads and records many rows."""
        return self.db.large_cache()

    def removals(self, partition: str) -> list[str]:
        """Paths whose documents must leave the index: written-ahead removals, then indexed rows no longer current."""
        written = [row["path"] for row in self.db.all(
            "SELECT path FROM index_removals WHERE partition = ?", (partition,))]
        return written + [row["path"] for row in self.db.all(
            f"SELECT c.path FROM catalog c WHERE {_STALE}", (partition,))]

    def backlog_count(self, partition: str) -> int:
        return self.db.one(f"SELECT COUNT(*) AS n FROM catalog c WHERE {_BACKLOG}", (partition,))["n"]

    def backlog(self, partition: str) -> Iterator[BacklogRow]:
        """The rows to (re)index, streamed."""
        yield from self._rows(_BACKLOG_ROWS, (partition,))

    def backlog_keys(self, partition: str, limit: int) -> list[tuple[str, str]]:
        """(path, sha256) of at most ``limit`` rows to (re)index: the backlog without reading its documents."""
        return self.db.tuples(f"SELECT c.path, c.sha256 FROM catalog c WHERE {_BACKLOG} LIMIT ?", (partition, limit))

    def backlog_rows(self, partition: str, paths: Sequence[str]) -> Iterator[BacklogRow]:
        """The rows of the backlog at ``paths`` (those that are in it)."""
        for start in range(0, len(paths), PATHS_PER_STATEMENT):
            chunk = paths[start:start + PATHS_PER_STATEMENT]
            yield from self._rows(f"{_BACKLOG_ROWS} AND c.path IN ({placeholders(chunk)})",
                                  (partition, *chunk))

    def _rows(self, sql: str, parameters: tuple[object, ...]) -> Iterator[BacklogRow]:
        for *row, aliases, content in self.db.iterate_tuples(sql, parameters):
            yield BacklogRow(*row, json.loads(aliases) if aliases is not None else [],
                             None if content is None else bytes(content))

    def write_ahead(self, partition: str) -> None:
        """Count the paths about to be deleted or (re)indexed as removals until ``record`` says what the index
        holds, and forget which revision the index held of them.

        Their documents are about to be deleted or replaced: if a row came back to that revision byte for
        byte before ``record`` (an edit undone, a duplicate's copy removed), a kept ``indexed_sha`` would say
        the index holds it, and searches would skip it while the commit had just deleted or replaced it.
        Cleared here, the row is backlog.  At least ``UNLISTED_MIN`` unlisted rows are not written ahead:
        the partition is marked instead (``unlisted_left``).
        """
        with self.db.atomic():
            unlisted = self.db.one(f"SELECT COUNT(*) AS n FROM catalog c WHERE {_UNLISTED}",
                                   (partition,))["n"] >= UNLISTED_MIN
            backlog = f"{_BACKLOG} AND c.indexed_sha IS NOT NULL" if unlisted else _BACKLOG
            for condition in (_STALE, backlog):
                self.db.execute("INSERT OR IGNORE INTO index_removals (partition, path) "
                                f"SELECT c.partition, c.path FROM catalog c WHERE {condition}", (partition,))
                self.db.execute(f"UPDATE catalog AS c SET indexed_sha = NULL WHERE {condition} "
                                "AND c.indexed_sha IS NOT NULL", (partition,))
            if unlisted:
                self.db.execute("INSERT INTO partition_state (partition, index_unlisted) VALUES (?, 1) "
                                "ON CONFLICT(partition) DO UPDATE SET index_unlisted = 1", (partition,))

    def record(self, partition: str, removed: Sequence[str], backlog: Sequence[str],
               indexed: Sequence[tuple[str, str]], catalog_version: int) -> None:
        """The index committed: ``removed`` paths are out, ``indexed`` (sha256, path) pairs are in.

        ``backlog`` is every path the catch-up read, indexed or not.  The catalog may have moved on since it
        read them (a catch-up holds no lock while tantivy commits): a row changed meanwhile stays in the
        backlog by its sha256, and a path whose row is gone keeps its removal, so the next catch-up deletes
        the document this one added.
        """
        with self.db.atomic():
            for chunk in _chunks(sorted(set(removed))):
                self.db.execute(f"UPDATE catalog SET indexed_sha = NULL WHERE partition = ? AND path IN "
                                f"({placeholders(chunk)}) AND indexed_sha IS NOT NULL", (partition, *chunk))
            self.db.executemany("UPDATE catalog SET indexed_sha = ? WHERE partition = ? AND path = ?",
                                [(sha, partition, path) for sha, path in indexed])
            for chunk in _chunks(sorted({*removed, *backlog})):
                self.db.execute(f"DELETE FROM index_removals WHERE partition = ? AND path IN ({placeholders(chunk)})",
                                (partition, *chunk))
            self.db.executemany(
                "INSERT OR IGNORE INTO index_removals (partition, path) SELECT ?, ? WHERE NOT EXISTS "
                "(SELECT 1 FROM catalog WHERE partition = ? AND path = ?)",
                [(partition, path, partition, path) for _, path in indexed])
            self.db.execute(
                "INSERT INTO partition_state (partition, catalog_version, index_version) VALUES (?, ?, ?) "
                "ON CONFLICT(partition) DO UPDATE SET index_version = excluded.index_version, index_unlisted = 0",
                (partition, catalog_version, catalog_version),
            )

    def mark_unlisted(self, partition: str) -> None:
        """The index is about to be given documents no row lists yet (a sync feeding it, in the sync's
        transaction): until ``clear_unlisted``, a catch-up rebuilds it instead."""
        self.db.execute("INSERT INTO partition_state (partition, index_unlisted) VALUES (?, 1) "
                        "ON CONFLICT(partition) DO UPDATE SET index_unlisted = 1", (partition,))

    def clear_unlisted(self, partition: str) -> None:
        """The index committed what the rows say it holds."""
        with self.db.atomic():
            self.db.execute("UPDATE partition_state SET index_unlisted = 0 WHERE partition = ?", (partition,))

    def pending_removals(self, partition: str) -> list[str]:
        """The written-ahead removals not recorded yet."""
        return [row[0] for row in self.db.tuples("SELECT path FROM index_removals WHERE partition = ?", (partition,))]

    def stale(self, partition: str) -> list[str]:
        """Paths whose rows say the index holds a document of a record that is no longer current."""
        return [row[0] for row in self.db.tuples(f"SELECT c.path FROM catalog c WHERE {_STALE}", (partition,))]

    def unindex(self, partition: str, paths: Sequence[str]) -> None:
        """Say the index holds no document of ``paths``."""
        for chunk in _chunks(sorted(set(paths))):
            self.db.execute(f"UPDATE catalog SET indexed_sha = NULL WHERE partition = ? AND path IN "
                            f"({placeholders(chunk)})", (partition, *chunk))

    def indexed_count(self, partition: str) -> int:
        return self.db.one("SELECT COUNT(*) AS n FROM catalog WHERE partition = ? AND indexed_sha IS NOT NULL",
                           (partition,))["n"]


def _chunks(paths: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(paths), PATHS_PER_STATEMENT):
        yield paths[start:start + PATHS_PER_STATEMENT]
