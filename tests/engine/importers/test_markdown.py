"""The Markdown importer on a small Obsidian-style vault written here."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from engine.bench.import_markdown import write_vault
from engine.core.errors import InvalidParams
from engine.importers import common, markdown
from engine.importers.common import Progress, Writer, import_instance, owner_caller
from engine.importers.markdown import LINKS_PER_WRITE, load_markdown, retained_name
from engine.importers.summaries import import_summary
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import (interrupt_after, reader, records, run_import, same_but_reused,
                                            state_snapshot, store_snapshot, would_import)
from tests.engine.store.test_secrets import SECRET
from tests.helpers import assert_checked_as_read, only_store, private_dir, records_checked_as_read

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "Projects" / "Alpha").mkdir(parents=True)
    (root / "People").mkdir()
    (root / "attachments").mkdir()
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "app.json").write_text("{}", encoding="utf-8")
    (root / ".obsidian" / "hidden.md").write_text("not a note", encoding="utf-8")
    (root / "attachments" / "clock.png").write_bytes(PNG)
    (root / "attachments" / "unused.pdf").write_bytes(b"%PDF-1.4 never linked")
    (root / "People" / "Lotte.md").write_text(
        "---\naliases: [Lotte V., Charlotte]\ntags: [family, '#ghent']\ntype: person\nbirthday_note: spring\n"
        "---\nDana's sister, lives in Ghent.\n", encoding="utf-8")
    (root / "Projects" / "Alpha" / "Tram clock.md").write_text(
        "---\ntitle: Tram clock repair\ntags: clocks\npermalink: tram-clock\ncreated: 2026-01-05\n"
        "rating: 4\n---\n"
        "# Tram clock\n\nAsked [[Lotte|my sister]] about the escapement.\n"
        "Photo: ![[clock.png]]\n"
        "See also [[Inbox#Today]] and [[Nobody Here]].\n"
        "```\n[[Lotte]] inside code is not a link\n```\n"
        "Also [[Charlotte]] again.\n", encoding="utf-8")
    (root / "Inbox.md").write_text("Plain note without frontmatter, linking [[Projects/Alpha/Tram clock]].\n",
                                   encoding="utf-8")
    return root


def pages_by_path(result: dict) -> dict[str, str]:
    return result["pages"]


def test_notes_become_pages_with_frontmatter_aliases_tags_and_folders(engine: Engine, notes: Path) -> None:
    result = run_import(engine, "markdown", notes)

    assert set(result["pages"]) == {"Inbox.md", "People/Lotte.md", "Projects/Alpha/Tram clock.md"}
    caller = reader(engine)
    lotte = engine.get_record(caller, result["pages"]["People/Lotte.md"])
    front = lotte["frontmatter"]
    assert (lotte["title"], front["type"]) == ("Lotte", "person")
    assert front["aliases"] == ["Lotte V.", "Charlotte"]
    assert front["tags"] == ["family", "ghent", "People"]
    assert front["attribution"]["instance"] == "import-markdown"
    assert "Dana's sister, lives in Ghent." in lotte["body"]
    assert "birthday_note: spring" in lotte["body"]  # an unknown key is kept

    clock = engine.get_record(caller, result["pages"]["Projects/Alpha/Tram clock.md"])
    assert clock["title"] == "Tram clock repair"
    assert clock["frontmatter"]["type"] == "note"
    assert clock["frontmatter"]["tags"] == ["clocks", "Projects/Alpha"]
    for kept in ("permalink: tram-clock", "created: 2026-01-05", "rating: 4"):
        assert kept in clock["body"]
    assert "Asked [[Lotte|my sister]] about the escapement." in clock["body"]


def test_links_become_relationships_citing_the_line(engine: Engine, notes: Path, state_dir: StateDir) -> None:
    result = run_import(engine, "markdown", notes)

    assert result["relationships"] == 3  # clock -> Lotte (twice, once by alias: one edge), clock -> Inbox, back
    caller = reader(engine)
    pages = result["pages"]
    edges = []
    for path in records(state_dir, "relationships/"):
        record_id = next(line[4:] for line in (next(state_dir.stores.iterdir()) / "vault" / path)
                         .read_text(encoding="utf-8").splitlines() if line.startswith("id: "))
        edges.append(engine.get_record(caller, record_id)["frontmatter"])
    pairs = {(e["from"], e["to"]) for e in edges}
    clock, lotte, inbox = (pages[p] for p in ("Projects/Alpha/Tram clock.md", "People/Lotte.md", "Inbox.md"))
    assert pairs == {(clock, lotte), (clock, inbox), (inbox, clock)}
    to_lotte = next(e for e in edges if e["to"] == lotte)
    assert to_lotte["relation"] == "related_to" and to_lotte["assertion_origin"] == "source"
    assert to_lotte["evidence"][0]["lines"] == [10, 10]
    assert to_lotte["evidence"][0]["quote"] == "[[Lotte|my sister]]"
    assert result["notes"] == ["1 links name no note or file of the folder; they stay as text."]


def test_linked_attachments_are_retained_and_cited(engine: Engine, notes: Path, state_dir: StateDir) -> None:
    result = run_import(engine, "markdown", notes)

    assert result["attachments"] == 1
    vault = next(state_dir.stores.iterdir()) / "vault" / "private"
    clock = engine.get_record(reader(engine), result["pages"]["Projects/Alpha/Tram clock.md"])
    cited = [c["source"] for c in clock["frontmatter"]["evidence"]]
    retained = {path.name: path.read_bytes() for path in (vault / "sources").iterdir()}
    assert retained[f"{cited[1]}.png"] == PNG
    assert retained[f"{cited[0]}.md"] == (notes / "Projects" / "Alpha" / "Tram clock.md").read_bytes()
    assert not any(b"never linked" in data for data in retained.values())


def test_importing_again_creates_nothing_and_an_interrupted_run_is_finished(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    with pytest.raises(KeyboardInterrupt):
        run_import(engine, "markdown", notes, progress=interrupt_after(2))
    assert len(records(state_dir, "pages/")) >= 2  # and those already started (engine/importers/bulk.py)

    first = run_import(engine, "markdown", notes)
    assert first["reused"]["pages"] >= 2 and first["reused"]["relationships"] == 0  # the pages of the run stopped
    before = store_snapshot(state_dir)
    assert same_but_reused(run_import(engine, "markdown", notes), first)
    assert store_snapshot(state_dir) == before
    assert len(records(state_dir, "pages/")) == 3


def test_a_rerun_takes_the_originals_it_cites_from_the_pages_instead_of_retrying_them(
        engine: Engine, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = run_import(engine, "markdown", notes)
    retried: list[str] = []
    real = common.attach
    monkeypatch.setattr(common, "attach", lambda engine, caller, request: retried.append(
        request["filename"]) or real(engine, caller, request))

    again = run_import(engine, "markdown", notes)
    assert same_but_reused(again, first)  # the same counts: kept sources count as before, now as reused
    assert retried == ["clock.png"]  # only the file a note links; no note's original went through the store

    (notes / "Inbox.md").write_text("Plain note, changed, linking [[Projects/Alpha/Tram clock]].\n", encoding="utf-8")
    retried.clear()
    run_import(engine, "markdown", notes)
    assert sorted(retried) == ["clock.png", "vault › Inbox.md"]  # a changed note's newer original is retained


def test_a_changed_note_revises_its_page_after_the_owner_edited_the_page_by_hand_when_told_to_replace_edits(
        engine: Engine, notes: Path) -> None:
    """The owner's editor kept the page's revision number; the rerun told to replace edits reads the page before
    revising it, so it revises the version it read (not refused as a stale number), and the owner's edit stays in
    the history."""
    page_id = run_import(engine, "markdown", notes)["pages"]["Inbox.md"]
    caller = reader(engine)
    path = private_dir(engine.state) / engine.get_record(caller, page_id)["path"]
    edited = path.read_bytes() + b"Added by hand.\n"
    path.write_bytes(edited)
    (notes / "Inbox.md").write_text("Plain note, changed, linking [[Projects/Alpha/Tram clock]].\n", encoding="utf-8")

    again = run_import(engine, "markdown", notes, replace_edits=True)
    assert again["revised"] == 1 and "keptEdits" not in again
    record = engine.get_record(caller, page_id)
    assert record["revision"] == 2 and record["body"].startswith("Plain note, changed")
    kept = [(entry["revision"], entry["sha256"]) for entry in engine.history(caller, page_id)["revisions"]]
    assert (1, hashlib.sha256(edited).hexdigest()) in kept


def test_a_new_notes_original_is_retained_in_its_pages_publication(engine: Engine, notes: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    alone: list[str] = []
    real = common.attach
    monkeypatch.setattr(common, "attach", lambda engine, caller, request: alone.append(
        request["filename"]) or real(engine, caller, request))

    result = run_import(engine, "markdown", notes)

    assert alone == ["clock.png"]  # only the file a note links is retained on its own
    caller = reader(engine)
    operations = engine.on_store(caller, lambda runtime, authority: sorted(row["operation"] for row in (
        runtime.store.db.all("SELECT operation FROM publications WHERE state = 'applied'"))))
    assert operations == ["attach", "remember", "save_page", "save_page", "save_page"]
    for path, page_id in result["pages"].items():  # each page cites its note's very bytes first
        first = engine.get_record(caller, page_id)["frontmatter"]["evidence"][0]["source"]
        retained = private_dir(engine.state) / "sources"
        assert [file.read_bytes() for file in retained.glob(f"{first}.*") if not file.name.endswith(".yaml")] == [
            (notes / path).read_bytes()]


def test_an_import_begun_with_originals_retained_alone_is_finished_retaining_none_twice(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    """An import interrupted after retaining some originals on their own, before their pages cited them (as
    every import did before pages retained their originals), is finished citing those sources."""
    folder, = load_markdown(str(notes), engine.refuse_secrets)
    begun = folder.notes[:2]
    with owner_caller(engine, instance=import_instance("markdown")) as (caller, _):
        writer = Writer(engine, caller, "markdown")
        retained = {note.path: writer.retain(note.original, note.key, media_type="text/markdown",
                                             filename=retained_name(folder, note)) for note in begun}

    result = run_import(engine, "markdown", notes)

    for note in begun:
        page = engine.get_record(reader(engine), result["pages"][note.path])
        assert page["frontmatter"]["evidence"][0] == {"source": retained[note.path][0]}
    assert len(records(state_dir, "sources/")) == 2 * 4  # three notes and the photo, each once, descriptor beside
    assert result["reused"] == {"sources": 2, "pages": 0, "claims": 0, "relationships": 0}  # the two begun
    before = store_snapshot(state_dir)
    assert same_but_reused(run_import(engine, "markdown", notes), result)
    assert store_snapshot(state_dir) == before


def test_dry_run(engine: Engine, notes: Path) -> None:
    result = run_import(engine, "markdown", notes, dry_run=True)

    assert result["wouldCreate"] == {"sources": 4, "pages": 3, "claims": 0, "relationships": 3}
    assert result["reused"] == {"sources": 0, "pages": 0, "claims": 0, "relationships": 0}
    assert summary(result)[0] == ("Dry run of the markdown import: it would create 4 sources, 3 pages, "
                                  "3 relationships; nothing was written.")
    assert engine.registry.agent("main") is None


def test_a_note_whose_frontmatter_is_not_yaml_is_imported_with_it_as_written_and_listed(engine: Engine,
                                                                                        notes: Path) -> None:
    # One of a vault's notes with a colon inside a value (Obsidian shows it with invalid properties) costs
    # that note its frontmatter, never the rest of the folder its import.
    (notes / "People" / "Bruno.md").write_text(
        "---\ntitle: Bruno\nupdated: 2026-08-17 round 33: storage\n---\nLinks [[Lotte]].\n", encoding="utf-8")

    result = run_import(engine, "markdown", notes)

    assert set(result["pages"]) == {"Inbox.md", "People/Bruno.md", "People/Lotte.md", "Projects/Alpha/Tram clock.md"}
    assert result["unreadFrontmatter"] == {"People/Bruno.md": "line 3 is not valid YAML: mapping values are not "
                                                              "allowed here"}
    assert ("1 note has frontmatter that could not be read: it was imported with the title of its file name and "
            "its frontmatter kept as written at the end of the page; correct the frontmatter and import again to "
            "read it.") in summary(result)
    caller = reader(engine)
    page = engine.get_record(caller, result["pages"]["People/Bruno.md"])
    assert page["frontmatter"]["title"] == "Bruno" and page["frontmatter"]["tags"] == ["People"]
    assert page["body"] == ("Links [[Lotte]].\n\nFrontmatter kept from the note as written (not read: line 3 is not "
                            "valid YAML: mapping values are not allowed here):\n\n```yaml\ntitle: Bruno\n"
                            "updated: 2026-08-17 round 33: storage\n```\n")
    assert result["relationships"] == 4  # its link is made as any other note's


def test_a_note_whose_frontmatter_is_not_a_mapping_is_imported_and_listed(engine: Engine, notes: Path) -> None:
    (notes / "list.md").write_text('---\n- a\n- "```b```"\n---\nText.\n', encoding="utf-8")

    assert run_import(engine, "markdown", notes, dry_run=True)["unreadFrontmatter"] == {
        "list.md": "it is not a mapping of names to values"}
    result = run_import(engine, "markdown", notes)

    assert result["unreadFrontmatter"] == {"list.md": "it is not a mapping of names to values"}
    body = engine.get_record(reader(engine), result["pages"]["list.md"])["body"]
    assert body.endswith('values):\n\n````yaml\n- a\n- "```b```"\n````\n')  # a fence longer than the text's


def test_a_note_whose_known_fields_have_another_shape_is_imported_without_them_and_listed(
        engine: Engine, notes: Path) -> None:
    # Tags as a mapping, a title as a list, more aliases than a page holds: each note is imported without what
    # it could not read (that field kept with the others), never the folder's import refused for it.
    (notes / "People" / "Bruno.md").write_text("---\ntags: {chess: 1}\nsource: club\n---\nPlays [[Lotte]].\n",
                                               encoding="utf-8")
    (notes / "listed.md").write_text("---\ntitle: [one, two]\naliases: [Listed]\n---\nText.\n", encoding="utf-8")
    many = "".join(f"  - name {number}\n" for number in range(101))
    (notes / "many.md").write_text(f"---\ntitle: Many\naliases:\n{many}---\nNames.\n", encoding="utf-8")

    result = run_import(engine, "markdown", notes)

    assert result["unreadFields"] == {"People/Bruno.md": "frontmatter tags must be a string or a list of strings",
                                      "listed.md": "frontmatter title must be a string",
                                      "many.md": "frontmatter aliases has more than 100 entries"}
    assert "unreadFrontmatter" not in result
    assert ("3 notes have frontmatter fields that could not be read (a title, tags or aliases of another shape "
            "than the field takes): each was imported without them, and they are kept at the end of the page; "
            "correct them and import again to read them.") in summary(result)
    caller = reader(engine)
    bruno = engine.get_record(caller, result["pages"]["People/Bruno.md"])
    assert bruno["title"] == "Bruno" and bruno["frontmatter"]["tags"] == ["People"]
    assert bruno["body"] == ("Plays [[Lotte]].\n\nFrontmatter kept from the note:\n\n```yaml\ntags:\n  chess: 1\n"
                             "source: club\n```\n")
    listed = engine.get_record(caller, result["pages"]["listed.md"])
    assert listed["title"] == "listed" and listed["frontmatter"]["aliases"] == ["Listed"]
    assert listed["body"].endswith("```yaml\ntitle:\n- one\n- two\n```\n")
    crowded = engine.get_record(caller, result["pages"]["many.md"])
    assert crowded["title"] == "Many" and "aliases" not in crowded["frontmatter"]
    assert "- name 100" in crowded["body"]
    assert result["relationships"] == 4  # Bruno's link is made as any other note's


def test_a_folder_without_notes_is_refused(engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")

    with pytest.raises(InvalidParams, match="no Markdown"):
        run_import(engine, "markdown", tmp_path)


def test_inline_tags_are_carried_as_tags(engine: Engine, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    (root / "Ideas").mkdir(parents=True)
    (root / "Ideas" / "Garden.md").write_text(
        "---\ntags: [garden]\n---\n"
        "#todo plant the tulips #Garden and the #project/allotment beds.\n"
        "# A heading, not a tag\n"
        "Issue #2026 is a number, a#b is a word, see [[Garden#Beds]] and https://example.org/#top.\n"
        "`#inline-code` stays code; tags end at punctuation: #idea, #snake_case!\n"
        "```\n#fenced is code too\n```\n"
        "Café notes #été, #Été and #ÉTÉ\n", encoding="utf-8")

    result = run_import(engine, "markdown", root)

    page = engine.get_record(reader(engine), result["pages"]["Ideas/Garden.md"])
    assert page["frontmatter"]["tags"] == ["garden", "Ideas", "todo", "project/allotment", "idea", "snake_case",
                                           "été"]
    assert "#todo plant the tulips" in page["body"]  # the text is left as written


def test_inline_tags_past_what_a_page_holds_stay_text(engine: Engine, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "Many.md").write_text(" ".join(f"#t{n}" for n in range(150)) + "\n", encoding="utf-8")

    result = run_import(engine, "markdown", root)

    page = engine.get_record(reader(engine), result["pages"]["Many.md"])
    assert page["frontmatter"]["tags"] == [f"t{n}" for n in range(100)] and "#t149" in page["body"]


# --- importing the folder again after it changed ---------------------------------------------------------


def edit(notes: Path) -> None:
    """The folder some days later: one note edited, one new note linking it, the rest as they were."""
    (notes / "Inbox.md").write_text("Plain note without frontmatter, linking [[Projects/Alpha/Tram clock]].\n"
                                    "Added later: ask [[Lotte]] about Sunday.\n", encoding="utf-8")
    (notes / "Ideas.md").write_text("A new note about [[Inbox]].\n", encoding="utf-8")


def test_a_changed_note_revises_its_page_and_a_new_one_is_a_new_page(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "markdown", notes)
    before = store_snapshot(state_dir)
    edit(notes)

    second = run_import(engine, "markdown", notes)

    caller = reader(engine)
    inbox_id = first["pages"]["Inbox.md"]
    assert second["pages"]["Inbox.md"] == inbox_id  # the same page ...
    inbox = engine.get_record(caller, inbox_id)
    assert inbox["revision"] == 2 and "Added later: ask [[Lotte]] about Sunday." in inbox["body"]  # ... revised
    assert [r["revision"] for r in engine.history(caller, inbox_id)["revisions"]] == [1, 2]
    assert "Added later" not in engine.get_record(caller, inbox_id, revision=1)["body"]  # the old one is kept
    assert second["revised"] == 1
    assert second["notes"][-1] == "1 note changed since an earlier import: it got a new revision of its page."
    for path in ("People/Lotte.md", "Projects/Alpha/Tram clock.md"):  # unchanged: not written at all
        assert second["pages"][path] == first["pages"][path]
        record_path = engine.get_record(caller, first["pages"][path])["path"]
        assert store_snapshot(state_dir)[f"private/{record_path}"] == before[f"private/{record_path}"]
    assert "Ideas.md" not in first["pages"] and second["pages"]["Ideas.md"] not in first["pages"].values()
    assert len(records(state_dir, "pages/")) == 4
    # The earlier links are not made again; the two new ones (Inbox -> Lotte, Ideas -> Inbox) are new.
    assert len(records(state_dir, "relationships/")) == 5 and second["relationships"] == 5
    # Retained anew: the edited note and the new one (each a file and its descriptor), nothing else.
    assert len(records(state_dir, "sources/")) - len([p for p in before if p.startswith("private/sources/")]) == 4

    after = store_snapshot(state_dir)
    third = run_import(engine, "markdown", notes)  # the same folder again: nothing
    assert (third["pages"], third["imported"], third["revised"]) == (second["pages"], second["imported"], 0)
    assert store_snapshot(state_dir) == after


def test_a_note_whose_file_changed_but_not_its_page_is_left_as_it_is(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "markdown", notes)
    before = store_snapshot(state_dir)
    lotte = notes / "People" / "Lotte.md"
    lotte.write_text(lotte.read_text(encoding="utf-8") + "\n\n", encoding="utf-8")  # other bytes, the same page

    second = run_import(engine, "markdown", notes)

    assert second["pages"] == first["pages"] and second["revised"] == 0
    assert store_snapshot(state_dir) == before


def test_the_same_path_in_another_folder_is_another_page(engine: Engine, notes: Path, tmp_path: Path) -> None:
    first = run_import(engine, "markdown", notes)
    other = tmp_path / "other"
    other.mkdir()
    (other / "Inbox.md").write_text("Another notebook's inbox.\n", encoding="utf-8")

    second = run_import(engine, "markdown", other)

    assert second["pages"]["Inbox.md"] != first["pages"]["Inbox.md"] and second["revised"] == 0
    assert engine.get_record(reader(engine), first["pages"]["Inbox.md"])["revision"] == 1


def test_a_dry_run_says_what_it_would_revise_and_writes_nothing(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "markdown", notes)
    edit(notes)
    before = state_snapshot(state_dir)

    result = run_import(engine, "markdown", notes, dry_run=True)

    assert result["dryRun"] is True and result["revised"] == 1
    assert result["pages"]["Inbox.md"] == first["pages"]["Inbox.md"]  # the page it would revise
    assert result["pages"]["People/Lotte.md"] == first["pages"]["People/Lotte.md"]
    assert result["pages"]["Ideas.md"].startswith("(new page")
    assert state_snapshot(state_dir) == before
    # What a real run would write: the edited and the new note's originals and pages (one revised, one new) and
    # the two new links; and what an earlier run made: the unchanged notes' pages, originals and links, and the
    # photo (retries that write nothing).
    assert result["wouldCreate"] == {"sources": 2, "pages": 2, "claims": 0, "relationships": 2}
    assert result["reused"] == {"sources": 3, "pages": 2, "claims": 0, "relationships": 3}
    assert summary(result)[0] == (
        "Dry run of the markdown import: it would create 2 sources, 2 pages, 2 relationships, and reuse 3 "
        "sources, 2 pages, 3 relationships (made by an earlier run of this input); nothing was written.")
    real = run_import(engine, "markdown", notes)
    assert (real["imported"], real["reused"]) == (would_import(result), result["reused"])


def test_a_dry_run_of_a_folder_imported_already_would_create_nothing(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "markdown", notes)
    before = state_snapshot(state_dir)

    result = run_import(engine, "markdown", notes, dry_run=True)

    assert result["wouldCreate"] == {"sources": 0, "pages": 0, "claims": 0, "relationships": 0}
    assert result["reused"] == first["imported"] and result["pages"] == first["pages"]
    assert summary(result)[0] == (
        "Dry run of the markdown import: nothing new: all 4 sources, 3 pages and 3 relationships of the input "
        "were already made by an earlier run of this input; nothing was written.")
    assert state_snapshot(state_dir) == before


def test_a_bad_note_in_a_folder_imported_before_changes_nothing(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    run_import(engine, "markdown", notes)
    edit(notes)
    (notes / "People" / "Bruno.md").write_text(f"---\ntags: [garden]\n---\nkey {SECRET}\n", encoding="utf-8")
    before = store_snapshot(state_dir)

    with pytest.raises(InvalidParams) as caught:
        run_import(engine, "markdown", notes)

    assert caught.value.details["file"] == "People/Bruno.md"
    assert store_snapshot(state_dir) == before


def test_a_note_retained_in_parts_is_found_again(engine: Engine, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "ATTACH_MAX_BYTES", 64)  # every note larger than that: retained in parts
    first = run_import(engine, "markdown", notes)
    caller = reader(engine)
    clock_id = first["pages"]["Projects/Alpha/Tram clock.md"]
    assert len(engine.get_record(caller, clock_id)["frontmatter"]["evidence"]) > 2  # its parts and the photo
    clock = notes / "Projects" / "Alpha" / "Tram clock.md"
    clock.write_text(clock.read_text(encoding="utf-8") + "Fixed on Sunday.\n", encoding="utf-8")

    second = run_import(engine, "markdown", notes)

    assert second["pages"] == first["pages"] and second["revised"] == 1
    assert engine.get_record(caller, clock_id)["revision"] == 2


def test_links_in_the_folder_are_named_in_the_result_and_never_followed(
        engine: Engine, notes: Path, tmp_path: Path, state_dir: StateDir) -> None:
    outside = tmp_path / "outside"
    (outside / "Journal").mkdir(parents=True)
    (outside / "diary.md").write_text("DIARY: not the vault's\n", encoding="utf-8")
    (outside / "Journal" / "day.md").write_text("JOURNAL: not the vault's\n", encoding="utf-8")
    (outside / "scan.png").write_bytes(b"SCAN: not the vault's")
    os.symlink(outside / "diary.md", notes / "People" / "Diary.md")
    os.symlink(outside / "Journal", notes / "Journal")
    os.symlink(outside / "scan.png", notes / "attachments" / "scan.png")
    (notes / "Inbox.md").write_text("Linking [[Diary]] and ![[scan.png]].\n", encoding="utf-8")

    result = run_import(engine, "markdown", notes)

    assert set(result["pages"]) == {"Inbox.md", "People/Lotte.md", "Projects/Alpha/Tram clock.md"}
    assert result["leftOut"] == ["Journal", "People/Diary.md", "attachments/scan.png"]
    assert ("Left out 3 symbolic links, which an import never follows: Journal, People/Diary.md, "
            "attachments/scan.png.") in result["notes"]
    vault = only_store(state_dir) / "vault"
    retained = b"".join((vault / path).read_bytes() for path in records(state_dir, "sources/"))
    assert not any(text in retained for text in (b"DIARY", b"JOURNAL", b"SCAN"))


def test_links_are_written_many_a_publication_and_reported_note_by_note(
        engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vault = tmp_path / "generated"
    links, _ = write_vault(vault, 120)
    calls: list[int] = []
    real = engine.remember
    monkeypatch.setattr(engine, "remember", lambda caller, params: calls.append(len(params["items"])) or
                        real(caller, params))
    seen: list[Progress] = []

    result = run_import(engine, "markdown", vault, progress=seen.append)

    assert result["relationships"] == links and sum(calls) == links
    # Whole notes of at most three links each, up to LINKS_PER_WRITE links a call: not one call per note.
    assert all(count <= LINKS_PER_WRITE for count in calls) and len(calls) <= links // (LINKS_PER_WRITE - 3) + 1
    assert len(calls) < 120 // 3
    linking = [step.done for step in seen if step.phase == "linking"]
    assert linking == list(range(121))  # every note reported once, in order, after the links before it


def test_a_hub_notes_links_are_written_in_parts_and_the_count_moves_with_them(
        engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A note linking more notes than a write of links holds (an index, a map of content) is written in parts of
    its own, each one publication: one item of many publications, written one after another behind every other
    item's, held the count of notes linked at the notes before it while the rest were written.  Each note is
    counted once, in order, and only once the relationships of its links are written; meanwhile each part of
    the hub's links written says how many of them are made."""
    monkeypatch.setattr(markdown, "LINKS_PER_WRITE", 4)
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "A start.md").write_text("See [[Topic 1]] and [[Topic 2]].\n", encoding="utf-8")
    (vault / "Index.md").write_text("".join(f"- [[Topic {n}]]\n" for n in range(1, 11)), encoding="utf-8")
    for n in range(1, 11):
        (vault / f"Topic {n}.md").write_text(f"Topic {n}, back to [[Index]].\n", encoding="utf-8")
    events: list[tuple[str, object]] = []
    real = engine.remember

    def remember(caller, params):
        receipt = real(caller, params)
        events.append(("written", [item["from"] for item in params["items"]]))
        return receipt

    monkeypatch.setattr(engine, "remember", remember)

    result = run_import(engine, "markdown", vault, progress=lambda step: events.append(("progress", step)))

    pages = result["pages"]
    writes = [froms for kind, froms in events if kind == "written"]
    assert result["relationships"] == 2 + 10 + 10 == sum(len(froms) for froms in writes)
    assert all(len(froms) <= 4 for froms in writes)  # the index's ten links: three writes, never one of ten
    assert sorted(froms.count(pages["Index.md"]) for froms in writes if pages["Index.md"] in froms) == [2, 4, 4]
    steps = [step for kind, step in events if kind == "progress"]
    assert [(step.phase, step.done, step.total) for step in steps] == \
        [("writing", n, 12) for n in range(1, 13)] + [("linking", 0, 12), ("linking", 1, 12)] + \
        [("linking", 1, 12)] * 2 + [("linking", n, 12) for n in range(2, 13)]
    assert [step.item for step in steps[14:16]] == ["Index.md, 4 of 10 links", "Index.md, 8 of 10 links"]
    for number, (kind, step) in enumerate(events):  # a note is counted linked after every write of its links
        if kind == "progress" and step.phase == "linking" and step.item in pages:
            later = [froms for kind, froms in events[number + 1:] if kind == "written"]
            assert not any(pages[step.item] in froms for froms in later), step.item


