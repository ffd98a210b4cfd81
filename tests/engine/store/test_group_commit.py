"""Group commit: writes queued while the lane is busy are planned in turn and published together.

Each test holds the lane, queues its writes from threads, and releases it, so the writes meet in one
group the way concurrent agents' writes do.
"""

from __future__ import annotations

import base64
import ctypes
import errno
import os
import sqlite3
import stat
import threading
import uuid
from typing import Any, Callable
from unittest import mock

import pytest

from engine.core.errors import Denied, KnowledgeError, NotFound, StaleRevision, StoreUnavailable
from engine.core.faults import Faults
from engine.core.syncfs import file_system_sync
import engine.service as service
from engine.service import Engine, EngineEntry
from engine.state.registry import Registry
from engine.store.attachments import attach
from engine.store.catalog import Catalog
from engine.store.groups import PlanReads
from engine.store import publication
from engine.store.publication import Publisher
from engine.access.authority import AgentCaller
from tests.helpers import (claim, conversation, only_store, page, private_dir, queued_behind_held_lane,
                           temp_files_left, wait_for)


def _people(engine: Engine, owner: AgentCaller, count: int) -> list[Callable[[], Any]]:
    """Pages ``Person 0``, ``Person 1``… for ``_together``, each saved by a call of its own."""
    return [lambda n=n: engine.save_page(owner, page(f"p{n}", f"Person {n}")) for n in range(count)]


def _together(engine: Engine, calls: list[Callable[[], Any]]) -> tuple[list[Any], list[int]]:
    """Run ``calls`` queued behind a held lane; returns each one's result (or error) and the group sizes."""
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    groups: list[int] = []
    publish_chained = Publisher.publish_chained

    def counted(publisher: Publisher, plans: Any, following: Any = None) -> Any:
        groups.append(len(plans))
        return publish_chained(publisher, plans, following)

    results: list[Any] = [None] * len(calls)

    def call(index: int) -> None:
        try:
            results[index] = calls[index]()
        except KnowledgeError as exc:
            results[index] = exc

    with mock.patch.object(Publisher, "publish_chained", counted):
        queued_behind_held_lane(runtime, [lambda index=index: call(index) for index in range(len(calls))], 30)
    return results, groups


@pytest.fixture
def owned(state_dir):
    with Engine(state_dir, watch=False) as opened:
        owner = AgentCaller(opened.add_agent("main", owner=True), {"kind": "owner-private"})
        opened.save_page(owner, page("seed", "Seed"))  # the store exists: its lane can be held
        yield opened, owner


def test_writes_queued_behind_a_busy_lane_are_published_as_one_group(owned):
    engine, owner = owned
    receipts, groups = _together(engine, _people(engine, owner, 5))
    assert groups == [5]
    assert len({receipt["publicationId"] for receipt in receipts}) == 5
    assert sorted(engine.get_record(owner, receipt["id"])["frontmatter"]["title"] for receipt in receipts) == [
        f"Person {n}" for n in range(5)]
    assert len(list(private_dir(engine.state).glob("pages/**/*.md"))) == 6
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    assert runtime.call(lambda: runtime.store.manifest().checkpoint) == runtime.call(
        runtime.store.applied_checkpoint)


def test_attachments_and_pages_queued_together_are_published_as_one_group_and_retries_get_their_receipt(owned):
    """An import's originals beside its pages (engine/importers/bulk.py): one group; a retry of an attachment
    queued beside its original waits for the next group and gets the original's receipt."""
    engine, owner = owned
    content = {"filename": "note.md", "content": base64.b64encode(b"# A note\n").decode("ascii")}
    receipts, groups = _together(engine, [
        lambda: attach(engine, owner, {"requestId": "original-1", **content}),
        lambda: engine.save_page(owner, page("p1", "Person 1")),
        lambda: attach(engine, owner, {"requestId": "original-2", "filename": "other.md",
                                       "content": base64.b64encode(b"other").decode("ascii")}),
        lambda: attach(engine, owner, {"requestId": "original-1", **content})])
    assert groups == [3]  # the retry, planned after them, published nothing
    assert receipts[3]["source"]["id"] == receipts[0]["source"]["id"]
    assert receipts[3]["publicationId"] == receipts[0]["publicationId"]


