"""Owner-approved recall (knowledge_recall), recall candidates and the pre-compaction flush plan."""

from __future__ import annotations

import json
import re
import subprocess
import uuid

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import Conflict, Denied, InvalidParams, LimitExceeded, NotFound, WritesDisabled
from engine.core.ids import parse_timestamp
from engine.core.params import parse_request_id
from engine.memory.recall import (
    FLUSH_LOOKUP_TOOLS, FLUSH_PERSISTENCE_TOOLS, flush_plan, flush_request_id, recall_candidates, set_recall,
    validate_flush_plan,
)
from tests.helpers import claim, conversation, only_store, operator, page, private_dir, vault_snapshot

SESSION = str(uuid.uuid4())
GRANTED = "chat:granted"
BLOCK = {"summary": "Dana wants status notes on Fridays.", "triggers": ["status notes", "Dana"],
         "importance": 7, "projects": ["atlas"]}


def approve(engine, caller, record_id, block=None, **extra):
    return set_recall(engine, caller, {"id": record_id, "recall": dict(BLOCK if block is None else block), **extra})


def frontmatter(engine, caller, record_id, revision=None):
    return engine.get_record(caller, record_id, revision)["frontmatter"]


def saved_page(engine, caller, title="Dana Whitaker", body="Dana runs operations at Northwind."):
    return engine.save_page(caller, page(f"p-{uuid.uuid4()}", title, body=body))["id"]


def saved_claim(engine, caller, text="Dana prefers Friday status notes", **extra):
    receipt = engine.remember(caller, {"requestId": f"m-{uuid.uuid4()}",
                                       "items": [claim(text, "please send status notes on Fridays", **extra)]})
    return receipt["items"][0]["id"]


def granted(engine, owner, access):
    engine.registry.set_grant("main", GRANTED, access)
    return conversation(owner.token, SESSION, key=GRANTED)


def candidates(engine, caller, **params):
    return recall_candidates(engine, caller, {"mode": "trigger", **params})["candidates"]


# --- approving ------------------------------------------------------------------------------


def test_owner_private_approval_publishes_the_next_revision_with_a_service_written_block(engine, owner):
    record_id = saved_page(engine, owner)
    receipt = approve(engine, owner, record_id)
    assert receipt["id"] == record_id and receipt["revision"] == 2
    assert receipt["records"] == [{"id": record_id, "revision": 2, "kind": "page"}]
    assert receipt["publicationId"].startswith("pub_") and receipt["git"]["state"] in ("pending", "committed")
    fm = frontmatter(engine, owner, record_id)
    assert fm["revision"] == 2
    assert fm["recall"] == {**BLOCK, "approved_by": "owner-private", "approved_at": fm["recall"]["approved_at"]}
    assert parse_timestamp(fm["recall"]["approved_at"]) is not None
    assert receipt["recall"] == fm["recall"]
    assert engine.get_record(owner, record_id)["body"] == engine.get_record(owner, record_id, 1)["body"]


def test_approval_defaults_importance_to_five_and_lists_to_empty(engine, owner):
    record_id = saved_page(engine, owner)
    approve(engine, owner, record_id, {"summary": "  Dana runs operations.  "})
    assert frontmatter(engine, owner, record_id)["recall"] | {"approved_at": None} == {
        "summary": "Dana runs operations.", "triggers": [], "importance": 5, "projects": [],
        "approved_by": "owner-private", "approved_at": None}


def test_every_kind_of_current_record_can_be_approved(engine, owner):
    engine.save_page(owner, page("a", "Dana", type_="person"))
    engine.save_page(owner, page("b", "Northwind", type_="organization"))
    receipt = engine.remember(owner, {"requestId": "m", "items": [
        claim("Dana prefers Friday notes", "Fridays please"),
        {"relation": "works_at", "from": "Dana", "to": "Northwind", "excerpt": "I work at Northwind"}]})
    for item, kind in zip(receipt["items"], ("claim", "relationship")):
        assert approve(engine, owner, item["id"])["records"][0]["kind"] == kind
        assert frontmatter(engine, owner, item["id"])["recall"]["approved_by"] == "owner-private"