def test_a_cancel_amid_a_batch_of_links_counts_the_notes_it_wrote(engine: Engine, tmp_path: Path) -> None:
    vault = tmp_path / "generated"
    links, _ = write_vault(vault, 120)
    seen: list[Progress] = []

    def cancel_at_the_third_note(step: Progress) -> None:
        seen.append(step)
        if step.phase == "linking" and step.done == 3 and not step.stopping:
            raise KeyboardInterrupt("cancelled")

    with pytest.raises(KeyboardInterrupt):
        run_import(engine, "markdown", vault, progress=cancel_at_the_third_note)

    after = [step for step in seen if step.phase == "linking" and step.stopping]
    assert after and [step.done for step in after] == list(range(4, after[-1].done + 1))  # written, so counted
    assert run_import(engine, "markdown", vault)["relationships"] == links  # the rest is finished by a rerun


def test_a_page_edited_on_disk_since_the_import_is_read_as_it_is_now(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "markdown", notes)
    vault = only_store(state_dir) / "vault"
    lotte = first["pages"]["People/Lotte.md"]
    path = next(vault / p for p in records(state_dir, "pages/")
                if f"id: {lotte}\n" in (vault / p).read_text(encoding="utf-8"))
    path.write_text(path.read_text(encoding="utf-8").replace("title: Lotte\n", "title: Lotte (edited)\n"),
                    encoding="utf-8")

    again = run_import(engine, "markdown", notes)

    # Read as it is now, the page is an edit made since the import; the note has not changed, so the edit stands
    # (before keeping edits, the page's next revision said the note's title again).
    assert again["revised"] == 0 and again["pages"] == first["pages"] and "keptEdits" not in again
    assert engine.get_record(reader(engine), lotte)["title"] == "Lotte (edited)"
    lotte_note = notes / "People" / "Lotte.md"
    lotte_note.write_text(lotte_note.read_text(encoding="utf-8") + "Moved to Antwerp.\n", encoding="utf-8")
    assert [kept["id"] for kept in run_import(engine, "markdown", notes)["keptEdits"]] == [lotte]


