"""Keyword search: ranking, scores, cursors, currentness, index upkeep and bad input."""

from __future__ import annotations

import re
import shutil
import threading
import time
import unicodedata
import uuid

import pytest

from engine.access.authority import AgentCaller, OperatorCaller
from engine.core.errors import (
    ForeignReference, IndexFailed, InvalidParams, LimitExceeded, StaleCursor, StoreUnavailable,
)
import tantivy

from engine.index.analysis import Analyzer
from engine.index.tantivy_index import SCHEMA_VERSION, PartitionIndex, build_schema, index_document
from engine.service import Engine
from tests.helpers import claim, conversation, lane_held, only_store, page, private_dir, wait_for


def titles(result: dict) -> list[str]:
    return [hit["title"] for hit in result["hits"]]


@pytest.fixture
def seeded(engine, owner):
    engine.save_page(owner, page("p1", "Lisbon office", type_="place", body="Where the operations team sits."))
    engine.save_page(owner, page("p2", "Quarterly planning", type_="note",
                                 body="We agreed to open an office in Lisbon next spring."))
    engine.save_page(owner, page("p3", "Gardening", type_="note", body="Tomatoes need sun."))
    return engine


def test_title_matches_rank_above_body_matches_and_scores_are_query_local(seeded, owner):
    result = seeded.search(owner, {"query": "Lisbon office"})
    assert titles(result) == ["Lisbon office", "Quarterly planning"]
    scores = [hit["score"] for hit in result["hits"]]
    assert scores[0] == 1.0 and 0 < scores[1] < 1.0
    assert "Gardening" not in titles(result)


def test_hits_carry_what_a_host_needs(seeded, owner):
    [hit, _] = seeded.search(owner, {"query": "Lisbon office"})["hits"]
    assert set(hit) == {"id", "revision", "kind", "type", "title", "snippet", "score", "assertionOrigin",
                        "attribution", "ref"}
    assert hit["kind"] == "page" and hit["type"] == "place" and hit["revision"] == 1
    assert hit["attribution"]["agent"] == "main"
    assert hit["ref"]["provider"] == "knowledge" and hit["ref"]["id"] == hit["id"]
    assert hit["ref"]["store"] == only_store(seeded.state).name and len(hit["ref"]["sha256"]) == 64


def test_snippets_show_the_matching_words(seeded, owner):
    hits = seeded.search(owner, {"query": "spring office"})["hits"]
    planning = next(hit for hit in hits if hit["title"] == "Quarterly planning")
    assert "spring" in planning["snippet"]


def test_a_long_bodys_snippet_is_the_passage_that_holds_the_query_words(engine, owner):
    filler = " ".join(["Tomatoes need sun and water every day."] * 12)
    body = f"{filler}\n\nThe harbour crane lifts containers at dawn.\n\n{filler}"
    engine.save_page(owner, page("p1", "Allotment diary", type_="note", body=body))
    engine.save_page(owner, page("p2", "Cranes", type_="note", body="A crane in the title's company."))

    [hit] = [hit for hit in engine.search(owner, {"query": "harbour containers"})["hits"]]

    assert hit["title"] == "Allotment diary"
    assert "harbour crane lifts containers at dawn." in hit["snippet"]
    assert len(hit["snippet"]) <= 240 and not hit["snippet"].startswith("Tomatoes")


def test_min_score_and_limit_are_enforced(seeded, owner):
    assert titles(seeded.search(owner, {"query": "Lisbon office", "minScore": 0.99})) == ["Lisbon office"]
    assert len(seeded.search(owner, {"query": "Lisbon office", "limit": 1})["hits"]) == 1


def test_filters_by_kind_and_type(seeded, owner):
    seeded.remember(owner, {"requestId": "m1", "items": [claim("The Lisbon lease ends in May.", "lease ends in May")]})
    assert {hit["kind"] for hit in seeded.search(owner, {"query": "Lisbon", "kind": "claim"})["hits"]} == {"claim"}
    assert titles(seeded.search(owner, {"query": "Lisbon", "type": "place"})) == ["Lisbon office"]


@pytest.mark.parametrize("query", [
    'title:Lisbon', '"Lisbon', 'Lisbon AND (office', 'Lisbon OR NOT office]', '+Lisbon -office', 'Lisbon^5',
    'office*', 'lis~2', '{Lisbon TO office}', "Lisbon's office!?",
])
def test_user_text_is_never_query_syntax(seeded, owner, query):
    result = seeded.search(owner, {"query": query})
    assert isinstance(result["hits"], list)
    if "Lisbon" in query or "office" in query:
        assert "Lisbon office" in titles(result)


