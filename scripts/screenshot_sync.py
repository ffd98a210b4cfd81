"""A screenshot of the window's Sync section, into docs/screenshots/sync.png.

    xvfb-run -a -s "-screen 0 1600x1000x24" sh -c 'openbox & sleep 1;
        QT_QPA_PLATFORM=xcb .venv/bin/python scripts/screenshot_sync.py'     # or QT_QPA_PLATFORM=offscreen

The demo store is served in this process with two remotes in ``remotes.json`` (the engine's own
``RemoteBook``). The round's methods (``operator/syncStatus``, ``syncNow``, ``dismissSyncConflict``) are
not built yet (issue 28, helpers "round" and "autosync"), so the states shown (one remote synced three
minutes ago, one failing) and the conflict, a real demo record revised on two machines with its real
diff, are answered by the tests' stand-in, ``tests/desktop/fake_sync.py``. Once rounds exist, this script
should run real ones between two state directories and a bare repository instead.
"""

from __future__ import annotations

import difflib
import os
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from desktop.app import application  # noqa: E402
from desktop.main_window import MainWindow  # noqa: E402
from desktop.tasks import EngineTasks  # noqa: E402
from engine.core.ids import format_timestamp, utc_now  # noqa: E402
from engine.importers.demo import seed_demo  # noqa: E402
from engine.service import Engine  # noqa: E402
from engine.state.statedir import StateDir  # noqa: E402
from engine.sync.remotes import RemoteBook  # noqa: E402
from engine.wire.server import EngineServer  # noqa: E402
from scripts.screenshots import save, wait  # noqa: E402
from tests.desktop.fake_sync import FakeSync  # noqa: E402


def seed_sync(engine: Engine, fake: FakeSync) -> None:
    """Two remotes of main's store, as a round would have left them, and one record revised on both machines."""
    book = RemoteBook(engine.state, engine.resolver)
    store = book.add("nas", "git@nas.local:srv/knowledge.git", agent="main")["storeId"]
    book.add("github", "https://github.com/dana-w/knowledge.git", agent="main")
    now = utc_now()
    at = {minutes: format_timestamp(now - timedelta(minutes=minutes)) for minutes in (3, 4, 40, 60 * 20)}
    fake.set_remote(store, "nas", state="ok", lastAttempt=at[3], lastSuccess=at[3], ahead=0, behind=0,
                    machines=["m-desktop-7f3a"])
    fake.set_remote(store, "github", state="failing", lastAttempt=at[3], lastSuccess=at[60 * 20], ahead=4,
                    behind=None, machines=["m-desktop-7f3a"],
                    lastError={"code": "unreachable", "at": at[40],
                               "message": "ssh: Could not resolve hostname github.com: Temporary failure in name "
                                          "resolution"})
    vault = engine.resolver.registry.store(store).path
    page = next(vault.rglob("atlas-migration.md"))
    ours = page.read_text(encoding="utf-8")
    record_id = next(line.split(":", 1)[1].strip() for line in ours.splitlines() if line.startswith("id:"))
    path = page.relative_to(next(p for p in page.parents if p.name == "private")).as_posix()
    theirs = ours.replace("revision: 1", "revision: 2") + "\nThe cut-over slipped to the last week of January.\n"
    standing = ours.replace("revision: 1", "revision: 2") + ("\nDana moved the cut-over to 20 January; Ravi "
                                                             "owns the rollback plan.\n")
    diff = "".join(difflib.unified_diff(theirs.splitlines(True), standing.splitlines(True), f"theirs/{path}",
                                        f"ours/{path}"))
    fake.add_conflict(store, {
        "id": "sc_01", "recordId": record_id, "partition": "private", "kind": "revised_on_both", "remote": "nas",
        "at": at[4], "diff": diff,
        "standing": {"path": path, "revision": 2, "sha256": "9" * 64, "updatedAt": at[40]},
        "other": {"path": path, "revision": 2, "sha256": "3" * 64, "updatedAt": at[60 * 20]}})


def main() -> int:
    app = application()
    with tempfile.TemporaryDirectory(prefix="kd-sync-shot-") as temp:
        state = StateDir(Path(temp) / "state")
        with Engine(state, watch=False) as engine:
            seed_demo(engine)
        fake = FakeSync()
        engine = Engine(state, watch=False)
        server = EngineServer(engine, port=0, socket_path=state.root / "engine.sock")
        fake.serve(server.dispatcher)
        server.start()
        state.write_engine_info({"pid": os.getpid(), **server.info(), "started_at": format_timestamp(utc_now())})
        tasks = EngineTasks()
        window = MainWindow(tasks, state)
        try:
            seed_sync(engine, fake)
            window.resize(1360, 820)
            window.show()
            wait(window.agents_view.sig_inventory_changed, window.connect_engine)
            sync = window.sync_view
            wait(sync.sig_content_loaded, lambda: window.show_view(window.views.index(sync)), settle_ms=600)
            sync.conflicts_table.selectRow(0)
            window.messages.hide()
            save(window, "sync")
        finally:
            tasks.shutdown()
            window.close()
            state.remove_engine_info()
            server.stop()
            engine.close()
    app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
