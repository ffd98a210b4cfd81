"""Every answer the sync tests produce is checked against the answer its function declares."""

from __future__ import annotations

import pytest

from tests.declared_answers import hold_to_declarations
from tests.engine.sync import gitservers

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
