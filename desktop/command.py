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

from engine.state.statedir import StateDir

from .display import display_problem, missing_libraries_message


def add_command(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser("desktop", parents=[common],
                                 help="the Knowledge Desk window (attaches to the engine or starts one)")
    parser.add_argument("--demo", action="store_true",
                        help="seed the demo store into the state directory first (when the window starts the engine)")
    parser.add_argument("--startup-report", help=argparse.SUPPRESS)  # docs/benchmarks/desktop.md
    parser.set_defaults(handler=run_desktop)


def run_desktop(args: argparse.Namespace, state: StateDir) -> int:
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
    return run(state, demo=args.demo, startup_report=Path(args.startup_report) if args.startup_report else None)
