"""The catalog's typed reads: one current-record rule, frozen rows, and one owner of the catalog's tables."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import json
import re

import pytest

from engine.access.authority import AgentCaller
from engine.core.db import Database
from engine.service import Engine
from engine.store.catalog_reads import CURRENT, CatalogReads, RecordRow
from engine.store.store import STATE_MIGRATIONS
from tests.helpers import page
from tests.test_engine_layers import ENGINE

FILE_STATUSES = ("ok", "invalid", "withheld", "unreadable")
LIFECYCLES = ("active", "superseded", "withdrawn")
OWNED_TABLES = ("catalog", "revisions", "names", "mentions", "sources", "events", "partition_state", "index_removals",
                "catalog_changes", "publications", "publication_files", "outbox")
_SQL_ON_OWNED = re.compile(rf"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+(?:{'|'.join(OWNED_TABLES)})\b")  # SQL keywords are written in capitals


def _expected_status(file_status: str, duplicate: int, xref_ok: int, fixture: int, lifecycle: str) -> str:
    """The status a reader is shown, as docs/protocol.md lists the reasons, in the order they are given."""
    if file_status != "ok":
        return file_status
    if duplicate:
        return "duplicate"
    if not xref_ok:
        return "invalid"
    if fixture:
        return "fixture"
    if lifecycle != "active":
        return lifecycle
    return "current"


@pytest.fixture
def db() -> Database:
    database = Database.open(None, create=True, migrations=STATE_MIGRATIONS)
    yield database
    database.close()


def _insert(db: Database, path: str, record_id: str, *, file_status: str = "ok", duplicate: int = 0,
            xref_ok: int = 1, fixture: int = 0, lifecycle: str = "active", kind: str = "page",
            record_type: str = "note", updated_at: str = "2026-01-01T00:00:00Z",
            frontmatter: dict | None = None, revision: int = 1, sha256: str = "0" * 64) -> None:
    db.execute(
        "INSERT INTO catalog (partition, path, record_id, revision, kind, type, title, lifecycle, file_status, "
        "fixture, duplicate, xref_ok, sha256, updated_at, frontmatter) "
        "VALUES ('private', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (path, record_id, revision, kind, record_type, f"Title of {record_id}", lifecycle, file_status, fixture,
         duplicate, xref_ok, sha256, updated_at, json.dumps(frontmatter or {"id": record_id})))


def test_the_query_rule_and_the_row_status_agree_on_every_combination(db: Database) -> None:
    combinations = list(itertools.product(FILE_STATUSES, (0, 1), (0, 1), (0, 1), LIFECYCLES))
    for number, (file_status, duplicate, xref_ok, fixture, lifecycle) in enumerate(combinations):
        _insert(db, f"pages/{number}.md", f"pg_{number:04d}", file_status=file_status, duplicate=duplicate,
                xref_ok=xref_ok, fixture=fixture, lifecycle=lifecycle)
    reads = CatalogReads(db)
    rows = {row.path: row for number in range(len(combinations))
            for row in [reads.row_at("private", f"pages/{number}.md")]}
    for number, combination in enumerate(combinations):
        row = rows[f"pages/{number}.md"]
        assert row.status == _expected_status(*combination), combination
        assert row.is_current == (row.status == "current")
    current = {row.path for row in reads.current("private")}
    assert current == {path for path, row in rows.items() if row.status == "current"}
    assert len(current) == 1
    assert reads.current_count("private") == 1
    in_sql = {row["path"] for row in db.all(f"SELECT c.path FROM catalog c WHERE {CURRENT}")}
    assert in_sql == current


def test_retired_rows_are_current_in_every_way_but_their_lifecycle(db: Database) -> None:
    combinations = list(itertools.product(FILE_STATUSES, (0, 1), (0, 1), (0, 1), LIFECYCLES))
    for number, (file_status, duplicate, xref_ok, fixture, lifecycle) in enumerate(combinations):
        _insert(db, f"claims/{number}.md", f"cl_{number:04d}", file_status=file_status, duplicate=duplicate,
                xref_ok=xref_ok, fixture=fixture, lifecycle=lifecycle, kind="claim")
    _insert(db, "pages/gone.md", "pg_gone", lifecycle="withdrawn")
    reads = CatalogReads(db)

    retired = [row.status for row in reads.retired("private")]

    assert sorted(retired) == ["superseded", "withdrawn", "withdrawn"]
    assert sorted(row.status for row in reads.retired("private", kind="claim")) == ["superseded", "withdrawn"]
    assert reads.retired("conversation:other") == []


def test_rows_are_frozen(db: Database) -> None:
    _insert(db, "pages/a.md", "pg_a")
    row = CatalogReads(db).current("private")[0]
    assert isinstance(row, RecordRow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.title = "changed"  # type: ignore[misc]
    assert row.view.raw == {"id": "pg_a"} and row.view.id == "pg_a"
    assert (row.fixture, row.duplicate, row.xref_ok) == (0, 0, 1)


def test_current_filters_narrow_and_an_empty_filter_matches_nothing(db: Database) -> None:
    _insert(db, "pages/old.md", "pg_old", updated_at="2026-01-01T00:00:00Z",
            frontmatter={"tags": ["travel"], "recall": {"summary": "s"}})
    _insert(db, "pages/new.md", "pg_new", updated_at="2026-02-01T00:00:00Z", frontmatter={"tags": ["work"]})
    _insert(db, "claims/c.md", "cl_one", kind="claim", record_type="preference")
    reads = CatalogReads(db)
    # Newest first; records updated at the same moment by id.
    assert [row.record_id for row in reads.current("private")] == ["pg_new", "cl_one", "pg_old"]
    assert [row.record_id for row in reads.current("private", kind="page")] == ["pg_new", "pg_old"]
    assert [row.record_id for row in reads.current("private", kind="page", limit=1)] == ["pg_new"]
    assert [row.record_id for row in reads.current("private", type="preference")] == ["cl_one"]
    assert [row.record_id for row in reads.current("private", tag="travel")] == ["pg_old"]
    assert [row.record_id for row in reads.current("private", with_recall=True)] == ["pg_old"]
    assert [row.record_id for row in reads.current("private", paths=["pages/new.md"])] == ["pg_new"]
    assert [row.record_id for row in reads.current("private", record_ids=["pg_old"])] == ["pg_old"]
    assert reads.current("private", paths=[]) == [] and reads.current("private", record_ids=[]) == []
    assert reads.current("conversation:other") == []
    assert reads.current_counts("private") == {("claim", "preference"): 1, ("page", "note"): 2}


def test_content_comes_with_the_catalogued_revision_only(db: Database) -> None:
    _insert(db, "pages/kept.md", "pg_kept", sha256="a" * 64)
    _insert(db, "pages/unkept.md", "pg_unkept", sha256="b" * 64)
    db.execute("INSERT INTO revisions (partition, record_id, revision, sha256, content, path, origin, observed_at) "
               "VALUES ('private', 'pg_kept', 1, ?, ?, 'pages/kept.md', 'external', '2026-01-01T00:00:00Z')",
               ("a" * 64, b"---\nid: pg_kept\n---\nbody\n"))
    reads = CatalogReads(db)
    found = {row.record_id: content for row, content in reads.current_with_content("private")}
    assert found == {"pg_kept": b"---\nid: pg_kept\n---\nbody\n", "pg_unkept": None}
    assert reads.revision("private", "pg_kept", 1).text.endswith("body\n")
    assert reads.revision("private", "pg_kept", 1, "c" * 64) is None


def _sql_strings(tree: ast.AST) -> list[str]:
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            texts.append("".join(part.value for part in node.values
                                 if isinstance(part, ast.Constant) and isinstance(part.value, str)))
    return texts


def test_only_the_store_package_touches_the_catalog_and_publication_tables() -> None:
    offenders = []
    for path in sorted(ENGINE.rglob("*.py")):
        relative = path.relative_to(ENGINE)
        if relative.parts[0] == "store":
            continue
        for text in _sql_strings(ast.parse(path.read_text(encoding="utf-8"))):
            if _SQL_ON_OWNED.search(text):
                offenders.append(f"{relative}: {text[:80]!r}")
    assert offenders == [], "SQL on the store's tables outside engine/store/ (ask CatalogReads instead):\n" + \
        "\n".join(offenders)


def test_the_ownership_check_sees_sql_in_plain_and_formatted_strings() -> None:
    tree = ast.parse('a = "SELECT path FROM catalog WHERE x"\nb = f"DELETE FROM index_removals WHERE {y}"')
    found = [text for text in _sql_strings(tree) if _SQL_ON_OWNED.search(text)]
    assert any("catalog" in text for text in found) and any("index_removals" in text for text in found)
    assert not _SQL_ON_OWNED.search("clear a summary from sources the owner approved")


def test_applied_publications_besides_a_request_prefix_are_counted(engine: Engine, owner: AgentCaller) -> None:
    engine.save_page(owner, page("locomo-1", "Imported page"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    assert runtime.call(lambda: runtime.store.applied_besides("locomo-")) == 0
    assert runtime.call(lambda: runtime.store.applied_besides("locomo_")) == 1  # "_" is no wildcard
    engine.save_page(owner, page("mine-1", "The owner's own page"))
    assert runtime.call(lambda: runtime.store.applied_besides("locomo-")) == 1


def test_the_index_backlog_and_stale_rows_are_found_through_their_partial_indexes(db: Database) -> None:
    from engine.store.index_ledger import _BACKLOG, _STALE

    for condition, index in ((_BACKLOG, "catalog_index_backlog"), (_STALE, "catalog_index_stale")):
        plan = " ".join(row["detail"] for row in db.all(
            f"EXPLAIN QUERY PLAN SELECT c.path FROM catalog c WHERE {condition}", ("private",)))
        assert f"USING INDEX {index}" in plan, plan


def test_current_rows_named_by_path_are_found_by_path_not_by_walking_the_partition(engine, owner):
    """Found by the throughput benchmark: ordered newest first, the rows of a search's hits were found by
    walking the whole partition in catalog_updated order (about 300 ms a search at 95,000 records)."""
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    [row] = runtime.call(lambda: runtime.catalog.current("private"))
    connection = runtime.store.db.connection
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    try:
        assert runtime.call(lambda: runtime.catalog.current("private", paths=[row.path])) == [row]
        assert runtime.call(lambda: runtime.catalog.current("private", record_ids=[row.record_id])) == [row]
    finally:
        connection.set_trace_callback(None)
    queries = [sql for sql in statements if sql.startswith("SELECT") and "FROM catalog c" in sql]
    assert len(queries) == 2
    for sql in queries:
        plan = " ".join(step[3] for step in connection.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall())
        assert "catalog_updated" not in plan and ("path=?" in plan or "record_id=?" in plan), plan


def test_pages_citing_a_source_are_the_current_pages_whose_references_name_it(db: Database) -> None:
    _insert(db, "pages/a.md", "pg_a")
    _insert(db, "pages/b.md", "pg_b", lifecycle="withdrawn")
    _insert(db, "claims/c.md", "cl_c", kind="claim", record_type="fact")
    _insert(db, "pages/d.md", "pg_d")
    db.executemany("INSERT INTO refs (partition, path, target) VALUES ('private', ?, ?)",
                   [("pages/a.md", "src_1"), ("pages/b.md", "src_1"), ("claims/c.md", "src_1"),
                    ("pages/d.md", "src_2"), ("pages/d.md", "pg_a")])
    reads = CatalogReads(db)

    assert reads.pages_citing("private", ["src_1", "src_2", "src_3"]) == [("src_1", "pages/a.md"),
                                                                           ("src_2", "pages/d.md")]
    assert reads.pages_citing("other", ["src_1"]) == []
