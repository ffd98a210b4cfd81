"""The change feed: bounded per watcher, bursts merged, a full queue emptied and marked resync, never a wait."""

from __future__ import annotations

import threading

import pytest

from engine.core.changes import ChangeFeed


def test_a_watcher_gets_each_change_once_with_a_burst_merged() -> None:
    feed = ChangeFeed()
    watching = feed.subscribe()
    for _ in range(50):
        feed.publish("publications", storeId="st_1", partition="private")
    feed.publish("grants", agent="main")

    changes, resync = watching.take()

    assert changes == [{"topic": "publications", "storeId": "st_1", "partition": "private"},
                       {"topic": "grants", "agent": "main"}]
    assert resync is False and watching.take() == ([], False)


def test_a_full_queue_is_emptied_and_marked_resync_and_the_bound_holds() -> None:
    feed = ChangeFeed()
    watching = feed.subscribe(limit=8)
    for number in range(100):
        feed.publish("publications", storeId=f"st_{number}", partition="private")

    changes, resync = watching.take()

    assert resync is True and changes == [] and watching.dropped == 100
    feed.publish("stores")
    assert watching.take() == ([{"topic": "stores"}], False)  # after the resync, changes flow again


def test_only_the_chosen_topics_reach_a_watcher_and_unknown_ones_are_refused() -> None:
    feed = ChangeFeed()
    watching = feed.subscribe(["gate"])
    feed.publish("publications", storeId="st_1", partition="private")
    feed.publish("gate", storeId="st_1", agent="main")

    assert watching.take() == ([{"topic": "gate", "storeId": "st_1", "agent": "main"}], False)
    with pytest.raises(ValueError):
        feed.subscribe(["everything"])


def test_the_waker_is_called_once_until_the_queue_is_taken() -> None:
    feed = ChangeFeed()
    watching = feed.subscribe()
    calls: list[int] = []
    watching.set_waker(lambda: calls.append(1))
    feed.publish("stores")
    feed.publish("grants", agent="a")
    assert calls == [1]
    watching.take()
    feed.publish("stores")
    assert calls == [1, 1]


def test_a_failing_or_closed_watcher_never_fails_or_holds_a_publisher() -> None:
    feed = ChangeFeed()
    broken = feed.subscribe()
    broken.set_waker(lambda: 1 / 0)
    stalled = feed.subscribe(limit=4)
    blocked = threading.Event()
    stalled.set_waker(blocked.set)  # never taken: the watcher stopped reading

    for number in range(1000):
        feed.publish("publications", storeId="st", partition=f"conversation:{number}")

    assert stalled.take()[1] is True and broken.take()[1] is True
    broken.close()
    stalled.close()
    assert not feed.watched
    feed.publish("stores")  # nobody watches: nothing is kept


def test_a_watcher_is_idle_only_once_it_finished_with_everything_it_took() -> None:
    feed = ChangeFeed()
    watching = feed.subscribe()
    assert watching.idle
    feed.publish("stores")
    assert not watching.idle  # waiting
    watching.take()
    assert not watching.idle  # taken, not finished with
    watching.done()
    assert watching.idle
    feed.publish("publications", storeId="st_0", partition="private")
    assert not watching.idle
