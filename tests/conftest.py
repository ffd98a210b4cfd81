"""Shared fixtures: an isolated environment, a state directory and an engine."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterator

import pytest

from engine.access.authority import AgentCaller
from engine.service import Engine
from engine.state.statedir import StateDir


ENGINE_THREADS = ("lane-", "git-", "vectors-")


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees the developer's state directory, HOME or fault settings, or leaves engine threads behind."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    for name in ("KNOWLEDGE_STATE_DIR", "KNOWLEDGE_FAULT", "KNOWLEDGE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    before = set(threading.enumerate())
    yield
    dangling = [t.name for t in threading.enumerate()
                if t not in before and t.is_alive() and t.name.startswith(ENGINE_THREADS)]
    assert not dangling, f"the test left engine threads running (an Engine was not closed): {dangling}"


@pytest.fixture
def state_dir(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "state")


@pytest.fixture
def engine(state_dir: StateDir) -> Iterator[Engine]:
    """An engine without a filesystem watcher: every operation rescans, so tests are deterministic."""
    with Engine(state_dir, watch=False) as opened:
        yield opened


@pytest.fixture
def owner(engine: Engine) -> AgentCaller:
    """The owner's main agent, speaking in its owner-private audience."""
    return AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
