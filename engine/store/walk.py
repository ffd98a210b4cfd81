"""The partition's files as the catalog sees them: which paths are records or source descriptors, what
stamp tells a file changed, and the walk that lists them all with their stamps.

A walk never follows a symlink, reads no file with more than one hard link, skips hidden entries and
stops at ``MAX_DEPTH``; each such entry is a finding.  A partition of more than ``MAX_SCAN_ENTRIES``
entries, or a directory that cannot be listed, fails the walk instead of leaving a partial list.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

from ..core.errors import LimitExceeded, StoreUnavailable
from ..core.files import MAX_DEPTH
from ..core.findings import Finding
from ..vault.evidence import DESCRIPTOR_SUFFIX, SOURCES_DIR

MAX_SCAN_ENTRIES = 100_000


class FileStat(NamedTuple):
    """What tells a file changed: inode, size, mtime, and ctime (which ``touch -r`` cannot restore).

    A plain tuple, so it compares equal to the stamp the catalog keeps for the file (``_known_stats``).
    """

    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, info: os.stat_result) -> "FileStat":
        return cls(info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)

    @property
    def stamp(self) -> tuple[int, int, int, int]:
        return tuple(self)


def _hardlinked(relpath: str) -> Finding:
    return Finding("hardlink", "files with more than one hard link are not read", path=relpath)


def shown_path(relpath: str) -> str:
    """``relpath`` as the catalog can store and show it.

    A name that is not valid UTF-8 reaches Python with lone surrogates (``surrogateescape``), which SQLite,
    tantivy, JSON replies and git cannot encode; its bytes are shown escaped (``bad\\xff.md``) instead.
    """
    try:
        relpath.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(relpath).decode("utf-8", "backslashreplace")
    return relpath


def _undecodable(relpath: str) -> Finding:
    return Finding("unreadable_name", "file and directory names must be valid UTF-8; not read",
                   path=shown_path(relpath))


def is_record_path(relpath: str) -> bool:
    return relpath.endswith(".md") and not relpath.startswith(f"{SOURCES_DIR}/")


def is_descriptor_path(relpath: str) -> bool:
    head, _, name = relpath.rpartition("/")
    return head == SOURCES_DIR and name.endswith(DESCRIPTOR_SUFFIX)


def descriptor_for(relpath: str) -> str:
    """A retained original's descriptor path (a change to the original re-checks it); else the path."""
    head, _, name = relpath.rpartition("/")
    if head == SOURCES_DIR and not name.endswith(DESCRIPTOR_SUFFIX) and "." in name:
        return f"{SOURCES_DIR}/{name.split('.', 1)[0]}{DESCRIPTOR_SUFFIX}"
    return relpath


def walk_partition(root: Path) -> tuple[dict[str, FileStat], list[Finding]]:
    """Every record and descriptor file under ``root`` with its stat, plus rejected entries.

    Hidden entries (the identity marker, temp files of atomic writes) are
    skipped.  Symlinks are reported, never followed.  An entry deleted or
    renamed while the walk runs is simply not there (the watcher reports the
    change, or the next walk sees it); that is not an incomplete scan.
    """
    files: dict[str, FileStat] = {}
    rejected: list[Finding] = []
    if not root.is_dir():
        return files, rejected
    entries = 0
    stack: list[tuple[Path, str, int]] = [(root, "", 1)]
    while stack:
        directory, prefix, depth = stack.pop()
        try:
            with os.scandir(directory) as iterator:
                children = list(iterator)
        except OSError as exc:
            if prefix and isinstance(exc, (FileNotFoundError, NotADirectoryError)):
                continue  # a subdirectory removed or renamed since its parent was listed
            raise StoreUnavailable(
                f"could not scan {prefix or 'the partition'}: {exc.strerror}; the scan is incomplete",
                path=prefix or ".",
            ) from exc
        entries += len(children)
        if entries > MAX_SCAN_ENTRIES:
            raise LimitExceeded(
                f"partition holds more than {MAX_SCAN_ENTRIES} entries; the scan is incomplete",
                limit=MAX_SCAN_ENTRIES,
            )
        for child in children:
            name = child.name
            if name.startswith("."):
                continue
            relpath = prefix + name
            try:
                info = child.stat(follow_symlinks=False)
            except FileNotFoundError:  # deleted or renamed since the directory was listed
                continue
            if not name.isascii() and shown_path(name) != name:  # the prefix is a directory already walked
                if stat.S_ISDIR(info.st_mode) or is_record_path(relpath) or is_descriptor_path(relpath):
                    rejected.append(_undecodable(relpath))
            elif stat.S_ISLNK(info.st_mode):
                rejected.append(Finding("symlink", "symlinks are not followed", path=relpath))
            elif stat.S_ISDIR(info.st_mode):
                if depth >= MAX_DEPTH:
                    rejected.append(Finding("too_deep", f"directories nest deeper than {MAX_DEPTH} levels",
                                            path=relpath))
                else:
                    stack.append((Path(child.path), relpath + "/", depth + 1))
            elif stat.S_ISREG(info.st_mode) and (is_record_path(relpath) or is_descriptor_path(relpath)):
                if info.st_nlink > 1:
                    rejected.append(_hardlinked(relpath))
                else:
                    files[relpath] = FileStat.of(info)
    return files, rejected


def stat_one(root: Path, relpath: str) -> FileStat | Finding | None:
    """One path as a walk would list it: its stamp, the finding that rejects it, or None when it is not
    there or not a record or descriptor file."""
    try:
        info = os.lstat(root / relpath)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(info.st_mode) and shown_path(relpath) == relpath:
        return Finding("symlink", "symlinks are not followed", path=relpath)  # any symlink, as a walk says
    if not (is_record_path(relpath) or is_descriptor_path(relpath)):
        return None
    if shown_path(relpath) != relpath:
        return _undecodable(relpath)
    if stat.S_ISLNK(info.st_mode):
        return Finding("symlink", "symlinks are not followed", path=relpath)
    if not stat.S_ISREG(info.st_mode):
        return None
    if info.st_nlink > 1:
        return _hardlinked(relpath)
    return FileStat.of(info)
