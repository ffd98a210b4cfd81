"""The note first: a record page leads with the rendered body (callouts, embeds, wiki links), its details
beside it in local, relative times, and History reads per revision with a coloured diff of body and fields."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from PySide6.QtCore import QUrl
from PySide6.QtGui import QPalette, QTextTable

from desktop.common.diffs import DIFF_BACKGROUNDS, DIFF_COLOURS
from desktop.common.times import ago, clock_time, exact_time
from desktop.common.widgets import SafeTextBrowser
from desktop.records import page as record_page
from desktop.records.conversations import shown_body
from desktop.records.history import compared, revision_diff_html, what_changed
from desktop.records.markdown import body_html, known_records
from desktop.records.render import details_html, evidence_html, header_html
from desktop.records.view import RecordsView
from tests.desktop.conftest import records_view_on_main, wait_for_signal
from tests.desktop.test_live import agent_call
from tests.desktop.test_markdown import long_note
from tests.engine.importers.helpers import run_import, write_vault

ZONE = timezone(timedelta(hours=1))  # the owner's zone in these tests: never the machine's
NOW = datetime(2026, 12, 4, 15, 0, tzinfo=ZONE)  # 14:00 UTC


def clock() -> datetime:
    return NOW


# --- the body -------------------------------------------------------------------------------------------


def test_a_callout_is_a_box_in_its_kinds_colour_titled_by_its_title() -> None:
    text = "> [!warning] Deploys on Fridays\n> They *break* things.\n\n> [!faq]- \n\n> A plain quote."
    light, dark = body_html(text, dark=False), body_html(text, dark=True)

    assert "[!warning]" not in light and "[!faq]" not in light
    assert '<table class="callout callout-warning"' in light and "border-color: #bc4c00" in light
    assert "<b>Deploys on Fridays</b> <small>(Warning)</small>" in light and "They <em>break</em> things." in light
    assert "<b>FAQ</b>" in light  # no title of its own: its kind's
    assert "<blockquote>\n<p>A plain quote.</p>\n</blockquote>" in light  # a quote stays a quote
    assert "border-color: #f0883e" in dark and "#bc4c00" not in dark  # colours for a dark palette
    assert re.search(r'bgcolor="#([0-9a-f]{6})"', light).group(1) != re.search(r'bgcolor="#([0-9a-f]{6})"',
                                                                              dark).group(1)
    assert "<b>Custom</b>" in body_html("> [!custom]\n> text", dark=False)  # a kind of the vault's own


def test_a_callout_is_drawn_as_a_coloured_box(qtbot) -> None:
    browser = SafeTextBrowser()
    qtbot.addWidget(browser)
    browser.show_html(body_html("> [!tip] Shortcut\n> Press F5.", dark=False))

    frames = [frame for frame in browser.document().rootFrame().childFrames() if isinstance(frame, QTextTable)]
    assert len(frames) == 1
    assert frames[0].frameFormat().background().color().name() == "#eaf3f4"
    assert "Shortcut" in browser.toPlainText() and "[!tip]" not in browser.toPlainText()


def test_a_long_code_line_wraps_at_the_panes_width_and_the_note_never_scrolls_sideways(qtbot) -> None:
    browser = SafeTextBrowser()
    qtbot.addWidget(browser)
    browser.resize(500, 300)
    browser.show()
    code = "total = " + " + ".join(f"value_{n}" for n in range(80))
    browser.show_html(body_html(f"Add them up:\n\n```python\n{code}\n    indented  twice\n```\n", dark=False))
    qtbot.waitUntil(lambda: browser.document().size().width() > 0)

    assert browser.horizontalScrollBar().maximum() == 0
    assert browser.document().size().width() <= browser.viewport().width()
    assert f"{code}\n    indented  twice" in browser.toPlainText()  # the code's own spaces and lines kept


def test_embeds_say_what_they_embed_and_wiki_links_show_their_alias() -> None:
    known = known_records({"references": [{"field": "x", "record": {"id": "pg_atlas", "title": "Atlas Migration"}}]})
    html = body_html("![[Atlas Migration]] ![[Other note#Plan]] ![[diagram.png|300]] ![[spec.pdf]]\n\n"
                     "[[Atlas Migration#Risks|the risks]] [[Atlas Migration#Risks]] [[#Local heading]]", known)

    assert '[embeds the note <a href="record:pg_atlas">Atlas Migration</a>]' in html
    assert '[embeds the note <a href="wikilink:Other%20note#plan">Other note › Plan</a>]' in html
    assert '<span class="muted">[image]</span> <span class="muted">[file]</span>' in html and "<img" not in html
    assert "Not shown: 1 image and 1 file this note embeds (diagram.png, spec.pdf)." in html
    assert '<a href="record:pg_atlas#risks">the risks</a>' in html  # the alias, linked to the note's heading
    assert '<a href="record:pg_atlas#risks">Atlas Migration › Risks</a>' in html
    assert '<a href="heading:local-heading">Local heading</a>' in html and "[[" not in html and "![" not in html


def test_frontmatter_left_in_a_body_is_never_shown_raw() -> None:
    html = body_html("---\ntags: [ops]\naliases:\n  - Runbook\n---\n# Runbook\n\nSteps.")
    assert "tags:" not in html and "Runbook</h1>" in html
    kept = body_html("---\nA thought between two rules.\n---\nMore.")  # not YAML: rules around a paragraph
    assert "A thought between two rules." in kept


# --- times ----------------------------------------------------------------------------------------------


def test_times_are_local_and_relative_with_the_exact_time_on_demand() -> None:
    assert ago("2026-12-04T13:57:00Z", NOW) == "3 minutes ago"
    assert ago("2026-12-04T11:00:00Z", NOW) == "3 hours ago"
    assert ago("2026-12-03T13:02:00Z", NOW) == "yesterday 14:02"  # 13:02 UTC is 14:02 in the owner's zone
    assert ago("2026-11-20T08:15:00Z", NOW) == "on 2026-11-20 09:15"
    assert clock_time("2026-12-04T13:02:00Z", NOW) == "14:02"
    assert exact_time("2026-12-04T13:02:11Z", NOW) == (
        "Friday 4 December 2026, 14:02:11 (UTC+01:00; stored as 2026-12-04T13:02:11Z)")
    assert exact_time(None, NOW) == "no time recorded"


RECORD = {"id": "pg_01", "kind": "page", "status": "current", "revision": 3, "title": "Runbook",
          "sha256": "ab" * 32, "path": "pages/runbook.md", "body": "Steps.",
          "frontmatter": {"kind": "page", "type": "howto", "tags": ["ops", "oncall"], "aliases": ["Playbook"],
                          "recorded_at": "2026-12-03T13:02:00Z", "updated_at": "2026-12-04T13:57:00Z",
                          "attribution": {"agent": "main", "instance": "laptop"},
                          "fields": {"next_review": "2027-01-01"}, "owner_team": "SRE"}}


def test_evidence_is_named_by_its_original_file_where_it_has_one() -> None:
    imported = {"source": "src_1", "filename": "notes › Projects › Plan.md", "retainedPath": "sources/src_1.md",
                "mediaType": "text/markdown", "size": 1200, "lines": [3, 4]}
    excerpt = {"source": "src_2", "retainedPath": "sources/src_2.txt", "mediaType": "text/plain", "size": 40}

    html = evidence_html([imported, excerpt])

    assert '<a href="source:src_1#3-4">notes › Projects › Plan.md</a> lines 3-4' in html
    assert '<a href="source:src_2">open the retained original</a>' in html and html.count("open the") == 1


def test_the_header_and_details_say_what_the_record_is_in_words() -> None:
    header = header_html(RECORD, NOW)
    assert "<h2>Runbook</h2>" in header and "page · howto" in header
    assert ('updated <span title="Friday 4 December 2026, 14:57:00 (UTC+01:00; stored as 2026-12-04T13:57:00Z)">'
            "3 minutes ago</span>") in header
    assert "current" not in header and "pg_01" not in header  # the usual state and raw ids stay out of the way
    assert "revision 3" in header
    invalid = header_html({**RECORD, "status": "invalid", "revision": None}, NOW)  # edited by hand, unreadable
    assert "<b>invalid</b>" in invalid and "revision" not in invalid

    details = details_html(RECORD, None, NOW)
    assert ('<a class="tag" href="tag:ops" title="List the notes tagged #ops">#ops</a> '
            '<a class="tag" href="tag:oncall" title="List the notes tagged #oncall">#oncall</a>') in details
    assert "<td>Playbook</td>" in details and "yesterday 14:02</span>" in details
    assert ">Written by</td><td>main (laptop)</td>" in details
    assert ">Next review</td><td>2027-01-01</td>" in details and ">Owner team</td><td>SRE</td>" in details
    assert "recorded_at" not in details and "2026-12-04T13:57:00Z</span>" not in details
    assert details.index("Tags") < details.index("pages/runbook.md")  # where it is kept comes last


# --- history --------------------------------------------------------------------------------------------


def test_a_revision_says_what_it_changed_and_a_selection_what_to_compare() -> None:
    assert what_changed({"revision": 1, "changed": []}) == "created"
    assert what_changed({"revision": 4, "changed": ["body", "revision", "updated_at", "tags"]}) == "body, tags"
    assert what_changed({"revision": 4, "changed": ["revision", "updated_at"]}) == "only its revision number"
    assert what_changed({"revision": 4}) == ""  # not a readable record: nothing claimed
    # History's rows, oldest first: one row against the one before it, two against each other
    assert compared([3]) == (2, 3) and compared([5, 2]) == (2, 5) and compared([0]) is None and compared([]) is None


DIFF = {"id": "pg_01", "from": 2, "to": 3, "readable": True, "truncated": False, "bodyTruncated": False,
        "diff": "", "fields": [{"name": "tags", "change": "changed", "before": ["ops"], "after": ["ops", "oncall"]},
                               {"name": "aliases", "change": "added", "before": None, "after": ["Playbook"]}],
        "bodyDiff": "--- revision 2\n+++ revision 3\n@@ -1 +1 @@\n-Old <step>\n+New step"}


def test_the_diff_is_coloured_for_the_palette_and_names_fields_old_and_new() -> None:
    for dark in (False, True):
        html = revision_diff_html(DIFF, dark)
        added = f"color: {DIFF_COLOURS[('added', dark)]}; background-color: {DIFF_BACKGROUNDS[('added', dark)]}"
        removed = f"color: {DIFF_COLOURS[('removed', dark)]}; background-color: {DIFF_BACKGROUNDS[('removed', dark)]}"
        assert f'<span style="{added}">+New step</span>' in html
        assert f'<span style="{removed}">-Old &lt;step&gt;</span>' in html
        assert f'<td><b>tags</b></td><td><span style="{removed}">ops</span> → <span style="{added}">ops, oncall' in html
        assert '<span class="muted">(not set)</span> →' in html and '<span class="muted">@@ -1 +1 @@</span>' in html
    times = revision_diff_html({**DIFF, "fields": [{"name": "updated_at", "change": "changed",
                                                    "before": "2026-12-03T09:30:05Z",
                                                    "after": "2026-12-04T13:02:11Z"}]}, False, NOW)
    assert "2026-12-03 10:30:05</span> → " in times and ">14:02:11</span>" in times  # the owner's zone, not UTC
    assert "T13:02:11Z" not in times
    recall = {"importance": 7, "approved_at": "2026-12-04T13:02:11Z"}
    nested = revision_diff_html({**DIFF, "fields": [{"name": "recall", "change": "added", "before": None,
                                                     "after": recall}]}, False, NOW)
    assert "importance: 7; approved_at: 14:02:11</span>" in nested
    unreadable = revision_diff_html({**DIFF, "readable": False, "diff": "-a: 1\n+a: 2"}, False)
    assert "not a readable record" in unreadable and f"color: {DIFF_COLOURS[('added', False)]}" in unreadable


# --- through the window ---------------------------------------------------------------------------------


def save(engine, arguments: dict) -> dict:
    """An agent's knowledge_save_page over the socket, on a thread of its own."""
    token = engine.registry.add_credential("main")
    port = engine.state.read_engine_info()["port"]
    answer = agent_call(port, token, "tools/call", {"name": "knowledge_save_page", "arguments": arguments})
    assert answer.get("isError") is not True, answer
    return answer["structuredContent"]


