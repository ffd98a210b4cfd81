"""Machines for the round tests: each a state directory with its own engine, syncing one store through a
bare repository the test makes (or a ``git daemon`` from gitservers.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Callable

from engine.access.authority import AgentCaller
from engine.service import Engine
from engine.state.registry import StoreRecord
from engine.state.statedir import StateDir
from engine.sync.clone import clone_store
from engine.sync.merge import is_synced
from engine.sync.remotes import RemoteBook
from engine.sync.round import read_status
from engine.sync.service import sync_now, sync_status
from engine.sync.status import StoreSyncStatus, SyncRemoteStatus

AGENT = "main"


def bare_repository(path: Path) -> str:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return str(path)


class Machine:
    """One machine: a state directory, its engine (no watcher: every operation rescans) and the agent
    ``main`` speaking as the owner."""

    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.state = StateDir(root / name)
        self.engine = Engine(self.state, watch=False)
        self.owner = AgentCaller(self.engine.add_agent(AGENT, owner=True), {"kind": "owner-private"})

    def close(self) -> None:
        self.engine.close()

    @property
    def record(self) -> StoreRecord:
        record = self.engine.registry.own_store_of(AGENT)
        assert record is not None
        return record

    @property
    def vault(self) -> Path:
        return self.record.path / "vault"

    def add_remote(self, url: str, name: str = "origin") -> None:
        RemoteBook(self.state, self.engine.resolver).add(name, url, agent=AGENT)

    def clone(self, url: str) -> dict[str, Any]:
        return clone_store(self.engine, url, AGENT)

    def sync(self, remote: str | None = None) -> list[SyncRemoteStatus]:
        [store] = sync_now(self.engine, agent=AGENT, remote=remote)["stores"]
        return store["remotes"]

    def status(self) -> StoreSyncStatus:
        [store] = [entry for entry in sync_status(self.engine)["stores"] if entry["storeId"] == self.record.store_id]
        return store

    def remote_status(self) -> list[SyncRemoteStatus]:
        return read_status(self.record)

    def files(self) -> dict[str, bytes]:
        """The vault's synced files, exactly."""
        return {str(path.relative_to(self.vault)): path.read_bytes() for path in sorted(self.vault.rglob("*"))
                if path.is_file() and ".git" not in path.relative_to(self.vault).parts
                and is_synced(str(path.relative_to(self.vault)))}

    def head(self) -> str | None:
        runtime = self.engine.runtime(self.record)
        assert runtime.git is not None
        return runtime.git.head()

    def save(self, request_id: str, title: str, body: str, **extra: Any) -> dict[str, Any]:
        return self.engine.save_page(self.owner, {"requestId": request_id, "type": "person", "title": title,
                                                  "body": body, **extra})

    def revise(self, request_id: str, record_id: str, revision: int, title: str, body: str) -> dict[str, Any]:
        return self.save(request_id, title, body, id=record_id, expectedRevision=revision)

    def get(self, record_id: str) -> dict[str, Any]:
        return self.engine.get_record(self.owner, record_id)


def remote_refs(url: str) -> dict[str, str]:
    """The bare repository's branches: ref -> commit."""
    listing = subprocess.run(["git", "--git-dir", url, "for-each-ref", "--format=%(refname) %(objectname)",
                              "refs/heads/"], check=True, capture_output=True, text=True).stdout
    return dict(line.split(" ", 1) for line in listing.splitlines())


MachineFactory = Callable[[str], Machine]


def settle(*machines: Machine) -> None:
    """Rounds until every machine holds what every other wrote: each once, then each again."""
    for _ in range(2):
        for machine in machines:
            assert [status["state"] for status in machine.sync()] == ["ok"], machine.name
