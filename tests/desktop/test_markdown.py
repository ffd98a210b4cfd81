"""Record bodies as Markdown: safe (no raw HTML, no image loaded), with links that open other records."""

from __future__ import annotations

import threading

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextCursor

from desktop.records.markdown import (FIRST_PART_CHARS, BodyParse, body_html, body_parts, known_records,
                                      strip_frontmatter)
from tests.desktop.conftest import records_view_on_main, wait_for_signal
from tests.desktop.test_live import agent_call
from tests.helpers import page

ID = "pg_01JD0000000000000000000000"


def test_markdown_is_rendered_and_stored_html_is_only_text() -> None:
    html = body_html("# Plan\n\n**bold** and *it* and `code`\n\n- one\n- two\n\n"
                     "<script>alert(1)</script> <img src=x onerror=alert(1)> <b>b</b>")
    assert '<h1><a name="heading-plan"></a>Plan</h1>' in html  # the anchor a [[#Plan]] scrolls to
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html
    assert "<code>code</code>" in html and "<li>one</li>" in html
    assert "<script" not in html and "<img" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;img src=x" in html


def test_images_are_never_loaded_and_only_safe_links_are_links() -> None:
    html = body_html("![diagram](https://tracker.example/pixel.png) ![local](/etc/passwd)\n\n"
                     "[site](https://northwind.example) [mail](mailto:dana@example.org) "
                     "[file](file:///etc/passwd) [script](javascript:alert(1)) [data](data:text/html,x)")
    assert "<img" not in html
    assert "[image: diagram (https://tracker.example/pixel.png), not shown]" in html
    assert '<a href="https://northwind.example">site</a>' in html and '<a href="mailto:dana@example.org">' in html
    for refused in ("file:", "javascript:", "data:"):
        assert f'href="{refused}' not in html
    assert "[file](file:///etc/passwd)" in html  # left as the text it is


def test_a_markdown_link_in_the_vault_links_its_note_and_a_picture_reads_image() -> None:
    html = body_html("[2.4 中断](2.4%20中断.md), [用法](../02%20arm/1.3%20链接器.md#用法), [v2.0](v2.0), "
                     "[the PDF](docs/manual.pdf), [Setup](#Setup), [root](/etc/passwd)\n\n"
                     "![](../photo/Pasted%20image%201.png)")
    assert '<a href="wikilink:2.4%20%E4%B8%AD%E6%96%AD">2.4 中断</a>' in html  # opened as [[2.4 中断]] is
    assert '<a href="wikilink:..%2F02%20arm%2F1.3%20%E9%93%BE%E6%8E%A5%E5%99%A8#用法">用法</a>' in html
    assert '<a href="wikilink:v2.0">v2.0</a>' in html and '<a href="heading:setup">Setup</a>' in html
    assert "<span>the PDF</span>" in html and "[root](/etc/passwd)" in html  # a file's label; the disk's root: text
    assert '<span class="muted">[image]</span>' in html and "<img" not in html
    assert "Not shown: 1 image this note embeds (Pasted image 1.png)." in html


def test_wikilinks_and_record_ids_link_to_records() -> None:
    known = known_records({"references": [{"field": "works_at", "record": {"id": "pg_org", "title": "Northwind Labs"}}],
                           "backlinks": [{"id": "pg_dana", "title": "Dana Whitaker", "kind": "page"}]})
    html = body_html(f"[[Northwind Labs]], [[pg_dana|Dana]], [[northwind labs|them]], [[Someone Else]], "
                     f"see {ID}, `not {ID} in code`, [[{ID}]]", known)
    assert '<a href="record:pg_org">Northwind Labs</a>' in html
    assert '<a href="record:pg_dana">Dana</a>' in html and '<a href="record:pg_org">them</a>' in html
    assert '<a href="wikilink:Someone%20Else">Someone Else</a>' in html  # resolved by a search when clicked
    assert f'see <a href="record:{ID}">{ID}</a>' in html
    assert f"<code>not {ID} in code</code>" in html
    assert f'<a href="record:{ID}">{ID}</a>' in html


def click_link(qtbot, browser, text: str) -> None:
    """Click the link whose text is ``text`` in a rendered browser, with the mouse."""
    cursor = browser.document().find(text)
    assert not cursor.isNull(), f"{text!r} is not shown"
    cursor.setPosition(cursor.selectionStart() + 1, QTextCursor.MoveMode.MoveAnchor)
    point = browser.cursorRect(cursor).center()
    browser.ensureCursorVisible()
    qtbot.mouseClick(browser.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(point.x(), point.y()))


