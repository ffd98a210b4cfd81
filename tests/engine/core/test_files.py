"""Safe file access: relative paths, symlinks, hardlinks, limits and atomic writes."""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import stat
import threading
from pathlib import Path

import pytest

import engine.core.files as files
from engine.core.errors import LimitExceeded, NotFound
from engine.core.files import (
    MAX_DEPTH,
    TreeReader,
    UnsafePath,
    atomic_write,
    check_relative_path,
    ensure_dirs,
    read_file,
    remove_inside,
    resolve_inside,
    sha256_file,
    write_inside,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    directory = tmp_path / "root"
    directory.mkdir()
    return directory


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.md").write_bytes(b"secret")
    return directory


def leftovers(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.name.endswith(".tmp"))


# --- relative paths ---------------------------------------------------------------------


@pytest.mark.parametrize("relpath", ["a.md", "pages/people/dana.md", "/".join(["d"] * MAX_DEPTH), ".hidden", "a..b"])
def test_good_relative_paths_are_accepted(relpath: str) -> None:
    assert str(check_relative_path(relpath)) == relpath


@pytest.mark.parametrize("relpath", [
    "", "/abs/x.md", "../x.md", "a/../x.md", "..", ".", "./x.md", "a/./x.md", "a//x.md", "a/", "/",
    "a\\b.md", "..\\x.md", "a\x00b.md",
])
def test_unsafe_relative_paths_are_refused(relpath: str) -> None:
    with pytest.raises(UnsafePath) as caught:
        check_relative_path(relpath)
    assert caught.value.reason == "invalid_params"


def test_non_string_paths_are_refused() -> None:
    with pytest.raises(UnsafePath):
        check_relative_path(None)  # type: ignore[arg-type]


def test_paths_deeper_than_the_limit_are_a_limit_error() -> None:
    with pytest.raises(LimitExceeded) as caught:
        check_relative_path("/".join(["d"] * (MAX_DEPTH + 1)))
    assert caught.value.details["limit"] == MAX_DEPTH


def test_a_custom_depth_limit_is_honoured() -> None:
    check_relative_path("a/b", max_depth=2)
    with pytest.raises(LimitExceeded):
        check_relative_path("a/b/c", max_depth=2)


# --- resolving inside a root -------------------------------------------------------------


def test_resolve_inside_joins_existing_and_missing_paths(root: Path) -> None:
    (root / "pages").mkdir()
    assert resolve_inside(root, "pages/x.md") == root / "pages" / "x.md"
    assert resolve_inside(root, "new/dir/x.md") == root / "new" / "dir" / "x.md"


def test_resolve_inside_refuses_a_symlinked_directory(root: Path, outside: Path) -> None:
    (root / "pages").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePath, match="symlink"):
        resolve_inside(root, "pages/secret.md")


def test_resolve_inside_refuses_a_symlinked_leaf(root: Path, outside: Path) -> None:
    (root / "x.md").symlink_to(outside / "secret.md")
    with pytest.raises(UnsafePath, match="symlink"):
        resolve_inside(root, "x.md")


def test_resolve_inside_refuses_a_dangling_symlink(root: Path, tmp_path: Path) -> None:
    (root / "x.md").symlink_to(tmp_path / "nowhere.md")
    with pytest.raises(UnsafePath, match="symlink"):
        resolve_inside(root, "x.md")


def test_resolve_inside_refuses_a_file_used_as_a_directory(root: Path) -> None:
    (root / "pages").write_bytes(b"a file")
    with pytest.raises(UnsafePath, match="through a file"):
        resolve_inside(root, "pages/x.md")


# --- reading ---------------------------------------------------------------------------------


def test_read_file_returns_the_bytes_and_their_stat(root: Path) -> None:
    (root / "a.md").write_bytes(b"hello")
    data, info = read_file(root, "a.md", max_bytes=100)
    assert data == b"hello"
    assert info.st_size == 5 and info.st_ino == os.lstat(root / "a.md").st_ino


def test_read_file_accepts_exactly_max_bytes(root: Path) -> None:
    (root / "a.md").write_bytes(b"x" * 10)
    assert read_file(root, "a.md", max_bytes=10)[0] == b"x" * 10


