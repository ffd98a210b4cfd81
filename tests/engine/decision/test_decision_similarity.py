"""The ``embedding`` Decision provider: calibrated similarity on the tiny embedding fixture through onnxruntime."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from engine.core.errors import InvalidParams
from engine.decision.runtime import BooleanQuestion, DecisionRuntime
from engine.index.similarity import CALIBRATION, DECISION_LOADERS, Calibration, SimilarityScorer
from engine.index.embedding import Embedder, text_digest
from engine.state.config import Settings, parse_settings
from models.fixtures import TINY_EMBEDDER, TINY_RERANKER
from models.installed import ModelStore
from models.local import add_local

QUERY = "who painted the museum mural"
DOCUMENTS = ["Alice Martin\n\nAlice painted the museum mural in March.",
             "Budget report\n\nThe quarterly budget report is due on Friday.",
             "Gardening\n\nRoses need pruning in late winter."]


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    store = ModelStore(tmp_path / "models")
    add_local(store, TINY_EMBEDDER, name="encoder")
    add_local(store, TINY_RERANKER, name="tiny")
    return store


@pytest.fixture
def runtime(store: ModelStore) -> Iterator[DecisionRuntime]:
    runtime = DecisionRuntime(lambda: Settings(decision_model="embedding/encoder"), store, loaders=DECISION_LOADERS)
    assert runtime.wait_ready(60).state == "ready", runtime.status()
    yield runtime
    runtime.close()


def later(seconds: float = 30.0) -> float:
    return time.monotonic() + seconds


# --- the calibration ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("calibration", [Calibration(3.0, 1.0), Calibration(25.0, -14.0), Calibration(1.3, -1.9, 15.9)])
def test_the_calibration_maps_similarity_monotonically_into_0_1(calibration: Calibration) -> None:
    similarities = np.linspace(-1.0, 1.0, 201)
    probabilities = [calibration.probability(float(s)) for s in similarities]
    assert all(0.0 <= p <= 1.0 for p in probabilities)
    assert all(later > earlier for earlier, later in zip(probabilities, probabilities[1:]))
    assert calibration.probability(-calibration.b / calibration.a) == pytest.approx(0.5)
    for similarity in (-0.5, 0.0, 0.3, 0.9):  # standing out of the shortlist raises a page, never lowers it
        standing_out = calibration.probability(similarity, lead=0.2)
        assert standing_out > calibration.probability(similarity) if calibration.gap > 0 else \
            standing_out == calibration.probability(similarity)


def test_the_committed_calibration_raises_a_page_with_its_own_similarity() -> None:
    for similarity in (0.1, 0.3, 0.5):   # the other candidate at 0.3, the words alike
        lower, higher = (CALIBRATION.probabilities([s, 0.3], [1, 1])[0] for s in (similarity, similarity + 0.05))
        assert higher > lower and math.isfinite(CALIBRATION.b)


# --- selecting it ------------------------------------------------------------------------------------------


def test_decision_model_accepts_embedding_names_and_refuses_malformed_ones() -> None:
    assert parse_settings({"decisionModel": "embedding/all-minilm-l6-v2-int8"}).decision_model == \
        "embedding/all-minilm-l6-v2-int8"
    for bad in ("embedding/", "embedding/two words", "embedding/a/b", "embeddings/x", "embedding"):
        with pytest.raises(InvalidParams) as caught:
            parse_settings({"decisionModel": bad})
        assert "embedding/<model>" in caught.value.message


def test_a_reranker_selected_as_an_embedding_model_fails_with_the_reason(store: ModelStore) -> None:
    runtime = DecisionRuntime(lambda: Settings(decision_model="embedding/tiny"), store, loaders=DECISION_LOADERS)
    try:
        status = runtime.wait_ready(60)
    finally:
        runtime.close()
    assert status.state == "failed" and "not an embedding model" in (status.reason or "")


def test_an_embedding_model_that_is_not_installed_fails_at_once(store: ModelStore) -> None:
    runtime = DecisionRuntime(lambda: Settings(decision_model="embedding/missing"), store, loaders=DECISION_LOADERS)
    status = runtime.status()
    assert status.state == "failed" and "missing" in (status.reason or "")


# --- scoring -----------------------------------------------------------------------------------------------


def test_a_runtime_without_the_embedding_loader_refuses_embedding_models(store: ModelStore) -> None:
    status = DecisionRuntime(lambda: Settings(decision_model="embedding/encoder"), store).status()
    assert status.state == "failed" and "not served" in (status.reason or "")


def test_probability_true_is_the_calibrated_cosine_similarity(runtime: DecisionRuntime, store: ModelStore) -> None:
    result = runtime.ask_boolean(QUERY, [BooleanQuestion(d, str(i)) for i, d in enumerate(DOCUMENTS)],
                                 deadline=later())
    embedder = Embedder(store.get("encoder"))
    embedder.load()
    vectors = embedder.embed([QUERY, *DOCUMENTS])
    # Each short page is one passage; each is calibrated against the best of the turn's other pages.
    expected = CALIBRATION.probabilities([float(np.dot(vectors[0], v)) for v in vectors[1:]], [1, 1, 1], QUERY,
                                         DOCUMENTS)
    assert [a.probability_true for a in result.answers] == pytest.approx(expected, abs=1e-5)
    assert [a.key for a in result.answers] == ["0", "1", "2"] and result.unscored == ()
    assert [a.value for a in result.answers] == [p >= 0.5 for p in expected]
    assert runtime.tokens_per_second() is None, "no throughput model: the gate sends whole documents"


def test_page_vectors_are_kept_so_a_repeated_page_costs_no_embedding(runtime: DecisionRuntime) -> None:
    scorer = runtime.page_scorer()
    assert isinstance(scorer, SimilarityScorer)
    questions = [BooleanQuestion(d, str(i)) for i, d in enumerate(DOCUMENTS)]
    first = runtime.ask_boolean(QUERY, questions, deadline=later())
    assert scorer.embedded_texts == 1 + len(DOCUMENTS)
    second = runtime.ask_boolean("another message about the mural", questions[:2], deadline=later())
    assert scorer.embedded_texts == 1 + len(DOCUMENTS) + 1, "only the message is embedded"
    again = runtime.ask_boolean(QUERY, questions, deadline=later())
    assert [a.probability_true for a in again.answers] == pytest.approx([a.probability_true for a in first.answers])
    assert len(second.answers) == 2


def test_remembered_vectors_are_used_instead_of_embedding_the_page(runtime: DecisionRuntime) -> None:
    scorer = runtime.page_scorer()
    assert scorer is not None
    dimensions = scorer.embedder.dimensions
    pointing = np.zeros(dimensions, dtype=np.float32)
    pointing[0] = 1.0
    scorer.remember({text_digest(DOCUMENTS[0]): pointing.tobytes(),
                     text_digest(DOCUMENTS[1]): np.ones(3, dtype=np.float32).tobytes()})  # wrong size: ignored
    assert scorer.known([text_digest(d) for d in DOCUMENTS]) == {text_digest(DOCUMENTS[0])}
    result = runtime.ask_boolean(QUERY, [BooleanQuestion(DOCUMENTS[0], "a")], deadline=later())
    message = scorer.embedder.embed([QUERY])[0]
    alone = CALIBRATION.probabilities([float(message[0])], [1])[0]  # alone in its turn: it leads by itself
    assert result.answers[0].probability_true == pytest.approx(alone, abs=1e-5)
    assert scorer.embedded_texts == 1


def test_the_vector_cache_is_bounded(store: ModelStore) -> None:
    scorer = SimilarityScorer(store.get("encoder"), cache_size=2)
    scorer.load()
    scorer.score_pairs(QUERY, DOCUMENTS, deadline=later())
    assert scorer.known([text_digest(d) for d in DOCUMENTS]) == {text_digest(d) for d in DOCUMENTS[1:]}


def test_nothing_is_embedded_once_the_deadline_has_passed(runtime: DecisionRuntime) -> None:
    scorer = runtime.page_scorer()
    assert scorer is not None
    result = runtime.ask_boolean(QUERY, [BooleanQuestion(DOCUMENTS[0], "a")], deadline=time.monotonic() - 1)
    assert result.answers == () and result.unscored == ("a",) and scorer.embedded_texts == 0
