"""Work a publication does once that it used to repeat: a file's bytes hashed once for the journal, the
install and the catalog row; a partition's folder looked at with one lstat.  The answers stay the same."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from engine.core.errors import StoreUnavailable
from engine.core import files as files_module
from engine.store import publication as publication_module
from engine.store import record_rows as record_rows_module
from engine.store import store as store_module
from engine.store.publication import FileWrite
from tests.helpers import page, private_dir


def test_a_file_writes_digest_is_its_bytes_digest_hashed_once(monkeypatch):
    hashed = []
    digest = publication_module.sha256_bytes
    monkeypatch.setattr(publication_module, "sha256_bytes", lambda data: hashed.append(data) or digest(data))
    write = FileWrite("pages/a.md", "record", b"first")
    assert write.new_sha256 == write.new_sha256 == hashlib.sha256(b"first").hexdigest()
    assert hashed == [b"first"]
    write.data = b"second"  # other bytes: hashed again
    assert write.new_sha256 == hashlib.sha256(b"second").hexdigest()
    assert FileWrite("pages/a.md", "record", b"", removes=True).new_sha256 is None


def test_a_changeable_buffer_is_hashed_every_time():
    buffer = bytearray(b"draft")
    write = FileWrite("pages/a.md", "record", buffer)  # type: ignore[arg-type]
    assert write.new_sha256 == hashlib.sha256(b"draft").hexdigest()
    buffer[:] = b"final"
    assert write.new_sha256 == hashlib.sha256(b"final").hexdigest()


def test_a_page_is_hashed_once_and_catalogued_under_its_files_digest(engine, owner, state_dir, monkeypatch):
    engine.save_page(owner, page("r1", "Dana"))
    hashed: list[bytes] = []
    for module in (publication_module, record_rows_module, files_module):
        digest = module.sha256_bytes
        monkeypatch.setattr(module, "sha256_bytes",
                            lambda data, digest=digest: hashed.append(bytes(data)) or digest(data))
    receipt = engine.save_page(owner, page("r2", "Sam", body="Sam runs the review."))
    path = next(private_dir(state_dir).rglob("sam.md"))
    data = path.read_bytes()
    assert hashed.count(data) == 1
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    row = runtime.call(lambda: runtime.catalog.db.one(
        "SELECT sha256, record_id FROM catalog WHERE path = ?", (str(path.relative_to(private_dir(state_dir))),)))
    assert row["record_id"] == receipt["id"]
    assert row["sha256"] == hashlib.sha256(data).hexdigest()


def test_the_partition_check_asks_one_lstat_of_a_real_folder(engine, owner, state_dir, monkeypatch):
    engine.save_page(owner, page("r1", "Dana"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    folder = os.fspath(private_dir(state_dir))
    asked: list[tuple[str, str]] = []
    for name in ("stat", "lstat"):
        call = getattr(os, name)
        monkeypatch.setattr(os, name, lambda path, *args, name=name, call=call, **kwargs: (
            asked.append((name, os.fspath(path))) if isinstance(path, (str, os.PathLike)) else None)
            or call(path, *args, **kwargs))
    runtime.call(lambda: runtime.store.verify("private"))
    assert [name for name, path in asked if path == folder] == ["lstat"]


def test_a_partition_folder_replaced_by_a_symlink_is_refused(engine, owner, state_dir):
    engine.save_page(owner, page("r1", "Dana"))
    folder = private_dir(state_dir)
    moved = folder.with_name("private-elsewhere")
    folder.rename(moved)
    folder.symlink_to(moved, target_is_directory=True)
    with pytest.raises(StoreUnavailable, match="partition directory is missing"):
        engine.save_page(owner, page("r2", "Sam"))
    assert not any(path.name.startswith("sam") for path in moved.rglob("*.md"))  # nothing written through it


def test_a_missing_partition_folder_is_refused(engine, owner, state_dir):
    engine.save_page(owner, page("r1", "Dana"))
    shutil.rmtree(private_dir(state_dir))
    with pytest.raises(StoreUnavailable, match="partition directory is missing"):
        engine.save_page(owner, page("r2", "Sam"))


@pytest.mark.parametrize("target", ["folder", "file", "dangling", "loop"])
def test_the_real_folder_check_answers_as_pathlib_does(tmp_path, target):
    path = tmp_path / "checked"
    if target == "folder":
        path.mkdir()
    elif target == "file":
        path.write_text("x", encoding="utf-8")
    elif target == "dangling":
        path.symlink_to(tmp_path / "nowhere")
    else:
        path.symlink_to(path)
    for candidate in (path, tmp_path / "absent", path / "below"):
        assert store_module._is_real_directory(candidate) == (candidate.is_dir() and not candidate.is_symlink())
    linked = tmp_path / "linked"
    linked.symlink_to(tmp_path)
    assert store_module._is_real_directory(linked) is False
