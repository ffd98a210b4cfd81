"""The ontology: shipped definitions, classification, field checks and extensions."""

from __future__ import annotations

from typing import Any

import pytest

from engine.core.errors import InvalidParams
from engine.vault.ontology import ONTOLOGY_MAX_BYTES, Ontology

EXT = "vault/ontology.yaml"


@pytest.fixture(scope="module")
def shipped() -> Ontology:
    return Ontology.shipped()


def codes(ontology: Ontology) -> list[tuple[str, str | None]]:
    return [(finding.code, finding.field) for finding in ontology.findings]


def custom(fields_yaml: str) -> Ontology:
    """An ontology with one page type, ``thing``, holding the given fields."""
    return Ontology.from_text(f"page_types:\n  thing:\n    fields:\n{fields_yaml}", "test")


# --- the shipped ontology ---------------------------------------------------------


def test_shipped_loads_without_findings(shipped: Ontology) -> None:
    assert shipped.findings == ()
    assert shipped.sources == ("shipped",)
    assert shipped.default_page_type == "note"


def test_shipped_has_the_documented_page_types(shipped: Ontology) -> None:
    documented = {"person", "organization", "project", "repository", "concept", "source", "artifact", "note"}
    assert documented <= set(shipped.page_types)
    assert shipped.page_types["person"].label == "Person"
    assert shipped.page_types["person"].fields["email"].type == "email"
    assert shipped.page_types["project"].fields["status"].values == ("active", "paused", "completed", "cancelled")
    assert shipped.page_types["project"].fields["repository"].page_types == ("repository",)


def test_shipped_has_the_documented_claim_kinds(shipped: Ontology) -> None:
    assert list(shipped.claim_kinds) == [
        "fact", "preference", "decision", "commitment", "event", "belief", "correction", "project_state"]


def test_shipped_relationship_types_only_name_shipped_page_types(shipped: Ontology) -> None:
    assert {"works_at", "works_on", "member_of", "knows", "owns", "part_of", "depends_on", "about",
            "related_to"} <= set(shipped.relation_types)
    for relation in shipped.relation_types.values():
        for name in relation.from_types + relation.to_types:
            assert name == "*" or name in shipped.page_types, (relation.name, name)


def test_every_shipped_page_type_files_under_pages(shipped: Ontology) -> None:
    for page_type in shipped.page_types.values():
        assert page_type.filing and all(prefix.startswith("pages/") for prefix in page_type.filing)
        assert shipped.filing_dir(page_type.name) == page_type.filing[0]
    assert shipped.filing_dir("unknown") == "pages/unknown/"


# --- classification -------------------------------------------------------------------


@pytest.mark.parametrize(("path", "expected"), [
    ("pages/people/dana.md", "person"),
    ("pages/organizations/acme.md", "organization"),
    ("pages/repositories/sub/dir/x.md", "repository"),
    ("pages/notes/x.md", "note"),
    ("pages/unsorted.md", "note"),           # only the shorter 'pages/' prefix matches
    ("claims/x.md", "note"),                 # no prefix: the default
    ("pages/peoples/x.md", "note"),          # a prefix is a directory, not a string start
])
def test_classify_uses_the_longest_filing_prefix(path: str, expected: str, shipped: Ontology) -> None:
    assert shipped.classify(path) == expected


def test_longest_prefix_wins_whatever_the_definition_order() -> None:
    ontology = Ontology.from_text(
        "default_page_type: misc\npage_types:\n"
        "  deep: {filing: [a/b/c/]}\n  shallow: {filing: [a/]}\n  middle: {filing: [a/b/]}\n", "test")
    assert ontology.classify("a/b/c/x.md") == "deep"
    assert ontology.classify("a/b/x.md") == "middle"
    assert ontology.classify("a/x.md") == "shallow"
    assert ontology.classify("z/x.md") == "misc"


# --- field checks ---------------------------------------------------------------------

FIELD_CASES = [
    ("string", "one line", ["two\nlines", 5, None, ["x"]]),
    ("text", "many\nlines", [5, None, {"a": 1}]),
    ("integer", 42, [True, 4.0, "42", None]),
    ("number", 4.5, [True, "4.5", None]),
    ("boolean", False, [0, "false", None]),
    ("date", "2026-11-29", ["29/11/2026", "2026-11-29T10:00:00Z", "2026-1-2", 20261129]),
    ("url", "https://example.com/a?b=c", ["example.com", "https://", "https://a b", 5]),
    ("email", "dana@example.com", ["dana", "dana@example", "a@b@c.d", "da na@example.com", 5]),
]


