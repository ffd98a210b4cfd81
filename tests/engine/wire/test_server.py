"""The agent socket: JSON-RPC handling in memory, then over real sockets, then a real MCP client."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import anyio
import pytest

from engine.wire.protocol import Dispatcher, Session
from engine.wire.server import MAX_MESSAGE_BYTES, EngineServer
from tests.helpers import only_store, tool_answer, wait_for

ROOT = Path(__file__).resolve().parents[3]


def message(method: str, params: dict | None = None, request_id: int | None = 1) -> bytes:
    body = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        body["id"] = request_id
    return json.dumps(body).encode() + b"\n"


def init_params(token: str, audience: dict | None = None, **extra) -> dict:
    return {"protocolVersion": "2025-11-25",
            "_meta": {"knowledge": {"token": token, "audience": audience or {"kind": "owner-private"}, **extra}}}


@pytest.fixture
def dispatcher(engine) -> Dispatcher:
    return Dispatcher(engine)


@pytest.fixture
def session(engine, dispatcher) -> Session:
    token = engine.add_agent("main", owner=True)
    opened = Session()
    reply = dispatcher.handle(opened, message("initialize", init_params(token)))
    assert reply["result"]["serverInfo"]["name"] == "knowledge-desk"
    opened.token_for_tests = token
    return opened


def call(dispatcher, session, method, params=None):
    return dispatcher.handle(session, message(method, params))


# --- JSON-RPC in memory -------------------------------------------------------------------------


def test_requests_before_initialize_are_denied(dispatcher):
    reply = call(dispatcher, Session(), "tools/list")
    assert reply["error"]["data"]["reason"] == "denied"
    assert call(dispatcher, Session(), "ping")["result"] == {}


@pytest.mark.parametrize("meta, reason", [
    ({}, "denied"),
    ({"knowledge": {"token": "kd_wrong", "audience": {"kind": "owner-private"}}}, "denied"),
    ({"knowledge": {"token": "TOKEN", "audience": {"kind": "owner-private", "sandboxed": True}}}, "denied"),
    ({"knowledge": {"token": "TOKEN", "audience": {"kind": "conversation", "sessionKey": "k", "sessionId": "x"}}},
     "invalid_params"),
    ({"knowledge": "token"}, "invalid_params"),
    ({"knowledge": {"token": "TOKEN", "audience": {"kind": "owner-private"}, "instance": "a\nb"}}, "invalid_params"),
])
def test_initialize_checks_the_credential_and_audience(engine, dispatcher, meta, reason):
    token = engine.add_agent("main", owner=True)
    params = json.loads(json.dumps({"_meta": meta}).replace("TOKEN", token))
    session = Session()
    reply = call(dispatcher, session, "initialize", params)
    assert reply["error"]["data"]["reason"] == reason
    assert session.token is None


def test_initialize_negotiates_a_protocol_version(engine, dispatcher):
    token = engine.add_agent("main", owner=True)
    old = call(dispatcher, Session(), "initialize", {**init_params(token), "protocolVersion": "2025-03-26"})
    assert old["result"]["protocolVersion"] == "2025-03-26"
    unknown = call(dispatcher, Session(), "initialize", {**init_params(token), "protocolVersion": "1999-01-01"})
    assert unknown["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize("raw, code", [
    (b"{not json\n", -32700),
    (b"\xff\xfe\n", -32700),
    (b"[1, 2]\n", -32600),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}\n', -32600),
    (b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}\n', -32600),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}\n', -32602),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "no/such"}\n', -32601),
])
def test_malformed_messages_get_json_rpc_errors(dispatcher, session, raw, code):
    reply = dispatcher.handle(session, raw)
    assert reply["error"]["code"] == code and "reason" in reply["error"]["data"]


def test_notifications_get_no_reply(dispatcher, session):
    assert dispatcher.handle(session, message("notifications/initialized", request_id=None)) is None
    assert session.initialized is True
    assert dispatcher.handle(session, message("no/such/notification", request_id=None)) is None


def _claim_kinds(dispatcher, session) -> list[str]:
    tools = {tool["name"]: tool for tool in call(dispatcher, session, "tools/list")["result"]["tools"]}
    item = tools["knowledge_remember"]["inputSchema"]["properties"]["items"]["items"]
    return item["properties"]["claimKind"]["anyOf"][0]["enum"]  # or null: a relationship gives none


def test_tools_list_offers_the_claim_kinds_of_the_callers_active_ontology(engine, dispatcher, session, state_dir):
    """An owner's ontology extension adds claim kinds the engine accepts; the schema used to refuse them."""
    shipped = list(engine.ontology.claim_kinds)
    assert _claim_kinds(dispatcher, session) == shipped  # no store yet: the shipped kinds
    call(dispatcher, session, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "r1", "type": "person", "title": "Dana", "body": "Ops lead."}})
    (only_store(state_dir) / "vault" / "ontology.yaml").write_text(
        "claim_kinds:\n  rumour: Something heard second hand.\n", encoding="utf-8")

    assert _claim_kinds(dispatcher, session) == [*shipped, "rumour"]
    saved = call(dispatcher, session, "tools/call", {"name": "knowledge_remember", "arguments": {
        "requestId": "r2", "items": [{"text": "Dana may move to Lisbon.", "claimKind": "rumour",
                                      "excerpt": "I heard Dana may move"}]}})["result"]
    assert saved["isError"] is False, saved
    chat = Session()
    audience = {"kind": "conversation", "sessionKey": "chat:1", "sessionId": "00000000-0000-4000-8000-000000000001"}
    dispatcher.handle(chat, message("initialize", init_params(session.token_for_tests, audience)))
    assert _claim_kinds(dispatcher, chat) == shipped  # private extensions do not apply to conversations


