"""The owner's snippets: the words of a Markdown fragment without their markup, the query's words marked."""

from __future__ import annotations

import pytest

from engine.access.authority import OperatorCaller
from engine.index.analysis import Analyzer
from engine.importers.common import Original
from engine.importers.markdown import parse_note
from engine.search.plain import own_text, owner_snippet, plain_snippet, query_marker
from tests.helpers import page


@pytest.mark.parametrize("fragment, shown", [
    ("See [[Sync/Mobile sync|syncing to a phone]] and [[Obsidian Sync]].", "See syncing to a phone and Obsidian Sync."),
    ("[[Guides/Setup.md]] then [[Note#Part]]", "Setup then Note › Part"),
    ("an embed ![[diagram.png]] here", "an embed here"),  # an image's file name says nothing in a snippet
    ("- ![[lucide-table.svg#icon]] **View menu** and ![[Report.PDF|300]]", "View menu and"),  # an icon, a file
    ("My books: ![[Books.base]] By year: ![[Books.base#By year]] end", "My books: By year: end"),  # a base
    ("Kept in ![[Books.base]] and ![[Films.base#By year]].", "Kept in and."),  # no space before the stop
    ("the list (![[Books.base]]), then ![[Books.base]]; next", "the list, then; next"),  # nor empty brackets
    ("one ![[a.png]]  ![[b.base]]   two", "one two"),  # nor spaces twice
    ("glued![[icon.svg]]words", "glued words"),  # words an embed stood between stay apart
    ("![[Other note]] stays", "Other note stays"),  # an embedded note is named by its title
    ("ing|the alias]] and after", "the alias and after"),  # the fragment began inside a link
    ("and before [[Target|ali", "and before Target"),  # and ended inside one
    ("a [link](https://example.org/x) in text", "a link in text"),
    ("## Heading\n- item one\n1. first\n- [ ] to do", "Heading item one first to do"),
    ("**bold**, *italic*, ~~gone~~, ==marked== and `code`", "bold, italic, gone, marked and code"),
    ("> [!warning] Back up first\n> before you sync", "Warning: Back up first before you sync"),
    ("5 * 3 * 2 and C# stay", "5 * 3 * 2 and C# stay"),
    ("---\ntitle: Sync\ntags:\n  - phone\n- mobile\n---\nThe body begins", "The body begins"),  # frontmatter
    ("one part\n\n---\n\nanother part", "one part another part"),  # a thematic break
    ("---\nnot: yaml, but\nprose here\n---\nafter", "not: yaml, but prose here after"),  # not frontmatter
    ("A paragraph to link to. ^b15695\n- an item ^item-2\n^own-line\nnext", "A paragraph to link to. an item next"),
    ("see [[Internal links#^b15695]] and [[Note#^x|this]]", "see Internal links and this"),  # a block's link
    ("x^2 and *word*^note stay", "x^2 and word^note stay"),  # a caret in running text
    ("Navigate to configuration sync**. Reload", "Navigate to configuration sync. Reload"),  # bold cut open
    ("Open **Settings → Sync and", "Open Settings → Sync and"),  # and cut before it closed
    ("a == b, x ** 2 and snake_case stay", "a == b, x ** 2 and snake_case stay"),
    ("Log in:\n\n```shell\n# Login\nob login\n```\nthen", "Log in: Login ob login then"),  # a fenced block
    ("~~~\nplain fence\n~~~", "plain fence"),
    ("shell\nob sync` and", "shell ob sync and"),  # an unpaired tick left by a cut
    ("| Action | Shortcut |\n| --- | :---: |\n| Open | `Ctrl+O` |", "Action · Shortcut Open · Ctrl+O"),  # a table
    ("Completed task]] | | `> [!note]` | [[Callouts]] |", "Completed task · > [!note] · Callouts"),  # cut row
    ("| [[Table view\\|Table]] | a \\| b |", "Table · a | b"),  # a pipe escaped for the table
])
def test_markup_becomes_the_words_it_shows(fragment: str, shown: str) -> None:
    assert plain_snippet(fragment) == shown


def test_the_owners_search_shows_plain_snippets_and_agents_get_the_fragment(engine, owner) -> None:
    engine.save_page(owner, page("p1", "Mobile sync", type_="note",
                                 body="Use [[Obsidian Sync|the sync service]] to reach the **phone**."))

    [owners] = engine.search(owner, {"query": "phone"}, owner=True)["hits"]
    [agents] = engine.search(owner, {"query": "phone"})["hits"]

    assert owners["snippet"] == "Use the sync service to reach the phone."
    assert "[[Obsidian Sync|the sync service]]" in agents["snippet"] and "**phone**" in agents["snippet"]