def test_a_narrow_view_reads_its_keys_as_the_whole_view_does_and_nothing_else() -> None:
    """A rerun's look-up of earlier records builds each row's view of the keys it reads (``narrow_view``): those
    read as in the whole view, with the two the look-up filters on; any other reads as absent."""
    import json
    from dataclasses import dataclass

    from engine.vault.record_view import view_of

    @dataclass(frozen=True)
    class Row:  # the one column narrow_view reads, on a frozen row as the catalog's are
        frontmatter_json: str

    frontmatter = {"kind": "relationship", "relation": "related_to", "from": "pg_a", "to": "pg_b", "title": "A to B",
                   "lifecycle": "active", "attribution": {"instance": "import-markdown"},
                   "evidence": [{"source": "src_a", "lines": [3, 3], "quote": "[[B]]"}]}
    whole = view_of(frontmatter)
    row = Row(json.dumps(frontmatter))
    narrow = common.narrow_view(row, ("relation", "from", "to"))
    assert (narrow.relation, narrow.from_id, narrow.to_id, narrow.lifecycle, narrow.attribution) == \
        (whole.relation, whole.from_id, whole.to_id, whole.lifecycle, whole.attribution) == \
        ("related_to", "pg_a", "pg_b", "active", {"instance": "import-markdown"})
    assert narrow.evidence is None and narrow.title is None and narrow.kind is None  # not asked for
    assert common.narrow_view(row, ("evidence",)).evidence == whole.evidence


