"""Importing a folder of Markdown notes as Obsidian or basic-memory keep them.

Every ``.md`` file under the folder (nested folders included; files and
folders whose name starts with a dot, such as ``.obsidian`` and ``.git``, are
skipped; a symbolic link, to a note or a folder, is never followed: the
result names it in ``leftOut`` and a note) becomes one page:

- the title is the frontmatter's ``title``, else the file name without
  ``.md`` (what Obsidian shows and what ``[[links]]`` name);
- ``aliases`` and ``tags`` (lists, or one string; a leading ``#`` dropped)
  become the page's aliases and tags; so do the ``#tags`` written in the
  text as Obsidian reads them (``#idea``, ``#project/alpha``: after a space
  or at a line's start, not all digits, not in code), and the note's folder
  (``Projects/Alpha``) is one more tag;
- ``type``, when it names a page type of the ontology, is the page's type,
  else the page is a ``note``;
- every other frontmatter key is kept: the page's body ends with them as a
  YAML block, and the retained original keeps the file byte for byte;
- the body is the note's text after the frontmatter.

Frontmatter that is not valid YAML (``updated: 2026-08-17 iteration 33: storage``), or not a mapping of names
to values, is one note's problem, not the folder's: the note becomes a page as if it had none (its title from
its file name), its frontmatter kept as written at the end of the body, and the result lists it with why
(``unreadFrontmatter``), so a vault of years is not refused for the few notes Obsidian itself shows with
invalid properties.  Importing again once the file is corrected reads its frontmatter into a new revision.  So
is a known field of another shape than it takes (``tags: {chess: 1}``, a list as the title, more than
``LIST_MAX`` aliases): the note is imported without it, the field kept with the others at the end of the body,
and the result lists it with why (``unreadFields``).

Links: ``[[Target]]``, ``[[Target|label]]``, ``[[Target#Heading]]`` and
``[[folder/Target]]`` that name another note of the folder (by path, file
name or alias) become a ``related_to`` relationship from the note's page to
the target's, citing the line of the retained note that holds the link, with
the link as quote (progress: the ``linking`` phase, note by note, after the
pages are written).  Links to a non-Markdown file of the folder
(``![[diagram.png]]``, ``[[paper.pdf]]``, ``![alt](files/a.png)``) retain that
file as evidence cited by the page.  Links naming nothing in the folder are
left as text, counted, and listed by note (the result's ``unresolved``: each
note's path and those links, as written: ``[[Gone]]``,
``[2.3 电平](2.3%20电平.md)``).  Links in fenced code blocks are not links.

Each note's original is retained under the folder's name and the note's
path in it (``vault › Projects › Alpha › Tram clock.md``).  Importing the
folder again finds each note's page by that name: a page that would say the
same is left as it is, a changed note gets the next revision of its page,
and a link already made a relationship is not made again.  A page revised in
the store since the import last wrote it (edited in the store's vault, revised
by an agent) keeps that edit: a changed note is left out and listed
(``keptEdits``, engine/importers/edits.py), unless the import replaces edits.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Collection, Mapping, TypeVar
from urllib.parse import unquote

import yaml

from .answers import Citation, KeptEdit, MarkdownImport
from .bulk import WIDTH
from .common import Original, Scan, Writer, refuse_secrets, refused, report, revised_note, says_same
from .edits import Edit, kept_edits_note
from .folders import left_out_notes, read_regular_file, walk_input
from .logseq import (BLOCK_REFERENCE, INLINE_TAG as LOGSEQ_TAG, Graph, block_ids, graph_of, page_properties,
                     page_title, property_names)
from .text import clean_text, one_line
from ..core.errors import InvalidParams
from ..core.tags import tag_key
from ..core.words import counted, for_count
from ..search.plain import KEPT_FRONTMATTER
from ..store.attachments import ATTACH_MAX_BYTES
from ..store.catalog import INCREMENTAL_CHECK_MAX
from ..store.inputs import BODY_MAX_CHARS, ITEMS_MAX, LIST_MAX
from ..vault.ontology import Ontology
from ..vault.records import TITLE_MAX_CHARS

FORMAT = "markdown"
# A Logseq page's original: Markdown as Logseq writes it (a parameter, RFC 7763's ``variant``, is no media type
# ``knowledge_attach`` takes).
LOGSEQ_MEDIA_TYPE = "text/x-logseq"
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]|#^\n]*)((?:[#^][^\[\]|\n]*)?)(?:\|([^\[\]\n]*))?\]\]")
# A Markdown link's address may hold parentheses in pairs, as CommonMark reads it: [x](向量内积%20(inner).md).
_MARKDOWN_LINK = re.compile(r"!?\[[^\]\n]*\]\(<?((?:[^()\s>]|\([^()\s>]*\))+)>?(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
# An inline tag: ``#`` at a line's start or after white space, then letters, digits, ``_``, ``-`` and ``/``
# with at least one that is not a digit (``#2026`` is no tag), as Obsidian reads them.
_INLINE_TAG = re.compile(r"(?:^|(?<=\s))#([\w/-]*[^\W\d][\w/-]*)")
_INLINE_CODE = re.compile(r"`+[^`]*`+")
_Named = TypeVar("_Named")  # what a link resolves to: a Note, or a note's path
_KNOWN_KEYS = ("title", "aliases", "alias", "tags", "tag")
# Relationships a write of links holds at most: the lane publishes up to ``WIDTH`` of an import's writes as one
# group, and a group touching more than ``INCREMENTAL_CHECK_MAX`` records re-checks the references of the whole
# partition, a cost that grows with the vault at every group.
LINKS_PER_WRITE = max(1, min(ITEMS_MAX, INCREMENTAL_CHECK_MAX // WIDTH))


@dataclass(frozen=True)
class Link:
    line: int  # 1-based, in the original file
    text: str  # exactly as written, the quote
    target: str  # as written, without heading or label
    embed: bool
    tag: bool = False  # written as a tag, #[[multi word]]: in a Logseq graph a tag naming no page is no loose link


@dataclass(frozen=True)
class Note:
    path: str  # relative, with '/'
    original: Original
    type: str
    title: str
    aliases: tuple[str, ...]
    tags: tuple[str, ...]
    body: str
    links: tuple[Link, ...]
    unread_frontmatter: str = ""  # why its frontmatter could not be read ("line 3 is not valid YAML: ..."), if so
    unread_fields: str = ""  # why some of its known fields could not be read ("frontmatter tags must be ..."), if so
    named_by_title: bool = False  # a Logseq page: links name it by its title too
    blocks: tuple[str, ...] = ()  # a Logseq page's block ids (``id::``), lower case: ``((id))`` names the page

    @property
    def key(self) -> str:
        return "note-" + hashlib.sha256(self.path.encode("utf-8", "surrogatepass")).hexdigest()[:20]


@dataclass(frozen=True)
class Resolved:
    """What one note's links name, found once when the folder is read."""

    notes: tuple[tuple[Link, Note], ...]  # each other note it links, with the first link naming it
    files: tuple[str, ...]  # the folder's other files it links or embeds, in order of first mention
    unresolved: tuple[str, ...]  # its links naming nothing, each as written (``[[Gone]]``, ``[a](b.md)``)


