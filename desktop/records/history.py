"""A record's History: every revision as a row that reads (when, who, what changed), and what changed
between the revisions chosen, the body as a coloured diff and the fields with their old and new values.

Select one revision to compare it with the one before it, or two (Ctrl+click) to compare them.  What changed
comes from the engine (``operator/history``'s ``changed``, ``operator/diff``'s ``fields`` and ``bodyDiff``):
the window never parses a record file.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from typing import Any

from PySide6.QtCore import QItemSelection, QItemSelectionModel, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QSplitter, QVBoxLayout, QWidget

from ..common.diffs import diff_html, diff_style
from ..common.models import Column, RowsModel
from ..common.times import Clock, brief_ago, exact_time, local_now, moment
from ..common.widgets import SafeTextBrowser, esc, is_dark, named, table
from ..tasks import EngineTasks

# Keys every new revision changes by itself: named in a revision's fields, never in its "Changed".
BOOKKEEPING = ("revision", "updated_at")
# How a changed key reads in "Changed" (any other key reads as written).
CHANGE_WORDS = {"body": "body", "recall": "recall approval", "fields": "typed fields", "valid_from": "validity",
                "valid_to": "validity", "assertion_origin": "said by", "claim_kind": "claim kind",
                "recorded_at": "created time"}
ORIGINS = {"publication": "published", "external": "edited outside the engine",
           "sync": "kept from another machine (sync)"}
VALUE_MAX_CHARS = 300
NO_REVISION = "Select a revision to see what changed since the one before it, or two (Ctrl+click) to compare them."


def written_by(attribution: Any) -> str | None:
    """The agent and, when it declared one, its stable instance id: ``main (laptop-main)``."""
    if not isinstance(attribution, dict) or not attribution.get("agent"):
        return None
    instance = attribution.get("instance")
    return f"{attribution['agent']} ({instance})" if instance else str(attribution["agent"])


def labelled(revisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The revisions, each with the ``label`` History shows: its number, and for a version that kept the
    number of one before it (an edit made outside the engine, which leaves the file's number as it was) the
    number and how many such versions came before it: 1, 1.1, 1.2, 2."""
    seen: Counter[Any] = Counter()
    rows = []
    for row in revisions:
        number = row.get("revision")
        rows.append({**row, "label": f"{number}.{seen[number]}" if seen[number] else f"{number}"})
        seen[number] += 1
    return rows


def kept_again(row: dict[str, Any]) -> bool:
    """Whether the row is a version that kept the number of one before it (``labelled``)."""
    return "." in str(row.get("label", ""))


def revision_time(row: dict[str, Any]) -> Any:
    """When a revision was written: its own ``updated_at``, else when the engine first saw it; a version that
    kept an earlier one's number (edited outside the engine) is dated when the engine first saw it, since the
    editor left ``updated_at`` as it was."""
    if kept_again(row):
        return row.get("observedAt")
    return row.get("updatedAt") or row.get("observedAt")


def revision_author(row: dict[str, Any]) -> str | None:
    """Who wrote a revision: the agent its attribution names; a version edited outside the engine that kept
    the number still names the agent of the version it edited, so it says "outside the engine" instead."""
    if kept_again(row) and row.get("origin") == "external":
        return "outside the engine"
    return written_by(row.get("attribution"))


def revision_author_tooltip(row: dict[str, Any]) -> str | None:
    if revision_author(row) == written_by(row.get("attribution")):
        return None
    agent = written_by(row.get("attribution"))
    return (f"Edited in another program; the file still names {agent}, who wrote revision {row.get('revision')}"
            if agent else "Edited in another program")


def revision_tooltip(row: dict[str, Any]) -> str | None:
    if not kept_again(row):
        return None
    what = "edited outside the engine" if row.get("origin") == "external" else ORIGINS.get(str(row.get("origin")))
    return (f"Revision {row.get('revision')} as {what or 'kept again'}: the file kept its revision number, so "
            f"History numbers this version {row['label']}")


def what_changed(row: dict[str, Any]) -> str:
    """``body, tags``: what a revision changed since the one before it, in the owner's words."""
    changed = row.get("changed")
    if changed is None:
        return "" if row.get("revision") != 1 else "created"
    if not changed:
        return "created" if row.get("revision") == 1 else "nothing (the same content)"
    words = list(dict.fromkeys(CHANGE_WORDS.get(name, name.replace("_", " ")) for name in changed
                               if name not in BOOKKEEPING))
    return ", ".join(words) or "only its revision number"


def git_commit(row: dict[str, Any]) -> str:
    """The revision's Git commit, as much of it as names it (``""`` until the checkpoint commits it)."""
    return ((row.get("git") or {}).get("commit") or "")[:10]


def revision_facts(row: dict[str, Any]) -> str:
    """What the table has no room for in a narrow pane, said of one revision: ``Revision 2: active,
    published, Git commit 1a2b3c4d5e`` (or ``not in Git yet``)."""
    facts = [str(row["lifecycle"])] if row.get("lifecycle") else []
    origin = row.get("origin")
    if origin:
        facts.append(str(ORIGINS.get(str(origin), origin)))
    commit = git_commit(row)
    facts.append(f"Git commit {commit}" if commit else "not in Git yet")
    return f"Revision {row.get('label', row.get('revision'))}: {', '.join(facts)}"


