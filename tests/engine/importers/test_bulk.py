"""The pipeline an import's items are written on (engine/importers/bulk.py): order, errors, stopping."""

from __future__ import annotations

import threading

import pytest

from engine.importers.bulk import Pipeline


def settle(pipeline: Pipeline) -> None:
    """Wait for every item and stop the threads, as ``Writer.settle`` does."""
    try:
        pipeline.wait()
    finally:
        pipeline.close()


def test_progress_is_reported_in_order_on_the_calling_thread_once_every_earlier_item_is_written():
    pipeline = Pipeline(width=4)
    first_may_finish = threading.Event()
    reported: list[tuple[int, str]] = []

    def item(number: int) -> int:
        if number == 0:
            assert first_may_finish.wait(30)
        return number * 10

    futures = [pipeline.submit(lambda n=n: item(n), lambda n=n: reported.append((n, threading.current_thread().name)))
               for n in range(3)]
    assert reported == []  # the second and third may be written; the first is not
    first_may_finish.set()
    settle(pipeline)
    assert reported == [(0, "MainThread"), (1, "MainThread"), (2, "MainThread")]
    assert [future.result() for future in futures] == [0, 10, 20]


def test_the_first_error_stops_the_import_and_items_not_started_are_not_written():
    pipeline = Pipeline(width=1)
    failing_may_end = threading.Event()
    written: list[int] = []

    def failing() -> None:
        assert failing_may_end.wait(30)
        raise ValueError("refused")

    pipeline.submit(failing)
    pipeline.submit(lambda: written.append(2))  # queued behind the failing one on the one thread
    failing_may_end.set()
    with pytest.raises(ValueError, match="refused"):
        settle(pipeline)
    assert written in ([], [2])  # started or cancelled: never half
    pipeline.submit(lambda: written.append(3))  # a pipeline closed by its error starts again when used
    settle(pipeline)
    assert written[-1] == 3


def test_the_window_holds_at_most_twice_the_width():
    pipeline = Pipeline(width=2)
    release = threading.Event()
    started = []
    for n in range(4):
        pipeline.submit(lambda n=n: (started.append(n), release.wait(30)))
    assert len(pipeline._window) == 4
    release.set()
    pipeline.submit(lambda: None)  # the fifth waits until the head is written
    assert len(pipeline._window) <= 4
    settle(pipeline)


class Stopped(Exception):
    pass


def test_closing_returns_the_reports_of_the_items_written_after_the_import_began_to_stop():
    pipeline = Pipeline(width=4)
    release = threading.Event()
    reported: list[int] = []

    def stop(number: int) -> None:
        reported.append(number)
        raise Stopped  # the owner stops the import at the first item's report

    pipeline.submit(lambda: release.wait(30), lambda: stop(0))
    for n in (1, 2):
        pipeline.submit(lambda n=n: release.wait(30) and n, lambda n=n: reported.append(n))
    release.set()
    with pytest.raises(Stopped):
        pipeline.wait()
    unreported = pipeline.close()
    assert reported == [0]
    for report in unreported:  # the two running finished: each is counted, in order
        report()
    assert reported == [0, 1, 2]


def test_closing_after_an_error_reports_nothing_past_the_failed_item():
    pipeline = Pipeline(width=2)
    failing_may_end = threading.Event()

    def failing() -> None:
        assert failing_may_end.wait(30)
        raise ValueError("refused")

    reported: list[int] = []
    pipeline.submit(failing, lambda: reported.append(1))
    pipeline.submit(lambda: 2, lambda: reported.append(2))
    failing_may_end.set()
    with pytest.raises(ValueError, match="refused"):
        pipeline.wait()
    assert pipeline.close() == [] and reported == []
