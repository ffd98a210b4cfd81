"""Automatic sync's decisions (engine/sync/scheduler.py), with a clock the tests move: batching, the timer,
backoff and its reset, one round of a store at a time, the log lines, and the driver over a change feed."""

from __future__ import annotations

import logging
import threading
from typing import Callable

import pytest

from engine.core.changes import ChangeFeed
from engine.core.errors import Conflict
from engine.core.findings import Finding
from engine.state.sync_settings import SyncSettings
from engine.sync.scheduler import (
    BACKOFF_FIRST_SECONDS, STARTUP_SECONDS, AutoSync, RoundOutcome, SyncedStore, SyncPlanner, backoff_seconds,
)
from engine.sync.status import SyncError, SyncRemoteStatus

SETTINGS = SyncSettings(interval_seconds=300, quiet_seconds=10, batch_seconds=60, backoff_max_seconds=3600)
ONE = {"st_a": SyncedStore(None, ("nas",))}
UNREACHABLE: SyncError = {"code": "unreachable", "message": "nas.local: no route to host", "at": "2026-12-04T03:00:00Z"}


def planner(stores: dict[str, SyncedStore] = ONE, settings: SyncSettings = SETTINGS, now: float = 0.0) -> SyncPlanner:
    plan = SyncPlanner(settings)
    plan.set_stores(stores, now)
    return plan


def settled(stores: dict[str, SyncedStore] = ONE) -> SyncPlanner:
    """A planner whose start-up round began at -100 and ended at 0: the timer is due at 300."""
    plan = planner(stores)
    plan.begin("st_a", -100)
    plan.finished("st_a", [RoundOutcome(remote, None) for remote in stores["st_a"].remotes], 0)
    return plan


def run_until(plan: SyncPlanner, start: float, end: float, *, step: float = 1.0,
              publish_every: float | None = None, fail: Callable[[float], bool] = lambda now: False,
              store: str = "st_a") -> list[tuple[float, tuple[str, ...], str]]:
    """Move time from start to end; rounds finish the moment they begin (failing when ``fail(now)``)."""
    rounds = []
    now = start
    while now <= end:
        if publish_every is not None and now % publish_every == 0:
            plan.published(store, now)
        for request in plan.take_due(now):
            rounds.append((now, request.remotes, request.reason))
            error = UNREACHABLE if fail(now) else None
            plan.finished(request.store_id, [RoundOutcome(remote, error) for remote in request.remotes], now)
        now += step
    return rounds


# --- batching ---------------------------------------------------------------------------------------


def test_a_burst_of_publications_is_one_round_after_a_quiet_period() -> None:
    plan = settled()
    for at in range(5):  # 100 writes in five seconds
        for _ in range(20):
            plan.published("st_a", at)
    assert plan.take_due(4 + SETTINGS.quiet_seconds - 1) == []
    requests = plan.take_due(4 + SETTINGS.quiet_seconds)
    assert [(r.store_id, r.remotes, r.reason) for r in requests] == [("st_a", ("nas",), "publications")]
    assert plan.next_due(4 + SETTINGS.quiet_seconds) is None  # running: nothing else of the store is due


def test_steady_writes_make_at_most_one_round_per_batch_period() -> None:
    plan = planner(now=-STARTUP_SECONDS)  # the start-up round is due at 0
    rounds = run_until(plan, 0, 600, publish_every=2)  # never quiet
    times = [at for at, _, _ in rounds]
    assert [reason for _, _, reason in rounds] == ["timer"] + ["publications"] * (len(rounds) - 1)
    assert len(rounds) == 10 and all(60 <= b - a <= 62 for a, b in zip(times, times[1:]))  # one per batch period


def test_a_round_comes_no_sooner_than_the_batch_period_after_the_last_one() -> None:
    plan = settled()
    plan.published("st_a", 0)
    assert [r.reason for r in plan.take_due(10)] == ["publications"]
    plan.finished("st_a", [RoundOutcome("nas", None)], 12)
    plan.published("st_a", 20)
    assert plan.take_due(30) == []  # quiet, but the last round began at 10
    assert plan.next_due(30) == 70
    assert [r.reason for r in plan.take_due(70)] == ["publications"]


def test_publications_made_during_a_round_make_a_round_after_it() -> None:
    plan = settled()
    plan.published("st_a", 0)
    assert plan.take_due(10)
    plan.published("st_a", 11)  # while the round runs: perhaps after it committed
    assert plan.take_due(100) == []  # one round of a store at a time
    plan.finished("st_a", [RoundOutcome("nas", None)], 100)
    assert [r.reason for r in plan.take_due(100)] == ["publications"]


