"""The sync benchmark runs real machines through a bare repository and git daemon, at tiny sizes, and writes its
report; no figure is asserted, only that each was measured and the records were checked to arrive."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.bench import sync as sync_bench
from engine.cli.commands import main
from engine.index.analysis import Analyzer


def test_a_tiny_run_measures_every_target_and_writes_the_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], declared_answers: dict[str, int]) -> None:
    out = tmp_path / "sync.md"
    assert main(["--state-dir", str(tmp_path / "state"), "bench", "sync", "--records", "3", "--clone-records", "5",
                 "--repeats", "1", "--seconds", "0.3", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text == capsys.readouterr().out
    assert "`knowledge bench sync --records 3 --clone-records 5 --repeats 1 --seconds 0.3`" in text
    assert "B's search found every one of the 3 records of each batch" in text
    for row in ("| 3 new records on A reach B's search", "| one new record: each round ≤ 1 s",
                "| (the same over `git daemon` on loopback)", "| `sync clone` of 5 records until a search answers",
                "| a round with nothing new ≤ 0.3 s", "| `knowledge_grep` p50 beside 4 writers"):
        assert text.count(row) == (2 if "nothing new" in row else 1), row
    assert "| phase | A, 3 new | B, 3 new | A, origin, one new | B, origin, one new | A, daemon, one new |" in text
    for phase in sync_bench.PHASE_ORDER:
        assert f"\n| {phase} | " in text
    assert "### cProfile of the slowest phase (" in text and "ncalls" in text
    quiet = re.findall(r"^\| (\d+) records \| [\d.]+ \| (\d+) \| (\d+) \|", text, re.MULTILINE)
    assert "| store | round, median s | " + " | ".join(sync_bench.COUNTED) + " |" in text
    assert [(opened, listed) for _, opened, listed in quiet] == [("0", "0"), ("0", "0")]  # no walk of the vault
    assert declared_answers.get("run") == 1  # the report's shape was held to SyncReport
    assert not (tmp_path / "state").exists()  # throwaway machines; the state directory is never touched


@pytest.mark.parametrize("argv", [["--records", "0"], ["--clone-records", "-1"], ["--repeats", "0"],
                                  ["--seconds", "0"]])
def test_sizes_below_one_are_refused_and_nothing_is_written(tmp_path: Path, argv: list[str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sync.md"
    assert main(["--state-dir", str(tmp_path / "state"), "bench", "sync", *argv, "--out", str(out)]) == 2
    assert "knowledge bench sync: --" in capsys.readouterr().err
    assert not out.exists()


def test_each_records_marker_is_one_word_of_its_own() -> None:
    analyzer = Analyzer()
    words = {sync_bench._word(batch, index) for batch in range(3) for index in range(1000)}
    assert len(words) == 3000
    for word in list(words)[:50]:
        assert analyzer.query_terms(word) == [word]


def test_phase_times_exclude_the_phases_called_inside_them() -> None:
    ticks = iter(range(1, 100))
    clock = sync_bench.PhaseClock(now=lambda: float(next(ticks)))
    inner = clock._wrap("merge", lambda: None)
    clock._wrap("install", lambda: inner())()  # install 1..4, merge inside it 2..3
    assert clock.spent == {"merge": 1.0, "install": 2.0}
    phases = clock.phases(total=5.0)
    assert list(phases) == list(sync_bench.PHASE_ORDER)
    assert phases["merge"] == 1.0 and phases["install"] == 2.0 and phases["other"] == 5.0
