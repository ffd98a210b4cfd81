"""``knowledge doctor``'s report: every store's status, each agent's diagnostics, and config.json's problem.

One function, so the command line gives the same report whether it opens the
state directory itself or asks the engine that serves it (``operator/doctor``).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..access.authority import OperatorCaller
from ..core.errors import KnowledgeError
from ..state.config import SettingsSource

log = logging.getLogger(__name__)


class DoctorEngine(Protocol):
    """What the report reads of the engine."""

    @property
    def settings(self) -> SettingsSource: ...

    def stores(self) -> list[dict[str, Any]]: ...

    def agents(self) -> list[dict[str, Any]]: ...

    def diagnostics(self, caller: OperatorCaller) -> dict[str, Any]: ...


def doctor_report(engine: DoctorEngine) -> dict[str, Any]:
    """``{stores, agents: [{agent, store, diagnostics or error}], config?, problems}``; a broken store is an
    entry of the report, never a failure of it."""
    report: dict[str, Any] = {"stores": engine.stores(), "agents": []}
    problems = sum(1 for store in report["stores"] if store["status"] == "unavailable")
    for agent in engine.agents():
        entry: dict[str, Any] = {"agent": agent["name"], "store": agent["store"]}
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
    return report
