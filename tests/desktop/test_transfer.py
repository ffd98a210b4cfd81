"""Import… and Export… in the window, against a real served engine: the jobs, their progress, cancel, the summaries."""

from __future__ import annotations

import json
import re
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import QApplication, QLabel

from desktop.main_window import MainWindow
from desktop.tasks import EngineTasks
from desktop.transfer.dialogs import ExportDialog, ImportDialog
from engine.access.authority import OperatorCaller
from engine.service import Engine
from tests.desktop.conftest import wait_for_signal
from tests.engine.importers.test_chatgpt import export, not_imported_alone
from tests.engine.importers.helpers import write_vault
from tests.engine.store.test_secrets import SECRET
from tests.helpers import private_dir

WAIT_MS = 20_000


def three_conversations() -> list[dict[str, Any]]:
    conversations = export()
    third = json.loads(json.dumps(conversations[1]).replace("000000000002", "000000000003"))
    third["title"] = "Kayak rack, again"
    return [*conversations, third]


@pytest.fixture
def export_file(tmp_path: Path) -> Path:
    path = tmp_path / "chatgpt" / "conversations.json"
    path.parent.mkdir()
    path.write_text(json.dumps(three_conversations()), encoding="utf-8")
    return path


def titles(engine: Engine, query: str, guard: Any) -> set[str]:
    """What the engine finds (the test's own look, on this thread, so the guard looks away)."""
    guard.active = False
    try:
        return {hit["title"] for hit in engine.search(OperatorCaller("main"), {"query": query})["hits"]}
    finally:
        guard.active = True


def finish(qtbot: Any, dialog: ImportDialog) -> dict[str, Any]:
    with qtbot.waitSignal(dialog.sig_import_finished, timeout=WAIT_MS) as blocker:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    return blocker.args[0]


def folder_imported(qtbot: Any, tasks: Any, notes: Path) -> tuple[ImportDialog, dict[str, Any]]:
    """The import dialog, its format Markdown and its folder ``notes``, and the job it ran."""
    dialog = ImportDialog(tasks, ["main"], "main")
    qtbot.addWidget(dialog)
    dialog.set_format("markdown")
    dialog.path.setText(str(notes))
    return dialog, finish(qtbot, dialog)


def test_a_dry_run_then_the_import_with_their_summaries(qtbot, tasks, served_engine, export_file,
                                                         gui_thread_guard) -> None:
    dialog = ImportDialog(tasks, ["main"], "main")
    qtbot.addWidget(dialog)
    dialog.set_format("chatgpt")
    dialog.path.setText(str(export_file))
    dialog.dry_run.setChecked(True)
    assert dialog.start_button.text() == "&Check"

    job = finish(qtbot, dialog)

    assert job["state"] == "done" and job["result"]["dryRun"] is True
    assert dialog.summary.toPlainText() == ("Dry run of the chatgpt import: it would create 2 sources, 3 pages; "
                                            "nothing was written.\n" + not_imported_alone("file-1"))  # its image
    assert titles(served_engine, "tram clock", gui_thread_guard) == set()

    dialog.dry_run.setChecked(False)
    job = finish(qtbot, dialog)

    assert job["state"] == "done", job
    assert dialog.summary.toPlainText().startswith("Imported chatgpt into main's store: 2 sources, 3 pages")
    assert dialog.progress.value() == dialog.progress.maximum() and dialog.status.text() == "Finished."
    assert "Repairing a tram clock" in titles(served_engine, "tram clock", gui_thread_guard)
    assert dialog.start_button.isEnabled() and not dialog.cancel_button.isEnabled()

    dialog.dry_run.setChecked(True)  # the same export checked again: all of it made already
    job = finish(qtbot, dialog)
    assert job["result"]["reused"] == {"sources": 2, "pages": 3, "claims": 0, "relationships": 0}
    assert dialog.summary.toPlainText() == (
        "Dry run of the chatgpt import: nothing new: all 2 sources and 3 pages of the input were already made by "
        "an earlier run of this input; nothing was written.\n" + not_imported_alone("file-1"))