def test_tools_round_trip_with_structured_content(dispatcher, session):
    tools = {tool["name"]: tool for tool in call(dispatcher, session, "tools/list")["result"]["tools"]}
    assert {"knowledge_grep", "knowledge_lookup", "knowledge_record", "knowledge_remember",
            "knowledge_save_page", "knowledge_resume"} <= set(tools)
    assert tools["knowledge_grep"]["inputSchema"]["required"] == ["query"]
    saved = call(dispatcher, session, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "r1", "type": "person", "title": "Dana", "body": "Ops lead."}})["result"]
    assert saved["isError"] is False and json.loads(saved["content"][0]["text"]) == saved["structuredContent"]
    found = call(dispatcher, session, "tools/call", {"name": "knowledge_grep", "arguments": {"query": "ops"}})
    assert found["result"]["structuredContent"]["hits"][0]["title"] == "Dana"
    history = call(dispatcher, session, "tools/call", {"name": "knowledge_record", "arguments": {
        "id": saved["structuredContent"]["id"], "view": "history"}})["result"]["structuredContent"]
    assert [r["revision"] for r in history["revisions"]] == [1]


def test_tool_failures_are_tool_errors_with_a_reason(dispatcher, session):
    missing = call(dispatcher, session, "tools/call", {"name": "knowledge_record", "arguments": {"id": "pg_none"}})
    assert missing["result"]["isError"] is True and tool_answer(missing["result"])["reason"] == "not_found"
    # The error is the text alone: structured content must conform to the tool's outputSchema, which a
    # client such as the MCP Inspector checks on error results too.
    assert "structuredContent" not in missing["result"] and set(missing["result"]) == {"content", "isError"}
    assert tool_answer(missing["result"])["message"] in missing["result"]["content"][0]["text"]
    bad = call(dispatcher, session, "tools/call", {"name": "knowledge_grep", "arguments": {"query": ""}})
    assert tool_answer(bad["result"])["reason"] == "invalid_params"
    unknown = call(dispatcher, session, "tools/call", {"name": "rm_rf", "arguments": {}})
    assert unknown["error"]["data"]["reason"] == "invalid_params"


