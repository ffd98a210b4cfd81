"""A change re-checks only the records it can affect, and that gives what checking everything gives."""

from __future__ import annotations

from typing import Any

from watchdog.events import DirModifiedEvent, FileCreatedEvent

from engine.store.watcher import _Handler
from tests.engine.store.test_catalog import envelope, place, remembered_source, render, saved_page
from tests.helpers import claim, private_dir


def _checks(runtime: Any) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in runtime.store.db.all(
        "SELECT path, file_status, duplicate, xref_ok, xref_findings FROM catalog WHERE partition = 'private' "
        "ORDER BY path")]


def _agree_with_a_full_check(engine, owner) -> list[tuple[Any, ...]]:
    """The checks as the last operation left them, asserted equal to those of a check of everything."""
    engine.lookup(owner, "anything")  # an operation: the catalog catches up with the disk first
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    incremental = runtime.call(lambda: _checks(runtime))
    runtime.call(lambda: runtime.catalog.refresh_cross_checks("private", [], full=True))
    assert runtime.call(lambda: _checks(runtime)) == incremental
    return incremental


def _status(checks: list[tuple[Any, ...]], path_end: str) -> tuple[int, int]:
    row = next(row for row in checks if row[0].endswith(path_end))
    assert row[1] == "ok", row
    return row[2], row[3]  # duplicate, xref_ok


def test_incremental_checks_agree_with_a_full_check_through_every_kind_of_change(engine, owner):
    dana, dana_path = saved_page(engine, owner, "Dana Whitaker", "person")
    root = private_dir(engine.state)
    harbour, _ = saved_page(engine, owner, "Harbour Project", "project")
    engine.remember(owner, {"requestId": "links", "items": [
        claim("Dana runs the harbour project.", "Dana runs it", subject=dana),
        {"relation": "works_on", "from": dana, "to": harbour, "excerpt": "Dana works on the harbour project"},
    ]})
    checks = _agree_with_a_full_check(engine, owner)
    assert all(row[3] == 1 for row in checks)

    # A relationship written by hand to a page that is not there yet: dangling until the page appears.
    place(root, "relationships/by-hand.md", render(envelope(
        "rl_01JBY5K3M8Q2T7V9WXYZ0ABCDE", "relationship", "Dana works on the lighthouse", relation="works_on",
        assertion_origin="user", evidence=[{"source": remembered_source(engine, owner)}],
        **{"from": dana, "to": "pg_01JBY5K3M8Q2T7V9WXYZ0LHTSE"}), body=""))
    assert _status(_agree_with_a_full_check(engine, owner), "by-hand.md") == (0, 0)
    place(root, "pages/projects/lighthouse.md", render(envelope(
        "pg_01JBY5K3M8Q2T7V9WXYZ0LHTSE", "page", "Lighthouse", type="project")))
    assert _status(_agree_with_a_full_check(engine, owner), "by-hand.md") == (0, 1)

    # A second file with the lighthouse's id: both are duplicates, and the relationship dangles again.
    place(root, "pages/projects/lighthouse-copy.md", render(envelope(
        "pg_01JBY5K3M8Q2T7V9WXYZ0LHTSE", "page", "Lighthouse copy", type="project")))
    checks = _agree_with_a_full_check(engine, owner)
    assert _status(checks, "lighthouse.md") == (1, 1) and _status(checks, "by-hand.md") == (0, 0)
    (root / "pages/projects/lighthouse-copy.md").unlink()
    checks = _agree_with_a_full_check(engine, owner)
    assert _status(checks, "lighthouse.md") == (0, 1) and _status(checks, "by-hand.md") == (0, 1)

    # The page retyped by hand: a person cannot be worked on.
    place(root, "pages/projects/lighthouse.md", render(envelope(
        "pg_01JBY5K3M8Q2T7V9WXYZ0LHTSE", "page", "Lighthouse", type="person", revision=2)))
    assert _status(_agree_with_a_full_check(engine, owner), "by-hand.md") == (0, 0)

    # Dana's page deleted: everything that names her is checked again.
    dana_path.unlink()
    checks = _agree_with_a_full_check(engine, owner)
    assert [row for row in checks if row[3] == 0 and "relationships/" in row[0]]


