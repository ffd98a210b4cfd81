"""The bundle's executable: the `knowledge` command line, desktop window included.

A large catalog sync reads files in worker processes (engine/store/record_rows.py), which a frozen
executable starts as itself: ``freeze_support`` makes such a start run the worker, not the command line.
"""

import multiprocessing
import sys

from engine.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    sys.exit(main())