@pytest.mark.parametrize(("kind", "good", "bads"), FIELD_CASES)
def test_each_scalar_field_type_accepts_good_and_rejects_bad_values(kind: str, good: Any, bads: list) -> None:
    ontology = custom(f"      f: {kind}\n")
    assert ontology.check_fields("thing", {"f": good}) == []
    for bad in bads:
        findings = ontology.check_fields("thing", {"f": bad})
        assert [(f.code, f.field) for f in findings] == [("invalid_field", "fields.f")], bad


@pytest.mark.parametrize("impossible", ["2026-02-30", "2026-13-45", "2026-00-10"])
def test_date_must_be_a_real_calendar_date(impossible: str) -> None:
    [finding] = custom("      f: date\n").check_fields("thing", {"f": impossible})
    assert finding.code == "invalid_field"


def test_number_accepts_integers_too() -> None:
    assert custom("      f: number\n").check_fields("thing", {"f": 3}) == []


def test_enum_accepts_only_its_values() -> None:
    ontology = custom("      f: {type: enum, values: [red, green]}\n")
    assert ontology.check_fields("thing", {"f": "green"}) == []
    for bad in ["blue", "Red", None, ["red"]]:
        [finding] = ontology.check_fields("thing", {"f": bad})
        assert finding.code == "invalid_field" and "['red', 'green']" in finding.message


def test_page_field_needs_a_record_id_and_is_cross_referenced() -> None:
    ontology = custom("      owner: {type: page, page_types: [person]}\n")
    assert ontology.check_fields("thing", {"owner": "pg_dana"}) == []
    for bad in ["not an id", "../x", 5, None]:
        assert [f.field for f in ontology.check_fields("thing", {"owner": bad})] == ["fields.owner"]
    assert ontology.page_field_refs("thing", {"owner": "pg_dana"}) == [("owner", "pg_dana", ("person",))]


def test_list_field_checks_every_item_and_names_the_bad_one() -> None:
    ontology = custom("      dates: {type: list, items: date}\n      names: list\n")
    assert ontology.check_fields("thing", {"dates": ["2026-01-01", "2026-02-02"], "names": ["a", "b"]}) == []
    [finding] = ontology.check_fields("thing", {"dates": ["2026-01-01", "soon"]})
    assert finding.field == "fields.dates" and finding.message.startswith("item 2")
    [finding] = ontology.check_fields("thing", {"names": "a"})
    assert finding.message == "must be a list"


def test_list_of_pages_yields_one_reference_per_item() -> None:
    ontology = custom("      members: {type: list, items: {type: page, page_types: [person]}}\n")
    refs = ontology.page_field_refs("thing", {"members": ["pg_a", "pg_b"]})
    assert refs == [("members", "pg_a", ("person",)), ("members", "pg_b", ("person",))]


def test_unknown_fields_are_rejected(shipped: Ontology) -> None:
    [finding] = shipped.check_fields("person", {"role": "CTO", "shoe_size": 44})
    assert (finding.code, finding.field) == ("unknown_field", "fields.shoe_size")


def test_unknown_page_type_is_rejected(shipped: Ontology) -> None:
    [finding] = shipped.check_fields("spaceship", {})
    assert (finding.code, finding.field) == ("unknown_type", "type")


def test_fields_must_be_a_mapping_but_may_be_absent(shipped: Ontology) -> None:
    assert shipped.check_fields("person", None) == []
    assert [f.code for f in shipped.check_fields("person", ["role"])] == ["invalid_field"]


@pytest.mark.parametrize(("definition", "where"), [
    ("{type: colour}", "page_types.thing.fields.f"),
    ("{type: enum}", "page_types.thing.fields.f"),
    ("{type: enum, values: []}", "page_types.thing.fields.f"),
    ("{type: list, items: list}", "page_types.thing.fields.f"),
    ("{type: page, page_types: [Not-A-Name]}", "page_types.thing.fields.f.page_types"),
    ("[string]", "page_types.thing.fields.f"),
])
def test_bad_field_definitions_are_findings_and_the_field_is_dropped(definition: str, where: str) -> None:
    ontology = custom(f"      f: {definition}\n      ok: string\n")
    assert ("ontology_invalid", where) in codes(ontology)
    assert set(ontology.page_types["thing"].fields) == {"ok"}


# --- relationship endpoints ---------------------------------------------------------------


def test_endpoints_within_the_allowed_types_are_fine(shipped: Ontology) -> None:
    assert shipped.check_endpoints("works_at", "person", "organization") == []
    assert shipped.check_endpoints("works_on", "organization", "project") == []


def test_each_wrong_endpoint_is_a_finding(shipped: Ontology) -> None:
    findings = shipped.check_endpoints("works_at", "project", "person")
    assert [(f.code, f.field) for f in findings] == [("endpoint_type", "from"), ("endpoint_type", "to")]