def test_the_record_page_leads_with_the_note_and_history_compares_two_revisions(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    first = save(served_engine, {"requestId": "note-1", "type": "concept", "title": "Runbook",
                                 "body": "> [!warning] Careful\n> Deploys break on Fridays.\n\nStep one.\n"})
    save(served_engine, {"requestId": "note-2", "type": "concept", "title": "Runbook", "id": first["id"],
                         "expectedRevision": 1, "tags": ["ops"], "body": "Step one.\nStep two.\n"})
    gui_thread_guard.active = True
    view = RecordsView(tasks)
    qtbot.addWidget(view)
    view.page.now = lambda: datetime.now(ZONE)
    view.resize(1400, 900)
    view.show()
    with qtbot.waitSignal(view.recent_model.sig_page_loaded, timeout=10_000):
        view.set_agent("main")
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(first["id"]))
    page = view.page
    qtbot.waitUntil(lambda: "Step two." in page.body.toPlainText(), timeout=5_000)

    # the body first and largest: the Note tab in front, the body taking most of it
    assert page.tabs.currentWidget() is page.note and page.note.widget(0) is page.body
    keys = [re.search(r"(?<!&)&(?!&)(.)", page.tabs.tabText(n)).group(1).lower() for n in range(page.tabs.count())]
    assert keys == ["o", "e", "l", "h"]  # one Alt key each
    body, details = page.body.size(), page.details.size()
    assert body.width() * body.height() > 2 * details.width() * details.height()
    assert body.height() > 0.6 * page.height()
    assert "#ops" in page.details.toPlainText() and "just now" in page.details.toPlainText()

    # History: every revision a readable row, the change of its own
    assert [page.history_model.data(page.history_model.index(row, 3)) for row in (0, 1)] == [
        "created", "body, tags"]
    assert page.history_model.data(page.history_model.index(1, 1)) == "just now"
    blocker = wait_for_signal(qtbot, page.sig_diff_loaded, lambda: page.history_table.selectRow(1))
    shown = blocker.args[0]
    assert shown.startswith("Revision 1 → revision 2") and "+Step two." in shown and "-> [!warning] Careful" in shown
    assert "tags\n(not set) → ops" in shown
    html = page.diff.toHtml()
    assert DIFF_COLOURS[("added", False)] in html.lower() and DIFF_COLOURS[("removed", False)] in html.lower()


