"""A revision planned on a version its writer did not read is refused, an edit made outside the engine included.

The owner's editor keeps a record's ``revision`` number when it saves (docs/record-format.md, "Edits made
outside the engine"), so a number alone cannot tell the version an agent read from the owner's edit: a
number names the version the engine first kept with it, and ``expectedSha256`` names a version exactly.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from engine.core.errors import Conflict, InvalidParams, StaleRevision
from engine.store.inputs import parse_page_input
from engine.store.publication import request_hash
from tests.helpers import page, private_dir, vault_snapshot


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def edit_by_hand(path: Path, old: bytes, new: bytes) -> bytes:
    """What an editor saves: the body changed, ``revision`` and ``updated_at`` as they were."""
    edited = path.read_bytes().replace(old, new)
    assert edited != path.read_bytes()
    path.write_bytes(edited)
    return edited


def kept(engine, owner, record_id: str) -> list[tuple[int, str, str]]:
    return [(entry["revision"], entry["sha256"], entry["origin"])
            for entry in engine.history(owner, record_id)["revisions"]]


def dana(engine, owner, state_dir) -> tuple[str, Path]:
    created = engine.save_page(owner, page("r1", "Dana", body="Original."))
    return created["id"], private_dir(state_dir) / engine.get_record(owner, created["id"])["path"]


def test_a_revision_by_number_after_an_outside_edit_is_refused_and_changes_nothing(engine, owner, state_dir):
    page_id, path = dana(engine, owner, state_dir)
    edited = edit_by_hand(path, b"Original.", b"Edited by hand.")
    read = engine.get_record(owner, page_id)  # the next exact read notices the edit
    assert (read["revision"], read["sha256"], read["body"]) == (1, sha(edited), "Edited by hand.\n")
    vault, history = vault_snapshot(private_dir(state_dir)), kept(engine, owner, page_id)

    with pytest.raises(StaleRevision) as raised:
        engine.save_page(owner, page("r2", "Dana", body="Ours.", id=page_id, expectedRevision=1))
    assert raised.value.reason == "stale_revision"
    assert raised.value.details == {"field": "expectedRevision", "id": page_id, "revision": 1, "sha256": sha(edited),
                                    "editedOutside": True}
    assert "edited outside the engine" in raised.value.message and "expectedSha256" in raised.value.message
    assert vault_snapshot(private_dir(state_dir)) == vault
    assert kept(engine, owner, page_id) == history
    assert [origin for _, _, origin in history] == ["publication", "external"]


def test_a_revision_naming_the_version_read_by_its_sha256_is_accepted(engine, owner, state_dir):
    page_id, path = dana(engine, owner, state_dir)
    edited = edit_by_hand(path, b"Original.", b"Edited by hand.")
    read = engine.get_record(owner, page_id)

    revised = engine.save_page(owner, page("r2", "Dana", body="Ours.", id=page_id, expectedRevision=1,
                                           expectedSha256=read["sha256"].upper()))
    assert revised["revision"] == 2
    assert engine.get_record(owner, page_id)["body"] == "Ours.\n"
    assert [(revision, origin) for revision, _, origin in kept(engine, owner, page_id)] == [
        (1, "publication"), (1, "external"), (2, "publication")]
    assert kept(engine, owner, page_id)[1][1] == sha(edited)  # the owner's edit stays in the history, as 1.1


def test_a_sha256_read_before_the_edit_is_refused(engine, owner, state_dir):
    page_id, path = dana(engine, owner, state_dir)
    before = engine.get_record(owner, page_id)["sha256"]
    edited = edit_by_hand(path, b"Original.", b"Edited by hand.")

    with pytest.raises(StaleRevision) as raised:
        engine.save_page(owner, page("r2", "Dana", body="Ours.", id=page_id, expectedRevision=1,
                                     expectedSha256=before))
    assert (raised.value.details["revision"], raised.value.details["sha256"]) == (1, sha(edited))
    assert raised.value.details["field"] == "expectedSha256"
    assert path.read_bytes() == edited


@pytest.mark.parametrize("named", ["number", "sha256"])
def test_an_edit_not_yet_noticed_when_the_write_arrives_is_compared_on_disk(engine, owner, state_dir, monkeypatch,
                                                                             named):
    """The edit lands after the lane caught the catalog up (the watcher has not reported it): the catalog
    still holds the version the agent read, and only the file's bytes tell it was replaced."""
    page_id, path = dana(engine, owner, state_dir)
    read = engine.get_record(owner, page_id)
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    prepare = runtime.prepare
    edited = path.read_bytes().replace(b"Original.", b"Edited by hand meanwhile.")

    def prepare_then_edit(partition):
        prepare(partition)
        path.write_bytes(edited)

    monkeypatch.setattr(runtime, "prepare", prepare_then_edit)
    expected = {"expectedRevision": 1} if named == "number" else {"expectedRevision": 1,
                                                                   "expectedSha256": read["sha256"]}
    with pytest.raises(StaleRevision) as raised:
        engine.save_page(owner, page("r2", "Dana", body="Ours.", id=page_id, **expected))
    monkeypatch.undo()
    assert raised.value.details["sha256"] == sha(edited)
    assert path.read_bytes() == edited
    assert sha(edited) in [digest for _, digest, _ in kept(engine, owner, page_id)]  # seen, and kept


