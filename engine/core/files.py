"""Safe file access inside a root directory.

Every path the engine touches inside a vault goes through here.  Paths are
partition-relative POSIX strings; they never leave their root, never pass
through a symlink and never name a hardlinked file.  Writes are atomic:
unique temp file in the same directory (or in a staging folder on the same
file system that no watcher sees, ``StagingFolder``), fsync, ``os.replace``,
fsync of the directory.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import shutil
import stat
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable

from .errors import InvalidParams, LimitExceeded, NotFound

MAX_DEPTH = 8
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO must not wait for a writer
_CHUNK = 1 << 20


class UnsafePath(InvalidParams):
    """A path that tries to leave its root, or passes a symlink or hardlink."""


def check_relative_path(relpath: str, *, max_depth: int = MAX_DEPTH) -> PurePosixPath:
    """Validate a root-relative POSIX path without touching the disk."""
    return PurePosixPath(*_relative_parts(relpath, max_depth))


def _relative_parts(relpath: str, max_depth: int = MAX_DEPTH) -> list[str]:
    """``check_relative_path``'s checks, answering the path's components (no ``PurePosixPath`` made)."""
    if not isinstance(relpath, str) or not relpath:
        raise UnsafePath("path must be a non-empty string", path=relpath)
    if "\x00" in relpath or "\\" in relpath:
        raise UnsafePath("path contains a NUL or backslash", path=relpath)
    if relpath.startswith("/"):
        raise UnsafePath("absolute paths are not allowed", path=relpath)
    parts = relpath.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise UnsafePath("path must not contain empty, '.' or '..' components", path=relpath)
    if len(parts) > max_depth:
        raise LimitExceeded(f"path is deeper than {max_depth} levels", path=relpath, limit=max_depth)
    return parts


def resolve_inside(root: Path, relpath: str) -> Path:
    """Join ``relpath`` to ``root``, refusing any symlink on the way.

    Components that do not exist yet are fine (the caller may be about to
    create them); components that exist must be real directories, and the
    leaf must not be a symlink.
    """
    _walk_inside(root, relpath)
    return root / relpath


def present_inside(root: Path, relpath: str) -> bool:
    """``resolve_inside``'s checks; whether something was at ``relpath`` when its components were looked at."""
    return _walk_inside(root, relpath)


def _walk_inside(root: Path, relpath: str) -> bool:
    """``resolve_inside``'s checks; whether the leaf was there when its components were looked at (the path is
    then ``f"{root}/{relpath}"``: the components are ``relpath``'s, checked)."""
    parts = _relative_parts(relpath)
    current = os.fspath(root)  # joined as text: a write resolves about five paths, a Path per component showed
    for index, part in enumerate(parts):
        current = f"{current}/{part}"
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return False
        if stat.S_ISLNK(info.st_mode):
            component = "/".join(parts[:index + 1])
            raise UnsafePath(f"path passes through a symlink: {component}", path=relpath,
                             component=component, problem="symlink")
        if index < len(parts) - 1 and not stat.S_ISDIR(info.st_mode):
            component = "/".join(parts[:index + 1])
            raise UnsafePath(f"path passes through a file: {component}", path=relpath, component=component,
                             problem="not_a_directory")
    return True


