"""The catalog's change log: which records changed since a version, and the views kept current from it."""

from __future__ import annotations

import json

import pytest

from engine.access.authority import AgentCaller
from engine.bench.corpus import write_partition
from engine.core.db import Database
from engine.service import Engine
from engine.store import record_rows
from engine.store.catalog_reads import CatalogReads
from engine.store.store import STATE_MIGRATIONS
from tests.helpers import claim, page, private_dir


@pytest.fixture
def db() -> Database:
    database = Database.open(None, create=True, migrations=STATE_MIGRATIONS)
    database.execute("INSERT INTO partition_state (partition, catalog_version) VALUES ('private', 3)")
    yield database
    database.close()


def _insert(db: Database, path: str, record_id: str) -> None:
    db.execute("INSERT INTO catalog (partition, path, record_id, kind, type, title, lifecycle, file_status, "
               "frontmatter) VALUES ('private', ?, ?, 'page', 'note', 'A title', 'active', 'ok', ?)",
               (path, record_id, json.dumps({"id": record_id})))


def _bump(db: Database) -> None:
    db.execute("UPDATE partition_state SET catalog_version = catalog_version + 1 WHERE partition = 'private'")


def test_a_changed_row_is_logged_under_the_version_it_was_made_in(db: Database) -> None:
    reads = CatalogReads(db)
    _insert(db, "pages/a.md", "pg_a")
    _insert(db, "pages/b.md", "pg_b")
    _bump(db)  # version 4
    assert reads.changed_since("private", 3) == ["pg_a", "pg_b"]
    assert reads.changed_since("private", 4) == []
    db.execute("UPDATE catalog SET title = 'Retitled' WHERE path = 'pages/a.md'")
    db.execute("UPDATE catalog SET xref_ok = 0 WHERE path = 'pages/b.md'")
    assert reads.changed_since("private", 4) == ["pg_a", "pg_b"]
    _bump(db)  # version 5
    db.execute("DELETE FROM catalog WHERE path = 'pages/a.md'")
    assert reads.changed_since("private", 5) == ["pg_a"]
    assert reads.changed_since("other", 0) == []


def test_a_file_that_changes_id_logs_both_ids(db: Database) -> None:
    reads = CatalogReads(db)
    _insert(db, "pages/a.md", "pg_old")
    _bump(db)
    db.execute("UPDATE catalog SET record_id = 'pg_new' WHERE path = 'pages/a.md'")
    assert reads.changed_since("private", 4) == ["pg_new", "pg_old"]
    _bump(db)
    db.execute("UPDATE catalog SET record_id = NULL, file_status = 'unreadable' WHERE path = 'pages/a.md'")
    assert reads.changed_since("private", 5) == ["pg_new"]


def test_stat_and_search_index_marks_are_no_change(db: Database) -> None:
    reads = CatalogReads(db)
    _insert(db, "pages/a.md", "pg_a")
    _bump(db)
    db.execute("UPDATE catalog SET indexed_sha = 'x', mtime_ns = 1, ino = 2, file_size = 3 WHERE path = 'pages/a.md'")
    assert reads.changed_since("private", 4) == []


def test_changes_since_a_version_are_found_through_their_index(db: Database) -> None:
    plan = " ".join(row["detail"] for row in db.all(
        "EXPLAIN QUERY PLAN SELECT record_id FROM catalog_changes WHERE partition = ? AND catalog_version >= ? "
        "ORDER BY catalog_version, record_id", ("private", 1)))
    assert "USING COVERING INDEX catalog_changes_version" in plan, plan


def test_publications_and_outside_edits_log_the_records_they_touch(engine: Engine, owner: AgentCaller) -> None:
    atlas = engine.save_page(owner, page("atlas", "Atlas", type_="project"))["id"]
    dana = engine.save_page(owner, page("dana", "Dana"))["id"]
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    catalog = runtime.catalog
    version = runtime.call(lambda: catalog.version("private")[0])
    [link] = [item["id"] for item in engine.remember(owner, {"requestId": "link", "items": [
        {"relation": "works_on", "from": dana, "to": atlas, "excerpt": "Dana works on Atlas"}]})["items"]]
    assert runtime.call(lambda: catalog.changed_since("private", version)) == [link]
    version = runtime.call(lambda: catalog.version("private")[0])
    next(private_dir(engine.state).rglob("atlas.md")).unlink()
    engine.lookup(owner, "Dana")  # the next operation catalogs the deletion
    # The relationship lost an end: its reference check changed its row too.
    assert sorted(runtime.call(lambda: catalog.changed_since("private", version))) == sorted([atlas, link])


