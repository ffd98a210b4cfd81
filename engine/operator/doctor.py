"""``knowledge doctor``'s report: every store's status, each agent's diagnostics, config.json's problem, and
each store's sync (a remote whose rounds fail, conflicts waiting for the owner's look).

One function, so the command line gives the same report whether it opens the
state directory itself or asks the engine that serves it (``operator/doctor``).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..access.authority import OperatorCaller
from ..access.stores import AgentEntry, AgentStore, StoreEntry
from ..core.answers import JsonObject, NotRequired, TypedDict
from ..core.errors import ErrorAnswer, KnowledgeError
from ..core.findings import TruncatedFindings
from ..state.config import SettingsSource
from ..sync.clone import SyncEngine
from ..sync.service import sync_status
from ..sync.status import SyncError, SyncStatus

log = logging.getLogger(__name__)


class DoctorEngine(SyncEngine, Protocol):
    """What the report reads of the engine (and, for each store's sync, what sync_status reads)."""

    @property
    def settings(self) -> SettingsSource: ...

    def stores(self) -> list[StoreEntry]: ...

    def agents(self) -> list[AgentEntry]: ...

    def diagnostics(self, caller: OperatorCaller) -> Diagnostics: ...


class OntologySources(TypedDict):
    sources: list[str]


class Diagnostics(TruncatedFindings):
    """A partition's validation: findings, files per status, the ontology's sources, the git checkpoint and
    the publications still pending."""

    files: dict[str, int]
    ontology: OntologySources
    pendingPublications: int
    git: JsonObject


class DoctorAgent(TypedDict):
    """An agent's store and, when it is ``ok``, the store's diagnostics of its private partition (the
    store package's report), or the error that kept them from being read."""

    agent: str
    store: AgentStore
    diagnostics: NotRequired[Diagnostics]
    error: NotRequired[ErrorAnswer]


class FailingRemote(TypedDict):
    """A remote whose last round failed: why (``lastError``: code, message, when) and since when (it has
    failed on every round after ``lastSuccess``; None: no round with it ever worked)."""

    storeId: str
    name: str | None  # a named store's name
    remote: str
    url: str
    lastError: SyncError | None
    lastSuccess: str | None


class WaitingConflicts(TypedDict):
    """A store with sync conflicts the owner has not dismissed (each already has a standing version)."""

    storeId: str
    name: str | None
    waiting: int


class UnreadableSync(TypedDict):
    """A store whose sync state (remotes.json, status.json, its conflicts) cannot be read; ``storeId`` None:
    no store's could."""

    storeId: str | None
    name: str | None
    problem: str


class DoctorSync(TypedDict):
    """What needs the owner's look in the stores' sync: failing remotes and unreadable sync state are
    problems; conflicts waiting are listed, not counted (the merge already chose what stands)."""

    failing: list[FailingRemote]
    conflicts: list[WaitingConflicts]
    unreadable: list[UnreadableSync]


class DoctorReport(TypedDict):
    stores: list[StoreEntry]
    agents: list[DoctorAgent]
    config: NotRequired[str]
    sync: DoctorSync
    problems: int


def sync_report(status: SyncStatus) -> DoctorSync:
    """The failing remotes, waiting conflicts and unreadable sync states of ``status`` (status.json's)."""
    report: DoctorSync = {"failing": [], "conflicts": [], "unreadable": []}
    for store in status["stores"]:
        if "problem" in store:
            report["unreadable"].append({"storeId": store["storeId"], "name": store["name"],
                                         "problem": store["problem"]})
        for remote in store["remotes"]:
            if remote["state"] == "failing":
                report["failing"].append({"storeId": store["storeId"], "name": store["name"],
                                          "remote": remote["name"], "url": remote["url"],
                                          "lastError": remote["lastError"], "lastSuccess": remote["lastSuccess"]})
        if store["conflictsWaiting"]:
            report["conflicts"].append({"storeId": store["storeId"], "name": store["name"],
                                        "waiting": store["conflictsWaiting"]})
    return report


def doctor_report(engine: DoctorEngine) -> DoctorReport:
    """``{stores, agents: [{agent, store, diagnostics or error}], config?, problems}``; a broken store is an
    entry of the report, never a failure of it."""
    report: dict[str, Any] = {"stores": engine.stores(), "agents": []}  # "problems" comes last, once counted
    problems = sum(1 for store in report["stores"] if store["status"] == "unavailable")
    for agent in engine.agents():
        entry: DoctorAgent = {"agent": agent["name"], "store": agent["store"]}
        if agent["store"]["status"] == "ok":
            try:
                entry["diagnostics"] = engine.diagnostics(OperatorCaller(agent["name"]))
                problems += sum(1 for f in entry["diagnostics"]["findings"] if f.get("severity") == "error")
            except KnowledgeError as exc:
                entry["error"] = exc.to_dict()
                problems += 1
            except MemoryError:
                raise
            except Exception as exc:  # noqa: BLE001 - doctor reports a broken store, it never dies of one
                log.debug("diagnostics of %s failed", agent["name"], exc_info=True)
                entry["error"] = {"reason": "internal", "message": f"diagnostics failed: {type(exc).__name__}: {exc}"}
                problems += 1
        report["agents"].append(entry)
    if settings_problem := engine.settings.problem:
        report["config"] = settings_problem
        problems += 1
    try:
        report["sync"] = sync_report(sync_status(engine))
    except KnowledgeError as exc:
        report["sync"] = {"failing": [], "conflicts": [], "unreadable": [
            {"storeId": None, "name": None, "problem": f"the stores' sync state cannot be read: {exc.message}"}]}
    problems += len(report["sync"]["failing"]) + len(report["sync"]["unreadable"])
    report["problems"] = problems
    return report  # type: ignore[return-value]