def test_a_revision_too_large_for_any_record_is_a_tool_error_not_an_internal_one(dispatcher, session):
    """knowledge_record with revision 10**20 reached SQLite, which cannot bind it: -32603 `internal`."""
    saved = call(dispatcher, session, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "r1", "type": "person", "title": "Dana"}})["result"]["structuredContent"]
    for view in ("record", "history"):
        reply = call(dispatcher, session, "tools/call", {"name": "knowledge_record", "arguments": {
            "id": saved["id"], "revision": 10**20, **({"view": view} if view == "history" else {})}})
        assert reply["result"]["isError"] is True, reply
        assert tool_answer(reply["result"])["reason"] in ("limit_exceeded", "invalid_params")
        assert tool_answer(reply["result"])["field"] == "revision"


@pytest.mark.parametrize("params, said", [({}, "name is required"), ({"name": None}, "name is required"),
                                          ({"name": 5}, "name must be a string"),
                                          ({"name": ["knowledge_grep"]}, "name must be a string")])
def test_a_call_without_a_tool_name_says_so(dispatcher, session, params, said):
    """A missing or non-string name was answered "unknown tool None" (or 5), as if such a tool were asked for;
    one given as a number or a list is said to be no string, not to be missing."""
    reply = call(dispatcher, session, "tools/call", {**params, "arguments": {"query": "ops"}})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"] == {"reason": "invalid_params", "field": "name"}
    assert reply["error"]["message"] == f"{said}: the name of a tool from tools/list"


def test_a_revision_with_the_history_view_is_refused_not_ignored(dispatcher, session):
    """The history view lists every revision; a revision beside it was dropped without a word."""
    saved = call(dispatcher, session, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "r1", "type": "person", "title": "Dana"}})["result"]["structuredContent"]
    reply = call(dispatcher, session, "tools/call", {"name": "knowledge_record", "arguments": {
        "id": saved["id"], "view": "history", "revision": 1}})["result"]
    assert reply["isError"] is True
    assert tool_answer(reply) == {"reason": "invalid_params", "field": "revision",
                                  "message": "revision does not apply to the history view"}


@pytest.mark.parametrize("arguments", [[], 0, False, "", [{"query": "ops"}]])
def test_arguments_that_are_not_an_object_are_refused_and_the_tool_never_runs(engine, dispatcher, session, arguments):
    """`arguments: []`, `0`, `false` or `""` ran the tool as if no arguments were given (a write included)."""
    reply = call(dispatcher, session, "tools/call", {"name": "knowledge_resume", "arguments": arguments})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"] == {"reason": "invalid_params", "field": "arguments"}
    assert call(dispatcher, session, "tools/call", {"name": "knowledge_resume", "arguments": None})["result"][
        "isError"] is False  # absent or null: no arguments, as MCP allows


def test_writes_disabled_hides_and_refuses_the_save_tools(engine, dispatcher, session):
    engine.state.config.write_text(json.dumps({"writesEnabled": False}), encoding="utf-8")
    names = {tool["name"] for tool in call(dispatcher, session, "tools/list")["result"]["tools"]}
    assert "knowledge_save_page" not in names and "knowledge_remember" not in names and "knowledge_grep" in names
    refused = call(dispatcher, session, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "r1", "type": "person", "title": "Dana"}})
    assert tool_answer(refused["result"])["reason"] == "writes_disabled"


def test_a_request_may_name_its_own_audience_within_the_credential(engine, dispatcher, session):
    chat = {"kind": "conversation", "sessionKey": "chat:1", "sessionId": str(uuid.uuid4())}
    call(dispatcher, session, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "r1", "type": "note", "title": "Chat note"}, "_meta": {"knowledge": {"audience": chat}}})
    private = call(dispatcher, session, "memory/search", {"query": "chat note"})["result"]
    in_chat = call(dispatcher, session, "memory/search", {"query": "chat note",
                                                           "_meta": {"knowledge": {"audience": chat}}})["result"]
    assert private["hits"] == [] and [h["title"] for h in in_chat["hits"]] == ["Chat note"]


