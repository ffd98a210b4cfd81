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

Imported again (a newer export): a memory whose claim an earlier import made
(found by its ``id``) and whose text is the same is left as it is; one whose
text changed gets a new claim replacing the earlier one (``replaces``: that
claim's next revision is ``superseded``).

Dates (docs/import-export.md): a memory's ``expiration_date`` (after which mem0
no longer retrieves it) is its claim's ``validTo``.  ``created_at`` and
``updated_at`` say when mem0 recorded or rewrote a memory, not when what it
says held (an update may fix a mistake as well as follow a change): they stay
in the cited JSON, and a changed memory's earlier claim is superseded.
"""

from __future__ import annotations

import json
from typing import Any

from .answers import Mem0Import
from .common import Original, Scan, Writer, first_source, read_export, refuse_secrets, refused, report, revised_note
from .json_shapes import load_json
from .text import clean_text
from ..store.inputs import EXCERPT_MAX_CHARS, ITEMS_MAX, TEXT_MAX_CHARS
from ..vault.record_view import validity_moment

FORMAT = "mem0"


def load_mem0(path: str, scan: Scan) -> tuple[Original, list[tuple[str, str, str]], int, int]:
    """The export and its memories as (place, text, the memory's JSON), checked whole; how many deleted
    memories are skipped; and how many graph relations (``relations``, beside mem0's results) are left out."""
    original = read_export(path, "memories.json")
    data = load_json(original)
    memories, skipped = parse_memories(original, data)
    relations = data.get("relations") if isinstance(data, dict) else None
    if relations is not None and not isinstance(relations, list):
        raise refused(original.name, "relations", "must be a list of relations")
    # each memory as its claim will hold it: its text, and its JSON as the claim's excerpt
    refuse_secrets(scan, original, lambda: ((place, stored) for place, text, record in memories
                                            for stored in (text, record)))
    return original, memories, skipped, len(relations or [])


def import_mem0(writer: Writer, original: Original, memories: list[tuple[str, str, str]],
                skipped: int, relations: int = 0) -> Mem0Import:
    """One claim per memory, citing the memory's JSON and the retained export.

    A memory an earlier import made a claim of (found by the memory's ``id`` in the JSON that claim
    cites, or by that whole JSON when the memory has no id) whose text is the same is left as it is;
    one whose text changed gets a new claim that replaces the earlier one (which becomes ``superseded``,
    its next revision).  The export is retained only when a claim of its is written.
    """
    earlier = writer.imported_records(lambda row, read: _memory_key(read.text(first_source(row.view))),
                                      kind="claim", active_only=True)
    plan: list[tuple[str, str, str, str | None, str | None]] = []  # place, text, record, kept, replaced
    rerun: list[bool] = []  # decided at the first unchanged claim: does it cite this very export?
    for place, text, record in memories:
        found = earlier.get(_memory_key(record))
        if found is not None:
            claim = writer.current_record(found[0])
            if (claim.get("body") or "").strip() == text:
                if not rerun:
                    rerun.append(writer.cites(claim, original))
                plan.append((place, text, record, found[0], None))
                continue
        plan.append((place, text, record, None, found[0] if found is not None else None))
    writes = any(kept is None for _, _, _, kept, _ in plan)
    sources = writer.retain(original, "export") if writes or (rerun and rerun[0]) else []
    claims: list[str] = []
    revised = 0
    for start in range(0, len(plan), ITEMS_MAX):
        chunk = plan[start:start + ITEMS_MAX]
        items = [{"text": text, "claimKind": "fact", "assertionOrigin": "source",
                  "evidence": [{"excerpt": record}, *({"source": source} for source in sources)],
                  **({"replaces": replaced} if replaced else {}), **_validity(record)}
                 for _, text, record, kept, replaced in chunk if kept is None]
        written = iter(writer.remember(f"memories-{start // ITEMS_MAX + 1}", items) if items else [])
        for _, _, _, kept, replaced in chunk:
            claims.append(writer.kept(kept, "claims") if kept is not None else next(written))
            revised += kept is None and replaced is not None
        writer.done(start + len(chunk), len(plan), chunk[-1][0])
    notes = [f"Skipped {skipped} deleted memories."] if skipped else []
    if not memories and not skipped:
        notes.append(f"{original.name} holds no memories: nothing to import.")
    if relations:  # the graph's links between names: no memory's text, so nothing to claim as it was said
        notes.append(f"Left out {relations} graph relations ('relations'): they are links between names, not "
                     "memories, and are not imported.")
    notes += revised_note(writer, revised, "memory", claims=True, plural="memories")
    return report(writer, Mem0Import, file=original.name, sha256=original.sha256, memories=len(memories),
                  skippedDeleted=skipped, **({"relationsLeftOut": relations} if relations else {}), claims=claims,
                  revised=revised, notes=notes)


def _validity(record: str) -> dict[str, str]:
    """The claim's ``validTo``: the memory's ``expiration_date``, when it is a date or a date-time with an
    offset (anything else stays in the cited JSON only)."""
    try:
        memory = json.loads(record)
    except ValueError:
        return {}
    expires = memory.get("expiration_date") if isinstance(memory, dict) else None
    return {"validTo": expires} if validity_moment(expires) is not None else {}


def _memory_key(record: str | None) -> str | None:
    """What finds a memory's claim again: its mem0 id, or (a memory without one) its whole JSON."""
    if record is None:
        return None
    try:
        memory = json.loads(record)
    except ValueError:
        return None
    if not isinstance(memory, dict):
        return None
    memory_id = memory.get("id")
    if isinstance(memory_id, (str, int)) and not isinstance(memory_id, bool):
        return f"id:{memory_id!r}"
    return "record:" + record.strip()


def parse_memories(original: Original, data: Any) -> tuple[list[tuple[str, str, str]], int]:
    if isinstance(data, dict):
        key = "results" if "results" in data else "memories" if "memories" in data else None
        if key is None:
            raise refused(original.name, None, "holds neither a list of memories nor 'results' or 'memories' (a "
                          "mem0 platform memory export is shaped by the schema it was asked for, not memories: "
                          "save what get_all answers instead)")
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
