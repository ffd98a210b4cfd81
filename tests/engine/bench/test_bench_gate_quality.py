"""The gate benchmark's quality figures: hand-made cases for the metrics, then a run on a tiny LoCoMo-shaped file
with the tiny embedding fixture as the Decision model (no PyTorch)."""

from __future__ import annotations

import json
import math
import random
import shutil
from typing import Any

import pytest

from engine.bench import gate_quality
from engine.bench.gate import Options, run
from models.fixtures import TINY_EMBEDDER
from tests.engine.bench.test_bench_search import tiny_locomo

TURNS = [
    {"gold": ["p1"], "scores": {"p1": 0.9, "p2": 0.6, "p3": 0.2}},
    {"gold": ["p4", "p5"], "scores": {"p4": 0.4, "p6": 0.8}},    # p5 was never shortlisted
    {"gold": [], "scores": {"p7": 0.7}, "category": "off-topic"},  # no gold page: anything injected is noise
    {"gold": [], "scores": {}},                                    # nothing matched at all
]


def row(figures: dict[str, Any], threshold: float) -> dict[str, Any]:
    return next(r for r in figures["thresholds"] if r["threshold"] == threshold)


def test_per_threshold_precision_recall_f1_and_noise_of_a_hand_made_case() -> None:
    figures = gate_quality.quality(TURNS, thresholds=(0.3, 0.5, 0.95))
    at_half = row(figures, 0.5)   # injected: p1 p2 | p6 | p7 -> 1 of 4 is gold; 1 of the 3 gold pages found
    assert at_half["precision"] == pytest.approx(1 / 4)
    assert at_half["recall"] == pytest.approx(1 / 3)
    assert at_half["f1"] == pytest.approx(2 * (1 / 4) * (1 / 3) / (1 / 4 + 1 / 3))
    assert at_half["perTurn"] == pytest.approx(4 / 4)
    assert at_half["noGoldInjected"] == pytest.approx(1 / 2)
    assert at_half["offTopicInjected"] == 1.0 and row(figures, 0.95)["offTopicInjected"] == 0
    lower = row(figures, 0.3)     # p4 joins
    assert (lower["precision"], lower["recall"]) == (pytest.approx(2 / 5), pytest.approx(2 / 3))
    top = row(figures, 0.95)      # nothing injected: precision undefined, F1 0, no noise
    assert math.isnan(top["precision"]) and top["recall"] == 0 and top["f1"] == 0 and top["noGoldInjected"] == 0
    assert figures["best"]["threshold"] == 0.3
    assert (figures["turns"], figures["withGold"], figures["withoutGold"]) == (4, 2, 2)
    assert figures["hit"] == 1.0 and figures["shortlistRecall"] == pytest.approx(2 / 3)
    assert figures["noGoldShortlisted"] == pytest.approx(1 / 2)
    # positives 0.9 and 0.4 against negatives 0.6, 0.2, 0.8, 0.7: 4 + 1 of 8 pairs ordered right
    assert figures["auc"] == pytest.approx(5 / 8)


def test_roc_auc_counts_ties_half_and_needs_both_classes() -> None:
    assert gate_quality.roc_auc([0.5, 0.5], [True, False]) == 0.5
    assert gate_quality.roc_auc([0.1, 0.9, 0.9, 0.3], [False, True, False, True]) == pytest.approx(0.625)
    assert gate_quality.roc_auc([0.2, 0.8], [False, True]) == 1.0
    assert math.isnan(gate_quality.roc_auc([0.2, 0.8], [True, True]))


def test_the_calibration_fit_recovers_the_logistic_that_made_the_labels() -> None:
    rng = random.Random(7)
    similarities = [rng.uniform(-0.2, 0.9) for _ in range(20_000)]
    labels = [rng.random() < 1 / (1 + math.exp(-(8.0 * s - 4.0))) for s in similarities]
    a, b = gate_quality.fit_calibration(similarities, labels)
    assert a == pytest.approx(8.0, rel=0.1) and b == pytest.approx(-4.0, rel=0.1)
    with pytest.raises(ValueError):
        gate_quality.fit_calibration([0.1, 0.2], [True, True])


def test_function_word_only_pages_share_nothing_but_function_words() -> None:
    function = {"the", "is", "when"}
    assert gate_quality.function_word_only(["when", "the", "billing"], ["the", "kitchen"], function)
    assert not gate_quality.function_word_only(["when", "the", "billing"], ["the", "billing"], function)
    assert not gate_quality.function_word_only(["billing"], ["kitchen"], function), "sharing nothing is not it"
    figures = gate_quality.function_word_figures([
        {"gold": [], "scores": {"a": 0.1, "b": 0.2}, "reachedByFunctionWords": 2, "goldByFunctionWords": 0},
        {"gold": [], "scores": {"c": 0.1}, "reachedByFunctionWords": 0, "goldByFunctionWords": 0},
        {"gold": ["g"], "scores": {"g": 0.5, "h": 0.1}, "reachedByFunctionWords": 1, "goldByFunctionWords": 1},
    ])
    assert (figures["noGoldReached"], figures["noGoldOnly"], figures["noGoldPerTurn"]) == (0.5, 0.5, 1.0)
    assert figures["goldOnlyThroughFunctionWords"] == 1.0 and figures["goldPagesShortlisted"] == 1


