"""The embedding Decision model scores a page by its best passage, calibrated within the turn; the default
``highThreshold`` follows the Decision model in force."""

from __future__ import annotations

import math
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Sequence

import numpy as np
import pytest

from engine.gate.turn import in_force
from engine.index import similarity
from engine.index.embedding import RunSettings, text_digest
from engine.index.similarity import (
    HIGH_THRESHOLD, PASSAGE_STRIDE, PASSAGE_WORDS, SINGLE_PASSAGE_WORDS, Calibration, SimilarityScorer,
    page_passages,
)
from engine.state.gate_settings import GateSettings, parse_gate_settings
from models.fixtures import TINY_EMBEDDER
from models.installed import ModelStore
from models.local import add_local

TITLE = "Alice and Bob, session 3 (8 May 2023)"
CALIBRATION = Calibration(a=2.0, b=-3.0, gap=10.0, passages=0.5)


def long_page(words: int, needle_at: int | None = None) -> str:
    body = [f"w{position}" for position in range(words)]
    if needle_at is not None:
        body[needle_at] = "needle"
    return f"{TITLE}\n\n" + " ".join(body)


class KeywordEmbedder:
    """Unit vectors that say whether a text holds ``needle`` (and nothing else): a fake, deterministic model."""

    dimensions = 2

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str], *, stop: Callable[[], bool] | None = None) -> np.ndarray:
        self.seen += list(texts)
        return np.array([[1.0, 0.0] if "needle" in text.split() else [0.6, 0.8] for text in texts], np.float32)


@pytest.fixture
def scorer(tmp_path: Path) -> SimilarityScorer:
    store = ModelStore(tmp_path / "models")
    scorer = SimilarityScorer(add_local(store, TINY_EMBEDDER, name="encoder"), CALIBRATION)
    scorer.embedder = KeywordEmbedder()  # type: ignore[assignment]
    return scorer


def test_a_short_page_is_one_passage_its_whole_text() -> None:
    text = long_page(SINGLE_PASSAGE_WORDS)
    assert page_passages(text) == [text]
    assert page_passages("no title, a few words") == ["no title, a few words"]


def test_a_long_page_is_cut_into_titled_passages_that_cover_every_word() -> None:
    words = SINGLE_PASSAGE_WORDS + 300
    passages = page_passages(long_page(words))
    assert len(passages) > 1 and all(p.startswith(f"{TITLE}\n\n") for p in passages)
    bodies = [p.split("\n\n", 1)[1].split() for p in passages]
    assert all(len(body) <= PASSAGE_WORDS for body in bodies)
    assert {word for body in bodies for word in body} == {f"w{position}" for position in range(words)}
    assert bodies[1][0] == f"w{PASSAGE_STRIDE}"
    assert page_passages(long_page(words)) == passages, "the cut does not depend on anything but the text"


def test_probabilities_read_each_candidate_against_the_best_of_the_others() -> None:
    alone = CALIBRATION.probabilities([0.5], [1])
    assert alone == [pytest.approx(1 / (1 + math.exp(-(2.0 * 0.5 + 10.0 * 0.5 - 3.0))))]
    pair = CALIBRATION.probabilities([0.5, 0.4], [1, 4])
    lead, behind = 2.0 * 0.5 + 10.0 * 0.1 - 3.0, 2.0 * 0.4 - 10.0 * 0.1 + 0.5 * math.log(4) - 3.0
    assert pair == [pytest.approx(1 / (1 + math.exp(-lead))), pytest.approx(1 / (1 + math.exp(-behind)))]
    tied = CALIBRATION.probabilities([0.3, 0.3, 0.3], [1, 1, 1])
    assert tied[0] == tied[1] == tied[2] < alone[0]


def test_a_long_page_scores_by_its_best_passage_not_its_start(scorer: SimilarityScorer) -> None:
    late = long_page(SINGLE_PASSAGE_WORDS + 400, needle_at=SINGLE_PASSAGE_WORDS + 390)
    without = long_page(SINGLE_PASSAGE_WORDS + 400)
    scores = scorer.score_pairs("needle", [late, without], deadline=time.monotonic() + 60).scores
    passages = len(page_passages(late))
    assert scores == [pytest.approx(CALIBRATION.probability(1.0, 1.0 - 0.6, passages)),
                      pytest.approx(CALIBRATION.probability(0.6, 0.6 - 1.0, passages))]


