"""Every importer test also holds the answers it produces to their declarations (declared.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.importers.declared import hold_to_declarations


@pytest.fixture(autouse=True)
def declared_answers(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The answers of engine/importers' declared functions validated as they are given; what was checked, by
    function, for a test that wants to know."""
    seen: dict[str, int] = {}
    hold_to_declarations(monkeypatch, seen)
    return seen
