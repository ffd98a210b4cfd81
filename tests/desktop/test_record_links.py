"""Links belong to pages: an imported Markdown vault's links, through the window's real code.

A vault with wiki links is written here and imported into the served demo store as ``knowledge import
markdown`` does; every [[link]] becomes a ``related_to`` relationship record.  The lists show pages and
claims unless a list's *Show links* is ticked (kept in the window's settings), and a page lists its links
and the records linked to it, each record once.
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from PySide6.QtCore import QSettings, QUrl

from desktop.client import OperatorClient
from desktop.common.widgets import SafeTextBrowser
from desktop.records.markdown import parse_part
from desktop.records.view import RecordsView
from desktop.tasks import EngineTasks
from engine.access.authority import AgentCaller
from engine.service import Engine
from tests.desktop.conftest import serving, wait_for_signal
from tests.desktop.test_records_view import make_view
from tests.engine.importers.helpers import run_import

SPOKES = 13


@dataclass(frozen=True)
class Served:
    engine: Engine
    pages: dict[str, str]  # each note's page id, by the note's path in the vault


@pytest.fixture
def vault(tmp_path: Path, demo_template: Path) -> Iterator[Served]:
    """The demo store served with a small vault imported: a Hub note that 13 Spoke notes link to, and a typed
    relationship (``about``) beside Spoke 02's wiki link to the Hub."""
    root = tmp_path / "vault"
    (root / "Spokes").mkdir(parents=True)
    (root / "Hub.md").write_text("# Hub\n\nThe hub links [[Spoke 01]], [[Spoke 01|again]] and [[Nowhere]].\n",
                                 encoding="utf-8")
    for number in range(1, SPOKES + 1):
        (root / "Spokes" / f"Spoke {number:02}.md").write_text(f"Spoke {number} points at the [[Hub]].\n",
                                                               encoding="utf-8")
    with serving(tmp_path / "state", demo_template) as engine:
        pages = run_import(engine, "markdown", root)["pages"]
        caller = AgentCaller(engine.registry.add_credential("main"), {"kind": "owner-private"})
        engine.remember(caller, {"requestId": "typed-link", "items": [
            {"relation": "about", "from": pages["Spokes/Spoke 02.md"], "to": pages["Hub.md"],
             "excerpt": "Spoke 2 is about the hub."}]})
        yield Served(engine, pages)


@pytest.fixture
def vault_tasks(vault: Served) -> Iterator[EngineTasks]:
    made = EngineTasks(connect=lambda: OperatorClient(vault.engine.state))
    yield made
    made.shutdown()


def every_row(qtbot, model) -> list[dict]:
    while model.canFetchMore(model.index(0, 0).parent()):
        with qtbot.waitSignal(model.sig_page_loaded, timeout=10_000):
            model.fetchMore(model.index(0, 0).parent())
    return model.rows()


def test_recent_and_browse_show_pages_and_claims_until_links_are_asked_for(
        qtbot, vault_tasks, tmp_path, gui_thread_guard) -> None:
    settings = QSettings(str(tmp_path / "desktop.ini"), QSettings.Format.IniFormat)
    view = make_view(qtbot, vault_tasks, settings)

    recent = every_row(qtbot, view.recent_model)
    assert {row["kind"] for row in recent} == {"page", "claim"}
    assert {"Hub", "Spoke 07"} <= {row["title"] for row in recent}
    assert view.recent_model.total == len(recent)
    assert "relationship" not in {row["kind"] for row in view.types_model.rows()}

    with qtbot.waitSignal(view.recent_model.sig_page_loaded, timeout=10_000):
        view.show_links["recent"].setChecked(True)
    with_links = every_row(qtbot, view.recent_model)
    related = [row for row in with_links if row["type"] == "related_to"]
    assert len(related) == SPOKES + 1  # each spoke's link to the hub, and the hub's one link to Spoke 01
    assert view.recent_model.total == len(recent) + len(related) + 7  # the demo's 6 relationships, and "about"
    assert "relationship" not in {row["kind"] for row in view.types_model.rows()}  # Browse keeps its own choice

    view.show_links["browse"].setChecked(True)
    assert {"related_to", "about"} <= {row["type"] for row in view.types_model.rows() if row["kind"] == "relationship"}
    view.show_links["browse"].setChecked(False)
    assert "relationship" not in {row["kind"] for row in view.types_model.rows()}

    settings.sync()
    again = make_view(qtbot, vault_tasks, QSettings(str(tmp_path / "desktop.ini"), QSettings.Format.IniFormat))
    assert [again.show_links[name].isChecked() for name in ("recent", "browse", "search")] == [True, False, False]
    assert len(every_row(qtbot, again.recent_model)) == len(with_links)


