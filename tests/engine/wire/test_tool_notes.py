"""A tool's ``note``: what it read differently from what was sent, said in its answer over the wire (and held to
its ``outputSchema`` there)."""

from __future__ import annotations

import base64

from engine.wire.protocol import Dispatcher
from tests.engine.wire.test_record_links import save, session_for, tool


def test_a_type_the_ontology_does_not_define_is_named_with_the_types_close_to_it(engine) -> None:
    dispatcher = Dispatcher(engine)
    owner = session_for(dispatcher, engine.add_agent("main", owner=True), {"kind": "owner-private"})
    empty = tool(dispatcher, owner, "knowledge_grep", {"query": "Dana", "type": "vessel"})
    assert empty == {"hits": [], "note": "type 'vessel' is not defined in this store's ontology, and no record "
                                         "here has a type yet (knowledge_ontology lists the types it defines)"}
    tool(dispatcher, owner, "knowledge_save_page", {"requestId": "p1", "type": "person", "title": "Dana Whitaker",
                                                     "body": "Keeps the lighthouse running."})
    save(dispatcher, owner, "n1", "Lighthouse rota")

    for typo in ("Person", "persons", "preson", "people"):
        answer = tool(dispatcher, owner, "knowledge_grep", {"query": "Dana", "type": typo})
        assert answer["hits"] == [] and answer["note"].startswith(
            f"type {typo!r} is not defined in this store's ontology; did you mean ") and "'person'" in answer["note"]
    other = tool(dispatcher, owner, "knowledge_grep", {"query": "Dana", "type": "vessel"})
    assert other["note"] == ("type 'vessel' is not defined in this store's ontology; types records have here: "
                             "note, person (knowledge_ontology lists the types it defines)")
    wrong_kind = tool(dispatcher, owner, "knowledge_grep", {"query": "Dana", "type": "decision", "kind": "page"})
    assert wrong_kind["note"] == ("'decision' is a claim kind, not a page type: search with kind 'claim', or "
                                  "leave kind out")

    found = tool(dispatcher, owner, "knowledge_grep", {"query": "Dana", "type": "person"})
    assert [hit["title"] for hit in found["hits"]] == ["Dana Whitaker"] and "note" not in found
    unmatched = tool(dispatcher, owner, "knowledge_grep", {"query": "submarine", "type": "person"})
    assert unmatched == {"hits": []}  # a type records have, and a query nothing matches: nothing to say
    shared = dispatcher.handle(owner, b'{"jsonrpc": "2.0", "id": 2, "method": "memory/search", '
                                      b'"params": {"query": "Dana", "type": "Person"}}')
    assert shared["result"] == {"hits": []}  # the host's search keeps its contract's shape


def test_a_type_the_ontology_defines_that_no_record_has_yet_is_empty_without_a_note(engine, state_dir) -> None:
    dispatcher = Dispatcher(engine)
    token = engine.add_agent("main", owner=True)
    owner = session_for(dispatcher, token, {"kind": "owner-private"})
    for type, kind in (("project", None), ("organization", "page"), ("decision", None), ("decision", "claim"),
                       ("works_at", "relationship")):
        arguments = {"query": "Dana", "type": type} | ({"kind": kind} if kind else {})
        assert tool(dispatcher, owner, "knowledge_grep", arguments) == {"hits": []}, arguments

    # A type the vault's own ontology adds is as defined as a shipped one, in the partition it applies to.
    missing = tool(dispatcher, owner, "knowledge_grep", {"query": "Dana", "type": "vessel"})
    assert missing["note"].startswith("type 'vessel' is not defined")
    record = engine.resolver.effective("main", create=False)
    (state_dir.stores / record.store_id / "vault" / "ontology.yaml").write_text(
        "page_types:\n  vessel:\n    label: Vessel\n    description: A boat.\n", encoding="utf-8")
    assert tool(dispatcher, owner, "knowledge_grep", {"query": "Dana", "type": "vessel"}) == {"hits": []}
    chat = session_for(dispatcher, token, {
        "kind": "conversation", "sessionKey": "chat:1", "sessionId": "0b6a6c55-3f6c-4f54-9a8e-0b1c2d3e4f50"})
    in_chat = tool(dispatcher, chat, "knowledge_grep", {"query": "Dana", "type": "vessel"})
    assert in_chat["note"].startswith("type 'vessel' is not defined")  # extensions apply to the private partition


def test_an_attachments_filename_with_folders_is_kept_as_its_last_part_and_said(engine) -> None:
    dispatcher = Dispatcher(engine)
    owner = session_for(dispatcher, engine.add_agent("main", owner=True), {"kind": "owner-private"})
    content = base64.b64encode(b"Dana keeps the lighthouse running.\n").decode()
    receipt = tool(dispatcher, owner, "knowledge_attach", {"requestId": "a1", "content": content,
                                                           "filename": "../x.txt"})
    assert receipt["source"]["filename"] == "x.txt" and receipt["note"].startswith("filename was kept as 'x.txt'")
    plain = tool(dispatcher, owner, "knowledge_attach", {"requestId": "a2", "content": content, "filename": "y.txt"})
    assert "note" not in plain
