"""Publication: validated writes, receipts, idempotency, revisions, evidence and conflicts."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3

import pytest

from engine.core.errors import Conflict, InvalidParams, LimitExceeded, NotFound, RecordInvalid, StaleRevision
from engine.vault.frontmatter import parse_document
from engine.store.publication import APPLIED_BY_REQUEST, FileWrite, Plan
from tests.helpers import (assert_checked_as_read, claim, only_store, page, private_dir, records_checked_as_read,
                           temp_files_left, vault_snapshot)


def publications(state_dir) -> list[tuple[str, str]]:
    """(id, state) of every publication; none when bad input stopped the store being created at all."""
    if not state_dir.stores.exists():
        return []
    with sqlite3.connect(only_store(state_dir) / "state.sqlite") as db:
        return db.execute("SELECT id, state FROM publications ORDER BY seq").fetchall()


def written_by_publication(snapshot: dict[str, str]) -> dict[str, str]:
    """The store's files a write owns: the vault and its manifest.  The search index is derived and the
    engine's index thread writes it (tantivy's temp files included) in the background by design; the
    database is checked through its publications instead."""
    return {path: digest for path, digest in snapshot.items()
            if not path.startswith(("state.sqlite", "index/"))}


# --- pages ------------------------------------------------------------------------------


def test_save_page_writes_one_record_file_with_the_exact_content(engine, owner, state_dir):
    receipt = engine.save_page(owner, page("r1", "Dana Whitaker", aliases=["Dana"], fields={"role": "Ops lead"},
                                           body="Dana runs operations."))
    assert receipt["revision"] == 1 and receipt["id"].startswith("pg_")
    assert receipt["publicationId"].startswith("pub_") and receipt["requestId"] == "r1"
    path = private_dir(state_dir) / "pages" / "people" / "dana-whitaker.md"
    frontmatter, body = parse_document(path.read_bytes())
    assert frontmatter["id"] == receipt["id"]
    assert frontmatter["format"] == "knowledge-record-v1"
    assert frontmatter["scope"] == "private" and frontmatter["lifecycle"] == "active"
    assert frontmatter["aliases"] == ["Dana"] and frontmatter["fields"] == {"role": "Ops lead"}
    assert frontmatter["attribution"] == {"agent": "main", "audience": "owner-private"}
    assert body == "Dana runs operations.\n"


def test_pages_with_the_same_title_get_distinct_files(engine, owner, state_dir):
    first = engine.save_page(owner, page("a", "Sam"))
    second = engine.save_page(owner, page("b", "Sam"))
    assert first["id"] != second["id"]
    names = sorted(p.name for p in (private_dir(state_dir) / "pages" / "people").iterdir())
    assert names == ["sam-2.md", "sam.md"]


def test_identical_retry_returns_the_original_receipt_and_writes_nothing(engine, owner, state_dir):
    first = engine.save_page(owner, page("same", "Dana"))
    before = vault_snapshot(private_dir(state_dir))
    again = engine.save_page(owner, page("same", "Dana"))
    assert {k: v for k, v in again.items() if k != "git"} == {k: v for k, v in first.items() if k != "git"}
    assert vault_snapshot(private_dir(state_dir)) == before
    assert len(publications(state_dir)) == 1


def test_a_retry_is_looked_up_through_the_request_index_not_every_applied_publication(engine, owner, state_dir):
    engine.save_page(owner, page("same", "Dana"))
    with sqlite3.connect(only_store(state_dir) / "state.sqlite") as db:
        plan = " ".join(row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {APPLIED_BY_REQUEST}", ("private", "same")))
        found = db.execute(APPLIED_BY_REQUEST, ("private", "same")).fetchall()
    assert "USING INDEX publications_request (partition=? AND request_id=?)" in plan, plan
    assert len(found) == 1


def test_a_retry_is_looked_up_by_its_request_id_not_among_every_publication(engine, owner, state_dir):
    first = engine.save_page(owner, page("same", "Dana"))
    connection = engine.runtime(engine.registry.own_store_of("main")).store.db.connection
    ran: list[str] = []
    connection.set_trace_callback(ran.append)
    try:
        assert engine.save_page(owner, page("same", "Dana"))["id"] == first["id"]
    finally:
        connection.set_trace_callback(None)
    [lookup] = [sql for sql in ran if "FROM publications WHERE partition" in sql and "request_id" in sql]
    plan = " ".join(row[3] for row in sqlite3.connect(only_store(state_dir) / "state.sqlite").execute(
        "EXPLAIN QUERY PLAN " + lookup))
    assert "publications_request" in plan, plan


def test_same_request_id_with_different_content_is_a_conflict(engine, owner, state_dir):
    engine.save_page(owner, page("same", "Dana"))
    before = vault_snapshot(private_dir(state_dir))
    with pytest.raises(Conflict) as raised:
        engine.save_page(owner, page("same", "Dana", body="Something else."))
    assert raised.value.reason == "conflict"
    assert vault_snapshot(private_dir(state_dir)) == before


def test_revision_needs_the_expected_revision_and_keeps_every_revision(engine, owner):
    created = engine.save_page(owner, page("r1", "Dana", body="First."))
    revised = engine.save_page(owner, page("r2", "Dana", body="Second.", id=created["id"], expectedRevision=1))
    assert revised["id"] == created["id"] and revised["revision"] == 2
    with pytest.raises(StaleRevision) as raised:
        engine.save_page(owner, page("r3", "Dana", body="Third.", id=created["id"], expectedRevision=1))
    assert raised.value.details["revision"] == 2
    assert raised.value.details["field"] == "expectedRevision"  # which argument was stale
    assert engine.get_record(owner, created["id"])["body"] == "Second.\n"
    assert engine.get_record(owner, created["id"], revision=1)["body"] == "First.\n"
    assert [r["revision"] for r in engine.history(owner, created["id"])["revisions"]] == [1, 2]


def test_revision_preserves_unknown_frontmatter_keys(engine, owner, state_dir):
    created = engine.save_page(owner, page("r1", "Dana"))
    path = private_dir(state_dir) / "pages" / "people" / "dana.md"
    text = path.read_text(encoding="utf-8").replace("lifecycle: active\n", "lifecycle: active\nmood: sunny\n")
    path.write_text(text, encoding="utf-8")
    read = engine.get_record(owner, created["id"])  # the edit made outside the engine, read before revising it
    engine.save_page(owner, page("r2", "Dana", id=created["id"], expectedRevision=1, expectedSha256=read["sha256"]))
    frontmatter, _ = parse_document(path.read_bytes())
    assert frontmatter["mood"] == "sunny" and frontmatter["revision"] == 2


def test_revising_needs_expected_revision_and_an_existing_page(engine, owner):
    with pytest.raises(InvalidParams):
        engine.save_page(owner, page("r1", "Dana", id="pg_missing"))
    with pytest.raises(NotFound):
        engine.save_page(owner, page("r1", "Dana", id="pg_missing", expectedRevision=1))


@pytest.mark.parametrize("params, field", [
    ({"type": "starship"}, "type"),
    ({"fields": {"role": 42}}, None),
    ({"fields": {"nickname": "D"}}, None),
    ({"title": "two\nlines"}, "title"),
    ({"title": ""}, "title"),
    ({"requestId": "has spaces"}, "requestId"),
    ({"requestId": None}, "requestId"),
    ({"aliases": "Dana"}, "aliases"),
    ({"surprise": 1}, "surprise"),
    ({"evidence": [{"source": "src_nope"}]}, None),
])
def test_bad_page_input_is_refused_and_changes_nothing(engine, owner, state_dir, params, field):
    engine.save_page(owner, page("seed", "Seed"))
    before = vault_snapshot(only_store(state_dir))
    with pytest.raises((InvalidParams, NotFound)) as raised:
        engine.save_page(owner, {**page("bad", "Dana"), **params})
    if field:
        assert raised.value.details.get("field") == field
    after = vault_snapshot(only_store(state_dir))
    assert written_by_publication(after) == written_by_publication(before)
    assert [state for _, state in publications(state_dir)] == ["applied"]


def test_oversized_page_is_refused(engine, owner):
    with pytest.raises(LimitExceeded):  # oversize is always limit_exceeded (issue 13)
        engine.save_page(owner, page("big", "Big", body="x" * 5_000_001))


# --- claims, evidence and relationships ---------------------------------------------------


def test_remember_retains_each_excerpt_as_hashed_evidence(engine, owner, state_dir):
    subject = engine.save_page(owner, page("p", "Dana Whitaker", aliases=["Dana"]))
    receipt = engine.remember(owner, {"requestId": "m1", "subject": "Dana", "items": [
        claim("Dana prefers Friday notes.", "send me the notes every Friday", kind="preference"),
    ]})
    record = engine.get_record(owner, receipt["items"][0]["id"])
    fm = record["frontmatter"]
    assert fm["subject"] == subject["id"] and fm["claim_kind"] == "preference"
    assert fm["assertion_origin"] == "user"
    citation = fm["evidence"][0]
    assert citation["quote"] == "send me the notes every Friday" and citation["lines"] == [1, 1]
    sources = private_dir(state_dir) / "sources"
    descriptor = json.loads(json.dumps(parse_yaml(sources / f"{citation['source']}.source.yaml")))
    original = private_dir(state_dir) / descriptor["retained_path"]
    assert original.read_bytes() == b"send me the notes every Friday"
    assert descriptor["sha256"] == hashlib.sha256(original.read_bytes()).hexdigest()
    assert descriptor["size"] == len(original.read_bytes())
    assert descriptor["origin"]["agent"] == "main"


def parse_yaml(path):
    from engine.vault.frontmatter import load_yaml

    return load_yaml(path.read_text(encoding="utf-8"))


def test_correction_supersedes_the_replaced_claim(engine, owner):
    first = engine.remember(owner, {"requestId": "m1", "items": [claim("Cut-over on Jan 15.", "on the 15th")]})
    old_id = first["items"][0]["id"]
    correction = engine.remember(owner, {"requestId": "m2", "items": [
        claim("Cut-over moved to Jan 22.", "it slips to the 22nd", kind="correction", replaces=old_id),
    ]})
    new_id = correction["items"][0]["id"]
    link = first["items"][0]["link"]  # the record's link, whatever its revision
    assert {"id": old_id, "revision": 2, "kind": "claim", "link": link} in correction["records"]
    old = engine.get_record(owner, old_id)
    assert old["status"] == "superseded" and old["revision"] == 2
    assert engine.get_record(owner, new_id)["frontmatter"]["replaces"] == old_id
    with pytest.raises(Conflict):
        engine.remember(owner, {"requestId": "m3", "items": [
            claim("Again.", "again", replaces=old_id),
        ]})


def test_agent_inference_is_never_stored(engine, owner, state_dir):
    with pytest.raises(InvalidParams) as raised:
        engine.remember(owner, {"requestId": "m1", "items": [
            claim("Dana is probably busy.", "she did not answer", assertionOrigin="agent_inference"),
        ]})
    assert raised.value.details["field"] == "items[0].assertionOrigin"
    assert publications(state_dir) == []


@pytest.mark.parametrize("item", [
    {"text": "No evidence.", "claimKind": "fact"},
    {"text": "Empty evidence.", "claimKind": "fact", "excerpt": "  "},
    {"text": "Unknown kind.", "claimKind": "rumour", "excerpt": "x"},
    {"text": "", "claimKind": "fact", "excerpt": "x"},
    {"text": "Unknown key.", "claimKind": "fact", "excerpt": "x", "confidence": 0.9},
])
def test_claims_without_valid_evidence_or_kind_are_rejected(engine, owner, state_dir, item):
    with pytest.raises(InvalidParams):
        engine.remember(owner, {"requestId": "m1", "items": [item]})
    assert publications(state_dir) == []


def test_subject_must_resolve_to_exactly_one_page(engine, owner):
    with pytest.raises(NotFound):
        engine.remember(owner, {"requestId": "m1", "subject": "Nobody", "items": [claim("x", "y")]})
    engine.save_page(owner, page("p1", "Alex"))
    engine.save_page(owner, page("p2", "Alex"))
    with pytest.raises(NotFound) as raised:
        engine.remember(owner, {"requestId": "m2", "subject": "Alex", "items": [claim("x", "y")]})
    assert "more than one" in raised.value.message


def test_relationships_check_endpoint_types(engine, owner):
    engine.save_page(owner, page("p1", "Dana"))
    engine.save_page(owner, page("p2", "Northwind", type_="organization"))
    receipt = engine.remember(owner, {"requestId": "m1", "items": [
        {"relation": "works_at", "from": "Dana", "to": "Northwind", "excerpt": "I work at Northwind"},
    ]})
    record = engine.get_record(owner, receipt["items"][0]["id"])
    assert record["kind"] == "relationship" and record["title"] == "Dana works at Northwind"
    with pytest.raises(RecordInvalid) as raised:
        engine.remember(owner, {"requestId": "m2", "items": [
            {"relation": "works_at", "from": "Northwind", "to": "Dana", "excerpt": "backwards"},
        ]})
    assert raised.value.findings[0]["code"] == "endpoint_type"
    with pytest.raises(InvalidParams):
        engine.remember(owner, {"requestId": "m3", "items": [
            {"relation": "admires", "from": "Dana", "to": "Northwind", "excerpt": "x"},
        ]})


def test_a_failed_item_publishes_none_of_the_call(engine, owner, state_dir):
    engine.save_page(owner, page("p1", "Dana"))
    before = vault_snapshot(private_dir(state_dir))
    with pytest.raises(NotFound):
        engine.remember(owner, {"requestId": "m1", "items": [
            claim("Fine.", "fine"),
            {"relation": "works_at", "from": "Nobody", "to": "Nowhere", "excerpt": "x"},
        ]})
    assert vault_snapshot(private_dir(state_dir)) == before
    assert len(publications(state_dir)) == 1


def test_page_evidence_can_cite_an_existing_source(engine, owner):
    receipt = engine.remember(owner, {"requestId": "m1", "items": [claim("A fact.", "line one\nline two")]})
    source = engine.get_record(owner, receipt["items"][0]["id"])["frontmatter"]["evidence"][0]["source"]
    created = engine.save_page(owner, page("p1", "Notes", type_="note",
                                           evidence=[{"source": source, "lines": [2, 2], "quote": "line two"}]))
    cited = engine.get_record(owner, created["id"])["frontmatter"]["evidence"]
    assert cited == [{"source": source, "lines": [2, 2], "quote": "line two"}]


# --- conflicts with edits made outside the engine ----------------------------------------------


def test_an_edit_made_after_planning_is_never_overwritten(engine, owner, state_dir):
    created = engine.save_page(owner, page("r1", "Dana", body="Original."))
    path = private_dir(state_dir) / "pages" / "people" / "dana.md"
    original = path.read_bytes()
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    plan = Plan("private", "save_page", "r2", "digest", "main", [
        FileWrite("pages/people/dana.md", "record", original.replace(b"Original.", b"Ours."), created["id"], 2,
                  base=original),
    ])
    edited = original.replace(b"Original.", b"Edited by hand.")
    path.write_bytes(edited)
    with pytest.raises(Conflict):
        runtime.call(lambda: runtime.publisher.publish(plan))
    assert path.read_bytes() == edited
    assert publications(state_dir)[-1][1] == "rolled_back"
    assert engine.get_record(owner, created["id"])["body"] == "Edited by hand.\n"


def test_an_edit_made_while_the_new_bytes_are_synced_is_a_conflict_not_an_overwrite(engine, owner, state_dir,
                                                                                    monkeypatch):
    """Found by the external-edit harness: the file was compared with the plan's base before the temp
    file was written and fsynced, so an edit landing meanwhile was replaced without the engine seeing it."""
    from engine.core import files as files_module

    created = engine.save_page(owner, page("r1", "Dana", body="Original."))
    path = private_dir(state_dir) / "pages" / "people" / "dana.md"
    edited = path.read_bytes().replace(b"Original.", b"Edited by hand.")
    fsync = os.fsync
    calls = []

    def a_temp_file(fd):  # os.fsync is every thread's: the engine's own threads may sync other files
        synced = os.fstat(fd)
        return any(os.lstat(p).st_ino == synced.st_ino for p in temp_files_left(only_store(state_dir)))

    def fsync_then_edit(fd):
        fsync(fd)
        if not calls and a_temp_file(fd):  # the new revision's temp file is synced; the editor saves meanwhile
            calls.append(fd)
            path.write_bytes(edited)

    monkeypatch.setattr(files_module.os, "fsync", fsync_then_edit)
    with pytest.raises(Conflict):
        engine.save_page(owner, page("r2", "Dana", body="Ours.", id=created["id"], expectedRevision=1))
    monkeypatch.undo()
    assert calls  # the edit landed while the new bytes were synced
    assert path.read_bytes() == edited
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp file left
    assert not temp_files_left(only_store(state_dir))
    assert engine.get_record(owner, created["id"])["body"] == "Edited by hand.\n"


def test_an_edit_the_catalog_has_not_seen_is_kept_and_the_revision_by_number_refused(engine, owner, state_dir,
                                                                                      monkeypatch):
    """Found by the external-edit harness: a revision was planned on the file's fresh bytes, so an edit
    landing after the lane's catch-up (the watcher not yet reporting it) was replaced without ever
    reaching the revision history.  The edit kept the file's number, so the writer, who named revision 1
    by its number alone, never read it: the revision is refused and the file keeps the edit."""
    created = engine.save_page(owner, page("r1", "Dana", body="Original."))
    path = private_dir(state_dir) / "pages" / "people" / "dana.md"
    edited = path.read_bytes().replace(b"Original.", b"Edited by hand, revision kept.")
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    prepare = runtime.prepare

    def prepare_then_edit(partition):
        prepare(partition)
        path.write_bytes(edited)

    monkeypatch.setattr(runtime, "prepare", prepare_then_edit)
    with pytest.raises(StaleRevision) as raised:
        engine.save_page(owner, page("r2", "Dana", body="Ours.", id=created["id"], expectedRevision=1))
    monkeypatch.undo()
    assert raised.value.details["sha256"] == hashlib.sha256(edited).hexdigest()
    assert path.read_bytes() == edited
    kept = [r["sha256"] for r in engine.history(owner, created["id"])["revisions"]]
    assert hashlib.sha256(edited).hexdigest() in kept


def test_an_edit_made_between_install_and_acknowledgement_is_seen_by_the_next_read(engine, owner, state_dir,
                                                                                  monkeypatch):
    """Found by the external-edit harness: the catalog took the file's stat after the checkpoint, so an
    edit landing between install and acknowledgement was stamped as the engine's own bytes and never read."""
    created = engine.save_page(owner, page("r1", "Dana", body="Original."))
    path = private_dir(state_dir) / "pages" / "people" / "dana.md"
    publisher = engine.runtime(engine.registry.own_store_of("main")).publisher
    report_installed = publisher._report_installed

    def installed_then_edit(group, directories):
        # Installed and synced; the checkpoint (written beside the installs) and the acknowledgement come next.
        report_installed(group, directories)
        path.write_bytes(path.read_bytes().replace(b"Ours.", b"Edited at once by hand."))

    monkeypatch.setattr(publisher, "_report_installed", installed_then_edit)
    receipt = engine.save_page(owner, page("r2", "Dana", body="Ours.", id=created["id"], expectedRevision=1))
    monkeypatch.undo()
    assert receipt["revision"] == 2
    hits = engine.search(owner, {"query": "edited at once"})["hits"]
    assert [hit["id"] for hit in hits] == [created["id"]]
    history = engine.history(owner, created["id"])
    assert hashlib.sha256(path.read_bytes()).hexdigest() in [r["sha256"] for r in history["revisions"]]


