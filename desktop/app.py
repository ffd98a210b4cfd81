"""``knowledge desktop``: the QApplication and the window.

The application keeps Qt's platform style (Fusion, where the desktop has
no Qt theme, with indicator frames that read on a dark palette:
``desktop/style.py``); its palette follows the system's light or dark colour
scheme, or the theme chosen in View › Theme (``desktop/theme.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication

from engine.state.statedir import StateDir

from .collector import GuiThreadCollector
from .links import InstanceServer, send_to_running
from .main_window import MainWindow
from .style import install as install_style
from .tasks import EngineTasks

APP_NAME = "Knowledge Desk"


def application(argv: list[str] | None = None) -> QApplication:
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        app = QApplication(argv if argv is not None else [sys.argv[0]])
    app.setApplicationName(APP_NAME)
    app.setDesktopFileName("knowledge-desk")
    install_style(app)
    if app.findChild(GuiThreadCollector) is None:
        GuiThreadCollector(app).start()   # cycles are collected on this thread only: desktop/collector.py
    return app


def run(state: StateDir, *, demo: bool = False, startup_report: Path | None = None, url: str | None = None) -> int:
    """Open the window on ``state``'s engine (starting it, with the demo when asked) until it closes.

    When a window already runs for ``state`` it is brought forward (at ``url``, a checked record link)
    instead, and this process exits at once (``links.py``).
    """
    app = application()
    instance = InstanceServer(state)
    if send_to_running(state, url) or (not instance.listen() and send_to_running(state, url)):
        # A window runs for this state directory (or started meanwhile): it came forward instead.
        print(f"Knowledge Desk is already open for {state.root}; brought it forward"
              + (" at the record." if url else "."))
        return 0
    tasks = EngineTasks()
    window = MainWindow(tasks, state)
    instance.sig_open_requested.connect(window.open_link)
    if startup_report is not None:
        from .startup import StartupProbe  # measurement for docs/benchmarks only

        StartupProbe(window, startup_report).install()
    window.show()
    window.connect_engine(demo=demo)
    if url is not None:
        window.open_link(url)
    try:
        return app.exec()
    finally:
        instance.close()
        tasks.shutdown()
