"""The ``knowledge desktop`` subcommand, plugged into the engine's CLI through an entry point.

The engine never imports the desktop (``tests/test_architecture_boundaries.py``):
``engine.cli.commands`` adds whatever the ``knowledge.commands`` entry points offer,
and this module registers the window's command without importing Qt, so
the other commands stay fast and work without PySide6.  Before Qt is
loaded, ``display.display_problem`` checks that a window can open at all.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from engine.core.errors import InvalidParams
from engine.core.links import parse_record_link
from engine.state.statedir import StateDir

from .display import display_problem, missing_libraries_message


def add_command(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser("desktop", parents=[common],
                                 help="the Knowledge Desk window (attaches to the engine or starts one)")
    parser.add_argument("--demo", action="store_true",
                        help="seed the demo store into the state directory first (when the window starts the engine)")
    parser.add_argument("--startup-report", help=argparse.SUPPRESS)  # docs/benchmarks/desktop.md
    parser.add_argument("url", nargs="?", metavar="URL",
                        help="a record link (knowledge://record/...) to open the window at, as `knowledge open`")
    parser.set_defaults(handler=run_desktop)
    opener = commands.add_parser("open", parents=[common],
                                 help="open a record link (knowledge://record/STORE/ID) in the window",
                                 description="Brings the window of this state directory forward at the record, "
                                             "or opens one there when none runs. The desktop entry registers "
                                             "the knowledge:// scheme (it runs `knowledge desktop URL`, the same).")
    opener.add_argument("url", metavar="URL", help="knowledge://record/<store id>/<record id>")
    opener.set_defaults(handler=run_desktop, demo=False, startup_report=None)


def run_desktop(args: argparse.Namespace, state: StateDir) -> int:
    url = getattr(args, "url", None)
    if url is not None:
        try:  # a bad link is refused before anything opens
            parse_record_link(url)
        except InvalidParams as exc:
            print(f"knowledge: {exc.message}", file=sys.stderr)
            return 2
    problem = display_problem()  # before Qt is loaded: without a display it would abort the process
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    try:
        from .app import run
    except ImportError as exc:
        library = re.search(r"(lib[\w.+-]+\.so[\w.]*): cannot open shared object file", str(exc))
        if library:  # PySide6 is there, a system library it links against is not
            print(missing_libraries_message("Qt", [library.group(1)]), file=sys.stderr)
            return 1
        print(f"knowledge desktop: the window needs PySide6 ({exc}); install Knowledge Desk with its "
              "dependencies", file=sys.stderr)
        return 2
    return run(state, demo=args.demo, startup_report=Path(args.startup_report) if args.startup_report else None,
               url=url)
