"""``knowledge import FORMAT PATH`` for an owner's existing memory (ChatGPT, Claude, Markdown, mem0, memory-core).

The input is read and checked whole before anything is written: a malformed
input is refused with the file and the place in it, and no agent, store or
record is created.  ``--dry-run`` stops there and reports what the import
would create, and what an earlier import made that it would revise.  Progress goes to stderr, the result to stdout.
A Markdown or memory-core import leaves a page revised in the store since an earlier import wrote it as it is,
and lists it; ``--replace-edits`` takes the changed notes or memory files anyway.

Where no engine serves the state directory the import runs here; beside a
serving engine it runs in the engine (``operator/import``, a job this
command follows), and prints the same.  Ctrl+C beside the engine cancels the
job; either way what was imported stays, and running the command again
finishes it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

from ..importers.common import DEFAULT_AGENT, Progress
from ..importers.formats import FORMATS
from ..importers.summaries import import_summary
from ..state.statedir import StateDir
from .desk import ImportStopped, open_desk

# format: (loader, importer, what PATH is, what the items are called)
IMPORTERS: dict[str, tuple[Callable[..., Any], Callable[..., dict[str, Any]], str, str]] = {
    name: (chosen.load, chosen.run, chosen.what, chosen.unit) for name, chosen in FORMATS.items()}
INTERRUPTED = 130  # the exit status of a command stopped by Ctrl+C


def add_import_parsers(import_commands: Any, common: argparse.ArgumentParser) -> None:
    for name, chosen in FORMATS.items():
        parser = import_commands.add_parser(name, parents=[common], help=f"import {chosen.what}")
        parser.add_argument("path", metavar="PATH", help=chosen.what)
        parser.add_argument("--agent", help=f"the owner agent whose store receives it (default: {DEFAULT_AGENT})")
        parser.add_argument("--store", help="a store (a named store's name, or a store id) to receive it, "
                                            "written as one of its owner agents")
        parser.add_argument("--dry-run", action="store_true",
                            help="check the input and report what would be created or revised; write nothing")
        if chosen.keeps_edits:
            parser.add_argument("--replace-edits", action="store_true",
                                help="a note or memory file changed since an earlier import whose page was "
                                     "revised in the store since (by the owner or an agent) gets its text "
                                     "anyway; without it such a page is left as it is and listed")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
        # Beside a serving engine these run in it, so they need the state directory to themselves no more.
        parser.set_defaults(handler=cmd_import, import_format=name, exclusive=None)


def cmd_import(args: argparse.Namespace, state: StateDir) -> int:
    chosen = FORMATS[args.import_format]
    progress = None if args.dry_run else terminal_progress(chosen.name, chosen.unit)
    try:
        with open_desk(state) as desk:
            result = desk.import_(chosen.name, Path(args.path).absolute(), args.agent, args.store, args.dry_run,
                                  progress, replace_edits=getattr(args, "replace_edits", False))
    except ImportStopped as stopped:
        print(f"knowledge import {chosen.name}: {stopped.message}", file=sys.stderr)
        return INTERRUPTED if stopped.interrupted else 1
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print(import_summary(result))
    return 0


def terminal_progress(format_name: str, unit: str, every: float = 1.0) -> Callable[[Progress], None]:
    """Progress lines on stderr: at most one a second, and the last one."""
    last = [0.0]

    def say(progress: Progress) -> None:
        now = time.monotonic()
        if progress.done == progress.total or now - last[0] >= every:
            last[0] = now
            linked = " linked" if progress.phase == "linking" else ""
            print(f"knowledge import {format_name}: {progress.done}/{progress.total} {unit}{linked}",
                  file=sys.stderr, flush=True)

    return say


