"""The gate benchmark's machinery on a tiny LoCoMo-shaped file and the tiny reranker, with a stand-in baseline.

These tests check what the benchmark reports, not how fast anything is: the
PyTorch side is a small script that only counts what it was given.
"""

from __future__ import annotations

import json
import shutil
import sys
from typing import Any

import pytest

from engine.bench.gate import Options, run
from engine.cli.commands import main
from models.fixtures import TINY_RERANKER
from tests.engine.bench.test_bench_search import tiny_locomo

STAND_IN = """#!{python}
import json, sys
script, model, pairs_path, out_path = sys.argv[1:5]  # invoked as: PYTHON gate_baseline.py ...
turns = json.load(open(pairs_path, encoding="utf-8"))
# Scores: 1.0 for the first document of a turn, 0.0 for the others.
results = [{{"seconds": 1.0, "tokens": 10 * len(t["documents"]), "pairs": len(t["documents"]),
            "scores": [1.0] + [0.0] * (len(t["documents"]) - 1)}} for t in turns]
json.dump({{"torch": "stand-in", "sentenceTransformers": "stand-in", "threads": 1, "loadSeconds": 0.0,
           "turns": results}}, open(out_path, "w", encoding="utf-8"))
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("bench-gate")
    data = root / "locomo.json"
    data.write_text(json.dumps(tiny_locomo()), encoding="utf-8")
    model = root / "model"
    shutil.copytree(TINY_RERANKER, model)
    (model / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    stand_in = root / "torch-python"
    stand_in.write_text(STAND_IN.format(python=sys.executable), encoding="utf-8")
    stand_in.chmod(0o755)
    options = Options(model=model, torch_python=stand_in, data=data, questions=4, rounds=2,
                      output=root / "gate.md", command="knowledge bench gate (test)")
    result = run(options, say=lambda line: None)
    result["markdown"] = (root / "gate.md").read_text(encoding="utf-8")
    return result


def test_every_turn_is_measured_within_its_budget(report: dict[str, Any]) -> None:
    assert report["questions"] == 4 and report["timeoutMs"] == 1500
    assert report["inside"] == 1.0 and report["latency"]["wall"]["max"] < 1550
    assert report["outcomes"] == {"shadow": 4}


def test_both_sides_score_exactly_the_pairs_the_gate_scored(report: dict[str, Any]) -> None:
    throughput = report["throughput"]
    assert throughput["pairs"] > 0 and len(throughput["rounds"]) == 2
    for measured in throughput["rounds"]:
        # The stand-in counts 10 tokens a pair in one second per turn.
        assert measured["torchTokens"] == 10 * throughput["pairs"]
        assert measured["onnxTokens"] > 0 and measured["onnx"] > 0


def test_fidelity_compares_the_first_rounds_scores_pair_by_pair(report: dict[str, Any]) -> None:
    fidelity = report["throughput"]["fidelity"]
    assert fidelity["pairs"] == report["throughput"]["pairs"]
    assert 0 < fidelity["maxDifference"] <= 1 and fidelity["meanDifference"] <= fidelity["maxDifference"]
    assert 0 <= fidelity["sameFirst"] <= 1
    assert "Fidelity (round 1" in report["markdown"]


def test_a_variant_must_exist_in_the_folder(tmp_path) -> None:
    from engine.bench.gate import BenchmarkSkipped, resolve_model
    from models.installed import ModelStore

    model = tmp_path / "model"
    shutil.copytree(TINY_RERANKER, model)
    store = ModelStore(tmp_path / "models")
    with pytest.raises(BenchmarkSkipped, match="onnx/model_int8.onnx does not exist"):
        resolve_model(store, model, "model_int8")
    shutil.copyfile(model / "onnx" / "model.onnx", model / "onnx" / "model_int8.onnx")
    chosen = resolve_model(store, model, "model_int8")
    assert (chosen.select, chosen.kind) == ("onnx/model", "reranker")


def test_an_installed_model_or_an_onnx_only_folder_is_taken(tmp_path) -> None:
    from engine.bench.gate import BenchmarkSkipped, resolve_model
    from models.fixtures import TINY_EMBEDDER
    from models.installed import ModelStore
    from models.local import add_local

    store = ModelStore(tmp_path / "models")
    folder = tmp_path / "reranker"
    shutil.copytree(TINY_RERANKER, folder)   # no model.safetensors: enough for everything but PyTorch
    assert resolve_model(store, folder).select == "onnx/reranker"
    add_local(store, TINY_EMBEDDER, name="encoder")
    chosen = resolve_model(store, "encoder")
    assert (chosen.select, chosen.kind) == ("embedding/encoder", "embedding")
    with pytest.raises(BenchmarkSkipped, match="--model missing"):
        resolve_model(store, "missing")


def test_pytorch_needs_a_reranker_folder_with_safetensors(tmp_path) -> None:
    from engine.bench.gate import BenchmarkSkipped, ChosenModel, _check_torch_model

    folder = tmp_path / "reranker"
    shutil.copytree(TINY_RERANKER, folder)
    chosen = ChosenModel("reranker", "onnx/reranker", "reranker", folder)
    with pytest.raises(BenchmarkSkipped, match="model.safetensors"):
        _check_torch_model(chosen, None)
    (folder / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    _check_torch_model(chosen, None)
    with pytest.raises(BenchmarkSkipped, match="compares a cross-encoder"):
        _check_torch_model(ChosenModel("e", "embedding/e", "embedding", folder), None)


def test_the_report_states_the_targets(report: dict[str, Any]) -> None:
    text = report["markdown"]
    for part in ("## Gate turns", "p50", "p95", "inside `timeoutMs`", "tokens scored per turn",
                 "## Throughput", "**median**", "every turn inside its budget plus 50 ms",
                 "tokens per second at least 1.5x PyTorch", "knowledge bench gate (test)"):
        assert part in text, part


def test_cli_without_a_model_skips_with_a_clear_message(tmp_path, monkeypatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)   # no ../shared/data beside: the model is asked for before the data is read
    assert main(["bench", "gate", "--output", "-"]) == 2
    assert "skipped, nothing was measured: --model must name an installed model" in capsys.readouterr().err


def test_cli_without_the_data_set_skips_with_a_clear_message(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "locomo10.json"
    assert main(["bench", "gate", "--model", str(TINY_RERANKER), "--data", str(missing), "--output", "-"]) == 2
    err = capsys.readouterr().err
    assert "skipped, nothing was measured: no LoCoMo file at" in err and str(missing) in err
