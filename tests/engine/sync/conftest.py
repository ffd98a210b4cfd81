"""Every answer the sync tests produce is checked against the answer its function declares."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.declared_answers import hold_to_declarations
from tests.engine.sync import gitservers
from tests.engine.sync.round_machines import Machine, MachineFactory, bare_repository

# Real git remotes (tests/engine/sync/gitservers.py): on disk, behind git daemon, behind git http-backend.
bare_remote = gitservers.bare_remote
daemon_remote = gitservers.daemon_remote
http_remote = gitservers.http_remote
any_remote = gitservers.any_remote


@pytest.fixture(autouse=True)
def declared_answers(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The answers of engine/sync's declared functions and methods validated as they are given."""
    seen: dict[str, int] = {}
    hold_to_declarations(monkeypatch, seen, "engine.sync")
    return seen


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[MachineFactory]:
    """Machines (round_machines.Machine) made by name under the test's folder, closed at its end."""
    made: list[Machine] = []

    def make(name: str) -> Machine:
        made.append(Machine(tmp_path, name))
        return made[-1]

    yield make
    for machine in made:
        machine.close()


@pytest.fixture
def remote(tmp_path: Path) -> str:
    """A bare repository on disk the machines sync through."""
    return bare_repository(tmp_path / "remote.git")
