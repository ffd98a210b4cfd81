"""MCP resources, resource templates, prompts and completions, in memory through the dispatcher: each method,
the caller's partition only, bad URIs and cursors refused with nothing changed."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from engine.access.authority import AgentCaller
from engine.core.answers import output_schema
from engine.memory.memory_prompt import prompt_for
from engine.wire import completions, prompts, resources
from engine.wire.protocol import Dispatcher, Session
from engine.wire.resources import PAGE_SIZE, parse_resource_uri, resource_uri
from tests.engine.wire.test_server import init_params, message
from tests.helpers import claim, page

CHAT = {"kind": "conversation", "sessionKey": "chat:1", "sessionId": "00000000-0000-4000-8000-000000000001"}
OWNER = {"kind": "owner-private"}


# Each method's declared answer: every answer these tests see is validated against its JSON Schema.
ANSWERS = {"resources/list": resources.ResourceList, "resources/templates/list": resources.ResourceTemplateList,
           "resources/read": resources.ResourceRead, "resources/subscribe": resources.Empty,
           "resources/unsubscribe": resources.Empty, "prompts/list": prompts.PromptList,
           "prompts/get": prompts.PromptAnswer, "completion/complete": completions.CompletionAnswer}


def ask(dispatcher: Dispatcher, session: Session, method: str, params: dict | None = None) -> dict[str, Any]:
    reply = dispatcher.handle(session, message(method, params))
    if "result" in reply and method in ANSWERS:
        jsonschema.validate(reply["result"], output_schema(ANSWERS[method]))
    return reply


def result(reply: dict[str, Any]) -> Any:
    assert "result" in reply, reply
    return reply["result"]


def error(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" in reply, reply
    return reply["error"]


@pytest.fixture
def world(engine) -> dict[str, Any]:
    """main's private partition with a project page (aliased), a person and a claim; a conversation of main
    and another agent's store, each with its own page."""
    token = engine.add_agent("main", owner=True)
    other = engine.add_agent("other", owner=True)
    owner = AgentCaller(token, OWNER)
    atlas = engine.save_page(owner, page("p1", "Atlas migration", "project", "Move Atlas to the new cluster.",
                                         aliases=["northwind/atlas"]))
    dana = engine.save_page(owner, page("p2", "Dana Whitfield", "person"))
    remembered = engine.remember(owner, {"requestId": "c1", "subject": dana["id"], "items": [
        claim("Dana prefers Friday notes.", "Friday notes please", "preference")]})
    chat = engine.save_page(AgentCaller(token, CHAT), page("p3", "Chatonly notebook", "note"))
    elsewhere = engine.save_page(AgentCaller(other, OWNER), page("p4", "Otherstore secret", "project",
                                                                 aliases=["northwind/other"]))
    store_id = engine.resolver.effective("main", create=False).store_id
    return {"token": token, "other": other, "owner": owner, "store": store_id, "atlas": atlas, "dana": dana,
            "claim": remembered["items"][0], "chat": chat, "elsewhere": elsewhere,
            "other_store": engine.resolver.effective("other", create=False).store_id}


def session_of(dispatcher: Dispatcher, token: str, audience: dict | None = None) -> Session:
    session = Session()
    result(ask(dispatcher, session, "initialize", init_params(token, audience)))
    return session


def test_initialize_declares_resources_prompts_and_completions(engine, world) -> None:
    dispatcher = Dispatcher(engine)
    reply = ask(dispatcher, Session(), "initialize", init_params(world["token"]))
    assert result(reply)["capabilities"] == {"tools": {"listChanged": True},
                                             "resources": {"subscribe": True, "listChanged": True},
                                             "prompts": {"listChanged": False}, "completions": {}}