def test_a_read_and_save_grant_approves_and_the_approval_still_says_owner_private(engine, owner):
    record_id = saved_page(engine, owner)
    chat = granted(engine, owner, "read-and-save")
    assert approve(engine, chat, record_id)["revision"] == 2
    fm = frontmatter(engine, owner, record_id)
    assert fm["recall"]["approved_by"] == "owner-private"
    assert fm["attribution"] == {"agent": "main", "audience": "conversation", "session": SESSION}
    assert fm["scope"] == "private"


@pytest.mark.parametrize("who", ["read grant", "no grant", "operator", "child", "helper"])
def test_only_the_owner_approves(engine, owner, state_dir, who):
    record_id = saved_page(engine, owner)
    callers = {
        "read grant": lambda: granted(engine, owner, "read"),
        "no grant": lambda: conversation(owner.token, SESSION, key="chat:other"),
        "operator": lambda: operator("main"),
        "child": lambda: AgentCaller(owner.token, {"kind": "child", "root": {"kind": "owner-private"}}),
        "helper": lambda: AgentCaller(engine.add_agent("helper"), {"kind": "owner-private"}),
    }
    caller = callers[who]()
    before = vault_snapshot(only_store(state_dir) / "vault")
    with pytest.raises(Denied):
        approve(engine, caller, record_id)
    assert vault_snapshot(only_store(state_dir) / "vault") == before
    assert "recall" not in frontmatter(engine, owner, record_id)
    assert not (only_store(state_dir) / "vault" / "conversations").exists()


def test_writes_disabled_refuses_approvals(engine, owner, state_dir):
    record_id = saved_page(engine, owner)
    state_dir.config.write_text(json.dumps({"writesEnabled": False}), encoding="utf-8")
    with pytest.raises(WritesDisabled):
        approve(engine, owner, record_id)
    with pytest.raises(WritesDisabled):
        set_recall(engine, owner, {"id": record_id, "recall": None})
    assert frontmatter(engine, owner, record_id)["revision"] == 1


def test_source_claims_cannot_be_approved(engine, owner):
    record_id = saved_claim(engine, owner, assertionOrigin="source")
    with pytest.raises(InvalidParams) as raised:
        approve(engine, owner, record_id)
    assert raised.value.details["assertionOrigin"] == "source"
    assert "cannot be approved" in raised.value.message
    assert frontmatter(engine, owner, record_id)["revision"] == 1


def test_agent_inference_claims_cannot_be_approved(engine, owner, state_dir):
    record_id = saved_claim(engine, owner)
    path = private_dir(state_dir) / engine.get_record(owner, record_id)["path"]
    path.write_text(path.read_text(encoding="utf-8").replace("assertion_origin: user",
                                                             "assertion_origin: agent_inference"), encoding="utf-8")
    assert frontmatter(engine, owner, record_id)["assertion_origin"] == "agent_inference"
    with pytest.raises(InvalidParams) as raised:
        approve(engine, owner, record_id)
    assert raised.value.details["assertionOrigin"] == "agent_inference"


def test_source_relationships_cannot_be_approved_either(engine, owner):
    engine.save_page(owner, page("a", "Dana", type_="person"))
    engine.save_page(owner, page("b", "Northwind", type_="organization"))
    receipt = engine.remember(owner, {"requestId": "m", "items": [
        {"relation": "works_at", "from": "Dana", "to": "Northwind", "excerpt": "staff list",
         "assertionOrigin": "source"}]})
    with pytest.raises(InvalidParams):
        approve(engine, owner, receipt["items"][0]["id"])


