"""Property tests: whatever arrives, the parsers and the socket answer with the engine's own errors.

The coverage-guided fuzzers in tests/fuzz/ explore the same targets for longer; crashes they find
are kept in tests/fuzz/regressions/ and replayed by test_fuzz_regressions.py.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.access.authority import AgentCaller
from engine.core.errors import KnowledgeError
from engine.vault.ontology import Ontology
from engine.wire.protocol import ERROR_CODES, IMMEDIATE_MAX_BYTES, Dispatcher, Session
from engine.search.keyword import parse_search_request
from engine.service import Engine
from engine.state.statedir import StateDir

REASONS = set(ERROR_CODES) | {"internal"}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """One engine with a little knowledge, shared by the examples of this module."""
    engine = Engine(StateDir(tmp_path_factory.mktemp("props") / "state"), watch=False)
    token = engine.add_agent("main", owner=True)
    caller = AgentCaller(token, {"kind": "owner-private"})
    engine.save_page(caller, {"requestId": "seed", "type": "note", "title": "Harbour notes",
                              "body": "Ferries leave at dawn.\n\nThe lighthouse keeper waves."})
    session = Session()
    dispatcher = Dispatcher(engine)
    dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"}}}}}).encode())
    yield {"engine": engine, "caller": caller, "dispatcher": dispatcher, "session": session}
    engine.close()


def _wire_reply_is_well_formed(reply):
    if reply is None:
        return
    assert reply["jsonrpc"] == "2.0"
    if "error" in reply:
        assert reply["error"]["data"]["reason"] in REASONS
        assert reply["error"]["data"]["reason"] != "internal", reply
    else:
        assert "result" in reply


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=300))
def test_any_query_text_searches_or_is_refused_cleanly(running, text):
    try:
        result = running["engine"].search(running["caller"], {"query": text})
    except KnowledgeError as exc:
        assert exc.reason in ("invalid_params", "limit_exceeded")
        return
    assert all(0.0 <= hit["score"] <= 1.0 for hit in result["hits"])


@settings(max_examples=150, deadline=None)
@given(params=st.dictionaries(st.sampled_from(["query", "limit", "minScore", "kind", "type", "cursor", "sources",
                                               "other"]), json_values, max_size=6))
def test_any_search_parameters_parse_or_are_refused(params):
    try:
        parse_search_request(params)
    except KnowledgeError as exc:
        assert exc.reason in ("invalid_params", "limit_exceeded")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300))
def test_any_bytes_on_the_socket_get_a_json_rpc_answer(running, data):
    reply = running["dispatcher"].handle(Session(), data)
    _wire_reply_is_well_formed(reply)
    if Dispatcher.answers_at_once(data):  # answered on the event loop: only ever a ping's answer
        assert reply is None or reply.get("result") == {} or "error" in reply


METHODS = ["initialize", "ping", "tools/list", "tools/call", "memory/search", "memory/read", "memory/health",
           "memory/status", "memory/prompt", "memory/index", "memory/recallCandidates", "memory/flushPlan"]
TOOLS = ["knowledge_grep", "knowledge_lookup", "knowledge_record", "knowledge_remember", "knowledge_save_page",
         "knowledge_recall", "knowledge_ontology", "knowledge_attach", "knowledge_attach_file", "knowledge_resume"]


def _strict_json(message: bytes) -> bool:
    def refuse(name: str) -> None:
        raise ValueError(name)

    try:
        json.loads(message, parse_constant=refuse)
    except ValueError:
        return False
    return True


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(METHODS), params=json_values,
       request_id=st.one_of(st.integers(), st.text(max_size=8), st.none(), st.booleans(), st.floats()))
def test_only_short_pings_are_answered_on_the_event_loop(running, method, params, request_id):
    message = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
    at_once = Dispatcher.answers_at_once(message)
    # An id of inf or nan is dumped as Infinity or NaN, which is not JSON: such a line is no ping at all.
    assert at_once == (method == "ping" and len(message) <= IMMEDIATE_MAX_BYTES and _strict_json(message))
    if at_once:
        reply = running["dispatcher"].handle(Session(), message)
        assert reply.get("result") == {} or reply["error"]["data"]["reason"] == "invalid_params"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(METHODS), tool=st.sampled_from(TOOLS), arguments=json_values, params=json_values,
       request_id=st.one_of(st.integers(), st.text(max_size=8), st.none(), st.booleans(), st.floats()))
def test_any_request_shape_gets_a_json_rpc_answer(running, method, tool, arguments, params, request_id):
    if method == "tools/call":
        params = {"name": tool, "arguments": arguments}
    message = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
    _wire_reply_is_well_formed(running["dispatcher"].handle(running["session"], message))


@settings(max_examples=200, deadline=None)
@given(document=json_values)
def test_any_ontology_extension_loads_or_reports_findings(document):
    text = json.dumps(document)  # JSON is YAML
    try:
        extended = Ontology.shipped().extended(text, "vault/ontology.yaml")
    except KnowledgeError as exc:
        pytest.fail(f"an extension must become findings, not {exc!r}")
    assert set(Ontology.shipped().page_types) <= set(extended.page_types)
