"""The feature benchmark's pure parts: MaxSim, the turn relatives, the extra features, and the figures with a cap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.bench import gate_features
from engine.bench.gate_shapes import Turn
from engine.index.similarity import turn_features


def unit(*rows: list[float]) -> np.ndarray:
    array = np.array(rows, dtype=np.float32)
    return array / np.linalg.norm(array, axis=1, keepdims=True)


def test_content_pieces_leave_out_specials_function_words_and_punctuation() -> None:
    pieces = ["[CLS]", "what", "did", "caroline", "paint", "##ed", "?", "[SEP]"]
    assert gate_features.content_mask(pieces).tolist() == [0, 0, 0, 1, 1, 1, 0, 0]
    assert gate_features.content_mask(["[CLS]", "the", "?", "[SEP]"]).tolist() == [0, 1, 1, 0], \
        "no content piece: every piece but the specials"


def test_maxsim_averages_each_message_tokens_best_match_and_takes_the_best_passage() -> None:
    message = unit([1, 0, 0], [0, 1, 0])
    near, far = unit([1, 0, 0], [0, 0, 1]), unit([0, 0, 1])
    assert gate_features.maxsim(message, np.array([1.0, 1.0]), [far]) == pytest.approx(0.0)
    assert gate_features.maxsim(message, np.array([1.0, 1.0]), [far, near]) == pytest.approx(0.5)
    assert gate_features.maxsim(message, np.array([1.0, 0.0]), [far, near]) == pytest.approx(1.0), "weighted"


def test_relatives_read_values_like_turn_features_reads_similarities() -> None:
    values = [0.5, 0.3, 0.1]
    expected = [(f.lead, f.below, f.spread) for f in turn_features(values, [1, 1, 1])]
    assert gate_features.relative(values) == pytest.approx(expected)
    assert gate_features.relative([0.4]) == [(0.4, 0.0, 0.0)]


def test_extras_give_the_passage_margin_the_two_best_and_the_nearest_other_candidate() -> None:
    message = unit([1, 0, 0])[0]
    first = unit([1, 0, 0], [1, 1, 0])          # similarities 1 and 0.707
    second = unit([0, 1, 0])                    # one passage, similarity 0
    row = {"pages": [3, 4]}
    gate_features.add_extras(row, message, [first, second], [0.9, 0.4], [0.6, 0.6])
    a, b = row["extra"]
    assert a["margin"] == pytest.approx(1 - math.sqrt(0.5)) and b["margin"] == 0.0
    assert a["two_best"] == pytest.approx((1 + math.sqrt(0.5)) / 2) and b["two_best"] == pytest.approx(0.0)
    assert a["neighbour"] == pytest.approx(0.0) == b["neighbour"], "best passages [1,0,0] and [0,1,0]"
    assert (a["token_lead"], b["token_below"]) == pytest.approx((0.5, 0.5)) and a["static_lead"] == 0.0


def rows() -> list[dict]:
    gold, off = Turn(0, "q", frozenset({7, 9})), Turn(None, "hi", frozenset())
    return [{"turn": gold, "pages": [7, 8, 9]}, {"turn": off, "pages": [8, 9]}]


def test_figures_count_gold_pages_and_off_topic_turns_and_the_cap_keeps_the_best_page_only() -> None:
    scored = list(zip(rows(), [np.array([0.9, 0.6, 0.7]), np.array([0.2, 0.4])]))
    assert gate_features.measure(scored, 0.5) == {"precision": pytest.approx(2 / 3), "recall": 1.0, "offTopic": 0.0}
    assert gate_features.measure(scored, 0.3)["offTopic"] == 1.0
    assert gate_features.measure(scored, 0.5, cap=1) == {"precision": 1.0, "recall": 0.5, "offTopic": 0.0}
    assert math.isnan(gate_features.measure(scored, 0.95)["precision"])
    by_shape = {"summary": scored, "transcript": scored}
    assert gate_features.rule(by_shape, None) == 0.65, "the lowest threshold with precision 0.75 on both shapes"
    assert gate_features.rule(by_shape, 1) == 0.05
    assert gate_features.rule({"summary": list(zip(rows()[:1], [np.array([0.1, 0.9, 0.1])]))}, None) is None


def test_the_fit_finds_the_feature_that_marks_the_gold_page() -> None:
    rng = np.random.default_rng(3)
    made = []
    for _ in range(200):
        gold = int(rng.integers(3))
        extra = [{"token": float(rng.normal(1.0 if k == gold else 0.0, 0.3))} for k in range(3)]
        made.append({"turn": Turn(0, "q", frozenset({gold})), "pages": [0, 1, 2], "extra": extra,
                     "features": turn_features([0.3, 0.3, 0.3], [1, 1, 1])})
    w = gate_features.fit(made, ["token"])
    assert w[0] > 3, "the marking feature gets a large positive weight"
    p = gate_features.scores(made[:1], ["token"], w)[0]
    assert list(np.argsort(-p))[0] == next(iter(made[0]["turn"].gold))
