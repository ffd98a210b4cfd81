"""Importing a Claude data export: one page per conversation, its active branch only.

A Claude export (a zip, its folder, or the ``conversations.json`` inside it) holds a
list of conversations: ``uuid``, ``name``, ``created_at`` and ``updated_at``
(ISO-8601) and ``chat_messages``, each with ``uuid``, ``sender`` (``human``
or ``assistant``), ``created_at``, and its words as ``content`` blocks
(``{type: text, text}``) or, in older exports (or where the blocks hold
no words), as ``text``.  Of the tool calls (``tool_use``) only what Claude
wrote for the owner is kept: an artifact (``artifacts``: created or
rewritten whole, or edited by a replacement) and a file it created
(``create_file``), each as fenced text; searches, fetches, tool results and
thinking are left out.  Attached files are named (``[attachment: name]``).
An attachment's ``extracted_content`` (the text Claude read from it) is
retained as a text file of its own (``market-map.pdf.txt``), and a file
the export holds in its zip or folder (by its ``file_name``, or a name
starting with its ``file_uuid``) is retained as it is; the conversation's
page cites both.  A ``conversations.json`` given alone is an export of its
own, holding no other file (engine/importers/exports.py); what the
conversations name and the export does not give is listed in a note.

The export's ``projects.json`` (its projects: description, instructions,
knowledge documents) gives one page per project, at
``https://claude.ai/project/<uuid>``.

Messages are in order.  Where an export keeps edits and retries as
branches (messages with ``parent_message_uuid`` and the conversation's
``current_leaf_message_uuid``), only the path from the root to that leaf
is imported, as for ChatGPT.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any, Callable

from .answers import ConversationsImport
from .common import Original, Scan, Writer, refuse_secrets, refused
from .conversations import Attached, Conversation, Message, distinct_files, import_conversations
from .exports import ExportFiles, Unread, load_conversations, read_export_member
from .json_shapes import json_array_spans, keyed_objects, require
from .text import clean_text, fenced, one_line, timestamp

FORMAT = "claude"
PRODUCT = "Claude"
_SENDERS = {"human": "User", "user": "User", "assistant": "Assistant"}


def load_claude(path: str, scan: Scan) -> tuple[Original, list[Conversation], Unread]:
    """The export's conversations.json and its conversations, then its projects (projects.json, where the
    export holds one), checked whole (else InvalidParams); and what the export did not give (the files the
    conversations name that it does not hold, the links in its folder)."""
    original, conversations, unread = load_conversations(path, scan, parse_conversations)
    found = read_export_member(path, "projects.json")
    if found is None:
        return original, conversations, unread
    data, spans = json_array_spans(found)
    projects = parse_projects(found, data, spans)
    known = {c.key for c in conversations}
    for project in projects:
        if project.key in known:
            raise refused(found.name, f"{project.place}.uuid", f"repeats the uuid {project.key!r} of a conversation")
    refuse_secrets(scan, found, lambda: ((p.place, p.title + "\n" + p.transcript) for p in projects))
    return original, conversations + [replace(p, part=found) for p in projects], unread


def _uuid(original: Original) -> Callable[[dict[str, Any], str], str]:
    """What keys a Claude conversation or project: its ``uuid``."""
    return lambda raw, place: require(original, raw, "uuid", str, place)


def parse_projects(original: Original, data: Any, spans: list[tuple[int, int]]) -> list[Conversation]:
    """projects.json: a list of ``{uuid, name, description, prompt_template, created_at, updated_at, docs}``,
    each doc ``{uuid, filename, content, created_at}``; a project becomes a page whose messages are its
    description, its instructions (``prompt_template``) and each document, whole.  A starter project
    (``is_starter_project``: the example every account begins with) is not the owner's and is left out."""
    projects = []
    for index, place, raw, key in keyed_objects(original, data, "projects", _uuid(original),
                                                ("uuid", "project uuid")):
        if raw.get("is_starter_project") is True:  # Claude's own example, in every account: not the owner's
            continue
        name = require(original, raw, "name", str, place, optional=True)
        messages = []
        for field, role in (("description", "Description"), ("prompt_template", "Instructions")):
            said = clean_text(require(original, raw, field, str, place, optional=True) or "").strip()
            if said:
                messages.append(Message(role, None, said))
        for number, doc in enumerate(require(original, raw, "docs", list, place, optional=True) or []):
            at = f"{place}.docs[{number}]"
            if not isinstance(doc, dict):
                raise refused(original.name, at, "must be an object")
            filename = one_line(require(original, doc, "filename", str, at, optional=True) or "", 200) or "document"
            content = clean_text(require(original, doc, "content", str, at, optional=True) or "").strip()
            messages.append(Message("Document", timestamp(doc.get("created_at")),
                                    f"{filename}\n\n{content}" if content else filename))
        span = spans[index] if index < len(spans) else (0, len(original.data))
        projects.append(Conversation(
            key=key, place=place, title=one_line(name or "") or "Untitled project",
            created=timestamp(raw.get("created_at")), updated=timestamp(raw.get("updated_at")),
            messages=tuple(messages), span=span, kind="project"))
    return projects