def test_a_claim_about_a_page_queued_just_before_it_waits_for_that_page(owned):
    """Planned beside the page, the claim would find no page of that name; it goes in the next group."""
    engine, owner = owned
    (created, remembered), groups = _together(engine, [
        lambda: engine.save_page(owner, page("alpha", "Alpha Project", type_="project")),
        lambda: engine.remember(owner, {"requestId": "about-alpha", "subject": "alpha project",
                                        "items": [claim("Alpha ships in May.", "ships in May")]}),
    ])
    assert groups == [1, 1]
    [item] = remembered["items"]
    assert engine.get_record(owner, item["id"])["frontmatter"]["subject"] == created["id"]


def test_two_revisions_of_one_page_queued_together_go_one_after_the_other(owned):
    engine, owner = owned
    first = engine.save_page(owner, page("doc", "Doc", type_="project"))
    edit = {"id": first["id"], "expectedRevision": first["revision"], "type": "project", "title": "Doc"}
    (second, third), groups = _together(engine, [
        lambda: engine.save_page(owner, {**edit, "requestId": "edit-1", "body": "One."}),
        lambda: engine.save_page(owner, {**edit, "requestId": "edit-2", "body": "Two."}),
    ])
    assert groups == [1]  # the second was planned again after the first, and refused as it is one by one
    assert second["revision"] == first["revision"] + 1
    assert isinstance(third, StaleRevision)
    assert engine.get_record(owner, first["id"])["body"].strip() == "One."


def test_a_retry_queued_beside_its_original_gets_the_original_receipt(owned):
    engine, owner = owned
    (original, retry), groups = _together(engine, [
        lambda: engine.save_page(owner, page("same", "Same")),
        lambda: engine.save_page(owner, page("same", "Same")),
    ])
    assert groups == [1]  # the retry found the original's receipt once that was acknowledged
    assert retry == original
    assert len(list(private_dir(engine.state).glob("pages/**/same*.md"))) == 1


def test_a_write_refused_while_planned_leaves_the_rest_of_its_group(owned):
    engine, owner = owned
    results, groups = _together(engine, [
        lambda: engine.save_page(owner, page("ok-1", "Kept One")),
        lambda: engine.save_page(owner, {"requestId": "bad", "id": "pg_missing", "expectedRevision": 1,
                                         "type": "person", "title": "Nobody", "body": "x"}),
        lambda: engine.save_page(owner, page("ok-2", "Kept Two")),
    ])
    assert groups == [2]
    assert isinstance(results[1], NotFound)
    assert [engine.get_record(owner, results[n]["id"])["frontmatter"]["title"] for n in (0, 2)] == [
        "Kept One", "Kept Two"]


def test_a_file_the_disk_refuses_rolls_back_its_publication_alone(state_dir):
    """The second of three installs fails as a full disk does: that publication is rolled back, the
    others are acknowledged, and the store verifies whole."""
    with Engine(state_dir, watch=False, faults=Faults("installed:3:enospc")) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("seed", "Seed"))  # the first install
        results, groups = _together(engine, _people(engine, owner, 3))
        assert groups == [3]
        assert [isinstance(result, KnowledgeError) for result in results] == [False, True, False]
        assert isinstance(results[1], StoreUnavailable) and results[1].details["errno"] == "ENOSPC"
        names = sorted(path.name for path in private_dir(engine.state).glob("pages/**/*.md"))
        assert names == ["person-0.md", "person-2.md", "seed.md"]
        runtime = engine.runtime(engine.registry.own_store_of("main"))
        runtime.call(lambda: runtime.store.verify("private"))
        assert runtime.call(lambda: runtime.store.pending_publications()) == []
        assert engine.save_page(owner, page("p1", "Person 1"))["revision"] == 1  # the retry goes through