def test_gold_pages_are_the_session_pages_of_the_evidence_turns() -> None:
    data = tiny_locomo()
    sessions = gate_quality.session_pages(data, [("pg_s1", "Ines and Bruno, session 1 (4 June 2031)"),
                                                 ("pg_x", "Ines"), ("pg_y", "Somebody and Else, session 1 (x)")])
    assert sessions == {(0, 1): "pg_s1"}
    questions = gate_quality.gold_questions(data, sessions, range(0, 1))
    assert [q["gold"] for q in questions] == [["pg_s1"], ["pg_s1"], ["pg_s1"], [], ["pg_s1"]]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("bench-gate-quality")
    data = root / "locomo.json"
    data.write_text(json.dumps(tiny_locomo()), encoding="utf-8")
    model = root / "encoder"
    shutil.copytree(TINY_EMBEDDER, model)
    options = Options(model=model, data=data, questions=3, output=root / "gate-quality.md", quality=True,
                      candidates=("keyword", "hybrid"), report_samples=range(0, 1),
                      command="knowledge bench gate (test)")
    result = run(options, say=lambda line: None)
    result["markdown"] = (root / "gate-quality.md").read_text(encoding="utf-8")
    return result


def test_an_embedding_model_is_measured_without_pytorch(report: dict[str, Any]) -> None:
    assert report["model"] == {"select": "embedding/encoder", "kind": "embedding"}
    assert report["throughput"] is None and report["outcomes"] == {"shadow": 3}
    assert "## Throughput" not in report["markdown"]


def test_quality_figures_cover_every_candidate_mode_and_the_off_topic_turns(report: dict[str, Any]) -> None:
    quality = report["quality"]
    assert set(quality["modes"]) == {"keyword", "hybrid"}
    assert quality["questions"] == 5 + len(gate_quality.OFF_TOPIC_TURNS)
    for figures in quality["modes"].values():
        assert figures["withGold"] == 4 and figures["withoutGold"] == 1 + len(gate_quality.OFF_TOPIC_TURNS)
        assert len(figures["thresholds"]) == len(gate_quality.THRESHOLDS)
    assert quality["modes"]["hybrid"]["hit"] >= quality["modes"]["keyword"]["hit"]
    assert "noGoldReached" in quality["functionWords"]
    for part in ("## Quality on LoCoMo", "### keyword candidates, per threshold", "### hybrid candidates",
                 "ROC AUC", "function words"):
        assert part in report["markdown"], part


def test_the_cascade_placement_of_gold_pages_per_cheap_order_in_a_hand_made_case() -> None:
    turns = [
        # shortlist order p1 p2 p3 p4; by similarity p3 p4 p2 p1; the gold page p3 is third on the shortlist.
        {"gold": ["p3"], "scores": {"p1": 0.1, "p2": 0.2, "p3": 0.9, "p4": 0.5}},
        # the gold page p5 leads both orders; p9 was never shortlisted.
        {"gold": ["p5", "p9"], "scores": {"p5": 0.8, "p6": 0.3}},
        {"gold": [], "scores": {"p7": 0.7}},                  # no gold page: not counted
        {"gold": ["p8"], "scores": {"p10": 0.4}},             # its gold page was never shortlisted: not counted
    ]
    figures = gate_quality.cascade_placement(turns, slots=(1, 2, 3))
    assert (figures["turns"], figures["goldPages"]) == (2, 2)
    shortlist, similarity, fused = (figures["orders"][how] for how in ("shortlist", "similarity", "fused"))
    assert [shortlist[n]["goldPages"] for n in (1, 2, 3)] == [0.5, 0.5, 1.0]
    assert [similarity[n]["goldPages"] for n in (1, 2, 3)] == [1.0, 1.0, 1.0]
    # Fused ranks of the first turn: p1 1/61+1/64, p2 1/62+1/63, p3 1/63+1/61, p4 1/64+1/62: p3 leads.
    assert [fused[n]["goldPages"] for n in (1, 2, 3)] == [1.0, 1.0, 1.0]
    assert shortlist[1]["turns"] == 0.5 and similarity[1]["turns"] == 1.0
    # An order knowing nothing: N of 4 places in the first turn, N of 2 in the second.
    assert figures["orders"]["random"][1]["goldPages"] == pytest.approx((1 / 4 + 1 / 2) / 2)
    assert math.isnan(gate_quality.cascade_placement([])["orders"]["shortlist"][1]["goldPages"])