def test_resources_list_holds_the_current_records_of_the_callers_partition_only(engine, world) -> None:
    dispatcher = Dispatcher(engine)
    listed = result(ask(dispatcher, session_of(dispatcher, world["token"]), "resources/list"))
    by_name = {entry["name"]: entry for entry in listed["resources"]}
    assert set(by_name) == {world["atlas"]["id"], world["dana"]["id"], world["claim"]["id"]}
    assert "nextCursor" not in listed
    atlas = by_name[world["atlas"]["id"]]
    assert atlas["uri"] == f"knowledge://record/{world['store']}/{world['atlas']['id']}" == world["atlas"]["link"]
    assert atlas["title"] == "Atlas migration" and atlas["mimeType"] == "text/markdown"
    assert atlas["description"] == "page (project)" and atlas["annotations"]["lastModified"].endswith("Z")
    text = json.dumps(listed)
    assert "Chatonly" not in text and "Otherstore" not in text and world["chat"]["id"] not in text

    chat = result(ask(dispatcher, session_of(dispatcher, world["token"], CHAT), "resources/list"))
    assert [entry["name"] for entry in chat["resources"]] == [world["chat"]["id"]]
    assert chat["resources"][0]["uri"] == resource_uri(world["store"], world["chat"]["id"])


def test_resources_list_pages_with_a_cursor_bound_to_the_callers_partition(engine, world) -> None:
    owner = world["owner"]
    for number in range(PAGE_SIZE + 5):
        engine.save_page(owner, page(f"bulk-{number}", f"Bulk note {number:03d}", "note"))
    dispatcher = Dispatcher(engine)
    session = session_of(dispatcher, world["token"])
    first = result(ask(dispatcher, session, "resources/list"))
    assert len(first["resources"]) == PAGE_SIZE and first["nextCursor"]
    second = result(ask(dispatcher, session, "resources/list", {"cursor": first["nextCursor"]}))
    assert "nextCursor" not in second
    names = [entry["name"] for entry in first["resources"] + second["resources"]]
    assert len(names) == len(set(names)) == PAGE_SIZE + 5 + 3
    titles = [entry["title"] for entry in first["resources"] + second["resources"]]
    assert titles == sorted(titles, key=str.casefold)

    # Another partition's caller, another agent, a forged or foreign cursor: refused, naming nothing.
    chat = session_of(dispatcher, world["token"], CHAT)
    other = session_of(dispatcher, world["other"])
    search_cursor = engine.search(owner, {"query": "bulk", "limit": 1})["nextCursor"]
    for who, cursor in ((chat, first["nextCursor"]), (other, first["nextCursor"]), (session, "nonsense"),
                        (session, first["nextCursor"][:-2] + "xx"), (session, search_cursor), (session, "")):
        refused = error(ask(dispatcher, who, "resources/list", {"cursor": cursor}))
        assert refused["code"] == -32602 and refused["data"]["reason"] == "invalid_params", refused
        assert refused["data"]["field"] == "cursor"
        assert world["store"] not in json.dumps(refused)
    assert error(ask(dispatcher, session, "resources/list", {"cursor": 5}))["data"]["field"] == "cursor"
    assert error(ask(dispatcher, session, "resources/list", {"page": 2}))["data"]["field"] == "page"


def test_resources_list_goes_on_from_the_record_the_last_page_ended_on(engine, world) -> None:
    """Records saved or renamed between two pages shift nothing: the next page starts after the last record
    served, so none is served twice and none passed over."""
    owner = world["owner"]
    saved = [engine.save_page(owner, page(f"bulk-{number}", f"Bulk note {number:03d}", "note"))
             for number in range(PAGE_SIZE + 5)]
    dispatcher = Dispatcher(engine)
    session = session_of(dispatcher, world["token"])
    first = result(ask(dispatcher, session, "resources/list"))
    boundary = first["resources"][-1]["title"].casefold()
    for name in ("Aardvark", "Abacus"):  # sort before the boundary
        engine.save_page(owner, page(name, f"{name}, saved between the pages", "note"))
    moved = saved[0]  # the first page's first bulk note, renamed to sort last
    engine.save_page(owner, {**page("moved", "Zebra, renamed between the pages", "note"), "id": moved["id"],
                             "expectedRevision": moved["revision"]})
    second = result(ask(dispatcher, session, "resources/list", {"cursor": first["nextCursor"]}))
    titles = [entry["title"] for entry in second["resources"]]
    assert all(title.casefold() > boundary for title in titles) and titles[-1] == "Zebra, renamed between the pages"
    names = [entry["name"] for entry in first["resources"] + second["resources"]]
    assert len(set(names)) == PAGE_SIZE + 5 + 3 and len(names) == len(set(names)) + 1  # the moved one, twice
    assert "nextCursor" not in second


