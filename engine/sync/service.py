"""Sync as the owner asks for it: a round now, every store's sync status, a store cloned from a remote.

    method              params                                  changes
    operator/syncNow    agent? | store?, remote?                each chosen store's vault, history and sync/
    operator/syncStatus -                                       -
    operator/syncClone  url, agent, storeId?, name?, owner?     a new store, the agent (and its token) if new
    operator/startSyncClone  the same                           the same, as a job the window follows

The command line (``knowledge sync now / status / clone``) asks a serving engine these as the operator,
and otherwise does the same in its own process with an engine of its own (engine/cli/desk.py).

``startSyncClone`` answers at once with a job (engine/core/jobs.py, kind ``clone``) whose phases are the
clone's steps (``listing``, ``fetching``, ``cataloguing``) and whose ``result`` is ``syncClone``'s answer; a
refusal fails the job with the same error, nothing created.  It cannot be cancelled: a store half made is
finished by the next round, never left to a cancel.  One clone per agent runs at a time.

``syncNow`` with neither agent nor store runs a round for every store that has remotes (with ``remote``,
every store that has a remote of that name); naming a store or agent runs that store's round only.
"""

from __future__ import annotations

from typing import Any

from ..core.answers import NotRequired, TypedDict
from ..core.errors import KnowledgeError
from ..core.jobs import JobContext, JobFields
from ..core.methods import Method
from ..core.params import NO_PARAMS, Params, Value
from ..state.registry import StoreRecord
from .clone import CLONE, SyncCloned, SyncEngine, clone_store
from .install import conflicts_waiting, named_as_history, removals_made, waiting_conflicts
from .remotes import CHOOSE_STORE, DEFAULT_AGENT, check_remote_name, read_remotes
from .round import read_machine_id, read_status
from .status import StoreSyncStatus, SyncRemoteStatus, SyncStatus


class SyncCloneJob(JobFields):
    """``operator/startSyncClone``: the clone's job, its ``result`` ``operator/syncClone``'s answer."""

    result: NotRequired[SyncCloned]


class StoreRound(TypedDict):
    """One store's round: each remote's status after it, and how many conflicts wait for the owner's look
    then; ``problem`` when the round could not start (the store unavailable, its remotes file unreadable),
    naming why."""

    storeId: str
    remotes: list[SyncRemoteStatus]
    conflictsWaiting: NotRequired[int]
    problem: NotRequired[str]


class SyncNowAnswer(TypedDict):
    """The stores a round ran for; ``failing`` counts the remotes whose round failed (each says why) and the
    stores whose round could not start."""

    stores: list[StoreRound]
    failing: int
    note: NotRequired[str]


def sync_now(engine: SyncEngine, *, store: str | None = None, agent: str | None = None,
             remote: str | None = None) -> SyncNowAnswer:
    """A round now for the chosen store (``store`` or ``agent``), or for every store with remotes."""
    rounds: list[StoreRound]
    if store is not None or agent is not None:
        record = engine.resolver.select(store=store, agent=agent, default_agent=DEFAULT_AGENT)
        engine.resolver.check(record)
        rounds = [_store_round(engine, record, remote)]
    else:
        rounds = [_every_store_round(engine, record, remote) for record in engine.registry.stores()
                  if _has_remote(record, remote)]
    answer: SyncNowAnswer = {"stores": rounds, "failing": sum(
        ("problem" in one) + sum(status["state"] == "failing" for status in one["remotes"]) for one in rounds)}
    if not rounds:
        answer["note"] = ("no store has a remote" + (f" named {remote!r}" if remote else "")
                          + " (knowledge sync remote add NAME URL)")
    return answer


def _every_store_round(engine: SyncEngine, record: StoreRecord, remote: str | None) -> StoreRound:
    """One store's round when every store is synced: a store that cannot start its round says why, and the
    others go on."""
    try:
        return _store_round(engine, record, remote)
    except KnowledgeError as exc:
        return {"storeId": record.store_id, "remotes": [], "problem": exc.message}