@pytest.mark.parametrize("key", ["approved_by", "approved_at", "approvedBy", "approvedAt"])
def test_callers_cannot_set_the_service_fields(engine, owner, key):
    record_id = saved_page(engine, owner)
    with pytest.raises(InvalidParams) as raised:
        approve(engine, owner, record_id, {**BLOCK, key: "owner-private"})
    assert raised.value.details["field"] == f"recall.{key}"
    assert "written by the service" in raised.value.message
    assert "recall" not in frontmatter(engine, owner, record_id)


@pytest.mark.parametrize("block, field", [
    ({}, "recall.summary"),
    ({"summary": ""}, "recall.summary"),
    ({"summary": "   "}, "recall.summary"),
    ({"summary": 42}, "recall.summary"),
    ({"summary": "ok", "triggers": "atlas"}, "recall.triggers"),
    ({"summary": "ok", "triggers": ["two\nlines"]}, "recall.triggers"),
    ({"summary": "ok", "triggers": [""]}, "recall.triggers"),
    ({"summary": "ok", "importance": 0}, "recall.importance"),
    ({"summary": "ok", "importance": 11}, "recall.importance"),
    ({"summary": "ok", "importance": True}, "recall.importance"),
    ({"summary": "ok", "importance": "5"}, "recall.importance"),
    ({"summary": "ok", "importance": 5.5}, "recall.importance"),
    ({"summary": "ok", "colour": "red"}, "recall.colour"),
])
def test_invalid_blocks_are_refused_with_their_field(engine, owner, block, field):
    record_id = saved_page(engine, owner)
    with pytest.raises(InvalidParams) as raised:
        approve(engine, owner, record_id, block)
    assert raised.value.details["field"] == field
    assert frontmatter(engine, owner, record_id)["revision"] == 1


# Oversize is always limit_exceeded (issue 13): these three were invalid_params before.
@pytest.mark.parametrize("block, field", [
    ({"summary": "x" * 501}, "recall.summary"),
    ({"summary": "ok", "triggers": [f"t{n}" for n in range(21)]}, "recall.triggers"),
    ({"summary": "ok", "projects": [f"p{n}" for n in range(21)]}, "recall.projects"),
])
def test_oversize_blocks_are_limit_exceeded_with_their_field(engine, owner, block, field):
    record_id = saved_page(engine, owner)
    with pytest.raises(LimitExceeded) as raised:
        approve(engine, owner, record_id, block)
    assert raised.value.details["field"] == field
    assert frontmatter(engine, owner, record_id)["revision"] == 1


def test_the_limits_themselves_are_accepted(engine, owner):
    record_id = saved_page(engine, owner)
    block = {"summary": "x" * 500, "triggers": [f"t{n}" for n in range(20)], "importance": 10,
             "projects": [f"p{n}" for n in range(20)]}
    approve(engine, owner, record_id, block)
    stored = frontmatter(engine, owner, record_id)["recall"]
    assert len(stored["summary"]) == 500 and len(stored["triggers"]) == 20 and len(stored["projects"]) == 20
    approve(engine, owner, record_id, {"summary": "low", "importance": 1})
    assert frontmatter(engine, owner, record_id)["recall"]["importance"] == 1


@pytest.mark.parametrize("params, field", [
    ({"recall": BLOCK}, "id"),
    ({"id": "../etc/passwd", "recall": BLOCK}, "id"),
    ({"id": "pg_x"}, "recall"),
    ({"id": "pg_x", "recall": "yes"}, "recall"),
    ({"id": "pg_x", "recall": BLOCK, "requestId": "no spaces"}, "requestId"),
    ({"id": "pg_x", "recall": BLOCK, "expectedRevision": 1}, "expectedRevision"),
])
def test_malformed_parameters_are_refused(engine, owner, params, field):
    with pytest.raises(InvalidParams) as raised:
        set_recall(engine, owner, params)
    assert raised.value.details["field"] == field


