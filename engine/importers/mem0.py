"""Importing a mem0 or OpenMemory export: each memory one claim, nothing invented.

Accepted shapes: a JSON list of memories; mem0's ``get_all`` answer
``{"results": [...]}``; OpenMemory's ``memories.json`` (``{"memories":
[...], ...}``, also inside its export zip).  A memory is an object whose
text is ``memory`` (mem0) or ``content`` (OpenMemory), with whatever else
the export keeps beside it (``id``, ``hash``, ``metadata``, ``categories``,
``user_id``, ``agent_id``, ``app_id``, ``run_id``, ``created_at``,
``updated_at``, ``state``).

Each memory becomes one ``fact`` claim with assertion origin ``source``:
its text is the memory's text, unchanged but for surrounding whitespace.
Its evidence is the memory's whole JSON object (metadata and all, indented
as JSON), retained as an excerpt, and the retained export file itself.  No subject,
kind or page is inferred.  Memories OpenMemory marks ``deleted`` are
skipped and counted.
"""

from __future__ import annotations

import json
from typing import Any

from .common import Original, Scan, Writer, clean_text, load_json, read_export, refuse_secrets, refused, report
from ..store.inputs import EXCERPT_MAX_CHARS, ITEMS_MAX, TEXT_MAX_CHARS

FORMAT = "mem0"


def load_mem0(path: str, scan: Scan) -> tuple[Original, list[tuple[str, str, str]], int]:
    """The export and its memories as (place, text, the memory's JSON), checked whole; and how many
    deleted memories are skipped."""
    original = read_export(path, "memories.json")
    memories, skipped = parse_memories(original, load_json(original))
    refuse_secrets(scan, original, lambda: ((place, record) for place, _, record in memories))
    return original, memories, skipped


def import_mem0(writer: Writer, original: Original, memories: list[tuple[str, str, str]],
                skipped: int) -> dict[str, Any]:
    sources = writer.retain(original, "export")
    claims: list[str] = []
    for start in range(0, len(memories), ITEMS_MAX):
        chunk = memories[start:start + ITEMS_MAX]
        items = [{"text": text, "claimKind": "fact", "assertionOrigin": "source",
                  "evidence": [{"excerpt": record}, *({"source": source} for source in sources)]}
                 for _, text, record in chunk]
        claims += writer.remember(f"memories-{start // ITEMS_MAX + 1}", items)
        writer.done(start + len(chunk), len(memories), chunk[-1][0])
    notes = [f"Skipped {skipped} deleted memories."] if skipped else []
    return report(writer, file=original.name, sha256=original.sha256, memories=len(memories),
                  skippedDeleted=skipped, claims=claims, notes=notes)


def parse_memories(original: Original, data: Any) -> tuple[list[tuple[str, str, str]], int]:
    if isinstance(data, dict):
        key = "results" if "results" in data else "memories" if "memories" in data else None
        if key is None:
            raise refused(original.name, None, "holds neither a list of memories nor 'results' or 'memories'")
        raw, prefix = data[key], key
    else:
        raw, prefix = data, ""
    if not isinstance(raw, list):
        raise refused(original.name, prefix or None, "must be a list of memories")
    memories, seen, skipped = [], set(), 0
    for index, memory in enumerate(raw):
        place = f"{prefix}[{index}]"
        if not isinstance(memory, dict):
            raise refused(original.name, place, "must be an object")
        if memory.get("state") == "deleted":
            skipped += 1
            continue
        field = "memory" if "memory" in memory else "content"
        text = memory.get(field)
        if not isinstance(text, str) or not text.strip():
            raise refused(original.name, f"{place}.{field}", "must be the memory's text (a non-empty string)")
        if "\x00" in text or len(text.strip()) > TEXT_MAX_CHARS:
            raise refused(original.name, f"{place}.{field}",
                          f"holds a NUL character or more than {TEXT_MAX_CHARS} characters")
        memory_id = memory.get("id")
        if isinstance(memory_id, (str, int)) and not isinstance(memory_id, bool):
            if memory_id in seen:
                raise refused(original.name, f"{place}.id", f"repeats the memory id {memory_id!r}")
            seen.add(memory_id)
        record = clean_text(json.dumps(memory, indent=2, ensure_ascii=False))
        if len(record) > EXCERPT_MAX_CHARS:
            raise refused(original.name, place, f"is longer than {EXCERPT_MAX_CHARS} characters as JSON")
        memories.append((place, clean_text(text).strip(), record))
    return memories, skipped
