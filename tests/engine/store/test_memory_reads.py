"""The shared read contract: reads by reference, exact lookup, status and health."""

from __future__ import annotations

import base64
import uuid

import pytest

from engine.access.authority import AgentCaller
from engine.store.attachments import attach
from engine.core.errors import ForeignReference, InvalidParams, LimitExceeded, NotFound, StaleRevision
from tests.helpers import claim, conversation, only_store, page, private_dir


def first_ref(engine, caller, query):
    return engine.search(caller, {"query": query})["hits"][0]["ref"]


def test_reads_number_lines_over_title_attribution_and_body(engine, owner):
    body = "\n".join(f"Line {n}" for n in range(1, 251))
    engine.save_page(owner, page("p1", "Long page", type_="note", body=body))
    ref = first_ref(engine, owner, "long page")
    read = engine.read(owner, {"ref": ref})
    lines = read["text"].split("\n")
    assert read["from"] == 1 and read["lines"] == 100 and len(lines) == 100
    assert lines[0] == "# Long page" and "recorded by main" in lines[1] and lines[2] == "" and lines[3] == "Line 1"
    assert read["totalLines"] == 253 and read["truncated"] is True
    tail = engine.read(owner, {"ref": ref, "from": 200, "lines": 200})
    assert tail["lines"] == 54 and tail["text"].split("\n")[0] == "Line 197" and tail["truncated"] is False
    with pytest.raises(LimitExceeded):  # oversize is always limit_exceeded
        engine.read(owner, {"ref": ref, "lines": 201})
    with pytest.raises(InvalidParams):
        engine.read(owner, {"ref": ref, "from": 0})


def test_reads_list_at_most_twenty_evidence_locators(engine, owner):
    evidence = [{"excerpt": f"Supporting note number {n}."} for n in range(25)]
    engine.save_page(owner, page("p1", "Well supported", type_="note", evidence=evidence))
    read = engine.read(owner, {"ref": first_ref(engine, owner, "well supported")})
    assert len(read["evidence"]) == 20 and read["evidenceTruncated"] is True
    locator = read["evidence"][0]
    assert locator["quote"] == "Supporting note number 0." and locator["lines"] == [1, 1]
    assert locator["mediaType"] == "text/plain" and len(locator["sha256"]) == 64
    assert (private_dir(engine.state) / locator["retainedPath"]).read_text() == "Supporting note number 0."
    assert "filename" not in locator  # an excerpt has no name of its own


def test_a_cited_original_is_named_by_its_own_filename_unless_its_descriptor_was_edited_into_a_path(
        engine, owner, state_dir):
    source = attach(engine, owner, {"requestId": "a1", "content": base64.b64encode(b"Harbour log.").decode(),
                                    "filename": "harbour-log.txt"})["source"]
    engine.save_page(owner, page("p1", "Harbour", type_="place", evidence=[{"source": source["id"]}]))
    ref = first_ref(engine, owner, "harbour")
    assert engine.read(owner, {"ref": ref})["evidence"][0]["filename"] == "harbour-log.txt"
    descriptor = private_dir(state_dir) / "sources" / f"{source['id']}.source.yaml"
    descriptor.write_text(descriptor.read_text(encoding="utf-8").replace("harbour-log.txt", "../../etc/passwd"),
                          encoding="utf-8")
    locator = engine.read(owner, {"ref": first_ref(engine, owner, "harbour")})["evidence"][0]
    assert "filename" not in locator and locator["retainedPath"] == source["retainedPath"]


def test_a_changed_revision_rejects_the_read(engine, owner):
    saved = engine.save_page(owner, page("p1", "Harbour", type_="place"))
    ref = first_ref(engine, owner, "harbour")
    revised = engine.save_page(owner, page("p2", "Harbour", type_="place", body="New.", id=saved["id"],
                                           expectedRevision=1))
    with pytest.raises(StaleRevision) as raised:
        engine.read(owner, {"ref": ref})
    current = engine.get_record(owner, saved["id"])
    assert raised.value.details == {"field": "ref", "id": saved["id"], "revision": revised["revision"],
                                    "sha256": current["sha256"]}


def test_an_edit_without_a_revision_bump_also_rejects_the_read(engine, owner, state_dir):
    engine.save_page(owner, page("p1", "Harbour", type_="place", body="Boats."))
    ref = first_ref(engine, owner, "harbour")
    path = private_dir(state_dir) / "pages" / "places" / "harbour.md"
    path.write_text(path.read_text(encoding="utf-8").replace("Boats.", "Ships."), encoding="utf-8")
    with pytest.raises(StaleRevision):
        engine.read(owner, {"ref": ref})