def test_only_current_records_are_approved(engine, owner):
    with pytest.raises(NotFound):
        approve(engine, owner, "pg_nothing_here")
    old = saved_claim(engine, owner, "Dana prefers Monday notes")
    engine.remember(owner, {"requestId": "fix", "items": [claim("Dana prefers Friday notes", "Fridays",
                                                                 kind="correction", replaces=old)]})
    with pytest.raises(Conflict) as raised:
        approve(engine, owner, old)
    assert raised.value.details["status"] == "superseded"


def test_an_agent_without_a_store_has_nothing_to_approve_and_gets_no_store(engine, owner):
    with pytest.raises(NotFound):
        approve(engine, owner, "pg_01JD8PZ3A6QF0W2C9E4R7T1M5K")
    assert engine.stores() == []


def test_clearing_removes_the_block_in_a_new_revision(engine, owner):
    record_id = saved_page(engine, owner)
    approve(engine, owner, record_id)
    cleared = set_recall(engine, owner, {"id": record_id, "recall": None})
    assert cleared["revision"] == 3 and cleared["recall"] is None
    assert "recall" not in frontmatter(engine, owner, record_id)
    assert frontmatter(engine, owner, record_id, 2)["recall"]["summary"] == BLOCK["summary"]
    assert candidates(engine, owner) == []
    with pytest.raises(InvalidParams) as raised:
        set_recall(engine, owner, {"id": record_id, "recall": None, "requestId": "clear-again"})
    assert "no recall block" in raised.value.message


def test_a_retry_with_the_same_request_id_returns_the_original_receipt(engine, owner):
    record_id = saved_page(engine, owner)
    first = approve(engine, owner, record_id, requestId="approve-1")
    again = approve(engine, owner, record_id, requestId="approve-1")
    assert again == first and first["requestId"] == "approve-1"
    assert frontmatter(engine, owner, record_id)["revision"] == 2
    with pytest.raises(Conflict):
        approve(engine, owner, record_id, {**BLOCK, "summary": "Something else."}, requestId="approve-1")


def test_without_a_request_id_an_identical_retry_is_recognised(engine, owner):
    record_id = saved_page(engine, owner)
    first = approve(engine, owner, record_id)
    assert re.fullmatch(r"recall:[0-9a-f]{40}", first["requestId"])
    assert approve(engine, owner, record_id) == first
    assert frontmatter(engine, owner, record_id)["revision"] == 2
    cleared = set_recall(engine, owner, {"id": record_id, "recall": None})
    assert set_recall(engine, owner, {"id": record_id, "recall": None}) == cleared
    assert frontmatter(engine, owner, record_id)["revision"] == 3


def test_a_second_approval_publishes_a_new_revision_and_history_keeps_both(engine, owner):
    record_id = saved_page(engine, owner)
    first = approve(engine, owner, record_id)
    second = approve(engine, owner, record_id, {**BLOCK, "summary": "Dana wants notes on Thursdays now."})
    assert (first["revision"], second["revision"]) == (2, 3)
    assert second["publicationId"] != first["publicationId"]
    assert frontmatter(engine, owner, record_id, 2)["recall"]["summary"] == BLOCK["summary"]
    assert frontmatter(engine, owner, record_id)["recall"]["summary"] == "Dana wants notes on Thursdays now."
    revisions = engine.history(owner, record_id)["revisions"]
    assert [entry["revision"] for entry in revisions] == [1, 2, 3]
    assert {entry["publicationId"] for entry in revisions[1:]} == {first["publicationId"], second["publicationId"]}


def test_an_approval_reaches_git_as_an_ordinary_publication(engine, owner, state_dir):
    record_id = saved_page(engine, owner)
    receipt = approve(engine, owner, record_id)
    resumed = engine.resume(owner)
    if resumed["state"] == "unavailable":  # no git on this machine: the receipt says so
        assert receipt["git"]["state"] == "unavailable"
        return
    assert resumed["state"] == "committed"
    vault = only_store(state_dir) / "vault"
    path = "private/" + engine.get_record(owner, record_id)["path"]
    committed = subprocess.run(["git", f"--git-dir={vault / '.git'}", "show", f"{resumed['commit']}:{path}"],
                               capture_output=True, check=True, timeout=60).stdout
    assert committed == (vault / path).read_bytes() and b"approved_by: owner-private" in committed
    assert approve(engine, owner, record_id)["git"] == {"state": "committed", "commit": resumed["commit"]}


