"""The two-shape calibration benchmark's pure parts on a hand-made, LoCoMo-shaped sample."""

from __future__ import annotations

import math

import pytest

from engine.bench import gate_shapes
from engine.bench.gate_quality import OFF_TOPIC_TURNS
from engine.index.analysis import Analyzer
from engine.index.similarity import Calibration

SAMPLE = {
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bo",
        "session_1_date_time": "1 May 2023", "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "What is its name?"}],
        "session_2_date_time": "9 May 2023", "session_2": [
            {"speaker": "Bo", "dia_id": "D2:1", "text": "I started pottery classes."}],
    },
    "session_summary": {"session_1_summary": "Ann adopted a puppy.", "session_2_summary": "Bo took up pottery."},
    "qa": [{"question": "What pet did Ann adopt?", "evidence": ["D1:1"]},
           {"question": "What hobbies do they share?", "evidence": ["D1:2", "D2:1"]},
           {"question": "Unanswerable?", "evidence": []}],
}


def test_each_session_is_a_page_in_either_shape_with_the_imports_title() -> None:
    summaries = gate_shapes.pages_of([SAMPLE], "summary")
    transcripts = gate_shapes.pages_of([SAMPLE], "transcript")
    assert [p.text for p in summaries] == ["Ann and Bo, session 1 (1 May 2023)\n\nAnn adopted a puppy.",
                                           "Ann and Bo, session 2 (9 May 2023)\n\nBo took up pottery."]
    assert transcripts[0].text == ("Ann and Bo, session 1 (1 May 2023)\n\nD1:1 Ann: I adopted a puppy.\n"
                                   "D1:2 Bo: What is its name?")


def test_turns_carry_their_gold_pages_and_end_with_the_off_topic_turns() -> None:
    turns = gate_shapes.turns_of([SAMPLE], gate_shapes.pages_of([SAMPLE], "summary"))
    assert [(t.sample, t.gold) for t in turns[:3]] == [(0, frozenset({0})), (0, frozenset({0, 1})), (0, frozenset())]
    assert [t.message for t in turns[3:]] == list(OFF_TOPIC_TURNS) and len(OFF_TOPIC_TURNS) >= 100
    assert all(t.sample is None and not t.gold for t in turns[3:])


def test_keyword_shortlists_rank_by_bm25_and_hybrid_adds_the_nearest_pages() -> None:
    analyzer = Analyzer()
    bm25 = gate_shapes.Bm25(analyzer, ["puppy puppy adopted", "pottery classes", "the weather"])
    keyword = bm25.scores("adopted puppy")
    assert keyword[0] > 0 and keyword[1] == keyword[2] == 0
    import numpy as np
    assert gate_shapes.shortlist("keyword", keyword, keyword, np.zeros(3)) == [0]
    hybrid = gate_shapes.shortlist("hybrid", keyword, keyword, np.array([0.1, 0.9, 0.2]))
    assert hybrid[0] in (0, 1) and set(hybrid) == {0, 1, 2}


def rows() -> list[dict]:
    gold, off = gate_shapes.Turn(0, "q", frozenset({7})), gate_shapes.Turn(None, "hi", frozenset())
    return [{"turn": gold, "pages": [7, 8], "similarities": [0.9, 0.2], "passages": [1, 1], "starts": [0.9, 0.2]},
            {"turn": gold, "pages": [8, 7], "similarities": [0.3, 0.8], "passages": [1, 3], "starts": [0.3, 0.1]},
            {"turn": off, "pages": [8, 9], "similarities": [0.25, 0.2], "passages": [1, 1], "starts": [0.6, 0.2]}]


def test_figures_count_gold_pages_off_topic_turns_and_auc() -> None:
    calibration = Calibration(a=10.0, b=-5.0)
    f = gate_shapes.figures(rows(), calibration, thresholds=(0.5, 0.99))
    assert f["questions"] == 2 and f["offTopicTurns"] == 1 and f["gold"] == 2 and f["auc"] == 1.0
    at_half = f["thresholds"][0]
    assert (at_half["precision"], at_half["recall"], at_half["offTopic"]) == (1.0, 1.0, 0.0)
    assert math.isnan(f["thresholds"][1]["precision"]) and f["thresholds"][1]["recall"] == 0.0
    # the bounds: the best-scored page of each question is its gold one; two a turn halve the precision
    assert f["best"][:2] == [{"k": 1, "precision": 1.0, "recall": 1.0}, {"k": 2, "precision": 0.5, "recall": 1.0}]
    start = gate_shapes.figures(rows(), calibration, thresholds=(0.5,), page_start=True)["thresholds"][0]
    # by the pages' starts: page 7 of the second turn (0.1) is missed and the off-topic turn's 0.6 is injected
    assert (start["precision"], start["recall"], start["offTopic"]) == (1.0, 0.5, 1.0)


def test_the_fit_orders_gold_above_the_rest_and_the_threshold_needs_precision_on_every_shape() -> None:
    many = rows()[:2] * 5 + [{"turn": gate_shapes.Turn(0, "q", frozenset({8})), "pages": [7, 8],
                              "similarities": [0.5, 0.45], "passages": [1, 1], "starts": [0.5, 0.45]}]
    calibration = gate_shapes.fit(many)
    assert calibration.a + calibration.gap > 0
    high = gate_shapes.figures(many, calibration)
    low = {**high, "thresholds": [{**row, "precision": 0.5} for row in high["thresholds"]]}
    assert gate_shapes.chosen_threshold({"summary": high, "transcript": low}) is None
    chosen = gate_shapes.chosen_threshold({"summary": high, "transcript": high})
    assert chosen is not None
    row = next(r for r in high["thresholds"] if r["threshold"] == chosen)
    assert row["precision"] >= gate_shapes.TARGET_PRECISION
    with pytest.raises(ValueError):
        gate_shapes.fit(rows()[2:])
