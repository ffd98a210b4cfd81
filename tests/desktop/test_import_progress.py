"""Importing a Markdown vault through the window's Import dialog, against a real served engine: the job's phases
with their counts, Cancel only while the job can stop, indexing as its own last phase, a summary that scrolls
and lists the unresolved links by note, and its links to what was made, opened in Records."""

from __future__ import annotations

import threading
from html import escape
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt, QUrl

import engine.importers.methods as import_methods
from desktop.transfer.dialogs import ImportDialog, can_cancel, job_progress_text

WAIT_MS = 20_000
LINKING_FIRST = "Linking: 1/3 notes linked: Plain.md"  # the notes go in path order
UNRESOLVED = {"Tram clock.md": ["[[Nowhere]]"], "Projects/Kayak rack.md": ["[[Missing note|here]]"]}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """Three notes, two of them linked to each other, each of those with one link that names nothing."""
    root = tmp_path / "Garden"
    (root / "Projects").mkdir(parents=True)
    (root / "Tram clock.md").write_text("Repairing the clock; see [[Kayak rack]] and [[Nowhere]].\n",
                                        encoding="utf-8")
    (root / "Projects" / "Kayak rack.md").write_text("Built after [[Tram clock]]; plans in [[Missing note|here]].\n",
                                                     encoding="utf-8")
    (root / "Plain.md").write_text("A note with no links.\n", encoding="utf-8")
    return root


class Gate:
    """Holds one engine call until the test lets it go (so the test sees the job in that phase, never by timing)."""

    def __init__(self) -> None:
        self.reached, self.release = threading.Event(), threading.Event()

    def hold(self) -> None:
        self.reached.set()
        assert self.release.wait(WAIT_MS / 1000)


def markdown_dialog(qtbot: Any, tasks: Any, vault: Path) -> ImportDialog:
    dialog = ImportDialog(tasks, ["main"], "main")
    qtbot.addWidget(dialog)
    dialog.set_format("markdown")
    dialog.path.setText(str(vault))
    return dialog


def test_the_import_shows_each_phase_with_its_counts_and_cancel_only_while_it_can_stop(
        qtbot, tasks, served_engine, vault, monkeypatch, gui_thread_guard) -> None:
    checking, linking, indexing = Gate(), Gate(), Gate()
    real_scan, real_remember, real_index = (served_engine.refuse_secrets, served_engine.remember,
                                            import_methods.index_imported)

    def refuse_secrets(places: Any) -> None:
        if not checking.reached.is_set():  # the first file read is checked; the check waits
            checking.hold()
        real_scan(places)

    def remember(caller: Any, params: dict[str, Any]) -> dict[str, Any]:
        linking.hold()  # the first note's links wait: the pages are all written
        return real_remember(caller, params)

    def index_imported(engine: Any, agent: str) -> list[str]:
        indexing.hold()
        return real_index(engine, agent)

    monkeypatch.setattr(served_engine, "refuse_secrets", refuse_secrets)
    monkeypatch.setattr(served_engine, "remember", remember)
    monkeypatch.setattr(import_methods, "index_imported", index_imported)
    dialog = markdown_dialog(qtbot, tasks, vault)
    qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)

    # The whole folder is read, then checked for credentials file by file (no total: a busy bar).
    qtbot.waitUntil(lambda: dialog.status.text() == "Checking for credentials: 1 files checked: Plain.md",
                    timeout=WAIT_MS)
    assert (dialog.progress.minimum(), dialog.progress.maximum()) == (0, 0) and dialog.cancel_button.isEnabled()
    checking.release.set()

    # The pages are written (3 of 3), and the links are a phase of their own, counted note by note (Plain.md
    # has none; the next note's wait), which Cancel can stop.
    qtbot.waitUntil(lambda: dialog.status.text() == LINKING_FIRST, timeout=WAIT_MS)
    assert (dialog.progress.maximum(), dialog.progress.value()) == (1000, 333)
    assert dialog.cancel_button.isEnabled()
    linking.release.set()

    # Everything is written; indexing cannot be cancelled: the button is disabled, and the engine refuses too.
    qtbot.waitUntil(lambda: dialog.status.text().startswith("Indexing for search: 3 notes written"), timeout=WAIT_MS)
    assert not dialog.cancel_button.isEnabled()
    assert (dialog.progress.minimum(), dialog.progress.maximum()) == (0, 0)  # busy: indexing has no count
    job_id = dialog.watcher.job["id"]
    gui_thread_guard.active = False
    assert served_engine.jobs.cancel(job_id)["state"] == "running"
    gui_thread_guard.active = True
    with qtbot.waitSignal(dialog.sig_import_finished, timeout=WAIT_MS) as blocker:
        indexing.release.set()

    job = blocker.args[0]
    assert job["state"] == "done" and job["result"]["unresolved"] == UNRESOLVED
    assert job["progress"]["phase"] == "indexing" and job["progress"]["cancellable"] is False
    assert dialog.status.text() == "Finished." and dialog.progress.value() == dialog.progress.maximum()
    assert not dialog.cancel_button.isEnabled() and dialog.start_button.isEnabled()


