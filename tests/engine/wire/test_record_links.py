"""A write's receipt carries the link of each record it saved in the private partition: the link the memory
prompt asks agents to cite, naming the store the owner's window finds it in."""

from __future__ import annotations

import json
import uuid

from engine.core.links import parse_record_link
from engine.wire.protocol import Dispatcher, Session


def call(dispatcher: Dispatcher, session: Session, method: str, params: dict) -> dict:
    reply = dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                                   "params": params}).encode())
    assert "result" in reply, reply
    return reply["result"]


def session_for(dispatcher: Dispatcher, token: str, audience: dict) -> Session:
    session = Session()
    call(dispatcher, session, "initialize", {"_meta": {"knowledge": {"token": token, "audience": audience}}})
    return session


def tool(dispatcher: Dispatcher, session: Session, name: str, arguments: dict) -> dict:
    result = call(dispatcher, session, "tools/call", {"name": name, "arguments": arguments})
    assert not result.get("isError"), result
    return result["structuredContent"]


def save(dispatcher: Dispatcher, session: Session, request_id: str, title: str) -> dict:
    return tool(dispatcher, session, "knowledge_save_page",
                {"requestId": request_id, "type": "note", "title": title, "body": "Body."})


def test_private_receipts_link_to_the_record_in_its_store_and_a_retry_gets_the_same(engine) -> None:
    dispatcher = Dispatcher(engine)
    owner = session_for(dispatcher, engine.add_agent("main", owner=True), {"kind": "owner-private"})

    receipt = save(dispatcher, owner, "r1", "Linked note")

    link = parse_record_link(receipt["link"])
    store_id = engine.resolver.agent_view("main")["storeId"]
    assert (link.store_id, link.record_id) == (store_id, receipt["id"])
    assert receipt["records"] == [{"id": receipt["id"], "revision": 1, "kind": "page", "link": receipt["link"]}]
    assert save(dispatcher, owner, "r1", "Linked note") == receipt  # the identical retry's original receipt

    remembered = call(dispatcher, owner, "tools/call", {"name": "knowledge_remember", "arguments": {
        "requestId": "r2", "items": [{"text": "Dana likes tea.", "claimKind": "preference",
                                      "excerpt": "I like tea", "assertionOrigin": "user"}]}})["structuredContent"]
    assert all(parse_record_link(entry["link"]).record_id == entry["id"]
               for entry in remembered["records"] + remembered["items"])


def test_a_conversations_own_records_get_no_link(engine) -> None:
    dispatcher = Dispatcher(engine)
    token = engine.add_agent("main", owner=True)
    chat = session_for(dispatcher, token, {"kind": "conversation", "sessionKey": "chat:1",
                                           "sessionId": str(uuid.uuid4())})

    receipt = save(dispatcher, chat, "r1", "Conversation note")

    assert "link" not in receipt and all("link" not in entry for entry in receipt["records"])


def test_what_an_agent_finds_in_the_private_partition_carries_the_link_its_receipt_did(engine) -> None:
    dispatcher = Dispatcher(engine)
    owner = session_for(dispatcher, engine.add_agent("main", owner=True), {"kind": "owner-private"})
    receipt = save(dispatcher, owner, "r1", "Lisbon office")

    [hit] = tool(dispatcher, owner, "knowledge_grep", {"query": "Lisbon"})["hits"]
    [match] = tool(dispatcher, owner, "knowledge_lookup", {"name": "Lisbon office"})["matches"]
    read = tool(dispatcher, owner, "knowledge_record", {"id": receipt["id"]})
    earlier = tool(dispatcher, owner, "knowledge_record", {"id": receipt["id"], "revision": 1})
    history = tool(dispatcher, owner, "knowledge_record", {"id": receipt["id"], "view": "history"})

    assert hit["link"] == match["link"] == read["link"] == earlier["link"] == history["link"] == receipt["link"]
    # The shared memory/search contract stays its projection: a reference, no link.
    [shared] = call(dispatcher, owner, "memory/search", {"query": "Lisbon"})["hits"]
    assert "link" not in shared and shared["ref"]["id"] == receipt["id"]


def test_a_conversation_finds_its_own_records_without_links_and_granted_private_ones_with_them(engine) -> None:
    dispatcher = Dispatcher(engine)
    token = engine.add_agent("main", owner=True)
    owner = session_for(dispatcher, token, {"kind": "owner-private"})
    private = save(dispatcher, owner, "r1", "Lisbon office")
    chat = session_for(dispatcher, token, {"kind": "conversation", "sessionKey": "chat:1",
                                           "sessionId": str(uuid.uuid4())})
    own = save(dispatcher, chat, "r2", "Porto office")

    [hit] = tool(dispatcher, chat, "knowledge_grep", {"query": "Porto"})["hits"]
    read = tool(dispatcher, chat, "knowledge_record", {"id": own["id"]})
    assert hit["id"] == read["id"] == own["id"] and "link" not in hit and "link" not in read

    engine.registry.set_grant("main", "chat:granted", "read")
    granted = session_for(dispatcher, token, {"kind": "conversation", "sessionKey": "chat:granted",
                                              "sessionId": str(uuid.uuid4())})
    [hit] = tool(dispatcher, granted, "knowledge_grep", {"query": "Lisbon"})["hits"]
    assert hit["id"] == private["id"] and hit["link"] == private["link"]
