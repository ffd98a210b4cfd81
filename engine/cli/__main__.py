"""``python -m engine.cli``."""

import sys

from .commands import main

sys.exit(main())
