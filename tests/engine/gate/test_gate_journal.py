"""The gate log, the opt-in shadow journal and the operator's gate methods (labels, what-if, replay)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.access.authority import AgentCaller
from engine.core.errors import InvalidParams, NotFound
from engine.gate.turn import gate_turn
from engine.gate.journal import what_if
from engine.operator.gate_operator import handlers
from engine.service import Engine
from engine.index.similarity import HIGH_THRESHOLD
from models.fixtures import TINY_EMBEDDER, TINY_RERANKER
from models.installed import ModelStore
from models.local import add_local
from tests.engine.gate_helpers import FakeRerank, conversation_audience, owner_caller, rerank_engine, seed, write_config

SCORES = {"Alice Martin": 0.9, "Harbour museum": 0.6, "Budget report": 0.2}


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Engine, FakeRerank, dict[str, Any]]]:
    with rerank_engine(tmp_path, SCORES, {"mode": "shadow", "journal": True}) as (engine, fake):
        yield engine, fake, handlers(engine)


def configure(engine: Engine, fake: FakeRerank, gate: dict[str, Any]) -> None:
    write_config(engine.state, gate, model="rerank/test", base_url=fake.url)


def test_the_journal_keeps_message_text_only_for_opted_in_owner_private_shadow_turns(setup, caplog) -> None:
    engine, fake, methods = setup
    caller = owner_caller(engine)
    ids = seed(engine, caller)
    engine.registry.set_grant("main", "chat:1", "read")
    with caplog.at_level(logging.DEBUG):
        gate_turn(engine, caller, {"message": "owner asks about mural museum"})
        gate_turn(engine, AgentCaller(caller.token, conversation_audience()),
                  {"message": "granted chat asks about the mural"})
        configure(engine, fake, {"mode": "live", "journal": True})
        gate_turn(engine, caller, {"message": "live turn about the mural"})
        configure(engine, fake, {"mode": "shadow"})
        gate_turn(engine, caller, {"message": "journal off, mural again"})
    log = methods["gateLog"]({"agent": "main"})
    assert log["total"] == 4 and all("message" not in t for t in log["turns"])
    assert [t["audience"] for t in log["turns"]] == ["owner-private", "owner-private", "conversation",
                                                      "owner-private"]
    journal = methods["gateJournal"]({"agent": "main"})
    assert journal["total"] == 1
    kept = journal["turns"][0]
    assert kept["message"] == "owner asks about mural museum"
    assert {p["id"]: p["title"] for p in kept["pages"]} == {ids["Alice Martin"]: "Alice Martin",
                                                            ids["Harbour museum"]: "Harbour museum"}
    assert kept["pages"][0]["document"].startswith(kept["pages"][0]["title"] + "\n")
    assert {d["id"]: d["tier"] for d in kept["decisions"]} == {ids["Alice Martin"]: "high",
                                                               ids["Harbour museum"]: "low"}
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "owner asks" not in logged and "granted chat" not in logged, "the journal never reaches the log"


def test_labels_what_if_and_a_suggested_threshold(setup) -> None:
    engine, fake, methods = setup
    caller = owner_caller(engine)
    ids = seed(engine, caller)
    messages = ["mural museum", "museum mural", "the mural", "a museum", "budget report museum", "budget mural"]
    for message in messages:
        gate_turn(engine, caller, {"message": message})
    turns = methods["gateJournal"]({"agent": "main"})["turns"]
    assert len(turns) == 6
    for kept in turns:
        alice_offered = any(d["id"] == ids["Alice Martin"] for d in kept["decisions"])
        needed = [ids["Alice Martin"]] if alice_offered else []
        labelled = methods["labelGateTurn"]({"agent": "main", "turn": kept["id"], "needed": needed})
        assert labelled["needed"] == needed and labelled["labelledAt"]
    table = methods["gateWhatIf"]({"agent": "main", "thresholds": [0.5, 0.8, 0.95], "threshold": 0.8})
    rows = {row["threshold"]: row for row in table["thresholds"]}
    assert table["labelled"] == 6
    # At 0.8 only Alice (0.9) is injected: exactly the labelled pages, wherever Alice was a candidate.
    assert rows[0.8]["precision"] == 1.0 and rows[0.8]["recall"] == 1.0
    assert rows[0.5]["precision"] < 1.0, "Harbour museum (0.6) was never needed"
    assert rows[0.95]["pagesInjected"] == 0 and rows[0.95]["recall"] == 0.0
    assert table["suggested"]["threshold"] == 0.8
    assert {t["id"]: t["inject"] for t in table["detail"]["turns"]} == {t["id"]: t["needed"] for t in
                                                                         table["detail"]["turns"]}
    with pytest.raises(NotFound):
        methods["labelGateTurn"]({"agent": "main", "turn": "gt_nope", "needed": []})
    with pytest.raises(InvalidParams):
        methods["labelGateTurn"]({"agent": "main", "turn": turns[0]["id"], "needed": ["not an id"]})


def test_no_suggestion_without_enough_labels() -> None:
    turn = {"id": "gt_1", "decisions": [{"id": "pg_1", "score": 0.9, "tier": "high"}], "needed": ["pg_1"]}
    table = what_if([turn], [0.5])
    assert table["suggested"]["threshold"] is None and "label at least 5" in table["suggested"]["reason"]
    assert table["thresholds"][0]["precision"] == 1.0


def test_what_if_bins_the_journal_scores_by_label() -> None:
    turns = [
        {"id": "gt_1", "needed": ["pg_a"], "decisions": [{"id": "pg_a", "score": 0.91}, {"id": "pg_b", "score": 0.3},
                                                         {"id": "pg_c", "score": None, "tier": "unscored"}]},
        {"id": "gt_2", "needed": None, "decisions": [{"id": "pg_a", "score": 0.95}, {"id": "pg_b", "score": 1.0}]},
        {"id": "gt_3", "needed": [], "decisions": [{"id": "pg_b", "score": 0.0}]},
        {"id": "gt_4", "stage": "candidates", "needed": None, "decisions": [{"id": "pg_a", "score": 0.5}]},
    ]
    bins = what_if(turns, [0.5])["scores"]
    assert len(bins) == 20 and bins[0]["from"] == 0.0 and bins[-1]["to"] == 1.0
    counted = {n: {k: v for k, v in b.items() if k not in ("from", "to") and v} for n, b in enumerate(bins)}
    assert {n: c for n, c in counted.items() if c} == {
        0: {"notNeeded": 1}, 6: {"notNeeded": 1}, 18: {"needed": 1}, 19: {"unlabelled": 2}}, \
        "a score of 1.0 falls in the last bin; unscored pages and turns stopped before scoring count nowhere"


def test_clearing_the_journal_forgets_every_message(setup) -> None:
    engine, _, methods = setup
    caller = owner_caller(engine)
    seed(engine, caller)
    gate_turn(engine, caller, {"message": "mural museum"})
    assert methods["clearGateJournal"]({"agent": "main"}) == {"cleared": 1}
    assert methods["gateJournal"]({"agent": "main"})["total"] == 0
    assert methods["gateLog"]({"agent": "main"})["total"] == 1


def test_replay_against_another_setting_and_another_model(setup) -> None:
    engine, fake, methods = setup
    caller = owner_caller(engine)
    ids = seed(engine, caller)
    gate_turn(engine, caller, {"message": "mural museum"})
    kept = methods["gateJournal"]({"agent": "main"})["turns"][0]
    methods["labelGateTurn"]({"agent": "main", "turn": kept["id"], "needed": [ids["Alice Martin"]]})
    sent = len(fake.requests)
    replay = methods["gateReplay"]({"agent": "main", "recallGate": {"highThreshold": 0.5}})
    assert replay["settings"]["highThreshold"] == 0.5 and replay["model"] == "rerank/test"
    result = replay["turns"][0]
    assert result["original"] == kept["decisions"]
    assert set(result["inject"]) == {ids["Alice Martin"], ids["Harbour museum"]}
    assert replay["whatIf"]["precision"] == 0.5 and replay["whatIf"]["recall"] == 1.0
    assert len(fake.requests) == sent + 1
    assert methods["gateJournal"]({"agent": "main"})["total"] == 1, "a replay is not journaled"

    add_local(ModelStore(engine.state.models), TINY_RERANKER, name="tiny2")
    other = methods["gateReplay"]({"agent": "main", "turns": [kept["id"]], "decisionModel": "onnx/tiny2"})
    assert other["model"] == "onnx/tiny2" and len(fake.requests) == sent + 1
    assert all(0.0 < d["score"] < 1.0 for d in other["turns"][0]["decisions"])
    assert engine.settings.current().decision_model == "rerank/test", "the engine's own model is untouched"
    # No highThreshold in the block: each replayed model's own is in force (the spec's 0.75 for a reranker).
    assert other["settings"]["highThreshold"] == 0.75
    add_local(ModelStore(engine.state.models), TINY_EMBEDDER, name="enc")
    embedded = methods["gateReplay"]({"agent": "main", "turns": [kept["id"]], "decisionModel": "embedding/enc"})
    assert embedded["settings"]["highThreshold"] == HIGH_THRESHOLD
    with pytest.raises(NotFound):
        methods["gateReplay"]({"agent": "main", "turns": ["gt_missing"]})


def test_gate_settings_read_check_and_write(setup) -> None:
    engine, _, methods = setup
    current = methods["gateSettings"]({})
    assert current["recallGate"] == {"mode": "shadow", "journal": True}
    assert current["effective"]["mode"] == "shadow" and current["effective"]["timeoutMs"] == 1500
    assert current["effective"]["highThreshold"] == 0.75, "the threshold in force, though the block sets none"
    assert current["decisionModel"] == "rerank/test" and current["decision"]["state"] == "ready"
    assert methods["checkGateSettings"]({"recallGate": {"pageChars": 10}}) == {
        "valid": False, "message": "recallGate.pageChars must be an integer from 200 to 6,000",
        "field": "recallGate.pageChars"}
    assert methods["checkGateSettings"]({"recallGate": {"mode": "live"}})["effective"]["mode"] == "live"
    written = methods["setGateSettings"]({"recallGate": {"mode": "live", "mediumThreshold": 0.5}})
    assert written["effective"]["mediumThreshold"] == 0.5
    on_disk = json.loads(engine.state.config.read_text(encoding="utf-8"))
    assert on_disk["recallGate"] == {"mode": "live", "mediumThreshold": 0.5}
    assert on_disk["decisionModel"] == "rerank/test", "other settings are kept"
    with pytest.raises(InvalidParams):
        methods["setGateSettings"]({"recallGate": {"mode": "loud"}})
    assert json.loads(engine.state.config.read_text(encoding="utf-8"))["recallGate"]["mode"] == "live"
    assert methods["setGateSettings"]({"recallGate": None})["effective"] is None
    assert "recallGate" not in json.loads(engine.state.config.read_text(encoding="utf-8"))


PAGE_IDS = st.sampled_from([f"pg_{n}" for n in range(6)])
DECISION = st.fixed_dictionaries({"id": PAGE_IDS, "score": st.one_of(
    st.none(), st.sampled_from([0.0, 0.5, 1.0]), st.floats(0, 1, allow_nan=False))})
TURN = st.fixed_dictionaries({"decisions": st.lists(DECISION, max_size=6),
                              "needed": st.one_of(st.none(), st.lists(PAGE_IDS, max_size=3, unique=True)),
                              "stage": st.sampled_from([None, None, None, "candidates"])})


@settings(max_examples=200, deadline=None)
@given(st.lists(TURN, max_size=25), st.lists(st.sampled_from([0.0, 0.05, 0.5, 0.66, 0.95, 1.0]), min_size=1))
def test_what_if_counts_as_the_definition_says(turns, thresholds) -> None:
    for number, turn in enumerate(turns):
        turn["id"] = f"gt_{number}"
    table = what_if(turns, thresholds)
    scored = [t for t in turns if t["stage"] is None]
    for row in table["thresholds"]:
        cut = row["threshold"]
        chosen = [[d["id"] for d in t["decisions"] if d["score"] is not None and d["score"] >= cut] for t in scored]
        quiet = [all(d["score"] is not None and d["score"] < cut for d in t["decisions"]) for t in scored]
        hits = wrong = missed = 0
        for turn, pages in zip(scored, chosen):
            if turn["needed"] is not None:
                hits += len(set(pages) & set(turn["needed"]))
                wrong += len(set(pages) - set(turn["needed"]))
                missed += len(set(turn["needed"]) - set(pages))
        assert row["pagesInjected"] == sum(map(len, chosen)) and row["turnsInjecting"] == sum(map(bool, chosen))
        assert row["skipHintTurns"] == sum(quiet)
        assert row["skipHintMisses"] == sum(1 for turn, q in zip(scored, quiet) if turn["needed"] and q)
        assert row["precision"] == (round(hits / (hits + wrong), 4) if hits + wrong else None)
        assert row["recall"] == (round(hits / (hits + missed), 4) if hits + missed else None)
