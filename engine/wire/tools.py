"""The agent tools, with the JSON Schemas ``tools/list`` publishes.

Tools take no store, agent, path or scope argument: the caller's credential
and audience decide where they act.  The engine validates every argument
again; the schemas describe the contract for clients.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..store import attachments
from ..search import knowledge_base
from ..memory import ontology_views, recall
from ..access.authority import AgentCaller
from ..core.errors import InvalidParams

if TYPE_CHECKING:  # the engine calls in here; this module only needs its type
    from ..service import Engine

ToolHandler = Callable[["Engine", AgentCaller, dict[str, Any]], dict[str, Any]]

_ID = {"type": "string", "description": "A record id, e.g. pg_01J...", "maxLength": 128}
_REQUEST_ID = {"type": "string", "description": "A fresh id per write; an identical retry returns the original "
               "receipt", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"}
_FLUSH_ID = {"type": "string", "description": "During a pre-compaction flush, the host's flush id instead of a "
             "requestId: a stable request id is derived from it", "maxLength": 128}
_CITATION = {
    "type": "object",
    "properties": {
        "excerpt": {"type": "string", "description": "Supporting text to retain as evidence"},
        "source": {"type": "string", "description": "A retained source's id"},
        "lines": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 2, "maxItems": 2},
        "quote": {"type": "string"},
    },
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler
    writes: bool = False

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}


def schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def tool_result(value: dict[str, Any], *, error: bool = False) -> dict[str, Any]:
    """An MCP tool result: the JSON as text for any client, and the same object structured."""
    return {"content": [{"type": "text", "text": json.dumps(value, ensure_ascii=False)}],
            "structuredContent": value, "isError": error}


def _record(engine: Engine, caller: AgentCaller, args: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(args) - {"id", "revision", "view"})
    if unknown:
        raise InvalidParams(f"unknown parameter {unknown[0]}", field=unknown[0])
    view = args.get("view", "record")
    if view == "history":
        return engine.history(caller, args.get("id"))
    if view != "record":
        raise InvalidParams("view must be 'record' or 'history'", field="view")
    return engine.get_record(caller, args.get("id"), args.get("revision"))


def _lookup(engine: Engine, caller: AgentCaller, args: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(args) - {"name"})
    if unknown:
        raise InvalidParams(f"unknown parameter {unknown[0]}", field=unknown[0])
    return engine.lookup(caller, args.get("name"))


CORE_TOOLS = [
    Tool(
        "knowledge_grep",
        "Keyword (BM25) search over the current records of your Knowledge vault. Scores are relative to the best "
        "hit of this query (0..1). Search once for each entity a task names before planning.",
        schema({
            "query": {"type": "string", "description": "Words to look for; never query syntax", "maxLength": 8192},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            "minScore": {"type": "number", "minimum": 0, "maximum": 1},
            "kind": {"type": "string", "enum": ["page", "claim", "relationship"]},
            "type": {"type": "string", "description": "A page type, claim kind or relation"},
            "cursor": {"type": "string", "description": "nextCursor of the previous page of results"},
        }, ("query",)),
        lambda engine, caller, args: engine.search(caller, args),
    ),
    Tool(
        "knowledge_lookup",
        "Exact lookup of a record by id, title or alias. A name shared by several records resolves to none.",
        schema({"name": {"type": "string", "maxLength": 500}}, ("name",)),
        _lookup,
    ),
    Tool(
        "knowledge_record",
        "Read one record exactly: its current revision, an exact earlier revision, or (view: history) every "
        "revision kept, with who wrote it. Historical, withdrawn and invalid records stay readable here.",
        schema({"id": _ID, "revision": {"type": "integer", "minimum": 1},
                "view": {"type": "string", "enum": ["record", "history"], "default": "record"}}, ("id",)),
        _record,
    ),
    Tool(
        "knowledge_remember",
        "Save decisions, preferences, corrections, commitments, project-state changes and explicit remember "
        "requests as claims, each with the supporting excerpt, in one call with a fresh requestId. Use "
        "'replaces' to correct an earlier claim. Never stores your own inference: record analysis on a page.",
        schema({
            "requestId": _REQUEST_ID, "flushId": _FLUSH_ID,
            "subject": {"type": "string", "description": "The page the claims are about: id, title or alias"},
            "items": {"type": "array", "minItems": 1, "maxItems": 100, "items": {"type": "object", "properties": {
                "text": {"type": "string"},
                # The enum is the caller's active ontology's, filled in by ToolRegistry.listed (with_claim_kinds).
                "claimKind": {"type": "string"},
                "excerpt": {"type": "string", "description": "The supporting text from the conversation"},
                "evidence": {"type": "array", "items": _CITATION},
                "assertionOrigin": {"type": "string", "enum": ["user", "source"]},
                "replaces": _ID,
                "subject": {"type": "string"},
                "relation": {"type": "string", "description": "Instead of text: a typed relationship"},
                "from": {"type": "string"}, "to": {"type": "string"},
            }}},
        }, ("items",)),
        lambda engine, caller, args: engine.remember(caller, args),
        writes=True,
    ),
    Tool(
        "knowledge_save_page",
        "Create a page (person, organization, project, repository, concept, note, ...) or publish its next "
        "revision with id and expectedRevision. Keep one page per significant entity or piece of work.",
        schema({
            "requestId": _REQUEST_ID, "flushId": _FLUSH_ID,
            "type": {"type": "string"}, "title": {"type": "string", "maxLength": 500},
            "body": {"type": "string"},
            "aliases": {"type": "array", "items": {"type": "string"}, "maxItems": 100},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 100},
            "fields": {"type": "object", "description": "Typed fields of the page type (see knowledge_ontology)"},
            "evidence": {"type": "array", "items": _CITATION},
            "id": _ID, "expectedRevision": {"type": "integer", "minimum": 1},
        }, ("type", "title")),
        lambda engine, caller, args: engine.save_page(caller, args),
        writes=True,
    ),
    Tool(
        "knowledge_recall",
        "Approve (or with recall: null, clear) a short summary of one record for automatic recall, with optional "
        "triggers, importance 1-10 and project keys. Only the owner's private conversations, or conversations "
        "the owner granted read-and-save, may approve; claims from sources or inference cannot be approved.",
        schema({
            "id": _ID,
            "recall": {"type": ["object", "null"], "properties": {
                "summary": {"type": "string", "minLength": 1, "maxLength": 500},
                "triggers": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
                "importance": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
                "projects": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
            }, "required": ["summary"], "additionalProperties": False},
            "requestId": _REQUEST_ID,
        }, ("id", "recall")),
        recall.set_recall,
        writes=True,
    ),
    Tool(
        "knowledge_ontology",
        "The vocabulary of your vault: page types with their fields and filing, relationship types with endpoint "
        "constraints, claim kinds; views catalog (default), definitions, sources and diagnostics, paged, each "
        "page with a fingerprint.",
        ontology_views.TOOL_INPUT_SCHEMA,
        ontology_views.ontology_view,
    ),
    Tool(
        "knowledge_attach_file",
        "Retain a file from the owner's workspace as evidence (regular files inside the configured workspace "
        "roots only; its sha256 must match). Cite the returned source id from claims and pages.",
        attachments.ATTACH_FILE_INPUT_SCHEMA,
        attachments.attach_file,
        writes=True,
    ),
    Tool(
        "knowledge_attach",
        "Retain content sent inline (base64, at most 6,000,000 bytes decoded) as evidence, for clients that "
        "cannot share files. Cite the returned source id from claims and pages.",
        attachments.ATTACH_INPUT_SCHEMA,
        attachments.attach,
        writes=True,
    ),
    Tool(
        "knowledge_resume",
        "Retry the local git checkpoint of your vault now; receipts report git state 'pending' until it runs.",
        schema({}),
        lambda engine, caller, args: engine.resume(caller),
        writes=True,
    ),
    Tool(
        "search_knowledge",
        knowledge_base.TOOL_DESCRIPTION,
        knowledge_base.TOOL_INPUT_SCHEMA,
        knowledge_base.search_knowledge,
    ),
]


class ToolRegistry:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._tools: dict[str, Tool] = {tool.name: tool for tool in CORE_TOOLS}

    def add(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def get(self, name: Any) -> Tool | None:
        return self._tools.get(name) if isinstance(name, str) else None

    def listed(self, claim_kinds: list[str] | None = None) -> list[dict[str, Any]]:
        """Every tool; the save tools only while writes are enabled.  ``claim_kinds``: the caller's active
        ontology's, so ``knowledge_remember`` offers exactly the kinds the engine will accept from it."""
        writes = self.engine.settings.current().writes_enabled
        kinds = list(self.engine.ontology.claim_kinds) if claim_kinds is None else claim_kinds  # shipped ones
        return [with_claim_kinds(tool.descriptor(), kinds) for tool in self._tools.values()
                if writes or not tool.writes]


def with_claim_kinds(descriptor: dict[str, Any], claim_kinds: list[str]) -> dict[str, Any]:
    """``descriptor`` with its ``claimKind`` enum set to ``claim_kinds`` (tools without one are returned as is).

    The enum is never written in the schemas below: claim kinds are the ontology's to define."""
    items = descriptor["inputSchema"]["properties"].get("items", {}).get("items", {})
    if "claimKind" not in items.get("properties", {}):
        return descriptor
    copied = copy.deepcopy(descriptor)
    copied["inputSchema"]["properties"]["items"]["items"]["properties"]["claimKind"]["enum"] = list(claim_kinds)
    return copied
