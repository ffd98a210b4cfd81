"""The git history benchmark measures two real vaults side by side and writes its table."""

from __future__ import annotations

from engine.bench import git_history
from engine.cli.commands import main


def test_a_short_run_measures_both_vaults_and_writes_the_table(tmp_path, monkeypatch):
    monkeypatch.setattr(git_history, "LAST", 5)
    out = tmp_path / "git-history.md"
    assert git_history.main(["--checkpoints", "12", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "| loose objects | 96 | 96 |" in text  # 8 objects a checkpoint: 2 blobs, 5 trees, the commit
    assert "--checkpoints 12" in text and "tidy median (ms)" in text


def test_the_bench_command_runs_it_and_quotes_itself(tmp_path, capsys):
    out = tmp_path / "git.md"
    assert main(["--state-dir", str(tmp_path / "state"), "bench", "git", "--checkpoints", "3",
                 "--output", str(out)]) == 0
    assert "`knowledge bench git --checkpoints 3`" in out.read_text(encoding="utf-8")
    assert "| loose objects | 24 | 24 |" in capsys.readouterr().out
    assert not (tmp_path / "state").exists()  # two throwaway vaults; the state directory is never touched
