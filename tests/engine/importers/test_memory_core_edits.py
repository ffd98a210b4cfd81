"""An agent workspace imported again after a memory file's page was revised in the store: the edit is kept, and
listed, with the file's new list items, unless the owner asks the import to replace it (docs/import-export.md,
"Edits made in the store")."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.access.authority import AgentCaller
from engine.memory.recall import recall_candidates, set_recall
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import reader, records, run_import, state_snapshot, store_snapshot
from tests.engine.importers.test_markdown_edits import edit_by_hand
from tests.engine.importers.test_memory_core import MEMORY, claims_of, workspace  # noqa: F401  (the fixture)

CORRECTED = "Dana's sister Lotte lives in Antwerp now, not Ghent."


def correct_as_agent(engine: Engine, page_id: str) -> None:
    """The page's next revision, written by the agent on another instance (``knowledge_save_page``): a fact
    corrected, the tags not kept."""
    caller = AgentCaller(engine.registry.add_credential("main"), {"kind": "owner-private"}, instance="laptop-main")
    page = engine.get_record(caller, page_id)
    engine.save_page(caller, {"requestId": "agent-corrects-memory", "id": page_id, "expectedRevision": 1,
                              "type": "note", "title": page["title"], "body": CORRECTED})


def test_a_changed_memory_file_whose_page_the_agent_corrected_is_kept_with_its_items(
        engine: Engine, workspace: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "memory-core", workspace)
    long_term = first["pages"]["MEMORY.md"]
    correct_as_agent(engine, long_term)
    (workspace / "MEMORY.md").write_text(MEMORY + "- Dana moved the standup to 9:30.\n", encoding="utf-8")
    before = store_snapshot(state_dir)

    again = run_import(engine, "memory-core", workspace)

    assert again["keptEdits"] == [{"path": "MEMORY.md", "id": long_term,
                                   "why": "revision 2 was written by main (laptop-main), not by the import"}]
    assert again["revised"] == 0 and again["pages"] == first["pages"] and again["claims"] == 3
    assert store_snapshot(state_dir) == before  # no revision, no claim of the new item, the file not retained
    assert engine.get_record(reader(engine), long_term)["body"].strip() == CORRECTED
    assert ("Kept your edits: 1 file changed since an earlier import, but its page has been revised in the store "
            "since (by the owner or an agent), so it was left as it is: MEMORY.md. To take the file anyway, import "
            "again replacing edits (--replace-edits, or Replace edits made in the store in the Import dialog); the "
            "edits stay in History.") in again["notes"]
    assert run_import(engine, "memory-core", workspace) == again and store_snapshot(state_dir) == before

    replaced = run_import(engine, "memory-core", workspace, replace_edits=True)

    assert "keptEdits" not in replaced and replaced["revised"] == 1 and replaced["claims"] == 4
    page = engine.get_record(reader(engine), long_term)
    assert page["revision"] == 3 and "standup to 9:30" in page["body"] and CORRECTED not in page["body"]
    assert page["frontmatter"]["tags"] == ["memory-core"]
    after = store_snapshot(state_dir)
    for replace_edits in (False, True):  # the page is the import's own again: nothing more to do
        last = run_import(engine, "memory-core", workspace, replace_edits=replace_edits)
        assert "keptEdits" not in last and last["revised"] == 0 and store_snapshot(state_dir) == after


@pytest.mark.parametrize("replace_edits", [False, True], ids=["keeping edits", "replacing edits"])
def test_an_edited_page_whose_file_did_not_change_is_left_as_it_is_either_way(
        engine: Engine, workspace: Path, state_dir: StateDir, replace_edits: bool) -> None:
    first = run_import(engine, "memory-core", workspace)
    correct_as_agent(engine, first["pages"]["MEMORY.md"])
    edit_by_hand(engine, first["pages"]["memory/2026-01-15.md"])
    before = store_snapshot(state_dir)

    again = run_import(engine, "memory-core", workspace, replace_edits=replace_edits)

    assert "keptEdits" not in again and again["revised"] == 0 and again["pages"] == first["pages"]
    assert again["imported"] == again["reused"] == first["imported"]
    assert store_snapshot(state_dir) == before


def test_a_task_ticked_off_in_a_kept_file_leaves_its_commitment(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "MEMORY.md").write_text("- [ ] Renew the passport\n- Dana likes tea.\n", encoding="utf-8")
    first = run_import(engine, "memory-core", root)
    edit_by_hand(engine, first["pages"]["MEMORY.md"])
    (root / "MEMORY.md").write_text("- [x] Renew the passport\n- Dana likes tea.\n", encoding="utf-8")
    claims = claims_of(engine, state_dir)

    again = run_import(engine, "memory-core", root)

    assert [kept["path"] for kept in again["keptEdits"]] == ["MEMORY.md"]
    assert claims_of(engine, state_dir) == claims and again["claims"] == 1  # the fact still claimed, the task kept
    replaced = run_import(engine, "memory-core", root, replace_edits=True)
    assert sorted(c["lifecycle"] for c in claims_of(engine, state_dir).values()) == ["active", "active", "superseded"]
    assert replaced["revised"] == 1 and "keptEdits" not in replaced


def test_a_dry_run_lists_the_files_a_real_run_keeps_and_writes_nothing(
        engine: Engine, workspace: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "memory-core", workspace)
    daily = first["pages"]["memory/2026-01-15.md"]
    edit_by_hand(engine, daily)
    (workspace / "memory" / "2026-01-15.md").write_text("# 2026-01-15\n\n- Oiled the clock.\n", encoding="utf-8")
    before = state_snapshot(state_dir)

    dry = run_import(engine, "memory-core", workspace, dry_run=True)
    dry_replacing = run_import(engine, "memory-core", workspace, dry_run=True, replace_edits=True)

    assert state_snapshot(state_dir) == before
    assert dry["keptEdits"] == [{"path": "memory/2026-01-15.md", "id": daily,
                                 "why": "edited outside the engine since the import wrote revision 1"}]
    assert dry["revised"] == 0 and any("so it would be left as it is: memory/2026-01-15.md." in note
                                       for note in dry["notes"])
    assert "keptEdits" not in dry_replacing and dry_replacing["revised"] == 1
    real = run_import(engine, "memory-core", workspace)
    assert real["keptEdits"] == dry["keptEdits"] and len(records(state_dir, "pages/")) == 3


def correct_claim_as_agent(engine: Engine, claim_id: str, text: str) -> str:
    """A claim the import made corrected the engine's way (``knowledge_remember`` with ``replaces``): the new
    claim's id; the import's claim is superseded by the agent's revision."""
    caller = AgentCaller(engine.registry.add_credential("main"), {"kind": "owner-private"}, instance="laptop-main")
    receipt = engine.remember(caller, {"requestId": f"correct-{claim_id}", "items": [
        {"text": text, "claimKind": "fact", "excerpt": text, "assertionOrigin": "user", "replaces": claim_id}]})
    return receipt["items"][0]["id"]