def test_accents_case_and_word_forms_match(engine, owner):
    engine.save_page(owner, page("p1", "Café São Paulo", type_="place", body="Meetings happen there."))
    assert titles(engine.search(owner, {"query": "cafe sao paulo"})) == ["Café São Paulo"]
    assert titles(engine.search(owner, {"query": "meeting"})) == ["Café São Paulo"]


def test_unspaced_scripts_match_word_for_word(engine, owner):
    engine.save_page(owner, page("p1", "東京オフィス", type_="place", body="新しいオフィスは渋谷にあります。"))
    assert titles(engine.search(owner, {"query": "渋谷"})) == ["東京オフィス"]


def test_a_chinese_or_japanese_word_is_found_inside_a_sentence_and_not_by_its_characters_apart(engine, owner):
    engine.save_page(owner, page("p1", "東京オフィス", type_="place", body="新しいオフィスは渋谷にあります。"))
    engine.save_page(owner, page("p2", "古い家", type_="place", body="渋いお茶を飲んで、谷の家に帰った。"))
    engine.save_page(owner, page("p3", "周会纪要", type_="note", body="今天的会议记录由小王整理，下周一发给大家。"))
    engine.save_page(owner, page("p4", "读书", type_="note", body="周末开会之前读完了那本书，提议下次再读。"))
    assert titles(engine.search(owner, {"query": "渋谷"})) == ["東京オフィス"]
    assert titles(engine.search(owner, {"query": "会议记录"})) == ["周会纪要"]   # 会 and 议 are in both notes
    assert set(titles(engine.search(owner, {"query": "谷"}))) == {"東京オフィス", "古い家"}  # one character: anywhere
    assert set(titles(engine.search(owner, {"query": "书"}))) == {"读书"}
    assert titles(engine.search(owner, {"query": "周会"})) == ["周会纪要"]  # a title's word


def test_a_chinese_snippet_is_the_passage_as_written(engine, owner):
    filler = "我们在周末去公园散步，天气很好。" * 20
    engine.save_page(owner, page("p1", "周会纪要", type_="note", body=f"{filler}\n\n今天的会议记录由小王整理。\n\n{filler}"))
    [hit] = engine.search(owner, {"query": "会议记录"})["hits"]
    assert "今天的会议记录由小王整理。" in hit["snippet"] and " 会 " not in hit["snippet"]
    assert sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in hit["snippet"]) <= 240


# --- only current records ---------------------------------------------------------------------


def test_superseded_claims_leave_the_index(engine, owner):
    old = engine.remember(owner, {"requestId": "m1", "items": [claim("Cut-over on January 15.", "the 15th")]})
    engine.remember(owner, {"requestId": "m2", "items": [
        claim("Cut-over on January 22.", "the 22nd", kind="correction", replaces=old["items"][0]["id"]),
    ]})
    assert titles(engine.search(owner, {"query": "cut-over January"})) == ["Cut-over on January 22."]


def test_invalid_duplicate_and_fixture_records_are_not_searched(engine, owner, state_dir):
    saved = engine.save_page(owner, page("p1", "Lighthouse project", type_="project"))
    path = private_dir(state_dir) / "pages" / "projects" / "lighthouse-project.md"
    original = path.read_text(encoding="utf-8")
    assert titles(engine.search(owner, {"query": "lighthouse"})) == ["Lighthouse project"]
    path.write_text(original.replace("lifecycle: active", "lifecycle: active\nfixture: true"), encoding="utf-8")
    assert engine.search(owner, {"query": "lighthouse"})["hits"] == []
    path.write_text(original.replace("type: project", "type: starship"), encoding="utf-8")
    assert engine.search(owner, {"query": "lighthouse"})["hits"] == []
    path.write_text(original, encoding="utf-8")
    (path.parent / "copy.md").write_text(original, encoding="utf-8")
    assert engine.search(owner, {"query": "lighthouse"})["hits"] == []
    (path.parent / "copy.md").unlink()
    assert [hit["id"] for hit in engine.search(owner, {"query": "lighthouse"})["hits"]] == [saved["id"]]