def test_a_paragraph_revised_is_read_whole_in_the_diff_without_scrolling_sideways(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    words = " ".join(f"word{n}" for n in range(60))  # a paragraph on one line, as notes are written
    first = save(served_engine, {"requestId": "para-1", "type": "concept", "title": "Long lines",
                                 "body": f"{words} ends here.\n"})
    save(served_engine, {"requestId": "para-2", "type": "concept", "title": "Long lines", "id": first["id"],
                         "expectedRevision": 1, "body": f"{words} ends elsewhere.\n"})
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1110, 760)  # Records' share of a 1360 by 820 window
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(first["id"]))
    page = view.page
    page.tabs.setCurrentWidget(page.history)
    shown = wait_for_signal(qtbot, page.sig_diff_loaded, lambda: page.history_table.selectRow(1)).args[0]

    assert f"+{words} ends elsewhere." in shown.replace("\u2028", " ").replace("\n", " ")
    assert page.diff.horizontalScrollBar().maximum() == 0  # wrapped to the pane: its end is in sight
    assert page.diff.document().size().width() <= page.diff.viewport().width() + 1


def test_a_link_to_a_heading_of_the_note_is_a_link_that_scrolls_to_it(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    filler = "\n\n".join(f"Paragraph {n} of the introduction." for n in range(60))
    first = save(served_engine, {"requestId": "heads-1", "type": "concept", "title": "Callout kinds", "body": (
        f"See [[#Supported types]] and [[#supported types|the list]].\n\n{filler}\n\n## Supported types\n\n"
        "Note, tip, warning.\n")})
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1110, 760)
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(first["id"]))
    body = view.page.body
    links = re.findall(r'href="([^"]+)"', body.toHtml())
    assert len(links) == 2 and links[0] == links[1]  # the heading named twice, in two cases: one anchor
    assert body.verticalScrollBar().value() == 0

    body.anchorClicked.emit(QUrl(links[1]))  # as a click on "the list" does
    qtbot.waitUntil(lambda: body.verticalScrollBar().value() > 0, timeout=5_000)
    heading = body.document().find("Supported types", body.document().lastBlock().position() - 200)
    top = body.cursorRect(heading).top()
    assert 0 <= top < body.viewport().height()  # the heading in view
    assert view.page.record["id"] == first["id"]  # the same note: nothing else opened