def test_the_unzipped_export_folder_is_imported_as_its_placeholder_says(qtbot, tasks, served_engine, export_file,
                                                                      gui_thread_guard) -> None:
    dialog = ImportDialog(tasks, ["main"], "main")
    qtbot.addWidget(dialog)
    dialog.set_format("claude")
    dialog.set_format("chatgpt")
    assert "unzipped folder" in dialog.path.placeholderText()
    dialog.path.setText(str(export_file.parent))  # the folder the owner unzipped the export into

    job = finish(qtbot, dialog)

    assert job["state"] == "done", job
    assert dialog.summary.toPlainText().startswith("Imported chatgpt into main's store: 2 sources, 3 pages")


def test_progress_comes_from_the_job_and_cancel_stops_it_between_items_then_it_is_finished(
        qtbot, tasks, served_engine, export_file, monkeypatch, gui_thread_guard) -> None:
    release = threading.Event()
    real = served_engine.save_page

    def save_page(caller: Any, params: dict[str, Any]) -> dict[str, Any]:
        # The first conversation is written; the others wait until the test lets them go, whichever order the
        # import's threads send them in (engine/importers/bulk.py writes them side by side).
        if params["title"] != "Repairing a tram clock":
            assert release.wait(WAIT_MS / 1000)
        return real(caller, params)

    monkeypatch.setattr(served_engine, "save_page", save_page)
    dialog = ImportDialog(tasks, ["main"], "main")
    qtbot.addWidget(dialog)
    dialog.path.setText(str(export_file))
    qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    assert not dialog.start_button.isEnabled() and not dialog.path.isEnabled()

    qtbot.waitUntil(lambda: dialog.status.text() == "Writing: 1/3 conversations: Repairing a tram clock",
                    timeout=WAIT_MS)
    assert (dialog.progress.minimum(), dialog.progress.maximum(), dialog.progress.value()) == (0, 1000, 333)
    assert dialog.cancel_button.isEnabled()
    with qtbot.waitSignal(dialog.watcher.sig_job_updated, timeout=WAIT_MS,
                          check_params_cb=lambda job: job["state"] == "cancelling"):
        qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    assert dialog.status.text().startswith("Cancelling")
    with qtbot.waitSignal(dialog.sig_import_finished, timeout=WAIT_MS) as blocker:
        release.set()

    assert blocker.args[0]["state"] == "cancelled"
    # Items already being written when the owner cancelled finish (the third conversation may be written beside
    # the second) and are counted; nothing half written.
    kayak = titles(served_engine, "Kayak", gui_thread_guard)
    assert kayak <= {"Untitled conversation", "Kayak rack, again"}
    assert dialog.status.text().startswith(f"Cancelled: Writing: {1 + len(kayak)}/3 conversations") \
        and "import the same input again" in dialog.status.text()
    assert dialog.summary.toPlainText() == "" and dialog.start_button.isEnabled()

    job = finish(qtbot, dialog)
    assert job["state"] == "done" and job["result"]["imported"]["pages"] == 3
    assert titles(served_engine, "Kayak", gui_thread_guard) == {"Untitled conversation", "Kayak rack, again"}


