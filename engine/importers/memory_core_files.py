"""Each file of an OpenClaw workspace read into what its page and claims will say (engine/importers/memory_core.py
says what becomes of which file, and why)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import date

from .common import Original, refused
from .memory_core_entries import Provenance, RecallAnnotations, read_directive_line, read_entry
from .text import clean_text, one_line
from ..store.inputs import BODY_MAX_CHARS, TEXT_MAX_CHARS

TAG = "memory-core"
_DAILY = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[-_ ](.+))?")
_ITEM = re.compile(r"^\s*(?:[-*+]|[0-9]+[.)])\s+(.*\S)\s*$")
# A task-list item's box: GitHub's ``[ ]`` and ``[x]``, and the one-character statuses Obsidian's themes and
# its Tasks plugin give other punctuation (``[-]`` cancelled, ``[>]`` deferred, ``[/]`` in progress).
_TASK = re.compile(r"\[([xX]|[^\w\]\[])\](?:\s+(.*))?")
_TASK_KINDS = {" ": "commitment", "x": "event", "X": "event"}  # open: something to do; done: it happened
_HEADING = re.compile(r"^#\s+(.*\S)\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_KEY_CHARS = 48


@dataclass(frozen=True)
class Item:
    """A list item that becomes a claim: its line, its words, the claim's kind, the words quoted from the
    line, OpenClaw's recall annotations on it and, for a promoted entry, the daily note lines it came from."""

    line: int
    text: str
    kind: str
    quote: str
    recall: RecallAnnotations = RecallAnnotations()
    promoted: Provenance | None = None


@dataclass(frozen=True)
class MemoryFile:
    original: Original
    title: str
    tags: tuple[str, ...]
    body: str
    items: tuple[Item, ...] = ()  # the list items that become claims (MEMORY.md's, USER.md's directives)
    unclaimed: dict[str, int] = field(default_factory=dict)  # list items left in the body, by why

    @property
    def key(self) -> str:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", self.original.name)
        if len(name) <= _KEY_CHARS:
            return "file-" + name
        # a deep path (memory/imports/...): its start, and what tells it from another with the same start
        return f"file-{name[:_KEY_CHARS - 9]}-{hashlib.sha256(self.original.name.encode()).hexdigest()[:8]}"


def long_term(original: Original) -> MemoryFile:
    """``MEMORY.md`` (or a legacy ``memory.md``): its list items are claims."""
    items, unclaimed = [], {"tasks": 0, "empty": 0}
    for number, item in _list_items(original):
        entry = read_entry(item)
        kind, text, quote = "fact", entry.text, entry.written
        if entry.promoted is None and (task := _TASK.fullmatch(entry.written)) is not None:
            kind, text = _TASK_KINDS.get(task.group(1), ""), (task.group(2) or "").strip()
            quote = text
            if not kind or not text:  # cancelled, deferred, ...; or a box alone: nothing said to claim
                unclaimed["tasks"] += 1
                continue
        if not text:  # a promoted entry of headings alone, or an item that is only a comment
            unclaimed["empty"] += 1
            continue
        items.append(Item(number, text, kind, quote, entry.recall, entry.promoted))
    return _page(original, original.name, (TAG,), tuple(items), unclaimed)


def user_model(original: Original, profile: str | None) -> MemoryFile:
    """``USER.md`` (``profile`` None) or ``users/<profile>/USER.md``: each active directive, one list item under
    a dated ``<!-- observed: ... | status: active -->`` line, is a ``preference`` claim."""
    items, left = [], 0
    pending = None  # the metadata line the next list item is the directive of
    lines = dict(_list_items(original, keep_other_lines=True))
    for number, line in lines.items():
        if line is None:  # a line that is neither a list item nor a metadata line ends the directive
            pending = None
            continue
        directive = read_directive_line(line)
        if directive is not None:
            pending = directive
            continue
        entry = read_entry(line)
        if pending is not None and pending.status == "active" and pending.observed is not None and entry.text:
            items.append(Item(number, entry.text, "preference", entry.written, entry.recall))
        else:  # superseded, the template's undated placeholder, or no directive at all
            left += 1
        pending = None
    suffix = f" (profile {one_line(profile)})" if profile else ""
    return _page(original, "USER.md", (TAG, "user-model"), tuple(items), {"directives": left}, suffix)


def daily(original: Original) -> MemoryFile:
    """``memory/YYYY-MM-DD.md`` (and ``-slug``), or another file at the top of ``memory/``: a page, no claims."""
    stem = original.name.rsplit("/", 1)[-1][:-3]
    match = _DAILY.fullmatch(stem)
    if match is None:
        return MemoryFile(original, one_line(stem) or original.name, (TAG,), _body(original))
    try:
        day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError as exc:
        raise refused(original.name, None, f"is named like a daily note, but {stem[:10]} is no calendar date") from exc
    title = f"Daily memory {day.isoformat()}" + (f": {one_line(match.group(4))}" if match.group(4) else "")
    return MemoryFile(original, title, (TAG, "daily-note"), _body(original))


def note(original: Original, title: str, tag: str | None = None) -> MemoryFile:
    """A page of a file whose list items are not claims: dreaming's output, imported memory, other notes."""
    return MemoryFile(original, one_line(title) or original.name, (TAG, *([tag] if tag else [])), _body(original))


def dream_diary(original: Original) -> MemoryFile:
    return _page(original, original.name, (TAG, "dream-diary"), (), {})


def _page(original: Original, fallback: str, tags: tuple[str, ...], items: tuple[Item, ...],
          unclaimed: dict[str, int], suffix: str = "") -> MemoryFile:
    body = _body(original)
    heading = next((m.group(1) for m in map(_HEADING.match, body.splitlines()) if m), None)
    return MemoryFile(original, (one_line(heading) if heading else fallback) + suffix, tags, body, items,
                      {why: count for why, count in unclaimed.items() if count})


def _list_items(original: Original, *, keep_other_lines: bool = False) -> list[tuple[int, str | None]]:
    """(line, item text) of each list item outside fenced code; with ``keep_other_lines``, every other
    non-blank line too: a ``USER.md`` metadata line as it is, any other line as None."""
    found: list[tuple[int, str | None]] = []
    fenced = False
    for number, line in enumerate(original.text().splitlines(), start=1):  # a byte-order mark dropped
        if _FENCE.match(line):
            fenced = not fenced
            if keep_other_lines:
                found.append((number, None))
            continue
        match = None if fenced else _ITEM.match(line)
        if match is not None:
            text = match.group(1)
            if len(text) > TEXT_MAX_CHARS or any(ord(c) < 32 and c != "\t" for c in text):
                raise refused(original.name, f"line {number}", "holds a list item too long or with control characters")
            found.append((number, text))
        elif keep_other_lines and not fenced and line.strip():
            found.append((number, line if read_directive_line(line) is not None else None))
    return found


def _body(original: Original) -> str:
    body = clean_text(original.text()).strip("\n")
    if len(body) > BODY_MAX_CHARS:
        raise refused(original.name, None, f"is longer than {BODY_MAX_CHARS} characters")
    return body
