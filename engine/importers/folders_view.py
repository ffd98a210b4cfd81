"""``operator/folders``: an imported vault's notes by the folder each came from, as the owner browses them.

A note's folder is a fact the import keeps: each page a Markdown import made cites, first, the note's
original retained under the vault folder's name and the note's path in it (``markdown.retained_name``:
``notes › Projects › Alpha › Plan.md``), so the folder is all of that name but its last part, written as a
path (``notes/Projects/Alpha``).  The
folder also became one of the page's tags at import, but a tag can be the note's own too, so the tags are
not read for this, with one exception: an empty note (a chapter's heading, say) has no original to retain
(an empty file can back no citation), and its page, which cites nothing and holds no tag but its folder's,
is placed by that tag and its title in the vault that holds that folder (the vault imported, when the
store holds one; else the one vault whose notes are in that folder).  Pages made another way, or whose
first citation is no longer the original, are in no folder.

    operator/folders  agent, folder?, offset?, limit?   {folders: [{folder, notes}]} (every folder holding
                                                         notes, by path); with ``folder``, also a page of its
                                                         notes by title, as ``operator/records`` lists them
                                                         (``records``, ``total``, ``offset``, ``nextOffset?``)
    operator/noteLink agent, from, name                  {id: the page ``[[name]]`` in page ``from`` names, as
                                                         the import resolved it, or null}

A ``[[link]]`` names a note by its file name or path (``[[learnings-index]]``), which is the page's title only
when the note has no ``title`` of its own; the window follows a link by ``operator/noteLink`` first, which
resolves the name among the notes of the linking note's vault as the import did (``markdown.resolve_note``:
by path from the vault's root or the note's folder, then by file name, the nearest first), and only then by
title or search.
"""

from __future__ import annotations

from typing import Any

from ..access.authority import Authority, OperatorCaller
from ..core.answers import NotRequired, TypedDict
from ..core.params import AgentName, Integer, Params, String
from ..operator.browse import ListedRecord, listed_record
from ..service import Engine
from ..store.catalog_reads import RecordRow
from ..store.open_store import ReadView
from ..runtime import StoreRuntime
from .common import SourceReader, first_source, import_instance
from .markdown import RETAINED_SEPARATOR, wanted_note

FOLDER_MAX_CHARS = 4096
LIMIT_DEFAULT, LIMIT_MAX = 200, 500
NOTE_LINK = Params(AgentName("agent", required=True),
                   String("from", 64, required=True, min_chars=1, what="the id of the page holding the link"),
                   String("name", FOLDER_MAX_CHARS, required=True, min_chars=1,
                          what="a [[link]]'s target as written, without heading or label"))
FOLDERS = Params(AgentName("agent", required=True),
                 String("folder", FOLDER_MAX_CHARS, min_chars=1, what="a folder path from operator/folders"),
                 Integer("offset", 0, default=0), Integer("limit", 1, LIMIT_MAX, default=LIMIT_DEFAULT))


class FolderCount(TypedDict):
    folder: str
    notes: int


class NoteFolders(TypedDict):
    folders: list[FolderCount]
    records: NotRequired[list[ListedRecord]]
    total: NotRequired[int]
    offset: NotRequired[int]
    nextOffset: NotRequired[int]


class NoteLink(TypedDict):
    id: str | None


def note_link(engine: Engine, params: dict[str, Any]) -> NoteLink:
    """The page a ``[[name]]`` of page ``from`` names, as the Markdown import resolved it (None when ``from``
    is no imported note, or the name is none of its vault's notes)."""
    values = NOTE_LINK.read(params)

    def work(runtime: StoreRuntime, authority: Authority, view: ReadView) -> NoteLink:
        notes = notes_of(view, authority.partition)
        here = next((path for path, row in notes if row.record_id == values["from"]), None)
        if here is None:
            return {"id": None}
        vault, _, relative = here.partition("/")
        in_vault: dict[str, RecordRow] = {}
        for path, row in notes:
            if path.partition("/")[0] == vault:
                in_vault.setdefault(path.partition("/")[2], row)
        found = wanted_note(in_vault, relative, values["name"])
        return {"id": in_vault[found].record_id if found is not None else None}

    return engine.enter(OperatorCaller(values["agent"]), create=False).read(work)


