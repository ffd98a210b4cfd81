"""Records: the knowledge-record-v1 envelope, evidence, recall blocks and scope."""

from __future__ import annotations

from typing import Any

import pytest

from engine.core.findings import Finding, has_errors
from engine.vault.frontmatter import parse_document
from engine.vault.ontology import Ontology
from engine.vault.records import (
    CANONICAL_ORDER,
    Record,
    check_recall_block,
    check_record,
    check_scope,
    conversation_scope,
    is_valid_scope,
    parse_record,
)

SESSION = "0f8fad5b-d9cb-469f-a165-70867728950e"
STAMP = "2026-11-29T10:14:03Z"


@pytest.fixture(scope="module")
def ontology() -> Ontology:
    return Ontology.shipped()


def envelope(record_kind: str, **extra: Any) -> dict[str, Any]:
    data = {
        "format": "knowledge-record-v1", "id": "rec_01", "revision": 1, "kind": record_kind, "title": "A title",
        "recorded_at": STAMP, "updated_at": STAMP, "scope": "private", "lifecycle": "active",
    }
    data.update(extra)
    return data


def page(**extra: Any) -> dict[str, Any]:
    return envelope("page", **{"type": "person", **extra})


def claim(**extra: Any) -> dict[str, Any]:
    return envelope("claim", **{"claim_kind": "preference", "subject": "pg_dana", "assertion_origin": "user",
                                "evidence": [{"source": "src_1", "quote": "every Friday"}], **extra})


def relationship(**extra: Any) -> dict[str, Any]:
    return envelope("relationship", **{"relation": "works_at", "from": "pg_dana", "to": "pg_acme",
                                       "assertion_origin": "source", "evidence": [{"source": "src_1"}], **extra})


def check(frontmatter: dict[str, Any], ontology: Ontology, path: str = "pages/x.md") -> list[Finding]:
    return check_record(Record(frontmatter, "Body.\n"), ontology, path)


def fields(findings: list[Finding]) -> set[str | None]:
    return {finding.field for finding in findings}


# --- valid records ---------------------------------------------------------------


@pytest.mark.parametrize("make", [page, claim, relationship])
def test_a_complete_record_has_no_findings(make, ontology: Ontology) -> None:
    assert check(make(), ontology) == []


def test_optional_envelope_fields_are_accepted(ontology: Ontology) -> None:
    frontmatter = page(aliases=["Dana"], tags=["team"], dependencies=["pg_2"], fixture=True,
                       attribution={"agent": "main"}, fields={"role": "Engineer", "email": "dana@example.com"},
                       recall={"summary": "Dana leads the team", "importance": 7})
    assert check(frontmatter, ontology) == []


def test_findings_carry_the_path_and_the_record_id(ontology: Ontology) -> None:
    [finding] = check(page(revision=0), ontology, path="pages/people/dana.md")
    assert (finding.path, finding.record_id, finding.field) == ("pages/people/dana.md", "rec_01", "revision")
    assert finding.severity == "error"


def test_an_invalid_id_is_not_reported_as_the_record_id(ontology: Ontology) -> None:
    findings = check(page(id="../escape"), ontology)
    assert fields(findings) == {"id"}
    assert findings[0].record_id is None


# --- envelope rules, one field at a time -------------------------------------------

BAD_ENVELOPE = [
    ("format", "knowledge-record-v2"), ("format", None),
    ("id", ""), ("id", "has space"), ("id", "../x"), ("id", 17), ("id", "x" * 200),
    ("revision", 0), ("revision", -1), ("revision", True), ("revision", "1"), ("revision", 1.0), ("revision", None),
    ("kind", "note"), ("kind", None),
    ("title", ""), ("title", "   "), ("title", "two\nlines"), ("title", "x" * 501), ("title", 5), ("title", None),
    ("recorded_at", "2026-11-29"), ("recorded_at", "2026-11-29T10:14:03"), ("recorded_at", "yesterday"),
    ("recorded_at", None), ("updated_at", "2026-13-01T00:00:00Z"), ("updated_at", 1700000000),
    ("lifecycle", "deleted"), ("lifecycle", None),
    ("aliases", "Dana"), ("aliases", ["ok", 3]), ("tags", {"a": 1}), ("dependencies", [None]),
    ("attribution", "main"), ("attribution", ["main"]),
    ("fixture", "yes"), ("fixture", 1), ("fixture", None),
]


