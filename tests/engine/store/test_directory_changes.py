"""A directory the watcher reports (made, moved in or out, removed) is synced as a subtree, not by a walk of
the whole partition: what a write costs does not grow with the partition when writes make directories."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.access.authority import AgentCaller
from engine.service import Engine
from engine.store import walk as walk_module
from tests.helpers import page, private_dir, wait_for


@pytest.fixture
def watched(state_dir, monkeypatch):
    walked: list[Path] = []
    walk_partition = walk_module.walk_partition

    def counted(root: Path):
        walked.append(root)
        return walk_partition(root)

    monkeypatch.setattr(walk_module, "walk_partition", counted)
    with Engine(state_dir, watch=True) as opened:
        owner = AgentCaller(opened.add_agent("main", owner=True), {"kind": "owner-private"})
        yield opened, owner, walked


def _titles(engine: Engine, owner: AgentCaller, query: str) -> list[str]:
    return sorted(hit["title"] for hit in engine.search(owner, {"query": query})["hits"])


def test_a_directory_moved_in_and_out_is_synced_as_a_subtree(watched, tmp_path: Path) -> None:
    engine, owner, walked = watched
    for number in range(3):
        engine.save_page(owner, page(f"p{number}", f"Lighthouse {number}", type_="place"))
    assert _titles(engine, owner, "lighthouse") == ["Lighthouse 0", "Lighthouse 1", "Lighthouse 2"]
    pages = private_dir(engine.state) / "pages"
    moved = sorted(pages.rglob("lighthouse-1.md")) + sorted(pages.rglob("lighthouse-2.md"))
    outside = tmp_path / "incoming"
    outside.mkdir()
    for path in moved:
        shutil.move(path, outside / path.name)
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    wait_for(lambda: _titles(engine, owner, "lighthouse") == ["Lighthouse 0"])
    walked.clear()

    shutil.move(outside, pages / "incoming")  # one event for the directory, none for the files in it
    wait_for(lambda: "pages/incoming/" in (runtime._dirty.get("private") or set()))
    assert _titles(engine, owner, "lighthouse") == ["Lighthouse 0", "Lighthouse 1", "Lighthouse 2"]
    assert walked == [private_dir(engine.state) / "pages" / "incoming/"]

    walked.clear()
    shutil.move(pages / "incoming", tmp_path / "gone")
    wait_for(lambda: "pages/incoming/" in (runtime._dirty.get("private") or set()))
    assert _titles(engine, owner, "lighthouse") == ["Lighthouse 0"]
    assert walked == []  # the directory is gone: only what the catalog knew under it was looked at


def test_a_directory_replaced_by_a_symlink_makes_the_whole_partition_walked(watched, tmp_path: Path) -> None:
    engine, owner, walked = watched
    engine.save_page(owner, page("p0", "Harbour", type_="place"))
    engine.search(owner, {"query": "harbour"})
    store_id = engine.registry.own_store_of("main")
    runtime = engine.runtime(store_id)
    # From here the test is the watcher: the real one's reports of the page's folders, or of the link, arrive
    # when its thread gets to them, and one taken in before the search below added a subtree walk to the list.
    assert engine.watcher is not None
    engine.watcher.unwatch(store_id)
    engine.search(owner, {"query": "harbour"})   # takes in whatever it reported before
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    walked.clear()
    (private_dir(engine.state) / "pages" / "linked").symlink_to(elsewhere, target_is_directory=True)
    runtime.mark_dirty("private/pages/linked", is_directory=True)  # as a watcher that reports it so would
    engine.search(owner, {"query": "harbour"})
    assert walked == [private_dir(engine.state)]
    symlinks = {f["path"] for f in engine.diagnostics(owner)["findings"] if f["code"] == "symlink"}
    assert symlinks == {"pages/linked"}
