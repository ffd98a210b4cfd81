"""Sync rounds between machines (engine/sync/round.py): state directories as machines against one bare
repository; what each writes reaches the others, merged by record, and every vault ends byte-identical."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import Conflict, Denied, InvalidParams, NotFound
from engine.sync.clone import clone_store
from engine.sync.round import read_status
from engine.sync.service import sync_now
from tests.engine.sync.round_machines import AGENT, Machine, MachineFactory, remote_refs
from tests.helpers import claim, conversation



def pair(machines: MachineFactory, remote: str) -> tuple[Machine, Machine, dict[str, str]]:
    """Machine a with a page, synced to the remote; machine b cloned from it."""
    a, b = machines("a"), machines("b")
    dana = a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
    a.add_remote(remote)
    [status] = a.sync()
    assert status["state"] == "ok", status
    cloned = b.clone(remote)
    assert cloned["remote"]["state"] == "ok", cloned
    assert cloned["storeId"] == a.record.store_id and cloned["records"] >= 1
    return a, b, {"dana": dana["id"]}


def settle(*machines: Machine) -> None:
    """Rounds until every machine holds what every other wrote: each once, then each again."""
    for _ in range(2):
        for machine in machines:
            assert [status["state"] for status in machine.sync()] == ["ok"]


def test_a_clone_holds_the_store_and_its_history(machines: MachineFactory, remote: str) -> None:
    a, b, ids = pair(machines, remote)
    assert b.files() == a.files()
    assert b.head() == a.head()
    assert b.get(ids["dana"])["body"] == "Keeps the lighthouse running.\n"
    assert b.remote_status()[0]["machines"] == [read_status_machine(a)]


def read_status_machine(machine: Machine) -> str:
    from engine.sync.round import read_machine_id
    machine_id = read_machine_id(machine.record)
    assert machine_id is not None
    return machine_id


def test_new_records_on_both_sides_are_united(machines: MachineFactory, remote: str) -> None:
    a, b, ids = pair(machines, remote)
    atlas = a.save("atlas", "Atlas", "The restoration project.")
    harbour = b.save("harbour", "Harbour", "Minutes of the harbour meeting.")
    settle(b, a)
    assert a.files() == b.files()
    for machine in (a, b):
        assert {machine.get(i)["id"] for i in (ids["dana"], atlas["id"], harbour["id"])} == {
            ids["dana"], atlas["id"], harbour["id"]}
        hits = machine.engine.search(machine.owner, {"query": "harbour"})
        assert harbour["id"] in {hit["id"] for hit in hits["hits"]}


def test_a_machine_behind_fast_forwards(machines: MachineFactory, remote: str) -> None:
    a, b, _ = pair(machines, remote)
    a.save("atlas", "Atlas", "The restoration project.")
    a.sync()
    before = b.head()
    [status] = b.sync()
    assert status["state"] == "ok" and (status["ahead"], status["behind"]) == (0, 0)
    assert b.head() == a.head() != before  # no merge commit of its own: the branch moved to a's
    assert b.files() == a.files()


def test_a_page_revised_on_both_is_one_conflict_with_the_same_current_revision_everywhere(
        machines: MachineFactory, remote: str) -> None:
    a, b, ids = pair(machines, remote)
    a.revise("dana-a", ids["dana"], 1, "Dana Whitaker", "Keeps the lighthouse running. Sails on Sundays.")
    b.revise("dana-b", ids["dana"], 1, "Dana Whitaker", "Keeps the lighthouse running. Paints on Sundays.")
    a.sync()
    b.sync()  # b merges a's revision with its own: the conflict is b's to list
    a.sync()
    assert a.files() == b.files()
    standing_a, standing_b = a.get(ids["dana"]), b.get(ids["dana"])
    assert standing_a["body"] == standing_b["body"] and standing_a["revision"] == standing_b["revision"] == 2
    for machine in (a, b):  # a fast-forwarded to b's merge, and lists its conflict too
        status = machine.status()
        assert status["conflictsWaiting"] == 1, machine.name
        [conflict] = status["conflicts"]
        assert conflict["recordId"] == ids["dana"] and conflict["remote"] == "origin"
        assert "Sails on Sundays" in conflict["diff"] and "Paints on Sundays" in conflict["diff"]
    other = "Paints" if "Sails" in standing_b["body"] else "Sails"
    assert other not in standing_b["body"]


def test_versions_a_killed_round_installed_but_never_committed_are_no_conflict(
        machines: MachineFactory, remote: str) -> None:
    """A round killed after installing b's versions and before its merge commit (the crash harness found it,
    tests/reliability/sync_crash.py) leaves them in a's vault, later committed as a's own commit with no
    link to b's: b's next revisions of them are one line of revisions, not conflicts."""
    a, b, ids = pair(machines, remote)
    atlas = b.save("atlas", "Atlas", "The restoration project.")
    b.revise("dana-b2", ids["dana"], 1, "Dana Whitaker", "Keeps the lighthouse running. Paints on Sundays.")
    b.sync()
    for relpath, data in b.files().items():  # what the killed round left in a's vault
        (a.vault / relpath).parent.mkdir(parents=True, exist_ok=True)
        (a.vault / relpath).write_bytes(data)
    b.revise("atlas-b2", atlas["id"], 1, "Atlas", "The restoration project, phase two.")
    b.revise("dana-b3", ids["dana"], 2, "Dana Whitaker", "Keeps the lighthouse running. Paints on Saturdays.")
    b.sync()
    settle(a, b)
    assert a.files() == b.files()
    for machine in (a, b):
        assert machine.status()["conflictsWaiting"] == 0, machine.status()["conflicts"]
        assert machine.get(atlas["id"])["revision"] == 2 and machine.get(ids["dana"])["revision"] == 3
        assert machine.get(ids["dana"])["body"] == "Keeps the lighthouse running. Paints on Saturdays.\n"


def test_a_correction_supersedes_on_every_machine(machines: MachineFactory, remote: str) -> None:
    a, b, _ = pair(machines, remote)
    first = a.engine.remember(a.owner, {"requestId": "m1", "items": [claim("Cut-over on Jan 15.", "on the 15th")]})
    old_id = first["items"][0]["id"]
    settle(a, b)
    assert b.get(old_id)["status"] == "current"
    correction = a.engine.remember(a.owner, {"requestId": "m2", "items": [
        claim("Cut-over moved to Jan 22.", "it slips to the 22nd", kind="correction", replaces=old_id)]})
    settle(a, b)
    assert b.get(old_id)["status"] == "superseded"
    assert b.get(correction["items"][0]["id"])["frontmatter"]["replaces"] == old_id
    assert a.files() == b.files()


def test_a_file_removed_by_hand_is_removed_everywhere(machines: MachineFactory, remote: str) -> None:
    a, b, ids = pair(machines, remote)
    atlas = a.save("atlas", "Atlas", "The restoration project.")
    settle(a, b)
    relpath = "private/" + a.get(atlas["id"])["path"]
    (a.vault / relpath).unlink()
    settle(a, b)
    assert not (b.vault / relpath).exists() and (b.vault / "private" / b.get(ids["dana"])["path"]).exists()
    with pytest.raises(NotFound):
        b.get(atlas["id"])
    assert a.files() == b.files()


def test_an_edit_made_by_hand_travels(machines: MachineFactory, remote: str) -> None:
    a, b, ids = pair(machines, remote)
    path = a.vault / "private" / a.get(ids["dana"])["path"]
    path.write_bytes(path.read_bytes().replace(b"running.", b"running, by hand."))
    settle(a, b)
    assert b.get(ids["dana"])["body"] == "Keeps the lighthouse running, by hand.\n"
    assert a.files() == b.files()


def test_three_machines_merging_in_different_orders_end_byte_identical(
        machines: MachineFactory, remote: str) -> None:
    a, b, ids = pair(machines, remote)
    c = machines("c")
    c.clone(remote)
    a.save("atlas", "Atlas", "The restoration project.")
    b.save("harbour", "Harbour", "Minutes of the harbour meeting.")
    c.save("pasta", "Pasta", "Lemon pasta on Fridays.")
    a.revise("dana-a", ids["dana"], 1, "Dana Whitaker", "Keeps the lighthouse. Sails.")
    c.revise("dana-c", ids["dana"], 1, "Dana Whitaker", "Keeps the lighthouse. Rows.")
    c.sync()
    a.sync()
    b.sync()
    b.save("notes", "Friday notes", "Status notes every Friday.")
    a.sync()
    c.sync()
    b.sync()
    settle(c, b, a)
    assert a.files() == b.files() == c.files()
    assert len({a.get(ids["dana"])["body"], b.get(ids["dana"])["body"], c.get(ids["dana"])["body"]}) == 1
    for machine in (a, b, c):  # one conflict, listed once on every machine
        assert [conflict["recordId"] for conflict in machine.status()["conflicts"]] == [ids["dana"]], machine.name


def test_a_removal_of_the_revision_that_stands_removes_the_page_on_every_machine(
        machines: MachineFactory, remote: str) -> None:
    a, b, ids = pair(machines, remote)
    a.save("atlas", "Atlas", "The restoration project.")  # so that the private partition is never empty
    settle(a, b)
    c = machines("c")
    c.clone(remote)
    b.revise("dana-b", ids["dana"], 1, "Dana Whitaker", "Keeps the lighthouse. Sails.")  # revision 2, not pushed
    c.revise("dana-c", ids["dana"], 1, "Dana Whitaker", "Keeps the lighthouse. Rows.")
    c.revise("dana-c2", ids["dana"], 2, "Dana Whitaker", "Keeps the lighthouse. Rows daily.")  # revision 3
    c.sync()
    a.sync()  # a takes c's revision 3 and removes the page
    (a.vault / "private" / a.get(ids["dana"])["path"]).unlink()
    a.sync()
    b.sync()  # b's revision 2 meets a's removal of revision 3: the removal applies, b's is listed
    settle(c, b, a)
    assert a.files() == b.files() == c.files()
    for machine in (a, b, c):
        with pytest.raises(NotFound):
            machine.get(ids["dana"])
    [conflict] = b.status()["conflicts"]
    assert (conflict["recordId"], conflict["kind"]) == (ids["dana"], "revised_on_both")
    assert (conflict["standing"]["revision"], conflict["other"]["revision"]) == (3, 2)


def test_a_page_moved_and_removed_removed_where_it_was_and_revised_ends_revised_where_it_was_moved_everywhere(
        machines: MachineFactory, remote: str) -> None:
    a, b, ids = pair(machines, remote)
    a.save("atlas", "Atlas", "The restoration project.")  # so that the private partition is never empty
    settle(a, b)
    c = machines("c")
    c.clone(remote)
    c.revise("dana-c", ids["dana"], 1, "Dana Whitaker", "Keeps the lighthouse. Rows.")  # revision 2, not pushed
    relpath = a.get(ids["dana"])["path"]
    moved = relpath.replace(".md", "-keeper.md")
    (a.vault / "private" / relpath).rename(a.vault / "private" / moved)
    a.sync()  # the move, by hand
    (a.vault / "private" / moved).unlink()
    a.sync()  # then the removal, where it was moved
    (b.vault / "private" / relpath).unlink()  # b removes it where it was, before it hears of either
    b.sync()  # and takes a's history: removed on both
    c.sync()  # c's revision 2 stands over both removals (of revision 1), where a moved the page
    settle(c, a, b)
    assert a.files() == b.files() == c.files()
    for machine in (a, b, c):
        page = machine.get(ids["dana"])
        assert (page["path"], page["revision"]) == (moved, 2), machine.name


def test_a_page_moved_on_both_machines_goes_where_the_last_moves_of_their_lines_put_it_everywhere(
        machines: MachineFactory, remote: str) -> None:
    a, b, ids = pair(machines, remote)
    a.save("atlas", "Atlas", "The restoration project.")  # so that the private partition is never empty
    settle(a, b)

    def move(machine: Machine, name: str) -> None:  # by hand, in its folder, then a round
        path = machine.get(ids["dana"])["path"]
        (machine.vault / "private" / path).rename(machine.vault / "private" / path.rsplit("/", 1)[0] / name)
        assert [status["state"] for status in machine.sync()] == ["ok"]

    move(b, "ann.md")  # pushed before a hears of it
    move(a, "zed.md")  # a merges b's move: zed, the greater
    move(b, "cat.md")  # made before b heard of zed; b then merges a's merge: zed again, greater than cat
    assert b.get(ids["dana"])["path"].endswith("/zed.md")
    move(a, "bea.md")  # made before a heard of cat; a then merges b's: cat and bea are the last moves, cat stands
    settle(a, b)
    assert a.files() == b.files()
    for machine in (a, b):
        assert machine.get(ids["dana"])["path"].endswith("/cat.md"), machine.name


def test_nothing_new_makes_no_commit_and_no_push(machines: MachineFactory, remote: str) -> None:
    a, b, _ = pair(machines, remote)
    a.save("atlas", "Atlas", "The restoration project.")
    b.save("harbour", "Harbour", "Minutes of the harbour meeting.")
    settle(a, b)
    heads, refs = (a.head(), b.head()), remote_refs(remote)
    for _ in range(3):
        a.sync()
        b.sync()
    assert (a.head(), b.head()) == heads
    assert remote_refs(remote) == refs
    assert a.head() == b.head()  # no ping-pong: after the rounds both hold one head


def test_a_clone_refuses_an_agent_with_a_store_and_a_store_already_here(
        machines: MachineFactory, remote: str) -> None:
    a, b, _ = pair(machines, remote)
    with pytest.raises(Conflict, match="already has its own store"):
        a.clone(remote)
    with pytest.raises(Conflict, match="already here"):
        clone_store(b.engine, remote, "helper")
    assert b.engine.registry.own_store_of("helper") is None


def test_a_clone_for_a_new_agent_adds_it_with_its_token(machines: MachineFactory, remote: str,
                                                        tmp_path: Path) -> None:
    a, _, ids = pair(machines, remote)
    c = machines("c")
    cloned = clone_store(c.engine, remote, "helper")
    token = Path(cloned["tokenFile"]).read_text(encoding="utf-8").strip()
    assert token and cloned["owner"] is False and not c.engine.registry.agent("helper").owner
    assert c.engine.registry.own_store_of("helper").store_id == a.record.store_id
    with pytest.raises(Denied):  # without owner authority, the private partition is not its
        c.engine.get_record(AgentCaller(token, {"kind": "owner-private"}), ids["dana"])


def test_the_owners_agent_cloned_on_a_second_machine_reads_its_private_partition(machines: MachineFactory,
                                                                                 remote: str) -> None:
    a, _, ids = pair(machines, remote)
    c = machines("c")
    cloned = clone_store(c.engine, remote, "laptop", owner=True)
    assert cloned["owner"] is True and c.engine.registry.agent("laptop").owner
    caller = AgentCaller(Path(cloned["tokenFile"]).read_text(encoding="utf-8").strip(), {"kind": "owner-private"})
    assert c.engine.get_record(caller, ids["dana"])["frontmatter"]["title"] == "Dana Whitaker"


def test_a_clone_never_gives_an_agent_already_here_owner_authority(machines: MachineFactory, remote: str) -> None:
    pair(machines, remote)
    c = machines("c")
    c.engine.add_agent("helper")
    with pytest.raises(Conflict, match="without owner authority"):
        clone_store(c.engine, remote, "helper", owner=True)
    assert not c.engine.registry.agent("helper").owner and c.engine.registry.own_store_of("helper") is None
    assert not c.state.stores.exists() and c.engine.registry.stores() == []


def test_a_remote_of_several_stores_needs_a_store_id(machines: MachineFactory, remote: str) -> None:
    a, _, _ = pair(machines, remote)
    other = machines("other")
    other.save("x", "Xavier", "Another store.")
    other.add_remote(remote)
    other.sync()
    c = machines("c")
    with pytest.raises(InvalidParams, match="several stores"):
        c.clone(remote)
    assert c.engine.registry.own_store_of(AGENT) is None
    cloned = clone_store(c.engine, remote, AGENT, store_id=other.record.store_id)
    assert cloned["storeId"] == other.record.store_id and c.files() == other.files()


def test_a_rewritten_remote_is_refused_and_said_so(machines: MachineFactory, remote: str) -> None:
    a, b, _ = pair(machines, remote)
    a.save("atlas", "Atlas", "The restoration project.")
    a.sync()
    [branch] = [ref for ref in remote_refs(remote) if ref.endswith("/" + read_status_machine(a))]
    first = subprocess.run(["git", "--git-dir", remote, "rev-list", "--max-parents=0", branch],
                           check=True, capture_output=True, text=True).stdout.split()[0]
    subprocess.run(["git", "--git-dir", remote, "update-ref", branch, first], check=True)
    a.save("harbour", "Harbour", "Minutes of the harbour meeting.")
    [status] = a.sync()
    assert status["state"] == "failing" and status["lastError"]["code"] == "rewritten", status
    assert remote_refs(remote)[branch] == first  # never forced back
    assert read_status(a.record)[0]["lastError"]["code"] == "rewritten"


def test_an_unreachable_remote_leaves_writes_going_on(machines: MachineFactory, tmp_path: Path) -> None:
    a = machines("a")
    a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
    a.add_remote(str(tmp_path / "nowhere.git"))
    assert a.engine.runtime(a.record).checkpoint()["state"] == "committed"  # the page's one commit, now
    [status] = a.sync()
    assert status["state"] == "failing" and status["lastError"]["code"] == "unreachable", status
    assert status["lastSuccess"] is None and status["lastError"]["message"]
    assert (status["ahead"], status["behind"]) == (1, None)  # the one commit here, nothing known of the remote
    a.save("atlas", "Atlas", "The restoration project.")
    [remote_status] = a.status()["remotes"]
    assert remote_status["state"] == "failing"


def test_a_round_cut_short_reads_as_interrupted_until_the_next_one(machines: MachineFactory, remote: str) -> None:
    a, _, _ = pair(machines, remote)
    path = a.record.path / "sync" / "status.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["remotes"]["origin"]["status"]["state"] = "syncing"  # as a killed round leaves it
    path.write_text(json.dumps(document), encoding="utf-8")
    [status] = a.status()["remotes"]
    assert status["state"] == "failing" and status["lastError"]["code"] == "interrupted"
    assert [status["state"] for status in a.sync()] == ["ok"]
    assert a.status()["remotes"][0]["state"] == "ok"


def test_a_torn_status_file_reads_as_never_and_is_rewritten(machines: MachineFactory, remote: str) -> None:
    a, _, _ = pair(machines, remote)
    path = a.record.path / "sync" / "status.json"
    path.write_text("{not json", encoding="utf-8")
    assert a.status()["remotes"][0]["state"] == "never"
    a.sync()
    assert json.loads(path.read_text(encoding="utf-8"))["remotes"]["origin"]["status"]["state"] == "ok"
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_syncing_every_store_goes_on_past_one_that_cannot_start(machines: MachineFactory, remote: str) -> None:
    a, _, _ = pair(machines, remote)
    other = a.engine.resolver.effective("helper", create=True)
    assert other is not None
    (other.path / "sync").mkdir()
    (other.path / "sync" / "remotes.json").write_text("{broken", encoding="utf-8")
    answer = sync_now(a.engine)
    by_store = {store["storeId"]: store for store in answer["stores"]}
    assert "cannot be used" in by_store[other.store_id]["problem"]
    assert [status["state"] for status in by_store[a.record.store_id]["remotes"]] == ["ok"]
    assert answer["failing"] == 1


def test_a_conversation_partition_travels(machines: MachineFactory, remote: str) -> None:
    a, b, _ = pair(machines, remote)
    session = "3d5e7f90-1a2b-4c3d-8e9f-0a1b2c3d4e5f"
    chat = conversation(a.owner.token, session)
    note = a.engine.save_page(chat, {"requestId": "c1", "type": "note", "title": "Harbour call",
                                     "body": "Harbour call on Monday."})
    settle(a, b)
    assert a.files() == b.files()
    assert any(path.startswith(f"conversations/{session}/") for path in b.files())
    store = b.engine.runtime(b.record).store
    assert f"conversation:{session}" in store.partitions()
    assert note["id"]
