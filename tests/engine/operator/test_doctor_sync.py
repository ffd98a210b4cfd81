"""``knowledge doctor`` reports the stores' sync: a remote whose rounds fail (why, since when, which remote)
and conflicts waiting, from the sync status the rounds wrote (engine/operator/doctor.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.operator import doctor
from engine.access.authority import OperatorCaller
from engine.access.stores import AgentEntry, StoreEntry
from engine.cli.commands import _doctor_text
from engine.core.errors import Conflict
from engine.operator.doctor import Diagnostics, doctor_report
from engine.state.config import SettingsSource
from engine.sync.status import StoreSyncStatus, SyncRemoteStatus, SyncStatus

ERROR = {"code": "unreachable", "message": "nas.local: no route to host", "at": "2026-12-04T03:10:00Z"}


def remote(name: str, state: str, *, error: dict | None = None, success: str | None = None) -> SyncRemoteStatus:
    return {"name": name, "url": f"ssh://{name}.local/srv/notes.git", "state": state,  # type: ignore[typeddict-item]
            "lastAttempt": "2026-12-04T03:10:00Z", "lastSuccess": success, "lastError": error,  # type: ignore[typeddict-item]
            "ahead": None, "behind": None, "machines": []}


def store(store_id: str, name: str | None, remotes: list[SyncRemoteStatus], waiting: int = 0,
          problem: str | None = None) -> StoreSyncStatus:
    entry: StoreSyncStatus = {"storeId": store_id, "name": name, "machineId": "m_1", "remotes": remotes,
                              "conflicts": [], "conflictsWaiting": waiting}
    if problem is not None:
        entry["problem"] = problem
    return entry


class Engine:
    """What doctor reads of an engine: no agents, one store, and (through ``sync_status``) the status given."""

    def __init__(self, tmp_path: Path, sync: SyncStatus | Exception) -> None:
        self.settings = SettingsSource(tmp_path / "config.json")
        self.sync = sync

    def stores(self) -> list[StoreEntry]:
        return [{"storeId": "st_a", "kind": "named", "status": "ok", "reason": None, "agents": [], "assigned": False}]

    def agents(self) -> list[AgentEntry]:
        return []

    def diagnostics(self, caller: OperatorCaller) -> Diagnostics:
        raise AssertionError("no agents")



@pytest.fixture(autouse=True)
def sync_status_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stores' sync status is what the fake engine holds (engine/sync/service.py reads it from each
    store's status.json and database; tests/engine/sync/test_round*.py cover that)."""
    def given(engine: Engine) -> SyncStatus:
        if isinstance(engine.sync, Exception):
            raise engine.sync
        return engine.sync

    monkeypatch.setattr(doctor, "sync_status", given)


def test_a_healthy_sync_is_no_problem(tmp_path: Path) -> None:
    report = doctor_report(Engine(tmp_path, {"stores": [
        store("st_a", "team", [remote("nas", "ok", success="2026-12-04T03:00:00Z"), remote("github", "never")])]}))
    assert report["problems"] == 0
    assert report["sync"] == {"failing": [], "conflicts": [], "unreadable": []}
    report.pop("problems")
    assert _doctor_text(report) == "No problems found."


def test_a_failing_remote_is_a_problem_naming_why_since_when_and_the_remote(tmp_path: Path) -> None:
    report = doctor_report(Engine(tmp_path, {"stores": [
        store("st_a", "team", [remote("nas", "failing", error=ERROR, success="2026-12-03T22:00:00Z"),
                               remote("github", "ok", success="2026-12-04T03:10:00Z")]),
        store("st_b", None, [remote("usb", "failing", error=ERROR)])]}))
    assert report["problems"] == 2
    assert report["sync"]["failing"] == [
        {"storeId": "st_a", "name": "team", "remote": "nas", "url": "ssh://nas.local/srv/notes.git",
         "lastError": ERROR, "lastSuccess": "2026-12-03T22:00:00Z"},
        {"storeId": "st_b", "name": None, "remote": "usb", "url": "ssh://usb.local/srv/notes.git",
         "lastError": ERROR, "lastSuccess": None}]
    report.pop("problems")
    assert _doctor_text(report).splitlines() == [
        "store team (st_a): sync with remote nas (ssh://nas.local/srv/notes.git) failing since its last success at "
        "2026-12-03T22:00:00Z: nas.local: no route to host (unreachable, 2026-12-04T03:10:00Z)",
        "store st_b: sync with remote usb (ssh://usb.local/srv/notes.git) failing, and no round with it has worked "
        "yet: nas.local: no route to host (unreachable, 2026-12-04T03:10:00Z)"]


def test_conflicts_waiting_are_listed_but_not_counted(tmp_path: Path) -> None:
    report = doctor_report(Engine(tmp_path, {"stores": [
        store("st_a", "team", [remote("nas", "ok", success="2026-12-04T03:00:00Z")], waiting=3),
        store("st_b", None, [remote("nas", "ok")], waiting=1)]}))
    assert report["problems"] == 0
    assert report["sync"]["conflicts"] == [{"storeId": "st_a", "name": "team", "waiting": 3},
                                           {"storeId": "st_b", "name": None, "waiting": 1}]
    report.pop("problems")
    assert _doctor_text(report).splitlines() == [
        "store team (st_a): 3 sync conflicts waiting for your look (knowledge sync status; the window's Sync section)",
        "store st_b: 1 sync conflict waiting for your look (knowledge sync status; the window's Sync section)"]


def test_unreadable_sync_state_is_a_problem_and_never_stops_the_report(tmp_path: Path) -> None:
    report = doctor_report(Engine(tmp_path, {"stores": [
        store("st_a", "team", [], problem="the remotes file of store st_a cannot be used: it names a remote twice")]}))
    assert report["problems"] == 1 and report["sync"]["unreadable"][0]["storeId"] == "st_a"
    report = doctor_report(Engine(tmp_path, Conflict("the registry is locked")))
    assert report["problems"] == 1 and report["stores"][0]["storeId"] == "st_a"
    assert report["sync"]["unreadable"] == [
        {"storeId": None, "name": None, "problem": "the stores' sync state cannot be read: the registry is locked"}]
    report.pop("problems")
    assert _doctor_text(report) == "the stores' sync state cannot be read: the registry is locked"
