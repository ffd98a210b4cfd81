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
    cursor            the same, in ~/.cursor/mcp.json (or .cursor/mcp.json in a project)
    claude-code       `claude mcp add-json --scope user knowledge '{...}'`, a command line to run
    vscode            {"servers": {"knowledge": {"type": "stdio", ...}}} in .vscode/mcp.json
    codex             [mcp_servers.knowledge] in ~/.codex/config.toml
    openclaw          {"mcp": {"servers": {"knowledge": {...}}}} in ~/.openclaw/openclaw.json

``agent_setup`` is what `knowledge agents config` prints and the window's
"Connect an agent" shows (``operator/agentConfig``): the configuration, where
it goes, and for an agent without owner authority the conversation it gets
and the grant that would open its private partition.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

from ..access.authority import INSTANCE_MAX, SESSION_KEY_MAX
from ..core.answers import NotRequired, TypedDict
from ..core.errors import InvalidParams
from ..state.statedir import StateDir

# Session ids of the conversations that client configurations open (uuid5 names in this namespace).
SESSION_NAMESPACE = uuid.UUID("6f2b1a52-8f0e-5c5e-9d0a-4b6e6b0c1d7e")
CLIENTS = ("generic", "claude", "claude-code", "cursor", "vscode", "codex", "openclaw")
SERVER_NAME = "knowledge"
WHERE = {
    "generic": "the mcpServers object of your MCP client's configuration",
    "claude": "claude_desktop_config.json (Claude Desktop) or .mcp.json (Claude Code)",
    "claude-code": "a terminal: run it once and Claude Code has the server in every project",
    "cursor": "~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project)",
    "vscode": ".vscode/mcp.json in the workspace (or the user configuration's MCP: Open User Configuration)",
    "codex": "~/.codex/config.toml",
    "openclaw": "~/.openclaw/openclaw.json (the mcp.servers object)",
}


def knowledge_command() -> str:
    """The `knowledge` executable to run: the one beside this interpreter first (the engine's own venv)."""
    beside = Path(sys.executable).with_name("knowledge")
    return str(beside) if beside.is_file() else shutil.which("knowledge") or "knowledge"


def bridge_executable() -> str:
    """What a client launches for the stdio bridge: in the desktop bundle, its relay ``knowledge-mcp`` (the same
    command line, without the desktop's Qt in every client's process: packaging/relay_entry.py); else ``knowledge``."""
    relay = Path(sys.executable).with_name("knowledge-mcp")
    return str(relay) if getattr(sys, "frozen", False) and relay.is_file() else knowledge_command()


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


class BridgeCommand(TypedDict):
    """How a client starts the stdio bridge."""

    command: str
    args: list[str]


class AgentSetup(TypedDict):
    """Everything a client needs to connect an agent: ``config`` is the text to paste, ``audience`` the
    audience it gets (a conversation's, or ``{kind: owner-private}``)."""

    agent: str
    client: str
    owner: bool
    instance: str
    audience: dict[str, str]
    config: str
    where: str
    tokenFile: str
    tokenFileExists: bool
    grantCommand: NotRequired[str]


def bridge(state: StateDir, agent: str, instance: str, audience: dict[str, str] | None = None) -> BridgeCommand:
    """The stdio bridge as a client starts it: command and arguments (``audience``: a conversation's, for an
    agent without owner authority; none is the owner-private audience)."""
    if not instance.strip() or len(instance) > INSTANCE_MAX or "\n" in instance:
        raise InvalidParams(f"the instance id must be one line of 1-{INSTANCE_MAX} characters", field="--instance")
    conversation = ["--audience", "conversation", "--session-key", audience["sessionKey"],
                    "--session-id", audience["sessionId"]] if audience else []
    return {"command": bridge_executable(), "args": [
        "mcp", "--agent", agent, "--token-file", str(state.tokens / f"{agent}.token"),
        "--instance", instance.strip(), *conversation, "--state-dir", str(state.root)]}


def client_config(state: StateDir, agent: str, client: str, instance: str,
                  audience: dict[str, str] | None = None) -> str:
    """The text to paste into ``client``'s configuration."""
    server = bridge(state, agent, instance, audience)
    if client in ("generic", "claude", "cursor"):
        entry = {"type": "stdio", **server} if client == "claude" else server
        return json.dumps({"mcpServers": {SERVER_NAME: entry}}, indent=2, ensure_ascii=False)
    if client == "vscode":
        return json.dumps({"servers": {SERVER_NAME: {"type": "stdio", **server}}}, indent=2, ensure_ascii=False)
    if client == "claude-code":
        text = json.dumps({"type": "stdio", **server}, ensure_ascii=False)
        return f"claude mcp add-json --scope user {SERVER_NAME} {shlex.quote(text)}"
    if client == "openclaw":
        return json.dumps({"mcp": {"servers": {SERVER_NAME: server}}}, indent=2, ensure_ascii=False)
    if client == "codex":
        # TOML basic strings take JSON's escapes.
        args = ", ".join(json.dumps(arg, ensure_ascii=False) for arg in server["args"])
        return (f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(server['command'], ensure_ascii=False)}\n"
                f"args = [{args}]")
    raise InvalidParams(f"client must be one of {', '.join(CLIENTS)}", field="--client")


def agent_setup(state: StateDir, agent: dict[str, Any], client: str, instance: str | None = None,
                session_key: str | None = None) -> AgentSetup:
    """Everything a client needs to connect ``agent`` (a row of the inventory: ``name``, ``owner``).

    An agent with owner authority gets the owner-private audience, and a session key is refused for it;
    any other agent a conversation of its own (``conversation_audience``), keyed by ``session_key`` or the
    instance id, and the grant command that would put that conversation in its private partition.
    """
    name = agent["name"]
    if client not in CLIENTS:
        raise InvalidParams(f"client must be one of {', '.join(CLIENTS)}", field="client")
    instance = instance or default_instance(name)
    if agent.get("owner") and session_key:
        raise InvalidParams(f"a session key is for agents without owner authority; {name} uses the "
                            "owner-private audience", field="sessionKey")
    audience = None if agent.get("owner") else conversation_audience(name, session_key or instance)
    token_file = state.tokens / f"{name}.token"
    setup: AgentSetup = {
        "agent": name, "client": client, "owner": bool(agent.get("owner")), "instance": instance,
        "audience": audience or {"kind": "owner-private"},
        "config": client_config(state, name, client, instance, audience), "where": WHERE[client],
        "tokenFile": str(token_file), "tokenFileExists": token_file.is_file(),
    }
    if audience is not None:
        setup["grantCommand"] = (f"knowledge grants add {name} {shlex.quote(audience['sessionKey'])} "
                                 "--access read-and-save")
    return setup
