"""No stale state after a change: the git checkpoint landing, a new agent's token message, and more.

Every case runs through the window's real code against a real engine on a
real socket; the window learns of a change only from the engine's change
notifications.  The git checkpoint is held back (its delay is an hour) and
made explicitly, as ``knowledge_resume`` makes it, so no test waits on time.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from PySide6.QtCore import Qt

from desktop.main_window import MainWindow
from engine import runtime
from engine.state.statedir import StateDir
from tests.desktop import test_live
from tests.desktop.test_live import Served, agent_call, save_page

open_window = test_live.open_window  # the live tests' fixture


@pytest.fixture
def served_held(tmp_path: Path, demo_template: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """The demo store served with its git thread held back: commits happen only when a test asks."""
    monkeypatch.setattr(runtime, "GIT_DELAY_SECONDS", 3600.0)  # read by the git thread on each wait
    state = StateDir(tmp_path / "state")
    shutil.copytree(demo_template, state.root, symlinks=True)
    served = Served(state)
    served.start()
    yield served
    served.stop()


def git_column(window: MainWindow) -> list[str]:
    history = window.records_view.page.history
    column = next(n for n in range(history.model.columnCount())
                  if history.model.headerData(n, Qt.Orientation.Horizontal) == "Git")
    return [history.model.data(history.model.index(row, column)) or "" for row in range(history.model.rowCount())]


def written(served: Served, token: str, title: str) -> str:
    """An agent saves a page over the socket; the id of the record it wrote."""
    answer = agent_call(served.server.port, token, "tools/call", {"name": "knowledge_save_page", "arguments": {
        "requestId": f"stale-{uuid.uuid4().hex}", "type": "person", "title": title, "body": "Body text."}})
    assert answer.get("isError") is not True, answer
    return answer["structuredContent"]["id"]


def resume(served: Served, token: str) -> dict[str, Any]:
    answer = agent_call(served.server.port, token, "tools/call", {"name": "knowledge_resume", "arguments": {}})
    assert answer.get("isError") is not True, answer
    return answer["structuredContent"]


def test_an_open_history_shows_the_git_commit_once_the_checkpoint_lands(qtbot, served_held, open_window) -> None:
    window = open_window(served_held.state)
    records = window.records_view
    window.show_view(window.views.index(records))
    token = served_held.engine.registry.add_credential("main")
    with qtbot.waitSignal(window.sig_live_applied, timeout=10_000):  # the write's own reload, done with
        record_id = written(served_held, token, "Checkpointed later")
    with qtbot.waitSignal(records.page.sig_content_loaded, timeout=10_000):
        records.open_record(record_id)
    assert git_column(window) == [""]  # published, not committed yet: the git thread is held
    health = window.health_view
    with qtbot.waitSignal(health.sig_content_loaded, timeout=10_000):
        window.show_view(window.views.index(health))
    assert "Git checkpoint: pending" in health.summary.toPlainText()
    window.show_view(window.views.index(records))

    assert resume(served_held, token)["state"] == "committed"
    qtbot.waitUntil(lambda: git_column(window)[0] != "", timeout=10_000)
    assert len(git_column(window)) == 1 and records.page.record["id"] == record_id
    with qtbot.waitSignal(health.sig_content_loaded, timeout=10_000):  # hidden when the commit landed
        window.show_view(window.views.index(health))
    assert "Git checkpoint: committed" in health.summary.toPlainText()