def test_a_store_without_remotes_ignores_publications() -> None:
    plan = settled()
    plan.published("st_other", 0)
    assert plan.take_due(299) == [] and plan.next_due(299) == 300


# --- the timer ----------------------------------------------------------------------------------------


def test_the_timer_syncs_soon_after_start_then_every_interval() -> None:
    rounds = run_until(planner(), 0, 1000)
    assert [(at, reason) for at, _, reason in rounds] == [
        (STARTUP_SECONDS, "timer"), (STARTUP_SECONDS + 300, "timer"), (STARTUP_SECONDS + 600, "timer"),
        (STARTUP_SECONDS + 900, "timer")]


def test_the_interval_follows_the_settings() -> None:
    plan = planner()
    assert plan.take_due(STARTUP_SECONDS)
    plan.finished("st_a", [RoundOutcome("nas", None)], STARTUP_SECONDS)
    plan.settings = SyncSettings(interval_seconds=60, quiet_seconds=10, batch_seconds=60)
    assert plan.next_due(STARTUP_SECONDS) == STARTUP_SECONDS + 60


def test_every_remote_of_the_store_goes_in_one_round() -> None:
    plan = planner({"st_a": SyncedStore("team", ("nas", "github"))})
    assert [(r.remotes, r.reason) for r in plan.take_due(STARTUP_SECONDS)] == [(("github", "nas"), "timer")]


def test_automatic_sync_off_for_a_store_runs_no_round_of_it() -> None:
    stores = {"st_a": SyncedStore("team", ("nas",)), "st_b": SyncedStore(None, ("nas",))}
    plan = planner(stores, SyncSettings(stores={"team": False}))
    plan.published("st_a", 0)
    assert [r.store_id for r in plan.take_due(10_000)] == ["st_b"]
    plan = planner(stores, SyncSettings(automatic=False, stores={"st_b": True}))
    assert [r.store_id for r in plan.take_due(10_000)] == ["st_b"]
    plan = planner(stores, SyncSettings(automatic=False))
    assert plan.take_due(10_000) == [] and plan.next_due(10_000) is None


# --- backoff --------------------------------------------------------------------------------------


def test_backoff_doubles_to_the_cap() -> None:
    assert [backoff_seconds(n, SETTINGS) for n in range(1, 10)] == [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]
    assert backoff_seconds(1000, SyncSettings(backoff_max_seconds=600)) == 600


def test_an_unreachable_remote_is_tried_less_often_and_publications_wait_for_it() -> None:
    plan = planner(now=-STARTUP_SECONDS)
    rounds = run_until(plan, 0, 2000, publish_every=5, fail=lambda now: True)
    times = [at for at, _, _ in rounds]
    assert times[:5] == [0, 30, 90, 210, 450]  # 30, 60, 120, 240 s apart, whatever was written meanwhile
    assert [reason for _, _, reason in rounds][1:] == ["retry"] * (len(rounds) - 1)
    assert all(b - a == 2 * (a - c) for c, a, b in zip(times, times[1:], times[2:]))


def test_a_success_resets_the_backoff() -> None:
    plan = planner(now=-STARTUP_SECONDS)
    rounds = run_until(plan, 0, 1000, fail=lambda now: now < 200)
    assert [at for at, _, _ in rounds] == [0, 30, 90, 210, 510, 810]  # failed 0-90; 210 worked: the interval again
    plan = planner(now=-STARTUP_SECONDS)
    run_until(plan, 0, 100, fail=lambda now: True)  # three failures, the last at 90
    assert plan.next_due(100) == 90 + 120


def test_one_failing_remote_does_not_hold_back_the_others() -> None:
    plan = planner({"st_a": SyncedStore(None, ("github", "nas"))})
    for at in (10, 40, 100):  # nas fails three times: tried again at 220
        plan.begin("st_a", at)
        plan.finished("st_a", [RoundOutcome("github", None), RoundOutcome("nas", UNREACHABLE)], at)
    plan.published("st_a", 110)
    assert plan.next_due(110) == 160
    [request] = plan.take_due(160)
    assert request.remotes == ("github",) and request.reason == "publications"  # nas waits
    plan.finished("st_a", [RoundOutcome("github", None)], 160)
    plan.published("st_a", 165)
    assert plan.take_due(219) == []  # batched after the round at 160
    [request] = plan.take_due(220)  # nas's retry fell due meanwhile: both go
    assert request.remotes == ("github", "nas") and request.reason == "retry"


def test_the_planner_notices_failing_once_and_recovering_once() -> None:
    plan = planner()
    kinds = []
    for at, error in [(10, UNREACHABLE), (40, UNREACHABLE), (100, UNREACHABLE), (300, None), (600, None)]:
        plan.begin("st_a", at)
        kinds += [(n.kind, n.remote) for n in plan.finished("st_a", [RoundOutcome("nas", error)], at)]
    assert kinds == [("failing", "nas"), ("recovered", "nas")]


