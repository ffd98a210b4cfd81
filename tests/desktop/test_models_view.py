"""The Models view: installed and available models, a download with progress and cancel, the benchmark, the choice."""

from __future__ import annotations

import json
from typing import Any

import pytest
from PySide6.QtCore import Qt

from desktop.model_manager.view import ModelsView
from engine.service import Engine
from models.fixtures import TINY_RERANKER
from models.installed import ModelStore
from models.local import add_local
from tests.engine.operator.test_model_operator import two_variant_folder
from tests.models.fake_hub import FakeHub, hold_downloads, running
from tests.models.test_pull import FILES, REVISION, tiny_entry


@pytest.fixture
def tiny_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    """A catalogue of one small pinned model, served by a loopback hub in the tests that download it."""
    monkeypatch.setattr("models.catalogue.CATALOGUE", tiny_entry())


def shown(qtbot: Any, tasks: Any) -> ModelsView:
    view = ModelsView(tasks)
    qtbot.addWidget(view)
    view.resize(1200, 900)
    view.show()
    with qtbot.waitSignal(view.sig_content_loaded, timeout=10_000):
        view.set_agent("main")
    return view


def column(model: Any, title: str, row: int = 0) -> str:
    titles = [model.headerData(n, Qt.Orientation.Horizontal) for n in range(model.columnCount())]
    return model.index(row, titles.index(title)).data()


def test_installed_and_available_models_with_verification(qtbot, qtmodeltester, served_engine: Engine, tasks,
                                                          gui_thread_guard) -> None:
    guard_was = gui_thread_guard.active
    gui_thread_guard.active = False          # the owner registers a model folder before opening the window
    add_local(ModelStore(served_engine.state.models), TINY_RERANKER, name="tiny")
    gui_thread_guard.active = guard_was
    view = shown(qtbot, tasks)
    qtmodeltester.check(view.installed_model)
    qtmodeltester.check(view.available_model)
    assert view.installed_model.rowCount() == 1
    assert column(view.installed_model, "Model") == "tiny"
    assert column(view.installed_model, "Verification").startswith("unverified")
    variants = {(row["model"], row["name"]) for row in view.available_model.rows()}
    assert ("gte-reranker-modernbert-base", "fp32") in variants
    assert "Recall gate (decisionModel): none chosen" in view.status.text()
    assert not view.download_button.isEnabled(), "nothing is selected to download"


