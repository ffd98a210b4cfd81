"""Passage selection and clipping for the recall gate's keyword excerpts."""

from __future__ import annotations

import pytest

from engine.index.analysis import Analyzer
from engine.search.passages import ELLIPSIS, PassageFinder, split_passages


@pytest.fixture(scope="module")
def finder() -> PassageFinder:
    return PassageFinder(Analyzer())


def test_passages_are_blank_line_separated():
    assert split_passages("a\nb\n\n  \nc\n\n\nd") == ["a\nb", "c", "d"]


def test_the_passages_sharing_most_distinct_words_win_and_keep_page_order(finder):
    body = "Apples and pears.\n\nPears, plums and cherries.\n\nNothing here.\n\nCherries only."
    chosen = finder.best(body, "pears cherries plums", max_passages=2, passage_chars=1000, page_chars=2800)
    assert [p.text for p in chosen] == ["Apples and pears.", "Pears, plums and cherries."]
    assert [p.matched for p in chosen] == [1, 3]


def test_a_long_passage_is_clipped_around_its_matching_words(finder):
    filler = " ".join(f"filler{n}" for n in range(300))
    text = f"{filler} the launch date is January 22 {filler}"
    clipped = finder.clip(text, set(finder.analyzer.query_terms("launch date")), 200)
    assert len(clipped) <= 200 and "launch date" in clipped
    assert clipped.startswith(ELLIPSIS) and clipped.endswith(ELLIPSIS)


def test_the_page_budget_bounds_all_passages_together(finder):
    body = "\n\n".join(f"Beacon report {n}. " + "words " * 60 for n in range(6))
    chosen = finder.best(body, "beacon report", max_passages=6, passage_chars=300, page_chars=700)
    assert sum(len(p.text) for p in chosen) <= 700 and len(chosen) == 3
    assert all(len(p.text) <= 300 for p in chosen)


def test_a_page_matched_only_by_its_title_quotes_its_beginning(finder):
    chosen = finder.best("First part.\n\nSecond part.", "unrelated words", max_passages=4, passage_chars=1000,
                         page_chars=2800)
    assert [p.text for p in chosen] == ["First part."]