def _store_round(engine: SyncEngine, record: StoreRecord, remote: str | None) -> StoreRound:
    done: StoreRound = {"storeId": record.store_id, "remotes": engine.sync_store(record, remote)}
    try:
        done["conflictsWaiting"] = engine.maintain(record, lambda runtime: conflicts_waiting(runtime.store.db))
    except KnowledgeError:
        pass  # the round ran; operator/syncStatus says what keeps the store's conflicts from being read
    return done


def _has_remote(record: StoreRecord, name: str | None) -> bool:
    try:
        remotes = read_remotes(record)
    except KnowledgeError:
        return True  # its round says what is wrong with its remotes file
    return any(name is None or remote["name"] == name for remote in remotes)


def sync_status(engine: SyncEngine) -> SyncStatus:
    """Every store of the state directory with its remotes' statuses and the conflicts waiting."""
    stores: list[StoreSyncStatus] = []
    for record in engine.registry.stores():
        entry: StoreSyncStatus = {"storeId": record.store_id, "name": record.name,
                                  "machineId": read_machine_id(record), "remotes": [], "conflicts": [],
                                  "conflictsWaiting": 0}
        try:
            running = engine.runtime(record).sync_lock.locked()
            entry["remotes"] = [_interrupted(status) if status["state"] == "syncing" and not running else status
                                for status in read_status(record)]
            conflicts, removed = engine.maintain(record, lambda runtime: (
                named_as_history(runtime.catalog, waiting_conflicts(runtime.store.db)),
                removals_made(runtime.store.db)))
            entry["conflicts"], entry["conflictsWaiting"] = conflicts, len(conflicts)
            if removed:
                entry["removed"] = removed
        except KnowledgeError as exc:
            entry["problem"] = exc.message
        stores.append(entry)
    return {"stores": stores}


def _interrupted(status: SyncRemoteStatus) -> SyncRemoteStatus:
    """A round status.json says is running while none runs: the engine stopped (or was killed) during it.
    Only one process holds a state directory, so no round elsewhere can be running."""
    return {**status, "state": "failing", "lastError": {
        "code": "interrupted", "at": status["lastAttempt"] or "",
        "message": "the last round stopped before its end (the engine stopped or was killed); nothing acknowledged "
                   "was lost, and the next round finishes it"}}


# --- the operator methods -------------------------------------------------------------------------


CLONE_JOB = "clone"
SYNC_NOW = CHOOSE_STORE + Params(Value("remote", check_remote_name,
                                       json={"type": "string", "maxLength": 64},
                                       description="only this remote (default: every remote of the store)"))


def methods(engine: SyncEngine) -> tuple[Method, ...]:
    """The rounds' ``operator/*`` methods (engine/core/methods.py), beside the remotes' (remotes.py)."""
    def now(params: dict[str, Any]) -> SyncNowAnswer:
        values = SYNC_NOW.read(params)
        return sync_now(engine, store=values["store"], agent=values["agent"], remote=values["remote"])

    def status(params: dict[str, Any]) -> SyncStatus:
        NO_PARAMS.read(params)
        return sync_status(engine)

    def clone(params: dict[str, Any]) -> SyncCloned:
        values = CLONE.read(params)
        return clone_store(engine, values["url"], values["agent"], store_id=values["storeId"], name=values["name"],
                           owner=values["owner"])

    def start_clone(params: dict[str, Any]) -> SyncCloneJob:
        values = CLONE.read(params)

        def work(context: JobContext) -> SyncCloned:
            return clone_store(engine, values["url"], values["agent"], store_id=values["storeId"],
                               name=values["name"], owner=values["owner"],
                               phase=lambda phase, words: context.phase(phase, message=words, cancellable=False))

        return engine.jobs.start(CLONE_JOB, f"clone:{values['agent']}",
                                 f"Clone of a store for {values['agent']}", work)

    return (Method("syncNow", SYNC_NOW, SyncNowAnswer, now),
            Method("syncStatus", NO_PARAMS, SyncStatus, status),
            Method("syncClone", CLONE, SyncCloned, clone),
            Method("startSyncClone", CLONE, SyncCloneJob, start_clone))

