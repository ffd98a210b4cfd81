"""The ``knowledge`` command line (``python -m engine.cli`` runs it too).

    commands        every subcommand
    desk            what the commands ask: in this process, or of the serving engine as the operator
    model_commands  knowledge models list / pull / add-local
"""

from .commands import main

__all__ = ["main"]
