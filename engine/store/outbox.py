"""The git outbox: applied publications waiting to become commits, and the commits they became.

A publication's files are journaled with it (``publication_files``); once it
is applied, the outbox holds it ``pending`` until the git queue commits it,
and then ``committed`` with the commit id (its journaled bytes are dropped,
the revision archive keeps them).  The store runtime's git thread asks and
records through this class only; call it on the store's lane.
"""

from __future__ import annotations

from typing import Any

from ..core.db import Database
from ..core.ids import format_timestamp, utc_now
from .answers import GitSummary
from .store import partition_dir

LAST_ERROR_MAX_CHARS = 500
# The pending publications with their files, in order; ``outbox_pending`` (migration 0011) holds only the
# pending rows, so the queue is read without walking the committed ones.
PENDING_FILES = (
    "SELECT outbox.publication_seq AS seq, publications.id, publications.partition, publications.agent, "
    "publications.operation, files.path, files.role, files.new_bytes, files.removes "
    "FROM outbox JOIN publications ON publications.seq = outbox.publication_seq "
    "LEFT JOIN publication_files AS files ON files.publication_seq = outbox.publication_seq "
    "WHERE outbox.state = 'pending' ORDER BY outbox.publication_seq, files.ordinal")


class GitOutbox:
    def __init__(self, db: Database) -> None:
        self.db = db

    def pending(self) -> list[dict[str, Any]]:
        """Every pending publication in order: ``{seq, id, agent, partition, operation, files}``, where files
        are (path in the repository, new bytes), the bytes None for a file the publication removed.

        One statement for the whole queue (the git thread asks on the lane, with a second's publications
        waiting), found through the pending rows' own index rather than a walk of every publication ever
        committed."""
        batch: list[dict[str, Any]] = []
        for row in self.db.all(PENDING_FILES):
            if not batch or batch[-1]["seq"] != row["seq"]:
                batch.append({"seq": row["seq"], "id": row["id"], "agent": row["agent"],
                              "partition": row["partition"], "operation": row["operation"], "files": []})
                prefix = partition_dir(row["partition"])
            if row["path"] is not None:
                batch[-1]["files"].append((row["path"] if row["role"] == "ontology" else f"{prefix}/{row['path']}",
                                           None if row["removes"] else row["new_bytes"]))
        return batch

    def committed(self, seqs: list[int], commit: str) -> None:
        now = format_timestamp(utc_now())
        with self.db.atomic():
            self.db.executemany(
                "UPDATE outbox SET state = 'committed', commit_id = ?, updated_at = ?, "
                "attempts = attempts + 1, last_error = NULL WHERE publication_seq = ?",
                [(commit, now, seq) for seq in seqs])
            self.db.executemany("DELETE FROM publication_files WHERE publication_seq = ?", [(seq,) for seq in seqs])

    def failed(self, seqs: list[int], error: str) -> None:
        now = format_timestamp(utc_now())
        self.db.executemany(
            "UPDATE outbox SET attempts = attempts + 1, last_error = ?, updated_at = ? WHERE publication_seq = ?",
            [(error[:LAST_ERROR_MAX_CHARS], now, seq) for seq in seqs],
        )

    def summary(self, partition: str) -> GitSummary:
        """One partition's queue: its pending count, its last error and the commit holding its newest publication."""
        row = self.db.one(
            "SELECT COUNT(*) AS pending, MAX(outbox.last_error) AS error FROM outbox JOIN publications "
            "ON publications.seq = outbox.publication_seq "
            "WHERE outbox.state = 'pending' AND publications.partition = ?", (partition,),
        )
        last = self.db.one(
            "SELECT outbox.commit_id AS commit_id FROM outbox JOIN publications "
            "ON publications.seq = outbox.publication_seq WHERE outbox.state = 'committed' "
            "AND publications.partition = ? ORDER BY outbox.publication_seq DESC LIMIT 1", (partition,),
        )
        return {"state": "pending" if row["pending"] else "committed", "pending": row["pending"],
                "lastError": row["error"], "commit": last["commit_id"] if last is not None else None}