def save_page(engine, title: str, body: str) -> None:
    """An agent saves a page over the socket (on a thread of its own, as an agent is a process of its own)."""
    token = engine.registry.add_credential("main")
    port = engine.state.read_engine_info()["port"]
    answers: list[dict] = []
    arguments = page(f"md-{title.replace(' ', '-')}", title, body=body)
    worker = threading.Thread(name="test-agent", target=lambda: answers.append(agent_call(
        port, token, "tools/call", {"name": "knowledge_save_page", "arguments": arguments})))
    worker.start()
    worker.join(60)
    assert answers and answers[0].get("isError") is not True, answers


def headings(browser) -> list[tuple[int, str]]:
    block, found = browser.document().begin(), []
    while block.isValid():
        if block.blockFormat().headingLevel():
            found.append((block.blockFormat().headingLevel(), block.text()))
        block = block.next()
    return found


def test_a_body_link_opens_the_record_it_names_when_clicked(qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    save_page(served_engine, "Link holder", "Reports to [[Dana Whitaker]].\n\n## Notes\n\n- weekly")
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1280, 800)
    holder = next(row["id"] for row in view.recent_model.rows() if row["title"] == "Link holder")
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(holder))
    body = view.page.body
    qtbot.waitUntil(lambda: "Notes" in body.toPlainText(), timeout=5_000)
    assert headings(body) == [(2, "Notes")]
    assert "[[" not in body.toPlainText()  # the link is shown by its title

    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: click_link(qtbot, body, "Dana Whitaker"))
    assert view.page.record["title"] == "Dana Whitaker"


ICONS = ("Views can be shown as ![[lucide-table.svg#icon]] **table** or ![[lucide-list.svg#icon]] **list**.\n\n"
         "- ![[lucide-table.svg#icon]] **View menu**: create and switch views.\n"
         "- ![[lucide-list-filter.svg#icon]] **Filter**: filter files.\n"
         "- ![[lucide-plus.svg#icon]] **New**: a new file, as in ![[new-file.pdf]].\n")


def test_images_a_note_embeds_are_named_once_beneath_it_and_never_in_its_search_snippet(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    save_page(served_engine, "Views and layouts", ICONS)
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1008, 720)
    opened = next(row["id"] for row in view.recent_model.rows() if row["title"] == "Views and layouts")
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(opened))
    body = view.page.body
    qtbot.waitUntil(lambda: "View menu" in body.toPlainText(), timeout=5_000)
    text = body.toPlainText()
    # Each list item reads "[image] View menu: …", never "[embedded image: lucide-table.svg, not shown] View menu".
    assert "[image] View menu: create and switch views." in text and "[file]." in text
    assert "not shown]" not in text and text.count("lucide-table.svg") == 1
    assert text.rstrip().endswith("Not shown: 4 images and 1 file this note embeds (lucide-table.svg, "
                                  "lucide-list.svg, lucide-list-filter.svg, lucide-plus.svg, new-file.pdf).")

    view.query.setText("filter files")
    with qtbot.waitSignal(view.search_model.sig_page_loaded, timeout=10_000):
        view.search()
    qtbot.waitUntil(lambda: any(row["title"] == "Views and layouts" for row in view.search_model.rows()),
                    timeout=5_000)
    [hit] = [row for row in view.search_model.rows() if row["title"] == "Views and layouts"]
    assert "svg" not in hit["snippet"] and "icon" not in hit["snippet"] and "Filter: filter files." in hit["snippet"]


def test_an_embedded_base_reads_as_a_base_never_as_a_link_to_a_note(qtbot, served_engine, tasks,
                                                                      gui_thread_guard) -> None:
    gui_thread_guard.active = False
    save_page(served_engine, "Reading list",
              "My books:\n\n![[Books.base]]\n\nBy year: ![[Library/Books.base#By year]]\n")
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1008, 720)
    opened = next(row["id"] for row in view.recent_model.rows() if row["title"] == "Reading list")
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(opened))
    body = view.page.body
    qtbot.waitUntil(lambda: "By year" in body.toPlainText(), timeout=5_000)
    text = body.toPlainText()
    assert "My books:\n[base: Books]\nBy year: [base: Books, view By year]" in text, text
    assert "embeds the note" not in text and ".base" not in text
    assert "wikilink:" not in body.toHtml()


def long_note(days: int = 150) -> str:
    """A long note in days, each a heading, a list, a table, a quote, a code block holding lines that look like
    headings, and a callout: what a part's edge may not break."""
    days_text = []
    for day in range(1, days + 1):
        days_text.append(
            f"## Day {day}\n\nWe met about [[Topic {day}]] and pg_01JD8PZ3A6QF0W2C9E4R7T1M5K; " + "words " * 60 +
            f"\n\n1. first\n2. second ^item-{day}\n\n| a | b |\n| --- | --- |\n| {day} | x |\n\n"
            f"> [!tip] Day {day}\n> a tip\n\n```python\n\n# not a heading {day}\nx = {day}\n```\n\n"
            f"~~~~\n~~~\n\n# nor this {day}\n~~~~\n\n![[chart {day}.png]]\n\n- [ ] follow up\n\n")
    return "---\ntags: [log]\n---\n# Log\n\n" + "".join(days_text)


