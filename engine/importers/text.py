"""The small conversions of text every import format needs: a title on one line, a body without control
characters, a time as the vault writes it, a fenced block, a long text in pieces."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from ..vault.records import TITLE_MAX_CHARS


def one_line(text: str, limit: int = TITLE_MAX_CHARS) -> str:
    """A title: whitespace runs collapsed, control characters dropped, cut to ``limit`` characters.  The
    joiners of emoji and script sequences and the right-to-left and left-to-right marks are kept: they are
    part of how the words are written (a family emoji, a Hebrew title)."""
    cleaned = " ".join("".join(c if c.isprintable() or c.isspace() or c in _KEPT_FORMAT else " "
                               for c in _whole(text)).split())
    return cleaned if len(cleaned) <= limit else cleaned[:limit - 1].rstrip() + "…"


def clean_text(text: str) -> str:
    """Text for a body or an excerpt: control characters but tab and newline removed, CR LF as LF."""
    return _CONTROL.sub("", _whole(text).replace("\r\n", "\n").replace("\r", "\n"))


def _whole(text: str) -> str:
    """``text`` with each lone surrogate (JSON can spell one, UTF-8 cannot) as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


_KEPT_FORMAT = frozenset("\u200c\u200d\u200e\u200f\u061c")  # ZWNJ, ZWJ, LRM, RLM, ALM
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def timestamp(value: Any) -> str | None:
    """A Unix time (seconds, as a float) or an ISO-8601 string as ``YYYY-MM-DDTHH:MM:SSZ``; None if neither."""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(value, tz=timezone.utc)
        elif isinstance(value, str) and value.strip():
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            moment = moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def fenced(text: str, language: str) -> str:
    """``text`` as a fenced Markdown code block, its fence longer than any run of backticks inside."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{one_line(language, 40)}\n{text.rstrip(chr(10))}\n{fence}"


def split_text(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at line breaks where it can be."""
    pieces = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        cut = limit if cut <= 0 else cut + 1
        pieces.append(text[:cut])
        text = text[cut:]
    return pieces + [text] if text else pieces
