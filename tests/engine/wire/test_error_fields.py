"""Over the wire, an error names the argument it is about (``data.field``, as ``invalid_params`` does): which id
was not found, which revision was stale, so an agent knows what to read again or correct."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.wire.protocol import Dispatcher, Session
from engine.wire.resources import resource_uri
from tests.helpers import only_store, tool_answer, vault_snapshot


def ask(dispatcher: Dispatcher, session: Session, method: str, params: dict) -> dict[str, Any]:
    return dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                                  "params": params}).encode())


def tool(dispatcher: Dispatcher, session: Session, name: str, arguments: dict) -> tuple[bool, dict[str, Any]]:
    reply = ask(dispatcher, session, "tools/call", {"name": name, "arguments": arguments})
    return reply["result"]["isError"], tool_answer(reply["result"])


@pytest.fixture
def agent(engine) -> tuple[Dispatcher, Session, dict[str, Any]]:
    dispatcher, session = Dispatcher(engine), Session()
    assert "result" in ask(dispatcher, session, "initialize", {"_meta": {"knowledge": {
        "token": engine.add_agent("main", owner=True), "audience": {"kind": "owner-private"}}}})
    failed, saved = tool(dispatcher, session, "knowledge_save_page", {
        "requestId": "r1", "type": "project", "title": "Atlas", "body": "Launch in May."})
    assert not failed
    return dispatcher, session, saved


UNKNOWN = "pg_01M949K258G42KD0AXDADSR93A"


@pytest.mark.parametrize("name, arguments, field", [
    ("knowledge_record", {"id": UNKNOWN}, "id"),
    ("knowledge_record", {"id": UNKNOWN, "view": "history"}, "id"),
    ("knowledge_record", {"id": "SAVED", "revision": 7}, "revision"),
    ("knowledge_save_page", {"requestId": "r9", "type": "project", "title": "Atlas", "body": "June.", "id": UNKNOWN,
                             "expectedRevision": 1}, "id"),
    ("knowledge_recall", {"id": UNKNOWN, "recall": None}, "id"),
])
def test_a_tool_not_finding_what_an_argument_names_says_which_argument(agent, name, arguments, field):
    dispatcher, session, saved = agent
    arguments = {key: saved["id"] if value == "SAVED" else value for key, value in arguments.items()}
    failed, answer = tool(dispatcher, session, name, arguments)
    assert failed and answer["reason"] == "not_found" and answer["field"] == field


@pytest.mark.parametrize("expected, field", [
    ({"expectedRevision": 2}, "expectedRevision"),
    ({"expectedRevision": 1, "expectedSha256": "0" * 64}, "expectedSha256"),
])
def test_a_stale_revision_names_the_argument_and_the_current_version(agent, engine, expected, field):
    dispatcher, session, saved = agent
    failed, read = tool(dispatcher, session, "knowledge_record", {"id": saved["id"]})
    failed, refused = tool(dispatcher, session, "knowledge_save_page", {
        "requestId": "r2", "type": "project", "title": "Atlas", "body": "June.", "id": saved["id"], **expected})
    assert failed and refused["reason"] == "stale_revision"
    assert (refused["field"], refused["revision"], refused["sha256"]) == (field, 1, read["sha256"])


def test_a_stale_reference_names_ref_and_the_current_version(agent):
    dispatcher, session, saved = agent
    [hit] = ask(dispatcher, session, "memory/search", {"query": "Atlas"})["result"]["hits"]
    failed, revised = tool(dispatcher, session, "knowledge_save_page", {
        "requestId": "r2", "type": "project", "title": "Atlas", "body": "June.", "id": saved["id"],
        "expectedRevision": 1})
    assert not failed
    failed, read = tool(dispatcher, session, "knowledge_record", {"id": saved["id"]})
    data = ask(dispatcher, session, "memory/read", {"ref": hit["ref"]})["error"]["data"]
    assert data == {"reason": "stale_revision", "field": "ref", "id": saved["id"], "revision": 2,
                    "sha256": read["sha256"]}


def test_a_resource_not_found_names_the_uri_not_an_argument_it_does_not_take(agent, engine):
    dispatcher, session, saved = agent
    store_id = engine.resolver.effective("main", create=False).store_id
    for uri in (resource_uri(store_id, UNKNOWN), resource_uri(store_id, saved["id"]) + "/revision/3"):
        data = ask(dispatcher, session, "resources/read", {"uri": uri})["error"]["data"]
        assert data["reason"] == "not_found" and data["field"] == "uri", data


@pytest.mark.parametrize("method, params", [
    ("M" * 100_000, {}),
    ("tools/call", {"name": "T" * 100_000, "arguments": {}}),
])
def test_an_unknown_name_of_any_length_is_quoted_short(agent, method, params):
    dispatcher, session, _ = agent
    reply = ask(dispatcher, session, method, params)
    message = reply["error"]["message"]
    assert len(message) < 200 and "(100000 characters)" in message, message
    assert reply["error"]["data"]["reason"] in ("not_found", "invalid_params")


def test_a_short_unknown_name_is_quoted_whole(agent):
    dispatcher, session, _ = agent
    assert ask(dispatcher, session, "tools/call", {"name": "knowledge_nope"})["error"]["message"] == \
        "unknown tool 'knowledge_nope'"
    assert ask(dispatcher, session, "memory/nope", {})["error"]["message"] == "unknown method 'memory/nope'"


@pytest.mark.parametrize("name, arguments", [
    ("knowledge_save_page", {"type": "note", "title": "Harbour office"}),
    ("knowledge_save_page", {"requestId": None, "type": "note", "title": "Harbour office"}),
    ("knowledge_remember", {"items": [{"text": "Dana likes tea", "claimKind": "preference", "excerpt": "tea"}]}),
])
def test_a_write_without_request_id_or_flush_id_says_it_needs_one_of_them(agent, state_dir, name, arguments):
    """The published schema requires neither (a flush gives flushId instead): the refusal names both."""
    dispatcher, session, _ = agent
    before = vault_snapshot(only_store(state_dir) / "vault")
    failed, answer = tool(dispatcher, session, name, arguments)
    assert failed and answer["reason"] == "invalid_params" and answer["field"] == "requestId"
    assert answer["message"].startswith("requestId is required: a fresh id") and "flushId" in answer["message"]
    assert vault_snapshot(only_store(state_dir) / "vault") == before
    listed = ask(dispatcher, session, "tools/list", {})["result"]["tools"]
    described = next(tool for tool in listed if tool["name"] == name)["inputSchema"]["properties"]["requestId"]
    assert described["description"].startswith("Required unless flushId is given")


def test_an_id_of_another_kind_is_said_to_be_one_not_missing(agent):
    dispatcher, session, page = agent
    failed, remembered = tool(dispatcher, session, "knowledge_remember", {"requestId": "c1", "subject": page["id"],
                              "items": [{"text": "Atlas launches in May", "claimKind": "fact", "excerpt": "May."}]})
    assert not failed
    claim = remembered["items"][0]["id"]

    failed, answer = tool(dispatcher, session, "knowledge_save_page", {
        "requestId": "r2", "id": claim, "expectedRevision": 1, "type": "project", "title": "Atlas"})
    assert failed and answer == {"reason": "not_found", "message": "that id names a claim, not a page", "field": "id",
                                 "id": claim}
    failed, answer = tool(dispatcher, session, "knowledge_remember", {"requestId": "c2", "items": [
        {"text": "Atlas launches in June", "claimKind": "correction", "excerpt": "June.", "replaces": page["id"]}]})
    assert failed and answer["message"] == "that id names a page, not a claim"
    assert answer["field"] == "items[0].replaces" and answer["id"] == page["id"]
    failed, answer = tool(dispatcher, session, "knowledge_save_page", {
        "requestId": "r3", "id": UNKNOWN, "expectedRevision": 1, "type": "project", "title": "Atlas"})
    assert failed and answer["message"] == "no page with that id in this partition"


def test_a_type_change_that_keeps_fields_the_new_type_has_not_says_fields_were_kept(agent, state_dir):
    dispatcher, session, _ = agent
    failed, person = tool(dispatcher, session, "knowledge_save_page", {
        "requestId": "d1", "type": "person", "title": "Dana", "fields": {"role": "keeper"}})
    assert not failed
    before = vault_snapshot(only_store(state_dir) / "vault")
    revise = {"requestId": "d2", "id": person["id"], "expectedRevision": 1, "type": "project", "title": "Dana"}
    failed, answer = tool(dispatcher, session, "knowledge_save_page", revise)
    assert failed and answer == {"reason": "invalid_params", "field": "fields", "message": (
        "fields left out are kept from revision 1, and project pages have no field 'role': give fields for a "
        "project page, or fields {} to drop them")}
    assert vault_snapshot(only_store(state_dir) / "vault") == before
    failed, revised = tool(dispatcher, session, "knowledge_save_page", {**revise, "fields": {}})
    assert not failed and revised["revision"] == 2
