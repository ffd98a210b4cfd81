"""The ``knowledge`` command line.

Every subcommand takes ``--state-dir`` (or ``KNOWLEDGE_STATE_DIR``).
Beside a running engine every command works: agents, grants, stores,
settings, search, doctor, reindex and sync remotes ask the serving engine as the
operator (``desk.py``), and so does export; models only touch files the engine re-reads.  Only the
commands that must own the state directory to write its stores as a whole
(serve, demo, import) refuse there, saying what to do.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import signal
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from ..operator import client_config
from .import_commands import INTERRUPTED, add_import_parsers
from .bench_commands import add_bench_parser
from .mcp_command import add_mcp_parser, state_dir_parsers
from .plugged import plugged_commands
from .model_commands import add_models_parser
from .sync_commands import add_sync_parser
from .gate_commands import add_gate_parser
from models.catalogue import DEFAULT_EMBEDDING_MODEL
from ..importers.demo import DEMO_DECISION_MODEL, seed_demo
from ..core.db import sqlite_errno
from ..core.errors import EngineLocked, KnowledgeError
from ..core.ids import format_timestamp, utc_now
from ..core.words import for_count
from ..core.malloc import limit_arenas
from ..importers import methods as import_methods
from ..importers.summaries import export_summary
from ..importers.archive import ArchiveReader, restore_archive
from ..importers.locomo import DEFAULT_AGENT, import_locomo, load_locomo, owner_caller
from ..state.registry import GRANT_ACCESS, SCOPES
from ..wire.server import DEFAULT_PORT, EngineServer
from ..wire.http import DEFAULT_HOST as HTTP_DEFAULT_HOST, LOOPBACK_NAMES, HttpServer
from ..service import Engine
from ..state.statedir import StateDir
from ..wire.operator_client import UNREACHABLE, OperatorError
from .desk import LocalDesk, holds_nothing, open_desk

log = logging.getLogger(__name__)


def _print(data: Any, as_json: bool, text: Callable[[Any], str]) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False) if as_json else text(data))


def write_token_file(state: StateDir, agent: str, token: str) -> str:
    """Keep an agent's token in a file only the owner can read; returns its path."""
    return str(state.write_agent_token(agent, token))


# --- agents, grants, stores, settings: asked of the desk (the serving engine, or this process) ---------


def cmd_agents_add(args: argparse.Namespace, state: StateDir) -> int:
    scopes = tuple(s.strip() for s in args.scopes.split(",")) if args.scopes is not None else SCOPES
    with open_desk(state) as desk:
        data = desk.add_agent(args.name, args.owner, scopes)
    _print(data, args.json, lambda d: (
        f"Registered agent {d['agent']}{' with owner authority' if args.owner else ''}.\n"
        f"Token (shown once): {d['token']}\nAlso saved to {d['tokenFile']} (readable by you only)."
    ))
    return 0


