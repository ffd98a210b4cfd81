"""Searches see acknowledged writes without waiting for tantivy's commit (engine/index/overlay.py)."""

from __future__ import annotations

import threading
import uuid
from types import SimpleNamespace

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import IndexFailed, StaleCursor
from engine.index.overlay import FIELD_NORMS, _constants, quantised_length
from engine.index.tantivy_index import PartitionIndex, SearchIndexes
from engine import runtime as runtime_module
from engine.runtime import StoreRuntime
from engine.service import Engine
from engine.store.index_ledger import IndexLedger
from tests.helpers import catch_up_held, claim, conversation, page, private_dir


def titles(result: dict) -> list[str]:
    return [hit["title"] for hit in result["hits"]]


def runtime_of(engine):
    return engine.runtime(engine.registry.own_store_of("main"))


def committed_docs(engine) -> int:
    runtime = runtime_of(engine)
    return runtime.call(lambda: runtime.indexes.get("private").searcher().num_docs)


@pytest.fixture
def held(monkeypatch):
    """The index commits what was written so far, and from then on nothing: its thread skips its catch-ups,
    and a search that would wait for one fails the test."""
    def hold(engine):
        runtime = runtime_of(engine)  # what was written so far is committed first
        runtime.call(lambda: [runtime.indexes.catch_up(partition) for partition in runtime.store.partitions()])
        monkeypatch.setattr(StoreRuntime, "_catch_up_indexes", lambda self, partitions: None)

        def no_waiting(self, partition, version):
            raise AssertionError("the search waited for the index to commit")

        monkeypatch.setattr(SearchIndexes, "at_least", no_waiting)
    return hold


def release(monkeypatch, engine) -> None:
    """Let the index commit again, and commit what it lacks."""
    monkeypatch.undo()
    runtime = runtime_of(engine)
    runtime.call(lambda: runtime.indexes.catch_up("private"))


def test_a_search_right_after_a_write_finds_it_with_the_commit_held_back(engine, owner, held):
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    assert titles(engine.search(owner, {"query": "harbour"})) == ["Harbour"]  # the index is open and committed
    held(engine)
    engine.save_page(owner, page("p2", "Harbour lighthouse", type_="place", body="A light at the harbour mouth."))
    answer = engine.search(owner, {"query": "lighthouse"})
    assert titles(answer) == ["Harbour lighthouse"]
    assert "light" in answer["hits"][0]["snippet"] and answer["hits"][0]["score"] == 1.0
    assert sorted(titles(engine.search(owner, {"query": "harbour"}))) == ["Harbour", "Harbour lighthouse"]
    assert committed_docs(engine) == 1  # nothing was committed for it


def test_a_committed_hit_and_an_overlay_hit_rank_on_one_scale(engine, owner, held, monkeypatch):
    """In a small index the overlay's records change the statistics much: committed hits are rescored."""
    engine.save_page(owner, page("p1", "Lisbon office", type_="place", body="Where the operations team sits."))
    held(engine)
    engine.save_page(owner, page("p2", "Quarterly planning", type_="note",
                                 body="We agreed to open an office in Lisbon next spring."))
    engine.save_page(owner, page("p3", "Gardening", type_="note", body="Tomatoes need sun."))
    before = engine.search(owner, {"query": "Lisbon office"})
    release(monkeypatch, engine)
    after = engine.search(owner, {"query": "Lisbon office"})
    assert titles(before) == titles(after) == ["Lisbon office", "Quarterly planning"]
    assert [hit["score"] for hit in before["hits"]] == pytest.approx([hit["score"] for hit in after["hits"]], abs=1e-5)


def test_an_updated_record_never_shows_its_old_text(engine, owner, held):
    saved = engine.save_page(owner, page("p1", "Harbour", type_="place", body="Seagulls on every post."))
    assert titles(engine.search(owner, {"query": "seagulls"})) == ["Harbour"]
    held(engine)
    engine.save_page(owner, page("p2", "Harbour", type_="place", body="Pelicans on every post.",
                                 id=saved["id"], expectedRevision=1))
    assert engine.search(owner, {"query": "seagulls"})["hits"] == []
    [hit] = engine.search(owner, {"query": "pelicans"})["hits"]
    assert hit["revision"] == 2


