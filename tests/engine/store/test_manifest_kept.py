"""The manifest a publication writes is kept as read: the next check does not read it back, and any other
change to vault.json is still read."""

from __future__ import annotations

import json

import pytest

from engine.core.errors import StoreUnavailable
from engine.store import store as store_module
from engine.vault.manifest import read_manifest
from tests.helpers import page


def test_the_checkpoint_written_is_kept_equal_to_the_file_and_not_read_back(engine, owner, monkeypatch):
    engine.save_page(owner, page("r1", "Dana"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    store = runtime.store
    reads = []
    read = store_module.read_manifest
    monkeypatch.setattr(store_module, "read_manifest", lambda path: reads.append(path) or read(path))
    engine.save_page(owner, page("r2", "Sam"))
    engine.save_page(owner, page("r3", "Kim"))
    assert reads == []
    kept = runtime.call(store.manifest)
    assert kept == read_manifest(store.manifest_path)
    assert kept.checkpoint == runtime.call(store.applied_checkpoint) == 3


def test_a_change_to_the_manifest_after_a_write_is_read(engine, owner):
    engine.save_page(owner, page("r1", "Dana"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    store = runtime.store
    data = json.loads(store.manifest_path.read_bytes())
    data["checkpoint"] = 7
    store.manifest_path.write_text(json.dumps(data) + "\n")  # in place: the same inode, a new size
    assert runtime.call(store.manifest).checkpoint == 7
    with pytest.raises(StoreUnavailable, match="checkpoint 7 conflicts"):
        engine.save_page(owner, page("r2", "Sam"))
