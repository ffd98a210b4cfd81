"""The search benchmark's machinery on a tiny invented LoCoMo-shaped file (never the data set itself).

These tests check what the benchmark reports, not how fast anything is.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.bench.corpus import generate_records, render_record
from engine.bench.engines import match_expression
from engine.bench.search import Options, run
from engine.cli.commands import main
from engine.vault.ontology import Ontology
from engine.vault.records import check_record, parse_record
from models.fixtures import TINY_EMBEDDER

# Invented hobbies, one a turn; each observation cites its own turn.
HOBBIES = [
    ("Ines", "repaired an old tram clock"), ("Bruno", "painted a canoe bright teal"),
    ("Ines", "planted quince trees behind the bakery"), ("Bruno", "learned to juggle seven oranges"),
    ("Ines", "knitted a scarf for the lighthouse keeper"), ("Bruno", "restored a rusty harmonium"),
    ("Ines", "photographed herons at dawn"), ("Bruno", "brewed ginger beer in the cellar"),
    ("Ines", "sailed a dinghy across the fjord"), ("Bruno", "carved a chess set from driftwood"),
    ("Ines", "baked rye bread with caraway"), ("Bruno", "mapped every stairway in Lisbon"),
    ("Ines", "collected stamps from Tuvalu"), ("Bruno", "built a telescope from spare lenses"),
]
CLOCK_QUESTION = "tram clock repaired?"  # every word stands only in the first claim


def tiny_locomo() -> list[dict[str, Any]]:
    turns = [{"speaker": who, "dia_id": f"D1:{n}", "text": f"Guess what, I {what}!"}
             for n, (who, what) in enumerate(HOBBIES, start=1)]
    turns.append({"speaker": "Bruno", "dia_id": f"D1:{len(HOBBIES) + 1}", "text": "Anyway, see you soon."})
    observations: dict[str, list[list[str]]] = {"Ines": [], "Bruno": []}
    for n, (who, what) in enumerate(HOBBIES, start=1):
        observations[who].append([f"{who} {what}.", f"D1:{n}"])
    return [{
        "sample_id": "bench-1",
        "conversation": {"speaker_a": "Ines", "speaker_b": "Bruno",
                         "session_1_date_time": "9:05 am on 4 June, 2031", "session_1": turns},
        "observation": {"session_1_observation": observations},
        "session_summary": {"session_1_summary": "Ines and Bruno swapped news about their weekend projects."},
        "event_summary": {},
        "qa": [
            {"question": CLOCK_QUESTION, "answer": "a tram clock", "evidence": ["D1:1"], "category": 1},
            {"question": "What did Bruno brew?", "answer": "ginger beer", "evidence": ["D1:8"], "category": 4},
            {"question": "When will they meet?", "answer": "soon", "evidence": [f"D1:{len(HOBBIES) + 1}"],
             "category": 2},  # a turn no observation cites: no gold record
            {"question": "What did Ines adopt?", "adversarial_answer": "a cat", "evidence": [], "category": 5},
            {"question": "zebra xylophone", "answer": "-", "evidence": ["D1:3"], "category": 3},
        ],
    }]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("bench")
    data = root / "locomo.json"
    data.write_text(json.dumps(tiny_locomo()), encoding="utf-8")
    options = Options(data=data, output=root / "search.md", records=300, queries=12, rounds=1, repeats=1,
                      embedding_model=TINY_EMBEDDER,
                      work_dir=root / "work", command="knowledge bench search (test)")
    result = run(options, say=lambda line: None)
    result["markdown"] = (root / "search.md").read_text(encoding="utf-8")
    return result


def by_question(report: dict[str, Any], text: str) -> dict[str, Any]:
    return next(q for q in report["locomo"]["questions"] if q["question"] == text)


def test_a_question_whose_words_only_its_gold_claim_holds_is_found_by_both_engines(report: dict[str, Any]) -> None:
    clock = by_question(report, CLOCK_QUESTION)

    assert len(clock["record_ids"]) == 1
    for engine in ("tantivy", "fts5"):
        assert clock[engine] == {"recall@5": 1.0, "hit@5": 1.0, "recall@10": 1.0, "hit@10": 1.0}, engine


def test_a_question_with_words_no_record_holds_finds_nothing(report: dict[str, Any]) -> None:
    nowhere = by_question(report, "zebra xylophone")

    assert nowhere["record_ids"]
    assert nowhere["tantivy"]["hit@10"] == nowhere["fts5"]["hit@10"] == 0.0


def test_questions_without_gold_records_are_counted_apart(report: dict[str, Any]) -> None:
    locomo = report["locomo"]

    assert locomo["queries"] == 5
    assert locomo["no_gold"] == {"total": 2, "no_evidence": 1,
                                 "by_category": {"1": 0, "2": 1, "3": 0, "4": 0, "5": 1}}
    overall = locomo["quality"]["tantivy"]["overall"]
    assert overall["questions"] == 3
    assert locomo["quality"]["tantivy"]["categories"]["2"]["questions"] == 0


def test_every_engine_indexes_the_same_records(report: dict[str, Any]) -> None:
    locomo, generated = report["locomo"], report["generated"]

    assert locomo["records"] == 2 + 1 + len(HOBBIES)  # two people, one session event, the claims
    assert generated["records"] == 301  # the 300 generated and the seed page
    assert generated["preparation"]["generated"] == 300
    for data in (locomo, generated):
        assert {kind: build["records"] for kind, build in data["builds"].items()} == {
            "tantivy": data["records"], "tantivy-core": data["records"], "fts5": data["records"]}


def test_the_report_has_every_figure_for_both_engines(report: dict[str, Any]) -> None:
    generated = report["generated"]

    assert generated["queries"] == 12
    for data in (report["locomo"], generated):
        assert set(data["latency"]) == {"tantivy", "fts5", "api"}
        assert all(figures["samples"] == data["queries"] for figures in data["latency"].values())
        assert all(build["peak_kib"] >= build["baseline_kib"] > 0 for build in data["builds"].values())
        assert data["refused"] == 0
    assert set(generated["known_item"]) == {"tantivy", "fts5"}
    markdown = report["markdown"]
    for heading in ("## Retrieval quality on LoCoMo", "## Index build", "## Query latency",
                    "## The generated partition", "## Reading"):
        assert heading in markdown
    assert "knowledge bench search (test)" in markdown
    assert CLOCK_QUESTION not in markdown  # figures only, never the data set's text


def test_generated_records_are_valid_and_deterministic() -> None:
    first = list(generate_records(40, seed=7))
    again = list(generate_records(40, seed=7))
    other = list(generate_records(40, seed=8))

    assert first == again and first != other
    assert len({record.record_id for record in first}) == 40
    for record in first:
        parsed, problems = parse_record(render_record(record), record.path)
        assert problems == [] and parsed is not None
        assert check_record(parsed, Ontology.shipped(), record.path) == []
        assert 30 <= len(parsed.body.split()) <= 150 and 3 <= len(parsed.title.split()) <= 6


def test_user_text_never_becomes_fts_syntax() -> None:
    expression = match_expression('tram "clock" AND title:x* (NEAR) -y')

    assert expression == '"tram" OR "clock" OR "and" OR "title" OR "x" OR "near" OR "y"'
    assert match_expression("?! --") is None
    with sqlite3.connect(":memory:") as conn:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
        conn.execute("INSERT INTO t (body) VALUES ('the title of the tram')")
        assert conn.execute("SELECT COUNT(*) FROM t WHERE t MATCH ?", (expression,)).fetchone() == (1,)


def test_cli_without_the_data_set_skips_with_a_clear_message(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere" / "locomo10.json"

    code = main(["bench", "search", "--data", str(missing), "--output", str(tmp_path / "search.md")])

    assert code == 2
    err = capsys.readouterr().err
    assert "skipped, nothing was measured" in err and str(missing) in err
    assert not (tmp_path / "search.md").exists()


def test_the_search_knowledge_modes_are_measured_next_to_the_engines(report: dict[str, Any]) -> None:
    modes = report["locomo"]["modes"]
    assert set(modes["quality"]) == {"lexical", "semantic", "hybrid", "rrf", "owner-keyword", "owner-hybrid"}
    assert modes["builds"][0]["embedded"] == modes["builds"][0]["indexed"] == report["locomo"]["records"]
    assert modes["builds"][1]["embedded"] == 0 and modes["builds"][1]["cached"] == report["locomo"]["records"]
    assert modes["fallbacks"] == {"lexical": 0, "semantic": 0, "hybrid": 0, "rrf": 0, "owner-keyword": 0,
                                  "owner-hybrid": 0}  # every vector built before the questions
    assert modes["latency"]["semantic"]["samples"] == report["locomo"]["queries"]
    clock = by_question(report, CLOCK_QUESTION)
    assert clock["kb-lexical"]["hit@5"] == 1.0  # its words stand only in its gold claim
    assert "## Retrieval modes of search_knowledge on LoCoMo" in report["markdown"]
    assert "| recall@5 semantic | recall@5 hybrid | recall@5 rrf |" in report["markdown"]
    assert "| rrf |" in report["markdown"] and "again, every vector cached" in report["markdown"]
    assert "| recall@10 owner keyword | recall@10 owner hybrid |" in report["markdown"]
    assert clock["kb-owner-keyword"]["hit@5"] == clock["kb-owner-hybrid"]["hit@5"] == 1.0


def test_the_owners_search_alone_is_measured_per_half(tmp_path: Path) -> None:
    from engine.bench import owner_locomo
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(tiny_locomo()), encoding="utf-8")

    result = owner_locomo.run(data, TINY_EMBEDDER, tmp_path / "state", say=lambda line: None)
    again = owner_locomo.run(data, TINY_EMBEDDER, tmp_path / "state", say=lambda line: None)  # the import reused

    # Three questions have gold records, all of the one conversation: the last five are none.
    assert result["questions"] == 3 and result["halves"]["last five"] == []
    for mode, figures in result["modes"].items():
        first, whole = figures["recall"]["first five"], figures["recall"]["all"]
        assert first == whole and 0 <= whole["@1"] <= whole["@5"] <= whole["@10"] <= 100, mode
        assert all(math.isnan(value) for value in figures["recall"]["last five"].values())
        assert again["modes"][mode]["recall"]["all"] == whole
    # "zebra xylophone" shares no word with any record: keyword finds the other two questions' claims only.
    assert result["modes"]["keyword"]["recall"]["all"]["@10"] == pytest.approx(200 / 3)
    text = owner_locomo.report(result, "knowledge bench owner-locomo")
    assert "| owner hybrid |" in text and "| owner keyword |" in text
