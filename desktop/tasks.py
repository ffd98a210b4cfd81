"""Engine work off the GUI thread, results back on it (after Anki's ``taskman``).

``EngineTasks`` owns one worker thread and the operator connection.  Views
ask for ``request(method, params, on_done)``; the request runs on the
worker, and ``on_done(result)`` (or the error handler) runs later on the
GUI thread, delivered by a queued signal.  A callback whose owner widget
was deleted meanwhile is dropped.  Reads and the few writes (membership and
settings) go the same way; a write's result is the fresh inventory, which
the views apply as their change set.

The callbacks never leave the GUI thread.  A job's callbacks, owner and work
wait in a table kept on the GUI thread, under the job's number; the worker is
handed the number and the work, leaves its outcome under the number and says
which job finished.  The GUI thread takes the entry out and calls the
callback, so whatever a callback holds (a widget, a QObject made for the
call) is released there, even when the view that asked is gone or the job is
cancelled by ``shutdown``; the worker is never the last to let go of it.

Requests run in the order asked, except those asked with ``background=True``
(the sidebar's counts): they wait until no other request is waiting, so what
the view in front asks for is answered first.  One started runs to its end;
the worker never interrupts it.  A background request is handed to the
worker once the GUI thread's current event is done, so what that same event
asks for the view in front goes ahead of it even when the worker was idle.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, NamedTuple

import shiboken6
from PySide6.QtCore import QObject, QTimer, Signal, Slot

from engine.core.errors import KnowledgeError
from engine.wire.operator_client import UNREACHABLE

from .client import EngineError, OperatorClient

log = logging.getLogger(__name__)
THREAD_PREFIX = "desktop-engine"

Work = Callable[[], Any]
Callback = Callable[[Any], None]
ErrorCallback = Callable[[str], None]


class Unreachable(str):
    """The message of a request that reached no engine (none running, or the connection broke): a view that
    could not load says so, rather than what it says when the engine answers that there is nothing."""


NO_STORE = "this agent has no store yet"  # how the engine's refusal begins when the agent has not written yet


def says_no_store(message: str) -> bool:
    """Whether a refusal only says that the agent has no store yet: it is created on the agent's first write, so
    this is a state the views say calmly where the data would be, never a problem for the message bar."""
    return message.startswith(NO_STORE)


def readable(exc: BaseException) -> str:
    """What the owner reads for a failure: the engine's message, never a traceback."""
    if isinstance(exc, (EngineError, KnowledgeError)):
        return exc.message
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    return f"Unexpected problem ({type(exc).__name__}): {exc}"