@dataclass(frozen=True)
class Folder:
    root: Path
    notes: tuple[Note, ...]
    files: dict[str, Path]  # every other file, by relative path
    by_path: dict[str, Note]  # lowercased relative path without .md
    by_name: dict[str, list[Note]]  # lowercased file name without .md
    by_alias: dict[str, list[Note]]
    links: tuple[str, ...] = ()  # symbolic links in the folder, never followed
    by_block: dict[str, Note] = field(default_factory=dict)  # a Logseq page by each of its block ids
    files_by_name: dict[str, list[str]] = field(default_factory=dict)  # lowercased file name: paths, sorted
    resolved: dict[str, Resolved] = field(default_factory=dict)  # each note's links, by the note's path

    def read(self, relative: str) -> bytes:
        """The bytes of one of ``files`` (a link is refused, never read through)."""
        return read_regular_file(self.files[relative], relative)


def folder_of(root: Path, notes: list[Note], files: dict[str, Path], links: tuple[str, ...] = ()) -> Folder:
    by_path: dict[str, Note] = {}
    by_name: dict[str, list[Note]] = {}
    by_alias: dict[str, list[Note]] = {}
    for note in notes:
        by_path.setdefault(note_key(note.path), note)
        by_name.setdefault(PurePosixPath(note.path).name[:-3].lower(), []).append(note)
        for alias in dict.fromkeys(name.lower() for name in (
                (note.title, *note.aliases) if note.named_by_title else note.aliases)):
            by_alias.setdefault(alias, []).append(note)
    files_by_name: dict[str, list[str]] = {}
    for relative in sorted(files):
        files_by_name.setdefault(PurePosixPath(relative).name.lower(), []).append(relative)
    by_block = {block: note for note in notes for block in note.blocks}
    folder = Folder(root, tuple(notes), files, by_path, by_name, by_alias, links, by_block, files_by_name)
    folder.resolved.update((note.path, _resolve_links(folder, note)) for note in notes)
    return folder


def load_markdown(path: str, scan: Scan) -> tuple[Folder]:
    """Every note of the folder parsed and checked, before anything is written (else InvalidParams)."""
    root = Path(path)
    if not root.is_dir():
        raise InvalidParams(f"{path} is not a folder of Markdown notes", file=str(path))
    page_types = set(Ontology.shipped().page_types)
    graph = graph_of(root)
    found = walk_input(root)
    notes, files = [], {}
    for relative in found.files:
        if relative.lower().endswith(".md"):
            notes.append(parse_note(Original(relative, found.read(relative)), page_types, graph))
        else:
            files[relative] = root / relative
    if not notes:
        raise InvalidParams(f"{path} holds no Markdown (.md) notes", file=str(path))
    folder = folder_of(root, notes, files, found.symlinks)
    holding = []  # every note that holds a credential, named in one refusal: not one more try each
    for note in notes:
        try:
            refuse_secrets(scan, note.original, lambda: ())
        except InvalidParams as exc:
            holding.append(exc)
    if holding:
        raise _all_named(holding)
    for relative in sorted({target for note in notes for target in _attachments(folder, note)}):
        refuse_secrets(scan, Original(relative, folder.read(relative)), lambda: ())
    return (folder,)