def test_resources_read_answers_the_record_file_current_or_an_exact_revision(engine, world, state_dir) -> None:
    dispatcher = Dispatcher(engine)
    session = session_of(dispatcher, world["token"])
    atlas = world["atlas"]
    engine.save_page(world["owner"], page("p1-2", "Atlas migration", "project", "Moved to the new cluster.",
                                          id=atlas["id"], expectedRevision=1))
    uri = resource_uri(world["store"], atlas["id"])
    current = result(ask(dispatcher, session, "resources/read", {"uri": uri}))["contents"]
    assert len(current) == 1 and current[0]["uri"] == uri and current[0]["mimeType"] == "text/markdown"
    assert current[0]["text"].startswith("---\nformat: knowledge-record-v1\n")
    assert "revision: 2" in current[0]["text"] and "Moved to the new cluster." in current[0]["text"]
    assert current[0]["_meta"] == {"knowledge": {"revision": 2, "status": "current"}}
    on_disk = [path for path in (state_dir.stores / world["store"] / "vault" / "private").rglob("*.md")
               if atlas["id"] in path.read_text(encoding="utf-8")]
    assert current[0]["text"] == on_disk[0].read_text(encoding="utf-8")

    first = result(ask(dispatcher, session, "resources/read", {"uri": uri + "/revision/1"}))["contents"][0]
    assert first["uri"] == uri + "/revision/1" and "Move Atlas to the new cluster." in first["text"]
    assert first["_meta"] == {"knowledge": {"revision": 1, "status": "historical"}}
    missing = error(ask(dispatcher, session, "resources/read", {"uri": uri + "/revision/3"}))
    assert missing["code"] == -32002 and missing["data"]["reason"] == "not_found"


@pytest.mark.parametrize("uri", [
    "", "knowledge://record/", "https://example.com/x", "knowledge://record/st_x/pg_y", "knowledge://page/a/b",
    "knowledge://record/{store}/{record}", "REVISION/0", "REVISION/-1", "REVISION/01", "REVISION/x",
    "REVISION/", "RECORD?revision=1", "RECORD#top", "RECORD/history", "RECORD/revision/1/more", 7, None,
    "knowledge://record/" + "a" * 600,
])
def test_a_bad_uri_is_invalid_params_naming_uri(engine, world, uri) -> None:
    dispatcher = Dispatcher(engine)
    session = session_of(dispatcher, world["token"])
    record = resource_uri(world["store"], world["atlas"]["id"])
    if isinstance(uri, str):
        uri = uri.replace("REVISION", record + "/revision").replace("RECORD", record)
    for method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
        refused = error(ask(dispatcher, session, method, {"uri": uri}))
        assert refused["code"] == -32602 and refused["data"] == {"reason": "invalid_params", "field": "uri"}, refused
    assert error(ask(dispatcher, session, "resources/read", {}))["data"]["field"] == "uri"


def test_parse_resource_uri_round_trips() -> None:
    uri = resource_uri("st_01JD8Q4W6T2M9Z7K3B5N1X0VYA", "pg_01JD8PZ3A6QF0W2C9E4R7T1M5K", 12)
    address = parse_resource_uri(uri)
    assert (address.store_id, address.record_id, address.revision, address.uri) == (
        "st_01JD8Q4W6T2M9Z7K3B5N1X0VYA", "pg_01JD8PZ3A6QF0W2C9E4R7T1M5K", 12, uri)