@pytest.mark.parametrize(("field", "value"), BAD_ENVELOPE)
@pytest.mark.parametrize("make", [page, claim, relationship])
def test_each_bad_envelope_field_is_one_finding_naming_it(make, field: str, value: Any, ontology: Ontology) -> None:
    findings = check(make(**{field: value}), ontology)
    assert fields(findings) == {field}  # a bad kind also skips the kind-specific checks
    assert has_errors(findings)


@pytest.mark.parametrize("field", ["format", "id", "revision", "kind", "title", "recorded_at", "updated_at", "lifecycle"])
def test_each_required_envelope_field_must_be_present(field: str, ontology: Ontology) -> None:
    frontmatter = page()
    del frontmatter[field]
    assert field in fields(check(frontmatter, ontology))


def test_title_of_exactly_500_characters_is_fine(ontology: Ontology) -> None:
    assert check(page(title="x" * 500), ontology) == []


@pytest.mark.parametrize("stamp", ["2026-11-29T10:14:03+00:00", "2026-11-29T10:14:03.123456Z"])
def test_timestamps_with_an_explicit_utc_offset_are_accepted(stamp: str, ontology: Ontology) -> None:
    assert check(page(recorded_at=stamp, updated_at=stamp), ontology) == []


@pytest.mark.parametrize("lifecycle", ["active", "superseded", "withdrawn", "merged"])
def test_every_lifecycle_is_accepted(lifecycle: str, ontology: Ontology) -> None:
    assert check(page(lifecycle=lifecycle), ontology) == []


def test_several_problems_are_all_reported(ontology: Ontology) -> None:
    findings = check(page(revision=0, title="", lifecycle="gone"), ontology)
    assert fields(findings) == {"revision", "title", "lifecycle"}


# --- pages ----------------------------------------------------------------------


def test_page_fields_are_checked_against_the_ontology(ontology: Ontology) -> None:
    findings = check(page(fields={"email": "not-an-address", "shoe_size": 42}), ontology)
    assert {(f.code, f.field) for f in findings} == {("invalid_field", "fields.email"), ("unknown_field", "fields.shoe_size")}


def test_page_with_an_unknown_type_is_rejected(ontology: Ontology) -> None:
    [finding] = check(page(type="spaceship"), ontology)
    assert (finding.code, finding.field) == ("unknown_type", "type")


def test_untyped_page_is_checked_as_the_type_its_path_implies(ontology: Ontology) -> None:
    frontmatter = page(fields={"website": "https://acme.example"})
    del frontmatter["type"]
    assert check(frontmatter, ontology, "pages/organizations/acme.md") == []
    assert fields(check(frontmatter, ontology, "pages/people/acme.md")) == {"fields.website"}


def test_page_evidence_is_optional_but_checked_when_present(ontology: Ontology) -> None:
    assert check(page(evidence=[]), ontology) == []
    assert fields(check(page(evidence=[{"lines": [1, 2]}]), ontology)) == {"evidence[0]"}


# --- claims and relationships -------------------------------------------------------


@pytest.mark.parametrize("make", [claim, relationship])
@pytest.mark.parametrize("evidence", [None, []])
def test_claims_and_relationships_must_cite_evidence(make, evidence, ontology: Ontology) -> None:
    frontmatter = make(evidence=evidence)
    [finding] = check(frontmatter, ontology)
    assert (finding.code, finding.field) == ("evidence_missing", "evidence")