def import_claude(writer: Writer, original: Original, conversations: list[Conversation],
                  unread: Unread = Unread()) -> ConversationsImport:
    """Retain the original and the transcripts, then save one page per conversation; returns what was imported,
    with a note on the files named that the export does not give and the links it holds (``leftOut``)."""
    return unread.said(import_conversations(writer, original, conversations, PRODUCT))


def parse_conversations(original: Original, data: Any, spans: list[tuple[int, int]],
                        files: ExportFiles | None = None) -> list[Conversation]:
    conversations = []
    for index, place, raw, key in keyed_objects(original, data, "conversations", _uuid(original),
                                                ("uuid", "conversation uuid")):
        name = require(original, raw, "name", str, place, optional=True)
        raw_messages = require(original, raw, "chat_messages", list, place)
        messages = [_message(original, message, f"{place}.chat_messages[{number}]", files)
                    for number, message in enumerate(raw_messages)]
        chosen = [messages[number] for number, _ in _active_branch(original, raw, raw_messages, place)]
        kept = [message for message, _, _ in chosen if message is not None]
        attached = distinct_files(a for _, found, _ in chosen for a in found)
        for named in (named for _, _, unfound in chosen for named in unfound):  # of the branch imported only
            if files is not None:
                files.not_found(named)
        span = spans[index] if index < len(spans) else (0, len(original.data))
        conversations.append(Conversation(
            key=key, place=place, title=one_line(name or "") or "Untitled conversation",
            created=timestamp(raw.get("created_at")), updated=timestamp(raw.get("updated_at")),
            messages=tuple(kept), span=span, files=attached))
    return conversations


def _active_branch(original: Original, raw: dict[str, Any], messages: list[Any],
                   place: str) -> list[tuple[int, Any]]:
    """(position, message) of the messages to import: all of them, or the path to the current leaf (without
    one, to the message written last: the branch the owner was on)."""
    leaf = raw.get("current_leaf_message_uuid")
    by_uuid = {m.get("uuid"): number for number, m in enumerate(messages)
               if isinstance(m, dict) and isinstance(m.get("uuid"), str)}
    if not any(isinstance(m, dict) and "parent_message_uuid" in m for m in messages):
        return list(enumerate(messages))
    if not isinstance(leaf, str):
        if not by_uuid:
            return list(enumerate(messages))
        latest = max(by_uuid.values(), key=lambda n: (timestamp(messages[n].get("created_at")) or "", n))
        leaf = messages[latest]["uuid"]
    if leaf not in by_uuid:
        raise refused(original.name, f"{place}.current_leaf_message_uuid",
                      f"names {leaf!r}, which is no message of the conversation")
    path, seen = [], set()
    uuid: Any = leaf
    while isinstance(uuid, str) and uuid in by_uuid:
        if uuid in seen:
            raise refused(original.name, f"{place}.chat_messages[{by_uuid[uuid]}]",
                          "is its own ancestor (the parent links form a cycle)")
        seen.add(uuid)
        number = by_uuid[uuid]
        path.append((number, messages[number]))
        uuid = messages[number].get("parent_message_uuid")
    return list(reversed(path))