def test_a_bad_input_is_refused_with_the_file_and_place_and_nothing_is_written(
        qtbot, tasks, served_engine, tmp_path, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    notes = tmp_path / "notes"
    (notes / "People").mkdir(parents=True)
    (notes / "People" / "Bruno.md").write_text(f"---\ntags: [chess]\n---\nBruno plays chess, key {SECRET}.\n",
                                               encoding="utf-8")
    gui_thread_guard.active = True
    dialog = ImportDialog(tasks, ["main"], "main")
    qtbot.addWidget(dialog)
    dialog.set_format("markdown")
    assert dialog.path_label.text() == "&Folder"
    dialog.path.setText(str(notes))

    job = finish(qtbot, dialog)

    assert job["state"] == "failed" and job["error"]["file"] == "People/Bruno.md"
    status = dialog.status.text()
    assert status.startswith("Not imported: People/Bruno.md: line 4 holds what looks like ") and SECRET not in status
    assert titles(served_engine, "chess", gui_thread_guard) == set()


def test_a_vault_with_a_note_whose_frontmatter_is_not_yaml_is_imported_and_the_summary_lists_it(
        qtbot, tasks, served_engine, tmp_path, gui_thread_guard) -> None:
    """One note of a vault of years whose frontmatter has a colon inside a value refused the whole import
    (1,875 notes for 46 such); the vault is imported, the summary naming the note, why, and its page."""
    gui_thread_guard.active = False
    notes = tmp_path / "notes"
    (notes / "00-home").mkdir(parents=True)
    (notes / "00-home" / "tucrmia.md").write_text(
        "---\ntitle: TuCRMIA\nupdated: 2026-08-17 iteraciones 33-35: Storage\n---\nCRM conversacional.\n",
        encoding="utf-8")
    (notes / "Bienvenido.md").write_text("Empieza por [[tucrmia]], no por [[nadie]].\n", encoding="utf-8")
    gui_thread_guard.active = True

    dialog, job = folder_imported(qtbot, tasks, notes)

    assert job["state"] == "done", job
    page = job["result"]["pages"]["00-home/tucrmia.md"]
    text = dialog.summary.toPlainText()
    assert "1 note has frontmatter that could not be read" in text
    assert "Frontmatter not read:" in text
    assert "00-home/tucrmia.md: line 3 is not valid YAML: mapping values are not allowed here" in text
    assert f'href="show:main/record/{page}"' in dialog.summary.toHtml()
    assert text.index("Frontmatter not read:") < text.index("Left out:")  # not below 132 links left as text
    assert titles(served_engine, "conversacional", gui_thread_guard) == {"tucrmia"}


def test_a_note_whose_tags_are_not_names_is_imported_and_the_summary_lists_it(
        qtbot, tasks, served_engine, tmp_path, gui_thread_guard) -> None:
    """Tags written as a mapping refused the whole import; the note is imported without them, and the summary
    names it, why, and its page, as it does a note whose frontmatter is not YAML."""
    gui_thread_guard.active = False
    notes = write_vault(tmp_path / "notes", {"Bruno.md": "---\ntags: {chess: 1}\n---\nBruno plays chess."})
    gui_thread_guard.active = True

    dialog, job = folder_imported(qtbot, tasks, notes)

    assert job["state"] == "done", job
    text = dialog.summary.toPlainText()
    assert "Fields not read:" in text and "Bruno.md: frontmatter tags must be a string or a list of strings" in text
    assert "Frontmatter not read:" not in text
    assert f'href="show:main/record/{job["result"]["pages"]["Bruno.md"]}"' in dialog.summary.toHtml()
    assert titles(served_engine, "chess", gui_thread_guard) == {"Bruno"}


def test_a_note_whose_page_was_edited_since_is_kept_and_named_unless_edits_are_replaced(
        qtbot, tasks, served_engine, tmp_path, gui_thread_guard) -> None:
    """Importing a vault again wrote a changed note's text over the owner's edit of its page (ninth owner's
    pass); the edit is kept and the summary names the note, why, and its page, until the owner replaces edits."""
    gui_thread_guard.active = False
    notes = write_vault(tmp_path / "notes", {"Inbox.md": "Call the tram museum."})
    gui_thread_guard.active = True
    dialog, job = folder_imported(qtbot, tasks, notes)
    page_id = job["result"]["pages"]["Inbox.md"]
    gui_thread_guard.active = False
    [page] = [path for path in (private_dir(served_engine.state) / "pages").rglob("*.md")
              if f"id: {page_id}\n" in path.read_text(encoding="utf-8")]
    page.write_bytes(page.read_bytes() + b"Ask for the Sunday hours.\n")  # the owner's edit, in the store's vault
    edited = page.read_bytes()
    (notes / "Inbox.md").write_text("Call the tram museum on Monday.\n", encoding="utf-8")
    gui_thread_guard.active = True

    assert dialog.replace_edits.isVisibleTo(dialog) and dialog.params()["replaceEdits"] is False
    job = finish(qtbot, dialog)

    assert job["state"] == "done" and job["result"]["revised"] == 0, job
    text = dialog.summary.toPlainText()
    assert "Kept your edits: 1 note changed since an earlier import" in text
    assert "Inbox.md: edited outside the engine since the import wrote revision 1" in text
    assert f'href="show:main/record/{page_id}"' in dialog.summary.toHtml()
    gui_thread_guard.active = False
    assert page.read_bytes() == edited
    gui_thread_guard.active = True

    dialog.replace_edits.setChecked(True)
    assert dialog.params()["replaceEdits"] is True
    job = finish(qtbot, dialog)

    assert job["state"] == "done" and job["result"]["revised"] == 1 and "keptEdits" not in job["result"], job
    assert "Kept your edits" not in dialog.summary.toPlainText()
    assert "1 note changed since an earlier import: it got a new revision of its page." in dialog.summary.toPlainText()
    dialog.set_format("chatgpt")  # no edits to keep: the option is neither shown nor sent
    assert not dialog.replace_edits.isVisibleTo(dialog) and "replaceEdits" not in dialog.params()


def test_a_memory_file_whose_page_was_edited_since_is_kept_and_named_unless_edits_are_replaced(
        qtbot, tasks, served_engine, tmp_path, gui_thread_guard) -> None:
    """An agent workspace imported again wrote a changed MEMORY.md over the page the owner had corrected; the edit
    is kept, and the summary names the file, why, and its page, until the owner replaces edits."""
    gui_thread_guard.active = False
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "MEMORY.md").write_text("# Dana\n- Dana's sister Lotte lives in Ghent.\n", encoding="utf-8")
    gui_thread_guard.active = True
    dialog = ImportDialog(tasks, ["main"], "main")
    qtbot.addWidget(dialog)
    dialog.set_format("memory-core")
    dialog.path.setText(str(workspace))
    assert dialog.replace_edits.isVisibleTo(dialog) and dialog.params()["replaceEdits"] is False
    page_id = finish(qtbot, dialog)["result"]["pages"]["MEMORY.md"]
    gui_thread_guard.active = False
    [page] = [path for path in (private_dir(served_engine.state) / "pages").rglob("*.md")
              if f"id: {page_id}\n" in path.read_text(encoding="utf-8")]
    page.write_bytes(page.read_bytes() + b"She moved to Antwerp.\n")  # the owner's correction, in the store's vault
    edited = page.read_bytes()
    (workspace / "MEMORY.md").write_text("# Dana\n- Dana's sister Lotte lives in Ghent.\n- Bruno builds racks.\n",
                                         encoding="utf-8")
    gui_thread_guard.active = True

    job = finish(qtbot, dialog)

    assert job["state"] == "done" and job["result"]["revised"] == 0, job
    text = dialog.summary.toPlainText()
    assert "Kept your edits: these memory files (or list items) changed since an earlier import" in text
    assert "MEMORY.md: edited outside the engine since the import wrote revision 1" in text
    assert f'href="show:main/record/{page_id}"' in dialog.summary.toHtml()
    gui_thread_guard.active = False
    assert page.read_bytes() == edited
    gui_thread_guard.active = True

    dialog.replace_edits.setChecked(True)
    job = finish(qtbot, dialog)

    assert job["state"] == "done" and job["result"]["revised"] == 1 and "keptEdits" not in job["result"], job
    assert "1 file changed since an earlier import: it got a new revision of its page." in dialog.summary.toPlainText()