def _marked(text: str, spans: list[list[int]]) -> list[str]:
    return [text[start:end] for start, end in spans]


def test_the_owners_snippet_marks_the_query_words_as_the_index_reads_them() -> None:
    analyzer = Analyzer()
    marks = query_marker(analyzer, analyzer.query_terms("phone syncing"))
    body = "Syncing your **phones**: see [[Sync/Mobile|phone sync]] (a phone-sync guide)."

    text, spans = owner_snippet(body, body, marks)

    assert text == "Syncing your phones: see phone sync (a phone-sync guide)."
    assert _marked(text, spans) == ["Syncing", "phones", "phone", "sync", "phone", "sync"]
    assert all(text[start - 1:start] in ("", " ", "(", "-") for start, _ in spans)  # whole words


def test_a_markdown_link_or_picture_the_cut_left_open_or_with_parentheses_reads_as_its_words() -> None:
    assert plain_snippet("串口控制台 ![](../photo/Pasted%20image%20") == "串口控制台"  # a note of pictures alone
    assert plain_snippet("See [the guide](../docs/gui") == "See the guide"
    assert plain_snippet("见 [内积](向量内积%20(inner%20product).md)。") == "见 内积。"


def test_the_owners_snippet_marks_a_chinese_or_japanese_word_where_it_stands_in_its_sentence() -> None:
    analyzer = Analyzer()
    body = "今天的会议记录由小王整理，会后发给IBinder项目组。新しいオフィスは渋谷にあります。"

    text, spans = owner_snippet(body, body, query_marker(analyzer, analyzer.query_terms("会议记录 渋谷 ibinder")))
    assert _marked(text, spans) == ["会议记录", "IBinder", "渋谷"]  # not the 会 of 会后

    text, spans = owner_snippet(body, body, query_marker(analyzer, analyzer.query_terms("会")))
    assert _marked(text, spans) == ["会", "会"] and spans[0] == [body.index("会议"), body.index("会议") + 1]


def test_the_owners_snippet_says_where_the_note_goes_on_and_keeps_whole_words() -> None:
    body = "An opening line. " * 10 + "The middle passage about backups. " + "A closing line. " * 10 + "The end."
    middle = body.index("The middle")
    nothing = query_marker(Analyzer(), [])

    assert owner_snippet(body[middle:middle + 33], body, nothing)[0] == "\u2026The middle passage about backups.\u2026"
    assert owner_snippet(body[:30], body, nothing)[0] == "An opening line. An opening line.\u2026"  # "li" whole
    marked = "See [[Sync/Mobile|phone sync]] and **backups**. Then more."
    shown = owner_snippet("Mobile|phone sync]] and **backups", marked, nothing)[0]
    assert shown == "\u2026phone sync and backups.\u2026"  # the link and the emphasis the passage cut are whole
    assert owner_snippet(body[-24:], body, nothing)[0] == "\u2026A closing line. The end."
    assert owner_snippet(body, body, nothing) == (body.strip().replace("**", ""), [])  # the whole note: none
    assert owner_snippet("", "", nothing) == ("", [])


def test_the_owners_search_marks_words_and_agents_get_no_highlights(engine, owner) -> None:
    engine.save_page(owner, page("p1", "Mobile sync", type_="note",
                                 body="Intro. " * 60 + "How to sync the vault to a **phone**. " + "More. " * 60))

    [owners] = engine.owner_search(OperatorCaller("main"), {"query": "how do I sync to my phone",
                                                            "mode": "keyword"})["hits"]
    [agents] = engine.search(owner, {"query": "how do I sync to my phone"})["hits"]

    text = owners["snippet"]
    assert text.startswith("\u2026") and text.endswith("\u2026") and "**" not in text
    assert _marked(text, owners["highlights"]) == ["sync", "phone"]  # "how", "to": function words, unmarked
    # Agents' knowledge_grep: no highlights, the passage that holds the query's words, as written.
    assert "highlights" not in agents and "sync the vault to a **phone**" in agents["snippet"]


def test_a_query_of_function_words_alone_marks_them() -> None:
    analyzer = Analyzer()
    marks = query_marker(analyzer, analyzer.query_terms("to be or not"))
    text, spans = owner_snippet("To be, or not to be.", "To be, or not to be.", marks)
    assert _marked(text, spans) == ["To", "be", "or", "not", "to", "be"]


# --- the frontmatter an import kept at the end of a page ----------------------------------------------------