def test_passage_vectors_are_kept_and_named_by_their_digests(scorer: SimilarityScorer) -> None:
    page = long_page(SINGLE_PASSAGE_WORDS + 200, needle_at=5)
    digests = scorer.digests([page, page])
    assert digests == [text_digest(text) for text in page_passages(page)]
    scorer.score_pairs("needle", [page], deadline=time.monotonic() + 60)
    assert scorer.known(digests) == set(digests)
    embedder = scorer.embedder
    assert isinstance(embedder, KeywordEmbedder)
    embedded = len(embedder.seen)
    scorer.score_pairs("needle", [page], deadline=time.monotonic() + 60)
    assert len(embedder.seen) == embedded + 1, "a second turn embeds only the message"


def test_a_turn_past_its_deadline_scores_the_pages_embedded_by_then_and_keeps_their_vectors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The passages not seen before are embedded batch by batch until the deadline: the turn is never later than
    the batch in progress (a fresh import's long pages once took a turn 15 s past its 1.5 s budget)."""
    scorer = SimilarityScorer(add_local(ModelStore(tmp_path / "models"), TINY_EMBEDDER, name="encoder"))
    scorer.load()
    monkeypatch.setattr(scorer.embedder, "settings", RunSettings(rows=1))  # a batch a text
    clock = [0.0]
    runs: list[int] = []
    model_run = scorer.embedder._run

    def timed_run(rows: Sequence[Sequence[int]]) -> np.ndarray:
        runs.append(len(rows))
        clock[0] += 1.0  # each run of the model takes a second of the turn's clock
        return model_run(rows)

    monkeypatch.setattr(scorer.embedder, "_run", timed_run)
    monkeypatch.setattr(similarity, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    short = ["Alice painted the museum piece in March.", "Bruno brewed ginger beer.", "The team ate pizza."]
    long = long_page(SINGLE_PASSAGE_WORDS + 400, needle_at=10)  # three passages, each longer than the pages above
    scores = scorer.score_pairs("Who painted the museum piece?", [*short, long], deadline=3.5).scores
    assert len(runs) == 4  # the message and three texts by the deadline; the fourth run's start was past it
    assert [score is not None for score in scores] == [True, True, True, False]
    assert scorer.known(scorer.digests(short)) == set(scorer.digests(short))  # kept: the next turn is quicker
    again = scorer.score_pairs("Who painted the museum piece?", short, deadline=clock[0] + 10).scores
    assert len(runs) == 5 and again == pytest.approx(scores[:3])  # only the message is run again


def test_without_the_owners_high_threshold_the_embedding_model_brings_its_own() -> None:
    unset = parse_gate_settings({"mode": "shadow"})
    assert unset is not None and not unset.high_threshold_set
    assert "highThreshold" not in unset.to_config()
    embedding = SimpleNamespace(page_scorer=lambda: SimpleNamespace(default_high_threshold=HIGH_THRESHOLD))
    reranker = SimpleNamespace(page_scorer=lambda: None)
    ran = in_force(unset, embedding)  # type: ignore[arg-type]
    assert ran.high_threshold == HIGH_THRESHOLD and ran.to_config()["highThreshold"] == HIGH_THRESHOLD
    assert in_force(unset, reranker).high_threshold == GateSettings().high_threshold == 0.75  # type: ignore[arg-type]
    owner = parse_gate_settings({"mode": "shadow", "highThreshold": 0.3})
    assert owner is not None and owner.to_config()["highThreshold"] == 0.3
    assert in_force(owner, embedding).high_threshold == 0.3  # type: ignore[arg-type]


def test_the_word_features_come_from_the_pages_terms_kept_by_digest(scorer: SimilarityScorer) -> None:
    pages = ["Harbour\n\nAlice found the needle in the harbour.", "Market\n\nBob lost w1 at the market."]
    words = Calibration(a=0.0, b=0.0, overlap=4.0, names=2.0)   # the words alone decide
    scorer.calibration = words
    first = scorer.score_pairs("Where did Alice find the needle?", pages, deadline=time.monotonic() + 60).scores
    assert set(scorer._terms) == {text_digest(page) for page in pages}
    again = scorer.score_pairs("Where did Alice find the needle?", pages, deadline=time.monotonic() + 60).scores
    assert again == first and first[0] > 0.5 == first[1], "the page with the message's words and name, only"
    assert first == pytest.approx(words.probabilities([1.0, 0.6], [1, 1], "Where did Alice find the needle?", pages))