def test_relative_times_on_the_page_move_on_with_the_clock_and_leave_the_reader_where_they_were(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    first = save(served_engine, {"requestId": "clock-1", "type": "concept", "title": "Clock",
                                 "aliases": [f"Alias {n}" for n in range(40)], "body": "Tick.\n"})
    gui_thread_guard.active = True
    view = RecordsView(tasks)
    qtbot.addWidget(view)
    view.resize(1110, 500)
    view.show()
    reading = [datetime.now(ZONE)]
    view.page.now = lambda: reading[0]
    with qtbot.waitSignal(view.recent_model.sig_page_loaded, timeout=10_000):
        view.set_agent("main")
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(first["id"]))
    page = view.page
    qtbot.waitUntil(lambda: "Alias 39" in page.details.toPlainText(), timeout=5_000)
    assert "updated just now" in page.header.toPlainText() and "Created\njust now" in page.details.toPlainText()
    page.details.verticalScrollBar().setValue(page.details.verticalScrollBar().maximum())  # reading the end
    kept = page.details.verticalScrollBar().value()
    assert kept > 0

    reading[0] += timedelta(minutes=30)  # half an hour with the page open
    view.clock.timeout.emit()  # the window's clock ticks (once a minute)
    assert "updated 30 minutes ago" in page.header.toPlainText()
    assert "Created\n30 minutes ago" in page.details.toPlainText()
    assert page.details.verticalScrollBar().value() == kept  # still at the end
    assert view.clock.isActive() and view.clock.interval() <= 60_000


