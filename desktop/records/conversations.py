"""An imported conversation's times in the owner's local time, where the record page shows its body.

The ChatGPT and Claude importers write a conversation's page as its header ("ChatGPT conversation …. Started
2026-05-28T20:26:40Z, last updated …") and its messages, each under a line "User (2026-05-28T20:26:50Z):", the
times in UTC as the export holds them (engine/importers/conversations.py).  The page shows those times as the
rest of the window does, in the machine's zone (``desktop/common/times.py``); the stored file is unchanged, and
a time in a message's own words is left as written.
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


def shown_body(record: dict[str, Any], now: datetime) -> str:
    """``record``'s body as the page shows it: an imported conversation's header and message times in
    ``now``'s zone, any other body as stored."""
    body = record.get("body") or ""
    attribution = view_of(record.get("frontmatter") or {}).attribution or {}
    if attribution.get("instance") not in CONVERSATION_IMPORTS:
        return body

    def local(match: re.Match[str]) -> str:
        return "".join(local_stamp(part, now) or part if number % 2 else part
                       for number, part in enumerate(match.groups("")))

    return _SPEAKER.sub(local, _HEADER.sub(local, body, count=1))
