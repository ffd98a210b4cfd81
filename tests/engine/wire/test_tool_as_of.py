"""``asOf`` through the wire: the tools and the operator method that take it answer as of that moment,
as the engine's own readers do (the wire once handed the engine its parsed moment, which the engine then
refused as no date)."""

from __future__ import annotations

import json
from typing import Any

from engine.operator.token_file import ensure_operator_token, read_operator_token
from engine.service import Engine
from engine.wire.protocol import Dispatcher, Session

LATER_CLAIM = {"text": "Atlas runs on Postgres.", "claimKind": "fact", "excerpt": "We moved Atlas to Postgres.",
               "validFrom": "2030-01-01"}


def _call(dispatcher: Dispatcher, session: Session, method: str, params: dict[str, Any]) -> dict[str, Any]:
    reply = dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 2, "method": method,
                                                   "params": params}).encode())
    assert "result" in reply, reply
    return reply["result"]


def test_record_and_lookup_answer_as_of_the_moment_asked(state_dir):
    with Engine(state_dir, watch=False, git=False) as engine:
        dispatcher, session = Dispatcher(engine), Session()
        token = engine.add_agent("main", owner=True)
        _call(dispatcher, session, "initialize", {
            "_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"}}}})

        def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = _call(dispatcher, session, "tools/call", {"name": name, "arguments": arguments})
            assert not result["isError"], result["content"][0]["text"]
            return result["structuredContent"]

        saved = tool("knowledge_remember", {"requestId": "r1", "items": [LATER_CLAIM]})
        claim_id = saved["items"][0]["id"]
        for as_of, holds in (("2029-12-31", False), ("2030-01-01T00:00:00Z", True), ("2031-06-01", True)):
            assert tool("knowledge_record", {"id": claim_id, "asOf": as_of})["validity"]["holds"] is holds
            assert tool("knowledge_record", {"id": claim_id, "revision": 1, "asOf": as_of})["validity"]["holds"] is holds
            matches = tool("knowledge_lookup", {"name": claim_id, "asOf": as_of})["matches"]
            assert [match["id"] for match in matches] == ([claim_id] if holds else [])

        ensure_operator_token(engine.state)
        operator = Session()
        _call(dispatcher, operator, "initialize", {"protocolVersion": "2025-11-25", "_meta": {"knowledge": {
            "operatorToken": read_operator_token(engine.state)}}})
        for as_of, holds in (("2029-12-31", False), ("2031-06-01", True)):
            read = _call(dispatcher, operator, "operator/record", {"agent": "main", "id": claim_id, "asOf": as_of})
            assert read["validity"]["holds"] is holds
