"""Cold-start measurement for docs/benchmarks/desktop.md (``knowledge desktop --startup-report FILE``).

Records when the window first painted (and the CPU time the process had used by then) and when the first
engine data was shown, opens the first records listed one after the other timing each page's load (from asking for it to
the page shown: the record, its links and its history), waits for the window to sit idle, reads the resident memory of the
window's process and of the engine, writes them as JSON and quits.  Not
used in normal runs.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication

IDLE_MS = 3000
RECORD_PAGES = 10  # the first records listed, opened one after the other: a record page's load, timed


def resident_kib(pid: int | str = "self") -> int | None:
    """VmRSS of a process in KiB (Linux), or None where /proc does not tell."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class StartupProbe(QObject):
    def __init__(self, window: Any, report: Path) -> None:
        super().__init__(window)
        self.window = window
        self.report = report
        self.stamps: dict[str, Any] = {}

    def install(self) -> None:
        self.window.installEventFilter(self)
        self.window.records_view.recent_model.sig_page_loaded.connect(self._on_data_shown)
        self.window.agents_view.sig_inventory_changed.connect(self._on_inventory)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.Type.Paint and "paintedAt" not in self.stamps:
            self.stamps["paintedAt"] = time.time()
            times = os.times()  # the process's own time to its first paint, whatever else the machine runs
            self.stamps["paintedCpuS"] = times.user + times.system
        return False

    def _on_inventory(self, _inventory: dict[str, Any]) -> None:
        if "inventoryAt" not in self.stamps:
            self.stamps["inventoryAt"] = time.time()
            self.window.show_view(1)  # Records: the first page of the agent's recent records

    def _on_data_shown(self, _count: int) -> None:
        if "recordsAt" not in self.stamps:
            self.stamps["recordsAt"] = time.time()
            rows = self.window.records_view.recent_model.rows()
            self._to_open = [row["id"] for row in rows[:RECORD_PAGES]]
            self.stamps["recordPageMs"] = []
            self.window.records_view.page.sig_content_loaded.connect(self._on_page_shown)
            QTimer.singleShot(0, self._open_next)

    def _open_next(self) -> None:
        """Open the next of the first records listed, timed from the click to its page shown."""
        if not self._to_open:
            QTimer.singleShot(IDLE_MS, self._finish)
            return
        self._opened = (self._to_open.pop(0), time.perf_counter())
        self.window.records_view.open_record(self._opened[0])

    def _on_page_shown(self, record_id: str) -> None:
        opened = getattr(self, "_opened", None)
        if opened is not None and opened[0] == record_id:
            self.stamps["recordPageMs"].append(1000 * (time.perf_counter() - opened[1]))
            self._opened = None
            QTimer.singleShot(0, self._open_next)

    def _finish(self) -> None:
        handle = self.window.handle
        self.stamps.update(windowRssKiB=resident_kib(), idleMs=IDLE_MS,
                           engineRssKiB=resident_kib(handle.info["pid"]) if handle else None,
                           engineStartedByWindow=bool(handle and handle.started_pid))
        self.report.write_text(json.dumps(self.stamps, indent=2), encoding="utf-8")
        QApplication.quit()
