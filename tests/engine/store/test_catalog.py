"""How the catalog follows the disk: edits, renames, deletions, invalid and unsafe files, limits, ontology."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from engine.operator.browse import list_records
from engine.store import record_rows as record_rows_module
from engine.store import walk as walk_module
from engine.core.errors import InvalidParams, LimitExceeded, NotFound, StoreUnavailable
from tests.helpers import claim, conversation, only_store, operator, page, private_dir

SESSION = "6f1c2a4e-8d3b-4f6a-9c1e-2b7d5a9e0f13"
NOW = "2026-01-05T09:00:00Z"
RECIPE_ONTOLOGY = """\
format: knowledge-ontology-v1
page_types:
  recipe:
    label: Recipe
    filing: [pages/recipes/]
    fields:
      cuisine: {type: string}
"""


# --- helpers ------------------------------------------------------------------------


def render(frontmatter: dict[str, Any], body: str = "Written by hand.\n") -> bytes:
    return ("---\n" + yaml.safe_dump(frontmatter, sort_keys=False) + "---\n" + body).encode("utf-8")


def envelope(record_id: str, kind: str, title: str, **extra: Any) -> dict[str, Any]:
    return {"format": "knowledge-record-v1", "id": record_id, "revision": 1, "kind": kind, "title": title,
            "recorded_at": NOW, "updated_at": NOW, "scope": "private", "lifecycle": "active", **extra}


def place(root: Path, relpath: str, data: bytes) -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def saved_page(engine, owner, title: str = "Dana Whitaker", type_: str = "person", **extra: Any) -> tuple[str, Path]:
    receipt = engine.save_page(owner, page(f"save-{title.replace(' ', '-')}", title, type_, **extra))
    relpath = engine.get_record(owner, receipt["id"])["path"]
    return receipt["id"], private_dir(engine.state) / relpath


def remembered_source(engine, owner) -> str:
    """A retained source id in the private partition (from an ordinary claim)."""
    receipt = engine.remember(owner, {"requestId": "claim-src", "items": [claim("Dana likes Fridays.", "Fridays!")]})
    return engine.get_record(owner, receipt["items"][0]["id"])["frontmatter"]["evidence"][0]["source"]


def findings_at(engine, caller, relpath: str) -> list[dict[str, Any]]:
    return [item for item in engine.diagnostics(caller)["findings"] if item.get("path") == relpath]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- external edits, renames, deletions ------------------------------------------------------


def test_external_edit_with_revision_bump_is_read_and_recorded(engine, owner):
    record_id, path = saved_page(engine, owner)
    edited = path.read_bytes().replace(b"revision: 1", b"revision: 2").replace(b"Body text.", b"Changed by hand.")
    path.write_bytes(edited)

    record = engine.get_record(owner, record_id)
    assert (record["revision"], record["body"], record["status"]) == (2, "Changed by hand.\n", "current")
    assert record["sha256"] == sha(edited)
    history = engine.history(owner, record_id)
    assert [(r["revision"], r["origin"]) for r in history["revisions"]] == [(1, "publication"), (2, "external")]
    assert history["revisions"][1]["publicationId"] is None
    assert history["revisions"][1]["sha256"] == sha(edited)
    relpath = str(path.relative_to(private_dir(engine.state)))
    assert {"kind": "edited", "path": relpath} in [{"kind": e["kind"], "path": e["path"]} for e in history["events"]]


def test_external_edit_without_revision_bump_is_seen(engine, owner):
    record_id, path = saved_page(engine, owner)
    edited = path.read_bytes().replace(b"Body text.", b"A longer body changed by hand.")
    path.write_bytes(edited)

    record = engine.get_record(owner, record_id)
    assert record["revision"] == 1
    assert record["body"] == "A longer body changed by hand.\n"
    assert record["sha256"] == sha(edited)
    history = engine.history(owner, record_id)
    assert sha(edited) in [r["sha256"] for r in history["revisions"]]
    assert "edited" in [event["kind"] for event in history["events"]]


def newest_first(engine) -> list[tuple[str, str]]:
    """(id, updatedAt) of main's records as the window's Recent lists them."""
    listed = list_records(engine, operator(), {"order": "updated"})["records"]
    return [(record["id"], record["updatedAt"]) for record in listed]


def test_an_outside_edit_that_keeps_the_revision_number_is_listed_as_updated_when_first_seen(engine, owner):
    edited_id, edited = saved_page(engine, owner, "Edited in a text editor")
    other_id, other = saved_page(engine, owner, "Left alone")
    for path, revised, when in ((edited, b"revision: 2", b"2020-01-05T09:00:00Z"),
                                (other, b"revision: 2", b"2020-06-01T09:00:00Z")):  # dated by hand, long ago
        data = path.read_bytes().replace(b"revision: 1", revised)
        path.write_bytes(re.sub(rb"updated_at: .*", b"updated_at: '" + when + b"'", data))
    engine.get_record(owner, edited_id), engine.get_record(owner, other_id)
    assert newest_first(engine) == [(other_id, "2020-06-01T09:00:00Z"), (edited_id, "2020-01-05T09:00:00Z")]

    by_hand = edited.read_bytes().replace(b"Body text.", b"Changed in the editor.")  # number and date kept
    edited.write_bytes(by_hand)
    assert engine.get_record(owner, edited_id)["revision"] == 2
    seen = engine.history(owner, edited_id)["revisions"][-1]
    assert (seen["revision"], seen["origin"], seen["sha256"]) == (2, "external", sha(by_hand))
    assert newest_first(engine) == [(edited_id, seen["observedAt"]), (other_id, "2020-06-01T09:00:00Z")]
    assert edited.read_bytes() == by_hand  # the owner's file is not rewritten

    (only_store(engine.state) / "vault" / "ontology.yaml").write_text(RECIPE_ONTOLOGY, encoding="utf-8")
    engine.get_record(owner, edited_id)  # every file read again against the new ontology: dated the same
    assert newest_first(engine) == [(edited_id, seen["observedAt"]), (other_id, "2020-06-01T09:00:00Z")]


def test_a_file_made_outside_or_revised_outside_with_a_new_number_keeps_its_own_date(engine, owner):
    saved_page(engine, owner)
    place(private_dir(engine.state), "pages/people/made-by-hand.md",
          render(envelope("pg_by_hand", "page", "Made by hand", type="person")))
    engine.get_record(owner, "pg_by_hand")
    assert ("pg_by_hand", NOW) in newest_first(engine)
    path = private_dir(engine.state) / "pages/people/made-by-hand.md"
    path.write_bytes(path.read_bytes().replace(b"revision: 1", b"revision: 2").replace(b"Written", b"Rewritten"))
    assert engine.get_record(owner, "pg_by_hand")["revision"] == 2
    assert ("pg_by_hand", NOW) in newest_first(engine)  # its own updated_at says when: the editor's


def test_an_external_edit_of_the_title_changes_the_names_a_lookup_finds(engine, owner):
    record_id, path = saved_page(engine, owner)
    assert b"title: Dana Whitaker\n" in path.read_bytes()
    path.write_bytes(path.read_bytes().replace(b"title: Dana Whitaker\n", b"title: Dana Lindqvist\n"))

    assert [match["id"] for match in engine.lookup(owner, "Dana Lindqvist")["matches"]] == [record_id]
    assert engine.lookup(owner, "Dana Whitaker")["matches"] == []


def test_same_size_edit_with_preserved_mtime_is_seen_by_content_hash(engine, owner):
    """Tools like ``cp -p`` or rsync keep size and mtime; only the content hash tells the change."""
    record_id, path = saved_page(engine, owner)
    before = os.stat(path)
    edited = path.read_bytes().replace(b"scope: private", b"scope: privatX")
    assert len(edited) == before.st_size
    path.write_bytes(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

    with pytest.raises(NotFound):
        engine.get_record(owner, record_id)
    relpath = str(path.relative_to(private_dir(engine.state)))
    assert "scope_invalid" in [f["code"] for f in findings_at(engine, owner, relpath)]
    assert path.read_bytes() == edited


def test_a_copied_file_with_the_same_bytes_gets_its_new_stamp_without_being_read_as_an_edit(engine, owner,
                                                                                          monkeypatch):
    """A copied, restored or checked-out vault: a new inode, ctime and mtime, the same bytes."""
    record_id, path = saved_page(engine, owner)
    other_id, other = saved_page(engine, owner, "Bruno Keller")
    events = len(engine.history(owner, record_id)["events"])
    copy = path.with_name("copy.tmp")
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)
    other.write_bytes(other.read_bytes().replace(b"Body text.", b"Body text!"))  # a same-size edit beside it
    parsed: list[str] = []
    real = record_rows_module.parse_record
    monkeypatch.setattr(record_rows_module, "parse_record", lambda data, relpath: parsed.append(relpath) or real(
        data, relpath))

    assert engine.get_record(owner, record_id)["sha256"] == sha(path.read_bytes())
    assert engine.get_record(owner, other_id)["body"] == "Body text!\n"

    relpath = str(path.relative_to(private_dir(engine.state)))
    assert parsed == [str(other.relative_to(private_dir(engine.state)))]  # the copy was hashed, not parsed
    assert len(engine.history(owner, record_id)["events"]) == events  # and is no edit
    info = os.stat(path)
    assert engine.on_store(owner, lambda rt, a: tuple(rt.catalog.db.one(
        "SELECT ino, mtime_ns, ctime_ns FROM catalog WHERE partition = ? AND path = ?", (a.partition, relpath)))) \
        == (info.st_ino, info.st_mtime_ns, info.st_ctime_ns)


def test_renamed_file_is_still_found_by_id(engine, owner):
    record_id, path = saved_page(engine, owner)
    root = private_dir(engine.state)
    old = str(path.relative_to(root))
    (root / "pages" / "archive").mkdir()
    path.rename(root / "pages" / "archive" / "dana.md")

    record = engine.get_record(owner, record_id)
    assert record["path"] == "pages/archive/dana.md"
    assert record["status"] == "current"
    events = engine.history(owner, record_id)["events"]
    assert [(e["kind"], e["path"], e["detail"]) for e in events] == [("renamed", "pages/archive/dana.md", old)]


def test_a_file_deleted_while_the_partition_is_walked_is_not_a_store_failure(engine, owner, monkeypatch):
    """Found by the external-edit harness: an editor deleting a file between the walk's directory listing
    and its stat made the whole operation fail as store_unavailable (ENOENT); a folder likewise."""
    kept, _ = saved_page(engine, owner, "Kept Page")
    gone, gone_path = saved_page(engine, owner, "Gone Page")
    folder = place(private_dir(engine.state), "pages/scratch/n.md",
                   render(envelope("pg_scratch", "page", "Scratch", type="note"))).parent
    listdir = os.scandir

    def listing_then_delete(path):
        if str(path) == str(folder):  # removed after its parent listed it, before its own listing
            shutil.rmtree(folder)
        with listdir(path) as iterator:
            entries = list(iterator)
        for entry in entries:  # listed, then deleted before its stat
            if entry.path == str(gone_path):
                os.unlink(entry.path)
        return _Listing(entries)

    monkeypatch.setattr(walk_module.os, "scandir", listing_then_delete)
    assert engine.get_record(owner, kept)["status"] == "current"
    for vanished in (gone, "pg_scratch"):
        with pytest.raises(NotFound):
            engine.get_record(owner, vanished)
    monkeypatch.undo()  # os.scandir is every module's: the git queue walks the vault with it too


class _Listing(list):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_deleted_file_is_not_found_but_history_keeps_its_revisions(engine, owner):
    record_id, path = saved_page(engine, owner)
    receipt = engine.save_page(owner, page("revise", "Dana Whitaker", body="Second.", id=record_id,
                                           expectedRevision=1))
    path.unlink()

    with pytest.raises(NotFound):
        engine.get_record(owner, record_id)
    history = engine.history(owner, record_id)
    assert [r["revision"] for r in history["revisions"]] == [1, 2]
    assert history["revisions"][1]["publicationId"] == receipt["publicationId"]
    assert [(e["kind"], e["path"]) for e in history["events"]] == [("deleted", str(path.relative_to(
        private_dir(engine.state))))]
    assert engine.get_record(owner, record_id, 1)["body"] == "Body text.\n"


# --- invalid files ----------------------------------------------------------------------------


def _malformed_yaml() -> bytes:
    return b"---\nformat: knowledge-record-v1\nid: pg_broken\ntitle: a: b\n---\nBody\n"


def _claim_without_evidence() -> bytes:
    return render(envelope("cl_no_evidence", "claim", "No evidence", claim_kind="fact", assertion_origin="user"))


def _unknown_kind() -> bytes:
    return render(envelope("mm_unknown_kind", "memo", "A memo"))


def _bad_field_value() -> bytes:
    return render(envelope("pg_bad_birthday", "page", "Bad Birthday", type="person",
                           fields={"birthday": "next spring"}))


def _not_utf8() -> bytes:
    return render(envelope("pg_latin1", "page", "Latin one", type="note"), body="") + b"caf\xe9\n"


def _oversized() -> bytes:
    head = render(envelope("pg_huge", "page", "Huge", type="note"), body="")
    return head + b"x" * (5_000_001 - len(head))


@pytest.mark.parametrize(("relpath", "build", "code", "where", "record_id", "readable"), [
    ("pages/broken.md", _malformed_yaml, "syntax", {"line": 4}, "pg_broken", False),
    ("claims/no-evidence.md", _claim_without_evidence, "evidence_missing", {"field": "evidence"},
     "cl_no_evidence", True),
    ("pages/memo.md", _unknown_kind, "envelope", {"field": "kind"}, "mm_unknown_kind", True),
    ("pages/people/bad.md", _bad_field_value, "invalid_field", {"field": "fields.birthday"}, "pg_bad_birthday", True),
    ("pages/latin1.md", _not_utf8, "syntax", {}, "pg_latin1", False),
    ("pages/huge.md", _oversized, "too_large", {}, "pg_huge", False),
], ids=["malformed-yaml", "claim-without-evidence", "unknown-kind", "bad-field-value", "not-utf8", "oversized"])
def test_invalid_file_stays_on_disk_and_is_diagnosed(engine, owner, relpath, build: Callable[[], bytes], code,
                                                     where, record_id, readable):
    valid_id, _ = saved_page(engine, owner)
    data = build()
    path = place(private_dir(engine.state), relpath, data)

    found = findings_at(engine, owner, relpath)
    assert code in [f["code"] for f in found], found
    matching = next(f for f in found if f["code"] == code)
    assert all(matching.get(key) == value for key, value in where.items()), matching
    assert matching["message"]
    if readable:
        assert engine.get_record(owner, record_id)["status"] == "invalid"
    else:
        with pytest.raises(NotFound):
            engine.get_record(owner, record_id)
    assert engine.get_record(owner, valid_id)["status"] == "current"
    assert path.read_bytes() == data


def test_duplicate_ids_hide_the_record_until_one_file_is_removed(engine, owner):
    record_id, path = saved_page(engine, owner)
    root = private_dir(engine.state)
    copy = root / "pages" / "people" / "dana-copy.md"
    shutil.copyfile(path, copy)

    with pytest.raises(NotFound) as raised:
        engine.get_record(owner, record_id)
    assert raised.value.details.get("duplicate") is True
    duplicates = {f["path"] for f in engine.diagnostics(owner)["findings"] if f["code"] == "duplicate_id"}
    assert duplicates == {str(path.relative_to(root)), "pages/people/dana-copy.md"}

    copy.unlink()
    assert engine.get_record(owner, record_id)["path"] == str(path.relative_to(root))
    assert not [f for f in engine.diagnostics(owner)["findings"] if f["code"] == "duplicate_id"]


# --- scope -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("scope", "code"), [
    (None, "scope_missing"),
    ("public", "scope_invalid"),
    ("conversation:not-a-uuid", "scope_invalid"),
    (f"conversation:{SESSION}", "scope_mismatch"),
])
def test_record_with_wrong_scope_is_withheld_never_relabeled(engine, owner, scope, code):
    saved_page(engine, owner)
    frontmatter = envelope("pg_scoped", "page", "Scoped", type="note")
    if scope is None:
        del frontmatter["scope"]
    else:
        frontmatter["scope"] = scope
    data = render(frontmatter)
    path = place(private_dir(engine.state), "pages/scoped.md", data)

    with pytest.raises(NotFound):
        engine.get_record(owner, "pg_scoped")
    assert [f["code"] for f in findings_at(engine, owner, "pages/scoped.md")] == [code]
    engine.save_page(owner, page("after", "Ravi Menon"))
    assert path.read_bytes() == data


def test_published_record_moved_to_another_scope_is_withheld(engine, owner):
    record_id, path = saved_page(engine, owner)
    edited = path.read_bytes().replace(b"scope: private", f"scope: conversation:{SESSION}".encode())
    path.write_bytes(edited)

    with pytest.raises(NotFound):
        engine.get_record(owner, record_id)
    relpath = str(path.relative_to(private_dir(engine.state)))
    assert "scope_mismatch" in [f["code"] for f in findings_at(engine, owner, relpath)]
    assert path.read_bytes() == edited


# --- classification by path ----------------------------------------------------------------


def test_untyped_page_is_classified_by_path_without_rewriting(engine, owner):
    engine.save_page(owner, page("org", "Northwind Labs", "organization"))
    untyped = envelope("pg_untyped_ada", "page", "Ada Lovelace", fields={"role": "Analyst"})
    person_bytes = render(untyped)
    person = place(private_dir(engine.state), "pages/people/ada.md", person_bytes)
    note_bytes = render({**untyped, "id": "pg_untyped_memo", "title": "Ada memo"})
    note = place(private_dir(engine.state), "pages/ada-memo.md", note_bytes)

    assert engine.get_record(owner, "pg_untyped_ada")["status"] == "current"
    assert "type" not in engine.get_record(owner, "pg_untyped_ada")["frontmatter"]
    assert engine.get_record(owner, "pg_untyped_memo")["status"] == "invalid"
    memo_findings = findings_at(engine, owner, "pages/ada-memo.md")
    assert [f["code"] for f in memo_findings] == ["unknown_field"]
    assert "note" in memo_findings[0]["message"]
    # works_at needs a person on its 'from' end: the path-classified page qualifies.
    receipt = engine.remember(owner, {"requestId": "rel", "items": [
        {"relation": "works_at", "from": "Ada Lovelace", "to": "Northwind Labs", "excerpt": "Ada works there."}]})
    assert engine.get_record(owner, receipt["items"][0]["id"])["status"] == "current"
    assert person.read_bytes() == person_bytes
    assert note.read_bytes() == note_bytes


# --- unsafe entries ------------------------------------------------------------------------


def test_symlinked_file_and_directory_are_reported_never_read(engine, owner, tmp_path):
    valid_id, _ = saved_page(engine, owner)
    outside = tmp_path / "outside"
    place(outside, "linked.md", render(envelope("pg_via_file_link", "page", "Via link", type="note")))
    place(outside, "folder/inner.md", render(envelope("pg_via_dir_link", "page", "Via dir", type="note")))
    root = private_dir(engine.state)
    (root / "pages").mkdir(exist_ok=True)
    os.symlink(outside / "linked.md", root / "pages" / "linked.md")
    os.symlink(outside / "folder", root / "pages" / "folder")

    for record_id in ("pg_via_file_link", "pg_via_dir_link"):
        with pytest.raises(NotFound):
            engine.get_record(owner, record_id)
    symlinks = {f["path"] for f in engine.diagnostics(owner)["findings"] if f["code"] == "symlink"}
    assert symlinks == {"pages/linked.md", "pages/folder"}
    assert engine.get_record(owner, valid_id)["status"] == "current"


@pytest.mark.parametrize("directory", ["claims", "sources"])
def test_a_write_through_a_symlinked_directory_is_refused_as_a_symlink_and_writes_nothing(engine, owner, tmp_path,
                                                                                         directory):
    """A symlinked ``claims/`` or ``sources/`` was reported as "the file changed on disk": it is a symlink."""
    saved_page(engine, owner)
    outside = tmp_path / "outside"
    outside.mkdir()
    root = private_dir(engine.state)
    if (root / directory).exists():
        shutil.rmtree(root / directory)
    os.symlink(outside, root / directory)

    with pytest.raises(StoreUnavailable) as raised:
        engine.remember(owner, {"requestId": "through-link", "items": [
            {"text": "Dana likes tea.", "claimKind": "preference", "excerpt": "I like tea."}]})

    error = raised.value
    assert error.details["problem"] == "symlink" and error.details["component"] == directory
    assert f"private/{directory} is a symlink" in error.message and "changed on disk" not in error.message
    assert list(outside.iterdir()) == []
    assert engine.diagnostics(owner)["pendingPublications"] == 0
    assert directory in {f["path"] for f in engine.diagnostics(owner)["findings"] if f["code"] == "symlink"}
    # The same request succeeds once the directory is real again.
    (root / directory).unlink()
    receipt = engine.remember(owner, {"requestId": "through-link", "items": [
        {"text": "Dana likes tea.", "claimKind": "preference", "excerpt": "I like tea."}]})
    assert engine.get_record(owner, receipt["items"][0]["id"])["status"] == "current"


def test_hardlinked_file_from_outside_is_rejected(engine, owner, tmp_path):
    saved_page(engine, owner)
    outside = place(tmp_path / "outside", "linked.md", render(envelope("pg_hardlinked", "page", "Linked",
                                                                       type="note")))
    os.link(outside, private_dir(engine.state) / "pages" / "hardlinked.md")

    with pytest.raises(NotFound):
        engine.get_record(owner, "pg_hardlinked")
    found = findings_at(engine, owner, "pages/hardlinked.md")
    assert found and "hard link" in found[0]["message"]


def test_hardlinking_a_published_record_rejects_both_paths(engine, owner):
    """Both names share one inode with two links: neither may be read."""
    record_id, path = saved_page(engine, owner)
    root = private_dir(engine.state)
    os.link(path, root / "pages" / "people" / "dana-link.md")

    with pytest.raises(NotFound):
        engine.get_record(owner, record_id)
    rejected = {f["path"] for f in engine.diagnostics(owner)["findings"] if "hard link" in f["message"]}
    assert rejected == {str(path.relative_to(root)), "pages/people/dana-link.md"}


def test_directories_deeper_than_eight_levels_are_reported(engine, owner):
    saved_page(engine, owner)
    root = private_dir(engine.state)
    place(root, "pages/a/b/c/d/e/f/ok.md", render(envelope("pg_seven_deep", "page", "Seven deep", type="note")))
    place(root, "pages/a/b/c/d/e/f/g/h/i/deep.md", render(envelope("pg_too_deep", "page", "Too deep",
                                                                    type="note")))

    assert engine.get_record(owner, "pg_seven_deep")["status"] == "current"
    with pytest.raises(NotFound):
        engine.get_record(owner, "pg_too_deep")
    too_deep = [f["path"] for f in engine.diagnostics(owner)["findings"] if f["code"] == "too_deep"]
    assert too_deep == ["pages/a/b/c/d/e/f/g"]


def test_scan_over_the_entry_limit_fails_instead_of_answering_partially(engine, owner, monkeypatch):
    record_id, _ = saved_page(engine, owner)
    monkeypatch.setattr(walk_module, "MAX_SCAN_ENTRIES", 20)
    extra = private_dir(engine.state) / "pages" / "bulk"
    for index in range(25):
        place(extra, f"n{index}.md", render(envelope(f"pg_bulk_{index}", "page", f"Bulk {index}", type="note")))

    with pytest.raises(LimitExceeded):
        engine.get_record(owner, record_id)
    with pytest.raises(LimitExceeded):
        engine.diagnostics(owner)

    shutil.rmtree(extra)
    assert engine.get_record(owner, record_id)["status"] == "current"
    with pytest.raises(NotFound):
        engine.get_record(owner, "pg_bulk_0")


# --- cross-record checks on external files ----------------------------------------------------


def _relationship(record_id: str, to_id: str, from_id: str, source_id: str) -> bytes:
    return render(envelope(record_id, "relationship", "Dana works at", relation="works_at", assertion_origin="user",
                           evidence=[{"source": source_id}], **{"from": from_id, "to": to_id}), body="")


def test_relationship_file_with_wrong_endpoint_type_is_invalid(engine, owner):
    dana, _ = saved_page(engine, owner)
    northwind, _ = saved_page(engine, owner, "Northwind Labs", "organization")
    idea, _ = saved_page(engine, owner, "Blue-green deployment", "concept")
    source_id = remembered_source(engine, owner)
    root = private_dir(engine.state)
    place(root, "relationships/good.md", _relationship("rl_good", northwind, dana, source_id))
    place(root, "relationships/bad.md", _relationship("rl_bad", idea, dana, source_id))

    assert engine.get_record(owner, "rl_good")["status"] == "current"
    assert engine.get_record(owner, "rl_bad")["status"] == "invalid"
    found = findings_at(engine, owner, "relationships/bad.md")
    assert [(f["code"], f.get("field")) for f in found] == [("endpoint_type", "to")]
    assert not findings_at(engine, owner, "relationships/good.md")


def test_evidence_citing_a_missing_source_is_invalid(engine, owner):
    remembered_source(engine, owner)
    place(private_dir(engine.state), "claims/unsourced.md", render(envelope(
        "cl_unsourced", "claim", "Unsourced", claim_kind="fact", assertion_origin="user",
        evidence=[{"source": "src_DOESNOTEXIST"}])))

    assert engine.get_record(owner, "cl_unsourced")["status"] == "invalid"
    found = findings_at(engine, owner, "claims/unsourced.md")
    assert [(f["code"], f.get("field")) for f in found] == [("evidence_source", "evidence[0]")]


# --- private ontology extensions -----------------------------------------------------------


def test_private_ontology_extension_adds_a_page_type(engine, owner):
    saved_page(engine, owner)
    (only_store(engine.state) / "vault" / "ontology.yaml").write_text(RECIPE_ONTOLOGY, encoding="utf-8")

    receipt = engine.save_page(owner, page("recipe", "Pasta al limone", "recipe", fields={"cuisine": "Italian"}))
    record = engine.get_record(owner, receipt["id"])
    assert record["status"] == "current"
    assert record["path"].startswith("pages/recipes/")
    assert engine.diagnostics(owner)["ontology"]["sources"] == ["shipped", "vault/ontology.yaml"]


def test_adding_an_ontology_extension_revalidates_existing_files(engine, owner):
    saved_page(engine, owner)
    data = render(envelope("pg_recipe", "page", "Pasta al limone", type="recipe", fields={"cuisine": "Italian"}))
    place(private_dir(engine.state), "pages/recipes/pasta.md", data)
    assert engine.get_record(owner, "pg_recipe")["status"] == "invalid"
    assert [f["code"] for f in findings_at(engine, owner, "pages/recipes/pasta.md")] == ["unknown_type"]

    extensions = only_store(engine.state) / "vault" / "ontology.yaml"
    extensions.write_text(RECIPE_ONTOLOGY, encoding="utf-8")
    assert engine.get_record(owner, "pg_recipe")["status"] == "current"
    assert not findings_at(engine, owner, "pages/recipes/pasta.md")

    extensions.unlink()
    assert engine.get_record(owner, "pg_recipe")["status"] == "invalid"


def test_ontology_extension_does_not_apply_to_conversations(engine, owner):
    saved_page(engine, owner)
    (only_store(engine.state) / "vault" / "ontology.yaml").write_text(RECIPE_ONTOLOGY, encoding="utf-8")
    chat = conversation(owner.token, SESSION)
    receipt = engine.save_page(chat, page("chat-note", "Chat note", "note"))
    partition = only_store(engine.state) / "vault" / "conversations" / SESSION
    assert (partition / engine.get_record(chat, receipt["id"])["path"]).is_file()

    with pytest.raises(InvalidParams):
        engine.save_page(chat, page("chat-recipe", "Pasta al limone", "recipe"))
    place(partition, "pages/recipes/pasta.md", render(envelope(
        "pg_chat_recipe", "page", "Pasta al limone", type="recipe", scope=f"conversation:{SESSION}")))
    assert engine.get_record(chat, "pg_chat_recipe")["status"] == "invalid"
    assert [f["code"] for f in findings_at(engine, chat, "pages/recipes/pasta.md")] == ["unknown_type"]
    assert engine.diagnostics(chat)["ontology"]["sources"] == ["shipped"]


def test_diagnostics_stream_verify_retained_originals(engine, owner, state_dir):
    receipt = engine.remember(owner, {"requestId": "m1", "items": [
        {"text": "A fact.", "claimKind": "fact", "excerpt": "the original words"},
    ]})
    assert engine.diagnostics(owner)["findings"] == []
    source = engine.get_record(owner, receipt["items"][0]["id"])["frontmatter"]["evidence"][0]["source"]
    original = private_dir(state_dir) / "sources" / f"{source}.txt"
    original.write_bytes(b"the altered words!")  # same size as before, different bytes
    codes = [f["code"] for f in engine.diagnostics(owner)["findings"]]
    assert "source_changed" in codes
    original.write_bytes(b"the original words")
    assert engine.diagnostics(owner)["findings"] == []