def test_revocation_takes_effect_on_the_next_request(engine, dispatcher, session):
    assert "result" in call(dispatcher, session, "memory/status")
    engine.remove_agent("main")
    reply = call(dispatcher, session, "memory/search", {"query": "anything"})
    assert reply["error"]["data"]["reason"] == "denied"


def test_memory_host_methods(dispatcher, session):
    call(dispatcher, session, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "r1", "type": "person", "title": "Dana", "body": "Ops lead."}})
    hit = call(dispatcher, session, "memory/search", {"query": "dana"})["result"]["hits"][0]
    read = call(dispatcher, session, "memory/read", {"ref": hit["ref"], "lines": 5})["result"]
    assert read["text"].startswith("# Dana")
    assert call(dispatcher, session, "memory/status")["result"] == {"ready": True}
    assert call(dispatcher, session, "memory/health")["result"]["ok"] is True
    sessions = call(dispatcher, session, "memory/search", {"query": "dana", "sources": ["sessions"]})
    assert sessions["error"]["data"]["reason"] == "invalid_params"


# --- over real sockets ------------------------------------------------------------------------------


@pytest.fixture
def server(engine, state_dir):
    running = EngineServer(engine, port=0, socket_path=state_dir.root / "engine.sock", workers=8)
    running.start()
    yield running
    running.stop()


class Client:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.file = sock.makefile("rwb")

    @classmethod
    def tcp(cls, server) -> "Client":
        return cls(socket.create_connection(("127.0.0.1", server.port), timeout=10))

    def request(self, method, params=None, request_id=1):
        self.file.write(message(method, params, request_id))
        self.file.flush()
        return json.loads(self.file.readline())

    def close(self):
        self.file.close()
        self.sock.close()


def test_the_server_listens_on_loopback_and_a_private_posix_socket(server, state_dir):
    assert stat.S_IMODE(os.stat(state_dir.root / "engine.sock").st_mode) == 0o600
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.connect(str(state_dir.root / "engine.sock"))
    client = Client(unix)
    assert client.request("ping")["result"] == {}
    client.close()
    with pytest.raises(ValueError):
        EngineServer(server.engine, host="0.0.0.0")


def _non_loopback_address() -> str | None:
    """An address of this machine other than loopback (none on a machine without a network)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_stopping_twice_is_stopping_once(engine, state_dir):
    """A second stop (a shutdown path and a test's cleanup, say) raised "Event loop is closed"."""
    running = EngineServer(engine, port=0, socket_path=state_dir.root / "engine.sock", workers=1)
    running.start()
    running.stop()
    running.stop()
    assert not (state_dir.root / "engine.sock").exists()


def test_nothing_listens_beyond_loopback(server):
    """Every listening socket is bound to 127.0.0.1 (or the private POSIX socket), so the machine's
    other addresses refuse connections to the engine's port."""
    bound = [listener.getsockname() for listener in server._listeners]
    assert [name for name in bound if isinstance(name, tuple)] == [("127.0.0.1", server.port)]
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no address other than loopback to try")
    with pytest.raises(OSError):
        socket.create_connection((address, server.port), timeout=2).close()


def test_many_clients_at_once_over_tcp(engine, server):
    token = engine.add_agent("main", owner=True)
    errors, count = [], 16

    def agent(index: int) -> None:
        client = Client.tcp(server)
        try:
            assert "result" in client.request("initialize", init_params(token))
            reply = client.request("tools/call", {"name": "knowledge_save_page", "arguments": {
                "requestId": f"r{index}", "type": "note", "title": f"Note {index}", "body": "shared words"}})
            assert reply["result"]["isError"] is False, reply
        except AssertionError as exc:
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    checker = Client.tcp(server)
    checker.request("initialize", init_params(token))
    hits = checker.request("memory/search", {"query": "shared words", "limit": 50})["result"]["hits"]
    assert len(hits) == count
    checker.close()


def test_an_oversized_line_is_refused_and_the_server_serves_others(engine, server):
    idle = Client.tcp(server)  # connects and sends nothing
    hog = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    hog.sendall(message("initialize", init_params(engine.add_agent("main", owner=True))))
    assert "result" in json.loads(hog.makefile("rb").readline())
    hog.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + b"a" * (MAX_MESSAGE_BYTES + 10))
    reply = hog.makefile("rb").readline()
    assert json.loads(reply)["error"]["data"]["reason"] == "limit_exceeded"
    assert hog.recv(1) == b""  # closed: the stream cannot be resynchronised
    hog.close()
    half = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    half.sendall(b'{"jsonrpc": "2.0", "id": 1, "meth')  # and disconnects mid-message
    half.close()
    other = Client.tcp(server)
    assert other.request("ping")["result"] == {}
    other.close()
    idle.close()