def _open_regular(path: Path | str, relpath: str, *, missing: type[Exception] | None = None
                  ) -> tuple[int, os.stat_result]:
    """Open a regular, singly linked file for reading; a missing one raises NotFound (``missing``: that
    exception instead, without the error's details built)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _BINARY | _NONBLOCK)
    except FileNotFoundError as exc:
        if missing is not None:
            raise missing from None
        raise NotFound("file not found", path=relpath) from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath("file is a symlink", path=relpath) from exc
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafePath("not a regular file", path=relpath)
    if info.st_nlink > 1:
        os.close(fd)
        raise UnsafePath("file has more than one hard link", path=relpath)
    if _NONBLOCK:
        os.set_blocking(fd, True)
    return fd, info


def read_file(root: Path, relpath: str, *, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """Read a regular, singly linked file inside ``root``, at most ``max_bytes``."""
    path = resolve_inside(root, relpath)
    fd, info = _open_regular(path, relpath)
    try:
        if info.st_size > max_bytes:
            raise LimitExceeded(
                f"file is larger than {max_bytes} bytes", path=relpath, limit=max_bytes, size=info.st_size
            )
        data = _read_all(fd, max_bytes + 1)
        if len(data) > max_bytes:
            raise LimitExceeded(f"file is larger than {max_bytes} bytes", path=relpath, limit=max_bytes)
        return data, info
    finally:
        os.close(fd)


class TreeReader:
    """``read_file`` for many files under one root, as a scan reads them (in path order).

    Each directory is opened once (``O_DIRECTORY | O_NOFOLLOW``, relative to the one above) and its
    files relative to it with ``O_NOFOLLOW``: no symlink is followed, without a ``lstat`` of every path
    component for every file.  Whatever it would refuse is read by ``read_file`` instead, which refuses
    it in its own words.  The directories of the last file read stay open until ``close``.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root_fd: int | None = None
        self._chain: list[tuple[str, int]] = []  # the open directories below the root, outermost first

    def __enter__(self) -> "TreeReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._release(0)
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    def read(self, relpath: str, *, max_bytes: int) -> tuple[bytes, os.stat_result]:
        parts = relpath.split("/")
        if (not _NOFOLLOW or len(parts) > MAX_DEPTH or "\\" in relpath or "\x00" in relpath
                or any(part in ("", ".", "..") for part in parts)):
            return read_file(self.root, relpath, max_bytes=max_bytes)
        try:
            fd = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | _NONBLOCK, dir_fd=self._directory(parts[:-1]))
        except OSError:
            return read_file(self.root, relpath, max_bytes=max_bytes)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1 or info.st_size > max_bytes:
                return read_file(self.root, relpath, max_bytes=max_bytes)
            os.set_blocking(fd, True)
            data = _read_all(fd, max_bytes + 1)
        finally:
            os.close(fd)
        if len(data) > max_bytes:
            return read_file(self.root, relpath, max_bytes=max_bytes)
        return data, info

    def _directory(self, names: list[str]) -> int:
        """The fd of directory ``names`` below the root, opening only what the last file's did not share."""
        if self._root_fd is None:
            self._root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        kept = 0
        while kept < min(len(self._chain), len(names)) and self._chain[kept][0] == names[kept]:
            kept += 1
        self._release(kept)
        for name in names[kept:]:
            parent = self._chain[-1][1] if self._chain else self._root_fd
            self._chain.append((name, os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=parent)))
        return self._chain[-1][1] if self._chain else self._root_fd

    def _release(self, keep: int) -> None:
        while len(self._chain) > keep:
            os.close(self._chain.pop()[1])


