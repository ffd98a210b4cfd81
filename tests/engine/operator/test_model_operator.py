"""The models view's operator methods: listing with verification, downloads as jobs, the benchmark, the choice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from engine.decision.onnx import OnnxOptions
from engine.core.errors import InvalidParams, NotFound
from engine.operator.model_benchmark import gate_budget
from engine.operator.model_operator import handlers
from engine.service import Engine
from engine.state.statedir import StateDir
from models.fixtures import TINY_RERANKER, TINY_RERANKER_FILES
from models.installed import ModelStore
from models.local import add_local
from models.pull import PARTIAL_DIR
from tests.models.fake_hub import FakeHub, hold_downloads, running
from tests.models.test_pull import FILES, REVISION, tiny_entry


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = Engine(StateDir(tmp_path / "state"), watch=False)
    yield made
    made.close()


@pytest.fixture
def tiny_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("models.catalogue.CATALOGUE", tiny_entry())


def installed(report: dict, name: str) -> dict:
    return next(row for row in report["installed"] if row["name"] == name)


def test_the_listing_has_the_catalogue_and_each_installed_models_verification(engine: Engine) -> None:
    methods = handlers(engine)
    empty = methods["models"]({})
    names = {entry["name"] for entry in empty["catalogue"]}
    assert {"gte-reranker-modernbert-base", "all-minilm-l6-v2-int8"} <= names and empty["installed"] == []
    fp32 = next(v for e in empty["catalogue"] for v in e["variants"] if v["name"] == "fp32")
    assert fp32["pullable"] and fp32["bytes"] > fp32["size"]
    assert empty["decision"]["state"] == "not_configured"

    add_local(ModelStore(engine.state.models), TINY_RERANKER, name="tiny")
    row = installed(methods["models"]({}), "tiny")
    assert row["verification"]["status"] == "unverified" and "no published sha256" in row["verification"]["message"]
    assert row["selectAs"] == "onnx/tiny" and row["usedAs"] == [] and row["bytes"] == sum(
        size for size, _ in TINY_RERANKER_FILES.values())


def test_a_manifest_rewritten_beside_the_engine_is_said_once_when_the_models_are_next_listed(engine: Engine) -> None:
    methods = handlers(engine)
    watching = engine.changes.subscribe(["models"])
    methods["models"]({})
    assert watching.take() == ([], False)  # nothing changed since the engine started

    add_local(ModelStore(engine.state.models), TINY_RERANKER, name="tiny")  # as the command does, not the engine
    assert watching.take() == ([], False)  # written, not yet noticed
    methods["models"]({})
    assert watching.take() == ([{"topic": "models"}], False)
    methods["models"]({})
    assert watching.take() == ([], False)  # said once


def test_a_file_changed_after_registration_fails_verification(engine: Engine, tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "mine"
    shutil.copytree(TINY_RERANKER, folder)
    add_local(ModelStore(engine.state.models), folder, name="mine")
    methods = handlers(engine)
    assert installed(methods["models"]({}), "mine")["verification"]["status"] == "unverified"
    (folder / "config.json").write_text("{}", encoding="utf-8")
    verification = installed(methods["models"]({}), "mine")["verification"]
    assert verification["status"] == "failed" and "config.json changed since it was registered" in \
        verification["message"]


def test_a_download_runs_as_a_job_with_byte_progress_and_verifies(engine, tiny_catalogue, monkeypatch) -> None:
    hub = FakeHub("owner/tiny", REVISION, FILES)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    methods = handlers(engine)
    with running(hub):
        job = methods["pullModel"]({"name": "tiny"})
        assert job["kind"] == "pull" and job["progress"]["total"] == sum(len(data) for data in FILES.values())
        finished = engine.jobs.wait(job["id"], 30)
    assert finished["state"] == "done", finished
    assert finished["progress"]["done"] == finished["progress"]["total"]
    assert finished["result"]["selectAs"] == "onnx/tiny"
    row = installed(methods["models"]({}), "tiny")
    assert row["verification"]["status"] == "verified" and row["source"] == "catalogue"


def test_a_cancelled_download_keeps_what_arrived_and_the_next_one_resumes(engine, tiny_catalogue,
                                                                           monkeypatch) -> None:
    hub = FakeHub("owner/tiny", REVISION, FILES)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    entered, release = hold_downloads(hub, "model.onnx")
    methods = handlers(engine)
    with running(hub):
        job = methods["pullModel"]({"name": "tiny"})
        assert entered.wait(10)
        assert methods["pullModel"]({"name": "tiny"})["id"] == job["id"], "one download of a model at a time"
        assert engine.jobs.cancel(job["id"])["state"] == "cancelling"
        release.set()
        cancelled = engine.jobs.wait(job["id"], 30)
        assert cancelled["state"] == "cancelled"
        assert methods["models"]({})["installed"] == []
        assert (engine.state.models / "tiny" / PARTIAL_DIR / "onnx" / "model.onnx.part").exists()
        again = engine.jobs.wait(methods["pullModel"]({"name": "tiny"})["id"], 30)
    assert again["state"] == "done"


def test_unknown_models_and_variants_are_refused_at_once(engine, tiny_catalogue) -> None:
    methods = handlers(engine)
    with pytest.raises(NotFound, match="not in the catalogue"):
        methods["pullModel"]({"name": "nope"})
    with pytest.raises(NotFound, match="no variant 'fp64'"):
        methods["pullModel"]({"name": "tiny", "variant": "fp64"})
    with pytest.raises(InvalidParams):
        methods["pullModel"]({"name": "tiny", "endpoint": "http://elsewhere"})


def test_an_offline_download_fails_readably(engine, tiny_catalogue, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    methods = handlers(engine)
    failed = engine.jobs.wait(methods["pullModel"]({"name": "tiny"})["id"], 30)
    assert failed["state"] == "failed" and failed["error"]["reason"] == "offline"
    assert "HF_HUB_OFFLINE" in failed["error"]["message"]


def test_the_benchmark_measures_the_model_and_sizes_the_gate_budget(engine: Engine) -> None:
    add_local(ModelStore(engine.state.models), TINY_RERANKER, name="tiny")
    methods = handlers(engine)
    with pytest.raises(InvalidParams, match="name the installed ONNX model"):
        methods["benchmarkModel"]({})
    with pytest.raises(NotFound):
        methods["benchmarkModel"]({"name": "absent"})
    with pytest.raises(InvalidParams):
        methods["benchmarkModel"]({"name": "tiny", "timeoutMs": 50})

    job = methods["benchmarkModel"]({"name": "tiny", "timeoutMs": 1200})
    finished = engine.jobs.wait(job["id"], 120)
    assert finished["state"] == "done", finished
    result = finished["result"]
    assert result["model"] == "tiny" and result["tokensPerSecond"] > 0
    assert [row["pairTokens"] for row in result["lengths"]] == [64, 128, 256]
    assert all(row["tokens"] == row["pairs"] * row["pairTokens"] for row in result["lengths"])
    assert result["budget"]["timeoutMs"] == 1200 and result["budget"]["tokens"] > 0
    assert 1200 in [row["timeoutMs"] for row in result["budgets"]]
    tokens = [row["tokens"] for row in result["budgets"]]
    assert tokens == sorted(tokens), "a longer budget holds more tokens"


def test_the_budget_follows_the_gates_plan() -> None:
    options = OnnxOptions()
    # 600 tokens/s, the full-size reranker on a 2-core CPU: 1,500 ms hold about 660 tokens (docs/recall-gate.md
    # measured ~690 a turn), not enough for ten 32-token excerpts beside a 40-token message and title.
    budget = gate_budget(600.0, 1500, 10, 40, options)
    assert budget["tokens"] == int((1.5 - 0.025 - 0.002) * 600 / 1.2 * 0.9)
    assert budget["windowTokens"] is None and budget["candidatesScored"] == budget["tokens"] // 72 == 9
    roomy = gate_budget(600.0, 3000, 10, 40, options)
    assert roomy["candidatesScored"] == 10 and roomy["windowTokens"] == 80


def test_choosing_the_models_the_engine_uses(engine: Engine) -> None:
    add_local(ModelStore(engine.state.models), TINY_RERANKER, name="tiny")
    methods = handlers(engine)
    with pytest.raises(NotFound):
        methods["setModelSettings"]({"decisionModel": "onnx/absent"})
    with pytest.raises(InvalidParams):
        methods["setModelSettings"]({})
    report = methods["setModelSettings"]({"decisionModel": "onnx/tiny", "embeddingModel": None})
    assert report["decisionModel"] == "onnx/tiny" and report["embeddingModel"] is None
    assert installed(report, "tiny")["usedAs"] == ["decisionModel"]
    on_disk = json.loads(engine.state.config.read_text(encoding="utf-8"))
    assert on_disk == {"decisionModel": "onnx/tiny", "embeddingModel": None} or \
        {"decisionModel": "onnx/tiny", "embeddingModel": None}.items() <= on_disk.items()
    assert methods["setModelSettings"]({"decisionModel": None})["decisionModel"] is None


def test_a_registered_folder_is_listed_with_the_kind_its_config_names(engine: Engine) -> None:
    from models.fixtures import TINY_EMBEDDER

    add_local(ModelStore(engine.state.models), TINY_RERANKER, name="scorer")
    add_local(ModelStore(engine.state.models), TINY_EMBEDDER, name="encoder")
    report = handlers(engine)["models"]({})
    assert installed(report, "scorer")["kind"] == "reranker"
    assert installed(report, "encoder")["kind"] == "embedding"


def test_an_embedding_model_is_chosen_for_the_gate_as_embedding_name(engine: Engine) -> None:
    from models.fixtures import TINY_EMBEDDER

    add_local(ModelStore(engine.state.models), TINY_EMBEDDER, name="encoder")
    add_local(ModelStore(engine.state.models), TINY_RERANKER, name="scorer")
    methods = handlers(engine)
    report = methods["models"]({})
    assert installed(report, "encoder")["decisionAs"] == "embedding/encoder"
    assert installed(report, "scorer")["decisionAs"] == "onnx/scorer"
    with pytest.raises(NotFound):
        methods["setModelSettings"]({"decisionModel": "embedding/absent"})
    report = methods["setModelSettings"]({"decisionModel": "embedding/encoder", "embeddingModel": "onnx/encoder"})
    assert report["decisionModel"] == "embedding/encoder"
    encoder = installed(report, "encoder")
    assert encoder["selected"] and encoder["usedAs"] == ["decisionModel", "embeddingModel"]


# --- the variants of one model, side by side --------------------------------------------------------------


def two_variant_folder(root: Path) -> Path:
    """The tiny reranker with a second graph beside it: onnxruntime's own optimized copy (the same function)."""
    import onnxruntime

    folder = root / "tiny-two"
    shutil.copytree(TINY_RERANKER, folder)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folder / "onnx" / "model_opt.onnx")
    onnxruntime.InferenceSession(str(folder / "onnx" / "model.onnx"), options, providers=["CPUExecutionProvider"])
    return folder


