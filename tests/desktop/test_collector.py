"""Python's cycle collector runs on the GUI thread only while the window runs (desktop/collector.py): collected on
a worker thread, a cycle holding a Qt object deadlocked the window."""

from __future__ import annotations

import gc
import threading
from typing import Any, Iterator

import pytest

from desktop.app import application
from desktop.collector import GuiThreadCollector


@pytest.fixture
def collecting_threads() -> Iterator[list[str]]:
    """The name of the thread each collection from now on starts on."""
    names: list[str] = []

    def note(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            names.append(threading.current_thread().name)

    gc.callbacks.append(note)
    try:
        yield names
    finally:
        gc.callbacks.remove(note)


def make_cycles(count: int) -> None:
    for _ in range(count):
        pair: list[Any] = []
        pair.append([pair])


def test_a_worker_thread_never_collects_and_the_gui_thread_collects_what_is_due(qtbot, collecting_threads) -> None:
    collector = GuiThreadCollector()
    collector.start()
    try:
        assert not gc.isenabled()
        worker = threading.Thread(target=make_cycles, args=(50_000,), name="worker")
        worker.start()
        worker.join()
        assert collecting_threads == [] and gc.get_count()[0] > gc.get_threshold()[0]
        qtbot.waitUntil(lambda: collecting_threads != [], timeout=10_000)   # the timer's turn
        assert set(collecting_threads) == {threading.main_thread().name}
        assert gc.get_count()[0] <= gc.get_threshold()[0]
    finally:
        collector.stop()


def test_stopping_collects_what_waits_and_gives_collection_back_as_it_was(qapp, collecting_threads) -> None:
    gc.enable()
    collector = GuiThreadCollector()
    collector.start()
    make_cycles(10)
    collector.stop()
    assert gc.isenabled() and collecting_threads == [threading.main_thread().name]


def test_the_application_collects_on_its_gui_thread_once(qapp) -> None:
    assert application() is application() is qapp
    collectors = qapp.findChildren(GuiThreadCollector)
    try:
        assert len(collectors) == 1 and not gc.isenabled()
    finally:
        for collector in collectors:
            collector.stop()
            collector.setParent(None)
            collector.deleteLater()
