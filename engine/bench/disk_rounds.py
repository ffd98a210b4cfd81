"""``python -m engine.bench.disk_rounds [FOLDER]``: what one round of the disk costs, as a publication pays it.

A publication waits for the disk in rounds (docs/reliability.md): its journal's SQLite COMMIT, its temp files'
fsyncs, the renamed files' folder fsync beside the checkpoint, and the acknowledging COMMIT.  This prints, as
a Markdown table, the median and 90th percentile of each kind of round on the file system holding ``FOLDER``
(default: a temporary folder under the current one, removed after): a small file rewritten and fsynced, a new
file written and fsynced, a folder fsynced after a file is created in it, a WAL COMMIT with ``synchronous``
FULL (as the store's database) and NORMAL, several new files fsynced at once on as many threads (does the file
system take them as one round?), and a FULL COMMIT with four new files fsynced beside it against one after the
other.  Nothing of the engine runs; the figures say what the engine's rounds could cost at best.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from .socket import machine

ROUNDS = 200
PAGE = b"x" * 2000  # about a page's file
ROW = b"y" * 3000  # about a page's journal row


def _timed(step: Callable[[int], None], count: int) -> tuple[float, float]:
    timings = []
    for index in range(count):
        began = time.perf_counter()
        step(index)
        timings.append((time.perf_counter() - began) * 1000)
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.9)]


def _write_synced(path: str, *, new: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if new else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, PAGE)
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _database(folder: str, synchronous: str) -> sqlite3.Connection:
    connection = sqlite3.connect(os.path.join(folder, f"rounds-{synchronous}.sqlite"), isolation_level=None,
                                 check_same_thread=False)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute(f"PRAGMA synchronous = {synchronous}")
    connection.execute("CREATE TABLE IF NOT EXISTS rows (data BLOB)")
    return connection


def _commit(connection: sqlite3.Connection) -> None:
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("INSERT INTO rows VALUES (?)", (ROW,))
    connection.execute("COMMIT")


def measure(folder: str) -> list[tuple[str, tuple[float, float]]]:
    numbers = iter(range(10**9))

    def new_file(_: int = 0) -> None:
        path = os.path.join(folder, f"new-{next(numbers)}.tmp")
        _write_synced(path, new=True)
        os.unlink(path)

    def at_once(count: int) -> Callable[[int], None]:
        def step(_: int) -> None:
            threads = [threading.Thread(target=new_file) for _ in range(count)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        return step

    def folder_synced(index: int) -> None:
        path = os.path.join(folder, f"made-{index}")
        Path(path).touch()
        _fsync_folder(folder)
        os.unlink(path)

    full, normal = _database(folder, "FULL"), _database(folder, "NORMAL")

    def commit_beside_files(_: int) -> None:
        threads = [threading.Thread(target=new_file) for _ in range(4)]
        for thread in threads:
            thread.start()
        _commit(full)
        for thread in threads:
            thread.join()

    def commit_then_files(index: int) -> None:
        _commit(full)
        at_once(4)(index)

    try:
        return [
            ("a small file rewritten and fsynced", _timed(
                lambda index: _write_synced(os.path.join(folder, f"old-{index % 10}"), new=False), ROUNDS)),
            ("a new file written and fsynced", _timed(new_file, ROUNDS)),
            ("a file created, its folder fsynced", _timed(folder_synced, ROUNDS)),
            ("WAL COMMIT, synchronous = FULL", _timed(lambda _: _commit(full), ROUNDS)),
            ("WAL COMMIT, synchronous = NORMAL", _timed(lambda _: _commit(normal), ROUNDS)),
            ("1 new file fsynced on a thread of its own", _timed(at_once(1), ROUNDS // 2)),
            ("4 new files fsynced at once, a thread each", _timed(at_once(4), ROUNDS // 2)),
            ("8 new files fsynced at once, a thread each", _timed(at_once(8), ROUNDS // 2)),
            ("a FULL COMMIT with 4 new files fsynced beside it", _timed(commit_beside_files, ROUNDS // 2)),
            ("a FULL COMMIT, then 4 new files fsynced at once", _timed(commit_then_files, ROUNDS // 2)),
        ]
    finally:
        full.close()
        normal.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    scratch = tempfile.mkdtemp(prefix="disk-rounds-", dir=argv[0] if argv else ".")
    try:
        began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        load = " ".join(f"{value:.2f}" for value in os.getloadavg())
        rows = measure(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    command = " ".join(["python -m engine.bench.disk_rounds", *argv])
    print(f"- Command: `{command}`")
    print(f"- Date: {began}; machine: {machine()}; load average at the start: {load}")
    print()
    print("| one round | p50 ms | p90 ms |")
    print("| --- | ---: | ---: |")
    for label, (p50, p90) in rows:
        print(f"| {label} | {p50:.2f} | {p90:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