def test_every_note_holding_a_credential_is_named_when_the_import_is_refused(
        qtbot, tasks, served_engine, tmp_path, gui_thread_guard) -> None:
    """Two notes of a 1,875-note vault held what looks like a key; the dialog named the first only, and the
    owner met the second on the next try."""
    gui_thread_guard.active = False
    notes = tmp_path / "notes"
    (notes / "Stack").mkdir(parents=True)
    (notes / "keys.md").write_text(f"# Keys\n\nid {SECRET}\n", encoding="utf-8")
    (notes / "Stack" / "deploy.md").write_text(f"# Deploy\n\nthen {SECRET}\n", encoding="utf-8")
    gui_thread_guard.active = True

    dialog, job = folder_imported(qtbot, tasks, notes)

    assert job["state"] == "failed" and job["error"]["file"] == "Stack/deploy.md"
    status = dialog.status.text()
    assert status.startswith("Not imported: Stack/deploy.md: line 3 holds what looks like ") and SECRET not in status
    assert status.endswith("1 other note holds what looks like a credential too: keys.md (line 3)")


def test_a_relative_or_empty_path_is_not_sent_as_it_is(qtbot, tasks, monkeypatch) -> None:
    dialog = ImportDialog(tasks, ["main"], "main")
    qtbot.addWidget(dialog)
    assert not dialog.start_button.isEnabled()  # nothing chosen yet
    monkeypatch.chdir(Path("/"))
    dialog.path.setText("srv/export.zip")
    assert dialog.params()["path"] == "/srv/export.zip" and dialog.start_button.isEnabled()


