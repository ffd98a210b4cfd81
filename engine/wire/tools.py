"""The agent tools, with the JSON Schemas ``tools/list`` publishes.

Tools take no store, agent, path or scope argument: the caller's credential
and audience decide where they act.  Each tool names the ``Params`` its
handler reads (engine/core/params.py); its input schema is generated from
them, so the bounds a client sees are the bounds the engine checks.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..store import attachments
from ..search import knowledge_base
from ..memory import ontology_views, recall
from ..access.authority import AgentCaller
from ..core.errors import InvalidParams
from ..core.params import NO_PARAMS, Choice, Params
from ..search.keyword import SEARCH_PARAMS
from ..store.inputs import PAGE_CALL, REMEMBER_CALL
from ..store.reads import LOOKUP_PARAMS, RECORD_PARAMS

if TYPE_CHECKING:  # the engine calls in here; this module only needs its type
    from ..service import Engine

ToolHandler = Callable[["Engine", AgentCaller, dict[str, Any]], dict[str, Any]]

RECORD_TOOL_PARAMS = RECORD_PARAMS + Params(Choice("view", ("record", "history"), default="record"))


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: Params  # what the handler reads, and the source of the input schema
    handler: ToolHandler
    writes: bool = False
    title: str = ""  # what a client shows its user

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "description": self.description,
                "inputSchema": self.params.schema(), "annotations": self.annotations()}

    def annotations(self) -> dict[str, Any]:
        """MCP's hints, for a client deciding what to ask its user before a call.  Nothing a tool does is
        destructive: a write publishes a new revision and keeps every earlier one.  Every call is idempotent:
        a write's identical retry (its requestId) returns the first receipt and changes nothing.  And none
        reaches beyond this machine's vault (``knowledge_attach_file`` reads only the owner's workspace roots)."""
        return {"title": self.title, "readOnlyHint": not self.writes, "destructiveHint": False,
                "idempotentHint": True, "openWorldHint": False}


def tool_result(value: dict[str, Any], *, error: bool = False) -> dict[str, Any]:
    """An MCP tool result: the JSON as text for any client, and the same object structured."""
    return {"content": [{"type": "text", "text": json.dumps(value, ensure_ascii=False)}],
            "structuredContent": value, "isError": error}


def _grep(engine: Engine, caller: AgentCaller, args: dict[str, Any]) -> dict[str, Any]:
    return engine.search(caller, args, declared=SEARCH_PARAMS, links=True)


def _record(engine: Engine, caller: AgentCaller, args: dict[str, Any]) -> dict[str, Any]:
    values = RECORD_TOOL_PARAMS.read(args)
    if values["view"] == "history":
        if values["revision"] is not None:  # every revision is listed: one named beside it is refused, not dropped
            raise InvalidParams("revision does not apply to the history view", field="revision")
        if values["asOf"] is not None:  # the history lists every revision, whenever each held
            raise InvalidParams("asOf does not apply to the history view", field="asOf")
        return engine.history(caller, values["id"])
    return engine.get_record(caller, values["id"], values["revision"], values["asOf"])


def _lookup(engine: Engine, caller: AgentCaller, args: dict[str, Any]) -> dict[str, Any]:
    values = LOOKUP_PARAMS.read(args)
    return engine.lookup(caller, values["name"], values["asOf"])


def _resume(engine: Engine, caller: AgentCaller, args: dict[str, Any]) -> dict[str, Any]:
    NO_PARAMS.read(args)
    return engine.resume(caller)


CORE_TOOLS = [
    Tool(
        "knowledge_grep",
        "Keyword (BM25) search over the current records of your Knowledge vault. Scores are relative to the best "
        "hit of this query (0..1). Search once for each entity a task names before planning.",
        SEARCH_PARAMS,
        _grep,
        title="Search Knowledge by keywords",
    ),
    Tool(
        "knowledge_lookup",
        "Exact lookup of a record by id, title or alias. A name shared by several records resolves to none.",
        LOOKUP_PARAMS,
        _lookup,
        title="Look up a Knowledge record by name",
    ),
    Tool(
        "knowledge_record",
        "Read one record exactly: its current revision, an exact earlier revision, or (view: history) every "
        "revision kept, with who wrote it. Historical, withdrawn and invalid records stay readable here.",
        RECORD_TOOL_PARAMS,
        _record,
        title="Read a Knowledge record or its history",
    ),
    Tool(
        "knowledge_remember",
        "Save decisions, preferences, corrections, commitments, project-state changes and explicit remember "
        "requests as claims, each with the supporting excerpt, in one call with a fresh requestId. Use "
        "'replaces' to correct an earlier claim. Never stores your own inference: record analysis on a page.",
        REMEMBER_CALL,
        lambda engine, caller, args: engine.remember(caller, args),
        writes=True,
        title="Remember claims with their evidence",
    ),
    Tool(
        "knowledge_save_page",
        "Create a page (person, organization, project, repository, concept, note, ...) or publish its next "
        "revision with id and expectedRevision. Keep one page per significant entity or piece of work.",
        PAGE_CALL,
        lambda engine, caller, args: engine.save_page(caller, args),
        writes=True,
        title="Save a Knowledge page",
    ),
    Tool(
        "knowledge_recall",
        "Approve (or with recall: null, clear) a short summary of one record for automatic recall, with optional "
        "triggers, importance 1-10 and project keys. Only the owner's private conversations, or conversations "
        "the owner granted read-and-save, may approve; claims from sources or inference cannot be approved.",
        recall.RECALL_PARAMS,
        recall.set_recall,
        writes=True,
        title="Approve a summary for automatic recall",
    ),
    Tool(
        "knowledge_ontology",
        "The vocabulary of your vault: page types with their fields and filing, relationship types with endpoint "
        "constraints, claim kinds; views catalog (default), definitions, sources and diagnostics, paged, each "
        "page with a fingerprint.",
        ontology_views.ONTOLOGY_PARAMS,
        ontology_views.ontology_view,
        title="Knowledge vocabulary",
    ),
    Tool(
        "knowledge_attach_file",
        "Retain a file from the owner's workspace as evidence (regular files inside the configured workspace "
        "roots only; its sha256 must match). Cite the returned source id from claims and pages.",
        attachments.ATTACH_FILE,
        attachments.attach_file,
        writes=True,
        title="Attach a local file as evidence",
    ),
    Tool(
        "knowledge_attach",
        "Retain content sent inline (base64, at most 6,000,000 bytes decoded) as evidence, for clients that "
        "cannot share files. Cite the returned source id from claims and pages.",
        attachments.ATTACH,
        attachments.attach,
        writes=True,
        title="Attach content as evidence",
    ),
    Tool(
        "knowledge_resume",
        "Retry the local git checkpoint of your vault now; receipts report git state 'pending' until it runs.",
        NO_PARAMS,
        _resume,
        writes=True,
        title="Retry the vault's git checkpoint",
    ),
    Tool(
        "search_knowledge",
        knowledge_base.TOOL_DESCRIPTION,
        knowledge_base.TOOL_PARAMS,
        knowledge_base.search_knowledge,
        title="Search the Knowledge Base",
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

    def listed(self, claim_kinds: Iterable[str] | None = None, *, writes: bool | None = None) -> list[dict[str, Any]]:
        """Every tool; the save tools only while writes are enabled (``writes``: as read with the claim kinds,
        else now).  ``claim_kinds``: the caller's active ontology's, so ``knowledge_remember`` offers exactly the
        kinds the engine will accept from it (engine/wire/tool_list.py reads both)."""
        if writes is None:
            writes = self.engine.settings.current().writes_enabled
        kinds = list(self.engine.ontology.claim_kinds if claim_kinds is None else claim_kinds)  # None: shipped
        return [with_claim_kinds(tool.descriptor(), kinds) for tool in self._tools.values()
                if writes or not tool.writes]


def with_claim_kinds(descriptor: dict[str, Any], claim_kinds: list[str]) -> dict[str, Any]:
    """``descriptor`` with its ``claimKind`` enum set to ``claim_kinds`` (tools without one are returned as is).

    The enum is never declared with the parameters (store/inputs.py): claim kinds are the ontology's to define."""
    items = descriptor["inputSchema"]["properties"].get("items", {}).get("items", {})
    if "claimKind" not in items.get("properties", {}):
        return descriptor
    copied = copy.deepcopy(descriptor)
    copied["inputSchema"]["properties"]["items"]["items"]["properties"]["claimKind"]["enum"] = list(claim_kinds)
    return copied