def test_a_claim_the_owner_corrected_is_not_claimed_again_from_the_unchanged_item(
        engine: Engine, workspace: Path, state_dir: StateDir) -> None:
    """The correction stood beside a new claim of the fact it corrected: the item, unchanged, was claimed again."""
    run_import(engine, "memory-core", workspace)
    [ghent] = [i for i, c in claims_of(engine, state_dir).items() if "Ghent" in c["text"]]
    correction = correct_claim_as_agent(engine, ghent, CORRECTED)
    before = store_snapshot(state_dir)

    for replace_edits in (False, True):  # the item says what the import wrote: nothing new either way
        again = run_import(engine, "memory-core", workspace, replace_edits=replace_edits)
        assert "keptEdits" not in again and again["claims"] == 3 and store_snapshot(state_dir) == before

    active = {c["text"] for c in claims_of(engine, state_dir).values() if c["lifecycle"] == "active"}
    assert CORRECTED in active and "Dana's sister Lotte lives in Ghent." not in active
    assert claims_of(engine, state_dir)[correction]["replaces"] == ghent


def test_a_task_ticked_off_whose_commitment_was_edited_is_kept_unless_edits_are_replaced(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "MEMORY.md").write_text("- [ ] Renew the passport\n- Dana likes tea.\n", encoding="utf-8")
    run_import(engine, "memory-core", root)
    [task] = [i for i, c in claims_of(engine, state_dir).items() if c["kind"] == "commitment"]
    edit_by_hand(engine, task)
    (root / "MEMORY.md").write_text("- [x] Renew the passport\n- Dana likes tea.\n", encoding="utf-8")
    claims = claims_of(engine, state_dir)

    again = run_import(engine, "memory-core", root)

    assert again["keptEdits"] == [{"path": "MEMORY.md", "line": 1, "id": task,
                                   "why": "edited outside the engine since the import wrote revision 1"}]
    assert claims_of(engine, state_dir) == claims and again["claims"] == 2 and again["revised"] == 1
    assert ("Kept your edits: 1 list item changed since an earlier import, but its claim has been revised in the "
            "store since (by the owner or an agent), so it was left as it is (keptEdits names it). To take it "
            "anyway, import again replacing edits.") in again["notes"]

    replaced = run_import(engine, "memory-core", root, replace_edits=True)

    assert "keptEdits" not in replaced
    after = claims_of(engine, state_dir)
    assert after[task]["lifecycle"] == "superseded"
    assert [c["replaces"] for c in after.values() if c["kind"] == "event"] == [task]