def test_claims_can_cite_already_retained_sources(engine, owner):
    first = engine.remember(owner, {"requestId": "m1", "items": [claim("A.", "turn one\nturn two")]})
    source = engine.get_record(owner, first["items"][0]["id"])["frontmatter"]["evidence"][0]["source"]
    second = engine.remember(owner, {"requestId": "m2", "items": [
        {"text": "B.", "claimKind": "fact", "evidence": [{"source": source, "lines": [2, 2], "quote": "turn two"}]},
    ]})
    cited = engine.get_record(owner, second["items"][0]["id"])["frontmatter"]["evidence"]
    assert cited == [{"source": source, "lines": [2, 2], "quote": "turn two"}]
    for item, field in (({"text": "C.", "claimKind": "fact", "excerpt": "x", "evidence": [{"source": source}]},
                         "items[0].evidence"),
                        ({"text": "D.", "claimKind": "fact", "evidence": []}, "items[0].evidence"),
                        ({"text": "E.", "claimKind": "fact", "evidence": [{"lines": [1, 1]}]},
                         "items[0].evidence[0]")):
        with pytest.raises(InvalidParams) as raised:
            engine.remember(owner, {"requestId": "m3", "items": [item]})
        assert raised.value.details["field"] == field
    with pytest.raises(NotFound):
        engine.remember(owner, {"requestId": "m4", "items": [
            {"text": "F.", "claimKind": "fact", "evidence": [{"source": "src_elsewhere"}]},
        ]})


