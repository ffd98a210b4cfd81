"""Vocabulary: the effective ontology of an agent's private partition, with counts, examples and findings.

Read through ``operator/ontology`` (the same views ``knowledge_ontology``
gives the agent): definitions with their fields, allowed values, filing and
endpoint constraints, up to 20 example records each, and the ontology's
validation findings, paged.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from ..common.models import Column, PagedModel, Row, RowsModel
from ..common.widgets import RECORD_SCHEME, SafeTextBrowser, esc, heading, named, table, unread_text
from ..health.view import FINDING_COLUMNS
from ..tasks import EngineTasks

DEFINITIONS_PAGE = 100
FINDINGS_PAGE = 100
CHOOSE_AGENT = "Choose an agent in the toolbar (Ctrl+L) to see the vocabulary of its private partition."


def name_tip(definition: Row) -> str:
    """The definition's name and, where it has one, the label the window heads it with."""
    name, label = definition.get("name") or "", definition.get("label")
    return f"{name}, shown as “{label}”" if label and label != name else name


# Every column reads whole in a 1008-wide window ("organ…", "relati…" named nothing); the name, not the
# provenance ("From", as the definition says "from shipped"), takes the spare width.  The label has no column:
# it mostly repeats the name ("Organization" beside organization), heads the definition beside the list, and
# is on the name's hover.
DEFINITION_COLUMNS = [
    Column("Name", lambda d: d.get("name"), tooltip=name_tip, stretch=True, whole=True),
    Column("Kind", lambda d: d.get("kind"), whole=True),
    Column("Records", lambda d: d.get("recordCount"), align_right=True),
    Column("From", lambda d: d.get("provenance"), tooltip=lambda d: f"Provenance: {d.get('provenance')}"),
]


ONTOLOGY_FINDING_COLUMNS = [*FINDING_COLUMNS, Column("Concerns", lambda f: f.get("concerns"))]


def definition_html(definition: Row) -> str:
    parts = [f"<h2>{esc(definition.get('label') or definition.get('name'))}</h2>",
             f'<div class="muted">{esc(definition.get("kind"))} <b>{esc(definition.get("name"))}</b> · from '
             f"{esc(definition.get('provenance'))}{' · default page type' if definition.get('default') else ''}</div>",
             f"<p>{esc(definition.get('description'))}</p>"]
    if definition.get("aliases"):
        parts.append(f"<div><b>Aliases:</b> {esc(', '.join(definition['aliases']))}</div>")
    if definition.get("filing"):
        parts.append(f"<div><b>Filed under:</b> {esc(', '.join(definition['filing']))}</div>")
    if definition.get("kind") == "relationship":
        parts.append(f"<div><b>From:</b> {esc(', '.join(definition.get('from') or []) or 'any page')} · "
                     f"<b>To:</b> {esc(', '.join(definition.get('to') or []) or 'any page')}</div>")
    fields = definition.get("fields") or {}
    if fields:
        rows = "".join(
            f"<tr><td><b>{esc(name)}</b></td><td>{esc(spec.get('type'))}</td>"
            f"<td>{esc(', '.join(spec.get('values') or []))}</td><td>{esc(spec.get('description'))}</td></tr>"
            for name, spec in fields.items())
        parts.append(f"<h3>Fields</h3><table><tr><th align=left>field</th><th align=left>type</th>"
                     f"<th align=left>allowed values</th><th align=left>meaning</th></tr>{rows}</table>")
    records = definition.get("records") or []
    parts.append(f"<h3>Examples ({definition.get('recordCount', 0):,} current records)</h3>")
    parts.append("".join(f'<div><a href="{RECORD_SCHEME}:{esc(r["id"])}">{esc(r.get("title") or r["id"])}</a></div>'
                         for r in records) or '<div class="muted">none yet</div>')
    if definition.get("recordsTruncated"):
        parts.append('<div class="muted">… and more</div>')
    return "".join(parts)