def test_external_edits_and_deletions_reach_the_index_before_the_next_search(engine, owner, state_dir):
    engine.save_page(owner, page("p1", "Harbour", type_="place", body="Boats."))
    path = private_dir(state_dir) / "pages" / "places" / "harbour.md"
    path.write_text(path.read_text(encoding="utf-8").replace("Boats.", "Ferries and tugboats."), encoding="utf-8")
    assert titles(engine.search(owner, {"query": "ferries"})) == ["Harbour"]
    path.unlink()
    assert engine.search(owner, {"query": "ferries"})["hits"] == []


def test_each_partition_searches_only_its_own_records(engine, owner):
    engine.save_page(owner, page("p1", "Private lighthouse", type_="note"))
    chat = conversation(owner.token, str(uuid.uuid4()))
    engine.save_page(chat, page("p2", "Chat lighthouse", type_="note"))
    assert titles(engine.search(owner, {"query": "lighthouse"})) == ["Private lighthouse"]
    assert titles(engine.search(chat, {"query": "lighthouse"})) == ["Chat lighthouse"]


# --- cursors ----------------------------------------------------------------------------------------


def many_pages(engine, owner, count=7):
    for index in range(count):
        engine.save_page(owner, page(f"b{index}", f"Beacon {index}", type_="note", body="beacon " * (index + 1)))


def test_cursors_page_through_results_without_overlap(engine, owner):
    many_pages(engine, owner)
    first = engine.search(owner, {"query": "beacon", "limit": 3})
    second = engine.search(owner, {"query": "beacon", "limit": 3, "cursor": first["nextCursor"]})
    third = engine.search(owner, {"query": "beacon", "limit": 3, "cursor": second["nextCursor"]})
    seen = titles(first) + titles(second) + titles(third)
    assert len(seen) == 7 and len(set(seen)) == 7 and "nextCursor" not in third
    assert all(hit["score"] <= first["hits"][0]["score"] for hit in second["hits"])


def test_a_cursor_is_bound_to_its_query_and_index_snapshot(engine, owner):
    many_pages(engine, owner)
    cursor = engine.search(owner, {"query": "beacon", "limit": 2})["nextCursor"]
    with pytest.raises(InvalidParams):
        engine.search(owner, {"query": "beacons elsewhere", "limit": 2, "cursor": cursor})
    with pytest.raises(InvalidParams):
        engine.search(owner, {"query": "beacon", "limit": 3, "cursor": cursor})
    tampered = cursor[:-3] + ("AAA" if not cursor.endswith("AAA") else "BBB")
    with pytest.raises(InvalidParams):
        engine.search(owner, {"query": "beacon", "limit": 2, "cursor": tampered})
    engine.save_page(owner, page("late", "Beacon late", type_="note"))
    with pytest.raises(StaleCursor):
        engine.search(owner, {"query": "beacon", "limit": 2, "cursor": cursor})


def test_a_cursor_from_another_store_is_rejected(engine, owner):
    many_pages(engine, owner)
    cursor = engine.search(owner, {"query": "beacon", "limit": 2})["nextCursor"]
    other = AgentCaller(engine.add_agent("other", owner=True), {"kind": "owner-private"})
    engine.save_page(other, page("o1", "Beacon elsewhere", type_="note"))
    with pytest.raises(ForeignReference):
        engine.search(other, {"query": "beacon", "limit": 2, "cursor": cursor})


# --- index upkeep -----------------------------------------------------------------------------------


def test_a_deleted_index_is_rebuilt_from_the_catalog(engine, owner, state_dir):
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    engine.close()
    shutil.rmtree(only_store(state_dir) / "index")
    from engine.service import Engine

    with Engine(state_dir, watch=False) as reopened:
        assert titles(reopened.search(owner, {"query": "harbour"})) == ["Harbour"]
        assert reopened.reindex()[0]["records"] == 1


