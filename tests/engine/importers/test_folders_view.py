"""``operator/folders``: an imported vault's notes by the folder each came from."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.access.authority import OperatorCaller
from engine.importers import folders_view
from engine.importers.common import SourceReader
from engine.importers.markdown import load_markdown, resolve_note
from engine.memory.recall import set_recall
from engine.service import Engine
from engine.wire.protocol import Dispatcher, Session
from tests.engine.importers.helpers import write_vault
from tests.engine.importers.test_markdown_logseq import write_graph
from tests.engine.importers.test_import_beside_engine import WAIT_S, call, operator_session, start
from tests.helpers import page


@pytest.fixture
def served(engine: Engine) -> tuple[Dispatcher, Session]:
    """An operator session with the importer layer's methods, as `knowledge serve` registers them."""
    return operator_session(engine)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    for path, body in {"Home.md": "Start at [[Plan]].", "Projects/Alpha/Plan.md": "The plan, with #work.",
                       "Projects/Alpha/Risks.md": "What could go wrong.", "Projects/Beta/Idea.md": "An idea.",
                       "Journal/2026-12-01.md": "A day."}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(body + "\n", encoding="utf-8")
    return root


def test_the_folders_of_an_imported_vault_list_their_notes(engine: Engine, served, vault: Path) -> None:
    job = start(served, {"format": "markdown", "path": str(vault)})
    assert engine.jobs.wait(job["id"], WAIT_S)["state"] == "done"

    folders = call(served, "operator/folders", {"agent": "main"})["result"]
    assert folders == {"folders": [{"folder": "notes", "notes": 1}, {"folder": "notes/Journal", "notes": 1},
                                   {"folder": "notes/Projects/Alpha", "notes": 2},
                                   {"folder": "notes/Projects/Beta", "notes": 1}]}

    alpha = call(served, "operator/folders", {"agent": "main", "folder": "notes/Projects/Alpha", "limit": 1})
    first = alpha["result"]
    assert [record["title"] for record in first["records"]] == ["Plan"] and first["total"] == 2
    assert first["nextOffset"] == 1 and first["records"][0]["kind"] == "page"
    rest = call(served, "operator/folders", {"agent": "main", "folder": "notes/Projects/Alpha", "offset": 1})
    assert [record["title"] for record in rest["result"]["records"]] == ["Risks"] and "nextOffset" not in rest[
        "result"]
    empty = call(served, "operator/folders", {"agent": "main", "folder": "notes/Nowhere"})["result"]
    assert empty["records"] == [] and empty["total"] == 0


def test_a_note_revised_since_its_import_stays_in_its_folder(engine: Engine, served, vault: Path, owner) -> None:
    job = start(served, {"format": "markdown", "path": str(vault)})
    assert engine.jobs.wait(job["id"], WAIT_S)["state"] == "done"
    beta = call(served, "operator/folders", {"agent": "main", "folder": "notes/Projects/Beta"})["result"]
    idea = beta["records"][0]["id"]

    set_recall(engine, owner, {"id": idea, "recall": {"summary": "An idea for Beta", "triggers": ["Beta"]}})

    assert engine.get_record(owner, idea)["revision"] == 2
    again = call(served, "operator/folders", {"agent": "main", "folder": "notes/Projects/Beta"})["result"]
    assert [record["id"] for record in again["records"]] == [idea] and again["total"] == 1
    assert {"folder": "notes/Projects/Beta", "notes": 1} in again["folders"]


