"""The agent tools, with the JSON Schemas ``tools/list`` publishes.

Tools take no store, agent, path or scope argument: the caller's credential
and audience decide where they act.  A tool is declared as a ``Method``
(engine/core/methods.py) by the package whose code answers it: here those that
call the Engine facade, the others in their feature packages (``TOOLS``), and
``CORE_TOOLS`` gathers them in the order ``tools/list`` publishes.  Each tool names the ``Params`` its
handler reads (engine/core/params.py); its input schema is generated from
them, so the bounds a client sees are the bounds the engine checks.  Each
names the answer its handler returns (a TypedDict, engine/core/answers.py);
its ``outputSchema`` is generated from that, and the suite validates every
answer it sees against it (tests/conftest.py).

A result's text is its structured answer as ``JSON.stringify(value, null, 2)``
prints it (``pretty_json``): clients that mirror structured content as text
(OpenClaw) recognise that exact text as a duplicate and show the model the
answer once.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Iterable

from pydantic import ConfigDict

from ..store import attachments
from ..search import knowledge_base
from ..memory import ontology_views, recall
from ..access.authority import AgentCaller
from ..core.answers import JsonObject, JsonValue, NotRequired, TypedDict, output_schema
from ..core.errors import InvalidParams, KnowledgeError
from ..core.methods import Method
from ..core.params import NO_PARAMS, Choice, Params
from ..search.keyword import SEARCH_PARAMS, GrepAnswer
from ..store.answers import (
    LookupAnswer, PageReceipt, RecordHistory, RecordRead, RememberReceipt, ResumeAnswer,
)
from ..store.inputs import PAGE_CALL, REMEMBER_CALL
from ..store.reads import LOOKUP_PARAMS, RECORD_PARAMS

if TYPE_CHECKING:
    from ..service import Engine

RECORD_TOOL_PARAMS = RECORD_PARAMS + Params(Choice("view", ("record", "history"), default="record"))


class ToolError(TypedDict):
    """What a failed call (``isError: true``) says in its text block, as JSON: the engine error's ``reason``
    and ``message`` and its data fields (``field``, ``id``, ``revision``...), as a JSON-RPC error's ``data``.
    It is not the tool's ``outputSchema``, so it is never the result's ``structuredContent``: MCP asks that
    structured content conform to the schema, and a client that holds error results to it too (the MCP
    Inspector does) would show a schema mismatch instead of the error.  The suite holds every error result's
    text to this shape."""

    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]  # the error's own data fields

    reason: str
    message: str


class TextContent(TypedDict):
    type: str
    text: str


class ToolResult(TypedDict):
    content: list[TextContent]
    structuredContent: NotRequired[Any]  # the tool's declared answer; absent from an error (a ToolError)
    isError: bool


class ToolAnnotations(TypedDict):
    title: str
    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool
    openWorldHint: bool


class ToolDescriptor(TypedDict):
    """A tool as ``tools/list`` lists it; the two schemas are JSON Schema documents."""

    name: str
    title: str
    description: str
    inputSchema: JsonObject
    outputSchema: JsonObject
    annotations: ToolAnnotations


@dataclass(frozen=True)
class Tool(Method):
    """A tool as the wire serves it: its declaration (engine/core/methods.py), listed and called."""

    @classmethod
    def of(cls, method: Method) -> Tool:
        return cls(**{field.name: getattr(method, field.name) for field in fields(Method)})

    def descriptor(self) -> ToolDescriptor:
        return {"name": self.name, "title": self.title, "description": self.description,
                "inputSchema": self.params.schema(), "outputSchema": copy.deepcopy(output_schema(self.answer)),
                "annotations": self.annotations()}

    def call(self, engine: Engine, caller: AgentCaller, arguments: dict[str, Any]) -> ToolResult:
        """The ``tools/call`` result: the handler's answer, or the engine error it raised (``isError``)."""
        try:
            answer = self.handler(engine, caller, arguments)
        except KnowledgeError as exc:
            return tool_result(exc.to_dict(), error=True)
        return tool_result(answer)

    def annotations(self) -> ToolAnnotations:
        """MCP's hints, for a client deciding what to ask its user before a call.  Nothing a tool does is
        destructive: a write publishes a new revision and keeps every earlier one.  Every call is idempotent:
        a write's identical retry (its requestId) returns the first receipt and changes nothing.  And none
        reaches beyond this machine's vault (``knowledge_attach_file`` reads only the owner's workspace roots)."""
        return {"title": self.title, "readOnlyHint": not self.writes, "destructiveHint": False,
                "idempotentHint": True, "openWorldHint": False}


def tool_result(value: Any, *, error: bool = False) -> ToolResult:
    """An MCP tool result: the answer structured, and the same JSON as text in the form clients recognise as
    its mirror (``pretty_json``).  An error (a ``ToolError``) is the text alone: it is not the tool's
    declared answer, and structured content must be."""
    text: list[TextContent] = [{"type": "text", "text": pretty_json(value)}]
    if error:
        return {"content": text, "isError": True}
    return {"content": text, "structuredContent": value, "isError": False}