def test_revising_a_page_keeps_its_approval(engine, owner):
    record_id = saved_page(engine, owner)
    approve(engine, owner, record_id)
    engine.save_page(owner, page("revise", "Dana Whitaker", body="New body.", id=record_id, expectedRevision=2))
    assert frontmatter(engine, owner, record_id)["recall"]["summary"] == BLOCK["summary"]
    assert [c["revision"] for c in candidates(engine, owner)] == [3]


def test_corrections_do_not_inherit_approval(engine, owner):
    old = saved_claim(engine, owner, "Dana prefers Monday notes")
    approve(engine, owner, old)
    assert [c["id"] for c in candidates(engine, owner)] == [old]
    receipt = engine.remember(owner, {"requestId": "fix", "items": [
        claim("Dana prefers Friday notes", "Fridays, not Mondays", kind="correction", replaces=old)]})
    new = receipt["items"][0]["id"]
    assert frontmatter(engine, owner, new)["replaces"] == old
    assert "recall" not in frontmatter(engine, owner, new)
    assert frontmatter(engine, owner, old)["lifecycle"] == "superseded"
    assert candidates(engine, owner) == []
    approve(engine, owner, new)
    assert [c["id"] for c in candidates(engine, owner)] == [new]


# --- candidates -----------------------------------------------------------------------------


def test_candidates_sort_by_importance_then_id_and_carry_only_the_summary(engine, owner):
    ids = {}
    for title, importance in (("Low", 1), ("High A", 9), ("Mid", 3), ("High B", 9)):
        ids[title] = saved_page(engine, owner, title=title, body=f"BODY OF {title} must never be injected")
        approve(engine, owner, ids[title], {"summary": f"Summary of {title}", "triggers": [title],
                                            "importance": importance})
    found = candidates(engine, owner)
    expected = sorted(ids.values(), key=lambda i: (-{"Low": 1, "High A": 9, "Mid": 3, "High B": 9}[
        next(t for t, v in ids.items() if v == i)], i))
    assert [c["id"] for c in found] == expected
    assert [c["importance"] for c in found] == [9, 9, 3, 1]
    first = found[0]
    title = next(t for t, v in ids.items() if v == first["id"])
    assert set(first) == {"id", "revision", "kind", "type", "title", "excerpt", "importance", "triggers", "projects",
                          "approvedAt"}
    assert first["excerpt"] == f"Summary of {title}" and first["title"] == title
    assert first["revision"] == 2 and first["kind"] == "page" and first["triggers"] == [title]
    assert first["approvedAt"] == frontmatter(engine, owner, first["id"])["recall"]["approved_at"]
    assert "BODY OF" not in json.dumps(found)


def test_claim_candidates_never_carry_the_ingested_excerpt(engine, owner):
    record_id = saved_claim(engine, owner)
    approve(engine, owner, record_id, {"summary": "Friday notes for Dana.", "triggers": ["notes"]})
    [found] = candidates(engine, owner)
    assert found["excerpt"] == "Friday notes for Dana."
    assert "please send" not in json.dumps(found)