def _all_named(refusals: list[InvalidParams]) -> InvalidParams:
    """The first note's refusal (its file and place in the details), naming the other notes refused too."""
    first = refusals[0]
    if len(refusals) == 1:
        return first
    others = [f"{exc.details.get('file')}" + (f" ({exc.details['place']})" if exc.details.get("place") else "")
              for exc in refusals[1:]]
    shown = ", ".join(others[:10]) + (f" and {len(others) - 10:,} more" if len(others) > 10 else "")
    holds = for_count(len(others), "holds", "hold")
    return InvalidParams(f"{first.message}; {counted(len(others), 'other note')} {holds} what looks like a "
                         f"credential too: {shown}", **first.details)


def import_markdown(writer: Writer, folder: Folder) -> MarkdownImport:
    """Pages first (with their originals and attachments), then the links between them.

    A note an earlier import of the same folder made a page of (found by the file name its original was
    retained under: the folder's name and the note's path in it) that says the same is left as it is;
    one that changed gets the next revision of that page, citing the newer file, unless the page was revised
    in the store since the import wrote it (then it is left as it is and listed, ``keptEdits``, unless
    ``writer.replace_edits``).  A link that is already a relationship an earlier import made is not made again.
    """
    earlier = writer.imported_by_original("page", revised_since=True)
    # The pages of the earlier import, read in one pass rather than one read per note, and those revised since.
    current = writer.current_pages_and_sources(
        [earlier[name][0] for name in (retained_name(folder, note) for note in folder.notes) if name in earlier])
    edits = writer.page_edits({page_id: page for page_id, (page, _) in current.items()})
    retained_files = RetainedFiles()
    sources: dict[str, list[str]] = {}
    kept_edits: dict[str, KeptEdit] = {}  # by the note's path
    together = _retained_with_their_pages(writer, folder, earlier)
    total = len(folder.notes)
    try:
        written = {note.path: writer.later(lambda note=note: _write_note(writer, folder, note, earlier, current,
                                                                         edits, sources, retained_files, together,
                                                                         kept_edits),
                                           lambda done=done, note=note: writer.done(done, total, note.path))
                   for done, note in enumerate(folder.notes, start=1)}
        writer.settle()
        pages = {path: future.result()[0] for path, future in written.items()}
        revised = sum(future.result()[1] for future in written.values())
        relationships = _link(writer, folder, pages, sources, kept_edits)
    finally:
        writer.close()
    kept = [kept_edits[note.path] for note in folder.notes if note.path in kept_edits]  # in the folder's order
    unresolved = {note.path: list(folder.resolved[note.path].unresolved) for note in folder.notes
                  if folder.resolved[note.path].unresolved}
    unresolved_count = sum(len(targets) for targets in unresolved.values())
    notes = ([f"{unresolved_count} links name no note or file of the folder; they stay as text."]
             if unresolved else [])
    notes += revised_note(writer, revised, "note") + kept_edits_note(kept, writer.dry_run) \
        + left_out_notes(folder.links)
    unread = {note.path: note.unread_frontmatter for note in folder.notes if note.unread_frontmatter}
    if unread:
        notes.append(f"{counted(len(unread), 'note')} {for_count(len(unread), 'has', 'have')} frontmatter that "
                     f"could not be read: {for_count(len(unread), 'it was', 'each was')} imported with the title of "
                     "its file name and its frontmatter kept as written at the end of the page; correct the "
                     "frontmatter and import again to read it.")
    fields = {note.path: note.unread_fields for note in folder.notes if note.unread_fields}
    if fields:
        notes.append(f"{counted(len(fields), 'note')} {for_count(len(fields), 'has', 'have')} frontmatter fields "
                     "that could not be read (a title, tags or aliases of another shape than the field takes): "
                     f"{for_count(len(fields), 'it was', 'each was')} imported without them, and they are kept at "
                     "the end of the page; correct them and import again to read them.")
    attachments = {relative for note in folder.notes for relative in _attachments(folder, note)}
    return report(writer, MarkdownImport, folder=str(folder.root), notes=notes, pages=pages,
                  relationships=relationships, attachments=len(attachments), revised=revised,
                  **({"leftOut": list(folder.links)} if folder.links else {}),
                  **({"unresolved": unresolved} if unresolved else {}),
                  **({"unreadFrontmatter": unread} if unread else {}),
                  **({"unreadFields": fields} if fields else {}),
                  **({"keptEdits": kept} if kept else {}))


RETAINED_SEPARATOR = " › "  # between the folders of a retained original's name: a file name holds no "/"
Pages = dict[str, tuple[dict[str, Any], dict[str, str]]]  # ``Writer.current_pages_and_sources``