def test_a_retry_of_an_accepted_revision_still_returns_its_receipt_after_an_outside_edit(engine, owner, state_dir):
    page_id, path = dana(engine, owner, state_dir)
    by_number = page("r2", "Dana", body="Second.", id=page_id, expectedRevision=1)
    first = engine.save_page(owner, by_number)
    edited = edit_by_hand(path, b"Second.", b"Second, edited by hand.")

    assert engine.save_page(owner, by_number)["publicationId"] == first["publicationId"]
    with pytest.raises(StaleRevision):  # a new write by number is refused: revision 2 was edited
        engine.save_page(owner, page("r3", "Dana", body="Third.", id=page_id, expectedRevision=2))
    assert path.read_bytes() == edited

    by_sha = page("r3b", "Dana", body="Third.", id=page_id, expectedRevision=2,
                  expectedSha256=engine.get_record(owner, page_id)["sha256"])
    third = engine.save_page(owner, by_sha)
    assert third["revision"] == 3
    edit_by_hand(path, b"Third.", b"Third, edited by hand.")
    assert engine.save_page(owner, by_sha)["publicationId"] == third["publicationId"]


def test_a_page_made_outside_the_engine_is_revised_by_number_until_an_edit_keeps_its_number(engine, owner,
                                                                                            state_dir):
    engine.save_page(owner, page("r0", "Someone"))  # the store and its partition exist
    path = private_dir(state_dir) / "pages" / "notes" / "by-hand.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\nformat: knowledge-record-v1\nid: pg_by_hand\nrevision: 1\nkind: page\ntitle: By hand\n"
                    "type: note\nrecorded_at: 2026-01-05T09:00:00Z\nupdated_at: 2026-01-05T09:00:00Z\n"
                    "scope: private\nlifecycle: active\n---\nWritten in an editor.\n", encoding="utf-8")
    assert engine.get_record(owner, "pg_by_hand")["revision"] == 1  # its only version: a number is enough
    revised = engine.save_page(owner, page("r1", "By hand", "note", body="Revised.", id="pg_by_hand",
                                           expectedRevision=1))
    assert revised["revision"] == 2

    edited = edit_by_hand(path, b"Revised.", b"Revised, then edited.")
    with pytest.raises(StaleRevision):
        engine.save_page(owner, page("r2", "By hand", "note", body="Again.", id="pg_by_hand", expectedRevision=2))
    assert path.read_bytes() == edited


@pytest.mark.parametrize("extra, message", [
    ({"expectedSha256": "a" * 64}, "expectedSha256 only applies with id and expectedRevision"),
    ({"id": "pg_x", "expectedRevision": 1, "expectedSha256": "a" * 63}, "expectedSha256 must be 64 hexadecimal"),
    ({"id": "pg_x", "expectedRevision": 1, "expectedSha256": "g" * 64}, "expectedSha256 must be 64 hexadecimal"),
])
def test_a_bad_expected_sha256_is_invalid_and_writes_nothing(engine, owner, state_dir, extra, message):
    engine.save_page(owner, page("r0", "Someone"))
    vault = vault_snapshot(private_dir(state_dir))
    with pytest.raises(InvalidParams) as raised:
        engine.save_page(owner, page("r1", "Dana", **extra))
    assert raised.value.details["field"] == "expectedSha256" and message in raised.value.message
    assert vault_snapshot(private_dir(state_dir)) == vault


def test_a_revision_by_number_digests_as_it_did_before_expected_sha256_and_the_sha256_is_part_of_it(engine, owner,
                                                                                                     state_dir):
    by_number = {"requestId": "r2", "type": "note", "title": "Plain", "body": "x", "id": "pg_01",
                 "expectedRevision": 1}
    # the digest this request had before expectedSha256 existed, so a retry of a revision published then
    # still gets its receipt
    assert request_hash("save_page", parse_page_input(by_number).digest_params()) == (
        "beaaa6f90444e0b7951c07dcc1c7cb4c40771bd4acced70e198c11625c4e979b")

    page_id, path = dana(engine, owner, state_dir)
    read = engine.get_record(owner, page_id)["sha256"]
    revision = page("r2", "Dana", body="Ours.", id=page_id, expectedRevision=1, expectedSha256=read)
    first = engine.save_page(owner, revision)
    assert engine.save_page(owner, {**revision, "expectedSha256": read.upper()})["publicationId"] == \
        first["publicationId"]  # the same version named, in either case
    with pytest.raises(Conflict):  # the same request id naming another version is another request
        engine.save_page(owner, {**revision, "expectedSha256": "0" * 64})
