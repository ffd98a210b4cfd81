"""The import formats of an owner's existing memory, and one way to run any of them.

``knowledge import FORMAT PATH`` runs an import in its own process when no
engine serves the state directory; ``operator/import`` runs it in the
serving engine as a job (engine/importers/methods.py).  Both read and check
the input whole first (``Format.load``: a malformed input is refused with
the file and the place in it before anything exists), then ``run`` it with
an owner caller of the receiving agent, so both produce the same records
and answer with the same result.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Callable

from ..access.authority import Caller, OperatorCaller
from ..core.errors import IndexFailed, InvalidParams, NotFound
from ..service import Engine
from . import chatgpt, claude, markdown, mem0, memory_core
from .answers import AnyImport
from .archive import select_store
from .common import DEFAULT_AGENT, Progress, Scan, Writer, import_instance, owner_caller


@dataclass(frozen=True)
class Format:
    name: str
    load: Callable[[str, Scan], tuple[Any, ...]]  # PATH -> the plan, checked whole (else InvalidParams)
    run: Callable[..., AnyImport]  # (writer, *plan) -> the result
    what: str  # what PATH is
    unit: str  # what the items are called, for progress
    folder: bool = False  # PATH is usually a folder
    keeps_edits: bool = False  # leaves an earlier import's page revised in the store since as it is (replaceEdits)


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("chatgpt", chatgpt.load_chatgpt, chatgpt.import_chatgpt,
           "a ChatGPT data export: its zip, its folder or its conversations.json", "conversations"),
    Format("claude", claude.load_claude, claude.import_claude,
           "a Claude data export: its zip, its folder or its conversations.json", "conversations"),
    Format("markdown", markdown.load_markdown, markdown.import_markdown,
           "a folder of Markdown notes (an Obsidian vault, a Logseq graph, a basic-memory project)", "notes",
           folder=True, keeps_edits=True),
    Format("mem0", mem0.load_mem0, mem0.import_mem0,
           "a mem0 or OpenMemory JSON export (or OpenMemory's export zip)", "memories"),
    Format("memory-core", memory_core.load_memory_core, memory_core.import_memory_core,
           "an agent workspace (OpenClaw memory-core): MEMORY.md, memory/**, USER.md, DREAMS.md", "files",
           folder=True, keeps_edits=True),
)}


def receiving_agent(engine: Engine, store: str | None, agent: str | None) -> str:
    """The owner agent an import writes as (its attribution names it, and its store receives the import):
    ``agent`` (default ``main``); or, for ``store`` (a named store's name, or a store id), one of the agents
    whose store it is: given, ``agent`` must be one; else the first owner agent among them."""
    if store is None:
        return agent or DEFAULT_AGENT
    settings = engine.settings.current()
    if store in settings.stores:  # a named store config.json lists (made at a member's first write if new)
        members = settings.stores[store].agents
    else:
        record = select_store(engine, store=store)  # NotFound naming it
        if record.kind == "named":
            listed = settings.stores.get(record.name or "")
            members = listed.agents if listed is not None else ()
        else:  # an isolated store is its agent's while that agent is in no named store
            bound = engine.registry.bound_agent(record.store_id)
            members = (bound,) if bound and not settings.named_stores_of(bound) else ()
    if agent is not None:
        if agent not in members:
            raise InvalidParams(f"agent {agent!r} does not use store {store!r}; name one of its agents, or "
                                "leave the agent out", field="agent")
        return agent
    for member in members:
        known = engine.registry.agent(member)
        if known is not None and known.active and known.owner:
            return member
    raise NotFound(f"no owner agent uses store {store!r}, and an import writes as one: add one to the store "
                   "(or name the agent)", store=store)


def run_import(engine: Engine | None, chosen: Format, plan: tuple[Any, ...], *, agent: str, dry_run: bool,
               progress: Callable[[Progress], None] | None,
               keep_token: Callable[[str, str], str], replace_edits: bool = False) -> AnyImport:
    """Run a loaded import: a dry run counts what it would create and writes nothing (``engine`` may be
    None; given, it reads as the operator what an earlier import made, so it counts what it would revise);
    a real one writes as an owner caller of ``agent``.  An ``agent`` that does not exist is registered at the
    import's first write (``keep_token(agent, token)`` keeps the new token and returns the file it is in),
    and until then what an earlier import made is read as the operator: an import with nothing to write (an
    empty export, one whose every item is skipped) registers nobody and keeps no token.  ``replace_edits``:
    an earlier import's page revised in the store since gets the input's changes anyway (formats that
    ``keeps_edits`` only, ``check_replace_edits``)."""
    check_replace_edits(chosen, replace_edits)
    if dry_run:  # with an engine, it reads what an earlier import made (to say what it would revise)
        reads = OperatorCaller(agent) if engine is not None else None
        return chosen.run(Writer(engine, reads, chosen.name, dry_run=True, progress=progress,
                                 replace_edits=replace_edits), *plan)
    assert engine is not None
    result: dict[str, Any] = {"agent": agent}
    with ExitStack() as stack:
        def writing_caller() -> Caller:
            caller, token = stack.enter_context(owner_caller(engine, agent, instance=import_instance(chosen.name)))
            if token:
                result["tokenFile"] = keep_token(agent, token)
            return caller

        known = engine.registry.agent(agent)
        if known is not None and known.active:
            writer = Writer(engine, writing_caller(), chosen.name, progress=progress, replace_edits=replace_edits)
        else:
            writer = Writer(engine, OperatorCaller(agent), chosen.name, progress=progress,
                            first_write=writing_caller, replace_edits=replace_edits)
        result.update(chosen.run(writer, *plan))
    return result


def check_replace_edits(chosen: Format, replace_edits: bool) -> None:
    """Refuse ``replaceEdits`` for a format that has no edits to keep, before anything is read or written."""
    if replace_edits and not chosen.keeps_edits:
        keeping = ", ".join(name for name, known in FORMATS.items() if known.keeps_edits)
        raise InvalidParams(f"replaceEdits is for imports that keep edits made in the store ({keeping}); the "
                            f"{chosen.name} import has none to replace", field="replaceEdits")


def unembedded_note(engine: Engine, agent: str) -> list[str]:
    """For an import run in the command's own engine, whose embedding stops when the command ends: a note when
    an embedding model is in force and some of ``agent``'s records have no vector yet, saying what embeds them
    (until then hybrid search finds them by their words only)."""
    embedder = engine.embeddings.current() if engine.embeddings is not None else None
    if embedder is None:
        return []

    def count(runtime: Any, authority: Any) -> tuple[int, int] | None:
        partition = authority.partition
        if runtime.vectors.follows_catalog(partition, embedder):
            return None
        records = runtime.catalog.current_count(partition)
        embedded = runtime.vectors.count(partition) if runtime.vectors.holds_file() else 0
        return max(0, records - embedded), records

    try:
        left = engine.on_store(OperatorCaller(agent), count, create=False)
    except (IndexFailed, NotFound):
        left = (0, 0)
    if left is None:
        return []
    missing, records = left
    which = f"{missing} of the {records} records" if missing else "Some records"
    return [f"{which} in {agent}'s store have no vector yet: the embedding model works only while an engine runs. "
            "`knowledge reindex` embeds them now; an engine serving this state directory embeds them from its "
            "first hybrid search (`knowledge search`). Until then hybrid search finds them by their words only."]


def index_imported(engine: Engine, agent: str) -> list[str]:
    """Bring the search index of ``agent``'s store up to date with what an import wrote (a search would do
    it first otherwise, and the owner's first search after an import would wait for it); a note for the
    result when the index could not be updated, which the next search tries again."""
    try:
        engine.on_store(OperatorCaller(agent), lambda runtime, authority: runtime.indexes.catch_up(
            authority.partition), create=False)
    except IndexFailed as exc:
        return [f"The search index was not brought up to date ({exc.message}); the next search tries again."]
    return []