def test_ping_is_answered_while_every_worker_is_busy(engine, state_dir):
    """Found by the load harness: with as many busy agents as workers, a ping waited behind them."""
    running = EngineServer(engine, port=0, workers=1)
    release = threading.Event()
    running.dispatcher.register("test/hold", lambda session, params: {"held": release.wait(30)})
    running.start()
    token = engine.add_agent("main", owner=True)
    busy, prober = Client.tcp(running), Client.tcp(running)
    try:
        busy.request("initialize", init_params(token))
        busy.file.write(message("test/hold"))  # occupies the only worker until released
        busy.file.flush()
        prober.sock.settimeout(5)
        assert prober.request("ping", request_id=7) == {"jsonrpc": "2.0", "id": 7, "result": {}}
        assert prober.request("ping", {"x": 1}, request_id="p")["result"] == {}
    except socket.timeout:
        pytest.fail("a ping waited behind a busy worker")
    finally:
        release.set()
        assert json.loads(busy.file.readline())["result"] == {"held": True}
        busy.close()
        prober.close()
        running.stop()


def test_ping_is_answered_while_the_same_connection_waits_on_a_call(engine, state_dir):
    """A stdio MCP client has one connection: its ping waited until its own long call was answered, so a host
    probing liveness during a slow call saw no answer. Requests still run one at a time, in order."""
    running = EngineServer(engine, port=0, workers=2)
    release = threading.Event()
    order: list[str] = []
    running.dispatcher.register("test/hold", lambda session, params: {"held": release.wait(30)})
    running.dispatcher.register("test/after", lambda session, params: order.append("after") or {})
    running.start()
    client = Client.tcp(running)
    try:
        client.request("initialize", init_params(engine.add_agent("main", owner=True)))
        client.file.write(message("test/hold", request_id=1))
        client.file.flush()
        client.sock.settimeout(5)
        client.file.write(message("notifications/cancelled", {"requestId": 99}, request_id=None))  # names nothing
        assert client.request("ping", request_id=2) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        client.file.write(message("test/after", request_id=3) + message("ping", request_id=4))
        client.file.flush()
        time.sleep(0.2)
        assert order == []  # the next request waits for the one before it
        release.set()
        replies = {reply["id"]: reply for reply in (json.loads(client.file.readline()) for _ in range(3))}
        assert list(replies)[0] == 1 and replies[1]["result"] == {"held": True}
        assert replies[3]["result"] == {} and replies[4]["result"] == {} and order == ["after"]
    except socket.timeout:
        pytest.fail("a ping waited behind its own connection's call")
    finally:
        release.set()
        client.close()
        running.stop()


