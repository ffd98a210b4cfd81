"""``knowledge bench import --markdown-notes N`` end to end on a small generated vault."""

from __future__ import annotations

from engine.bench import import_markdown


def test_a_small_vault_is_imported_then_imported_again_and_reported() -> None:
    result = import_markdown.run(notes=12, say=lambda _: None)

    assert result["pages"] == 12 and 0 < result["relationships"] <= result["links"] <= 36
    assert result["import_s"] > 0 and result["again_s"] > 0
    text = import_markdown.report(result, "knowledge bench import --markdown-notes 12")
    assert "| the same folder again (all retries) |" in text and "Projected for 10,000 notes" in text


def test_one_by_one_makes_what_bulk_makes_and_the_report_says_which_it_was() -> None:
    bulk = import_markdown.run(notes=12, say=lambda _: None)
    one_by_one = import_markdown.run(notes=12, say=lambda _: None, bulk=False)

    assert (bulk["pages"], bulk["relationships"]) == (one_by_one["pages"], one_by_one["relationships"])
    assert "items written in bulk" in import_markdown.report(bulk, "knowledge bench import --markdown-notes 12")
    assert "one after another" in import_markdown.report(one_by_one, "knowledge bench import --markdown-notes 12")
