"""Cold-start measurement for docs/benchmarks/desktop.md (``knowledge desktop --startup-report FILE``).

Records when the window first painted and when the first engine data was
shown, waits for the window to sit idle, reads the resident memory of the
window's process and of the engine, writes them as JSON and quits.  Not
used in normal runs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication

IDLE_MS = 3000


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
        return False

    def _on_inventory(self, _inventory: dict[str, Any]) -> None:
        if "inventoryAt" not in self.stamps:
            self.stamps["inventoryAt"] = time.time()
            self.window.show_view(1)  # Records: the first page of the agent's recent records

    def _on_data_shown(self, _count: int) -> None:
        if "recordsAt" not in self.stamps:
            self.stamps["recordsAt"] = time.time()
            QTimer.singleShot(IDLE_MS, self._finish)

    def _finish(self) -> None:
        handle = self.window.handle
        self.stamps.update(windowRssKiB=resident_kib(), idleMs=IDLE_MS,
                           engineRssKiB=resident_kib(handle.info["pid"]) if handle else None,
                           engineStartedByWindow=bool(handle and handle.started_pid))
        self.report.write_text(json.dumps(self.stamps, indent=2), encoding="utf-8")
        QApplication.quit()
