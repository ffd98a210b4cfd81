"""Real MCP clients through `knowledge mcp`: the official SDK's client left to choose (it settles on 2026-07-28)
and forced to each 2025 revision, fastmcp's client, and the MCP Inspector's CLI in each of its protocol eras."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import anyio
import pytest

from engine.wire.tools import CORE_TOOLS
from tests.helpers import wait_for
from tests.inspector import inspector_command

ROOT = Path(__file__).resolve().parents[3]
ALL_TOOLS = {tool.name for tool in CORE_TOOLS}
READ_TOOLS = {tool.name for tool in CORE_TOOLS if not tool.writes}


class Served:
    """An engine served by `knowledge serve` for a state directory, with an owner agent `main`."""

    def __init__(self, state: Path) -> None:
        self.state = state
        home = state.parent / "home"  # the clients' own files (the Inspector's catalog) stay in the test's folder
        home.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_DATA_HOME": str(home / ".local")}

    def knowledge(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "engine.cli", "--state-dir", str(self.state), *args],
                              check=True, env=self.env, capture_output=True, text=True, cwd=ROOT)

    @property
    def bridge(self) -> list[str]:
        return [sys.executable, "-m", "engine.cli", "--state-dir", str(self.state), "mcp", "--agent", "main"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = Served(tmp_path_factory.mktemp("clients") / "state")
    served.knowledge("agents", "add", "main", "--owner")
    engine = subprocess.Popen([sys.executable, "-m", "engine.cli", "--state-dir", str(served.state), "serve",
                               "--port", "0"], env=served.env, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (served.state / "engine.json").exists(), timeout=30)
        yield served
    finally:
        engine.terminate()
        engine.wait(30)
    assert engine.returncode == 0


def sdk_params(served: Served):
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=served.bridge[1:], env=served.env, cwd=str(ROOT))


def test_the_sdk_client_left_to_choose_settles_on_2026_and_calls_tools(served: Served) -> None:
    from mcp import Client
    from mcp.client.subscriptions import ToolsListChanged

    seen: dict[str, Any] = {}

    async def session() -> None:
        async with Client(sdk_params(served)) as client:
            seen["version"], seen["server"] = client.protocol_version, client.server_info
            seen["tools"] = {tool.name for tool in (await client.list_tools()).tools}
            seen["saved"] = await client.call_tool("knowledge_save_page", {
                "requestId": "modern-1", "type": "note", "title": "Harbour office", "body": "Opens at nine."})
            seen["found"] = await client.call_tool("knowledge_grep", {"query": "harbour"})
            async with client.listen(tools_list_changed=True) as stream:
                seen["honoured"] = stream.honored
                served.knowledge("settings", "writes", "off")
                try:
                    with anyio.fail_after(60):  # a hang guard: the event comes when the engine re-reads config
                        seen["event"] = await stream.__anext__()
                    seen["after"] = {tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools}
                finally:
                    served.knowledge("settings", "writes", "on")

    anyio.run(session)
    assert seen["version"] == "2026-07-28" and seen["server"].name == "knowledge-desk"
    assert seen["tools"] == ALL_TOOLS
    assert seen["saved"].is_error is False and seen["saved"].structured_content["revision"] == 1
    assert [hit["title"] for hit in seen["found"].structured_content["hits"]] == ["Harbour office"]
    assert seen["honoured"].tools_list_changed is True
    assert isinstance(seen["event"], ToolsListChanged) and seen["after"] == READ_TOOLS


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_the_sdk_client_forced_to_a_2025_revision_works(served: Served, version: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp import Client

    monkeypatch.setattr("mcp.client.session.LATEST_HANDSHAKE_VERSION", version)  # what its initialize offers
    seen: dict[str, Any] = {}

    async def session() -> None:
        async with Client(sdk_params(served), mode="legacy") as client:
            seen["version"] = client.protocol_version
            seen["tools"] = {tool.name for tool in (await client.list_tools()).tools}
            seen["found"] = await client.call_tool("knowledge_lookup", {"name": "nobody at all"})

    anyio.run(session)
    assert seen["version"] == version and seen["tools"] == ALL_TOOLS
    assert seen["found"].is_error is False and seen["found"].structured_content["matches"] == []


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_fastmcps_client_lists_and_calls_tools(served: Served, mode: str) -> None:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    seen: dict[str, Any] = {}

    async def session() -> None:
        transport = StdioTransport(command=served.bridge[0], args=served.bridge[1:], env=served.env, cwd=str(ROOT))
        async with Client(transport, mode=mode) as client:
            seen["version"] = client.protocol_version
            seen["tools"] = {tool.name for tool in await client.list_tools()}
            seen["found"] = await client.call_tool("knowledge_grep", {"query": "nothing matches this"})

    anyio.run(session)
    assert seen["version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert seen["tools"] == ALL_TOOLS
    assert seen["found"].is_error is False and seen["found"].structured_content["hits"] == []


@pytest.mark.parametrize("era", ["legacy", "auto", "modern"])
def test_the_inspector_cli_lists_and_calls_tools(served: Served, era: str) -> None:
    def inspect(*args: str, exit_code: int = 0) -> dict[str, Any]:
        done = subprocess.run([*inspector_command(), "--cli", *served.bridge, "--protocol-era", era, "--format",
                               "json", *args], capture_output=True, text=True, env=served.env, timeout=120)
        assert done.returncode == exit_code, (done.stdout, done.stderr)
        return json.loads(done.stdout)["result"]

    listed = inspect("--method", "tools/list")
    assert {tool["name"] for tool in listed["tools"]} == ALL_TOOLS
    found = inspect("--method", "tools/call", "--tool-name", "knowledge_grep", "--tool-arg", "query=nothing")
    assert found["isError"] is False and found["structuredContent"]["hits"] == []
    # An error is shown as the error: the Inspector holds the structured content of error results to the
    # tool's outputSchema too, and printed a schema mismatch while errors carried theirs.
    missing = inspect("--method", "tools/call", "--tool-name", "knowledge_record", "--tool-arg", "id=pg_nosuch",
                      exit_code=5)  # the CLI's exit for a tool that answered isError
    assert missing["isError"] is True and json.loads(missing["content"][0]["text"])["reason"] == "not_found"