def cmd_agents_list(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        agents = desk.agents()

    def text(rows: list[dict[str, Any]]) -> str:
        if not rows:
            return "No agents yet. Add one with: knowledge agents add NAME [--owner]"
        lines = []
        for row in rows:
            store = row["store"]
            where = store.get("name") or store.get("storeId") or "(created on first use)"
            lines.append(f"{row['name']:<20} {'owner' if row['owner'] else 'agent':<6} {store['status']:<12} {where}"
                         + (f"  ({store['reason']})" if store.get("reason") else ""))
        return "\n".join(lines)

    _print(agents, args.json, text)
    return 0


def cmd_agents_remove(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        desk.remove_agent(args.name)
    print(f"Removed agent {args.name}; its store is kept.")
    return 0


def cmd_agents_config(args: argparse.Namespace, state: StateDir) -> int:
    """Print a copy-paste MCP client configuration (stdout) and where it goes (stderr).

    An agent with owner authority gets the owner-private audience; any other agent a conversation audience
    of its own (client_config.conversation_audience), with the grant that opens its private partition named."""
    with open_desk(state) as desk:
        agent = next((row for row in desk.agents() if row["name"] == args.name), None)
    if agent is None:
        print(f"knowledge: no agent named {args.name!r}; add it with: knowledge agents add {args.name}",
              file=sys.stderr)
        return 2
    if agent["owner"] and args.session_key:
        print("knowledge: --session-key is for agents without owner authority; "
              f"{args.name} uses the owner-private audience", file=sys.stderr)
        return 2
    setup = client_config.agent_setup(state, agent, args.client, args.instance, args.session_key)
    print(setup["config"])
    print(f"Paste it into {setup['where']}. The token stays in {setup['tokenFile']}"
          + ("" if setup["tokenFileExists"] else " (missing: it is written by `knowledge agents add`)")
          + f"; the engine must be running (knowledge serve). Instance id: {setup['instance']}.", file=sys.stderr)
    if "grantCommand" in setup:
        key = setup["audience"]["sessionKey"]
        print(f"{args.name} has no owner authority, so this configuration gives it a conversation of its own "
              f"(session key {key}): what it saves stays in that conversation. To have it work "
              f"in its store's private knowledge instead, run: {setup['grantCommand']} "
              "(or --access read: it reads that knowledge and saves nothing).",
              file=sys.stderr)
    return 0


def cmd_grants(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        if args.grants_command == "add":
            grant = desk.set_grant(args.agent, args.session_key, args.access)
            print(f"Conversation {grant['sessionKey']!r} of {grant['agent']} may now {grant['access']} "
                  "the private partition.")
        elif args.grants_command == "remove":
            desk.remove_grant(args.agent, args.session_key)
            print("Grant removed; it takes effect on the conversation's next request.")
        else:
            grants = desk.grants(args.agent)
            _print(grants, args.json, lambda rows: "\n".join(
                f"{g['agent']:<20} {g['access']:<14} {g['sessionKey']}" for g in rows) or "No grants.")
    return 0


def cmd_stores_list(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        stores = desk.stores()

    def text(rows: list[dict[str, Any]]) -> str:
        if not rows:
            return "No stores yet; each agent's store is created on its first use."
        lines = []
        for row in rows:
            name = row.get("name") or f"isolated store of {row.get('owner') or '(nobody)'}"
            assigned = "" if row.get("assigned") else "  [unassigned]"
            members = ", ".join(row.get("agents") or []) or "-"
            reason = f"  ({row['reason']})" if row.get("reason") and row["status"] != "ok" else ""
            lines.append(f"{row.get('storeId') or '-':<30} {name:<28} {row['status']:<12} members: {members}"
                         f"{assigned}{reason}")
        return "\n".join(lines)

    _print(stores, args.json, text)
    return 0


def cmd_settings(args: argparse.Namespace, state: StateDir) -> int:
    """Show the owner's switches, or turn search_knowledge on or off (the engine re-reads config.json)."""
    with open_desk(state) as desk:
        if args.settings_command == "search-knowledge":
            settings = desk.set_settings(knowledgeRuntimeEnabled=args.switch == "on")
        elif args.settings_command == "writes":
            settings = desk.set_settings(writesEnabled=args.switch == "on")
        elif args.settings_command == "workspace-roots":  # absolute here: the engine's working directory differs
            settings = desk.set_settings(workspaceRoots=[os.path.abspath(root) for root in args.roots])
        else:
            settings = desk.settings()
    _print(settings, args.json, _settings_text)
    return 0


def _settings_text(settings: dict[str, Any]) -> str:
    lines = [f"search-knowledge  {'on' if settings['knowledgeRuntimeEnabled'] else 'off'}  "
             "(the search_knowledge tool; knowledge settings search-knowledge on|off)",
             f"writes            {'on' if settings['writesEnabled'] else 'off'}  (writesEnabled in config.json; "
             "knowledge settings writes on|off)",
             f"workspace roots   {', '.join(settings.get('workspaceRoots') or []) or 'none'}  (where "
             "knowledge_attach_file may read; knowledge settings workspace-roots [DIR ...])"]
    if settings.get("problem"):
        lines.append(f"config.json: {settings['problem']} (the last valid settings stay in force)")
    return "\n".join(lines)


# --- engine commands --------------------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        report = desk.doctor()
    problems = report.pop("problems")
    _print(report, args.json, _doctor_text)
    return 1 if problems else 0


def _doctor_text(report: dict[str, Any]) -> str:
    lines = []
    if report.get("config"):
        lines.append(f"config.json: {report['config']} (the last valid settings stay in force)")
    for store in report["stores"]:
        if store["status"] == "unavailable":
            lines.append(f"store {store['storeId']}: unavailable: {store['reason']}")
    for entry in report["agents"]:
        if "error" in entry:
            lines.append(f"{entry['agent']}: {entry['error']['message']}")
        diagnostics = entry.get("diagnostics")
        if diagnostics is None:
            continue
        for finding in diagnostics["findings"]:
            where = finding.get("path", "")
            if finding.get("line"):
                where += f":{finding['line']}"
            lines.append(f"{entry['agent']}: {finding.get('severity', 'error')}: {where}: {finding['message']}")
        if diagnostics["truncated"]:
            lines.append(f"{entry['agent']}: ... {diagnostics['total'] - len(diagnostics['findings'])} more")
        lines.append(f"{entry['agent']}: git {diagnostics['git']['state']}")
    lines += _doctor_sync_lines(report.get("sync") or {})
    return "\n".join(lines) or "No problems found."


def _doctor_sync_lines(sync: dict[str, Any]) -> list[str]:
    """The stores' sync as doctor reports it: failing remotes, unreadable sync state, conflicts waiting."""
    def store(entry: dict[str, Any]) -> str:
        return f"store {entry['name']} ({entry['storeId']})" if entry.get("name") else f"store {entry['storeId']}"

    lines = []
    for failing in sync.get("failing", []):
        error = failing["lastError"] or {"code": "unknown", "message": "no reason recorded", "at": "?"}
        since = (f"failing since its last success at {failing['lastSuccess']}" if failing["lastSuccess"]
                 else "failing, and no round with it has worked yet")
        lines.append(f"{store(failing)}: sync with remote {failing['remote']} ({failing['url']}) {since}: "
                     f"{error['message']} ({error['code']}, {error['at']})")
    for unreadable in sync.get("unreadable", []):
        lines.append(f"{store(unreadable)}: sync state cannot be read: {unreadable['problem']}"
                     if unreadable["storeId"] else unreadable["problem"])
    for waiting in sync.get("conflicts", []):
        count = waiting["waiting"]
        lines.append(f"{store(waiting)}: {count} {for_count(count, 'sync conflict', 'sync conflicts')} waiting for "
                     "your look (knowledge sync status; the window's Sync section)")
    return lines


def cmd_reindex(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        rebuilt = desk.reindex()
    _print(rebuilt, args.json, lambda rows: "\n".join(
        f"{row['storeId']} {row['partition']}: {row['records']} records indexed"
        + (f", {row['vectors']['indexed']} vectors ({row['vectors']['embedded']} texts embedded, "
           f"{row['vectors']['cached']} from the cache)" if "vectors" in row else "") for row in rows)
        or "No stores to index.")
    return 0


def cmd_search(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        result = desk.search(args.agent, args.query, args.limit, args.mode, args.links)
        here = isinstance(desk, LocalDesk)
    bold = sys.stdout.isatty() and not os.environ.get("NO_COLOR")  # the query's words in bold on a terminal
    _print(result, args.json, lambda r: "\n".join([_mode_line(r, here), *(_hit_lines(hit, bold) for hit in r["hits"])])
           if r["hits"] else f"{_mode_line(r, here)}\nNo matches.")
    return 0


def _mode_line(result: dict[str, Any], here: bool = False) -> str:
    """Which ranking answered: ``hybrid search`` (saying so while vectors are still being built), or ``keyword
    search`` with why hybrid was not possible when it was asked for.  ``here``: the search ran in this
    process's engine, whose embedding stops when the command ends, so the notes left are embedded by
    ``knowledge reindex`` (or an engine that serves), not "still"."""
    if result["mode"] == "hybrid":
        if result.get("vectors") != "building":
            return "hybrid search (keyword + embedding model)"
        if here:
            return ("hybrid search (keyword + embedding model; some notes are not embedded yet and are found by "
                    "their words only: knowledge reindex embeds them)")
        return "hybrid search (keyword + embedding model; some notes are still being embedded)"
    why = result.get("hybridUnavailable")
    return f"keyword search ({why})" if why else "keyword search"


def _hit_lines(hit: dict[str, Any], bold: bool = False) -> str:
    """A search hit for the terminal: score, kind and title, then its snippet on one indented line (a hit
    without one, a relationship say, is its first line alone), with its ``highlights`` in bold if ``bold``."""
    first = f"{hit['score']:.3f}  {hit['kind']:<12} {hit['title']}"
    snippet = str(hit.get("snippet") or "")
    if bold:
        for start, end in sorted(hit.get("highlights") or [], reverse=True):  # the spans index the plain text
            snippet = f"{snippet[:start]}\033[1m{snippet[start:end]}\033[0m{snippet[end:]}"
    snippet = " ".join(snippet.split())
    return f"{first}\n       {snippet}" if snippet else first


def refuse_beside_engine(state: StateDir, command: str) -> int | None:
    """Exit code 3, with what to do, when an engine serves ``state``: ``command`` writes its stores as their
    only owner, which only a stopped engine allows."""
    info = state.serving_engine()
    if info is None:
        return None
    pid = info.get("pid")
    print(f"knowledge: the Knowledge engine (pid {pid}, port {info.get('port')}) serves {state.root}, and "
          f"`knowledge {command}` needs the state directory to itself. Stop the engine first (Ctrl+C where "
          f"`knowledge serve` runs, Ctrl+Shift+Q in the window that started it, or: kill {pid}), run the command, "
          "then start it again; or run it on another state directory with --state-dir DIR.", file=sys.stderr)
    return 3


def cmd_demo(args: argparse.Namespace, state: StateDir) -> int:
    with Engine(state, watch=False) as engine:
        result = seed_demo(engine)
    _report_demo(state, result)
    return 0


def _report_demo(state: StateDir, result: dict[str, Any]) -> None:
    if result["token"]:
        path = write_token_file(state, result["agent"], result["token"])
        print(f"Registered owner agent {result['agent']}; its token is in {path}.")
    print(f"Demo store ready: {result['records']} records for agent {result['agent']} in {state.root}.")
    if result.get("gate"):
        print(f"Recall gate: decisionModel {result['gate']}" + (
            ", shadow mode: nothing is injected; every turn is logged for tuning in the Recall gate view."
            if result["gate"] == DEMO_DECISION_MODEL else "."))
    else:
        print(f"Recall gate: off (no Decision model); `knowledge models pull {DEFAULT_EMBEDDING_MODEL}` and run "
              "the demo again to get it in shadow mode.")


def cmd_import_locomo(args: argparse.Namespace, state: StateDir) -> int:
    data = load_locomo(args.file)  # a malformed file stops here, before any agent or store exists
    result: dict[str, Any] = {"agent": args.agent}
    with Engine(state, watch=False) as engine, owner_caller(engine, args.agent) as (caller, created_token):
        if created_token:
            result["tokenFile"] = write_token_file(state, args.agent, created_token)
        result.update(import_locomo(engine, caller, data))
    _print(result, args.json, lambda d: (
        (f"Registered owner agent {d['agent']}; its token is in {d['tokenFile']}.\n" if "tokenFile" in d else "")
        + f"Imported LoCoMo into {d['agent']}'s store: {d['samples']} samples, {d['people']} people, "
          f"{d['sessions']} sessions, {d['claims']} claims."
    ))
    return 0


def cmd_export(args: argparse.Namespace, state: StateDir) -> int:
    if not state.registry.is_file():
        print(f"knowledge export: no state directory at {state.root}; nothing was written", file=sys.stderr)
        return 2
    with open_desk(state) as desk:
        result = desk.export(Path(args.out).absolute(), args.store, args.agent, args.with_history)
    _print(result, args.json, export_summary)
    return 0


def cmd_import_archive(args: argparse.Namespace, state: StateDir) -> int:
    if (info := state.serving_engine()) is not None:
        # A restore builds a store in a state directory of its own making: it stays in this process, and a
        # directory an engine serves is not one to restore into.
        print(f"knowledge import archive: the Knowledge engine (pid {info.get('pid')}) serves {state.root}; an "
              "archive is restored into a state directory no engine serves: pass another one with --state-dir "
              f"DIR (a new one is made), or stop the engine first (kill {info.get('pid')}) and restore into "
              "this one. Nothing was written.", file=sys.stderr)
        return 3
    # The archive is checked whole here, before the state directory is opened or anything is written.
    with ArchiveReader(Path(args.archive).absolute()) as reader, Engine(state, watch=False) as engine:
        result = restore_archive(engine, reader, agent=args.agent, store_name=args.store)
    def text(d: dict[str, Any]) -> str:
        where = f"named store {d['name']}" if d["kind"] == "named" else f"{d['agent']}'s own store"
        # An archive carries no access: the agent an isolated store is for is registered on this machine.
        access = ("" if d.get("agentRegistered", True) else
                  f"\nNo agent named {d['agent']} is registered here (an archive carries no tokens): `knowledge "
                  f"agents add {d['agent']} --owner` gives the owner's agent a token (without --owner, another "
                  "agent's).")
        if not d["created"]:
            return (f"Store {d['storeId']} ({where}) is already restored from this archive; nothing was created."
                    + access)
        history = d["history"].get("note") or f"restored ({d['history']['kind']})"
        return (f"Restored store {d['storeId']} as {where}: {d['files']} vault files, {d['records']} current "
                f"records, {d['revisions']} kept revisions.\nHistory: {history}." + access)
    _print(result, args.json, text)
    return 0


def cmd_serve(args: argparse.Namespace, state: StateDir) -> int:
    if args.host is not None and args.http is None:
        print("knowledge: --host is where --http listens: pass --http PORT too", file=sys.stderr)
        return 2
    if (info := state.serving_engine()) is not None:
        print(f"knowledge: a Knowledge engine (pid {info.get('pid')}, port {info.get('port')}) already serves "
              f"{state.root}; agents, the window and every knowledge command use it. To serve another state "
              "directory, pass --state-dir DIR.", file=sys.stderr)
        return 3
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    limit_arenas()  # before the engine's threads: its memory otherwise follows their number
    engine = Engine(state)
    engine.decision.start()   # the configured Decision model loads in the background
    stop = threading.Event()
    server = EngineServer(engine, port=args.port, socket_path=state.root / "engine.sock")
    import_methods.register(server.dispatcher, engine)  # export (and imports) beside the engine
    # MCP's Streamable HTTP, when asked for: the same dispatcher, so the same methods and checks
    http = HttpServer(server.dispatcher, host=args.host or HTTP_DEFAULT_HOST, port=args.http) \
        if args.http is not None else None
    try:
        if args.demo:
            _report_demo(state, seed_demo(engine))
        try:
            server.start()
        except OSError as exc:
            taken = (" (another program uses it, perhaps an engine serving another state directory); pass "
                     "--port N, or --port 0 for a free one" if exc.errno == errno.EADDRINUSE else "")
            print(f"knowledge: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}{taken}",
                  file=sys.stderr)
            return 4
        if http is not None and not _start_http(http):
            return 4
        state.write_engine_info({"pid": os.getpid(), **server.info(), "started_at": format_timestamp(utc_now()),
                                 "version": __version__, **({"http": http.info()} if http else {})})
        engine.start_sync()  # each store with remotes syncs by itself while serving (docs/sync.md)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        where = f"127.0.0.1:{server.port}" + (f" and {server.socket_path}" if server.socket_path else "")
        where += f", MCP over HTTP at {http.url}" if http is not None else ""
        print(f"Knowledge engine for {state.root} listening on {where} (pid {os.getpid()}); Ctrl+C stops it.",
              flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        state.remove_engine_info()
        engine.stop_work()  # a reindex it is answering ends at its next step: stopping waits for its requests
        if http is not None:
            http.stop()
        server.stop()
        engine.close()
    return 0


def _port(value: str) -> int:
    if not value.isdigit() or int(value) > 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port (0 to 65535)")
    return int(value)


def _start_http(http: HttpServer) -> bool:
    """Start the HTTP transport, or say why it cannot listen."""
    try:
        http.start()
    except OSError as exc:
        taken = "; pass another --http PORT, or --http 0 for a free one" if exc.errno == errno.EADDRINUSE else ""
        print(f"knowledge: cannot listen for HTTP on {http.host}:{http.requested_port}: {exc.strerror or exc}{taken}",
              file=sys.stderr)
        return False
    if http.host not in LOOPBACK_NAMES:
        print(f"knowledge: warning: MCP over HTTP listens on {http.host}, beyond this machine, without TLS: "
              "agents' tokens cross the network in the clear", file=sys.stderr)
    return True


# --- parser -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    root, common = state_dir_parsers()
    parser = argparse.ArgumentParser(prog="knowledge", parents=[root],
                                     description="Knowledge Desk: evidence-backed memory for local AI agents.")
    parser.add_argument("--version", action="version", version=f"knowledge-desk {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", parents=[common], help="run the engine headless")
    serve.add_argument("--demo", action="store_true", help="seed the demo store first")
    serve.add_argument("--port", type=_port, default=DEFAULT_PORT,
                       help=f"TCP port on 127.0.0.1 (default {DEFAULT_PORT}; 0 picks a free one)")
    serve.add_argument("--http", type=_port, metavar="PORT", help="also serve MCP's Streamable HTTP at "
                       "http://127.0.0.1:PORT/mcp (0 picks a free port; engine.json says which)")
    serve.add_argument("--host", help=f"the address --http binds (default "
                       f"{HTTP_DEFAULT_HOST}; the socket stays on loopback)")
    serve.set_defaults(handler=cmd_serve)

    add_mcp_parser(commands, common)

    demo = commands.add_parser("demo", parents=[common], help="seed a small realistic demo store")
    demo.set_defaults(handler=cmd_demo, exclusive="demo")

    imports = commands.add_parser("import", parents=[common], help="import a data set through the engine API")
    imports.set_defaults(exclusive="import")  # every format writes the stores as their only owner
    import_commands = imports.add_subparsers(dest="import_command", required=True, metavar="FORMAT")
    locomo = import_commands.add_parser("locomo", parents=[common],
                                        help="LoCoMo conversations as people, session events and claims")
    locomo.add_argument("file", metavar="FILE", help="a LoCoMo JSON file (such as locomo10.json)")
    locomo.add_argument("--agent", default=DEFAULT_AGENT,
                        help=f"the owner agent whose store receives it (default: {DEFAULT_AGENT})")
    locomo.add_argument("--json", action="store_true", help="print the counts and dialog-to-claim map as JSON")
    locomo.set_defaults(handler=cmd_import_locomo)
    add_import_parsers(import_commands, common)

    archive = import_commands.add_parser("archive", parents=[common],
                                         help="restore a store from an archive `knowledge export` wrote")
    archive.add_argument("archive", metavar="ARCHIVE", help="the archive file")
    archive.add_argument("--agent", help="restore it as this agent's own store (default: as it was exported)")
    archive.add_argument("--store", help="restore it as the named store NAME (default: as it was exported)")
    archive.add_argument("--json", action="store_true", help="print what was restored as JSON")
    archive.set_defaults(handler=cmd_import_archive, exclusive=None)  # it says itself why not beside an engine

    export = commands.add_parser("export", parents=[common], help="write a portable archive of one store")
    export.add_argument("out", metavar="OUT", help="the archive file to write (must not exist)")
    export.add_argument("--store", help="a named store's name, or a store id (`knowledge stores list`)")
    export.add_argument("--agent", help=f"the agent whose store to export (default: {DEFAULT_AGENT})")
    export.add_argument("--with-history", action="store_true",
                        help="include the vault's git history (a git bundle; the .git folder where git is absent)")
    export.add_argument("--json", action="store_true", help="print what was written as JSON")
    export.set_defaults(handler=cmd_export, reads_state=True)

    doctor = commands.add_parser("doctor", parents=[common], help="validate every store, vault and ontology")
    doctor.add_argument("--json", action="store_true", help="print every store's findings as JSON")
    doctor.set_defaults(handler=cmd_doctor, reads_state=True)

    reindex = commands.add_parser("reindex", parents=[common], help="rebuild every search index from the vaults")
    reindex.add_argument("--json", action="store_true", help="print each rebuilt index as JSON")
    reindex.set_defaults(handler=cmd_reindex, reads_state=True)

    search_cmd = commands.add_parser("search", parents=[common], help="search an agent's private knowledge")
    search_cmd.add_argument("query", metavar="QUERY", help="words or a question to search for (no query syntax)")
    search_cmd.add_argument("--agent", default=DEFAULT_AGENT,
                            help=f"the agent whose private partition to search (default: {DEFAULT_AGENT})")
    search_cmd.add_argument("--limit", type=int, default=10, help="at most this many hits (default 10)")
    search_cmd.add_argument("--mode", choices=("auto", "keyword", "hybrid"), default="auto",
                            help="keyword, hybrid (keyword and the installed embedding model), or auto: hybrid when "
                                 "an embedding model is installed (default)")
    search_cmd.add_argument("--links", action="store_true",
                            help="list relationship records (links between notes) too; by default pages and claims, "
                                 "as the window's search lists them")
    search_cmd.add_argument("--json", action="store_true", help="print the hits as JSON, with their references")
    search_cmd.set_defaults(handler=cmd_search, reads_state=True)

    add_bench_parser(commands, common)

    agents = commands.add_parser("agents", parents=[common], help="register, list and remove agents")
    agent_commands = agents.add_subparsers(dest="agents_command", required=True, metavar="ACTION")
    add = agent_commands.add_parser("add", parents=[common], help="register an agent and print its token once")
    add.add_argument("name", metavar="NAME", help="the agent's name: lowercase letters, digits, - and _")
    add.add_argument("--owner", action="store_true", help="allow the owner-private audience")
    add.add_argument("--scopes", help=f"comma-separated subset of {','.join(SCOPES)}")
    add.add_argument("--json", action="store_true", help="print the agent and its token file as JSON")
    add.set_defaults(handler=cmd_agents_add)
    listing = agent_commands.add_parser("list", parents=[common], help="list agents and their stores")
    listing.add_argument("--json", action="store_true", help="print the agents as JSON")
    listing.set_defaults(handler=cmd_agents_list)
    remove = agent_commands.add_parser("remove", parents=[common], help="remove an agent (its store is kept)")
    remove.add_argument("name", metavar="NAME", help="the agent to remove")
    remove.set_defaults(handler=cmd_agents_remove, reads_state=True)
    config = agent_commands.add_parser("config", parents=[common],
                                       help="print a copy-paste MCP client configuration for an agent")
    config.add_argument("name", metavar="NAME", help="the agent the client connects as")
    config.add_argument("--client", choices=client_config.CLIENTS, default="generic",
                        help="the MCP client whose configuration format to print (default: generic)")
    config.add_argument("--instance", help="a stable, non-secret id of this agent instance (default: NAME-HOSTNAME)")
    config.add_argument("--session-key", help="for an agent without owner authority: the session key of its "
                                              "conversation, which grants name (default: the instance id)")
    config.set_defaults(handler=cmd_agents_config, reads_state=True)

    grants = commands.add_parser("grants", parents=[common], help="conversation access to the private partition")
    grant_commands = grants.add_subparsers(dest="grants_command", required=True, metavar="ACTION")
    grant_add = grant_commands.add_parser("add", parents=[common],
                                          help="let one conversation of an agent read (or read and save to) its "
                                               "private partition")
    grant_add.add_argument("agent", metavar="AGENT", help="the owner agent whose private partition it reaches")
    grant_add.add_argument("session_key", metavar="SESSION_KEY", help="the conversation's session key")
    grant_add.add_argument("--access", choices=GRANT_ACCESS, default="read",
                           help="read, or read-and-save (default: read)")
    grant_list = grant_commands.add_parser("list", parents=[common], help="the grants, of every agent or one")
    grant_list.add_argument("agent", nargs="?", metavar="AGENT", help="only this agent's grants")
    grant_list.add_argument("--json", action="store_true", help="print the grants as JSON")
    grant_remove = grant_commands.add_parser("remove", parents=[common], help="withdraw a conversation's grant")
    grant_remove.add_argument("agent", metavar="AGENT", help="the agent the grant is of")
    grant_remove.add_argument("session_key", metavar="SESSION_KEY", help="the conversation's session key")
    grants.set_defaults(handler=cmd_grants)
    for acting in (grant_add, grant_remove):
        acting.set_defaults(reads_state=True)

    stores = commands.add_parser("stores", parents=[common], help="inspect stores")
    store_commands = stores.add_subparsers(dest="stores_command", required=True, metavar="ACTION")
    store_list = store_commands.add_parser("list", parents=[common], help="every known store and its members")
    store_list.add_argument("--json", action="store_true", help="print the stores as JSON")
    store_list.set_defaults(handler=cmd_stores_list)

    settings = commands.add_parser("settings", parents=[common], help="the owner's switches (config.json)")
    setting_commands = settings.add_subparsers(dest="settings_command", required=True, metavar="SETTING")
    show = setting_commands.add_parser("show", parents=[common], help="every switch and its state")
    show.add_argument("--json", action="store_true", help="print the switches as JSON")
    search_knowledge = setting_commands.add_parser(
        "search-knowledge", parents=[common], help="offer agents the search_knowledge tool (off by default)",
        description="Turns knowledgeRuntimeEnabled on or off in config.json; agents' search_knowledge calls are "
                    "answered (or refused with runtime_disabled) from their next call on.")
    search_knowledge.add_argument("switch", choices=("on", "off"), help="on or off")
    search_knowledge.add_argument("--json", action="store_true", help="print the switches as JSON once set")
    writes = setting_commands.add_parser(
        "writes", parents=[common], help="let agents save knowledge (on by default)",
        description="Turns writesEnabled on or off in config.json; with it off the save tools are withdrawn "
                    "and saves are refused with writes_disabled.")
    writes.add_argument("switch", choices=("on", "off"), help="on or off")
    writes.add_argument("--json", action="store_true", help="print the switches as JSON once set")
    roots = setting_commands.add_parser(
        "workspace-roots", parents=[common], help="the folders knowledge_attach_file may read files from",
        description="Sets attachments.workspaceRoots in config.json to exactly these existing directories; "
                    "none removes them (knowledge_attach_file is then refused; knowledge_attach still works).")
    roots.add_argument("roots", nargs="*", metavar="DIR", help="an existing directory (none: no roots)")
    roots.add_argument("--json", action="store_true", help="print the switches as JSON once set")
    settings.set_defaults(handler=cmd_settings)

    add_models_parser(commands, common)
    add_sync_parser(commands, common)
    add_gate_parser(commands, common)
    # Commands of other layers (the desktop's `knowledge desktop`) plug in here; the engine never imports them.
    for add_command in plugged_commands():
        add_command(commands, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    state = StateDir.resolve(args.state_dir)
    if getattr(args, "exclusive", None) and (refused := refuse_beside_engine(state, args.exclusive)) is not None:
        return refused
    if getattr(args, "reads_state", False) and holds_nothing(state.root):
        print(no_state_here(state, args), file=sys.stderr)
        return 2
    try:
        return args.handler(args, state)
    except KeyboardInterrupt:
        # The engine of this process has closed on the way out (every write it acknowledged is kept); a
        # traceback would tell the owner nothing they can act on.
        again = (" Running the command again finishes the import (nothing is imported twice)."
                 if args.command == "import" else "")
        print(f"knowledge {args.command}: stopped by Ctrl+C. What was written before stays.{again}", file=sys.stderr)
        return INTERRUPTED
    except EngineLocked as exc:
        if state.serving_engine() is not None:  # a command that opens the stores itself (a benchmark's reuse)
            return refuse_beside_engine(state, args.command) or 3
        # Held, yet no engine.json names a live engine: one that is starting, or a demo or import running.
        print(f"knowledge: {exc}, and is not serving yet (starting, or running `knowledge demo` or `knowledge "
              "import`); run the command again when it serves or has finished", file=sys.stderr)
        return 3
    except OperatorError as exc:  # the serving engine's answer, said as it is said without one
        if exc.reason == UNREACHABLE:
            said = exc.message if exc.message.endswith(".") else exc.message + "."
            print(f"knowledge: {said} If it has stopped, run the command again; if it hangs, stop it "
                  f"(engine.json in {state.root} names its pid).", file=sys.stderr)
            return 1
        field = exc.data.get("field")
        print(f"knowledge: {exc.message}{f' ({field})' if field else ''}", file=sys.stderr)
        return 2
    except KnowledgeError as exc:
        where = f" ({exc.details['field']})" if "field" in exc.details else ""
        print(f"knowledge: {exc.message}{where}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.Error) as exc:
        # A state directory the disk will not let us use (read-only, full, not ours) is one clear line;
        # any other failure of the system (a connection timing out, a file named on the command line) is
        # said as it is, without blaming the state directory.
        if _concerns(state, exc):
            print(f"knowledge: {unusable_state_dir(state, exc)}", file=sys.stderr)
        else:
            where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
            print(f"knowledge: {getattr(exc, 'strerror', None) or exc or type(exc).__name__}{where}", file=sys.stderr)
        return 1


def no_state_here(state: StateDir, args: argparse.Namespace) -> str:
    """Why a command that works on existing state (``reads_state``) did nothing: there is no state directory at
    ``state``, or an empty folder.  It creates none either, so a mistyped ``--state-dir`` leaves no folder
    behind, and an empty folder stays empty."""
    words = [args.command]
    for dest in (f"{args.command}_command", "remote_command"):  # `agents list`, `sync remote add`
        if isinstance(getattr(args, dest, None), str):
            words.append(getattr(args, dest))
    where = f"{state.root} is empty" if state.root.exists() else f"no state directory at {state.root}"
    return (f"knowledge {' '.join(words)}: {where}; nothing was read or written. "
            "`knowledge agents add NAME` or `knowledge serve` starts one there; --state-dir names another")


def _concerns(state: StateDir, exc: OSError | sqlite3.Error) -> bool:
    """Whether a failure is the state directory's: its database, or a file in it (or one the error leaves unnamed)."""
    if isinstance(exc, sqlite3.Error):
        return True
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return False
    return exc.filename is None or Path(os.fsdecode(exc.filename)).absolute().is_relative_to(state.root.absolute())


def unusable_state_dir(state: StateDir, exc: OSError | sqlite3.Error) -> str:
    """What went wrong with the state directory, and what to do, in one line."""
    if isinstance(exc, OSError):
        code = errno.errorcode.get(exc.errno or 0, "EIO")
        cause = f"{exc.strerror or exc} ({code})" + (f" at {exc.filename}" if exc.filename else "")
    else:
        code = sqlite_errno(exc)
        cause = f"its database refused: {exc}"
    hint = ("free some space" if code in ("ENOSPC", "EDQUOT") else
            "make it writable" if code in ("EROFS", "EACCES", "EPERM") else "check the disk")
    return f"cannot use the state directory {state.root}: {cause}; {hint}, or choose another with --state-dir"


if __name__ == "__main__":
    sys.exit(main())
