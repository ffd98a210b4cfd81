"""The importers' declared answers: the check every importer test runs (conftest.py) holds, and can fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.importers import demo, methods
from engine.importers.answers import AnyImport, ImportJob, Mem0Import
from engine.importers.archive import export_archive, restore_archive
from engine.importers.formats import FORMATS, run_import as run_import_here
from engine.importers.locomo import import_locomo
from engine.service import Engine
from tests.declared_answers import check_answer, declared_functions
from tests.engine.importers.helpers import run_import

MEM0 = {"results": [{"id": "m-1", "memory": "Prefers tea over coffee", "user_id": "dana"}]}


def test_every_import_format_and_method_declares_its_answer() -> None:
    declared = {function.__qualname__: shape for function, shape in declared_functions("engine.importers").items()}
    answering = [chosen.run for chosen in FORMATS.values()] + [
        run_import_here, export_archive, restore_archive, methods.export, methods.start_export,
        methods.start_import, demo.seed_demo, import_locomo]
    for function in answering:
        assert function.__qualname__ in declared, function.__qualname__
    assert declared["run_import"] == AnyImport


def test_an_import_answer_is_checked_as_it_is_given(engine: Engine, tmp_path: Path,
                                                    declared_answers: dict[str, int]) -> None:
    path = tmp_path / "memories.json"
    path.write_text(json.dumps(MEM0), encoding="utf-8")

    result = run_import(engine, "mem0", path)
    dry = run_import(engine, "mem0", path, dry_run=True)

    assert declared_answers.get("import_mem0") == 2
    check_answer(Mem0Import, result)
    check_answer(AnyImport, dry)
    assert "wouldCreate" in dry and "imported" not in dry
    assert result["reused"].keys() == result["imported"].keys()  # a real run: what an earlier run made, beside
    assert dry["reused"] == result["imported"] and not any(dry["wouldCreate"].values())  # a dry run: the same


def test_a_key_the_declaration_does_not_name_fails(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "memories.json"
    path.write_text(json.dumps(MEM0), encoding="utf-8")
    result = run_import(engine, "mem0", path)

    with pytest.raises(AssertionError, match="surprise"):
        check_answer(Mem0Import, {**result, "surprise": 1})
    with pytest.raises(AssertionError, match="claims"):
        check_answer(Mem0Import, {**result, "claims": 2})  # memory-core counts claims; mem0 lists them
    with pytest.raises(AssertionError):
        check_answer(AnyImport, {key: value for key, value in result.items() if key != "format"})


def test_a_job_answer_is_held_to_its_result_shape() -> None:
    job = {"id": "job-1", "kind": "import", "key": "import:mem0", "title": "Import", "state": "done",
           "progress": {"done": 1, "total": 1, "unit": "memories", "message": "m-1", "phase": "writing",
                        "cancellable": False},
           "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z",
           "result": {"format": "mem0", "dryRun": True}}
    with pytest.raises(AssertionError):
        check_answer(ImportJob, job)  # a mem0 result without what mem0 counts is no import's result
    failed = {**job, "state": "failed", "error": {"reason": "invalid_params", "message": "bad", "place": "[3]"}}
    del failed["result"]
    check_answer(ImportJob, failed)  # an error keeps its details
