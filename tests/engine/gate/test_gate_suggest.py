"""Thresholds from the owner's labels (engine/gate/suggest.py) and the seeded simulation that checks the rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from engine.bench.gate_thresholds import SHAPES, summarize
from engine.core.errors import InvalidParams, NotFound
from engine.gate.suggest import (
    DEFAULT_POINTER_PRECISION, MIN_LABELLED_TURNS, PRECISION_RANGE, distribution, in_force_phrase, suggest_thresholds,
    wilson_low,
)
from engine.operator.gate_operator import SUGGEST, handlers
from engine.service import Engine
from tests.engine.gate_helpers import MODEL, keep_turns, owner_caller, quiet_and_needing, rerank_engine
from tests.engine.gate_helpers import kept_turn as turn

Page = tuple[float, bool]   # (score, needed)



def bounce() -> list[dict[str, Any]]:
    """Ten needed pages at the top, then four not needed, then ten needed again (a lucky run), then noise."""
    pages: list[Page] = [(0.90 - k * 0.01, True) for k in range(10)]
    pages += [(0.70, False), (0.69, False), (0.68, False), (0.67, False)]
    pages += [(0.60 - k * 0.01, True) for k in range(10)]
    return [turn(n, [page, (0.05, False), (0.04, False)]) for n, page in enumerate(pages)]


def test_the_proposal_is_the_lowest_threshold_the_labels_hold_from_the_top_not_a_lucky_run_below() -> None:
    answer = suggest_thresholds(bounce(), MODEL, 0.8)
    high = answer["highThreshold"]
    # 10/11 at 0.70 and 10/12 at 0.69 hold 0.8; 10/13 at 0.68 does not, and the scan stops there: the run of
    # needed pages from 0.60 down (20/24 = 0.83 at 0.51) is never taken.
    assert high == {"threshold": 0.685, "precision": 0.8333, "precisionLow": round(wilson_low(10, 12), 4),
                    "recall": 0.5, "pagesInjected": 12, "turnsInjecting": 12}
    assert answer["labelled"] == 24 and answer["neededPages"] == 20 and answer["neededScored"] == 20
    assert "reason" not in answer
    # Pointers: below 0.685, the band down to the needed pages' end (10 of 12) holds 0.5, the noise does not.
    assert answer["mediumThreshold"] == {"threshold": 0.28, "precision": 0.8333,
                                         "precisionLow": round(wilson_low(10, 12), 4), "recallGained": 0.5,
                                         "pointers": 12}
    assert answer["apply"] == {"highThreshold": 0.685, "mediumThreshold": 0.28}
    assert answer["skipHintBelow"] is None and any("skipHintBelow" in note for note in answer["notes"])


def test_the_skip_hint_goes_below_where_turns_needed_no_page_and_pointers_only_where_they_help() -> None:
    answer = suggest_thresholds(quiet_and_needing(), MODEL, 0.8)
    assert answer["highThreshold"]["threshold"] == 0.6 and answer["highThreshold"]["precision"] == 1.0
    assert answer["highThreshold"]["recall"] == round(12 / 15, 4), "a needed page never scored is missed"
    assert answer["mediumThreshold"] is None, "under 0.6 the first 12 pages are all not needed"
    assert any(note.startswith("mediumThreshold") for note in answer["notes"])
    # 23 turns' best pages are under 0.6; 3 of them needed a page: 20/23 = 0.87 holds 0.8 to the end.
    assert answer["skipHintBelow"] == {"threshold": 0.4, "precision": 0.8696,
                                       "precisionLow": round(wilson_low(20, 23), 4), "hintedTurns": 23,
                                       "hintedNeeding": 3}
    strict = suggest_thresholds(quiet_and_needing(), MODEL, 0.95)
    # At 0.95 the scan stops at the best pages of 0.10 (10 of 11 turns needed none): below them, 9 quiet turns
    # are too few to rest on.
    assert strict["skipHintBelow"] is None
    assert any("only 9 labelled items reach it" in note for note in strict["notes"])


def test_applying_turns_pointer_lines_off_when_they_would_sit_above_the_new_threshold() -> None:
    settings = {"highThreshold": 0.9, "mediumThreshold": 0.7, "skipHintBelow": None}
    answer = suggest_thresholds(quiet_and_needing(), MODEL, 0.8, current=settings)
    assert answer["apply"] == {"highThreshold": 0.6, "mediumThreshold": None, "skipHintBelow": 0.4}
    assert any("mediumThreshold 0.7" in note for note in answer["notes"])
    kept = suggest_thresholds(quiet_and_needing(), MODEL, 0.8, current={**settings, "mediumThreshold": 0.5})
    assert "mediumThreshold" not in kept["apply"], "a pointer tier still below the new threshold is left as it is"


def test_the_answer_says_what_the_same_labels_show_at_the_threshold_in_force() -> None:
    # An owner asking for precision 0.8 was proposed a threshold at 0.81 while the one in force held 0.95 on the
    # same labels; nothing said so, and applying it looked like a gain.
    loose = suggest_thresholds(quiet_and_needing(), MODEL, 0.8, current={"highThreshold": 0.2})
    # At 0.2: the twelve needed pages at 0.9, the twelve at 0.3 and the quiet turn at 0.20, none needed.
    assert loose["inForce"] == {"threshold": 0.2, "precision": 0.48, "recall": 0.8, "pagesInjected": 25,
                                "turnsInjecting": 13}
    assert in_force_phrase(loose) == ("highThreshold 0.2 (in force now): precision 0.48, recall 0.80, on 25 pages "
                                      "of 13 turns")
    above = suggest_thresholds(quiet_and_needing(), MODEL, 0.8, current={"highThreshold": 0.95})
    assert above["inForce"] == {"threshold": 0.95, "precision": None, "recall": 0.0, "pagesInjected": 0,
                                "turnsInjecting": 0}
    assert "precision -, recall 0.00, on 0 pages of 0 turns" in in_force_phrase(above)
    few = suggest_thresholds(quiet_and_needing()[:5], MODEL, 0.8, current={"highThreshold": 0.2})
    assert few["highThreshold"] is None and few["inForce"]["pagesInjected"] == 10, "said without a proposal too"
    unlabelled = [{**kept, "needed": None} for kept in quiet_and_needing()]
    assert suggest_thresholds(unlabelled, MODEL, 0.8, current={"highThreshold": 0.2})["inForce"] is None
    assert suggest_thresholds(quiet_and_needing(), MODEL, 0.8)["inForce"] is None, "no threshold known"


def test_too_few_labels_or_needed_pages_or_no_reachable_precision_is_refused_with_the_reason() -> None:
    few = suggest_thresholds(bounce()[: MIN_LABELLED_TURNS - 1], MODEL, 0.8)
    assert few["highThreshold"] is None and few["apply"] == {}
    assert few["reason"] == f"label at least 20 journal turns for a proposal ({MIN_LABELLED_TURNS - 1} labelled so far)"
    nothing_needed = [turn(n, [(0.5, False)]) for n in range(30)]
    assert "needed 0 pages the gate scored" in suggest_thresholds(nothing_needed, MODEL)["reason"]
    muddled = [turn(n, [(0.9, n % 2 == 0), (0.2, False)]) for n in range(40)]
    reason = suggest_thresholds(muddled, MODEL, 0.8)["reason"]
    assert reason.startswith("no highThreshold reaches precision 0.8 on these labels")
    assert suggest_thresholds(muddled, MODEL, 0.5)["highThreshold"]["threshold"] == 0.55


def test_only_the_decision_model_in_force_counts() -> None:
    turns = bounce() + [turn(500 + n, [(0.99, False)], model="onnx/other") for n in range(30)]
    answer = suggest_thresholds(turns, MODEL, 0.8)
    assert answer["turns"] == 24 and answer["otherModelTurns"] == 30
    assert answer["highThreshold"]["threshold"] == 0.685, "another model's confident misses change nothing"


def test_without_labels_the_distribution_says_where_the_gate_would_fire() -> None:
    turns = [turn(k, [(k / 10 - 0.05, False), (0.01, False)], labelled=False) for k in range(1, 11)]
    answer = suggest_thresholds(turns, MODEL, 0.8, current={"highThreshold": 0.75})
    assert answer["labelled"] == 0 and answer["highThreshold"] is None and "label at least" in answer["reason"]
    shape = answer["distribution"]
    assert shape["turns"] == 10 and shape["pages"] == 20
    assert shape["turnTopScores"] == {"p50": 0.45, "p75": 0.75, "p90": 0.85, "p95": 0.95, "p99": 0.95, "max": 0.95}
    assert shape["pageScores"]["p50"] == 0.01 and shape["pageScores"]["max"] == 0.95
    rows = {row["threshold"]: row for row in shape["firing"]}
    assert 0.75 in rows, "the threshold in force is always a row"
    for threshold, row in rows.items():
        tops = [k / 10 - 0.05 for k in range(1, 11)]
        assert row["turnsInjecting"] == sum(top >= threshold for top in tops)
        assert row["share"] == row["turnsInjecting"] / 10
    assert rows[0.45]["turnsInjecting"] == 6, "a threshold read from a score still includes that score's page"
    assert distribution([]) == {"turns": 0, "pages": 0, "pageScores": None, "turnTopScores": None, "firing": []}


def test_wilson_lower_bound() -> None:
    assert wilson_low(8, 10, z=1.96) == pytest.approx(0.4902, abs=1e-4)
    assert wilson_low(0, 0) == 0.0
    assert wilson_low(10, 10) < 1.0 and wilson_low(0, 10) == 0.0


# --- the target: a threshold from 50 labelled turns, on the next 50 turns -----------------------------------


@pytest.mark.parametrize("shape_name", ["reranker", "embedding"])
def test_a_threshold_from_50_labelled_turns_lands_near_the_asked_precision_on_the_next_50(shape_name) -> None:
    """Seeded: 100 stores per shape, each proposing from its first 50 labelled turns at precision 0.8.

    Fifty turns hold some 40 injected pages, so even the threshold that gives exactly 0.8 in the long run lands
    within 0.05 on the next 50 turns in only about half the stores (docs/benchmarks/gate-quality.md has the
    figures over 200 seeds); what the rule owes is a precision centred on the asked one, not above or below it.
    """
    shape = next(shape for shape in SHAPES if shape.name == shape_name)
    result = summarize(shape, 0.8, seeds=100)
    assert result.proposed >= 85
    assert abs(result.mean_realized - 0.8) <= 0.025, result
    assert abs(result.mean_expected - 0.8) <= 0.025, result
    # Measured over 200 seeds: 36 % (reranker) and 24 % (embedding) within 0.05, where the long run's own
    # threshold gets 58 % and 38 %.
    assert result.within >= 0.5 * result.oracle_within, result
    assert result.within >= 15, result


# --- the operator method ----------------------------------------------------------------------------------


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with rerank_engine(tmp_path, {}, {"mode": "shadow", "journal": True, "mediumThreshold": 0.7,
                                      "highThreshold": 0.9}) as (engine, _):
        engine.on_store(owner_caller(engine), lambda runtime, authority: None)   # main's store, empty
        yield engine


def test_the_operator_proposes_from_the_chosen_stores_gate_log(engine: Engine) -> None:
    engine.on_store(owner_caller(engine, "other"), lambda runtime, authority: None)   # a store of its own
    keep_turns(engine, quiet_and_needing())
    suggest = handlers(engine)["suggestGateThresholds"]
    answer = suggest({"agent": "main"})
    assert answer["precision"] == 0.8 and answer["model"] == MODEL and answer["labelled"] == 35
    assert answer["apply"] == {"highThreshold": 0.6, "mediumThreshold": None, "skipHintBelow": 0.4}
    store_id = engine.resolver.select(store=None, agent="main", default_agent="main").store_id
    assert suggest({"store": store_id, "precision": 0.8}) == answer
    assert suggest({"agent": "other"})["turns"] == 0
    assert suggest({})["labelled"] == 35, "neither agent nor store: main's"


def test_every_precision_the_method_takes_is_answered_without_a_pointer_precision(engine: Engine) -> None:
    # The Tuning tab's box asks only for a precision: at 0.5 or below the default pointer precision (0.5) was
    # not below it, and the request was refused, so the box could not offer what the command line takes.
    keep_turns(engine, quiet_and_needing())
    suggest = handlers(engine)["suggestGateThresholds"]
    low, high = PRECISION_RANGE
    assert [SUGGEST.specs[name].schema()["minimum"] for name in ("precision", "pointerPrecision")] == [low, low]
    for precision in (low, 0.3, DEFAULT_POINTER_PRECISION):
        answer = suggest({"agent": "main", "precision": precision})
        assert answer["precision"] == precision and answer["pointerPrecision"] is None
        assert answer["highThreshold"] is not None and answer["mediumThreshold"] is None
        assert answer["apply"].get("mediumThreshold") is None
        assert f"mediumThreshold: not proposed for precision {precision:g}, at or below pointer lines' own 0.5 " \
               "(ask with a pointerPrecision below it for one)" in answer["notes"]
    assert suggest({"agent": "main", "precision": high})["pointerPrecision"] == DEFAULT_POINTER_PRECISION
    assert suggest({"agent": "main", "precision": 0.3, "pointerPrecision": 0.2})["pointerPrecision"] == 0.2
    with pytest.raises(InvalidParams):   # one given is still held below the precision
        suggest({"agent": "main", "precision": 0.3, "pointerPrecision": 0.3})


@pytest.mark.parametrize("params, field", [
    ({"precision": 1.5}, "precision"), ({"precision": "0.8"}, "precision"),
    ({"pointerPrecision": 0.9}, "pointerPrecision"), ({"agent": "main", "store": "x"}, "store"),
    ({"agent": "main", "limit": 3}, None)])
def test_bad_requests_are_refused(engine: Engine, params: dict[str, Any], field: str | None) -> None:
    with pytest.raises(InvalidParams) as caught:
        handlers(engine)["suggestGateThresholds"](params)
    if field is not None:
        assert caught.value.details.get("field") == field


def test_an_unknown_store_or_agent_is_not_found(engine: Engine) -> None:
    with pytest.raises(NotFound):
        handlers(engine)["suggestGateThresholds"]({"store": "nowhere"})
    with pytest.raises(NotFound):
        handlers(engine)["suggestGateThresholds"]({"agent": "nobody"})
