"""Importing a ChatGPT data export: one page per conversation, its active branch only.

A ChatGPT export (a zip, its folder, or the ``conversations.json`` inside
it; a large account's is split into ``conversations-000.json``, ...) holds a
list of conversations.  Each has ``id`` (or ``conversation_id``), ``title``,
``create_time`` and ``update_time`` (Unix seconds, floats), and its messages
as a tree: ``mapping`` maps a node id to ``{id, message, parent,
children}``, and ``current_node`` is the leaf the owner last saw.  A
regenerated answer or an edited question is a sibling branch; only the path
from the root to ``current_node`` is what the conversation said, so the
import walks ``parent`` links up from ``current_node`` and never reads the
abandoned branches.

A node's ``message`` (null at the root) has ``author.role`` (user,
assistant, system, tool), ``create_time``, ``recipient`` and ``content``:
``content_type`` with ``parts`` (text, multimodal_text: strings, or objects
for images, audio and files; in voice mode an ``audio_transcription`` object
holds the words spoken) or ``text`` (code, execution output, quotes).
System messages, messages marked hidden, custom instructions, hidden
reasoning, what a tool gave the model (search results, fetched pages, errors:
of a tool's messages only code output, quotes and images stay) and messages
without text are left out; an image or file part is
shown as ``[image]`` / ``[file]``, code and its output as fenced code, a
quote with where it is from, a Canvas document as its name and text, and an
assistant's call of a tool (``recipient``
not ``all``) as ``Assistant (to python)``.  A conversation whose
``current_node`` is null ends at the leaf written last.

An image part names its file by ``asset_pointer`` (``file-service://file-AbC123``,
``sediment://file_00000000...``); the export keeps the file beside
conversations.json (in the zip, or the unzipped folder) under a name that
starts with that id (``file-AbC123-photo.png``).  A file found so is
retained with the conversation's page, cited by it, and named in the
transcript (``[image: file-AbC123-photo.png]``).  A document the owner
uploaded is listed in the message's ``metadata.attachments`` (``{id, name}``):
named (``[attachment: lease.pdf]``) and its file, found by its id the same
way, retained.  A ``conversations.json`` given alone is an export of its own,
holding no other file (engine/importers/exports.py); what the conversations
name and the export does not give is listed in a note.

A newer export's ``group_chats.json`` is not read (no description of its
shape could be trusted): where the export holds it, the result names it in
``leftOut`` and says so in a note.
"""

from __future__ import annotations

import json
from typing import Any

from .answers import ConversationsImport
from .common import Original, Scan, Writer, refused
from .json_shapes import keyed_objects, require
from .conversations import Attached, Conversation, Message, import_conversations
from .exports import ExportFiles, Unread, export_member_name, load_conversations
from .text import clean_text, fenced, one_line, timestamp

FORMAT = "chatgpt"
PRODUCT = "ChatGPT"
_ROLES = {"user": "User", "assistant": "Assistant", "tool": "Tool"}


# Files of a newer export the import does not read, said in the result when the export holds them: no
# description of their shape that could be trusted was found (OpenAI publishes none), so no parser guesses it.
NOT_READ = {"group_chats.json": "its group chats"}


def load_chatgpt(path: str, scan: Scan) -> tuple[Original, list[Conversation], tuple[str, ...], Unread]:
    """The export's conversations.json and its conversations, checked whole (else InvalidParams); the
    names of the files of ``NOT_READ`` it holds, which are not imported; and what else it did not read (the
    files the conversations name that it does not give, the links in its folder)."""
    original, conversations, unread = load_conversations(path, scan, parse_conversations)
    left_out = tuple(name for name in (export_member_name(path, member) for member in NOT_READ) if name)
    return original, conversations, left_out, unread


def import_chatgpt(writer: Writer, original: Original, conversations: list[Conversation],
                   left_out: tuple[str, ...] = (), unread: Unread = Unread()) -> ConversationsImport:
    """Retain the original and the transcripts, then save one page per conversation; returns what was imported,
    naming the export's files that are not (``leftOut``, and a note for each) and the files named that the
    export does not give (a note)."""
    result = import_conversations(writer, original, conversations, PRODUCT)
    if left_out:
        said = [f"{name} is in the export and was not imported: its format is not documented, so Knowledge "
                f"does not read {NOT_READ[name.rsplit('/', 1)[-1]]}." for name in left_out]
        result = {**result, "leftOut": list(left_out), "notes": [*result.get("notes", []), *said]}
    return unread.said(result)


# --- reading the export ---------------------------------------------------------------------------------