def test_a_groups_files_are_all_synced_before_the_first_is_renamed(owned, monkeypatch):
    """One round of fsync for the group: every page's temp file is durable before any replaces its target."""
    engine, owner = owned
    events: list[tuple[str, int]] = []
    lock = threading.Lock()
    fsync, replace = os.fsync, os.replace

    def synced(fd: int) -> None:
        fsync(fd)
        with lock:
            events.append(("fsync", os.fstat(fd).st_ino))

    def renamed(source: Any, target: Any) -> None:
        inode = os.lstat(source).st_ino
        replace(source, target)
        if str(target).endswith(".md"):
            with lock:
                events.append(("replace", inode))

    monkeypatch.setattr(os, "fsync", synced)
    monkeypatch.setattr(os, "replace", renamed)
    receipts, groups = _together(engine, _people(engine, owner, 4))
    monkeypatch.undo()
    assert groups == [4] and all("id" in receipt for receipt in receipts)
    renamed_inodes = [inode for kind, inode in events if kind == "replace"]
    assert len(renamed_inodes) == 4
    first_rename = events.index(("replace", renamed_inodes[0]))
    assert {inode for kind, inode in events[:first_rename] if kind == "fsync"} >= set(renamed_inodes)


def test_a_file_the_disk_will_not_sync_refuses_its_publication_alone(owned, monkeypatch):
    """The group's syncs run at once on other threads; the one that fails rolls back its own publication."""
    engine, owner = owned
    fsync = os.fsync

    def failing(fd: int) -> None:
        if stat.S_ISREG(os.fstat(fd).st_mode) and b"Person 1" in os.pread(fd, 4096, 0):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", failing)
    results, groups = _together(engine, _people(engine, owner, 3))
    monkeypatch.undo()
    assert groups == [3]
    assert [isinstance(result, KnowledgeError) for result in results] == [False, True, False]
    assert isinstance(results[1], StoreUnavailable) and results[1].details["errno"] == "EIO"
    folder = private_dir(engine.state)
    assert sorted(path.name for path in folder.glob("pages/**/*.md")) == ["person-0.md", "person-2.md", "seed.md"]
    assert not temp_files_left(only_store(engine.state))  # the refused page's temp file is gone
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    runtime.call(lambda: runtime.store.verify("private"))
    assert runtime.call(lambda: runtime.store.pending_publications()) == []


def test_plan_reads_note_what_a_plan_looked_at_and_offer_nothing_else(owned):
    engine, _ = owned
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    reads = PlanReads(runtime.catalog)
    [seed] = runtime.call(lambda: reads.lookup("private", "  SEED "))
    assert {("name", "private", "seed"), ("id", "private", seed)} <= reads.keys
    with pytest.raises(AttributeError):
        reads.current("private", kind="page")  # every record: no group could account for it
    with pytest.raises(AttributeError):
        reads.current_count  # noqa: B018 - not a lookup planning makes
    assert isinstance(runtime.catalog, Catalog)


def test_plan_reads_ask_the_catalog_each_question_once_until_a_sync(owned):
    engine, owner = owned
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    [seed] = runtime.call(lambda: PlanReads(runtime.catalog).lookup("private", "Seed"))
    asked: list[str] = []
    current = Catalog.current

    def counted(catalog: Catalog, *args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs["record_ids"][0])
        return current(catalog, *args, **kwargs)

    def plan() -> None:
        reads = PlanReads(runtime.catalog)
        first = reads.current("private", kind="page", record_ids=[seed])
        first.clear()  # a caller's list is its own
        assert [row.title for row in reads.current("private", kind="page", record_ids=[seed])] == ["Seed"]
        assert asked == [seed] and ("id", "private", seed) in reads.keys
        reads.sync("private")
        reads.current("private", kind="page", record_ids=[seed])
        assert asked == [seed, seed]

    with mock.patch.object(Catalog, "current", counted):
        runtime.call(plan)