def test_another_partitions_record_is_not_readable_and_the_error_names_nothing(engine, world) -> None:
    dispatcher = Dispatcher(engine)
    owner = session_of(dispatcher, world["token"])
    chat = session_of(dispatcher, world["token"], CHAT)
    other = session_of(dispatcher, world["other"])
    cases = [(chat, resource_uri(world["store"], world["atlas"]["id"])),
             (owner, resource_uri(world["store"], world["chat"]["id"])),
             (owner, resource_uri(world["other_store"], world["elsewhere"]["id"])),
             (other, resource_uri(world["store"], world["atlas"]["id"])),
             (other, resource_uri(world["other_store"], world["atlas"]["id"]))]
    for session, uri in cases:  # subscribing to them: tests/engine/wire/test_resource_subscriptions.py
        refused = error(ask(dispatcher, session, "resources/read", {"uri": uri}))
        assert refused["code"] == -32002 and refused["data"]["reason"] == "not_found", refused
        assert "Atlas" not in json.dumps(refused) and "Chatonly" not in json.dumps(refused)


def test_resource_templates_list_the_two_uri_forms(engine, world) -> None:
    dispatcher = Dispatcher(engine)
    session = session_of(dispatcher, world["token"])
    templates = result(ask(dispatcher, session, "resources/templates/list"))["resourceTemplates"]
    assert [template["uriTemplate"] for template in templates] == [
        "knowledge://record/{store}/{record}", "knowledge://record/{store}/{record}/revision/{revision}"]
    assert all(template["mimeType"] == "text/markdown" and template["name"] for template in templates)
    refused = error(ask(dispatcher, session, "resources/templates/list", {"cursor": "x"}))
    assert refused["data"] == {"reason": "invalid_params", "field": "cursor"}


def test_prompts_list_and_get_answer_what_the_host_methods_answer(engine, world) -> None:
    dispatcher = Dispatcher(engine)
    session = session_of(dispatcher, world["token"])
    listed = result(ask(dispatcher, session, "prompts/list"))["prompts"]
    assert [(p["name"], [a["name"] for a in p["arguments"]]) for p in listed] == [
        ("knowledge_memory", ["projectKey"]), ("knowledge_index", ["firstMessageAt"])]

    memory = result(ask(dispatcher, session, "prompts/get", {"name": "knowledge_memory",
                                                             "arguments": {"projectKey": "northwind/atlas"}}))
    expected = prompt_for(engine, world["owner"], "northwind/atlas")["text"]
    assert memory["messages"] == [{"role": "user", "content": {"type": "text", "text": expected}}]
    assert 'project key "northwind/atlas"' in expected

    at = "2999-01-01T00:00:00Z"
    index = result(ask(dispatcher, session, "prompts/get", {"name": "knowledge_index",
                                                            "arguments": {"firstMessageAt": at}}))
    host = result(ask(dispatcher, session, "memory/index", {"firstMessageAt": at}))["text"]
    assert index["messages"][0]["content"]["text"] == host and "Atlas migration" in host
    now = result(ask(dispatcher, session, "prompts/get", {"name": "knowledge_index"}))
    assert now["messages"][0]["content"]["text"].startswith("## Knowledge Index")

    # A conversation without a grant gets no index: one message saying why (clients read messages[0]).
    chat = session_of(dispatcher, world["token"], CHAT)
    none = result(ask(dispatcher, chat, "prompts/get", {"name": "knowledge_index"}))
    assert "not_granted" in none["description"]
    [message] = none["messages"]
    assert message["role"] == "user" and message["content"]["type"] == "text"
    assert "not granted" in message["content"]["text"] and "## Knowledge Index" not in message["content"]["text"]
    assert "Atlas" not in json.dumps(none)


