"""Vocabulary, Recall approvals, What the agent sees, and Health."""

from __future__ import annotations

from PySide6.QtCore import Qt

from desktop.approvals.view import ApprovalsView
from desktop.common.times import clock_time, local_now
from desktop.health.view import HealthView
from desktop.preview.view import PreviewView
from desktop.vocabulary.view import VocabularyView
from tests.desktop.conftest import wait_for_signal


def shown(qtbot, view):
    qtbot.addWidget(view)
    view.resize(1100, 700)
    view.show()
    return view


def test_vocabulary_shows_definitions_with_counts_examples_and_findings(qtbot, tasks, gui_thread_guard) -> None:
    view = shown(qtbot, VocabularyView(tasks))
    with qtbot.waitSignals([view.sig_content_loaded, view.findings_model.sig_page_loaded], timeout=10_000):
        view.set_agent("main")

    names = [row["name"] for row in view.definitions_model.rows()]
    assert {"person", "project", "works_at", "preference"} <= set(names)
    person = next(row for row in view.definitions_model.rows() if row["name"] == "person")
    assert person["recordCount"] == 2
    assert view.definitions_model.data(view.definitions_model.index(names.index("person"), 2)) == "2"
    view.definitions_table.selectRow(names.index("person"))
    details = view.details.toPlainText()
    assert "Dana Whitaker" in details and "location" in details and "Examples (2 current records)" in details
    assert view.findings_model.rowCount() == 0 and view.findings_model.exhausted


def test_vocabulary_examples_open_their_records(qtbot, tasks, gui_thread_guard) -> None:
    from PySide6.QtCore import QUrl

    view = shown(qtbot, VocabularyView(tasks))
    wait_for_signal(qtbot, view.sig_content_loaded, lambda: view.set_agent("main"))
    blocker = wait_for_signal(qtbot, view.sig_record_requested,
                              lambda: view.details.sig_link_activated.emit(QUrl("record:pg_X")))
    assert blocker.args == ["pg_X"]


def test_recall_approvals_are_listed_read_only(qtbot, tasks, gui_thread_guard) -> None:
    view = shown(qtbot, ApprovalsView(tasks))
    wait_for_signal(qtbot, view.sig_content_loaded, lambda: view.set_agent("main"))

    assert view.model.rowCount() == 1
    texts = [view.model.data(view.model.index(0, column)) for column in range(view.model.columnCount())]
    assert texts[1] == "Dana wants the Atlas status notes weekly, on Fridays."
    assert texts[2] == "status notes, Dana" and texts[3] == "7" and texts[4] == "atlas"
    approved_at = view.model.row(0)["approvedAt"]
    assert texts[5] == "owner-private" and texts[6] == clock_time(approved_at, local_now())  # local, not UTC text
    assert view.summary.text() == "1 approved recall block"
    blocker = wait_for_signal(qtbot, view.sig_record_requested,
                              lambda: view.table.activated.emit(view.model.index(0, 1)))
    assert blocker.args[0].startswith("cl_")


def test_what_the_agent_sees_shows_prompt_and_index_with_counts(qtbot, tasks, gui_thread_guard) -> None:
    view = shown(qtbot, PreviewView(tasks))
    view.project_key.setText("atlas")
    with qtbot.waitSignals([view.sig_content_loaded, view.sig_content_loaded], timeout=10_000):
        view.set_agent("main")
    qtbot.waitUntil(lambda: len(view.results) == 2, timeout=10_000)

    prompt, index = view.results["prompt"], view.results["index"]
    assert view.prompt_text.toPlainText() == prompt["text"] and '"atlas"' in prompt["text"]
    assert view.prompt_count.text() == f"{len(prompt['text']):,} characters (no cap)"
    assert view.index_text.toPlainText() == index["text"] and "## Knowledge Index" in index["text"]
    assert view.index_count.text() == f"{len(index['text']):,} / 4,000 characters"


def test_a_conversation_without_a_grant_gets_no_index(qtbot, tasks, gui_thread_guard) -> None:
    view = shown(qtbot, PreviewView(tasks))
    view.audience.setCurrentIndex(1)
    view.agent = "main"
    view.refresh()
    qtbot.waitUntil(lambda: len(view.results) == 2, timeout=10_000)

    assert view.results["index"]["text"] is None
    assert view.index_count.text().startswith("None: a conversation without an owner grant")
    assert "### Saving" in view.results["prompt"]["text"]  # an ungranted conversation saves to its own partition


