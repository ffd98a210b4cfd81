"""A benchmark's report replaces its document's measured part and keeps the sections written there by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.bench.report_file import HAND_WRITTEN, write_report
from engine.cli.bench_commands import _reported

REPORT = """# Search benchmark

- Date: today

## Query latency

| engine | ms |
| --- | ---: |
| tantivy | 0.2 |
"""

OLD_REPORT = REPORT.replace("today", "last week").replace("0.2", "0.4")

BY_HAND = """## A trial by hand (2026-12-01)

Two pairs, side by side.

## What was left

- The rest.
"""


def test_a_new_document_is_the_report_alone(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks" / "search.md"

    write_report(path, REPORT)

    assert path.read_text(encoding="utf-8") == REPORT


def test_the_measured_part_is_replaced_and_the_sections_written_by_hand_kept_below_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "search.md"
    path.write_text(f"{OLD_REPORT}\n{BY_HAND}", encoding="utf-8")

    write_report(path, REPORT)

    assert path.read_text(encoding="utf-8") == f"{REPORT}\n{HAND_WRITTEN}\n\n{BY_HAND}"


def test_a_section_the_report_writes_is_not_kept_twice(tmp_path: Path) -> None:
    """"## Query latency" is the report's own: the old one goes with the rest of the measured part."""
    path = tmp_path / "search.md"
    path.write_text(f"{OLD_REPORT}\n{BY_HAND}", encoding="utf-8")

    write_report(path, REPORT)

    text = path.read_text(encoding="utf-8")
    assert text.count("## Query latency") == 1 and "0.4" not in text and "last week" not in text


def test_after_the_mark_everything_is_kept_even_a_heading_the_report_writes(tmp_path: Path) -> None:
    quoted = "## Query latency\n\nAn earlier run's table, quoted by hand.\n"
    path = tmp_path / "search.md"
    path.write_text(f"{OLD_REPORT}\n{HAND_WRITTEN}\n\n{quoted}\n{BY_HAND}", encoding="utf-8")

    write_report(path, REPORT)

    assert path.read_text(encoding="utf-8") == f"{REPORT}\n{HAND_WRITTEN}\n\n{quoted}\n{BY_HAND}"


def test_writing_the_same_report_again_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "search.md"
    path.write_text(f"{OLD_REPORT}\n{BY_HAND}", encoding="utf-8")

    write_report(path, REPORT)
    once = path.read_text(encoding="utf-8")
    write_report(path, REPORT)

    assert path.read_text(encoding="utf-8") == once


def test_the_commands_report_keeps_every_section_of_the_throughput_document(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`knowledge bench throughput` wrote its report over the whole of docs/benchmarks/throughput.md, whose
    measured part has no heading and is followed by the rounds written up by hand: each of them stays, whole."""
    document = (Path(__file__).parents[3] / "docs" / "benchmarks" / "throughput.md").read_text(encoding="utf-8")
    sections = document.split("\n## ")[1:]
    path = tmp_path / "throughput.md"
    path.write_text(document, encoding="utf-8")

    _reported("# Throughput benchmark\n\n- Date: today\n", str(path))

    written = path.read_text(encoding="utf-8")
    assert len(sections) > 10 and written.startswith("# Throughput benchmark\n\n- Date: today\n")
    assert all(f"\n## {section.rstrip()}" in written for section in sections)
    assert capsys.readouterr().out == "# Throughput benchmark\n\n- Date: today\n"