def test_citations_of_retained_sources_are_checked_against_the_source(engine, owner):
    first = engine.remember(owner, {"requestId": "m1", "items": [claim("A.", "turn one\nturn two\nturn three")]})
    source = engine.get_record(owner, first["items"][0]["id"])["frontmatter"]["evidence"][0]["source"]

    def cite(request_id, **citation):
        return engine.remember(owner, {"requestId": request_id, "items": [
            {"text": "B.", "claimKind": "fact", "evidence": [{"source": source, **citation}]}]})

    assert cite("ok1", lines=[2, 3], quote="two\nturn three")["items"]
    assert cite("ok2", quote="turn one")["items"]
    with pytest.raises(InvalidParams) as raised:
        cite("bad1", lines=[3, 4])
    assert raised.value.details["field"] == "items[0].evidence[0].lines"
    with pytest.raises(InvalidParams) as raised:
        cite("bad2", lines=[1, 1], quote="turn two")
    assert raised.value.details["field"] == "items[0].evidence[0].quote"


def test_an_item_refused_while_planning_is_named_by_its_place_in_the_call(engine, owner, state_dir):
    """Of many items or citations, the error names the one refused, as the parameter reader's errors do."""
    first = engine.remember(owner, {"requestId": "m1", "items": [claim("A.", "turn one")]})
    [held] = engine.get_record(owner, first["items"][0]["id"])["frontmatter"]["evidence"]
    engine.save_page(owner, page("p1", "Dana"))
    good = claim("Fine.", "fine")
    refused = {
        "items[1].evidence[1].source": {"text": "B.", "claimKind": "fact",
                                        "evidence": [{"source": held["source"]}, {"source": "src_elsewhere"}]},
        "items[1].evidence[0].lines": {"text": "B.", "claimKind": "fact",
                                       "evidence": [{"source": held["source"], "lines": [2, 3]}]},
        "items[1].evidence[0].quote": {"text": "B.", "claimKind": "fact",
                                       "evidence": [{"source": held["source"], "quote": "turn two"}]},
        "items[1].subject": claim("B.", "b", subject="Nobody"),
        "items[1].replaces": claim("B.", "b", kind="correction", replaces="cl_elsewhere"),
        "items[1].from": {"relation": "works_at", "from": "Nobody", "to": "Dana", "excerpt": "b"},
        "items[1].relation": {"relation": "admires", "from": "Dana", "to": "Dana", "excerpt": "b"},
        "items[1].claimKind": claim("B.", "b", kind="rumour"),
        "items[1]": {"relation": "works_at", "from": "Dana", "to": "Dana", "excerpt": "b"},  # no organization
    }
    before = vault_snapshot(private_dir(state_dir))
    for field, item in refused.items():
        with pytest.raises((InvalidParams, NotFound)) as raised:
            engine.remember(owner, {"requestId": "m2", "items": [good, item]})
        assert raised.value.details["field"] == field
    with pytest.raises(NotFound) as raised:
        engine.remember(owner, {"requestId": "m3", "subject": "Nobody", "items": [good]})
    assert raised.value.details["field"] == "subject"
    with pytest.raises(NotFound) as raised:
        engine.save_page(owner, page("p2", "Ravi", evidence=[{"excerpt": "x"}, {"source": "src_elsewhere"}]))
    assert raised.value.details["field"] == "evidence[1].source"
    assert vault_snapshot(private_dir(state_dir)) == before


