"""One sync of a file system for many new files: where it is used, what it reports, and the fsyncs it falls back to."""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable

import pytest

from engine.core import syncfs as syncfs_module
from engine.core.syncfs import SyncPoint, file_system_sync, kernel_release


def _now(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """``make_durable``'s ``beside``, on this thread."""
    done: Future[Any] = Future()
    try:
        done.set_result(fn(*args))
    except Exception as exc:
        done.set_exception(exc)
    return done


def _answering(code: int, calls: list[int]) -> Callable[[int], int]:
    def syncfs(fd: int) -> int:
        calls.append(fd)
        if code:
            ctypes.set_errno(code)
            return -1
        return 0
    return syncfs


def _written(folder: Path, count: int) -> list[str]:
    paths = []
    for n in range(count):
        (folder / f".f{n}.tmp").write_bytes(b"x" * 100)
        paths.append(f"{folder}/.f{n}.tmp")
    return paths


def test_a_kernel_release_is_read_as_its_major_and_minor_number():
    assert kernel_release("6.18.44-fc-v1147") == (6, 18)
    assert kernel_release("5.8.0") == (5, 8)
    assert kernel_release("4.19.0-25-amd64") == (4, 19)
    assert kernel_release("unknown") is None


def test_syncfs_is_used_only_on_linux_5_8_and_later():
    assert file_system_sync("darwin", "23.1.0") is None
    assert file_system_sync("win32", "10") is None
    assert file_system_sync("linux", "5.7.19") is None  # its syncfs answered 0 whatever writeback had failed
    assert file_system_sync("linux", "garbled") is None
    if sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "syncfs"):  # a libc that has it
        assert file_system_sync("linux", "5.8.0") is not None


def test_files_on_the_file_system_are_made_durable_by_one_syncfs(tmp_path):
    calls: list[int] = []
    point = SyncPoint(tmp_path, _answering(0, calls))
    fsynced: list[str] = []
    paths = _written(tmp_path, 3)
    try:
        assert point.make_durable(paths, lambda fn, path: fsynced.append(path) or _now(fn, path)) == {}
    finally:
        point.close()
    assert len(calls) == 1 and fsynced == [] and not point.refused


def test_a_failed_syncfs_fails_every_file_it_covered(tmp_path):
    point = SyncPoint(tmp_path, _answering(errno.EIO, []))
    paths = _written(tmp_path, 3)
    try:
        failed = point.make_durable(paths, _now)
    finally:
        point.close()
    assert sorted(failed) == sorted(paths) and {exc.errno for exc in failed.values()} == {errno.EIO}
    assert not point.refused


def test_a_refused_syncfs_has_every_file_fsynced_and_a_failed_fsync_fails_its_file_alone(tmp_path, monkeypatch):
    point = SyncPoint(tmp_path, _answering(errno.ENOSYS, []))
    paths = _written(tmp_path, 3)
    fsynced: list[str] = []
    fsync_path = syncfs_module.fsync_path

    def failing_the_second(path: str) -> None:
        fsynced.append(path)
        if path == paths[1]:
            raise OSError(errno.EIO, "Input/output error")
        fsync_path(path)

    monkeypatch.setattr(syncfs_module, "fsync_path", failing_the_second)
    try:
        failed = point.make_durable(paths, _now)
    finally:
        point.close()
    assert point.refused and fsynced == paths and list(failed) == [paths[1]]


def test_a_file_on_another_file_system_is_fsynced_on_its_own(tmp_path, monkeypatch):
    calls: list[int] = []
    point = SyncPoint(tmp_path, _answering(0, calls))
    here = _written(tmp_path, 2)
    (tmp_path / "mounted").mkdir()
    there = _written(tmp_path / "mounted", 1)
    lstat = os.lstat

    def another_device(path: Any) -> Any:  # the folder as a mount point inside the vault would be
        info = lstat(path)
        if str(path).endswith("mounted"):
            return os.stat_result((info.st_mode, info.st_ino, point.device + 1) + tuple(info)[3:])
        return info

    monkeypatch.setattr(syncfs_module.os, "lstat", another_device)
    fsynced: list[str] = []
    try:
        failed = point.make_durable(here + there, lambda fn, path: fsynced.append(path) or _now(fn, path))
    finally:
        point.close()
    assert failed == {} and len(calls) == 1 and fsynced == there


@pytest.mark.skipif(file_system_sync() is None, reason="syncfs that reports errors is Linux 5.8 and later only")
def test_the_kernels_syncfs_makes_written_files_durable(tmp_path):
    point = SyncPoint(tmp_path, file_system_sync())
    try:
        assert point.make_durable(_written(tmp_path, 5), _now) == {}
    finally:
        point.close()
    assert not point.refused