def note_folders(engine: Engine, params: dict[str, Any]) -> NoteFolders:
    values = FOLDERS.read(params)

    def work(runtime: StoreRuntime, authority: Authority, view: ReadView) -> NoteFolders:
        by_folder = folders_of(view, authority.partition)
        answer: NoteFolders = {"folders": [{"folder": folder, "notes": len(rows)}
                                           for folder, rows in sorted(by_folder.items())]}
        if values["folder"] is not None:
            rows = sorted(by_folder.get(values["folder"], []), key=lambda row: ((row.title or "").lower(),
                                                                                 row.record_id or ""))
            offset, limit = values["offset"], values["limit"]
            answer.update(records=[listed_record(row) for row in rows[offset:offset + limit]], total=len(rows),
                          offset=offset)
            if offset + limit < len(rows):
                answer["nextOffset"] = offset + limit
        return answer

    return engine.enter(OperatorCaller(values["agent"]), create=False).read(work)


def folders_of(view: ReadView, partition: str) -> dict[str, list[RecordRow]]:
    """The current pages a Markdown import made, by the folder of the original each cites first."""
    found: dict[str, list[RecordRow]] = {}
    for path, row in notes_of(view, partition):
        found.setdefault(path.rpartition("/")[0], []).append(row)
    return found


def notes_of(view: ReadView, partition: str) -> list[tuple[str, RecordRow]]:
    """The current pages a Markdown import made, each with the path of the original it cites first, the
    vault folder's name first (``notes/Projects/Alpha/Plan.md``); an empty note's page, which cites none,
    with the path its folder tag and title give it (``empty_notes_placed``)."""
    sources = SourceReader(view, partition)
    instance = import_instance("markdown")
    found: list[tuple[str, RecordRow]] = []
    empty: list[RecordRow] = []
    for row in view.catalog.current(partition, kind="page"):
        source = first_source(row.view)
        if source is None and not row.view.evidence and len(row.view.tags or ()) <= 1 \
                and (row.view.attribution or {}).get("instance") == instance:
            empty.append(row)  # an empty note: nothing retained, nothing cited
            continue
        if sources.instance(source) != instance:  # the original's, not the page's: a later revision keeps it
            continue
        parts = (sources.filename(source) or "").split(RETAINED_SEPARATOR)
        if len(parts) > 1:
            found.append(("/".join(parts), row))
    return found + empty_notes_placed(found, empty)


def empty_notes_placed(notes: list[tuple[str, RecordRow]], empty: list[RecordRow]) -> list[tuple[str, RecordRow]]:
    """The pages of empty notes, each with its path in its vault: its folder (the one tag the import gave it;
    none at the vault's top) and its title as the file's name, in the vault ``notes`` (the pages placed by
    their originals) show that folder in; when the store holds one vault, in that one.  A page whose folder
    is in several vaults, or in none with several imported, is left out: which vault holds it is not known."""
    folders: dict[str, set[str]] = {}  # by vault: every folder its notes are in, and the folders above them
    for path, _ in notes:
        vault, _, inside = path.partition("/")
        known = folders.setdefault(vault, {""})
        folder = inside.rpartition("/")[0]
        while folder:
            known.add(folder)
            folder = folder.rpartition("/")[0]
    placed: list[tuple[str, RecordRow]] = []
    for row in empty:
        folder = (row.view.tags or ("",))[0]
        vaults = list(folders) if len(folders) == 1 else [vault for vault, known in folders.items()
                                                          if folder in known]
        if len(vaults) == 1 and row.title:
            placed.append(("/".join(part for part in (vaults[0], folder, f"{row.title}.md") if part), row))
    return placed