def test_a_client_that_sends_all_its_requests_before_reading_gets_every_answer_in_order(engine, state_dir):
    """While a call is handled the next line stays in the connection's buffer, which takes up to the message
    limit as before: a client writing far more than the kernel buffers hold before it reads is not stalled."""
    running = EngineServer(engine, port=0, socket_path=state_dir.root / "engine.sock", workers=2)
    running.dispatcher.register("test/echo", lambda session, params: {"n": params["n"], "pad": "r" * 20_000})
    running.start()
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # smaller kernel buffers than TCP on loopback
    unix.connect(str(state_dir.root / "engine.sock"))
    client = Client(unix)
    try:
        client.request("initialize", init_params(engine.add_agent("main", owner=True)))
        client.sock.settimeout(10)
        batch = b"".join(message("test/echo", {"n": n, "pad": "q" * 15_000}, request_id=n) for n in range(400))
        client.sock.sendall(batch)  # 6 MB, before reading any answer
        assert [json.loads(client.file.readline())["result"]["n"] for _ in range(400)] == list(range(400))
    except socket.timeout:
        pytest.fail("the client and the engine stalled on each other")
    finally:
        client.close()
        running.stop()


def test_a_message_just_under_the_cap_is_handled(engine, server):
    client = Client.tcp(server)
    assert "result" in client.request("initialize", init_params(engine.add_agent("main", owner=True)))
    padding = "a" * (MAX_MESSAGE_BYTES - 200)
    reply = client.request("ping", {"padding": padding})
    assert reply["result"] == {}
    client.close()


# --- a real MCP client through `knowledge mcp` --------------------------------------------------------


def test_the_official_mcp_client_lists_saves_searches_and_reads(tmp_path):
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "engine.cli", "--state-dir", str(state), "agents", "add", "main",
                    "--owner"], check=True, env=env, capture_output=True, cwd=ROOT)
    serve = subprocess.Popen([sys.executable, "-m", "engine.cli", "--state-dir", str(state), "serve", "--port", "0"],
                             env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (state / "engine.json").exists(), timeout=30)
        results: dict = {}

        async def session() -> None:
            params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=env, args=[
                "-m", "engine.cli", "--state-dir", str(state), "mcp", "--agent", "main", "--instance", "test-client"])
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write) as client:
                    results["init"] = await client.initialize()
                    results["tools"] = await client.list_tools()
                    results["saved"] = await client.call_tool("knowledge_save_page", {
                        "requestId": "r1", "type": "person", "title": "Dana Whitaker", "body": "Runs operations."})
                    results["found"] = await client.call_tool("knowledge_grep", {"query": "operations"})
                    page_id = results["saved"].structured_content["id"]
                    results["read"] = await client.call_tool("knowledge_record", {"id": page_id})
                    results["missing"] = await client.call_tool("knowledge_record", {"id": "pg_missing"})

        anyio.run(session)
    finally:
        serve.terminate()
        serve.wait(30)
    assert results["init"].server_info.name == "knowledge-desk"
    assert "knowledge_save_page" in {tool.name for tool in results["tools"].tools}
    assert results["saved"].is_error is False and results["saved"].structured_content["revision"] == 1
    assert results["found"].structured_content["hits"][0]["title"] == "Dana Whitaker"
    record = results["read"].structured_content
    assert record["body"] == "Runs operations.\n"
    assert record["frontmatter"]["attribution"]["instance"] == "test-client"
    assert results["missing"].is_error is True
    assert serve.returncode == 0


def test_ontology_and_attach_tools_are_served(dispatcher, session):
    catalog = call(dispatcher, session, "tools/call", {"name": "knowledge_ontology", "arguments": {}})["result"]
    assert catalog["isError"] is False and "fingerprint" in catalog["structuredContent"]
    import base64

    attached = call(dispatcher, session, "tools/call", {"name": "knowledge_attach", "arguments": {
        "requestId": "a1", "content": base64.b64encode(b"meeting notes").decode(), "filename": "notes.txt"}})
    source = attached["result"]["structuredContent"]["source"]
    assert source["size"] == len(b"meeting notes")
    cited = call(dispatcher, session, "tools/call", {"name": "knowledge_remember", "arguments": {
        "requestId": "m1", "items": [{"text": "Notes exist.", "claimKind": "fact",
                                      "evidence": [{"source": source["id"], "quote": "meeting notes"}]}]}})
    assert cited["result"]["isError"] is False


