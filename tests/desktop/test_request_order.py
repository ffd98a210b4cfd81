"""The order the window asks the engine in: the view in front first, the sidebar's counts in the background,
Health's diagnostics only once Health is shown (issue 30, "first records shown")."""

from __future__ import annotations

import threading
from typing import Any

from PySide6.QtCore import QCoreApplication

from desktop.main_window import MainWindow
from desktop.records.view import PAGE_SIZE
from desktop.tasks import EngineTasks

FIRST_PAGE = f"operator/records limit={PAGE_SIZE}"
COUNTS = {"operator/models", "operator/records limit=1", "operator/approvals", "operator/partitions"}


def recording(tasks: EngineTasks) -> list[str]:
    """The engine methods the worker runs, in the order it runs them (a records page named with its limit)."""
    ran: list[str] = []
    call = tasks._call

    def recorded(method: str, params: dict[str, Any]) -> Any:
        ran.append(f"{method} limit={params.get('limit')}" if method == "operator/records" else method)
        return call(method, params)

    tasks._call = recorded  # type: ignore[method-assign]
    return ran


def test_a_background_job_waits_for_the_others_even_on_an_idle_worker(qtbot) -> None:
    tasks = EngineTasks()
    order: list[str] = []
    try:
        # The worker is idle: the background job asked first still runs after the one asked by the same event.
        tasks.run(lambda: order.append("count"), lambda _: None, background=True)
        tasks.run(lambda: order.append("page"), lambda _: None)
        qtbot.waitUntil(lambda: len(order) == 2, timeout=10_000)
        assert order == ["page", "count"]

        # The worker is busy: what is asked meanwhile goes ahead of the background work already waiting.
        order.clear()
        gate = threading.Event()
        tasks.run(lambda: gate.wait(10), lambda _: None)
        tasks.run(lambda: order.append("count"), lambda _: None, background=True)
        QCoreApplication.processEvents()  # delivers the hand-over: the background job is queued behind the held one
        tasks.run(lambda: order.append("first page"), lambda _: None)
        tasks.run(lambda: order.append("second page"), lambda _: None)
        gate.set()
        qtbot.waitUntil(lambda: len(order) == 3, timeout=10_000)
        assert order == ["first page", "second page", "count"]
        qtbot.waitUntil(lambda: not tasks.busy, timeout=10_000)
    finally:
        tasks.shutdown()


def test_the_first_records_page_goes_before_the_counts_and_health_waits_for_its_view(
        qtbot, served, window_settings) -> None:
    tasks = EngineTasks()
    ran = recording(tasks)
    window = MainWindow(tasks, served, settings=window_settings)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    records = window.views.index(window.records_view)
    # Records comes to the front once the inventory has chosen the agent, as the benchmark's probe shows it:
    # after the window asked for the sidebar's counts.
    window.agents_view.sig_inventory_changed.connect(lambda _inventory: window.show_view(records))
    try:
        with qtbot.waitSignal(window.counts.sig_counts_updated, timeout=10_000):
            with qtbot.waitSignal(window.records_view.recent_model.sig_page_loaded, timeout=10_000):
                window.connect_engine()
        assert window.records_view.recent_model.rowCount() > 0
        assert window.navigation.count_of(window.records_view) > 0  # the counts still come (test_sidebar.py: right)
        after_inventory = ran[ran.index("operator/inventory") + 1:]
        assert after_inventory[0] == FIRST_PAGE, after_inventory
        assert COUNTS <= set(after_inventory)
        assert "operator/health" not in ran  # not in front, so not asked: its diagnostics are the costly call

        with qtbot.waitSignal(window.health_view.sig_content_loaded, timeout=10_000):
            window.show_view(window.views.index(window.health_view))
        assert ran.count("operator/health") == 1
        qtbot.waitUntil(lambda: not tasks.busy, timeout=10_000)
        # Views never shown asked nothing: approvals only for its count, no index for What the agent sees.
        assert ran.count("operator/approvals") == 1 and "operator/index" not in ran
    finally:
        window.close()
        tasks.shutdown()