def test_a_theme_change_after_the_page_is_cleared_never_brings_the_last_record_back(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    first = save(served_engine, {"requestId": "theme-1", "type": "concept", "title": "Lantern", "body": "Lit.\n"})
    gui_thread_guard.active = True
    view = RecordsView(tasks)
    qtbot.addWidget(view)
    view.show()
    with qtbot.waitSignal(view.recent_model.sig_page_loaded, timeout=10_000):
        view.set_agent("main")
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(first["id"]))
    page = view.page
    assert "Lantern" in page.header.toPlainText()

    page.clear()
    page.header.setPalette(QPalette(page.header.palette().color(QPalette.ColorRole.Base).darker()))
    assert "Lantern" not in page.header.toPlainText()
    assert "Choose a record on the left." in page.header.toPlainText()


def test_a_note_read_again_after_a_change_leaves_the_reader_where_they_were(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    filler = "\n\n".join(f"Paragraph {n} of a long note." for n in range(80))
    first = save(served_engine, {"requestId": "long-1", "type": "concept", "title": "Long note", "body": filler})
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1110, 600)
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(first["id"]))
    bar = view.page.body.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0, timeout=5_000)
    bar.setValue(bar.maximum() // 2)  # the owner reads half way down
    kept = bar.value()

    with qtbot.waitSignal(view.page.sig_content_loaded, timeout=10_000):
        view.live_refresh()  # an agent wrote something: the page is read again
    qtbot.waitUntil(lambda: view.page.links is not None, timeout=5_000)
    assert bar.value() == kept


def test_a_link_to_a_heading_of_another_note_opens_that_note_at_the_heading(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    filler = "\n\n".join(f"Paragraph {n} of the settings." for n in range(80))
    settings = save(served_engine, {"requestId": "set-1", "type": "concept", "title": "Settings",
                                    "body": f"{filler}\n\n## Files and links\n\nWhere new notes go.\n"})
    first = save(served_engine, {"requestId": "from-1", "type": "concept", "title": "Where notes go", "body": (
        "See [[Settings#Files and links|the settings]].\n")})
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1110, 600)
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(first["id"]))
    qtbot.waitUntil(lambda: view.page.links is not None and "href" in view.page.body.toHtml(), timeout=5_000)
    [link] = re.findall(r'href="([^"]+)"', view.page.body.toHtml())

    with qtbot.waitSignal(view.page.sig_content_loaded, timeout=10_000):
        view.page.body.anchorClicked.emit(QUrl(link))
    body = view.page.body
    assert view.page.record["id"] == settings["id"]
    qtbot.waitUntil(lambda: view.page.links is not None, timeout=5_000)
    qtbot.waitUntil(lambda: body.verticalScrollBar().value() > 0, timeout=5_000)
    heading = body.document().find("Files and links")
    assert 0 <= body.cursorRect(heading).top() < body.viewport().height()  # the heading in view


