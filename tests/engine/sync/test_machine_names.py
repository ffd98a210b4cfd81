"""Machines named as their owner knows them: each records its host name beside its branch on a remote
(``refs/knowledge-names/<store>/<machine>``), and the other machines' remote status gives it with the id."""

from __future__ import annotations

import json
import subprocess

import pytest

import engine.sync.round as round_module
from engine.cli.sync_commands import _remote_lines
from engine.sync.remotes import check_remote_url
from engine.sync.round import read_status, status_file
from engine.sync.transport import NAMES, machine_name
from tests.engine.sync.gitservers import GitRemote
from tests.engine.sync.machines import Machine as MachineOnDisk, record
from tests.engine.sync.round_machines import Machine, MachineFactory, remote_refs
from tests.engine.sync.test_transport_gcrypt import gpg_key  # noqa: F401 - the fixture


def named(monkeypatch: pytest.MonkeyPatch, machine: Machine, name: str) -> list:
    """A round of ``machine`` on a computer called ``name``."""
    monkeypatch.setattr(round_module, "this_machine_name", lambda: name)
    return machine.sync()


def machine_of(machine: Machine) -> str:
    return machine.status()["machineId"]


def name_refs(url: str) -> dict[str, str]:
    listing = subprocess.run(["git", "--git-dir", url, "for-each-ref", "--format=%(refname) %(objectname)",
                              f"{NAMES}/"], check=True, capture_output=True, text=True).stdout
    return dict(line.split(" ", 1) for line in listing.splitlines())


def test_each_machine_sees_the_others_by_their_computers_names(
        machines: MachineFactory, remote: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = machines("a"), machines("b")
    a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
    a.add_remote(remote)
    assert [status["state"] for status in named(monkeypatch, a, "laptop")] == ["ok"]
    monkeypatch.setattr(round_module, "this_machine_name", lambda: "desktop")
    assert b.clone(remote)["remote"]["state"] == "ok"
    [seen_by_b] = b.remote_status()
    assert seen_by_b["machines"] == [machine_of(a)] and seen_by_b["machineNames"] == {machine_of(a): "laptop"}
    [seen_by_a] = named(monkeypatch, a, "laptop")
    assert seen_by_a["machineNames"] == {machine_of(b): "desktop"}
    assert read_status(a.record)[0]["machineNames"] == {machine_of(b): "desktop"}

    # Rounds with nothing new move no name; a new name is a fast-forward from the one there.
    names, branches = name_refs(remote), remote_refs(remote)
    assert sorted(names) == sorted(f"{NAMES}/{a.record.store_id}/{machine_of(m)}" for m in (a, b))
    named(monkeypatch, a, "laptop")
    assert name_refs(remote) == names and remote_refs(remote) == branches
    named(monkeypatch, a, "laptop-2")
    ref = f"{NAMES}/{a.record.store_id}/{machine_of(a)}"
    parent = subprocess.run(["git", "--git-dir", remote, "rev-parse", f"{ref}^"], check=True, capture_output=True,
                            text=True).stdout.strip()
    assert name_refs(remote)[ref] != names[ref] and parent == names[ref]
    assert remote_refs(remote) == branches  # a name is no branch: the store's history is as it was
    [seen_by_b] = named(monkeypatch, b, "desktop")
    assert seen_by_b["machineNames"] == {machine_of(a): "laptop-2"}
    assert not any(b"laptop" in data for data in b.files().values())   # never in the vault


def test_a_machine_without_a_name_is_known_by_its_id_and_an_old_status_reads_without_names(
        machines: MachineFactory, remote: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = machines("a"), machines("b")
    a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
    a.add_remote(remote)
    named(monkeypatch, a, "\n\x07 ")   # nothing printable: an older engine's machine records no name either
    assert name_refs(remote) == {}
    monkeypatch.setattr(round_module, "this_machine_name", lambda: "desktop")
    assert b.clone(remote)["remote"]["state"] == "ok"
    [seen_by_b] = b.remote_status()
    assert seen_by_b["machines"] == [machine_of(a)] and seen_by_b["machineNames"] == {}

    path = status_file(b.record)   # status.json as an engine before names wrote it
    document = json.loads(path.read_text(encoding="utf-8"))
    for entry in document["remotes"].values():
        del entry["status"]["machineNames"]
    path.write_text(json.dumps(document), encoding="utf-8")
    [old] = read_status(b.record)
    assert old["machines"] == [machine_of(a)] and old["machineNames"] == {}


def test_a_name_is_one_printable_line_of_at_most_64_characters() -> None:
    assert machine_name("  lap\ttop\x1b[31m\n ") == "laptop[31m"
    assert machine_name("x" * 100) == "x" * 64
    assert machine_name("\u202eevil") == "evil"


def test_a_name_travels_through_an_encrypted_remote_and_is_not_readable_there(gpg_key: str, tmp_path) -> None:
    laptop, desktop = MachineOnDisk(tmp_path / "laptop"), MachineOnDisk(tmp_path / "desktop")
    folder = tmp_path / "encrypted"
    url = check_remote_url(f"gcrypt::{folder}")
    first = laptop.write({"private/pages/alpha.md": record("Alpha")}, "alpha")
    assert laptop.transport.push("nas", url, first) is True
    assert laptop.transport.push_name(url, "Kitchen-Laptop", None) is True
    [(commit, said)] = desktop.transport.fetch("nas", url).names.values()
    assert said == "Kitchen-Laptop" and laptop.transport.fetch("nas", url).names == {laptop.id: (commit, said)}
    assert laptop.transport.push_name(url, "Kitchen-Laptop", (commit, said)) is False   # there already
    stored = b"".join(path.read_bytes() for path in folder.rglob("*") if path.is_file())
    assert stored and b"Kitchen-Laptop" not in stored


def test_sync_status_names_the_other_machines_with_their_ids() -> None:
    remote = {"name": "nas", "url": "/srv/notes.git", "state": "ok", "lastAttempt": None, "lastSuccess": None,
              "lastError": None, "ahead": 0, "behind": 0, "machines": ["mc_1", "mc_2"],
              "machineNames": {"mc_1": "laptop"}}
    assert _remote_lines(remote)[-1] == "        other machines: laptop (mc_1), mc_2"
    assert _remote_lines({**remote, "machineNames": {}})[-1] == "        other machines: mc_1, mc_2"


def test_names_travel_through_each_server(tmp_path, any_remote: GitRemote, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = Machine(tmp_path, "a"), Machine(tmp_path, "b")
    try:
        a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
        a.add_remote(any_remote.url)
        assert [status["state"] for status in named(monkeypatch, a, "laptop")] == ["ok"]
        monkeypatch.setattr(round_module, "this_machine_name", lambda: "desktop")
        assert b.clone(any_remote.url)["remote"]["machineNames"] == {machine_of(a): "laptop"}
        [status] = named(monkeypatch, a, "laptop")
        assert status["machineNames"] == {machine_of(b): "desktop"}
        assert len(name_refs(str(any_remote.path))) == 2
    finally:
        a.close()
        b.close()