def _message(original: Original, raw: Any, place: str,
             files: ExportFiles | None) -> tuple[Message | None, list[Attached], list[str]]:
    """The message as imported, the files it brings to retain, and the files it names that the export does
    not give."""
    if not isinstance(raw, dict):
        raise refused(original.name, place, "must be an object")
    sender = require(original, raw, "sender", str, place)
    if sender not in _SENDERS:
        raise refused(original.name, f"{place}.sender", f"is {sender!r}, not 'human' or 'assistant'")
    blocks = require(original, raw, "content", list, place, optional=True)
    text = ""
    if blocks:
        pieces = []
        for number, block in enumerate(blocks):
            if not isinstance(block, dict):
                raise refused(original.name, f"{place}.content[{number}]", "must be an object")
            if block.get("type") == "text":
                pieces.append(require(original, block, "text", str, f"{place}.content[{number}]", optional=True) or "")
            elif block.get("type") == "tool_use":
                pieces.append(_written(block))
        text = "\n\n".join(piece for piece in pieces if piece.strip())
    if not text.strip():  # an older export's words, or blocks that hold none
        text = require(original, raw, "text", str, place, optional=True) or ""
    names, attached, unfound = [], [], []
    for key in ("attachments", "files"):
        for number, item in enumerate(require(original, raw, key, list, place, optional=True) or []):
            if not isinstance(item, dict):
                raise refused(original.name, f"{place}.{key}[{number}]", "must be an object")
            name = item.get("file_name")
            found, missing = _files_of(original, item, f"{place}.{key}[{number}]", files)
            unfound += [missing] if missing else []
            if isinstance(name, str) and name.strip():
                names.append(f"[attachment: {one_line(name, 200)}]")
            elif found:  # text pasted into the message (it has no file name), or a file of the export
                names.append("[attachment]")
            attached += found
    text = clean_text("\n".join([text, *dict.fromkeys(names)])).strip()
    if not text:
        return None, attached, unfound
    return Message(_SENDERS[sender], timestamp(raw.get("created_at")), text), attached, unfound


# An artifact's type as the language of its fenced block.
_ARTIFACT_LANGUAGES = {"text/markdown": "markdown", "text/html": "html", "image/svg+xml": "svg",
                       "application/vnd.ant.mermaid": "mermaid", "application/vnd.ant.react": "jsx"}


def _written(block: dict[str, Any]) -> str:
    """What a tool call wrote that the owner sees as the answer: an artifact (created, rewritten or edited)
    or a file Claude created; "" for every other tool call (a search, a fetch), which is left out."""
    given = block.get("input")
    given = given if isinstance(given, dict) else {}

    def text(*keys: str) -> str:
        return next((given[k] for k in keys if isinstance(given.get(k), str) and given[k].strip()), "")

    if block.get("name") == "artifacts":
        name = one_line(text("title", "id") or "artifact", 200)
        if given.get("command") == "update" and text("new_str"):
            return f"[artifact edited: {one_line(text('id', 'title') or 'artifact', 200)}]\n{fenced(text('new_str'), '')}"
        if text("content"):
            language = text("language") or _ARTIFACT_LANGUAGES.get(text("type"), "")
            return f"[artifact: {name}]\n{fenced(text('content'), language)}"
    elif block.get("name") == "create_file" and text("file_text", "content"):
        name = one_line(text("path", "filename").replace("\\", "/").rsplit("/", 1)[-1] or "file", 200)
        return f"[file: {name}]\n{fenced(text('file_text', 'content'), '')}"
    return ""


def _files_of(original: Original, item: dict[str, Any], place: str,
              files: ExportFiles | None) -> tuple[list[Attached], str | None]:
    """What an attachment brings to retain: its extracted text, and its file where the export holds it (by
    its ``file_name``, or a name starting with its ``file_uuid``); and the file it names when the export
    does not give it (its name, else its uuid; None when it is found or names none)."""
    name = item.get("file_name")
    shown = one_line(name, 200) if isinstance(name, str) and name.strip() else "attachment"
    found: list[Attached] = []
    extracted = require(original, item, "extracted_content", str, place, optional=True)
    if extracted and extracted.strip():
        data = clean_text(extracted).encode("utf-8", "surrogatepass")
        found.append(Attached(f"{shown}.txt", lambda data=data: data, "text/plain",
                              identity=f"text:{shown}:{hashlib.sha256(data).hexdigest()}"))
    if files is None:
        return found, None
    uuid = item.get("file_uuid") or item.get("uuid")
    member = files.find(name) or (files.find(uuid) if isinstance(uuid, str) and len(uuid) >= 8 else None)
    if member is None:
        named = [n for n in (name, uuid) if isinstance(n, str) and n.strip()]
        return found, named[0] if named else None
    found.append(Attached(member.rsplit("/", 1)[-1], files.reader(member), identity=f"member:{member}"))
    return found, None