def test_export_writes_the_chosen_store_and_a_second_one_to_the_same_file_is_refused(
        qtbot, tasks, served_engine, tmp_path, gui_thread_guard) -> None:
    stores = served_engine.resolver.inventory()
    main_store = served_engine.resolver.effective("main", create=False).store_id
    dialog = ExportDialog(tasks, stores, main_store)
    qtbot.addWidget(dialog)
    assert dialog.store.currentData() == main_store and dialog.store.currentText() == "main's own store"
    assert not dialog.start_button.isEnabled()
    out = tmp_path / "main.zip"
    dialog.out.setText(str(out))
    dialog.with_history.setChecked(True)

    with qtbot.waitSignal(dialog.sig_export_finished, timeout=WAIT_MS) as blocker:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)

    job = blocker.args[0]
    assert job["kind"] == "export" and job["state"] == "done", job
    assert dialog.summary.toPlainText().startswith(f"Exported store {main_store} to {out}: ")
    assert "vault files" in dialog.summary.toPlainText() and "History: " in dialog.summary.toPlainText()
    gui_thread_guard.active = False
    assert out.is_file()
    gui_thread_guard.active = True

    with qtbot.waitSignal(dialog.sig_export_finished, timeout=WAIT_MS) as blocker:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0]["state"] == "failed"
    assert dialog.status.text().startswith("Not exported: ") and "already exists" in dialog.status.text()


def test_the_window_opens_both_from_the_file_menu_and_its_shortcuts(qtbot, served, gui_thread_guard) -> None:
    tasks = EngineTasks()
    window = MainWindow(tasks, served)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    try:
        with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=WAIT_MS):
            window.connect_engine()
        file_menu = [a.text() for a in window.menus.menu("File").actions() if not a.isSeparator()]
        assert file_menu[:2] == ["&Import…", "&Export…"]

        qtbot.keyClick(window, Qt.Key.Key_I, Qt.KeyboardModifier.ControlModifier)
        assert window.import_dialog is not None and window.import_dialog.isVisible()
        assert window.import_dialog.agent.currentText() == "main"
        window.import_dialog.reject()

        window.export_action.trigger()
        qtbot.waitUntil(lambda: window.export_dialog is not None and window.export_dialog.isVisible())
        store = window._agent_entry()["store"]["storeId"]
        assert window.export_dialog.store.currentData() == store
        window.export_dialog.reject()
    finally:
        tasks.shutdown()


