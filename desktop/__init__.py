"""The Knowledge Desk window (PySide6): a client of the engine's socket."""
