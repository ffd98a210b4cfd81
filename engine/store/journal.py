"""What a publication journals for each file: its path, its new bytes and the bytes it replaces.

``FileWrite`` is one file of a plan (store/publication.py), journalled in ``publication_files`` before anything on
disk changes; recovery (store/recovery.py) reads them back with ``journalled_writes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.db import Database
from ..core.files import sha256_bytes
from ..vault.records import Record


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

    @property
    def new_sha256(self) -> str | None:
        """The sha256 of the bytes the file holds once installed; None: no file."""
        return None if self.removes else sha256_bytes(self.data)

    @property
    def base_sha256(self) -> str | None:
        return sha256_bytes(self.base) if self.base is not None else None


def removal(path: str, role: str, base: bytes, record_id: str | None = None) -> FileWrite:
    """A write that removes the file at ``path``, which holds ``base``."""
    return FileWrite(path, role, b"", record_id, None, base, removes=True)


def journalled_writes(db: Database, seq: int) -> list[FileWrite]:
    """The files publication ``seq`` journalled, in installation order."""
    return [FileWrite(path=f["path"], role=f["role"], data=f["new_bytes"] or b"", record_id=f["record_id"],
                      revision=f["revision"], base=f["base_bytes"], removes=bool(f["removes"]))
            for f in db.all("SELECT * FROM publication_files WHERE publication_seq = ? ORDER BY ordinal", (seq,))]
