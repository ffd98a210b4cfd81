"""The bundle's executable: the `knowledge` command line, desktop window included."""

import sys

from engine.cli import main

if __name__ == "__main__":
    sys.exit(main())
