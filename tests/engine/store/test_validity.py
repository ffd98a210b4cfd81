"""Temporal validity: claims' validFrom/validTo, asOf on reads, searches and lookups, corrections that end a
claim's validity, and the surfaces that leave out claims that do not hold (docs/record-format.md)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from engine import service
from engine.core.errors import InvalidParams, NotFound
from engine.core.ids import format_timestamp
from engine.memory.knowledge_index import index_for
from engine.memory.recall import recall_candidates, set_recall
from engine.store.catalog import Catalog
from engine.vault.ontology import Ontology
from engine.vault.record_view import Validity, validity_moment, view_of
from engine.vault.records import Record, check_record
from tests.helpers import claim, page, private_dir, vault_snapshot

NOW = datetime.now(timezone.utc)
PAST, FUTURE = (NOW - timedelta(days=400)).date().isoformat(), (NOW + timedelta(days=400)).date().isoformat()
YESTERDAY = (NOW - timedelta(days=1)).date().isoformat()


def remember(engine, caller, *items, subject=None):
    params = {"requestId": f"m-{uuid.uuid4()}", "items": list(items)}
    if subject is not None:
        params["subject"] = subject
    return [item["id"] for item in engine.remember(caller, params)["items"]]


def frontmatter(engine, caller, record_id):
    return engine.get_record(caller, record_id)["frontmatter"]


# --- the rule, once ---------------------------------------------------------------------------


def test_a_date_bound_covers_its_whole_utc_day_and_a_date_time_is_exact() -> None:
    january = Validity("2026-01-01", "2026-01-31")
    assert january.holds_at(datetime(2026, 1, 31, 23, 59, 59, tzinfo=timezone.utc))
    assert not january.holds_at(datetime(2026, 2, 1, tzinfo=timezone.utc))
    assert not january.holds_at(datetime(2025, 12, 31, 23, 59, tzinfo=timezone.utc))
    morning = Validity("2026-01-01T09:00:00+01:00", "2026-01-01T10:00:00Z")
    assert morning.holds_at(datetime(2026, 1, 1, 8, 0, tzinfo=timezone.utc))
    assert not morning.holds_at(datetime(2026, 1, 1, 10, 0, 1, tzinfo=timezone.utc))
    assert Validity(None, None).holds_at(NOW) and not Validity(None, None).bounded
    assert validity_moment("2026-02-30") is None and validity_moment("2026-01-01T09:00:00") is None  # no offset


def test_a_file_with_bad_bounds_is_readable_and_invalid() -> None:
    base = {"format": "knowledge-record-v1", "id": "cl_1", "revision": 1, "kind": "claim", "title": "T",
            "recorded_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "scope": "private",
            "lifecycle": "active", "claim_kind": "fact", "assertion_origin": "user",
            "evidence": [{"source": "src_1"}]}
    ontology = Ontology.shipped()

    def fields_of(**bounds):
        return {f.field for f in check_record(Record({**base, **bounds}, "x"), ontology, "c.md") if f.code == "validity"}

    assert fields_of(valid_from="2026-01-01", valid_to="2026-12-31T00:00:00Z") == set()
    assert fields_of(valid_from="next week") == {"valid_from"}
    assert view_of({**base, "valid_from": "next week"}).valid_from is None  # None in the view, the rest readable
    assert fields_of(valid_from="2026-02-01", valid_to="2026-01-31") == {"valid_to"}
    page_record = {**base, "kind": "page", "type": "note", "valid_to": "2026-01-01"}
    assert any(f.field == "valid_to" and f.code == "validity"
               for f in check_record(Record(page_record, "x"), ontology, "pages/p.md"))


# --- writing ----------------------------------------------------------------------------------


def test_remember_stores_the_bounds_in_the_record(engine, owner):
    [claim_id] = remember(engine, owner, claim("Dana leads Atlas", "Dana leads Atlas this year",
                                               validFrom="2026-01-01", validTo="2026-12-31T17:00:00Z"))
    fm = frontmatter(engine, owner, claim_id)
    assert (fm["valid_from"], fm["valid_to"]) == ("2026-01-01", "2026-12-31T17:00:00Z")
    text = (private_dir(engine.state) / f"claims/{claim_id}.md").read_text(encoding="utf-8")
    assert "valid_from: '2026-01-01'" in text or "valid_from: 2026-01-01" in text


@pytest.mark.parametrize("bounds, field", [
    ({"validFrom": "soon"}, "items[0].validFrom"), ({"validTo": 20260101}, "items[0].validTo"),
    ({"validFrom": "2026-02-01", "validTo": "2026-01-31"}, "items[0].validTo"),
    ({"validFrom": "2026-01-01T10:00:00"}, "items[0].validFrom"),
])
def test_bad_bounds_are_invalid_params_and_change_nothing(engine, owner, bounds, field):
    engine.save_page(owner, page("seed", "Seed", type_="note"))
    before = vault_snapshot(private_dir(engine.state))
    with pytest.raises(InvalidParams) as caught:
        remember(engine, owner, claim("Dana leads Atlas", "Dana leads Atlas", **bounds))
    assert caught.value.details.get("field") == field
    assert vault_snapshot(private_dir(engine.state)) == before


def test_a_correction_from_a_moment_ends_the_corrected_claim_instead_of_superseding_it(engine, owner):
    [lisbon] = remember(engine, owner, claim("Dana lives in Lisbon", "I live in Lisbon", validFrom="2020-01-01"))
    [porto] = remember(engine, owner, claim("Dana lives in Porto", "I moved to Porto", replaces=lisbon,
                                            validFrom=YESTERDAY))
    old = frontmatter(engine, owner, lisbon)
    assert (old["lifecycle"], old["valid_from"], old["valid_to"]) == ("active", "2020-01-01", YESTERDAY)
    assert frontmatter(engine, owner, porto)["replaces"] == lisbon
    # Its past stays true: as of a day it held, the corrected claim is found and the correction is not.
    found = {hit["id"] for hit in engine.search(owner, {"query": "Dana lives", "asOf": "2024-06-01"})["hits"]}
    assert found == {lisbon}
    later = (NOW + timedelta(days=2)).date().isoformat()
    assert {hit["id"] for hit in engine.search(owner, {"query": "Dana lives", "asOf": later})["hits"]} == {porto}
    # Without validFrom a correction supersedes, as before.
    [lyon] = remember(engine, owner, claim("Dana lives in Lyon", "Lyon now", replaces=porto))
    assert frontmatter(engine, owner, porto)["lifecycle"] == "superseded" and lyon


def test_a_correction_cannot_start_before_the_claim_it_corrects(engine, owner):
    [lisbon] = remember(engine, owner, claim("Dana lives in Lisbon", "Lisbon", validFrom="2024-01-01"))
    before = vault_snapshot(private_dir(engine.state))
    with pytest.raises(InvalidParams) as caught:
        remember(engine, owner, claim("Dana lives in Porto", "Porto", replaces=lisbon, validFrom="2023-01-01"))
    assert caught.value.details.get("field") == "items[0].validFrom"  # the item, as the parameter reader names it
    assert vault_snapshot(private_dir(engine.state)) == before


# --- reading as of a moment -------------------------------------------------------------------


def test_searches_lookups_and_reads_answer_as_of_a_moment(engine, owner):
    [ended] = remember(engine, owner, claim("Atlas ships weekly", "weekly", validTo=YESTERDAY))
    [ahead] = remember(engine, owner, claim("Atlas ships daily", "daily", validFrom=FUTURE))
    [always] = remember(engine, owner, claim("Atlas ships builds", "builds"))

    def hits(**extra):
        return {hit["id"] for hit in engine.search(owner, {"query": "Atlas ships", **extra})["hits"]}

    assert hits() == {always}
    assert hits(asOf=PAST) == {ended, always}
    assert hits(asOf=FUTURE) == {ahead, always}
    with pytest.raises(InvalidParams):
        engine.search(owner, {"query": "Atlas ships", "asOf": "yesterday"})

    assert engine.lookup(owner, "Atlas ships weekly")["matches"] == []
    assert [m["id"] for m in engine.lookup(owner, "Atlas ships weekly", PAST)["matches"]] == [ended]

    ref = engine.search(owner, {"query": "Atlas ships weekly", "asOf": PAST})["hits"][0]["ref"]
    assert engine.read(owner, {"ref": ref, "asOf": PAST})["ref"]["id"] == ended
    with pytest.raises(NotFound):
        engine.read(owner, {"ref": ref})  # now it does not hold

    record = engine.get_record(owner, ended)  # the exact read serves it, and says it does not hold now
    assert record["validity"] == {"validFrom": None, "validTo": YESTERDAY, "holds": False}
    assert engine.get_record(owner, ended, None, PAST)["validity"]["holds"] is True
    assert "validity" not in engine.get_record(owner, always)


def test_a_page_of_search_results_is_full_though_claims_are_passed_over(engine, owner):
    remember(engine, owner, *(claim(f"Harbour note {n}", f"harbour {n}", validTo=YESTERDAY) for n in range(6)))
    current = remember(engine, owner, *(claim(f"Harbour fact {n}", f"harbour fact {n}") for n in range(4)))
    first = engine.search(owner, {"query": "harbour", "limit": 3})
    assert len(first["hits"]) == 3 and "nextCursor" in first
    rest = engine.search(owner, {"query": "harbour", "limit": 3, "cursor": first["nextCursor"]})
    assert {hit["id"] for hit in first["hits"] + rest["hits"]} == set(current) and "nextCursor" not in rest


def test_recall_candidates_leave_out_claims_that_do_not_hold_now(engine, owner):
    block = {"summary": "Status notes on Fridays.", "triggers": ["status notes"], "importance": 5}
    [ended] = remember(engine, owner, claim("Dana wants Friday notes", "Fridays", validTo=YESTERDAY))
    [held] = remember(engine, owner, claim("Dana wants Monday notes", "Mondays"))
    for record_id in (ended, held):
        set_recall(engine, owner, {"id": record_id, "recall": block})
    found = recall_candidates(engine, owner, {"mode": "trigger"})["candidates"]
    assert [candidate["id"] for candidate in found] == [held]


def test_the_knowledge_index_leaves_out_claims_that_do_not_hold_at_its_moment(engine, owner, monkeypatch):
    moment = datetime(2026, 6, 1, 12, tzinfo=timezone.utc)
    monkeypatch.setattr(service, "utc_now", lambda: moment)
    remember(engine, owner, claim("Old harbour rule", "old rule", validTo="2026-05-01"))
    remember(engine, owner, claim("Coming harbour rule", "new rule", validFrom="2026-06-10"))
    remember(engine, owner, claim("Standing harbour rule", "standing rule"))
    text = index_for(engine, owner, format_timestamp(moment))["text"]
    assert "Standing harbour rule" in text
    assert "Old harbour rule" not in text and "Coming harbour rule" not in text
    later = index_for(engine, owner, format_timestamp(datetime(2026, 6, 11, tzinfo=timezone.utc)))["text"]
    assert "Coming harbour rule" in later and "Old harbour rule" not in later
    # The kept selection answers as the definition does.
    from engine.memory.knowledge_index import build_index, full_index
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    for when in (moment, datetime(2026, 6, 11, tzinfo=timezone.utc), datetime(2026, 4, 1, tzinfo=timezone.utc)):
        assert runtime.call(lambda: build_index(runtime.store, runtime.catalog, "private", when)) == \
            runtime.call(lambda: full_index(runtime.store, runtime.catalog, "private", when))
    assert isinstance(runtime.catalog, Catalog)
