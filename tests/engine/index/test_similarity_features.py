"""The embedding Decision model's turn features and the calibrated score over them, on small hand-made turns."""

from __future__ import annotations

import math

import pytest

from engine.index.similarity import (
    CALIBRATION, COEFFICIENTS, Calibration, Features, message_names, turn_features,
)

PAGES = ["Ann and Bo, session 1\n\nAnn adopted a puppy named Rex at the shelter.",
         "Ann and Bo, session 2\n\nBo started pottery classes at the shelter.",
         "Cy and Di, session 1\n\nCy painted a sunrise."]


def test_names_are_capitalised_words_inside_a_sentence_without_function_words() -> None:
    assert message_names("What did Caroline's mother tell Mel about Paris?") == {"caroline", "mel", "paris"}
    assert message_names("Caroline went home. Then Mel called.") == {"mel"}, "a sentence's first word is no name"
    assert message_names("Yes, exactly.") == set() and message_names("Hi again! How are you?") == set()
    assert message_names("did I tell you about The thing?") == set(), "function words are never names"


def test_similarity_features_read_each_candidate_against_the_turn() -> None:
    f = turn_features([0.5, 0.3, 0.1], [1, 4, 1])
    assert [round(x.lead, 6) for x in f] == [0.2, -0.2, -0.4]
    assert [round(x.below, 6) for x in f] == [0.0, 0.2, 0.4]
    assert [round(x.spread, 6) for x in f] == [0.2, 0.0, -0.2]
    assert [x.rank for x in f] == [0.0, math.log1p(1), math.log1p(2)], "the shortlist's order, not the similarities'"
    assert f[1].log_passages == math.log(4) and f[0].log_passages == 0.0
    assert all(x.overlap == 0.0 and x.names == 0.0 for x in f), "no texts: no word features"
    alone = turn_features([0.5], [1])[0]
    assert (alone.lead, alone.below, alone.spread) == (0.5, 0.0, 0.0)


def test_overlap_weights_words_by_their_rarity_in_the_turn_and_names_by_share() -> None:
    f = turn_features([0.4, 0.4, 0.4], [1, 1, 1], "What puppy did Ann adopt at the shelter?", PAGES)
    # content terms: puppy and adopt (page 1 only: log(4/2) each), ann (pages 1-2: log(4/3)), shelter (1-2)
    rare, shared = math.log(4 / 2), math.log(4 / 3)
    total = 2 * rare + 2 * shared
    assert f[0].overlap == pytest.approx(1.0)
    assert f[1].overlap == pytest.approx(2 * shared / total)
    assert f[2].overlap == 0.0
    assert [x.names for x in f] == [1.0, 1.0, 0.0], "Ann is in both pages of Ann and Bo"
    everywhere = turn_features([0.4, 0.4], [1, 1], "Tell me about the session", PAGES[:2])
    assert [x.overlap for x in everywhere] == [0.0, 0.0], "a word every candidate holds says nothing"
    single = turn_features([0.4], [1], "puppy", PAGES[:1])
    assert single[0].overlap == 0.0, "a page alone: no rarity within the turn"


def test_the_score_is_the_logistic_of_the_weighted_features() -> None:
    c = Calibration(a=1.0, gap=2.0, below=-1.0, spread=0.5, passages=0.1, rank=-0.5, overlap=3.0, names=1.5, b=-2.0)
    f = Features(0.5, 0.1, 0.0, 0.2, math.log(2), math.log(2), 0.5, 1.0)
    z = 0.5 + 0.2 + 0.0 + 0.1 + 0.1 * math.log(2) - 0.5 * math.log(2) + 1.5 + 1.5 - 2.0
    assert c.score(f) == pytest.approx(1 / (1 + math.exp(-z)))
    assert c.score(f._replace(overlap=0.9)) > c.score(f) > c.score(f._replace(names=0.0))
    assert list(c.coefficients()) == list(COEFFICIENTS) and len(COEFFICIENTS) == len(Features._fields) + 1
    turn = c.probabilities([0.5, 0.3], [1, 1], "What puppy did Ann adopt?", PAGES[:2])
    assert turn == [c.score(x) for x in turn_features([0.5, 0.3], [1, 1], "What puppy did Ann adopt?", PAGES[:2])]
    assert c.score(Features(-50.0, 0, 0, 0, 0, 0, 0, 0)) == pytest.approx(0.0) and \
        c.score(Features(50.0, 0, 0, 0, 0, 0, 0, 0)) == pytest.approx(1.0)


def test_the_committed_calibration_rewards_what_marks_the_answer_page() -> None:
    base = turn_features([0.5, 0.4, 0.3], [1, 1, 1])
    scores = [CALIBRATION.score(f) for f in base]
    assert scores[0] > scores[1] > scores[2], "with the words alike, the more similar and higher placed page wins"
    raised = [CALIBRATION.score(f) for f in turn_features([0.5, 0.45, 0.3], [1, 1, 1])]
    assert raised[1] > scores[1], "a page's own similarity raises it"
    first = base[0]
    assert CALIBRATION.score(first._replace(overlap=1.0)) > CALIBRATION.score(first)
    assert CALIBRATION.score(first._replace(names=1.0)) > CALIBRATION.score(first)
    assert CALIBRATION.score(first._replace(rank=math.log(5))) < CALIBRATION.score(first)