def test_references_grant_no_access(engine, owner):
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    ref = first_ref(engine, owner, "harbour")
    other = AgentCaller(engine.add_agent("other", owner=True), {"kind": "owner-private"})
    engine.save_page(other, page("o1", "Elsewhere", type_="place"))
    with pytest.raises(ForeignReference):
        engine.read(other, {"ref": ref})
    chat = conversation(owner.token, str(uuid.uuid4()))
    with pytest.raises(NotFound):
        engine.read(chat, {"ref": ref})
    forged = {**ref, "id": "pg_forged"}
    with pytest.raises(NotFound):
        engine.read(owner, {"ref": forged})


def test_only_active_records_are_read_by_reference(engine, owner):
    old = engine.remember(owner, {"requestId": "m1", "items": [claim("Cut-over on January 15.", "the 15th")]})
    ref = first_ref(engine, owner, "january 15")
    engine.remember(owner, {"requestId": "m2", "items": [
        claim("Cut-over on January 22.", "the 22nd", kind="correction", replaces=old["items"][0]["id"]),
    ]})
    with pytest.raises((NotFound, StaleRevision)):
        engine.read(owner, {"ref": ref})
    assert engine.get_record(owner, old["items"][0]["id"], revision=1)["status"] == "historical"


@pytest.mark.parametrize("ref", [None, "knowledge:pg_x", {"provider": "memory-core"}, {"provider": "knowledge"},
                                 {"provider": "knowledge", "store": "s", "id": "x", "revision": True, "sha256": "a"}])
def test_malformed_references_are_invalid(engine, owner, ref):
    with pytest.raises(InvalidParams):
        engine.read(owner, {"ref": ref})


def test_lookup_resolves_ids_titles_and_aliases_and_ambiguity_to_none(engine, owner):
    dana = engine.save_page(owner, page("p1", "Dana Whitaker", aliases=["Dana", "DW"]))
    for name in (dana["id"], "Dana Whitaker", "dana whitaker", "  DANA  ", "dw"):
        assert [m["id"] for m in engine.lookup(owner, name)["matches"]] == [dana["id"]], name
    assert engine.lookup(owner, "Nobody") == {"matches": [], "ambiguous": False}
    engine.save_page(owner, page("p2", "Dana", type_="note"))
    assert engine.lookup(owner, "Dana") == {"matches": [], "ambiguous": True}
    with pytest.raises(InvalidParams):
        engine.lookup(owner, "")


def test_lookup_finds_a_name_whichever_way_its_accents_are_composed(engine, owner):
    composed = engine.save_page(owner, page("p1", "Caf\u00e9 Lisboa", type_="place"))  # é as one character
    decomposed = engine.save_page(owner, page("p2", "Jos\u0065\u0301 Saramago", type_="person"))  # e + accent
    for name, record in (("Cafe\u0301 Lisboa", composed), ("caf\u00e9 lisboa", composed),
                         ("Jos\u00e9 Saramago", decomposed), ("Jose\u0301 Saramago", decomposed)):
        assert [m["id"] for m in engine.lookup(owner, name)["matches"]] == [record["id"]], ascii(name)
    assert engine.lookup(owner, "Cafe Lisboa")["matches"] == []  # no accent is another name


def test_status_returns_readiness_only_and_never_creates_a_store(engine, owner, state_dir):
    assert engine.status(owner) == {"ready": True}
    assert not state_dir.stores.exists() or not any(state_dir.stores.iterdir())
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    assert engine.status(owner) == {"ready": True}
    (only_store(state_dir) / "vault.json").unlink()
    assert engine.status(owner) == {"ready": False}


def test_health_reports_scoped_validation(engine, owner, state_dir):
    engine.save_page(owner, page("p1", "Harbour", type_="place"))
    assert engine.health(owner)["ok"] is True
    (private_dir(state_dir) / "pages" / "broken.md").write_text("---\ntitle: [\n---\n", encoding="utf-8")
    health = engine.health(owner)
    assert health["ok"] is False and health["errors"] == 1
    assert health["findings"][0]["path"] == "pages/broken.md"
    chat = conversation(owner.token, str(uuid.uuid4()))
    assert engine.health(chat)["errors"] == 0  # another partition's findings are not its business


def test_passages_quote_the_best_matching_parts_of_a_page(engine, owner):
    body = ("Atlas moves order tracking to services.\n\n"
            "The cafeteria menu changes on Mondays.\n\n"
            "Order history still lives in the monolith; notifications too.")
    saved = engine.save_page(owner, page("p1", "Atlas", type_="project", body=body))
    quoted = engine.passages(owner, saved["id"], "where does order history live?", excerpts=1)
    assert quoted == ["Order history still lives in the monolith; notifications too."]
    both = engine.passages(owner, saved["id"], "order", excerpts=4)
    assert both == ["Atlas moves order tracking to services.",
                    "Order history still lives in the monolith; notifications too."]