def test_a_superseded_claim_leaves_the_answers_before_the_commit(engine, owner, held):
    old = engine.remember(owner, {"requestId": "m1", "items": [claim("Cut-over on January 15.", "the 15th")]})
    assert titles(engine.search(owner, {"query": "cut-over"})) == ["Cut-over on January 15."]
    held(engine)
    engine.remember(owner, {"requestId": "m2", "items": [
        claim("Cut-over on January 22.", "the 22nd", kind="correction", replaces=old["items"][0]["id"]),
    ]})
    assert titles(engine.search(owner, {"query": "cut-over January"})) == ["Cut-over on January 22."]


def test_overlay_scores_equal_those_after_the_commit(engine, owner, held, monkeypatch):
    for index, body in enumerate(["Tide tables for the harbour.", "Boats and harbour fees, harbour master.",
                                  "Gardening notes.", "Lighthouse keepers log the tide."]):
        engine.save_page(owner, page(f"c{index}", f"Note {index}", type_="note", body=body))
    engine.save_page(owner, page("alias", "Old port", type_="place", body="Quiet.", aliases=["Harbour town"]))
    engine.search(owner, {"query": "harbour"})
    held(engine)
    engine.save_page(owner, page("n1", "Harbour tide", type_="note", body="The harbour tide is high at noon. " * 3))
    engine.save_page(owner, page("n2", "Harbour walk", type_="place", body="A long walk by the harbour.",
                                 aliases=["Tide walk"]))
    queries = [{"query": "harbour tide"}, {"query": "harbour", "kind": "page", "type": "note"},
               {"query": "tide walk"}]
    before = [engine.search(owner, query) for query in queries]
    assert committed_docs(engine) == 5
    release(monkeypatch, engine)
    assert committed_docs(engine) == 7
    after = [engine.search(owner, query) for query in queries]
    fresh = {"Harbour tide", "Harbour walk"}
    for early, late in zip(before, after):
        assert early["hits"][0]["title"] in fresh  # scores are relative to the best hit: one of the overlay's
        assert sorted(titles(early)) == sorted(titles(late))
        late_scores = {hit["title"]: hit["score"] for hit in late["hits"]}
        for hit in early["hits"]:  # overlay and committed hits alike, as after the commit (to float rounding)
            assert hit["score"] == pytest.approx(late_scores[hit["title"]], abs=1e-5)


def test_the_owners_function_words_weigh_alike_before_and_after_the_commit(engine, owner, held, monkeypatch):
    """The owner's search weighs function words less (keyword.py's FUNCTION_WORD_WEIGHT); an overlay hit and a
    committed one are scored so, as they are once the overlay is committed."""
    engine.save_page(owner, page("c1", "Harbour notes", type_="note", body="How I got to the harbour, and my boat."))
    engine.search(owner, {"query": "harbour"})
    held(engine)
    engine.save_page(owner, page("n1", "Harbour fees", type_="note", body="The harbour fees, paid at the harbour."))
    question = {"query": "how do I get to the harbour with my boat"}
    before = engine.search(owner, question, owner=True)
    release(monkeypatch, engine)
    after = engine.search(owner, question, owner=True)

    assert titles(before) == titles(after) == ["Harbour notes", "Harbour fees"]
    assert [hit["score"] for hit in before["hits"]] == pytest.approx([hit["score"] for hit in after["hits"]], abs=1e-5)