def test_a_group_rechecks_each_callers_authority_before_and_after_planning_not_at_every_write(owned):
    engine, owner = owned
    on_lane: list[str] = []
    recheck = EngineEntry.recheck

    def counted(entry: EngineEntry) -> None:
        if threading.current_thread().name.startswith("lane-"):
            on_lane.append(entry.authority.partition)
        recheck(entry)

    with mock.patch.object(EngineEntry, "recheck", counted):
        receipts, groups = _together(engine, _people(engine, owner, 5))
    assert groups == [5] and all("publicationId" in receipt for receipt in receipts)
    assert on_lane == ["private", "private"]
    with mock.patch.object(EngineEntry, "recheck", counted):
        receipts, groups = _together(engine, [lambda: engine.save_page(owner, page("alone", "Alone"))])
    assert groups == [1] and on_lane == ["private"] * 3  # a lone write: checked right before it is planned


def test_a_grant_removed_while_a_group_is_planned_refuses_that_callers_writes_and_keeps_the_others(owned, state_dir):
    engine, owner = owned
    engine.registry.set_grant("main", "chat:granted", "read-and-save")
    chat = conversation(owner.token, str(uuid.uuid4()), key="chat:granted")
    plan_save_page = service.plan_save_page
    removed: list[bool] = []

    def revoking(ctx: Any, *args: Any) -> Any:
        if not removed:  # while the group's first write is planned, as `knowledge agents` would beside it
            other = Registry.open(state_dir.registry, state_dir.root)
            try:
                other.remove_grant("main", "chat:granted")
            finally:
                other.close()
            removed.append(True)
        return plan_save_page(ctx, *args)

    with mock.patch.object(service, "plan_save_page", revoking):
        results, groups = _together(engine, [
            lambda: engine.save_page(chat, page("c1", "Chat one")),
            lambda: engine.save_page(owner, page("o1", "Owner one")),
            lambda: engine.save_page(chat, page("c2", "Chat two")),
        ])
    assert removed and groups == [1]
    assert isinstance(results[0], Denied) and isinstance(results[2], Denied)
    assert engine.get_record(owner, results[1]["id"])["frontmatter"]["title"] == "Owner one"
    titles = {path.read_text(encoding="utf-8").split("title: ", 1)[1].split("\n", 1)[0]
              for path in private_dir(engine.state).glob("pages/**/*.md")}
    assert titles == {"Seed", "Owner one"}


def test_a_groups_temp_files_but_the_first_are_made_on_the_sync_threads(owned):
    engine, owner = owned
    made_on: list[str] = []
    stage_synced = publication.stage_synced

    def recorded(*args: Any, **kwargs: Any) -> Any:
        made_on.append(threading.current_thread().name)
        return stage_synced(*args, **kwargs)

    with mock.patch.object(publication, "stage_synced", recorded):
        receipts, groups = _together(engine, _people(engine, owner, 3))
    assert groups == [3] and all("publicationId" in receipt for receipt in receipts)
    assert len(made_on) == 3 and made_on[0].startswith("lane-") and all(name.startswith("sync-") for name in made_on[1:])