def pretty_json(value: JsonValue) -> str:
    """``value`` as a JavaScript client prints the same JSON with ``JSON.stringify(value, null, 2)``.

    OpenClaw drops a text block equal to exactly that (src/agents/mcp-content.ts) and shows its model the
    structured content alone.  Beside two-space indentation and ``": "``, the client's printing differs from
    Python's ``json.dumps`` in numbers (``1.0`` reads back as ``1``, ``1e-07`` prints as ``1e-7``), in key
    order (integer-like keys of an object come first, ascending) and in escapes (only quotes, backslashes,
    control characters and lone surrogates, in lower-case hex): each is followed here.  A value where none of
    these differences can show (``_printed_alike``), as a write's receipt, is printed by ``json`` itself."""
    if _printed_alike(value):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return _pretty(value, "")


def _printed_alike(value: Any) -> bool:
    """Whether ``json.dumps(value, indent=2, ensure_ascii=False)`` is the client's printing of ``value``: it holds
    only strings without a lone surrogate, integers a double holds exactly, booleans, nulls, lists, and objects
    whose keys are strings that cannot be array indices (none starts with a digit).  Anything else, a float
    or a subclass included, is left to ``_pretty``."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str:
            if not item.isascii() and _SURROGATE.search(item):
                return False
        elif kind is dict:
            for key in item:
                if type(key) is not str or key[:1].isdigit() or (not key.isascii() and _SURROGATE.search(key)):
                    return False
            pending.extend(item.values())
        elif kind is list or kind is tuple:
            pending.extend(item)
        elif kind is int:
            if abs(item) > 2**53:
                return False
        elif item is not None and kind is not bool:
            return False
    return True


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\ud800-\udfff]')
_SURROGATE = re.compile("[\ud800-\udfff]")
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
_ARRAY_INDEX_MAX = 2**32 - 2  # the largest key JavaScript orders as an array index


def _pretty(value: Any, indent: str) -> str:
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (int, float)):
        return _js_number(value)
    if isinstance(value, str):
        return _js_string(value)
    inner = indent + "  "
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(inner + _pretty(item, inner) for item in value) + "\n" + indent + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        # Keys as the wire writes them (json.dumps: 1 is "1", True is "true"), then in JavaScript's order.
        named = {key if isinstance(key, str) else json.dumps(key): item for key, item in value.items()}
        indices = sorted((key for key in named if _is_array_index(key)), key=int)
        keys = indices + [key for key in named if not _is_array_index(key)]
        return ("{\n" + ",\n".join(f"{inner}{_js_string(key)}: {_pretty(named[key], inner)}" for key in keys)
                + "\n" + indent + "}")
    raise TypeError(f"{type(value).__name__} is not JSON")


def _is_array_index(key: str) -> bool:
    return _ARRAY_INDEX.fullmatch(key) is not None and int(key) <= _ARRAY_INDEX_MAX


def _js_string(text: str) -> str:
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _ESCAPES.get(m.group(), f"\\u{ord(m.group()):04x}"), text) + '"'


def _js_number(number: int | float) -> str:
    """ECMAScript's Number::toString of the double the client parses ``number`` into."""
    if isinstance(number, int) and abs(number) <= 2**53:
        return str(number)
    number = float(number)
    if not math.isfinite(number):  # never on the wire (engine/wire/messages.py): JSON.stringify's null
        return "null"
    if number == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(abs(number))).normalize().as_tuple()
    shown = "".join(map(str, digits))
    k, n = len(shown), len(shown) + int(exponent)  # value = 0.shown * 10**n
    prefix = "-" if number < 0 else ""
    if k <= n <= 21:
        return prefix + shown + "0" * (n - k)
    if 0 < n <= 21:
        return prefix + shown[:n] + "." + shown[n:]
    if -6 < n <= 0:
        return prefix + "0." + "0" * -n + shown
    mantissa = shown if k == 1 else shown[0] + "." + shown[1:]
    return f"{prefix}{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"


def _grep(engine: Engine, caller: AgentCaller, args: dict[str, Any]) -> GrepAnswer:
    return engine.search(caller, args, declared=SEARCH_PARAMS, links=True)


def _record(engine: Engine, caller: AgentCaller, args: dict[str, Any]) -> RecordRead | RecordHistory:
    values = RECORD_TOOL_PARAMS.read(args)
    if values["view"] == "history":
        if values["revision"] is not None:  # every revision is listed: one named beside it is refused, not dropped
            raise InvalidParams("revision does not apply to the history view", field="revision")
        if values["asOf"] is not None:  # the history lists every revision, whenever each held
            raise InvalidParams("asOf does not apply to the history view", field="asOf")
        return engine.history(caller, values["id"])
    return engine.get_record(caller, values["id"], values["revision"], values["asOf"])


