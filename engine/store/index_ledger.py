"""What the search index has seen of the catalog: the catalog's side of a catch-up.

Each catalog row remembers the sha256 it was last indexed with
(``indexed_sha``); ``index_removals`` holds paths whose documents must go,
written ahead of a catch-up so a crash between tantivy's commit and the
catalog's never leaves a document the catalog does not know about; and
``partition_state.index_version`` is the catalog version the index last
caught up with.  The index (engine/index/tantivy_index.py) asks and
records through this class only.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from ..core.db import Database
from .catalog_reads import CURRENT, WITH_CONTENT, RecordRow, with_content

# Current rows the index lacks or holds in another revision; indexed rows no longer current.  Both are
# the conditions of partial indexes (migration 0004_index_backlog), so neither query reads every row.
_BACKLOG = f"c.partition = ? AND {CURRENT} AND c.indexed_sha IS NOT c.sha256"
_STALE = f"c.partition = ? AND c.indexed_sha IS NOT NULL AND NOT ({CURRENT})"


class IndexLedger:
    def __init__(self, db: Database) -> None:
        self.db = db

    def forget(self, partition: str) -> None:
        """The index is gone: every record must be indexed again."""
        with self.db.atomic():
            self.db.execute("UPDATE catalog SET indexed_sha = NULL WHERE partition = ?", (partition,))
            self.db.execute("DELETE FROM index_removals WHERE partition = ?", (partition,))
            self.db.execute(
                "INSERT INTO partition_state (partition, index_version) VALUES (?, -1) "
                "ON CONFLICT(partition) DO UPDATE SET index_version = -1", (partition,),
            )

    def removals(self, partition: str) -> list[str]:
        """Paths whose documents must leave the index: written-ahead removals, then indexed rows no longer current."""
        written = [row["path"] for row in self.db.all(
            "SELECT path FROM index_removals WHERE partition = ?", (partition,))]
        return written + [row["path"] for row in self.db.all(
            f"SELECT c.path FROM catalog c WHERE {_STALE}", (partition,))]

    def backlog_count(self, partition: str) -> int:
        return self.db.one(f"SELECT COUNT(*) AS n FROM catalog c WHERE {_BACKLOG}", (partition,))["n"]

    def backlog(self, partition: str) -> Iterator[tuple[RecordRow, bytes | None]]:
        """The rows to (re)index with the bytes of their catalogued revision, streamed (None: not kept yet)."""
        for row in self.db.iterate_tuples(f"{WITH_CONTENT} WHERE {_BACKLOG}", (partition,)):
            yield with_content(row)

    def write_ahead(self, partition: str) -> None:
        """Count the backlog's paths as removals until ``record`` says they are indexed."""
        with self.db.atomic():
            self.db.execute("INSERT OR IGNORE INTO index_removals (partition, path) "
                            f"SELECT c.partition, c.path FROM catalog c WHERE {_BACKLOG}", (partition,))

    def record(self, partition: str, removed: Sequence[str], backlog: Sequence[str],
               indexed: Sequence[tuple[str, str]], catalog_version: int) -> None:
        """The index committed: ``removed`` paths are out, ``indexed`` (sha256, path) pairs are in.

        ``backlog`` is every path the catch-up read, indexed or not.  The catalog may have moved on since it
        read them (a catch-up holds no lock while tantivy commits): a row changed meanwhile stays in the
        backlog by its sha256, and a path whose row is gone keeps its removal, so the next catch-up deletes
        the document this one added.
        """
        with self.db.atomic():
            self.db.executemany("UPDATE catalog SET indexed_sha = NULL WHERE partition = ? AND path = ?",
                                [(partition, path) for path in removed])
            self.db.executemany("UPDATE catalog SET indexed_sha = ? WHERE partition = ? AND path = ?",
                                [(sha, partition, path) for sha, path in indexed])
            settled = [(partition, path) for path in {*removed, *backlog}]
            self.db.executemany("DELETE FROM index_removals WHERE partition = ? AND path = ?", settled)
            self.db.executemany(
                "INSERT OR IGNORE INTO index_removals (partition, path) SELECT ?, ? WHERE NOT EXISTS "
                "(SELECT 1 FROM catalog WHERE partition = ? AND path = ?)",
                [(partition, path, partition, path) for _, path in indexed])
            self.db.execute(
                "INSERT INTO partition_state (partition, catalog_version, index_version) VALUES (?, ?, ?) "
                "ON CONFLICT(partition) DO UPDATE SET index_version = excluded.index_version",
                (partition, catalog_version, catalog_version),
            )

    def indexed_count(self, partition: str) -> int:
        return self.db.one("SELECT COUNT(*) AS n FROM catalog WHERE partition = ? AND indexed_sha IS NOT NULL",
                           (partition,))["n"]