def test_a_search_for_a_notes_name_puts_the_note_first_not_its_links(qtbot, vault_tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, vault_tasks)
    view.query.setText("Hub")
    with qtbot.waitSignal(view.search_model.sig_page_loaded, timeout=10_000):
        view.search()
    hits = view.search_model.rows()
    assert hits[0]["title"] == "Hub"
    assert {hit["kind"] for hit in hits} <= {"page", "claim"}

    with qtbot.waitSignal(view.search_model.sig_page_loaded, timeout=10_000):
        view.show_links["search"].setChecked(True)
    assert "relationship" in {hit["kind"] for hit in view.search_model.rows()}


def open_page(qtbot, view: RecordsView, record_id: str) -> None:
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(record_id))
    qtbot.waitUntil(lambda: view.page.links is not None and view.page.links["id"] == record_id, timeout=10_000)


def test_a_page_lists_its_links_and_what_links_to_it_each_once(qtbot, vault, vault_tasks, gui_thread_guard) -> None:
    pages = vault.pages
    view = make_view(qtbot, vault_tasks)
    open_page(qtbot, view, pages["Hub.md"])
    text = view.page.connections.toPlainText()

    assert view.page.tabs.tabText(view.page.tabs.indexOf(view.page.connections)).replace("&", "") == "Links"
    assert "Links (1)" in text and f"Linked from ({SPOKES})" in text  # never "Backlinks (0)" under 13 links
    assert "Backlinks" not in text
    linked_from = text.split("Linked from")[1]
    assert [line.split(" ")[0:2] for line in linked_from.splitlines()[1:]].count(["Spoke", "02"]) == 1
    spoke_two = next(line for line in linked_from.splitlines() if line.startswith("Spoke 02"))
    assert "related to" in spoke_two and "about" in spoke_two  # the wiki link and the typed relationship

    open_page(qtbot, view, pages["Spokes/Spoke 05.md"])
    text = view.page.connections.toPlainText()
    assert "Links (1)" in text and "Hub" in text.split("Linked from")[0] and "Linked from (0)" in text

    # Clicking a linked record opens it; clicking a link record opens the relationship.
    wait_for_signal(qtbot, view.page.sig_content_loaded,
                    lambda: view.page.connections.sig_link_activated.emit(QUrl(f"record:{pages['Hub.md']}")))
    assert view.page.record["title"] == "Hub"
    html = view.page.connections.toHtml()
    via = next(c["via"]["id"] for c in view.page.links["connections"] if c["direction"] == "out")
    assert f"record:{via}" in html
    wait_for_signal(qtbot, view.page.sig_content_loaded,
                    lambda: view.page.connections.sig_link_activated.emit(QUrl(f"record:{via}")))
    assert view.page.record["kind"] == "relationship"
    # Its relation in words, as the Links tab says it: never the stored key "related_to".
    qtbot.waitUntil(lambda: "relationship · related to · updated" in view.page.header.toPlainText(), timeout=5_000)
    assert "related_to" not in view.page.header.toPlainText() + view.page.details.toPlainText()


