"""Exact reads, lookups, reference reads and history answer beside a busy lane, as searches do."""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest

from engine.access.authority import AgentCaller
from engine.service import Engine
from tests.helpers import lane_held, page, private_dir, wait_for


@pytest.fixture
def watched(state_dir):
    with Engine(state_dir, watch=True) as opened:
        owner = AgentCaller(opened.add_agent("main", owner=True), {"kind": "owner-private"})
        created = opened.save_page(owner, page("p1", "Harbour", type_="place"))
        opened.search(owner, {"query": "Harbour"})  # the partition is followed from here on
        yield opened, owner, created


def _beside_held_lane(engine: Engine, read: Callable[[], Any]) -> Any:
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    release, holder = lane_held(runtime)
    answers: list[Any] = []
    reader = threading.Thread(target=lambda: answers.append(read()))
    try:
        reader.start()
        reader.join(10)
        assert not reader.is_alive(), "the read waited for the lane"
    finally:
        release.set()
        holder.join()
        reader.join()
    return answers[0]


def test_an_exact_read_answers_beside_a_busy_lane(watched):
    engine, owner, created = watched
    record = _beside_held_lane(engine, lambda: engine.get_record(owner, created["id"]))
    assert record["frontmatter"]["title"] == "Harbour"


def test_a_lookup_answers_beside_a_busy_lane(watched):
    engine, owner, created = watched
    found = _beside_held_lane(engine, lambda: engine.lookup(owner, "harbour"))
    assert [match["id"] for match in found["matches"]] == [created["id"]]


def test_a_reference_read_and_a_history_answer_beside_a_busy_lane(watched):
    engine, owner, created = watched
    [hit] = engine.search(owner, {"query": "Harbour"})["hits"]
    lines = _beside_held_lane(engine, lambda: engine.read(owner, {"ref": hit["ref"]}))
    assert "Harbour" in lines["text"]
    history = _beside_held_lane(engine, lambda: engine.history(owner, created["id"]))
    assert [entry["revision"] for entry in history["revisions"]] == [1]


def test_an_exact_read_of_a_file_edited_before_the_watcher_said_so_goes_through_the_lane(watched):
    """Beside the lane the catalog is a snapshot and may not catalogue the edit: the read is done again
    on the lane, which does, so the edit is in the history before it is served."""
    engine, owner, created = watched
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    [path] = private_dir(engine.state).glob("pages/**/*.md")
    runtime.watching = True
    with runtime._dirty_lock:  # as if the watcher had not reported the edit yet
        edited = path.read_text(encoding="utf-8").replace("Body text.", "Seagulls everywhere.")
        path.write_text(edited, encoding="utf-8")
    wait_for(lambda: "private" in runtime._dirty)
    with runtime._dirty_lock:
        runtime._dirty.pop("private")
    assert runtime._beside_lane("private")
    record = engine.get_record(owner, created["id"])
    assert "Seagulls everywhere." in record["body"]
    assert [entry["origin"] for entry in engine.history(owner, created["id"])["revisions"]] == [
        "publication", "external"]
