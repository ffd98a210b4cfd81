"""``knowledge sync remote add / list / remove``: the same output in this process and beside a serving engine,
a plain path made absolute where it was typed, and a credential URL refused with nothing written."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from engine.cli.commands import main
from engine.state.statedir import StateDir
from tests.engine.cli.test_beside_engine import run, serving

SECRET = "hunter2-sekrit"
SCRIPT = [
    ["sync", "remote", "list"], ["sync", "remote", "add", "nas", "git@nas.local:srv/notes.git"],
    ["sync", "remote", "add", "github", "https://github.com/me/notes.git", "--agent", "main", "--json"],
    ["sync", "remote", "add", "nas", "/srv/other.git"], ["sync", "remote", "add", "a..b", "/srv/x.git"],
    ["sync", "remote", "add", "gh", f"https://me:{SECRET}@github.com/me/notes.git"],
    ["sync", "remote", "add", "gh", f"https://github.com/me/notes.git?access_token={SECRET}"],
    ["sync", "remote", "add", "x", "/srv/x.git", "--store", "nope"],
    ["sync", "remote", "add", "x", "/srv/x.git", "--agent", "nobody"],
    ["sync", "remote", "list", "--json"], ["sync", "remote", "list"],
    ["sync", "remote", "remove", "github"], ["sync", "remote", "remove", "github"],
    ["sync", "remote", "remove", "nas", "--agent", "main", "--json"], ["sync", "remote", "list"],
]


@pytest.fixture
def copies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[StateDir, StateDir]:
    seed, here, served = (StateDir(tmp_path / name / "state") for name in ("seed", "here", "served"))
    assert main(["--state-dir", str(seed.root), "demo"]) == 0
    capsys.readouterr()
    for copy in (here, served):
        shutil.copytree(seed.root, copy.root)
    return here, served


def _secret_anywhere(state: StateDir) -> list[Path]:
    return [path for path in state.root.rglob("*") if path.is_file() and SECRET.encode() in path.read_bytes()]


def test_sync_remote_commands_print_the_same_in_process_and_beside_the_serving_engine(
        copies: tuple[StateDir, StateDir], capsys: pytest.CaptureFixture[str]) -> None:
    here, served = copies
    in_process = [run(capsys, here, argv) for argv in SCRIPT]
    with serving(served) as engine:
        beside = [run(capsys, served, argv) for argv in SCRIPT]
        record = engine.resolver.effective("main", create=False)
    for argv, local, remote in zip(SCRIPT, in_process, beside):
        assert remote == local, argv

    codes = [code for code, _, _ in in_process]
    assert codes == [0, 0, 0, 2, 2, 2, 2, 2, 2, 0, 0, 0, 2, 0, 0]
    assert "no remotes" in in_process[0][1]
    assert "already has a remote named 'nas'" in in_process[3][2]
    assert "ssh-agent" in in_process[5][2] and "credential helper" in in_process[5][2]
    assert all(SECRET not in out + err for _, out, err in in_process + beside)
    listed = json.loads(in_process[9][1])["stores"]
    assert [(r["name"], r["url"]) for r in listed[0]["remotes"]] == [
        ("nas", "git@nas.local:srv/notes.git"), ("github", "https://github.com/me/notes.git")]
    assert "no remote named 'github'" in in_process[12][2]
    assert json.loads(in_process[13][1])["remotes"] == []
    assert "no remotes" in in_process[14][1]
    for state in (here, served):
        assert _secret_anywhere(state) == []
    assert json.loads((record.path / "sync" / "remotes.json").read_text(encoding="utf-8"))["remotes"] == []


def test_a_plain_path_is_made_absolute_where_it_was_typed(copies: tuple[StateDir, StateDir], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    here, served = copies
    monkeypatch.chdir(tmp_path)
    assert main(["--state-dir", str(here.root), "sync", "remote", "add", "disk", "backup/notes.git", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["remote"]["url"] == os.path.join(str(tmp_path), "backup/notes.git")
    with serving(served):
        assert main(["--state-dir", str(served.root), "sync", "remote", "add", "disk", "../notes.git", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["remote"]["url"] == str(tmp_path.parent / "notes.git")


def test_agent_and_store_are_one_or_the_other(copies: tuple[StateDir, StateDir],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    here, _ = copies
    with pytest.raises(SystemExit):
        main(["--state-dir", str(here.root), "sync", "remote", "add", "x", "/srv/x.git", "--agent", "main",
              "--store", "team"])
    assert "not allowed with argument" in capsys.readouterr().err
