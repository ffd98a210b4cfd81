"""Every benchmark test also holds the reports it produces to their declarations (tests/declared_answers.py)."""

from __future__ import annotations

import pytest

from tests.declared_answers import hold_to_declarations


@pytest.fixture(autouse=True)
def declared_answers(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The answers of engine/bench's declared functions validated as they are given; what was checked, by function."""
    seen: dict[str, int] = {}
    hold_to_declarations(monkeypatch, seen, "engine.bench")
    return seen
