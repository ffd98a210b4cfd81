"""The Markdown importer on a small Logseq graph written here: pages named by their titles, page properties,
namespaces, journals and ``#[[multi word]]`` tags."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from engine.importers.common import Original
from engine.importers.logseq import format_day, graph_of, property_names
from engine.importers.markdown import load_markdown, parse_note
from engine.service import Engine
from tests.engine.importers.helpers import reader, run_import


def write_graph(root: Path, config: str = '{:journal/page-title-format "yyyy-MM-dd EEE"}\n') -> Path:
    (root / "logseq").mkdir(parents=True)
    (root / "logseq" / "config.edn").write_text(config, encoding="utf-8")
    (root / "pages").mkdir()
    (root / "journals").mkdir()
    (root / "pages" / "Project___Alpha.md").write_text(
        "alias:: [[Alpha]], Project A\ntags:: [[Diataxis/How To]], clocks\nsee-also:: [[Lotte]]\n\n"
        "- Repairing the tram clock\n\t- asked [[Lotte]] about the escapement #[[tram clocks]] #repair\n",
        encoding="utf-8")
    (root / "pages" / "Lotte.md").write_text("- Dana's sister\n\t- works on [[project/alpha]]\n", encoding="utf-8")
    (root / "pages" / "Claude%2FCode.md").write_text("title:: Claude/Code\n\n- the coding agent\n",
                                                    encoding="utf-8")
    (root / "pages" / "Diataxis___How To.md").write_text("- a kind of page\n", encoding="utf-8")
    (root / "pages" / "Odd.md").write_text("title:: The Odd One\n- see [[Claude/Code]]\n", encoding="utf-8")
    (root / "journals" / "2026_03_25.md").write_text(
        "- TODO call [[Lotte]] about [[Alpha]]\n- DONE read [[The Odd One]]\n", encoding="utf-8")
    (root / "pages" / "Day.md").write_text("- met on [[2026-03-25 Wed]]\n", encoding="utf-8")
    (root / "pages" / "Agents.md").write_text("- agents\n", encoding="utf-8")
    (root / "pages" / "Agents.md.md").write_text("- the file agents read\n", encoding="utf-8")
    (root / "pages" / "Rules.md").write_text("- see [[Agents.md]]\n", encoding="utf-8")
    return root


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    return write_graph(tmp_path / "graph")


def test_a_graphs_pages_are_named_by_their_titles_properties_and_namespaces(engine: Engine, graph: Path) -> None:
    result = run_import(engine, "markdown", graph)

    caller = reader(engine)
    pages = {path: engine.get_record(caller, page_id) for path, page_id in result["pages"].items()}
    alpha = pages["pages/Project___Alpha.md"]
    assert alpha["title"] == "Project/Alpha"
    assert alpha["frontmatter"]["aliases"] == ["Alpha", "Project A"]
    assert alpha["frontmatter"]["tags"] == ["Diataxis/How To", "clocks", "pages", "tram clocks", "repair"]
    assert "alias:: [[Alpha]], Project A" in alpha["body"]  # the properties stay in the text, as Logseq shows them
    assert "Frontmatter kept" not in alpha["body"]
    assert pages["pages/Claude%2FCode.md"]["title"] == "Claude/Code"
    assert pages["pages/Odd.md"]["title"] == "The Odd One"
    assert pages["pages/Diataxis___How To.md"]["title"] == "Diataxis/How To"
    day = pages["journals/2026_03_25.md"]
    assert (day["title"], day["frontmatter"]["aliases"]) == ("2026-03-25 Wed", ["2026-03-25"])

    # Every link names a page by its title or alias, whatever case, namespace or journal day.
    assert result.get("unresolved") is None, result.get("unresolved")
    # alpha -> Lotte, alpha -> How To (its tags:: property), Lotte -> alpha (lower case), Odd -> Claude/Code, the
    # journal -> Lotte, alpha (by alias) and Odd (by title::), Day -> the journal (by its title)
    # Rules -> Agents.md: the page titled so (kept as Agents.md.md), not the page Agents
    assert result["relationships"] == 9
    (folder,) = load_markdown(str(graph), lambda *_: None)
    assert [target.path for _, target in folder.resolved["pages/Rules.md"].notes] == ["pages/Agents.md.md"]


def test_a_graph_imported_from_its_pages_folder_is_still_read_as_logseq(graph: Path) -> None:
    (folder,) = load_markdown(str(graph / "pages"), lambda *_: None)

    assert {note.title for note in folder.notes} >= {"Project/Alpha", "Claude/Code", "Diataxis/How To"}


def test_a_folder_that_is_no_logseq_graph_is_read_as_before(tmp_path: Path) -> None:
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "Project___Alpha.md").write_text("title:: Not read\n#[[x y]] text\n", encoding="utf-8")

    (folder,) = load_markdown(str(tmp_path / "vault"), lambda *_: None)

    (note,) = folder.notes
    assert (note.title, note.aliases, note.tags) == ("Project___Alpha", (), ())
    assert graph_of(tmp_path / "vault") is None


def test_yaml_frontmatter_in_a_graph_still_wins_and_the_journal_title_has_a_default(tmp_path: Path) -> None:
    root = write_graph(tmp_path / "graph", config=";; :journal/page-title-format \"yyyy\"\n{}\n")
    graph = graph_of(root)
    assert graph is not None and graph.journal_title == "MMM do, yyyy"  # a commented-out line is not read

    note = parse_note(Original("pages/A___B.md", b"---\ntitle: From YAML\ntags: [x]\n---\ntitle:: ignored\n"),
                      {"note"}, graph)
    assert (note.title, note.tags) == ("From YAML", ("x", "pages"))
    day = parse_note(Original("journals/2025_01_01.md", b"- a day\n"), {"note"}, graph)
    assert (day.title, day.aliases) == ("Jan 1st, 2025", ("2025-01-01",))
    not_a_day = parse_note(Original("journals/2025_02_30.md", b"- no such day\n"), {"note"}, graph)
    assert not_a_day.title == "2025_02_30"


def test_property_values_and_journal_titles_are_read_as_logseq_writes_them() -> None:
    assert property_names("[[op/Protocol]], [[a, b]], plain one, #tag , #[[multi word]]") == [
        "op/Protocol", "a, b", "plain one", "tag", "multi word"]
    assert property_names("") == []
    assert format_day(datetime.date(2025, 5, 22), "EEEE, MMMM do, yyyy") == "Thursday, May 22nd, 2025"
    assert format_day(datetime.date(2025, 5, 11), "MMM do, yyyy") == "May 11th, 2025"
    assert format_day(datetime.date(2025, 1, 3), "yyyy/MM/dd") == "2025/01/03"


def test_a_block_reference_links_the_page_holding_the_block(tmp_path: Path) -> None:
    root = write_graph(tmp_path / "graph")
    (root / "pages" / "Source.md").write_text(
        "- the block quoted\n  id:: 67DFE827-9f2e-4f4e-ba91-d7d2be4253f4\n- another\n", encoding="utf-8")
    (root / "pages" / "Quoting.md").write_text(
        "- as said: ((67dfe827-9f2e-4f4e-ba91-d7d2be4253f4))\n"
        "\t- {{embed ((67dfe827-9f2e-4f4e-ba91-d7d2be4253f4))}}\n"
        "- gone: ((00000000-0000-0000-0000-000000000000))\n- `((67dfe827-9f2e-4f4e-ba91-d7d2be4253f4))` is code\n",
        encoding="utf-8")

    (folder,) = load_markdown(str(root), lambda *_: None)

    resolved = folder.resolved["pages/Quoting.md"]
    assert [(link.line, link.text, target.path) for link, target in resolved.notes] == [
        (1, "((67dfe827-9f2e-4f4e-ba91-d7d2be4253f4))", "pages/Source.md")]  # one link per page it names
    assert resolved.unresolved == ("((00000000-0000-0000-0000-000000000000))",)
    # Outside a graph ((...)) is text, as before.
    (root / "logseq" / "config.edn").unlink()
    (plain,) = load_markdown(str(root), lambda *_: None)
    assert plain.resolved["pages/Quoting.md"].notes == () and plain.resolved["pages/Quoting.md"].unresolved == ()
