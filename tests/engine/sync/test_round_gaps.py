"""What a round leaves for the owner and the agents on the machine it reaches: a conversation partition that
arrives by sync is its conversation's there too, removals are recorded as what happened, and a round on a
vault with no history takes the remote's (docs/sync.md, "Rounds")."""

from __future__ import annotations

import subprocess

import pytest

from engine.operator.partitions import partitions
from engine.service import Engine
from engine.store.githistory import GitError, GitHistory
from engine.sync.round import read_machine_id
from tests.engine.cli.test_beside_engine import run
from tests.engine.sync.round_machines import AGENT, Machine, MachineFactory, remote_refs, settle
from tests.helpers import conversation

SESSION = "3d5e7f90-1a2b-4c3d-8e9f-0a1b2c3d4e5f"



def started(machines: MachineFactory, remote: str) -> tuple[Machine, dict[str, str]]:
    a = machines("a")
    dana = a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
    a.add_remote(remote)
    assert [status["state"] for status in a.sync()] == ["ok"]
    return a, {"dana": dana["id"]}


def harbour_call(machine: Machine) -> str:
    chat = conversation(machine.owner.token, SESSION)
    note = machine.engine.save_page(chat, {"requestId": "c1", "type": "note", "title": "Harbour call",
                                           "body": "The harbour call moved to Monday."})
    return note["id"]


def assert_the_conversation_reads_its_records(machine: Machine, note_id: str) -> None:
    chat = conversation(machine.owner.token, SESSION)
    assert machine.engine.get_record(chat, note_id)["body"] == "The harbour call moved to Monday.\n"
    hits = machine.engine.search(chat, {"query": "harbour call"})["hits"]
    assert note_id in {hit["id"] for hit in hits}
    # The owner's view lists the partition, figures only.
    listed = {entry.get("sessionId"): entry for entry in partitions(machine.engine, machine.record.store_id)[
        "partitions"]}
    assert listed[SESSION]["records"] == 1, listed


def test_a_conversation_that_arrives_by_sync_is_read_and_searched_by_its_conversation(
        machines: MachineFactory, remote: str) -> None:
    a, _ = started(machines, remote)
    b = machines("b")
    b.clone(remote)
    note = harbour_call(a)
    settle(a, b)
    assert_the_conversation_reads_its_records(b, note)


def test_a_conversation_that_a_clone_brings_is_read_and_searched_by_its_conversation(
        machines: MachineFactory, remote: str) -> None:
    a, _ = started(machines, remote)
    note = harbour_call(a)
    settle(a)
    b = machines("b")
    b.clone(remote)
    assert_the_conversation_reads_its_records(b, note)


def test_a_file_removed_on_one_machine_is_recorded_as_removed_by_sync_on_the_other(
        machines: MachineFactory, remote: str, capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = started(machines, remote)
    b = machines("b")
    b.clone(remote)
    atlas = a.save("atlas", "Atlas", "The restoration project.")["id"]
    settle(a, b)
    relpath = a.get(atlas)["path"]
    (a.vault / "private" / relpath).unlink()
    settle(a, b)
    assert not (b.vault / "private" / relpath).exists()
    machine_a = read_machine_id(a.record)
    [removal] = b.status()["removed"]
    assert (removal["partition"], removal["path"], removal["recordId"]) == ("private", relpath, atlas)
    assert removal["detail"] == f"by sync from machine {machine_a} of remote origin"
    events = b.engine.history(b.owner, atlas)["events"]
    assert [(event["kind"], event["path"], event["detail"]) for event in events] == [
        ("removed_by_sync", relpath, removal["detail"])]
    assert "removed" not in a.status()  # a removed it by hand: its history says so its own way
    b.close()  # the command line opens the state directory itself
    try:
        code, out, err = run(capsys, b.state, ["sync", "status"])
    finally:
        b.engine = Engine(b.state, watch=False)
    assert code == 0, err
    assert f"private/{relpath} ({atlas}) by sync from machine {machine_a} of remote origin" in out


def test_a_file_renamed_on_one_machine_is_moved_on_the_other_never_recorded_as_removed(
        machines: MachineFactory, remote: str) -> None:
    a, _ = started(machines, remote)
    b = machines("b")
    b.clone(remote)
    atlas = a.save("atlas", "Atlas", "The restoration project.")["id"]
    settle(a, b)
    relpath = a.get(atlas)["path"]
    renamed = relpath.replace("atlas", "atlas-project")
    assert renamed != relpath
    (a.vault / "private" / relpath).rename(a.vault / "private" / renamed)
    settle(a, b)
    assert not (b.vault / "private" / relpath).exists()
    assert (b.vault / "private" / renamed).read_bytes() == (a.vault / "private" / renamed).read_bytes()
    assert b.get(atlas)["path"] == renamed
    assert "removed" not in b.status()
    assert [event["kind"] for event in b.engine.history(b.owner, atlas)["events"]] == []


def test_a_store_that_wrote_nothing_on_a_remote_of_other_stores_is_told_to_clone(
        machines: MachineFactory, remote: str) -> None:
    a, _ = started(machines, remote)
    c = machines("c")
    c.engine.resolver.effective(AGENT, create=True)
    c.add_remote(remote)
    [status] = c.sync()
    assert status["state"] == "failing" and status["lastError"]["code"] == "other_store", status
    assert "sync clone" in status["lastError"]["message"] and a.record.store_id in status["lastError"]["message"]
    assert c.head() is None
    assert not any(c.record.store_id in ref for ref in remote_refs(remote))
    c.save("pasta", "Pasta", "Lemon pasta on Fridays.")  # a store of its own from now on
    [status] = c.sync()
    assert status["state"] == "ok", status
    assert any(ref.startswith(f"refs/heads/knowledge/{c.record.store_id}/") for ref in remote_refs(remote))


def test_a_clone_cut_short_after_installing_takes_the_remote_history_at_its_next_round(
        machines: MachineFactory, remote: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a, ids = started(machines, remote)
    harbour_call(a)
    settle(a)
    b = machines("b")

    def cut(self: GitHistory, commit: str, expected: str | None) -> None:
        raise GitError("the round stopped here")

    with monkeypatch.context() as patch:
        patch.setattr(GitHistory, "fast_forward", cut)
        cloned = b.clone(remote)
    assert cloned["remote"]["state"] == "failing"
    runtime = b.engine.runtime(b.record)
    assert runtime.git is not None and runtime.git.head() is None
    # The publications that installed a's files wait for the round: no history unrelated to a's is started.
    assert runtime.checkpoint()["state"] == "pending" and runtime.git.head() is None
    harbour = b.save("harbour", "Harbour", "Minutes of the harbour meeting.")["id"]
    assert runtime.checkpoint()["state"] == "pending" and runtime.git.head() is None
    settle(b, a)
    assert a.files() == b.files()
    assert runtime.git.is_ancestor(a_first_commit(a), b.head())
    assert a.get(harbour)["body"] == "Minutes of the harbour meeting.\n"
    assert b.get(ids["dana"])["body"] == "Keeps the lighthouse running.\n"
    assert runtime.outbox.pending() == []


def a_first_commit(machine: Machine) -> str:
    out = subprocess.run(["git", "--git-dir", str(machine.vault / ".git"), "rev-list", "--max-parents=0", "main"],
                         check=True, capture_output=True, text=True).stdout.split()
    assert len(out) == 1
    return out[0]