def test_a_reopened_dialog_follows_the_import_still_running(qtbot, tasks, served_engine, export_file, monkeypatch,
                                                            gui_thread_guard) -> None:
    release = threading.Event()
    real = served_engine.save_page

    def save_page(caller: Any, params: dict[str, Any]) -> dict[str, Any]:
        assert release.wait(WAIT_MS / 1000)
        return real(caller, params)

    monkeypatch.setattr(served_engine, "save_page", save_page)
    first = ImportDialog(tasks, ["main"], "main")
    qtbot.addWidget(first)
    first.path.setText(str(export_file))
    with qtbot.waitSignal(first.watcher.sig_job_updated, timeout=WAIT_MS):
        qtbot.mouseClick(first.start_button, Qt.MouseButton.LeftButton)
    first.reject()  # closed: the import goes on in the engine

    again = ImportDialog(tasks, ["main"], "main")
    qtbot.addWidget(again)
    qtbot.waitUntil(lambda: again.watcher.running, timeout=WAIT_MS)
    assert again.summary.toPlainText().startswith("Still running in the engine: Import chatgpt conversations.json")
    assert not again.start_button.isEnabled() and again.cancel_button.isEnabled()
    with qtbot.waitSignal(again.sig_import_finished, timeout=WAIT_MS) as blocker:
        release.set()
    assert blocker.args[0]["state"] == "done"
    assert again.summary.toPlainText().startswith("Imported chatgpt into main's store: 2 sources, 3 pages")


def test_a_first_days_imports_say_what_was_left_out_and_link_to_what_they_made(qtbot, connected_window,
                                                                               export_file, tmp_path) -> None:
    """An owner's first day on the demo store: an OpenClaw workspace, then a ChatGPT export, through File ›
    Import….  The workspace's AGENTS.md (not memory) is said to be left out as such, never listed as a symbolic
    link; the link under the ChatGPT import's summary browses the conversations it made, not every page of the
    store (the demo's people, project and company)."""
    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("# What I know\n\n- Dana's sister Lotte lives in Ghent.\n", encoding="utf-8")
    (workspace / "AGENTS.md").write_text("# Agents\n\nBe helpful.\n", encoding="utf-8")
    window = connected_window
    window.import_action.trigger()
    dialog = window.import_dialog
    dialog.set_format("memory-core")
    dialog.path.setText(str(workspace))
    assert finish(qtbot, dialog)["state"] == "done"
    text = dialog.summary.toPlainText()
    assert "that is not its memory: AGENTS.md" in text and "symbolic" not in text, text
    assert "show:main/browse/page/note" in dialog.summary.toHtml()

    dialog.set_format("chatgpt")
    dialog.path.setText(str(export_file))
    assert finish(qtbot, dialog)["state"] == "done"
    assert "Show the conversations in main's store" in dialog.summary.toPlainText()
    dialog.summary.anchorClicked.emit(QUrl("show:main/browse/page/source"))  # as a click on it does
    records = window.records_view
    assert window.current_view() is records and records.modes.currentIndex() == 1  # Browse by type
    qtbot.waitUntil(lambda: records.browse_model.rowCount() == 3, timeout=WAIT_MS)
    assert {row["type"] for row in records.browse_model.rows()} == {"source"}
    assert "Repairing a tram clock" in {row["title"] for row in records.browse_model.rows()}

    # A conversation's page: its address is a link, under "URL" (it read "Url", as plain text).
    tram = next(row["id"] for row in records.browse_model.rows() if row["title"] == "Repairing a tram clock")
    wait_for_signal(qtbot, records.page.sig_content_loaded, lambda: records.open_record(tram))
    details = records.page.details
    assert "URL" in details.toPlainText().split() and "Url" not in details.toPlainText().split()
    assert 'href="https://chatgpt.com/c/6790a1b2-0000-4000-8000-000000000001"' in details.toHtml()


