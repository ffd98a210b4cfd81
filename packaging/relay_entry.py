"""The bundle's relay, ``knowledge-mcp``: ``knowledge mcp ...`` alone, in a process that loads no Qt.

Every MCP client that launches the stdio bridge holds one bridge process for as long as it runs.  The
bundle's ``knowledge`` executable carries PyInstaller's PySide6 runtime hook, which loads QtCore and its
libraries (about 15 MiB) into every process it starts; this one is built from an analysis of its own
without the desktop, the engine or the models, so it holds what the relay needs.  It takes the same
command line as ``knowledge``'s ``mcp`` (``knowledge-mcp [--state-dir DIR] mcp --agent NAME ...``), which
is what ``knowledge agents config`` names in a bundle.
"""

import sys

from engine.cli.mcp_command import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
