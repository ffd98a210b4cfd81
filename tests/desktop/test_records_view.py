"""Records: Recent, Browse by type, Search, and the record page (fields, Markdown, claims, links, history)."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import QSettings, Qt, QUrl
from PySide6.QtWidgets import QApplication, QFormLayout, QLabel

from desktop.records.page import SourceDialog
from desktop.records.view import RecordsView
from tests.desktop.conftest import wait_for_signal
from tests.engine.importers.helpers import run_import, write_vault


def make_view(qtbot, tasks, settings: QSettings | None = None) -> RecordsView:
    """The Records view on the main agent, its Recent list and types loaded (``settings``: the window's)."""
    view = RecordsView(tasks, settings=settings)
    qtbot.addWidget(view)
    view.resize(1200, 800)
    view.show()
    with qtbot.waitSignals([view.recent_model.sig_page_loaded, view.sig_content_loaded], timeout=10_000):
        view.set_agent("main")
    qtbot.waitUntil(lambda: view.types_model.rowCount() > 0, timeout=10_000)
    return view


def open_titled(qtbot, view: RecordsView, title: str) -> None:
    row = next(r for r in view.recent_model.rows() if r["title"] == title)
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(row["id"]))


def test_recent_lists_current_records_newest_first(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    rows = view.recent_model.rows()

    assert view.recent_model.total == len(rows) == 11 and view.recent_model.exhausted  # the 6 links left out
    assert {r["kind"] for r in rows} == {"page", "claim"}
    assert [r["updatedAt"] for r in rows] == sorted((r["updatedAt"] for r in rows), reverse=True)
    assert {r["status"] for r in rows} == {"current"}

    with qtbot.waitSignal(view.recent_model.sig_page_loaded, timeout=10_000):
        view.include_all.setChecked(True)
    assert "superseded" in {r["status"] for r in view.recent_model.rows()}


def test_browse_by_type(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    person = next(n for n, row in enumerate(view.types_model.rows()) if row["type"] == "person")
    assert view.types_model.row(person)["count"] == 2

    with qtbot.waitSignal(view.browse_model.sig_page_loaded, timeout=10_000):
        view.types_table.selectRow(person)
    assert [r["title"] for r in view.browse_model.rows()] == ["Dana Whitaker", "Ravi Menon"]
    assert view.modes.currentIndex() == 1


def test_search_shows_hits_with_snippets(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    view.query.setText("blue-green cut-over")
    with qtbot.waitSignal(view.search_model.sig_page_loaded, timeout=10_000):
        view.search()

    titles = [r["title"] for r in view.search_model.rows()]
    assert "Atlas will cut over with a blue-green deployment." in titles
    model = view.search_model
    headers = [model.headerData(n, Qt.Orientation.Horizontal) for n in range(model.columnCount())]
    assert headers == ["Title", "Kind", "Score", "Snippet"]  # one Kind column: the snippet keeps the room
    rows = view.search_model.rows()
    kinds = {view.search_model.data(view.search_model.index(n, 1)) for n in range(len(rows))}
    assert kinds == {row.get("type") or row["kind"] for row in rows} and len(kinds) > 1
    page = next(n for n, row in enumerate(rows) if row.get("type"))
    assert view.search_model.data(view.search_model.index(page, 1)) == rows[page]["type"]
    assert view.search_model.data(view.search_model.index(page, 1), Qt.ItemDataRole.ToolTipRole) == (
        f"{rows[page]['kind']}, type {rows[page]['type']}")
    snippet = view.search_model.data(view.search_model.index(0, 3))
    assert snippet and "\n" not in snippet
    # Painted on up to three lines, the query's words in bold.
    delegate = view.search_table.itemDelegateForColumn(3)
    lines, bold = delegate.shown_text(view.search_model.index(0, 3), 300, view.search_table.font())
    assert 1 <= len(lines) <= 3 and {word.lower() for word in bold} <= {"blue", "green", "cut", "over"} and bold
    assert view.search_table.verticalHeader().defaultSectionSize() >= 3 * view.search_table.fontMetrics().lineSpacing()
    assert view.search_summary.text().startswith(f"{len(titles)} matching")


def test_search_says_how_it_ranked_and_the_owner_picks_the_mode(qtbot, tasks, gui_thread_guard, tmp_path) -> None:
    settings = QSettings(str(tmp_path / "window.ini"), QSettings.Format.IniFormat)
    view = make_view(qtbot, tasks, settings)
    view.query.setText("who prefers weekly status notes")
    with qtbot.waitSignal(view.search_model.sig_page_loaded, timeout=10_000):
        view.search()

    # No embedding model is installed for the test engine: Auto ranks by keywords, says so and links to Models.
    assert view.search_mode.currentData() == "auto"
    assert view.search_summary.text().endswith("· Keyword only: no embedding model installed")
    assert view.models_link.isVisible() and view.models_link.text().endswith("in Models…")
    with qtbot.waitSignal(view.sig_models_requested):
        view.models_link.click()

    with qtbot.waitSignal(view.search_model.sig_page_loaded, timeout=10_000):
        view.search_mode.setCurrentIndex(view.search_mode.findData("keyword"))
    assert view.search_summary.text().endswith("· ranked by keywords") and not view.models_link.isVisible()
    assert settings.value("records/searchMode") == "keyword"
    assert RecordsView(tasks, settings=settings).search_mode.currentData() == "keyword"  # remembered


def test_a_question_matches_no_note_by_its_function_words_alone(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    view.query.setText("how do I get to the zeppelin")
    with qtbot.waitSignal(view.search_model.sig_page_loaded, timeout=10_000):
        view.search()

    assert view.search_model.rowCount() == 0 and view.search_summary.text().startswith("No matches ·")


def test_a_page_shows_fields_markdown_claims_connections_and_history(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    open_titled(qtbot, view, "Dana Whitaker")
    page = view.page

    details = page.details.toPlainText()
    assert "Lisbon" in details and "Location" in details and "fields." not in details  # keys as labels
    assert "Created" in details and "Written by" in details
    assert not re.search(r"\d{4}-\d\d-\d\dT\d", details)  # no raw UTC timestamp: local, relative times
    assert page.tabs.currentWidget() is page.note and page.note.widget(0) is page.body  # the note first
    assert "prefers short written updates" in page.body.toPlainText()
    assert "Dana prefers the Atlas status notes weekly" in page.claims.toPlainText()
    assert "open the retained original" in page.claims.toPlainText()
    connections = page.connections.toPlainText()
    assert "Northwind Labs works at" in connections and "Atlas Migration works on" in connections
    assert "Linked from" in connections
    assert page.history_model.rowCount() == 1 and page.history_model.row(0)["revision"] == 1


def test_history_diffs_revisions(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    open_titled(qtbot, view, "Dana prefers the Atlas status notes weekly, on Fridays.")
    page = view.page
    assert page.history_model.rowCount() == 2

    assert [page.history_model.data(page.history_model.index(row, 3)) for row in (0, 1)] == [
        "created", "recall approval"]  # What changed, the revision number left out
    blocker = wait_for_signal(qtbot, page.sig_diff_loaded, lambda: page.history_table.selectRow(1))
    shown = blocker.args[0]
    assert shown.startswith("Revision 1 → revision 2") and re.search(r"Fields \([23] changed\)", shown)
    assert "revision\n1 → 2" in shown and "recall\n(not set) → summary: Dana wants" in shown
    assert "The body did not change." in shown
    assert "Approved for recall" in page.details.toPlainText()


def test_a_refresh_keeps_the_page_shown_and_the_revision_chosen_until_the_new_answers_come(
        qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    open_titled(qtbot, view, "Dana prefers the Atlas status notes weekly, on Fridays.")
    page = view.page
    wait_for_signal(qtbot, page.sig_diff_loaded, lambda: page.history_table.selectRow(1))
    header, claims = page.header.toPlainText(), page.claims.toPlainText()

    blocker = wait_for_signal(qtbot, page.sig_diff_loaded, page.refresh)  # the revision's diff, asked for again

    assert blocker.args[0].startswith("Revision 1 → revision 2")
    assert page.header.toPlainText() == header and page.claims.toPlainText() == claims
    assert [index.row() for index in page.history_table.selectionModel().selectedRows()] == [1]


def test_a_revision_chosen_while_a_refresh_is_asked_for_stays_chosen_and_its_diff_is_shown(
        qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    open_titled(qtbot, view, "Dana prefers the Atlas status notes weekly, on Fridays.")
    page = view.page

    def refreshed_then_chosen() -> None:  # the answers come once both are done: the GUI thread is busy until then
        page.refresh()
        page.history_table.selectRow(1)

    blocker = wait_for_signal(qtbot, page.sig_diff_loaded, refreshed_then_chosen)

    assert blocker.args[0].startswith("Revision 1 → revision 2")
    assert [index.row() for index in page.history_table.selectionModel().selectedRows()] == [1]


def test_a_refresh_does_not_blank_the_page_while_it_loads(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    open_titled(qtbot, view, "Dana Whitaker")
    page = view.page
    header = page.header.toPlainText()

    page.refresh()  # nothing has answered yet: the page still shows what it showed
    assert page.header.toPlainText() == header and "Lisbon" in page.details.toPlainText()
    assert page.history_model.rowCount() == 1
    qtbot.waitSignal(page.sig_content_loaded, timeout=10_000).wait()


def test_request_a_change_copies_the_exact_record_and_sends_nothing(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    open_titled(qtbot, view, "Atlas Migration")
    record = view.page.record

    blocker = wait_for_signal(qtbot, view.page.sig_change_request_copied, view.page.request_button.click)
    message = QApplication.clipboard().text()
    assert message == blocker.args[0]
    assert record["id"] in message and f"revision {record['revision']}" in message and record["sha256"] in message
    # a page's: the parameters that revise exactly the version shown (docs/record-format.md)
    assert record["kind"] == "page"
    assert f"expectedRevision {record['revision']} and expectedSha256 {record['sha256']}" in message


def test_links_navigate_and_back_returns(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    open_titled(qtbot, view, "Dana Whitaker")
    dana = view.page.record["id"]
    northwind = next(c["record"]["id"] for c in view.page.links["connections"] if c["relation"] == "works_at")

    wait_for_signal(qtbot, view.page.sig_content_loaded,
                    lambda: view.page.connections.sig_link_activated.emit(QUrl(f"record:{northwind}")))
    assert view.page.record["title"] == "Northwind Labs"
    wait_for_signal(qtbot, view.page.sig_content_loaded, view.go_back)
    assert view.page.record["id"] == dana


def test_the_retained_original_opens_in_a_dialog(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    open_titled(qtbot, view, "Dana prefers the Atlas status notes weekly, on Fridays.")
    source = view.page.links["evidence"][0]["source"]

    view.page.claims.sig_link_activated.emit(QUrl(f"source:{source}"))
    qtbot.waitUntil(lambda: isinstance(view.page.dialog, SourceDialog), timeout=10_000)
    assert "every Friday" in view.page.dialog.text.toPlainText()
    view.page.dialog.close()


def test_stored_markdown_never_loads_a_local_file(qtbot, tasks) -> None:
    view = RecordsView(tasks)
    qtbot.addWidget(view)
    assert view.page.body.loadResource(2, QUrl("file:///etc/passwd")) is None


def test_a_descriptor_is_shown_as_plain_text_never_as_markup(qtbot, tmp_path) -> None:
    image = tmp_path / "local.png"
    image.write_bytes(b"\x89PNG")
    crafted = f'<img src="{image.as_uri()}"><b>text/plain</b>'
    dialog = SourceDialog({"id": "src_1", "mediaType": crafted, "size": 3, "verified": True,
                           "retainedPath": "private/sources/a.txt", "sha256": "0" * 64, "text": "abc"})
    qtbot.addWidget(dialog)
    info = dialog.findChildren(QLabel)[0]

    assert info.textFormat() == Qt.TextFormat.PlainText
    assert info.text().startswith(crafted)


def test_no_label_of_the_window_reads_its_text_as_markup(qtbot, connected_window) -> None:
    # A form's row labels name its fields in the code's own words.
    row_labels = {id(form.itemAt(row, QFormLayout.ItemRole.LabelRole).widget())
                  for form in connected_window.findChildren(QFormLayout) for row in range(form.rowCount())
                  if form.itemAt(row, QFormLayout.ItemRole.LabelRole) is not None}
    labels = [label for label in connected_window.findChildren(QLabel) if id(label) not in row_labels]
    assert len(labels) > 20
    assert [label.text() for label in labels if label.textFormat() != Qt.TextFormat.PlainText] == []


def test_a_claims_interval_is_shown_on_its_record_page() -> None:
    from desktop.records.render import header_html, validity_html

    record = {"id": "cl_1", "kind": "claim", "status": "current", "revision": 1, "title": "Dana leads Atlas",
              "frontmatter": {"kind": "claim", "valid_from": "2026-01-01", "valid_to": "2026-12-31"},
              "validity": {"validFrom": "2026-01-01", "validTo": "2026-12-31", "holds": False}}
    shown = header_html(record)
    assert "Holds from 2026-01-01 until 2026-12-31 (inclusive)" in shown and "does not hold now" in shown
    assert validity_html({"frontmatter": {"kind": "claim", "valid_to": "<b>"}}) == ""  # not a date: nothing
    assert validity_html({"frontmatter": {"kind": "page", "title": "x"}}) == ""


@pytest.fixture
def imported_vault(served_engine, tmp_path) -> None:
    """A small vault imported into the served store (before the GUI-thread guard: this is the test's own I/O)."""
    from engine.importers.common import Writer, import_instance, owner_caller
    from engine.importers.markdown import import_markdown, load_markdown

    vault = tmp_path / "notes"
    for path in ("Home.md", "Projects/Alpha/Plan.md", "Projects/Alpha/Risks.md", "Projects/Beta/Idea.md"):
        (vault / path).parent.mkdir(parents=True, exist_ok=True)
        (vault / path).write_text(f"About {path}.\n", encoding="utf-8")
    with owner_caller(served_engine, instance=import_instance("markdown")) as (caller, _):
        import_markdown(Writer(served_engine, caller, "markdown"),
                        *load_markdown(str(vault), served_engine.refuse_secrets))


def test_down_from_the_search_box_goes_to_the_results_and_enter_opens_one(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    view.activateWindow()
    qtbot.waitActive(view)
    view.query.setFocus()
    qtbot.keyClicks(view.query, "Dana")
    with qtbot.waitSignal(view.search_model.sig_page_loaded, timeout=10_000):
        qtbot.keyClick(view.query, Qt.Key.Key_Return)
    first = view.search_model.rows()[0]

    qtbot.keyClick(view.query, Qt.Key.Key_Down)  # as in a notes app's quick switcher
    assert view.search_table.hasFocus() and view.search_table.currentIndex().row() == 0
    assert [index.row() for index in view.search_table.selectionModel().selectedRows()] == [0]
    with qtbot.waitSignal(view.page.sig_content_loaded, timeout=10_000):
        qtbot.keyClick(view.search_table, Qt.Key.Key_Return)
    assert view.page.record["id"] == first["id"]


def test_the_open_records_row_is_marked_while_the_arrow_keys_move_the_selection(
        qtbot, tasks, gui_thread_guard, qtmodeltester) -> None:
    """The arrows walk a list without opening what they pass (Enter opens it); the row of the record on the
    page stays marked (bold, on a tint) meanwhile, so the page never seems to show the highlighted row."""
    view = make_view(qtbot, tasks)
    view.activateWindow()
    qtbot.waitActive(view)
    table, model = view.recent_table, view.recent_model
    rows = model.rows()

    def marked() -> list[int]:
        return [n for n in range(model.rowCount())
                if (font := model.index(n, 0).data(Qt.ItemDataRole.FontRole)) is not None and font.bold()
                and model.index(n, 1).data(Qt.ItemDataRole.FontRole) is None
                and model.index(n, 1).data(Qt.ItemDataRole.BackgroundRole) is not None]

    assert marked() == []  # nothing open yet
    table.setFocus()
    table.selectRow(0)
    with qtbot.waitSignal(view.page.sig_content_loaded, timeout=10_000):
        qtbot.keyClick(table, Qt.Key.Key_Return)
    assert view.page.record["id"] == rows[0]["id"] and marked() == [0]

    qtbot.keyClick(table, Qt.Key.Key_Down)
    qtbot.keyClick(table, Qt.Key.Key_Down)
    assert table.currentIndex().row() == 2 and marked() == [0]  # the page still shows the first: it says so
    assert model.index(0, 0).data(Qt.ItemDataRole.AccessibleDescriptionRole) == "open on the page"
    qtmodeltester.check(model)
    with qtbot.waitSignal(view.page.sig_content_loaded, timeout=10_000):
        qtbot.keyClick(table, Qt.Key.Key_Return)
    assert view.page.record["id"] == rows[2]["id"] and marked() == [2]

    with qtbot.waitSignal(view.page.sig_content_loaded, timeout=10_000):
        view.go_back()  # Alt+Left
    assert marked() == [0]
    view.set_agent(None)
    assert model.marked is None


def test_an_imported_vault_is_browsed_by_its_folders(qtbot, tasks, imported_vault, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    qtbot.waitUntil(lambda: view.folders_tree.topLevelItemCount() == 1, timeout=10_000)

    top = view.folders_tree.topLevelItem(0)
    projects = top.child(0)
    assert (top.text(0), top.text(1), projects.text(0), projects.text(1)) == (
        "notes", "1 (4 in all)", "Projects", "(3 in all)")  # its own notes, then with its subfolders
    assert [(projects.child(n).text(0), projects.child(n).text(1)) for n in range(2)] == [("Alpha", "2"),
                                                                                         ("Beta", "1")]
    with qtbot.waitSignal(view.folder_model.sig_page_loaded, timeout=10_000):
        projects.child(0).setSelected(True)
    assert [row["title"] for row in view.folder_model.rows()] == ["Plan", "Risks"]
    assert view.modes.tabText(view.modes.currentIndex()) == "Fol&ders"

    with qtbot.waitSignal(view.page.sig_content_loaded, timeout=10_000):
        view.folder_table.clicked.emit(view.folder_model.index(1, 0))
    assert view.page.record["title"] == "Risks"


def test_a_list_reloaded_leaves_the_owner_on_the_tab_they_chose(qtbot, tasks, imported_vault,
                                                                gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    qtbot.waitUntil(lambda: view.folders_tree.topLevelItemCount() == 1, timeout=10_000)
    alpha = view.folders_tree.topLevelItem(0).child(0).child(0)
    with qtbot.waitSignal(view.folder_model.sig_page_loaded, timeout=10_000):
        alpha.setSelected(True)
    view.query.setText("about")
    with qtbot.waitSignal(view.search_model.sig_page_loaded, timeout=10_000):
        view.search()  # then the owner searches
    found = [row["title"] for row in view.search_model.rows()]

    for tab in ("Sea&rch", "Recen&t"):  # and reads the results, or goes back to Recent with the query typed
        view.modes.setCurrentIndex(next(n for n in range(view.modes.count()) if view.modes.tabText(n) == tab))
        for reload in (view.live_refresh, view.refresh):  # an agent wrote, a file changed; F5
            with qtbot.waitSignals([view.folder_model.sig_page_loaded, view.search_model.sig_page_loaded],
                                   timeout=10_000):
                reload()
            assert view.modes.tabText(view.modes.currentIndex()) == tab
            assert [row["title"] for row in view.folder_model.rows()] == ["Plan", "Risks"]  # reloaded in place
            assert [item.text(0) for item in view.folders_tree.selectedItems()] == ["Alpha"]
            assert [row["title"] for row in view.search_model.rows()] == found


def test_a_tag_clicked_on_a_page_lists_the_notes_holding_it_and_back_returns(
        qtbot, tasks, served_engine, gui_thread_guard, tmp_path) -> None:
    """Tags were drawn as links but did nothing (the tenth owner's pass): a click lists the notes tagged so
    or with a tag nested in it, as Obsidian's tag search does, and Back returns to the list the owner was on."""
    gui_thread_guard.active = False
    root = tmp_path / "IT"
    write_vault(root, {"Home.md": "Start here. #project", "Alpha/Plan.md": "The plan. #project/alpha #中断",
                       "Ideas/Other.md": "Not this one. #projects", "Journal/Day.md": "No tag."})
    pages = run_import(served_engine, "markdown", root)["pages"]
    gui_thread_guard.active = True
    view = make_view(qtbot, tasks)
    folders = next(n for n in range(view.modes.count()) if view.modes.tabText(n) == "Fol&ders")
    view.modes.setCurrentIndex(folders)
    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(pages["Home.md"]))

    hrefs = re.findall(r'href="(tag:[^"]+)"', view.page.details.toHtml())
    assert len(hrefs) == 1
    with qtbot.waitSignal(view.browse_model.sig_page_loaded, timeout=10_000):
        view.page.details.sig_link_activated.emit(QUrl(hrefs[0]))  # as a click on the tag does
    assert [row["title"] for row in view.browse_model.rows()] == ["Home", "Plan"]
    assert view.modes.currentIndex() == 1 and view.tag_bar.isVisible()
    assert view.tag_label.text() == "2 notes tagged #project or a tag inside it (#project/…)"
    assert not view.types_table.selectionModel().hasSelection()

    wait_for_signal(qtbot, view.page.sig_content_loaded, lambda: view.open_record(pages["Alpha/Plan.md"]))
    chinese = [href for href in re.findall(r'href="(tag:[^"]+)"', view.page.details.toHtml()) if "%E4" in href]
    with qtbot.waitSignal(view.browse_model.sig_page_loaded, timeout=10_000):
        view.page.details.sig_link_activated.emit(QUrl(chinese[0]))
    assert [row["title"] for row in view.browse_model.rows()] == ["Plan"]
    with qtbot.waitSignal(view.browse_model.sig_page_loaded, timeout=10_000):
        view.live_refresh()  # an agent wrote: the tag's notes are listed again, where they are
    assert view.tag_label.text().startswith("1 note tagged #中断") and view.modes.currentIndex() == 1

    view.tag_back.click()
    assert view.modes.currentIndex() == folders and not view.tag_bar.isVisible()
    assert view.browse_model.rowCount() == 0  # Browse lists what it listed before: nothing chosen
    with qtbot.waitSignal(view.browse_model.sig_page_loaded, timeout=10_000):
        view.page.details.sig_link_activated.emit(QUrl(chinese[0]))
    view.set_agent(None)  # another agent's store: the tag was this one's
    assert not view.tag_bar.isVisible() and view.browse_model.rowCount() == 0


def test_a_store_without_imports_has_no_folders(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    with qtbot.waitSignal(view.sig_content_loaded, check_params_cb=lambda which: which == "folders", timeout=10_000):
        view.refresh()
    assert view.folders_tree.topLevelItemCount() == 0 and view.folder_model.rowCount() == 0


def test_the_lists_say_when_in_words_with_the_exact_time_in_a_tooltip(qtbot, tasks, gui_thread_guard) -> None:
    view = make_view(qtbot, tasks)
    model = view.recent_model
    column = next(n for n in range(model.columnCount()) if model.headerData(
        n, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole) == "Updated")

    shown = model.data(model.index(0, column))
    assert shown == "just now" or shown.endswith("ago")  # the demo was written minutes ago, never a UTC stamp
    assert "stored as " + model.rows()[0]["updatedAt"] in model.data(model.index(0, column),
                                                                      Qt.ItemDataRole.ToolTipRole)


def test_clicking_the_search_tab_puts_what_the_owner_types_into_the_search(qtbot, connected_window) -> None:
    window = connected_window
    records = window.records_view
    window.activateWindow()
    qtbot.waitActive(window)
    window.navigation.setFocus()  # the owner chose Records in the sidebar
    qtbot.waitUntil(window.navigation.hasFocus, timeout=5_000)
    bar = records.modes.tabBar()
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(2).center())
    assert records.modes.currentIndex() == 2

    qtbot.keyClicks(QApplication.focusWidget(), "sync")  # typed where the focus is, as a keyboard does
    assert records.query.text() == "sync"
    assert window.stack.currentWidget() is records  # never a jump to Sync, the view whose name starts with "s"
