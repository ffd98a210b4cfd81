"""MCP ``completion/complete``: record names and aliases as an argument is typed.

What is offered, always from the caller's own partition (current records only) and never creating a store:

    reference                                argument         values
    ref/resource knowledge://record/...      store            the caller's store id
    ref/resource (either record template)    record           ids of records whose id, title or alias starts
                                                              with what was typed (the URI takes an id)
    ref/resource .../revision/{revision}     revision         the kept revisions of ``context.arguments.record``
    ref/prompt knowledge_memory              projectKey       titles and aliases of project pages
    ref/prompt knowledge_index               firstMessageAt   none (a timestamp)

Titles and aliases are matched as ``knowledge_lookup`` compares them (case, spacing and how accents are
composed do not matter), through the catalog's names index, so a keystroke costs what it matches.  At most
100 values, by title, with ``hasMore`` when there are more.  An unknown reference or argument is
``invalid_params``.
"""

from __future__ import annotations

from typing import Any

from ..access.authority import Authority, Caller
from ..core.answers import NotRequired, TypedDict
from ..core.errors import InvalidParams
from ..core.ids import is_record_id
from ..core.params import Params, String, Value
from ..store.catalog_reads import RecordRow, lookup_keys, name_key
from ..store.open_store import OpenStore, ReadView
from ..vault.records import TITLE_MAX_CHARS
from .prompts import INDEX_PROMPT, MEMORY_PROMPT, PROMPTS
from .resources import RECORD_TEMPLATE, REVISION_TEMPLATE, ResourceEngine

VALUES_MAX = 100  # MCP: at most 100 values a response
PROJECT_TYPE = "project"
ARGUMENTS = {  # (reference type, template or prompt name) -> the arguments it completes
    ("ref/resource", RECORD_TEMPLATE): ("store", "record"),
    ("ref/resource", REVISION_TEMPLATE): ("store", "record", "revision"),
    ("ref/prompt", MEMORY_PROMPT): ("projectKey",),
    ("ref/prompt", INDEX_PROMPT): ("firstMessageAt",),
}


class Completion(TypedDict):
    values: list[str]
    hasMore: bool
    total: NotRequired[int]


class CompletionAnswer(TypedDict):
    completion: Completion


def _reference(value: Any, field: str) -> tuple[str, str]:
    kind = value.get("type") if isinstance(value, dict) else None
    key = value.get("uri" if kind == "ref/resource" else "name") if isinstance(value, dict) else None
    if (kind, key) not in ARGUMENTS:
        raise InvalidParams(f"{field} must be {{type: ref/resource, uri: a template of resources/templates/list}} "
                            f"or {{type: ref/prompt, name: {' or '.join(PROMPTS)}}}", field=field)
    return kind, key


ARGUMENT = Params(String("name", 100, required=True, min_chars=1, what="an argument's name"),
                  String("value", TITLE_MAX_CHARS, required=True, what="a string"))
CONTEXT = Params(Value("arguments"))
COMPLETE_PARAMS = Params(Value("ref", _reference, required=True),
                         Value("argument", lambda value, field: ARGUMENT.read(value, where=field + "."),
                               required=True),
                         Value("context", lambda value, field: CONTEXT.read(value, where=field + ".")))


def complete(engine: ResourceEngine, caller: Caller, params: dict[str, Any]) -> CompletionAnswer:
    read = COMPLETE_PARAMS.read(params)
    reference, argument = read["ref"], read["argument"]
    name, typed = argument["name"], argument["value"]
    if name not in ARGUMENTS[reference]:
        raise InvalidParams(f"argument.name must be one of {', '.join(ARGUMENTS[reference])} for this reference",
                            field="argument.name")
    context = (read["context"] or {}).get("arguments")
    context = {} if context is None else context
    if not isinstance(context, dict):
        raise InvalidParams("context.arguments must be an object", field="context.arguments")
    entry = engine.enter(caller, create=False)
    if entry.authority.store is None or name == "firstMessageAt":
        return _answer([])
    if name == "store":
        store_id = entry.authority.store.store_id
        return _answer([store_id] if store_id.startswith(typed) else [])

    def values(store: OpenStore, authority: Authority, view: ReadView) -> list[str]:
        if name == "revision":
            record = context.get("record")
            if not is_record_id(record):
                return []
            return [str(row.revision) for row in view.catalog.revisions(authority.partition, record)
                    if str(row.revision).startswith(typed.strip())]
        if name == "record":
            rows = _named(view, authority.partition, typed, id_prefix=typed.strip())
            return [row.record_id for row in rows if row.record_id]
        rows = _named(view, authority.partition, typed, kind="page", type=PROJECT_TYPE)
        return _names_from(rows, typed)

    return _answer(entry.read(values))


def _named(view: ReadView, partition: str, typed: str, **filters: Any) -> list[RecordRow]:
    """Current records named from ``typed`` (each composed form of it), by title then id, without repeats."""
    found: dict[str, RecordRow] = {}
    for key in lookup_keys(typed):
        for row in view.catalog.named_from(partition, key, limit=VALUES_MAX + 1, **filters):
            found.setdefault(row.path, row)
    return sorted(found.values(), key=lambda row: ((row.title or "").casefold(), row.record_id or ""))


def _names_from(rows: list[RecordRow], typed: str) -> list[str]:
    """The titles and aliases of ``rows`` that start with ``typed`` (as lookups compare names), each once."""
    prefixes = lookup_keys(typed)
    names: dict[str, str] = {}
    for row in rows:
        for candidate in [row.title, *(row.view.aliases or ())]:
            if isinstance(candidate, str) and candidate.strip():
                shown = " ".join(candidate.split())
                if any(name_key(shown).startswith(prefix) for prefix in prefixes):
                    names.setdefault(name_key(shown), shown)
    return list(names.values())


def _answer(values: list[str]) -> CompletionAnswer:
    unique = list(dict.fromkeys(values))
    return {"completion": {"values": unique[:VALUES_MAX], "hasMore": len(unique) > VALUES_MAX}}