def _retained_with_their_pages(writer: Writer, folder: Folder, earlier: dict[str, tuple[str, int]]) -> set[str]:
    """The notes (by path) whose originals are retained in their new pages' publications: every note without a
    page yet whose original is retained in one part (not empty, at most one attachment), but those whose
    original an earlier run of the import retained on its own (``Writer.retain``: an import interrupted
    before a page cited it, or made by the code before this), finished as they were begun, so that no
    original is retained twice.  Asked in one read, before the first write."""
    fresh = {note.path: writer.retains_alone(note.original, note.key, media_type=media_type_of(note),
                                             filename=retained_name(folder, note))
             for note in folder.notes if retained_name(folder, note) not in earlier}
    fresh = {path: request_ids for path, request_ids in fresh.items() if len(request_ids) == 1}
    begun = writer.published(request_ids[0] for request_ids in fresh.values())
    return {path for path, request_ids in fresh.items() if request_ids[0] not in begun}


def _write_note(writer: Writer, folder: Folder, note: Note, earlier: dict[str, tuple[str, int]], current: Pages,
                edits: dict[str, Edit], sources: dict[str, list[str]], retained_files: RetainedFiles,
                together: set[str], kept_edits: dict[str, KeptEdit]) -> tuple[str, bool]:
    """One note's page (and its original and attachments): ``(page id, whether it revised an earlier one)``.

    A page revised in the store since the import last wrote it (``edits``) is compared with what the import
    wrote: a note that says the same brings nothing new, and the edit stands; a changed one is left as it is
    and listed in ``kept_edits``, unless the writer replaces edits."""
    params: dict[str, Any] = {"type": note.type, "title": note.title, "body": note.body}
    if note.aliases:
        params["aliases"] = list(note.aliases)
    if note.tags:
        params["tags"] = list(note.tags)
    found = earlier.get(retained_name(folder, note))
    page: dict[str, Any] = {}
    if found is not None:
        if found[0] in current:
            page, shas = current[found[0]]
            edit = edits.get(found[0])
        else:
            page, shas = writer.current_page_and_sources(found[0])
            edit = writer.page_edits({found[0]: page}).get(found[0])
        imported = page if edit is None else edit.imported  # what the import last wrote (None: not kept)
        unchanged = says_same(imported, params) if imported is not None else writer.cites(page, note.original, shas)
        if unchanged:
            known = writer.retained(page, note.original, shas)  # the same file: its source ids, without retrying
            if known is not None or writer.cites(page, note.original, shas):
                _retain(writer, folder, note, sources, retained_files, known)  # retries of the rest, as it was
            return writer.kept(found[0]), False
        if edit is not None and not writer.replace_edits:
            kept_edits[note.path] = {"path": note.path, "id": found[0], "why": edit.why}
            return writer.kept(found[0]), False
    elif note.path in together:  # a new page, its original retained in the page's publication
        files = _retain_linked(writer, folder, note, retained_files)
        params["evidence"] = [{"source": source} for source in files[:LIST_MAX - 1]]
        page_id, sources[note.path] = writer.save_page_retaining(
            note.key, params, note.original, media_type=media_type_of(note), filename=retained_name(folder, note))
        return page_id, False
    cited = _retain(writer, folder, note, sources, retained_files)
    params = {**params, "evidence": [{"source": source} for source in cited[:LIST_MAX]]}
    if found is not None:  # changed since the earlier import: that page's next revision, on the version read
        params = {"id": found[0], "expectedRevision": found[1], "expectedSha256": page["sha256"], **params}
    return writer.save_page(note.key, params), found is not None