def revision_hover(row: dict[str, Any]) -> str:
    """A revision's number on hover: its facts, why it is numbered 1.1 where it is, its publication and whole
    Git commit."""
    ids = [f"publication {row['publicationId']}" if row.get("publicationId") else "",
           f"commit {(row.get('git') or {}).get('commit')}" if (row.get("git") or {}).get("commit") else ""]
    return "\n".join(filter(None, [revision_facts(row), revision_tooltip(row), ", ".join(filter(None, ids))]))


def history_columns(now: Clock) -> list[Column]:
    """Four columns, each whole in the record page's pane of a 1008-wide window; the lifecycle, how a revision
    was written and its Git commit are said on hover and above the diff (``revision_facts``)."""
    return [
        Column("Revision", lambda r: r.get("label", r.get("revision")), align_right=True, tooltip=revision_hover),
        Column("When", lambda r: brief_ago(revision_time(r), now()),
               tooltip=lambda r: exact_time(revision_time(r), now()), whole=True),
        Column("Written by", revision_author, whole=True, tooltip=revision_author_tooltip),
        Column("Changed", what_changed, stretch=True, whole=True,
               tooltip=lambda r: ", ".join(r.get("changed") or []) or None),
    ]


def value_text(value: Any) -> str:
    """A frontmatter value in a line: a list as its items, a mapping as ``key: value``, long text cut."""
    if value is None:
        return "(none)"
    if isinstance(value, list):
        text = ", ".join(value_text(item) for item in value) or "(empty list)"
    elif isinstance(value, dict):
        text = "; ".join(f"{key}: {value_text(item)}" for key, item in value.items()) or "(empty)"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value)
    return text if len(text) <= VALUE_MAX_CHARS else text[:VALUE_MAX_CHARS] + "…"


def field_value_text(name: Any, value: Any, now: datetime) -> str:
    """A field's value as the owner reads it: a time (``created_at``, ``updated_at`` ...) in ``now``'s zone
    to the second, else ``value_text``."""
    if isinstance(value, dict) and value:  # a mapping's times too (``recall.approved_at``)
        text = "; ".join(f"{key}: {field_value_text(key, item, now)}" for key, item in value.items())
        return text if len(text) <= VALUE_MAX_CHARS else text[:VALUE_MAX_CHARS] + "…"
    at = moment(value, now) if str(name).endswith("_at") and isinstance(value, str) else None
    if at is None:
        return value_text(value)
    return at.strftime("%H:%M:%S" if at.date() == now.date() else "%Y-%m-%d %H:%M:%S")


def field_changes_html(fields: list[dict[str, Any]], dark: bool, now: datetime | None = None) -> str:
    """Each changed key: its old value (red) and its new one (green), times in the owner's zone."""
    if not fields:
        return '<div class="muted">No field changed.</div>'
    now = now or local_now()
    rows = []
    for change in fields:
        name = change.get("name")
        before = (f'<span style="{diff_style("removed", dark)}">'
                  f'{esc(field_value_text(name, change.get("before"), now))}</span>'
                  if change.get("change") != "added" else '<span class="muted">(not set)</span>')
        after = (f'<span style="{diff_style("added", dark)}">{esc(field_value_text(name, change.get("after"), now))}'
                 "</span>" if change.get("change") != "removed" else '<span class="muted">(removed)</span>')
        rows.append(f"<tr><td><b>{esc(change.get('name'))}</b></td><td>{before} → {after}</td></tr>")
    return f"<table>{''.join(rows)}</table>"


def facts_html(rows: list[dict[str, Any]]) -> str:
    """``revision_facts`` of each revision compared, a line each."""
    return f'<div class="muted">{"<br>".join(esc(revision_facts(row)) for row in rows)}</div>' if rows else ""


def revision_diff_html(result: dict[str, Any], dark: bool | None = None, now: datetime | None = None,
                       compared_rows: list[dict[str, Any]] | None = None) -> str:
    """What changed from ``from`` to ``to``: the revisions' facts (``compared_rows``), the fields, then the body
    as a coloured diff (the file's own diff where either revision is not a readable record)."""
    dark = is_dark() if dark is None else dark
    old, new = result.get("from"), result.get("to")
    parts = [f"<h3>Revision {esc(old)} → revision {esc(new)}</h3>", facts_html(compared_rows or [])]
    if not result.get("readable", False):
        parts.append('<div class="muted">One of these revisions is not a readable record: the files\' own '
                     "diff.</div>")
        parts.append(diff_html(result.get("diff") or "", dark) if result.get("diff")
                     else f'<div class="muted">Revision {esc(old)} and revision {esc(new)} hold the same '
                          "bytes.</div>")
        return "".join(parts)
    fields = result.get("fields") or []
    parts.append(f"<h3>Fields ({len(fields)} changed)</h3>{field_changes_html(fields, dark, now)}")
    body = result.get("bodyDiff") or ""
    parts.append("<h3>Body</h3>" + (diff_html(body, dark) if body else '<div class="muted">The body did not '
                                                                       "change.</div>"))
    if result.get("bodyTruncated") or result.get("truncated"):
        parts.append('<div class="muted">… (diff truncated)</div>')
    return "".join(parts)


