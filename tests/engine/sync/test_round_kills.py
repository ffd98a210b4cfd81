"""Rounds stopped dead at the round's kill points (engine/core/faults.py ``sync_*``), in the test's own process:
the round raises where ``KNOWLEDGE_FAULT`` would SIGKILL, the engine is closed and opened again on the same
state directory (what a restart reads from disk), and the next rounds finish the job with nothing lost and
the vaults converged.  tests/reliability/sync_crash.py does the same with real SIGKILLs."""

from __future__ import annotations


import pytest

from engine.core.faults import Faults
from engine.service import Engine
from tests.engine.sync.round_machines import Machine, MachineFactory, remote_refs, settle



class Killed(BaseException):
    """The process ended here (nothing in the round catches it, as nothing survives a SIGKILL)."""


class StopAt(Faults):
    """``KNOWLEDGE_FAULT=<point>:<n>``, raising ``Killed`` instead of sending SIGKILL."""

    def __init__(self, point: str, nth: int = 1) -> None:
        super().__init__(f"{point}:{nth}")

    def reach(self, point: str) -> None:
        if point == self.point:
            self.remaining -= 1
            if self.remaining == 0:
                raise Killed(point)


def killed_round(machine: Machine, point: str, nth: int = 1) -> None:
    machine.engine.runtime(machine.record).faults = StopAt(point, nth)
    with pytest.raises(Killed):
        machine.sync()
    restart(machine)


def restart(machine: Machine) -> None:
    machine.engine.close()
    machine.engine = Engine(machine.state, watch=False)



def two_machines_that_both_wrote(machines: MachineFactory, remote: str) -> tuple[Machine, Machine, list[str]]:
    a, b = machines("a"), machines("b")
    ids = [a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")["id"]]
    a.add_remote(remote)
    settle(a)
    b.clone(remote)
    ids.append(a.save("atlas", "Atlas", "The restoration project.")["id"])
    ids.append(b.save("harbour", "Harbour", "Minutes of the harbour meeting.")["id"])
    settle(a)
    return a, b, ids


def assert_converged(a: Machine, b: Machine, ids: list[str]) -> None:
    assert a.files() == b.files()
    assert a.head() == b.head()
    for machine in (a, b):
        assert {machine.get(record_id)["id"] for record_id in ids} == set(ids)
        assert machine.status()["conflictsWaiting"] == 0
        runtime = machine.engine.runtime(machine.record)
        assert runtime.outbox.pending() == []


@pytest.mark.parametrize("point", ["sync_installed", "sync_committed", "sync_fetched", "sync_pushed"])
def test_a_merge_round_killed_is_finished_by_the_next(machines: MachineFactory, remote: str, point: str) -> None:
    a, b, ids = two_machines_that_both_wrote(machines, remote)
    killed_round(b, point)  # b merges a's page with its own, and stops there
    [status] = b.status()["remotes"]
    assert status["state"] == "failing" and status["lastError"]["code"] == "interrupted"
    settle(b, a)
    assert_converged(a, b, ids)


def test_a_merge_committed_but_not_pushed_is_pushed_by_the_next_round(machines: MachineFactory, remote: str) -> None:
    a, b, ids = two_machines_that_both_wrote(machines, remote)
    killed_round(b, "sync_committed")
    merged = b.head()
    assert merged is not None and merged not in remote_refs(remote).values()
    [status] = b.sync()
    assert status["state"] == "ok" and b.head() == merged  # nothing merged again: the commit is pushed as it is
    assert merged in remote_refs(remote).values()
    settle(a, b)
    assert_converged(a, b, ids)


def test_a_clone_killed_after_installing_takes_the_history_at_its_next_round(
        machines: MachineFactory, remote: str) -> None:
    a = machines("a")
    ids = [a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")["id"],
           a.save("atlas", "Atlas", "The restoration project.")["id"]]
    a.add_remote(remote)
    settle(a)
    b = machines("b")
    b.engine.faults = StopAt("sync_installed")  # the runtime the clone opens takes it
    with pytest.raises(Killed):
        b.clone(remote)
    restart(b)  # the closing checkpoint finds the installed publications and leaves them for the round
    assert b.head() is None
    ids.append(b.save("harbour", "Harbour", "Minutes of the harbour meeting.")["id"])
    restart(b)
    assert b.head() is None
    settle(b, a)
    assert_converged(a, b, ids)
