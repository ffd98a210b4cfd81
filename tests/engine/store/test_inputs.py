"""The edge rules every parameter parser shares (engine/core/params.py): names are one line without control
characters, multi-line text holds no control character but tab, LF and CR, and anything over a maximum is
limit_exceeded naming the field (never invalid_params)."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import asdict
from typing import Any, Callable

import pytest

from engine.search import knowledge_base as kb
from engine.store.attachments import parse_attach_file_input, parse_attach_input
from engine.operator.browse import parse_list_request
from engine.core.errors import InvalidParams, LimitExceeded
from engine.gate.turn import MESSAGE_MAX_CHARS, parse_message
from engine.gate.journal import label_turn
from engine.operator.gate_operator import WINDOW
from engine.core.ids import new_id
from engine.core.params import Integer, check_name, check_text, parse_request_id
from engine.store.inputs import as_plain, parse_page_input, parse_remember_input
from engine.store.publication import request_hash
from engine.memory.ontology_views import parse_ontology_request
from engine.operator.methods import OperatorMethods
from engine.store.reads import READ_PARAMS
from engine.memory.recall import flush_request_id, parse_candidates_query, parse_recall_input
from engine.search.keyword import parse_search_request
from tests.helpers import only_store, vault_snapshot

CONTENT = base64.b64encode(b"notes\n").decode()
RECORD = new_id("pg")
REF = {"provider": "knowledge", "store": "st_x", "id": RECORD, "revision": 1, "sha256": "0" * 64}


def page(**extra: Any) -> dict[str, Any]:
    return {"requestId": "p1", "type": "project", "title": "Atlas", "body": "Body.", **extra}


def claim(**extra: Any) -> dict[str, Any]:
    return {"text": "Atlas ships in January.", "claimKind": "fact", "excerpt": "We ship in January.", **extra}


def remember(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"requestId": "r1", "items": list(items) or [claim()], **extra}


def relationship(**extra: Any) -> dict[str, Any]:
    return {"relation": "works_on", "from": "Dana", "to": "Atlas", "excerpt": "Dana works on Atlas.", **extra}


def recall(**block: Any) -> dict[str, Any]:
    return {"id": RECORD, "recall": {"summary": "Atlas ships in January.", **block}}


# --- names: one helper for every name-like field -----------------------------------------------------

# (parser, params with the name set to the given value, the field the error names)
NAME_FIELDS: dict[str, tuple[Callable[[Any], Any], Callable[[str], Any], str]] = {
    "title": (parse_page_input, lambda v: page(title=v), "title"),
    "type": (parse_page_input, lambda v: page(type=v), "type"),
    "alias": (parse_page_input, lambda v: page(aliases=["atlas", v]), "aliases"),
    "tag": (parse_page_input, lambda v: page(tags=[v]), "tags"),
    "field key": (parse_page_input, lambda v: page(fields={"status": "active", v: "x"}), "fields.<key 1>"),
    "nested field key": (parse_page_input, lambda v: page(fields={"links": [{v: "x"}]}), "fields.links[0].<key 0>"),
    "requestId": (parse_page_input, lambda v: page(requestId=v), "requestId"),
    "claimKind": (parse_remember_input, lambda v: remember(claim(claimKind=v)), "items[0].claimKind"),
    "item subject": (parse_remember_input, lambda v: remember(claim(subject=v)), "items[0].subject"),
    "subject": (parse_remember_input, lambda v: remember(subject=v), "subject"),
    "relation": (parse_remember_input, lambda v: remember(relationship(relation=v)), "items[0].relation"),
    "from": (parse_remember_input, lambda v: remember(relationship(**{"from": v})), "items[0].from"),
    "to": (parse_remember_input, lambda v: remember(relationship(to=v)), "items[0].to"),
    "recall trigger": (parse_recall_input, lambda v: recall(triggers=["atlas", v]), "recall.triggers"),
    "recall project": (parse_recall_input, lambda v: recall(projects=[v]), "recall.projects"),
    "recall requestId": (parse_recall_input, lambda v: {**recall(), "requestId": v}, "requestId"),
    "candidates project": (parse_candidates_query, lambda v: {"mode": "project", "project": v}, "project"),
    "attachment filename": (parse_attach_input, lambda v: {"requestId": "a", "content": CONTENT, "filename": v},
                            "filename"),
    "attached file's path": (parse_attach_file_input, lambda v: {"requestId": "a", "filePath": f"/srv/{v}",
                                                                 "sha256": "0" * 64}, "filePath"),
    "search type": (parse_search_request, lambda v: {"query": "atlas", "type": v}, "type"),
    "knowledge_base_id": (kb.parse_request, lambda v: {"query": "atlas", "knowledge_base_id": v},
                          "knowledge_base_id"),
    "ontology name": (parse_ontology_request, lambda v: {"view": "definitions", "name": v}, "name"),
    "browse type": (parse_list_request, lambda v: {"type": v}, "type"),
}

REFUSED_IN_NAMES = {
    "NUL": "a\x00b", "escape": "a\x1b[31mb", "bell": "a\x07b", "tab": "a\tb", "newline": "a\nb",
    "carriage return": "a\rb", "DEL": "a\x7fb", "C1 CSI": "a\x9bb", "C1 NEL": "a\x85b",
    "line separator": "a\u2028b", "paragraph separator": "a\u2029b", "lone surrogate": "a\ud800b",
}


@pytest.mark.parametrize("name", sorted(NAME_FIELDS))
@pytest.mark.parametrize("char", sorted(REFUSED_IN_NAMES))
def test_control_characters_are_refused_in_every_name_like_field(name, char):
    parser, build, field = NAME_FIELDS[name]
    with pytest.raises(InvalidParams) as raised:
        parser(build(REFUSED_IN_NAMES[char]))
    assert raised.value.reason == "invalid_params"
    assert raised.value.details["field"] == field


@pytest.mark.parametrize("name", sorted(NAME_FIELDS))
def test_a_plain_name_passes_every_name_like_field(name):
    parser, build, _ = NAME_FIELDS[name]
    value = "atlas-page_1.md" if "filename" in name or "path" in name or "requestId" in name else "Atlas Émile"
    if name in ("type", "search type", "browse type"):
        value = "project"
    if name in ("relation",):
        value = "works_on"
    if name == "claimKind":
        value = "fact"
    parser(build(value))


def test_the_error_names_the_code_point_and_the_entry_but_never_echoes_the_value():
    with pytest.raises(InvalidParams) as raised:
        parse_page_input(page(aliases=["atlas", "bad\x1bname"]))
    assert raised.value.details == {"field": "aliases", "index": 1, "codepoint": "U+001B"}
    assert "bad" not in raised.value.message and "aliases[1]" in raised.value.message
    with pytest.raises(InvalidParams, match="title must be one line"):
        check_name("two\nlines", "title", max_chars=10)


# --- multi-line text ---------------------------------------------------------------------------------

TEXT_FIELDS: dict[str, tuple[Callable[[Any], Any], Callable[[str], Any], str]] = {
    "body": (parse_page_input, lambda v: page(body=v), "body"),
    "page excerpt": (parse_page_input, lambda v: page(evidence=[{"excerpt": v}]), "evidence[0].excerpt"),
    "claim text": (parse_remember_input, lambda v: remember(claim(text=v)), "items[0].text"),
    "claim excerpt": (parse_remember_input, lambda v: remember(claim(excerpt=v)), "items[0].excerpt"),
    "quote": (parse_remember_input, lambda v: remember({"text": "x", "claimKind": "fact", "evidence": [
        {"source": new_id("src"), "quote": v}]}), "items[0].evidence[0].quote"),
    "field value": (parse_page_input, lambda v: page(fields={"notes": {"text": v}}), "fields.notes.text"),
    "recall summary": (parse_recall_input, lambda v: recall(summary=v), "recall.summary"),
}


@pytest.mark.parametrize("name", sorted(TEXT_FIELDS))
@pytest.mark.parametrize("char", ["\x00", "\x1b", "\x07", "\x0b", "\x0c", "\x7f", "\ud800"])
def test_control_characters_but_tab_and_newlines_are_refused_in_text(name, char):
    parser, build, field = TEXT_FIELDS[name]
    with pytest.raises(InvalidParams) as raised:
        parser(build(f"first line\nsecond {char} line"))
    assert raised.value.details["field"] == field


@pytest.mark.parametrize("name", sorted(TEXT_FIELDS))
def test_text_keeps_tabs_newlines_and_c1(name):
    parser, build, _ = TEXT_FIELDS[name]
    parser(build("first line\r\n\tindented\nmis-decoded \x92quote\x94 kept"))


# --- oversize is limit_exceeded -------------------------------------------------------------------------

OVERSIZE: dict[str, tuple[Callable[[], Any], str]] = {
    "title": (lambda: parse_page_input(page(title="t" * 501)), "title"),
    "type": (lambda: parse_page_input(page(type="t" * 65)), "type"),
    "body": (lambda: parse_page_input(page(body="b" * 4_000_001)), "body"),
    # Within the 4,000,000 characters, beyond the record's 5,000,000 bytes: 2 bytes each as UTF-8.
    "body bytes": (lambda: parse_page_input(page(body="\u00e9" * 2_500_001)), "body"),
    "alias": (lambda: parse_page_input(page(aliases=["a" * 501])), "aliases"),
    "aliases": (lambda: parse_page_input(page(aliases=[f"a{n}" for n in range(101)])), "aliases"),
    "tags": (lambda: parse_page_input(page(tags=[f"t{n}" for n in range(101)])), "tags"),
    "field key": (lambda: parse_page_input(page(fields={"k" * 501: "x"})), "fields.<key 0>"),
    "page citations": (lambda: parse_page_input(page(evidence=[{"excerpt": "e"}] * 101)), "evidence"),
    "excerpt": (lambda: parse_page_input(page(evidence=[{"excerpt": "e" * 1_000_001}])), "evidence[0].excerpt"),
    "quote": (lambda: parse_page_input(page(evidence=[{"source": new_id("src"), "quote": "q" * 100_001}])),
              "evidence[0].quote"),
    "requestId": (lambda: parse_page_input(page(requestId="r" * 129)), "requestId"),
    "items": (lambda: parse_remember_input(remember(*[claim()] * 101)), "items"),
    "claim text": (lambda: parse_remember_input(remember(claim(text="c" * 100_001))), "items[0].text"),
    "claim excerpt": (lambda: parse_remember_input(remember(claim(excerpt="e" * 1_000_001))), "items[0].excerpt"),
    "claimKind": (lambda: parse_remember_input(remember(claim(claimKind="k" * 65))), "items[0].claimKind"),
    "item citations": (lambda: parse_remember_input(remember({"relation": "works_on", "from": "Dana", "to": "Atlas",
                                                              "evidence": [{"excerpt": "e"}] * 101})),
                       "items[0].evidence"),
    "relation": (lambda: parse_remember_input(remember(relationship(relation="r" * 65))), "items[0].relation"),
    "from": (lambda: parse_remember_input(remember(relationship(**{"from": "f" * 501}))), "items[0].from"),
    "subject": (lambda: parse_remember_input(remember(subject="s" * 501)), "subject"),
    "flushId": (lambda: flush_request_id("f" * 129, "remember", ["x"]), "flushId"),
    "recall summary": (lambda: parse_recall_input(recall(summary="s" * 501)), "recall.summary"),
    "recall triggers": (lambda: parse_recall_input(recall(triggers=[f"t{n}" for n in range(21)])), "recall.triggers"),
    "recall trigger": (lambda: parse_recall_input(recall(triggers=["t" * 201])), "recall.triggers"),
    "recall projects": (lambda: parse_recall_input(recall(projects=[f"p{n}" for n in range(21)])), "recall.projects"),
    "recall project": (lambda: parse_recall_input(recall(projects=["p" * 257])), "recall.projects"),
    "candidates limit": (lambda: parse_candidates_query({"mode": "trigger", "limit": 201}), "limit"),
    "candidates project": (lambda: parse_candidates_query({"mode": "project", "project": "p" * 257}), "project"),
    "search limit": (lambda: parse_search_request({"query": "atlas", "limit": 51}), "limit"),
    "search query": (lambda: parse_search_request({"query": "q" * 8193}), "query"),
    "search type": (lambda: parse_search_request({"query": "atlas", "type": "t" * 65}), "type"),
    "search cursor": (lambda: parse_search_request({"query": "atlas", "cursor": "c" * 2049}), "cursor"),
    "read lines": (lambda: READ_PARAMS.read({"ref": REF, "lines": 201}), "lines"),
    "max_results": (lambda: kb.parse_request({"query": "atlas", "max_results": 51}), "max_results"),
    "knowledge_base_id": (lambda: kb.parse_request({"query": "atlas", "knowledge_base_id": "b" * 501}),
                          "knowledge_base_id"),
    "limit_chars": (lambda: kb.parse_request({"knowledge_item_id": RECORD, "limit_chars": 100_001}), "limit_chars"),
    "ontology limit": (lambda: parse_ontology_request({"limit": 101}), "limit"),
    "ontology offset": (lambda: parse_ontology_request({"offset": 1_000_001}), "offset"),
    "ontology name": (lambda: parse_ontology_request({"view": "definitions", "name": "n" * 201}), "name"),
    "ontology maxChars": (lambda: parse_ontology_request({"view": "sources", "sourcePath": "shipped/ontology.yaml",
                                                         "maxChars": 65_537}), "maxChars"),
    "ontology sourcePath": (lambda: parse_ontology_request({"view": "sources", "sourcePath": "s" * 257}),
                            "sourcePath"),
    "attachment filename": (lambda: parse_attach_input({"requestId": "a", "content": CONTENT,
                                                        "filename": "f" * 256}), "filename"),
    "attachment mediaType": (lambda: parse_attach_input({"requestId": "a", "content": CONTENT,
                                                         "mediaType": "text/" + "p" * 251}), "mediaType"),
    "attachment content": (lambda: parse_attach_input({"requestId": "a", "content": "A" * 8_000_004}), "content"),
    "filePath": (lambda: parse_attach_file_input({"requestId": "a", "filePath": "/" + "p" * 4096,
                                                  "sha256": "0" * 64}), "filePath"),
    "gate message": (lambda: parse_message({"message": "m" * (MESSAGE_MAX_CHARS + 1)}), "message"),
    "browse limit": (lambda: parse_list_request({"limit": 501}), "limit"),
    "browse offset": (lambda: parse_list_request({"offset": 10_000_001}), "offset"),
    "gate journal limit": (lambda: WINDOW.read({"limit": 201}), "limit"),
    "gate journal label": (lambda: label_turn(None, "private", "t1", [new_id("pg") for _ in range(51)]), "needed"),
}


@pytest.mark.parametrize("name", sorted(OVERSIZE))
def test_oversize_is_always_limit_exceeded_naming_the_field(name):
    parse, field = OVERSIZE[name]
    with pytest.raises(LimitExceeded) as raised:
        parse()
    assert raised.value.reason == "limit_exceeded"
    assert raised.value.details["field"] == field


def test_the_limits_themselves_are_accepted():
    parse_page_input(page(title="t" * 500, type="project", aliases=[f"a{n}" for n in range(100)],
                          requestId="r" * 128))
    parse_remember_input(remember(*[claim(claimKind="k" * 64)] * 100, subject="s" * 500))
    parse_recall_input(recall(summary="s" * 500, triggers=["t" * 200] * 20, projects=["p" * 256] * 20))
    assert parse_search_request({"query": "atlas", "limit": 50}).limit == 50
    read = READ_PARAMS.read({"ref": REF, "lines": 200})
    assert (read["from"], read["lines"]) == (1, 200)


def test_an_operator_label_and_share_list_over_their_limits_are_limit_exceeded(engine):
    engine.add_agent("main", owner=True)
    methods = OperatorMethods(engine)
    with pytest.raises(LimitExceeded) as raised:
        methods.share_store({"agent": "main", "name": "team", "label": "l" * 201})
    assert raised.value.details["field"] == "label"
    with pytest.raises(LimitExceeded) as raised:
        methods.share_store({"agent": "main", "name": "team", "others": [f"agent{n}" for n in range(101)]})
    assert raised.value.details["field"] == "others"


def test_an_integer_separates_wrong_from_too_big():
    limit = Integer("limit", 1, 5)
    assert limit.check(5, "limit") == 5
    for wrong in (0, -1, True, 2.5, "3", None):
        with pytest.raises(InvalidParams):
            limit.check(wrong, "limit")
    with pytest.raises(LimitExceeded) as raised:
        limit.check(6, "limit")
    assert raised.value.details == {"field": "limit", "limit": 5, "size": 6}


def test_check_text_and_parse_request_id_directly():
    assert check_text("a\tb\r\nc", "body", max_chars=10) == "a\tb\r\nc"
    with pytest.raises(LimitExceeded):
        check_text("x" * 11, "body", max_chars=10)
    assert parse_request_id("demo-page.1:a_b") == "demo-page.1:a_b"
    with pytest.raises(InvalidParams) as raised:
        parse_request_id("has space")
    assert raised.value.details["field"] == "requestId"


# --- through the engine: refused and nothing written ------------------------------------------------------


@pytest.mark.parametrize("params, error, field", [
    (page(aliases=["Atlas", "at\x00las"]), InvalidParams, "aliases"),  # accepted before issue 13
    (page(tags=["ok", "t\x7fag"]), InvalidParams, "tags"),
    (page(title="t" * 501), LimitExceeded, "title"),
    (page(body="b" * 4_000_001), LimitExceeded, "body"),
    (page(body="\u4e2d" * 1_700_000), LimitExceeded, "body"),  # 5,100,000 bytes: named, not the record's size
    (page(fields={"status": "active", "bad\x1bkey": "x"}), InvalidParams, "fields.<key 1>"),
])
def test_bad_pages_change_nothing(engine, owner, params, error, field):
    engine.save_page(owner, page(requestId="seed"))
    before = vault_snapshot(only_store(engine.state) / "vault")
    with pytest.raises(error) as raised:
        engine.save_page(owner, params)
    assert raised.value.details["field"] == field
    assert vault_snapshot(only_store(engine.state) / "vault") == before



@pytest.mark.parametrize("locator", [{"lines": [1, 1]}, {"quote": "January"}])
def test_an_excerpt_takes_no_locator_rather_than_dropping_it(engine, owner, locator):
    """An excerpt is retained whole, and lines or quote beside it were dropped without a word."""
    cited = {"excerpt": "We ship in January.", **locator}
    (name,) = locator
    with pytest.raises(InvalidParams) as raised:
        parse_page_input(page(evidence=[cited]))
    assert raised.value.details["field"] == f"evidence[0].{name}"
    engine.save_page(owner, page(requestId="seed"))
    before = vault_snapshot(only_store(engine.state) / "vault")
    with pytest.raises(InvalidParams) as raised:
        engine.remember(owner, {"requestId": "r1", "items": [{"text": "Atlas ships.", "claimKind": "fact",
                                                              "evidence": [cited]}]})
    assert raised.value.details["field"] == f"items[0].evidence[0].{name}"
    assert vault_snapshot(only_store(engine.state) / "vault") == before


# What a write's request digest was for these parameters when its receipt was journalled: a retry must digest
# alike in every later version, or its identical retry is refused as a different request.
DIGESTED_CONTENT = b"retained note\n"
DIGESTED_PAGE = {
    "requestId": "golden-page", "type": "project", "title": "Atlas", "body": "The Atlas migration.",
    "aliases": ["atlas", "the migration"], "tags": ["infra"],
    "fields": {"status": "active", "links": [{"href": "https://example.com/a"}]},
    "evidence": [{"excerpt": "we move Atlas in May"},
                 {"content": base64.b64encode(DIGESTED_CONTENT).decode(),
                  "sha256": hashlib.sha256(DIGESTED_CONTENT).hexdigest(), "filename": "note.txt",
                  "mediaType": "text/plain"}]}
DIGESTED_REVISION = {"requestId": "golden-rev", "type": "note", "title": "Atlas", "id": "pg_01KBQ3Z8T2M9Z7K3B5N1X0VYAB",
                     "expectedRevision": 2}
DIGESTED_REMEMBER = {"requestId": "golden-remember", "subject": "pg_01KBQ3Z8T2M9Z7K3B5N1X0VYAB", "items": [
    {"text": "Atlas moves in May.", "claimKind": "decision", "excerpt": "we move Atlas in May", "validFrom": "2026-05-01"},
    {"text": "Dana leads Atlas.", "claimKind": "fact",
     "evidence": [{"source": "src_01KBQ3Z8T2M9Z7K3B5N1X0VYAC", "lines": [1, 2], "quote": "Dana"}]},
    {"relation": "works_on", "from": "pg_01KBQ3Z8T2M9Z7K3B5N1X0VYAD", "to": "pg_01KBQ3Z8T2M9Z7K3B5N1X0VYAB",
     "excerpt": "Dana works on Atlas"}]}


def test_request_digests_are_those_journalled_receipts_were_filed_under():
    assert request_hash("save_page", parse_page_input(DIGESTED_PAGE).digest_params()) == (
        "fbac34a7fb4cc36ebad8507430ae8abccd1b7b50219db348234f4bdf83eeb40d")
    assert request_hash("save_page", parse_page_input(DIGESTED_REVISION).digest_params()) == (
        "3103acc487942f144ebaacdf10fb4236316bd435c8f006f4cf30273498f6d165")
    assert request_hash("remember", parse_remember_input(DIGESTED_REMEMBER).digest_params()) == (
        "6bbf3ce66f8f6a91e33866132fc16bf66b89e89196e49d15eea67c506afd154b")


def test_digest_params_are_the_inputs_as_dataclasses_asdict_gives_them():
    for parsed in (parse_page_input(DIGESTED_PAGE), parse_remember_input(DIGESTED_REMEMBER)):
        assert as_plain(parsed) == asdict(parsed)
