"""A round with nothing new runs no push: the fetch found this machine's branch on the remote at the head."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.sync.transport import Transport
from tests.engine.sync.round_machines import Machine, bare_repository, remote_refs


def test_a_round_with_nothing_new_pushes_nothing_and_one_with_a_write_pushes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = bare_repository(tmp_path / "remote.git")
    a = Machine(tmp_path, "a")
    try:
        a.save("dana", "Dana Whitaker", "Keeps the lighthouse running.")
        a.add_remote(remote)
        assert [status["state"] for status in a.sync()] == ["ok"]
        pushes: list[str] = []
        push = Transport.push

        def counted(self: Transport, name: str, url: str, commit: str) -> Any:
            pushes.append(commit)
            return push(self, name, url, commit)

        monkeypatch.setattr(Transport, "push", counted)
        refs = remote_refs(remote)
        assert [status["state"] for status in a.sync()] == ["ok"]
        assert pushes == [] and remote_refs(remote) == refs
        assert a.remote_status()[0]["ahead"] == 0
        a.save("rowan", "Rowan Pike", "Runs the ferry schedule.")
        assert [status["state"] for status in a.sync()] == ["ok"]
        assert pushes == [a.head()] and list(remote_refs(remote).values()) == [a.head()]
        assert a.remote_status()[0]["ahead"] == 0
    finally:
        a.close()
