"""One memory-core entry line taken apart: OpenClaw's recall annotations, promote's provenance, directives."""

from __future__ import annotations

from datetime import date

import pytest

from engine.importers.memory_core_entries import (
    Directive, Provenance, RecallAnnotations, read_directive_line, read_entry, snippet_fact, source_lines_say,
)


def test_trailing_annotations_are_parted_from_the_words() -> None:
    entry = read_entry("Keep the gateway on loopback. <!-- trigger: gateway setup; network safety, --> "
                       "<!-- importance: 9 --> <!-- project: ops -->")

    assert (entry.written, entry.text) == ("Keep the gateway on loopback.",) * 2
    assert entry.recall == RecallAnnotations(("gateway setup", "network safety"), 9, ("ops",))
    assert entry.promoted is None


def test_an_importance_off_the_scale_proposes_none_and_other_comments_propose_nothing() -> None:
    entry = read_entry("Dana takes the 7:40 ferry. <!-- importance: 11 --> <!-- openclaw:marker -->")

    assert entry.text == "Dana takes the 7:40 ferry." and not entry.recall


def test_a_comment_inside_the_words_stays_in_them() -> None:
    assert read_entry("Use <!-- not trailing --> sparingly").text == "Use <!-- not trailing --> sparingly"


def test_promote_and_consolidation_provenance() -> None:
    promoted = read_entry("Retries run three times. [score=0.747 signals=3 recalls=3 avg=0.620 "
                          "source=memory/2026-12-02.md:1-6] <!-- trigger: billing --> <!-- importance: 7 -->")
    consolidated = read_entry("Retries run three times. Source: memory/2026-12-02.md#L4-L4 <!-- importance: 3 -->")

    assert promoted.promoted == Provenance("memory/2026-12-02.md", 1, 6)
    assert consolidated.promoted == Provenance("memory/2026-12-02.md", 4, 4)
    assert promoted.text == consolidated.text == "Retries run three times."


def test_a_snippet_says_its_words_without_the_collapsed_headings() -> None:
    assert snippet_fact("# 2026-12-02 ## Billing service - Retries run three times. - Invoices go out monthly.") \
        == "Retries run three times. Invoices go out monthly."
    assert snippet_fact("Dana - the owner - takes tea.") == "Dana - the owner - takes tea."  # no heading: as written
    assert snippet_fact("# 2026-12-02 ## Billing service") == ""
    assert snippet_fact("(no snippet captured)") == ""


def test_the_named_lines_must_still_hold_the_snippet() -> None:
    lines = ["# 2026-12-02", "", "- Retries run three times, then the", "  charge is dropped."]
    where = Provenance("memory/2026-12-02.md", 3, 4)

    assert source_lines_say(lines, where, "Retries run three times, then the charge is dropped.")
    assert source_lines_say(lines, where, "Retries run three times, then...")  # cut by promote
    assert not source_lines_say(lines, where, "Invoices go out monthly.")
    assert not source_lines_say(lines, Provenance("memory/2026-12-02.md", 3, 9), "Retries")  # past the end


def test_directive_lines() -> None:
    assert read_directive_line("<!-- observed: 2026-07-27 | status: active -->") == Directive(date(2026, 7, 27),
                                                                                              "active")
    assert read_directive_line("<!-- observed: YYYY-MM-DD | status: active -->") == Directive(None, "active")
    assert read_directive_line("- Prefer tea.") is None


@pytest.mark.parametrize("line", [
    "fact" + " " * 200_000 + "x",
    "fact " + "<!--" * 50_000,
    "fact " + "[score=1 " * 20_000,
    "x" + " Source: a" * 20_000,
    "# a" + " " * 200_000 + "- x [score=0.5 signals=1 recalls=1 avg=0.5 source=memory/a.md:1-2]",
], ids=["spaces", "comment-openings", "score-brackets", "source-words", "promoted-snippet"])
def test_a_long_hostile_line_is_read_in_one_pass(line: str) -> None:
    # Each pattern is matched where it must start, never searched for along the line: a search of a pattern
    # opening with whitespace took minutes on lines like these (quadratic, or worse, in their length).
    entry = read_entry(line)
    assert entry.text and not entry.recall


def test_a_long_directive_line_is_read_in_one_pass() -> None:
    assert read_directive_line("<!-- observed: " + " " * 200_000 + "|") is None
    assert read_directive_line("  <!--observed:YYYY-MM-DD|status:superseded-->") == Directive(None, "superseded")
