"""Desktop fixtures: a served demo engine, the operator tasks, and the GUI-thread guard.

Qt runs on the offscreen platform.  The engine is real and in this process,
serving the real socket on its own threads; the views reach it only through
``EngineTasks`` and the operator client, exactly as in the application.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from engine.importers import methods as import_methods  # noqa: E402
from engine.importers.demo import seed_demo  # noqa: E402
from engine.core.ids import format_timestamp, utc_now  # noqa: E402
from engine.wire.server import EngineServer  # noqa: E402
from engine.service import Engine  # noqa: E402
from engine.state.statedir import StateDir  # noqa: E402

from desktop.client import OperatorClient  # noqa: E402
from desktop.tasks import THREAD_PREFIX, EngineTasks  # noqa: E402

# Work that must never happen on the GUI thread while a view is in use (Python audit events).
FORBIDDEN_ON_GUI_THREAD = ("open", "socket.connect", "socket.getaddrinfo", "sqlite3.connect", "subprocess.Popen",
                           "os.listdir", "os.scandir")


class GuiThreadGuard:
    """Records file, socket, database and process work done on the GUI (main) thread while active."""

    def __init__(self) -> None:
        self.active = False
        self.violations: list[str] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.active and event in FORBIDDEN_ON_GUI_THREAD and threading.current_thread() is threading.main_thread():
            if event == "open" and str(args[0]).endswith((".py", ".pyc")):
                return  # Python reading its own source (imports, pytest rendering a failure), not storage work
            self.violations.append(f"{event}{args[:1]!r}")


_GUARD = GuiThreadGuard()
sys.addaudithook(_GUARD)  # audit hooks cannot be removed; the guard is switched on per test


@pytest.fixture
def gui_thread_guard() -> Iterator[GuiThreadGuard]:
    """Fail the test if anything touches a file, socket, database or process on the GUI thread."""
    _GUARD.violations = []
    _GUARD.active = True
    try:
        yield _GUARD
    finally:
        _GUARD.active = False
    assert _GUARD.violations == [], f"storage or network work on the GUI thread: {_GUARD.violations[:5]}"


@pytest.fixture(autouse=True)
def desk_icons(request: pytest.FixtureRequest) -> None:
    """The window reads its icon font once it has painted, on the GUI thread; tests read it before the guard."""
    if "qtbot" in request.fixturenames or "qapp" in request.fixturenames:
        request.getfixturevalue("qapp")
        from desktop.sidebar import load_icons

        load_icons()


@pytest.fixture(autouse=True)
def collect_on_gui_thread(request: pytest.FixtureRequest) -> Iterator[None]:
    """Python's cycles collected on the GUI thread only while a test shows widgets, as in the application
    (desktop/collector.py): collected on the in-process engine's threads, a cycle holding a Qt object
    deadlocked the run.  A collection started on any other thread meanwhile fails the test."""
    if "qtbot" not in request.fixturenames and "qapp" not in request.fixturenames:
        yield
        return
    from desktop.collector import GuiThreadCollector

    elsewhere: list[str] = []

    def note(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start" and threading.current_thread() is not threading.main_thread():
            elsewhere.append(threading.current_thread().name)

    request.getfixturevalue("qapp")
    collector = GuiThreadCollector()
    collector.start()
    gc.callbacks.append(note)
    try:
        yield
    finally:
        gc.callbacks.remove(note)
        collector.stop()
        collector.deleteLater()
    assert elsewhere == [], f"Python collected cycles off the GUI thread, on {sorted(set(elsewhere))}"


@pytest.fixture(autouse=True)
def own_window_settings(tmp_path: Path) -> None:
    """The window's own settings (theme, size, search mode) in the test's directory: Qt reads where they go
    once per process, so without this every window of the run would share the first test's."""
    from PySide6.QtCore import QSettings

    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "config"))


