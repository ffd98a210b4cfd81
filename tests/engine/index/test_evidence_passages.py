"""Evidence passages: a page is as near to a message as the nearest of its own vector and the passages of the
text sources it cites, while the store's gate takes hybrid candidates (engine/index/vectors.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.gate.candidates import nearest_pages
from engine.index import vectors as vectors_module
from engine.index.vectors import PASSAGE_WORDS
from engine.vault.record_view import view_of
from engine.service import Engine
from engine.state.config import parse_settings
from engine.state.statedir import StateDir
from tests.engine.gate.test_gate_embedding import open_embedding_engine
from tests.engine.gate_helpers import owner_caller

TRANSCRIPT = ("Dana: Did you hear about the lighthouse?\n"
              "Sam: The keeper repaints the lamp room every spring with a brush from Oslo.\n"
              "Dana: Lovely.")
CITED = "Sam: The keeper repaints the lamp room every spring with a brush from Oslo."


def evidence_passages(evidence: Any, source_lines: Any) -> list[str]:
    """The passages of a page whose frontmatter ``evidence`` is ``evidence``, read through the record view."""
    return vectors_module.evidence_passages(view_of({"evidence": evidence}).evidence, source_lines)


def lines_of(sources: dict[str, str]):
    return lambda source_id: sources[source_id].splitlines() if source_id in sources else None


def test_passages_are_the_cited_lines_cut_into_words() -> None:
    words = " ".join(f"w{n}" for n in range(PASSAGE_WORDS + 5))
    sources = {"src_a": f"one\n{words}\nthree", "src_b": "only line"}
    cut = evidence_passages([{"source": "src_a", "lines": [2, 2]}, {"source": "src_b"}], lines_of(sources))
    assert cut == [" ".join(f"w{n}" for n in range(PASSAGE_WORDS)),
                   " ".join(f"w{n}" for n in range(PASSAGE_WORDS, PASSAGE_WORDS + 5)), "only line"]
    # Without lines, the whole source; the same citation twice once; unreadable sources and odd items none.
    assert evidence_passages([{"source": "src_a"}, {"source": "src_a"}], lines_of({"src_a": "a\nb"})) == ["a b"]
    assert evidence_passages([{"source": "gone"}, {"excerpt": "x"}, "src_a", {"source": 7}],
                             lines_of(sources)) == []
    assert evidence_passages(None, lines_of(sources)) == []
    assert evidence_passages([{"source": "src_a", "lines": [True, 2]}], lines_of({"src_a": "a\nb"})) == ["a b"]


def test_a_page_has_at_most_passages_max_passages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectors_module, "PASSAGES_MAX", 3)
    long = " ".join("word" for _ in range(PASSAGE_WORDS * 10))
    assert len(evidence_passages([{"source": "s"}], lines_of({"s": long}))) == 3


def hybrid(engine: Engine, on: bool) -> None:
    raw = dict(engine.settings.current().raw)
    raw["recallGate"] = {"mode": "shadow", "candidates": "hybrid" if on else "keyword"}
    engine.settings.save(parse_settings(raw))


def lighthouse(engine: Engine, caller: Any, **extra: Any) -> dict[str, Any]:
    return engine.save_page(caller, {"requestId": f"lighthouse-{len(extra)}", "type": "note", "title": "Harbour log",
                                     "body": "Weekly notes from the harbour office.",
                                     "evidence": [{"excerpt": TRANSCRIPT}], **extra})


def near(engine: Engine, caller: Any, text: str) -> tuple[list[tuple[str, float]], list[str]]:
    """The passages nearest to ``text``, and the pages hybrid's semantic shortlist offers for it."""
    vector = engine.embeddings.current().embed([text])[0]
    runtime = engine.runtime(engine.authorizer.authorize(caller).store)
    return runtime.call(lambda: (runtime.vectors.nearest_passages("private", vector, 10),
                                 [row.record_id for row in nearest_pages(runtime, "private", vector, 10)]))


def settled(engine: Engine, caller: Any) -> None:
    assert engine.runtime(engine.authorizer.authorize(caller).store).vectors_settled(60)


def test_a_page_is_found_by_the_transcript_it_cites(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    with open_embedding_engine(state, {"mode": "shadow", "candidates": "hybrid"}, vectors=True) as engine:
        caller = owner_caller(engine)
        saved = lighthouse(engine, caller)
        engine.save_page(caller, {"requestId": "other", "type": "note", "title": "Budget",
                                  "body": "The quarterly budget is due on Friday."})
        settled(engine, caller)
        passages, pages = near(engine, caller, " ".join(TRANSCRIPT.split()))
        path = engine.get_record(caller, saved["id"])["path"]
    assert passages[0][0] == path and passages[0][1] == pytest.approx(1.0, abs=1e-5)
    assert [p for p, _ in passages] == [path], "only the page that cites a text source has passages"
    assert pages[0] == saved["id"], "the page comes first although its own text is about something else"


def test_passages_follow_the_page_and_the_gate_setting(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    transcript = " ".join(TRANSCRIPT.split())
    with open_embedding_engine(state, {"mode": "shadow"}, vectors=True) as engine:
        caller = owner_caller(engine)
        saved = lighthouse(engine, caller)
        settled(engine, caller)
        assert near(engine, caller, transcript)[0] == [], "keyword candidates: no passages are embedded"

        hybrid(engine, True)   # a change of settings has the vectors compared again: the passages come
        settled(engine, caller)
        assert near(engine, caller, transcript)[0][0][1] == pytest.approx(1.0, abs=1e-5)

        # A new revision adds a citation of one line (a page's evidence is kept across revisions): the first
        # revision's passages go, and the second's are both citations' (the transcript, then the line).
        revised = engine.save_page(caller, {"requestId": "revise", "id": saved["id"], "expectedRevision": 1,
                                            "type": "note", "title": "Harbour log",
                                            "body": "Weekly notes from the harbour office.",
                                            "evidence": [{"excerpt": CITED}]})
        settled(engine, caller)
        current = engine.get_record(caller, saved["id"])
        rows = passage_rows(engine, caller)
        assert revised["revision"] == 2
        assert rows == [(current["path"], current["sha256"])] * 2
        assert near(engine, caller, CITED)[0][0][1] == pytest.approx(1.0, abs=1e-5)


def passage_rows(engine: Engine, caller: Any) -> list[tuple[str, str]]:
    runtime = engine.runtime(engine.authorizer.authorize(caller).store)
    return runtime.call(lambda: [tuple(row) for row in runtime.vectors._db().execute(
        "SELECT path, sha256 FROM passages ORDER BY id").fetchall()])
