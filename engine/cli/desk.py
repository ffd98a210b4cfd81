"""The owner's desk as the command line reaches it: in this process, or through the engine that serves the state dir.

A command has one body and two transports.  ``open_desk`` looks at
``engine.json``: when a live engine serves the state directory, the command
asks it over the socket as the operator (``RemoteDesk``, the same connection
the window uses); otherwise it does the work here (``LocalDesk``): the
registry and config.json for administration, an ``Engine`` holding the state
directory's lock for searching, checking and reindexing.  Both answer with
the same data, so a command prints the same output either way.

An import (``knowledge import FORMAT PATH``) is on the desk too: here it
runs in this process; beside a serving engine it is the engine's job
(``operator/import``), which ``RemoteDesk`` follows, reporting its progress
as the import here reports it, and cancels on Ctrl+C.

Models (``knowledge models``) are not on the desk: those commands only read
and write files under ``<state>/models/`` and config.json, which the engine
re-reads, so they run the same beside an engine (and then ask it to list the
models, so that it tells the window).
"""

from __future__ import annotations

import dataclasses
import functools
import sqlite3
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from ..access.authority import OperatorCaller
from ..access.stores import StoreResolver
from ..core.answers import JsonValue, TypedDict
from ..core.errors import EngineLocked, NotFound
from ..importers.answers import AnyImport, ExportResult
from ..importers.archive import export_archive
from ..importers.common import DEFAULT_AGENT, Progress, import_engine
from ..importers.formats import FORMATS, check_replace_edits, receiving_agent, run_import, unembedded_note
from ..gate.suggest import GateSuggestion
from ..operator.doctor import doctor_report
from ..operator.gate_operator import handlers as gate_handlers
from ..operator.methods import check_workspace_roots
from ..service import Engine
from ..state.config import SettingsSource
from ..core.db import Database
from ..state.registry import MIGRATIONS as REGISTRY_MIGRATIONS, SCOPES, Registry, check_new_agent
from ..state.statedir import EngineLock, StateDir
from ..store.credentials import refuse_secrets
from ..sync.clone import SyncCloned, clone_store
from ..sync.conflicts import SyncConflictDismissed, dismiss
from ..sync.remotes import RemoteBook, SyncRemoteChanged, SyncRemotes
from ..sync.service import SyncNowAnswer, sync_now, sync_status
from ..sync.status import SyncStatus
from ..wire.operator_client import OperatorConnection, OperatorError

# A reindex of a large store takes minutes; the command waits for it as long as it runs (Ctrl+C stops waiting).
REMOTE_REPLY_TIMEOUT_S = None
JOB_POLL_S = 0.2  # how often a command following an engine job asks how far it is
JOB_FINISHED = ("done", "failed", "cancelled")
NOTE_KINDS = ("page", "claim")  # what the owner's search lists unless links are asked for, as in the window
COUNTED_PHASES = ("writing", "linking", "indexing")  # an import job's phases with a count the command prints


class ImportStopped(Exception):
    """An import the engine ran stopped before its end: cancelled (by Ctrl+C here, or in the window)."""

    def __init__(self, message: str, *, interrupted: bool) -> None:
        super().__init__(message)
        self.message = message
        self.interrupted = interrupted


class AddedAgent(TypedDict):
    """An agent added: its token (shown once) and the file it is kept in."""
    agent: str
    token: str
    tokenFile: str


class SettingsView(TypedDict):
    """The owner's switches as ``operator/inventory`` shows them, with config.json's problem if it has one."""
    writesEnabled: bool
    knowledgeRuntimeEnabled: bool
    workspaceRoots: list[str]
    problem: str | None


