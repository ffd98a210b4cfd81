"""Every item model passes Qt's model tester, and the lazy model only ever holds the pages it fetched."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex, Qt

from desktop.agents.view import AgentsView
from desktop.approvals.view import ApprovalsView
from desktop.common.models import ROW_ROLE, Column, PagedModel, RowsModel
from desktop.health.view import HealthView
from desktop.records.view import RecordsView
from desktop.vocabulary.view import VocabularyView
from tests.desktop.conftest import wait_for_signal

COLUMNS = [Column("Name", lambda r: r["name"]), Column("Count", lambda r: r["n"], align_right=True)]


def synchronous_source(total: int, page: int = 100) -> Any:
    """A page source over ``total`` generated rows that answers at once, counting its requests."""
    calls: list[int] = []

    def source(offset: Any, deliver: Any, fail: Any) -> None:
        start = offset or 0
        calls.append(start)
        rows = [{"name": f"record {n}", "n": n} for n in range(start, min(start + page, total))]
        deliver(rows, start + page if start + page < total else None, total)

    source.calls = calls  # type: ignore[attr-defined]
    return source


def test_rows_model(qtmodeltester) -> None:
    model = RowsModel(COLUMNS)
    model.set_rows([{"name": "a", "n": 1}, {"name": "b", "n": 2_000}])
    qtmodeltester.check(model, force_py=True)
    assert model.data(model.index(1, 1)) == "2,000"
    assert model.data(model.index(0, 0), ROW_ROLE) == {"name": "a", "n": 1}
    assert model.headerData(0, Qt.Orientation.Horizontal) == "Name"


def test_paged_model_fetches_only_what_is_scrolled_to(qtmodeltester) -> None:
    source = synchronous_source(100_000)
    model = PagedModel(COLUMNS)
    model.set_source(source)

    assert model.rowCount() == 100 and model.total == 100_000 and model.canFetchMore(QModelIndex())
    model.fetchMore(QModelIndex())
    assert model.rowCount() == 200 and source.calls == [0, 100]
    qtmodeltester.check(model, force_py=True)
    assert model.rowCount() <= 1_000 and len(source.calls) <= 10  # a few pages, never the whole partition


def test_paged_model_ignores_pages_for_a_replaced_list(qtmodeltester) -> None:
    held: list[Any] = []
    model = PagedModel(COLUMNS)
    model.set_source(lambda offset, deliver, fail: held.append(deliver))
    model.set_source(synchronous_source(3))
    held[0]([{"name": "stale", "n": 0}], None, 1)

    assert [row["name"] for row in model.rows()] == ["record 0", "record 1", "record 2"]
    assert not model.canFetchMore(QModelIndex())
    qtmodeltester.check(model, force_py=True)


def test_paged_model_reports_failures(qtbot) -> None:
    model = PagedModel(COLUMNS)
    with qtbot.waitSignal(model.sig_load_failed) as failed:
        model.set_source(lambda offset, deliver, fail: fail("the engine is gone"))
    assert failed.args == ["the engine is gone"] and not model.canFetchMore(QModelIndex())


def test_the_views_models_over_engine_data(qtbot, qtmodeltester, tasks, gui_thread_guard) -> None:
    agents = AgentsView(tasks)
    records = RecordsView(tasks)
    vocabulary = VocabularyView(tasks)
    approvals = ApprovalsView(tasks)
    health = HealthView(tasks)
    for view in (agents, records, vocabulary, approvals, health):
        qtbot.addWidget(view)
    wait_for_signal(qtbot, agents.sig_inventory_changed, agents.refresh)
    with qtbot.waitSignals([records.recent_model.sig_page_loaded, vocabulary.sig_content_loaded,
                            approvals.sig_content_loaded, health.sig_content_loaded], timeout=10_000):
        for view in (records, vocabulary, approvals, health):
            view.set_agent("main")
    records.query.setText("Atlas")
    with qtbot.waitSignal(records.search_model.sig_page_loaded, timeout=10_000):
        records.search()
    qtbot.waitUntil(lambda: records.types_model.rowCount() > 0, timeout=10_000)
    with qtbot.waitSignal(records.browse_model.sig_page_loaded, timeout=10_000):
        records.browse_type("page", "person")
    first = records.recent_model.row(0)["id"]
    wait_for_signal(qtbot, records.page.sig_content_loaded, lambda: records.open_record(first))

    models = [agents.agents_model, agents.stores_model, records.recent_model, records.types_model,
              records.browse_model, records.search_model, records.page.history_model,
              vocabulary.definitions_model, vocabulary.findings_model, approvals.model, health.findings_model]
    for model in models:
        qtmodeltester.check(model, force_py=True)
    assert all(model.rowCount() > 0 for model in models[:8] + [approvals.model])
