"""What changed between two revisions, as History reads it: the body's own diff and the keys that differ."""

from __future__ import annotations

from engine.operator.revisions import body_diff, changed_names, field_changes
from engine.vault.records import Record


def test_the_body_and_the_keys_that_differ_are_named_with_their_values() -> None:
    before = Record({"title": "Atlas", "tags": ["infra"], "fixture": True}, "Line one\nLine two\n")
    after = Record({"title": "Atlas", "tags": ["infra", "db"], "aliases": ["A"]}, "Line one\nLine 2\n")

    assert changed_names(before, after) == ["body", "tags", "aliases", "fixture"]
    assert field_changes(before, after) == [
        {"name": "tags", "change": "changed", "before": ["infra"], "after": ["infra", "db"]},
        {"name": "aliases", "change": "added", "before": None, "after": ["A"]},
        {"name": "fixture", "change": "removed", "before": True, "after": None}]
    text, cut = body_diff(before, after, 1, 2, max_lines=100)
    assert text.splitlines()[:2] == ["--- revision 1", "+++ revision 2"]
    assert "-Line two" in text and "+Line 2" in text and " Line one" in text and not cut
    assert body_diff(before, after, 1, 2, max_lines=3) == ("\n".join(text.splitlines()[:3]), True)


def test_identical_revisions_change_nothing() -> None:
    record = Record({"title": "Same"}, "body")
    assert changed_names(record, record) == [] and body_diff(record, record, 1, 2, 10) == ("", False)