@pytest.mark.parametrize("reason", ["not_granted", "no_store", "denied", "read_failed", "store_unavailable"])
def test_a_caller_without_an_index_gets_one_message_saying_why(engine, world, monkeypatch, reason) -> None:
    monkeypatch.setattr(prompts, "index_for", lambda *args: {"text": None, "reason": reason})
    dispatcher = Dispatcher(engine)
    answer = result(ask(dispatcher, session_of(dispatcher, world["token"]), "prompts/get", {"name": "knowledge_index"}))
    assert reason in answer["description"]
    [message] = answer["messages"]
    assert message["role"] == "user" and message["content"]["text"].startswith("There is no Knowledge Index")


@pytest.mark.parametrize("params, field", [
    ({"name": "knowledge_unknown"}, "name"), ({}, "name"), ({"name": 3}, "name"),
    ({"name": "knowledge_memory", "arguments": {"project": "x"}}, "arguments.project"),
    ({"name": "knowledge_memory", "arguments": {"projectKey": 5}}, "arguments.projectKey"),
    ({"name": "knowledge_memory", "arguments": ["x"]}, "arguments"),
    ({"name": "knowledge_index", "arguments": {"firstMessageAt": "yesterday"}}, "firstMessageAt"),
    ({"name": "knowledge_memory", "extra": 1}, "extra"),
])
def test_prompts_get_refuses_bad_input_naming_it(engine, world, params, field) -> None:
    dispatcher = Dispatcher(engine)
    refused = error(ask(dispatcher, session_of(dispatcher, world["token"]), "prompts/get", params))
    assert refused["code"] == -32602 and refused["data"] == {"reason": "invalid_params", "field": field}, refused


@pytest.mark.parametrize("name, argument, takes", [("knowledge_memory", "project", "projectKey"),
                                                    ("knowledge_index", "since", "firstMessageAt")])
def test_a_prompt_argument_it_does_not_take_is_refused_naming_the_one_it_does(engine, world, name, argument,
                                                                              takes) -> None:
    dispatcher = Dispatcher(engine)
    refused = error(ask(dispatcher, session_of(dispatcher, world["token"]), "prompts/get",
                        {"name": name, "arguments": {argument: "x"}}))
    assert refused["message"] == f"unknown parameter arguments.{argument}; {name} takes only {takes} (prompts/list " \
                                 "describes it)"


