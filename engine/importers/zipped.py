"""Reading a zip an owner hands in (a chat export, a store archive) within bounds on what it expands to.

A zip's central directory declares each member's size; a crafted one expands a megabyte into gigabytes
(deflate reaches about 1,000:1) or holds a member for every byte.  So a zip is checked twice:

- before anything is extracted, its central directory (``check_directory``): how many members, their
  declared total, and each member's and the whole zip's compression ratio;
- while a member is read (``BoundedZip.chunks``): the bytes are counted as they come, against the member's
  declared size and the zip's total, and reading stops at the bound (declared sizes can lie).

Members are read in chunks of ``CHUNK`` bytes (hashed or copied as they come) rather than whole; a member
that must be parsed whole (a conversations.json) is refused before it is read when it is larger than
``PARSED_MAX_BYTES``.  A bound that is hit is ``LimitExceeded`` naming the zip, the member, the bound and
its value (``details``: ``file``, ``member``, ``bound``, ``limit``); nothing has been written by then.
"""

from __future__ import annotations

import io
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..core.errors import InvalidParams, LimitExceeded
from .folders import hidden

# The bounds (docs/import-export.md, "How much a zip may expand to").  Read at each check, not bound at
# import, so each is one value for every zip the engine reads.
#
# Members: a store's partition scan stops at 100,000 entries, so ten full partitions and their kept
# revisions fit; the largest chat exports seen hold tens of thousands of images and attachments.
MAX_MEMBERS = 1_000_000
# Total declared (and read) bytes: chat exports with several GB of attachments exist, and a store may
# retain sources up to 256 MiB each; 64 GiB is far above both and still less than a laptop's free disk.
MAX_TOTAL_BYTES = 64 * 1024 ** 3
# Compression ratio of one member: text and JSON deflate to 3-20:1, a repetitive log to perhaps 50:1;
# deflate's own ceiling is about 1,030:1, which is what a zip bomb uses.
MAX_MEMBER_RATIO = 200
# Compression ratio of the whole zip: half the member bound, since an export or a store is mostly
# records, transcripts and already-compressed media (images, PDFs), never all of it a repetitive log.
MAX_TOTAL_RATIO = 100
# Below this size a ratio says nothing (a 4 KiB file of spaces compresses 100:1 and costs nothing), so
# members and zips smaller than this are not held to the ratios.
RATIO_FLOOR_BYTES = 1024 * 1024
# A member parsed whole (conversations.json, projects.json, memories.json) is held in memory about four
# times over (bytes, text, parsed objects); the largest ChatGPT conversations.json seen are a few hundred
# MB, so 1 GiB leaves room for them while bounding the parse to a few GiB.
PARSED_MAX_BYTES = 1024 ** 3
CHUNK = 1024 * 1024

# What reading a zip can raise: RuntimeError for an encrypted member, NotImplementedError for a compression
# method zipfile lacks.
ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError)


def too_large(shown: str, member: str | None, problem: str, bound: str, limit: int) -> LimitExceeded:
    """The one shape of a bound hit: what was hit, which bound and its value."""
    where = f"{shown} ({member})" if member else shown
    return LimitExceeded(f"{where} {problem} (the {bound} limit is {limit:,}); nothing was written",
                         file=shown, member=member, bound=bound, limit=limit)


def check_directory(archive: zipfile.ZipFile, shown: str) -> None:
    """Refuse a zip whose central directory declares more members, more bytes or a higher compression
    ratio than the bounds allow, before any member is read."""
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise too_large(shown, None, f"holds {len(infos):,} members", "member count", MAX_MEMBERS)
    total = compressed = 0
    for info in infos:
        total += info.file_size
        compressed += info.compress_size
        if total > MAX_TOTAL_BYTES:
            raise too_large(shown, info.filename, "declares more bytes in all than are allowed",
                            "total decompressed size", MAX_TOTAL_BYTES)
        _check_ratio(shown, info.filename, info.file_size, info.compress_size, MAX_MEMBER_RATIO, "member")
    _check_ratio(shown, None, total, compressed, MAX_TOTAL_RATIO, "total")


def _check_ratio(shown: str, member: str | None, size: int, compressed: int, limit: int, which: str) -> None:
    if size > RATIO_FLOOR_BYTES and size > limit * max(compressed, 1):
        ratio = size // max(compressed, 1)
        raise too_large(shown, member, f"expands {ratio:,} times ({size:,} bytes from {compressed:,})",
                        f"{which} compression ratio", limit)