def test_read_file_refuses_a_file_over_max_bytes(root: Path) -> None:
    (root / "a.md").write_bytes(b"x" * 11)
    with pytest.raises(LimitExceeded) as caught:
        read_file(root, "a.md", max_bytes=10)
    assert caught.value.details["limit"] == 10 and caught.value.details["size"] == 11


def test_read_file_reads_across_chunks(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "_CHUNK", 7)
    data = bytes(range(256)) * 3
    (root / "a.bin").write_bytes(data)
    assert read_file(root, "a.bin", max_bytes=len(data))[0] == data


def test_read_file_reports_a_missing_file_as_not_found(root: Path) -> None:
    with pytest.raises(NotFound) as caught:
        read_file(root, "missing.md", max_bytes=10)
    assert caught.value.details["path"] == "missing.md"


def test_read_file_refuses_a_symlinked_file(root: Path, outside: Path) -> None:
    (root / "x.md").symlink_to(outside / "secret.md")
    with pytest.raises(UnsafePath):
        read_file(root, "x.md", max_bytes=100)


def test_read_file_refuses_a_file_behind_a_symlinked_directory(root: Path, outside: Path) -> None:
    (root / "pages").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePath):
        read_file(root, "pages/secret.md", max_bytes=100)


def test_read_file_refuses_a_hardlinked_file(root: Path, outside: Path) -> None:
    os.link(outside / "secret.md", root / "x.md")
    with pytest.raises(UnsafePath, match="hard link"):
        read_file(root, "x.md", max_bytes=100)


def test_read_file_refuses_a_directory(root: Path) -> None:
    (root / "pages").mkdir()
    with pytest.raises(UnsafePath, match="regular"):
        read_file(root, "pages", max_bytes=100)


def test_read_file_refuses_a_fifo_without_blocking(root: Path) -> None:
    # A FIFO dropped into the vault must be refused, not block the storage worker
    # until some writer opens it.
    fifo = root / "x.md"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            read_file(root, "x.md", max_bytes=100)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion below
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=5)
    blocked = worker.is_alive()
    if blocked:  # release the blocked open() so the thread can finish
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join()
    assert not blocked, "read_file blocked opening a FIFO"
    assert isinstance(outcome[0], UnsafePath)


# --- reading many files (TreeReader) ------------------------------------------------------------


def refusal(read, relpath: str, max_bytes: int = 100) -> tuple[str, str, dict]:
    with pytest.raises(Exception) as caught:
        read(relpath, max_bytes=max_bytes)
    return type(caught.value).__name__, caught.value.message, caught.value.details


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_tree_reader_reads_what_read_file_reads_across_directories(root: Path) -> None:
    paths = ["top.md", "a/one.md", "a/two.md", "a/b/three.md", "c/four.md", "a/five.md", "a/b/c/d/e/f/g/deep.md"]
    for index, relpath in enumerate(paths):
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_bytes(f"file {index}".encode())
    before = open_fds()
    with TreeReader(root) as reader:
        for relpath in paths:
            data, info = reader.read(relpath, max_bytes=100)
            expected, expected_info = read_file(root, relpath, max_bytes=100)
            assert (data, info.st_ino, info.st_size) == (expected, expected_info.st_ino, expected_info.st_size)
        assert open_fds() > before  # the last file's directories stay open while it reads on
    assert open_fds() == before


@pytest.mark.parametrize("case", ["symlinked file", "symlinked directory", "hardlink", "missing", "directory",
                                  "too large", "fifo", "too deep", "dot-dot"])
def test_tree_reader_refuses_what_read_file_refuses_in_its_words(root: Path, outside: Path, case: str) -> None:
    (root / "a").mkdir()
    (root / "a" / "ok.md").write_bytes(b"ok")
    relpath = {"symlinked file": "a/link.md", "symlinked directory": "linked/secret.md", "hardlink": "a/hard.md",
               "missing": "a/gone.md", "directory": "a", "too large": "a/big.md", "fifo": "a/fifo.md",
               "too deep": "/".join(["d"] * MAX_DEPTH) + "/x.md", "dot-dot": "a/../a/ok.md"}[case]
    os.symlink(outside / "secret.md", root / "a" / "link.md")
    os.symlink(outside, root / "linked")
    os.link(outside / "secret.md", root / "a" / "hard.md")
    (root / "a" / "big.md").write_bytes(b"x" * 101)
    os.mkfifo(root / "a" / "fifo.md")
    with TreeReader(root) as reader:
        reader.read("a/ok.md", max_bytes=100)  # the directory is open already: the refusal does not rely on a walk
        by_path = refusal(lambda path, max_bytes: read_file(root, path, max_bytes=max_bytes), relpath)
        assert refusal(reader.read, relpath) == by_path


