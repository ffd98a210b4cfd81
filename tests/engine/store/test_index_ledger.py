"""The search index's ledger: what a catch-up writes ahead, and that a record never indexed, added without a
removal written ahead, can never be left in the index as a stale document (engine/store/index_ledger.py)."""

from __future__ import annotations

import dataclasses
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.access.authority import AgentCaller
from engine.bench.corpus import generate_records, render_record
from engine.core.db import Database
from engine.index import tantivy_index
from engine.index.tantivy_index import PartitionIndex
from engine.runtime import StoreRuntime
from engine.service import Engine
from engine.store import index_ledger
from engine.store.index_ledger import IndexLedger
from engine.store.store import STATE_MIGRATIONS
from tests.helpers import catch_up_held, page, private_dir

ROOT = Path(__file__).resolve().parents[3]
WORDS = ("zephyrine", "quillmoor", "brackwater", "sollenmark", "tarnhollow")


def drop_notes(partition: Path, count: int, seed: int = 7) -> list[Path]:
    """``count`` note pages written into the partition's folder outside the engine, titled by ``WORDS``."""
    written = []
    for record, word in zip(generate_records(count, seed=seed), WORDS[:count]):
        record = dataclasses.replace(record, title=f"{word.capitalize()} harbour note", aliases=(),
                                     body=f"The {word} quay.")
        path = partition / record.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(render_record(record))
        written.append(path)
    return written


def delete_one_edit_another(gone: Path, edited: Path) -> None:
    """The first dropped note deleted outside the engine, the second's "quay" edited to "slipway"."""
    gone.unlink()
    edited.write_text(edited.read_text(encoding="utf-8").replace("quay", "slipway"), encoding="utf-8")


def assert_found_as_they_are_now(engine, owner) -> None:
    """Search finds neither the deleted note nor the edited one's old text, and the edited one by its new text."""
    assert found(engine, owner, "zephyrine") == []
    assert found(engine, owner, "slipway") == ["Quillmoor harbour note"]
    assert "Quillmoor harbour note" not in found(engine, owner, "quay")


def runtime_of(engine):
    return engine.runtime(engine.registry.own_store_of("main"))


def found(engine, owner, word: str) -> list[str]:
    return [hit["title"] for hit in engine.search(owner, {"query": word})["hits"]]


def index_matches_catalog(engine) -> tuple[int, int]:
    runtime = runtime_of(engine)

    def counts() -> tuple[int, int]:
        runtime.indexes.catch_up("private")
        return runtime.catalog.current_count("private"), runtime.indexes.get("private").searcher().num_docs

    return runtime.call(counts)


def test_the_migration_adds_an_unset_mark_and_keeps_the_partitions_state(tmp_path):
    path = tmp_path / "state.sqlite"
    before = [migration for migration in STATE_MIGRATIONS if migration[0] < "0009"]
    old = Database.open(path, create=True, migrations=before)
    old.execute("INSERT INTO partition_state (partition, catalog_version, index_version, refs_ready) "
                "VALUES ('private', 7, 6, 1)")
    old.close()
    migrated = Database.open(path, create=False, migrations=STATE_MIGRATIONS)
    assert migrated.tuples("SELECT partition, catalog_version, index_version, refs_ready, index_unlisted "
                           "FROM partition_state") == [("private", 7, 6, 1, 0)]
    assert not IndexLedger(migrated).unlisted_left("private")
    migrated.close()