def test_a_cancel_while_linking_stops_before_the_next_note_and_keeps_the_pages(
        qtbot, tasks, served_engine, vault, monkeypatch, gui_thread_guard) -> None:
    linking = Gate()
    real_remember = served_engine.remember

    def remember(caller: Any, params: dict[str, Any]) -> dict[str, Any]:
        linking.hold()
        return real_remember(caller, params)

    monkeypatch.setattr(served_engine, "remember", remember)
    dialog = markdown_dialog(qtbot, tasks, vault)
    qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.status.text() == LINKING_FIRST, timeout=WAIT_MS)
    with qtbot.waitSignal(dialog.watcher.sig_job_updated, timeout=WAIT_MS,
                          check_params_cb=lambda job: job["state"] == "cancelling"):
        qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(dialog.sig_import_finished, timeout=WAIT_MS) as blocker:
        linking.release.set()

    assert blocker.args[0]["state"] == "cancelled"
    # It stops at the second note's report; the third note's linking (nothing to write: its link names no
    # note) was started beside the second (engine/importers/bulk.py) and is counted when it finished.
    assert dialog.status.text().startswith(("Cancelled: Linking: 2/3 notes linked: Projects/Kayak rack.md",
                                            "Cancelled: Linking: 3/3 notes linked: Tram clock.md"))
    final = blocker.args[0]["progress"]  # the bar agrees with the words: as far as it got, not where Cancel was
    assert dialog.progress.value() == round(final["done"] / final["total"] * dialog.progress.maximum()) > 333


def test_the_summary_scrolls_lists_unresolved_links_by_note_and_opens_what_was_made(
        qtbot, connected_window, vault) -> None:
    window = connected_window
    window.import_action.trigger()
    dialog = window.import_dialog
    assert dialog is not None and dialog.isSizeGripEnabled()
    dialog.set_format("markdown")
    dialog.path.setText(str(vault))
    with qtbot.waitSignal(dialog.sig_import_finished, timeout=WAIT_MS) as blocker:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    pages = blocker.args[0]["result"]["pages"]

    text = dialog.summary.toPlainText()
    assert text.startswith("Imported markdown into main's store: 3 sources, 3 pages, 2 relationships")
    assert "2 links name no note or file of the folder; they stay as text." in text
    assert "Tram clock.md: [[Nowhere]]" in text and "Projects/Kayak rack.md: [[Missing note|here]]" in text
    assert "Plain.md" not in text  # a note whose links all resolve is not listed
    assert dialog.summary.verticalScrollBarPolicy() != Qt.ScrollBarPolicy.ScrollBarAlwaysOff

    html = dialog.summary.toHtml()
    note_link = f"show:main/record/{pages['Projects/Kayak rack.md']}"
    assert note_link in html and "show:main/folder/Garden" in html  # a folder's import links to the folder
    dialog.summary.anchorClicked.emit(QUrl(note_link))  # as a click on the note's name does
    page = window.records_view.page
    assert window.current_view() is window.records_view
    qtbot.waitUntil(lambda: page.record is not None and page.record.get("id") == pages["Projects/Kayak rack.md"],
                    timeout=WAIT_MS)

    dialog.summary.anchorClicked.emit(QUrl("show:main/folder/Garden"))
    records = window.records_view
    assert records.modes.tabText(records.modes.currentIndex()) == "Fol&ders"
    qtbot.waitUntil(lambda: [records.folder_model.row(row).get("title") for row in range(
        records.folder_model.rowCount())] == ["Plain", "Tram clock"], timeout=WAIT_MS)  # the notes at its top
    qtbot.waitUntil(lambda: records.folders_tree.topLevelItemCount() == 1, timeout=WAIT_MS)
    garden = records.folders_tree.topLevelItem(0)
    assert (garden.text(0), garden.text(1), garden.child(0).text(0), garden.child(0).text(1)) == (
        "Garden", "2 (3 in all)", "Projects", "1")


