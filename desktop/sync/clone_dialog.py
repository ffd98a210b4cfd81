"""Clone a store: this machine joins a store another machine syncs through a git remote.

The dialog asks what ``knowledge sync clone`` takes: the remote's URL, the agent whose store the clone
becomes, whether that agent is the owner's own (owner authority: it reads the private partition), and,
rarely needed, the store id (a remote holding several stores) and the remote's name here (``origin``).
The engine runs the clone as a job (``operator/startSyncClone``): the window's worker only starts it and
polls it, so the window and its other views go on while the remote is fetched.  The job's steps show as it
goes; a refusal (a URL git cannot use, a remote out of reach, a store or agent already here) is the
engine's reason under the fields, the dialog open to correct it and nothing created.  A clone cannot be
stopped midway, so Cancel waits for it.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QCheckBox, QDialogButtonBox, QLineEdit, QProgressBar, QWidget

from engine.core.words import counted

from ..common.jobs import JobWatcher, progress_text
from ..common.widgets import CheckedDialog, plain_label
from ..tasks import EngineTasks

DEFAULT_AGENT = "main"


def cloned_text(cloned: dict[str, Any], url: str) -> str:
    """What the message bar says of a clone that finished: the store, the agent's authority, the records."""
    said = (f"Store {cloned['storeId']} cloned from {url} for agent {cloned['agent']}: "
            f"{counted(cloned['records'], 'record')} current (pages, claims and the "
            "relationships between them).")
    if not cloned["owner"]:
        said += (f" {cloned['agent']} has no owner authority here: it reads its conversations, not the private "
                 "partition.")
    if (cloned.get("remote") or {}).get("state") == "failing":
        said += " Its first round failed; Sync now finishes it."
    return said


class CloneDialog(CheckedDialog):
    """The clone's fields, then its steps as the engine's job reports them."""

    sig_cloned = Signal(object)
    """The clone finished: the engine's answer (``SyncCloned``: store id, agent, authority, records)."""

    def __init__(self, tasks: EngineTasks, agents: list[dict[str, Any]], parent: QWidget | None = None) -> None:
        super().__init__("Clone a store", "Join a store that another machine syncs through a git repository: "
                         "this machine gets its own copy, with the same store id, as an agent's store.\n"
                         "Credentials stay with git: an ssh key in ssh-agent, or a credential helper for https.",
                         "Clone", parent)
        self.tasks = tasks
        self.url = QLineEdit()
        self.url.setPlaceholderText("git@host:path.git, https://host/path.git, ssh://…, or an absolute path")
        self.agent = QLineEdit(self._free_default(agents))
        self.agent.setPlaceholderText("the agent whose store it becomes (one with no store here)")
        self.owner = QCheckBox("My own agent: give it owner authority (it reads the private partition)")
        self.owner.setToolTip("Leave off for another person's or a helper agent: it then reads only its "
                              "conversations. An agent already registered here keeps its own authority.")
        self.store_id = QLineEdit()
        self.store_id.setPlaceholderText("only when the remote holds several stores (st_…)")
        self.remote_name = QLineEdit()
        self.remote_name.setPlaceholderText("origin")
        self.add_field("Remote URL", self.url)
        self.add_field("Agent", self.agent)
        self.add_field("", self.owner)
        self.add_field("Store id", self.store_id)
        self.add_field("Remote name", self.remote_name)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # the job reports steps, not a fraction
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.step = plain_label()
        self.step.setWordWrap(True)
        self.step.hide()
        self.add_field("", self.progress)
        self.add_field("", self.step)
        self._running = False
        self.watcher = JobWatcher(tasks, self)
        self.watcher.sig_job_updated.connect(self._on_job_updated)
        self.watcher.sig_job_finished.connect(self._on_job_finished)
        self.buttons.accepted.connect(self.start)
        self.setMinimumWidth(560)

    @staticmethod
    def _free_default(agents: list[dict[str, Any]]) -> str:
        """``main`` when it has no store here yet (the owner's agent on a second machine), else nothing."""
        main = next((agent for agent in agents if agent.get("name") == DEFAULT_AGENT), None)
        return DEFAULT_AGENT if main is None or not main.get("store") else ""

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"url": self.url.text().strip(), "agent": self.agent.text().strip(),
                                  "owner": self.owner.isChecked()}
        if self.store_id.text().strip():
            params["storeId"] = self.store_id.text().strip()
        if self.remote_name.text().strip():
            params["name"] = self.remote_name.text().strip()
        return params

    @property
    def running(self) -> bool:
        """From the request to start the clone until its job ends (or the engine refuses it)."""
        return self._running

    def start(self) -> None:
        """Ask the engine to start the clone; its reason stays under the fields when it refuses."""
        if self.running:
            return
        self.problem.hide()
        self._set_running(True, "Starting the clone…")
        self.watcher.start("operator/startSyncClone", self.params(), on_error=self._on_refused)

    def _set_running(self, running: bool, step: str = "") -> None:
        self._running = running
        for field in (self.url, self.agent, self.owner, self.store_id, self.remote_name):
            field.setEnabled(not running)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(not running)
        cancel = self.buttons.button(QDialogButtonBox.StandardButton.Cancel)
        cancel.setEnabled(not running)
        cancel.setToolTip("A clone cannot be stopped midway; wait for it to finish" if running else "")
        self.progress.setVisible(running)
        self.step.setVisible(running and bool(step))
        self.step.setText(step)

    def _on_job_updated(self, job: dict[str, Any]) -> None:
        if self.running:
            self.step.setText(progress_text(job))

    def _on_job_finished(self, job: dict[str, Any]) -> None:
        if job.get("state") == "done":
            self._set_running(False)
            self.sig_cloned.emit(job.get("result") or {})
            self.accept()
            return
        error = job.get("error") or {}
        if error.get("reason") == "unreachable":  # the engine went away: what it did meanwhile is not known here
            self._set_running(False)
            self.show_problem(f"The engine could not be asked how the clone ended: {error.get('message')}. Sync "
                              "shows the store once the engine is back, if the clone made it.")
            return
        self._on_refused(error.get("message") or "the engine gave no reason")

    def _on_refused(self, message: str) -> None:
        self._set_running(False)
        said = message.rstrip(".")
        # Every refusal comes before the store is made (docs/sync.md, Clone); the engine's words say so for some.
        self.show_problem(f"Not cloned: {said}." + ("" if "nothing was created" in said else
                                                     " Nothing was created here."))

    def reject(self) -> None:
        if not self.running:  # a clone half way is not left: it finishes, then the dialog closes
            super().reject()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        if self.running:
            event.ignore()
        else:
            super().closeEvent(event)
