"""Python's cycle collector, run on the GUI thread only.

Python collects reference cycles on whichever thread happens to allocate when
a generation fills: in the window, often the engine worker.  Collecting a
cycle that holds a Qt object there deadlocks the window.  The worker takes a
Qt lock to disconnect the object's signals and then waits for Python's lock,
held by the GUI thread, which waits in Qt for that same lock (seen in the
Recall gate view, where Undo the apply froze the window).

So while the window runs the automatic collector is off, and a timer on the
GUI thread collects the generations that are due, by the interpreter's own
thresholds (as pyqtgraph's ``GarbageCollector`` does).  Work on other threads
then never runs a collection.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS = 500


class GuiThreadCollector(QObject):
    """Collects Python's garbage cycles on the thread it lives on (the GUI thread), every ``INTERVAL_MS``."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thresholds = gc.get_threshold()
        self._timer = QTimer(self)
        self._timer.setInterval(INTERVAL_MS)
        self._timer.timeout.connect(self.collect_due)
        self._was_enabled = False

    def start(self) -> None:
        """Turn the automatic collector off; the timer collects from now on."""
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer.start()

    def stop(self) -> None:
        """Collect everything waiting, here, and hand collection back to the interpreter as it was."""
        self._timer.stop()
        gc.collect()
        if self._was_enabled:
            gc.enable()

    def collect_due(self) -> None:
        """Collect each generation whose count passed its threshold, youngest first, as the interpreter would."""
        young, middle, old = gc.get_count()
        if young <= self._thresholds[0]:
            return
        gc.collect(0)
        if middle > self._thresholds[1]:
            gc.collect(1)
            if old > self._thresholds[2]:
                gc.collect(2)
