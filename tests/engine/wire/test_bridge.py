"""``knowledge mcp``: an oversize call is answered by the bridge and the session goes on; keepalives
hold a quiet session open; and the official MCP client sees the same through the real command."""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from engine.wire.bridge import run_bridge, with_credentials
from engine.wire.server import EngineServer, SocketBounds
from engine.wire.messages import MAX_MESSAGE_BYTES
from engine.wire.tools import CORE_TOOLS
from tests.engine.wire.test_server import message
from tests.helpers import tool_answer, wait_for

ROOT = Path(__file__).resolve().parents[3]


class Lines:
    """The bridge's stdout, as a queue of the lines it wrote."""

    def __init__(self) -> None:
        self.lines: queue.Queue[bytes] = queue.Queue()

    def write(self, data: bytes) -> None:
        self.lines.put(data)

    def flush(self) -> None:
        pass

    def next(self, timeout: float = 10.0) -> dict:
        return json.loads(self.lines.get(timeout=timeout))


@pytest.fixture
def serve(engine, state_dir):
    """Start an engine server with the given bounds and publish it in engine.json, as `serve` does."""
    started: list[EngineServer] = []

    def start(**bounds) -> EngineServer:
        running = EngineServer(engine, port=0, socket_path=state_dir.root / "engine.sock", workers=4,
                               bounds=SocketBounds(**bounds))
        running.start()
        state_dir.write_engine_info({"pid": os.getpid(), **running.info()})
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


@pytest.fixture
def knowledge(engine) -> dict:
    return {"token": engine.add_agent("main", owner=True), "audience": {"kind": "owner-private"}}


# Within the body's limit of 4,000,000 characters, beyond the message's 8 MiB: 3 bytes each as UTF-8, 6 as the
# JSON escapes Python writes by default.
BIG_BODY = "\u4e2d" * 3_000_000


def oversize_call(request_id: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
        "name": "knowledge_save_page", "arguments": {"requestId": "big", "type": "note", "title": "Big",
                                                     "body": BIG_BODY}}}).encode() + b"\n"


def test_an_oversize_call_is_answered_for_its_id_and_not_forwarded(engine, state_dir, serve, knowledge):
    serve()
    stdin = message("initialize", {"protocolVersion": "2025-11-25"}, request_id=1) + oversize_call(2) \
        + message("tools/call", {"name": "knowledge_grep", "arguments": {"query": "big"}}, request_id=3)
    stdout = Lines()
    assert run_bridge(state_dir, knowledge, stdin=io.BytesIO(stdin), stdout=stdout) == 0
    replies = {reply["id"]: reply for reply in (stdout.next() for _ in range(3))}
    assert replies[1]["result"]["serverInfo"]["name"] == "knowledge-desk"
    # A tool error the agent's model reads, naming the argument and the limit; the call was not made.
    refused = tool_answer(replies[2]["result"])
    assert refused == {"reason": "limit_exceeded", "field": "body", "limit": MAX_MESSAGE_BYTES,
                       "size": len(oversize_call(2)) - 1, "message": refused["message"]}
    assert refused["message"].startswith("body is too long to send") and "8,388,608 bytes" in refused["message"]
    assert replies[3]["result"]["structuredContent"]["hits"] == []  # the big page was never saved
    assert stdout.lines.empty()


def test_a_line_of_exactly_the_limit_is_forwarded(state_dir, serve, knowledge):
    serve()
    head = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"'
    exact = head + b"a" * (MAX_MESSAGE_BYTES - len(head) - 3) + b'"}}\n'
    assert len(exact) == MAX_MESSAGE_BYTES + 1  # the limit is the message; its newline is the framing
    stdout = Lines()
    run_bridge(state_dir, knowledge, stdin=io.BytesIO(message("initialize", {}, 1) + exact), stdout=stdout)
    replies = {reply["id"]: reply for reply in (stdout.next(), stdout.next())}
    assert "serverInfo" in replies[1]["result"] and replies[2]["result"] == {}