def test_a_claim_without_the_evidence_key_is_rejected(ontology: Ontology) -> None:
    frontmatter = claim()
    del frontmatter["evidence"]
    assert [f.code for f in check(frontmatter, ontology)] == ["evidence_missing"]


@pytest.mark.parametrize("claim_kind", ["fact", "preference", "decision", "commitment", "event", "belief",
                                        "correction", "project_state"])
def test_every_shipped_claim_kind_is_accepted(claim_kind: str, ontology: Ontology) -> None:
    assert check(claim(claim_kind=claim_kind), ontology) == []


@pytest.mark.parametrize("claim_kind", ["rumour", None, 3])
def test_claim_kind_must_come_from_the_ontology(claim_kind: Any, ontology: Ontology) -> None:
    assert fields(check(claim(claim_kind=claim_kind), ontology)) == {"claim_kind"}


def test_claim_kind_added_by_an_extension_is_accepted(ontology: Ontology) -> None:
    extended = ontology.extended("claim_kinds:\n  rumour: Something heard second hand.\n", "ext")
    assert check(claim(claim_kind="rumour"), extended) == []


def test_unfiled_claim_needs_no_subject(ontology: Ontology) -> None:
    assert check(claim(subject=None), ontology) == []


@pytest.mark.parametrize(("field", "value"), [("subject", "not an id"), ("subject", 5), ("replaces", "../x")])
def test_claim_references_must_be_record_ids(field: str, value: Any, ontology: Ontology) -> None:
    assert fields(check(claim(**{field: value}), ontology)) == {field}


@pytest.mark.parametrize("make", [claim, relationship])
@pytest.mark.parametrize("origin", ["user", "source", "agent_inference"])
def test_every_assertion_origin_is_accepted(make, origin: str, ontology: Ontology) -> None:
    assert check(make(assertion_origin=origin), ontology) == []


@pytest.mark.parametrize("make", [claim, relationship])
@pytest.mark.parametrize("origin", ["owner", None, ""])
def test_assertion_origin_is_required_and_checked(make, origin: Any, ontology: Ontology) -> None:
    assert fields(check(make(assertion_origin=origin), ontology)) == {"assertion_origin"}


@pytest.mark.parametrize("relation", ["employs", None, 7])
def test_relation_must_be_in_the_ontology(relation: Any, ontology: Ontology) -> None:
    [finding] = check(relationship(relation=relation), ontology)
    assert (finding.code, finding.field) == ("unknown_relation", "relation")


@pytest.mark.parametrize("end", ["from", "to"])
@pytest.mark.parametrize("value", [None, "", "no spaces allowed", ["pg_1"]])
def test_relationship_endpoints_must_be_page_ids(end: str, value: Any, ontology: Ontology) -> None:
    assert fields(check(relationship(**{end: value}), ontology)) == {end}


# --- evidence citations ----------------------------------------------------------------

GOOD_CITATIONS = [
    {"source": "src_1"}, {"source": "src_1", "lines": [1, 1]}, {"source": "src_1", "lines": [2, 9], "quote": "x"},
]
BAD_CITATIONS = [
    ("src_1", "evidence[0]"), ({}, "evidence[0]"), ({"source": ""}, "evidence[0]"), ({"source": "a b"}, "evidence[0]"),
    ({"source": "src_1", "lines": [0, 2]}, "evidence[0].lines"),
    ({"source": "src_1", "lines": [3, 2]}, "evidence[0].lines"),
    ({"source": "src_1", "lines": [1]}, "evidence[0].lines"),
    ({"source": "src_1", "lines": [1, 2, 3]}, "evidence[0].lines"),
    ({"source": "src_1", "lines": [True, 2]}, "evidence[0].lines"),
    ({"source": "src_1", "lines": "1-2"}, "evidence[0].lines"),
    ({"source": "src_1", "quote": ""}, "evidence[0].quote"),
    ({"source": "src_1", "quote": 5}, "evidence[0].quote"),
]


