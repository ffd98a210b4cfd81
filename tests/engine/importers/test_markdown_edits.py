"""A Markdown folder imported again after its page was revised in the store: the edit is kept, and listed, unless
the owner asks the import to replace it (docs/import-export.md, "Edits made in the store")."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import InvalidParams
from engine.importers.formats import FORMATS, run_import as run_format
from engine.memory.recall import recall_candidates, set_recall
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import (interrupt_after, reader, records, run_import, state_snapshot,
                                            store_snapshot)
from tests.engine.importers.test_markdown import edit, notes, summary  # noqa: F401  (the fixture)
from tests.engine.store.test_secrets import SECRET
from tests.helpers import private_dir

CHANGED_INBOX = ("Plain note without frontmatter, linking [[Projects/Alpha/Tram clock]].\n"
                 "Added later: ask [[Lotte]] about Sunday.\n")


def edit_by_hand(engine: Engine, page_id: str) -> bytes:
    """The page's file in the store's vault edited in a text editor (its revision number kept), and seen by the
    engine (as its watcher reports it); the new bytes."""
    path = private_dir(engine.state) / engine.get_record(reader(engine), page_id)["path"]
    edited = path.read_bytes() + b"My own words, added in the app.\n"
    path.write_bytes(edited)
    assert engine.get_record(reader(engine), page_id)["sha256"] == hashlib.sha256(edited).hexdigest()
    return edited


def revise_as_agent(engine: Engine, page_id: str) -> dict:
    """The page's next revision, written by an agent on another instance (as ``knowledge_save_page``)."""
    caller = AgentCaller(engine.registry.add_credential("main"), {"kind": "owner-private"}, instance="laptop-main")
    page = engine.get_record(caller, page_id)
    return engine.save_page(caller, {"requestId": "agent-revises-inbox", "id": page_id, "expectedRevision": 1,
                                     "type": "note", "title": page["title"], "body": "The agent's own summary."})


def test_a_changed_note_whose_page_was_edited_by_hand_is_kept_and_listed(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "markdown", notes)
    inbox = first["pages"]["Inbox.md"]
    edited = edit_by_hand(engine, inbox)
    (notes / "Inbox.md").write_text(CHANGED_INBOX, encoding="utf-8")
    before = store_snapshot(state_dir)

    again = run_import(engine, "markdown", notes)

    assert again["keptEdits"] == [{"path": "Inbox.md", "id": inbox,
                                   "why": "edited outside the engine since the import wrote revision 1"}]
    assert again["revised"] == 0 and again["pages"] == first["pages"]
    # Nothing written: the page is the owner's edit, the newer note is not retained, its new link is not made.
    assert store_snapshot(state_dir) == before
    page = engine.get_record(reader(engine), inbox)
    assert page["revision"] == 1 and page["sha256"] == hashlib.sha256(edited).hexdigest()
    # Nothing new: the kept page counts as found; the newer note is not retained, so its source is not counted.
    assert again["imported"] == again["reused"] == {**first["imported"], "sources": first["imported"]["sources"] - 1}
    assert summary(again)[2] == (
        "Kept your edits: 1 note changed since an earlier import, but its page has been revised in the store since "
        "(by the owner or an agent), so it was left as it is: Inbox.md. To take the note anyway, import again "
        "replacing edits (--replace-edits, or Replace edits made in the store in the Import dialog); the edits "
        "stay in History.")

    assert run_import(engine, "markdown", notes) == again  # the same again: idempotent
    assert store_snapshot(state_dir) == before


def test_a_changed_note_whose_page_an_agent_revised_is_kept_not_made_again(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "markdown", notes)
    inbox = first["pages"]["Inbox.md"]
    revise_as_agent(engine, inbox)
    edit(notes)  # Inbox.md changed, and a new note
    pages_before = len(records(state_dir, "pages/"))

    again = run_import(engine, "markdown", notes)

    assert again["keptEdits"] == [{"path": "Inbox.md", "id": inbox,
                                   "why": "revision 2 was written by main (laptop-main), not by the import"}]
    assert again["pages"]["Inbox.md"] == inbox  # the same page, not a second one for the note
    assert len(records(state_dir, "pages/")) == pages_before + 1  # only the new note's
    assert engine.get_record(reader(engine), inbox)["body"].strip() == "The agent's own summary."
    assert again["revised"] == 0

    replaced = run_import(engine, "markdown", notes, replace_edits=True)

    assert "keptEdits" not in replaced and replaced["revised"] == 1 and replaced["pages"] == again["pages"]
    page = engine.get_record(reader(engine), inbox)
    assert page["revision"] == 3 and "Added later: ask [[Lotte]] about Sunday." in page["body"]
    assert [entry["revision"] for entry in engine.history(reader(engine), inbox)["revisions"]] == [1, 2, 3]
    # Its new link is made once the note is taken; and the next import finds the page the import's own again.
    assert replaced["relationships"] == again["relationships"] + 1
    after = store_snapshot(state_dir)
    last = run_import(engine, "markdown", notes)
    assert "keptEdits" not in last and last["revised"] == 0 and store_snapshot(state_dir) == after


