"""A scan of many new files catalogues them exactly as reading and loading them one by one does.

The sync reads files through directory descriptors, parses flat frontmatter without libyaml and writes
rows a chunk at a time; "one by one" is the same sync with every one of those switched off: each file
read by ``read_file``, its YAML checked event by event and then loaded by the full loader, and its rows
written before the next file is read.  "In worker processes" is the bulk sync with the files read and
parsed by the worker processes a large sync starts.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine.bench.corpus import write_partition
from engine.core import files as files_module
from engine.store import catalog as catalog_module
from engine.store import catalog_reads as catalog_reads_module
from engine.store import record_rows as record_rows_module
from engine.store import walk as walk_module
from engine.vault import frontmatter
from engine.vault.frontmatter import RECORD_MAX_BYTES
from engine.vault.ontology import Ontology
from tests.engine.store.test_catalog import envelope, place, remembered_source, render, saved_page
from tests.helpers import claim, private_dir

CATALOG_COLUMNS = ("path, record_id, revision, kind, type, title, lifecycle, file_status, fixture, duplicate, xref_ok, "
                   "sha256, file_size, mtime_ns, ctime_ns, ino, recorded_at, updated_at, frontmatter, findings, "
                   "xref_findings")
# Every table the catalog writes for a partition, without the columns that say when a row was written (and
# what the search index, which may catch up between two operations, records there).
TABLES = {
    "catalog": f"SELECT {CATALOG_COLUMNS} FROM catalog WHERE partition = 'private' ORDER BY path",
    "names": "SELECT path, key FROM names WHERE partition = 'private' ORDER BY path, key",
    "revisions": "SELECT seq, record_id, revision, sha256, content, path, origin, publication_id, agent "
                 "FROM revisions WHERE partition = 'private' ORDER BY seq",
    "sources": "SELECT * FROM sources WHERE partition = 'private' ORDER BY path",
    "refs": "SELECT path, target FROM refs WHERE partition = 'private' ORDER BY path, target",
    "events": "SELECT seq, kind, path, record_id, detail FROM events WHERE partition = 'private' ORDER BY seq",
    "partition_state": "SELECT catalog_version, refs_ready FROM partition_state WHERE partition = 'private'",
    "scans": "SELECT partition FROM scans WHERE partition = 'private'",
    "catalog_changes": "SELECT record_id, catalog_version FROM catalog_changes WHERE partition = 'private' "
                       "ORDER BY record_id",
    "catalog_changes_deferred": "SELECT * FROM catalog_changes_deferred",
}


def odd_files(engine, owner, tmp_path: Path) -> Path:
    """Files that take every other way through the reader and the checks, beside the generated notes."""
    dana, _ = saved_page(engine, owner, "Dana Whitaker", "person")
    root = private_dir(engine.state)
    engine.remember(owner, {"requestId": "odd-claims", "items": [
        claim("Dana runs the harbour project.", "Dana runs it", subject=dana)]})
    source = remembered_source(engine, owner)
    place(root, "relationships/dangling.md", render(envelope(
        "rl_01JBY5K3M8Q2T7V9WXYZ0ABCDE", "relationship", "Dana works on the lighthouse", relation="works_on",
        assertion_origin="user", evidence=[{"source": source}], **{"from": dana, "to": "pg_missing"})))
    note = envelope("pg_odd_note", "page", "It's a note: with a colon", type="note")
    place(root, "pages/notes/quoted.md", render({**note, "aliases": ["Ça va", "x, y"], "tags": ["a", "b"]}))
    place(root, "pages/notes/crlf.md", render({**note, "id": "pg_crlf"}).replace(b"\n", b"\r\n"))
    place(root, "pages/notes/bom.md", b"\xef\xbb\xbf" + render({**note, "id": "pg_bom"}))
    place(root, "pages/notes/fixture.md", render({**note, "id": "pg_fixture", "fixture": True, "aliases": None}))
    place(root, "pages/notes/withheld.md", render({**note, "id": "pg_withheld", "scope": "conversation:nope"}))
    place(root, "pages/notes/anchored.md", b"---\nformat: &f knowledge-record-v1\nid: *f\n---\n")
    place(root, "pages/notes/duplicate-key.md", b"---\nid: pg_a\nid: pg_b\n---\n")
    place(root, "pages/notes/bad-yaml.md", b"---\ntitle: [unclosed\n---\n")
    place(root, "pages/notes/tagged.md", b"---\nrevision: !!str 1\ntitle: !!binary aGk=\n---\n")
    place(root, "pages/notes/not-utf8.md", b"---\ntitle: \xff\n---\n")
    place(root, "pages/notes/unclosed.md", b"---\ntitle: no end\n")
    place(root, "pages/notes/empty.md", b"")
    place(root, "pages/notes/too-large.md", render({**note, "id": "pg_large", "body": "x" * RECORD_MAX_BYTES}))
    place(root, "pages/deep/a/b/c/d/e/f/g/too-deep.md", render({**note, "id": "pg_deep"}))
    write_partition(root, 120, 0)
    generated = min((root / "pages/notes/journal").iterdir())
    place(root, "pages/notes/same-id-again.md", generated.read_bytes())
    os.link(root / "pages/notes/quoted.md", tmp_path / "second-link.md")
    (tmp_path / "outside.md").write_bytes(render({**note, "id": "pg_outside"}))
    os.symlink(tmp_path / "outside.md", root / "pages/notes/linked.md")
    os.symlink(tmp_path, root / "pages/linked-folder")
    place(root, os.fsdecode(b"pages/notes/bad\xffname.md"), render({**note, "id": "pg_badname"}))
    return root


def rows(runtime) -> dict[str, list[tuple[Any, ...]]]:
    return {table: [tuple(row) for row in runtime.store.db.all(sql)] for table, sql in TABLES.items()}


def one_by_one(stack: ExitStack, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sync as it read and loaded files before: each one read, parsed twice and written on its own."""
    patch = stack.enter_context(monkeypatch.context())
    patch.setattr(files_module.TreeReader, "read",
                  lambda self, relpath, *, max_bytes: files_module.read_file(self.root, relpath, max_bytes=max_bytes))
    patch.setattr(frontmatter._FlatReader, "read", _refuse)
    patch.setattr(frontmatter, "_read_once", _refuse)
    patch.setattr(catalog_reads_module, "_IDS_PER_QUERY", 1)
    patch.setattr(record_rows_module, "CHUNK_FILES", 1)
    patch.setattr(record_rows_module, "POOL_MIN_FILES", 10 ** 9)  # read here, never in a worker
    patch.setattr(catalog_module.Catalog, "_logging_changes", _trigger_logs)  # each row logged as it lands


