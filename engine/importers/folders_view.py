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
by path from the vault's root or the note's folder, then by file name, the nearest first; in a Logseq graph by
a page's title or alias first: ``markdown.linked_note``, the one rule for both), and only then by title or
search.  A Logseq page is known by its original, retained as ``markdown.LOGSEQ_MEDIA_TYPE``; Folders lists it
under its namespace (``logseq.namespace_folder``).

Both methods read the partition's imported notes kept by vault, path and file name (``ImportedNotes``): read
whole at the first call, then brought up to date with only the records that changed since
(``CatalogReads.maintained``), the empty notes placed again among the others at each change.  So following a
link or listing the folders costs the same in a vault of 2,000 notes as in one of 20, where reading every
page's original cost 115-240 ms a call, and a note's folder and the note a link names come from one list.
"""

from __future__ import annotations

import threading
from collections.abc import Container, Iterator, Mapping
from typing import Any, Sequence

from ..access.authority import Authority, OperatorCaller
from ..core.answers import NotRequired, TypedDict
from ..core.params import AgentName, Integer, Params, String
from ..operator.browse import ListedRecord, listed_record
from ..service import Engine
from ..store.catalog_reads import RecordRow
from ..store.open_store import ReadView
from ..runtime import StoreRuntime
from .common import SourceReader, first_source, import_instance
from .logseq import namespace_folder
from .markdown import LOGSEQ_MEDIA_TYPE, RETAINED_SEPARATOR, linked_note, note_key

FOLDER_MAX_CHARS = 4096
LIMIT_DEFAULT, LIMIT_MAX = 200, 500
NOTES_UPDATE_MAX = 1000  # records changed past which the kept notes are read again whole
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
        return {"id": imported_notes(view, authority.partition).linked(values["from"], values["name"])}

    return engine.enter(OperatorCaller(values["agent"]), create=False).read(work)


def imported_notes(view: ReadView, partition: str) -> ImportedNotes:
    """The partition's imported notes, brought up to date with the catalog ``view`` reads."""

    def update(notes: ImportedNotes, changed: list[str]) -> ImportedNotes:
        if len(changed) > NOTES_UPDATE_MAX:  # an import's worth: read whole again
            return ImportedNotes(*notes_of(view, partition))
        notes.update(changed, *notes_of(view, partition, record_ids=changed))
        return notes

    return view.catalog.maintained(partition, "imported_notes", lambda: ImportedNotes(*notes_of(view, partition)),
                                   update)