def test_a_followed_summary_link_sets_the_dialog_aside_and_file_import_shows_it_again(
        qtbot, connected_window, tmp_path) -> None:
    """Following a link of the import's summary shows Records with the dialog set aside (it stayed in front of
    the window, hiding what the owner asked for); File › Import… shows it again, its other links with it."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "Alpha.md").write_text("# Alpha\n\nSee [[Nowhere]].\n", encoding="utf-8")
    (notes / "Beta.md").write_text("# Beta\n\nSee [[Elsewhere]].\n", encoding="utf-8")
    window = connected_window
    window.show_view(window.views.index(window.partitions_view))  # imported from another view than Records
    window.import_action.trigger()
    dialog = window.import_dialog
    dialog.set_format("markdown")
    dialog.path.setText(str(notes))
    job = finish(qtbot, dialog)
    assert job["state"] == "done"
    pages = job["result"]["pages"]
    assert f"show:main/record/{pages['Beta.md']}" in dialog.summary.toHtml()
    records = window.records_view

    wait_for_signal(qtbot, records.page.sig_content_loaded, lambda: dialog.summary.anchorClicked.emit(
        QUrl(f"show:main/record/{pages['Alpha.md']}")))  # as a click on Alpha.md does
    assert window.current_view() is records and records.page.record["id"] == pages["Alpha.md"]
    assert not dialog.isVisible() and window.messages.isVisible()
    assert "File › Import… (Ctrl+I) shows it again" in window.messages.message

    window.import_action.trigger()
    assert window.import_dialog is dialog and dialog.isVisible()  # the same dialog, as it was left
    assert f"show:main/record/{pages['Beta.md']}" in dialog.summary.toHtml()
    assert not window.messages.isVisible()
    wait_for_signal(qtbot, records.page.sig_content_loaded, lambda: dialog.summary.anchorClicked.emit(
        QUrl(f"show:main/record/{pages['Beta.md']}")))
    assert records.page.record["id"] == pages["Beta.md"] and not dialog.isVisible()

    window.import_action.trigger()
    dialog.reject()  # closed: the next Import… is a new dialog
    window.import_action.trigger()
    assert window.import_dialog is not dialog and window.import_dialog.summary.toPlainText() == ""


def test_a_conversations_times_read_in_local_time_while_its_file_keeps_utc(qtbot, connected_window, export_file,
                                                                          served_engine, gui_thread_guard) -> None:
    """An imported conversation's page says when it started and when each message was written in the owner's
    zone (here two hours east of UTC), as the rest of the window does; it read the stored UTC text."""
    window = connected_window
    window.import_action.trigger()
    dialog = window.import_dialog
    dialog.set_format("chatgpt")
    dialog.path.setText(str(export_file))
    assert finish(qtbot, dialog)["state"] == "done"
    dialog.close()
    records = window.records_view
    records.page.now = lambda: datetime(2026, 6, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    dialog.summary.anchorClicked.emit(QUrl("show:main/browse/page/source"))
    qtbot.waitUntil(lambda: records.browse_model.rowCount() == 3, timeout=WAIT_MS)
    tram = next(row["id"] for row in records.browse_model.rows() if row["title"] == "Repairing a tram clock")
    wait_for_signal(qtbot, records.page.sig_content_loaded, lambda: records.open_record(tram))

    shown = records.page.body.toPlainText()
    assert "Started 2026-05-28 22:26, last updated 2026-05-28 23:26." in shown, shown
    assert "User (2026-05-28 22:26):" in shown and "Assistant (2026-05-28 22:27):" in shown, shown
    assert "T20:2" not in shown and "Z)" not in shown
    gui_thread_guard.active = False
    stored = served_engine.get_record(OperatorCaller("main"), tram)["body"]
    gui_thread_guard.active = True
    assert "Started 2026-05-28T20:26:40" in stored and "(2026-05-28T20:26:50Z):" in stored  # the file as it was


def test_a_conversations_search_hit_says_its_times_in_local_time(qtbot, connected_window, export_file, brussels,
                                                                  gui_thread_guard) -> None:
    """A search that finds an imported conversation shows its snippet's times in the owner's zone (Brussels, two
    hours east of UTC on 28 May), as its page does; the query's words stay marked, a year inside a time too."""
    window = connected_window
    window.import_action.trigger()
    dialog = window.import_dialog
    dialog.set_format("chatgpt")
    dialog.path.setText(str(export_file))
    assert finish(qtbot, dialog)["state"] == "done"
    dialog.close()
    records = window.records_view
    records.query.setText("tram clock 2026")
    with qtbot.waitSignal(records.search_model.sig_page_loaded, timeout=WAIT_MS):
        records.search()

    [row] = [n for n, hit in enumerate(records.search_model.rows()) if hit["title"] == "Repairing a tram clock"]
    column = [column.title for column in records.search_model.columns].index("Snippet")
    index = records.search_model.index(row, column)
    shown = index.data()
    assert "Started 2026-05-28 22:26, last updated 2026-05-28 23:26." in shown, shown
    assert "User (2026-05-28 22:26):" in shown and "Assistant (2026-05-28 22:27):" in shown
    assert "T20:2" not in shown and "Z)" not in shown
    delegate = records.search_table.itemDelegateForColumn(column)
    lines, bold = delegate.shown_text(index, 5000, records.search_table.font())
    assert " ".join(lines).startswith(shown[:80]) and "tram" in bold and "2026" in bold
    assert records.search_model.rows()[row]["snippet"].count("T20:2") >= 3  # the engine's text is UTC


