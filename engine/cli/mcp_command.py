"""``knowledge mcp``: the stdio bridge an MCP client launches, started without the rest of the command line.

An MCP client starts the bridge and sends ``initialize`` at once; some give up after five seconds.  So this
module imports only the relay (``engine/wire/bridge.py``), the state directory and argparse: ``main`` in
``engine/cli/__init__.py`` sends ``knowledge mcp ...`` here before the other commands (and the engine,
gate and models they import) are loaded.  When the session cannot start (no token, no engine, a
conversation audience without its ids), the client's requests are answered with the cause and the fix
as a JSON-RPC error, as well as on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from typing import Any

from ..state.statedir import StateDir
from ..wire.bridge import BridgeError, refuse_client, run_bridge

STATE_HELP = "state directory (default: $KNOWLEDGE_STATE_DIR or the user data dir)"


def state_dir_parsers() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The parent parsers every command line shares: ``--state-dir`` before the subcommand, and after it
    (without overwriting one given before)."""
    root = argparse.ArgumentParser(add_help=False)
    root.add_argument("--state-dir", help=STATE_HELP)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", help=STATE_HELP, default=argparse.SUPPRESS)
    return root, common


def add_mcp_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    mcp = commands.add_parser("mcp", parents=[common], help="stdio MCP bridge to the running engine")
    mcp.add_argument("--agent", required=True, help="the agent to connect as")
    mcp.add_argument("--token-file", help="file holding the agent's token (default: the state dir's tokens/)")
    mcp.add_argument("--audience", choices=("owner-private", "conversation"), default="owner-private",
                     help="the owner's private partition, or a conversation's own (default: owner-private)")
    mcp.add_argument("--session-key", help="with --audience conversation: the conversation's session key, "
                                           "which grants name")
    mcp.add_argument("--session-id", help="with --audience conversation: the conversation's session id "
                                          "(both are needed)")
    mcp.add_argument("--instance", help="a stable, non-secret id of this agent instance")
    mcp.set_defaults(handler=cmd_mcp)


def main(argv: list[str]) -> int:
    """``knowledge [--state-dir DIR] mcp ...`` alone."""
    root, common = state_dir_parsers()
    parser = argparse.ArgumentParser(prog="knowledge", parents=[root])
    add_mcp_parser(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"), common)
    args = parser.parse_args(argv)
    return cmd_mcp(args, StateDir.resolve(args.state_dir))


def cmd_mcp(args: argparse.Namespace, state: StateDir) -> int:
    try:
        knowledge = session_knowledge(args, state)
    except BridgeError as exc:  # nothing to start a session with: the client hears why, then the bridge exits
        print(f"knowledge mcp: {exc}", file=sys.stderr)
        refuse_client(exc, sys.stdin.buffer, sys.stdout.buffer)
        return 2
    try:
        status = run_bridge(state, knowledge)
    except BridgeError as exc:
        print(f"knowledge mcp: {exc}", file=sys.stderr)
        return 1
    # When the engine went away first, the bridge's reader thread is still blocked on the client's stdin,
    # holding its lock, and a normal interpreter exit would wait for that lock and abort (SIGABRT, "Fatal
    # Python error"). Every answer is written and flushed; nothing else is left to clean up.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def session_knowledge(args: argparse.Namespace, state: StateDir) -> dict[str, Any]:
    """What the bridge adds to the client's ``initialize``: the token, the audience, the instance id."""
    if args.audience == "conversation":
        if not args.session_key or not args.session_id:
            raise BridgeError("a conversation audience needs --session-key and --session-id: add both to the "
                              "command in the client's configuration", reason="invalid_params")
        if not _is_uuid(args.session_id):  # else the session would start, and refuse every call
            raise BridgeError(f"--session-id must be the conversation's UUID (such as {EXAMPLE_SESSION_ID}), not "
                              f"{args.session_id!r}: fix it in the command in the client's configuration",
                              reason="invalid_params")
        audience: dict[str, Any] = {"kind": "conversation", "sessionKey": args.session_key,
                                    "sessionId": args.session_id}
    else:
        audience = {"kind": "owner-private"}
    knowledge: dict[str, Any] = {"token": read_token(args, state), "audience": audience}
    if args.instance:
        knowledge["instance"] = args.instance
    return knowledge


EXAMPLE_SESSION_ID = "0b6a6c55-3f6c-4f54-9a8e-0b1c2d3e4f50"


def _is_uuid(value: str) -> bool:
    """Whether ``value`` is a UUID the engine takes as a session id (engine.core.ids.canonical_session_id, not
    imported: the bridge loads only what relaying needs)."""
    if len(value) != 36:
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def read_token(args: argparse.Namespace, state: StateDir) -> str:
    """The agent's token: ``--token-file``, else ``KNOWLEDGE_TOKEN``, else the state directory's token file."""
    if args.token_file:
        return _token_in(args.token_file, "the token file given with --token-file")
    if os.environ.get("KNOWLEDGE_TOKEN"):
        return os.environ["KNOWLEDGE_TOKEN"].strip()
    default = state.tokens / f"{args.agent}.token"
    if not default.exists():
        raise BridgeError(f"no token for agent {args.agent!r}: pass --token-file, set KNOWLEDGE_TOKEN, or keep it "
                          f"in {default} (`knowledge agents add {args.agent}` writes it there)", reason="denied")
    return _token_in(default, "the agent's token file")


def _token_in(path: str | os.PathLike[str], what: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        problem = getattr(exc, "strerror", None) or exc
        raise BridgeError(f"cannot read {what}, {path}: {problem}; check the path in the client's "
                          "configuration and that this account may read it", reason="denied") from exc
    if not token:
        raise BridgeError(f"{what}, {path}, is empty: `knowledge agents add` prints a token and writes it there",
                          reason="denied")
    return token
