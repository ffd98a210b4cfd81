"""The wire format: every malformed line gets an error naming its problem, checked once at parsing."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.errors import wire_codes
from engine.wire import messages
from engine.wire.protocol import Dispatcher, Session
from engine.wire.messages import (MAX_NESTING, MalformedMessage, cut_member, encode, lone_surrogate_path,
                                  nesting_exceeds, oversize_answer, parse_request, request_id_in)
from engine.wire.tools import pretty_json


def raw(method: str, params: dict, request_id=1) -> bytes:
    """A request line whose strings may hold lone surrogates, written as the JSON escapes a client sends."""
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n"


def nested(levels: int) -> bytes:
    """A ping whose params hold arrays so that the message nests exactly ``levels`` deep."""
    inner = "[" * (levels - 2) + "]" * (levels - 2)
    return b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"a": ' + inner.encode() + b"}}\n"


@pytest.fixture
def dispatcher(engine) -> Dispatcher:
    return Dispatcher(engine)


@pytest.fixture
def token(engine) -> str:
    return engine.add_agent("main", owner=True)


@pytest.fixture
def session(dispatcher, token) -> Session:
    opened = Session()
    reply = dispatcher.handle(opened, raw("initialize", {"_meta": {"knowledge": {
        "token": token, "audience": {"kind": "owner-private"}}}}))
    assert "result" in reply
    return opened


# --- lone surrogates --------------------------------------------------------------------------------


@pytest.mark.parametrize("params, field", [
    ({"name": "knowledge_save_page", "arguments": {"requestId": "r1", "type": "note", "title": "a\ud800b"}},
     "params.arguments.title"),
    ({"name": "knowledge_remember", "arguments": {"requestId": "m1", "items": [
        {"text": "fine", "claimKind": "fact", "excerpt": "fine"},
        {"text": "bad \udfff", "claimKind": "fact", "excerpt": "x"}]}}, "params.arguments.items[1].text"),
    ({"name": "knowledge_save_page", "arguments": {"requestId": "r1", "type": "note", "title": "T",
                                                   "fields": {"ke\udc00y": "v"}}},
     "params.arguments.fields.ke\\udc00y"),
    ({"name": "knowledge_save_page\ud800", "arguments": {}}, "params.name"),
    ({"name": "knowledge_save_page", "arguments": {"requestId": "r1", "type": "note", "title": "T"},
      "_meta": {"knowledge": {"audience": {"kind": "conversation", "sessionKey": "chat:\ud800",
                                           "sessionId": str(uuid.uuid4())}}}},
     "params._meta.knowledge.audience.sessionKey"),
])
def test_a_lone_surrogate_in_a_call_is_invalid_params_naming_its_field(engine, dispatcher, session, params, field):
    reply = dispatcher.handle(session, raw("tools/call", params, request_id=9))
    assert reply["id"] == 9
    assert reply["error"]["code"] == -32602 and reply["error"]["data"] == {"reason": "invalid_params", "field": field}
    assert field in reply["error"]["message"]
    encode(reply).decode("utf-8")  # the reply itself is sendable
    for query in ("T", "fine"):
        assert dispatcher.handle(session, raw("memory/search", {"query": query}))["result"]["hits"] == []


@pytest.mark.parametrize("knowledge, field", [
    ({"token": "kd_\ud800", "audience": {"kind": "owner-private"}}, "params._meta.knowledge.token"),
    ({"token": "TOKEN", "audience": {"kind": "owner-private"}, "instance": "laptop\udbff"},
     "params._meta.knowledge.instance"),
])
def test_a_lone_surrogate_at_initialize_leaves_the_connection_unauthenticated(dispatcher, token, knowledge, field):
    knowledge = json.loads(json.dumps(knowledge).replace("TOKEN", token))
    fresh = Session()
    reply = dispatcher.handle(fresh, raw("initialize", {"_meta": {"knowledge": knowledge}}))
    assert reply["error"]["data"] == {"reason": "invalid_params", "field": field}
    assert not fresh.authenticated
    assert dispatcher.handle(fresh, raw("tools/list", {}))["error"]["data"]["reason"] == "denied"


def test_a_surrogate_in_the_method_or_a_top_level_key_is_named_too(dispatcher, session):
    assert dispatcher.handle(session, b'{"jsonrpc":"2.0","id":1,"method":"pi\\udc80ng"}')["error"]["data"][
        "field"] == "method"
    assert dispatcher.handle(session, b'{"jsonrpc":"2.0","id":1,"method":"ping","x\\ud800":1}')["error"]["data"][
        "field"] == "x\\ud800"


def test_surrogate_pairs_and_escaped_backslashes_are_ordinary_text(dispatcher, session):
    assert dispatcher.handle(session, b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"\\ud83d\\ude00"}}'
                             )["result"] == {}
    assert dispatcher.handle(session, b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"\\\\ud800"}}'
                             )["result"] == {}


@pytest.mark.parametrize("line", [
    b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": "ok\\udfffok", "method": "tools/list"}',
    b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": true, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}',
])
def test_an_invalid_id_is_answered_with_id_null(dispatcher, session, line):
    reply = dispatcher.handle(session, line)
    assert reply["id"] is None and reply["error"]["code"] == -32600 and reply["error"]["data"]["field"] == "id"
    encode(reply).decode("utf-8")


def test_lone_surrogate_path_walks_keys_values_and_lists():
    assert lone_surrogate_path({"a": [{"b": "ok"}, {"c": ["x", "\ud800"]}]}) == "a[1].c[1]"
    assert lone_surrogate_path({"a": {"\udc00": 1}}) == "a.\\udc00"
    assert lone_surrogate_path({"a": ["fine", 1, None, {"b": "\U0001f600"}]}) is None


# --- nesting ----------------------------------------------------------------------------------------


def test_nesting_up_to_the_limit_is_accepted_and_beyond_it_is_a_parse_error(dispatcher, session):
    assert dispatcher.handle(session, nested(MAX_NESTING))["result"] == {}
    reply = dispatcher.handle(session, nested(MAX_NESTING + 1))
    assert reply["error"]["code"] == -32700 and f"deeper than {MAX_NESTING} levels" in reply["error"]["message"]


@pytest.mark.parametrize("line", [b"[" * 100_000, b'{"a":' * 100_000, b"[" * 50_000 + b"]" * 50_000,
                                  b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":' + b"[{" * 5_000])
def test_deep_input_is_refused_before_it_reaches_the_decoder(dispatcher, session, line):
    reply = dispatcher.handle(session, line)  # never RecursionError, never internal
    assert reply["error"]["code"] == -32700 and reply["id"] is None


def test_brackets_inside_strings_do_not_count(dispatcher, session):
    text = "[[{" * 1000 + '\\" ]]}'
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"a": text}}).encode()
    assert dispatcher.handle(session, line)["result"] == {}


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:'),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\a'), inner,
                                                                                 max_size=3), max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(_json, st.integers(min_value=0, max_value=8))
def test_nesting_exceeds_agrees_with_the_decoded_depth(value, limit):
    assert nesting_exceeds(json.dumps(value).encode(), limit) == (_depth(value) > limit)


# --- everything else a line can get wrong -----------------------------------------------------------


@pytest.mark.parametrize("line, code, words", [
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":NaN}}', -32700, "NaN"),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":-Infinity}}', -32700, "Infinity"),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping"', -32700, "not JSON"),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', -32700, "not UTF-8"),
    (b'"just a string"', -32600, "one JSON object"),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}', -32602, "params must be an object"),
    (b'{"jsonrpc":"2.0","method":"notifications/initialized","params":"x"}', -32602, "params must be an object"),
])
def test_malformed_lines_name_their_problem(dispatcher, session, line, code, words):
    reply = dispatcher.handle(session, line)
    assert reply["error"]["code"] == code and words in reply["error"]["message"]
    assert reply["error"]["data"]["reason"] == "invalid_params"


def test_parse_request_returns_the_routed_parts():
    request = parse_request(b'{"jsonrpc":"2.0","id":"a","method":"tools/list"}')
    assert (request.id, request.method, request.params, request.notification) == ("a", "tools/list", {}, False)
    assert parse_request(b'{"jsonrpc":"2.0","method":"notifications/initialized"}').notification is True
    with pytest.raises(MalformedMessage):
        parse_request(b"[]")


@pytest.mark.parametrize("head, tail, expected", [
    (b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"x":"aaa', b"", 3),
    (b'{"jsonrpc": "2.0", "method": "tools/call", "id": "call-7", "params": {"x": "aaa', b"", "call-7"),
    (b'{"method":"tools/call","params":{"x":"aaa', b'aaa"}},"jsonrpc":"2.0","id":12}\n', 12),
    (b'{"method":"tools/call","params":{"x":"aaa', b'aaa","id":5}}\n', None),  # the arguments' id, not the call's
    (b'{"params":{"id":7,"x":"aaa', b"", None),
    (b'{"jsonrpc":"2.0","id":"\\ud800","method":"x","params":{"a":"', b"", None),
    (b"garbage", b"garbage", None),
])
def test_request_id_in_reads_only_the_outermost_id(head, tail, expected):
    assert request_id_in(head, tail) == expected


def test_encode_escapes_a_reply_that_holds_a_lone_surrogate():
    assert encode({"a": "é"}) == '{"a":"é"}\n'.encode("utf-8")
    assert json.loads(encode({"a": "x\ud800"})) == {"a": "x\ud800"}


# --- a line too long to read: which member it was cut in ---------------------------------------------


def cut_short(message: dict, at: int) -> bytes:
    return json.dumps(message).encode()[:at]


@pytest.mark.parametrize("arguments, path", [
    ({"requestId": "r", "body": "x" * 500}, ("params", "arguments", "body")),
    ({"requestId": "r", "items": [{"text": "a", "evidence": [{"source": "s", "lines": [1, 2]}]},
                                  {"claimKind": "fact", "text": "\u4e2d" * 500}]},
     ("params", "arguments", "items", 1, "text")),
    ({"tags": ["a", "b", "c" * 500]}, ("params", "arguments", "tags", 2)),
    ({"numbers": list(range(500))}, ("params", "arguments", "numbers")),
    ({"k\u00e9y \"quoted\"": "x" * 500}, ("params", "arguments", "k\u00e9y \"quoted\"")),
])
def test_cut_member_names_the_member_a_long_line_is_cut_in(arguments, path):
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "knowledge_x", "arguments": arguments}}
    cut = cut_member(cut_short(message, len(json.dumps(message)) - 200))
    assert (cut.method, cut.tool) == ("tools/call", "knowledge_x")
    assert cut.path[:len(path)] == path and (len(cut.path) == len(path) or path[-1] == "numbers")


def test_an_oversize_tool_call_is_a_tool_error_as_the_tools_print_one():
    message = {"jsonrpc": "2.0", "id": "c1", "method": "tools/call",
               "params": {"name": "knowledge_save_page", "arguments": {"requestId": "r", "body": "\u00e9" * 500}}}
    answer = oversize_answer(cut_short(message, 300), b"", 299, size=3_000)
    assert answer["id"] == "c1" and answer["result"]["isError"] is True and "structuredContent" not in answer["result"]
    [block] = answer["result"]["content"]
    error = json.loads(block["text"])
    assert block["text"] == pretty_json(error)
    assert (error["reason"], error["field"], error["limit"], error["size"]) == ("limit_exceeded", "body", 299, 3_000)


@pytest.mark.parametrize("head, field", [
    (b'{"jsonrpc": "2.0", "id": 2, "params": {"name": "knowledge_grep", "arguments": {"query": "' + b"q" * 300,
     "params.arguments.query"),  # the method not seen: no tool error
    (b'{"jsonrpc": "2.0", "id": 2, "method": "memory/search", "params": {"query": "' + b"q" * 300, "params.query"),
    (b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "' + b"n" * 300, "params.name"),
    (b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x", "arguments": [' + b"1," * 200,
     "params.arguments[200]"),  # arguments that are no object
])
def test_any_other_oversize_message_is_the_json_rpc_error_naming_the_member(head, field):
    answer = oversize_answer(head, b"", 100)
    assert answer["id"] == 2 and answer["error"]["data"] == {
        "reason": "limit_exceeded", "limit": 100, **({"field": field} if field else {})}


def test_cut_member_reads_a_bounded_number_of_tokens(monkeypatch):
    monkeypatch.setattr(messages, "CUT_TOKENS_MAX", 50)
    head = (b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"arguments": {"tags": ['
            + b'"a",' * 60 + b'"b')
    assert cut_member(head).path == () and cut_member(head).method == "tools/call"


def test_the_oversize_answers_code_is_the_engines_limit_exceeded():
    assert messages.LIMIT_EXCEEDED == wire_codes()["limit_exceeded"]
