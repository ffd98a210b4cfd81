"""Screenshots of every desktop view on the demo store, into docs/screenshots/.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/screenshots.py      # or under xvfb-run

Seeds the demo into a throwaway state directory, lets the window start the
engine as a child process (as `knowledge desktop --demo` does), walks the
views, waits for each one's data, and saves the window as PNG.  The engine
is stopped at the end.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402

from desktop import launcher  # noqa: E402
from desktop.app import application  # noqa: E402
from desktop.main_window import MainWindow  # noqa: E402
from desktop.tasks import EngineTasks  # noqa: E402
from engine.statedir import StateDir  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
TIMEOUT_MS = 60_000


def wait(signal: Any, trigger: Callable[[], Any] = lambda: None, *, settle_ms: int = 300) -> None:
    """Run the event loop until ``signal`` fires (after ``trigger``), then a little longer to paint."""
    loop = QEventLoop()
    fired: list[bool] = []

    def on_fired(*_: Any) -> None:
        fired.append(True)
        loop.quit()

    signal.connect(on_fired)
    timer = QTimer.singleShot(TIMEOUT_MS, loop.quit)  # noqa: F841 - a stuck view must not hang the script
    trigger()
    if not fired:
        loop.exec()
    if not fired:
        raise SystemExit(f"timed out waiting for {signal}")
    pause = QEventLoop()
    QTimer.singleShot(settle_ms, pause.quit)
    pause.exec()


def save(window: MainWindow, name: str) -> None:
    if os.environ.get("STOP_AT") == name:
        raise KeyboardInterrupt
    path = OUT / f"{name}.png"
    window.grab().save(str(path))
    print(f"saved {path.relative_to(ROOT)}")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    app = application()
    with tempfile.TemporaryDirectory(prefix="kd-shots-") as temp:
        state = StateDir(Path(temp) / "state")
        tasks = EngineTasks()
        window = MainWindow(tasks, state)
        window.resize(1360, 820)
        window.show()
        try:
            wait(window.agents_view.sig_inventory_changed, lambda: window.connect_engine(demo=True))
            agents = window.agents_view
            wait(agents.sig_status_reported, lambda: agents.add_agent("researcher", False))
            agents.dialog.close()
            agents.select_agent("main")
            window.messages.hide()
            save(window, "agents-and-stores")

            records = window.records_view
            wait(records.recent_model.sig_page_loaded, lambda: window.show_view(1))
            dana = next(r["id"] for r in records.recent_model.rows() if r["title"] == "Dana Whitaker")
            wait(records.page.sig_content_loaded, lambda: records.open_record(dana))
            save(window, "record-page")
            records.page.tabs.setCurrentIndex(1)
            save(window, "record-claims-and-evidence")
            records.page.tabs.setCurrentIndex(2)
            save(window, "record-connections")
            preference = next(r["id"] for r in records.recent_model.rows() if r["title"].startswith("Dana prefers"))
            wait(records.page.sig_content_loaded, lambda: records.open_record(preference))
            records.page.tabs.setCurrentIndex(3)
            wait(records.page.sig_diff_loaded, lambda: records.page.history_table.selectRow(1))
            save(window, "record-history-diff")
            records.query.setText("cut-over")
            wait(records.search_model.sig_page_loaded, records.search)
            records.page.tabs.setCurrentIndex(0)
            save(window, "records-search")
            wait(records.page.sig_change_request_copied, records.page.request_button.click, settle_ms=100)
            save(window, "change-request-copied")
            window.messages.hide()

            wait(window.vocabulary_view.sig_content_loaded, lambda: window.show_view(2))
            save(window, "vocabulary")
            wait(window.approvals_view.sig_content_loaded, lambda: window.show_view(3))
            save(window, "recall-approvals")
            window.preview_view.project_key.setText("atlas")
            wait(window.preview_view.sig_content_loaded, lambda: window.show_view(4), settle_ms=800)
            save(window, "what-the-agent-sees")
            wait(window.health_view.sig_content_loaded, lambda: window.show_view(5))
            save(window, "health")
        except KeyboardInterrupt:
            pass
        finally:
            handle = window.handle
            tasks.shutdown()
            window.close()
            if handle is not None:
                launcher.stop_engine(handle)
                os.waitpid(handle.started_pid, 0)
    app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
