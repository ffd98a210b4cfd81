"""The ``knowledge`` command line (``python -m engine.cli`` runs it too).

    commands        every subcommand
    bench_commands  knowledge bench: the benchmarks, each loaded only when it runs
    mcp_command     knowledge mcp: the stdio bridge, started without loading the other commands
    plugged         commands other layers plug in (knowledge desktop), also run without the others
    desk            what the commands ask: in this process, or of the serving engine as the operator
    model_commands  knowledge models list / pull / add-local
    gate_commands   knowledge gate suggest: recall gate thresholds from the owner's labels
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run ``knowledge``.  ``knowledge mcp`` is started on its own: an MCP client waits for its answer to
    ``initialize`` while every other command's imports (the engine, the gate, numpy) would load; so are the
    commands other layers plug in (``knowledge desktop``: its window paints while they would load)."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = subcommand(args)
    if command == "mcp":
        from .mcp_command import main as mcp_main
        return mcp_main(args)
    from .plugged import run_plugged
    answer = run_plugged(command, args)
    if answer is not None:
        return answer
    from .commands import main as commands_main
    return commands_main(argv)


def subcommand(args: list[str]) -> str | None:
    """The command named on a ``knowledge`` command line: the first word that is not ``--state-dir`` and
    its value; None when an option comes first (``--help``, ``--version``)."""
    position = 0
    while position < len(args):
        word = args[position]
        if word == "--state-dir":
            position += 2
        elif word.startswith("--state-dir="):
            position += 1
        elif word.startswith("-"):
            return None
        else:
            return word
    return None
