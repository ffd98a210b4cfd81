"""The socket's wire format: how one line becomes a JSON-RPC request, and the limits that bound it.

Every check a message passes before any method sees it lives here, once, so
no tool has to repeat it and no malformed message reaches one:

- UTF-8 JSON, without the non-standard ``NaN`` and ``Infinity``;
- nested at most ``MAX_NESTING`` levels, measured on the bytes before decoding,
  so deep input never reaches a recursive decoder (or anything that walks the
  result) and cannot raise ``RecursionError``;
- one JSON object with ``jsonrpc: "2.0"``, a string ``method``, an object
  ``params`` and an id that is a string, an integer or null;
- no lone UTF-16 surrogate in any string, key or value: a JSON ``\\ud800``
  escape decodes to one, and nothing downstream (file names, YAML, SQLite, the
  reply itself) can encode it.

A message that fails gets a ``MalformedMessage`` naming the problem (and the
field path, for a surrogate); the connection that sent it goes on.  A line
too long to decode is answered by ``oversize_answer`` from its first and last
bytes: for the call that sent it (``request_id_in``) and, where the first
bytes show the member the limit was passed in (``cut_member``), naming it;
a ``tools/call`` gets that as a tool error, which an agent's model reads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

MAX_MESSAGE_BYTES = 8 * 1024 * 1024  # once a connection has initialized
UNAUTHENTICATED_MESSAGE_BYTES = 64 * 1024  # until then: initialize and ping need a few hundred bytes
# Well above the frontmatter's 20 levels and any tool's arguments (at most 5 levels, an evidence
# locator inside an item inside a call), well below the decoder's recursion limit of about 1,000.
MAX_NESTING = 64
ID_WINDOW = 64 * 1024  # how much of each end of an oversize line is searched for its id
CUT_TOKENS_MAX = 100_000  # strings and brackets read of an oversize line's start to name the member it is cut in

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
LIMIT_EXCEEDED = -32007  # engine/core/errors.py's LimitExceeded (not imported: the bridge stays light)


def error_response(request_id: Any, code: int, reason: str, message: str, **data: Any) -> dict[str, Any]:
    """A JSON-RPC error answer with the engine's ``data.reason``."""
    return {"jsonrpc": "2.0", "id": request_id,
            "error": {"code": code, "message": message, "data": {"reason": reason, **data}}}

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))
_DEPTH_CHUNK = 64 * 1024  # brackets per exact pass, so a huge message never holds the GIL for long
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # how a surrogate can appear in UTF-8 JSON at all
_SURROGATE = re.compile("[\ud800-\udfff]")
_SCALAR = rb'(?:"[^"\\]*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)'
_ID = rb'(-?\d{1,18}|"[^"\\]{0,200}")'
# The id among the first members (before params) or the last ones (after params): in either
# place a member of the outermost object, since only scalar members stand between it and the
# object's opening or closing brace.
_ID_AT_START = re.compile(rb'\A\s*\{(?:\s*"[^"\\]*"\s*:\s*' + _SCALAR + rb'\s*,)*?\s*"id"\s*:\s*' + _ID)
_ID_AT_END = re.compile(rb'[{,]\s*"id"\s*:\s*' + _ID + rb'\s*(?:,\s*"[^"\\]*"\s*:\s*' + _SCALAR + rb'\s*)*\}\s*\Z')


class MalformedMessage(Exception):
    """A line that is not a request the engine can route; ``code`` is its JSON-RPC error code."""

    def __init__(self, code: int, message: str, *, request_id: Any = None, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id
        self.field = field


@dataclass(frozen=True)
class Request:
    """One well-formed message: ``id`` is absent for a notification."""

    method: str
    params: dict[str, Any]
    id: Any = None
    notification: bool = False


def parse_request(data: bytes) -> Request:
    """Decode and check one line; raises ``MalformedMessage`` for anything the engine cannot route."""
    if nesting_exceeds(data, MAX_NESTING):
        raise MalformedMessage(PARSE_ERROR, f"the message nests deeper than {MAX_NESTING} levels")
    try:
        message = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise MalformedMessage(PARSE_ERROR, f"the message is not UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise MalformedMessage(PARSE_ERROR, f"the message is not JSON: {exc.msg} at character {exc.pos}") from exc
    except ValueError as exc:  # NaN, Infinity, or an integer beyond Python's digit limit
        raise MalformedMessage(PARSE_ERROR, f"the message is not JSON the engine accepts: {exc}") from exc
    if not isinstance(message, dict):
        raise MalformedMessage(INVALID_REQUEST, "a message must be one JSON object (batches are not supported)")
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int, type(None))) or (
            isinstance(request_id, str) and _SURROGATE.search(request_id)):
        raise MalformedMessage(INVALID_REQUEST, "id must be a string (of valid Unicode), an integer or null",
                               field="id")
    # Only a \u escape can put a surrogate into the decoded message: without one, no walk is needed.
    escaped = data.find(b"\\") >= 0 and _SURROGATE_ESCAPE.search(data) is not None
    bad = lone_surrogate_path(message) if escaped else None
    if bad is not None:
        raise MalformedMessage(INVALID_PARAMS, f"{bad} holds a lone UTF-16 surrogate, which is not Unicode text",
                               request_id=request_id, field=bad)
    method = message.get("method")
    if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
        raise MalformedMessage(INVALID_REQUEST, "a request needs jsonrpc '2.0' and a method", request_id=request_id)
    params = message.get("params", {})
    if not isinstance(params, dict):
        raise MalformedMessage(INVALID_PARAMS, "params must be an object", request_id=request_id, field="params")
    return Request(method, params, request_id, notification="id" not in message)


