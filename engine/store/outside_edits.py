"""Edits made outside the engine, dated when the engine first saw them.

The engine never rewrites the owner's file, so an edit made in another editor often keeps the revision
number and ``updated_at`` its file says; the revision archive keeps it as a version of its own
(docs/record-format.md, "Edits made outside the engine").  A sync hands the versions it catalogued to
``date_outside_edits``, which lists such a record as updated when its edit was seen (Recent, ``updatedAt``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.db import Database
from ..core.ids import parse_timestamp
from .catalog_reads import in_chunks, placeholders
from .record_rows import Catalogued


@dataclass(frozen=True)
class SeenVersion:
    """A record file's version as a sync catalogued it: enough to find it in the revision archive."""

    path: str
    record_id: str
    revision: int
    sha256: str
    updated_at: str | None

    @classmethod
    def of(cls, entry: Catalogued) -> "SeenVersion":
        row = entry.row
        return cls(row["path"], row["record_id"], row["revision"], row["sha256"], row["updated_at"])


def date_outside_edits(db: Database, partition: str, seen: list[SeenVersion]) -> None:
    """A record edited outside the engine keeps the revision number its file says (the engine does not
    rewrite the owner's file), and often its ``updated_at``: the catalog dates such an edit, a version kept
    as seen outside after another version with the same number, when the engine first saw it, so the
    record is listed as updated then (Recent, ``updatedAt``).  The rule reads the revision archive, so a
    later re-read of the same file (a changed ontology) dates it the same."""
    for versions in in_chunks(seen):
        chunk = {(version.record_id, version.revision, version.sha256): version for version in versions}
        ids = sorted({record_id for record_id, _, _ in chunk})
        # The versions kept after another with the same number, found in the archive's index alone (its
        # rows hold every file's bytes): a sync of many new files, none with an earlier version, pays little.
        kept_again = db.tuples(
            "SELECT r.seq, r.record_id, r.revision, r.sha256 FROM revisions r WHERE r.partition = ? "
            f"AND r.record_id IN ({placeholders(ids)}) AND EXISTS (SELECT 1 FROM revisions e WHERE "
            "e.partition = r.partition AND e.record_id = r.record_id AND e.revision = r.revision "
            "AND e.seq < r.seq)", (partition, *ids))
        for seq, record_id, revision, sha256 in kept_again:
            version = chunk.get((record_id, revision, sha256))
            if version is None:  # an earlier edit of the record, not the version on disk now
                continue
            kept = db.one("SELECT observed_at FROM revisions WHERE seq = ? AND origin = 'external'", (seq,))
            if kept is None:  # the engine's own bytes (or a sync's), not an edit made outside it
                continue
            observed_at = kept["observed_at"]
            written = parse_timestamp(version.updated_at)
            if written is None or written < parse_timestamp(observed_at):
                db.execute("UPDATE catalog SET updated_at = ? WHERE partition = ? AND path = ?",
                           (observed_at, partition, version.path))