def test_a_narrow_page_puts_the_details_below_the_body(qtbot, tasks) -> None:
    from PySide6.QtCore import Qt

    from desktop.records.page import RecordPage

    page = RecordPage(tasks, now=clock)
    qtbot.addWidget(page)
    page.resize(1100, 700)
    page.show()
    qtbot.waitExposed(page)
    assert page.note.orientation() == Qt.Orientation.Horizontal
    assert page.body.width() > 2 * page.details.width()

    page.resize(500, 700)
    qtbot.waitUntil(lambda: page.note.orientation() == Qt.Orientation.Vertical, timeout=5_000)
    qtbot.waitUntil(lambda: page.body.height() > 2 * page.details.height(), timeout=5_000)


def test_a_block_id_ending_a_line_is_not_shown_but_a_caret_in_text_is() -> None:
    html = body_html("Link to this paragraph.\n^b15695\n\n- one item ^item-1\n- two\n\nSee [[Note#^b15695]].\n\n"
                     "x^2 and 2^10, *word*^note.", dark=False)

    assert "^b15695" not in html and "^item-1" not in html
    assert "<p>Link to this paragraph.</p>" in html and "<li>one item</li>" in html
    assert "Note › b15695" in html  # a link to a block names it
    assert "x^2 and 2^10, <em>word</em>^note." in html


def test_the_page_says_loading_then_no_body_and_history_says_when_and_who_whole(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    first = save(served_engine, {"requestId": "bare-1", "type": "concept", "title": "Bare", "body": ""})
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1110, 760)  # Records' share of a 1360 by 820 window
    page = view.page
    assert page.body.placeholderText() == ""  # no record chosen: nothing is said of a body

    assert page.history_table.shown_empty_text() == "Choose a record to see its revisions."
    with qtbot.waitSignal(page.sig_content_loaded, timeout=10_000):
        view.open_record(first["id"])
        assert page.body.placeholderText() == "Loading…"  # every part of the page, until its answer comes
        assert page.header.toPlainText() == "Loading…" and page.history_table.shown_empty_text() == "Loading…"
        assert page.claims.placeholderText() == page.connections.placeholderText() == "Loading…"
    qtbot.waitUntil(lambda: page.history_model.rowCount() == 1, timeout=5_000)
    assert page.body.placeholderText() == "This record has no body."
    assert page.header.toPlainText().startswith("Bare") and "Claims about this record" in page.claims.toPlainText()

    # History on the narrow page: when and who read whole; the other columns keep at least their header
    table, header = page.history_table, page.history_table.horizontalHeader()
    page.tabs.setCurrentIndex(3)
    qtbot.waitUntil(lambda: table.isVisible(), timeout=5_000)
    table.fit_columns()
    titles = [column.title for column in page.history_model.columns]
    for title in ("When", "Written by"):
        column = titles.index(title)
        assert header.sectionSize(column) >= table.sizeHintForColumn(column), title
    for column in range(len(titles)):
        assert header.sectionSize(column) >= header.sectionSizeHint(column), titles[column]


