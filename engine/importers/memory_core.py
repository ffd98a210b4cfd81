"""Importing an agent host's memory files: ``MEMORY.md`` and the ``memory/YYYY-MM-DD.md`` daily notes.

An agent workspace keeps its curated long-term memory in ``MEMORY.md`` and a
running log per day in ``memory/YYYY-MM-DD.md`` (a name may go on after the
date: ``2026-01-15-release.md``).  PATH is the workspace folder (or its
``MEMORY.md``).

- ``MEMORY.md`` becomes one ``note`` page (title: its first ``# heading``,
  else ``MEMORY.md``; body: the file), and each list item in it one ``fact``
  claim with assertion origin ``source``, its text the item's, citing that
  line of the retained file with the item as quote.  A task-list item is no
  stated fact, and its box is markup, never a claim's text: an open task
  (``- [ ] Renew the passport``) is a ``commitment`` (something to do), a done
  one (``- [x] Sent Lotte the photos``) an ``event`` (something that
  happened), each with the item's text after the box; a task with another
  status (``[-]`` cancelled, ``[>]`` deferred, ``[/]`` ...) or no text stays in
  the page's body only;
- each daily note becomes one ``note`` page titled ``Daily memory
  YYYY-MM-DD`` (and the rest of its name), its body the file; other ``.md``
  files under ``memory/`` become pages titled with their name.  Their list
  items stay in the page's body: a day's log is not a list of facts.

Every file is retained as the original its page and claims cite, named by the
workspace folder and the file's path in it (``workspace › memory ›
2026-01-15.md``).  Imported again, a file whose page says the same is left as
it is, a changed one gets the next revision of its page, and only list items
no earlier claim holds become claims; an item whose earlier claim has the same
text but another kind (a task since ticked off, a task an earlier version
claimed as a fact) gets a new claim that replaces that one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from .common import (
    Original, Scan, Writer, clean_text, one_line, read_file, refuse_secrets, refused, report,
    revised_note, says_same,
)
from ..core.errors import InvalidParams
from ..store.inputs import BODY_MAX_CHARS, TEXT_MAX_CHARS
from ..store.writes import one_line_title

FORMAT = "memory-core"
_DAILY = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[-_ ](.+))?")
_ITEM = re.compile(r"^\s*(?:[-*+]|[0-9]+[.)])\s+(.*\S)\s*$")
# A task-list item's box: GitHub's ``[ ]`` and ``[x]``, and the one-character statuses Obsidian's themes and
# its Tasks plugin give other punctuation (``[-]`` cancelled, ``[>]`` deferred, ``[/]`` in progress).
_TASK = re.compile(r"\[([xX]|[^\w\]\[])\](?:\s+(.*))?")
_TASK_KINDS = {" ": "commitment", "x": "event", "X": "event"}  # open: something to do; done: it happened
_HEADING = re.compile(r"^#\s+(.*\S)\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TAG = "memory-core"


@dataclass(frozen=True)
class MemoryFile:
    original: Original
    title: str
    tags: tuple[str, ...]
    body: str
    items: tuple[tuple[int, str, str], ...]  # (line, text, claim kind) of MEMORY.md's list items; none for daily
    tasks_left: int = 0  # task-list items with another status or no text, left in the body

    @property
    def key(self) -> str:
        return "file-" + re.sub(r"[^A-Za-z0-9_.-]", "_", self.original.name)[:48]


def load_memory_core(path: str, scan: Scan) -> tuple[list[MemoryFile], str]:
    """MEMORY.md and memory/*.md of the workspace, parsed and checked before anything is written; and the
    workspace folder's name."""
    root = Path(path)
    if root.is_file() and root.name.lower() == "memory.md":
        root = root.parent
    if not root.is_dir():
        raise InvalidParams(f"{path} is neither an agent workspace folder nor its MEMORY.md",
                            file=str(path))
    files = []
    for name in ("MEMORY.md", "memory.md"):
        if (root / name).is_file():
            files.append(_long_term(Original(name, read_file(root / name))))
            break
    daily = root / "memory"
    if daily.is_dir():
        for entry in sorted(daily.iterdir()):
            if entry.is_file() and not entry.is_symlink() and entry.name.lower().endswith(".md"):
                files.append(_daily(Original(f"memory/{entry.name}", read_file(entry))))
    if not files:
        raise InvalidParams(f"{path} holds neither MEMORY.md nor memory/*.md", file=str(path))
    for memory in files:
        refuse_secrets(scan, memory.original, lambda: ())
    return files, root.absolute().name


def import_memory_core(writer: Writer, files: list[MemoryFile], workspace: str = "") -> dict[str, Any]:
    """One page per file, and MEMORY.md's list items as claims.

    A file an earlier import of the workspace made a page of (found by the file name its original was
    retained under: the workspace's name and the file's path in it) that says the same is left as it is;
    one that changed gets the next revision of that page, citing the newer file.  A list item that is
    already a claim an earlier import made is not claimed again.
    """
    earlier = writer.imported_by_original("page", type="note", tag=_TAG)
    claimed = writer.imported_records(lambda row, _: row.title, kind="claim", active_only=True)
    pages, claims, revised, tasks_left = {}, 0, 0, 0
    replacing: set[str] = set()  # the earlier claims replaced by an item of another kind
    for done, memory in enumerate(files, start=1):
        name = retained_name(workspace, memory)
        params: dict[str, Any] = {"type": "note", "title": memory.title, "body": memory.body,
                                  "tags": list(memory.tags)}
        found = earlier.get(name)
        sources: list[str] = []
        if found is not None and says_same(page := writer.current_page(found[0]), params):
            if writer.cites(page, memory.original):  # the same file: retries, as it was retained
                sources = writer.retain(memory.original, memory.key, media_type="text/markdown", filename=name)
            pages[memory.original.name] = writer.kept(found[0])
        else:
            sources = writer.retain(memory.original, memory.key, media_type="text/markdown", filename=name)
            params["evidence"] = [{"source": source} for source in sources]
            if found is not None:  # changed since the earlier import: that page's next revision
                params = {"id": found[0], "expectedRevision": found[1], **params}
                revised += 1
            pages[memory.original.name] = writer.save_page(memory.key, params)
        new_items: list[tuple[int, str, str, str | None]] = []  # line, text, kind, the claim it replaces
        for line, text, kind in memory.items:
            known = claimed.get(one_line_title(text))
            earlier_claim = writer.current_record(known[0]) if known is not None else None
            if earlier_claim is None or (earlier_claim.get("body") or "").strip() != text:
                new_items.append((line, text, kind, None))
            elif earlier_claim["frontmatter"].get("claim_kind") == kind:
                claims += 1
                writer.kept(known[0], "claims")
            elif known[0] not in replacing:  # the same words of another kind: a task ticked off, or a fact before
                replacing.add(known[0])
                new_items.append((line, text, kind, known[0]))
            else:  # the same item twice in the file: its earlier claim is replaced once
                new_items.append((line, text, kind, None))
        tasks_left += memory.tasks_left
        if new_items and not sources:  # an unchanged page of a file since edited: cite the file as it is
            sources = writer.retain(memory.original, memory.key, media_type="text/markdown", filename=name)
        if new_items and len(sources) == 1:
            claims += len(writer.remember(f"{memory.key}-items", [
                {"text": text, "claimKind": kind, "assertionOrigin": "source",
                 "evidence": [{"source": sources[0], "lines": [line, line], "quote": text}],
                 **({"replaces": earlier} if earlier else {})}
                for line, text, kind, earlier in new_items]))
        writer.done(done, len(files), memory.original.name)
    notes = revised_note(writer, revised, "file") + revised_note(writer, len(replacing), "list item", claims=True)
    if tasks_left:
        notes.append(f"{tasks_left} task-list item(s) neither open nor done ([-], [>], ...) or without text stay "
                     "in their page's body and are not claims.")
    return report(writer, files=len(files), pages=pages, claims=claims, revised=revised, notes=notes)


def retained_name(workspace: str, memory: MemoryFile) -> str:
    """The file name a memory file is retained under: the workspace's name and the file's path in it
    (``workspace › memory › 2026-01-15.md``), which is how a later import of the workspace finds its page."""
    return " › ".join([*([workspace] if workspace else []), *memory.original.name.split("/")])


def _long_term(original: Original) -> MemoryFile:
    body = _body(original)
    heading = next((m.group(1) for m in map(_HEADING.match, body.splitlines()) if m), None)
    items, tasks_left = [], 0
    fenced = False
    for number, line in enumerate(original.text().splitlines(), start=1):  # a byte-order mark dropped
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _ITEM.match(line)
        if match is not None:
            text = match.group(1)
            if len(text) > TEXT_MAX_CHARS or any(ord(c) < 32 and c != "\t" for c in text):
                raise refused(original.name, f"line {number}", "holds a list item too long or with control characters")
            kind = "fact"
            task = _TASK.fullmatch(text)
            if task is not None:
                kind, text = _TASK_KINDS.get(task.group(1), ""), (task.group(2) or "").strip()
                if not kind or not text:  # cancelled, deferred, ...; or a box alone: nothing said to claim
                    tasks_left += 1
                    continue
            items.append((number, text, kind))
    return MemoryFile(original, one_line(heading) if heading else original.name, (_TAG,), body, tuple(items),
                      tasks_left)


def _daily(original: Original) -> MemoryFile:
    stem = original.name.rsplit("/", 1)[-1][:-3]
    match = _DAILY.fullmatch(stem)
    if match is None:
        return MemoryFile(original, one_line(stem) or original.name, (_TAG,), _body(original), ())
    try:
        day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError as exc:
        raise refused(original.name, None, f"is named like a daily note, but {stem[:10]} is no calendar date") from exc
    title = f"Daily memory {day.isoformat()}" + (f": {one_line(match.group(4))}" if match.group(4) else "")
    return MemoryFile(original, title, (_TAG, "daily-note"), _body(original), ())


def _body(original: Original) -> str:
    body = clean_text(original.text()).strip("\n")
    if len(body) > BODY_MAX_CHARS:
        raise refused(original.name, None, f"is longer than {BODY_MAX_CHARS} characters")
    return body
