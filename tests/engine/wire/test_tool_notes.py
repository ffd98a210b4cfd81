"""A tool's ``note``: what it read differently from what was sent, said in its answer over the wire (and held to
its ``outputSchema`` there)."""

from __future__ import annotations

import base64

from engine.wire.protocol import Dispatcher
from tests.engine.wire.test_record_links import save, session_for, tool


def test_a_type_no_record_has_is_named_with_the_types_close_to_it(engine) -> None:
    dispatcher = Dispatcher(engine)
    owner = session_for(dispatcher, engine.add_agent("main", owner=True), {"kind": "owner-private"})
    empty = tool(dispatcher, owner, "knowledge_grep", {"query": "Dana", "type": "person"})
    assert empty["hits"] == [] and "no typed records here yet" in empty["note"]
    tool(dispatcher, owner, "knowledge_save_page", {"requestId": "p1", "type": "person", "title": "Dana Whitaker",
                                                     "body": "Keeps the lighthouse running."})
    save(dispatcher, owner, "n1", "Lighthouse rota")

    for typo in ("Person", "persons", "preson"):
        answer = tool(dispatcher, owner, "knowledge_grep", {"query": "Dana", "type": typo})
        assert answer["hits"] == [] and answer["note"].startswith(f"no current record has type {typo!r}; did "
                                                                  "you mean 'person'")
    other = tool(dispatcher, owner, "knowledge_grep", {"query": "Dana", "type": "vessel"})
    assert other["note"] == ("no current record has type 'vessel'; types records have here: note, person "
                             "(knowledge_ontology lists the page types)")

    found = tool(dispatcher, owner, "knowledge_grep", {"query": "Dana", "type": "person"})
    assert [hit["title"] for hit in found["hits"]] == ["Dana Whitaker"] and "note" not in found
    unmatched = tool(dispatcher, owner, "knowledge_grep", {"query": "submarine", "type": "person"})
    assert unmatched == {"hits": []}  # a type records have, and a query nothing matches: nothing to say
    shared = dispatcher.handle(owner, b'{"jsonrpc": "2.0", "id": 2, "method": "memory/search", '
                                      b'"params": {"query": "Dana", "type": "Person"}}')
    assert shared["result"] == {"hits": []}  # the host's search keeps its contract's shape


def test_an_attachments_filename_with_folders_is_kept_as_its_last_part_and_said(engine) -> None:
    dispatcher = Dispatcher(engine)
    owner = session_for(dispatcher, engine.add_agent("main", owner=True), {"kind": "owner-private"})
    content = base64.b64encode(b"Dana keeps the lighthouse running.\n").decode()
    receipt = tool(dispatcher, owner, "knowledge_attach", {"requestId": "a1", "content": content,
                                                           "filename": "../x.txt"})
    assert receipt["source"]["filename"] == "x.txt" and receipt["note"].startswith("filename was kept as 'x.txt'")
    plain = tool(dispatcher, owner, "knowledge_attach", {"requestId": "a2", "content": content, "filename": "y.txt"})
    assert "note" not in plain
