"""``knowledge bench vault`` end to end on a small vault of our own, with the tiny test embedding model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.bench import vault_search
from engine.core.errors import InvalidParams
from models.fixtures import TINY_EMBEDDER

NOTES = {
    "Sync/Mobile sync.md": "Keep the vault on the phone in step with the laptop over the network.",
    "Sync/Version history.md": "Every earlier version of a synced note can be restored from the history.",
    "Plugins/Daily notes.md": "A new journal note for each day, made from a template.",
    "Plugins/Word count.md": "The status bar counts the words and characters of the note.",
}


@pytest.fixture
def small_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    vault = tmp_path / "vault"
    for path, body in NOTES.items():
        (vault / path).parent.mkdir(parents=True, exist_ok=True)
        (vault / path).write_text(f"{body}\n\nSee [[Mobile sync]].\n", encoding="utf-8")
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps({"questions": [
        ["how do I keep my phone in step", ["Sync/Mobile sync.md"]],
        ["how many words does my note have", ["Plugins/Word count.md"]],
        ["where is the zeppelin", ["Plugins/Daily notes.md"]],
    ]}), encoding="utf-8")
    monkeypatch.setattr(vault_search, "QUESTIONS", questions)
    return vault


def test_titles_and_questions_are_measured_in_both_modes(small_vault: Path) -> None:
    result = vault_search.run(small_vault, TINY_EMBEDDER, say=lambda _: None)

    assert result["notes"] == 4 and result["questions"] == 3
    for figures in result["modes"].values():
        assert figures["titles_first"] == 100.0 and figures["title_misses"] == []
        assert figures["building"] == 0  # every vector was built before the questions
        assert figures["recall"]["@1"] <= figures["recall"]["@5"] <= figures["recall"]["@10"]
    assert "where is the zeppelin" in result["modes"]["keyword"]["misses"]
    assert result["modes"]["keyword"]["recall"]["@10"] == pytest.approx(200 / 3)
    # The zeppelin (index 2) is missed: half the questions of even index, none of odd index.
    assert result["modes"]["keyword"]["halves"] == {"even": {"@1": 50.0, "@5": 50.0, "@10": 50.0},
                                                    "odd": {"@1": 100.0, "@5": 100.0, "@10": 100.0}}
    text = vault_search.report(result, "knowledge bench vault --vault V --embedding-model M")
    assert "| exact title: that note first | 100.0 % | 100.0 % | every title |" in text


def test_a_title_two_notes_share_is_counted_as_one_of_them_first(small_vault: Path) -> None:
    (small_vault / "Other").mkdir()
    (small_vault / "Other/Word count.md").write_text("Counting birds in the garden.\n", encoding="utf-8")

    result = vault_search.run(small_vault, TINY_EMBEDDER, say=lambda _: None)

    for figures in result["modes"].values():
        assert figures["title_misses"] == ["Word count"] and figures["namesakes_first"] == ["Word count"]
        assert figures["own_titles_first"] == 100.0 and figures["titles_first"] == 80.0
    assert "one of which was first: 1." in vault_search.report(result, "knowledge bench vault")


def test_a_vault_without_the_answering_notes_is_refused(small_vault: Path) -> None:
    (small_vault / "Plugins/Word count.md").unlink()
    with pytest.raises(InvalidParams, match="lacks Plugins/Word count.md"):
        vault_search.run(small_vault, TINY_EMBEDDER, say=lambda _: None)


def test_the_shipped_questions_are_read_as_the_bench_reads_them() -> None:
    asked = json.loads(vault_search.QUESTIONS.read_text(encoding="utf-8"))["questions"]

    assert len(asked) == 60 and len({question for question, _ in asked}) == 60
    for question, answers in asked:
        assert question.strip() and answers, question
        assert len(set(answers)) == len(answers), question  # a note is named once per question
        assert all(path.endswith(".md") and not path.startswith("/") for path in answers), question