def test_a_markdown_link_up_a_folder_to_a_heading_or_with_parentheses_names_its_note_or_picture(engine: Engine, tmp_path: Path) -> None:
    root = tmp_path / "IT"
    (root / "01 Arduino").mkdir(parents=True)
    (root / "02 arm").mkdir()
    (root / "photo").mkdir()
    (root / "photo" / "Pasted image 1.png").write_bytes(PNG)
    (root / "02 arm" / "1.3 链接器脚本.md").write_text("链接器脚本。\n", encoding="utf-8")
    (root / "01 Arduino" / "3.2 模拟信号.md").write_text(
        "![](../photo/Pasted%20image%201.png)\n见 [链接器](../02%20arm/1.3%20链接器脚本.md)，"
        "不是 [外面](../../outside.md)。\n见 [用法](../02%20arm/1.3%20链接器脚本.md#用法)。\n"
        "见 [内积](../02%20arm/向量内积%20(inner%20product).md)。\n", encoding="utf-8")
    (root / "02 arm" / "向量内积 (inner product).md").write_text("内积。\n", encoding="utf-8")

    result = run_import(engine, "markdown", root)

    assert result["attachments"] == 1 and result["relationships"] == 2
    assert result["unresolved"] == {"01 Arduino/3.2 模拟信号.md": ["[外面](../../outside.md)"]}  # as written