class Desk(Protocol):
    """What the commands ask of the owner's desk; every answer is plain JSON data."""

    def search(self, agent: str, query: str, limit: int, mode: str, links: bool = False) -> dict[str, Any]: ...
    def doctor(self) -> dict[str, Any]: ...
    def reindex(self) -> list[dict[str, Any]]: ...
    def agents(self) -> list[dict[str, Any]]: ...
    def add_agent(self, name: str, owner: bool, scopes: tuple[str, ...]) -> AddedAgent: ...
    def remove_agent(self, name: str) -> None: ...
    def grants(self, agent: str | None) -> list[dict[str, Any]]: ...
    def set_grant(self, agent: str, session_key: str, access: str) -> dict[str, Any]: ...
    def remove_grant(self, agent: str, session_key: str) -> None: ...
    def stores(self) -> list[dict[str, Any]]: ...
    def settings(self) -> SettingsView: ...
    def set_settings(self, **switches: Any) -> SettingsView: ...
    def export(self, out: Path, store: str | None, agent: str | None, with_history: bool) -> ExportResult: ...
    def import_(self, format_name: str, path: Path, agent: str | None, store: str | None, dry_run: bool,
                progress: Callable[[Progress], None] | None, *, replace_edits: bool = False) -> AnyImport: ...
    def sync_remotes(self) -> SyncRemotes: ...
    def add_sync_remote(self, name: str, url: str, store: str | None, agent: str | None) -> SyncRemoteChanged: ...
    def remove_sync_remote(self, name: str, store: str | None, agent: str | None) -> SyncRemoteChanged: ...
    def suggest_gate_thresholds(self, store: str | None, agent: str | None, precision: float,
                                pointer_precision: float | None) -> GateSuggestion: ...

    def sync_now(self, store: str | None, agent: str | None, remote: str | None) -> SyncNowAnswer: ...
    def sync_status(self) -> SyncStatus: ...
    def sync_clone(self, url: str, agent: str, store_id: str | None, name: str | None,
                   owner: bool = False) -> SyncCloned: ...
    def dismiss_sync_conflict(self, conflict_id: str, store: str | None,
                              agent: str | None) -> SyncConflictDismissed: ...


@contextmanager
def open_desk(state: StateDir) -> Iterator[Desk]:
    """The desk for ``state``: the serving engine's when one runs, else this process's."""
    if state.serving_engine() is None:
        yield LocalDesk(state)
        return
    desk = RemoteDesk(state)
    try:
        yield desk
    finally:
        desk.close()


# What opening an engine makes in a new state directory before anything is registered in it.
_OPENING_FILES = frozenset({"registry.sqlite", "registry.sqlite-wal", "registry.sqlite-shm",
                            "registry.sqlite-journal", "engine.lock"})