def test_a_kept_view_is_built_once_then_given_the_changed_ids(engine: Engine, owner: AgentCaller) -> None:
    engine.save_page(owner, page("seed", "Seed"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    calls = []

    def build():
        calls.append("build")
        return ["view"]

    def update(view, changed):
        calls.append(changed)
        return view + changed

    keep = lambda: runtime.call(lambda: runtime.catalog.maintained("private", "test", build, update))  # noqa: E731
    assert keep() == ["view"] and keep() == ["view"] and calls == ["build"]  # unchanged: neither again
    [fact] = [item["id"] for item in engine.remember(owner, {"requestId": "r", "items": [claim("A fact", "fact")]})[
        "items"]]
    assert keep() == ["view", fact] and calls == ["build", [fact]]

    def failing(view, changed):
        raise RuntimeError("the update failed")

    engine.save_page(owner, page("more", "More"))
    with pytest.raises(RuntimeError):
        runtime.call(lambda: runtime.catalog.maintained("private", "test", build, failing))
    assert keep() == ["view"] and calls[-1] == "build"  # the half-updated view was dropped


def test_the_insert_trigger_leaves_a_partition_a_sync_logs_itself_to_it(db: Database) -> None:
    reads = CatalogReads(db)
    db.execute("INSERT INTO catalog_changes_deferred (partition) VALUES ('private')")
    _insert(db, "pages/a.md", "pg_a")
    db.execute("INSERT INTO catalog (partition, path, record_id, file_status) VALUES ('other', 'b.md', 'pg_b', 'ok')")
    assert reads.changed_since("private", 0) == [] and reads.changed_since("other", 0) == ["pg_b"]
    db.execute("UPDATE catalog SET title = 'Retitled' WHERE path = 'pages/a.md'")  # updates are logged as before
    assert reads.changed_since("private", 0) == ["pg_a"]
    db.execute("DELETE FROM catalog_changes_deferred")
    _insert(db, "pages/c.md", "pg_c")
    assert reads.changed_since("private", 0) == ["pg_a", "pg_c"]


def test_a_sync_that_fails_half_way_leaves_no_mark_and_the_next_logs_every_record(
        engine: Engine, owner: AgentCaller, monkeypatch: pytest.MonkeyPatch) -> None:
    engine.save_page(owner, page("seed", "Seed"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    catalog = runtime.catalog
    version = runtime.call(lambda: catalog.version("private")[0])
    write_partition(private_dir(engine.state), 9, 0)
    monkeypatch.setattr(record_rows, "CHUNK_FILES", 4)
    written = catalog._write_catalogued
    calls = []

    def fail_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the sync stopped half-way")
        return written(*args, **kwargs)

    monkeypatch.setattr(catalog, "_write_catalogued", fail_second)
    with pytest.raises(RuntimeError, match="half-way"):
        runtime.call(lambda: catalog.sync("private"))
    monkeypatch.setattr(catalog, "_write_catalogued", written)
    db = runtime.store.db
    assert runtime.call(lambda: db.all("SELECT * FROM catalog_changes_deferred")) == []
    assert runtime.call(lambda: catalog.changed_since("private", version)) == []
    runtime.call(lambda: catalog.sync("private"))
    ids = runtime.call(lambda: [row[0] for row in db.tuples(
        "SELECT record_id FROM catalog WHERE partition = 'private' AND path LIKE 'pages/notes/%'")])
    assert len(ids) == 9
    assert runtime.call(lambda: catalog.changed_since("private", version)) == sorted(ids)
    assert runtime.call(lambda: db.all("SELECT * FROM catalog_changes_deferred")) == []


def test_a_kept_view_is_shared_by_the_reads_that_share_its_views(db: Database) -> None:
    """The lane's catalog and the snapshots read beside it share their kept views: a view one read built, the
    next brings up to date with the records changed since; a read of an older catalog than the view's gets it
    as it is, never taken back."""
    lane = CatalogReads(db)
    snapshot = CatalogReads(db, lane.kept)
    calls = []

    def build():
        calls.append("build")
        return []

    def update(view, changed):
        calls.append(changed)
        return view + changed

    assert lane.maintained("private", "test", build, update) == [] and calls == ["build"]
    _insert(db, "pages/a.md", "pg_a")
    _bump(db)
    assert snapshot.maintained("private", "test", build, update) == ["pg_a"] and calls == ["build", ["pg_a"]]
    assert lane.maintained("private", "test", build, update) == ["pg_a"] and len(calls) == 2  # up to date
    assert CatalogReads(db).maintained("private", "test", build, update) == [] and calls[-1] == "build"  # its own

    lane.kept.views[("private", "test")] = (99, ["as of a later catalog"])
    assert snapshot.maintained("private", "test", build, update) == ["as of a later catalog"] and len(calls) == 3
    assert lane.kept.views[("private", "test")][0] == 99
