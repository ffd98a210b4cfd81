"""Commands other layers plug into ``knowledge`` (the desktop's ``desktop`` and ``open``), run on their own.

Such a command is offered through the ``knowledge.commands`` entry points (the engine never imports the
layer that offers it) and needs none of the engine's other commands: ``main`` in ``engine/cli/__init__.py``
sends it here, where the parser holds only the plugged commands, before the engine, the gate and numpy
that the other commands import are loaded.  The window's first paint waited about a second for them
(docs/benchmarks/desktop.md).  ``commands.build_parser`` adds the same commands to the full command line,
so ``knowledge --help`` lists them.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
from typing import Any, Callable

from ..state.statedir import StateDir
from .mcp_command import state_dir_parsers

AddCommand = Callable[[Any, argparse.ArgumentParser], None]


@functools.cache
def plugged_commands() -> tuple[AddCommand, ...]:
    """What each ``knowledge.commands`` entry point offers: a function adding its subcommands to a parser."""
    return tuple(entry.load() for entry in importlib.metadata.entry_points(group="knowledge.commands"))


def run_plugged(command: str | None, argv: list[str]) -> int | None:
    """Run ``argv`` when ``command`` is a plugged command; None when it is one of the engine's own."""
    if command is None:
        return None
    root, common = state_dir_parsers()
    parser = argparse.ArgumentParser(prog="knowledge", parents=[root])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_command in plugged_commands():
        add_command(commands, common)
    if command not in commands.choices:
        return None
    args = parser.parse_args(argv)
    args.argv = list(argv)
    return args.handler(args, StateDir.resolve(args.state_dir)) or 0
