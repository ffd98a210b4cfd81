"""The fsync rounds of a publication: the checkpoint written beside the installs, directories synced at once.

Whatever overlaps, a publication is acknowledged only once its files, their directories and the checkpoint
are durable, and one the disk refuses at any of them is rolled back whole with the checkpoint set back.
"""

from __future__ import annotations

import errno
import json
import sqlite3
import threading
from pathlib import Path

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import StoreUnavailable
from engine.core.faults import Faults
from engine.service import Engine
from engine.store import publication
from engine.store.store import Store
from tests.helpers import claim, only_store, page, private_dir, vault_snapshot


def _journal(state_dir) -> list[str]:
    with sqlite3.connect(only_store(state_dir) / "state.sqlite") as db:
        return [state for (state,) in db.execute("SELECT state FROM publications ORDER BY seq")]


def _checkpoints(state_dir) -> tuple[int, int]:
    """(the manifest's checkpoint, the last applied publication)."""
    manifest = json.loads((only_store(state_dir) / "vault.json").read_text(encoding="utf-8"))
    with sqlite3.connect(only_store(state_dir) / "state.sqlite") as db:
        [(applied,)] = db.execute("SELECT COALESCE(MAX(seq), 0) FROM publications WHERE state = 'applied'")
    return manifest["checkpoint"], applied


def test_a_checkpoint_the_disk_refuses_beside_the_installs_rolls_the_publication_back(state_dir, monkeypatch):
    with Engine(state_dir, watch=False, git=False) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("first", "Dana"))
        before = vault_snapshot(private_dir(state_dir))
        set_checkpoint = Store.set_checkpoint
        refused = []

        def full_disk_once(store: Store, seq: int) -> None:
            if not refused:  # the checkpoint written beside the installs; the roll-back's own succeeds
                refused.append(seq)
                raise OSError(errno.ENOSPC, "No space left on device")
            set_checkpoint(store, seq)

        monkeypatch.setattr(Store, "set_checkpoint", full_disk_once)
        request = {"requestId": "second", "subject": "Dana", "items": [claim("Dana likes tea.", "Tea, always.")]}
        with pytest.raises(StoreUnavailable) as error:
            engine.remember(owner, request)
        assert error.value.details["errno"] == "ENOSPC" and refused
        assert vault_snapshot(private_dir(state_dir)) == before
        assert _journal(state_dir) == ["applied", "rolled_back"]
        assert _checkpoints(state_dir) == (1, 1)
        retried = engine.remember(owner, request)
        assert engine.get_record(owner, retried["items"][0]["id"])["status"] == "current"
        assert _checkpoints(state_dir) == (3, 3)


def test_a_publication_refused_at_installation_leaves_the_checkpoint_at_the_last_acknowledged(state_dir):
    """The checkpoint written beside named the refused publication; the roll-back sets it back."""
    with Engine(state_dir, watch=False, git=False, faults=Faults("installed:2:enospc")) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("first", "Dana"))
        with pytest.raises(StoreUnavailable):
            engine.save_page(owner, page("second", "Sam"))
        assert _journal(state_dir) == ["applied", "rolled_back"]
        assert _checkpoints(state_dir) == (1, 1)
        engine.save_page(owner, page("third", "Ari"))
        assert _checkpoints(state_dir) == (3, 3)


def test_the_directories_of_a_publication_are_each_synced_before_it_is_acknowledged(state_dir, monkeypatch):
    synced: list[Path] = []
    fsync_dir = publication.fsync_dir

    def recorded(directory: Path) -> None:
        fsync_dir(directory)
        synced.append(directory)

    monkeypatch.setattr(publication, "fsync_dir", recorded)
    with Engine(state_dir, watch=False, git=False) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("first", "Dana"))
        synced.clear()
        receipt = engine.remember(owner, {"requestId": "claims", "subject": "Dana",
                                          "items": [claim("Dana likes tea.", "Tea, always.")]})
        root = private_dir(state_dir)
        # The excerpt's source and descriptor, and the claim: each directory once, all before the receipt.
        assert sorted(synced) == sorted({path.parent for path in root.rglob("*")
                                         if path.is_file() and path.parent.name in ("claims", "sources")}
                                        | {(root / "claims" / f"{receipt['items'][0]['id']}.md").parent})
        assert len(synced) == len(set(synced)) >= 2


def test_the_directories_are_synced_while_the_checkpoint_is_written_beside(state_dir, monkeypatch):
    """The checkpoint written beside does not hold the directory syncs back: it waits here for one, which a
    lane waiting for the checkpoint first would never start (the wait would end unset)."""
    directory_synced = threading.Event()
    fsync_dir, set_checkpoint = publication.fsync_dir, Store.set_checkpoint
    waits: list[bool] = []

    def recorded(directory: Path) -> None:
        fsync_dir(directory)
        directory_synced.set()

    def after_a_directory(store: Store, seq: int) -> None:
        if threading.current_thread().name.startswith("sync-"):
            waits.append(directory_synced.wait(30))
        set_checkpoint(store, seq)

    monkeypatch.setattr(publication, "fsync_dir", recorded)
    monkeypatch.setattr(Store, "set_checkpoint", after_a_directory)
    with Engine(state_dir, watch=False, git=False) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("first", "Dana"))
    assert waits == [True]
    assert _checkpoints(state_dir) == (1, 1)
