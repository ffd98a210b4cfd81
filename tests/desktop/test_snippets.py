"""The search's Snippet column: a hit's words on up to three lines, the query's words in bold."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from PySide6.QtGui import QFont, QFontMetricsF

from desktop.common.models import Column, RowsModel
from desktop.records.conversations import shown_snippet
from desktop.records.snippets import SNIPPET_LINES, SnippetDelegate, bold_ranges, laid_out
from desktop.common.widgets import table
from tests.desktop.conftest import records_view_on_main
from tests.desktop.test_record_page import save

WORDS = " ".join(f"word{n}" for n in range(120))


def test_the_highlights_become_bold_ranges_and_bad_ones_are_left_out(qapp) -> None:
    ranges = bold_ranges("sync the phone", [[0, 4], [9, 14], [12, 99], [5], "x", [3, 2]])

    assert [(r.start, r.length) for r in ranges] == [(0, 4), (9, 5), (12, 2)]
    assert all(r.format.fontWeight() == QFont.Weight.Bold for r in ranges)
    assert bold_ranges("text", None) == []


def test_a_long_snippet_takes_three_lines_and_ends_with_an_ellipsis_after_a_whole_word(qapp) -> None:
    font = QFont()
    width = QFontMetricsF(font).horizontalAdvance("word100 " * 6)

    layout, shown = laid_out(WORDS, [[0, 5]], font, width)

    assert layout.lineCount() == SNIPPET_LINES and shown.endswith("\u2026") and len(shown) < len(WORDS)
    assert shown[:-1].split()[-1] in WORDS.split()  # the last word shown is whole
    last = layout.lineAt(layout.lineCount() - 1)
    assert last.textStart() + last.textLength() == len(shown)  # nothing past the third line
    assert [(r.start, r.length) for r in layout.formats()] == [(0, 5)]


def test_a_short_snippet_is_shown_whole(qapp) -> None:
    layout, shown = laid_out("\u2026sync the vault to a phone.\u2026", [], QFont(), 2000)
    assert shown == "\u2026sync the vault to a phone.\u2026" and layout.lineCount() == 1
    assert laid_out("", [], QFont(), 100)[1] == ""
    assert laid_out("abcdefghij", [], QFont(), 1)[1]  # a column narrower than a letter: still ends


def test_the_delegate_paints_what_the_row_holds(qtbot) -> None:
    model = RowsModel([Column("Snippet", lambda r: r.get("snippet"))])
    model.set_rows([{"snippet": "\u2026sync the vault to a phone.", "highlights": [[1, 5], [21, 26]]}])
    view = table(model)
    qtbot.addWidget(view)
    delegate = SnippetDelegate(view)
    view.setItemDelegateForColumn(0, delegate)
    view.resize(600, 200)
    view.show()
    qtbot.waitExposed(view)
    view.grab()  # paints every row through the delegate

    lines, bold = delegate.shown_text(model.index(0, 0), 500, view.font())
    assert lines == ["\u2026sync the vault to a phone."] and bold == ["sync", "phone"]


def test_a_search_shows_a_notes_code_blocks_tables_and_cut_emphasis_as_words(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    save(served_engine, {"requestId": "shell-1", "type": "note", "title": "Headless login", "body": (
        "Sign in from a terminal:\n\n```shell\n# Login\nob login\n```\n\n| Command | Does |\n| --- | --- |\n"
        "| `ob login` | signs in **once per machine** |\n")})
    gui_thread_guard.active = True
    view = records_view_on_main(qtbot, tasks, 1110, 760)
    view.query.setText("terminal login machine")
    with qtbot.waitSignal(view.search_model.sig_page_loaded, timeout=10_000):
        view.search()

    [hit] = [row for row in view.search_model.rows() if row["title"] == "Headless login"]
    assert hit["snippet"] == ("Sign in from a terminal: Login ob login Command · Does ob login · signs in once per "
                              "machine")
    words = [hit["snippet"][start:end] for start, end in hit["highlights"]]
    assert words == ["terminal", "Login", "login", "login", "machine"]


def test_an_imported_conversations_snippet_moves_its_marked_words_with_its_local_times() -> None:
    text = "Started 2026-05-28T20:26:40Z. User (2026-05-28T20:26:50Z): the tram clock (2026-01-01T00:00:00Z) stays"
    marked = [[8, 12], [36, 40], [63, 67], [68, 73]]  # 2026 in the header and the speaker's time, tram, clock
    hit = {"snippet": text, "highlights": marked, "attribution": {"instance": "import-chatgpt"}}
    now = datetime(2026, 6, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))

    shown, spans = shown_snippet(hit, now)

    assert shown == ("Started 2026-05-28 22:26. User (2026-05-28 22:26): the tram clock (2026-01-01T00:00:00Z) "
                     "stays")  # a time in the message's own words is left as written
    assert [shown[a:b] for a, b in spans] == ["2026", "2026", "tram", "clock"]
    assert shown_snippet({**hit, "attribution": {"instance": "laptop"}}, now) == (text, marked)
    assert shown_snippet({"snippet": "no attribution", "highlights": []}, now) == ("no attribution", [])
