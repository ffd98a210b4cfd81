"""Over the wire: an agent that revises a page by the number it read before the owner edited the file is told
``stale_revision``, with what to read again, and revises once it names the version it read."""

from __future__ import annotations

import hashlib
import json

from engine.wire.protocol import Dispatcher, Session
from tests.helpers import private_dir, vault_snapshot, tool_answer


def call(dispatcher: Dispatcher, session: Session, method: str, params: dict) -> dict:
    reply = dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                                   "params": params}).encode())
    assert "result" in reply, reply
    return reply["result"]


def tool(dispatcher: Dispatcher, session: Session, name: str, arguments: dict) -> tuple[bool, dict]:
    result = call(dispatcher, session, "tools/call", {"name": name, "arguments": arguments})
    return result["isError"], tool_answer(result)


def test_a_stale_revision_names_the_version_to_read_and_the_version_read_is_revised(engine, state_dir):
    dispatcher, session = Dispatcher(engine), Session()
    call(dispatcher, session, "initialize", {"_meta": {"knowledge": {
        "token": engine.add_agent("main", owner=True), "audience": {"kind": "owner-private"}}}})
    failed, saved = tool(dispatcher, session, "knowledge_save_page", {
        "requestId": "r1", "type": "project", "title": "Atlas", "body": "Launch in May."})
    assert not failed
    failed, read = tool(dispatcher, session, "knowledge_record", {"id": saved["id"]})
    assert not failed and read["revision"] == 1

    path = private_dir(state_dir) / read["path"]  # the owner edits the file; the number stays 1
    edited = path.read_bytes().replace(b"Launch in May.", b"Launch moved to June.")
    path.write_bytes(edited)
    vault = vault_snapshot(private_dir(state_dir))

    revision = {"requestId": "r2", "type": "project", "title": "Atlas", "body": "Launch in May, confirmed.",
                "id": saved["id"], "expectedRevision": read["revision"]}
    failed, refused = tool(dispatcher, session, "knowledge_save_page", revision)
    assert failed and refused["reason"] == "stale_revision"
    assert (refused["id"], refused["revision"], refused["sha256"]) == (
        saved["id"], 1, hashlib.sha256(edited).hexdigest())
    assert vault_snapshot(private_dir(state_dir)) == vault

    failed, again = tool(dispatcher, session, "knowledge_record", {"id": saved["id"]})
    assert not failed and again["body"] == "Launch moved to June.\n" and again["sha256"] == refused["sha256"]
    failed, revised = tool(dispatcher, session, "knowledge_save_page", {
        **revision, "requestId": "r3", "body": "Launch in June, confirmed.", "expectedSha256": again["sha256"]})
    assert not failed and revised["revision"] == 2
    failed, retried = tool(dispatcher, session, "knowledge_save_page", {
        **revision, "requestId": "r3", "body": "Launch in June, confirmed.", "expectedSha256": again["sha256"]})
    assert not failed and retried["publicationId"] == revised["publicationId"]


def test_the_save_page_schema_publishes_expected_sha256(engine):
    dispatcher, session = Dispatcher(engine), Session()
    call(dispatcher, session, "initialize", {"_meta": {"knowledge": {
        "token": engine.add_agent("main", owner=True), "audience": {"kind": "owner-private"}}}})
    listed = call(dispatcher, session, "tools/list", {})["tools"]
    [save_page] = [t for t in listed if t["name"] == "knowledge_save_page"]
    declared = save_page["inputSchema"]["properties"]["expectedSha256"]["anyOf"][0]  # or null: left out
    assert declared["type"] == "string" and declared["pattern"] == "^[0-9a-fA-F]{64}$"
    assert "expectedSha256" in save_page["description"]