def test_a_symlink_put_at_a_new_files_path_before_its_temp_file_is_made_is_refused(owned, tmp_path):
    """A symlink put at a new page's path after the lane checked it, before its temp file is made, refuses that
    publication (in a group and alone) and nothing is written through it; the group's others are published."""
    engine, owner = owned
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"not the vault's")
    vault = private_dir(engine.state)
    linked: list[str] = []
    stage_synced = publication.stage_synced

    def swapped(root: Any, relpath: str, data: bytes, **kwargs: Any) -> Any:
        if relpath.endswith("person-1.md") or relpath.endswith("alone.md"):
            (root / relpath).symlink_to(outside)
            linked.append(relpath)
        return stage_synced(root, relpath, data, **kwargs)

    with mock.patch.object(publication, "stage_synced", swapped):
        results, groups = _together(engine, _people(engine, owner, 3))
        with pytest.raises(KnowledgeError):
            engine.save_page(owner, page("alone", "Alone"))
    assert groups == [3] and len(linked) == 2
    assert isinstance(results[1], KnowledgeError)
    assert "publicationId" in results[0] and "publicationId" in results[2]
    assert outside.read_bytes() == b"not the vault's"
    assert all((vault / relpath).is_symlink() for relpath in linked)
    assert temp_files_left(only_store(engine.state)) == []


def test_a_publication_refused_at_a_rename_leaves_none_of_its_temp_files(owned, monkeypatch):
    """An edit made at an attachment's path between staging and renaming is a conflict: the publication is
    rolled back, and its other temp file, synced and closed on a sync thread, is removed with it."""
    engine, owner = owned
    put_in_place = Publisher._put_in_place

    def raced(publisher: Publisher, publication: Any, write: Any, staging: Any, directories: set) -> None:
        if write.role == "source":  # the attachment's first file: an editor writes there first
            (private_dir(engine.state) / write.path).write_bytes(b"an edit made meanwhile\n")
        put_in_place(publisher, publication, write, staging, directories)

    monkeypatch.setattr(Publisher, "_put_in_place", raced)
    results, groups = _together(engine, [
        lambda: engine.save_page(owner, page("p1", "Person 1")),
        lambda: attach(engine, owner, {"requestId": "original-1", "filename": "note.md",
                                       "content": base64.b64encode(b"# A note\n").decode("ascii")})])
    monkeypatch.undo()
    assert groups == [2]
    assert "id" in results[0] and isinstance(results[1], KnowledgeError)
    folder = private_dir(engine.state)
    assert not temp_files_left(only_store(engine.state))  # neither the source's nor the descriptor's
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    assert runtime.call(lambda: runtime.store.pending_publications()) == []


def test_a_group_is_journalled_catalogued_and_acknowledged_by_one_statement_a_table(owned):
    """Per group, not per publication or record: the journal's files, the catalog's rows and names, the
    outbox and the publications marked applied; the partition's folder is made or found once, and each plan
    reads the ontology once (the catalog once more for the group)."""
    engine, owner = owned
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    db, store = runtime.store.db, runtime.store
    statements: list[str] = []
    executemany, ensure_partition, ontology = type(db).executemany, type(store).ensure_partition, type(store).ontology
    asked: list[str] = []

    def counted(self: Any, sql: str, rows: Any) -> Any:
        if self is db:
            statements.append(" ".join(sql.split()[:3]))
        return executemany(self, sql, rows)

    def ensured(self: Any, partition: str) -> Any:
        asked.append("partition")
        return ensure_partition(self, partition)

    def read_ontology(self: Any, partition: str) -> Any:
        asked.append("ontology")
        return ontology(self, partition)

    with mock.patch.object(type(db), "executemany", counted), \
            mock.patch.object(type(store), "ensure_partition", ensured), \
            mock.patch.object(type(store), "ontology", read_ontology):
        receipts, groups = _together(engine, _people(engine, owner, 4))
    assert groups == [4] and all("id" in receipt for receipt in receipts)
    for statement in ("INSERT INTO publication_files", "INSERT INTO catalog", "INSERT INTO names",
                      "INSERT INTO outbox", "UPDATE publications SET"):
        assert statements.count(statement) == 1, statement
    assert asked.count("partition") == 1
    assert asked.count("ontology") <= 4 + 3  # a plan's, the catalog's, the group's check before it and after