def test_the_folders_read_every_original_once_then_only_the_notes_changed(
        engine: Engine, served, vault: Path, owner, monkeypatch: pytest.MonkeyPatch) -> None:
    """Folders lists the imported notes kept for following links: the first call reads every imported page's
    original, later calls none (each call read them all before: 126-194 ms at 1,875 notes), and a note revised
    since is read again alone, in its folder as before."""
    job = start(served, {"format": "markdown", "path": str(vault)})
    assert engine.jobs.wait(job["id"], WAIT_S)["state"] == "done"
    reads: list[object] = []
    originals: list[str | None] = []
    real, real_descriptor = folders_view.notes_of, SourceReader._descriptor
    monkeypatch.setattr(folders_view, "notes_of", lambda view, partition, record_ids=None: reads.append(
        record_ids) or real(view, partition, record_ids))
    monkeypatch.setattr(SourceReader, "_descriptor", lambda reader, source_id: originals.append(
        source_id) or real_descriptor(reader, source_id))

    listed = call(served, "operator/folders", {"agent": "main"})["result"]
    assert reads == [None] and len(set(originals)) == 5  # the five notes' originals
    originals.clear()
    beta = call(served, "operator/folders", {"agent": "main", "folder": "notes/Projects/Beta"})["result"]
    assert beta["folders"] == listed["folders"] and [record["title"] for record in beta["records"]] == ["Idea"]
    assert call(served, "operator/folders", {"agent": "main"})["result"] == listed
    assert reads == [None] and originals == []  # kept: no original read again

    idea = beta["records"][0]["id"]
    set_recall(engine, owner, {"id": idea, "recall": {"summary": "An idea for Beta", "triggers": ["Beta"]}})
    again = call(served, "operator/folders", {"agent": "main", "folder": "notes/Projects/Beta"})["result"]
    assert [(record["id"], record["revision"]) for record in again["records"]] == [(idea, 2)]
    assert again["folders"] == listed["folders"] and reads[1] == [idea] and len(set(originals)) == 1


def test_pages_an_agent_wrote_are_in_no_folder(engine: Engine, served, owner) -> None:
    engine.save_page(owner, page("p1", "Written by hand", type_="note", body="Not imported."))

    assert call(served, "operator/folders", {"agent": "main"})["result"] == {"folders": []}
    assert call(served, "operator/folders", {"agent": "main", "folder": ""})["error"]["data"]["field"] == "folder"


def test_a_link_names_the_note_the_import_resolved_it_to_by_path_or_file_name(engine: Engine, served,
                                                                              tmp_path: Path) -> None:
    """A vault whose notes have titles of their own links them by file name (``[[learnings-index]]``); a
    link is resolved as the import resolved it: by path, then by file name, the nearest first."""
    root = tmp_path / "vault"
    write_vault(root, {"Home.md": "---\ntitle: Índice\n---\n[[plan-alpha]], [[Beta/plan-alpha]], [[nowhere]]",
                       "Alpha/plan-alpha.md": "---\ntitle: The alpha plan\n---\nA plan.",
                       "Beta/plan-alpha.md": "---\ntitle: Beta's copy\n---\nSee [[plan-alpha]]."})
    pages = imported_pages(engine, served, root)

    def named(in_note: str, name: str) -> str | None:
        return note_link(served, pages[in_note], name)

    assert named("Home.md", "plan-alpha") == pages["Alpha/plan-alpha.md"]  # by file name: the shallowest
    assert named("Home.md", "Beta/plan-alpha") == pages["Beta/plan-alpha.md"]  # by path
    assert named("Beta/plan-alpha.md", "plan-alpha") == pages["Beta/plan-alpha.md"]  # the nearest: its own folder
    assert named("Home.md", "PLAN-ALPHA.md") == pages["Alpha/plan-alpha.md"]  # as Obsidian: any case, .md or not
    assert named("Home.md", "nowhere") is None and named("Home.md", "The alpha plan") is None  # a title: not here
    assert call(served, "operator/noteLink", {"agent": "main", "from": "pg_nothing", "name": "plan-alpha"})[
        "result"] == {"id": None}


def imported_pages(engine: Engine, served, root: Path) -> dict[str, str]:
    """The pages of the folder at ``root`` imported through the socket, by note path."""
    job = start(served, {"format": "markdown", "path": str(root)})
    return engine.jobs.wait(job["id"], WAIT_S)["result"]["pages"]