def test_trigger_and_project_candidates_filter_on_their_lists(engine, owner):
    both = saved_page(engine, owner, title="Both")
    triggers_only = saved_page(engine, owner, title="Triggers only")
    projects_only = saved_page(engine, owner, title="Projects only")
    other_project = saved_page(engine, owner, title="Other project")
    approve(engine, owner, both, {"summary": "both", "triggers": ["t"], "projects": ["atlas"]})
    approve(engine, owner, triggers_only, {"summary": "triggers", "triggers": ["t"]})
    approve(engine, owner, projects_only, {"summary": "projects", "projects": ["atlas"]})
    approve(engine, owner, other_project, {"summary": "other", "projects": ["zephyr"]})
    saved_page(engine, owner, title="Never approved")

    def listed(**params):
        return {c["id"] for c in recall_candidates(engine, owner, params)["candidates"]}

    assert listed(mode="trigger") == {both, triggers_only}
    assert listed(mode="project") == {both, projects_only, other_project}
    assert listed(mode="project", project="atlas") == {both, projects_only}
    assert listed(mode="project", project="zephyr") == {other_project}
    assert listed(mode="project", project="unknown") == set()


def write_approved_notes(state_dir, count):
    """Approved notes written straight to disk (fast), importance cycling 1-10."""
    notes = private_dir(state_dir) / "pages" / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        (notes / f"limit-{n:03d}.md").write_text(
            "---\nformat: knowledge-record-v1\n"
            f"id: pg_limit_{n:03d}\nrevision: 1\nkind: page\ntitle: Note {n}\ntype: note\n"
            "recorded_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-01T00:00:00Z\nscope: private\n"
            "lifecycle: active\nrecall:\n"
            f"  summary: Summary {n}\n  triggers: [t{n}]\n  importance: {n % 10 + 1}\n  projects: [atlas]\n"
            "  approved_by: owner-private\n  approved_at: 2026-01-01T00:00:00Z\n"
            f"---\nBody {n}\n", encoding="utf-8")


def test_candidate_limits_default_to_48_and_stop_at_200(engine, owner, state_dir):
    saved_page(engine, owner)
    write_approved_notes(state_dir, 205)
    default = candidates(engine, owner)
    assert len(default) == 48
    assert [c["importance"] for c in default] == sorted((c["importance"] for c in default), reverse=True)
    everything = candidates(engine, owner, limit=200)
    assert len(everything) == 200 and everything[:48] == default
    assert [c["id"] for c in everything] == sorted(
        (c["id"] for c in everything), key=lambda i: (-(int(i[-3:]) % 10 + 1), i))
    assert len(candidates(engine, owner, mode="project", limit=5)) == 5
    for limit in (0, -1, True, "48", 4.5):
        with pytest.raises(InvalidParams) as raised:
            candidates(engine, owner, limit=limit)
        assert raised.value.details["field"] == "limit"
    with pytest.raises(LimitExceeded) as raised:  # over the maximum: limit_exceeded, like every oversize
        candidates(engine, owner, limit=201)
    assert raised.value.details["field"] == "limit"


@pytest.mark.parametrize("params, field", [
    ({}, "mode"),
    ({"mode": "keyword"}, "mode"),
    ({"mode": "trigger", "project": "atlas"}, "project"),
    ({"mode": "project", "project": ""}, "project"),
    ({"mode": "project", "project": ["atlas"]}, "project"),
    ({"mode": "trigger", "query": "x"}, "query"),
])
def test_malformed_candidate_queries_are_refused(engine, owner, params, field):
    with pytest.raises(InvalidParams) as raised:
        recall_candidates(engine, owner, params)
    assert raised.value.details["field"] == field


def test_candidates_follow_the_audience(engine, owner):
    record_id = saved_page(engine, owner)
    approve(engine, owner, record_id, {"summary": "s", "triggers": ["t"]})
    for access in ("read", "read-and-save"):
        assert [c["id"] for c in candidates(engine, granted(engine, owner, access))] == [record_id]
    assert candidates(engine, conversation(owner.token, SESSION, key="chat:ungranted")) == []
    child = AgentCaller(owner.token, {"kind": "child", "root": {"kind": "owner-private"}})
    assert [c["id"] for c in candidates(engine, child)] == [record_id]
    with pytest.raises(Denied):
        candidates(engine, operator("main"))
    with pytest.raises(Denied):
        candidates(engine, AgentCaller(owner.token, {"kind": "owner-private", "sandboxed": True}))


