"""JSON an import reads, its numbers bounded as the vault's YAML bounds them.

Python converts a JSON integer's digits to an ``int`` only up to 4,300 digits (``sys.int_info``), raising a
bare ValueError beyond, and the conversion is quadratic below that; no export needs a number anywhere near
that long.  So a number longer than ``NUMBER_MAX_CHARS`` characters (the frontmatter reader's bound: no
64-bit integer or finite float needs more) is refused before it is converted, naming where it is; so is
a number too large for a float (``1e999``, which Python reads as infinity) and the ``NaN`` and
``Infinity`` that Python's reader takes but JSON does not have, as the frontmatter reader keeps floats
finite.  The
64-bit range the frontmatter reader also holds integers to is not applied: it is for SQLite and tantivy,
and an import's numbers reach neither (they stay in the retained original).
"""

from __future__ import annotations

import json
import math

from ..core.answers import JsonValue
from ..vault.frontmatter import NUMBER_MAX_CHARS


class NumberRefused(ValueError):
    """A number in JSON longer than ``NUMBER_MAX_CHARS`` characters, too large for a float, or a non-JSON
    ``NaN``/``Infinity``; ``place(text)`` says where."""

    def __init__(self, digits: str, problem: str) -> None:
        super().__init__(f"holds {problem}")
        self.digits = digits

    def place(self, text: str) -> str | None:
        """The line and column of the number's first occurrence in ``text``."""
        at = text.find(self.digits)
        if at < 0:
            return None
        line = text.count("\n", 0, at) + 1
        return f"line {line} column {at - text.rfind(chr(10), 0, at)}"


def _bounded_int(digits: str) -> int:
    if len(digits) > NUMBER_MAX_CHARS:
        raise NumberRefused(digits, f"an integer longer than {NUMBER_MAX_CHARS} characters")
    return int(digits)


def _bounded_float(digits: str) -> float:
    if len(digits) > NUMBER_MAX_CHARS:
        raise NumberRefused(digits, f"a number longer than {NUMBER_MAX_CHARS} characters")
    value = float(digits)
    if not math.isfinite(value):
        raise NumberRefused(digits, f"{digits}, a number too large to read")
    return value


def _no_constant(name: str) -> float:
    raise NumberRefused(name, f"{name}, which is not JSON")


DECODER = json.JSONDecoder(parse_int=_bounded_int, parse_float=_bounded_float, parse_constant=_no_constant)


def loads(text: str) -> JsonValue:
    """``json.loads`` with the number bound; raises ``NumberRefused`` (and what ``json.loads`` raises)."""
    return DECODER.decode(text)
