"""Reliability harnesses: crashes, faults, external edits and load against a real engine process.

Each module is a repeatable command (``python -m tests.reliability.<name> --help``) whose figures go
in docs/reliability.md; the ``test_*`` modules beside them run a short variant of each in CI.
"""