def test_recall_approval_candidates_and_flush_over_the_socket(dispatcher, session):
    saved = call(dispatcher, session, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "r1", "type": "project", "title": "Atlas", "body": "Migration."}})["result"]["structuredContent"]
    approved = call(dispatcher, session, "tools/call", {"name": "knowledge_recall", "arguments": {
        "id": saved["id"], "recall": {"summary": "Atlas cuts over on Jan 22.", "triggers": ["atlas"],
                                      "importance": 8}}})["result"]
    assert approved["isError"] is False
    candidates = call(dispatcher, session, "memory/recallCandidates", {"mode": "trigger"})["result"]["candidates"]
    assert [c["excerpt"] for c in candidates] == ["Atlas cuts over on Jan 22."]
    plan = call(dispatcher, session, "memory/flushPlan")["result"]["plan"]
    assert plan["prompt"] == "Save durable knowledge" and "knowledge_remember" in plan["persistenceToolNames"]
    first = call(dispatcher, session, "tools/call", {"name": "knowledge_remember", "arguments": {
        "flushId": "flush-1", "items": [{"text": "Dana owns Atlas.", "claimKind": "fact", "excerpt": "I own it"}]}})
    again = call(dispatcher, session, "tools/call", {"name": "knowledge_remember", "arguments": {
        "flushId": "flush-1", "items": [{"text": "Dana owns Atlas.", "claimKind": "fact", "excerpt": "I own it"}]}})
    assert first["result"]["structuredContent"]["publicationId"] == again["result"]["structuredContent"]["publicationId"]
    assert first["result"]["structuredContent"]["requestId"].startswith("flush:")


