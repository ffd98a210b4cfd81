"""The git history benchmark measures two real vaults side by side and writes its table."""

from __future__ import annotations

from engine.bench import git_history


def test_a_short_run_measures_both_vaults_and_writes_the_table(tmp_path, monkeypatch):
    monkeypatch.setattr(git_history, "LAST", 5)
    out = tmp_path / "git-history.md"
    assert git_history.main(["--checkpoints", "12", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "| loose objects | 96 | 96 |" in text  # 8 objects a checkpoint: 2 blobs, 5 trees, the commit
    assert "--checkpoints 12" in text and "tidy median (ms)" in text
