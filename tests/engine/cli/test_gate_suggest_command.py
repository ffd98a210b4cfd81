"""``knowledge gate suggest``: the proposal from the store's labelled turns, the same in this process and beside
the serving engine; bad input refused with a clear line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.cli.test_beside_engine import run, serving
from tests.engine.gate_helpers import MODEL, keep_turns, owner_caller, quiet_and_needing, write_config


@pytest.fixture
def copies(tmp_path: Path) -> tuple[StateDir, StateDir]:
    here, served = StateDir(tmp_path / "here" / "state"), StateDir(tmp_path / "served" / "state")
    write_config(here, {"mode": "shadow", "journal": True, "highThreshold": 0.9, "mediumThreshold": 0.7},
                 model=MODEL, base_url="http://127.0.0.1:9")   # never asked: suggesting reads the log
    with Engine(here, watch=False) as engine:
        engine.on_store(owner_caller(engine), lambda runtime, authority: None)
        keep_turns(engine, quiet_and_needing())
    shutil.copytree(here.root, served.root)
    return here, served


SCRIPT = [["gate", "suggest"], ["gate", "suggest", "--json", "--precision", "0.95"],
          ["gate", "suggest", "--agent", "main", "--precision", "1.5"],
          ["gate", "suggest", "--pointer-precision", "0.9"], ["gate", "suggest", "--store", "nope"],
          ["gate", "suggest", "--agent", "nobody"]]


def test_gate_suggest_prints_the_same_in_process_and_beside_the_serving_engine(
        copies: tuple[StateDir, StateDir], capsys: pytest.CaptureFixture[str]) -> None:
    here, served = copies
    in_process = [run(capsys, here, argv) for argv in SCRIPT]
    with serving(served):
        beside = [run(capsys, served, argv) for argv in SCRIPT]
    for argv, local, remote in zip(SCRIPT, in_process, beside):
        assert remote == local, argv
    assert [code for code, _, _ in in_process] == [0, 0, 2, 2, 2, 2]

    text = in_process[0][1]
    assert "from 35 labelled of 35 scored turns of rerank/test" in text
    assert "  highThreshold 0.6: precision 1.00 (at least 0.92 with 84 % confidence), recall 0.80, on 12 pages of 12 " \
           "turns" in text
    assert "  skipHintBelow 0.4: 23 turns hinted, 3 of them needed a page (precision 0.87)" in text
    assert "mediumThreshold 0.7 would not be below the proposed highThreshold" in text
    assert "  To compare, highThreshold 0.9 (in force now): precision 1.00, recall 0.80, on 12 pages of 12 turns." \
        in text
    assert '"recallGate": {"highThreshold": 0.6, "mediumThreshold": null, "skipHintBelow": 0.4}' in text
    assert "Where the gate would fire over the 35 logged turns" in text
    answer = json.loads(in_process[1][1])
    assert answer["precision"] == 0.95 and answer["skipHintBelow"] is None
    assert "precision must be a number from 0.05 to 0.99 (precision)" in in_process[2][2]
    assert "pointerPrecision must be below precision" in in_process[3][2]
    assert "no store 'nope'" in in_process[4][2] and "agent 'nobody' has no store" in in_process[5][2]
    assert json.loads(here.config.read_text(encoding="utf-8"))["recallGate"]["highThreshold"] == 0.9, \
        "suggesting writes nothing"


def test_gate_suggest_answers_a_precision_at_or_below_the_pointer_lines_default(
        copies: tuple[StateDir, StateDir], capsys: pytest.CaptureFixture[str]) -> None:
    # --precision 0.3 was refused: the default --pointer-precision 0.5 was not below it.
    here, _ = copies
    code, out, _ = run(capsys, here, ["gate", "suggest", "--precision", "0.3"])
    assert code == 0 and out.startswith("Recall gate thresholds for precision 0.3,")
    assert "  mediumThreshold: not proposed for precision 0.3, at or below pointer lines' own 0.5 (ask with a " \
           "pointerPrecision below it for one)." in out
    code, out, _ = run(capsys, here, ["gate", "suggest", "--json", "--precision", "0.3", "--pointer-precision", "0.2"])
    assert code == 0 and json.loads(out)["pointerPrecision"] == 0.2
