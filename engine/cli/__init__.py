"""The ``knowledge`` command line (``python -m engine.cli`` runs it too).

    commands        every subcommand
    model_commands  knowledge models list / pull / add-local
"""

from .commands import main

__all__ = ["main"]