class EngineTasks(QObject):
    """One worker thread talking to the engine; results come back through signals."""

    sig_error_raised = Signal(str)
    """A request failed and its caller gave no error handler: the window shows the message."""

    sig_error_withdrawn = Signal(str)
    """A problem raised before (its message) no longer holds: the window stops showing it."""

    sig_busy_changed = Signal(bool)
    """True while requests are queued or running (the status bar shows it)."""

    _sig_finished = Signal(int)  # the number of the job whose outcome waits in _outcomes

    def __init__(self, connect: Callable[[], OperatorClient] | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._connect = connect
        self._client: OperatorClient | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=THREAD_PREFIX)
        # On the GUI thread only: the jobs asked and not answered, by number (their callbacks live here).
        self._jobs: dict[int, _Job] = {}
        # Shared with the worker, under the lock: the jobs not started, (lane, number, work), numbered in the
        # order asked, the worker taking the smallest, so a background job (lane 1) waits behind every other;
        # and the outcomes the worker left for the GUI thread to take.  One executor slot is submitted per job.
        self._lock = threading.Lock()
        self._waiting: list[tuple[int, int, Work]] = []
        self._outcomes: dict[int, Any] = {}
        self._numbers = itertools.count()
        self._closed = False
        self._sig_finished.connect(self._on_finished)

    # --- asking ---------------------------------------------------------------------------------

    def request(self, method: str, params: dict[str, Any] | None, on_done: Callback, *,
                on_error: ErrorCallback | None = None, owner: QObject | None = None,
                background: bool = False) -> None:
        """Send ``method`` to the engine on the worker; ``on_done(result)`` runs on the GUI thread.

        ``background``: a read no view in front waits for (a count in the sidebar); it runs once nothing
        else is waiting.  Never for a write: a read asked after it could then overtake it."""
        self.run(lambda: self._call(method, params or {}), on_done, on_error=on_error, owner=owner,
                 background=background)

    def run(self, work: Work, on_done: Callback, *, on_error: ErrorCallback | None = None,
            owner: QObject | None = None, background: bool = False) -> None:
        """Run any slow ``work`` on the worker thread (starting the engine, say)."""
        if self._closed:
            return
        number = next(self._numbers)
        self._jobs[number] = _Job(work, on_done, on_error, owner)
        if len(self._jobs) == 1:
            self.sig_busy_changed.emit(True)
        with self._lock:
            heapq.heappush(self._waiting, (int(background), number, work))
        if background:
            QTimer.singleShot(0, self, self._hand_to_worker)  # after what the current event asks for
        else:
            self._hand_to_worker()

    def _hand_to_worker(self) -> None:
        if not self._closed:
            self._executor.submit(self._run_next)

    def _run_next(self) -> None:
        """On the worker: the first job of the first lane (one call per job handed over).  It leaves the outcome
        for the GUI thread and keeps no reference to anything of the job once it says the job finished."""
        with self._lock:
            _lane, number, work = heapq.heappop(self._waiting)
        outcome = _outcome(work)
        del work
        with self._lock:
            self._outcomes[number] = outcome
        del outcome  # the GUI thread may take it at once and must let go last (a traceback holds this frame)
        self._sig_finished.emit(number)

    def use_client(self, client: OperatorClient) -> None:
        """Adopt a connection opened on the worker (call from a ``run`` job's result)."""
        self._client = client

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        if self._client is None:
            if self._connect is None:
                raise EngineError("unreachable", "Not connected to a Knowledge engine yet.")
            self._client = self._connect()
        return self._client.call(method, params)

    # --- answers, on the GUI thread --------------------------------------------------------------

    @Slot(int)
    def _on_finished(self, number: int) -> None:
        job = self._jobs.pop(number, None)
        with self._lock:
            outcome = self._outcomes.pop(number, None)
        if job is None:
            return  # shut down meanwhile: nothing is left to update
        if not self._jobs:
            self.sig_busy_changed.emit(False)
        if job.owner is not None and not shiboken6.isValid(job.owner):
            return  # the view that asked is gone
        if isinstance(outcome, BaseException):
            message = readable(outcome)
            if isinstance(outcome, OSError) or getattr(outcome, "reason", None) == UNREACHABLE:
                message = Unreachable(message)
            if job.on_error is not None:
                job.on_error(message)
            else:
                self.sig_error_raised.emit(message)
            return
        job.on_done(outcome)

    @property
    def busy(self) -> bool:
        return bool(self._jobs)

    def shutdown(self) -> None:
        """Finish the job running, cancel those waiting, join the worker thread and close the connection.

        The jobs not answered are let go here, on the GUI thread, uncalled."""
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            waiting, self._waiting, outcomes, self._outcomes = self._waiting, [], self._outcomes, {}
        del waiting, outcomes  # let go here, outside the lock
        if self._jobs:
            self._jobs.clear()
            self.sig_busy_changed.emit(False)
        if self._client is not None:
            self._client.close()
            self._client = None


class _Job(NamedTuple):
    """What a job's answer needs, kept on the GUI thread (the work too, so that the worker never lets go of it
    last)."""

    work: Work
    on_done: Callback
    on_error: ErrorCallback | None
    owner: QObject | None


def _outcome(work: Work) -> Any:
    """On the worker: what ``work`` returns, or the exception it raised."""
    try:
        return work()
    except BaseException as exc:  # noqa: BLE001 - handed to the GUI thread as a readable message
        if not isinstance(exc, (EngineError, KnowledgeError)):
            log.exception("desktop task failed")
        return exc
