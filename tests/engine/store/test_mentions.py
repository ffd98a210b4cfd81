"""The records that mention a record (a record page's backlinks), answered from ``mentions`` as a scan of every
frontmatter answers it: the same records, in the same order, to the same limit."""

from __future__ import annotations

import os
import random
from pathlib import Path

from engine.core.db import Database
from engine.core.ids import _CROCKFORD, generated_ids_in, is_generated_id, new_id
from engine.importers.demo import seed_demo
from engine.service import Engine
from engine.store.catalog import Catalog
from engine.store.catalog_reads import _LISTED, _NEWEST, RECORD_COLUMNS, CatalogReads, record_row
from engine.store.store import STATE_MIGRATIONS
from engine.vault.records import Record
from tests.helpers import conversation, page, private_dir

SESSION = "7f0c2f1e-4a53-4d1b-9a57-2b1f3c1d2e10"
LIMITS = (1, 2, 3, 501)


def _scanned(reads: CatalogReads, partition: str, record_id: str, limit: int) -> list:
    """The answer as every frontmatter of the partition is searched for the id's text (the path orders rows
    alike in both keys, as ``mentioning`` orders them)."""
    return [record_row(row) for row in reads.db.tuples(
        f"SELECT {RECORD_COLUMNS} FROM catalog c WHERE c.partition = ? AND {_LISTED} AND c.record_id != ? "
        f"AND instr(c.frontmatter, ?) > 0 {_NEWEST}, c.path LIMIT ?", (partition, record_id, record_id, limit))]


def _every_id_in(text: str) -> set[str]:
    """Generated ids in ``text`` found the slow way: every substring of an id's length that is one."""
    lengths = {len(new_id(prefix)) for prefix in ("pg", "cl", "rl", "src", "st", "vt", "pub")}
    return {text[start:start + length] for start in range(len(text)) for length in lengths
            if is_generated_id(text[start:start + length])}


def test_every_generated_id_in_a_text_is_found_even_inside_a_longer_word() -> None:
    rng = random.Random(7)
    pieces = ["pg_", "cl_", "rl_", "src_", "st_", "vt_", "pub_", "s", "p", "_", "x", " ", "\"", "-", "rc_"]
    for _ in range(300):
        text = "".join(rng.choice([rng.choice(pieces), new_id(rng.choice(["pg", "cl", "rl", "src", "st"])),
                                   "".join(rng.choices(_CROCKFORD, k=rng.randint(1, 30)))]) for _ in range(12))
        assert generated_ids_in(text) == _every_id_in(text), text
    first, second = new_id("pg"), new_id("rl")
    assert generated_ids_in(f"x{first}{second}Z") == {first, second}
    assert generated_ids_in(first.lower()) == set() and generated_ids_in(first[:-1]) == set()


def _write(folder: Path, name: str, frontmatter: dict, body: str = "Body.") -> None:
    stamp = "2026-03-0%dT10:00:00Z" % (1 + len(name) % 9)
    (folder / f"{name}.md").write_bytes(Record({
        "format": "knowledge-record-v1", "revision": 1, "recorded_at": stamp, "updated_at": stamp,
        "scope": "private", "lifecycle": "active", "attribution": {"agent": "main"}, **frontmatter}, body).render())


def test_mentions_answer_as_the_scan_on_a_varied_store(engine: Engine, owner, tmp_path: Path) -> None:
    """The demo (relationships, claims about pages with their evidence, typed page fields) and records that
    name its pages every other way: endpoints, subjects, ``replaces``, dependencies, fields, a title, an id
    inside a longer word, withdrawn and superseded records, a duplicate id, a file that is no record, and a
    conversation partition naming the same ids."""
    seed_demo(engine)
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    with runtime.store.db.snapshot() as db:
        pages = [row[0] for row in db.tuples("SELECT record_id FROM catalog WHERE kind = 'page' ORDER BY path")]
    first, second, third = pages[:3]
    folder = private_dir(engine.state) / "notes" / "named"
    folder.mkdir(parents=True)
    _write(folder, "withdrawn", {"id": new_id("pg"), "kind": "page", "type": "note", "title": "Gone",
                                 "lifecycle": "withdrawn", "fields": {"about": first}})
    _write(folder, "superseded", {"id": new_id("pg"), "kind": "page", "type": "note", "title": f"Was {first}",
                                  "lifecycle": "superseded", "replaces": second})
    _write(folder, "titled", {"id": new_id("pg"), "kind": "page", "type": "note", "title": f"See {first}"})
    _write(folder, "inside", {"id": new_id("pg"), "kind": "page", "type": "note", "title": "Inside",
                              "aliases": [f"x{second}y", f"{first}{third}"]})
    _write(folder, "depends", {"id": new_id("pg"), "kind": "page", "type": "note", "title": "Depends",
                               "dependencies": [first, third]})
    related = new_id("rl")
    for name in ("one", "two"):  # one id in two files: duplicates
        _write(folder, f"related-{name}", {"id": related, "kind": "relationship", "relation": "related_to",
                                           "from": third, "to": first, "title": "Related"})
    _write(folder, "about", {"id": new_id("cl"), "kind": "claim", "claim_kind": "fact", "title": "About",
                             "subject": second}, body=f"Says {third} in its body only.")
    (folder / "broken.md").write_text(f"---\nid: {new_id('pg')}\ntitle: [{first}\n---\n", encoding="utf-8")
    chat = conversation(owner.token, SESSION)
    engine.save_page(chat, page("chat-1", f"About {first}", type_="note", body="Chat."))
    engine.get_record(owner, first)  # the owner's partition catalogues the files written beside the engine

    _assert_same_as_the_scan(runtime, first)
    with runtime.store.db.snapshot() as db:
        reads = CatalogReads(db)
        named_first = {row.path for row in reads.mentioning("private", first, 501)}
        assert {f"notes/named/{name}.md" for name in ("withdrawn", "superseded", "titled", "inside", "depends",
                                                      "related-one", "related-two")} <= named_first
        assert not any(row.path.startswith("notes/named/about") for row in reads.mentioning("private", third, 501))

    # Changed, removed and unreadable files take their mentions with them.
    _write(folder, "titled", {"id": new_id("pg"), "kind": "page", "type": "note", "title": "Nothing named"})
    (folder / "depends.md").unlink()
    os.link(folder / "inside.md", tmp_path / "inside-link.md")  # a file with two links is not read
    engine.get_record(owner, first)
    _assert_same_as_the_scan(runtime, first)
    with runtime.store.db.snapshot() as db:
        named_first = {row.path for row in CatalogReads(db).mentioning("private", first, 501)}
        assert not named_first & {f"notes/named/{name}.md" for name in ("titled", "depends", "inside")}
        assert "notes/named/withdrawn.md" in named_first


