"""Engine work off the GUI thread, results back on it (after Anki's ``taskman``).

``EngineTasks`` owns one worker thread and the operator connection.  Views
ask for ``request(method, params, on_done)``; the request runs on the
worker, and ``on_done(result)`` (or the error handler) runs later on the
GUI thread, delivered by a queued signal.  A callback whose owner widget
was deleted meanwhile is dropped.  Reads and the few writes (membership and
settings) go the same way; a write's result is the fresh inventory, which
the views apply as their change set.

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
from typing import Any, Callable

import shiboken6
from PySide6.QtCore import QObject, QTimer, Signal, Slot

from engine.core.errors import KnowledgeError
from engine.wire.operator_client import UNREACHABLE

from .client import EngineError, OperatorClient

log = logging.getLogger(__name__)
THREAD_PREFIX = "desktop-engine"

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

    _sig_finished = Signal(object, object, object, object)  # owner, callback, on_error, (result | exception)

    def __init__(self, connect: Callable[[], OperatorClient] | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._connect = connect
        self._client: OperatorClient | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=THREAD_PREFIX)
        # The jobs asked and not started, (lane, order asked, job): the worker takes the smallest, so a
        # background job (lane 1) waits behind every other.  One executor slot is submitted per job.
        self._waiting: list[tuple[int, int, Callable[[], None]]] = []
        self._waiting_lock = threading.Lock()
        self._order = itertools.count()
        self._pending = 0
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

    def run(self, work: Callable[[], Any], on_done: Callback, *, on_error: ErrorCallback | None = None,
            owner: QObject | None = None, background: bool = False) -> None:
        """Run any slow ``work`` on the worker thread (starting the engine, say)."""
        if self._closed:
            return
        self._pending += 1
        if self._pending == 1:
            self.sig_busy_changed.emit(True)

        def job() -> None:
            try:
                outcome: Any = work()
            except BaseException as exc:  # noqa: BLE001 - handed to the GUI thread as a readable message
                if not isinstance(exc, (EngineError, KnowledgeError)):
                    log.exception("desktop task failed")
                outcome = exc
            self._sig_finished.emit(owner, on_done, on_error, outcome)

        with self._waiting_lock:
            heapq.heappush(self._waiting, (int(background), next(self._order), job))
        if background:
            QTimer.singleShot(0, self, self._hand_to_worker)  # after what the current event asks for
        else:
            self._hand_to_worker()

    def _hand_to_worker(self) -> None:
        if not self._closed:
            self._executor.submit(self._run_next)

    def _run_next(self) -> None:
        """On the worker: the first job of the first lane (one call per job handed over)."""
        with self._waiting_lock:
            job = heapq.heappop(self._waiting)[2]
        job()

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

    @Slot(object, object, object, object)
    def _on_finished(self, owner: QObject | None, on_done: Callback, on_error: ErrorCallback | None,
                     outcome: Any) -> None:
        self._pending -= 1
        if self._pending == 0:
            self.sig_busy_changed.emit(False)
        if self._closed:
            return  # the window is closing; nothing is left to update
        if owner is not None and not shiboken6.isValid(owner):
            return  # the view that asked is gone
        if isinstance(outcome, BaseException):
            message = readable(outcome)
            if isinstance(outcome, OSError) or getattr(outcome, "reason", None) == UNREACHABLE:
                message = Unreachable(message)
            if on_error is not None:
                on_error(message)
            else:
                self.sig_error_raised.emit(message)
            return
        on_done(outcome)

    @property
    def busy(self) -> bool:
        return self._pending > 0

    def shutdown(self) -> None:
        """Finish queued work, join the worker thread and close the connection."""
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._waiting.clear()
        if self._client is not None:
            self._client.close()
            self._client = None
