"""The recall gate with an ``embedding/`` Decision model (the tiny embedding fixture through onnxruntime)."""

from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from engine.index.similarity import CALIBRATION, SimilarityScorer, page_passages
from engine.gate.turn import gate_turn
from engine.index.embedding import Embedder, text_digest
from engine.index.vectors import embedding_text
from engine.access.authority import AgentCaller
from engine.runtime import StoreRuntime
from engine.service import Engine
from engine.state.config import parse_settings
from engine.state.statedir import StateDir
from models.fixtures import TINY_EMBEDDER
from models.installed import ModelStore
from models.local import add_local
from tests.engine.gate_helpers import owner_caller, ready, seed
from tests.helpers import page

MESSAGE = "Who painted the mural at the museum?"
PAGE_TEXTS = {"Alice Martin": "Alice painted the museum mural in March.\n\nShe prefers tea to coffee and lives near "
                              "the harbour.",
              "Harbour museum": "The harbour museum shows the mural Alice painted.\n\nOpening hours: ten to six, "
                                "closed on Mondays."}


def open_embedding_engine(state: StateDir, gate: dict[str, Any], *, vectors: bool = False,
                          knowledge_runtime: bool | None = None) -> Engine:
    """An engine whose Decision model is ``embedding/encoder``; ``vectors`` also makes it the search's
    embedding model, so the store's vector index holds the same page vectors, and turns the Knowledge Base
    switch on unless ``knowledge_runtime`` says otherwise."""
    if not state.root.exists():
        state.create()
        add_local(ModelStore(state.models), TINY_EMBEDDER, name="encoder")
    config: dict[str, Any] = {"decisionModel": "embedding/encoder", "recallGate": gate,
                              "embeddingModel": "onnx/encoder" if vectors else None}
    if vectors if knowledge_runtime is None else knowledge_runtime:
        config["knowledgeRuntimeEnabled"] = True
    state.config.write_text(json.dumps(config), encoding="utf-8")
    engine = Engine(state, watch=False)
    ready(engine)
    return engine


def store_runtime(engine: Engine, caller: AgentCaller) -> StoreRuntime:
    return engine.runtime(engine.authorizer.authorize(caller).store)


@contextmanager
def switch_off_store(tmp_path: Path, gate: dict[str, Any]) -> Iterator[tuple[Engine, AgentCaller, dict[str, str],
                                                                             StoreRuntime]]:
    """The seeded store with ``gate``, the search's embedding model the Decision model's and the Knowledge Base
    switch off, once its vectors have followed every write the switch allows."""
    with open_embedding_engine(StateDir(tmp_path / "state"), gate, vectors=True, knowledge_runtime=False) as engine:
        assert not engine.settings.current().knowledge_runtime_enabled
        caller = owner_caller(engine)
        ids = seed(engine, caller)
        runtime = store_runtime(engine, caller)
        assert runtime.vectors_settled(60)
        yield engine, caller, ids, runtime


def scorer_of(engine: Engine) -> SimilarityScorer:
    scorer = engine.decision.page_scorer()
    assert scorer is not None
    return scorer


def expected_scores(state: StateDir, message: str, titles: list[str]) -> dict[str, float]:
    embedder = Embedder(ModelStore(state.models).get("encoder"))
    embedder.load()
    texts = [embedding_text(t, PAGE_TEXTS[t]) for t in titles]
    vectors = embedder.embed([message] + texts)
    scores = CALIBRATION.probabilities([float(np.dot(vectors[0], v)) for v in vectors[1:]], [1] * len(titles),
                                       message, texts)
    return dict(zip(titles, scores))   # short pages: one passage each, scored against the turn's other pages


