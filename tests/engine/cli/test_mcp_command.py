"""``knowledge mcp`` starts without the rest of the command line, and a session that cannot start tells the
client why: its requests are answered with the cause and the fix, not a closed connection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from engine.cli import subcommand

ROOT = Path(__file__).resolve().parents[3]
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}) + "\n"


@pytest.mark.parametrize(("args", "command"), [
    (["mcp", "--agent", "main"], "mcp"),
    (["--state-dir", "/tmp/x", "mcp", "--agent", "main"], "mcp"),
    (["--state-dir=/tmp/x", "mcp"], "mcp"),
    (["--state-dir", "mcp", "serve"], "serve"),  # a state directory named mcp
    (["serve", "--port", "0"], "serve"),
    (["--version"], None),
    ([], None),
])
def test_the_command_is_the_first_word_after_the_state_dir(args, command) -> None:
    assert subcommand(args) == command


def _modules_the_bridge_loads() -> set[str]:
    probe = ("import sys, engine.cli.mcp_command; print(' '.join(sorted(sys.modules)))")
    return set(subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.split())


def test_the_bridge_loads_no_engine_gate_or_model_code() -> None:
    loaded = _modules_the_bridge_loads()
    assert "engine.wire.bridge" in loaded
    heavy = {"engine.service", "engine.wire.protocol", "engine.gate.turn", "engine.store.store", "numpy",
             "onnxruntime", "tantivy", "yaml", "engine.cli.commands"}
    assert loaded & heavy == set()


def test_the_bridge_leaves_out_what_only_writing_needs() -> None:
    """engine/core/files.py (hashlib with OpenSSL, tempfile) costs each connected client's bridge about 5 MiB, and
    the bridge writes nothing of the state directory."""
    assert _modules_the_bridge_loads() & {"engine.core.files", "hashlib", "_hashlib", "tempfile"} == set()


def _bridge(state: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine.cli", "--state-dir", str(state), "mcp", *args],
                          input=INITIALIZE, capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_no_engine_answers_initialize_with_the_cause_and_the_fix(tmp_path: Path) -> None:
    done = _bridge(tmp_path / "state", "--agent", "main", env={"KNOWLEDGE_TOKEN": "kt_x"})

    answer = json.loads(done.stdout)
    assert answer["id"] == 7 and answer["error"]["code"] == -32016
    assert answer["error"]["data"]["reason"] == "engine_unreachable"
    assert "no Knowledge engine is running" in answer["error"]["message"]
    assert "knowledge serve" in answer["error"]["message"]
    assert done.returncode == 1 and "knowledge serve" in done.stderr


def test_no_token_answers_initialize_naming_where_the_token_goes(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "KNOWLEDGE_TOKEN"}
    done = subprocess.run([sys.executable, "-m", "engine.cli", "--state-dir", str(tmp_path / "state"), "mcp",
                           "--agent", "main"], input=INITIALIZE, capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={**env, "PYTHONPATH": str(ROOT)})

    answer = json.loads(done.stdout)
    assert answer["error"]["data"]["reason"] == "denied"
    assert "--token-file" in answer["error"]["message"] and "main.token" in answer["error"]["message"]
    assert done.returncode == 2


def test_an_unreadable_token_file_is_named(tmp_path: Path) -> None:
    done = _bridge(tmp_path / "state", "--agent", "main", "--token-file", str(tmp_path / "missing.token"))

    error = json.loads(done.stdout)["error"]
    assert error["data"]["reason"] == "denied" and "missing.token" in error["message"]


def test_a_conversation_without_its_ids_is_refused_to_the_client(tmp_path: Path) -> None:
    done = _bridge(tmp_path / "state", "--agent", "main", "--audience", "conversation",
                   env={"KNOWLEDGE_TOKEN": "kt_x"})

    error = json.loads(done.stdout)["error"]
    assert error["data"]["reason"] == "invalid_params" and "--session-id" in error["message"]


def test_a_conversation_whose_session_id_is_no_uuid_is_refused_to_the_client(tmp_path: Path) -> None:
    done = _bridge(tmp_path / "state", "--agent", "main", "--audience", "conversation", "--session-key", "chat:1",
                   "--session-id", "chat-1", env={"KNOWLEDGE_TOKEN": "kt_x"})

    error = json.loads(done.stdout)["error"]
    assert error["data"]["reason"] == "invalid_params"
    assert error["message"].startswith("--session-id must be the conversation's UUID")
    assert "'chat-1'" in error["message"]
    assert "--session-id must be" in done.stderr


def test_the_official_client_shows_why_it_cannot_connect(tmp_path: Path) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.shared.exceptions import MCPError

    seen: dict[str, MCPError] = {}

    async def session() -> None:
        params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), args=[
            "-m", "engine.cli", "--state-dir", str(tmp_path / "state"), "mcp", "--agent", "main"],
            env={**os.environ, "PYTHONPATH": str(ROOT), "KNOWLEDGE_TOKEN": "kt_x"})
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as client:
                try:
                    await client.initialize()
                except MCPError as exc:
                    seen["error"] = exc

    anyio.run(session)
    assert seen["error"].code == -32016 and "knowledge serve" in str(seen["error"])


@pytest.mark.parametrize("missing", ["engine", "token"])
def test_a_client_left_to_choose_its_revision_hears_why_as_well(tmp_path: Path, missing: str) -> None:
    """The official client's first request is server/discover; it falls back to initialize on an error, and that
    one is answered with the cause too (the bridge answers every request until the client gives up)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.exceptions import MCPError

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if missing == "engine":
        env["KNOWLEDGE_TOKEN"] = "kt_x"
    seen: dict[str, MCPError] = {}

    async def session() -> None:
        params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=env, args=[
            "-m", "engine.cli", "--state-dir", str(tmp_path / "state"), "mcp", "--agent", "main"])
        try:
            async with Client(params):
                pass
        except* MCPError as group:  # raised out of the client's task groups
            error: BaseException = group
            while isinstance(error, BaseExceptionGroup):
                error = error.exceptions[0]
            seen["error"] = error

    anyio.run(session)
    reason = {"engine": "engine_unreachable", "token": "denied"}[missing]
    assert seen["error"].error.data["reason"] == reason
    assert ("knowledge serve" if missing == "engine" else "KNOWLEDGE_TOKEN") in str(seen["error"])