def test_links_left_as_text_are_listed_as_the_note_writes_them(engine: Engine, tmp_path: Path) -> None:
    """The result listed a Markdown link naming nothing by its address (``2.3.1%20电平与边沿.md``), which the
    window then showed in wiki brackets: each is listed as written, a wiki link with its label too."""
    root = tmp_path / "IT"
    root.mkdir()
    (root / "2.4 中断.md").write_text("见 [2.3.1 电平与边沿](2.3.1%20电平与边沿.md#边沿) 和 [[Gone|别处]]。\n"
                                      "![](photo/none.png) [[Gone|别处]]\n", encoding="utf-8")

    result = run_import(engine, "markdown", root)

    assert result["unresolved"] == {"2.4 中断.md": ["[2.3.1 电平与边沿](2.3.1%20电平与边沿.md#边沿)", "[[Gone|别处]]",
                                                   "![](photo/none.png)", "[[Gone|别处]]"]}
    assert result["notes"][0] == "4 links name no note or file of the folder; they stay as text."


def test_a_link_shown_as_code_is_text_and_a_pipe_escaped_for_a_table_still_links(engine: Engine, tmp_path: Path,
                                                                                 state_dir: StateDir) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "Table view.md").write_text("Rows and columns.\n", encoding="utf-8")
    (root / "Views.md").write_text(
        "Embed a base with `![[File.base]]` or ``[[Table view]]`` written as code.\n\n"
        "| view | note |\n| --- | --- |\n| table | [[Table view\\|Table]] |\n", encoding="utf-8")

    result = run_import(engine, "markdown", root)

    assert result["relationships"] == 1  # the table's link; neither link written as code
    assert "unresolved" not in result or not result["unresolved"]
    caller = reader(engine)
    edge = next(engine.get_record(caller, line[4:])["frontmatter"]
                for path in records(state_dir, "relationships/")
                for line in (only_store(state_dir) / "vault" / path).read_text(encoding="utf-8").splitlines()
                if line.startswith("id: "))
    assert (edge["from"], edge["to"]) == (result["pages"]["Views.md"], result["pages"]["Table view.md"])
    assert edge["evidence"][0]["quote"] == "[[Table view\\|Table]]"