def test_the_benchmark_compares_the_variants_and_recommends_one_with_its_fidelity(engine: Engine,
                                                                                  tmp_path: Path) -> None:
    folder = two_variant_folder(tmp_path)
    store = ModelStore(engine.state.models)
    add_local(store, folder, name="tiny", variant="model")
    add_local(store, folder, name="tiny-opt", variant="model_opt")
    add_local(store, TINY_RERANKER, name="elsewhere")   # another folder: not a variant of tiny
    methods = handlers(engine)
    with pytest.raises(InvalidParams):
        methods["benchmarkModel"]({"name": "tiny-opt", "compareVariants": "yes"})
    job = methods["benchmarkModel"]({"name": "tiny-opt", "compareVariants": True, "timeoutMs": 1200})
    finished = engine.jobs.wait(job["id"], 120)
    assert finished["state"] == "done", finished
    compared = finished["result"]["variants"]
    rows = {row["name"]: row for row in compared["variants"]}
    assert list(rows) == ["tiny-opt", "tiny"] and compared["reference"] == "model"
    assert all(row["tokensPerSecond"] > 0 for row in rows.values())
    assert rows["tiny"]["fidelity"]["maxDifference"] == 0 and rows["tiny"]["speedup"] == 1.0
    same = rows["tiny-opt"]["fidelity"]
    assert same["pairs"] == 48 and same["maxDifference"] < 1e-3 and same["sameFirst"] == 1.0
    assert compared["recommendation"] == compared["fastest"] in ("model", "model_opt")
    assert "tokens per second" in compared["why"] or "full precision" in compared["why"]
    # Without the flag the benchmark measures the one model, as before.
    plain = engine.jobs.wait(methods["benchmarkModel"]({"name": "tiny"})["id"], 120)
    assert plain["state"] == "done" and "variants" not in plain["result"]