def test_long_excerpts_are_cited_by_line_range_without_a_copied_quote(engine, owner):
    excerpt = "\n".join(f"Transcript line {n} with enough words to be long." for n in range(40))
    saved = engine.save_page(owner, page("p1", "Long meeting", type_="event", evidence=[{"excerpt": excerpt}]))
    [citation] = engine.get_record(owner, saved["id"])["frontmatter"]["evidence"]
    assert citation["lines"] == [1, 40] and "quote" not in citation


def test_flush_saves_derive_a_stable_request_id(engine, owner):
    first = engine.save_page(owner, {"flushId": "f-1", "type": "note", "title": "Flush note", "body": "x"})
    retry = engine.save_page(owner, {"flushId": "f-1", "type": "note", "title": "Flush note", "body": "x"})
    other = engine.save_page(owner, {"flushId": "f-2", "type": "note", "title": "Flush note", "body": "x"})
    assert first["requestId"] == retry["requestId"] and first["publicationId"] == retry["publicationId"]
    assert other["requestId"] != first["requestId"]
    with pytest.raises(InvalidParams) as raised:
        engine.save_page(owner, {"flushId": "bad id", "type": "note", "title": "x"})
    assert raised.value.details["field"] == "flushId"


def test_a_rollback_whose_manifest_went_missing_is_finished_once_it_is_back(state_dir, monkeypatch):
    """Found by the fault harness (manifest-deleted, one CI run in many): a publication failed after the
    manifest named it, and its rollback marked it rolled back before putting the manifest's checkpoint back.
    vault.json was moved away at that moment, so the checkpoint stayed; once vault.json was back, the store
    was unavailable for good ("the vault checkpoint 2 conflicts with the database (1)")."""
    from engine.access.authority import AgentCaller
    from engine.core.errors import StoreUnavailable
    from engine.core.faults import Faults
    from engine.service import Engine
    from engine.store.store import Store

    with Engine(state_dir, watch=False, faults=Faults("acknowledged:2:enospc")) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("first", "Dana"))
        manifest = only_store(state_dir) / "vault.json"
        aside = state_dir.root / "vault.json.aside"
        set_checkpoint = Store.set_checkpoint

        def moved_away_first(store, seq):  # the rollback's checkpoint: the manifest is gone right then
            if seq == 1 and manifest.exists():
                os.replace(manifest, aside)
            set_checkpoint(store, seq)

        monkeypatch.setattr(Store, "set_checkpoint", moved_away_first)
        request = {"requestId": "second", "subject": "Dana", "items": [claim("Dana likes tea.", "Tea, always.")]}
        with pytest.raises(StoreUnavailable):
            engine.remember(owner, request)
        monkeypatch.undo()
        os.replace(aside, manifest)  # the owner puts it back

        retried = engine.remember(owner, request)

        # Left pending, the publication was finished by recovery; the retry got its receipt, nothing twice.
        assert engine.get_record(owner, retried["items"][0]["id"])["status"] == "current"
        assert [state for _, state in publications(state_dir)] == ["applied", "applied"]
        assert publications(state_dir)[1][0] == retried["publicationId"]


