"""What the agent sees: its memory prompt and Knowledge Index, exactly as the socket serves them.

The engine computes both for the chosen agent and audience as if that agent
asked (``memory/prompt`` and ``memory/index``), without its credential; the
counts are measured against the caps the engine enforces (the index holds
at most 4,000 characters; the prompt has no cap).
"""

from __future__ import annotations

import uuid
from typing import Any

from PySide6.QtCore import QDateTime, Qt, QTimeZone, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDateTimeEdit,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from ..common.widgets import heading, named, plain_label
from ..tasks import EngineTasks

REASONS = {
    "denied": ("this agent gets none in this audience (no owner authority, or denied): choose Another "
               "conversation above for what its conversations get"),
    "not_granted": "a conversation without an owner grant gets no index",
    "no_store": "the agent has no store yet; it is created on its first use",
    "read_failed": "the vault could not be read; see Health",
}


def count_text(result: dict[str, Any]) -> str:
    """How long the text is, or why there is none: in the window's words for a reason it knows (the engine's
    message is then the label's tooltip), else in the engine's."""
    if result.get("text") is None:
        reason = result.get("reason") or "none"
        if reason in REASONS:
            return f"None: {REASONS[reason]}."
        return f"None: {reason}" + (f" ({result['message']})" if result.get("message") else "")
    cap = result.get("maxChars")
    return f"{result['chars']:,} / {cap:,} characters" if cap else f"{result['chars']:,} characters (no cap)"


class PreviewView(QWidget):
    title = "What the agent sees"

    sig_content_loaded = Signal(str)
    """The prompt or the index arrived ("prompt" or "index")."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.agent: str | None = None
        self.results: dict[str, dict[str, Any]] = {}
        self.audience = QComboBox()
        self.audience.addItem("Owner-private conversation", "owner-private")
        self.audience.addItem("Another conversation", "conversation")
        self.session_key = QLineEdit("desktop-preview")
        self.session_key.setToolTip("The conversation's session key; a key with an owner grant sees the private "
                                    "partition")
        self.project_key = QLineEdit()
        self.project_key.setPlaceholderText("the host's repository project key, if any")
        self.first_message = named(QDateTimeEdit(QDateTime.currentDateTimeUtc()), "Session's first message",
                                   "In UTC; the Knowledge Index holds what was saved by then")
        self.first_message.setTimeZone(QTimeZone.utc())
        self.first_message.setDisplayFormat("yyyy-MM-dd HH:mm:ss 'UTC'")
        self.first_message.setCalendarPopup(True)
        self.use_now = QCheckBox("a session starting now")
        self.use_now.setChecked(True)
        self.use_now.toggled.connect(lambda _: self._sync_inputs())
        first_row = QHBoxLayout()
        first_row.addWidget(self.first_message, 1)
        first_row.addWidget(self.use_now)
        refresh = QPushButton("Show")
        refresh.clicked.connect(self.refresh)
        self.audience.currentIndexChanged.connect(lambda _: self._sync_inputs())
        form = QFormLayout()
        form.addRow("Audience", self.audience)
        form.addRow("Session key", self.session_key)
        form.addRow("Project key", self.project_key)
        form.addRow("Session's first message", first_row)
        controls = QHBoxLayout()
        controls.addLayout(form, 1)
        controls.addWidget(refresh, 0, Qt.AlignmentFlag.AlignBottom)

        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.prompt_text, self.index_text = QPlainTextEdit(), QPlainTextEdit()
        self.prompt_count, self.index_count = plain_label(), plain_label()
        for count in (self.prompt_count, self.index_count):
            count.setWordWrap(True)  # a long reason wraps in its pane, never widening the window past the screen
        panes = QSplitter(Qt.Orientation.Horizontal)
        for name, text, count in (("Memory prompt", self.prompt_text, self.prompt_count),
                                  ("Knowledge Index", self.index_text, self.index_count)):
            named(text, name)
            text.setReadOnly(True)
            text.setFont(mono)
            pane = QWidget()
            pane_layout = QVBoxLayout(pane)
            pane_layout.addWidget(heading(name))
            pane_layout.addWidget(text, 1)
            pane_layout.addWidget(count)
            panes.addWidget(pane)
        layout = QVBoxLayout(self)
        layout.addLayout(controls)
        layout.addWidget(panes, 1)
        self._sync_inputs()

    def _sync_inputs(self) -> None:
        self.session_key.setEnabled(self.audience.currentData() == "conversation")
        self.first_message.setEnabled(not self.use_now.isChecked())

    def audience_params(self) -> dict[str, Any]:
        if self.audience.currentData() == "conversation":
            return {"kind": "conversation", "sessionKey": self.session_key.text().strip() or "desktop-preview",
                    "sessionId": str(uuid.uuid5(uuid.NAMESPACE_URL, "knowledge-desktop-preview"))}
        return {"kind": "owner-private"}

    def set_agent(self, agent: str | None) -> None:
        if agent != self.agent:
            self.agent = agent
            self.refresh()

    def refresh(self) -> None:
        self.results = {}
        for text, count in ((self.prompt_text, self.prompt_count), (self.index_text, self.index_count)):
            text.clear()
            count.clear()
        if self.agent is None:
            return
        audience = self.audience_params()
        prompt: dict[str, Any] = {"agent": self.agent, "audience": audience}
        if self.project_key.text().strip():
            prompt["projectKey"] = self.project_key.text().strip()
        if self.use_now.isChecked():
            self.first_message.setDateTime(QDateTime.currentDateTimeUtc())
        first = self.first_message.dateTime().toUTC().toString("yyyy-MM-ddTHH:mm:ssZ")
        self.tasks.request("operator/prompt", prompt,
                           lambda r: self._show("prompt", r, self.prompt_text, self.prompt_count), owner=self)
        self.tasks.request("operator/index", {"agent": self.agent, "audience": audience, "firstMessageAt": first},
                           lambda r: self._show("index", r, self.index_text, self.index_count), owner=self)

    def _show(self, name: str, result: dict[str, Any], text: QPlainTextEdit, count: QLabel) -> None:
        self.results[name] = result
        text.setPlainText(result.get("text") or "")
        count.setText(count_text(result))
        count.setToolTip(result.get("message") or "")
        self.sig_content_loaded.emit(name)
