"""The host methods answer in their declared shapes: each answer over the wire validates against the JSON Schema
generated from the TypedDict its handler returns (engine/core/answers.py)."""

from __future__ import annotations

import json

import jsonschema

from engine.core.answers import output_schema
from engine.memory.knowledge_index import IndexAnswer
from engine.memory.memory_prompt import PromptAnswer
from engine.memory.recall import FlushPlanAnswer, RecallCandidates
from engine.search.keyword import SearchAnswer
from engine.service import StatusAnswer
from engine.store.answers import Health, ReferenceRead
from engine.wire.protocol import Dispatcher, Session


def call(dispatcher: Dispatcher, session: Session, method: str, params: dict) -> dict:
    reply = dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                                   "params": params}).encode())
    assert "result" in reply, reply
    return reply["result"]


def test_every_host_method_answers_in_its_declared_shape(engine) -> None:
    dispatcher, session = Dispatcher(engine), Session()
    token = engine.add_agent("main", owner=True)
    call(dispatcher, session, "initialize",
         {"_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"}}}})
    page = call(dispatcher, session, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "r1", "type": "note", "title": "Atlas launch", "body": "The Atlas launch is in May."}})
    call(dispatcher, session, "tools/call", {"name": "knowledge_recall", "arguments": {
        "id": page["structuredContent"]["id"], "requestId": "r2",
        "recall": {"summary": "Atlas launches in May", "triggers": ["atlas"], "projects": ["atlas"]}}})
    found = call(dispatcher, session, "memory/search", {"query": "atlas launch"})
    answers = [
        (found, SearchAnswer),
        (call(dispatcher, session, "memory/read", {"ref": found["hits"][0]["ref"]}), ReferenceRead),
        (call(dispatcher, session, "memory/health", {}), Health),
        (call(dispatcher, session, "memory/status", {}), StatusAnswer),
        (call(dispatcher, session, "memory/prompt", {"projectKey": "atlas"}), PromptAnswer),
        (call(dispatcher, session, "memory/index", {"firstMessageAt": "2999-01-01T00:00:00Z"}), IndexAnswer),
        (call(dispatcher, session, "memory/recallCandidates", {"mode": "trigger"}), RecallCandidates),
        (call(dispatcher, session, "memory/flushPlan", {}), FlushPlanAnswer),
    ]
    assert found["hits"] and answers[6][0]["candidates"]  # the shapes are checked with content in them
    for answer, declared in answers:
        jsonschema.validate(answer, output_schema(declared), cls=jsonschema.Draft202012Validator)