def test_a_long_notes_first_part_is_shown_at_once_and_the_rest_where_the_reader_is(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    """A 100 KB note shows its first part with its page (its first screen read at once) and the rest once parsed,
    a part between the window's events; the reader who scrolled meanwhile stays where they were."""
    body = long_note()[long_note().index("# Log"):]
    gui_thread_guard.active = False
    saved = save(served_engine, {"requestId": "long-1", "type": "note", "title": "Meeting log", "body": body})
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1280, 800)
    page = view.page
    page.rest_timer.blockSignals(True)  # the rest waits: what the owner reads first
    wait_for_signal(qtbot, page.sig_content_loaded, lambda: view.open_record(saved["id"]))

    first = page.body.toPlainText()
    assert "Day 1\n" in first and "Day 150" not in first and first.endswith("The rest of the note is on its way…")
    bar = page.body.verticalScrollBar()
    assert bar.maximum() > 100
    bar.setValue(100)
    seen = page.body.viewport().grab().toImage()
    with qtbot.waitSignal(page.sig_body_shown, timeout=10_000) as shown:
        page.rest_timer.blockSignals(False)
    assert shown.args == [saved["id"]]
    whole = page.body.toPlainText()
    assert "Day 150" in whole and "on its way" not in whole and bar.value() == 100
    assert page.body.viewport().grab().toImage() == seen  # what the reader sees does not move or change
    alone = SafeTextBrowser()  # the note made whole at once, as before
    qtbot.addWidget(alone)
    alone.show_html(body_html(body, known_records(page.links)))
    assert page.body.toHtml() == alone.toHtml()


def test_a_long_note_read_again_or_opened_at_a_heading_is_made_whole_at_once(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    body = long_note()[long_note().index("# Log"):]
    gui_thread_guard.active = False
    saved = save(served_engine, {"requestId": "long-2", "type": "note", "title": "Meeting log", "body": body})
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1280, 800)
    page = view.page
    page.rest_timer.blockSignals(True)  # nothing is parsed later: what is shown is made at once
    other = next(row["id"] for row in view.recent_model.rows() if row["id"] != saved["id"])
    wait_for_signal(qtbot, page.sig_content_loaded, lambda: view.open_record(other))
    wait_for_signal(qtbot, page.sig_body_shown, lambda: page.follow_wikilink("Meeting log", "day-120"))
    assert page.shown_id == saved["id"] and "Day 150" in page.body.toPlainText()
    assert page.body.verticalScrollBar().value() > 0  # at Day 120

    page = records_view_on_main(qtbot, tasks, 1280, 800).page  # a window of its own: nothing made before
    page.rest_timer.blockSignals(True)
    wait_for_signal(qtbot, page.sig_content_loaded, lambda: page.show_record("main", saved["id"]))
    assert "Day 150" not in page.body.toPlainText()  # opened: its first part
    with qtbot.waitSignal(page.sig_body_shown, timeout=10_000):
        page.refresh()  # read again in place (an agent wrote): whole, where the reader is
    assert "Day 150" in page.body.toPlainText()