class VaultNotes(Mapping[str, str]):
    """One imported vault's notes as a link names them: each note's path in the vault (``Plans/Alpha.md``) by
    its ``note_key``, the keys of the notes by file name (``named``), and a Logseq page's path by its title and
    aliases (``titled``).  Where pages share a path (two folders
    of one name imported), the newest page is the note's; where paths differ only in case, the path of the
    oldest page holds the key: as a list of the pages newest first, the last one wins."""

    def __init__(self) -> None:
        self.pages: dict[str, dict[str, str]] = {}  # path: {page id: updated_at}
        self._keys: dict[str, set[str]] = {}  # note_key: the paths of that key
        self._names: dict[str, set[str]] = {}  # a file name's key: the note_keys of that file name
        self._titles: dict[str, dict[str, int]] = {}  # a Logseq page's title or alias, lower case: {path: pages}
        self._titles_of: dict[str, tuple[str, ...]] = {}  # page id: the titles and aliases it is named by

    def add(self, path: str, record_id: str, updated_at: str, titles: Sequence[str] = ()) -> None:
        """Learn the page ``record_id`` of the note at ``path``; ``titles``: a Logseq page's title and aliases,
        which a link in the graph names it by first."""
        self.pages.setdefault(path, {})[record_id] = updated_at
        self._titles_of[record_id] = names = tuple(dict.fromkeys(title.lower() for title in titles if title))
        for name in names:
            paths = self._titles.setdefault(name, {})
            paths[path] = paths.get(path, 0) + 1
        if path.lower().endswith(".md"):
            key = note_key(path)
            self._keys.setdefault(key, set()).add(path)
            self._names.setdefault(key.rpartition("/")[2], set()).add(key)

    def remove(self, path: str, record_id: str) -> None:
        for name in self._titles_of.pop(record_id, ()):
            paths = self._titles[name]
            paths[path] -= 1
            if paths[path] <= 0:
                del paths[path]
            if not paths:
                del self._titles[name]
        pages = self.pages.get(path, {})
        pages.pop(record_id, None)
        if pages:
            return
        self.pages.pop(path, None)
        key = note_key(path)
        paths = self._keys.get(key, set())
        paths.discard(path)
        if not paths and key in self._keys:
            del self._keys[key]
            named = self._names[key.rpartition("/")[2]]
            named.discard(key)
            if not named:
                del self._names[key.rpartition("/")[2]]

    def newest(self, path: str) -> str:
        """The page of the note at ``path``: the newest of those citing it (then the lowest id)."""
        return _newest_first(self.pages[path])[0][1]

    def titled(self, name: str) -> list[str]:
        """The paths of the Logseq pages whose title or alias, lower case, is ``name``."""
        return list(self._titles.get(name, ()))

    @property
    def named_by_title(self) -> bool:
        """Whether the vault holds Logseq pages: a graph's, whose links name pages by title."""
        return bool(self._titles)

    def named(self, name: str) -> list[str]:
        """The paths of the notes whose file name's key is ``name``."""
        return [self[key] for key in self._names.get(name, ())]

    def __getitem__(self, key: str) -> str:
        paths = self._keys[key]
        if len(paths) == 1:
            return next(iter(paths))
        newest = {path: _newest_first(self.pages[path])[0] for path in paths}
        return _newest_first({path: at for path, (at, _) in newest.items()}, {p: r for p, (_, r) in newest.items()})[
            -1][1]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def _newest_first(updated: dict[str, str], ids: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """``(updated_at, key)`` of each key of ``updated``, in the catalog's newest-first order (``updated_at``
    descending, then the page id: the key's own, or its page's in ``ids``)."""
    by_id = sorted(updated, key=lambda key: (ids or {}).get(key, key))
    return [(updated[key], key) for key in sorted(by_id, key=lambda key: updated[key], reverse=True)]


class ImportedNotes:
    """The current pages a Markdown import made in one partition, by the vault and path of the note each was:
    those citing their original by its path (``notes_of``), those of empty notes where ``empty_notes_placed``
    places them among the others.  What following a ``[[link]]`` resolves a name among, and what the Folders
    view lists.  Reads beside the store's lane share it (``CatalogReads.maintained``), so it answers and changes
    under a lock of its own."""

    def __init__(self, cited: list[tuple[str, RecordRow]], empty: list[RecordRow], titled: set[str] = frozenset()
                 ) -> None:
        self._lock = threading.Lock()
        self._titled: set[str] = set()  # the ids of the cited pages that are Logseq pages, named by their titles
        self._cited: dict[str, tuple[str, RecordRow]] = {}  # page id: (path of its original, row)
        self._empty: dict[str, RecordRow] = {}  # page id: row, of the pages of empty notes
        self._folders: dict[str, dict[str, int]] = {}  # by vault: how many cited pages are in or under each folder
        self._placed: dict[str, tuple[str, str]] = {}  # page id: (vault, path in it)
        self._vaults: dict[str, VaultNotes] = {}
        self._by_folder: dict[str, list[RecordRow]] | None = None  # ``by_folder``, until the next change
        self.update((), cited, empty, titled)

    def linked(self, from_id: str, name: str) -> str | None:
        """The page ``[[name]]`` in page ``from_id`` names, as the import resolved it (``markdown.linked_note``,
        among the notes of its vault); None when ``from_id`` is no imported note, or the name none of them."""
        with self._lock:
            placed = self._placed.get(from_id)
            if placed is None:
                return None
            notes = self._vaults[placed[0]]
            found = linked_note(name, placed[1], notes, notes.named, lambda path: path,
                                notes.titled if from_id in self._titled else None)
            return notes.newest(found) if found is not None else None

    def by_folder(self) -> dict[str, list[RecordRow]]:
        """The pages by the folder of their note, the vault's name first (``notes/Projects/Alpha``), a Logseq
        page's under its namespace (``graph/pages/Project``: ``logseq.namespace_folder``), each folder's by title
        (in any case), then id."""
        with self._lock:
            if self._by_folder is None:
                found: dict[str, list[RecordRow]] = {}
                for record_id, (vault, path) in self._placed.items():
                    row = self._cited[record_id][1] if record_id in self._cited else self._empty[record_id]
                    folder = namespace_folder(path, row.title or "") if record_id in self._titled else \
                        path.rpartition("/")[0]
                    found.setdefault(f"{vault}/{folder}" if folder else vault, []).append(row)
                for rows in found.values():
                    rows.sort(key=lambda row: ((row.title or "").lower(), row.record_id or ""))
                self._by_folder = found
            return self._by_folder

    def update(self, changed: Sequence[str], cited: list[tuple[str, RecordRow]], empty: list[RecordRow],
               titled: Container[str] = frozenset()) -> None:
        """Forget the pages of ``changed`` (records changed or gone), then learn ``cited`` and ``empty``: those of
        them that are imported notes now (``titled``: the ids of those that are Logseq pages); the empty notes are
        placed again, since where one goes depends on the folders of the others."""
        with self._lock:
            for record_id in (*changed, *self._empty):
                self._unplace(record_id)
            for record_id in changed:
                self._titled.discard(record_id)
                self._empty.pop(record_id, None)
                path = self._cited.pop(record_id, (None,))[0]
                if path is not None:
                    self._count_folders(path, -1)
            for path, row in cited:
                if str(row.record_id) in titled:
                    self._titled.add(str(row.record_id))
                self._cited[str(row.record_id)] = (path, row)
                self._count_folders(path, 1)
                self._place(path, row)
            self._empty.update((str(row.record_id), row) for row in empty)
            for path, row in empty_notes_placed(self._folders, list(self._empty.values())):
                self._place(path, row)
            self._by_folder = None

    def _place(self, path: str, row: RecordRow) -> None:
        """Place a page at ``path``: a Logseq page (or an empty page in a graph) named by its title and aliases
        too."""
        vault, _, relative = path.partition("/")
        record_id = str(row.record_id)
        self._placed[record_id] = (vault, relative)
        notes = self._vaults.setdefault(vault, VaultNotes())
        titled = record_id in self._titled or (record_id in self._empty and notes.named_by_title)
        notes.add(relative, record_id, row.updated_at or "",
                  (row.title or "", *(row.view.aliases or ())) if titled else ())

    def _unplace(self, record_id: str) -> None:
        placed = self._placed.pop(record_id, None)
        if placed is not None:
            self._vaults[placed[0]].remove(placed[1], record_id)

    def _count_folders(self, path: str, step: int) -> None:
        """Count a cited page at ``path`` in (``step`` 1) or out of (-1) its vault's folders: the top (``""``),
        its folder and those above it; a folder no page is in or under any more is forgotten, and so is a
        vault."""
        vault, _, inside = path.partition("/")
        counts = self._folders.setdefault(vault, {})
        folder = inside.rpartition("/")[0]
        for name in ("", *_folder_and_above(folder)):
            counts[name] = counts.get(name, 0) + step
            if counts[name] <= 0:
                del counts[name]
        if not counts:
            del self._folders[vault]


def _folder_and_above(folder: str) -> Iterator[str]:
    """``Projects/Alpha``, then ``Projects``: a folder and those above it, the vault's top left out."""
    while folder:
        yield folder
        folder = folder.rpartition("/")[0]


def note_folders(engine: Engine, params: dict[str, Any]) -> NoteFolders:
    values = FOLDERS.read(params)

    def work(runtime: StoreRuntime, authority: Authority, view: ReadView) -> NoteFolders:
        by_folder = imported_notes(view, authority.partition).by_folder()
        answer: NoteFolders = {"folders": [{"folder": folder, "notes": len(rows)}
                                           for folder, rows in sorted(by_folder.items())]}
        if values["folder"] is not None:
            rows = by_folder.get(values["folder"], [])
            offset, limit = values["offset"], values["limit"]
            answer.update(records=[listed_record(row) for row in rows[offset:offset + limit]], total=len(rows),
                          offset=offset)
            if offset + limit < len(rows):
                answer["nextOffset"] = offset + limit
        return answer

    return engine.enter(OperatorCaller(values["agent"]), create=False).read(work)


def notes_of(view: ReadView, partition: str, record_ids: Sequence[str] | None = None
             ) -> tuple[list[tuple[str, RecordRow]], list[RecordRow], set[str]]:
    """The current pages a Markdown import made (of ``record_ids``, else all), newest first: those citing their
    original, each with its path, the vault folder's name first (``notes/Projects/Alpha/Plan.md``), those
    of empty notes (nothing retained, nothing cited), which ``empty_notes_placed`` places, and the ids of the
    Logseq pages among the first (their original retained as ``LOGSEQ_MEDIA_TYPE``)."""
    sources = SourceReader(view, partition)
    instance = import_instance("markdown")
    found: list[tuple[str, RecordRow]] = []
    empty: list[RecordRow] = []
    titled: set[str] = set()
    for row in view.catalog.current(partition, kind="page", record_ids=record_ids):
        source = first_source(row.view)
        if source is None and not row.view.evidence and len(row.view.tags or ()) <= 1 \
                and (row.view.attribution or {}).get("instance") == instance:
            empty.append(row)
            continue
        if sources.instance(source) != instance:  # the original's, not the page's: a later revision keeps it
            continue
        parts = (sources.filename(source) or "").split(RETAINED_SEPARATOR)
        if len(parts) > 1:
            found.append(("/".join(parts), row))
            if sources.media_type(source) == LOGSEQ_MEDIA_TYPE:
                titled.add(str(row.record_id))
    return found, empty, titled


def empty_notes_placed(folders: Mapping[str, Container[str]], empty: list[RecordRow]
                       ) -> list[tuple[str, RecordRow]]:
    """The pages of empty notes, each with its path in its vault: its folder (the one tag the import gave it;
    none at the vault's top) and its title as the file's name, in the vault whose notes placed by their
    originals are in that folder or below it (``folders``: by vault, those folders, the top ``""`` included);
    when the store holds one vault, in that one.  A page whose folder is in several vaults, or in none with
    several imported, is left out: which vault holds it is not known."""
    placed: list[tuple[str, RecordRow]] = []
    for row in empty:
        folder = (row.view.tags or ("",))[0]
        vaults = list(folders) if len(folders) == 1 else [vault for vault, known in folders.items()
                                                          if folder in known]
        if len(vaults) == 1 and row.title:
            placed.append(("/".join(part for part in (vaults[0], folder, f"{row.title}.md") if part), row))
    return placed