@pytest.mark.parametrize("replace_edits", [False, True], ids=["keeping edits", "replacing edits"])
def test_an_edited_page_whose_note_did_not_change_is_left_as_it_is_either_way(
        engine: Engine, notes: Path, state_dir: StateDir, replace_edits: bool) -> None:
    first = run_import(engine, "markdown", notes)
    edit_by_hand(engine, first["pages"]["People/Lotte.md"])
    revise_as_agent(engine, first["pages"]["Inbox.md"])
    before = store_snapshot(state_dir)

    again = run_import(engine, "markdown", notes, replace_edits=replace_edits)

    assert "keptEdits" not in again and again["revised"] == 0 and again["pages"] == first["pages"]
    assert again["imported"] == again["reused"] == first["imported"]
    assert store_snapshot(state_dir) == before


def test_a_dry_run_lists_the_edits_a_real_run_keeps_and_writes_nothing(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "markdown", notes)
    edit_by_hand(engine, first["pages"]["Inbox.md"])
    edit(notes)
    before = state_snapshot(state_dir)

    dry = run_import(engine, "markdown", notes, dry_run=True)
    dry_replacing = run_import(engine, "markdown", notes, dry_run=True, replace_edits=True)

    assert state_snapshot(state_dir) == before
    assert dry["keptEdits"] == [{"path": "Inbox.md", "id": first["pages"]["Inbox.md"],
                                 "why": "edited outside the engine since the import wrote revision 1"}]
    assert dry["revised"] == 0 and "so it would be left as it is: Inbox.md." in summary(dry)[2]
    assert "keptEdits" not in dry_replacing and dry_replacing["revised"] == 1
    real = run_import(engine, "markdown", notes)
    assert real["keptEdits"] == dry["keptEdits"] and real["reused"] == dry["reused"]
    assert real["imported"] == {kind: dry["wouldCreate"][kind] + dry["reused"][kind] for kind in dry["reused"]}


