"""Exact reads and history: current and historical revisions, attribution, bad input, the watcher."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import InvalidParams, NotFound
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.helpers import claim, page, private_dir, wait_for


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def disk_bytes(engine: Engine, caller: AgentCaller, record_id: str) -> bytes:
    return (private_dir(engine.state) / engine.get_record(caller, record_id)["path"]).read_bytes()


def revised_page(engine: Engine, owner: AgentCaller) -> tuple[str, bytes, dict[str, Any], dict[str, Any]]:
    """A person page at revision 2; returns its id, revision 1's bytes and both receipts."""
    first = engine.save_page(owner, page("dana-1", "Dana Whitaker", body="First body.", fields={"role": "Ops"}))
    old = disk_bytes(engine, owner, first["id"])
    second = engine.save_page(owner, page("dana-2", "Dana Whitaker", body="Second body.", id=first["id"],
                                          expectedRevision=1))
    return first["id"], old, first, second


def found(engine: Engine, caller: AgentCaller, record_id: str) -> dict[str, Any] | None:
    try:
        return engine.get_record(caller, record_id)
    except NotFound:
        return None


# --- current and exact revision reads ----------------------------------------------------------


def test_current_read_returns_frontmatter_body_and_hash(engine, owner):
    receipt = engine.save_page(owner, page("dana", "Dana Whitaker", body="Runs operations.",
                                           aliases=["Dana"], fields={"role": "Head of Operations"}))
    record = engine.get_record(owner, receipt["id"])

    assert record["status"] == "current"
    assert (record["id"], record["revision"], record["kind"], record["title"]) == (
        receipt["id"], 1, "page", "Dana Whitaker")
    assert record["body"] == "Runs operations.\n"
    fm = record["frontmatter"]
    assert (fm["type"], fm["scope"], fm["lifecycle"], fm["aliases"]) == ("person", "private", "active", ["Dana"])
    assert fm["fields"] == {"role": "Head of Operations"}
    assert record["sha256"] == sha(disk_bytes(engine, owner, receipt["id"]))
    assert record["findings"] == []


def test_exact_revision_read_returns_the_old_bytes(engine, owner):
    record_id, old, _, _ = revised_page(engine, owner)

    historical = engine.get_record(owner, record_id, 1)
    assert historical["status"] == "historical"
    assert historical["sha256"] == sha(old)
    assert (historical["revision"], historical["body"]) == (1, "First body.\n")
    current = engine.get_record(owner, record_id, 2)
    assert (current["status"], current["body"]) == ("current", "Second body.\n")
    assert current["sha256"] == engine.get_record(owner, record_id)["sha256"] != sha(old)


def test_externally_written_revision_is_readable_exactly(engine, owner):
    receipt = engine.save_page(owner, page("dana", "Dana Whitaker"))
    path = private_dir(engine.state) / engine.get_record(owner, receipt["id"])["path"]
    original = path.read_bytes()
    edited = original.replace(b"revision: 1", b"revision: 2").replace(b"Body text.", b"Edited by hand.")
    path.write_bytes(edited)

    assert engine.get_record(owner, receipt["id"], 2)["sha256"] == sha(edited)
    assert engine.get_record(owner, receipt["id"], 2)["status"] == "current"
    assert engine.get_record(owner, receipt["id"], 1)["sha256"] == sha(original)
    assert engine.get_record(owner, receipt["id"], 1)["status"] == "historical"


def test_nonexistent_revision_or_record_is_not_found(engine, owner):
    record_id, _, _, _ = revised_page(engine, owner)

    with pytest.raises(NotFound) as raised:
        engine.get_record(owner, record_id, 3)
    assert raised.value.details == {"field": "revision", "id": record_id, "revision": 3}
    with pytest.raises(NotFound):
        engine.get_record(owner, "pg_00000000000000000000000000")
    with pytest.raises(NotFound):
        engine.get_record(owner, "pg_00000000000000000000000000", 1)
    with pytest.raises(NotFound):
        engine.history(owner, "pg_00000000000000000000000000")


def test_superseded_claim_stays_readable(engine, owner):
    engine.save_page(owner, page("atlas", "Atlas Migration", "project"))
    first = engine.remember(owner, {"requestId": "cut-1", "subject": "Atlas Migration", "items": [
        claim("The cut-over is planned for January 15.", "Cut-over is pencilled in for the 15th.",
              "project_state")]})
    old_id = first["items"][0]["id"]
    correction = engine.remember(owner, {"requestId": "cut-2", "items": [
        claim("The cut-over moved to January 22.", "The cut-over slips a week.", "correction", replaces=old_id)]})
    new_id = correction["items"][0]["id"]

    old = engine.get_record(owner, old_id)
    assert (old["status"], old["revision"], old["frontmatter"]["lifecycle"]) == ("superseded", 2, "superseded")
    assert old["body"] == "The cut-over is planned for January 15.\n"
    assert engine.get_record(owner, old_id, 1)["frontmatter"]["lifecycle"] == "active"
    assert engine.get_record(owner, old_id, 1)["status"] == "historical"
    new = engine.get_record(owner, new_id)
    assert (new["status"], new["frontmatter"]["replaces"]) == ("current", old_id)
    assert new["frontmatter"]["subject"] == old["frontmatter"]["subject"]


# --- history -----------------------------------------------------------------------------------