def test_many_new_records_are_added_without_removals_and_the_mark_is_cleared(engine, owner, state_dir,
                                                                             monkeypatch):
    engine.save_page(owner, page("p1", "Seed", type_="note"))  # the index holds a document already
    runtime = runtime_of(engine)
    runtime.call(lambda: runtime.indexes.catch_up("private"))
    monkeypatch.setattr(index_ledger, "UNLISTED_MIN", 3)
    drop_notes(private_dir(state_dir), 4)
    seen: list[tuple[list[str], bool, int]] = []
    real_apply = PartitionIndex.apply

    def watched(self, removals, additions, **options):
        ledger = IndexLedger(runtime.store.db)
        waiting = runtime.store.db.one("SELECT COUNT(*) AS n FROM index_removals")["n"]
        seen.append((list(removals), ledger.unlisted_left("private"), waiting))
        return real_apply(self, removals, additions, **options)

    monkeypatch.setattr(PartitionIndex, "apply", watched)
    runtime.call(lambda: (runtime.catalog.sync("private"), runtime.indexes.catch_up("private")))
    assert seen == [([], True, 0)]  # four new records: no removal written ahead, the partition marked
    assert not runtime.call(lambda: IndexLedger(runtime.store.db).unlisted_left("private"))
    assert index_matches_catalog(engine) == (5, 5)
    monkeypatch.setattr(index_ledger, "UNLISTED_MIN", 100)  # a few new records are written ahead as before
    drop_notes(private_dir(state_dir) / "more", 2, seed=8)
    seen.clear()
    runtime.call(lambda: (runtime.catalog.sync("private"), runtime.indexes.catch_up("private")))
    assert [(len(removals), left) for removals, left, _ in seen] == [(2, False)]
    assert index_matches_catalog(engine) == (7, 7)


class _CrashAfterCommit(Exception):
    """The engine dying right after tantivy's commit, before the catalog records what was indexed."""


def _crash_after_committing_four_new_notes(engine, owner, state_dir, monkeypatch):
    """A seed page indexed, then four notes dropped in and a catch-up (unlisted: the threshold lowered to 3) that
    dies right after tantivy's commit; the runtime and the notes dropped."""
    engine.save_page(owner, page("p1", "Seed", type_="note"))
    runtime = runtime_of(engine)
    runtime.call(lambda: runtime.indexes.catch_up("private"))
    monkeypatch.setattr(index_ledger, "UNLISTED_MIN", 3)
    notes = drop_notes(private_dir(state_dir), 4)
    real_apply = PartitionIndex.apply

    def commit_then_crash(self, removals, additions, **options):
        real_apply(self, removals, additions, **options)
        raise _CrashAfterCommit()

    monkeypatch.setattr(PartitionIndex, "apply", commit_then_crash)
    with pytest.raises(_CrashAfterCommit):
        runtime.call(lambda: (runtime.catalog.sync("private"), runtime.indexes.catch_up("private")))
    monkeypatch.setattr(PartitionIndex, "apply", real_apply)
    return runtime, notes


def test_a_crash_after_committing_unlisted_records_rebuilds_the_index(engine, owner, state_dir, monkeypatch):
    runtime, (gone, edited, *_) = _crash_after_committing_four_new_notes(engine, owner, state_dir, monkeypatch)
    assert runtime.call(lambda: runtime.indexes.get("private").searcher().num_docs) == 5  # committed, unrecorded
    # Before any catch-up records them, one record is deleted and one edited: the catalog forgets the first
    # with no removal (it was never recorded as indexed) and keeps the second as backlog.
    delete_one_edit_another(gone, edited)
    runtime.call(lambda: runtime.catalog.sync("private"))
    assert index_matches_catalog(engine) == (4, 4)
    assert_found_as_they_are_now(engine, owner)
    assert found(engine, owner, "quay")  # the other notes still hold it


def test_a_rebuild_forgets_what_the_old_index_held_when_its_folder_is_left(engine, owner, state_dir,
                                                                           monkeypatch):
    """The old index's reader, seeing its meta.json removed, may make a lock file again in the folder a rebuild
    has just removed: the folder stays, and the new, empty index must still be caught up with every record."""
    runtime, _ = _crash_after_committing_four_new_notes(engine, owner, state_dir, monkeypatch)
    index_folder = runtime.indexes.directory("private")
    real_rmtree = shutil.rmtree

    def leaving_a_lock_file(path, *args, **kwargs):
        real_rmtree(path, *args, **kwargs)
        if Path(path) == index_folder:
            index_folder.mkdir()
            (index_folder / ".tantivy-meta.lock").touch()

    monkeypatch.setattr(tantivy_index.shutil, "rmtree", leaving_a_lock_file)
    assert index_matches_catalog(engine) == (5, 5)  # the seed page too, which the old index held
    monkeypatch.setattr(tantivy_index.shutil, "rmtree", real_rmtree)
    assert found(engine, owner, "seed") == ["Seed"]