def test_catalogue_variants_are_the_pinned_graphs_present_in_the_models_folder(tmp_path: Path) -> None:
    from dataclasses import replace as changed
    from models.catalogue import PinnedFile, Variant
    from engine.operator.model_benchmark import model_variants
    from models.installed import InstalledModel

    entry = tiny_entry()["tiny"]
    size, digest = TINY_RERANKER_FILES["onnx/model.onnx"]
    entry = changed(entry, variants={**entry.variants,
                                     "int8": Variant("int8", PinnedFile("onnx/model_int8.onnx", size, digest, "test")),
                                     "q4": Variant("q4", PinnedFile("onnx/model_q4.onnx", None, None, "unpinned"))})
    folder = tmp_path / "tiny"
    shutil.copytree(TINY_RERANKER, folder)
    model = InstalledModel("tiny", "catalogue", folder, "fp32", "onnx/model.onnx", "tokenizer.json", "config.json",
                           ())
    assert [v.variant for v in model_variants(model, [], {"tiny": entry})] == ["fp32"], "int8 is not there"
    shutil.copyfile(folder / "onnx" / "model.onnx", folder / "onnx" / "model_int8.onnx")
    shutil.copyfile(folder / "onnx" / "model.onnx", folder / "onnx" / "model_q4.onnx")
    found = model_variants(model, [], {"tiny": entry})
    assert [(v.variant, v.onnx) for v in found] == [("fp32", "onnx/model.onnx"), ("int8", "onnx/model_int8.onnx")]
    assert {f.path for f in found[1].files} == {"onnx/model_int8.onnx", "tokenizer.json", "config.json"}
    found[1].verify()   # checked against the catalogue's pin, as a load checks it