def test_tree_reader_never_reads_through_a_directory_swapped_for_a_symlink(root: Path, outside: Path) -> None:
    (root / "a").mkdir()
    (root / "a" / "one.md").write_bytes(b"one")
    with TreeReader(root) as reader:
        assert reader.read("a/one.md", max_bytes=100)[0] == b"one"
        (root / "a").rename(root / "moved")
        os.symlink(outside, root / "a")
        with pytest.raises(UnsafePath, match="symlink"):
            reader.read("a/secret.md", max_bytes=100)


# --- hashing ------------------------------------------------------------------------------


def test_sha256_file_streams_across_chunks(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "_CHUNK", 1000)
    data = os.urandom(10_500)
    (root / "big.bin").write_bytes(data)
    assert sha256_file(root, "big.bin") == (hashlib.sha256(data).hexdigest(), len(data))


def test_sha256_file_of_an_empty_file(root: Path) -> None:
    (root / "empty").write_bytes(b"")
    assert sha256_file(root, "empty") == (hashlib.sha256(b"").hexdigest(), 0)


def test_sha256_file_refuses_symlinks_and_missing_files(root: Path, outside: Path) -> None:
    (root / "x.md").symlink_to(outside / "secret.md")
    with pytest.raises(UnsafePath):
        sha256_file(root, "x.md")
    with pytest.raises(NotFound):
        sha256_file(root, "missing")


# --- writing ---------------------------------------------------------------------------------


def test_atomic_write_creates_a_file_with_the_mode_and_no_temp_files(root: Path) -> None:
    info = atomic_write(root / "a.md", b"first", mode=0o600)
    assert (root / "a.md").read_bytes() == b"first"
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_size == 5
    assert leftovers(root) == []