@pytest.fixture(autouse=True)
def no_dangling_desktop_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    dangling = [t.name for t in threading.enumerate()
                if t not in before and t.is_alive() and t.name.startswith(THREAD_PREFIX)]
    assert not dangling, f"the test left desktop worker threads running (EngineTasks not shut down): {dangling}"


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo store, seeded once; each test serves its own copy (a copied state directory stays valid)."""
    state = StateDir(tmp_path_factory.mktemp("demo") / "state")
    with Engine(state, watch=False) as engine:
        seed_demo(engine)
    return state.root


@contextmanager
def serving(state_root: Path, demo_template: Path, *, register: Callable[[Any], None] = lambda _dispatcher: None
            ) -> Iterator[Engine]:
    """A copy of the demo store served on a real socket by an engine in this process, as `knowledge serve --demo`
    does; ``register`` adds methods to its dispatcher (a test's stand-in for methods not built yet)."""
    state = StateDir(state_root)
    shutil.copytree(demo_template, state.root, symlinks=True)
    engine = Engine(state, watch=False)
    server = EngineServer(engine, port=0, socket_path=state.root / "engine.sock")
    import_methods.register(server.dispatcher, engine)  # import and export, as `knowledge serve` adds them
    register(server.dispatcher)
    try:
        server.start()
        state.write_engine_info({"pid": os.getpid(), **server.info(), "started_at": format_timestamp(utc_now())})
        yield engine
    finally:
        state.remove_engine_info()
        server.stop()
        engine.close()


@pytest.fixture
def served_engine(tmp_path: Path, demo_template: Path) -> Iterator[Engine]:
    """A demo store served on a real socket by an engine in this process, as `knowledge serve --demo` does.

    Tests that need to act as an agent meanwhile (gate turns, say) use the engine directly.
    """
    with serving(tmp_path / "state", demo_template) as engine:
        yield engine


@pytest.fixture
def served(served_engine: Engine) -> StateDir:
    """The served demo store's state directory."""
    return served_engine.state


@pytest.fixture
def brussels(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The machine's zone is Brussels (UTC+1 in winter, UTC+2 in summer) for the test."""
    monkeypatch.setenv("TZ", "Europe/Brussels")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def window_settings(tmp_path: Path) -> Any:
    """The window's own settings (theme), in the test's directory rather than the account's."""
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "desktop.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def connected_window(qtbot: Any, served: StateDir, window_settings: Any) -> Iterator[Any]:
    """The window on the served demo store, shown and connected (its agents listed)."""
    from desktop.main_window import MainWindow

    made_tasks = EngineTasks()
    made = MainWindow(made_tasks, served, settings=window_settings)
    qtbot.addWidget(made)
    made.show()
    qtbot.waitExposed(made)
    with qtbot.waitSignal(made.agents_view.sig_inventory_changed, timeout=10_000):
        made.connect_engine()
    yield made
    made_tasks.shutdown()


@pytest.fixture
def tasks(served: StateDir) -> Iterator[EngineTasks]:
    """The operator's worker, connected to the served engine on first use."""
    made = EngineTasks(connect=lambda: OperatorClient(served))
    yield made
    made.shutdown()


def wait_for_signal(qtbot: Any, signal: Any, trigger: Any, timeout: int = 10_000) -> Any:
    """Open the wait before the trigger, as STYLE rule 18 asks; returns the blocker (its .args)."""
    with qtbot.waitSignal(signal, timeout=timeout) as blocker:
        trigger()
    return blocker


def records_view_on_main(qtbot: Any, tasks: EngineTasks, width: int, height: int) -> Any:
    """A Records view shown at ``width`` x ``height``, its Recent list read for the agent ``main``."""
    from desktop.records.view import RecordsView

    view = RecordsView(tasks)
    qtbot.addWidget(view)
    view.resize(width, height)
    view.show()
    with qtbot.waitSignal(view.recent_model.sig_page_loaded, timeout=10_000):
        view.set_agent("main")
    return view


def sync_view_on_main(qtbot: Any, tasks: EngineTasks, engine: Engine) -> Any:
    """A Sync view given ``engine``'s agents and stores, its status read for the agent ``main``."""
    from desktop.sync.view import SyncView

    view = SyncView(tasks)
    qtbot.addWidget(view)
    view.set_inventory({"agents": engine.agents(), "stores": engine.stores()})
    wait_for_signal(qtbot, view.sig_content_loaded, lambda: view.set_agent("main"))
    return view


def window_in_a_fresh_process(state_root: Path, then: str, platform: str = "offscreen") -> list[str]:
    """Run ``then`` (Python source) in a new interpreter after a window on ``state_root`` was made and shown
    (``app``, ``window`` and ``sys`` in scope), on the Qt ``platform``; the words it printed."""
    import subprocess

    script = ("import sys\n"
              "from PySide6.QtWidgets import QApplication\n"
              "app = QApplication([])\n"
              "from desktop.main_window import MainWindow\n"
              "from desktop.tasks import EngineTasks\n"
              "from engine.state.statedir import StateDir\n"
              f"tasks = EngineTasks()\nwindow = MainWindow(tasks, StateDir({str(state_root)!r}))\n"
              "window.show()\napp.processEvents()\n"
              f"{then}\ntasks.shutdown()\n")
    env = {**os.environ, "QT_QPA_PLATFORM": platform, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()