def test_the_recommendation_is_the_fastest_variant_close_to_fp32() -> None:
    from engine.operator.model_benchmark import MAX_DIFFERENCE, recommend

    def row(variant: str, rate: float, difference: float | None, same: float = 1.0) -> dict:
        measured = None if difference is None else {"maxDifference": difference, "meanDifference": difference / 3,
                                                     "sameFirst": same, "pairs": 48}
        return {"variant": variant, "tokensPerSecond": rate, "fidelity": measured}

    rows = [row("fp32", 700, 0.0), row("int8", 1900, 0.01), row("q4", 2500, MAX_DIFFERENCE * 2)]
    chosen = recommend(rows, 0)
    assert chosen["recommendation"] == "int8"
    assert "2.7x fp32's" in chosen["why"] and "0.010 at most" in chosen["why"] and "q4 was faster" in chosen["why"]
    assert recommend([row("fp32", 700, 0.0), row("int8", 1900, 0.01, same=0.5)], 0)["recommendation"] == "fp32"
    assert recommend([row("fp32", 900, 0.0), row("int8", 800, 0.0)], 0)["recommendation"] == "fp32"
    unmeasured = recommend([row("int8", 1900, None), row("q4", 1200, None)], None)
    assert unmeasured["recommendation"] == "int8" and "could not be measured" in unmeasured["why"]
    assert recommend([], None)["recommendation"] is None