def _read_all(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of ``fd``, in chunks."""
    chunks = []
    while limit > 0:
        chunk = os.read(fd, min(_CHUNK, limit))
        if not chunk:
            break
        chunks.append(chunk)
        limit -= len(chunk)
    return b"".join(chunks)


def sha256_file(root: Path, relpath: str) -> tuple[str, int]:
    """Stream a file's sha256 (hex) and size; no size limit, constant memory."""
    fd, _ = _open_regular(resolve_inside(root, relpath), relpath)
    return _digest(fd)


class _Missing(Exception):
    """Nothing at the path (``sha256_if_present``)."""


def sha256_if_present(root: Path, relpath: str) -> str | None:
    """``sha256_file``'s digest, or None where nothing is at ``relpath``: a publication asks it of every new
    file twice, and building the NotFound error ``sha256_file`` raises was half the cost of that answer."""
    if not _walk_inside(root, relpath):  # the walk found no leaf: no open to fail (a publication's every new file)
        return None
    try:  # the path as text: a Path made for each of a publication's files showed in the lane's profile
        fd, _ = _open_regular(f"{os.fspath(root)}/{relpath}", relpath, missing=_Missing)
    except _Missing:
        return None
    return _digest(fd)[0]


def _digest(fd: int) -> tuple[str, int]:
    """The sha256 and size of what is left to read of ``fd``, which it closes."""
    digest = hashlib.sha256()
    size = 0
    try:
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest(), size


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fsync_dir(path: Path) -> None:
    """Make a rename or creation in ``path`` durable (a no-op where unsupported)."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dirs(root: Path, relpath: str) -> Path:
    """Create the directories of ``relpath`` under ``root`` (no symlinks)."""
    target = resolve_inside(root, relpath)
    try:
        if stat.S_ISDIR(os.lstat(target).st_mode):  # the common case: there already (one lstat, not three)
            return target
    except FileNotFoundError:
        pass
    created = []
    probe = target
    while not probe.exists():
        created.append(probe)
        probe = probe.parent
    for directory in reversed(created):
        directory.mkdir()
        fsync_dir(directory.parent)
    if not target.is_dir() or target.is_symlink():
        raise UnsafePath("not a directory", path=relpath)
    return target


STAGED_SUFFIX = ".tmp"


class StagingFolder:
    """A folder for temp files whose targets lie in watched folders of the same file system.

    A temp file made beside its target is seen by every watcher of the target's folder: made, written,
    closed, then renamed (five events for the vault's watcher, each handed between its threads).  Made here,
    out of any watch, the rename into place is the only event.  Its temp files are ``<pid>-<n>.tmp``: the
    process that made each is in its name, so a process that owns the folder's targets (the engine, under
    its lock) removes those of earlier processes at open (``remove_leftovers``) and never a live one of its own.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # False once a rename out of it was refused across file systems (a target folder that is a mount point,
        # a bind mount among them, which ``st_dev`` does not tell): temp files go beside their targets from then on.
        self.usable = True

    @classmethod
    def open(cls, path: Path, targets: Path) -> "StagingFolder | None":
        """The staging folder at ``path`` (made if missing), or None where it cannot be made or is not on the
        file system of ``targets`` (a rename from it would then fail): temp files then go beside their targets."""
        try:
            path.mkdir(mode=0o700, exist_ok=True)
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode) or info.st_dev != os.stat(targets).st_dev:
                return None
        except OSError:
            return None
        return cls(path)

    def remove_leftovers(self) -> int:
        """Remove the temp files of other processes (left by a crash); answers how many were removed."""
        mine = f"{os.getpid():x}-"
        removed = 0
        try:
            entries = list(os.scandir(self.path))
        except OSError:
            return 0
        for entry in entries:
            if entry.name.startswith(mine) or not entry.name.endswith(STAGED_SUFFIX):
                continue
            try:
                os.unlink(entry.path)
            except OSError:  # gone already, or not a file: nothing of ours
                continue
            removed += 1
        return removed