def note_link(served, from_id: str, name: str) -> str | None:
    """The record a link named ``name`` in the record ``from_id`` opens, as the window asks (None: no note)."""
    return call(served, "operator/noteLink", {"agent": "main", "from": from_id, "name": name})["result"]["id"]


RULES_VAULT = {
    "Home.md": "---\ntitle: Índice\n---\n[[plan-alpha]], [[Beta/plan-alpha]], [[Alpha/plan-alpha#Risks]], "
               "[[plan-alpha#^step-2|the second step]], [[Charlotte]], [[Lotte]], [[PLAN-ALPHA.md]], [[nowhere]], "
               "[[Beta/sub/deep]]",
    "Alpha/plan-alpha.md": "---\ntitle: The alpha plan\n---\nA plan. [[Charlotte#Early years]]",
    "Beta/plan-alpha.md": "---\ntitle: Beta's copy\n---\nSee [[plan-alpha]] and [[sub/deep]].",
    "Beta/sub/deep.md": "Deep, back to [[Home]].",
    "People/Charlotte.md": "---\naliases: [Lotte]\n---\nDana's sister.",
}


def test_following_a_link_answers_as_the_import_resolved_every_link_of_the_vault(
        engine: Engine, served, tmp_path: Path) -> None:
    """Every link of a vault, its target as the window sends it (the heading or block after ``#`` and the label
    after ``|`` cut off): by path from the root or the note's folder, by file name (the nearest; a name two
    notes share), in any case and with ``.md``; the note the import linked, but for an alias, which the window
    finds by title or search instead."""
    root = tmp_path / "vault"
    write_vault(root, RULES_VAULT)
    pages = imported_pages(engine, served, root)
    (folder,) = load_markdown(str(root), lambda places: None)

    def named(in_note: str, name: str) -> str | None:
        return note_link(served, pages[in_note], name)

    without_aliases = replace(folder, by_alias={})
    answers, by_alias = 0, []
    for note in folder.notes:
        for link in note.links:
            resolved = resolve_note(without_aliases, note, link.target)
            assert named(note.path, link.target) == (pages[resolved.path] if resolved else None), link.text
            answers += 1
            if resolved is None and resolve_note(folder, note, link.target) is not None:
                by_alias.append(link.text)
    assert answers == 13 and by_alias == ["[[Lotte]]"]
    assert named("Home.md", "plan-alpha") == pages["Alpha/plan-alpha.md"]  # by file name: the shallowest
    assert named("Beta/plan-alpha.md", "plan-alpha") == pages["Beta/plan-alpha.md"]  # the nearest: its own folder
    assert named("Beta/plan-alpha.md", "sub/deep") == pages["Beta/sub/deep.md"]  # from the note's folder
    assert named("Home.md", "Alpha/plan-alpha") == pages["Alpha/plan-alpha.md"]  # [[Alpha/plan-alpha#Risks]]
    assert named("Home.md", "Lotte") is None and named("Home.md", "Charlotte") == pages["People/Charlotte.md"]


