"""`knowledge agents config NAME --client ...`: copy-paste MCP client configurations."""

from __future__ import annotations

import json
import shlex
import tomllib

import pytest

from engine.cli.commands import main

CLIENTS = {
    "generic": lambda text: json.loads(text)["mcpServers"]["knowledge"],
    "claude": lambda text: json.loads(text)["mcpServers"]["knowledge"],
    "claude-code": lambda text: json.loads(_claude_mcp_add(text)),
    "cursor": lambda text: json.loads(text)["mcpServers"]["knowledge"],
    "vscode": lambda text: json.loads(text)["servers"]["knowledge"],
    "codex": lambda text: tomllib.loads(text)["mcp_servers"]["knowledge"],
    "openclaw": lambda text: json.loads(text)["mcp"]["servers"]["knowledge"],
}


def _claude_mcp_add(text: str) -> str:
    """The server's JSON from `claude mcp add-json --scope user knowledge '<json>'`, as a shell splits it."""
    words = shlex.split(text)
    assert words[:5] == ["claude", "mcp", "add-json", "--scope", "user"] and words[5] == "knowledge"
    return words[6]


@pytest.mark.parametrize("client", list(CLIENTS))
def test_each_client_gets_the_stdio_bridge_with_token_file_and_instance(tmp_path, capsys, client):
    state = tmp_path / "state"
    assert main(["--state-dir", str(state), "agents", "add", "claude", "--owner", "--json"]) == 0
    token = json.loads(capsys.readouterr().out)["token"]
    assert main(["--state-dir", str(state), "agents", "config", "claude", "--client", client,
                 "--instance", "laptop-claude"]) == 0
    captured = capsys.readouterr()
    server = CLIENTS[client](captured.out)
    assert server["command"].endswith("knowledge")
    assert server["args"] == ["mcp", "--agent", "claude", "--token-file", str(state / "tokens" / "claude.token"),
                              "--instance", "laptop-claude", "--state-dir", str(state)]
    assert token not in captured.out and token not in captured.err  # a reference to the file, never the token
    assert (client in ("claude", "claude-code", "vscode")) == (server.get("type") == "stdio")
    assert "laptop-claude" in captured.err and "Paste it into" in captured.err


def test_the_default_instance_id_is_stable_and_an_unknown_agent_is_refused(tmp_path, capsys):
    state = str(tmp_path / "state")
    main(["--state-dir", state, "agents", "add", "codex"])
    capsys.readouterr()
    outputs = []
    for _ in range(2):
        assert main(["--state-dir", state, "agents", "config", "codex", "--client", "codex"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    args = tomllib.loads(outputs[0])["mcp_servers"]["knowledge"]["args"]
    assert args[args.index("--instance") + 1].startswith("codex-")
    assert main(["--state-dir", state, "agents", "config", "nobody"]) == 2
    assert "no agent named 'nobody'" in capsys.readouterr().err


def test_a_bundle_names_its_relay_executable_with_the_same_command_line(tmp_path, monkeypatch) -> None:
    from engine.operator import client_config
    from engine.state.statedir import StateDir

    bundle = tmp_path / "knowledge-desk"
    bundle.mkdir()
    (bundle / "knowledge").write_text("")
    monkeypatch.setattr("sys.executable", str(bundle / "knowledge"))
    monkeypatch.setattr("sys.frozen", True, raising=False)
    state = StateDir.resolve(str(tmp_path / "state"))

    without_relay = client_config.bridge(state, "main", "laptop")
    (bundle / "knowledge-mcp").write_text("")
    with_relay = client_config.bridge(state, "main", "laptop")

    assert without_relay["command"] == str(bundle / "knowledge")
    assert with_relay["command"] == str(bundle / "knowledge-mcp")
    assert with_relay["args"] == without_relay["args"] and with_relay["args"][:3] == ["mcp", "--agent", "main"]


def test_outside_a_bundle_the_bridge_is_the_knowledge_command(tmp_path, monkeypatch) -> None:
    from engine.operator import client_config
    from engine.state.statedir import StateDir

    (tmp_path / "knowledge-mcp").write_text("")
    (tmp_path / "knowledge").write_text("")
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    state = StateDir.resolve(str(tmp_path / "state"))

    assert client_config.bridge(state, "main", "laptop")["command"] == str(tmp_path / "knowledge")