def test_the_same_folder_imported_again_says_nothing_was_new_and_still_opens_what_stands(
        qtbot, tasks, served_engine, vault) -> None:
    dialog = markdown_dialog(qtbot, tasks, vault)
    with qtbot.waitSignal(dialog.sig_import_finished, timeout=WAIT_MS):
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    assert dialog.summary.toPlainText().startswith("Imported markdown into main's store: 3 sources, 3 pages, "
                                                   "2 relationships.")

    with qtbot.waitSignal(dialog.sig_import_finished, timeout=WAIT_MS) as blocker:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)

    assert blocker.args[0]["result"]["reused"] == blocker.args[0]["result"]["imported"]
    assert dialog.summary.toPlainText().startswith(
        "Nothing new: all 3 sources, 3 pages and 2 relationships of the markdown input in main's store were "
        "already made by an earlier run of this input; nothing was written.")
    assert "show:main/folder/Garden" in dialog.summary.toHtml()  # the notes stand in the store: shown there


def test_the_dialog_grows_to_show_a_long_summary_and_stays_on_the_screen(qtbot, tasks, tmp_path,
                                                                        gui_thread_guard) -> None:
    gui_thread_guard.active = False
    vault = tmp_path / "Long"
    vault.mkdir()
    for n in range(40):  # forty notes, each with a link that names nothing: a long "Left out" list
        (vault / f"Note {n}.md").write_text(f"See [[Nowhere {n}]].\n", encoding="utf-8")
    gui_thread_guard.active = True
    dialog = markdown_dialog(qtbot, tasks, vault)
    dialog.show()
    qtbot.waitExposed(dialog)
    before = dialog.summary.height()
    with qtbot.waitSignal(dialog.sig_import_finished, timeout=WAIT_MS):
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)

    room = dialog.screen().availableGeometry()
    qtbot.waitUntil(lambda: dialog.height() >= room.height() * 0.6, timeout=WAIT_MS)  # towards the screen's
    assert dialog.summary.height() > 1.5 * before  # more of the list at once, without dragging the dialog
    assert dialog.frameGeometry().height() <= room.height() and dialog.frameGeometry().width() <= room.width()
    assert "Note 39.md: [[Nowhere 39]]" in dialog.summary.toPlainText()


def test_a_dry_run_lists_what_it_would_leave_out_and_links_to_nothing(qtbot, tasks, served_engine, vault,
                                                                      gui_thread_guard) -> None:
    dialog = markdown_dialog(qtbot, tasks, vault)
    dialog.dry_run.setChecked(True)
    with qtbot.waitSignal(dialog.sig_import_finished, timeout=WAIT_MS) as blocker:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)

    assert blocker.args[0]["result"]["unresolved"] == UNRESOLVED
    assert blocker.args[0]["progress"]["phase"] == "linking"  # nothing written: nothing to index
    text = dialog.summary.toPlainText()
    assert text.startswith("Dry run of the markdown import") and "Tram clock.md: [[Nowhere]]" in text
    assert "show:" not in dialog.summary.toHtml()  # nothing was made to open