@pytest.mark.parametrize("keepalive_s, survives", [(0.2, True), (60.0, False)])
def test_keepalives_hold_a_quiet_session_past_the_engines_idle_timeout(state_dir, serve, knowledge, keepalive_s,
                                                                       survives):
    serve(idle_timeout_s=0.8)
    read_end, write_end = os.pipe()
    stdin, client = os.fdopen(read_end, "rb"), os.fdopen(write_end, "wb")
    stdout = Lines()
    bridge = threading.Thread(target=run_bridge, args=(state_dir, knowledge), kwargs={
        "stdin": stdin, "stdout": stdout, "keepalive_s": keepalive_s})
    bridge.start()
    try:
        client.write(message("initialize", {}, request_id=1))
        client.flush()
        assert "result" in stdout.next()
        time.sleep(2.0)  # quiet for more than twice the idle timeout
        if survives:
            client.write(message("ping", request_id=2))
            client.flush()
            assert stdout.next() == {"jsonrpc": "2.0", "id": 2, "result": {}}
            assert stdout.lines.empty()  # the keepalives' answers never reach the client
        else:
            wait_for(lambda: not bridge.is_alive())  # the engine closed the idle connection
    finally:
        client.close()
        bridge.join(10)
        stdin.close()
    assert not bridge.is_alive()


def test_a_surrogate_in_the_clients_initialize_reaches_the_engine_as_an_escape(engine, state_dir, serve, knowledge):
    line = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"x\\ud800"}}}\n'
    forwarded = with_credentials(line, knowledge)
    assert b"\\ud800" in forwarded and json.loads(forwarded)["params"]["_meta"]["knowledge"] == knowledge
    serve()
    stdout = Lines()
    run_bridge(state_dir, knowledge, stdin=io.BytesIO(line), stdout=stdout)
    assert stdout.next()["error"]["data"] == {"reason": "invalid_params", "field": "params.clientInfo.name"}


def test_a_line_that_is_not_initialize_passes_untouched(knowledge):
    line = message("tools/call", {"name": "knowledge_grep", "arguments": {"query": "initialize"}})
    assert with_credentials(line, knowledge) == line


