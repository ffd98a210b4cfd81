"""The first-turn benchmark's machinery on a few generated pages and the tiny embedding model.

These tests check what the benchmark reports and where it writes it, not how fast anything is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.bench.gate_first_turn import NO_VECTORS, SECTION, BenchmarkSkipped, Options, run, write_section
from engine.cli.commands import main
from models.fixtures import TINY_EMBEDDER

OTHERS = "# Recall gate benchmark\n\nWhat another run wrote.\n\n## The cascade against equal windows\n\nKept.\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    output = tmp_path_factory.mktemp("bench-first-turn") / "gate.md"
    output.write_text(OTHERS, encoding="utf-8")
    options = Options(model=TINY_EMBEDDER, pages=12, rounds=2, warm=2, output=output,
                      command="knowledge bench gate --first-turn (test)")
    result: dict[str, Any] = dict(run(options, say=lambda line: None))
    result["markdown"] = output.read_text(encoding="utf-8")
    return result


def test_every_setup_has_a_first_turn_and_the_later_turns_of_each_round(report: dict[str, Any]) -> None:
    assert list(report["setups"]) == ["keyword", "hybrid", NO_VECTORS]
    for figures in report["setups"].values():
        assert len(figures["first"]) == len(figures["warmMedian"]) == len(figures["ratios"]) == 2
        assert all(value > 0 for value in figures["first"] + figures["warmMedian"])
    assert report["pages"] == 12


def test_hybrid_rounds_find_the_stores_vectors_ready_after_the_store_opened(report: dict[str, Any]) -> None:
    assert report["setups"]["hybrid"]["vectors"] == ["ready", "ready"]


def test_the_first_turn_section_is_written_and_the_reports_other_sections_stay(report: dict[str, Any]) -> None:
    markdown = report["markdown"]
    assert markdown.startswith(OTHERS.rstrip("\n"))
    assert markdown.count(SECTION) == 1
    assert "knowledge bench gate --first-turn (test)" in markdown
    assert "| keyword, no store vectors |" in markdown


def test_writing_the_section_again_replaces_it_in_place(tmp_path: Path) -> None:
    path = tmp_path / "gate.md"
    path.write_text(f"# Title\n\n{SECTION}\n\nold figures\n\n## After\n\nkept\n", encoding="utf-8")
    write_section(path, f"{SECTION}\n\nnew figures\n")
    assert path.read_text(encoding="utf-8") == f"# Title\n\n{SECTION}\n\nnew figures\n\n## After\n\nkept\n"


def test_a_model_that_is_neither_a_folder_nor_installed_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkSkipped, match="--model"):
        run(Options(model="no-such-model", output=None), say=lambda line: None)


def test_the_command_line_needs_a_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "gate", "--first-turn", "--output", "-"]) == 2
    assert "--first-turn needs --model" in capsys.readouterr().err
