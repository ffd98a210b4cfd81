"""Long operator work as jobs the desktop polls: model downloads, benchmarks, gate replays.

A request on the socket should answer in moments, and the desktop has one
worker for all its requests.  So work that takes seconds or minutes starts
a *job*: it runs on its own thread in the engine process (never on a
store's lane, never in the window), reports progress, and stops at its next
check when cancelled.  The window polls ``operator/job`` a few times a
second and may ask ``operator/cancelJob`` at any time.

    method              params          result
    operator/job        job             the job
    operator/jobs       kind?           every running job and the most recent finished ones, newest first
    operator/cancelJob  job             the job (``cancelling`` until the work reaches its next check)

A job's progress says its ``phase`` (a word the job chooses: an import's are
``reading``, ``checking``, ``writing``, ``linking`` and ``indexing``; empty for
a job with one phase) and whether it is ``cancellable`` now: a last phase that
cannot stop midway (an import's indexing) says so, and ``operator/cancelJob``
then leaves the job running, as the window's Cancel button, disabled, does.

A job is ``running``, ``cancelling``, then ``done`` (with its ``result``),
``failed`` (with ``error``: reason and message) or ``cancelled``.  Starting
work whose key is already running (the same model's download, say) returns
the running job instead of a second one.  Jobs live as long as the engine;
``Engine.close`` cancels and joins them.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from models.errors import ModelCancelled, ModelError

from .answers import JsonValue, NotRequired, TypedDict
from .errors import ErrorAnswer, InvalidParams, KnowledgeError, NotFound
from .ids import format_timestamp, new_id, utc_now
from .methods import Method
from .methods import handlers as method_handlers
from .params import Params, String, Value

log = logging.getLogger(__name__)

RUNNING, CANCELLING, DONE, FAILED, CANCELLED = "running", "cancelling", "done", "failed", "cancelled"
FINISHED = (DONE, FAILED, CANCELLED)
KEEP_FINISHED = 20
JOIN_TIMEOUT_S = 10.0
THREAD_PREFIX = "operator-job"


class JobProgress(TypedDict):
    done: float
    total: float | None
    unit: str
    message: str
    phase: str  # which step of its work the job is in ("" for a job with one step)
    cancellable: bool  # whether operator/cancelJob stops it now (False in a last phase that cannot stop)


class JobFields(TypedDict):
    """What every job's answer holds but its ``result``, which each kind of job may type as its own:
    ``error`` once failed."""

    id: str
    kind: str
    key: str
    title: str
    state: str
    progress: JobProgress
    startedAt: str
    finishedAt: NotRequired[str]
    error: NotRequired[ErrorAnswer]


class JobAnswer(JobFields):
    """A job as ``operator/job`` answers it: ``result`` once done (what the work returned)."""

    result: NotRequired[JsonValue]


class JobList(TypedDict):
    jobs: list[JobAnswer]


class JobCancelled(Exception):
    """Raised inside a job's work at its next check after cancellation (never reaches the wire)."""


@dataclass
class Job:
    id: str
    kind: str
    key: str
    title: str
    state: str = RUNNING
    done: float = 0
    total: float | None = None
    unit: str = ""
    message: str = ""
    phase: str = ""
    cancellable: bool = True
    result: Any = None
    error: ErrorAnswer | None = None
    started_at: str = field(default_factory=lambda: format_timestamp(utc_now()))
    finished_at: str | None = None
    cancel_requested: threading.Event = field(default_factory=threading.Event)

    def to_dict(self) -> JobAnswer:
        data: JobAnswer = {
            "id": self.id, "kind": self.kind, "key": self.key, "title": self.title, "state": self.state,
            "progress": {"done": self.done, "total": self.total, "unit": self.unit, "message": self.message,
                         "phase": self.phase, "cancellable": self.cancellable},
            "startedAt": self.started_at}
        if self.finished_at is not None:
            data["finishedAt"] = self.finished_at
        if self.state == DONE:
            data["result"] = self.result
        if self.error is not None:
            data["error"] = self.error
        return data


class JobContext:
    """What a job's work sees: progress reports and the cancellation check."""

    def __init__(self, jobs: "Jobs", job: Job) -> None:
        self._jobs, self._job = jobs, job

    @property
    def cancelled(self) -> bool:
        return self._job.cancel_requested.is_set()

    @property
    def current_phase(self) -> str:
        return self._job.phase

    def check(self) -> None:
        """Raise ``JobCancelled`` when the owner cancelled the job."""
        if self.cancelled:
            raise JobCancelled()

    def progress(self, done: float | None = None, total: float | None = None, *, unit: str | None = None,
                 message: str | None = None) -> None:
        """Report progress (any argument left out keeps its value), then check for cancellation."""
        self.report(done, total, unit=unit, message=message)
        self.check()

    def phase(self, phase: str, *, done: float = 0, total: float | None = None, unit: str | None = None,
              message: str = "", cancellable: bool = True) -> None:
        """Begin the next phase: its count starts at ``done`` of ``total`` (None: not known); a phase that is
        not ``cancellable`` runs to its end, and a cancellation asked for during it is refused."""
        with self._jobs.lock:
            job = self._job
            job.phase, job.done, job.total, job.message, job.cancellable = phase, done, total, message, cancellable
            if unit is not None:
                job.unit = unit

    def report(self, done: float | None = None, total: float | None = None, *, unit: str | None = None,
               message: str | None = None) -> None:
        """Report progress without the cancellation check (for work that stops in its own way)."""
        with self._jobs.lock:
            job = self._job
            if done is not None:
                job.done = done
            if total is not None:
                job.total = total
            if unit is not None:
                job.unit = unit
            if message is not None:
                job.message = message