def imported_body(frontmatter: str, text: str) -> str:
    """The body the Markdown importer writes for a note: its text, then the frontmatter it kept."""
    note = parse_note(Original("Notes/crm.md", f"---\n{frontmatter}---\n{text}".encode("utf-8")), {"note"})
    assert "Frontmatter kept from the note" in note.body
    return note.body


def owners_snippet(engine, query: str) -> dict:
    [hit] = engine.owner_search(OperatorCaller("main"), {"query": query, "mode": "keyword"})["hits"]
    return hit


def test_the_owners_snippet_is_the_notes_own_words_where_they_hold_the_query(engine, owner) -> None:
    body = imported_body("date: 2026-08-05\nsource: tucrmia\n", "Moved the invoices to tucrmia over two weekends.\n")
    engine.save_page(owner, page("p1", "CRM move", type_="note", body=body))

    hit = owners_snippet(engine, "tucrmia invoices")
    agents = engine.search(owner, {"query": "tucrmia invoices"})["hits"][0]

    assert hit["snippet"] == "Moved the invoices to tucrmia over two weekends."  # whole: no "…", no "date:"
    assert _marked(hit["snippet"], hit["highlights"]) == ["invoices", "tucrmia"]
    # Agents' knowledge_grep is as it was: the body as written, the kept block in it.
    assert agents["snippet"] == body.strip() and "source: tucrmia" in agents["snippet"]


def test_the_kept_frontmatter_is_the_snippet_when_only_it_holds_the_query(engine, owner) -> None:
    body = imported_body("date: 2026-08-05\nsource: tucrmia\n", "Two weekends of moving invoices.\n")
    engine.save_page(owner, page("p1", "CRM move", type_="note", body=body))

    hit = owners_snippet(engine, "tucrmia")

    assert hit["snippet"] == ("Two weekends of moving invoices. Frontmatter kept from the note: date: "
                              "2026-08-05 source: tucrmia")
    assert _marked(hit["snippet"], hit["highlights"]) == ["tucrmia"]


def test_a_long_notes_snippet_is_its_own_passage_before_the_kept_frontmatters(engine, owner) -> None:
    text = "An opening line. " * 30 + "The tucrmia export runs nightly. " + "A closing line. " * 30
    # The kept block names the word twice: tantivy's best passage of the whole body would be the block's.
    body = imported_body("date: 2026-08-05\nsource: tucrmia\nproject: tucrmia\n", text)
    engine.save_page(owner, page("p1", "Nightly export", type_="note", body=body))
    elsewhere = imported_body("source: tucrmia\n", "A note of other things. " * 30)
    engine.save_page(owner, page("p2", "Other things", type_="note", body=elsewhere))

    hits = {hit["title"]: hit for hit in engine.owner_search(OperatorCaller("main"), {
        "query": "tucrmia", "mode": "keyword"})["hits"]}

    assert "The tucrmia export runs nightly." in hits["Nightly export"]["snippet"]
    assert "source:" not in hits["Nightly export"]["snippet"]
    # Only the kept block holds the word: it is the passage shown, the hit found as before.
    assert "Frontmatter kept from the note: source: tucrmia" in hits["Other things"]["snippet"]


def test_a_hit_by_its_title_alone_shows_the_notes_own_start(engine, owner) -> None:
    body = imported_body("date: 2026-08-05\nsource: club\n", "Plays on Thursdays.\n")
    engine.save_page(owner, page("p1", "Chess", type_="note", body=body))

    assert owners_snippet(engine, "chess")["snippet"] == "Plays on Thursdays."


def test_frontmatter_kept_as_written_is_left_out_of_the_snippet_too(engine, owner) -> None:
    body = imported_body("title: Bruno\nupdated: 2026-08-17 round 33: storage\n", "Bruno keeps the storage keys.\n")
    assert "as written (not read: line 3 is not valid YAML" in body
    engine.save_page(owner, page("p1", "Bruno", type_="note", body=body))

    assert owners_snippet(engine, "storage")["snippet"] == "Bruno keeps the storage keys."


@pytest.mark.parametrize("body", [
    "Plain text, nothing kept.",
    "Text.\n\nFrontmatter kept from the note:\n\n```yaml\nsource: club\n```\n\nWritten after it by an agent.",
    "Frontmatter kept from the note: a sentence that only starts like the heading.",
])
def test_a_body_that_does_not_end_with_a_kept_block_is_its_own_text_whole(body: str) -> None:
    assert own_text(body) == body


def test_own_text_leaves_out_the_kept_block_alone() -> None:
    body = imported_body('a: "```b```"\nsource: club\n', "The note's words.\n")
    assert own_text(body) == "The note's words."
    assert own_text(imported_body("source: club\n", "")) == ""  # a note of frontmatter alone
