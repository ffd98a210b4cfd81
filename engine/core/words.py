"""Counts in the owner's words: ``1 file``, ``3 files``, never ``1 file(s)``."""

from __future__ import annotations


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``1 file``, ``1,146 files``: a count and its noun, singular for one (``plural`` where adding ``s`` is
    wrong)."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


def were(number: int) -> str:
    """``was`` for one, ``were`` for any other count: the verb of a sentence whose subject is counted."""
    return "was" if number == 1 else "were"