def test_shadow_mode_scores_keyword_candidates_by_calibrated_similarity_of_the_page_text(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    with open_embedding_engine(state, {"mode": "shadow", "highThreshold": 0.001}) as engine:
        caller = owner_caller(engine)
        ids = seed(engine, caller)
        answer = gate_turn(engine, caller, {"message": "mural museum"})
    assert answer["outcome"] == "shadow" and answer["injected"] is None and answer["wouldInject"] == "injected"
    by_id = {d["id"]: d for d in answer["decisions"]}
    assert set(by_id) == {ids["Alice Martin"], ids["Harbour museum"]}
    title_of = {page: title for title, page in ids.items()}   # in shortlist order: a candidate's place is a feature
    expected = expected_scores(state, "mural museum", [title_of[d["id"]] for d in answer["decisions"]])
    for title, score in expected.items():
        assert by_id[ids[title]]["score"] == pytest.approx(score, abs=1e-5)
        assert by_id[ids[title]]["tier"] == ("high" if score >= 0.001 else "low")


def test_live_mode_injects_the_pages_at_or_above_high_threshold(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    with open_embedding_engine(state, {"mode": "shadow"}) as engine:
        caller = owner_caller(engine)
        ids = seed(engine, caller)
        shadow = {d["id"]: d["score"] for d in gate_turn(engine, caller, {"message": MESSAGE})["decisions"]}
        best = max(shadow, key=lambda page_id: shadow[page_id])
        ranked = sorted(shadow.values())
        raw = dict(engine.settings.current().raw)
        raw["recallGate"] = {"mode": "live", "highThreshold": round((ranked[-1] + ranked[-2]) / 2, 6)}
        engine.settings.save(parse_settings(raw))
        answer = gate_turn(engine, caller, {"message": MESSAGE})
    assert answer["outcome"] == "injected"
    assert [d["id"] for d in answer["decisions"] if d["tier"] == "high"] == [best]
    title = next(title for title, page_id in ids.items() if page_id == best)
    assert f"### {title} (id {best})" in answer["injected"]


def test_a_turn_whose_pages_were_scored_before_embeds_only_the_message(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    with open_embedding_engine(state, {"mode": "shadow"}) as engine:
        caller = owner_caller(engine)
        seed(engine, caller)
        scorer = scorer_of(engine)
        first = gate_turn(engine, caller, {"message": "mural museum"})
        after_first = scorer.embedded_texts
        assert after_first == 1 + len(first["decisions"])
        second = gate_turn(engine, caller, {"message": "who painted the mural in the museum"})
        third = gate_turn(engine, caller, {"message": "the museum mural"})
    assert {d["id"] for d in second["decisions"]} >= {d["id"] for d in first["decisions"]}
    new_pages = len({d["id"] for d in second["decisions"]} - {d["id"] for d in first["decisions"]})
    assert scorer.embedded_texts == after_first + 1 + new_pages + 1, "one embedding per turn once pages are known"
    assert third["outcome"] == "shadow"


def test_page_vectors_come_from_the_stores_vector_index_when_it_has_them(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    with open_embedding_engine(state, {"mode": "shadow"}, vectors=True) as engine:
        caller = owner_caller(engine)
        seed(engine, caller)
        runtime = engine.runtime(engine.authorizer.authorize(caller).store)
        assert runtime.vectors_settled(60)
        scorer = scorer_of(engine)
        answer = gate_turn(engine, caller, {"message": "mural museum"})
    assert len(answer["decisions"]) == 2 and all(d["score"] is not None for d in answer["decisions"])
    assert scorer.embedded_texts == 1, "the first turn embeds only the message"


def test_model_candidates_score_the_shortlisted_pages_by_similarity(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    with open_embedding_engine(state, {"mode": "shadow", "candidates": "model"}) as engine:
        caller = owner_caller(engine)
        seed(engine, caller)
        answer = gate_turn(engine, caller, {"message": MESSAGE})
    assert answer["outcome"] == "shadow"
    assert answer["decisions"] and all(0.0 <= d["score"] <= 1.0 for d in answer["decisions"])


# --- hybrid candidates ---------------------------------------------------------------------------------------


def test_hybrid_candidates_add_pages_that_share_no_word_with_the_message(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    with open_embedding_engine(state, {"mode": "shadow"}, vectors=True) as engine:
        caller = owner_caller(engine)
        ids = seed(engine, caller)
        assert engine.runtime(engine.authorizer.authorize(caller).store).vectors_settled(60)
        keyword = {d["id"] for d in gate_turn(engine, caller, {"message": "mural museum"})["decisions"]}
        raw = dict(engine.settings.current().raw)
        raw["recallGate"] = {"mode": "shadow", "candidates": "hybrid"}
        engine.settings.save(parse_settings(raw))
        scorer = scorer_of(engine)
        before = scorer.embedded_texts
        answer = gate_turn(engine, caller, {"message": "mural museum"})
    hybrid = [d["id"] for d in answer["decisions"]]
    assert keyword == {ids["Alice Martin"], ids["Harbour museum"]}
    # Every eligible page is among the nearest of four: the two without "mural" or "museum" join.
    assert set(hybrid) == keyword | {ids["Budget report"], ids["Gardening"]}
    assert not {ids["Mural scan"], ids["Interview transcript"]} & set(hybrid), "source and artifact never"
    assert hybrid[0] in keyword, "a page on both shortlists ranks first"
    assert all(d["score"] is not None for d in answer["decisions"])
    assert scorer.embedded_texts == before, "the message vector of the candidate step is reused"


def test_hybrid_without_an_embedding_model_is_the_keyword_shortlist_and_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    state = StateDir(tmp_path / "state")
    with open_embedding_engine(state, {"mode": "shadow", "candidates": "hybrid"}) as engine:
        caller = owner_caller(engine)
        ids = seed(engine, caller)
        with caplog.at_level(logging.INFO, logger="engine.gate.turn"):
            answer = gate_turn(engine, caller, {"message": "mural museum"})
    assert answer["outcome"] == "shadow"
    assert {d["id"] for d in answer["decisions"]} == {ids["Alice Martin"], ids["Harbour museum"]}
    assert answer["vectors"] == "not_configured"
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("knowledge recall gate:")]
    assert " candidates=hybrid " in line and " vectors=not_configured " in line


# --- the gate's vectors, whatever the Knowledge Base switch says ------------------------------------------------


def test_hybrid_candidates_build_the_stores_vectors_with_the_knowledge_base_switch_off(tmp_path: Path) -> None:
    with switch_off_store(tmp_path, {"mode": "shadow", "candidates": "hybrid"}) as (engine, caller, ids, runtime):
        indexed = runtime.call(lambda: runtime.vectors.count("private"))
        current = runtime.call(lambda: runtime.catalog.current_count("private"))
        answer = gate_turn(engine, caller, {"message": "mural museum"})
        again = gate_turn(engine, caller, {"message": "who painted the harbour mural"})
    assert indexed == current == 7
    assert answer["vectors"] == again["vectors"] == "ready", "a turn's own gate log row changes no record"
    assert {ids["Budget report"], ids["Gardening"]} <= {d["id"] for d in answer["decisions"]}, \
        "pages that share no word with the message come from the vectors"


def test_a_hybrid_turn_while_the_vectors_lag_the_store_says_they_are_building(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with switch_off_store(tmp_path, {"mode": "shadow", "candidates": "hybrid"}) as (engine, caller, _, runtime):
        before = gate_turn(engine, caller, {"message": "mural museum"})
        runtime.vector_feed.stop()   # nothing follows publications from here on
        added = engine.save_page(caller, page("p8", "Museum shop", "place", "The museum shop sells mural cards."))
        engine.search(caller, {"query": "museum"})
        with caplog.at_level(logging.INFO, logger="engine.gate.turn"):
            lagging = gate_turn(engine, caller, {"message": "mural museum"})
    assert before["vectors"] == "ready"
    assert lagging["outcome"] == "shadow" and lagging["vectors"] == "building"
    assert added["id"] in {d["id"] for d in lagging["decisions"]}, "the keyword side still finds the new page"
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("knowledge recall gate:")]
    assert " vectors=building " in line


def test_keyword_turns_do_not_report_vectors(tmp_path: Path) -> None:
    with switch_off_store(tmp_path, {"mode": "shadow"}) as (engine, caller, _, _):
        answer = gate_turn(engine, caller, {"message": "mural museum"})
    assert answer["outcome"] == "shadow" and "vectors" not in answer


def test_an_off_gate_builds_no_vectors_with_the_knowledge_base_switch_off(tmp_path: Path) -> None:
    with switch_off_store(tmp_path, {"mode": "off", "candidates": "hybrid"}) as (_, _, _, runtime):
        assert not runtime.vectors.path.exists()


@pytest.mark.parametrize("candidates", ["keyword", "hybrid"])
def test_the_first_turn_after_the_store_opens_embeds_only_the_message(tmp_path: Path, candidates: str) -> None:
    state = StateDir(tmp_path / "state")
    gate = {"mode": "shadow", "candidates": candidates}
    with open_embedding_engine(state, gate, vectors=True, knowledge_runtime=False) as engine:
        caller = owner_caller(engine)
        seed(engine, caller)
        assert store_runtime(engine, caller).vectors_settled(60)
    with open_embedding_engine(state, gate, vectors=True, knowledge_runtime=False) as engine:   # a fresh start
        assert store_runtime(engine, caller).vectors_settled(60)
        scorer = scorer_of(engine)
        first = gate_turn(engine, caller, {"message": "mural museum"})
        after_first = scorer.embedded_texts
        # A page that lands later is embedded off the turn too, before the next turn needs it.
        added = engine.save_page(caller, page("p8", "Museum shop", "place", "The museum shop sells mural cards."))
        assert store_runtime(engine, caller).vectors_settled(60)
        second = gate_turn(engine, caller, {"message": "museum mural shop"})
    assert len(first["decisions"]) >= 2 and all(d["score"] is not None for d in first["decisions"])
    assert added["id"] in {d["id"] for d in second["decisions"]}
    # keyword: the Decision model embeds the message; hybrid: the candidate step did, and handed it over.
    per_turn = 1 if candidates == "keyword" else 0
    assert after_first == per_turn, "the first turn embeds no page"
    assert scorer.embedded_texts == 2 * per_turn, "nor does a turn after a page landed"


def test_a_long_pages_passage_vectors_are_in_the_stores_vector_index_before_the_first_turn(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    body = " ".join(f"Alice talked about day {n} of the trip." for n in range(60)) + " The mural is at the museum."
    with open_embedding_engine(state, {"mode": "shadow"}, vectors=True, knowledge_runtime=False) as engine:
        caller = owner_caller(engine)
        seed(engine, caller)
        long = engine.save_page(caller, page("p9", "Trip diary", "note", body))
        assert store_runtime(engine, caller).vectors_settled(60)
        scorer = scorer_of(engine)
        passages = page_passages(embedding_text("Trip diary", body))
        assert len(passages) > 1
        stored = store_runtime(engine, caller).vectors.cached_vectors(scorer.fingerprint,
                                                                      [text_digest(t) for t in passages])
        answer = gate_turn(engine, caller, {"message": "mural museum"})
    assert len(stored) == len(passages)
    assert long["id"] in {d["id"] for d in answer["decisions"]}
    assert scorer.embedded_texts == 1, "the turn embeds the message alone, the long page's passages included"


def test_the_journal_keeps_the_start_of_each_scored_page(tmp_path: Path) -> None:
    from engine.access.authority import OperatorCaller
    from engine.gate.journal import journal_turns

    state = StateDir(tmp_path / "state")
    with open_embedding_engine(state, {"mode": "shadow", "journal": True, "pageChars": 200}) as engine:
        caller = owner_caller(engine)
        seed(engine, caller)
        engine.save_page(caller, {"requestId": "long", "type": "note", "title": "Museum annex",
                                  "body": "The museum annex holds the mural sketches. " * 40})
        engine.search(caller, {"query": "museum"})
        gate_turn(engine, caller, {"message": "mural museum"})
        kept = engine.on_store(OperatorCaller("main"), lambda rt, a: journal_turns(rt.store, a.partition, limit=1))
    documents = [page["document"] for page in kept[0]["pages"]]
    assert documents and all(len(document) <= 200 for document in documents)
    assert any(document.startswith("Museum annex\n\nThe museum annex") for document in documents)


@pytest.mark.parametrize("mode, current", [("shadow", 6), ("off", 7)])
def test_a_store_opened_with_the_gate_on_brings_its_catalog_up_to_date_before_any_turn(
        tmp_path: Path, mode: str, current: int) -> None:
    state = StateDir(tmp_path / "state")
    with open_embedding_engine(state, {"mode": mode}) as engine:
        caller = owner_caller(engine)
        seed(engine, caller)
        runtime = store_runtime(engine, caller)
        path = runtime.call(lambda: next(row.path for row in runtime.catalog.current("private", kind="page")
                                         if row.title == "Gardening"))
        root = runtime.store.partition_root("private")
    (root / path).unlink()   # while the engine is off
    with open_embedding_engine(state, {"mode": mode}) as engine:
        runtime = store_runtime(engine, caller)
        # A bare lane call: it syncs nothing itself, and runs after what the store's opening queued.
        counted = runtime.call(lambda: runtime.catalog.current_count("private"))
    assert counted == current


def test_switching_the_gate_to_hybrid_builds_the_open_stores_vectors(tmp_path: Path) -> None:
    with switch_off_store(tmp_path, {"mode": "shadow", "candidates": "model"}) as (engine, caller, _, runtime):
        assert not runtime.vectors.path.exists(), "model candidates read no vectors"
        raw = dict(engine.settings.current().raw)
        raw["recallGate"] = {"mode": "shadow", "candidates": "hybrid"}
        engine.settings.save(parse_settings(raw))   # queues every open store's vectors
        assert runtime.vectors_settled(60)
        indexed = runtime.call(lambda: runtime.vectors.count("private"))
        answer = gate_turn(engine, caller, {"message": "mural museum"})
    assert indexed == 7 and answer["vectors"] == "ready"


def test_a_pointer_line_is_checked_against_the_decision_models_threshold_when_none_is_written(tmp_path) -> None:
    from engine.core.errors import InvalidParams
    from engine.index.similarity import HIGH_THRESHOLD
    from engine.operator.gate_operator import handlers

    state = StateDir(tmp_path / "state")
    with open_embedding_engine(state, {"mode": "shadow"}) as engine:
        methods = handlers(engine)
        above = {"recallGate": {"mode": "shadow", "mediumThreshold": 0.7}}   # below the spec's 0.75, not 0.55
        checked = methods["checkGateSettings"](above)
        assert checked["valid"] is False and checked["field"] == "recallGate.mediumThreshold"
        assert f"below highThreshold, {HIGH_THRESHOLD:g} here" in checked["message"]
        with pytest.raises(InvalidParams):
            methods["setGateSettings"](above)
        assert json.loads(state.config.read_text(encoding="utf-8"))["recallGate"] == {"mode": "shadow"}
        below = {"recallGate": {"mode": "shadow", "mediumThreshold": HIGH_THRESHOLD - 0.1}}
        assert methods["checkGateSettings"](below)["valid"] is True
        owners = {"recallGate": {"mode": "shadow", "highThreshold": 0.8, "mediumThreshold": 0.7}}
        assert methods["checkGateSettings"](owners)["valid"] is True   # the owner's own threshold wins
