"""Knowledge Desk engine: vaults, stores, publication, search and recall.

The engine is pure Python and never imports Qt; the desktop talks to it
over its socket.
"""

__version__ = "0.1.0"