def _lookup(engine: Engine, caller: AgentCaller, args: dict[str, Any]) -> LookupAnswer:
    values = LOOKUP_PARAMS.read(args)
    return engine.lookup(caller, values["name"], values["asOf"])


def _resume(engine: Engine, caller: AgentCaller, args: dict[str, Any]) -> ResumeAnswer:
    NO_PARAMS.read(args)
    return engine.resume(caller)


# The tools that call the Engine facade itself, declared here (the wire sits below it); the others are
# their feature packages' (``TOOLS`` of memory.recall, memory.ontology_views, store.attachments,
# search.knowledge_base).
GREP = Method(
    "knowledge_grep", SEARCH_PARAMS, GrepAnswer, _grep, title="Search Knowledge by keywords",
    description="Keyword (BM25) search over the current records of your Knowledge vault. Scores are relative to "
    "the best hit of this query (0..1). Search once for each entity a task names before planning.",
)
LOOKUP = Method(
    "knowledge_lookup", LOOKUP_PARAMS, LookupAnswer, _lookup, title="Look up a Knowledge record by name",
    description="Exact lookup of a record by id, title or alias. A name shared by several records resolves to none.",
)
RECORD = Method(
    "knowledge_record", RECORD_TOOL_PARAMS, RecordRead | RecordHistory, _record,
    title="Read a Knowledge record or its history",
    description="Read one record exactly: its current revision, an exact earlier revision, or (view: history) "
    "every revision kept, with who wrote it. Historical, withdrawn and invalid records stay readable here.",
)
REMEMBER = Method(
    "knowledge_remember", REMEMBER_CALL, RememberReceipt, lambda engine, caller, args: engine.remember(caller, args),
    writes=True, title="Remember claims with their evidence",
    description="Save decisions, preferences, corrections, commitments, project-state changes and explicit "
    "remember requests as claims, each with the supporting excerpt, in one call with a fresh requestId. Use "
    "'replaces' to correct an earlier claim. Never stores your own inference: record analysis on a page.",
)
SAVE_PAGE = Method(
    "knowledge_save_page", PAGE_CALL, PageReceipt, lambda engine, caller, args: engine.save_page(caller, args),
    writes=True, title="Save a Knowledge page",
    description="Create a page (person, organization, project, repository, concept, note, ...) or publish its "
    "next revision with id, expectedRevision and expectedSha256 (the revision and sha256 knowledge_record gave "
    "you): a page changed since you read it, by the owner's editor too, is refused as stale_revision; read it "
    "again. Keep one page per significant entity or piece of work.",
)
RESUME = Method(
    "knowledge_resume", NO_PARAMS, ResumeAnswer, _resume, writes=True, title="Retry the vault's git checkpoint",
    description="Retry the local git checkpoint of your vault now; receipts report git state 'pending' until it "
    "runs.",
)

# Every tool, in the order tools/list publishes them.
CORE_TOOLS = [Tool.of(method) for method in (GREP, LOOKUP, RECORD, REMEMBER, SAVE_PAGE, *recall.TOOLS,
                                              *ontology_views.TOOLS, *attachments.TOOLS, RESUME,
                                              *knowledge_base.TOOLS)]


class ToolRegistry:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._tools: dict[str, Tool] = {tool.name: tool for tool in CORE_TOOLS}

    def add(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def get(self, name: Any) -> Tool | None:
        return self._tools.get(name) if isinstance(name, str) else None

    def listed(self, claim_kinds: Iterable[str] | None = None, *, writes: bool | None = None) -> list[ToolDescriptor]:
        """Every tool; the save tools only while writes are enabled (``writes``: as read with the claim kinds,
        else now).  ``claim_kinds``: the caller's active ontology's, so ``knowledge_remember`` offers exactly the
        kinds the engine will accept from it (engine/wire/tool_list.py reads both)."""
        if writes is None:
            writes = self.engine.settings.current().writes_enabled
        kinds = list(self.engine.ontology.claim_kinds if claim_kinds is None else claim_kinds)  # None: shipped
        return [with_claim_kinds(tool.descriptor(), kinds) for tool in self._tools.values()
                if writes or not tool.writes]


def with_claim_kinds(descriptor: ToolDescriptor, claim_kinds: list[str]) -> ToolDescriptor:
    """``descriptor`` with its ``claimKind`` enum set to ``claim_kinds`` (tools without one are returned as is).

    The enum is never declared with the parameters (store/inputs.py): claim kinds are the ontology's to define."""
    items = descriptor["inputSchema"]["properties"].get("items", {}).get("items", {})
    if "claimKind" not in items.get("properties", {}):
        return descriptor
    copied = copy.deepcopy(descriptor)
    claim_kind = copied["inputSchema"]["properties"]["items"]["items"]["properties"]["claimKind"]
    # An item's claimKind may be null (a relationship's), so the enum goes to its string member.
    next(member for member in claim_kind.get("anyOf", [claim_kind]) if member.get("type") != "null")["enum"] = \
        list(claim_kinds)
    return copied