def compared(rows: list[int]) -> tuple[int, int] | None:
    """The two rows to compare for a selection of History's rows (oldest first): one against the one before
    it, two against each other."""
    chosen = sorted(set(rows))
    if not chosen:
        return None
    if len(chosen) == 1:
        return (chosen[0] - 1, chosen[0]) if chosen[0] > 0 else None
    return chosen[0], chosen[-1]


def version_key(row: dict[str, Any]) -> tuple[Any, Any]:
    """One kept version: its number and its sha256 (an edit outside the engine keeps the number)."""
    return row.get("revision"), row.get("sha256")


class HistoryPanel(QWidget):
    """The revisions of the record shown, and the diff of the ones selected."""

    sig_diff_loaded = Signal(str)
    """A comparison between two revisions is shown (its text as shown)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None, *, now: Clock | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.now: Clock = now or local_now
        self.agent: str | None = None
        self.record_id: str | None = None
        self._generation = 0
        self.model = RowsModel(history_columns(lambda: self.now()), self)
        self.table = named(table(self.model), "Revisions")
        self.table.set_empty_text("Choose a record to see its revisions.")
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setToolTip("Select a revision to see what it changed; Ctrl+click a second one to compare the two.")
        self.table.selectionModel().selectionChanged.connect(self._on_revision_selected)
        self.diff = named(SafeTextBrowser(), "What changed", "The chosen revision's changes to the text and "
                                                             "fields, or the two chosen revisions compared")
        self.diff.setPlaceholderText(NO_REVISION)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.table)
        splitter.addWidget(self.diff)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)

    def clear(self) -> None:
        self._generation += 1
        self.record_id = None
        self.model.set_rows([])
        self.diff.clear()

    def chosen_rows(self) -> list[int]:
        return sorted(index.row() for index in self.table.selectionModel().selectedRows())

    def chosen_revisions(self) -> list[tuple[Any, Any]]:
        """The versions chosen (``version_key``), to choose them again once History is read again."""
        return [version_key(self.model.row(row)) for row in self.chosen_rows()]

    def show_history(self, agent: str, history: dict[str, Any], keep: list[tuple[Any, Any]] | None = None) -> None:
        """The revisions (newest last, as the engine lists them); ``keep``: versions chosen before
        (``chosen_revisions``), chosen again (their diff is asked for again).  The same record read again keeps
        what is chosen when the answer comes: the owner may have chosen a revision while it was asked for."""
        if history["id"] == self.record_id:
            keep = self.chosen_revisions()
        self._generation += 1
        self.agent, self.record_id = agent, history["id"]
        revisions = labelled(history["revisions"])
        self.model.set_rows(revisions)
        self.table.resizeColumnsToContents()
        rows = [n for n, row in enumerate(revisions) if version_key(row) in (keep or [])]
        chosen = QItemSelection()
        for row in rows:
            chosen.select(self.model.index(row, 0), self.model.index(row, self.model.columnCount() - 1))
        if rows:  # one change of selection, so one diff asked for
            self.table.selectionModel().select(chosen, QItemSelectionModel.SelectionFlag.ClearAndSelect)

    def _on_revision_selected(self) -> None:
        pair = compared(self.chosen_rows())
        if pair is None:
            first = self.chosen_rows() == [0]
            self.diff.rerender_with(lambda: self.diff.show_html(
                f'<div class="muted">Revision {esc(self.model.row(0).get("label"))} is where this record begins: '
                f"select a later one to see what it changed.</div>{facts_html([self.model.row(0)])}" if first else ""))
            if first:
                self.sig_diff_loaded.emit(self.diff.toPlainText())
            return
        self._compare(self.model.row(pair[0]), self.model.row(pair[1]))

    def show_diff(self, old: int, new: int) -> None:
        """Compare revisions ``old`` and ``new`` (each number's newest version, as the engine reads a number)."""
        newest = {row.get("revision"): row for row in self.model.rows()}
        if old in newest and new in newest:
            self._compare(newest[old], newest[new])

    def _compare(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if self.record_id is None or self.agent is None:
            return
        self._generation += 1  # only the last comparison asked for is shown
        generation = self._generation

        def shown(result: dict[str, Any]) -> None:
            if generation != self._generation:
                return
            named = {**result, "from": old.get("label"), "to": new.get("label")}  # 1.1 for a version kept again
            self.diff.rerender_with(lambda: self.diff.show_html(revision_diff_html(named, now=self.now(),
                                                                                   compared_rows=[old, new])))
            self.sig_diff_loaded.emit(self.diff.toPlainText())

        self.tasks.request("operator/diff", {
            "agent": self.agent, "id": self.record_id, "from": old.get("revision"), "to": new.get("revision"),
            "fromSha256": old.get("sha256"), "toSha256": new.get("sha256")}, shown, owner=self)