class VocabularyView(QWidget):
    title = "Vocabulary"

    sig_content_loaded = Signal(int)
    """Every definition arrived (how many)."""

    sig_record_requested = Signal(str)
    """An example record was clicked (its id)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self._generation = 0
        self._collected: list[Row] = []
        self.definitions_model = RowsModel(DEFINITION_COLUMNS, self)
        self.definitions_table = named(table(self.definitions_model), "Definitions",
                                       "Page types, relationship types and claim kinds, with how many records "
                                       "use each")
        self.definitions_table.selectionModel().selectionChanged.connect(self._on_definition_selected)
        self.details = named(SafeTextBrowser(), "Definition", "The chosen definition's fields, allowed values "
                                                              "and examples")
        self.details.sig_link_activated.connect(self._on_link_activated)
        self.findings_model = PagedModel(ONTOLOGY_FINDING_COLUMNS, self)
        self.findings_model.sig_load_failed.connect(self.tasks.sig_error_raised.emit)
        self.findings_table = named(table(self.findings_model), "Validation findings")
        self.definitions_table.set_empty_text(CHOOSE_AGENT)
        self.findings_table.set_empty_text("No findings: the ontology of this partition validates without "
                                           "an error or warning.")

        upper = QSplitter(Qt.Orientation.Horizontal)
        upper.addWidget(self.definitions_table)
        upper.addWidget(self.details)
        upper.setStretchFactor(0, 1)
        upper.setStretchFactor(1, 1)
        upper.setSizes([560, 540])  # the list's columns read whole beside the definition
        lower = QWidget()
        lower_layout = QVBoxLayout(lower)
        lower_layout.addWidget(heading("Validation findings"))
        lower_layout.addWidget(self.findings_table)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(upper)
        splitter.addWidget(lower)
        splitter.setStretchFactor(0, 3)
        layout = QVBoxLayout(self)
        layout.addWidget(splitter)

    def set_agent(self, agent: str | None) -> None:
        if agent != self.agent:
            self.agent = agent
            self.refresh()

    def refresh(self) -> None:
        self._generation += 1
        self._collected = []
        self.details.clear()
        if self.agent is None:
            self.definitions_table.set_empty_text(CHOOSE_AGENT)
            self.definitions_model.set_rows([])
            self.findings_model.set_source(None)
            return
        self.definitions_table.set_empty_text("Loading…")
        self._fetch_definitions(self.agent, 0, self._generation)
        agent = self.agent

        def findings(offset: Any, deliver: Any, fail: Any) -> None:
            params = {"agent": agent, "view": "diagnostics", "offset": offset or 0, "limit": FINDINGS_PAGE}
            self.tasks.request("operator/ontology", params,
                               lambda page: deliver(page["findings"], page.get("nextOffset"), page["total"]),
                               on_error=fail, owner=self)

        self.findings_model.set_source(findings)

    def _fetch_definitions(self, agent: str, offset: int, generation: int) -> None:
        def arrived(page: dict[str, Any]) -> None:
            if generation != self._generation:
                return
            self._collected.extend(page["definitions"])
            if page.get("nextOffset") is not None:
                self._fetch_definitions(agent, page["nextOffset"], generation)
                return
            self.definitions_model.set_rows(self._collected)
            self.definitions_table.resizeColumnsToContents()
            if self._collected:
                self.definitions_table.selectRow(0)
            self.sig_content_loaded.emit(len(self._collected))

        def failed(message: str) -> None:
            if generation != self._generation:
                return
            self.definitions_model.set_rows([])
            self.definitions_table.set_empty_text(unread_text(message))
            self.tasks.sig_error_raised.emit(message)

        params = {"agent": agent, "view": "definitions", "includeRecords": True, "offset": offset,
                  "limit": DEFINITIONS_PAGE}
        self.tasks.request("operator/ontology", params, arrived, on_error=failed, owner=self)

    def _on_definition_selected(self) -> None:
        rows = self.definitions_table.selectionModel().selectedRows()
        definition = self.definitions_model.row(rows[0].row()) if rows else None
        if definition is not None:
            self.details.rerender_with(lambda: self.details.show_html(definition_html(definition)))

    def _on_link_activated(self, url: QUrl) -> None:
        if url.scheme() == RECORD_SCHEME and url.path():
            self.sig_record_requested.emit(url.path())