def test_a_new_file_is_compared_by_the_walk_before_the_journal_and_again_right_before_its_rename(owned,
                                                                                                  monkeypatch):
    """A group's new files are read once, at the rename; one written by someone else after the journal is
    still a conflict there: that publication is rolled back, the file left as its writer wrote it."""
    engine, owner = owned
    compared: list[str] = []
    current_sha, journal = Publisher._current_sha, Publisher._journal

    def counted(publisher: Publisher, partition: str, write: Any) -> Any:
        compared.append(write.path)
        return current_sha(publisher, partition, write)

    def journalled_then_raced(publisher: Publisher, group: list) -> None:
        journal(publisher, group)
        for member in group:  # an editor writes at the second page's path once it is journalled
            if member.writes[0].path.endswith("person-1.md"):
                target = private_dir(engine.state) / member.writes[0].path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(b"an edit made meanwhile\n")

    monkeypatch.setattr(Publisher, "_current_sha", counted)
    monkeypatch.setattr(Publisher, "_journal", journalled_then_raced)
    results, groups = _together(engine, _people(engine, owner, 3))
    monkeypatch.undo()
    assert groups == [3]
    assert [isinstance(result, KnowledgeError) for result in results] == [False, True, False]
    assert "changed on disk" in str(results[1])
    # Each acknowledged page read once, at its rename (the refused one again by its roll-back).
    assert sorted(path.rpartition("/")[2] for path in compared) == ["person-0.md", "person-1.md", "person-1.md",
                                                                     "person-2.md"]
    folder = private_dir(engine.state)
    assert [path.read_bytes() for path in folder.glob("pages/**/person-1.md")] == [b"an edit made meanwhile\n"]
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    assert runtime.call(lambda: runtime.store.pending_publications()) == []


def _journals(monkeypatch) -> list[tuple[int, bool]]:
    """Each group journalled from now on: its size, and whether inside another transaction (an acknowledgement)."""
    journals: list[tuple[int, bool]] = []
    journal = Publisher._journal

    def noted(publisher: Publisher, group: list) -> None:
        journals.append((len(group), publisher.db.connection.in_transaction))
        journal(publisher, group)

    monkeypatch.setattr(Publisher, "_journal", noted)
    return journals


def _pages_then_claims(engine: Engine, owner: AgentCaller) -> list[Callable[[], Any]]:
    """Two pages, then a claim about each: the claims wait for the group that publishes the pages."""
    return [lambda: engine.save_page(owner, page("alpha", "Alpha Project", type_="project")),
            lambda: engine.save_page(owner, page("beta", "Beta Project", type_="project")),
            lambda: engine.remember(owner, {"requestId": "about-alpha", "subject": "alpha project",
                                            "items": [claim("Alpha ships in May.", "ships in May")]}),
            lambda: engine.remember(owner, {"requestId": "about-beta", "subject": "beta project",
                                            "items": [claim("Beta ships in June.", "ships in June")]})]


def test_writes_queued_as_a_group_is_acknowledged_are_journalled_in_its_acknowledging_transaction(
        owned, monkeypatch):
    engine, owner = owned
    journals = _journals(monkeypatch)
    results, groups = _together(engine, _pages_then_claims(engine, owner))
    assert groups == [2, 2]
    assert journals == [(2, False), (2, True)]  # the claims' journal committed with the pages' acknowledgement
    alpha, beta, about_alpha, about_beta = results
    for created, remembered in ((alpha, about_alpha), (beta, about_beta)):
        [item] = remembered["items"]
        assert engine.get_record(owner, item["id"])["frontmatter"]["subject"] == created["id"]
    assert engine.diagnostics(owner)["pendingPublications"] == 0


