"""One sync of a whole file system for many new files, instead of an fsync each (Linux ``syncfs``).

``syncfs`` writes out every dirty page and inode of the file system holding a descriptor and waits for them
(and for the disk's cache), so files written before it is called are durable once it returns.  Since Linux 5.8
it also reports a writeback error of any file of that file system since the descriptor was opened (earlier
kernels answered 0 whatever had failed), so a ``SyncPoint`` is opened before the files it is to make durable
are written, and ``syncfs`` is used on 5.8 and later only.  Elsewhere, or where the kernel refuses the call
(a sandbox's seccomp filter: ``ENOSYS``, ``EPERM``), each file is fsynced as before.

The trade: ``syncfs`` also writes out whatever other programs left dirty on the same file system.  On ext4 in
its default ordered mode an fsync already waits for the journal commit that carries their metadata (and the
data of the blocks allocated in it), so one ``syncfs`` costs a group little more than one round of its fsyncs;
on XFS or btrfs an fsync writes its own file only, and a ``syncfs`` beside a program writing gigabytes waits for
them.  Hence it is for large groups only (docs/architecture.md, "One sync of the file system for a large group").
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from concurrent.futures import Future
from pathlib import Path
from typing import Callable

# The first kernel whose syncfs reports writeback errors (commit 735e4ae5ba28, "vfs: track per-sb writeback
# errors and report them to syncfs").
REPORTS_ERRORS_SINCE = (5, 8)
# What a kernel or sandbox answers when it will not run syncfs at all: nothing was synced, nothing failed.
_REFUSED = frozenset({errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.EOPNOTSUPP})

Syncfs = Callable[[int], int]


def kernel_release(release: str) -> tuple[int, int] | None:
    """The major and minor number of a ``uname`` release (``6.18.44-fc-v1147``: (6, 18)); None if unreadable."""
    numbers = release.split("-", 1)[0].split(".")
    try:
        return int(numbers[0]), int(numbers[1])
    except (IndexError, ValueError):
        return None


def file_system_sync(platform: str = sys.platform, release: str | None = None) -> Syncfs | None:
    """libc's ``syncfs`` where it reports writeback errors (Linux 5.8 and later); None elsewhere."""
    if not platform.startswith("linux"):
        return None
    version = kernel_release(os.uname().release if release is None else release)
    if version is None or version < REPORTS_ERRORS_SINCE:
        return None
    try:
        syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):  # a libc without it (musl before 1.1.5, glibc before 2.14)
        return None
    syncfs.argtypes = [ctypes.c_int]
    syncfs.restype = ctypes.c_int
    return syncfs  # a ctypes call releases the interpreter lock while the disk is waited for


class SyncPoint:
    """The file system holding ``folder``, to be synced once the files made after this are written.

    Opened before those files are written: ``syncfs`` reports the writeback errors that happened since its
    descriptor was opened (and an earlier one no descriptor was told of yet), none reported before that.
    """

    def __init__(self, folder: Path, syncfs: Syncfs) -> None:
        self._syncfs = syncfs
        self._fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        self.device = os.fstat(self._fd).st_dev
        self.refused = False  # the kernel refused ``syncfs`` (``make_durable`` fsynced each file instead)

    def close(self) -> None:
        os.close(self._fd)

    def make_durable(self, paths: list[str], beside: Callable[..., Future[None]]) -> dict[str, OSError]:
        """Make the files at ``paths``, all written (and closed), durable: one ``syncfs`` for those on this file
        system, an fsync each (run with ``beside``, all at once) for the others, and for all of them where the
        kernel refused ``syncfs`` (``refused`` is then set).  Returns the paths not made durable, each with its
        error: a failed ``syncfs`` fails every path it covered (the kernel does not say which file failed)."""
        on_device: dict[str, bool] = {}  # folder: on this file system
        for path in paths:
            folder = os.path.dirname(path)
            if folder not in on_device:
                try:
                    on_device[folder] = os.lstat(folder).st_dev == self.device
                except OSError:  # its fsync says what is wrong
                    on_device[folder] = False
        held = [path for path in paths if on_device[os.path.dirname(path)]]
        apart = [path for path in paths if not on_device[os.path.dirname(path)]]
        failed: dict[str, OSError] = {}
        if held:
            try:
                if not self._sync():
                    self.refused = True
                    apart = paths
            except OSError as exc:
                failed.update((path, exc) for path in held)
        for path, sync in [(path, beside(fsync_path, path)) for path in apart]:
            try:
                sync.result()
            except OSError as exc:
                failed[path] = exc
        return failed

    def _sync(self) -> bool:
        """One ``syncfs``: True once everything written on the file system is durable; False where the kernel
        refused to run it (nothing was synced).  Raises the ``OSError`` of a writeback error."""
        if self._syncfs(self._fd) == 0:
            return True
        code = ctypes.get_errno()
        if code in _REFUSED:
            return False
        raise OSError(code, f"syncfs: {os.strerror(code)}")


def fsync_path(path: Path | str) -> None:
    """fsync the file at ``path`` through a descriptor of its own: a writeback error that no descriptor was told
    of yet is reported to one opened after it (on the kernels ``file_system_sync`` accepts)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
