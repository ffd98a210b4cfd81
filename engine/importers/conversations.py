"""What the chat exports (ChatGPT, Claude) share: a conversation as imported, reading an export's conversation
files, and one page writer for every conversation.

A conversation's page is a ``source`` page: its title, dates, address (``fields.url``, which a newer
export's import finds it by) and transcript; the transcripts are retained a hundred to a text file, each
page citing its own lines, and the export itself is retained once, each page citing the part that holds it.
"""

from __future__ import annotations

import hashlib
import re
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import quote

from ..core.errors import InvalidParams
from ..core.words import for_count
from ..store.attachments import ATTACH_MAX_BYTES
from ..store.inputs import EXCERPT_MAX_CHARS, LIST_MAX
from .answers import ConversationsImport, PageDraft
from .common import Original, Writer, refused, report, revised_note, says_same
from .text import one_line, split_text
from .zipped import export_zip, is_zip, read_parsed_file


@dataclass(frozen=True)
class Message:
    role: str  # as shown: User, Assistant, Tool (name)
    at: str | None
    text: str


@dataclass(frozen=True)
class Attached:
    """A file a conversation carries (an image in the export, an attachment's text), retained with its page
    and cited by it.  Its bytes are read when they are retained (``read``), not held all import long."""

    name: str  # the file name it is retained under
    read: Callable[[], bytes] = field(compare=False, repr=False)
    media_type: str | None = None
    identity: str = ""  # what makes two the same file (a member's path, a text's sha256); "": its name


def distinct_files(found: Iterable[Attached]) -> tuple[Attached, ...]:
    """Each file once (by its identity), under a name no other of them has: a second ``notes.txt`` with
    other bytes is retained as ``notes (2).txt``, not left out."""
    kept: dict[str, Attached] = {}
    names: set[str] = set()
    for attached in found:
        identity = attached.identity or attached.name
        if identity in kept:
            continue
        name, number = attached.name, 2
        stem, dot, extension = attached.name.rpartition(".")
        while name in names:
            name = f"{stem} ({number}).{extension}" if dot and stem else f"{attached.name} ({number})"
            number += 1
        names.add(name)
        kept[identity] = replace(attached, name=name)
    return tuple(kept.values())


@dataclass(frozen=True)
class Conversation:
    """One conversation of an export, as imported: only the messages of its active branch."""

    key: str  # the export's id of the conversation
    place: str  # where it is in the file, for errors: ``[3]``
    title: str
    created: str | None
    updated: str | None
    messages: tuple[Message, ...]
    span: tuple[int, int]  # the bytes of the original holding it
    files: tuple[Attached, ...] = ()
    # The file holding it where an export is split (conversations-000.json, ...) or it is a project (Claude's
    # projects.json); None: the import's original.
    part: Original | None = field(default=None, compare=False, repr=False)
    kind: str = "conversation"  # or "project": a Claude project, its instructions and documents as messages

    @property
    def transcript(self) -> str:
        """One block per message: ``Role (time):`` then its text; blank lines between."""
        return "\n\n".join(f"{m.role}" + (f" ({m.at})" if m.at else "") + f":\n{m.text}" for m in self.messages)


TRANSCRIPT_BODY_MAX_CHARS = 1_000_000
# Transcripts are retained together, many to a text file, each page citing its own lines: one publication
# of a few files per hundred conversations instead of two more files in every page's publication.
TRANSCRIPTS_PER_SOURCE = 100


_CONVERSATIONS_FILE = re.compile(r"conversations(-[0-9]+)?\.json")
_CONVERSATIONS_PART = re.compile(r"conversations-([0-9]+)\.json")


def read_conversation_files(path: str | Path) -> list[Original]:
    """A chat export's conversation files: its ``conversations.json``, or, where the export is split,
    ``conversations-000.json``, ``conversations-001.json``, ... in order.  PATH is the export's zip, the
    folder it was unzipped to, or one such file (which is then read alone)."""
    path = Path(path)
    if path.is_dir():
        try:
            names = [p.name for p in path.iterdir()
                     if _CONVERSATIONS_FILE.fullmatch(p.name) and p.is_file() and not p.is_symlink()]
        except OSError as exc:
            raise InvalidParams(f"cannot read {path}: {exc.strerror or exc}", file=str(path)) from exc
        chosen = _conversation_members(names)
        if not chosen:
            raise refused(str(path), None, "holds no conversations.json (nor conversations-000.json, ...)")
        return [Original(f"{path.name}/{name}", read_parsed_file(path / name)) for name in chosen]
    if not is_zip(path):
        return [Original(path.name, read_parsed_file(path))]
    with export_zip(path) as archive:
        names = [n for n in archive.names()
                 if _CONVERSATIONS_FILE.fullmatch(n.rsplit("/", 1)[-1]) and not n.endswith("/")]
        chosen = _conversation_members(names)
        if not chosen:
            raise refused(str(path), None, "holds no conversations.json (nor conversations-000.json, ...)")
        return [Original(f"{path.name}/{name}", archive.read_parsed(name)) for name in chosen]