def test_other_work_waiting_for_the_lane_goes_before_a_next_group_is_journalled_with_the_last(owned, monkeypatch):
    engine, owner = owned
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    journals = _journals(monkeypatch)
    calls = _pages_then_claims(engine, owner)
    other: list[threading.Thread] = []

    def other_work_queued() -> None:  # after the pages: waiting for the lane as the pages' group is acknowledged
        other.append(threading.Thread(target=lambda: runtime.call(lambda: None)))
        other[0].start()
        wait_for(lambda: runtime._others == 1)

    results, groups = _together(engine, calls[:2] + [lambda: (other_work_queued(), calls[2]())[1], calls[3]])
    other[0].join(30)
    assert groups == [2, 2]
    assert journals == [(2, False), (2, False)]
    assert all(not isinstance(result, Exception) for result in results)


def test_when_that_transaction_fails_the_next_groups_writes_fail_with_it_and_a_retry_gets_no_receipt(owned,
                                                                                                   monkeypatch):
    """The acknowledging transaction fails once the next group was planned in it (a full disk at its COMMIT): the
    group is rolled back, and the retry planned in that transaction, which found the original's receipt there,
    gets the failure instead, as does a page journalled with it."""
    engine, owner = owned
    journal_following = Publisher._journal_following

    def then_the_disk_is_full(publisher: Publisher, following: Any) -> Any:
        journal_following(publisher, following)
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Publisher, "_journal_following", then_the_disk_is_full)
    results, groups = _together(engine, [
        lambda: engine.save_page(owner, page("same", "Same")),
        lambda: engine.save_page(owner, page("same", "Same")),  # the retry, planned in that transaction
        lambda: engine.remember(owner, {"requestId": "about-same", "subject": "Same",
                                        "items": [claim("Same ships in May.", "ships in May")]}),
    ])
    assert groups == [1, 1]  # the page; the claim, journalled in the page's acknowledgement, fails with it
    assert all(isinstance(result, StoreUnavailable) for result in results), results
    monkeypatch.setattr(Publisher, "_journal_following", journal_following)
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    assert runtime.call(lambda: runtime.store.pending_publications()) == []
    assert not list(private_dir(engine.state).glob("pages/**/same*.md"))
    assert engine.lookup(owner, "Same")["matches"] == []
    created = engine.save_page(owner, page("same", "Same"))  # the retries go through
    assert created["revision"] == 1 and created != results[1]


def _recorded_syncfs(engine: Engine, answer: Callable[[int], int] | None = None) -> list[dict[int, int]]:
    """Record each sync of the file system the store's publisher makes (the temp files there then, inode: size);
    ``answer`` answers in the kernel's place (else the kernel does)."""
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    syncfs = answer or runtime.publisher._syncfs
    calls: list[dict[int, int]] = []

    def recorded(fd: int) -> int:
        calls.append({(info := os.lstat(path)).st_ino: info.st_size
                      for path in temp_files_left(only_store(engine.state))})
        return syncfs(fd)

    runtime.publisher._syncfs = recorded
    return calls


def _refusing(code: int) -> Callable[[int], int]:
    """A ``syncfs`` that fails with ``code``, as libc answers."""
    def syncfs(fd: int) -> int:
        ctypes.set_errno(code)
        return -1
    return syncfs


