"""The next group planned while the last one's files sync (engine/write_lane.py).

Each test holds a group's second file on its sync thread (and its first, made on the lane, until the test
has queued the next write), so the next write is queued while the group's files are being synced.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest

import engine.service as service
from engine.access.authority import AgentCaller
from engine.core.errors import KnowledgeError
from engine.service import Engine
from engine.store import publication
from tests.helpers import claim, lane_held, page, private_dir, wait_for


@pytest.fixture
def watched(state_dir):
    with Engine(state_dir, git=False) as opened:  # the watcher on: the lane plans early only then
        owner = AgentCaller(opened.add_agent("main", owner=True), {"kind": "owner-private"})
        seed = opened.save_page(owner, page("seed", "Seed"))
        yield opened, owner, seed


class _HeldSync:
    """``stage_synced`` held: the file whose path holds ``lane`` until ``queued`` is set (the group's first,
    made on the lane), the one whose path holds ``held`` until ``released`` is set (on a sync thread)."""

    def __init__(self, monkeypatch: Any, lane: str, held: str) -> None:
        self.queued, self.released, self.holding = threading.Event(), threading.Event(), threading.Event()
        self.staging = threading.Event()  # the group is planned: its files are being staged
        staged = publication.stage_synced

        def stage(root: Any, relpath: str, data: bytes) -> Any:
            if lane in relpath:
                self.staging.set()
                assert self.queued.wait(30)
            if held in relpath:
                self.holding.set()
                assert self.released.wait(30)
            return staged(root, relpath, data)

        monkeypatch.setattr(publication, "stage_synced", stage)


def _in_thread(results: dict[str, Any], name: str, call: Callable[[], Any]) -> threading.Thread:
    def run() -> None:
        try:
            results[name] = call()
        except KnowledgeError as exc:
            results[name] = exc
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _group_then(engine: Engine, owner: AgentCaller, monkeypatch: Any, name: str, later: Callable[[], Any],
                while_held: Callable[[], None] = lambda: None) -> tuple[dict[str, Any], list[str]]:
    """Pages "First" and "Held Page" published as one group; ``later`` queued while its files are staged, and
    ``while_held`` run once ``later`` was planned meanwhile (the test fails here if it is not).  Returns the
    results and the titles planned before the group's files were all synced."""
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    sync = _HeldSync(monkeypatch, lane="first", held="held-page")
    planned_while_held: list[str] = []
    plan_save_page, plan_remember = service.plan_save_page, service.plan_remember

    def noting(plan: Callable[..., Any]) -> Callable[..., Any]:
        def planned(ctx: Any, request: Any, digest: str) -> Any:
            early = sync.staging.is_set() and not sync.released.is_set()  # the group cannot finish meanwhile
            try:
                return plan(ctx, request, digest)
            finally:
                if early:
                    planned_while_held.append(getattr(request, "title", None) or "remember")
        return planned

    monkeypatch.setattr(service, "plan_save_page", noting(plan_save_page))
    monkeypatch.setattr(service, "plan_remember", noting(plan_remember))
    results: dict[str, Any] = {}
    release, holder = lane_held(runtime)
    threads = [_in_thread(results, "first", lambda: engine.save_page(owner, page("first", "First")))]
    wait_for(lambda: len(runtime.writes.queued) == 1)
    threads.append(_in_thread(results, "held", lambda: engine.save_page(owner, page("held", "Held Page"))))
    wait_for(lambda: len(runtime.writes.queued) == 2)
    release.set()
    holder.join()
    wait_for(lambda: not runtime.writes.queued)  # the two taken as one group: its first file waits for ``later``
    try:
        threads.append(_in_thread(results, name, later))
        wait_for(lambda: len(runtime.writes.queued) == 1)
        sync.queued.set()
        wait_for(sync.holding.is_set)
        wait_for(lambda: planned_while_held)  # planned while the group's files are synced
        while_held()
    finally:
        sync.queued.set()
        sync.released.set()
        for thread in threads:
            thread.join(30)
    return results, planned_while_held


def _seq(engine: Engine, receipt: dict[str, Any]) -> int:
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    return runtime.call(lambda: runtime.store.db.one("SELECT seq FROM publications WHERE id = ?",
                                                     (receipt["publicationId"],))["seq"])


def test_a_write_queued_while_a_group_syncs_is_planned_meanwhile_and_published_after_it(watched, monkeypatch):
    engine, owner, _ = watched
    results, planned = _group_then(engine, owner, monkeypatch, "third",
                                   lambda: engine.save_page(owner, page("third", "Third")))
    assert planned == ["Third"]  # planned before the group's files were synced
    assert _seq(engine, results["third"]) > max(_seq(engine, results["first"]), _seq(engine, results["held"]))
    assert engine.get_record(owner, results["third"]["id"])["frontmatter"]["title"] == "Third"
    assert len(list(private_dir(engine.state).glob("pages/**/*.md"))) == 4


def test_a_write_about_a_page_of_the_group_being_synced_waits_for_that_group(watched, monkeypatch):
    """Planned early it would find no page of that name: it is planned once the group is acknowledged."""
    engine, owner, _ = watched
    results, planned = _group_then(engine, owner, monkeypatch, "about", lambda: engine.remember(owner, {
        "requestId": "about-held", "subject": "Held Page", "items": [claim("Held ships in May.", "ships")]}))
    assert planned == ["remember"]  # tried early, and left for after the group
    [item] = results["about"]["items"]
    assert engine.get_record(owner, item["id"])["frontmatter"]["subject"] == results["held"]["id"]


def test_an_edit_reported_while_a_group_syncs_has_the_writes_planned_early_planned_again(watched, monkeypatch):
    """The revision planned early was planned on the file before the edit; planned again, it revises the edit
    (without the new plan the install would refuse it as a conflict with the edit)."""
    engine, owner, seed = watched
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    [seed_file] = [path for path in private_dir(engine.state).glob("pages/**/*.md") if "seed" in path.name]

    def edit() -> None:
        seed_file.write_text(seed_file.read_text(encoding="utf-8").replace("Body text.", "Edited outside."),
                             encoding="utf-8")
        wait_for(lambda: runtime._dirty.get("private"))  # the watcher reported it

    revise = {**page("revise", "Seed"), "id": seed["id"], "expectedRevision": 1, "body": "Revised."}
    results, planned = _group_then(engine, owner, monkeypatch, "revised", lambda: engine.save_page(owner, revise),
                                   while_held=edit)
    assert planned == ["Seed"]
    assert not isinstance(results["revised"], Exception), results["revised"]
    record = engine.get_record(owner, seed["id"])
    assert record["frontmatter"]["revision"] == 2 and record["body"].strip() == "Revised."
