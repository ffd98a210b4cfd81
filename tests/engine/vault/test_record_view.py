"""The record's typed view (engine/vault/record_view.py): every key typed, read leniently, unknown keys kept."""

from __future__ import annotations

import dataclasses

import pytest

from engine.store.catalog_reads import VIEW_COLUMNS, view_columns
from engine.store.summaries import RecordSummary, record_summary
from engine.vault.ontology import Ontology
from engine.vault.record_view import _FIELDS, CANONICAL_ORDER, KNOWN_KEYS, Citation, RecordView, view_of
from engine.vault.records import Record, check_record

CLAIM = {
    "format": "knowledge-record-v1", "id": "cl_1", "revision": 2, "kind": "claim", "title": "Dana likes tea",
    "recorded_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-02T00:00:00Z", "scope": "private",
    "lifecycle": "active", "claim_kind": "preference", "subject": "pg_dana", "assertion_origin": "user",
    "aliases": ["tea"], "tags": ["drinks"], "dependencies": ["pg_x"], "replaces": "cl_0",
    "attribution": {"agent": "main"}, "evidence": [{"source": "src_1", "lines": [1, 2], "quote": "tea"}],
    "x_custom": {"kept": True},
}


def test_every_key_of_the_record_format_has_a_typed_field() -> None:
    names = {field.name for field in dataclasses.fields(RecordView)}
    renamed = {"from": "from_id", "to": "to_id"}
    assert {renamed.get(key, key) for key in CANONICAL_ORDER} | {"fixture"} <= names
    assert [key for key, _, _ in _FIELDS] == list(CANONICAL_ORDER)  # each key read once, in the format's order


def test_a_valid_claim_reads_as_typed_values_and_unknown_keys_are_kept() -> None:
    view = view_of(CLAIM)
    assert (view.id, view.revision, view.kind, view.claim_kind, view.subject) == \
        ("cl_1", 2, "claim", "preference", "pg_dana")
    assert view.aliases == ("tea",) and view.tags == ("drinks",) and view.replaces == "cl_0"
    assert view.evidence == (Citation(0, "src_1", (1, 2), "tea"),)
    assert view.extra == {"x_custom": {"kept": True}}
    assert view.detail == "preference" and not view.is_fixture


@pytest.mark.parametrize("key, value, field", [
    ("revision", "2", "revision"), ("revision", 0, "revision"), ("revision", True, "revision"),
    ("kind", "note", "kind"), ("aliases", ["a", 3], "aliases"), ("subject", ["pg_dana"], "subject"),
    ("attribution", "main", "attribution"), ("lifecycle", "deleted", "lifecycle"), ("title", 7, "title"),
    ("fixture", "yes", "fixture"),
])
def test_a_wrong_typed_value_is_none_in_the_view_and_a_finding_of_the_record(key, value, field) -> None:
    frontmatter = {**CLAIM, key: value}
    view = view_of(frontmatter)
    assert getattr(view, field) is None
    assert view.id == "cl_1" and view.title in ("Dana likes tea", None)  # the rest stays readable
    findings = check_record(Record(frontmatter, "body"), Ontology.shipped(), "claims/c.md")
    assert any(finding.field == key for finding in findings), findings


def test_odd_citations_are_skipped_but_keep_their_places() -> None:
    view = view_of({"evidence": ["odd", {"source": "src_a", "lines": [3, 1]}, {"source": 5}]})
    assert view.evidence == (Citation(1, "src_a", None, None), Citation(2, None, None, None))
    assert view_of({"evidence": "src_a"}).evidence is None


def test_the_view_never_raises_whatever_the_mapping_holds() -> None:
    for value in (None, 1, 1.5, "x", [], {}, [None], {"a": []}):
        view_of({key: value for key in CANONICAL_ORDER})


def _view_field_by_field(frontmatter: dict) -> RecordView:
    """The view as the dataclass's own ``__init__`` builds it, every reader given every key."""
    return RecordView(raw=frontmatter, **{field: read(frontmatter.get(key)) for key, field, read in _FIELDS},
                      fixture=frontmatter.get("fixture", False) if isinstance(frontmatter.get("fixture", False), bool)
                      else None, extra={key: value for key, value in frontmatter.items() if key not in KNOWN_KEYS})


@pytest.mark.parametrize("frontmatter", [
    {}, CLAIM, {**CLAIM, "fixture": True}, {**CLAIM, "fixture": "yes"}, {"x_first": 1, **CLAIM, "x_last": None},
    {key: None for key in CANONICAL_ORDER}, {key: [] for key in CANONICAL_ORDER}, {"fixture": None, "id": 5},
], ids=["empty", "claim", "fixture", "odd fixture", "unknown keys", "nulls", "lists", "odd"])
def test_the_view_reads_only_the_given_keys_to_what_reading_every_key_gives(frontmatter) -> None:
    view = view_of(frontmatter)
    assert view == _view_field_by_field(frontmatter)
    assert list(view.extra) == [key for key in frontmatter if key not in KNOWN_KEYS]  # in the file's order
    assert list(view.__dict__) == [field.name for field in dataclasses.fields(RecordView)]  # each field, no other


def test_the_summary_is_one_shape_from_a_view() -> None:
    summary = record_summary(view_of(CLAIM))
    assert summary == {"id": "cl_1", "revision": 2, "kind": "claim", "type": "preference", "title": "Dana likes tea"}
    assert list(summary) == list(RecordSummary.__annotations__)


def test_the_catalog_columns_a_view_fills_are_exactly_the_declared_ones() -> None:
    ontology = Ontology.shipped()
    for view in (view_of(CLAIM), None):
        assert tuple(view_columns(view, ontology, "claims/c.md")) == VIEW_COLUMNS
    assert view_columns(view_of(CLAIM), ontology, "claims/c.md")["type"] == "preference"
