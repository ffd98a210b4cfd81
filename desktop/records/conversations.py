"""An imported conversation's times in the owner's local time, where the record page shows its body and where
a search shows its snippet.

The ChatGPT and Claude importers write a conversation's page as its header ("ChatGPT conversation …. Started
2026-05-28T20:26:40Z, last updated …") and its messages, each under a line "User (2026-05-28T20:26:50Z):", the
times in UTC as the export holds them (engine/importers/conversations.py).  The page shows those times as the
rest of the window does, in the machine's zone (``desktop/common/times.py``); the stored file is unchanged, and
a time in a message's own words is left as written.  A search hit's snippet is the same text on one line
("… Started 2026-05-28T20:26:40Z, … User (2026-05-28T20:26:50Z): …"): its times are shown local too, and the
spans of the query's words moved with them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from engine.vault.record_view import view_of

from ..common.times import local_stamp

CONVERSATION_IMPORTS = {"import-chatgpt", "import-claude"}  # the instances those importers write as
_STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"
_HEADER = re.compile(rf"\A([^\n]*? (?:Started|Created) )({_STAMP})(?:(, last updated )({_STAMP}))?")
_SPEAKER = re.compile(rf"(?<=\n\n)([^\n()]{{1,80}} \()({_STAMP})(\):\n)")  # a message's first line
# The same times in a snippet, where the lines are one: after "Started ", "Created " or ", last updated ", and
# between a speaker's brackets before its colon.
_SNIPPET_STAMP = re.compile(rf"(?:(?<=Started )|(?<=Created )|(?<=, last updated )){_STAMP}(?=[.,])"
                            rf"|(?<=\S \(){_STAMP}(?=\):)")
_WORD = re.compile(r"[^\W_]+")  # a word as the engine marks them (engine/search/plain.py)


def is_imported_conversation(record: dict[str, Any]) -> bool:
    """Whether ``record`` (a record, or a search hit with its ``attribution``) is a conversation an importer
    wrote."""
    attribution = record.get("attribution")
    if attribution is None:
        attribution = view_of(record.get("frontmatter") or {}).attribution
    return isinstance(attribution, dict) and attribution.get("instance") in CONVERSATION_IMPORTS


def shown_body(record: dict[str, Any], now: datetime) -> str:
    """``record``'s body as the page shows it: an imported conversation's header and message times in
    ``now``'s zone, any other body as stored."""
    body = record.get("body") or ""
    if not is_imported_conversation(record):
        return body

    def local(match: re.Match[str]) -> str:
        return "".join(local_stamp(part, now) or part if number % 2 else part
                       for number, part in enumerate(match.groups("")))

    return _SPEAKER.sub(local, _HEADER.sub(local, body, count=1))


def shown_snippet(hit: dict[str, Any], now: datetime) -> tuple[str, Any]:
    """A search ``hit``'s snippet and ``highlights`` as the Snippet column shows them: an imported conversation's
    times in ``now``'s zone, each span moved with the text before it (a word marked inside a time, "2026", is
    marked where the local time says it); any other hit's as the engine sent them."""
    text, highlights = str(hit.get("snippet") or ""), hit.get("highlights")
    if not is_imported_conversation(hit):
        return text, highlights
    spans = [span for span in highlights if _is_span(span)] if isinstance(highlights, list) else []
    shown, moved, at = "", [], 0  # the text made so far, its spans, and where in ``text`` it has reached
    for match in _SNIPPET_STAMP.finditer(text):
        local = local_stamp(match.group(), now)
        if local is None:
            continue
        start, end = match.span()
        shift = len(shown) - at
        moved.extend([a + shift, b + shift] for a, b in spans if at <= a and b <= start)
        shown += text[at:start]
        marked = {text[a:b] for a, b in spans if start <= a and b <= end}
        moved.extend([len(shown) + word.start(), len(shown) + word.end()] for word in _WORD.finditer(local)
                     if word.group() in marked)
        shown, at = shown + local, end
    if not at:
        return text, highlights
    shift = len(shown) - at
    moved.extend([a + shift, b + shift] for a, b in spans if at <= a)
    return shown + text[at:], moved


def _is_span(span: Any) -> bool:
    return isinstance(span, list) and len(span) == 2 and all(isinstance(n, int) for n in span)