class StagedFile:
    """New bytes for ``path`` in a temp file of its own beside it, neither durable nor in place yet.

    ``sync`` makes the bytes durable and may run on any thread, so a publication stages all its files
    first and syncs them at once (the file system commits fsyncs that arrive together in one round);
    ``install`` then renames them over their targets in order.  ``discard`` removes the temp file, and
    ``install`` does too when ``check`` or the rename fails.

    The temp file is ``.<name>.<pid>-<n>.tmp``, created with ``O_EXCL`` (a leftover of an earlier process
    is never reused, the next ``n`` is taken): no random names tried in a folder of thousands of files,
    and recovery still finds leftovers by the pattern ``.<name>.*.tmp``.  With ``staging`` it is
    ``<pid>-<n>.tmp`` in that folder instead, out of sight of the target folder's watchers; a rename the
    file system refuses across folders (``EXDEV``) copies it to a synced temp file beside the target first.
    """

    def __init__(self, path: Path, *, mode: int = 0o644, staging: StagingFolder | None = None) -> None:
        self.path = path
        self.mode = mode
        self._staging = staging
        self._fd, self.temp = _create_temp(path, mode, staging)
        self._handle: BinaryIO | None = None
        self.closed = False
        self.settled = False  # installed or discarded: nothing of it is left to clean up

    @property
    def handle(self) -> BinaryIO:
        """The temp file as a buffered file, for writers that stream (``AtomicFile``)."""
        if self._handle is None:
            self._handle = os.fdopen(self._fd, "wb")
        return self._handle

    def write(self, data: bytes) -> None:
        """Write all of ``data`` to the temp file (unbuffered)."""
        if self._handle is not None:
            self._handle.write(data)
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def sync(self) -> None:
        if self._handle is not None:
            self._handle.flush()
        os.fsync(self._fd)

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._handle is not None:
            self._handle.close()
        else:
            os.close(self._fd)

    def install(self, *, check: Callable[[], None] | None = None,
                directories: set[Path] | None = None) -> os.stat_result:
        """Rename the synced temp file over ``path`` once ``check`` passes (``check`` may raise to leave ``path``
        untouched); with ``directories`` the caller syncs the directory, else it is synced here."""
        try:
            self._close()
            if check is not None:
                check()
            self._replace()
            self.settled = True
            info = os.lstat(self.path)  # before the directory sync: the file is ours for the shortest time
        except BaseException:
            self.discard()
            raise
        if directories is None:
            fsync_dir(self.path.parent)
        else:
            directories.add(self.path.parent)
        return info

    def _replace(self) -> None:
        try:
            os.replace(self.temp, self.path)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            if self._staging is not None:
                self._staging.usable = False
            self._move_beside()
            os.replace(self.temp, self.path)

    def _move_beside(self) -> None:
        """Copy the staged bytes to a synced temp file beside the target, which then replaces the staged one."""
        beside = StagedFile(self.path, mode=self.mode)
        try:
            with open(self.temp, "rb") as source:
                shutil.copyfileobj(source, beside.handle, _CHUNK)
            beside.sync()
            beside._close()
        except BaseException:
            beside.discard()
            raise
        os.unlink(self.temp)
        self.temp = beside.temp

    def discard(self) -> None:
        self._close()
        self.settled = True
        try:
            os.unlink(self.temp)
        except FileNotFoundError:
            pass


_TEMP_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY
_temp_numbers = itertools.count()  # the ``n`` of this process's temp files: unique while it runs


def _create_temp(path: Path, mode: int, staging: StagingFolder | None) -> tuple[int, str]:
    """A new, empty temp file beside ``path`` (or in ``staging``) with ``mode`` (whatever the umask): its
    descriptor and path."""
    while True:
        if staging is None or not staging.usable:
            temp = f"{path.parent}/.{path.name}.{os.getpid():x}-{next(_temp_numbers):x}{STAGED_SUFFIX}"
        else:
            temp = f"{staging.path}/{os.getpid():x}-{next(_temp_numbers):x}{STAGED_SUFFIX}"
        try:
            fd = os.open(temp, _TEMP_FLAGS, mode)
        except FileExistsError:  # left by an earlier process that had this pid
            continue
        try:
            # Changed only where the umask took bits away: a change of mode is one more event for every
            # watcher of the folder (the vault's own among them).
            if stat.S_IMODE(os.fstat(fd).st_mode) != mode:
                if hasattr(os, "fchmod"):
                    os.fchmod(fd, mode)
                else:
                    os.chmod(temp, mode)
        except BaseException:
            os.close(fd)
            os.unlink(temp)
            raise
        return fd, temp


