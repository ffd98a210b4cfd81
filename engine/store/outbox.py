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


class GitOutbox:
    def __init__(self, db: Database) -> None:
        self.db = db

    def pending(self) -> list[dict[str, Any]]:
        """Every pending publication in order: ``{seq, id, agent, partition, operation, files}``, where files
        are (path in the repository, new bytes), the bytes None for a file the publication removed."""
        batch = []
        for row in self.db.all(
            "SELECT outbox.publication_seq AS seq, publications.id, publications.partition, publications.agent, "
            "publications.operation FROM outbox JOIN publications ON publications.seq = outbox.publication_seq "
            "WHERE outbox.state = 'pending' ORDER BY outbox.publication_seq"
        ):
            prefix = partition_dir(row["partition"])
            files = [
                (f["path"] if f["role"] == "ontology" else f"{prefix}/{f['path']}",
                 None if f["removes"] else f["new_bytes"]) for f in self.db.all(
                    "SELECT path, role, new_bytes, removes FROM publication_files WHERE publication_seq = ? "
                    "ORDER BY ordinal", (row["seq"],),
                )
            ]
            batch.append({"seq": row["seq"], "id": row["id"], "agent": row["agent"], "partition": row["partition"],
                          "operation": row["operation"], "files": files})
        return batch

    def committed(self, seqs: list[int], commit: str) -> None:
        now = format_timestamp(utc_now())
        with self.db.atomic():
            for seq in seqs:
                self.db.execute(
                    "UPDATE outbox SET state = 'committed', commit_id = ?, updated_at = ?, "
                    "attempts = attempts + 1, last_error = NULL WHERE publication_seq = ?", (commit, now, seq),
                )
                self.db.execute("DELETE FROM publication_files WHERE publication_seq = ?", (seq,))

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