def parse_conversations(original: Original, data: Any, spans: list[tuple[int, int]],
                        files: ExportFiles | None = None) -> list[Conversation]:
    def key_of(raw: dict[str, Any], place: str) -> str:
        key = raw.get("conversation_id") or raw.get("id")
        if not isinstance(key, str) or not key.strip():
            raise refused(original.name, place, "has no conversation id ('id' or 'conversation_id')")
        return key

    conversations = []
    for index, place, raw, key in keyed_objects(original, data, "conversations", key_of,
                                                ("id", "conversation id")):
        title = raw.get("title")
        if title is not None and not isinstance(title, str):
            raise refused(original.name, f"{place}.title", "must be a string")
        found: dict[str, Attached] = {}
        messages = _active_branch(original, raw, place, _Finder(files, found))
        span = spans[index] if index < len(spans) else (0, len(original.data))
        conversations.append(Conversation(
            key=key, place=place, title=one_line(title or "") or "Untitled conversation",
            created=timestamp(raw.get("create_time")), updated=timestamp(raw.get("update_time")),
            messages=tuple(messages), span=span, files=tuple(found.values())))
    return conversations


class _Finder:
    """The export's file an asset pointer names, gathered for the conversation (each once); a pointer naming
    a file the export does not give (or a path: ``file-service://Documents/tax.txt``) is said not found."""

    def __init__(self, files: ExportFiles | None, found: dict[str, Attached]) -> None:
        self.files, self.found = files, found

    def __call__(self, pointer: Any) -> str | None:
        if self.files is None or not isinstance(pointer, str):
            return None
        asset = pointer.split("://", 1)[-1].strip("/")
        name = self.files.find(asset)
        if name is None:
            self.files.not_found(asset)
            return None
        if name not in self.found:
            self.found[name] = Attached(name.rsplit("/", 1)[-1], self.files.reader(name))
        return self.found[name].name


def _active_branch(original: Original, raw: dict[str, Any], place: str, finder: _Finder) -> list[Message]:
    """The messages from the root to ``current_node``, in order; abandoned branches are never read.

    Without a ``current_node`` (null in some exports) the branch ends at the leaf written last.  A node
    whose ``parent`` is not in the mapping (a root pointing at a placeholder) starts the branch."""
    mapping = require(original, raw, "mapping", dict, place)
    current = require(original, raw, "current_node", str, place, optional=True)
    if current is None:
        current = _latest_leaf(mapping)
        if current is None:
            return []
    elif current not in mapping:
        raise refused(original.name, f"{place}.current_node", f"names {current!r}, which is not in the mapping")
    path, seen = [], set()
    node_id: Any = current
    while node_id is not None:
        at = f"{place}.mapping.{node_id}"
        if node_id in seen:
            raise refused(original.name, at, "is its own ancestor (the parent links form a cycle)")
        seen.add(node_id)
        node = mapping.get(node_id)
        if node is None and path:  # the root's parent is a placeholder the mapping does not hold
            break
        if not isinstance(node, dict):
            raise refused(original.name, at, "is not a node of the mapping" if node is None else "must be an object")
        path.append((at, node))
        node_id = node.get("parent")
        if node_id is not None and not isinstance(node_id, str):
            raise refused(original.name, f"{at}.parent", "must be a node id or null")
    messages = []
    for at, node in reversed(path):
        message = _message(original, node.get("message"), f"{at}.message", finder)
        if message is not None:
            messages.append(message)
    return messages


def _latest_leaf(mapping: dict[str, Any]) -> str | None:
    """The leaf (a node no node of the mapping continues) whose message was written last; the last in the
    mapping's order among equals.  None for an empty mapping."""
    parents = {node.get("parent") for node in mapping.values() if isinstance(node, dict)}
    best: tuple[float, int, str] | None = None
    for order, (node_id, node) in enumerate(mapping.items()):
        if node_id in parents or not isinstance(node, dict):
            continue
        message = node.get("message")
        written = message.get("create_time") if isinstance(message, dict) else None
        at = float(written) if isinstance(written, (int, float)) and not isinstance(written, bool) else float("-inf")
        if best is None or (at, order) >= best[:2]:
            best = (at, order, node_id)
    return best[2] if best is not None else None


def _message(original: Original, raw: Any, place: str, finder: _Finder) -> Message | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise refused(original.name, place, "must be an object or null")
    author = require(original, raw, "author", dict, place)
    role = require(original, author, "role", str, f"{place}.author")
    metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    if role not in _ROLES or metadata.get("is_visually_hidden_from_conversation"):
        return None
    content = require(original, raw, "content", dict, place)
    if role == "tool" and content.get("content_type") not in _TOOL_SHOWN:
        return None  # what a tool gave the model (search results, a fetched page, an error), not the owner
    text = clean_text(_canvas(raw.get("recipient"), content)
                      or _content_text(original, content, f"{place}.content", finder)).strip()
    uploads = _uploads(metadata.get("attachments"), content, finder)
    text = "\n".join(piece for piece in (text, *uploads) if piece)
    if not text:
        return None
    shown = _ROLES[role]
    recipient = raw.get("recipient")
    if role == "tool" and isinstance(author.get("name"), str) and author["name"].strip():
        shown = f"Tool ({one_line(author['name'], 100)})"
    elif role == "assistant" and isinstance(recipient, str) and recipient.strip() not in ("", "all"):
        shown = f"Assistant (to {one_line(recipient, 100)})"  # a call of a tool: code to run, a search
    return Message(shown, timestamp(raw.get("create_time")), text)


