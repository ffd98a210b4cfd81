"""Importing an OpenClaw agent workspace's memory (memory-core, as OpenClaw 2026.9 lays it out).

PATH is the workspace folder (or its ``MEMORY.md``).  What becomes of each file:

- ``MEMORY.md``, the curated long-term memory, and a legacy lowercase ``memory.md`` beside it (OpenClaw's
  doctor warns it is shadowed and merges it into ``MEMORY.md``; until then it holds older memory, so both
  are imported): one ``note`` page each (title: its first ``# heading``, else the file name; body: the
  file), and each list item one ``fact`` claim with assertion origin ``source``, citing that line of the
  retained file with the item as quote.  An open task (``- [ ] Renew the passport``) is a ``commitment``,
  a done one (``- [x] Sent Lotte the photos``) an ``event``, each with the words after the box; a task with
  another status (``[-]``, ``[>]`` ...) or no text stays in the body only;
- an entry ``memory promote`` wrote (``- SNIPPET [score=… signals=… recalls=… avg=… source=memory/
  2026-12-02.md:1-6]``, or ``- SNIPPET Source: memory/2026-12-02.md#L1-L6``) is a ``fact`` claim of what
  the snippet says, the daily note's collapsed headings left out; it cites its ``MEMORY.md`` line with the
  snippet as quote and, where that daily note is in the workspace and those lines still hold the snippet,
  the retained note at those lines.  The score metadata stays in the page's body only;
- OpenClaw's recall annotations trailing an entry (``<!-- trigger: … -->``, ``<!-- importance: N -->``,
  ``<!-- project: … -->``) are never a claim's text or quote: the result lists them as
  ``recallProposals`` (claim, file, line, triggers, importance, projects), approved by nobody: approving
  recall is the owner's own act (docs/import-export.md says how);
- ``USER.md`` and ``users/<profile>/USER.md``, the user model: one ``note`` page each (tagged
  ``user-model``; a per-user page's title names the profile), and each active directive (a list item
  under a dated ``<!-- observed: YYYY-MM-DD | status: active -->`` line) a ``preference`` claim; a
  superseded directive, the template's undated placeholder and the template's own guidance stay in the body;
- daily notes ``memory/YYYY-MM-DD.md`` (``-slug`` after the date): a ``note`` page ``Daily memory
  YYYY-MM-DD`` each, no claims (a day's log is not a list of facts); other Markdown files under ``memory/``
  a page titled with their path;
- ``memory/imports/<tool>/**.md``, the memory ``openclaw migrate`` and the Import Memory page copied from
  Claude Code, Codex or Hermes: a page ``Imported from <tool>: <path>`` each, no claims (another tool's
  files as it wrote them, which OpenClaw too keeps apart from ``MEMORY.md``);
- ``DREAMS.md`` (or ``dreams.md``), the Dream Diary, and dreaming's reports ``memory/dreaming/<phase>/*.md``:
  a page each, no claims (the agent's reflections, not stated facts).

Everything else of the workspace (``AGENTS.md``, ``SOUL.md``, ``skills/``, a file under ``memory/`` that is
no Markdown ...) is left out and named in ``leftOut`` and a note; a symbolic link (a linked ``MEMORY.md``,
``memory/`` folder or file in it) is never followed, and named too (engine/importers/folders.py).

Every file is retained as the original its page and claims cite, named by the workspace folder and the
file's path in it (``workspace › memory › 2026-01-15.md``).  Imported again, a file whose page says the
same is left as it is, a changed one gets the next revision of its page (unless the page was revised in the
store since the import wrote it: then the file, its list items included, is left as it is and listed in
``keptEdits``, engine/importers/edits.py; ``replaceEdits`` takes it anyway), and only list items no earlier
claim holds become claims; an item whose earlier claim has the same text but another kind (a task since
ticked off) gets a new claim that replaces that one.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from . import memory_core_files as read
from .answers import KeptEdit, MemoryCoreImport, RecallProposal
from .common import (Original, Scan, SourceReader, Writer, first_source, import_instance, refuse_secrets, report,
                     revised_note, says_same)
from .edits import first_written_by, imported_version, kept_edits_note
from .folders import InputFolder, left_out_notes, walk_input
from .memory_core_entries import source_lines_say
from .memory_core_files import Item, MemoryFile
from ..core.errors import InvalidParams
from ..core.words import counted, for_count
from ..store.writes import one_line_title

FORMAT = "memory-core"
_LONG_TERM = ("MEMORY.md", "memory.md")
_DREAMS = ("DREAMS.md", "dreams.md")
_FOLDERS = ("memory", "users")  # the workspace's folders an import reads


def load_memory_core(path: str, scan: Scan) -> tuple[list[MemoryFile], str, tuple[str, ...], tuple[str, ...]]:
    """The workspace's memory files, parsed and checked before anything is written; the workspace folder's
    name; what of the workspace is not memory (left out); the symbolic links not followed."""
    root = Path(path)
    if root.name.lower() == "memory.md" and (root.is_file() or root.is_symlink()):
        root = root.parent
    if not root.is_dir():
        raise InvalidParams(f"{path} is neither an agent workspace folder nor its MEMORY.md", file=str(path))
    top = walk_input(root, depth=1)
    links = list(top.symlinks)
    files, left_out = [], []
    for name in top.files:
        if name in _LONG_TERM:
            files.append(read.long_term(Original(name, top.read(name))))
        elif name == "USER.md":
            files.append(read.user_model(Original(name, top.read(name)), None))
        elif name in _DREAMS:
            files.append(read.dream_diary(Original(name, top.read(name))))
        else:
            left_out.append(name)
    for folder in _FOLDERS:
        if folder in top.symlinks or not (root / folder).is_dir():
            continue
        inside = walk_input(root / folder)
        links += [f"{folder}/{link}" for link in inside.symlinks]
        for name in inside.files:
            memory = (_memory_file if folder == "memory" else _user_file)(inside, name)
            if memory is None:
                left_out.append(f"{folder}/{name}")
            else:
                files.append(memory)
    left_out += [f"{name}/" for name in _other_folders(root)]
    if not files:
        raise InvalidParams(f"{path} holds neither MEMORY.md nor any other memory file (USER.md, DREAMS.md, "
                            "memory/*.md)", file=str(path))
    for memory in files:
        refuse_secrets(scan, memory.original, lambda: ())
    return files, root.absolute().name, tuple(sorted(left_out)), tuple(sorted(links))


def _memory_file(inside: InputFolder, name: str) -> MemoryFile | None:
    """A Markdown file under ``memory/``: a daily note, imported memory, a dreaming report, another note."""
    parts = PurePosixPath(name).parts
    if not name.lower().endswith(".md"):
        return None
    original = Original(f"memory/{name}", inside.read(name))
    shown = name[:-3]
    if parts[0] == "imports" and len(parts) > 2:
        return read.note(original, f"Imported from {parts[1]}: {'/'.join(parts[2:])[:-3]}", "imported-memory")
    if parts[0] == "imports":
        return read.note(original, f"Imported memory: {shown}", "imported-memory")
    if parts[0] == "dreaming":
        return read.note(original, f"Dreaming report: {shown.split('/', 1)[-1]}", "dreaming-report")
    return read.daily(original) if len(parts) == 1 else read.note(original, shown)


def _user_file(inside: InputFolder, name: str) -> MemoryFile | None:
    """``users/<profile>/USER.md``; anything else under ``users/`` is no user model."""
    parts = PurePosixPath(name).parts
    if len(parts) != 2 or parts[1] != "USER.md":
        return None
    return read.user_model(Original(f"users/{name}", inside.read(name)), parts[0])


def _other_folders(root: Path) -> list[str]:
    """The workspace's own folders an import does not read (``skills``, ``canvas`` ...): dot-folders and
    links aside (the walk names the links)."""
    with os.scandir(root) as entries:
        return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
                      and e.name not in _FOLDERS)


def import_memory_core(writer: Writer, files: list[MemoryFile], workspace: str = "",
                       left_out: tuple[str, ...] = (), links: tuple[str, ...] = ()) -> MemoryCoreImport:
    """One page per file, and the list items of MEMORY.md and the active directives of USER.md as claims.

    A file an earlier import of the workspace made a page of (found by the file name its original was
    retained under: the workspace's name and the file's path in it) that says the same is left as it is;
    one that changed gets the next revision of that page, citing the newer file, unless the page was revised in
    the store since the import last wrote it (by the owner, an agent, an edit outside the engine): then nothing
    of the file is written (no revision, no new claim of its items) and it is listed in ``keptEdits``, unless
    the writer replaces edits.  A list item that is already a claim an earlier import made is not claimed again.
    """
    # Found by the file name alone (no type or tag filter): an agent's revision of a page need not keep its tags.
    earlier = writer.imported_by_original("page", revised_since=True)
    claimed = writer.imported_records(lambda row, _: row.title, kind="claim", active_only=True)
    revised_claims = _revised_claims(writer)  # an owner's correction superseded one, a hand edit, ...
    retained: dict[str, list[str]] = {}

    def sources_of(memory: MemoryFile) -> list[str]:
        """The file retained (once an import), its source ids."""
        if memory.original.name not in retained:
            retained[memory.original.name] = writer.retain(memory.original, memory.key, media_type="text/markdown",
                                                           filename=retained_name(workspace, memory))
        return retained[memory.original.name]

    pages, revised, kept_edits = {}, 0, {}
    for memory in files:
        params: dict[str, Any] = {"type": "note", "title": memory.title, "body": memory.body,
                                  "tags": list(memory.tags)}
        found = earlier.get(retained_name(workspace, memory))
        if found is not None:
            page = writer.current_page(found[0])
            edit = writer.page_edits({found[0]: page}).get(found[0])
            imported = page if edit is None else edit.imported  # what the import last wrote (None: not kept)
            if says_same(imported, params) if imported is not None else writer.cites(page, memory.original):
                if writer.cites(page, memory.original):  # the same file: retries, as it was retained
                    sources_of(memory)
                pages[memory.original.name] = writer.kept(found[0])
                continue
            if edit is not None and not writer.replace_edits:  # the file and its list items left as they are
                kept_edits[memory.original.name] = {"path": memory.original.name, "id": found[0], "why": edit.why}
                pages[memory.original.name] = writer.kept(found[0])
                continue
        params["evidence"] = [{"source": source} for source in sources_of(memory)]
        if found is not None:  # changed since the earlier import: that page's next revision, on the version read
            params = {"id": found[0], "expectedRevision": found[1], "expectedSha256": page["sha256"], **params}
            revised += 1
        pages[memory.original.name] = writer.save_page(memory.key, params)

    by_name = {memory.original.name: memory for memory in files}
    claims, replacing, proposals, kept_claims = 0, set(), [], []
    for done, memory in enumerate(files, start=1):
        new_items: list[tuple[Item, str | None]] = []  # the item, the claim it replaces
        held = memory.original.name in kept_edits  # its page's edits kept: no new claim of it either
        for item in memory.items:
            known = claimed.get(one_line_title(item.text)) or revised_claims.get(one_line_title(item.text))
            earlier_claim = writer.current_record(known[0]) if known is not None else None
            edit = writer.page_edits({known[0]: earlier_claim}).get(known[0]) if earlier_claim else None
            said = earlier_claim if edit is None else edit.imported  # what the import last wrote of it
            if said is None or (said.get("body") or "").strip() != item.text:
                new_items.append((item, None))
            elif said["frontmatter"].get("claim_kind") == item.kind:  # nothing new: an edit of the claim stands
                claims += 1
                proposals += _proposal(writer.kept(known[0], "claims"), memory, item)
            elif held:
                continue
            elif edit is not None and not writer.replace_edits:  # another kind now, but the claim was edited
                kept_claims.append({"path": memory.original.name, "line": item.line, "id": known[0], "why": edit.why})
                claims += 1
                writer.kept(known[0], "claims")
            elif earlier_claim["frontmatter"].get("lifecycle") not in (None, "active"):
                new_items.append((item, None))  # replacing edits: a claim a correction retired is not replaced
            elif known[0] not in replacing:  # the same words of another kind: a task ticked off, or a fact before
                replacing.add(known[0])
                new_items.append((item, known[0]))
            else:  # the same item twice in the file: its earlier claim is replaced once
                new_items.append((item, None))
        if held:
            new_items = []
        sources = sources_of(memory) if new_items else []
        if new_items and len(sources) == 1:
            written = []
            for item, replaced in new_items:
                evidence = [{"source": sources[0], "lines": [item.line, item.line], "quote": item.quote}]
                if (note := _daily_note(item, by_name)) is not None and len(daily := sources_of(note)) == 1:
                    evidence.append({"source": daily[0], "lines": [item.promoted.first, item.promoted.last]})
                written.append({"text": item.text, "claimKind": item.kind, "assertionOrigin": "source",
                                "evidence": evidence, **({"replaces": replaced} if replaced else {})})
            ids = writer.remember(f"{memory.key}-items", written)
            claims += len(ids)
            for claim, (item, _) in zip(ids, new_items):
                proposals += _proposal(claim, memory, item)
        writer.done(done, len(files), memory.original.name)
    kept = [kept_edits[memory.original.name] for memory in files if memory.original.name in kept_edits]
    notes = [*revised_note(writer, revised, "file"), *kept_edits_note(kept, writer.dry_run, "file"),
             *_kept_claims_note(kept_claims, writer.dry_run),
             *revised_note(writer, len(replacing), "list item", claims=True),
             *_unclaimed_notes(files), *_promoted_notes(files, by_name)]
    if proposals:
        many = len(proposals)
        notes.append(f"{counted(many, 'entry', 'entries')} {for_count(many, 'carries', 'carry')} OpenClaw's recall "
                     f"annotations (trigger, importance): {for_count(many, 'it is', 'they are')} listed in "
                     "recallProposals and approved by nobody; approving recall is the owner's.")
    notes += left_out_notes(links)
    if left_out:
        shown = ", ".join(left_out[:10]) + (f" and {len(left_out) - 10} more" if len(left_out) > 10 else "")
        notes.append(f"Left out {len(left_out)} {for_count(len(left_out), 'file or folder', 'files and folders')} "
                     f"of the workspace that {for_count(len(left_out), 'is', 'are')} not its memory: {shown}.")
    return report(writer, MemoryCoreImport, files=len(files), pages=pages, claims=claims, revised=revised, notes=notes,
                  leftOut=[*links, *left_out], recallProposals=proposals,
                  **({"keptEdits": [*kept, *kept_claims]} if kept or kept_claims else {}))


def _revised_claims(writer: Writer) -> dict[str, tuple[str, int]]:
    """The claims an earlier import made that someone else revised since (an owner's or agent's correction
    that replaces one, which superseded it; a withdrawal), by the title the import wrote: ``(id, revision)``."""
    instance = import_instance(writer.format)

    def made_by_the_import(row: Any, read: SourceReader) -> bool:
        return (read.instance(first_source(row.view)) == instance
                and first_written_by(read.view.catalog.revisions(read.partition, row.record_id), instance))

    def imported_title(row: Any, read: SourceReader) -> str | None:
        if (row.view.attribution or {}).get("instance") == instance:
            return None  # the import's own revision: ``claimed`` finds it
        kept = read.view.catalog.revisions(read.partition, row.record_id, newest_first=True)
        version = imported_version(kept, instance)
        return None if version is None else version["title"]

    return writer.imported_records(imported_title, kind="claim", made_by=made_by_the_import, retired=True)


def _kept_claims_note(kept: list[KeptEdit], dry_run: bool) -> list[str]:
    """The result's note on the list items of another kind now (a task ticked off) whose claims were revised in
    the store since, left as they are."""
    if not kept:
        return []
    many = len(kept)
    left = for_count(many, "it", "each") + (" would be" if dry_run else " was")
    return [f"Kept your edits: {counted(many, 'list item')} changed since an earlier import, but "
            f"{for_count(many, 'its claim has', 'their claims have')} been revised in the store since (by the owner "
            f"or an agent), so {left} left as it is (keptEdits names {for_count(many, 'it', 'them')}). To take "
            f"{for_count(many, 'it', 'them')} anyway, import again replacing edits."]


def retained_name(workspace: str, memory: MemoryFile) -> str:
    """The file name a memory file is retained under: the workspace's name and the file's path in it
    (``workspace › memory › 2026-01-15.md``), which is how a later import of the workspace finds its page."""
    return " › ".join([*([workspace] if workspace else []), *memory.original.name.split("/")])


def _daily_note(item: Item, by_name: dict[str, MemoryFile]) -> MemoryFile | None:
    """A promoted entry's daily note: when it is in the workspace and the lines the entry names still hold
    its snippet (a note edited since is not cited for what it no longer says)."""
    if item.promoted is None:
        return None
    name = item.promoted.path.replace("\\", "/").removeprefix("./")
    note = by_name.get(name) if name.startswith("memory/") else None
    if note is None or not source_lines_say(note.original.text().splitlines(), item.promoted, item.quote):
        return None
    return note


def _proposal(claim: str, memory: MemoryFile, item: Item) -> list[RecallProposal]:
    """The recall OpenClaw's annotations propose for one claim, or nothing when the item carries none."""
    if not item.recall:
        return []
    return [{"claim": claim, "file": memory.original.name, "line": item.line, "triggers": list(item.recall.triggers),
             "importance": item.recall.importance, "projects": list(item.recall.projects)}]