def test_replacing_edits_over_a_memory_page_approved_for_recall_keeps_the_approval(
        engine: Engine, workspace: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "memory-core", workspace)
    long_term = first["pages"]["MEMORY.md"]
    approved = set_recall(engine, reader(engine), {"id": long_term, "recall": {
        "summary": "What the agent knows about Dana", "triggers": ["Dana"], "importance": 8}})["recall"]
    (workspace / "MEMORY.md").write_text(MEMORY + "- Dana moved the standup to 9:30.\n", encoding="utf-8")
    assert [kept["id"] for kept in run_import(engine, "memory-core", workspace)["keptEdits"]] == [long_term]

    replaced = run_import(engine, "memory-core", workspace, replace_edits=True)

    page = engine.get_record(reader(engine), long_term)
    assert replaced["revised"] == 1 and "standup to 9:30" in page["body"]
    assert page["frontmatter"]["recall"] == approved
    assert [c["id"] for c in recall_candidates(engine, reader(engine), {"mode": "trigger"})["candidates"]] == [
        long_term]


def test_a_task_ticked_off_whose_commitment_was_corrected_gets_its_own_claim_only_when_replacing_edits(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "MEMORY.md").write_text("- [ ] Renew the passport\n", encoding="utf-8")
    run_import(engine, "memory-core", root)
    [task] = claims_of(engine, state_dir)
    correction = correct_claim_as_agent(engine, task, "Renew the passport before the trip to Ghent.")
    (root / "MEMORY.md").write_text("- [x] Renew the passport\n", encoding="utf-8")

    kept = run_import(engine, "memory-core", root)

    assert kept["keptEdits"] == [{"path": "MEMORY.md", "line": 1, "id": task,
                                  "why": "revision 2 was written by main (laptop-main), not by the import"}]
    assert len(claims_of(engine, state_dir)) == 2
    replaced = run_import(engine, "memory-core", root, replace_edits=True)
    claims = claims_of(engine, state_dir)
    [event] = [c for c in claims.values() if c["kind"] == "event"]
    assert event["replaces"] is None and event["lifecycle"] == "active"  # the corrected claim is not replaced again
    assert claims[task]["lifecycle"] == "superseded" and claims[correction]["lifecycle"] == "active"
    assert "keptEdits" not in replaced and replaced["revised"] == 0
    after = store_snapshot(state_dir)
    assert "keptEdits" not in run_import(engine, "memory-core", root) and store_snapshot(state_dir) == after