def test_the_owners_exact_title_leads_with_its_uncommitted_revision(engine, owner, held):
    """A note titled as the query leads the owner's first page from the overlay's document: an edit not
    committed yet shows its new text, never the committed one's."""
    saved = engine.save_page(owner, page("p1", "Harbour", type_="note", body="Seagulls on every post."))
    for number in range(3):
        engine.save_page(owner, page(f"s{number}", f"Harbour walk {number}", type_="note", body="harbour " * 8))
    engine.search(owner, {"query": "harbour"})
    held(engine)
    engine.save_page(owner, page("p2", "Harbour", type_="note", body="Pelicans on every post.",
                                 id=saved["id"], expectedRevision=1))

    hits = engine.search(owner, {"query": "Harbour", "limit": 2}, owner=True)["hits"]

    assert [hit["id"] for hit in hits][:1] == [saved["id"]] and len(hits) == 2
    assert hits[0]["revision"] == 2 and "Pelicans" in hits[0]["snippet"]
    assert committed_docs(engine) == 4  # the edit was not committed


def test_overlay_hits_follow_the_partition_and_filters(engine, owner, held):
    engine.save_page(owner, page("p1", "Private lighthouse", type_="note"))
    chat = conversation(owner.token, str(uuid.uuid4()))
    engine.save_page(chat, page("c1", "Chat lighthouse", type_="note"))
    engine.search(owner, {"query": "lighthouse"})
    engine.search(chat, {"query": "lighthouse"})
    held(engine)
    engine.save_page(owner, page("p2", "Private lighthouse keeper", type_="person"))
    engine.save_page(chat, page("c2", "Chat lighthouse keeper", type_="person"))
    assert sorted(titles(engine.search(owner, {"query": "lighthouse"}))) == [
        "Private lighthouse", "Private lighthouse keeper"]
    assert sorted(titles(engine.search(chat, {"query": "lighthouse"}))) == ["Chat lighthouse", "Chat lighthouse keeper"]
    assert titles(engine.search(owner, {"query": "lighthouse", "type": "person"})) == ["Private lighthouse keeper"]
    assert titles(engine.search(owner, {"query": "lighthouse", "kind": "claim"})) == []


def test_cursors_page_through_overlay_and_committed_hits_alike(engine, owner, held):
    for index in range(4):
        engine.save_page(owner, page(f"b{index}", f"Beacon {index}", type_="note", body="beacon " * (index + 1)))
    engine.search(owner, {"query": "beacon"})
    held(engine)
    for index in range(4, 7):
        engine.save_page(owner, page(f"b{index}", f"Beacon {index}", type_="note", body="beacon " * (index + 1)))
    first = engine.search(owner, {"query": "beacon", "limit": 3})
    second = engine.search(owner, {"query": "beacon", "limit": 3, "cursor": first["nextCursor"]})
    third = engine.search(owner, {"query": "beacon", "limit": 3, "cursor": second["nextCursor"]})
    seen = titles(first) + titles(second) + titles(third)
    assert len(seen) == 7 and len(set(seen)) == 7 and "nextCursor" not in third


def test_a_cursor_of_the_merged_order_is_stale_once_the_commit_lands(engine, owner, held, monkeypatch):
    for index in range(4):
        engine.save_page(owner, page(f"b{index}", f"Beacon {index}", type_="note", body="beacon " * (index + 1)))
    engine.search(owner, {"query": "beacon"})
    held(engine)
    engine.save_page(owner, page("b4", "Beacon 4", type_="note"))
    cursor = engine.search(owner, {"query": "beacon", "limit": 2})["nextCursor"]
    release(monkeypatch, engine)  # the same catalog version, now committed: another order
    with pytest.raises(StaleCursor):
        engine.search(owner, {"query": "beacon", "limit": 2, "cursor": cursor})


def test_a_failed_commit_is_an_error_never_an_overlay_answer(engine, owner, monkeypatch):
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    engine.search(owner, {"query": "harbour"})

    def refuse(self, removals, additions, **options):
        raise OSError("disk full")

    monkeypatch.setattr(PartitionIndex, "apply", refuse)
    engine.save_page(owner, page("p2", "Lighthouse", type_="place"))
    runtime = runtime_of(engine)
    with pytest.raises(Exception, match="disk full"):
        runtime.call(lambda: runtime.indexes.catch_up("private"))  # as the index thread would
    with pytest.raises(IndexFailed):
        engine.search(owner, {"query": "lighthouse"})
    monkeypatch.undo()
    assert titles(engine.search(owner, {"query": "lighthouse"})) == ["Lighthouse"]