def test_wildcard_allows_any_page_type(shipped: Ontology) -> None:
    assert shipped.check_endpoints("related_to", "concept", "place") == []
    assert shipped.check_endpoints("about", "note", "person") == []
    assert [f.field for f in shipped.check_endpoints("about", "person", "note")] == ["from"]


def test_unknown_endpoint_types_are_not_judged(shipped: Ontology) -> None:
    assert shipped.check_endpoints("works_at", None, None) == []


def test_unknown_relation_is_a_finding(shipped: Ontology) -> None:
    [finding] = shipped.check_endpoints("employs", "person", "person")
    assert (finding.code, finding.field) == ("unknown_relation", "relation")


# --- extensions ---------------------------------------------------------------------------


def test_extension_adds_a_page_type_field_relationship_and_claim_kind(shipped: Ontology) -> None:
    extended = shipped.extended(
        "format: knowledge-ontology-v1\n"
        "page_types:\n"
        "  recipe:\n    label: Recipe\n    filing: [pages/recipes/]\n    fields:\n      serves: integer\n"
        "  person:\n    fields:\n      nickname: string\n"
        "relationship_types:\n  cooked:\n    from: [person]\n    to: [recipe]\n"
        "claim_kinds:\n  rumour: Something heard second hand.\n",
        EXT,
    )
    assert extended.findings == ()
    assert extended.sources == ("shipped", EXT)
    assert extended.classify("pages/recipes/soup.md") == "recipe"
    assert extended.check_fields("recipe", {"serves": 4}) == []
    assert extended.page_types["recipe"].provenance == EXT
    assert extended.check_fields("person", {"nickname": "Dee", "role": "CTO"}) == []
    assert extended.page_types["person"].fields["nickname"].provenance == EXT
    assert extended.page_types["person"].label == "Person"
    assert extended.check_endpoints("cooked", "person", "recipe") == []
    assert extended.claim_kinds["rumour"] == "Something heard second hand."
    # the shipped ontology itself is untouched
    assert "recipe" not in shipped.page_types and "nickname" not in shipped.page_types["person"].fields


def test_redefining_a_shipped_label_is_a_conflict_but_new_fields_still_apply(shipped: Ontology) -> None:
    extended = shipped.extended(
        "page_types:\n  person:\n    label: Human\n    filing: [people/]\n    fields:\n      nickname: string\n", EXT)
    assert codes(extended) == [("ontology_conflict", "page_types.person")]
    assert "label" in extended.findings[0].message and "filing" in extended.findings[0].message
    assert extended.page_types["person"].label == "Person"
    assert extended.page_types["person"].filing == ("pages/people/",)
    assert "nickname" in extended.page_types["person"].fields


def test_redefining_an_existing_field_is_a_conflict_and_keeps_the_shipped_one(shipped: Ontology) -> None:
    extended = shipped.extended("page_types:\n  person:\n    fields:\n      email: string\n      pet: string\n", EXT)
    assert codes(extended) == [("ontology_conflict", "page_types.person.fields.email")]
    assert extended.page_types["person"].fields["email"].type == "email"
    assert "pet" in extended.page_types["person"].fields


def test_redefining_a_relationship_is_a_conflict_while_the_rest_applies(shipped: Ontology) -> None:
    extended = shipped.extended(
        "relationship_types:\n  works_at: {from: ['*'], to: ['*']}\n  mentors: {from: [person], to: [person]}\n", EXT)
    assert codes(extended) == [("ontology_conflict", "relationship_types.works_at")]
    assert extended.relation_types["works_at"].from_types == ("person",)
    assert "mentors" in extended.relation_types


def test_relationship_naming_unknown_page_types_is_a_finding(shipped: Ontology) -> None:
    extended = shipped.extended("relationship_types:\n  flies: {from: [pilot], to: [person]}\n", EXT)
    assert codes(extended) == [("ontology_invalid", "relationship_types.flies")]
    assert "pilot" in extended.findings[0].message


def test_relationship_may_name_page_types_the_same_extension_adds(shipped: Ontology) -> None:
    extended = shipped.extended(
        "page_types:\n  pilot: {filing: [pages/pilots/]}\nrelationship_types:\n  flies: {from: [pilot], to: ['*']}\n", EXT)
    assert extended.findings == ()


@pytest.mark.parametrize(("definition", "where"), [
    ("{from: [], to: [person]}", "relationship_types.r"),
    ("{from: person, to: [person]}", "relationship_types.r.from"),
    ("{from: [Person], to: [person]}", "relationship_types.r.from"),
    ("[person, person]", "relationship_types.r"),
])
def test_malformed_relationship_types_are_findings(definition: str, where: str, shipped: Ontology) -> None:
    extended = shipped.extended(f"relationship_types:\n  r: {definition}\n", EXT)
    assert ("ontology_invalid", where) in codes(extended)
    assert "r" not in extended.relation_types


