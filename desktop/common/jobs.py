"""Following an engine job (a download, a benchmark, a replay) from the GUI thread.

The engine runs long work as a job on a thread of its own
(engine/core/jobs.py).  ``JobWatcher`` starts one, or picks up one that
is already running, then asks ``operator/job`` every few hundred
milliseconds through ``EngineTasks`` (so the GUI thread only ever sets a
timer) and reports each answer; ``cancel`` asks the engine to stop it.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from ..tasks import EngineTasks

POLL_MS = 250
FINISHED = ("done", "failed", "cancelled")


def progress_text(job: dict[str, Any]) -> str:
    """One line for the owner: what the job is doing, or how it ended."""
    state = job.get("state")
    progress = job.get("progress") or {}
    if state == "done":
        return "Finished."
    if state == "failed":
        return f"Failed: {(job.get('error') or {}).get('message') or 'the engine gave no reason'}"
    if state == "cancelled":
        return "Cancelled."
    if state == "cancelling":
        return "Cancelling… (it stops at its next step)"
    message = progress.get("message") or "Starting…"
    done, total, unit = progress.get("done") or 0, progress.get("total"), progress.get("unit")
    if unit == "bytes" and total:
        return f"{message} — {done / 1e6:,.1f} of {total / 1e6:,.1f} MB"
    return message


def progress_fraction(job: dict[str, Any]) -> float | None:
    """0..1, or None when the total is unknown (an indeterminate bar)."""
    progress = job.get("progress") or {}
    total = progress.get("total")
    if not total:
        return None
    return max(0.0, min(1.0, (progress.get("done") or 0) / total))


class JobWatcher(QObject):
    """One job at a time: start or adopt it, poll it, cancel it."""

    sig_job_updated = Signal(object)
    """The job's latest state and progress (a dict), after every poll."""

    sig_job_finished = Signal(object)
    """The job ended (done, failed or cancelled); the argument is its final dict."""

    def __init__(self, tasks: EngineTasks, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.job: dict[str, Any] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)

    @property
    def running(self) -> bool:
        return self.job is not None and self.job.get("state") not in FINISHED

    def start(self, method: str, params: dict[str, Any], *, on_error: Any = None) -> None:
        """Ask the engine to start a job with ``method``; its answer is the job to follow."""
        self.tasks.request(method, params, self.follow, on_error=on_error, owner=self)

    def follow(self, job: dict[str, Any]) -> None:
        """Follow ``job`` (a job dict from the engine) until it ends."""
        self._timer.stop()
        self.job = None
        self._on_job(job)

    def cancel(self) -> None:
        if self.running and self.job is not None:
            self.tasks.request("operator/cancelJob", {"job": self.job["id"]}, self._on_job, owner=self)

    def stop(self) -> None:
        """Stop polling (the job itself goes on in the engine)."""
        self._timer.stop()
        self.job = None

    def _poll(self) -> None:
        if self.job is not None:
            self.tasks.request("operator/job", {"job": self.job["id"]}, self._on_job,
                               on_error=self._on_poll_failed, owner=self)

    def _on_job(self, job: dict[str, Any]) -> None:
        if self.job is not None and job.get("id") != self.job.get("id") and self.running:
            return  # an answer about a job we no longer follow
        self.job = job
        self.sig_job_updated.emit(job)
        if job.get("state") in FINISHED:
            self._timer.stop()
            self.sig_job_finished.emit(job)
        elif not self._timer.isActive():
            self._timer.start()

    def _on_poll_failed(self, message: str) -> None:
        failed = {**(self.job or {}), "state": "failed", "error": {"reason": "unreachable", "message": message}}
        self._on_job(failed)