def test_atomic_write_replaces_the_content_with_a_new_inode(root: Path) -> None:
    atomic_write(root / "a.md", b"first version")
    before = os.lstat(root / "a.md").st_ino
    info = atomic_write(root / "a.md", b"second")
    assert (root / "a.md").read_bytes() == b"second"
    assert info.st_ino != before
    assert sorted(path.name for path in root.iterdir()) == ["a.md"]


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temp(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    atomic_write(root / "a.md", b"original")

    def broken_replace(source: str, target: object) -> None:
        raise OSError("disk trouble")

    monkeypatch.setattr(files.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk trouble"):
        atomic_write(root / "a.md", b"new")
    assert (root / "a.md").read_bytes() == b"original"
    assert leftovers(root) == []


def test_sha256_if_present_is_none_for_nothing_and_refuses_what_sha256_file_refuses(root: Path, outside: Path) -> None:
    (root / "pages").mkdir()
    (root / "pages" / "a.md").write_bytes(b"abc")
    assert files.sha256_if_present(root, "pages/a.md") == hashlib.sha256(b"abc").hexdigest()
    assert files.sha256_if_present(root, "pages/none.md") is None
    assert files.sha256_if_present(root, "nowhere/none.md") is None
    (root / "pages" / "link.md").symlink_to(outside / "secret.md")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    for unsafe in ("pages/link.md", "linked/secret.md", "pages"):
        with pytest.raises(UnsafePath):
            files.sha256_if_present(root, unsafe)


def test_sha256_if_present_answers_a_missing_file_from_the_walk_without_opening_it(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "pages").mkdir()
    (root / "pages" / "a.md").write_bytes(b"abc")
    opened: list[str] = []
    real_open = os.open

    def noting(path: object, *args: object, **kwargs: object) -> int:
        opened.append(os.fspath(path))  # type: ignore[arg-type]
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(files.os, "open", noting)
    assert files.sha256_if_present(root, "pages/none.md") is None
    assert files.sha256_if_present(root, "nowhere/none.md") is None
    assert opened == []
    assert files.sha256_if_present(root, "pages/a.md") == hashlib.sha256(b"abc").hexdigest()
    assert opened == [os.fspath(root / "pages" / "a.md")]


def test_a_staged_file_is_named_by_process_and_number_and_never_reuses_a_leftover(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "_temp_numbers", itertools.count(7))
    leftover = root / f".a.md.{os.getpid():x}-7.tmp"  # as a killed process with this pid left it
    leftover.write_bytes(b"a crash's half write")
    staged = files.stage_inside(root, "a.md", b"new bytes")
    try:
        assert Path(staged.temp).name == f".a.md.{os.getpid():x}-8.tmp"
        assert leftover.read_bytes() == b"a crash's half write"
        staged.sync()
        staged.install()
    finally:
        staged.discard()
    assert (root / "a.md").read_bytes() == b"new bytes"
    assert leftovers(root) == [leftover.name]


def test_a_staged_file_has_its_mode_whatever_the_umask(root: Path) -> None:
    previous = os.umask(0o077)
    try:
        info = atomic_write(root / "a.md", b"x", mode=0o644)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(info.st_mode) == 0o644


def test_stage_inside_refuses_a_symlinked_leaf_naming_it(root: Path, outside: Path) -> None:
    (root / "pages").mkdir()
    (root / "pages" / "x.md").symlink_to(outside / "secret.md")
    with pytest.raises(UnsafePath) as caught:
        files.stage_inside(root, "pages/x.md", b"overwrite")
    assert caught.value.details["problem"] == "symlink" and caught.value.details["component"] == "pages/x.md"
    assert (outside / "secret.md").read_bytes() == b"secret"
    assert leftovers(root / "pages") == []


def test_write_inside_creates_missing_directories(root: Path) -> None:
    write_inside(root, "pages/people/dana.md", b"Dana")
    assert (root / "pages" / "people" / "dana.md").read_bytes() == b"Dana"
    write_inside(root, "pages/people/dana.md", b"Dana, again")
    assert read_file(root, "pages/people/dana.md", max_bytes=100)[0] == b"Dana, again"
    assert leftovers(root / "pages" / "people") == []


def test_write_inside_refuses_a_symlinked_directory(root: Path, outside: Path) -> None:
    (root / "pages").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePath):
        write_inside(root, "pages/new.md", b"x")
    assert not (outside / "new.md").exists()


def test_write_inside_refuses_to_replace_a_symlink(root: Path, outside: Path) -> None:
    (root / "x.md").symlink_to(outside / "secret.md")
    with pytest.raises(UnsafePath):
        write_inside(root, "x.md", b"overwrite")
    assert (outside / "secret.md").read_bytes() == b"secret"
    assert (root / "x.md").is_symlink()


def test_write_inside_refuses_to_replace_a_directory(root: Path) -> None:
    (root / "pages").mkdir()
    with pytest.raises(UnsafePath):
        write_inside(root, "pages", b"x")
    assert (root / "pages").is_dir()


def test_write_inside_refuses_unsafe_paths(root: Path) -> None:
    with pytest.raises(UnsafePath):
        write_inside(root, "../escape.md", b"x")
    assert not (root.parent / "escape.md").exists()


def test_ensure_dirs_creates_and_returns_the_directory(root: Path) -> None:
    assert ensure_dirs(root, "a/b/c") == root / "a" / "b" / "c"
    assert (root / "a" / "b" / "c").is_dir()
    assert ensure_dirs(root, "a/b/c") == root / "a" / "b" / "c"  # idempotent


def test_ensure_dirs_refuses_an_existing_file(root: Path) -> None:
    (root / "a").write_bytes(b"file")
    with pytest.raises(UnsafePath):
        ensure_dirs(root, "a")


def test_remove_inside_removes_and_tolerates_missing_files(root: Path) -> None:
    write_inside(root, "pages/x.md", b"x")
    remove_inside(root, "pages/x.md")
    assert not (root / "pages" / "x.md").exists()
    remove_inside(root, "pages/x.md")  # already gone: no error
    assert (root / "pages").is_dir()


def test_remove_inside_refuses_a_path_through_a_symlink(root: Path, outside: Path) -> None:
    (root / "pages").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePath):
        remove_inside(root, "pages/secret.md")
    assert (outside / "secret.md").exists()


# --- the staging folder ---------------------------------------------------------------------


@pytest.fixture
def staging(tmp_path: Path, root: Path) -> files.StagingFolder:
    folder = files.StagingFolder.open(tmp_path / "staging", root)
    assert folder is not None
    return folder