def test_use_for_the_recall_gate_writes_the_choice(qtbot, served_engine: Engine, tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    add_local(ModelStore(served_engine.state.models), TINY_RERANKER, name="tiny")
    gui_thread_guard.active = True
    view = shown(qtbot, tasks)
    assert not view.use_gate_button.isEnabled()
    view.select_installed("tiny")
    assert view.use_gate_button.isEnabled() and not view.use_search_button.isEnabled(), "a reranker, not an embedder"
    with qtbot.waitSignal(view.sig_content_loaded, timeout=10_000):
        view.use_gate_button.click()
    assert "Recall gate (decisionModel): onnx/tiny" in view.status.text()
    assert column(view.installed_model, "Used as") == "recall gate"  # the owner's words; the key on hover
    titles = [column.title for column in view.installed_model.columns]
    assert view.installed_model.index(0, titles.index("Used as")).data(Qt.ItemDataRole.ToolTipRole) == "decisionModel"
    view.resize(745, 700)  # the view's size in the 1008x720 window of a 1024x768 screen
    listing, used = view.installed_table, titles.index("Used as")
    qtbot.waitUntil(lambda: listing.horizontalHeader().sectionSize(used) >= listing.sizeHintForColumn(used),
                    timeout=5_000)  # never "decision…"
    assert not view.use_gate_button.isEnabled(), "already the gate's model"
    gui_thread_guard.active = False
    assert json.loads(served_engine.state.config.read_text(encoding="utf-8"))["decisionModel"] == "onnx/tiny"


def test_an_embedding_model_is_used_for_the_recall_gate_as_embedding_name(qtbot, served_engine: Engine, tasks,
                                                                         gui_thread_guard) -> None:
    from models.fixtures import TINY_EMBEDDER

    gui_thread_guard.active = False
    add_local(ModelStore(served_engine.state.models), TINY_EMBEDDER, name="encoder")
    gui_thread_guard.active = True
    view = shown(qtbot, tasks)
    view.select_installed("encoder")
    assert view.use_gate_button.isEnabled() and view.use_search_button.isEnabled()
    with qtbot.waitSignal(view.sig_content_loaded, timeout=10_000):
        view.use_gate_button.click()
    assert "Recall gate (decisionModel): embedding/encoder" in view.status.text()
    assert not view.use_gate_button.isEnabled(), "already the gate's model"
    gui_thread_guard.active = False
    assert json.loads(served_engine.state.config.read_text(encoding="utf-8"))["decisionModel"] == "embedding/encoder"


def test_a_download_shows_progress_can_be_cancelled_and_resumes(qtbot, served_engine: Engine, tasks, tiny_catalogue,
                                                                monkeypatch, gui_thread_guard) -> None:
    hub = FakeHub("owner/tiny", REVISION, FILES)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    entered, release = hold_downloads(hub, "model.onnx")
    with running(hub):
        view = shown(qtbot, tasks)
        assert view.installed_model.rowCount() == 0
        view.select_variant("tiny", view.available_model.rows()[0]["name"])
        assert view.download_button.isEnabled()
        view.download_button.click()
        qtbot.waitUntil(lambda: entered.is_set() and view.cancel_button.isEnabled(), timeout=10_000)
        assert not view.download_button.isEnabled(), "one download at a time"
        assert "MB" in view.download_status.text()
        with qtbot.waitSignal(view.sig_download_finished, timeout=30_000) as blocker:
            view.cancel_button.click()
            qtbot.waitUntil(lambda: view.download_status.text().count("Cancelling") > 0
                            or not view.watcher.running, timeout=10_000)
            release.set()
        assert blocker.args[0]["state"] == "cancelled"
        assert view.download_status.text().startswith("Download cancelled")
        qtbot.waitUntil(lambda: view.download_button.isEnabled(), timeout=10_000)

        with qtbot.waitSignal(view.sig_download_finished, timeout=30_000) as blocker:
            view.download_button.click()
        assert blocker.args[0]["state"] == "done", blocker.args[0]
        qtbot.waitUntil(lambda: view.installed_model.rowCount() == 1, timeout=10_000)
    assert column(view.installed_model, "Verification") == "sha256 verified"
    assert view.download_progress.value() == 1000
    assert "sha256-verified" in view.download_status.text()


def test_an_offline_download_fails_with_a_readable_message(qtbot, served_engine: Engine, tasks, tiny_catalogue,
                                                           monkeypatch, gui_thread_guard) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    view = shown(qtbot, tasks)
    view.select_variant("tiny", view.available_model.rows()[0]["name"])
    with qtbot.waitSignal(view.sig_download_finished, timeout=30_000) as blocker:
        view.download_button.click()
    assert blocker.args[0]["state"] == "failed"
    assert "Failed:" in view.download_status.text() and "Traceback" not in view.download_status.text()
    assert view.download_button.isEnabled(), "the owner may try again"


def test_the_benchmark_tells_the_owner_what_budget_the_machine_can_score(qtbot, qtmodeltester, served_engine: Engine,
                                                                        tasks, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    add_local(ModelStore(served_engine.state.models), TINY_RERANKER, name="tiny")
    gui_thread_guard.active = True
    view = shown(qtbot, tasks)
    bench = view.benchmark
    assert bench.model_choice.currentData() == "tiny" and bench.run_button.isEnabled()
    bench.timeout.setValue(1200)
    with qtbot.waitSignal(bench.sig_benchmark_finished, timeout=120_000) as blocker:
        bench.run_button.click()
    assert blocker.args[0]["state"] == "done", blocker.args[0]
    qtmodeltester.check(bench.lengths_model)
    qtmodeltester.check(bench.budgets_model)
    assert bench.lengths_model.rowCount() == 3
    assert "tokens/s" in bench.answer.text() and "At timeoutMs 1,200 one gate turn can score" in bench.answer.text()
    assert bench.run_button.isEnabled() and not bench.cancel_button.isEnabled()


def test_compare_variants_shows_each_variant_with_its_fidelity_and_recommends_one(
        qtbot, qtmodeltester, served_engine: Engine, tasks, gui_thread_guard, tmp_path) -> None:
    gui_thread_guard.active = False
    folder = two_variant_folder(tmp_path)
    add_local(ModelStore(served_engine.state.models), folder, name="tiny", variant="model")
    add_local(ModelStore(served_engine.state.models), folder, name="tiny-opt", variant="model_opt")
    gui_thread_guard.active = True
    view = shown(qtbot, tasks)
    bench = view.benchmark
    bench.model_choice.setCurrentIndex(bench.model_choice.findData("tiny"))
    assert bench.compare_button.isEnabled() and not bench.variants_table.isVisibleTo(view)
    with qtbot.waitSignal(bench.sig_benchmark_finished, timeout=120_000) as blocker:
        bench.compare_button.click()
    assert blocker.args[0]["state"] == "done", blocker.args[0]
    qtmodeltester.check(bench.variants_model)
    assert bench.variants_model.rowCount() == 2 and bench.variants_table.isVisibleTo(view)
    assert column(bench.variants_model, "Variant", 0) == "model" and column(bench.variants_model, "x fp32", 0) == "1.00x"
    assert column(bench.variants_model, "Same page first", 1) == "100%"
    assert bench.recommendation.text().startswith("Use model")
    assert bench.compare_button.isEnabled() and bench.run_button.isEnabled()
    # A plain benchmark afterwards hides the comparison again.
    with qtbot.waitSignal(bench.sig_benchmark_finished, timeout=120_000):
        bench.run_button.click()
    assert bench.recommendation.text() == "" and not bench.variants_table.isVisibleTo(view)