def running(phase: str, done: float, total: float | None, message: str = "", *, cancellable: bool = True,
            state: str = "running") -> dict[str, Any]:
    return {"state": state, "progress": {"phase": phase, "done": done, "total": total, "unit": "notes",
                                         "message": message, "cancellable": cancellable}}


@pytest.mark.parametrize(("job", "said"), [
    (running("reading", 0, None, "Reading Garden"), "Reading Garden"),
    (running("checking", 40, None, "People/Bruno.md"), "Checking for credentials: 40 notes checked: People/Bruno.md"),
    (running("writing", 12, 412, "Tram clock.md"), "Writing: 12/412 notes: Tram clock.md"),
    (running("linking", 0, 412), "Linking: 0/412 notes linked"),
    (running("indexing", 412, 412, cancellable=False),
     "Indexing for search: 412 notes written; this last step cannot be cancelled"),
    (running("indexing", 0, None, cancellable=False), "Indexing for search; this last step cannot be cancelled"),
    (running("", 2, 3, "Kayak"), "2/3 notes: Kayak"),  # an engine whose jobs name no phase
    (running("writing", 2, 3, state="cancelling"), "Cancelling… (it stops after the item it is on)"),
])
def test_the_status_line_names_the_phase_with_the_jobs_own_counts(job: dict[str, Any], said: str) -> None:
    assert job_progress_text(job) == said


def test_cancel_is_offered_only_while_the_job_runs_and_says_it_can_stop() -> None:
    assert can_cancel(running("linking", 1, 3))
    assert not can_cancel(running("indexing", 3, 3, cancellable=False))
    assert not can_cancel(running("linking", 1, 3, state="cancelling"))
    assert can_cancel({"state": "running", "progress": {"done": 1, "total": 3}})  # an engine that does not say


def test_a_link_written_twice_in_a_note_is_listed_once_with_how_often() -> None:
    from desktop.transfer.dialogs import import_summary_html

    html = import_summary_html({"agent": "main", "format": "markdown", "folder": "/v/en", "dryRun": False,
                                "imported": {"pages": 1}, "pages": {"Bases/Create a base.md": "pg_x"},
                                "unresolved": {"Bases/Create a base.md": ["[[File.base]]", "[[Link]]", "[[File.base]]"]}})
    assert "[[File.base]] (2×), [[Link]]</li>" in html


def test_a_markdown_link_left_as_text_is_listed_as_the_note_writes_it() -> None:
    """The summary listed ``[2.3.1 电平与边沿](2.3.1%20电平与边沿.md)`` as ``[[2.3.1%20电平与边沿.md]]``: in wiki
    brackets the note does not use, and with the address's ``%20`` where the owner reads the label."""
    from desktop.transfer.dialogs import import_summary_html

    written = "[2.3.1 电平与边沿](2.3.1%20电平与边沿.md)"
    html = import_summary_html({"agent": "main", "format": "markdown", "folder": "/v/IT", "dryRun": False,
                                "imported": {"pages": 1}, "pages": {"01 Arduino/2.4 中断.md": "pg_x"},
                                "unresolved": {"01 Arduino/2.4 中断.md": [written, "![](../photo/gone.png)"]}})
    assert f"2.4 中断.md</a>: {escape(written)}, ![](../photo/gone.png)</li>" in html and "[[" not in html


def test_a_large_vaults_counts_read_with_thousands_apart_as_its_progress_does() -> None:
    """The summary of a 1,875-note vault read "1875 sources, 1875 pages, 5412 relationships" under a progress
    line that said "1,875 notes"."""
    from desktop.transfer.dialogs import import_summary_html

    html = import_summary_html({"agent": "main", "format": "markdown", "folder": "/v/owner9-vault", "dryRun": False,
                                "imported": {"sources": 1875, "pages": 1875, "relationships": 5412},
                                "reused": {"sources": 0, "pages": 0, "relationships": 0}, "pages": {}})
    assert "store: 1,875 sources, 1,875 pages, 5,412 relationships." in html