def test_the_bridge_exits_cleanly_when_the_engine_goes_away_under_an_open_client(engine, state_dir, knowledge):
    """With the client's stdin still open, the bridge aborted at exit ("Fatal Python error: could not acquire
    lock for <stdin>", SIGABRT): its reader thread held stdin's lock while the interpreter shut down."""
    running = EngineServer(engine, port=0, socket_path=state_dir.root / "engine.sock", workers=2)
    running.start()
    state_dir.write_engine_info({"pid": os.getpid(), **running.info()})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KNOWLEDGE_TOKEN": knowledge["token"]}
    bridge = subprocess.Popen([sys.executable, "-m", "engine.cli", "--state-dir", str(state_dir.root), "mcp",
                               "--agent", "main"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env, cwd=ROOT)
    try:
        bridge.stdin.write(message("initialize", {"protocolVersion": "2025-11-25"}, request_id=1))
        bridge.stdin.flush()
        assert json.loads(bridge.stdout.readline())["result"]["serverInfo"]["name"] == "knowledge-desk"
        running.stop()  # the engine stops (or restarts) while the client still holds the session
        running = None
        assert bridge.stdout.readline() == b""
        assert bridge.wait(30) == 0
        assert b"Fatal Python error" not in bridge.stderr.read()
    finally:
        if running is not None:
            running.stop()
        bridge.kill()
        bridge.wait()
        for stream in (bridge.stdin, bridge.stdout, bridge.stderr):
            stream.close()


# --- the official MCP client through `knowledge mcp` -------------------------------------------------------


def test_the_official_mcp_client_survives_an_oversize_call(tmp_path):
    from mcp import Client, ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "engine.cli", "--state-dir", str(state), "agents", "add", "main",
                    "--owner"], check=True, env=env, capture_output=True, cwd=ROOT)
    serve = subprocess.Popen([sys.executable, "-m", "engine.cli", "--state-dir", str(state), "serve", "--port", "0"],
                             env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results: dict = {}
    try:
        wait_for(lambda: (state / "engine.json").exists(), timeout=30)

        async def session() -> None:
            params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=env, args=[
                "-m", "engine.cli", "--state-dir", str(state), "mcp", "--agent", "main"])
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    results["tools"] = (await client.list_tools()).tools
                    results["oversize"] = await client.call_tool("knowledge_save_page", {
                        "requestId": "big", "type": "note", "title": "Big", "body": BIG_BODY})
                    results["saved"] = await client.call_tool("knowledge_save_page", {
                        "requestId": "small", "type": "note", "title": "Small", "body": "After the big one."})
                    results["found"] = await client.call_tool("knowledge_grep", {"query": "big"})
            async with Client(params) as modern:  # MCP 2026-07-28, whose results say their resultType
                results["modern"] = await modern.call_tool("knowledge_save_page", {
                    "requestId": "big", "type": "note", "title": "Big", "body": BIG_BODY})

        anyio.run(session)
    finally:
        serve.terminate()
        serve.wait(30)
    assert results["oversize"].is_error is True and results["oversize"].structured_content is None
    refused = json.loads(results["oversize"].content[0].text)
    assert (refused["reason"], refused["field"], refused["limit"]) == ("limit_exceeded", "body", MAX_MESSAGE_BYTES)
    modern = json.loads(results["modern"].content[0].text)  # its size counts the 2026-07-28 envelope too
    assert results["modern"].is_error is True and {**modern, "size": 0} == {**refused, "size": 0}
    assert results["saved"].is_error is False and results["saved"].structured_content["revision"] == 1
    assert [hit["title"] for hit in results["found"].structured_content["hits"]] == ["Small"]
    # What a client shows and asks its user before a call, as the SDK reads it: every tool titled; the writes
    # marked as such, none destructive, all idempotent, none reaching beyond the machine.
    writes = {tool.name for tool in CORE_TOOLS if tool.writes}
    listed = {tool.name: tool for tool in results["tools"]}
    assert writes and set(listed) >= writes
    for name, tool in listed.items():
        hints = tool.annotations
        assert tool.title and hints.read_only_hint is (name not in writes), name
        assert (hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (False, True, False), name


# --- MCP 2026-07-28 through the bridge -------------------------------------------------------------------------


def modern_line(method: str, params: dict | None = None, request_id: int | str = 1) -> bytes:
    from tests.engine.wire.test_modern import envelope

    return message(method, {**(params or {}), "_meta": envelope()}, request_id)


def test_a_2026_client_is_relayed_on_a_connection_the_bridge_authenticated(engine, state_dir, serve, knowledge):
    serve()
    stdin = modern_line("server/discover", request_id=1) + modern_line("tools/list", request_id=2) \
        + modern_line("tools/call", {"name": "knowledge_grep", "arguments": {"query": "x"}}, request_id=3)
    stdout = Lines()
    assert run_bridge(state_dir, knowledge, stdin=io.BytesIO(stdin), stdout=stdout) == 0
    replies = [stdout.next() for _ in range(3)]
    assert [reply["id"] for reply in replies] == [1, 2, 3] and stdout.lines.empty()  # nothing of the bridge's own
    assert "2025-11-25" in replies[0]["result"]["supportedVersions"]  # discover came before the credential
    assert replies[1]["result"]["resultType"] == "complete" and replies[1]["result"]["tools"]
    assert replies[2]["result"]["structuredContent"]["hits"] == []
    (seen,) = engine.connections.listed()
    assert seen["client"] == "probe 1.0"  # named as the client's envelope names it


def test_a_refused_credential_answers_each_2026_request_with_the_cause(engine, state_dir, serve, knowledge):
    serve()
    engine.remove_agent("main")
    stdin = modern_line("tools/list", request_id=1) + modern_line("tools/list", request_id=2)
    stdout = Lines()
    run_bridge(state_dir, knowledge, stdin=io.BytesIO(stdin), stdout=stdout)
    for request_id in (1, 2):
        reply = stdout.next()
        assert reply["id"] == request_id and reply["error"]["data"]["reason"] == "denied"
        assert "revoked credential" in reply["error"]["message"]
    assert stdout.lines.empty()


def test_a_2025_client_still_gets_its_credential_in_initialize(engine, state_dir, serve, knowledge):
    serve()
    stdin = message("initialize", {"protocolVersion": "2025-06-18"}, 1) + modern_line("tools/list", request_id=2)
    stdout = Lines()
    run_bridge(state_dir, knowledge, stdin=io.BytesIO(stdin), stdout=stdout)
    assert stdout.next()["result"]["protocolVersion"] == "2025-06-18"
    assert stdout.next()["error"]["code"] == -32600  # the eras are kept apart on one connection
