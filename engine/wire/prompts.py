"""MCP prompts: the memory prompt and the Knowledge Index, as ``prompts/list`` and ``prompts/get`` serve them.

``knowledge_memory`` is the memory prompt (engine/memory/memory_prompt.py), with the optional argument
``projectKey``; ``knowledge_index`` is the ``## Knowledge Index`` (engine/memory/knowledge_index.py), with
the optional argument ``firstMessageAt`` (the session's first retained message, ISO-8601 UTC; default:
now, so pass it to get the same bytes on every turn of a session).  Each is one user message of text,
exactly what ``memory/prompt`` and ``memory/index`` answer the same caller.

Both are authorized like every method (never creating a store): a refused caller gets ``denied``.  A
caller the index leaves out (a conversation without a grant, an agent without a store yet) gets one
message saying why there is no index, and the reason in the description, where ``memory/index`` answers
``text: null``: the request is valid (MCP keeps its errors for an unknown prompt, a missing argument and
an internal failure), the spec has a missing index omitted without failing the turn, and clients read
``messages[0]``.
Arguments are strings, as MCP has them; an unknown prompt or argument is ``invalid_params``.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from ..access.authority import Caller, StoreEntry
from ..core.answers import TypedDict
from ..core.errors import InvalidParams
from ..core.ids import format_timestamp, utc_now
from ..core.params import Params, String, Value
from ..memory.knowledge_index import index_for
from ..memory.memory_prompt import PROJECT_KEY_MAX_CHARS, PromptEngine, prompt_for
from ..store.open_store import OpenStore

MEMORY_PROMPT = "knowledge_memory"
INDEX_PROMPT = "knowledge_index"
TIMESTAMP_MAX_CHARS = 64


class PromptsEngine(PromptEngine, StoreEntry[OpenStore], Protocol):
    """What the prompts need of the engine: the memory prompt's and the Knowledge Index's."""


class PromptArgument(TypedDict):
    name: str
    description: str
    required: bool


class PromptEntry(TypedDict):
    name: str
    title: str
    description: str
    arguments: list[PromptArgument]


class PromptList(TypedDict):
    prompts: list[PromptEntry]


class TextContent(TypedDict):
    type: Literal["text"]
    text: str


class PromptMessage(TypedDict):
    role: Literal["user"]
    content: TextContent


class PromptAnswer(TypedDict):
    description: str
    messages: list[PromptMessage]


def _prompt(name: str, title: str, description: str, argument: str, about: str) -> PromptEntry:
    """A prompt of one optional argument (as both are)."""
    return {"name": name, "title": title, "description": description,
            "arguments": [{"name": argument, "description": about, "required": False}]}


PROMPTS: dict[str, PromptEntry] = {prompt["name"]: prompt for prompt in (
    _prompt(MEMORY_PROMPT, "Knowledge memory prompt",
            "How to use Knowledge as your memory: recall before planning, what to save and how (save guidance "
            "only when you can save).",
            "projectKey", "The host's project key for this repository (the alias of its project page); left out "
                          "when it is unsafe to show"),
    _prompt(INDEX_PROMPT, "Knowledge Index",
            "A short list of what your vault holds (labels only, at most 4,000 characters), as of the session's "
            "first message.",
            "firstMessageAt", "The session's first retained message, ISO-8601 UTC (default: now); the same value "
                              "gives the same bytes"),
)}

# What each prompt's ``arguments`` may hold (strings, as MCP sends them); read with ``where="arguments."``.
PROMPT_ARGUMENTS = {
    MEMORY_PROMPT: Params(String("projectKey", PROJECT_KEY_MAX_CHARS * 4, what="a string"),
                          note=f"{MEMORY_PROMPT} takes only projectKey (prompts/list describes it)"),
    INDEX_PROMPT: Params(String("firstMessageAt", TIMESTAMP_MAX_CHARS, min_chars=1,
                                what="an ISO-8601 UTC timestamp"),
                         note=f"{INDEX_PROMPT} takes only firstMessageAt (prompts/list describes it)"),
}


# What the one message of ``knowledge_index`` says when the caller gets no index, by ``memory/index``'s reason.
_NO_INDEX = {
    "not_granted": "There is no Knowledge Index for this conversation: the owner has not granted it read access to "
                   "their private vault. The knowledge tools search and save this conversation's own notes.",
    "no_store": "There is no Knowledge Index yet: this agent has no store yet, so its vault holds nothing.",
    "denied": "There is no Knowledge Index for this session: it may not read the vault.",
    "": "There is no Knowledge Index this time: the vault could not be read, so it is left out. Try again "
        "later; the knowledge tools say what is wrong.",
}


def _prompt_name(value: Any, field: str) -> str:
    if not isinstance(value, str) or value not in PROMPTS:
        raise InvalidParams(f"{field} must name a prompt of prompts/list: {', '.join(PROMPTS)}", field=field)
    return value


def _no_cursor(value: Any, field: str) -> None:
    raise InvalidParams("the prompts are never paged, so no cursor was issued: leave cursor out", field=field)


LIST_PARAMS = Params(Value("cursor", _no_cursor))
GET_PARAMS = Params(Value("name", _prompt_name, required=True), Value("arguments"))


def list_prompts(engine: PromptsEngine, caller: Caller) -> PromptList:
    engine.authorize(caller, create=False)
    return {"prompts": list(PROMPTS.values())}


def get_prompt(engine: PromptsEngine, caller: Caller, name: str, arguments: Any) -> PromptAnswer:
    """The prompt ``name`` for ``caller``, with ``arguments`` (an object of strings, or absent)."""
    read = PROMPT_ARGUMENTS[name].read({} if arguments is None else arguments, where="arguments.")
    engine.authorize(caller, create=False)
    if name == MEMORY_PROMPT:
        text = prompt_for(engine, caller, read["projectKey"])["text"]
        return _one_message(PROMPTS[name]["description"], text)
    index = index_for(engine, caller, read["firstMessageAt"] or format_timestamp(utc_now()))
    if index["text"] is None:
        reason = index.get("reason", "")
        return _one_message(f"No Knowledge Index for this caller ({reason}).", _NO_INDEX.get(reason, _NO_INDEX[""]))
    return _one_message(PROMPTS[name]["description"], index["text"])


def _one_message(description: str, text: str) -> PromptAnswer:
    return {"description": description, "messages": [{"role": "user", "content": {"type": "text", "text": text}}]}