def test_evidence_opens_its_original_at_the_lines_it_cites(qtbot, connected_window, tmp_path) -> None:
    """A conversation imported from ChatGPT cites its lines of a transcript file a hundred conversations share:
    its evidence opens that file at those lines, selected and in view (it opened at the file's first line,
    another conversation's), and says which lines they are."""
    from desktop.records.page import SourceDialog

    conversations = []
    for number in range(30):
        copied = json.loads(json.dumps(export()[0]).replace("000000000001", f"{number:012d}"))
        copied["title"] = f"Clock repair, visit {number}"
        conversations.append(copied)
    path = tmp_path / "long" / "conversations.json"
    path.parent.mkdir()
    path.write_text(json.dumps(conversations), encoding="utf-8")
    window = connected_window
    window.import_action.trigger()
    dialog = window.import_dialog
    dialog.set_format("chatgpt")
    dialog.path.setText(str(path))
    job = finish(qtbot, dialog)
    dialog.reject()
    page_id = job["result"]["pages"][f"6790a1b2-0000-4000-8000-{28:012d}"]
    records = window.records_view
    wait_for_signal(qtbot, records.page.sig_content_loaded, lambda: records.open_record(page_id))
    page = records.page
    transcript = next(e for e in page.links["evidence"] if e.get("lines"))
    first, last = transcript["lines"]
    assert first > 100  # far down the shared file
    href = next(link for link in re.findall(r'href="([^"]+)"', page.claims.toHtml()) if link.startswith("source:"))
    page.claims.sig_link_activated.emit(QUrl(href))  # as a click on the file's name does
    qtbot.waitUntil(lambda: isinstance(page.dialog, SourceDialog) and page.dialog.isVisible(), timeout=WAIT_MS)
    shown = page.dialog.text
    selected = shown.textCursor().selectedText().replace("\u2029", "\n")
    assert selected == "\n".join(shown.toPlainText().splitlines()[first - 1:last])
    assert "Clock repair, visit 28" in selected and "visit 27" not in selected
    qtbot.waitUntil(lambda: shown.firstVisibleBlock().blockNumber() > 0, timeout=WAIT_MS)
    assert shown.viewport().rect().contains(shown.cursorRect())  # the first cited line in view
    assert f"The record cites lines {first}-{last}, selected below." in page.dialog.findChildren(QLabel)[0].text()
    page.dialog.close()


def test_enter_closes_a_finished_import_and_starts_one_again_once_the_form_changes(
        qtbot, tasks, served_engine, export_file, gui_thread_guard) -> None:
    """Keyboard only: Enter in a finished import's dialog closes it (it ran the import again, the whole input
    read once more to find nothing new); edit the form and Enter starts the import it now describes."""
    dialog = ImportDialog(tasks, ["main"], "main")
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.activateWindow()
    qtbot.waitActive(dialog)
    dialog.set_format("chatgpt")
    dialog.path.setText(str(export_file))
    assert dialog.start_button.isDefault()
    assert finish(qtbot, dialog)["state"] == "done"
    close = dialog.close_buttons.button(dialog.close_buttons.StandardButton.Close)
    assert close.isDefault() and not dialog.start_button.isDefault()
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Return)
    assert not dialog.isVisible() and not dialog.watcher.running

    dialog.show()  # opened again, the form changed: Enter checks the input
    dialog.dry_run.setChecked(True)
    assert dialog.start_button.isDefault() and not close.isDefault()