def test_a_body_is_made_ready_to_show_once_for_each_record_read(
        qtbot, served_engine, tasks, gui_thread_guard, monkeypatch) -> None:
    """The body as the page shows it (an imported conversation's times made local) is made once for the record
    read, not again when its links arrive and again when a long note's rest is parsed."""
    made: list[str] = []
    monkeypatch.setattr(record_page, "shown_body", lambda record, now: made.append(record.get("id")) or shown_body(
        record, now))
    body = long_note()[long_note().index("# Log"):]
    gui_thread_guard.active = False
    saved = save(served_engine, {"requestId": "long-3", "type": "note", "title": "Meeting log", "body": body})
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1280, 800)
    with qtbot.waitSignal(view.page.sig_body_shown, timeout=10_000) as shown:  # whole: record, links and rest in
        view.open_record(saved["id"])
    assert shown.args == [saved["id"]] and "Day 150" in view.page.body.toPlainText()
    assert made.count(saved["id"]) == 1


def test_a_wiki_link_naming_a_file_opens_the_note_the_import_resolved_it_to(
        qtbot, served_engine, tasks, gui_thread_guard, tmp_path) -> None:
    """A vault whose notes carry titles of their own links them by file name (``[[plan-alpha]]``), as
    Obsidian resolves them; following such a link opened the best search match for the file name's words, a
    link record or another note (33 of 40 links of a real vault's index), where it opens the note linked."""
    gui_thread_guard.active = False
    root = tmp_path / "vault"
    write_vault(root, {"Home.md": "---\ntitle: Índice\n---\nStart with [[plan-alpha]].",
                       "Alpha/plan-alpha.md": "---\ntitle: The first draft\n---\nWhat we will do.",
                       "Notes/plans.md": "---\ntitle: Plan alpha, plan alpha and plan alpha again\n---\n"
                                         "Plan alpha: plan, alpha, plan alpha."})
    pages = run_import(served_engine, "markdown", root)["pages"]
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1280, 800)
    page = view.page
    wait_for_signal(qtbot, page.sig_content_loaded, lambda: view.open_record(pages["Home.md"]))

    with qtbot.waitSignal(page.sig_record_requested, timeout=10_000) as requested:
        page.body.sig_link_activated.emit(QUrl("wikilink:plan-alpha"))  # as a click on the link does

    assert requested.args == [pages["Alpha/plan-alpha.md"]]


def test_a_markdown_link_to_a_note_of_the_vault_opens_it_and_its_picture_is_named(
        qtbot, served_engine, tasks, gui_thread_guard, tmp_path) -> None:
    """A vault written with Obsidian's wikilinks turned off links notes Markdown's way, relative to the note
    (``[2.4 中断](../02%20x86/2.4%20中断.md)``) and shows pictures so (``![](../photo/a.png)``): the page showed
    both as markup, and the import left the links up a folder as text."""
    gui_thread_guard.active = False
    root = tmp_path / "IT"
    write_vault(root, {"02 x86/2.4 中断.md": "# 中断过程\n\n中断请求。",
                       "02 x86/4.4 中断.md": "# 实模式中断\n\n[2.4 中断](2.4%20中断.md)",
                       "01 Arduino/6.3 中断.md": "见 [中断过程](../02%20x86/2.4%20中断.md#中断过程)。\n\n"
                                                 "![](../photo/Pasted%20image%201.png)"})
    (root / "photo").mkdir()
    (root / "photo" / "Pasted image 1.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    pages = run_import(served_engine, "markdown", root)["pages"]
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1280, 800)
    page = view.page
    wait_for_signal(qtbot, page.sig_content_loaded, lambda: view.open_record(pages["01 Arduino/6.3 中断.md"]))
    qtbot.waitUntil(lambda: "Not shown" in page.body.toPlainText(), timeout=5_000)

    text = page.body.toPlainText()
    assert "见 中断过程。" in text and "](" not in text and "[image]" in text
    assert "Not shown: 1 image this note embeds (Pasted image 1.png)." in text
    [href] = [anchor for anchor in page.body.toHtml().split('href="')[1:] if "wikilink:" in anchor[:10]]
    with qtbot.waitSignal(page.sig_record_requested, timeout=10_000) as requested:
        page.body.sig_link_activated.emit(QUrl(href.split('"')[0]))  # as a click on the link does
    assert requested.args == [pages["02 x86/2.4 中断.md"]]
