"""Recovery: what a crash left journalled is finished or undone before anything reads the store.

``Recovery`` is the part of ``Publisher`` (store/publication.py) that, at start and before any operation that finds
a journalled publication, rolls each one forward when every file holds either its old or its new bytes, and back
when someone else changed one of them meanwhile (restoring our old bytes, removing files we created, never touching
the foreign edit).  Temp files a crash left beside the publication's files and the manifest are removed; those in
the store's staging folder were removed when the store opened (``StagingFolder.remove_leftovers``).
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.db import Database
from ..core.errors import Conflict, KnowledgeError
from ..core.files import UnsafePath, remove_inside, resolve_inside, write_inside
from ..core.ids import format_timestamp, utc_now
from .journal import FileWrite, journalled_writes

if TYPE_CHECKING:
    from .store import Store


class Recovery:
    """Rolls journalled publications forward or back (``_roll_back`` also undoes a publication the disk refused);
    ``Publisher`` provides the store, its database and the steps (``_root``, ``_current_sha``, ``_expect_ours``,
    ``_complete``)."""

    db: Database
    store: Store

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
            writes = journalled_writes(self.db, seq)
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
                try:
                    self._complete(row, writes)
                    outcome["outcome"] = "rolled_forward"
                except (OSError, KnowledgeError) as exc:
                    done = self._roll_back(seq, partition, writes, reason=str(exc))
                    outcome["outcome"] = "rolled_back" if done else "pending"
            outcomes.append(outcome)
        return outcomes
