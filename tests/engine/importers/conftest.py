"""Every importer test also holds the answers it produces to their declarations (tests/declared_answers.py)."""

from __future__ import annotations

import dataclasses

import pytest

from engine.cli.import_commands import IMPORTERS
from engine.importers.formats import FORMATS
from tests.declared_answers import hold_to_declarations


@pytest.fixture(autouse=True)
def declared_answers(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The answers of engine/importers' declared functions (engine/importers/answers.py) validated as they are
    given, the import format tables' included; what was checked, by function, for a test that wants to know."""
    seen: dict[str, int] = {}
    wrappers = hold_to_declarations(monkeypatch, seen, "engine.importers")
    for name, chosen in list(FORMATS.items()):
        monkeypatch.setitem(FORMATS, name, dataclasses.replace(chosen, run=wrappers[chosen.run]))
    for name, (load, run, what, unit) in list(IMPORTERS.items()):
        monkeypatch.setitem(IMPORTERS, name, (load, wrappers[run], what, unit))
    return seen