def method_of(data: bytes) -> Any:
    """The ``method`` of a line that decodes to a JSON object, whatever else is wrong with it; else None."""
    message = _object_in(data)
    return message.get("method") if message is not None else None


def is_notification(data: bytes) -> bool:
    """Whether a line decodes to a JSON object with a string ``method`` and no ``id`` (nothing is answered)."""
    message = _object_in(data)
    return message is not None and "id" not in message and isinstance(message.get("method"), str)


def _object_in(data: bytes) -> dict[str, Any] | None:
    if nesting_exceeds(data, MAX_NESTING):
        return None
    try:
        message = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError included
        return None
    return message if isinstance(message, dict) else None


def nesting_exceeds(data: bytes, limit: int) -> bool:
    """Whether the JSON text in ``data`` opens more than ``limit`` arrays and objects inside each other.

    Works on the bytes (brackets, quotes and backslashes never occur inside a
    multi-byte UTF-8 sequence): strings are cut out, then the running depth is
    summed over the brackets that remain.  Unbalanced text is left to the
    decoder, which refuses it.
    """
    if not _holds_more_than(data, (b"[", b"{"), limit):  # the common case: too few brackets to be deep
        return False
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    depth = 0
    for start in range(0, len(brackets), _DEPTH_CHUNK):
        chunk = brackets[start:start + _DEPTH_CHUNK]
        opening = chunk.count(b"[") + chunk.count(b"{")
        if depth + opening <= limit:  # cannot pass the limit inside this chunk
            depth += 2 * opening - len(chunk)
            continue
        running = list(accumulate(map(_STEP.__getitem__, chunk), initial=depth))
        if max(running) > limit:
            return True
        depth = running[-1]
    return False


def _holds_more_than(data: bytes, needles: tuple[bytes, ...], limit: int) -> bool:
    """Whether ``data`` holds more than ``limit`` of the one-byte ``needles`` (``find`` is memchr,
    several times faster than ``count`` on a long string; a message has few brackets or many)."""
    seen = 0
    for needle in needles:
        at = data.find(needle)
        while at >= 0:
            seen += 1
            if seen > limit:
                return True
            at = data.find(needle, at + 1)
    return False


def lone_surrogate_path(message: Any) -> str | None:
    """The path (``params.arguments.title``, ``params.items[2].text``) of the first string, key or
    value, that holds a lone surrogate; None when there is none."""
    pending: list[tuple[str, Any]] = [("", message)]
    while pending:  # iterative, though nesting is bounded already: one walk, no recursion
        path, value = pending.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return path or "the message"
        elif isinstance(value, dict):
            for key, item in value.items():
                here = f"{path}.{_printable(key)}" if path else _printable(key)
                if _SURROGATE.search(key):
                    return here
                pending.append((here, item))
        elif isinstance(value, list):
            pending.extend((f"{path}[{index}]", item) for index, item in enumerate(value))
    return None


def request_id_in(head: bytes, tail: bytes = b"") -> Any:
    """The id of a line too long to decode, read from its first and last bytes; None when it is
    not a plain member of the outermost object there (the reply then carries id null)."""
    found = _ID_AT_START.match(head) or _ID_AT_END.search(tail)
    if found is None:
        return None
    text = found.group(1)
    try:
        value = json.loads(text)
    except ValueError:  # an escape the pattern let through that does not decode
        return None
    return value if not isinstance(value, str) or not _SURROGATE.search(value) else None


# A JSON string (possessive, so a string cut short fails in one pass), one structural byte, or the quote
# opening a string the bytes end inside.
_TOKEN = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[][{},:]|"')