def test_a_link_whose_label_is_code_links_and_quotes_its_line_as_written(engine: Engine, tmp_path: Path,
                                                                        state_dir: StateDir) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "Functions.md").write_text("## hasTag\n\nWhether a note has a tag.\n", encoding="utf-8")
    (root / "Filters.md").write_text("Filter with [[Functions#hasTag|`hasTag`]] or `[[Functions]]`.\n",
                                     encoding="utf-8")

    result = run_import(engine, "markdown", root)

    assert result["relationships"] == 1  # the labelled link; not the one written as code
    edge = next(engine.get_record(reader(engine), line[4:])["frontmatter"]
                for path in records(state_dir, "relationships/")
                for line in (only_store(state_dir) / "vault" / path).read_text(encoding="utf-8").splitlines()
                if line.startswith("id: "))
    assert (edge["from"], edge["to"]) == (result["pages"]["Filters.md"], result["pages"]["Functions.md"])
    assert edge["evidence"][0]["quote"] == "[[Functions#hasTag|`hasTag`]]"


def test_the_records_an_import_writes_are_checked_as_their_bytes_read_back(engine: Engine, notes: Path) -> None:
    """Pages with aliases, tags, folders and extra fields, and the relationships of their links: each checked
    as the copy its bytes read back as, with the findings the record asked for gets."""
    with records_checked_as_read() as added:
        run_import(engine, "markdown", notes)
    assert sorted({path.split("/")[0] for _, _, path in added}) == ["pages", "relationships"]
    assert_checked_as_read(added)