@pytest.mark.skipif(file_system_sync() is None, reason="syncfs that reports errors is Linux 5.8 and later only")
def test_a_large_groups_files_are_all_written_then_made_durable_by_one_sync_of_their_file_system(owned, monkeypatch):
    engine, owner = owned
    monkeypatch.setattr(publication, "SYNCFS_FILES", 4)
    synced = _recorded_syncfs(engine)
    fsynced: set[int] = set()
    renamed: list[tuple[int, int, int]] = []  # inode, size, syncs made by then
    fsync, replace = os.fsync, os.replace

    def recorded_fsync(fd: int) -> None:
        fsynced.add(os.fstat(fd).st_ino)
        fsync(fd)

    def recorded_replace(source: Any, target: Any) -> None:
        info = os.lstat(source)
        if str(target).endswith(".md"):
            renamed.append((info.st_ino, info.st_size, len(synced)))
        replace(source, target)

    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(os, "replace", recorded_replace)
    receipts, groups = _together(engine, _people(engine, owner, 5))
    monkeypatch.undo()
    assert groups == [5] and all("publicationId" in receipt for receipt in receipts)
    assert len(synced) == 1 and len(renamed) == 5
    # Every temp file was there, whole, when the file system was synced, and none was renamed before.
    assert all(synced[0].get(inode) == size and syncs == 1 for inode, size, syncs in renamed)
    assert not fsynced & {inode for inode, _, _ in renamed}  # not fsynced one by one besides
    assert sorted(engine.get_record(owner, receipt["id"])["frontmatter"]["title"] for receipt in receipts) == [
        f"Person {n}" for n in range(5)]


def test_a_single_write_is_fsynced_and_never_syncs_the_file_system(owned):
    engine, owner = owned
    synced = _recorded_syncfs(engine, _refusing(errno.EIO))
    receipts, groups = _together(engine, _people(engine, owner, 3))  # three files, well under SYNCFS_FILES
    assert groups == [3] and all("publicationId" in receipt for receipt in receipts)
    engine.save_page(owner, page("alone", "Alone"))
    assert synced == []


def test_a_file_system_sync_that_fails_refuses_every_publication_of_the_group(owned, monkeypatch):
    """The kernel names no file: nothing of the group is acknowledged, no temp file is left, and a retry works."""
    engine, owner = owned
    monkeypatch.setattr(publication, "SYNCFS_FILES", 4)
    before = sorted(path.name for path in private_dir(engine.state).rglob("*.md"))
    synced = _recorded_syncfs(engine, _refusing(errno.EIO))
    results, groups = _together(engine, _people(engine, owner, 5))
    assert groups == [5] and len(synced) == 1 and len(synced[0]) == 5
    assert all(isinstance(result, StoreUnavailable) and result.details["errno"] == "EIO" for result in results)
    folder = private_dir(engine.state)
    assert sorted(path.name for path in folder.rglob("*.md")) == before
    assert not list(folder.rglob(".*.tmp"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    runtime.call(lambda: runtime.store.verify("private"))
    assert runtime.call(lambda: runtime.store.pending_publications()) == []
    monkeypatch.setattr(runtime.publisher, "_syncfs", file_system_sync())
    receipts, _ = _together(engine, _people(engine, owner, 5))  # the same writes again go through
    assert all("publicationId" in receipt for receipt in receipts)


def test_a_kernel_that_refuses_syncfs_has_each_file_fsynced_before_any_is_renamed(owned, monkeypatch):
    engine, owner = owned
    monkeypatch.setattr(publication, "SYNCFS_FILES", 4)
    synced = _recorded_syncfs(engine, _refusing(errno.ENOSYS))
    events: list[tuple[str, int]] = []
    lock = threading.Lock()
    fsync, replace = os.fsync, os.replace

    def recorded_fsync(fd: int) -> None:
        fsync(fd)
        with lock:
            events.append(("fsync", os.fstat(fd).st_ino))

    def recorded_replace(source: Any, target: Any) -> None:
        inode = os.lstat(source).st_ino
        replace(source, target)
        if str(target).endswith(".md"):
            with lock:
                events.append(("replace", inode))

    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(os, "replace", recorded_replace)
    receipts, groups = _together(engine, _people(engine, owner, 5))
    monkeypatch.undo()
    assert groups == [5] and all("publicationId" in receipt for receipt in receipts) and len(synced) == 1
    renamed = [inode for kind, inode in events if kind == "replace"]
    first_rename = events.index(("replace", renamed[0]))
    assert {inode for kind, inode in events[:first_rename] if kind == "fsync"} >= set(renamed)
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    assert runtime.publisher._syncfs is None  # not asked again