def test_remotes_come_and_go_keeping_what_they_went_through() -> None:
    plan = planner()
    plan.begin("st_a", 10)
    plan.finished("st_a", [RoundOutcome("nas", UNREACHABLE)], 10)
    plan.set_stores({"st_a": SyncedStore(None, ("nas", "github"))}, 20)
    assert plan.next_due(20) == 20 + STARTUP_SECONDS  # the new remote soon; nas keeps its backoff (40)
    [request] = plan.take_due(30)
    assert request.remotes == ("github",)
    plan.set_stores({}, 31)  # the store's remotes were removed while its round ran
    plan.finished("st_a", [RoundOutcome("github", None)], 32)
    plan.set_stores({}, 33)
    assert plan.take_due(10_000) == [] and plan.next_due(10_000) is None


# --- the driver -----------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Wakeup:
    def __init__(self) -> None:
        self.set_count = 0

    def wait(self, timeout: float | None) -> None:
        raise AssertionError("the tests call step() themselves")

    def set(self) -> None:
        self.set_count += 1


def status(remote: str, *, error: SyncError | None = None) -> SyncRemoteStatus:
    return {"name": remote, "url": "/srv/notes.git", "state": "failing" if error else "ok",
            "lastAttempt": "2026-12-04T03:00:00Z", "lastSuccess": None if error else "2026-12-04T03:00:00Z",
            "lastError": error, "ahead": 0, "behind": 0, "machines": []}


class Rounds:
    """A fake ``run_round``: records each call; fails while ``failing`` holds the remote."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.failing: dict[str, Exception | SyncError] = {}

    def __call__(self, store_id: str, remote: str) -> SyncRemoteStatus:
        self.calls.append((store_id, remote))
        failure = self.failing.get(remote)
        if isinstance(failure, Exception):
            raise failure
        return status(remote, error=failure)


def driver(feed: ChangeFeed, rounds: Rounds, clock: Clock, *, settings: SyncSettings = SETTINGS,
           stores: Callable[[], dict[str, SyncedStore]] = lambda: ONE,
           spawn: Callable[[Callable[[], None]], None] = lambda work: work()) -> AutoSync:
    """A driver that has taken its first step at the clock's time."""
    auto = AutoSync(rounds, stores, lambda: settings, feed, clock=clock, wakeup=Wakeup(), spawn=spawn)
    auto.listen()
    auto.step()
    return auto


def test_the_driver_batches_publications_from_the_change_feed() -> None:
    feed, rounds, clock = ChangeFeed(), Rounds(), Clock()
    auto = driver(feed, rounds, clock)
    assert auto.step() == STARTUP_SECONDS and rounds.calls == []  # nothing due before the start-up round
    clock.now = STARTUP_SECONDS
    auto.step()
    assert rounds.calls == [("st_a", "nas")]  # the start-up round
    clock.now = 100
    for _ in range(50):
        feed.publish("publications", storeId="st_a", partition="private")
        feed.publish("publications", storeId="st_other", partition="private")
    assert auto.step() == SETTINGS.quiet_seconds
    clock.now = 110
    auto.step()
    assert rounds.calls == [("st_a", "nas")] * 2


def test_the_driver_publishes_sync_when_a_round_begins_and_ends() -> None:
    feed, rounds, clock = ChangeFeed(), Rounds(), Clock()
    watcher = feed.subscribe(["sync"])
    seen: list[list[str]] = []

    def run(store_id: str, remote: str) -> SyncRemoteStatus:
        seen.append([change["storeId"] for change in watcher.take()[0]])
        return rounds(store_id, remote)

    auto = AutoSync(run, lambda: ONE, lambda: SETTINGS, feed, clock=clock, wakeup=Wakeup(), spawn=lambda w: w())
    auto.listen()
    auto.step()
    clock.now = STARTUP_SECONDS
    auto.step()
    assert seen == [["st_a"]]  # began
    assert [change["storeId"] for change in watcher.take()[0]] == ["st_a"]  # ended