def test_a_long_body_in_parts_renders_as_the_whole_does() -> None:
    """A long note is parsed a part at a time (the record page shows its first part at once): the parts end
    only before a heading, never inside a code block, and made together they are the whole note's HTML."""
    text = long_note()
    parts = body_parts(text)

    assert len(parts) > 3 and len(parts[0]) < 2 * FIRST_PART_CHARS and "".join(parts) == strip_frontmatter(text)
    assert all(part.startswith("## Day") for part in parts[1:])
    made = BodyParse(text)
    made.parse_next()
    assert len(made.tokens) == 1 and "Not shown" not in made.render(dark=False)  # said beneath the last part
    made.parse_all()
    assert made.done and made.render(dark=False) == body_html(text, dark=False)
    crlf = BodyParse(text.replace("\n", "\r\n"))
    crlf.parse_all()
    assert len(crlf.parts) == len(parts) and crlf.render(dark=False) == body_html(text.replace("\n", "\r\n"),
                                                                                 dark=False)


def test_a_body_that_cannot_be_cut_is_one_part() -> None:
    assert body_parts("## Short\n\ntext\n\n## More\n") == ["## Short\n\ntext\n\n## More\n"]
    unheaded = "words " * 5_000
    assert body_parts(unheaded) == [unheaded]
    referenced = long_note() + "\n[Topic]: https://example.org/topic\n"  # a reference any part may use
    fenced = "````\n" + long_note() + "````\n"  # all one code block (its ``` fences are its lines)
    backticks = "``` not`a fence\n````\n\n" + long_note()  # the first line opens none, the second opens one
    for text in (referenced, fenced, backticks):
        assert len(body_parts(text)) == 1
        made = BodyParse(text)
        made.parse_next()
        assert made.done and made.render(dark=False) == body_html(text, dark=False)


def test_logseq_properties_stand_on_lines_of_their_own_and_its_bookkeeping_is_left_out() -> None:
    html = body_html("alias:: [[AI Rules]]\nsee-also:: [[Agents.md]]\n\n- # AI Rules\n\t- a block [[x]]\n"
                     "\t  id:: 67dfe827-9f2e-4f4e-ba91-d7d2be4253f4\n\t  collapsed:: true\n\t- two\n\t  lines\n"
                     "- not::a property\n")
    assert ('<span class="muted">alias:</span> <a href="wikilink:AI%20Rules">AI Rules</a><br />\n'
            '<span class="muted">see-also:</span> <a href="wikilink:Agents.md">Agents.md</a></p>') in html
    assert '<li>a block <a href="wikilink:x">x</a></li>' in html  # its id:: and collapsed:: are not shown
    assert "67dfe827" not in html and "collapsed" not in html
    assert "<li>two\nlines</li>" in html and "<li>not::a property</li>" in html  # other lines as Markdown has them


def test_a_logseq_tasks_clock_drawer_is_left_out_as_logseq_leaves_it_out() -> None:
    html = body_html("- DOING install [[mise]]\n  :LOGBOOK:\n  CLOCK: [2025-02-24 Mon 04:13:40]\n  :END:\n"
                     "\t- DONE b\n\t  :LOGBOOK:\n\t  CLOCK: [2025-02-24 Mon 04:13:49]\n\t  :END:\n- :END: alone\n")
    assert '<li>DOING install <a href="wikilink:mise">mise</a>' in html and "<li>DONE b</li>" in html
    assert "LOGBOOK" not in html and "CLOCK" not in html
    assert "<li>:END: alone</li>" in html  # no drawer opened: a line as written


def test_a_logseq_outline_indented_right_under_a_heading_reads_as_a_list_not_as_code() -> None:
    html = body_html("# Repomix\n\t- ## [[My Notes]]\n\t  id:: 67c7f234-c55c-4b12-a260-d92aa3cfbb0c\n"
                     "\t\t- Uses [[Tree-Sitter]]\n\t\t- potentially\n")
    assert "<pre>" not in html and "<code>" not in html
    assert '<li>Uses <a href="wikilink:Tree-Sitter">Tree-Sitter</a></li>' in html and "<li>potentially</li>" in html
    # Indented after a blank line, or not a bullet, it is code as CommonMark (and Obsidian) reads it.
    assert "<pre><code>- a yaml list\n</code></pre>" in body_html("# Code\n\n    - a yaml list\n")
    assert "<pre><code>x = 1\n</code></pre>" in body_html("# Code\n    x = 1\n")