def test_a_write_with_a_staging_folder_makes_its_temp_file_there_and_none_beside(
        root: Path, staging: files.StagingFolder, monkeypatch: pytest.MonkeyPatch) -> None:
    seen_at_sync: list[tuple[list[str], list[str]]] = []
    fsync = os.fsync

    def noting(fd: int) -> None:
        seen_at_sync.append((sorted(os.listdir(root / "pages")), sorted(os.listdir(staging.path))))
        fsync(fd)

    (root / "pages").mkdir()
    monkeypatch.setattr(files.os, "fsync", noting)
    write_inside(root, "pages/a.md", b"first")
    write_inside(root, "pages/a.md", b"second", staging=staging)
    monkeypatch.undo()
    assert seen_at_sync[0][0] and seen_at_sync[0][0][0].startswith(".a.md.")  # without: beside its target
    beside, staged = next((names, temps) for names, temps in seen_at_sync[1:] if temps)
    assert beside == ["a.md"]  # the target only: no temp file beside it
    assert len(staged) == 1 and staged[0].startswith(f"{os.getpid():x}-") and staged[0].endswith(".tmp")
    assert (root / "pages" / "a.md").read_bytes() == b"second"
    assert leftovers(root / "pages") == [] and os.listdir(staging.path) == []


def test_a_refused_or_failed_staged_write_leaves_nothing_in_the_staging_folder(
        root: Path, staging: files.StagingFolder) -> None:
    atomic_write(root / "a.md", b"kept")

    def refuse() -> None:
        raise NotFound("refused")

    with pytest.raises(NotFound):
        atomic_write(root / "a.md", b"new", check=refuse, staging=staging)
    with pytest.raises(RuntimeError):
        with files.AtomicFile(root / "a.md", staging=staging) as handle:
            handle.write(b"half")
            raise RuntimeError("the writer failed")
    assert (root / "a.md").read_bytes() == b"kept"
    assert os.listdir(staging.path) == [] and leftovers(root) == []


def test_a_rename_refused_across_file_systems_installs_through_a_synced_temp_file_beside(
        root: Path, staging: files.StagingFolder, monkeypatch: pytest.MonkeyPatch) -> None:
    replace = os.replace
    renamed: list[str] = []
    synced: list[int] = []
    fsync = os.fsync

    def across(source: str, target: object) -> None:
        renamed.append(os.path.dirname(source))
        if os.path.dirname(source) == os.fspath(staging.path):
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        replace(source, target)

    def noting(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        fsync(fd)

    monkeypatch.setattr(files.os, "replace", across)
    monkeypatch.setattr(files.os, "fsync", noting)
    info = write_inside(root, "pages/a.md", b"moved whole", staging=staging)
    first = list(renamed)
    write_inside(root, "pages/b.md", b"beside from now on", staging=staging)  # no copy for every later write
    monkeypatch.undo()
    assert (root / "pages" / "a.md").read_bytes() == b"moved whole"
    assert first == [os.fspath(staging.path), os.fspath(root / "pages")]
    assert renamed[2:] == [os.fspath(root / "pages")] and (root / "pages" / "b.md").read_bytes() == b"beside from now on"
    assert info.st_ino in synced  # the file renamed into place was synced before the rename
    assert os.listdir(staging.path) == [] and leftovers(root / "pages") == []


def test_leftovers_of_other_processes_are_removed_and_this_ones_kept(staging: files.StagingFolder) -> None:
    other = staging.path / "7ffffffe-3.tmp"
    mine = staging.path / f"{os.getpid():x}-3.tmp"  # a live write of this process (a store opened again)
    someone_elses = staging.path / "notes.txt"
    for path in (other, mine, someone_elses):
        path.write_bytes(b"x")
    assert staging.remove_leftovers() == 1
    assert not other.exists() and mine.exists() and someone_elses.exists()


def test_no_staging_folder_on_another_file_system_or_where_it_cannot_be_made(
        tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_bytes(b"")
    assert files.StagingFolder.open(tmp_path / "a-file", root) is None
    stat_of = os.stat

    def elsewhere(path: object, *args: object, **kwargs: object) -> os.stat_result:
        info = stat_of(path, *args, **kwargs)
        if os.fspath(path) == os.fspath(root):  # the targets' file system is another one
            return os.stat_result((*info[:2], info.st_dev + 1, *info[3:]))
        return info

    monkeypatch.setattr(files.os, "stat", elsewhere)
    assert files.StagingFolder.open(tmp_path / "staging", root) is None
