"""Sync rounds over real git servers (tests/engine/sync/gitservers.py): a bare repository on disk, ``git
daemon`` and ``git http-backend`` on loopback; two machines clone, write, merge and settle on one head."""

from __future__ import annotations

from pathlib import Path

from tests.engine.sync.gitservers import GitRemote
from tests.engine.sync.round_machines import Machine, remote_refs


def test_two_machines_converge_through_each_server(tmp_path: Path, any_remote: GitRemote) -> None:
    a, b = Machine(tmp_path, "a"), Machine(tmp_path, "b")
    try:
        dana = a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
        a.add_remote(any_remote.url)
        assert [status["state"] for status in a.sync()] == ["ok"]
        cloned = b.clone(any_remote.url)
        assert cloned["remote"]["state"] == "ok" and cloned["storeId"] == a.record.store_id
        a.revise("dana-a", dana["id"], 1, "Dana Whitaker", "Keeps the lighthouse running. Sails.")
        b.revise("dana-b", dana["id"], 1, "Dana Whitaker", "Keeps the lighthouse running. Rows.")
        b.save("harbour", "Harbour", "Minutes of the harbour meeting.")
        for machine in (a, b, a, b):
            assert [status["state"] for status in machine.sync()] == ["ok"], machine.name
        assert a.files() == b.files() and a.head() == b.head()
        assert a.get(dana["id"])["body"] == b.get(dana["id"])["body"]
        assert a.status()["conflictsWaiting"] == b.status()["conflictsWaiting"] == 1
        heads, refs = a.head(), remote_refs(str(any_remote.path))
        for machine in (a, b, a, b):
            machine.sync()
        assert (a.head(), b.head(), remote_refs(str(any_remote.path))) == (heads, heads, refs)
    finally:
        a.close()
        b.close()