@contextmanager
def _trigger_logs(self: catalog_module.Catalog, partition: str) -> Iterator[list[str]]:
    """The change log as the insert trigger writes it, row by row, for every row a sync writes."""
    yield []


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise frontmatter._Unusual


@pytest.mark.parametrize("first_sync", [True, False], ids=["first sync", "into an existing catalog"])
def test_a_large_scan_catalogues_what_loading_the_files_one_by_one_does(engine, owner, tmp_path, monkeypatch,
                                                                         first_sync):
    odd_files(engine, owner, tmp_path)
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    # The store's index thread catches up after the publications above, beside the lane, and records
    # partition_state when it has: holding its lock keeps it out between the backup and each sync.
    with runtime.indexes._lock:
        if first_sync:  # forget the partition's catalog: the next sync is its first
            runtime.call(lambda: [runtime.store.db.execute(f"DELETE FROM {table} WHERE partition = 'private'")
                                  for table in ("catalog", "names", "sources", "refs", "events", "scans",
                                                "partition_state", "revisions")])
        # Small chunks and a low threshold, so the batches, the chunk boundaries and the large-sync path all run.
        monkeypatch.setattr(catalog_reads_module, "_IDS_PER_QUERY", 7)
        monkeypatch.setattr(record_rows_module, "CHUNK_FILES", 7)
        monkeypatch.setattr(catalog_module, "INCREMENTAL_CHECK_MAX", 50)
        before = sqlite3.connect(":memory:", check_same_thread=False)
        runtime.call(lambda: runtime.store.db.connection.backup(before))

        results = {}
        for way in ("one by one", "in bulk", "in worker processes"):
            runtime.call(lambda: before.backup(runtime.store.db.connection))
            with ExitStack() as stack:
                if way == "one by one":
                    one_by_one(stack, monkeypatch)
                else:  # worker processes from one file on, or never
                    patch = stack.enter_context(monkeypatch.context())
                    patch.setattr(record_rows_module, "POOL_MIN_FILES", 1 if way == "in worker processes" else 10 ** 9)
                    patch.setattr(record_rows_module, "_cores", lambda: 2)
                report = runtime.call(lambda: runtime.catalog.sync("private"))
                events = [(event["kind"], event["path"], event["record_id"], event["detail"])
                          for event in report.events]
                results[way] = (report.changed, report.removed, events, runtime.call(lambda: rows(runtime)))

    assert results["in bulk"] == results["one by one"]
    assert results["in worker processes"] == results["one by one"]
    changed, _, events, catalogued = results["in bulk"]
    assert len(changed) > 120 and bool(events) is not first_sync
    statuses = {row[0]: row[7] for row in catalogued["catalog"]}  # path -> file_status
    assert statuses["pages/notes/quoted.md"] == "unreadable"  # hardlinked
    assert statuses["pages/notes/too-large.md"] == "unreadable"  # refused by the reader
    assert statuses["pages/notes/anchored.md"] == statuses["pages/notes/bad-yaml.md"] == "invalid"
    assert statuses["pages/notes/withheld.md"] == "withheld"
    assert statuses["pages/notes/crlf.md"] == statuses["pages/notes/bom.md"] == "ok"
    assert sum(status == "ok" for status in statuses.values()) > 120