@pytest.mark.parametrize("fault", ["journaled:2:enospc", "installed:3:enospc", "checkpointed:2:enospc",
                                   "acknowledged:2:enospc", "installed:2:erofs"])
def test_a_disk_that_refuses_a_step_gives_a_clear_error_and_leaves_nothing(state_dir, fault):
    """Found by the fault harness: a full disk or read-only vault surfaced as an internal error."""
    from engine.access.authority import AgentCaller
    from engine.core.errors import StoreUnavailable
    from engine.core.faults import Faults
    from engine.service import Engine

    with Engine(state_dir, watch=False, faults=Faults(fault)) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("first", "Dana"))
        before = vault_snapshot(private_dir(state_dir))
        request = {"requestId": "second", "subject": "Dana", "items": [claim("Dana likes tea.", "Tea, always.")]}
        with pytest.raises(StoreUnavailable) as refused:
            engine.remember(owner, request)
        assert refused.value.details["errno"] == ("EROFS" if "erofs" in fault else "ENOSPC")
        assert vault_snapshot(private_dir(state_dir)) == before
        journal = ["applied"] if fault.startswith("journaled") else ["applied", "rolled_back"]
        assert [state for _, state in publications(state_dir)] == journal
        retried = engine.remember(owner, request)  # the fault fired once: the same request now succeeds
        assert engine.get_record(owner, retried["items"][0]["id"])["status"] == "current"