def test_the_driver_reads_the_stores_again_when_remotes_or_stores_change() -> None:
    feed, rounds, clock = ChangeFeed(), Rounds(), Clock()
    listed = {"n": 0, "stores": dict(ONE)}

    def stores() -> dict[str, SyncedStore]:
        listed["n"] += 1
        return listed["stores"]  # type: ignore[return-value]

    auto = driver(feed, rounds, clock, stores=stores)
    auto.step()
    feed.publish("publications", storeId="st_a", partition="private")
    auto.step()
    assert listed["n"] == 1  # a publication changes no store's remotes
    listed["stores"] = {**ONE, "st_b": SyncedStore(None, ("github",))}
    feed.publish("sync", storeId="st_b")
    clock.now = STARTUP_SECONDS
    auto.step()
    assert listed["n"] == 2 and rounds.calls == [("st_a", "nas")]
    clock.now = 2 * STARTUP_SECONDS  # the new store's first round
    auto.step()
    assert rounds.calls == [("st_a", "nas"), ("st_b", "github")]
    listed["stores"] = dict(ONE)  # remotes.json edited by hand: seen within a minute, without any change told
    auto.step()
    read = listed["n"]
    clock.now += 59
    auto.step()
    assert listed["n"] == read
    clock.now += 1
    auto.step()
    assert listed["n"] == read + 1 and "st_b" not in auto.planner._stores


def test_the_driver_logs_one_line_when_a_remote_fails_and_one_when_it_recovers(
        caplog: pytest.LogCaptureFixture) -> None:
    feed, rounds, clock = ChangeFeed(), Rounds(), Clock()
    auto = driver(feed, rounds, clock)
    rounds.failing["nas"] = Conflict("nas.local: no route to host")
    caplog.set_level(logging.DEBUG, logger="engine.sync.scheduler")
    for _ in range(1000):  # twelve failed tries, the later ones an hour apart
        clock.now += auto.step()
        if len(rounds.calls) == 12:
            break
    rounds.failing.clear()
    for _ in range(1000):  # two that work
        clock.now += auto.step()
        if len(rounds.calls) == 14:
            break
    assert len(rounds.calls) == 14
    lines = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [(r.levelname, "failing" in r.getMessage(), "works again" in r.getMessage()) for r in lines] == [
        ("WARNING", True, False), ("INFO", False, True)]
    assert "no route to host" in lines[0].getMessage()


def test_a_failure_is_read_from_the_status_the_round_wrote_or_from_its_error() -> None:
    feed, rounds, clock = ChangeFeed(), Rounds(), Clock()
    auto = driver(feed, rounds, clock)
    rounds.failing["nas"] = UNREACHABLE  # the round wrote its failure into status.json and returned it
    clock.now = STARTUP_SECONDS
    auto.step()
    assert auto.planner.next_due(clock.now) == clock.now + BACKOFF_FIRST_SECONDS

    class Refused(Conflict):
        finding = Finding("rewritten", "the remote's branch of this machine was rewritten")

    rounds.failing["nas"] = Refused("refused")
    auto.sync_now("st_a", ("nas",))
    state = auto.planner._stores["st_a"].remotes["nas"]
    assert state.failures == 2 and state.error is not None and state.error["code"] == "rewritten"
    rounds.failing["nas"] = RuntimeError("git crashed")
    auto.sync_now("st_a", ("nas",))
    assert state.error is not None and state.error["code"] == "internal" and "git crashed" in state.error["message"]


def test_sync_now_runs_whatever_the_backoff_and_a_success_resets_it() -> None:
    feed, rounds, clock = ChangeFeed(), Rounds(), Clock()
    auto = driver(feed, rounds, clock)
    rounds.failing["nas"] = UNREACHABLE
    while len(rounds.calls) < 4:
        wait = auto.step()
        if len(rounds.calls) < 4:
            clock.now += wait
    assert auto.planner.next_due(clock.now) - clock.now == 240  # four failures
    rounds.failing.clear()
    assert auto.sync_now("st_a", ("nas",)) == [status("nas")]
    assert auto.planner.next_due(clock.now) == clock.now + SETTINGS.interval_seconds


def test_sync_now_waits_for_the_automatic_round_of_the_store() -> None:
    feed, rounds, clock = ChangeFeed(), Rounds(), Clock()
    started: list[Callable[[], None]] = []
    auto = driver(feed, rounds, clock, spawn=lambda work: started.append(work))
    clock.now = STARTUP_SECONDS
    auto.step()
    [automatic] = started  # begun, not run yet
    manual = threading.Thread(target=auto.sync_now, args=("st_a", ("nas",)))
    order = []

    def recorded(store_id: str, remote: str) -> SyncRemoteStatus:
        order.append(threading.current_thread() is manual)
        return rounds(store_id, remote)

    auto._run_round = recorded
    manual.start()
    automatic()
    manual.join()
    assert order == [False, True]  # the automatic round, then the owner's
    assert auto.planner.busy("st_a") is False


def test_a_stopped_driver_starts_no_round() -> None:
    feed, rounds, clock = ChangeFeed(), Rounds(), Clock()
    auto = driver(feed, rounds, clock)
    auto.stop(timeout=0)
    clock.now = 10_000
    auto.step()
    assert rounds.calls == [] and not feed.watched
