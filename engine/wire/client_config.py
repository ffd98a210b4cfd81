"""`knowledge agents config NAME --client ...`: a copy-paste MCP client configuration for an agent.

Every client gets the same stdio bridge (`knowledge mcp`), with the agent's
name, a reference to its token file (never the token itself), the state
directory (so the bridge finds the running engine) and a stable, non-secret
instance id, which the engine records in the attribution of every revision
the agent writes, so one agent's saves and recalls do not split across
restarts. Only the wrapping differs:

    generic, claude   {"mcpServers": {"knowledge": {...}}}  (Claude Desktop, Claude Code .mcp.json, Cursor ...)
    codex             [mcp_servers.knowledge] in ~/.codex/config.toml
    openclaw          {"mcp": {"servers": {"knowledge": {...}}}} in ~/.openclaw/openclaw.json
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

from ..access.authority import INSTANCE_MAX
from ..core.errors import InvalidParams
from ..state.statedir import StateDir

CLIENTS = ("generic", "claude", "codex", "openclaw")
SERVER_NAME = "knowledge"
WHERE = {
    "generic": "the mcpServers object of your MCP client's configuration",
    "claude": "claude_desktop_config.json (Claude Desktop) or .mcp.json (Claude Code)",
    "codex": "~/.codex/config.toml",
    "openclaw": "~/.openclaw/openclaw.json (the mcp.servers object)",
}


def knowledge_command() -> str:
    """The `knowledge` executable to run: the one beside this interpreter first (the engine's own venv)."""
    beside = Path(sys.executable).with_name("knowledge")
    return str(beside) if beside.is_file() else shutil.which("knowledge") or "knowledge"


def default_instance(agent: str) -> str:
    """A stable instance id for this agent on this machine: ``<agent>-<hostname>``."""
    host = re.sub(r"[^A-Za-z0-9._-]+", "-", socket.gethostname()).strip("-") or "host"
    return f"{agent}-{host}"[:INSTANCE_MAX]


def bridge(state: StateDir, agent: str, instance: str) -> dict[str, Any]:
    """The stdio bridge as a client starts it: command and arguments."""
    if not instance.strip() or len(instance) > INSTANCE_MAX or "\n" in instance:
        raise InvalidParams(f"the instance id must be one line of 1-{INSTANCE_MAX} characters", field="--instance")
    return {"command": knowledge_command(), "args": [
        "mcp", "--agent", agent, "--token-file", str(state.tokens / f"{agent}.token"),
        "--instance", instance.strip(), "--state-dir", str(state.root)]}


def client_config(state: StateDir, agent: str, client: str, instance: str) -> str:
    """The text to paste into ``client``'s configuration."""
    server = bridge(state, agent, instance)
    if client in ("generic", "claude"):
        entry = {"type": "stdio", **server} if client == "claude" else server
        return json.dumps({"mcpServers": {SERVER_NAME: entry}}, indent=2, ensure_ascii=False)
    if client == "openclaw":
        return json.dumps({"mcp": {"servers": {SERVER_NAME: server}}}, indent=2, ensure_ascii=False)
    if client == "codex":
        # TOML basic strings take JSON's escapes.
        args = ", ".join(json.dumps(arg, ensure_ascii=False) for arg in server["args"])
        return (f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(server['command'], ensure_ascii=False)}\n"
                f"args = [{args}]")
    raise InvalidParams(f"client must be one of {', '.join(CLIENTS)}", field="--client")
