"""``knowledge bench import --markdown-notes N`` end to end on a small generated vault."""

from __future__ import annotations

from engine.bench import import_markdown


def test_a_small_vault_is_imported_then_imported_again_and_reported() -> None:
    result = import_markdown.run(notes=12, say=lambda _: None)

    assert result["pages"] == 12 and 0 < result["relationships"] <= result["links"] <= 36
    assert result["import_s"] > 0 and result["again_s"] > 0
    text = import_markdown.report(result, "knowledge bench import --markdown-notes 12")
    assert "| the same folder again (all retries) |" in text and "Projected for 10,000 notes" in text