def _link(writer: Writer, folder: Folder, pages: dict[str, str], sources: dict[str, list[str]],
          kept_edits: Collection[str] = ()) -> int:
    """The links between the pages written (relationships made or kept), in writes of up to ``LINKS_PER_WRITE``
    relationships: whole notes' links together (one publication per note made most of a vault's publications,
    each authorised, checked and acknowledged on its own for three relationships), and a note with more links
    than that in parts, each a write of its own.  A note is reported linked once the write holding its last
    links is written, and each earlier part of a hub's as how many of its links are made (the count of notes
    linked stays): progress is reported in order, so a hub's hundreds of links written as one item, one
    publication after another behind every other item's, held the count still while nearly all the rest were
    written.  A note whose page's edits were kept (``kept_edits``, by path) is left as it is: its links an
    earlier import made stay, no new one is made."""
    linked_before = writer.imported_records(_link_key, reads=("relation", "from", "to"), kind="relationship",
                                            active_only=True)
    kept = 0
    total = len(folder.notes)
    made: list[Future[list[str]]] = []
    originals = RetainedFiles()  # the originals of unchanged pages retained again, once for all of a note's parts
    batch: list[tuple[Note, list[dict[str, Any]]]] = []  # the links written together: whole notes', or a part
    finished: list[tuple[int, Note]] = []  # the notes whose last links are in ``batch`` (or that have none)
    waiting = 0  # the relationships in ``batch``

    def write(part: tuple[int, str] | None = None) -> None:  # the batch as one item; then what it finishes, in order
        nonlocal batch, finished, waiting
        reports = [lambda done=done, note=note: writer.done(done, total, note.path, phase="linking")
                   for done, note in finished]
        if part is not None:  # a part of a hub's links: the notes linked before it, and how far the hub is
            reports.append(lambda part=part: writer.done(part[0], total, part[1], phase="linking"))
        progress = lambda reports=reports: writer.done_together(reports)  # noqa: E731
        if waiting:
            made.append(writer.later(lambda batch=batch: _write_links(writer, folder, batch, sources, originals),
                                     progress))
        else:
            writer.later(lambda: None, progress)
        batch, finished, waiting = [], [], 0

    writer.done(0, total, "", phase="linking")  # the pages are written; the links begin (cancellable)
    for done, note in enumerate(folder.notes, start=1):
        items = []
        for link, target in folder.resolved[note.path].notes:
            before = linked_before.get(f"{pages[note.path]}>{pages[target.path]}")
            if before is not None:
                kept += 1
                writer.kept(before[0], "relationships")
                continue
            if note.path in kept_edits:
                continue
            items.append({"relation": "related_to", "from": pages[note.path], "to": pages[target.path],
                          "assertionOrigin": "source", "link": link})
        if finished and (not waiting or waiting + len(items) > LINKS_PER_WRITE):
            write()  # a note without new links is written on its own, or with the batch before it
        for start in range(0, len(items) - LINKS_PER_WRITE, LINKS_PER_WRITE):  # a hub's: parts written side by side
            batch, waiting = [(note, items[start:start + LINKS_PER_WRITE])], LINKS_PER_WRITE
            write((done - 1, f"{note.path}, {start + LINKS_PER_WRITE:,} of {len(items):,} links"))
        items = items[(max(0, len(items) - 1) // LINKS_PER_WRITE) * LINKS_PER_WRITE:]
        batch.append((note, items))
        finished.append((done, note))
        waiting += len(items)
    if finished:
        write()
    writer.settle()
    return kept + sum(len(future.result()) for future in made)


def _write_links(writer: Writer, folder: Folder, batch: list[tuple[Note, list[dict[str, Any]]]],
                 sources: dict[str, list[str]], originals: RetainedFiles) -> list[str]:
    """Notes' links as relationships, each citing the line of its link in its note's original, in one
    ``remember`` (its request id holds a hash of them, so each part of a hub's links has its own); returns
    their ids."""
    written = []
    for note, items in batch:
        if items and note.path not in sources:  # an unchanged page of a file since edited: cite the file as it is
            sources[note.path] = originals.get(note.path, lambda note=note: writer.retain(
                note.original, note.key, media_type=media_type_of(note), filename=retained_name(folder, note)))
        written += [{**{key: value for key, value in item.items() if key != "link"},
                     "evidence": [_citation(sources[note.path], note, item["link"])]} for item in items]
    return writer.remember(f"{batch[0][0].key}-links", written)


def retained_name(folder: Folder, note: Note) -> str:
    """The file name a note's original is retained under: the folder's name and the note's path in it
    (``Notes › Projects › Alpha.md``), which is how a later import of the folder finds the note's page."""
    return RETAINED_SEPARATOR.join([*([folder.root.absolute().name] if folder.root.absolute().name else []),
                       *PurePosixPath(note.path).parts])


def media_type_of(note: Note) -> str:
    """The media type a note's original is retained as: a Logseq page's says so (``LOGSEQ_MEDIA_TYPE``), which is
    how the window, following a link or listing folders later, knows the page is named by its title."""
    return LOGSEQ_MEDIA_TYPE if note.named_by_title else "text/markdown"


def _retain(writer: Writer, folder: Folder, note: Note, sources: dict[str, list[str]],
            retained_files: RetainedFiles, known: list[str] | None = None) -> list[str]:
    """Retain a note's original (unless ``known``: the ids it is retained under already) and the files it
    links (each file once); returns the sources its page cites."""
    sources[note.path] = known if known is not None else writer.retain(
        note.original, note.key, media_type=media_type_of(note), filename=retained_name(folder, note))
    return sources[note.path] + _retain_linked(writer, folder, note, retained_files)


def _retain_linked(writer: Writer, folder: Folder, note: Note, retained_files: RetainedFiles) -> list[str]:
    """Retain the files a note links (each file once); returns their sources, in order of first mention."""
    cited: list[str] = []
    for relative in _attachments(folder, note):
        cited += retained_files.get(relative, lambda relative=relative: writer.retain(
            Original(relative, folder.read(relative)),
            "file-" + hashlib.sha256(relative.encode("utf-8", "surrogatepass")).hexdigest()[:20]))
    return cited


class RetainedFiles:
    """Files retained once however many writes need them, on however many threads (``Writer.later``): the
    files notes link (however many notes link one), and a note's original cited anew by each part of its
    links: their source ids by their path in the folder."""

    def __init__(self) -> None:
        self._ids: dict[str, list[str]] = {}
        self._locks: dict[str, threading.Lock] = {}

    def get(self, relative: str, retain: Callable[[], list[str]]) -> list[str]:
        with self._locks.setdefault(relative, threading.Lock()):
            if relative not in self._ids:
                self._ids[relative] = retain()
            return self._ids[relative]


def _link_key(row: Any, _: Any) -> str | None:
    """A relationship an earlier import made from a link, by its ends (``from>to``)."""
    view = row.view
    if view.relation != "related_to":
        return None
    return f"{view.from_id}>{view.to_id}"


def _citation(sources: list[str], note: Note, link: Link) -> Citation:
    """The line of the retained note that holds the link, with the link as quote (one-part originals)."""
    if len(sources) == 1:
        return {"source": sources[0], "lines": [link.line, link.line], "quote": link.text}
    return {"source": sources[(_byte_of_line(note.original, link.line)) // ATTACH_MAX_BYTES]}


def _byte_of_line(original: Original, line: int) -> int:
    lines = original.data.decode("utf-8").splitlines(keepends=True)
    return len("".join(lines[:line - 1]).encode("utf-8"))


# --- resolving links --------------------------------------------------------------------------------


def resolve_note(folder: Folder, note: Note, target: str) -> Note | None:
    """The note a link names: by path (from the folder's root or the note's own folder), by file name
    (the nearest when several share it), then by alias.  In a Logseq graph a link names a page's title or
    alias first (``[[Agents.md]]`` is the page titled so, kept as ``Agents.md.md``, not the page ``Agents``)."""
    if note.named_by_title and target.startswith("(("):  # a block reference: the page holding that block
        return folder.by_block.get(target[2:-2].lower())
    found = linked_note(target, note.path, folder.by_path, lambda name: folder.by_name.get(name, []),
                        lambda named: named.path,
                        (lambda name: folder.by_alias.get(name, [])) if note.named_by_title else None)
    if found is not None or note.named_by_title:
        return found
    aliased = folder.by_alias.get(_wanted(target))
    return min(aliased, key=lambda n: n.path) if aliased else None


def linked_note(target: str, here: str, by_path: Mapping[str, _Named], by_name: Callable[[str], list[_Named]],
                path_of: Callable[[_Named], str], by_title: Callable[[str], list[_Named]] | None = None
                ) -> _Named | None:
    """What a link in the note at ``here`` names by path or file name (``by_path``: by ``note_key``; ``by_name``:
    by the key of a file name), the nearest first.  In a Logseq graph (``by_title``: the pages by each title and
    alias, lower case) the link names a page's title or alias first, and last its name without ``.md``: the one
    rule the import resolves a link by (``resolve_note``) and the window follows one by
    (``operator/noteLink``, engine/importers/folders_view.py), where the notes are those imported earlier."""
    if by_title is not None:
        titled = by_title(unquote(target).strip().lower())
        if titled:
            return min(titled, key=path_of)
    found = _by_path_or_file_name(target, here, by_path, by_name, path_of)
    if found is not None or by_title is None:
        return found
    titled = by_title(_wanted(target))
    return min(titled, key=path_of) if titled else None


def note_key(path: str) -> str:
    """A note's path as a link's target is looked up by path (lower case, without ``.md``)."""
    return path[:-3].lower()


def _by_path_or_file_name(target: str, here: str, by_path: Mapping[str, _Named],
                          by_name: Callable[[str], list[_Named]], path_of: Callable[[_Named], str]) -> _Named | None:
    """What a link in the note at ``here`` names by path (from the folder's root or the note's own folder, the keys
    of ``by_path``: lower case, without ``.md``), else by file name (``by_name``), the nearest when several share
    it: in the note's own folder first, then the fewest folders deep."""
    wanted = _wanted(target)
    folder = _parent(here)
    for candidate in (wanted, _joined(folder, wanted).lower()):
        if candidate in by_path:
            return by_path[candidate]
    named = by_name(wanted) if "/" not in wanted else []
    return min(named, key=lambda found: (_parent(path_of(found)) != folder, path_of(found).count("/"),
                                         path_of(found))) if named else None


def _wanted(target: str) -> str:
    """A link's target as the notes are keyed: unquoted, lower case, without ``.md``."""
    wanted = unquote(target).strip().lower()
    return wanted[:-3] if wanted.endswith(".md") else wanted


def _parent(path: str) -> str:
    """The folder of a relative path (``""`` at the root): ``PurePosixPath.parent`` without its cost, which
    resolving every link of a large vault paid several times a link."""
    return path.rpartition("/")[0]


def _joined(folder: str, relative: str) -> str:
    """``relative`` from ``folder``, its ``..`` parts taken up a folder (``../photo/a.png`` from ``notes`` is
    ``photo/a.png``, as Obsidian and every Markdown viewer read it; one that leaves the vault names nothing in
    it); a plain join when there is nothing to normalise (no empty or ``.`` part, not absolute)."""
    if not relative or relative.startswith(("/", ".")) or relative.endswith("/") or "//" in relative \
            or "/." in relative:
        joined = str(PurePosixPath(folder or ".") / relative)
        return posixpath.normpath(joined) if "/../" in f"/{joined}/" else joined
    return f"{folder}/{relative}" if folder else relative


def _resolve_file(folder: Folder, note: Note, target: str) -> str | None:
    """The non-Markdown file a link names: by path (from the root or the note's folder), else by name."""
    wanted = unquote(target).strip()
    for candidate in (wanted, _joined(_parent(note.path), wanted)):
        if candidate in folder.files:
            return candidate
    if "/" in wanted:
        return None
    named = folder.files_by_name.get(wanted.lower())
    return named[0] if named else None


def _resolve_links(folder: Folder, note: Note) -> Resolved:
    """A note's links resolved: the other notes they name (each once, with its first link), the files they
    name, and the links naming nothing, as written."""
    notes: dict[str, tuple[Link, Note]] = {}
    files: dict[str, None] = {}
    unresolved: list[str] = []
    for link in note.links:
        target = resolve_note(folder, note, link.target)
        if target is not None:
            if target.path != note.path and target.path not in notes:
                notes[target.path] = (link, target)
            continue
        relative = _resolve_file(folder, note, link.target)
        if relative is None and link.tag and note.named_by_title:
            continue  # a Logseq tag naming no page of the graph: a tag of the page, not a link left as text
        if relative is None:
            unresolved.append(link.text)  # as the owner wrote it: [[Gone]], [2.3 电平](2.3%20电平.md)
        else:
            files.setdefault(relative)
    return Resolved(tuple(notes.values()), tuple(files), tuple(unresolved))


def _attachments(folder: Folder, note: Note) -> tuple[str, ...]:
    """The folder's non-Markdown files the note links or embeds, in order of first mention."""
    return folder.resolved[note.path].files


# --- reading one note ---------------------------------------------------------------------------------


def parse_note(original: Original, page_types: set[str], graph: Graph | None = None) -> Note:
    """One note as a page; in a Logseq ``graph``, named and tagged as Logseq names it (engine/importers/logseq.py)."""
    text = original.text()
    frontmatter, body, unread = _split_frontmatter(text)
    not_read: dict[str, str] = {}  # the known keys whose values could not be read, and why: kept as written
    if graph is not None and not frontmatter and unread is None:
        frontmatter = _logseq_frontmatter(graph, original.name, body)
    title = frontmatter.get("title")
    if title is not None and not isinstance(title, (str, int, float)):
        not_read["title"] = "frontmatter title must be a string"
    title = one_line(str(title)) if isinstance(title, (str, int, float)) and str(title).strip() else \
        one_line(PurePosixPath(original.name).stem if graph is None else page_title(graph, original.name)[0])
    aliases = _names(frontmatter, ("aliases", "alias"), not_read)
    tags = [tag.lstrip("#") for tag in _names(frontmatter, ("tags", "tag"), not_read, split=True)]
    folder = str(PurePosixPath(original.name).parent)
    if folder != ".":
        tags.append(one_line(folder))
    tags = _with_inline_tags(tags, _inline_tags(body, logseq=graph is not None))
    page_type = frontmatter.get("type")
    kept = {k: v for k, v in frontmatter.items() if k not in _KNOWN_KEYS or k in not_read}
    if isinstance(page_type, str) and page_type in page_types:
        kept.pop("type")
    else:
        page_type = "note"
    body = clean_text(body).strip("\n")
    if kept:
        block = yaml.safe_dump(kept, allow_unicode=True, sort_keys=False, default_flow_style=False).strip()
        body += ("\n\n" if body else "") + f"{KEPT_FRONTMATTER}:\n\n```yaml\n" + clean_text(block) + "\n```"
    if unread:
        as_written = clean_text(unread.text)
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", as_written)), default=0))
        body += (("\n\n" if body else "") + f"{KEPT_FRONTMATTER} as written (not read: {unread.why}):"
                 f"\n\n{fence}yaml\n{as_written}\n{fence}")
    if len(body) > BODY_MAX_CHARS:
        raise refused(original.name, None, f"is longer than {BODY_MAX_CHARS} characters")
    return Note(original.name, original, page_type, title or "Untitled note",
                tuple(dict.fromkeys(a for a in aliases if a)), tuple(dict.fromkeys(t for t in tags if t)),
                body, tuple(_links(original, block_references=graph is not None)), unread.why if unread else "",
                "; ".join(dict.fromkeys(not_read.values())), named_by_title=graph is not None,
                blocks=tuple(block_ids(text)) if graph is not None else ())


def _logseq_frontmatter(graph: Graph, path: str, body: str) -> dict[str, Any]:
    """A Logseq page's title, aliases and tags as frontmatter would give them: its ``title::``, ``alias::`` and
    ``tags::`` properties (the lines stay in the text, as Logseq shows them), a journal's day as an alias."""
    properties = page_properties(body) if "::" in body else {}
    title, day = page_title(graph, path)
    aliases = property_names(properties.get("alias", "")) + ([day] if day and day != title else [])
    read: dict[str, Any] = {"title": properties.get("title") or title}
    if aliases:
        read["aliases"] = aliases
    if properties.get("tags"):
        read["tags"] = property_names(properties["tags"])
    return read


@dataclass(frozen=True)
class UnreadFrontmatter:
    text: str  # the lines between the rules, as written
    why: str  # "line 3 is not valid YAML: mapping values are not allowed here"


def _split_frontmatter(text: str) -> tuple[dict[str, Any], str, UnreadFrontmatter | None]:
    """The frontmatter as a mapping and the body after it; frontmatter that cannot be read as a mapping is
    an empty one, and what was written and why it was not read come third."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return {}, text, None
    for number, line in enumerate(lines[1:], start=1):
        if line.rstrip() in ("---", "..."):
            break
    else:
        return {}, text, None  # an opening rule without a closing one is body text, as Obsidian reads it
    written, body = "\n".join(lines[1:number]), "\n".join(lines[number + 1:])
    try:
        data = yaml.safe_load(written)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        place = f"line {mark.line + 2}" if mark is not None else "line 1"
        return {}, body, UnreadFrontmatter(written, f"{place} is not valid YAML: "
                                                    f"{getattr(exc, 'problem', None) or exc}")
    if data is None:
        data = {}
    if not isinstance(data, dict) or not all(isinstance(key, str) for key in data):
        return {}, body, UnreadFrontmatter(written, "it is not a mapping of names to values")
    return data, body, None


def _names(frontmatter: dict[str, Any], keys: tuple[str, ...], not_read: dict[str, str], *,
           split: bool = False) -> list[str]:
    """The names ``keys`` hold (``aliases`` and ``alias``, say).  Values of another shape, or more than
    ``LIST_MAX`` names, are not read: their keys go into ``not_read`` with why, to be kept as written, and the
    note is imported without those names (one note's properties, never the folder's import)."""
    names: list[str] = []
    present = [key for key in keys if frontmatter.get(key) is not None]
    for key in present:
        value = frontmatter[key]
        if isinstance(value, str):
            values = re.split(r"[,\s]+", value) if split else [value]
        elif isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
            values = [str(v) for v in value]
        else:
            not_read[key] = f"frontmatter {key} must be a string or a list of strings"
            continue
        names += [one_line(v, TITLE_MAX_CHARS) for v in values if v.strip()]
    if len(names) > LIST_MAX:
        not_read.update({key: f"frontmatter {keys[0]} has more than {LIST_MAX} entries" for key in present})
        return []
    return names


def _with_inline_tags(tags: list[str], inline: list[str]) -> list[str]:
    """The frontmatter's and the folder's tags, then the inline ones as long as a page has room for tags
    (past that they stay in the body as text); tags alike by ``tag_key`` are one (the first spelling)."""
    kept, seen = [], set()
    for number, tag in enumerate([*tags, *inline]):
        if tag and tag_key(tag) not in seen and (number < len(tags) or len(kept) < LIST_MAX):
            seen.add(tag_key(tag))
            kept.append(tag)
    return kept


def _inline_tags(body: str, *, logseq: bool = False) -> list[str]:
    """The ``#tags`` of a note's text, in order, outside fenced code and inline code; in a Logseq graph
    ``#[[multi word tag]]`` too."""
    tags, fenced = [], False
    for line in body.splitlines():
        if _fence(line):
            fenced = not fenced
            continue
        if not fenced and "#" in line:  # most lines hold no tag: no pattern is tried on them
            plain = _INLINE_CODE.sub(" ", line) if "`" in line else line
            found = [(match.start(), match.group(1).strip("/")) for match in _INLINE_TAG.finditer(plain)]
            if logseq and "#[[" in plain:
                found = sorted(found + [(match.start(), match.group(1).strip())
                                        for match in LOGSEQ_TAG.finditer(plain)])
            tags += [one_line(tag, TITLE_MAX_CHARS) for _, tag in found]
    return tags


def _fence(line: str) -> bool:
    """Whether a line opens or closes a fenced code block (``_FENCE``), the pattern tried only on lines that
    hold a fence's marks at all."""
    return ("```" in line or "~~~" in line) and _FENCE.match(line) is not None


def _links(original: Original, *, block_references: bool = False) -> list[Link]:
    """The note's links as the engine will read its lines (``str.splitlines`` of the UTF-8 text); with
    ``block_references`` (a Logseq graph's), ``((uuid))`` too, its target written ``((uuid))``."""
    links, fenced = [], False
    for number, line in enumerate(original.data.decode("utf-8").splitlines(), start=1):
        if _fence(line):
            fenced = not fenced
            continue
        if fenced or ("[" not in line and not (block_references and "((" in line)):  # links hold a "[" or "(("
            continue
        # A link shown as code (`[[Note]]`) is text: links are looked for with code blanked, which keeps every
        # other one in its place, and read from the line as written (a label may be code: [[Note|`label`]]).
        found = _INLINE_CODE.sub(lambda code: " " * len(code.group(0)), line) if "`" in line else line
        on_line: list[tuple[int, Link]] = []  # by where each starts: the line's links in the order written
        for match in _WIKILINK.finditer(found):
            text, target = line[match.start():match.end()], line[match.start(2):match.end(2)].strip()
            if match.group(4) is not None and target.endswith("\\"):
                target = target[:-1].rstrip()  # [[Note\|label]]: the pipe escaped for a table's row
            if target:
                on_line.append((match.start(), Link(number, text, target, bool(match.group(1)),
                                                    line[match.start() - 1:match.start()] == "#")))
        for match in _MARKDOWN_LINK.finditer(found):
            text, target = line[match.start():match.end()], line[match.start(1):match.end(1)]
            if "://" not in target and not target.startswith(("#", "mailto:")):
                target = target.partition("#")[0]  # a heading of the note (a "#" of a name is written %23)
                on_line.append((match.start(), Link(number, text, target, text.startswith("!"))))
        if block_references and "((" in found:
            on_line += [(match.start(), Link(number, line[match.start():match.end()], match.group(0), False))
                        for match in BLOCK_REFERENCE.finditer(found)]
        links += [link for _, link in sorted(on_line, key=lambda placed: placed[0])]
    return links
