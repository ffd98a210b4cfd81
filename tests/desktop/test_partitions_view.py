"""The partitions view: every partition of a store as figures, never a conversation's records; grants, checked."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest
from PySide6.QtCore import Qt

from desktop.main_window import MainWindow
from desktop.client import OperatorClient
from desktop.partitions.view import PARTITION_COLUMNS, PartitionsView
from desktop.tasks import EngineTasks
from engine.service import Engine
from tests.desktop.conftest import wait_for_signal
from tests.helpers import conversation, page

SESSION = str(uuid.uuid4())


def off_the_gui_thread(work: Any) -> None:
    """An agent's write, done as another process would: not on the window's thread."""
    worker = threading.Thread(target=work, name="test-agent")
    worker.start()
    worker.join(60)


@pytest.fixture
def token(served_engine: Engine) -> str:
    return served_engine.registry.add_credential("main")


@pytest.fixture
def conversing(served_engine: Engine, token: str) -> str:
    """A conversation of the demo agent with two records in its own partition; its session key is returned."""
    for number in range(2):
        served_engine.save_page(conversation(token, SESSION, "chat:owner"),
                                page(f"conv-{number}", f"Private chat note {number}"))
    return "chat:owner"


@pytest.fixture
def view(qtbot, tasks, served_engine, conversing) -> PartitionsView:
    made = PartitionsView(tasks)
    qtbot.addWidget(made)
    made.set_inventory({"agents": served_engine.agents(), "stores": served_engine.stores()})
    wait_for_signal(qtbot, made.sig_content_loaded, lambda: made.set_agent("main"))
    return made


def conversation_row(view: PartitionsView) -> int:
    return next(n for n, row in enumerate(view.partitions_model.rows()) if row.get("sessionId") == SESSION)


def test_the_store_of_the_agent_shows_its_private_and_conversation_partitions_as_figures(
        qtbot, view, gui_thread_guard, qtmodeltester) -> None:
    rows = view.partitions_model.rows()
    private, chat = rows[0], rows[conversation_row(view)]
    assert private["kind"] == "private" and private["records"] > 0
    assert (chat["agent"], chat["records"], chat["publications"], chat["grant"]) == ("main", 2, 2, None)
    shown = [view.partitions_model.index(r, c).data() for r in range(len(rows)) for c in range(len(PARTITION_COLUMNS))]
    assert "kept as a hash" in shown and "none" in shown
    assert "Private chat note" not in json.dumps(view.answer)  # figures only: no title, no record of a conversation
    assert not view.grant_row_button.isEnabled()
    qtmodeltester.check(view.partitions_model)


def test_the_private_partition_counts_the_notes_and_claims_the_sidebar_counts_and_the_links_apart(
        qtbot, view, served) -> None:
    totals: dict[str, int] = {}

    def ask() -> None:  # what Records lists (and the sidebar counts), and the links it hides, asked directly
        client = OperatorClient(served)
        for name, kinds in (("notes", ["page", "claim"]), ("links", ["relationship"])):
            totals[name] = client.call("operator/records", {"agent": "main", "kinds": kinds, "limit": 1})["total"]
        client.close()

    off_the_gui_thread(ask)
    assert totals["notes"] > 0 and totals["links"] > 0
    titles = [column.title for column in PARTITION_COLUMNS]
    notes, links = titles.index("Notes and claims"), titles.index("Links")
    private = view.partitions_model.index(0, notes)
    assert private.data() == f"{totals['notes']:,}"
    assert view.partitions_model.index(0, links).data() == f"{totals['links']:,}"
    assert private.data(Qt.ItemDataRole.ToolTipRole) == (
        f"{totals['notes'] + totals['links']:,} current records: {totals['notes']:,} notes and claims and "
        f"{totals['links']:,} links between them")


def test_a_conversation_is_granted_from_its_row_with_the_engine_checking_the_key_then_revoked(
        qtbot, view, conversing, served_engine, gui_thread_guard) -> None:
    view.partitions_table.selectRow(conversation_row(view))
    assert view.grant_row_button.isEnabled()
    view.grant_row_button.click()
    dialog = view.dialog
    assert dialog is not None and not dialog.agent.isEnabled() and dialog.session_id == SESSION

    dialog.session_key.setText("chat:somebody-else")
    qtbot.waitUntil(lambda: dialog.isVisible(), timeout=5_000)
    dialog.buttons.accepted.emit()
    qtbot.waitUntil(lambda: dialog.problem.isVisibleTo(dialog), timeout=10_000)
    assert "not the session key" in dialog.problem.text() and dialog.isVisible()

    dialog.session_key.setText(conversing)
    dialog.access.setCurrentIndex(1)  # read-and-save
    with qtbot.waitSignal(view.sig_content_loaded, timeout=10_000):
        with qtbot.waitSignal(view.sig_status_reported, timeout=10_000):
            dialog.buttons.accepted.emit()
    chat = view.partitions_model.row(conversation_row(view))
    assert chat["grant"]["access"] == "read-and-save" and chat["sessionKey"] == conversing
    assert [g["sessionKey"] for g in view.grants_model.rows()] == [conversing]

    view.grants_table.selectRow(0)
    with qtbot.waitSignal(view.sig_content_loaded, timeout=10_000):
        view.revoke_button.click()
    assert view.grants_model.rowCount() == 0 and view.partitions_model.row(conversation_row(view))["grant"] is None
    said = view.grants_table.shown_empty_text()  # what to do, in one sentence that ends once
    assert said.startswith("No grants.") and "Grant this conversation" in said and not said.endswith("….")
    gui_thread_guard.active = False
    assert served_engine.registry.grants("main") == []


def test_a_grant_added_by_key_is_refused_in_words_when_the_engine_refuses_it(qtbot, view, gui_thread_guard) -> None:
    view.add_button.click()
    dialog = view.dialog
    dialog.session_key.setText("two\nlines")
    dialog.buttons.accepted.emit()
    qtbot.waitUntil(lambda: dialog.problem.isVisibleTo(dialog), timeout=10_000)
    assert "sessionKey" in dialog.problem.text() and view.grants_model.rowCount() == 0


def test_the_window_updates_the_partitions_view_when_an_agent_opens_a_new_conversation(
        qtbot, served, served_engine, token, conversing) -> None:
    tasks = EngineTasks()
    window = MainWindow(tasks, served)
    qtbot.addWidget(window)
    try:
        with qtbot.waitSignal(window.watch.sig_engine_found, timeout=10_000):
            with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
                window.connect_engine()
        partitions = window.partitions_view
        with qtbot.waitSignal(partitions.sig_content_loaded, timeout=10_000):
            window.show_view(window.views.index(partitions))
        before = partitions.partitions_model.rowCount()
        other = str(uuid.uuid4())

        off_the_gui_thread(lambda: served_engine.save_page(
            conversation(token, other, "chat:new"), page("new-chat", "Fresh chat")))

        qtbot.waitUntil(lambda: partitions.partitions_model.rowCount() == before + 1, timeout=10_000)
        assert other in [row.get("sessionId") for row in partitions.partitions_model.rows()]
    finally:
        window.close()
        tasks.shutdown()