def test_an_index_of_the_earlier_analysis_is_rebuilt_once_on_open(engine, owner, state_dir):
    engine.save_page(owner, page("p1", "東京オフィス", type_="place", body="新しいオフィスは渋谷にあります。"))
    engine.save_page(owner, page("p2", "古い家", type_="place", body="渋いお茶を飲んで、谷の家に帰った。"))
    engine.close()
    root = only_store(state_dir) / "index"
    # Schema 3: the index the releases before Chinese and Japanese pairs wrote, every such character apart.
    current, earlier = root / f"private.v{SCHEMA_VERSION}", root / "private.v3"
    current.rename(earlier)
    spaced = lambda text: re.sub(r"([\u3040-\u30ff\u4e00-\u9fff])", r" \1 ", text)  # every character apart
    index = PartitionIndex(earlier, build_schema(), Analyzer())
    searcher = index.searcher()
    stored = [searcher.doc(address) for _, address in searcher.search(tantivy.Query.all_query(), 10).hits]
    written = []
    for document in stored:
        title = {"p1": "東京オフィス", "p2": "古い家"}["p1" if "オフィス" in document["title"][0] else "p2"]
        body = document["body"][0].decode("utf-8")
        fields = index_document(path=document["path"][0], record_id=document["id"][0],
                                revision=document["revision"][0], kind="page", type_="place", lifecycle="active",
                                title=title, aliases=[], body=body)
        written.append({**fields, "text": spaced(f"{title}\n\n{body}"), "title": spaced(title),
                        "body": spaced(body).encode("utf-8")})
    index.apply([document["path"][0] for document in stored], iter(written))
    index.close()
    from engine.service import Engine

    with Engine(state_dir, watch=False) as reopened:
        assert titles(reopened.search(owner, {"query": "渋谷"})) == ["東京オフィス"]
    assert not earlier.exists() and current.is_dir()


def test_failed_indexing_is_an_error_never_an_empty_success(engine, owner, monkeypatch):
    engine.save_page(owner, page("p1", "Harbour", type_="place"))

    def refuse(self, removals, additions, **options):
        raise OSError("disk full")

    monkeypatch.setattr(PartitionIndex, "apply", refuse)
    receipt = engine.save_page(owner, page("p2", "Lighthouse", type_="place"))
    assert receipt["revision"] == 1  # acknowledged even though the index could not follow
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    with pytest.raises(IndexFailed):  # as the index thread's catch-up fails (a search before it sees the overlay)
        runtime.call(lambda: runtime.indexes.catch_up("private"))
    with pytest.raises(IndexFailed):
        engine.search(owner, {"query": "lighthouse"})
    monkeypatch.undo()
    assert titles(engine.search(owner, {"query": "lighthouse"})) == ["Lighthouse"]


class _CrashAfterCommit(Exception):
    """The engine dying right after tantivy's commit, before the catalog records what was indexed."""


def test_a_crash_between_the_index_commit_and_the_catalogs_leaves_no_stray_document(engine, owner, monkeypatch):
    """Found by the crash harness: a claim indexed just before a kill stayed in the index after it was
    superseded, because the catalog never learned it had been indexed."""
    real_apply = PartitionIndex.apply

    def commit_then_crash(self, removals, additions, **options):
        real_apply(self, removals, additions, **options)
        raise _CrashAfterCommit()

    monkeypatch.setattr(PartitionIndex, "apply", commit_then_crash)
    engine.remember(owner, {"requestId": "m1", "items": [claim("Cut-over on January 15.", "the 15th")]})
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    with pytest.raises(_CrashAfterCommit):  # the index follows the publication: it crashes there
        runtime.call(lambda: runtime.indexes.catch_up("private"))
    monkeypatch.undo()
    old_id = engine.lookup(owner, "Cut-over on January 15.")["matches"][0]["id"]  # a search would catch up
    engine.remember(owner, {"requestId": "m2", "items": [
        claim("Cut-over on January 22.", "the 22nd", kind="correction", replaces=old_id),
    ]})

    def counts() -> tuple[int, int]:
        runtime.indexes.catch_up("private")
        return runtime.catalog.current_count("private"), runtime.indexes.get("private").searcher().num_docs

    assert runtime.call(counts) == (1, 1)
    assert titles(engine.search(owner, {"query": "cut-over January"})) == ["Cut-over on January 22."]


# --- bad input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("params, error, field", [
    ({"query": ""}, InvalidParams, "query"),
    ({"query": "   \n"}, InvalidParams, "query"),
    ({"query": "x" * 8193}, LimitExceeded, "query"),
    ({"query": "é" * 4097}, LimitExceeded, "query"),
    ({"query": "bell\x07"}, InvalidParams, "query"),
    ({"query": "nul\x00byte"}, InvalidParams, "query"),
    ({"query": b"bytes".decode("latin-1") + "\x1b[31m"}, InvalidParams, "query"),
    ({"query": 42}, InvalidParams, "query"),
    ({"query": "?!."}, InvalidParams, "query"),
    ({"query": "harbour", "sources": ["memory", "sessions"]}, InvalidParams, "sources"),
    ({"query": "harbour", "limit": 0}, InvalidParams, "limit"),
    ({"query": "harbour", "limit": 51}, LimitExceeded, "limit"),  # oversize is always limit_exceeded
    ({"query": "harbour", "minScore": 1.5}, InvalidParams, "minScore"),
    ({"query": "harbour", "kind": "note"}, InvalidParams, "kind"),
    ({"query": "harbour", "cursor": "not-a-cursor"}, InvalidParams, "cursor"),
    ({"query": "harbour", "cursor": "eyJ4IjoxfQ.AAAA"}, InvalidParams, "cursor"),
    ({"query": "harbour", "path": "/etc/passwd"}, InvalidParams, "path"),
])
def test_bad_search_input_gets_a_clear_error(engine, owner, params, error, field):
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    with pytest.raises(error) as raised:
        engine.search(owner, params)
    assert raised.value.details.get("field") == field
    assert titles(engine.search(owner, {"query": "harbour"})) == ["Harbour"]