def test_prompt_and_index_over_the_socket(dispatcher, session):
    call(dispatcher, session, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": "r1", "type": "project", "title": "Atlas", "body": "Migration."}})
    prompt = call(dispatcher, session, "memory/prompt", {"projectKey": "northwind/atlas"})["result"]["text"]
    assert "knowledge_remember" in prompt and "northwind/atlas" in prompt
    index = call(dispatcher, session, "memory/index", {"firstMessageAt": "2999-01-01T00:00:00Z"})["result"]
    assert index["text"].startswith("## Knowledge Index") and "Atlas" in index["text"]
    bad = call(dispatcher, session, "memory/index", {"firstMessageAt": "yesterday"})
    assert bad["error"]["data"]["reason"] == "invalid_params"


# --- every tool and host method over a real socket, for each audience ----------------------------------


def _exercise_everything(client: Client, audience: dict) -> dict[str, dict]:
    """Call every tool and host method once; returns each reply keyed by name."""
    import base64

    meta = {"_meta": {"knowledge": {"audience": audience}}}

    def tool(name, arguments):
        return client.request("tools/call", {"name": name, "arguments": arguments, **meta})

    replies = {}
    replies["knowledge_save_page"] = tool("knowledge_save_page", {
        "requestId": "s1", "type": "project", "title": "Beacon", "body": "Lighthouse work.", "aliases": ["beacon"]})
    page_id = (replies["knowledge_save_page"].get("result", {}).get("structuredContent") or {}).get("id", "pg_x")
    replies["knowledge_remember"] = tool("knowledge_remember", {"requestId": "m1", "subject": "beacon", "items": [
        {"text": "Beacon ships in May.", "claimKind": "decision", "excerpt": "we ship in May"}]})
    replies["knowledge_grep"] = tool("knowledge_grep", {"query": "lighthouse"})
    replies["knowledge_lookup"] = tool("knowledge_lookup", {"name": "beacon"})
    replies["knowledge_record"] = tool("knowledge_record", {"id": page_id})
    replies["knowledge_recall"] = tool("knowledge_recall", {"id": page_id, "recall": {
        "summary": "Beacon: May.", "triggers": ["beacon"]}})
    replies["knowledge_ontology"] = tool("knowledge_ontology", {"view": "definitions", "name": "project"})
    replies["knowledge_attach"] = tool("knowledge_attach", {"requestId": "a1",
                                                            "content": base64.b64encode(b"notes").decode()})
    replies["knowledge_attach_file"] = tool("knowledge_attach_file", {
        "requestId": "f1", "filePath": "/etc/hostname", "sha256": "0" * 64})
    replies["knowledge_resume"] = tool("knowledge_resume", {})
    for method, params in (("memory/search", {"query": "lighthouse"}), ("memory/status", {}),
                           ("memory/health", {}), ("memory/prompt", {}),
                           ("memory/index", {"firstMessageAt": "2999-01-01T00:00:00Z"}),
                           ("memory/recallCandidates", {"mode": "trigger"}), ("memory/flushPlan", {})):
        replies[method] = client.request(method, {**params, **meta})
    hit = (replies["memory/search"].get("result") or {}).get("hits") or []
    replies["memory/read"] = client.request("memory/read", {"ref": hit[0]["ref"] if hit else {}, **meta})
    return replies


def ok(reply: dict) -> bool:
    return "result" in reply and not reply["result"].get("isError", False)


def reason(reply: dict) -> str | None:
    if "error" in reply:
        return reply["error"]["data"]["reason"]
    return tool_answer(reply["result"]).get("reason") if reply["result"].get("isError") else None


def test_every_tool_and_method_over_a_real_socket_for_each_audience(engine, server):
    owner_token = engine.add_agent("main", owner=True)
    engine.registry.set_grant("main", "chat:granted-read", "read")
    client = Client.tcp(server)
    assert ok(client.request("initialize", init_params(owner_token)))

    owner = _exercise_everything(client, {"kind": "owner-private"})
    failing = {name: reply for name, reply in owner.items() if not ok(reply)}
    # attach_file is refused until the owner configures workspace roots; everything else works.
    assert set(failing) == {"knowledge_attach_file"} and reason(failing["knowledge_attach_file"]) == "runtime_disabled"
    assert owner["memory/recallCandidates"]["result"]["candidates"][0]["excerpt"] == "Beacon: May."

    chat = _exercise_everything(client, {"kind": "conversation", "sessionKey": "chat:9",
                                         "sessionId": str(uuid.uuid4())})
    assert ok(chat["knowledge_save_page"]) and ok(chat["knowledge_grep"]) and ok(chat["memory/read"])
    assert reason(chat["knowledge_recall"]) == "denied"  # an ungranted conversation cannot approve recall
    assert chat["memory/recallCandidates"]["result"]["candidates"] == []
    assert chat["memory/index"]["result"]["text"] is None
    titles_in_chat = [h["title"] for h in chat["memory/search"]["result"]["hits"]]
    assert titles_in_chat == ["Beacon"]  # its own partition's page, not the owner's

    read_grant = _exercise_everything(client, {"kind": "conversation", "sessionKey": "chat:granted-read",
                                               "sessionId": str(uuid.uuid4())})
    assert reason(read_grant["knowledge_save_page"]) == "denied"
    assert ok(read_grant["knowledge_grep"]) and ok(read_grant["memory/read"]) and ok(read_grant["memory/index"])
    assert read_grant["memory/flushPlan"]["result"]["plan"] is None

    # Denied callers get errors everywhere, except the index, which is simply omitted for them.
    quiet = ("memory/read", "memory/index")
    sandboxed = _exercise_everything(client, {"kind": "owner-private", "sandboxed": True})
    assert {reason(reply) for name, reply in sandboxed.items() if name not in quiet} == {"denied"}
    assert sandboxed["memory/index"]["result"]["text"] is None

    helper = Client.tcp(server)
    helper_token = engine.add_agent("helper")
    assert reason(helper.request("initialize", init_params(helper_token, {"kind": "owner-private"}))) is None
    denied = _exercise_everything(helper, {"kind": "owner-private"})
    assert {reason(reply) for name, reply in denied.items() if name not in quiet} == {"denied"}
    assert denied["memory/index"]["result"]["text"] is None
    client.close()
    helper.close()