def test_a_rerun_says_what_it_found_already_made_and_what_it_wrote(
        engine: Engine, notes: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "markdown", notes)
    assert first["imported"] == {"sources": 4, "pages": 3, "claims": 0, "relationships": 3}
    assert first["reused"] == {"sources": 0, "pages": 0, "claims": 0, "relationships": 0}
    assert summary(first)[0] == (
        "Imported markdown into main's store: 4 sources, 3 pages, 3 relationships.")

    again = run_import(engine, "markdown", notes)  # the same folder: every record an earlier run's

    assert again["imported"] == first["imported"] and again["reused"] == first["imported"]
    assert summary(again)[0] == (
        "Nothing new: all 4 sources, 3 pages and 3 relationships of the markdown input in main's store were "
        "already made by an earlier run of this input; nothing was written.")

    (notes / "Inbox.md").write_text("Plain note without frontmatter, linking [[Projects/Alpha/Tram clock]].\n"
                                    "Added later.\n", encoding="utf-8")
    edited = run_import(engine, "markdown", notes)  # one note revised (its page and its original), the rest kept

    assert edited["imported"] == first["imported"]
    assert edited["reused"] == {"sources": 3, "pages": 2, "claims": 0, "relationships": 3}
    assert summary(edited)[0] == (
        "Imported markdown into main's store: 1 source, 1 page new, and 3 sources, 2 pages, 3 relationships "
        "reused (made by an earlier run of this input).")
    assert "1 note changed since an earlier import: it got a new revision of its page." in summary(edited)


def summary(result: dict) -> list[str]:
    """The words ``knowledge import`` prints of a result (``formats.run_import`` adds the receiving agent)."""
    return import_summary({"agent": "main", **result}).splitlines()
