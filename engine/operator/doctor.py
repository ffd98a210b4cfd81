"""``knowledge doctor``'s report: every store's status, each agent's diagnostics, and config.json's problem.

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

log = logging.getLogger(__name__)


class DoctorEngine(Protocol):
    """What the report reads of the engine."""

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


class DoctorReport(TypedDict):
    stores: list[StoreEntry]
    agents: list[DoctorAgent]
    config: NotRequired[str]
    problems: int


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
    report["problems"] = problems
    return report  # type: ignore[return-value]
