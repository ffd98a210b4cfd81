"""Pages revised in the store since an import last wrote them: edits a later import of the same input keeps.

An import's page is the import's own while its current version is the one the import last wrote: the
revision's attribution names the import (``import-<format>``) and the file holds the bytes the import
published with that revision number (the first kept with it, written by the engine).  Anything else is an
edit the owner or an agent made since: an agent's or the owner's revision (``knowledge_save_page``, a recall
approval) names its writer, an edit made outside the engine (in Obsidian or a text editor, in the store's
vault) keeps the number but not the bytes (docs/record-format.md, "Edits made outside the engine"), and one
that changed the number by hand (``revision: 2`` made ``revision: 3``) carries a number the engine never
wrote.  A Markdown or memory-core import run again leaves such a page as it is, unless the owner asks it to
replace the edits (docs/import-export.md, "Edits made in the store").

The version an import last wrote is found in the revision archive: the newest kept version whose attribution
names the import and that the engine published, the first kept with its number (not an outside edit of it,
not a version a sync merge archived without letting it stand).  Whether the input changed since is asked of
that version, not of the edited one: a note that still says what the import last wrote has nothing new to
bring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .answers import KeptEdit
from ..core.words import counted, for_count
from ..store.catalog_reads import CatalogReads, RevisionRow
from ..vault.record_view import view_of
from ..vault.records import parse_record


@dataclass(frozen=True)
class Edit:
    """Why a page's current version is not the one the import last wrote, and that version (as
    ``Writer.current_page`` answers a page: ``title``, ``frontmatter``, ``body``), None when the archive no
    longer holds it (a store restored without its history)."""

    why: str
    imported: dict[str, Any] | None


def page_edit(catalog: CatalogReads, partition: str, page_id: str, page: dict[str, Any],
              instance: str) -> Edit | None:
    """The edit made to an import's page since the import (``instance``) last wrote it; None when its current
    version (``page``, as ``Writer.current_page`` answers it) is the import's own."""
    frontmatter = page.get("frontmatter") or {}
    writer = frontmatter.get("attribution") if isinstance(frontmatter.get("attribution"), dict) else {}
    revision = frontmatter.get("revision")
    if writer.get("instance") == instance:
        first = catalog.first_kept(partition, page_id, revision) if isinstance(revision, int) else None
        if first == (page.get("sha256"), "publication"):  # the bytes the import published with that number
            return None
        if first is not None and first[1] == "publication":
            why = f"edited outside the engine since the import wrote revision {revision}"
        else:  # a number the engine never wrote: changed by hand in the file
            why = f"revision {revision} was not written by the import: its number was changed outside the engine"
    else:
        who = writer.get("agent") or "someone"
        by = f"{who} ({writer['instance']})" if writer.get("instance") and writer.get("instance") != who else who
        why = f"revision {revision} was written by {by}, not by the import"
    return Edit(why, imported_version(catalog.revisions(partition, page_id, newest_first=True), instance))


def imported_version(kept: list[RevisionRow], instance: str) -> dict[str, Any] | None:
    """Of a record's kept versions (newest first), the newest an import (``instance``) wrote, as a page is
    answered; None when none is kept."""
    standing = [row for row in kept if row.origin != "sync"]
    first_with_number: dict[int, str] = {}
    for row in reversed(standing):  # oldest first: the first kept with each number
        first_with_number.setdefault(row.revision, row.sha256)
    for row in standing:
        if first_with_number.get(row.revision) != row.sha256 or row.origin != "publication":
            continue  # an edit made outside the engine, that kept the number or changed it
        record, _ = parse_record(row.content, row.path)
        if record is None:
            continue
        view = view_of(record.frontmatter)
        if (view.attribution or {}).get("instance") == instance:
            return {"title": view.title, "frontmatter": record.frontmatter, "body": record.body}
    return None


def first_written_by(kept: list[RevisionRow], instance: str) -> bool:
    """Whether a record's first kept version (``kept`` oldest first) was written by ``instance``: a page an
    import made, whoever revised it since."""
    first = next((row for row in kept if row.origin != "sync"), None)
    if first is None:
        return False
    record, _ = parse_record(first.content, first.path)
    return record is not None and (view_of(record.frontmatter).attribution or {}).get("instance") == instance


def kept_edits_note(kept: list[KeptEdit], dry_run: bool, what: str = "note") -> list[str]:
    """The result's note on the changed inputs (``what``: a note, a memory file) whose pages were revised in the
    store since, left as they are (``keptEdits`` says what revised each)."""
    if not kept:
        return []
    shown = ", ".join(edit["path"] for edit in kept[:10]) + (f" and {len(kept) - 10:,} more" if len(kept) > 10
                                                                else "")
    left = for_count(len(kept), "it", "each") + (" would be" if dry_run else " was")
    return [f"Kept your edits: {counted(len(kept), what)} changed since an earlier import, but "
            f"{for_count(len(kept), 'its page has', 'their pages have')} been revised in the store since (by the "
            f"owner or an agent), so {left} left as it is: {shown}. To take the "
            f"{for_count(len(kept), what, what + 's')} anyway, import again replacing edits (--replace-edits, or "
            "Replace edits made in the store in the Import dialog); the edits stay in History."]
