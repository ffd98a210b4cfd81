"""Every host method and every operator method reads its parameters through the one reader: an unknown
key is refused naming it (never ignored), and ``_meta`` is the protocol's, never a parameter."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from engine.core.errors import InvalidParams
from engine.operator.methods import PREFIX, OperatorMethods
from engine.wire.protocol import Dispatcher, Session

HOST_METHODS = {  # each with parameters it accepts
    "memory/search": {"query": "atlas"}, "memory/read": {"ref": {}}, "memory/health": {}, "memory/status": {},
    "memory/prompt": {"projectKey": "northwind/atlas"}, "memory/index": {"firstMessageAt": "2999-01-01T00:00:00Z"},
    "memory/recallCandidates": {"mode": "trigger"}, "memory/flushPlan": {}, "memory/gate": {"message": "hi"},
}
UNKNOWN = "aaUnknown"  # sorts before every real parameter, so it is the one refused


def call(dispatcher: Dispatcher, session: Session, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                                  "params": params}).encode())


@pytest.fixture
def agent_session(engine) -> tuple[Dispatcher, Session]:
    dispatcher, session = Dispatcher(engine), Session()
    token = engine.add_agent("main", owner=True)
    assert "result" in call(dispatcher, session, "initialize", {"_meta": {"knowledge": {
        "token": token, "audience": {"kind": "owner-private"}}}})
    return dispatcher, session


@pytest.mark.parametrize("method", sorted(HOST_METHODS))
def test_a_host_method_refuses_an_unknown_parameter(agent_session, method):
    dispatcher, session = agent_session
    reply = call(dispatcher, session, method, {**HOST_METHODS[method], UNKNOWN: 1})
    assert reply["error"]["data"] == {"reason": "invalid_params", "field": UNKNOWN}, reply


@pytest.mark.parametrize("method", ["memory/health", "memory/status", "memory/flushPlan", "memory/prompt"])
def test_meta_is_no_parameter(agent_session, method):
    dispatcher, session = agent_session
    reply = call(dispatcher, session, method, {"_meta": {"knowledge": {"audience": {"kind": "owner-private"}}}})
    assert "result" in reply, reply


def operator_handlers(engine) -> dict[str, Callable[[Any, dict[str, Any]], Any]]:
    registered: dict[str, Callable[[Any, dict[str, Any]], Any]] = {}

    class Table:
        def register(self, method: str, handler: Callable[[Any, dict[str, Any]], Any]) -> None:
            registered[method] = handler

    OperatorMethods(engine).register(Table())
    return registered


def test_every_operator_method_refuses_an_unknown_parameter_before_anything_else(engine):
    engine.add_agent("main", owner=True)
    handlers = operator_handlers(engine)
    assert len(handlers) > 35 and all(method.startswith(PREFIX) for method in handlers)
    for method, handler in handlers.items():
        with pytest.raises(InvalidParams) as raised:
            handler(None, {"agent": "main", UNKNOWN: 1, "_meta": {}})
        assert raised.value.details == {"field": UNKNOWN}, method


# --- MCP's own methods --------------------------------------------------------------------------------

MCP_METHODS = {"tools/list": {}, "tools/call": {"name": "knowledge_resume"}}


@pytest.mark.parametrize("method", sorted(MCP_METHODS))
def test_an_mcp_method_refuses_an_unknown_parameter(agent_session, method):
    """The protocol docs said every method refuses what it does not take; tools/list and tools/call ignored it."""
    dispatcher, session = agent_session
    assert "result" in call(dispatcher, session, method, MCP_METHODS[method])
    reply = call(dispatcher, session, method, {**MCP_METHODS[method], UNKNOWN: 1})
    assert reply["error"]["data"] == {"reason": "invalid_params", "field": UNKNOWN}, reply


def test_the_tool_list_is_never_paged_so_a_cursor_is_refused(agent_session):
    dispatcher, session = agent_session
    assert "result" in call(dispatcher, session, "tools/list", {"cursor": None})
    reply = call(dispatcher, session, "tools/list", {"cursor": "next"})
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["field"] == "cursor", reply


def test_a_task_augmented_tool_call_runs_as_a_plain_one(agent_session):
    """MCP 2025-11-25: a receiver that declares no tasks capability processes the request normally."""
    dispatcher, session = agent_session
    reply = call(dispatcher, session, "tools/call", {"name": "knowledge_resume", "task": {"ttl": 60000}})
    assert reply["result"]["isError"] is False, reply


@pytest.mark.parametrize("method", ["tools/call", "tools/list"])
def test_a_malformed_meta_is_a_protocol_error_never_a_tool_result(agent_session, method):
    """It came back as a tool's isError result on tools/call, and tools/list listed the shipped kinds past it."""
    dispatcher, session = agent_session
    reply = call(dispatcher, session, method, {"name": "knowledge_resume", "_meta": {"knowledge": {"token": "x"}}}
                 if method == "tools/call" else {"_meta": {"knowledge": []}})
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["reason"] == "invalid_params", reply


def test_initialize_ignores_what_a_later_mcp_revision_adds(engine):
    """A newer client must reach version negotiation, so initialize alone reads what it knows."""
    dispatcher, session = Dispatcher(engine), Session()
    token = engine.add_agent("main", owner=True)
    reply = call(dispatcher, session, "initialize", {
        "protocolVersion": "2099-01-01", "capabilities": {}, "clientInfo": {"name": "future", "version": "1"},
        "somethingNew": {"x": 1}, "_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"}}}})
    assert reply["result"]["protocolVersion"] == "2025-11-25", reply