def holds_nothing(root: Path) -> bool:
    """No folder at ``root``, or an empty one: no state a command could read."""
    try:
        return next(root.iterdir(), None) is None
    except FileNotFoundError:
        return True


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` that is not there yet (``path`` itself when only it is missing)."""
    missing = None
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing = folder
    return missing


def _remove_if_untouched(state: StateDir, missing: Path | None) -> None:
    """Empty the state directory a failed command found empty, and remove the folders it created (up to
    ``missing``), when it holds only what opening an engine makes and its registry no agent or store; a
    directory that holds anything more, or that an engine has opened since, stays."""
    lock = EngineLock(state)
    try:
        lock.acquire()
    except EngineLocked:
        return
    try:
        if not {entry.name for entry in state.root.iterdir()} <= _OPENING_FILES:
            return
        if state.registry.exists():
            registry = Registry.open(state.registry, state.root)
            try:
                if registry.agents(include_removed=True) or registry.stores():
                    return
            finally:
                registry.close()
        for entry in state.root.iterdir():
            entry.unlink()
    except (OSError, sqlite3.Error):
        return  # what is left is what the failed command made: the command's own error is the one to say
    finally:
        lock.release()
    with suppress(OSError):  # a folder something else wrote to since stays
        for folder in (state.root, *state.root.parents) if missing is not None else ():
            folder.rmdir()
            if folder == missing:
                break


class LocalDesk:
    """The work done here; searching, checking and reindexing take the state directory's lock for a moment."""

    def __init__(self, state: StateDir) -> None:
        self.state = state

    @contextmanager
    def _registry(self, *, create: bool = True) -> Iterator[Registry]:
        """The state directory's registry; without ``create``, where there is none yet, an empty one in memory:
        a listing then answers what a new state directory holds, and creates none."""
        if not create and not self.state.registry.is_file():
            registry = Registry(Database.open(None, create=True, migrations=REGISTRY_MIGRATIONS), self.state.root)
        else:
            self.state.create()
            registry = Registry.open(self.state.registry, self.state.root)
        try:
            yield registry
        finally:
            registry.close()

    def _engine(self) -> Engine:
        return Engine(self.state, watch=False)

    def search(self, agent: str, query: str, limit: int, mode: str, links: bool = False) -> dict[str, Any]:
        with self._engine() as engine:
            return engine.owner_search(OperatorCaller(agent), _search_params(query, limit, mode, links))

    def doctor(self) -> dict[str, Any]:
        with self._engine() as engine:
            return doctor_report(engine)

    def reindex(self) -> list[dict[str, Any]]:
        with self._engine() as engine:
            return engine.reindex()

    def export(self, out: Path, store: str | None, agent: str | None, with_history: bool) -> ExportResult:
        with self._engine() as engine:
            return export_archive(engine, out, store=store, agent=agent, with_history=with_history)

    def import_(self, format_name: str, path: Path, agent: str | None, store: str | None, dry_run: bool,
                progress: Callable[[Progress], None] | None, *, replace_edits: bool = False) -> AnyImport:
        """The input checked whole first (nothing exists yet if it is refused), then imported by an engine
        of this process; a dry run writes nothing: with no state directory yet it opens no engine and creates
        no state, else it reads what an earlier import made (one naming a store must find it there)."""
        chosen = FORMATS[format_name]
        check_replace_edits(chosen, replace_edits)
        # The owner's allowSecrets decides, as for every write; read without creating anything.
        allowed = SettingsSource(self.state.config).current().allow_secrets if self.state.config.exists() else False
        plan = chosen.load(str(path), functools.partial(refuse_secrets, allowed=allowed))

        def keep(name: str, token: str) -> str:
            return str(self.state.write_agent_token(name, token))

        if dry_run:
            if not self.state.registry.is_file():  # no state yet: nothing an earlier import made to read
                if store is not None:
                    raise NotFound(f"no store {store!r} in {self.state.root} (`knowledge stores list` shows them)",
                                   store=store)
                return run_import(None, chosen, plan, agent=agent or DEFAULT_AGENT, dry_run=True,
                                  progress=progress, keep_token=keep, replace_edits=replace_edits)
        with import_engine(self.state) as engine:  # a dry run only reads what an earlier import made
            receiving = receiving_agent(engine, store, agent)
            result = run_import(engine, chosen, plan, agent=receiving, dry_run=dry_run, progress=progress,
                                keep_token=keep, replace_edits=replace_edits)
            if not dry_run and any((result.get("imported") or {}).values()):
                result["notes"] = [*(result.get("notes") or []), *unembedded_note(engine, receiving)]  # type: ignore
            return result

    def agents(self) -> list[dict[str, Any]]:
        with self._registry(create=False) as registry:
            resolver = StoreResolver(self.state, registry, SettingsSource(self.state.config))
            return [{"name": a.name, "owner": a.owner, "scopes": list(a.scopes), "createdAt": a.created_at,
                     "store": resolver.agent_view(a.name)} for a in registry.agents()]

    def add_agent(self, name: str, owner: bool, scopes: tuple[str, ...] = SCOPES) -> AddedAgent:
        check_new_agent(name, scopes)  # a refused name creates no state directory
        with self._registry() as registry:
            token = registry.add_agent(name, owner=owner, scopes=scopes)
        return {"agent": name, "token": token, "tokenFile": str(self.state.write_agent_token(name, token))}

    def remove_agent(self, name: str) -> None:
        with self._registry() as registry:
            registry.remove_agent(name)
        self.state.remove_agent_token(name)

    def grants(self, agent: str | None) -> list[dict[str, Any]]:
        with self._registry(create=False) as registry:
            return [grant.to_dict() for grant in registry.grants(agent)]

    def set_grant(self, agent: str, session_key: str, access: str) -> dict[str, Any]:
        with self._registry() as registry:
            return registry.set_grant(agent, session_key, access).to_dict()

    def remove_grant(self, agent: str, session_key: str) -> None:
        with self._registry() as registry:
            registry.remove_grant(agent, session_key)

    def stores(self) -> list[dict[str, Any]]:
        with self._registry(create=False) as registry:
            return StoreResolver(self.state, registry, SettingsSource(self.state.config)).inventory()

    def settings(self) -> SettingsView:
        return _settings_view(SettingsSource(self.state.config))

    @contextmanager
    def _remotes(self, *, create: bool = True) -> Iterator[RemoteBook]:
        with self._registry(create=create) as registry:
            yield RemoteBook(self.state, StoreResolver(self.state, registry, SettingsSource(self.state.config)))

    def sync_remotes(self) -> SyncRemotes:
        with self._remotes(create=False) as book:
            return book.listing()

    def add_sync_remote(self, name: str, url: str, store: str | None, agent: str | None) -> SyncRemoteChanged:
        with self._remotes() as book:
            return book.add(name, url, store=store, agent=agent)

    def remove_sync_remote(self, name: str, store: str | None, agent: str | None) -> SyncRemoteChanged:
        with self._remotes() as book:
            return book.remove(name, store=store, agent=agent)

    def suggest_gate_thresholds(self, store: str | None, agent: str | None, precision: float,
                                pointer_precision: float | None) -> GateSuggestion:
        with self._engine() as engine:
            return gate_handlers(engine)["suggestGateThresholds"](
                _suggest_params(store, agent, precision, pointer_precision))

    def sync_now(self, store: str | None, agent: str | None, remote: str | None) -> SyncNowAnswer:
        with self._engine() as engine:
            return sync_now(engine, store=store, agent=agent, remote=remote)

    def sync_status(self) -> SyncStatus:
        if not self.state.registry.is_file():  # no state yet: no store to report, and none is created
            return {"stores": []}
        with self._engine() as engine:
            return sync_status(engine)

    def sync_clone(self, url: str, agent: str, store_id: str | None, name: str | None,
                   owner: bool = False) -> SyncCloned:
        # A clone is often a new machine's first command: refused, it leaves no state directory behind.
        missing = _first_missing(self.state.root)
        new = holds_nothing(self.state.root)
        self.state.create()
        try:
            with self._engine() as engine:
                return clone_store(engine, url, agent, store_id=store_id, name=name, owner=owner)
        except BaseException:
            if new:
                _remove_if_untouched(self.state, missing)
            raise

    def dismiss_sync_conflict(self, conflict_id: str, store: str | None,
                              agent: str | None) -> SyncConflictDismissed:
        with self._engine() as engine:
            return dismiss(engine, conflict_id, store=store, agent=agent)

    def set_settings(self, **switches: Any) -> SettingsView:
        source = SettingsSource(self.state.config)
        changed = source.current()
        roots = check_workspace_roots(switches["workspaceRoots"]) if "workspaceRoots" in switches else None
        if "writesEnabled" in switches:
            changed = dataclasses.replace(changed, writes_enabled=switches["writesEnabled"])
        if "knowledgeRuntimeEnabled" in switches:
            changed = changed.with_knowledge_runtime(switches["knowledgeRuntimeEnabled"])
        if roots is not None:
            changed = changed.with_workspace_roots(roots)
        self.state.create()
        source.save(changed)
        return _settings_view(source)


def _search_params(query: str, limit: int, mode: str, links: bool) -> dict[str, Any]:
    """The owner's search as the command asks it: pages and claims, as the window lists them, unless ``links``
    asks for relationship records too."""
    return {"query": query, "limit": limit, "mode": mode, **({} if links else {"kinds": list(NOTE_KINDS)})}


def _suggest_params(store: str | None, agent: str | None, precision: float,
                    pointer_precision: float | None) -> dict[str, Any]:
    return {"store": store, "agent": agent, "precision": precision, "pointerPrecision": pointer_precision}


def _settings_view(source: SettingsSource) -> SettingsView:
    """The switches as ``operator/inventory`` shows them."""
    current = source.current()
    return {"writesEnabled": current.writes_enabled, "knowledgeRuntimeEnabled": current.knowledge_runtime_enabled,
            "workspaceRoots": list(current.workspace_roots), "problem": source.problem}


class RemoteDesk:
    """The serving engine does the work; this process only asks, as the operator, and the engine checks."""

    def __init__(self, state: StateDir) -> None:
        self.connection = OperatorConnection(state, client_name="knowledge-cli",
                                             reply_timeout_s=REMOTE_REPLY_TIMEOUT_S)

    def close(self) -> None:
        self.connection.close()

    def _call(self, method: str, params: dict[str, Any] | None = None) -> JsonValue:
        """The engine's answer to ``operator/<method>``, as JSON (the method declares its shape)."""
        return self.connection.call("operator/" + method, params)

    def search(self, agent: str, query: str, limit: int, mode: str, links: bool = False) -> dict[str, Any]:
        return self._call("search", {"agent": agent, **_search_params(query, limit, mode, links)})

    def doctor(self) -> dict[str, Any]:
        return self._call("doctor")

    def reindex(self) -> list[dict[str, Any]]:
        return self._call("reindex")["rebuilt"]

    def export(self, out: Path, store: str | None, agent: str | None, with_history: bool) -> ExportResult:
        return self._call("export", {"out": str(out.absolute()), "store": store, "agent": agent,
                                     "withHistory": with_history})

    def import_(self, format_name: str, path: Path, agent: str | None, store: str | None, dry_run: bool,
                progress: Callable[[Progress], None] | None, *, replace_edits: bool = False) -> AnyImport:
        """Start the engine's import job and follow it to its end: its progress reported as it comes,
        its failure raised as the engine's error, Ctrl+C cancelling it (``ImportStopped``)."""
        job = self._call("import", {"format": format_name, "path": str(path), "agent": agent, "store": store,
                                    "dryRun": dry_run, "replaceEdits": replace_edits})
        shown: tuple[Any, Any, Any] | None = None
        interrupted = False
        while True:
            step = job.get("progress") or {}
            # The items written, then linked.  Indexing begins once every item is written and linked, and keeps
            # that count: it is said as the phase shown last, never as writing again after the notes linked.
            phase = step.get("phase")
            if phase == "indexing" and shown is not None:
                phase = shown[2]
            phase = "linking" if phase == "linking" else "writing"
            if (progress is not None and step.get("total") is not None and step.get("phase") in COUNTED_PHASES
                    and (step.get("done"), step["total"], phase) != shown):
                shown = (step.get("done"), step["total"], phase)
                progress(Progress(format_name, int(step.get("done") or 0), int(step["total"]),
                                  str(step.get("message") or ""), phase))
            if job.get("state") in JOB_FINISHED:
                break
            try:
                time.sleep(JOB_POLL_S)
                job = self._call("job", {"job": job["id"]})
            except KeyboardInterrupt:
                if interrupted:
                    raise
                interrupted = True
                self.connection.close()  # a reply may have been cut off midway: ask on a fresh connection
                job = self._call("cancelJob", {"job": job["id"]})
        if job["state"] == "done":
            return job["result"]
        if job["state"] == "failed":
            error = job.get("error") or {}
            raise OperatorError(error.get("reason", "internal"), error.get("message", "the import failed"), error)
        step = job.get("progress") or {}
        where = (f" after {int(step.get('done') or 0)}/{int(step['total'])} {step.get('unit') or 'items'}"
                 if step.get("total") is not None else " before its first item")
        by = "stopped by Ctrl+C: the engine cancelled it" if interrupted else "cancelled in the engine"
        raise ImportStopped(f"{by}{where}. What was imported stays; running the command again finishes it "
                            "(nothing is imported twice).", interrupted=interrupted)

    def agents(self) -> list[dict[str, Any]]:
        return self._call("inventory")["agents"]

    def add_agent(self, name: str, owner: bool, scopes: tuple[str, ...] = SCOPES) -> AddedAgent:
        added = self._call("addAgent", {"name": name, "owner": owner, "scopes": list(scopes)})
        return {"agent": added["agent"], "token": added["token"], "tokenFile": added["tokenFile"]}

    def remove_agent(self, name: str) -> None:
        self._call("removeAgent", {"name": name})

    def grants(self, agent: str | None) -> list[dict[str, Any]]:
        return self._call("grants", {"agent": agent} if agent is not None else {})["grants"]

    def set_grant(self, agent: str, session_key: str, access: str) -> dict[str, Any]:
        return self._call("setGrant", {"agent": agent, "sessionKey": session_key, "access": access})["grant"]

    def remove_grant(self, agent: str, session_key: str) -> None:
        self._call("removeGrant", {"agent": agent, "sessionKey": session_key})

    def stores(self) -> list[dict[str, Any]]:
        return self._call("inventory")["stores"]

    def settings(self) -> SettingsView:
        return self._call("inventory")["settings"]

    def set_settings(self, **switches: Any) -> SettingsView:
        return self._call("setSettings", switches)["settings"]

    def sync_remotes(self) -> SyncRemotes:
        return self._call("syncRemotes")

    def add_sync_remote(self, name: str, url: str, store: str | None, agent: str | None) -> SyncRemoteChanged:
        return self._call("addSyncRemote", {"name": name, "url": url, "store": store, "agent": agent})

    def remove_sync_remote(self, name: str, store: str | None, agent: str | None) -> SyncRemoteChanged:
        return self._call("removeSyncRemote", {"name": name, "store": store, "agent": agent})

    def suggest_gate_thresholds(self, store: str | None, agent: str | None, precision: float,
                                pointer_precision: float | None) -> GateSuggestion:
        return self._call("suggestGateThresholds", _suggest_params(store, agent, precision, pointer_precision))

    def sync_now(self, store: str | None, agent: str | None, remote: str | None) -> SyncNowAnswer:
        return self._call("syncNow", {"store": store, "agent": agent, "remote": remote})

    def sync_status(self) -> SyncStatus:
        return self._call("syncStatus")

    def sync_clone(self, url: str, agent: str, store_id: str | None, name: str | None,
                   owner: bool = False) -> SyncCloned:
        return self._call("syncClone", {"url": url, "agent": agent, "storeId": store_id, "name": name,
                                        "owner": owner})

    def dismiss_sync_conflict(self, conflict_id: str, store: str | None,
                              agent: str | None) -> SyncConflictDismissed:
        return self._call("dismissSyncConflict", {"id": conflict_id, "store": store, "agent": agent})