def test_an_ungranted_conversation_gets_none_even_of_its_own_records(engine, owner, state_dir):
    chat = conversation(owner.token, SESSION, key="chat:own")
    in_chat = saved_page(engine, chat, title="Chat page")
    path = only_store(state_dir) / "vault" / "conversations" / SESSION / engine.get_record(chat, in_chat)["path"]
    text = path.read_text(encoding="utf-8").replace(
        "lifecycle: active\n", "lifecycle: active\nrecall:\n  summary: s\n  triggers: [t]\n"
        "  approved_by: owner-private\n  approved_at: 2026-01-01T00:00:00Z\n")
    path.write_text(text, encoding="utf-8")
    assert frontmatter(engine, chat, in_chat)["recall"]["summary"] == "s"
    assert candidates(engine, chat) == []


def test_candidates_never_create_a_store(engine, state_dir):
    newcomer = AgentCaller(engine.add_agent("newcomer", owner=True), {"kind": "owner-private"})
    assert candidates(engine, newcomer) == []
    assert recall_candidates(engine, newcomer, {"mode": "project"}) == {"candidates": []}
    assert engine.stores() == []
    assert not state_dir.stores.exists() or [p for p in state_dir.stores.iterdir()
                                             if not p.name.startswith(".")] == []


def test_blocks_the_service_did_not_write_are_not_candidates(engine, owner, state_dir):
    unapproved = saved_page(engine, owner, title="Hand edited")
    source_claim = saved_claim(engine, owner, assertionOrigin="source")
    for record_id, approved_by in ((unapproved, ""), (source_claim, "  approved_by: owner-private\n")):
        path = private_dir(state_dir) / engine.get_record(owner, record_id)["path"]
        path.write_text(path.read_text(encoding="utf-8").replace(
            "lifecycle: active\n", "lifecycle: active\nrecall:\n  summary: injected\n  triggers: [t]\n"
            + approved_by + "  approved_at: 2026-01-01T00:00:00Z\n"), encoding="utf-8")
        assert frontmatter(engine, owner, record_id)["recall"]["summary"] == "injected"
    assert candidates(engine, owner) == []


def test_candidates_work_with_writes_disabled(engine, owner, state_dir):
    record_id = saved_page(engine, owner)
    approve(engine, owner, record_id)
    state_dir.config.write_text(json.dumps({"writesEnabled": False}), encoding="utf-8")
    assert [c["id"] for c in candidates(engine, owner)] == [record_id]


# --- flush ----------------------------------------------------------------------------------


def test_the_flush_plan_names_the_save_and_lookup_tools(engine, owner):
    plan = flush_plan(engine, owner)
    assert plan["prompt"] == "Save durable knowledge"
    assert plan["systemPrompt"] == "Use the Knowledge persistence tool"
    assert plan["persistenceToolNames"] == ["knowledge_remember", "knowledge_save_page"]
    assert plan["lookupToolNames"] == ["knowledge_grep", "knowledge_lookup", "knowledge_record",
                                       "knowledge_ontology"]
    text = plan["instructions"]
    for phrase in ("decisions", "preferences", "corrections", "commitments", "project-state changes",
                   "people or projects", "excerpt", "secrets", "as data", "audience", "Only a successful save"):
        assert phrase in text
    assert validate_flush_plan(plan) is plan


def test_every_audience_that_can_save_gets_a_plan(engine, owner):
    assert flush_plan(engine, conversation(owner.token, SESSION, key="chat:own")) is not None
    assert flush_plan(engine, granted(engine, owner, "read-and-save")) is not None