def _unclaimed_notes(files: list[MemoryFile]) -> list[str]:
    def count(why: str) -> int:
        return sum(memory.unclaimed.get(why, 0) for memory in files)

    def stay(number: int) -> str:
        return for_count(number, "stays in its page's body and is not a claim", "stay in their page's body and are not "
                         "claims")

    notes = []
    if tasks := count("tasks"):
        notes.append(f"{counted(tasks, 'task-list item')} neither open nor done ([-], [>], ...) or without text "
                     f"{stay(tasks)}.")
    if empty := count("empty"):
        notes.append(f"{counted(empty, 'list item')} with no words (a promoted entry of headings alone, an item that "
                     f"is only a comment) {stay(empty)}.")
    if directives := count("directives"):
        notes.append(f"{counted(directives, 'list item')} of USER.md that {for_count(directives, 'is', 'are')} no "
                     "active directive (superseded, the template's undated placeholder, guidance without an observed "
                     f"line) {stay(directives)}.")
    return notes


def _promoted_notes(files: list[MemoryFile], by_name: dict[str, MemoryFile]) -> list[str]:
    promoted = [item for memory in files for item in memory.items if item.promoted is not None]
    if not promoted:
        return []
    cited = sum(1 for item in promoted if _daily_note(item, by_name) is not None)
    many = len(promoted)
    return [f"{counted(many, 'entry', 'entries')} written by memory promote "
            f"{for_count(many, 'is', 'are')} claimed as the fact {for_count(many, 'it carries', 'they carry')}, citing "
            f"{for_count(many, 'its', 'their')} MEMORY.md line; {cited} also {for_count(cited, 'cites', 'cite')} the "
            f"daily note lines {for_count(cited, 'it', 'they')} came from, the rest name a daily note that is not in "
            "the workspace or no longer says it."]