def test_a_crash_after_the_acknowledgement_before_the_commit_loses_nothing(state_dir, monkeypatch):
    with Engine(state_dir, watch=False) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("p1", "Harbour", type_="place"))
        engine.search(owner, {"query": "harbour"})

        def crash(self, removals, additions, **options):
            raise OSError("killed before the commit")

        monkeypatch.setattr(PartitionIndex, "apply", crash)  # no commit reaches the disk from here on
        engine.save_page(owner, page("p2", "Harbour lighthouse", type_="place"))  # acknowledged, never committed
    monkeypatch.undo()
    with Engine(state_dir, watch=False) as reopened:
        assert sorted(titles(reopened.search(owner, {"query": "harbour"}))) == ["Harbour", "Harbour lighthouse"]


def test_a_search_reads_only_the_records_no_earlier_search_analysed(engine, owner, held, monkeypatch):
    """The overlay's documents are read from the catalog once: a burst of searches beside a stream of writes
    does not read the whole backlog's content again each time."""
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    engine.search(owner, {"query": "harbour"})
    held(engine)
    read: list[list[str]] = []
    backlog_rows = IndexLedger.backlog_rows

    def counted(self, partition, paths):
        read.append(sorted(paths))
        return backlog_rows(self, partition, paths)

    monkeypatch.setattr(IndexLedger, "backlog_rows", counted)
    second = engine.save_page(owner, page("p2", "Harbour lighthouse", type_="place"))
    assert titles(engine.search(owner, {"query": "lighthouse"})) == ["Harbour lighthouse"]
    engine.save_page(owner, page("p3", "Harbour crane", type_="place"))
    assert sorted(titles(engine.search(owner, {"query": "harbour"}))) == ["Harbour", "Harbour crane",
                                                                        "Harbour lighthouse"]
    engine.save_page(owner, page("p4", "Harbour lighthouse", type_="place", body="Painted red.",
                                 id=second["id"], expectedRevision=1))
    assert titles(engine.search(owner, {"query": "painted"})) == ["Harbour lighthouse"]
    assert [[path.rsplit("/", 1)[-1] for path in paths] for paths in read] == [
        ["harbour-lighthouse.md"], ["harbour-crane.md"], ["harbour-lighthouse.md"]]  # a new revision: again


def test_the_index_commits_at_a_pause_a_batch_or_a_deadline():
    """The index thread's wait (``StoreRuntime._wait_for_pause``) on a fake clock: each poll sees ``arriving``
    more publications of one record each, ``step`` seconds later."""
    def run(arriving: int, step: float) -> tuple[int, float]:
        clock = [0.0]
        polls = [0]

        class Polled(threading.Event):
            def wait(self, timeout=None):
                polls[0] += 1
                assert polls[0] < 10_000, "the index thread never committed"
                clock[0] += step
                runtime._index_published += arriving
                runtime._index_records += arriving
                return False

        runtime = SimpleNamespace(_dirty_lock=threading.Lock(), _index_published=0, _index_records=0,
                                  _closing=Polled())
        StoreRuntime._wait_for_pause(runtime, clock=lambda: clock[0])
        return polls[0], clock[0]

    assert run(0, 0.05) == (1, 0.05)  # no publication since the wake: commit after one delay
    polls, _ = run(1, 0.0)  # one record a poll and no time passing: commit once a batch waits
    assert polls == runtime_module.INDEX_BATCH_RECORDS
    polls, elapsed = run(1, 0.3)  # a stream that never pauses: commit by the deadline
    assert elapsed >= runtime_module.INDEX_MAX_DELAY_SECONDS and polls == 4


