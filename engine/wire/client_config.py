"""`knowledge agents config NAME --client ...`: a copy-paste MCP client configuration for an agent.

Every client gets the same stdio bridge (`knowledge mcp`), with the agent's
name, a reference to its token file (never the token itself), the state
directory (so the bridge finds the running engine) and a stable, non-secret
instance id, which the engine records in the attribution of every revision
the agent writes, so one agent's saves and recalls do not split across
restarts.  An agent without owner authority gets a conversation audience
(``conversation_audience``), since the owner-private one would deny its every
call.  Only the wrapping differs:

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
import uuid
from pathlib import Path
from typing import Any

from ..access.authority import INSTANCE_MAX, SESSION_KEY_MAX
from ..core.errors import InvalidParams
from ..state.statedir import StateDir

# Session ids of the conversations that client configurations open (uuid5 names in this namespace).
SESSION_NAMESPACE = uuid.UUID("6f2b1a52-8f0e-5c5e-9d0a-4b6e6b0c1d7e")
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


def conversation_audience(agent: str, session_key: str) -> dict[str, str]:
    """The conversation audience a configuration gives an agent without owner authority.

    A client configuration is written once, so its conversation is one long-lived partition: the session
    id is derived from the agent and the session key, and the same configuration printed again reaches
    the same conversation.  It is the agent's own (the engine binds a conversation to the agent and
    session key that first use it), and a grant on the session key opens the private partition to it.
    """
    if not session_key.strip() or len(session_key) > SESSION_KEY_MAX or not session_key.isprintable():
        raise InvalidParams(f"the session key must be one line of 1-{SESSION_KEY_MAX} characters",
                            field="--session-key")
    session_id = uuid.uuid5(SESSION_NAMESPACE, f"{agent}\n{session_key}")
    return {"kind": "conversation", "sessionKey": session_key, "sessionId": str(session_id)}


def bridge(state: StateDir, agent: str, instance: str, audience: dict[str, str] | None = None) -> dict[str, Any]:
    """The stdio bridge as a client starts it: command and arguments (``audience``: a conversation's, for an
    agent without owner authority; none is the owner-private audience)."""
    if not instance.strip() or len(instance) > INSTANCE_MAX or "\n" in instance:
        raise InvalidParams(f"the instance id must be one line of 1-{INSTANCE_MAX} characters", field="--instance")
    conversation = ["--audience", "conversation", "--session-key", audience["sessionKey"],
                    "--session-id", audience["sessionId"]] if audience else []
    return {"command": knowledge_command(), "args": [
        "mcp", "--agent", agent, "--token-file", str(state.tokens / f"{agent}.token"),
        "--instance", instance.strip(), *conversation, "--state-dir", str(state.root)]}


def client_config(state: StateDir, agent: str, client: str, instance: str,
                  audience: dict[str, str] | None = None) -> str:
    """The text to paste into ``client``'s configuration."""
    server = bridge(state, agent, instance, audience)
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
