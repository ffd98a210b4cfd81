"""``knowledge import FORMAT PATH`` for an owner's existing memory (ChatGPT, Claude, Markdown, mem0, memory-core).

The input is read and checked whole before the engine opens: a malformed
input is refused with the file and the place in it, and no agent, store or
record is created.  ``--dry-run`` stops there and reports what the import
would create.  Progress goes to stderr, the result to stdout.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from typing import Any, Callable

from ..importers import chatgpt, claude, markdown, mem0, memory_core
from ..importers.common import DEFAULT_AGENT, Progress, Writer, import_engine, import_instance, owner_caller
from ..state.config import SettingsSource
from ..state.statedir import StateDir
from ..store.credentials import refuse_secrets

# format: (loader, importer, what PATH is, what the items are called)
IMPORTERS: dict[str, tuple[Callable[..., Any], Callable[..., dict[str, Any]], str, str]] = {
    "chatgpt": (chatgpt.load_chatgpt, chatgpt.import_chatgpt,
                "a ChatGPT data export: its zip or its conversations.json", "conversations"),
    "claude": (claude.load_claude, claude.import_claude,
               "a Claude data export: its zip or its conversations.json", "conversations"),
    "markdown": (markdown.load_markdown, markdown.import_markdown,
                 "a folder of Markdown notes (an Obsidian vault, a basic-memory project)", "notes"),
    "mem0": (mem0.load_mem0, mem0.import_mem0,
             "a mem0 or OpenMemory JSON export (or OpenMemory's export zip)", "memories"),
    "memory-core": (memory_core.load_memory_core, memory_core.import_memory_core,
                    "an agent workspace holding MEMORY.md and memory/YYYY-MM-DD.md", "files"),
}


def add_import_parsers(import_commands: Any, common: argparse.ArgumentParser,
                       write_token_file: Callable[[StateDir, str, str], str]) -> None:
    for name, (_, _, what, _) in IMPORTERS.items():
        parser = import_commands.add_parser(name, parents=[common], help=f"import {what}")
        parser.add_argument("path", metavar="PATH", help=what)
        parser.add_argument("--agent", default=DEFAULT_AGENT,
                            help=f"the owner agent whose store receives it (default: {DEFAULT_AGENT})")
        parser.add_argument("--dry-run", action="store_true",
                            help="check the input and report what would be created; write nothing")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
        parser.set_defaults(handler=functools.partial(cmd_import, write_token_file=write_token_file),
                            import_format=name)


def cmd_import(args: argparse.Namespace, state: StateDir,
               write_token_file: Callable[[StateDir, str, str], str]) -> int:
    load, run, _, unit = IMPORTERS[args.import_format]
    # The owner's allowSecrets decides, as for every write; read without creating anything.
    allowed = SettingsSource(state.config).current().allow_secrets if state.config.exists() else False
    plan = load(args.path, functools.partial(refuse_secrets, allowed=allowed))
    progress = terminal_progress(args.import_format, unit)
    if args.dry_run:
        result = run(Writer(None, None, args.import_format, dry_run=True), *plan)
    else:
        with import_engine(state) as engine, \
                owner_caller(engine, args.agent, instance=import_instance(args.import_format)) as (caller, token):
            result = {"agent": args.agent}
            if token:
                result["tokenFile"] = write_token_file(state, args.agent, token)
            result.update(run(Writer(engine, caller, args.import_format, progress=progress), *plan))
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print(summary(result))
    return 0


def terminal_progress(format_name: str, unit: str, every: float = 1.0) -> Callable[[Progress], None]:
    """Progress lines on stderr: at most one a second, and the last one."""
    last = [0.0]

    def say(progress: Progress) -> None:
        now = time.monotonic()
        if progress.done == progress.total or now - last[0] >= every:
            last[0] = now
            print(f"knowledge import {format_name}: {progress.done}/{progress.total} {unit}",
                  file=sys.stderr, flush=True)

    return say


def summary(result: dict[str, Any]) -> str:
    counts = result.get("wouldCreate") or result.get("imported") or {}
    shown = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n) or "nothing"
    lines = []
    if "tokenFile" in result:
        lines.append(f"Registered owner agent {result['agent']}; its token is in {result['tokenFile']}.")
    if result["dryRun"]:
        lines.append(f"Dry run of the {result['format']} import: it would create {shown}; nothing was written.")
    else:
        lines.append(f"Imported {result['format']} into {result['agent']}'s store: {shown} "
                     "(records an earlier run of the same input made are reused, not repeated).")
    for note in result.get("notes", []):
        lines.append(note)
    return "\n".join(lines)
