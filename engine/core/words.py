"""Counts in the owner's words: ``1 file``, ``3 files``, never ``1 file(s)``."""

from __future__ import annotations


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``1 file``, ``1,146 files``: a count and its noun, singular for one (``plural`` where adding ``s`` is
    wrong)."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


def for_count(number: int, one: str, many: str) -> str:
    """``one`` for a count of one, else ``many``: the verb (``was``/``were``) or pronoun agreeing with a count."""
    return one if number == 1 else many