def test_the_notes_a_link_is_followed_among_are_read_whole_once_then_as_they_change(
        engine: Engine, served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Following a link reads the partition's imported notes whole once; afterwards only the records changed
    since are read, and a note imported since is found as it would be had it been there from the start."""
    root = tmp_path / "vault"
    write_vault(root, {"Home.md": "[[plan-alpha]]", "Alpha/plan-alpha.md": "A plan."})
    pages = imported_pages(engine, served, root)
    reads: list[object] = []
    real = folders_view.notes_of
    monkeypatch.setattr(folders_view, "notes_of", lambda view, partition, record_ids=None: reads.append(
        record_ids) or real(view, partition, record_ids))

    def named(name: str) -> str | None:
        return note_link(served, pages["Home.md"], name)

    assert named("plan-alpha") == pages["Alpha/plan-alpha.md"] and named("Home") == pages["Home.md"]
    assert reads == [None]  # read whole once, then kept
    write_vault(root, {"plan-alpha.md": "The plan beside Home."})
    again = engine.jobs.wait(start(served, {"format": "markdown", "path": str(root)})["id"], WAIT_S)["result"]

    assert named("plan-alpha") == again["pages"]["plan-alpha.md"] != pages["Alpha/plan-alpha.md"]  # the nearest now
    assert reads[0] is None and len(reads) == 2 and reads[1] is not None  # only what the import changed
    assert again["pages"]["plan-alpha.md"] in reads[1]


def test_a_path_two_pages_cite_is_the_newest_pages_and_a_key_two_paths_share_the_oldest_pages() -> None:
    """As the catalog lists pages, newest first (then by id), and a link was resolved among them: a path two
    pages cite (two folders of one name imported) is the newest page's; where two paths differ only in case,
    the path whose newest page comes last holds the key; a page forgotten hands both back."""
    notes = folders_view.VaultNotes()
    notes.add("Plan.md", "pg_b", "2026-12-01T10:00:00Z")
    notes.add("Plan.md", "pg_c", "2026-12-02T10:00:00Z")
    notes.add("Plan.md", "pg_a", "2026-12-02T10:00:00Z")
    assert notes.newest("Plan.md") == "pg_a"  # the newest, then the lowest id
    notes.add("PLAN.md", "pg_d", "2026-12-01T09:00:00Z")
    assert notes["plan"] == "PLAN.md" and notes.named("plan") == ["PLAN.md"]
    notes.remove("PLAN.md", "pg_d")
    assert notes["plan"] == "Plan.md" and notes.named("plan") == ["Plan.md"]
    for record_id in ("pg_a", "pg_b", "pg_c"):
        notes.remove("Plan.md", record_id)
    assert "plan" not in notes and notes.named("plan") == [] and len(notes) == 0


def test_an_empty_note_is_in_its_folder_though_nothing_of_it_is_retained(engine: Engine, served,
                                                                          tmp_path: Path) -> None:
    """An empty file (a chapter's heading) retains no original, and Folders read a note's folder from its
    original: 94 empty notes of a real vault were in no folder.  Each is in its folder now, a folder that holds
    only empty notes included, and a link to one names it.  With a second vault imported, an empty note is
    placed by the vault whose notes are in its folder: one in a folder both vaults have, or that no vault's
    notes are in, is in none (which vault holds it is not known; the page says nothing of it)."""
    def imported(root: Path, files: dict[str, str]) -> dict[str, str]:
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, encoding="utf-8")
        job = start(served, {"format": "markdown", "path": str(root)})
        return engine.jobs.wait(job["id"], WAIT_S)["result"]["pages"]

    pages = imported(tmp_path / "IT", {"Home.md": "See [[2.3 Chapter]].\n", "Cover.md": "",
                                       "01 Arduino/6.3 中断.md": "中断。\n", "01 Arduino/2.3 Chapter.md": "",
                                       "02 x86/Drafts/Blank.md": ""})

    def folder(name: str) -> list[str]:
        answer = call(served, "operator/folders", {"agent": "main", "folder": name})["result"]
        return [record["title"] for record in answer["records"]]

    listed = call(served, "operator/folders", {"agent": "main"})["result"]["folders"]
    assert listed == [{"folder": "IT", "notes": 2}, {"folder": "IT/01 Arduino", "notes": 2},
                      {"folder": "IT/02 x86/Drafts", "notes": 1}]
    assert folder("IT") == ["Cover", "Home"] and folder("IT/01 Arduino") == ["2.3 Chapter", "6.3 中断"]
    assert note_link(served, pages["Home.md"], "2.3 Chapter") == pages["01 Arduino/2.3 Chapter.md"]

    imported(tmp_path / "Other", {"01 Arduino/Wiring.md": "Wires.\n", "01 Arduino/Gap.md": "", "Top.md": ""})
    assert folder("Other/01 Arduino") == ["Wiring"] and folder("Other") == []
    assert folder("IT/01 Arduino") == ["6.3 中断"] and folder("IT") == ["Home"]  # in both vaults: in neither
    assert folder("IT/02 x86/Drafts") == []  # no vault's notes are there


def test_an_empty_note_kept_is_placed_again_when_another_vault_shares_its_folder(engine: Engine, served,
                                                                                tmp_path: Path) -> None:
    """Where an empty note is depends on the other notes' folders: a second vault with a folder of the same
    name leaves it in none, for Folders and for a link to it alike, as a fresh read says, though the empty
    note's page did not change."""
    write_vault(tmp_path / "IT", {"Home.md": "See [[Gap]].", "Arduino/Wiring.md": "Wires."})
    (tmp_path / "IT" / "Arduino" / "Gap.md").write_text("", encoding="utf-8")
    pages = imported_pages(engine, served, tmp_path / "IT")

    def gap() -> tuple[list[dict], str | None]:
        folders = call(served, "operator/folders", {"agent": "main"})["result"]["folders"]
        return folders, note_link(served, pages["Home.md"], "Gap")

    assert gap() == ([{"folder": "IT", "notes": 1}, {"folder": "IT/Arduino", "notes": 2}], pages["Arduino/Gap.md"])
    write_vault(tmp_path / "Other", {"Arduino/Pins.md": "Pins."})
    assert engine.jobs.wait(start(served, {"format": "markdown", "path": str(tmp_path / "Other")})["id"], WAIT_S)[
        "state"] == "done"
    placed_again = gap()
    assert placed_again == ([{"folder": "IT", "notes": 1}, {"folder": "IT/Arduino", "notes": 1},
                             {"folder": "Other/Arduino", "notes": 1}], None)
    fresh = folders_view.ImportedNotes(*engine.enter(OperatorCaller("main"), create=False).read(
        lambda runtime, authority, view: folders_view.notes_of(view, authority.partition)))
    assert sorted((folder, len(rows)) for folder, rows in fresh.by_folder().items()) == [
        (entry["folder"], entry["notes"]) for entry in placed_again[0]]
    assert fresh.linked(pages["Home.md"], "Gap") is None


def test_following_a_link_in_a_logseq_graph_answers_as_the_import_resolved_it_by_title_first(
        engine: Engine, served, tmp_path: Path) -> None:
    """In a Logseq graph a link names a page's title or alias first (``[[Agents.md]]`` is the page titled so,
    kept as ``Agents.md.md``, not the file ``Agents.md``), then its path or file name: every link of the graph is
    followed to the page the import linked."""
    root = write_graph(tmp_path / "graph")
    pages = imported_pages(engine, served, root)
    (folder,) = load_markdown(str(root), lambda places: None)

    def named(in_note: str, name: str) -> str | None:
        return note_link(served, pages[in_note], name)

    answers = 0
    for note in folder.notes:
        for link in note.links:
            resolved = resolve_note(folder, note, link.target)
            assert named(note.path, link.target) == (pages[resolved.path] if resolved else None), link.text
            answers += 1
    assert answers == 12
    assert named("pages/Rules.md", "Agents.md") == pages["pages/Agents.md.md"]  # its title, not the file Agents.md
    assert named("pages/Rules.md", "Agents") == pages["pages/Agents.md"]  # by file name, as the import
    assert named("pages/Lotte.md", "project/alpha") == pages["pages/Project___Alpha.md"]  # a namespace, any case
    assert named("journals/2026_03_25.md", "Project A") == pages["pages/Project___Alpha.md"]  # an alias
    assert named("pages/Day.md", "2026-03-25") == pages["journals/2026_03_25.md"]  # a journal by its day


def test_a_vault_that_is_no_graph_follows_no_title_though_a_graph_was_imported_beside_it(
        engine: Engine, served, tmp_path: Path) -> None:
    """The title rule is a graph's: in an Obsidian vault imported beside a graph, a title names nothing."""
    graph_root = write_graph(tmp_path / "graph")
    root = tmp_path / "vault"
    write_vault(root, {"Home.md": "[[The plan]] and [[Agents.md]]", "Agents.md": "Agents.",
                       "Agents.md.md": "---\ntitle: Agents.md\n---\nThe file.",
                       "Plan.md": "---\ntitle: The plan\n---\n"})
    for path in (graph_root, root):
        pages = imported_pages(engine, served, path)

    def named(name: str) -> str | None:
        return note_link(served, pages["Home.md"], name)

    assert named("Agents.md") == pages["Agents.md"] and named("The plan") is None


def test_a_logseq_graphs_pages_are_listed_under_their_namespaces(engine: Engine, served, tmp_path: Path) -> None:
    """Logseq browses namespaces as a tree: ``Project/Alpha`` is the page Alpha under Project, in Folders
    ``graph/pages/Project``; a journal stays in its folder, and an Obsidian vault's ``a___b.md`` in its own."""
    root = write_graph(tmp_path / "graph")
    (root / "pages" / "Claude___Code___Memory.md").write_text("- kept across sessions\n", encoding="utf-8")
    (root / "pages" / "Empty___Namespace.md").write_text("", encoding="utf-8")
    write_vault(tmp_path / "vault", {"a___b.md": "An Obsidian note.", "notes/c___d.md": "Another."})
    for path in (root, tmp_path / "vault"):
        job = start(served, {"format": "markdown", "path": str(path)})
        assert engine.jobs.wait(job["id"], WAIT_S)["state"] == "done"

    folders = call(served, "operator/folders", {"agent": "main"})["result"]["folders"]
    assert folders == [{"folder": "graph/journals", "notes": 1},
                       {"folder": "graph/pages", "notes": 6},  # Lotte, The Odd One, Day, Agents, Agents.md, Rules
                       {"folder": "graph/pages/Claude", "notes": 1}, {"folder": "graph/pages/Claude/Code", "notes": 1},
                       {"folder": "graph/pages/Diataxis", "notes": 1}, {"folder": "graph/pages/Empty", "notes": 1},
                       {"folder": "graph/pages/Project", "notes": 1},
                       {"folder": "vault", "notes": 1}, {"folder": "vault/notes", "notes": 1}]

    def titles(folder: str) -> list[str]:
        return [record["title"] for record in call(served, "operator/folders", {"agent": "main", "folder": folder})[
            "result"]["records"]]

    assert titles("graph/pages/Project") == ["Project/Alpha"]
    assert titles("graph/pages/Claude/Code") == ["Claude/Code/Memory"]
    assert titles("graph/pages/Empty") == ["Empty/Namespace"]  # an empty page, placed by its folder and title
    assert titles("vault") == ["a___b"] and titles("vault/notes") == ["c___d"]


def test_a_logseq_pages_titles_are_forgotten_with_the_page() -> None:
    """A graph's page is named by its title and aliases while it is kept, in any case; two pages of one title
    both answer it, and a page removed (revised, gone) hands its names back."""
    notes = folders_view.VaultNotes()
    assert not notes.named_by_title
    notes.add("pages/Agents.md.md", "pg_a", "2026-12-01T10:00:00Z", ("Agents.md", "AGENT FILE"))
    notes.add("pages/Copy.md", "pg_b", "2026-12-01T10:00:00Z", ("agents.md",))
    notes.add("pages/Plain.md", "pg_c", "2026-12-01T10:00:00Z")
    assert sorted(notes.titled("agents.md")) == ["pages/Agents.md.md", "pages/Copy.md"]
    assert notes.titled("agent file") == ["pages/Agents.md.md"] and notes.named_by_title
    notes.remove("pages/Agents.md.md", "pg_a")
    assert notes.titled("agents.md") == ["pages/Copy.md"] and notes.titled("agent file") == []
    notes.remove("pages/Copy.md", "pg_b")
    assert notes.titled("agents.md") == [] and not notes.named_by_title and notes.named("plain") == ["pages/Plain.md"]