def test_the_index_follows_publications_without_waiting_for_a_search(engine, owner):
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    wait_for(lambda: runtime.call(lambda: runtime.catalog.version("private")[1] == runtime.catalog.version(
        "private")[0]))
    assert runtime.call(lambda: runtime.indexes.get("private").searcher().num_docs) == 1


# --- reads beside the lane ------------------------------------------------------------------


@pytest.fixture
def watched(state_dir):
    """An engine following its vaults with the watcher: the one whose reads may go beside the lane."""
    with Engine(state_dir, watch=True) as opened:
        yield opened, AgentCaller(opened.add_agent("main", owner=True), {"kind": "owner-private"})


@pytest.mark.parametrize("pause", [0, 0.3], ids=["index-behind", "after-the-watcher-echo"])
def test_a_search_answers_beside_a_busy_lane_with_every_acknowledged_write(watched, pause):
    """Right after the write the search catches the index up itself; a little later the watcher has reported
    the engine's own install of the page, which is no news, so no sync on the lane is needed either."""
    engine, owner = watched
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    engine.search(owner, {"query": "Harbour"})  # the partition is followed from here on
    engine.save_page(owner, page("p2", "Harbour lighthouse", type_="place"))  # its index commit comes later
    time.sleep(pause)
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    release, holder = lane_held(runtime)
    answers = []
    searcher = threading.Thread(target=lambda: answers.append(engine.search(owner, {"query": "Harbour"})))
    try:
        searcher.start()
        searcher.join(10)
        assert not searcher.is_alive(), "the search waited for the lane"
    finally:
        release.set()
        holder.join()
        searcher.join()
    assert sorted(titles(answers[0])) == ["Harbour", "Harbour lighthouse"]


def test_a_search_after_an_edit_on_disk_waits_for_the_lane_to_read_it(watched):
    engine, owner = watched
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    engine.search(owner, {"query": "Harbour"})
    [path] = private_dir(engine.state).glob("pages/**/*.md")
    path.write_text(path.read_text(encoding="utf-8").replace("Body text.", "Seagulls everywhere."),
                    encoding="utf-8")
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    wait_for(lambda: "private" in runtime._dirty)
    assert titles(engine.search(owner, {"query": "seagulls"})) == ["Harbour"]


def test_a_restored_older_manifest_stops_reads_beside_the_lane_too(watched):
    engine, owner = watched
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    engine.search(owner, {"query": "Harbour"})
    manifest = only_store(engine.state) / "vault.json"
    older = manifest.read_bytes()
    engine.save_page(owner, page("p2", "Lighthouse", type_="place"))
    engine.search(owner, {"query": "Lighthouse"})
    manifest.write_bytes(older)
    with pytest.raises(StoreUnavailable, match="older than its database"):
        engine.search(owner, {"query": "Harbour"})


def test_a_record_deleted_while_tantivy_commits_leaves_the_index_at_the_next_catch_up(engine, owner, monkeypatch):
    """A catch-up holds no database lock while tantivy commits: what the catalog forgot meanwhile must not
    stay searchable because the catch-up recorded its document afterwards."""
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    runtime.indexes.catch_up("private")
    real_apply = PartitionIndex.apply
    deleted: list[str] = []

    def apply_while_deleting(index, removals, additions, *, threads=1):
        additions = list(additions)
        if additions and not deleted:
            deleted.append(additions[0]["path"])

            def delete():
                (private_dir(engine.state) / deleted[0]).unlink()
                runtime.catalog.sync("private", deleted)

            runtime.call(delete)
        return real_apply(index, removals, iter(additions), threads=threads)

    monkeypatch.setattr(PartitionIndex, "apply", apply_while_deleting)
    engine.save_page(owner, page("p2", "Lighthouse", type_="place"))
    runtime.indexes.catch_up("private")
    assert deleted
    runtime.indexes.catch_up("private")
    assert runtime.indexes.get("private").searcher().num_docs == 1
    assert titles(engine.search(owner, {"query": "Lighthouse"})) == []