def _conversation_members(names: list[str]) -> list[str]:
    """Of the names of conversation files (paths in a zip or a folder): the export's own, the least deep
    (not a nested copy); its conversations.json, else its numbered parts in their order."""
    names = [n for n in names if "__MACOSX/" not in n]
    if not names:
        return []
    depth = min(n.count("/") for n in names)
    names = [n for n in names if n.count("/") == depth]
    whole = sorted(n for n in names if n.rsplit("/", 1)[-1] == "conversations.json")
    if whole:
        return whole[:1]
    return sorted(names, key=lambda n: (int(_CONVERSATIONS_PART.fullmatch(n.rsplit("/", 1)[-1]).group(1)), n))


def import_conversations(writer: Writer, original: Original, conversations: list[Conversation],
                         product: str) -> ConversationsImport:
    """Retain the export, then the transcripts (a hundred to a file), then one page per conversation.

    A conversation an earlier import made a page of (found by its ``fields.url``) that says the same
    is left as it is; one that changed since (it went on, or was renamed) gets a new revision of that
    page, citing the newer export.  The export and a transcripts file are retained only when some page
    cites them, so importing a newer export where nothing changed retains nothing.
    """
    parts = [original] + list(dict.fromkeys(c.part for c in conversations if c.part is not None))
    try:
        pages, revised = _write_conversations(writer, conversations, product, parts)
    finally:
        writer.close()
    return _finish(writer, original, conversations, parts, pages, revised)


