"""The ``knowledge desktop`` subcommand, plugged into the engine's CLI through an entry point.

The engine never imports the desktop (``tests/test_architecture_boundaries.py``):
``engine.cli.commands`` adds whatever the ``knowledge.commands`` entry points offer,
and this module registers the window's command without importing Qt, so
the other commands stay fast and work without PySide6.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.state.statedir import StateDir


def add_command(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser("desktop", parents=[common],
                                 help="the Knowledge Desk window (attaches to the engine or starts one)")
    parser.add_argument("--demo", action="store_true",
                        help="seed the demo store into the state directory first (when the window starts the engine)")
    parser.add_argument("--startup-report", help=argparse.SUPPRESS)  # docs/benchmarks/desktop.md
    parser.set_defaults(handler=run_desktop)


def run_desktop(args: argparse.Namespace, state: StateDir) -> int:
    try:
        from .app import run
    except ImportError as exc:
        print(f"knowledge desktop: the window needs PySide6 ({exc}); install Knowledge Desk with its "
              "dependencies", file=sys.stderr)
        return 2
    return run(state, demo=args.demo, startup_report=Path(args.startup_report) if args.startup_report else None)