def test_an_invalid_relationship_type_name_is_a_finding(shipped: Ontology) -> None:
    # Page types with bad names are reported; relationship types must be too.
    extended = shipped.extended("relationship_types:\n  Bad-Name: {from: [person], to: [person]}\n", EXT)
    assert "Bad-Name" not in extended.relation_types
    assert [code for code, _ in codes(extended)] == ["ontology_invalid"]


def test_an_invalid_page_type_name_is_a_finding(shipped: Ontology) -> None:
    extended = shipped.extended("page_types:\n  Bad-Name: {}\n  good: {}\n", EXT)
    assert codes(extended) == [("ontology_invalid", "page_types")]
    assert "good" in extended.page_types and "Bad-Name" not in extended.page_types


def test_redefining_a_shipped_claim_kind_is_a_conflict(shipped: Ontology) -> None:
    extended = shipped.extended("claim_kinds:\n  fact: Something else entirely.\n", EXT)
    assert extended.claim_kinds["fact"] == shipped.claim_kinds["fact"]
    assert [code for code, _ in codes(extended)] == ["ontology_conflict"]


@pytest.mark.parametrize("filing", ["/abs/", "../up/", "no-slash", "a/../b/"])
def test_unsafe_filing_prefixes_are_findings(filing: str, shipped: Ontology) -> None:
    extended = shipped.extended(f"page_types:\n  recipe:\n    filing: ['{filing}', pages/recipes/]\n", EXT)
    assert codes(extended) == [("ontology_invalid", "page_types.recipe.filing")]
    assert extended.page_types["recipe"].filing == ("pages/recipes/",)


@pytest.mark.parametrize("text", ["page_types: [\n", "a: 1\na: 2\n", "x: &a 1\ny: *a\n", "- a list\n",
                                  "page_types: [recipe]\n", "format: knowledge-ontology-v2\n"])
def test_an_unreadable_extension_is_one_finding_and_shipped_stays(text: str, shipped: Ontology) -> None:
    extended = shipped.extended(text, EXT)
    assert [(f.code, f.path) for f in extended.findings] == [("ontology_invalid", EXT)]
    assert extended.page_types == shipped.page_types
    assert extended.relation_types == shipped.relation_types
    assert extended.claim_kinds == shipped.claim_kinds


def test_a_malformed_extension_names_its_line(shipped: Ontology) -> None:
    [finding] = shipped.extended("page_types:\n  a: 1\n  a: 2\n", EXT).findings
    assert finding.line == 3


def test_an_extension_nested_too_deeply_is_one_finding(shipped: Ontology) -> None:
    # "A document that cannot be read at all ... reports one finding", never an exception.
    extended = shipped.extended("page_types: " + "[" * 30 + "]" * 30 + "\n", EXT)
    assert [(f.code, f.path) for f in extended.findings] == [("ontology_invalid", EXT)]
    assert extended.page_types == shipped.page_types


def test_an_oversized_ontology_is_an_error() -> None:
    text = "# padding\n" * (ONTOLOGY_MAX_BYTES // 10 + 1)
    with pytest.raises(InvalidParams, match="larger than"):
        Ontology.from_text(text, EXT)


def test_an_oversized_extension_leaves_shipped_in_force(shipped: Ontology) -> None:
    extended = shipped.extended("# padding\n" * (ONTOLOGY_MAX_BYTES // 10 + 1), EXT)
    assert len(extended.findings) == 1 and "larger than" in extended.findings[0].message
    assert extended.page_types == shipped.page_types


def test_an_ontology_of_exactly_the_limit_is_read() -> None:
    text = "page_types: {}\n"
    text += "#" * (ONTOLOGY_MAX_BYTES - len(text) - 1) + "\n"
    assert Ontology.from_text(text, EXT).findings == ()


@pytest.mark.parametrize("text", ["format: knowledge-ontology-v2\n", "format: 1\n"])
def test_a_wrong_format_string_is_an_error(text: str) -> None:
    with pytest.raises(InvalidParams, match="knowledge-ontology-v1"):
        Ontology.from_text(text, EXT)


@pytest.mark.parametrize("key", ["page_types", "relationship_types", "claim_kinds"])
def test_top_level_sections_must_be_mappings(key: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        Ontology.from_text(f"{key}: [a]\n", EXT)
    assert caught.value.details["field"] == key


def test_an_empty_extension_changes_nothing(shipped: Ontology) -> None:
    extended = shipped.extended("", EXT)
    assert extended.findings == () and extended.page_types == shipped.page_types