def _write_conversations(writer: Writer, conversations: list[Conversation], product: str,
                         parts: list[Original]) -> tuple[dict[str, str], int]:
    """The pages of ``conversations``, many written at a time (``Writer.later``): (their ids by conversation
    key, how many revised an earlier import's page)."""
    earlier = writer.imported_pages("source", product.lower())
    shas = {hashlib.sha256(part.data[start:start + ATTACH_MAX_BYTES]).hexdigest()
            for part in parts for start in range(0, len(part.data), ATTACH_MAX_BYTES)}
    rerun: list[bool] = []  # decided at the first unchanged page: does it cite this very file?
    exports: dict[int, list[str]] = {}  # a part's number: its source ids, once retained

    def export_sources(conversation: Conversation) -> list[str]:
        number = parts.index(conversation.part) if conversation.part is not None else 0
        if number not in exports:  # the first file's request key is the one an unsplit export always had
            exports[number] = writer.retain(parts[number], "export" if number == 0 else f"export-{number + 1}")
        return exports[number]
    pages: dict[str, Future[str]] = {}
    read: dict[str, str] = {}  # an earlier page's id: the sha256 of its version this import read
    revised = 0
    done = 0
    for batch in _transcript_batches(conversations):
        planned = []
        for conversation, data in batch:
            params = _conversation_page(conversation, product)
            found = earlier.get(params["fields"]["url"])
            if found is not None:
                page = writer.current_page(found[0])
                read[found[0]] = page["sha256"]  # the version a revision of it is planned on
                if says_same(page, params):
                    if not rerun:
                        cited = [e.get("source") for e in page["frontmatter"].get("evidence") or []]
                        rerun.append(bool(shas & set(writer.source_sha256s(
                            c for c in cited if isinstance(c, str)).values())))
                    found = (found[0], None)  # unchanged: nothing to write
            planned.append((conversation, data, params, found))
        retained: list[str] = []
        # A batch is retained when a page of it is written; on a rerun of the same file (finishing an
        # interrupted import) every batch is, as retries of what the first run retained.
        if (rerun and rerun[0]) or any(found is None or found[1] is not None for _, _, _, found in planned):
            for conversation, _, _, found in planned:
                if (rerun and rerun[0]) or found is None or found[1] is not None:
                    export_sources(conversation)
            if sum(len(data) for _, data in batch) <= ATTACH_MAX_BYTES:
                name = f"{product.lower()}-transcripts-{done + 1:06d}-{done + len(batch):06d}.txt"
                retained = writer.retain(Original(name, b"".join(data for _, data in batch)),
                                         f"transcripts-{done + 1}", media_type="text/plain")
        line = 1
        for conversation, data, params, found in planned:
            count = len(data.decode("utf-8", "surrogatepass").splitlines())  # as the engine counts lines
            first_line, line = line, line + count
            if found is not None and found[1] is None:
                write = partial(_keep, writer, conversation, found[0], bool(rerun and rerun[0]))
            else:
                if retained:
                    transcript = [{"source": retained[0], "lines": [first_line, first_line + count - 2]}]
                else:  # a transcript larger than one attachment: retained in excerpts of its own
                    transcript = [{"excerpt": piece}
                                  for piece in split_text(conversation.transcript, EXCERPT_MAX_CHARS)]
                first, last = conversation.span
                sources = export_sources(conversation)
                cited = sources[first // ATTACH_MAX_BYTES:max(first, last - 1) // ATTACH_MAX_BYTES + 1] or sources[:1]
                if found is not None:  # changed since the earlier import: that page's next revision
                    params = {"id": found[0], "expectedRevision": found[1], "expectedSha256": read[found[0]],
                              **params}
                    revised += 1
                write = partial(_write_page, writer, conversation, params, transcript + [{"source": source}
                                                                                         for source in cited])
            done += 1
            pages[conversation.key] = writer.later(write, partial(writer.done, done, len(conversations),
                                                                  conversation.title))
    writer.settle()
    return {key: future.result() for key, future in pages.items()}, revised


def _keep(writer: Writer, conversation: Conversation, page_id: str, rerun: bool) -> str:
    """A conversation whose page says the same already: kept, and on a rerun of the same file its files'
    retries, as the first run retained them."""
    if rerun:
        _retain_files(writer, conversation)
    return writer.kept(page_id)


def _write_page(writer: Writer, conversation: Conversation, params: PageDraft, evidence: list[dict[str, Any]]) -> str:
    """A conversation's page (a new one, or the next revision of ``params["id"]``), citing ``evidence`` and the
    files the conversation carries, retained first; returns its id."""
    evidence = evidence + [{"source": source} for source in _retain_files(writer, conversation)]
    return writer.save_page(f"c-{conversation.key}", {**params, "evidence": evidence[:LIST_MAX]})


def _finish(writer: Writer, original: Original, conversations: list[Conversation], parts: list[Original],
            pages: dict[str, str], revised: int) -> ConversationsImport:
    notes = revised_note(writer, revised, "conversation")
    if not conversations:
        notes.append(f"{original.name} holds no conversations: nothing to import.")
    split = {"files": [{"file": part.name, "sha256": part.sha256} for part in parts]} if len(parts) > 1 else {}
    projects = sum(c.kind == "project" for c in conversations)
    return report(writer, ConversationsImport, file=original.name, sha256=original.sha256, **split,
                  conversations=len(conversations) - projects, **({"projects": projects} if projects else {}),
                  pages=pages, revised=revised, **({"notes": notes} if notes else {}))


def _retain_files(writer: Writer, conversation: Conversation) -> list[str]:
    """Retain the files a conversation carries (images, attachments); returns their source ids."""
    ids: list[str] = []
    for number, attached in enumerate(conversation.files, start=1):
        ids += writer.retain(Original(attached.name, attached.read()), f"c-{conversation.key}-file-{number}",
                             media_type=attached.media_type)
    return ids


CONVERSATION_URLS = {"ChatGPT": "https://chatgpt.com/c/", "Claude": "https://claude.ai/chat/"}
PROJECT_URLS = {"Claude": "https://claude.ai/project/"}  # only a Claude export holds projects


def _transcript_batches(conversations: list[Conversation]) -> Iterator[list[tuple[Conversation, bytes]]]:
    """Conversations with their transcript blocks (UTF-8), a hundred at most and one attachment's size
    at most to a batch (a larger block is a batch of its own)."""
    batch: list[tuple[Conversation, bytes]] = []
    size = 0
    for conversation in conversations:
        data = _transcript_block(conversation).encode("utf-8", "surrogatepass")
        if batch and (len(batch) == TRANSCRIPTS_PER_SOURCE or size + len(data) > ATTACH_MAX_BYTES):
            yield batch
            batch, size = [], 0
        batch.append((conversation, data))
        size += len(data)
    if batch:
        yield batch


def _transcript_block(conversation: Conversation) -> str:
    """A conversation's lines in a transcripts file: a heading line, its transcript, a blank line."""
    heading = f"# {conversation.title} ({one_line(conversation.key)})"
    return f"{heading}\n{conversation.transcript or '(no messages)'}\n\n"


def _conversation_page(conversation: Conversation, product: str) -> PageDraft:
    """One ``source`` page per conversation (evidence added by the caller): its title, its dates in the body
    and ``published``, the conversation's address in ``url`` (what finds it again in a newer export), the
    transcript as the body.  A project's page says so, and its address is the project's."""
    text = conversation.transcript
    project = conversation.kind == "project"
    header = [f"{product} {conversation.kind} {one_line(conversation.key)}."]
    if conversation.created:
        header.append(("Created " if project else "Started ") + conversation.created
                      + (f", last updated {conversation.updated}." if conversation.updated else "."))
    if project:
        documents = sum(m.role.startswith("Document") for m in conversation.messages)
        header.append(f"{documents} {for_count(documents, 'document', 'documents')}.")
    else:
        header.append(f"{len(conversation.messages)} messages on the active branch.")
    shown = text if len(text) <= TRANSCRIPT_BODY_MAX_CHARS else (
        text[:TRANSCRIPT_BODY_MAX_CHARS] + "\n\n(The rest is in the retained transcript.)")
    address = PROJECT_URLS[product] if project else CONVERSATION_URLS[product]
    fields = {"url": address + quote(conversation.key, safe="")}
    if conversation.created:
        fields["published"] = conversation.created[:10]
    return {"type": "source", "title": conversation.title,
            "body": " ".join(header) + ("\n\n" + shown if shown else ""), "tags": [product.lower()],
            "fields": fields}