class AtomicFile:
    """A file written in full or not at all: ``with AtomicFile(path) as handle:`` writes a temp file beside
    ``path``; a clean exit makes it durable, renames it over ``path`` and syncs the directory, an exception
    removes it and leaves ``path`` untouched.  ``info`` is then the new file's stat.

    ``check`` runs once the temp file is durable, right before the rename, and may raise to leave ``path``
    untouched: a caller that compares the target with what it expects to replace does so as late as it can,
    so an edit made while the temp file was written and synced is seen, not overwritten.

    With ``directories`` the rename is made durable by the caller: the directory is added to the set (for
    one ``fsync_dir`` after several writes) instead of being synced here.  With ``staging`` the temp file is
    made there (``StagedFile``).
    """

    def __init__(self, path: Path, *, mode: int = 0o644, check: Callable[[], None] | None = None,
                 directories: set[Path] | None = None, staging: StagingFolder | None = None) -> None:
        self.path = path
        self.mode = mode
        self.check = check
        self.directories = directories
        self.staging = staging
        self.info: os.stat_result | None = None

    def __enter__(self) -> BinaryIO:
        self._staged = StagedFile(self.path, mode=self.mode, staging=self.staging)
        return self._staged.handle

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is not None:
            self._staged.discard()
            return  # the exception from the with-block goes on
        try:
            self._staged.sync()
        except BaseException:
            self._staged.discard()
            raise
        self.info = self._staged.install(check=self.check, directories=self.directories)


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644, check: Callable[[], None] | None = None,
                 directories: set[Path] | None = None, staging: StagingFolder | None = None) -> os.stat_result:
    """Write ``data`` to ``path`` atomically and durably (``AtomicFile``); returns the new file's stat."""
    writer = AtomicFile(path, mode=mode, check=check, directories=directories, staging=staging)
    with writer as handle:
        handle.write(data)
    assert writer.info is not None
    return writer.info


def stage_inside(root: Path, relpath: str, data: bytes, *, staging: StagingFolder | None = None) -> StagedFile:
    """Stage ``data`` for a root-relative path (``StagedFile``, in ``staging`` if given), creating its
    directories; the target, if it exists, must be a regular file."""
    parts = _relative_parts(relpath)
    # ``ensure_dirs`` checked every directory on the way; the name itself is checked here, once.
    parent = ensure_dirs(root, "/".join(parts[:-1])) if len(parts) > 1 else root
    path = parent / parts[-1]
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISLNK(mode):
            raise UnsafePath(f"path passes through a symlink: {relpath}", path=relpath, component=relpath,
                             problem="symlink")
        if not stat.S_ISREG(mode):
            raise UnsafePath("target is not a regular file", path=relpath)
    staged = StagedFile(path, staging=staging)
    try:
        staged.write(data)
    except BaseException:
        staged.discard()
        raise
    return staged


def write_inside(root: Path, relpath: str, data: bytes, *, check: Callable[[], None] | None = None,
                 directories: set[Path] | None = None, staging: StagingFolder | None = None) -> os.stat_result:
    """Atomically write a file at a root-relative path, creating its directories (``check``, ``directories``
    and ``staging``: as ``atomic_write``)."""
    return stage_synced(root, relpath, data, staging=staging).install(check=check, directories=directories)


def stage_synced(root: Path, relpath: str, data: bytes, *, staging: StagingFolder | None = None) -> StagedFile:
    """``stage_inside``, made durable: ``data`` in a synced temp file beside ``relpath`` (or in ``staging``),
    ready to install (any thread may stage it)."""
    staged = stage_inside(root, relpath, data, staging=staging)
    try:
        staged.sync()
        staged._close()  # here, on the staging thread: the rename needs no descriptor
    except BaseException:
        staged.discard()
        raise
    return staged


def stage_written(root: Path, relpath: str, data: bytes, *, staging: StagingFolder | None = None) -> StagedFile:
    """``stage_inside``, its descriptor closed: ``data`` in a temp file beside ``relpath`` (or in ``staging``), not
    durable until the caller syncs its file system (``core.syncfs``); any thread may stage it."""
    staged = stage_inside(root, relpath, data, staging=staging)
    try:
        staged._close()
    except BaseException:
        staged.discard()
        raise
    return staged


def remove_inside(root: Path, relpath: str) -> None:
    """Remove a file we created (used when rolling a publication back)."""
    path = resolve_inside(root, relpath)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    fsync_dir(path.parent)