def test_an_interrupted_import_replacing_edits_is_finished_by_running_it_again(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    """The revision over the edit is planned on the version read; a run stopped midway is finished by running it
    again, which finds a page it revised already the import's own, and writes nothing twice."""
    first = run_import(engine, "markdown", notes)
    inbox = first["pages"]["Inbox.md"]
    edit_by_hand(engine, inbox)
    edit_by_hand(engine, first["pages"]["People/Lotte.md"])
    (notes / "Inbox.md").write_text(CHANGED_INBOX, encoding="utf-8")
    lotte = notes / "People" / "Lotte.md"
    lotte.write_text(lotte.read_text(encoding="utf-8") + "Moved to Antwerp.\n", encoding="utf-8")
    with pytest.raises(KeyboardInterrupt):
        run_import(engine, "markdown", notes, replace_edits=True, progress=interrupt_after(1))

    replaced = run_import(engine, "markdown", notes, replace_edits=True)
    after = store_snapshot(state_dir)

    for page_id in (inbox, first["pages"]["People/Lotte.md"]):  # each revised once over its edit: 1, 1.1, 2
        assert [entry["revision"] for entry in engine.history(reader(engine), page_id)["revisions"]] == [1, 1, 2]

    for replace_edits in (True, False):
        again = run_import(engine, "markdown", notes, replace_edits=replace_edits)
        assert again["revised"] == 0 and "keptEdits" not in again and again["pages"] == replaced["pages"]
        assert store_snapshot(state_dir) == after
    assert engine.get_record(reader(engine), inbox)["revision"] == 2


def test_bad_input_with_an_edit_to_keep_changes_nothing(engine: Engine, notes: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "markdown", notes)
    edit_by_hand(engine, first["pages"]["Inbox.md"])
    edit(notes)
    (notes / "People" / "Bruno.md").write_text(f"---\ntags: [garden]\n---\nkey {SECRET}\n", encoding="utf-8")
    before = state_snapshot(state_dir)

    for replace_edits in (False, True):
        with pytest.raises(InvalidParams):
            run_import(engine, "markdown", notes, replace_edits=replace_edits)
        assert state_snapshot(state_dir) == before


def test_replacing_edits_is_refused_for_a_format_without_edits_to_keep(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    path = tmp_path / "memories.json"
    path.write_text('{"results": [{"id": "m1", "memory": "Likes tea"}]}', encoding="utf-8")
    chosen = FORMATS["mem0"]

    with pytest.raises(InvalidParams) as refused:
        run_format(engine, chosen, chosen.load(str(path), engine.refuse_secrets), agent="main", dry_run=False,
                   progress=None, keep_token=lambda name, token: "", replace_edits=True)

    assert refused.value.details["field"] == "replaceEdits" and "markdown" in refused.value.message
    assert engine.registry.agent("main") is None


def bump_revision_by_hand(engine: Engine, page_id: str) -> int:
    """The page's revision number raised by one in a text editor, nothing else of the file changed, and seen by
    the engine; the number it now carries."""
    path = private_dir(engine.state) / engine.get_record(reader(engine), page_id)["path"]
    revision = engine.get_record(reader(engine), page_id)["revision"]
    text = path.read_text(encoding="utf-8")
    assert f"\nrevision: {revision}\n" in text
    path.write_text(text.replace(f"\nrevision: {revision}\n", f"\nrevision: {revision + 1}\n", 1), encoding="utf-8")
    assert engine.get_record(reader(engine), page_id)["revision"] == revision + 1
    return revision + 1


def test_a_page_whose_revision_number_was_raised_by_hand_counts_as_edited(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    """A number the engine never wrote is not the import's, though the attribution still names the import and
    the file holds the first bytes kept with that number (the watcher's)."""
    first = run_import(engine, "markdown", notes)
    inbox = first["pages"]["Inbox.md"]
    assert bump_revision_by_hand(engine, inbox) == 2
    unchanged = store_snapshot(state_dir)
    assert run_import(engine, "markdown", notes)["revised"] == 0  # the note says what the import wrote: nothing
    (notes / "Inbox.md").write_text(CHANGED_INBOX, encoding="utf-8")

    again = run_import(engine, "markdown", notes)

    assert again["keptEdits"] == [{"path": "Inbox.md", "id": inbox, "why": "revision 2 was not written by the "
                                   "import: its number was changed outside the engine"}]
    assert again["revised"] == 0 and store_snapshot(state_dir) == unchanged
    replaced = run_import(engine, "markdown", notes, replace_edits=True)
    assert replaced["revised"] == 1 and "keptEdits" not in replaced
    page = engine.get_record(reader(engine), inbox)
    assert page["revision"] == 3 and "Added later: ask [[Lotte]] about Sunday." in page["body"]


APPROVAL = {"summary": "What to ask the tram museum", "triggers": ["tram museum"], "importance": 6}


def test_replacing_edits_over_a_page_approved_for_recall_keeps_the_approval(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    """The approval is the owner's decision about the page, not the page's text: the note's text replaces the
    page's, and the page stays approved, as the owner approved it, until the owner clears it."""
    first = run_import(engine, "markdown", notes)
    inbox = first["pages"]["Inbox.md"]
    approved = set_recall(engine, reader(engine), {"id": inbox, "recall": APPROVAL})["recall"]
    (notes / "Inbox.md").write_text(CHANGED_INBOX, encoding="utf-8")
    assert run_import(engine, "markdown", notes)["keptEdits"] == [
        {"path": "Inbox.md", "id": inbox, "why": "revision 2 was written by main, not by the import"}]

    replaced = run_import(engine, "markdown", notes, replace_edits=True)

    page = engine.get_record(reader(engine), inbox)
    assert replaced["revised"] == 1 and page["revision"] == 3 and "Added later" in page["body"]
    assert page["frontmatter"]["recall"] == approved and approved["approved_by"] == "owner-private"
    [candidate] = recall_candidates(engine, reader(engine), {"mode": "trigger"})["candidates"]
    assert (candidate["id"], candidate["revision"], candidate["triggers"]) == (inbox, 3, ["tram museum"])
