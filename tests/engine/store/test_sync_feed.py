"""A large sync feeding its new records to the search index as it writes them (engine/index/tantivy_index.py
``SyncFeed``): the index holds them when the sync ends, and a sync stopped anywhere (a SIGKILL in the feed,
between the catalog's commit and tantivy's, before the mark is cleared) leaves no document the catalog does not
hold current and none missing."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.index.tantivy_index import SyncFeed
from engine.runtime import StoreRuntime
from engine.service import Engine
from engine.store import catalog as catalog_module
from engine.store.index_ledger import IndexLedger
from tests.engine.store.test_index_ledger import (assert_found_as_they_are_now, delete_one_edit_another, drop_notes,
                                                 found, index_matches_catalog, runtime_of, seeded_and_closed)
from tests.helpers import catch_up_held, page, private_dir

ROOT = Path(__file__).resolve().parents[3]


def held_by_index(runtime) -> tuple[bool, int, int, int]:
    """(marked, backlog, documents committed, current records), read on the lane without catching up."""
    def read() -> tuple[bool, int, int, int]:
        ledger = IndexLedger(runtime.store.db)
        return (ledger.unlisted_left("private"), ledger.backlog_count("private"),
                runtime.indexes.get("private").searcher().num_docs, runtime.catalog.current_count("private"))

    return runtime.call(read)


def test_a_large_sync_leaves_its_new_current_records_in_the_index(engine, owner, state_dir, monkeypatch):
    engine.save_page(owner, page("p1", "Seed", type_="note"))
    runtime = runtime_of(engine)
    runtime.call(lambda: runtime.indexes.catch_up("private"))
    monkeypatch.setattr(StoreRuntime, "_catch_up_indexes", lambda self, partitions: None)
    monkeypatch.setattr(catalog_module, "FEED_MIN", 3)
    notes = drop_notes(private_dir(state_dir), 4)
    twin = notes[0].with_name(f"twin-{notes[0].name}")  # the same id twice: neither file is current
    twin.write_bytes(notes[0].read_bytes())
    marked: list[bool] = []
    real_add = SyncFeed.add

    def watched(self, entries):
        marked.append(IndexLedger(runtime.store.db).unlisted_left("private"))  # the sync's own transaction
        real_add(self, entries)

    monkeypatch.setattr(SyncFeed, "add", watched)
    runtime.call(lambda: runtime.catalog.sync("private"))
    assert marked == [True]
    # No catch-up ran: the three current records are committed, the duplicates were dropped before the commit.
    assert held_by_index(runtime) == (False, 0, 4, 4)
    assert found(engine, owner, "zephyrine") == []
    assert found(engine, owner, "brackwater") == ["Brackwater harbour note"]
    assert index_matches_catalog(engine) == (4, 4)
    twin.unlink()  # the id is unique again: the record reaches the index the usual way
    assert found(engine, owner, "zephyrine") == ["Zephyrine harbour note"]
    assert index_matches_catalog(engine) == (5, 5)


def test_a_sync_beside_a_held_catch_up_does_not_feed_and_does_not_wait(engine, owner, state_dir, monkeypatch):
    monkeypatch.setattr(StoreRuntime, "_catch_up_indexes", lambda self, partitions: None)
    engine.save_page(owner, page("p1", "Seed", type_="note"))  # a backlog for the held catch-up to commit
    runtime = runtime_of(engine)
    monkeypatch.setattr(catalog_module, "FEED_MIN", 3)
    opened: list[object] = []
    real_open = runtime.indexes.open_feed
    runtime.catalog.feeds = lambda partition: opened.append(real_open(partition)) or opened[-1]
    with catch_up_held(runtime, monkeypatch):
        drop_notes(private_dir(state_dir), 4)
        runtime.call(lambda: runtime.catalog.sync("private"))  # the catch-up holds the index: no feed
    assert opened == [None]
    assert index_matches_catalog(engine) == (5, 5)
    assert found(engine, owner, "sollenmark") == ["Sollenmark harbour note"]


def test_a_search_does_not_answer_beside_a_marked_partition(engine, owner, monkeypatch):
    """Between the sync's commit and tantivy's, rows say indexed what is not committed: no overlay then."""
    monkeypatch.setattr(StoreRuntime, "_catch_up_indexes", lambda self, partitions: None)
    engine.save_page(owner, page("p1", "Seed", type_="note"))
    runtime = runtime_of(engine)
    runtime.call(lambda: runtime.indexes.catch_up("private"))
    engine.save_page(owner, page("p2", "Second", type_="note"))  # a small backlog: answered with an overlay

    def overlay_at_current_version():
        version, _ = runtime.catalog.version("private")
        return runtime.indexes.for_search("private", version, runtime.store.db)[2]

    assert runtime.call(overlay_at_current_version) is not None
    runtime.call(lambda: runtime.store.db.execute(
        "UPDATE partition_state SET index_unlisted = 1 WHERE partition = 'private'"))
    assert runtime.call(overlay_at_current_version) is None  # caught up instead (a rebuild, for the mark)
    assert index_matches_catalog(engine) == (2, 2)


_KILLED_SYNC = """
import os, signal, sys
from pathlib import Path
from engine.index.tantivy_index import SyncFeed
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.store import catalog, record_rows
from engine.store.index_ledger import IndexLedger

catalog.FEED_MIN = 3
record_rows.CHUNK_FILES = 1  # a chunk per file: the feed is killed half-way

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

where = sys.argv[2]
if where == "feeding":
    real_add, fed = SyncFeed.add, []

    def add(self, entries):
        real_add(self, entries)
        fed.append(entries)
        if len(fed) == 2:
            die()

    SyncFeed.add = add
elif where == "catalog committed":
    SyncFeed.commit = die
else:
    IndexLedger.clear_unlisted = die
with Engine(StateDir(Path(sys.argv[1])), watch=False) as engine:
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    runtime.call(lambda: runtime.catalog.sync("private"))
"""


@pytest.mark.parametrize("where", ["feeding", "catalog committed", "index committed"])
def test_a_kill_during_a_feeding_sync_leaves_the_index_equal_to_the_catalog(state_dir, where):
    owner = seeded_and_closed(state_dir)
    gone, edited, *_ = drop_notes(private_dir(state_dir), 4)
    killed = subprocess.run([sys.executable, "-c", _KILLED_SYNC, str(state_dir.root), where], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with Engine(state_dir, watch=False) as engine:
        runtime = runtime_of(engine)
        committed = runtime.call(lambda: runtime.catalog.current_count("private"))
        assert committed == (1 if where == "feeding" else 5)  # the sync rolled back whole, or committed whole
        assert IndexLedger(runtime.store.db).unlisted_left("private") == (where != "feeding")
    delete_one_edit_another(gone, edited)
    with Engine(state_dir, watch=False) as engine:
        assert_found_as_they_are_now(engine, owner)
        assert found(engine, owner, "brackwater") == ["Brackwater harbour note"]
        assert found(engine, owner, "sollenmark") == ["Sollenmark harbour note"]
        assert index_matches_catalog(engine) == (4, 4)