_KILLED_CATCH_UP = """
import os, signal, sys
from pathlib import Path
from engine.index import tantivy_index
from engine.index.tantivy_index import PartitionIndex
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.store import index_ledger

index_ledger.UNLISTED_MIN = 3
real_apply = PartitionIndex.apply

def commit_then_die(self, removals, additions, **options):
    real_apply(self, removals, additions, **options)
    os.kill(os.getpid(), signal.SIGKILL)

PartitionIndex.apply = commit_then_die
with Engine(StateDir(Path(sys.argv[1])), watch=False) as engine:
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    runtime.call(lambda: (runtime.catalog.sync("private"), runtime.indexes.catch_up("private")))
"""


def seeded_and_closed(state_dir):
    """An owner's seed page saved and indexed in a store the engine is then closed on; the owner's caller."""
    with Engine(state_dir, watch=False) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("p1", "Seed", type_="note"))
        engine.search(owner, {"query": "seed"})
    return owner


def test_a_kill_after_committing_unlisted_records_leaves_no_stale_document(state_dir):
    owner = seeded_and_closed(state_dir)
    gone, edited, *_ = drop_notes(private_dir(state_dir), 4)
    killed = subprocess.run([sys.executable, "-c", _KILLED_CATCH_UP, str(state_dir.root)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    delete_one_edit_another(gone, edited)
    with Engine(state_dir, watch=False) as engine:
        assert_found_as_they_are_now(engine, owner)
        assert index_matches_catalog(engine) == (4, 4)


def test_unlisted_records_deleted_or_edited_while_a_catch_up_commits_leave_the_index(engine, owner, state_dir,
                                                                                     monkeypatch):
    engine.save_page(owner, page("p1", "Seed", type_="note"))
    runtime = runtime_of(engine)
    runtime.call(lambda: runtime.indexes.catch_up("private"))
    monkeypatch.setattr(index_ledger, "UNLISTED_MIN", 3)
    gone, edited, *_ = drop_notes(private_dir(state_dir), 4)
    runtime.call(lambda: runtime.catalog.sync("private"))
    with catch_up_held(runtime, monkeypatch):
        delete_one_edit_another(gone, edited)
        runtime.call(lambda: runtime.catalog.sync("private"))
    assert index_matches_catalog(engine) == (4, 4)
    assert_found_as_they_are_now(engine, owner)


def test_a_streamed_catch_up_writes_ahead_again_when_the_catalog_changed_since(engine, owner, state_dir,
                                                                              monkeypatch):
    """An indexed record edited between the write-ahead and the streamed read is in the backlog without a
    removal: the catch-up writes ahead again instead of adding a second document for its path."""
    engine.save_page(owner, page("p1", "Harbour", type_="place", body="Fishing boats."))
    runtime = runtime_of(engine)
    runtime.call(lambda: runtime.indexes.catch_up("private"))
    monkeypatch.setattr(StoreRuntime, "_catch_up_indexes", lambda self, partitions: None)
    monkeypatch.setattr(tantivy_index, "GATHER_MAX", 0)  # every backlog is streamed
    engine.save_page(owner, page("p2", "Lighthouse", type_="place"))
    [harbour] = private_dir(state_dir).glob("pages/*/harbour.md")
    relpath = harbour.relative_to(private_dir(state_dir)).as_posix()
    removals = IndexLedger.removals
    calls: list[int] = []

    def edited_before_the_stream(self, partition):
        calls.append(len(calls))
        if len(calls) == 2:  # the streamed transaction's check: as if the lane had just committed an edit
            harbour.write_text(harbour.read_text(encoding="utf-8").replace("Fishing", "Ferry"), encoding="utf-8")
            runtime.catalog.sync("private", [relpath])
        return removals(self, partition)

    monkeypatch.setattr(IndexLedger, "removals", edited_before_the_stream)
    runtime.indexes.catch_up("private")
    assert len(calls) == 4  # write-ahead, check (changed), write-ahead again, check
    monkeypatch.setattr(IndexLedger, "removals", removals)
    assert index_matches_catalog(engine) == (2, 2)
    assert found(engine, owner, "fishing") == []
    assert found(engine, owner, "ferry") == ["Harbour"]