def test_a_partition_upgraded_without_recorded_references_is_checked_whole_once(engine, owner):
    dana, _ = saved_page(engine, owner, "Dana Whitaker", "person")
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    runtime.call(lambda: (runtime.store.db.execute("DELETE FROM refs"),
                          runtime.store.db.execute("UPDATE partition_state SET refs_ready = 0")))
    engine.remember(owner, {"requestId": "about-dana", "items": [claim("Dana likes tea.", "tea", subject=dana)]})
    targets = runtime.call(lambda: {row[0] for row in runtime.store.db.all("SELECT target FROM refs")})
    assert dana in targets  # the claim written before the upgrade was recorded by the whole check


def test_inotify_parent_directory_events_do_not_rescan_the_partition(tmp_path):
    marked: list[tuple[str, bool]] = []
    handler = _Handler(tmp_path, lambda path, is_directory=False: marked.append((path, is_directory)),
                       entries_reported=True)
    handler.on_any_event(FileCreatedEvent(str(tmp_path / "private/pages/a.md")))
    handler.on_any_event(DirModifiedEvent(str(tmp_path / "private/pages")))
    assert marked == [("private/pages/a.md", False)]
    other = _Handler(tmp_path, lambda path, is_directory=False: marked.append((path, is_directory)),
                     entries_reported=False)  # a platform that may report only the directory
    other.on_any_event(DirModifiedEvent(str(tmp_path / "private/pages")))
    assert marked[-1] == ("private/pages", True)


def test_the_reference_checks_read_only_the_keys_a_check_takes_out_of_the_frontmatter(engine, owner):
    """A check reads only REFERENCE_KEYS from each row; a key read beyond them would be checked as absent."""
    from engine.store.catalog import REFERENCE_KEYS, reference_findings, reference_targets
    from engine.vault.record_view import view_of

    engine.save_page(owner, {"requestId": "seed", "type": "note", "title": "Seed", "body": "."})
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    ontology = runtime.call(lambda: runtime.store.ontology("private"))
    everything = {"id": "x", "format": "f", "title": "t", "kind": "k", "type": "person", "claim_kind": "fact",
                  "relation": "works_on", "from": "pg_a", "to": "pg_b", "subject": "pg_a", "replaces": "cl_x",
                  "evidence": [{"source": "src_a", "lines": [1, 2]}, "odd"], "tags": ["a"], "aliases": ["b"],
                  "fields": {"employer": "pg_b", "email": "a@b.c", "related": ["pg_a", 3]}, "recall": {}}
    # The checks read the record's view: one made of REFERENCE_KEYS alone answers them as the whole one does.
    whole = view_of(everything)
    taken = view_of({key: value for key, value in everything.items() if key in REFERENCE_KEYS})
    for kind, record_type in (("relationship", "works_on"), ("claim", "fact"), ("page", "person"), ("page", "note")):
        assert reference_targets(taken) == reference_targets(whole)
        assert reference_findings(taken, kind, record_type, {"pg_a": "person"}, {"src_a"}, ontology, "p.md") == \
            reference_findings(whole, kind, record_type, {"pg_a": "person"}, {"src_a"}, ontology, "p.md")


def test_the_records_naming_a_changed_id_are_found_through_the_targets_index(engine, owner, state_dir):
    """Which records name a changed id is looked up by target, not found by walking every reference of the
    partition (what a DISTINCT made SQLite do: a cost growing with the vault at every write)."""
    dana, _ = saved_page(engine, owner, "Dana Whitaker", "person")
    engine.remember(owner, {"requestId": "about-dana", "items": [claim("Dana likes tea.", "tea", subject=dana)]})
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    ran: list[str] = []
    connection = runtime.store.db.connection
    found = runtime.call(lambda: (connection.set_trace_callback(ran.append),
                                  runtime.catalog._naming("private", {dana}),
                                  connection.set_trace_callback(None))[1])
    assert len(found) == 1 and next(iter(found)).startswith("claims/")
    [lookup] = [sql for sql in ran if "FROM refs" in sql]
    plan = " ".join(row[3] for row in runtime.call(lambda: runtime.store.db.tuples("EXPLAIN QUERY PLAN " + lookup)))
    assert "USING INDEX refs_target (partition=? AND target=?)" in plan, plan