@pytest.mark.parametrize("edited", [False, True], ids=["the-engine's-own", "edited-meanwhile"])
def test_the_watcher_reporting_a_rename_before_the_install_is_told_judges_it_once_the_install_is(
        engine, owner, monkeypatch, edited):
    """The watcher can report a file moved in before the lane records the stat it installed: that report is
    the engine's own install (no catch-up, no search waiting for the lane) unless the file changed since."""
    from engine.core import files as files_module

    engine.save_page(owner, page("r0", "Warm-up"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    replace = os.replace
    reported = []

    def renamed_then_reported(source, target):
        replace(source, target)  # os.replace is every caller's: vault.json's too, outside the vault
        relpath = os.path.relpath(target, runtime.store.vault)
        if relpath.startswith("private/pages/"):
            reported.append(relpath)
            runtime.mark_dirty(relpath)  # as the watcher thread would, before the lane hears of the install

    installed = runtime.publisher.on_installed

    def edited_before_told(partition, path, info):  # an editor saving right after the install's own stat
        if edited and info is not None:
            target = runtime.store.partition_root(partition) / path
            target.write_bytes(target.read_bytes() + b"\nEdited by hand.\n")
        installed(partition, path, info)

    runtime.publisher.on_installed = edited_before_told
    with runtime._dirty_lock:
        runtime._dirty.pop("private", None)
    monkeypatch.setattr(files_module.os, "replace", renamed_then_reported)
    engine.save_page(owner, page("r1", "Dana"))
    monkeypatch.undo()
    assert reported == ["private/pages/people/dana.md"]
    with runtime._dirty_lock:
        dirty = runtime._dirty.get("private")
    assert (dirty is not None and "pages/people/dana.md" in dirty) == edited
    assert not runtime._renaming


def test_the_records_a_client_writes_are_checked_as_their_bytes_read_back(engine, owner):
    """A page with aliases, tags, fields and evidence, its revision, claims with validity and a correction,
    a relationship: each checked as the copy its bytes read back as (its typed view built once, for the plan and
    the catalog), with the findings the record asked for gets."""
    with records_checked_as_read() as added:
        dana = engine.save_page(owner, page("p1", "Dana Whitaker", aliases=["Dana", "D. W."], tags=["family"],
                                            fields={"birthday": "1990-04-01"}, body="No trailing newline"))
        engine.save_page(owner, page("p2", "Northwind", type_="organization"))
        engine.save_page(owner, {**page("p3", "Dana Whitaker", aliases=["Dana"]), "id": dana["id"],
                                 "expectedRevision": 1})
        first = engine.remember(owner, {"requestId": "m1", "subject": "Dana", "items": [
            claim("Dana prefers Friday notes.", "send me the notes every Friday", kind="preference",
                  validFrom="2026-01-05"),
            {"relation": "works_at", "from": "Dana", "to": "Northwind", "excerpt": "I work at Northwind"}]})
        engine.remember(owner, {"requestId": "m2", "items": [
            claim("Dana prefers Monday notes.", "Mondays now", kind="correction", replaces=first["items"][0]["id"])]})
    assert sorted({path.split("/")[0] for _, _, path in added}) == ["claims", "pages", "relationships"]
    assert_checked_as_read(added)


def test_a_revision_keeps_what_it_leaves_out_and_empties_what_it_gives_empty(engine, owner):
    """A rename names the title alone: the body stays, as aliases, tags and fields do; "" empties it."""
    created = engine.save_page(owner, page("p1", "Atlas", type_="project", body="Moving to Postgres.",
                                           aliases=["atlas-db"], tags=["infra"]))
    renamed = engine.save_page(owner, {"requestId": "p2", "type": "project", "title": "Atlas migration",
                                       "id": created["id"], "expectedRevision": 1})
    read = engine.get_record(owner, created["id"])
    assert (read["revision"], read["title"], read["body"]) == (2, "Atlas migration", "Moving to Postgres.\n")
    assert (read["frontmatter"]["aliases"], read["frontmatter"]["tags"]) == (["atlas-db"], ["infra"])
    retried = engine.save_page(owner, {"requestId": "p2", "type": "project", "title": "Atlas migration",
                                       "id": created["id"], "expectedRevision": 1})
    assert retried == renamed
    engine.save_page(owner, {"requestId": "p3", "type": "project", "title": "Atlas migration", "body": "",
                             "tags": [], "id": created["id"], "expectedRevision": 2})
    read = engine.get_record(owner, created["id"])
    assert (read["revision"], read["body"], "tags" in read["frontmatter"]) == (3, "", False)
    fresh = engine.save_page(owner, {"requestId": "p4", "type": "note", "title": "No body yet"})
    assert engine.get_record(owner, fresh["id"])["body"] == ""