def _assert_same_as_the_scan(runtime, first: str) -> None:
    with runtime.store.db.snapshot() as db:
        reads = CatalogReads(db)
        partitions = [row[0] for row in db.tuples("SELECT DISTINCT partition FROM catalog")]
        ids = sorted({row[0] for row in db.tuples("SELECT record_id FROM catalog WHERE record_id IS NOT NULL")})
        assert len(partitions) == 2 and db.one("SELECT 1 FROM meta WHERE key = 'mentions_unfilled'") is None
        answered = 0
        for partition in partitions:
            for record_id in [*ids, "pg", first[:-1], "main"]:
                for limit in LIMITS:
                    found = reads.mentioning(partition, record_id, limit)
                    assert found == _scanned(reads, partition, record_id, limit), (partition, record_id, limit)
                    answered += bool(found)
        assert answered > 20
        held = db.tuples("SELECT partition, path, target FROM mentions")
        assert len(held) == len(set(held)) and set(held) == {
            (partition, path, target) for partition, path, record_id, frontmatter in db.tuples(
                "SELECT partition, path, record_id, frontmatter FROM catalog WHERE frontmatter IS NOT NULL")
            for target in generated_ids_in(frontmatter) - {record_id}}  # none of a changed, removed, unreadable file

def test_a_store_catalogued_before_mentions_were_kept_answers_the_same_before_and_after_the_fill(
        engine: Engine, owner) -> None:
    seed_demo(engine)
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    db: Database = runtime.store.db
    ids = [row[0] for row in db.tuples("SELECT record_id FROM catalog WHERE record_id IS NOT NULL")]
    kept = {record_id: runtime.call(lambda r=record_id: runtime.catalog.mentioning("private", r, 501))
            for record_id in ids}
    with db.atomic():  # as the migration leaves a store catalogued before it
        db.execute("DELETE FROM mentions")
        db.execute("INSERT INTO meta (key, value) VALUES ('mentions_unfilled', '1')")
    catalog = runtime.call(lambda: Catalog(runtime.store))  # the old store's catalog, opened

    assert {record_id: runtime.call(lambda r=record_id: catalog.mentioning("private", r, 501))
            for record_id in ids} == kept  # read from every frontmatter meanwhile
    runtime.call(catalog.fill_mentions)
    assert db.one("SELECT 1 FROM meta WHERE key = 'mentions_unfilled'") is None
    assert db.one("SELECT count(*) FROM mentions")[0] > 0
    assert {record_id: runtime.call(lambda r=record_id: catalog.mentioning("private", r, 501))
            for record_id in ids} == kept
    assert sum(map(len, kept.values())) > 10


def test_an_open_catalog_asks_whether_mentions_are_filled_once(engine: Engine, owner) -> None:
    """The fill happens at open: a record page's backlinks never ask the database whether it has."""
    seed_demo(engine)
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    db: Database = runtime.store.db
    ids = [row[0] for row in db.tuples("SELECT record_id FROM catalog WHERE record_id IS NOT NULL")]
    ran: list[str] = []
    db.connection.set_trace_callback(ran.append)
    try:
        answered = [runtime.call(lambda r=record_id: runtime.catalog.mentioning("private", r, 501))
                    for record_id in ids]
    finally:
        db.connection.set_trace_callback(None)
    assert any(answered) and any("FROM mentions" in statement for statement in ran)  # answered from the index
    assert not [statement for statement in ran if "mentions_unfilled" in statement]


def test_the_migration_marks_an_old_store_for_its_fill(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    old = Database.open(path, create=True, migrations=[m for m in STATE_MIGRATIONS if m[0] < "0012"])
    old.close()
    migrated = Database.open(path, create=False, migrations=STATE_MIGRATIONS)
    assert migrated.tuples("SELECT value FROM meta WHERE key = 'mentions_unfilled'") == [("1",)]
    assert migrated.tuples("SELECT count(*) FROM mentions") == [(0,)]
    migrated.close()