def test_aliases_are_searched_after_a_rebuild_too(engine, owner, state_dir):
    engine.save_page(owner, page("p1", "Dana Whitaker", aliases=["Danny Lighthouse"], body="Runs the harbour."))
    engine.save_page(owner, page("p2", "Quiet page", type_="note", body="Nothing to see."))
    assert titles(engine.search(owner, {"query": "lighthouse"})) == ["Dana Whitaker"]
    engine.close()
    shutil.rmtree(only_store(state_dir) / "index")
    from engine.service import Engine

    with Engine(state_dir, watch=False) as reopened:
        assert titles(reopened.search(owner, {"query": "lighthouse"})) == ["Dana Whitaker"]
        assert titles(reopened.search(owner, {"query": "quiet"})) == ["Quiet page"]


@pytest.fixture
def phone_notes(engine, owner):
    engine.save_page(owner, page("p1", "Mobile sync", type_="note",
                                 body="Sync the vault to the phone over the local network."))
    engine.save_page(owner, page("p2", "Gardening", type_="note", body="Tomatoes need to be watered daily."))
    engine.save_page(owner, page("p3", "Travel", type_="note", body="How we got to Lisbon."))
    return engine


def test_the_owners_search_needs_a_meaningful_word_to_match(phone_notes, owner):
    question = {"query": "how do I sync my vault to my phone"}

    assert titles(phone_notes.search(owner, question, owner=True)) == ["Mobile sync"]
    # Agents' searches keep their contract: any query word may match, "to" and "how" included.
    assert set(titles(phone_notes.search(owner, question))) == {"Mobile sync", "Gardening", "Travel"}


def test_function_words_still_add_to_the_score_of_a_meaningful_match(engine, owner):
    # Twins but for "to" and "the": the owner's search ranks the one holding them first, as agents' does,
    # and by less (function words weigh FUNCTION_WORD_WEIGHT of a meaningful word there, fully for agents).
    engine.save_page(owner, page("p1", "Sync one", type_="note",
                                 body="Sync the vault to the phone over the local network."))
    engine.save_page(owner, page("p2", "Sync two", type_="note",
                                 body="Sync a vault onto a phone over a local network."))

    owners = engine.search(owner, {"query": "sync to the phone"}, owner=True)
    agents = engine.search(owner, {"query": "sync to the phone"})

    assert titles(owners) == titles(agents) == ["Sync one", "Sync two"]
    assert owners["hits"][0]["score"] == 1.0 > owners["hits"][1]["score"] > agents["hits"][1]["score"]


def test_a_query_of_function_words_alone_matches_as_any_query_does(phone_notes, owner):
    assert "Travel" in titles(phone_notes.search(owner, {"query": "how to"}, owner=True))


def test_an_owners_cursor_serves_only_the_owners_search(engine, owner):
    for number in range(5):
        engine.save_page(owner, page(f"c{number}", f"Sync note {number}", type_="note", body="sync to the phone"))
    first = engine.search(owner, {"query": "sync to", "limit": 2}, owner=True)

    with pytest.raises(InvalidParams):
        engine.search(owner, {"query": "sync to", "limit": 2, "cursor": first["nextCursor"]})
    following = engine.search(owner, {"query": "sync to", "limit": 2, "cursor": first["nextCursor"]}, owner=True)
    assert not set(titles(first)) & set(titles(following))


def test_function_words_weigh_little_in_the_owners_keyword_search(engine, owner):
    """A note that says "I" and "my" often does not outrank the note about what the question asks, for the
    owner; agents' searches count every query word fully, as their contract says."""
    engine.save_page(owner, page("faq", "Questions", type_="note",
                                 body="How do I pay? I do it my way. How do I sync? I do not know how my bank does it."))
    engine.save_page(owner, page("sync", "Syncing notes", type_="note",
                                 body="Notes sync between devices. Sync runs when the notes change on any device, "
                                      "on the phone or the laptop, at home or at work, every few minutes."))
    mine = engine.owner_search(OperatorCaller("main"), {"query": "how do I sync my notes", "mode": "keyword"})
    agents = engine.search(owner, {"query": "how do I sync my notes"})

    assert titles(mine) == ["Syncing notes", "Questions"]
    assert titles(agents) == ["Questions", "Syncing notes"]