@pytest.mark.parametrize("citation", GOOD_CITATIONS)
def test_well_formed_citations_are_accepted(citation: dict, ontology: Ontology) -> None:
    assert check(claim(evidence=[citation]), ontology) == []


@pytest.mark.parametrize(("citation", "where"), BAD_CITATIONS)
def test_each_malformed_citation_is_reported_where_it_is(citation: Any, where: str, ontology: Ontology) -> None:
    findings = check(claim(evidence=[{"source": "src_ok"}, citation]), ontology)
    assert fields(findings) == {where.replace("[0]", "[1]")}
    assert {f.code for f in findings} == {"evidence"}


def test_evidence_must_be_a_list(ontology: Ontology) -> None:
    assert fields(check(claim(evidence={"source": "src_1"}), ontology)) == {"evidence"}


# --- recall blocks ----------------------------------------------------------------------


def test_a_full_recall_block_is_valid() -> None:
    assert check_recall_block({
        "summary": "Dana wants status notes on Fridays", "triggers": ["status"] * 20, "projects": ["p"] * 20,
        "importance": 10, "approved_by": "owner", "approved_at": STAMP,
    }) == []


@pytest.mark.parametrize("importance", [1, 10])
def test_importance_bounds_are_inclusive(importance: int) -> None:
    assert check_recall_block({"summary": "s", "importance": importance}) == []


BAD_RECALL = [
    ({"summary": ""}, "recall.summary"), ({"summary": "   "}, "recall.summary"), ({}, "recall.summary"),
    ({"summary": "x" * 501}, "recall.summary"), ({"summary": 5}, "recall.summary"),
    ({"summary": "s", "triggers": ["t"] * 21}, "recall.triggers"),
    ({"summary": "s", "triggers": "status"}, "recall.triggers"),
    ({"summary": "s", "triggers": ["ok", ""]}, "recall.triggers"),
    ({"summary": "s", "projects": ["p"] * 21}, "recall.projects"),
    ({"summary": "s", "projects": [3]}, "recall.projects"),
    ({"summary": "s", "importance": 0}, "recall.importance"),
    ({"summary": "s", "importance": 11}, "recall.importance"),
    ({"summary": "s", "importance": True}, "recall.importance"),
    ({"summary": "s", "importance": 5.0}, "recall.importance"),
    ({"summary": "s", "approved_at": "last week"}, "recall.approved_at"),
]


@pytest.mark.parametrize(("recall", "field"), BAD_RECALL)
def test_each_bad_recall_field_is_named(recall: dict, field: str) -> None:
    assert [name for name, _ in check_recall_block(recall)] == [field]


def test_summary_of_exactly_500_characters_is_fine() -> None:
    assert check_recall_block({"summary": "x" * 500}) == []


@pytest.mark.parametrize("recall", [None, "summary", ["s"]])
def test_recall_must_be_a_mapping(recall: Any) -> None:
    assert check_recall_block(recall) == [("recall", "recall must be a mapping")]


def test_check_record_reports_recall_problems_on_any_kind(ontology: Ontology) -> None:
    findings = check(claim(recall={"summary": "s", "importance": 99}), ontology)
    assert [(f.code, f.field) for f in findings] == [("recall", "recall.importance")]


# --- scope -------------------------------------------------------------------------------


def scope_of(scope: Any) -> Record:
    frontmatter = page(scope=scope)
    if scope is None:
        del frontmatter["scope"]
    return Record(frontmatter, "")


def test_matching_scope_is_fine() -> None:
    assert check_scope(scope_of("private"), "private") is None
    assert check_scope(scope_of(conversation_scope(SESSION)), f"conversation:{SESSION}") is None


def test_missing_scope_is_withheld() -> None:
    finding = check_scope(scope_of(None), "private")
    assert finding is not None and finding.code == "scope_missing" and finding.field == "scope"