class BoundedZip:
    """A zip opened with its central directory checked; its members read in counted chunks.

    The bytes read through one ``BoundedZip`` count against ``MAX_TOTAL_BYTES`` together, each member once
    however often it is read again (an archive is read once to be checked, again to be restored)."""

    def __init__(self, path: str | Path, shown: str | None = None) -> None:
        self.path = Path(path)
        self.shown = shown or str(path)
        self.zip = zipfile.ZipFile(self.path)
        try:
            check_directory(self.zip, self.shown)
        except BaseException:
            self.zip.close()
            raise
        self.read_total = 0
        self._counted: dict[str, int] = {}  # member: the most bytes read of it in one reading

    def close(self) -> None:
        self.zip.close()

    def __enter__(self) -> "BoundedZip":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def names(self) -> list[str]:
        """Every member's name, folders included, in the zip's order."""
        return self.zip.namelist()

    def chunks(self, name: str | zipfile.ZipInfo) -> Iterator[bytes]:
        """A member's bytes, ``CHUNK`` at a time, counted: more than it declares, or more than the zip's
        total bound, stops the reading with an error."""
        info = name if isinstance(name, zipfile.ZipInfo) else self.zip.getinfo(name)
        size = 0
        try:
            with self.zip.open(info) as handle:
                while chunk := handle.read(CHUNK):
                    size += len(chunk)
                    self._count(info.filename, size)
                    if size > info.file_size:
                        raise self._lied(info, f"{size:,} bytes or more")
                    if self.read_total > MAX_TOTAL_BYTES:
                        raise too_large(self.shown, info.filename, "expands to more bytes in all than are allowed",
                                        "total decompressed size", MAX_TOTAL_BYTES)
                    yield chunk
        except zipfile.BadZipFile as exc:
            if "CRC" in str(exc):  # zipfile reads no more than the declared size, then checks the CRC
                raise self._lied(info, "other bytes") from exc
            raise

    def _count(self, name: str, size: int) -> None:
        before = self._counted.get(name, 0)
        if size > before:
            self._counted[name] = size
            self.read_total += size - before

    def read_parsed(self, name: str) -> bytes:
        """A member that is parsed whole (a conversations.json), refused beyond ``PARSED_MAX_BYTES``."""
        return self.read(name, PARSED_MAX_BYTES)

    def read(self, name: str, max_bytes: int | None = None) -> bytes:
        """A member's bytes whole, refused before reading when it declares more than ``max_bytes``.  Held
        once: the chunks gather in a buffer whose bytes are handed over without a copy."""
        info = self.zip.getinfo(name)
        if max_bytes is not None and info.file_size > max_bytes:
            raise too_large(self.shown, name, f"is {info.file_size:,} bytes, more than can be read whole",
                            "parsed file size", max_bytes)
        buffer = io.BytesIO()
        for chunk in self.chunks(info):
            buffer.write(chunk)
        return buffer.getvalue()

    def _lied(self, info: zipfile.ZipInfo, found: str) -> InvalidParams:
        return InvalidParams(f"{self.shown} ({info.filename}) holds {found} where its zip entry declares "
                             f"{info.file_size:,} (a false size or CRC: the zip is damaged or crafted); nothing "
                             "was written", file=self.shown, member=info.filename)


def read_parsed_file(path: Path) -> bytes:
    """A file given directly that is parsed whole (a conversations.json), refused before reading when it
    is larger than ``PARSED_MAX_BYTES``."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InvalidParams(f"cannot read {path}: {exc.strerror or exc}", file=str(path)) from exc
    if size > PARSED_MAX_BYTES:
        raise too_large(str(path), None, f"is {size:,} bytes, more than can be read whole", "parsed file size",
                        PARSED_MAX_BYTES)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidParams(f"cannot read {path}: {exc.strerror or exc}", file=str(path)) from exc


@contextmanager
def export_zip(path: Path) -> Iterator[BoundedZip]:
    """An export's zip opened with its central directory checked; what reading it raises is refused naming
    the zip (a bound hit is ``LimitExceeded``, as raised)."""
    try:
        with BoundedZip(path) as archive:
            yield archive
    except ZIP_ERRORS as exc:
        raise InvalidParams(f"{path} is not a readable zip: {exc}", file=str(path)) from exc


def is_zip(path: Path) -> bool:
    """Whether ``path`` is a zip file (a folder, or a file that cannot be read, is not)."""
    return zipfile.is_zipfile(path)


def member_named(names: list[str], member: str) -> str | None:
    """The export's own ``member`` among a zip's names: the least deep file of that name (not a nested copy,
    nor the shadow macOS's archiver adds under __MACOSX/, nor one in a dot-folder); None where there is none."""
    found = [n for n in names if n.rsplit("/", 1)[-1] == member and "__MACOSX/" not in n and not hidden(n)]
    return min(found, key=lambda n: (n.count("/"), n)) if found else None