@dataclass(frozen=True)
class Cut:
    """Where the first bytes of a message too long to read end: ``path`` is the member being read there
    (``["params", "arguments", "body"]``, ``[..., "items", 3, "text"]``); ``method`` and ``tool`` are the
    message's ``method`` and ``params.name``, when they came before it."""

    path: tuple[str | int, ...]
    method: str | None
    tool: str | None


def cut_member(head: bytes) -> Cut:
    """Read the start of a message as far as ``head`` goes, to say which member it was in at the end.  Only
    strings and brackets are looked at, each once; numbers and literals are passed over.  A head of more than
    ``CUT_TOKENS_MAX`` strings and brackets (no agent's call has so many) is not read to its end: the path is
    then empty, as for a head that shows none."""
    frames: list[list[Any]] = []  # per open container: [is an object, its key (undecoded) or index, a key next]
    values: dict[tuple[Any, ...], str] = {}
    for count, match in enumerate(_TOKEN.finditer(head)):
        token = match.group()
        first = token[:1]
        if token == b'"':  # the string the head ends in
            break
        if count == CUT_TOKENS_MAX:
            return Cut((), values.get((b'"method"',)), values.get((b'"params"', b'"name"')))
        if first == b'"':
            if frames and frames[-1][0] and frames[-1][2]:
                frames[-1][1], frames[-1][2] = token, False
            elif len(frames) <= 2:
                text = _decoded(token)
                if text is not None:
                    values[tuple(frame[1] for frame in frames)] = text
        elif first in b"{[":
            frames.append([first == b"{", None if first == b"{" else 0, first == b"{"])
        elif first in b"}]":
            if frames:
                frames.pop()
        elif first == b"," and frames:
            if frames[-1][0]:
                frames[-1][1], frames[-1][2] = None, True
            else:
                frames[-1][1] += 1
    path = tuple(part if isinstance(part, int) else _decoded(part) or "?" for part in
                 (frame[1] for frame in frames if frame[1] is not None))
    return Cut(path, values.get((b'"method"',)), values.get((b'"params"', b'"name"')))


def _decoded(token: bytes) -> str | None:
    try:
        text = json.loads(token)
    except ValueError:
        return None
    return _printable(text) if isinstance(text, str) else None


def member_path(path: tuple[str | int, ...]) -> str:
    """``("params", "arguments", "items", 3)`` as the params reader names fields: ``params.arguments.items[3]``."""
    named = ""
    for part in path:
        named += f"[{part}]" if isinstance(part, int) else (f".{part}" if named else part)
    return named


def oversize_answer(head: bytes, tail: bytes, limit: int, size: int | None = None, *,
                    modern: bool = False) -> dict[str, Any]:
    """The answer to a message longer than ``limit`` bytes (``size``, when known), from its first bytes
    (``head``) and its last (``tail``).  A ``tools/call`` whose first bytes show it is answered as a tool
    error naming the argument the limit was passed in (``body``, ``items[3].text``), the limit and what to
    do, so the agent's model reads it and can send less; anything else is the JSON-RPC error, naming the
    member in ``data.field`` when the first bytes show it.  Either way nothing was done.  ``modern``: the
    connection speaks MCP 2026-07-28, whose results say ``resultType`` (as modern.modern_result adds it)."""
    request_id = request_id_in(head[:ID_WINDOW], tail)
    cut = cut_member(head)
    measured = {"limit": limit} if size is None else {"limit": limit, "size": size}
    arguments = cut.path[:2] == ("params", "arguments") and len(cut.path) > 2 and isinstance(cut.path[2], str)
    if cut.method == "tools/call" and arguments:
        field = member_path(cut.path[2:])
        error = {"reason": "limit_exceeded",
                 "message": f"{field} is too long to send: the message carrying it is longer than {limit:,} bytes "
                            f"(as UTF-8 JSON, escapes counted), the most the engine accepts. Nothing was done; "
                            f"send a shorter {field}.", "field": field, **measured}
        text = json.dumps(error, indent=2, ensure_ascii=False)  # as tools.pretty_json prints it (tested)
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True}
        if modern:
            result["resultType"] = "complete"
        return {"jsonrpc": "2.0", "id": request_id, "result": result}
    field = {"field": member_path(cut.path)} if cut.path else {}
    where = f" (passed in {field['field']})" if field else ""
    return error_response(request_id, LIMIT_EXCEEDED, "limit_exceeded",
                          f"a message is longer than {limit} bytes, the most the engine accepts{where}; nothing "
                          "was done", **field, **measured)


def encode(message: dict[str, Any]) -> bytes:
    """One reply line.  Replies are UTF-8 as written; one that holds a lone surrogate (from a file
    in the vault, say) is sent with JSON escapes instead of dropping the connection."""
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"


def _printable(key: str) -> str:
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