def test_field_lengths_are_quantised_as_tantivys():
    assert FIELD_NORMS[:41] == list(range(41)) and FIELD_NORMS[41] == 42 and FIELD_NORMS[-1] == 2013265944
    assert [quantised_length(n) for n in (0, 24, 40, 41, 43, 100, 2000)] == [0, 24, 40, 40, 42, 96, 1944]


def test_an_explanations_constants_are_its_leaves_in_document_order():
    """What rescoring reads of a committed hit's explanation: every leaf by name, the later of two with one name
    winning, at any depth."""
    leaf = lambda name, value: {"description": f"{name}, what it is", "value": value}  # noqa: E731
    explanation = {"description": "TermQuery, product of...", "value": 9.0, "details": [
        leaf("(K1+1)", 2.2),
        {"description": "idf, computed as ...", "value": 0.5, "details": [leaf("n", 3.0), leaf("N", 30.0)]},
        {"description": "freq / (freq + ...)", "value": 0.4, "details": [leaf("freq", 2.0), leaf("dl", 7.0),
                                                                          leaf("n", 4.0)]},
        {"description": "empty", "value": 1.5, "details": []}]}
    assert _constants(explanation) == {"(K1+1)": 2.2, "n": 4.0, "N": 30.0, "freq": 2.0, "dl": 7.0, "empty": 1.5}
    deep = leaf("avgdl", 12.0)
    for _ in range(5000):
        deep = {"description": "BooleanClause. sum of ...", "value": 1.0, "details": [deep]}
    assert _constants(deep) == {"avgdl": 12.0}


@pytest.fixture
def catch_up_paused(monkeypatch):
    """``catch_up_held`` for a runtime the test names."""
    return lambda runtime: catch_up_held(runtime, monkeypatch)


def test_a_record_back_while_a_catch_up_removes_it_is_found(engine, owner, state_dir, catch_up_paused):
    # A record leaves the answers (here: marked a fixture) and comes back byte for byte while a catch-up is
    # between tantivy's commit, which deleted its document, and the catalog's record of that commit.
    saved = engine.save_page(owner, page("p1", "Lighthouse project", type_="project"))
    path = private_dir(state_dir) / "pages" / "projects" / "lighthouse-project.md"
    original = path.read_text(encoding="utf-8")
    runtime = runtime_of(engine)
    runtime.call(lambda: runtime.indexes.catch_up("private"))
    path.write_text(original.replace("lifecycle: active", "lifecycle: active\nfixture: true"), encoding="utf-8")
    assert engine.search(owner, {"query": "lighthouse"})["hits"] == []
    with catch_up_paused(runtime):
        path.write_text(original, encoding="utf-8")
        hits = engine.search(owner, {"query": "lighthouse"})["hits"]
    assert [hit["id"] for hit in hits] == [saved["id"]]


def test_a_revision_undone_while_a_catch_up_indexes_it_is_found(engine, owner, state_dir, catch_up_paused):
    # An edit reaches the index's backlog, and is undone byte for byte while a catch-up is between tantivy's
    # commit of the edit and the catalog's record of it: the record is searched as it is now.
    saved = engine.save_page(owner, page("p1", "Lighthouse project", type_="project", body="Keepers."))
    path = private_dir(state_dir) / "pages" / "projects" / "lighthouse-project.md"
    original = path.read_text(encoding="utf-8")
    runtime = runtime_of(engine)
    runtime.call(lambda: runtime.indexes.catch_up("private"))
    path.write_text(original.replace("Keepers.", "Ferries."), encoding="utf-8")
    assert [hit["id"] for hit in engine.search(owner, {"query": "ferries"})["hits"]] == [saved["id"]]
    with catch_up_paused(runtime):
        path.write_text(original, encoding="utf-8")
        keepers = engine.search(owner, {"query": "keepers"})["hits"]
        ferries = engine.search(owner, {"query": "ferries"})["hits"]
    assert [hit["id"] for hit in keepers] == [saved["id"]] and ferries == []