def test_an_agent_without_owner_authority_is_told_where_to_look_in_a_pane_that_keeps_its_width(
        qtbot, served_engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    served_engine.registry.add_agent("writer")  # an agent without owner authority
    gui_thread_guard.active = True
    view = PreviewView(tasks)
    qtbot.addWidget(view)
    view.resize(745, 640)  # the view's size in the 1008x720 window of a 1024x768 screen
    view.show()
    view.set_agent("writer")
    qtbot.waitUntil(lambda: len(view.results) == 2, timeout=10_000)

    said = view.prompt_count.text()
    assert said.startswith("None: ") and "choose Another conversation above" in said
    assert "knowledge agents config" not in said and "owner authority" in view.prompt_count.toolTip()  # the engine's
    assert view.minimumSizeHint().width() <= 745  # the reason wraps: it never widens the window past the screen
    qtbot.waitUntil(lambda: view.prompt_count.width() <= view.prompt_text.width() + 2, timeout=5_000)


def test_health_shows_store_git_and_findings(qtbot, tasks, gui_thread_guard) -> None:
    view = shown(qtbot, HealthView(tasks))
    blocker = wait_for_signal(qtbot, view.sig_content_loaded, lambda: view.set_agent("main"))

    summary = view.summary.toPlainText()
    assert "Store:" in summary and "— ok" in summary
    assert "Store: own isolated store (st_" in summary  # in words, as Agents and Sync say it, the id after
    assert "Git checkpoint:" in summary and "Pending publications: 0" in summary
    assert blocker.args[0]["ok"] is True and view.findings_model.rowCount() == 0


def test_health_lists_an_invalid_file_with_its_reason(qtbot, served, tasks, gui_thread_guard) -> None:
    from tests.helpers import private_dir

    gui_thread_guard.active = False  # the test itself plants the broken file
    (private_dir(served) / "pages" / "broken.md").write_text("no frontmatter here\n", encoding="utf-8")
    gui_thread_guard.active = True
    view = shown(qtbot, HealthView(tasks))
    wait_for_signal(qtbot, view.sig_content_loaded, lambda: view.set_agent("main"))

    files = [view.findings_model.data(view.findings_model.index(n, 1)) for n in range(view.findings_model.rowCount())]
    assert "pages/broken.md:1" in files
    assert "Validation: 1 error, " in view.summary.toPlainText()  # a count in words, never "1 error(s)"
    row = files.index("pages/broken.md:1")
    assert view.findings_model.data(view.findings_model.index(row, 4))


def test_vocabulary_names_and_labels_read_whole_beside_the_definition(qtbot, tasks, gui_thread_guard) -> None:
    view = shown(qtbot, VocabularyView(tasks))
    view.resize(1110, 700)  # the view's share of a 1360-wide window
    wait_for_signal(qtbot, view.sig_content_loaded, lambda: view.set_agent("main"))
    table, header = view.definitions_table, view.definitions_table.horizontalHeader()
    table.fit_columns()

    for column in range(view.definitions_model.columnCount()):
        assert header.sectionSize(column) >= min(table.sizeHintForColumn(column), 260), \
            view.definitions_model.headerData(column, Qt.Orientation.Horizontal)
    assert view.details.width() > 400  # the definition keeps room of its own


def test_vocabulary_names_and_kinds_read_whole_in_a_small_window(qtbot, tasks, gui_thread_guard) -> None:
    view = shown(qtbot, VocabularyView(tasks))
    view.resize(745, 620)  # the view's size in the 1008x720 window of a 1024x768 screen
    wait_for_signal(qtbot, view.sig_content_loaded, lambda: view.set_agent("main"))
    table, header = view.definitions_table, view.definitions_table.horizontalHeader()
    titles = [column.title for column in view.definitions_model.columns]

    def cut(title: str) -> bool:
        column = titles.index(title)
        return header.sectionSize(column) < max(table.sizeHintForColumn(column), header.sectionSizeHint(column))

    qtbot.waitUntil(lambda: not cut("Name") and not cut("Kind"), timeout=5_000)  # never "organ…", "relati…"
    # No column gives way ("Org…" under Label repeated the name): the label heads the definition, and is on hover.
    assert [title for title in titles if cut(title)] == [] and "Label" not in titles
    names = [row["name"] for row in view.definitions_model.rows()]
    works_at = view.definitions_model.index(names.index("works_at"), titles.index("Name"))
    label = view.definitions_model.rows()[works_at.row()]["label"]
    assert label and label != "works_at" and f"shown as “{label}”" in works_at.data(0x03)  # Qt.ToolTipRole
    provenance = titles.index("From")
    assert header.sectionSize(provenance) <= max(table.sizeHintForColumn(provenance),
                                                 header.sectionSizeHint(provenance)) + 1  # "shipped" takes no spare
    assert view.details.width() > 300  # the definition keeps room of its own


def test_an_approvals_summary_is_read_in_a_small_window(qtbot, tasks, gui_thread_guard) -> None:
    from PySide6.QtCore import Qt

    view = ApprovalsView(tasks)
    qtbot.addWidget(view)
    view.resize(760, 500)  # the view's size in a 1024x700 window
    view.show()
    wait_for_signal(qtbot, view.sig_content_loaded, lambda: view.set_agent("main"))
    header = view.table.horizontalHeader()
    summary = "Dana wants the Atlas status notes weekly, on Fridays."
    assert view.model.index(0, 1).data(Qt.ItemDataRole.ToolTipRole) == summary  # whole on hover
    # The summary keeps room to be read (the others give way to their headers), never "Dana wants the At…".
    qtbot.waitUntil(lambda: header.sectionSize(1) >= 240, timeout=5_000)
    assert all(header.sectionSize(1) > header.sectionSize(c) for c in range(view.model.columnCount()) if c != 1)
