"""A chat export (ChatGPT, Claude) read as its owner gave it: its conversations, the files they name, and
its other files (Claude's ``projects.json``, ChatGPT's ``group_chats.json``).

An export is what PATH is, and a file it names is looked for in it and nowhere else:

- its zip: the zip's members, at any depth;
- the folder it was unzipped to: the folder's regular files, to ``MAX_DEPTH`` folders down, read as every
  importer reads a folder (``folders.walk_input``: a link is never followed, and is named in the result);
- a ``conversations.json`` given alone: that file only.  The folder it sits in may be the owner's
  Downloads or home, so nothing beside it is the export's: its images and attachments are named as not
  found, and the result says to import the zip or the folder to bring them in.

In a zip as in a folder, a file with a part of its path starting with a dot (``.bash_history``,
``.config/personal.txt``, ``.DS_Store``) and macOS's ``__MACOSX/`` shadows are never an export's files.
A file is looked up by a plain name only: a name with ``/`` or ``\\`` in it, or starting with a dot
(``../notes.txt``, ``/home/dana/tax.txt``, ``file-service://Documents/tax.txt``), resolves to nothing.
What the conversations name and the export does not give is listed (``Unread``), and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from ..core.files import MAX_DEPTH
from ..core.words import counted, for_count
from .answers import ConversationsImport
from .common import Original, Scan, refuse_secrets, refused
from .json_shapes import json_array_spans
from .conversations import _CONVERSATIONS_FILE, Conversation, read_conversation_files
from .folders import hidden, left_out_notes, read_regular_file, walk_input
from .text import one_line
from .zipped import ZIP_ERRORS, BoundedZip, export_zip, is_zip, member_named, read_parsed_file

_SHOWN_NAMES = 10  # names a note shows before "and N more"


@dataclass(frozen=True)
class Unread:
    """What an import of a chat export did not read: the files its conversations name that the export does
    not hold or never gives (``missing``: a dot-file's name, a path), and the links in its folder, never
    followed (``links``, named as the export's name and the path in it)."""

    missing: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    alone: bool = False  # a conversations.json given alone: no file beside it is the export's

    def notes(self) -> list[str]:
        """One note on the files named and not imported (the count and the first names), then one on links."""
        notes = []
        if self.missing:
            shown = ", ".join(self.missing[:_SHOWN_NAMES]) + (
                f" and {len(self.missing) - _SHOWN_NAMES} more" if len(self.missing) > _SHOWN_NAMES else "")
            if self.alone:
                notes.append(f"{counted(len(self.missing), 'file')} the conversations name "
                             f"{for_count(len(self.missing), 'was', 'were')} not imported: {shown}. "
                             "A conversations.json given alone is an export of its own: no file beside it is "
                             "read (that folder may be any, Downloads say); import the export's zip or folder "
                             "to bring them in.")
            else:
                notes.append(f"{counted(len(self.missing), 'file')} the conversations name "
                             f"{for_count(len(self.missing), 'is', 'are')} not in the export, or "
                             f"{for_count(len(self.missing), 'is', 'are')} never taken from it (a dot-file, a link, "
                             f"a path): {shown}.")
        return notes + left_out_notes(self.links)

    def said(self, result: ConversationsImport) -> ConversationsImport:
        """``result`` with the links in ``leftOut`` and these notes after its own."""
        notes = self.notes()
        if not notes:
            return result
        left_out = [*result.get("leftOut", []), *self.links]
        return {**result, **({"leftOut": left_out} if left_out else {}),
                "notes": [*result.get("notes", []), *notes]}


class ExportFiles:
    """The other files of a chat export, where its conversations name them: the members of its zip, the
    files of its unzipped folder (links and dot-files left out), or none for a conversations.json given
    alone.  The names looked for and not found are gathered (``not_found``) for the result to list."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.zipped = not self.path.is_dir() and is_zip(self.path)
        self.alone = not self.zipped and not self.path.is_dir()
        self.links: tuple[str, ...] = ()
        self.missing: dict[str, None] = {}  # in the order first named
        if self.zipped:
            with export_zip(self.path) as archive:
                names = [n for n in archive.names() if not n.endswith("/") and _export_member(n)]
        elif self.alone:
            names = []
        else:
            folder = walk_input(self.path, depth=MAX_DEPTH, skip_folder=lambda name: name == "__MACOSX")
            names = [n for n in folder.files if not _CONVERSATIONS_FILE.fullmatch(n.rsplit("/", 1)[-1])]
            self.links = tuple(f"{self.path.name}/{link}" for link in folder.symlinks)
        # Every file under each start of its base name that ends before a "-", "_" or "." (and the whole
        # name): what an id can name it by, looked up at once however many files the export holds.
        self.by_start: dict[str, str] = {}
        for name in sorted(names):
            base = name.rsplit("/", 1)[-1]
            for end in [i for i, c in enumerate(base) if c in "-_."] + [len(base)]:
                self.by_start.setdefault(base[:end], name)

    def find(self, key: Any) -> str | None:
        """The first file (by path) whose base name is ``key`` or starts with it and then "-", "_" or ".";
        None for a key that is no plain file name (a path, a dot-file's name)."""
        return self.by_start.get(key) if _plain_name(key) else None

    def not_found(self, name: Any) -> None:
        """Say that the conversations name ``name`` and the export does not give it."""
        if isinstance(name, str) and name.strip():
            self.missing.setdefault(one_line(name, 200), None)

    def unread(self) -> Unread:
        return Unread(tuple(self.missing), self.links, self.alone)

    def reader(self, name: str) -> Callable[[], bytes]:
        """How to read ``name`` when it is retained; a file that cannot be read then (or has become a link)
        is refused naming it."""
        def read() -> bytes:
            if not self.zipped:
                return read_regular_file(self.path / name, f"{self.path.name}/{name}")
            try:
                with BoundedZip(self.path) as archive:
                    return archive.read(name)
            except (*ZIP_ERRORS, KeyError) as exc:
                raise refused(f"{self.path.name}/{name}", None, f"cannot be read: {exc}") from exc

        return read


def _plain_name(key: Any) -> bool:
    """Whether ``key`` can name a file of an export: a base name, not a path, not a dot-file's."""
    return isinstance(key, str) and bool(key) and not key.startswith(".") and "/" not in key and "\\" not in key


def _export_member(name: str) -> bool:
    """Whether a zip member may be a file of the export: no dot-file or dot-folder, no macOS shadow."""
    return not hidden(name) and "__MACOSX/" not in name


def load_conversations(path: str, scan: Scan,
                       parse: Callable[[Original, Any, list[tuple[int, int]], ExportFiles], list[Conversation]]
                       ) -> tuple[Original, list[Conversation], Unread]:
    """A chat export's conversations (its conversations.json or the parts of a split export; the file, the
    export's zip or its folder) as ``parse`` reads them (with the export's other files they name), checked
    whole, credentials included (else InvalidParams), and what the export names that was not read.  The
    original returned is the first file; each conversation of a later part names its own (``part``)."""
    originals = read_conversation_files(path)
    files = ExportFiles(path)
    conversations: list[Conversation] = []
    seen: dict[str, str] = {}
    for number, original in enumerate(originals):
        data, spans = json_array_spans(original)
        parsed = parse(original, data, spans, files)
        for conversation in parsed:
            if conversation.key in seen:
                raise refused(original.name, conversation.place,
                              f"repeats the conversation id {conversation.key!r} of {seen[conversation.key]}")
            seen[conversation.key] = original.name
        refuse_secrets(scan, original, lambda parsed=parsed: ((c.place, c.title + "\n" + c.transcript)
                                                              for c in parsed))
        conversations += parsed if number == 0 else [replace(c, part=original) for c in parsed]
    for conversation in conversations:
        for attached in conversation.files:  # read once to be checked, again when retained
            refuse_secrets(scan, Original(attached.name, attached.read()), lambda: ())
    return originals[0], conversations, files.unread()


def read_export_member(path: str | Path, member: str) -> Original | None:
    """Another file of a chat export (Claude's projects.json): in its zip (the least deep), or at the top of
    its folder; None where the export holds none (a conversations.json given alone holds none).  It is parsed
    whole, so it is refused beyond ``zipped.PARSED_MAX_BYTES`` before it is read."""
    path = Path(path)
    if path.is_dir() or not is_zip(path):
        found = _beside(path, member)
        return None if found is None else Original(found[0], read_parsed_file(found[1]))
    with export_zip(path) as archive:
        chosen = member_named(archive.names(), member)
        return None if chosen is None else Original(f"{path.name}/{chosen}", archive.read_parsed(chosen))


def export_member_name(path: str | Path, member: str) -> str | None:
    """The name another file of a chat export has, found as ``read_export_member`` finds it but not read;
    None where the export holds none."""
    path = Path(path)
    if path.is_dir() or not is_zip(path):
        found = _beside(path, member)
        return None if found is None else found[0]
    with export_zip(path) as archive:
        chosen = member_named(archive.names(), member)
    return None if chosen is None else f"{path.name}/{chosen}"


def _beside(path: Path, member: str) -> tuple[str, Path] | None:
    """``member`` at the top of an unzipped export's folder, a regular file (a link there is not followed: the
    folder's walk names it): its name as shown, and its path.  None for a file given alone, whose export it
    is: the folder it is in may be any."""
    if not path.is_dir():
        return None
    found = path / member
    if found.is_symlink() or not found.is_file():
        return None
    return f"{path.name}/{member}", found