# What ChatGPT keeps beside the conversation: the owner's custom instructions, the model's hidden reasoning.
_NOT_SAID = frozenset({"user_editable_context", "thoughts", "reasoning_recap", "model_editable_context"})
# What of a tool's messages the owner saw: code's output, a quote of a file or page, an image drawn.
_TOOL_SHOWN = frozenset({"execution_output", "tether_quote", "multimodal_text"})
_PART_NAMES: dict[str, str] = {"image_asset_pointer": "[image]", "audio_asset_pointer": "[audio]",
                               "real_time_user_audio_video_asset_pointer": "[audio]"}


def _uploads(attachments: Any, content: dict[str, Any], finder: _Finder) -> list[str]:
    """The files the owner attached to a message (``metadata.attachments``: ``{id, name, mime_type, size}``)
    as ``[attachment: name]``, each retained where the export holds it; an image already shown among the
    message's parts is not named twice."""
    if not isinstance(attachments, list):
        return []
    parts = content.get("parts") if isinstance(content.get("parts"), list) else []
    shown = {part["asset_pointer"].split("://", 1)[-1] for part in parts
             if isinstance(part, dict) and isinstance(part.get("asset_pointer"), str)}
    names = []
    for attachment in attachments:
        if not isinstance(attachment, dict) or attachment.get("id") in shown:
            continue
        finder(attachment.get("id"))
        name = attachment.get("name")
        if isinstance(name, str) and name.strip():
            names.append(f"[attachment: {one_line(name, 200)}]")
    return list(dict.fromkeys(names))


def _canvas(recipient: Any, content: dict[str, Any]) -> str:
    """A Canvas document the assistant wrote (``canmore.create_textdoc``: JSON ``{name, type, content}``) or
    edited (``canmore.update_textdoc``: ``{updates: [{pattern, replacement}]}``) as its name and text; "" for
    anything else (then shown as the code it is)."""
    if not isinstance(recipient, str) or not recipient.startswith("canmore.") or content.get("content_type") != "code":
        return ""
    try:
        call = json.loads(content.get("text") or "")
    except (ValueError, TypeError, RecursionError):
        return ""
    if not isinstance(call, dict):
        return ""
    if isinstance(call.get("content"), str) and call["content"].strip():
        kind = call.get("type") if isinstance(call.get("type"), str) else ""
        name = one_line(call["name"], 200) if isinstance(call.get("name"), str) and call["name"].strip() else "document"
        return f"[canvas: {name}]\n{fenced(call['content'], kind[5:] if kind.startswith('code/') else '')}"
    updates = call.get("updates")
    replaced = [u["replacement"] for u in updates if isinstance(u, dict) and isinstance(u.get("replacement"), str)
                and u["replacement"].strip()] if isinstance(updates, list) else []
    return "\n".join(["[canvas edited]", *(fenced(text, "") for text in replaced)]) if replaced else ""


def _content_text(original: Original, content: dict[str, Any], place: str, finder: _Finder) -> str:
    kind = content.get("content_type")
    if kind in _NOT_SAID:
        return ""
    parts = content.get("parts")
    if parts is not None:
        if not isinstance(parts, list):
            raise refused(original.name, f"{place}.parts", "must be a list")
        shown = []
        for number, part in enumerate(parts):
            if isinstance(part, str):
                shown.append(part)
            elif isinstance(part, dict):
                said = part.get("text")
                if part.get("content_type") == "audio_transcription":  # voice mode: the words spoken
                    if said is not None and not isinstance(said, str):
                        raise refused(original.name, f"{place}.parts[{number}].text", "must be a string")
                    shown.append(said or "")
                    continue
                shown_as = _PART_NAMES.get(str(part.get("content_type")), "[file]")
                name = finder(part.get("asset_pointer"))
                shown.append(f"{shown_as[:-1]}: {name}]" if name else shown_as)
            elif part is not None:
                raise refused(original.name, f"{place}.parts[{number}]", "must be a string or an object")
        return "\n".join(piece for piece in shown if piece)
    value = content.get("text") or content.get("result") or ""
    if not isinstance(value, str):
        raise refused(original.name, f"{place}.text", "must be a string")
    if not value.strip():
        return value
    if kind == "code":  # code the assistant sent to a tool (Python, a Canvas document)
        language = content.get("language")
        return fenced(value, language if isinstance(language, str) and language != "unknown" else "")
    if kind == "execution_output":
        return fenced(value, "")
    if kind == "tether_quote":  # a quote of a web page or file, with where it is from
        source = ", ".join(one_line(content[key], 300) for key in ("title", "url")
                           if isinstance(content.get(key), str) and content[key].strip())
        return value + (f"\n(Quoted from {source})" if source else "")
    return value