def complete(dispatcher: Dispatcher, session: Session, ref: dict, name: str, value: str,
             context: dict | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
    if context is not None:
        params["context"] = {"arguments": context}
    return ask(dispatcher, session, "completion/complete", params)


RECORD_REF = {"type": "ref/resource", "uri": "knowledge://record/{store}/{record}"}
REVISION_REF = {"type": "ref/resource", "uri": "knowledge://record/{store}/{record}/revision/{revision}"}
MEMORY_REF = {"type": "ref/prompt", "name": "knowledge_memory"}


def values(reply: dict[str, Any]) -> list[str]:
    return result(reply)["completion"]["values"]


def test_completion_offers_names_and_aliases_of_the_callers_partition_only(engine, world) -> None:
    dispatcher = Dispatcher(engine)
    session = session_of(dispatcher, world["token"])
    atlas, dana = world["atlas"]["id"], world["dana"]["id"]
    assert values(complete(dispatcher, session, RECORD_REF, "store", "st_")) == [world["store"]]
    assert values(complete(dispatcher, session, RECORD_REF, "store", "xx")) == []
    # A record: by title, by alias (case and spacing do not matter), by id; the values are ids.
    assert values(complete(dispatcher, session, RECORD_REF, "record", "atl")) == [atlas]
    assert values(complete(dispatcher, session, RECORD_REF, "record", "NORTHWIND/")) == [atlas]
    assert values(complete(dispatcher, session, RECORD_REF, "record", "dana   whit")) == [dana]
    assert values(complete(dispatcher, session, RECORD_REF, "record", dana[:8])) != []
    assert dana in values(complete(dispatcher, session, RECORD_REF, "record", dana[:-2]))
    assert values(complete(dispatcher, session, RECORD_REF, "record", "Chatonly")) == []
    assert values(complete(dispatcher, session, RECORD_REF, "record", "Otherstore")) == []
    everything = result(complete(dispatcher, session, RECORD_REF, "record", ""))["completion"]
    assert set(everything["values"]) == {atlas, dana, world["claim"]["id"]} and everything["hasMore"] is False
    # The project key: project pages' titles and aliases, as typed names.
    assert values(complete(dispatcher, session, MEMORY_REF, "projectKey", "north")) == ["northwind/atlas"]
    assert values(complete(dispatcher, session, MEMORY_REF, "projectKey", "")) == ["Atlas migration",
                                                                                    "northwind/atlas"]
    assert values(complete(dispatcher, session, MEMORY_REF, "projectKey", "dana")) == []  # a person page
    # An exact revision's number, for the record already chosen.
    engine.save_page(world["owner"], page("p1-2", "Atlas migration", "project", "Again.", id=atlas, expectedRevision=1))
    assert values(complete(dispatcher, session, REVISION_REF, "revision", "", {"record": atlas})) == ["1", "2"]
    assert values(complete(dispatcher, session, REVISION_REF, "revision", "2", {"record": atlas})) == ["2"]
    assert values(complete(dispatcher, session, REVISION_REF, "revision", "", {"record": world["chat"]["id"]})) == []
    assert values(complete(dispatcher, session, {"type": "ref/prompt", "name": "knowledge_index"},
                           "firstMessageAt", "2026")) == []

    chat = session_of(dispatcher, world["token"], CHAT)
    assert values(complete(dispatcher, chat, RECORD_REF, "record", "")) == [world["chat"]["id"]]
    assert values(complete(dispatcher, chat, MEMORY_REF, "projectKey", "north")) == []


@pytest.mark.parametrize("params, field", [
    ({"ref": {"type": "ref/resource", "uri": "knowledge://other/{x}"}, "argument": {"name": "x", "value": ""}}, "ref"),
    ({"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "x", "value": ""}}, "ref"),
    ({"ref": RECORD_REF, "argument": {"name": "revision", "value": ""}}, "argument.name"),
    ({"ref": MEMORY_REF, "argument": {"name": "projectKey"}}, "argument.value"),
    ({"ref": MEMORY_REF, "argument": {"name": "projectKey", "value": 3}}, "argument.value"),
    ({"ref": MEMORY_REF}, "argument"),
    ({"ref": MEMORY_REF, "argument": {"name": "projectKey", "value": ""}, "context": {"arguments": []}},
     "context.arguments"),
    ({"ref": MEMORY_REF, "argument": {"name": "projectKey", "value": ""}, "extra": 1}, "extra"),
])
def test_completion_refuses_bad_input_naming_it(engine, world, params, field) -> None:
    dispatcher = Dispatcher(engine)
    refused = error(ask(dispatcher, session_of(dispatcher, world["token"]), "completion/complete", params))
    assert refused["code"] == -32602 and refused["data"] == {"reason": "invalid_params", "field": field}, refused


def test_a_revoked_credential_is_refused_on_its_very_next_request(engine, world) -> None:
    dispatcher = Dispatcher(engine)
    session = session_of(dispatcher, world["token"])
    uri = resource_uri(world["store"], world["atlas"]["id"])
    requests = [("resources/list", {}), ("resources/templates/list", {}), ("resources/read", {"uri": uri}),
                ("resources/subscribe", {"uri": uri}), ("resources/unsubscribe", {"uri": uri}),
                ("prompts/list", {}), ("prompts/get", {"name": "knowledge_memory"}),
                ("prompts/get", {"name": "knowledge_index"}),
                ("completion/complete", {"ref": RECORD_REF, "argument": {"name": "record", "value": ""}})]
    for method, params in requests[:3] + requests[5:]:
        result(ask(dispatcher, session, method, params))
    engine.remove_agent("main")
    for method, params in requests:
        refused = error(ask(dispatcher, session, method, params))
        assert refused["data"]["reason"] == "denied", (method, refused)
