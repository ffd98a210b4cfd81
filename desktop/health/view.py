"""Health: validation findings with file and reason, git checkpoint state, pending publications, store status."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from engine.core.words import counted

from ..common.models import Column, Row, RowsModel
from ..common.widgets import NO_STORE_TEXT, SafeTextBrowser, esc, heading, named, table, unread_text
from ..tasks import EngineTasks


def _where(finding: Row) -> str:
    path = finding.get("path") or ""
    return f"{path}:{finding['line']}" if finding.get("line") else path


FINDING_COLUMNS = [
    Column("Severity", lambda f: f.get("severity", "error")),
    Column("File", _where),
    Column("Field", lambda f: f.get("field")),
    Column("Code", lambda f: f.get("code")),
    Column("Reason", lambda f: f.get("message")),
]


def store_words(store: dict[str, Any]) -> str:
    """The store as Agents and Sync name it, its id after: ``own isolated store (st_…)``, ``team (named, st_…)``."""
    ident = store.get("storeId") or "-"
    if store.get("kind") == "isolated" and not store.get("name"):
        return f"own isolated store ({ident})"
    return f"{store['name']} ({store.get('kind')}, {ident})" if store.get("name") else f"{ident} ({store.get('kind')})"


def summary_html(health: dict[str, Any]) -> str:
    store = health.get("store") or {}
    lines = [f"<div><b>Store:</b> {esc(store_words(store))} — <b>{esc(store.get('status'))}</b>"
             f"{' — ' + esc(store.get('reason')) if store.get('reason') else ''}</div>"]
    if store.get("status") != "ok":
        return "".join(lines)
    if health.get("problem"):
        lines.append(f"<div><b>Problem:</b> {esc(health['problem'].get('message'))}</div>")
        return "".join(lines)
    git = health.get("git") or {}
    detail = {"committed": "every publication is committed to the vault's git history",
              "pending": f"{counted(git.get('pending', 0), 'publication')} waiting for the git checkpoint",
              "unavailable": git.get("reason") or "git is not available"}.get(git.get("state"), "")
    lines.append(f"<div><b>Git checkpoint:</b> {esc(git.get('state'))} — {esc(detail)}"
                 f"{' — last error: ' + esc(git['lastError']) if git.get('lastError') else ''}</div>")
    lines.append(f"<div><b>Pending publications:</b> {esc(health.get('pendingPublications'))}</div>")
    files = health.get("files") or {}
    lines.append("<div><b>Files:</b> " + esc(", ".join(f"{count:,} {state}" for state, count in sorted(files.items()))
                                             or "none") + "</div>")
    verdict = "no errors" if health.get("ok") else "needs attention"
    lines.append(f"<div><b>Validation:</b> {counted(health.get('errors') or 0, 'error')}, "
                 f"{counted(health.get('warnings') or 0, 'warning')} — {verdict}{' (first 1,000 shown)' if health.get('truncated') else ''}</div>")
    return "".join(lines)


class HealthView(QWidget):
    title = "Health"

    sig_content_loaded = Signal(object)
    """The agent's health report arrived."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self.summary = named(SafeTextBrowser(), "Store and history")
        self.summary.setMaximumHeight(150)
        self.findings_model = RowsModel(FINDING_COLUMNS, self)
        self.findings_table = named(table(self.findings_model), "Validation findings")
        self.findings_table.set_empty_text("Choose an agent in the toolbar (Ctrl+L) to check its private partition.")
        layout = QVBoxLayout(self)
        layout.addWidget(heading("Store and history"))
        layout.addWidget(self.summary)
        layout.addWidget(heading("Validation findings"))
        layout.addWidget(self.findings_table, 1)

    def set_agent(self, agent: str | None) -> None:
        if agent != self.agent:
            self.agent = agent
            self.refresh()

    def refresh(self) -> None:
        if self.agent is None:
            self.summary.clear()
            self.findings_model.set_rows([])
            return
        self.findings_model.set_loading()
        self.tasks.request("operator/health", {"agent": self.agent}, self._on_health, on_error=self._on_failed,
                           owner=self)

    def _on_failed(self, message: str) -> None:
        """Say in the view that the partition was not checked (never that an agent must be chosen), and in the bar."""
        self.summary.clear()
        self.findings_model.set_rows([])
        self.findings_table.set_empty_text(unread_text(message, said="Not checked", again="The check runs again"))
        self.tasks.sig_error_raised.emit(message)

    def _on_health(self, health: dict[str, Any]) -> None:
        self.summary.rerender_with(lambda: self.summary.show_html(summary_html(health)))
        status = (health.get("store") or {}).get("status")
        self.findings_table.set_empty_text(
            "No validation findings: every record file of the partition is valid."
            if status == "ok" and not health.get("problem") else
            NO_STORE_TEXT if status == "not created" else
            "No findings to show: the store cannot be checked (see above).")
        self.findings_model.set_rows(health.get("findings") or [])
        self.findings_table.resizeColumnsToContents()
        self.sig_content_loaded.emit(health)