@pytest.mark.parametrize("scope", [
    "public", "", 5, "conversation:", "conversation:not-a-uuid", f"conversation:{SESSION.upper()}",
    f"conversation:{SESSION.replace('-', '')}", f"conversation:{{{SESSION}}}", f"conversation:../{SESSION[3:]}",
])
def test_invalid_scope_is_withheld(scope: Any) -> None:
    finding = check_scope(scope_of(scope), "private")
    assert finding is not None and finding.code == "scope_invalid"
    assert not is_valid_scope(scope)


@pytest.mark.parametrize(("scope", "partition"), [
    ("private", f"conversation:{SESSION}"), (f"conversation:{SESSION}", "private"),
    (f"conversation:{SESSION}", "conversation:00000000-0000-4000-8000-000000000000"),
])
def test_scope_of_another_partition_is_withheld(scope: str, partition: str) -> None:
    finding = check_scope(scope_of(scope), partition)
    assert finding is not None and finding.code == "scope_mismatch" and "withheld" in finding.message


# --- classification, parsing and rendering ---------------------------------------------


@pytest.mark.parametrize(("path", "expected"), [
    ("pages/people/dana.md", "person"), ("pages/projects/x.md", "project"), ("pages/notes/x.md", "note"),
    ("pages/loose.md", "note"), ("elsewhere/x.md", "note"),
])
def test_untyped_page_type_comes_from_its_path(path: str, expected: str, ontology: Ontology) -> None:
    frontmatter = page()
    del frontmatter["type"]
    record = Record(frontmatter, "")
    assert record.effective_type(ontology, path) == expected
    assert "type" not in record.frontmatter  # classification never rewrites the record


def test_declared_type_wins_over_the_path(ontology: Ontology) -> None:
    assert Record(page(type="project"), "").effective_type(ontology, "pages/people/x.md") == "project"


@pytest.mark.parametrize("make", [claim, relationship])
def test_only_pages_have_an_effective_type(make, ontology: Ontology) -> None:
    assert Record(make(), "").effective_type(ontology, "pages/people/x.md") is None


def test_render_puts_known_keys_in_canonical_order_and_keeps_unknown_ones() -> None:
    frontmatter = {"custom_b": 2, "title": "T", "evidence": [], "id": "rec_01", "custom_a": {"k": 1}, "format": "f"}
    parsed, body = parse_document(Record(frontmatter, "Body").render())
    assert list(parsed) == ["format", "id", "title", "evidence", "custom_b", "custom_a"]
    assert parsed == frontmatter
    assert body == "Body\n"


def test_canonical_order_covers_every_envelope_key() -> None:
    ordered = Record({key: 1 for key in reversed(CANONICAL_ORDER)}, "").ordered_frontmatter()
    assert tuple(ordered) == CANONICAL_ORDER


def test_parse_record_round_trips_a_rendered_record(ontology: Ontology) -> None:
    original = Record(claim(custom="kept"), "Dana asked for Fridays.\n")
    parsed, findings = parse_record(original.render(), "claims/x.md")
    assert findings == [] and parsed == original
    assert (parsed.id, parsed.revision, parsed.kind, parsed.scope, parsed.lifecycle) == (
        "rec_01", 1, "claim", "private", "active")
    assert check_record(parsed, ontology, "claims/x.md") == []


def test_unreadable_bytes_become_one_syntax_finding_with_a_line() -> None:
    record, findings = parse_record(b"---\na: 1\na: 2\n---\n", "pages/x.md")
    assert record is None
    assert [(f.code, f.path, f.line) for f in findings] == [("syntax", "pages/x.md", 3)]


def test_an_oversized_file_becomes_a_too_large_finding() -> None:
    record, findings = parse_record(b"---\na: 1\n---\n" + b"x" * 5_000_000, "pages/x.md")
    assert record is None and [f.code for f in findings] == ["too_large"]


@pytest.mark.parametrize(("value", "expected"), [(True, True), (False, False), ("true", False), (None, False)])
def test_only_a_boolean_true_marks_a_fixture(value: Any, expected: bool) -> None:
    assert Record(page(fixture=value), "").is_fixture is expected