@pytest.mark.parametrize("data", [render(envelope("pg_1", "page", "A page", type="note")), b"---\nnot: [closed\n"])
def test_every_column_of_a_catalogued_row_is_written(engine, owner, data):
    """Named parameters the statement does not name would be dropped without a word."""
    saved_page(engine, owner)
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    ontology = runtime.call(lambda: runtime.store.ontology("private"))
    info = walk_module.FileStat(1, len(data), 2, 3)
    catalogued = record_rows_module.catalogue("private", "pages/p.md", data, info, ontology)
    assert tuple(catalogued.row) == record_rows_module.CATALOG_COLUMNS


@pytest.mark.parametrize("kind, record_type", [("page", "note"), ("page", "person"), ("page", "project"),
                                               ("page", None), ("claim", "fact")])
def test_a_record_naming_no_other_is_not_looked_at_and_has_no_reference_finding(kind, record_type):
    """The cross-check skips a page or claim whose reference values are all null: checking it finds nothing."""
    others = [None] * (len(catalog_module.REFERENCE_KEYS) - 1)
    assert catalog_module._referring_view(kind, "pg_1", others) is None
    assert catalog_module._referring_view(kind, "pg_1", None) is None  # all null, as SQLite gives it
    view = catalog_module.view_of(dict(zip(catalog_module.REFERENCE_KEYS, ["pg_1", *others])))
    assert catalog_module.reference_targets(view) == set()
    assert catalog_module.reference_findings(view, kind, record_type, {}, set(), Ontology.shipped(), "p.md") == []
    # A relationship is always checked (its endpoints are required), as is any record naming something.
    assert catalog_module._referring_view("relationship", "pg_1", others) is not None
    assert catalog_module._referring_view("relationship", "pg_1", None) is not None
    assert catalog_module._referring_view(kind, "pg_1", others[:-1] + [{}]) is not None
    assert catalog_module._referring_view(kind, "pg_1", [None, False] + others[2:]) is not None


@pytest.mark.parametrize("frontmatter, others", [
    ({"id": "pg_1", "title": "A note"}, None), ({"id": "pg_1", "evidence": None, "fields": None}, None),
    ({"id": "pg_1", "subject": "pg_2"}, [None, None, None, None, "pg_2", None, None]),
    ({"id": "pg_1", "fields": {}, "from": False}, [None, False, None, None, None, None, {}]),
])
def test_the_reference_values_are_null_exactly_when_all_but_the_id_are(frontmatter, others):
    """What SQLite's JSON reader gives the check of a row's frontmatter: one array, or NULL for all nulls."""
    with sqlite3.connect(":memory:") as connection:
        [value] = connection.execute(f"SELECT {catalog_module._REFERENCE_VALUES} FROM (SELECT ? AS frontmatter)",
                                     (json.dumps(frontmatter),)).fetchone()
    assert (None if value is None else json.loads(value)) == others