def test_a_body_is_parsed_and_shown_once_with_its_links_resolved(
        qtbot, vault, vault_tasks, gui_thread_guard, monkeypatch) -> None:
    """A long note costs its parse and its layout once a page, not once for the record and again for its links."""
    from desktop.records import markdown as markdown_module

    parsed: list[str] = []
    monkeypatch.setattr(markdown_module, "parse_part", lambda text: parsed.append(text) or parse_part(text))
    view = make_view(qtbot, vault_tasks)
    shown: list[str] = []
    monkeypatch.setattr(view.page.body, "show_html", lambda html: shown.append(html) or SafeTextBrowser.show_html(
        view.page.body, html))
    open_page(qtbot, view, vault.pages["Hub.md"])

    assert len(parsed) == 1 and len(shown) == 1
    assert f'href="record:{vault.pages["Spokes/Spoke 01.md"]}"' in shown[0]  # [[Spoke 01]]: the record it names
    assert 'href="wikilink:Nowhere"' in shown[0]  # no such note: found by a search when clicked
    assert "Spoke 01" in view.page.body.toPlainText() and "[[" not in view.page.body.toPlainText()

    view.page.refresh()  # read again in place (an agent wrote), nothing changed: shown as made, not parsed again
    qtbot.waitUntil(lambda: len(shown) == 2, timeout=10_000)
    assert len(parsed) == 1 and shown[1] == shown[0]

    open_page(qtbot, view, vault.pages["Spokes/Spoke 03.md"])  # another note, then the hub again (Alt+Left)
    assert len(parsed) == 2 and "Spoke 3 points at the" in shown[2]
    open_page(qtbot, view, vault.pages["Hub.md"])
    assert len(parsed) == 2 and shown[3] == shown[0]


def test_a_note_opened_again_after_its_links_changed_is_made_for_its_links(
        qtbot, vault, vault_tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, vault_tasks)
    open_page(qtbot, view, vault.pages["Hub.md"])
    assert 'href="wikilink:Nowhere"' in view.page.body.toHtml()
    gui_thread_guard.active = False
    caller = AgentCaller(vault.engine.registry.add_credential("main"), {"kind": "owner-private"})
    nowhere = vault.engine.save_page(caller, {"requestId": "nowhere", "type": "concept", "title": "Nowhere",
                                              "body": "Here."})
    vault.engine.remember(caller, {"requestId": "to-nowhere", "items": [
        {"relation": "related_to", "from": vault.pages["Hub.md"], "to": nowhere["id"], "excerpt": "[[Nowhere]]"}]})
    gui_thread_guard.active = True
    open_page(qtbot, view, vault.pages["Spokes/Spoke 03.md"])
    open_page(qtbot, view, vault.pages["Hub.md"])  # the same text, a link more: [[Nowhere]] now leads to it
    assert f'href="record:{nowhere["id"]}"' in view.page.body.toHtml()


def test_a_link_that_is_no_longer_current_is_not_counted() -> None:
    from desktop.records.render import links_html, page_links

    def via(number: int, status: str) -> dict:
        return {"id": f"pg_via{number}", "title": f"link {number}", "status": status}

    kept, gone = {"id": "pg_kept", "title": "Kept"}, {"id": "pg_gone", "title": "Gone"}
    answer = {"id": "pg_me", "references": [], "backlinks": [], "claims": [], "truncated": False, "connections": [
        {"relation": "related_to", "direction": "in", "via": via(1, "withdrawn"), "record": kept},
        {"relation": "about", "direction": "in", "via": via(2, "current"), "record": kept},
        {"relation": "related_to", "direction": "in", "via": via(3, "superseded"), "record": gone}]}

    outgoing, incoming = page_links(answer)
    assert outgoing == [] and [(entry.record["id"], entry.current) for entry in incoming] == [
        ("pg_kept", True), ("pg_gone", False)]
    assert incoming[0].ways == [("about", via(2, "current"))]
    text = links_html(answer)
    assert "Linked from (1)" in text and "No longer current (1)" in text


def test_a_page_of_many_links_lists_them_by_title_whatever_order_they_were_written_in() -> None:
    """A hub note's 500 links were listed in the order the import happened to link them (Topic 000, 005, 004,
    002 …); the Links tab lists them by title, as a file list would, both ways."""
    from desktop.records.render import links_html

    numbers = [0, 5, 4, 2, 1, 3, 13, 8, 6]
    answer = {"id": "pg_hub", "references": [], "backlinks": [], "claims": [], "truncated": False, "connections": [
        {"relation": "related_to", "direction": direction, "via": {"id": f"rl_{direction}{n}", "status": "current"},
         "record": {"id": f"pg_{n}", "title": f"topic {n:03d}" if n % 2 else f"Topic {n:03d}"}}
        for direction in ("out", "in") for n in numbers]}
    text = re.sub(r"<[^>]+>", " ", links_html(answer))
    listed = [int(n) for n in re.findall(r"[Tt]opic (\d{3})", text)]
    assert listed == sorted(numbers) * 2, listed