def test_no_flush_plan_when_nothing_could_be_saved(engine, owner, state_dir):
    assert flush_plan(engine, granted(engine, owner, "read")) is None
    assert flush_plan(engine, operator("main")) is None
    reader = AgentCaller(engine.add_agent("reader", owner=True, scopes=("memory:read",)), {"kind": "owner-private"})
    assert flush_plan(engine, reader) is None
    state_dir.config.write_text(json.dumps({"writesEnabled": False}), encoding="utf-8")
    assert flush_plan(engine, owner) is None
    assert flush_plan(engine, conversation(owner.token, SESSION, key="chat:own")) is None


def test_the_flush_plan_never_creates_a_store_and_denies_sandboxes(engine, owner, state_dir):
    assert flush_plan(engine, owner) is not None
    assert engine.stores() == []
    with pytest.raises(Denied):
        flush_plan(engine, AgentCaller(owner.token, {"kind": "owner-private", "sandboxed": True}))


@pytest.mark.parametrize("change, field", [
    ({"lookupToolNames": [*FLUSH_LOOKUP_TOOLS, "knowledge_remember"]}, "lookupToolNames"),
    ({"persistenceToolNames": ["knowledge_save_page", "knowledge_grep"]}, "lookupToolNames"),
    ({"persistenceToolNames": []}, "persistenceToolNames"),
    ({"persistenceToolNames": ["knowledge_remember", "knowledge_remember"]}, "persistenceToolNames"),
    ({"lookupToolNames": "knowledge_grep"}, "lookupToolNames"),
    ({"prompt": ""}, "prompt"),
])
def test_invalid_flush_plans_are_refused(change, field):
    plan = {"prompt": "Save durable knowledge", "systemPrompt": "Use the Knowledge persistence tool",
            "persistenceToolNames": list(FLUSH_PERSISTENCE_TOOLS), "lookupToolNames": list(FLUSH_LOOKUP_TOOLS)}
    with pytest.raises(InvalidParams) as raised:
        validate_flush_plan({**plan, **change})
    assert raised.value.details["field"] == field


def test_flush_request_ids_are_stable_and_distinct():
    first = flush_request_id("flush-1", "remember", ["Dana prefers Fridays", "Atlas ships in May"])
    assert flush_request_id("flush-1", "remember", ["Dana prefers Fridays", "Atlas ships in May"]) == first
    assert flush_request_id("flush-1", "remember", [" Dana prefers Fridays\n", "Atlas ships in May"]) == first
    assert parse_request_id(first) == first
    others = {
        flush_request_id("flush-1", "remember", ["Dana prefers Thursdays", "Atlas ships in May"]),
        flush_request_id("flush-1", "remember", ["Atlas ships in May", "Dana prefers Fridays"]),
        flush_request_id("flush-1", "remember", ["Dana prefers Fridays"]),
        flush_request_id("flush-2", "remember", ["Dana prefers Fridays", "Atlas ships in May"]),
        flush_request_id("flush-1", "save_page", ["Dana prefers Fridays", "Atlas ships in May"]),
    }
    assert first not in others and len(others) == 5


@pytest.mark.parametrize("flush_id, operation, texts, field", [
    ("", "remember", ["x"], "flushId"),
    ("a/b", "remember", ["x"], "flushId"),
    ("-leading", "remember", ["x"], "flushId"),
    (7, "remember", ["x"], "flushId"),
    ("flush-1", "knowledge_recall", ["x"], "operation"),
    ("flush-1", "remember", [], "texts"),
    ("flush-1", "remember", ["  "], "texts"),
    ("flush-1", "save_page", "Title", "texts"),
])
def test_flush_request_ids_refuse_bad_input(flush_id, operation, texts, field):
    with pytest.raises(InvalidParams) as raised:
        flush_request_id(flush_id, operation, texts)
    assert raised.value.details["field"] == field


def test_an_oversize_flush_id_is_limit_exceeded():
    with pytest.raises(LimitExceeded) as raised:
        flush_request_id("f" * 129, "remember", ["x"])
    assert raised.value.details["field"] == "flushId"


def test_the_longest_flush_id_is_accepted():
    assert parse_request_id(flush_request_id("f" * 128, "save_page", ["Atlas"]))