Work = Callable[[JobContext], Any]


class Jobs:
    """Every job of this engine; one thread per running job."""

    def __init__(self, on_changed: Callable[[Job], None] | None = None) -> None:
        self.lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._closed = False
        # Called (outside the lock) when a job starts or finishes; progress in between is polled.
        self._on_changed = on_changed or (lambda job: None)

    def start(self, kind: str, key: str, title: str, work: Work, *, unit: str = "",
              total: float | None = None) -> JobAnswer:
        """Run ``work(context)`` on a thread of its own; returns the job (the running one for ``key``)."""
        with self.lock:
            if self._closed:
                raise InvalidParams("the engine is shutting down; nothing new can start")
            running = next((job for job in self._jobs.values() if job.key == key and job.state not in FINISHED),
                           None)
            if running is not None:
                return running.to_dict()
            job = Job(new_id("job"), kind, key, title, unit=unit, total=total)
            self._jobs[job.id] = job
            self._prune()
            thread = threading.Thread(target=self._run, args=(job, work), name=f"{THREAD_PREFIX}-{kind}",
                                      daemon=True)
            self._threads[job.id] = thread
            snapshot = job.to_dict()
        thread.start()
        self._on_changed(job)
        return snapshot

    def get(self, job_id: Any) -> JobAnswer:
        with self.lock:
            return self._find(job_id).to_dict()

    def list(self, kind: str | None = None) -> list[JobAnswer]:
        with self.lock:
            jobs = [job for job in self._jobs.values() if kind is None or job.kind == kind]
            return [job.to_dict() for job in reversed(jobs)]

    def wait(self, job_id: str, timeout: float | None = None) -> JobAnswer:
        """Block until the job has finished (or ``timeout``); for scripts and tests, never a request."""
        with self.lock:
            self._find(job_id)
            thread = self._threads.get(job_id)
        if thread is not None:
            thread.join(timeout)
        return self.get(job_id)

    def cancel(self, job_id: Any) -> JobAnswer:
        with self.lock:
            job = self._find(job_id)
            if job.state == RUNNING and job.cancellable:
                job.state = CANCELLING
                job.cancel_requested.set()
            return job.to_dict()

    def close(self) -> None:
        """Cancel every running job and wait for it (briefly: a stalled download may be left to die)."""
        with self.lock:
            self._closed = True
            threads = list(self._threads.values())
            for job in self._jobs.values():
                if job.state == RUNNING:
                    job.state = CANCELLING
                    job.cancel_requested.set()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # --- internals ------------------------------------------------------------------------------

    def _find(self, job_id: Any) -> Job:
        if not isinstance(job_id, str) or not job_id:
            raise InvalidParams("job must be a job id", field="job")
        job = self._jobs.get(job_id)
        if job is None:
            raise NotFound("no job with that id (finished jobs are kept only for a while)", job=job_id)
        return job

    def _run(self, job: Job, work: Work) -> None:
        state, result, error = DONE, None, None
        try:
            result = work(JobContext(self, job))
        except (JobCancelled, ModelCancelled):
            state = CANCELLED
        except KnowledgeError as exc:  # with its details: the field, or the file and place of bad input
            state, error = FAILED, exc.to_dict()
        except ModelError as exc:
            state, error = FAILED, {"reason": exc.reason, "message": exc.message}
        except Exception as exc:  # noqa: BLE001 - a job's failure is reported, never raised into the engine
            log.exception("operator job %s (%s) failed", job.id, job.kind)
            state, error = FAILED, {"reason": "internal", "message": f"Unexpected problem ({type(exc).__name__})"}
        with self.lock:
            job.state, job.result, job.error = state, result, error
            job.finished_at = format_timestamp(utc_now())
            self._threads.pop(job.id, None)
        self._on_changed(job)

    def _prune(self) -> None:
        finished = [job_id for job_id, job in self._jobs.items() if job.state in FINISHED]
        for job_id in finished[:max(0, len(finished) - KEEP_FINISHED)]:
            del self._jobs[job_id]


JOB_PARAMS = Params(Value("job"))   # jobs.get and jobs.cancel say when it names no job
JOBS_PARAMS = Params(String("kind", what="a job kind"))


def methods(jobs: Jobs) -> tuple[Method, ...]:
    """``operator/job``, ``operator/jobs`` and ``operator/cancelJob`` (engine/core/methods.py)."""
    def job(params: dict[str, Any]) -> JobAnswer:
        return jobs.get(JOB_PARAMS.read(params)["job"])

    def listed(params: dict[str, Any]) -> JobList:
        return {"jobs": jobs.list(JOBS_PARAMS.read(params)["kind"])}

    def cancel(params: dict[str, Any]) -> JobAnswer:
        return jobs.cancel(JOB_PARAMS.read(params)["job"])

    return (Method("job", JOB_PARAMS, JobAnswer, job), Method("jobs", JOBS_PARAMS, JobList, listed),
            Method("cancelJob", JOB_PARAMS, JobAnswer, cancel))


def handlers(jobs: Jobs) -> dict[str, Callable[[dict[str, Any]], Any]]:
    return method_handlers(methods(jobs))