def test_history_lists_every_revision_with_attribution_and_publication(engine, owner):
    laptop = AgentCaller(owner.token, {"kind": "owner-private"}, instance="laptop-main")
    record_id, _, first, second = revised_page(engine, owner)
    third = engine.save_page(laptop, page("dana-3", "Dana Whitaker", body="Third.", id=record_id,
                                          expectedRevision=2))

    history = engine.history(owner, record_id)
    assert history["id"] == record_id
    assert [r["revision"] for r in history["revisions"]] == [1, 2, 3]
    assert [r["origin"] for r in history["revisions"]] == ["publication"] * 3
    assert [r["publicationId"] for r in history["revisions"]] == [
        first["publicationId"], second["publicationId"], third["publicationId"]]
    assert len({r["publicationId"] for r in history["revisions"]}) == 3
    assert history["revisions"][0]["attribution"] == {"agent": "main", "audience": "owner-private"}
    assert history["revisions"][2]["attribution"] == {
        "agent": "main", "instance": "laptop-main", "audience": "owner-private"}
    assert len({r["sha256"] for r in history["revisions"]}) == 3
    assert history["events"] == []


def test_history_keeps_each_agents_attribution(engine, owner):
    helper_token = engine.add_agent("helper", owner=True)
    helper = AgentCaller(helper_token, {"kind": "owner-private"})
    mine = engine.save_page(owner, page("mine", "Dana Whitaker"))
    theirs = engine.save_page(helper, page("theirs", "Dana Whitaker"))

    mine_history = engine.history(owner, mine["id"])["revisions"]
    theirs_history = engine.history(helper, theirs["id"])["revisions"]
    assert mine_history[0]["attribution"]["agent"] == "main"
    assert theirs_history[0]["attribution"]["agent"] == "helper"
    assert theirs_history[0]["publicationId"] == theirs["publicationId"]


# --- invalid parameters -----------------------------------------------------------------------


@pytest.mark.parametrize("record_id", ["", "../etc/passwd", "pg/one", " pg_x", "x" * 200, None, 7])
def test_invalid_id_is_invalid_params(engine, owner, record_id):
    engine.save_page(owner, page("dana", "Dana Whitaker"))
    with pytest.raises(InvalidParams) as raised:
        engine.get_record(owner, record_id)
    assert raised.value.details["field"] == "id"
    with pytest.raises(InvalidParams):
        engine.history(owner, record_id)


@pytest.mark.parametrize("revision", [0, -1, True, "1", 1.5])
def test_invalid_revision_is_invalid_params(engine, owner, revision):
    receipt = engine.save_page(owner, page("dana", "Dana Whitaker"))
    with pytest.raises(InvalidParams) as raised:
        engine.get_record(owner, receipt["id"], revision)
    assert raised.value.details["field"] == "revision"


# --- the watcher -------------------------------------------------------------------------------


def _watched(state_dir: StateDir) -> tuple[Engine, AgentCaller]:
    watched = Engine(state_dir, watch=True)
    return watched, AgentCaller(watched.add_agent("main", owner=True), {"kind": "owner-private"})


def test_watcher_picks_up_an_external_edit(state_dir):
    watched, owner = _watched(state_dir)
    try:
        receipt = watched.save_page(owner, page("dana", "Dana Whitaker"))
        assert watched.runtime(watched.resolver.effective("main", create=False)).watching
        path = private_dir(state_dir) / watched.get_record(owner, receipt["id"])["path"]
        path.write_bytes(path.read_bytes().replace(b"revision: 1", b"revision: 2")
                         .replace(b"Body text.", b"Seen by the watcher."))

        record = wait_for(lambda: (r := found(watched, owner, receipt["id"])) and
                          r["body"] == "Seen by the watcher.\n" and r)
        assert (record["revision"], record["status"]) == (2, "current")
        history = wait_for(lambda: (h := watched.history(owner, receipt["id"])) and len(h["revisions"]) == 2 and h)
        assert history["revisions"][1]["origin"] == "external"
    finally:
        watched.close()


def test_watcher_picks_up_a_new_file_saved_atomically(state_dir):
    """A record saved the way editors save (hidden temp file, then rename) becomes readable."""
    watched, owner = _watched(state_dir)
    try:
        watched.save_page(owner, page("dana", "Dana Whitaker"))
        notes = private_dir(state_dir) / "pages" / "notes"
        notes.mkdir(parents=True, exist_ok=True)
        temp = notes / ".new-note.md.tmp"
        temp.write_text(
            "---\nformat: knowledge-record-v1\nid: pg_watched_note\nrevision: 1\nkind: page\ntitle: Watched\n"
            "type: note\nrecorded_at: 2026-01-05T09:00:00Z\nupdated_at: 2026-01-05T09:00:00Z\nscope: private\n"
            "lifecycle: active\n---\nDropped in while the engine ran.\n", encoding="utf-8")
        os.replace(temp, notes / "new-note.md")

        record = wait_for(lambda: found(watched, owner, "pg_watched_note"))
        assert (record["status"], record["path"]) == ("current", "pages/notes/new-note.md")
        assert record["body"] == "Dropped in while the engine ran.\n"
    finally:
        watched.close()


def test_health_answers_while_the_database_refuses_writes(state_dir):
    """Found by the disk-full harness: health failed on a full disk because it cached a check result."""
    with Engine(state_dir, watch=True) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("p", "Dana"))
        engine.remember(owner, {"requestId": "c", "subject": "Dana", "items": [claim("Dana likes tea.", "tea")]})
        runtime = engine.runtime(engine.registry.own_store_of("main"))
        runtime.call(lambda: runtime.store.db.execute("PRAGMA query_only = ON"))
        try:
            report = engine.health(owner)
        finally:
            runtime.call(lambda: runtime.store.db.execute("PRAGMA query_only = OFF"))
        assert report["ok"] and report["files"]["ok"] == 2
