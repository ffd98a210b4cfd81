"""knowledge_ontology: catalog, definitions, sources and diagnostics views of the effective ontology."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.core.errors import InvalidParams, LimitExceeded, NotFound
from engine.memory.ontology_views import PARAMS, TOOL_INPUT_SCHEMA, ontology_view, parse_ontology_request
from engine.service import Engine
from tests.helpers import claim, conversation, only_store, operator, page, private_dir, vault_snapshot

SESSION = "3d5c8e1a-7b2f-4c9d-8e6a-1f0b2c3d4e5f"
NOW = "2026-01-05T09:00:00Z"
SHIPPED_TEXT = resources.files("engine.vault").joinpath("ontology.yaml").read_text(encoding="utf-8")
SHIPPED = yaml.safe_load(SHIPPED_TEXT)
N_PAGE, N_RELATION, N_CLAIM = (len(SHIPPED[key]) for key in ("page_types", "relationship_types", "claim_kinds"))
EXTENSION = """\
format: knowledge-ontology-v1
page_types:
  recipe:
    label: Recipe
    description: A dish worth cooking again.
    aliases: [dish]
    filing: [pages/recipes/]
    fields:
      cuisine: {type: string}
      course: {type: enum, values: [starter, main, dessert]}
  person:
    fields:
      nickname: {type: string, description: What friends call them.}
relationship_types:
  cooked:
    label: cooked
    description: Someone made a dish.
    from: [person]
    to: [recipe]
claim_kinds:
  tasting_note: How a dish turned out.
"""
BROKEN_EXTENSION = """\
format: knowledge-ontology-v1
page_types:
  gadget:
    fields:
      weight: {type: kilograms}
relationship_types:
  knows:
    from: [person]
    to: [person]
  likes:
    from: [person]
    to: [dragon]
"""


def view(engine: Engine, caller: Any, **params: Any) -> dict[str, Any]:
    return ontology_view(engine, caller, params)


def extension_path(engine: Engine) -> Path:
    return only_store(engine.state) / "vault" / "ontology.yaml"


def extend(engine: Engine, text: str = EXTENSION) -> Path:
    path = extension_path(engine)
    path.write_text(text, encoding="utf-8")
    return path


def place_record(engine: Engine, relpath: str, frontmatter: dict[str, Any]) -> None:
    document = {"format": "knowledge-record-v1", "revision": 1, "recorded_at": NOW, "updated_at": NOW,
                "scope": "private", "lifecycle": "active", **frontmatter}
    path = private_dir(engine.state) / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(("---\n" + yaml.safe_dump(document, sort_keys=False) + "---\nBy hand.\n").encode("utf-8"))


@pytest.fixture
def store(engine: Engine, owner: Any) -> None:
    """The owner's store exists, with one page."""
    engine.save_page(owner, page("first", "Dana Whitaker"))


def names(entries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(entry["kind"], entry["name"]) for entry in entries]


def expected_fingerprint(result: dict[str, Any]) -> str:
    body = {key: value for key, value in result.items() if key != "fingerprint"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                          .encode("utf-8")).hexdigest()


# --- catalog ---------------------------------------------------------------------------------------


def test_the_default_view_is_the_whole_catalog(engine, owner, store):
    result = ontology_view(engine, owner, {})

    assert result == view(engine, owner, view="catalog")
    assert result["view"] == "catalog"
    assert result["total"] == N_PAGE + N_RELATION + N_CLAIM == len(result["entries"])
    assert (result["offset"], result["limit"]) == (0, 50) and "nextOffset" not in result
    expected = ([("page", name) for name in SHIPPED["page_types"]]
                + [("relationship", name) for name in SHIPPED["relationship_types"]]
                + [("claim", name) for name in SHIPPED["claim_kinds"]])
    assert names(result["entries"]) == expected
    person = result["entries"][0]
    assert person == {"name": "person", "kind": "page", "label": "Person",
                      "description": SHIPPED["page_types"]["person"]["description"],
                      "aliases": ["people", "contact"], "provenance": "shipped", "recordCount": 1}
    works_at = next(entry for entry in result["entries"] if entry["name"] == "works_at")
    assert (works_at["label"], works_at["aliases"], works_at["provenance"]) == ("works at", [], "shipped")
    project_state = next(entry for entry in result["entries"] if entry["name"] == "project_state")
    assert (project_state["label"], project_state["description"]) == (
        "project state", SHIPPED["claim_kinds"]["project_state"])


def test_record_counts_are_current_records_of_the_partition(engine, owner, store):
    engine.save_page(owner, page("p2", "Sam Okafor"))
    engine.save_page(owner, page("p3", "Apollo", "project"))
    first = engine.remember(owner, {"requestId": "c1", "items": [claim("Dana leads Apollo.", "Dana leads it")]})
    engine.remember(owner, {"requestId": "c2", "items": [
        claim("Sam leads Apollo.", "Sam leads it now", replaces=first["items"][0]["id"]),  # supersedes the first
        {"relation": "works_on", "from": "Sam Okafor", "to": "Apollo", "excerpt": "Sam works on Apollo"},
    ]})
    place_record(engine, "pages/people/broken.md", {"id": "pg_broken", "kind": "page", "title": "Broken",
                                                   "type": "person", "fields": {"shoe_size": 42}})
    engine.save_page(conversation(owner.token, SESSION), page("chat", "Chat person"))

    counts = {(e["kind"], e["name"]): e["recordCount"] for e in view(engine, owner)["entries"]}

    assert counts[("page", "person")] == 2  # the invalid page and the conversation's page do not count
    assert counts[("page", "project")] == 1
    assert counts[("claim", "fact")] == 1   # the superseded claim does not count
    assert counts[("relationship", "works_on")] == 1
    assert counts[("page", "organization")] == 0
    chat_counts = {(e["kind"], e["name"]): e["recordCount"]
                   for e in view(engine, conversation(owner.token, SESSION))["entries"]}
    assert chat_counts[("page", "person")] == 1 and chat_counts[("claim", "fact")] == 0


def test_the_catalog_filters_by_kind_and_pages_with_next_offset(engine, owner, store):
    collected, offset, pages = [], 0, 0
    while True:
        result = view(engine, owner, kind="page", limit=4, offset=offset)
        assert result["kind"] == "page" and result["total"] == N_PAGE and result["limit"] == 4
        assert all(entry["kind"] == "page" for entry in result["entries"])
        collected += result["entries"]
        pages += 1
        if "nextOffset" not in result:
            break
        assert result["nextOffset"] == offset + 4
        offset = result["nextOffset"]
    assert [entry["name"] for entry in collected] == list(SHIPPED["page_types"])
    assert pages == -(-N_PAGE // 4)
    assert view(engine, owner, kind="claim")["total"] == N_CLAIM
    assert names(view(engine, owner, kind="relationship", limit=1)["entries"]) == [
        ("relationship", next(iter(SHIPPED["relationship_types"])))]
    exact = view(engine, owner, kind="page", limit=N_PAGE)  # a page that ends exactly at the end
    assert len(exact["entries"]) == N_PAGE and "nextOffset" not in exact
    beyond = view(engine, owner, kind="page", offset=500)
    assert beyond["entries"] == [] and "nextOffset" not in beyond


def test_fingerprints_are_the_sha256_of_the_page_and_follow_its_content(engine, owner, store):
    first = view(engine, owner)
    assert first["fingerprint"] == expected_fingerprint(first)
    assert view(engine, owner)["fingerprint"] == first["fingerprint"]
    assert view(engine, owner, limit=5)["fingerprint"] != first["fingerprint"]

    engine.save_page(owner, page("another", "Sam Okafor"))
    assert view(engine, owner)["fingerprint"] != first["fingerprint"]  # a record count changed
    definitions = view(engine, owner, view="definitions", name="person")
    assert definitions["fingerprint"] == expected_fingerprint(definitions)


# --- definitions ---------------------------------------------------------------------------------------


def test_a_page_type_definition_has_fields_values_filing_and_provenance(engine, owner, store):
    result = view(engine, owner, view="definitions", name="project")

    assert result["total"] == 1 and result["name"] == "project"
    [project] = result["definitions"]
    assert (project["kind"], project["label"], project["provenance"]) == ("page", "Project", "shipped")
    assert project["filing"] == ["pages/projects/"] and project["aliases"] == ["initiative"]
    assert project["default"] is False
    assert project["fields"]["status"] == {
        "type": "enum", "values": ["active", "paused", "completed", "cancelled"], "provenance": "shipped",
        "description": SHIPPED["page_types"]["project"]["fields"]["status"]["description"]}
    assert project["fields"]["repository"] == {"type": "page", "pageTypes": ["repository"],
                                               "provenance": "shipped"}
    assert set(project["fields"]) == set(SHIPPED["page_types"]["project"]["fields"])
    assert "records" not in project and "recordCount" not in project
    assert view(engine, owner, view="definitions", name="note")["definitions"][0]["default"] is True


def test_a_relationship_definition_has_its_endpoint_constraints(engine, owner, store):
    [works_on] = view(engine, owner, view="definitions", name="works_on")["definitions"]
    assert works_on["kind"] == "relationship"
    assert (works_on["from"], works_on["to"]) == (["person", "organization"], ["project"])
    [related] = view(engine, owner, view="definitions", name="related_to")["definitions"]
    assert (related["from"], related["to"]) == (["*"], ["*"])


def test_a_name_shared_by_two_kinds_gives_both_unless_kind_narrows_it(engine, owner, store):
    both = view(engine, owner, view="definitions", name="event")
    assert names(both["definitions"]) == [("page", "event"), ("claim", "event")]
    claim_only = view(engine, owner, view="definitions", name="event", kind="claim")
    assert names(claim_only["definitions"]) == [("claim", "event")]
    assert claim_only["definitions"][0]["description"] == SHIPPED["claim_kinds"]["event"]


def test_a_definition_is_found_by_alias(engine, owner, store):
    assert names(view(engine, owner, view="definitions", name="Repo")["definitions"]) == [("page", "repository")]


@pytest.mark.parametrize("params", [{"name": "spaceship"}, {"name": "project", "kind": "claim"}])
def test_an_unknown_definition_is_not_found(engine, owner, store, params):
    with pytest.raises(NotFound) as caught:
        view(engine, owner, view="definitions", **params)
    assert caught.value.details["field"] == "name"


def test_all_definitions_page_ten_at_a_time(engine, owner, store):
    first = view(engine, owner, view="definitions")
    assert (first["limit"], first["total"], first["nextOffset"]) == (10, N_PAGE + N_RELATION + N_CLAIM, 10)
    assert len(first["definitions"]) == 10
    relations = view(engine, owner, view="definitions", kind="relationship", limit=100)
    assert [d["name"] for d in relations["definitions"]] == list(SHIPPED["relationship_types"])
    assert all({"from", "to"} <= set(d) for d in relations["definitions"])


def test_include_records_adds_up_to_twenty_summaries_per_type(engine, owner, store):
    for number in range(21):
        engine.save_page(owner, page(f"person-{number}", f"Person {number}"))
    engine.save_page(owner, page("proj", "Apollo", "project"))

    result = view(engine, owner, view="definitions", kind="page", includeRecords=True, limit=3)

    person, organization, project = result["definitions"]
    assert (person["recordCount"], len(person["records"]), person["recordsTruncated"]) == (22, 20, True)
    assert set(person["records"][0]) == {"id", "revision", "kind", "type", "title"}  # the record summary
    assert all(record["revision"] == 1 for record in person["records"])
    assert (organization["records"], organization["recordsTruncated"]) == ([], False)
    assert [record["title"] for record in project["records"]] == ["Apollo"]
    assert project["recordsTruncated"] is False
    ids = {record["id"] for record in person["records"]}
    assert len(ids) == 20 and all(engine.get_record(owner, rid)["status"] == "current" for rid in ids)


# --- private extensions --------------------------------------------------------------------------------


def test_private_extensions_appear_with_their_provenance(engine, owner, store):
    extend(engine)

    catalog = view(engine, owner)
    provenance = {(e["kind"], e["name"]): e["provenance"] for e in catalog["entries"]}
    assert provenance[("page", "recipe")] == "vault/ontology.yaml"
    assert provenance[("relationship", "cooked")] == "vault/ontology.yaml"
    assert provenance[("claim", "tasting_note")] == "vault/ontology.yaml"
    assert provenance[("page", "person")] == "shipped"
    assert catalog["total"] == N_PAGE + N_RELATION + N_CLAIM + 3
    [person] = view(engine, owner, view="definitions", name="person", kind="page")["definitions"]
    assert person["fields"]["nickname"] == {"type": "string", "description": "What friends call them.",
                                            "provenance": "vault/ontology.yaml"}
    assert person["fields"]["email"]["provenance"] == "shipped"
    [recipe] = view(engine, owner, view="definitions", name="dish")["definitions"]
    assert (recipe["name"], recipe["filing"]) == ("recipe", ["pages/recipes/"])
    assert recipe["fields"]["course"]["values"] == ["starter", "main", "dessert"]


def test_private_extensions_do_not_apply_to_conversations(engine, owner, store):
    extend(engine)
    chat = conversation(owner.token, SESSION)
    catalog = view(engine, chat)
    assert catalog["total"] == N_PAGE + N_RELATION + N_CLAIM
    assert ("page", "recipe") not in names(catalog["entries"])
    with pytest.raises(NotFound):
        view(engine, chat, view="definitions", name="recipe")
    assert [s["path"] for s in view(engine, chat, view="sources")["sources"]] == ["shipped/ontology.yaml"]


# --- sources --------------------------------------------------------------------------------------------


def test_sources_list_the_shipped_file_and_the_vault_extension(engine, owner, store):
    shipped_bytes = SHIPPED_TEXT.encode("utf-8")
    alone = view(engine, owner, view="sources")
    assert alone["sources"] == [{"path": "shipped/ontology.yaml", "provenance": "shipped", "role": "shipped",
                                 "size": len(shipped_bytes), "sha256": hashlib.sha256(shipped_bytes).hexdigest(),
                                 "applied": True}]
    path = extend(engine)
    listed = view(engine, owner, view="sources")
    assert listed["total"] == 2 and listed["fingerprint"] != alone["fingerprint"]
    assert listed["sources"][1] == {"path": "vault/ontology.yaml", "provenance": "vault/ontology.yaml",
                                    "role": "extension", "applied": True, "size": path.stat().st_size,
                                    "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert view(engine, owner, view="sources", limit=1)["nextOffset"] == 1


def test_a_source_path_returns_the_yaml(engine, owner, store):
    shipped = view(engine, owner, view="sources", sourcePath="shipped/ontology.yaml")
    assert shipped["text"] == SHIPPED_TEXT and shipped["truncated"] is False
    assert (shipped["totalChars"], shipped["maxChars"]) == (len(SHIPPED_TEXT), 12_000)
    assert shipped["sha256"] == hashlib.sha256(SHIPPED_TEXT.encode("utf-8")).hexdigest()
    assert shipped["fingerprint"] == expected_fingerprint(shipped)

    short = view(engine, owner, view="sources", sourcePath="shipped/ontology.yaml", maxChars=256)
    assert short["text"] == SHIPPED_TEXT[:256] and short["truncated"] is True

    path = extend(engine)
    extension = view(engine, owner, view="sources", sourcePath="vault/ontology.yaml")
    assert extension["text"] == path.read_text(encoding="utf-8") and extension["applied"] is True


def test_a_long_extension_is_truncated_at_twelve_thousand_characters_by_default(engine, owner, store):
    text = EXTENSION + "".join(f"# padding line {n:05d} " + "x" * 60 + "\n" for n in range(300))
    assert 12_000 < len(text) <= 64 * 1024
    extend(engine, text)
    default = view(engine, owner, view="sources", sourcePath="vault/ontology.yaml")
    assert (len(default["text"]), default["truncated"], default["totalChars"]) == (12_000, True, len(text))
    whole = view(engine, owner, view="sources", sourcePath="vault/ontology.yaml", maxChars=65_536)
    assert whole["text"] == text and whole["truncated"] is False
    assert whole["fingerprint"] != default["fingerprint"]


@pytest.mark.parametrize("source_path", [
    "../vault.json", "/etc/passwd", "vault/../vault.json", "shipped/./ontology.yaml", "vault//ontology.yaml",
    "vault\\ontology.yaml", "", "vault/ontology.yaml\x00", 7,
])
def test_path_tricks_in_source_path_are_refused(engine, owner, store, source_path):
    extend(engine)
    with pytest.raises(InvalidParams) as caught:
        view(engine, owner, view="sources", sourcePath=source_path)
    assert caught.value.details["field"] == "sourcePath"


@pytest.mark.parametrize("source_path", ["state.sqlite", "vault.json", "private/.partition.json",
                                         "ontology.yaml", "vault/private/.partition.json", "engine/ontology.yaml"])
def test_a_path_not_in_the_list_is_not_found(engine, owner, store, source_path):
    extend(engine)
    with pytest.raises(NotFound) as caught:
        view(engine, owner, view="sources", sourcePath=source_path)
    assert caught.value.details["field"] == "sourcePath"


def test_the_vault_extension_is_not_found_where_it_is_absent_or_does_not_apply(engine, owner, store):
    with pytest.raises(NotFound):
        view(engine, owner, view="sources", sourcePath="vault/ontology.yaml")
    extend(engine)
    with pytest.raises(NotFound):
        view(engine, conversation(owner.token, SESSION), view="sources", sourcePath="vault/ontology.yaml")


def test_a_symlinked_extension_is_listed_as_unreadable_and_never_followed(engine, owner, store, tmp_path):
    secret = tmp_path / "secret.yaml"
    secret.write_text(EXTENSION, encoding="utf-8")
    extension_path(engine).symlink_to(secret)

    [_, listed] = view(engine, owner, view="sources")["sources"]
    assert (listed["readable"], listed["applied"]) == (False, False) and "symlink" in listed["problem"]
    assert "sha256" not in listed
    with pytest.raises(InvalidParams):
        view(engine, owner, view="sources", sourcePath="vault/ontology.yaml")
    chain = view(engine, owner, view="diagnostics")["chain"]
    assert chain[1]["applied"] is False


# --- diagnostics ---------------------------------------------------------------------------------------


def test_diagnostics_show_the_chain_and_definition_findings(engine, owner, store):
    clean = view(engine, owner, view="diagnostics")
    assert clean["chain"] == [{"provenance": "shipped", "sourcePath": "shipped/ontology.yaml", "role": "shipped",
                               "applied": True}]
    assert (clean["findings"], clean["total"], clean["extensionsApply"], clean["errors"]) == ([], 0, True, 0)

    extend(engine, BROKEN_EXTENSION)
    result = view(engine, owner, view="diagnostics")

    assert result["chain"][1] == {"provenance": "vault/ontology.yaml", "sourcePath": "vault/ontology.yaml",
                                  "role": "extension", "applied": True}
    found = {(f["code"], f["field"]) for f in result["findings"]}
    assert found == {("ontology_invalid", "page_types.gadget.fields.weight"),
                     ("ontology_conflict", "relationship_types.knows"),
                     ("ontology_invalid", "relationship_types.likes")}
    assert all(f["concerns"] == "definition" and f["path"] == "vault/ontology.yaml" for f in result["findings"])
    assert result["errors"] == 3 and result["fingerprint"] == expected_fingerprint(result)


def test_an_unreadable_extension_is_one_finding_and_not_applied(engine, owner, store):
    extend(engine, "page_types: [not, a, mapping]\n")
    result = view(engine, owner, view="diagnostics")
    assert result["chain"][1]["applied"] is False
    assert [f["code"] for f in result["findings"]] == ["ontology_invalid"]


def test_diagnostics_include_records_that_break_the_ontology_and_page(engine, owner, store):
    place_record(engine, "pages/people/shoe.md", {"id": "pg_shoe", "kind": "page", "title": "Shoe",
                                                 "type": "person", "fields": {"shoe_size": 42}})
    place_record(engine, "pages/odd.md", {"id": "pg_odd", "kind": "page", "title": "Odd", "type": "spaceship"})
    place_record(engine, "claims/odd.md", {"id": "cl_odd", "kind": "claim", "title": "Odd", "claim_kind": "rumour",
                                          "assertion_origin": "user", "evidence": [{"source": "src_x"}]})
    place_record(engine, "pages/no-title.md", {"id": "pg_no_title", "kind": "page", "title": ""})  # not ontology

    result = view(engine, owner, view="diagnostics")

    found = {(f["code"], f["path"]) for f in result["findings"]}
    assert found == {("unknown_field", "pages/people/shoe.md"), ("unknown_type", "pages/odd.md"),
                     ("envelope", "claims/odd.md")}
    assert all(f["concerns"] == "record" for f in result["findings"])
    paged = view(engine, owner, view="diagnostics", limit=2)
    assert (len(paged["findings"]), paged["total"], paged["nextOffset"]) == (2, 3, 2)
    rest = view(engine, owner, view="diagnostics", limit=2, offset=2)
    assert len(rest["findings"]) == 1 and "nextOffset" not in rest
    assert paged["findings"] + rest["findings"] == result["findings"]


def test_conversation_diagnostics_have_only_the_shipped_link(engine, owner, store):
    extend(engine, BROKEN_EXTENSION)
    result = view(engine, conversation(owner.token, SESSION), view="diagnostics")
    assert [link["provenance"] for link in result["chain"]] == ["shipped"]
    assert (result["extensionsApply"], result["findings"]) == (False, [])


# --- callers and parameters ------------------------------------------------------------------------------


def test_the_operator_reads_the_agents_private_ontology(engine, owner, store):
    extend(engine)
    catalog = view(engine, operator("main"), kind="page")
    assert ("page", "recipe") in names(catalog["entries"])


@pytest.mark.parametrize(("params", "field"), [
    ({"bogus": 1}, "bogus"),
    ({"view": "everything"}, "view"),
    ({"kind": "pages"}, "kind"),
    ({"kind": "relationship_type"}, "kind"),
    ({"limit": 0}, "limit"),
    ({"limit": "5"}, "limit"),
    ({"limit": True}, "limit"),
    ({"limit": 2.5}, "limit"),
    ({"offset": -1}, "offset"),
    ({"view": "definitions", "includeRecords": "yes"}, "includeRecords"),
    ({"view": "definitions", "name": ""}, "name"),
    ({"view": "definitions", "name": "two\nlines"}, "name"),
    ({"view": "definitions", "name": 5}, "name"),
    ({"name": "project"}, "name"),                                     # catalog takes no name
    ({"includeRecords": True}, "includeRecords"),
    ({"sourcePath": "shipped/ontology.yaml"}, "sourcePath"),           # only the sources view
    ({"view": "sources", "maxChars": 1000}, "maxChars"),               # only with sourcePath
    ({"view": "sources", "sourcePath": "shipped/ontology.yaml", "maxChars": 255}, "maxChars"),
    ({"view": "sources", "sourcePath": "shipped/ontology.yaml", "limit": 5}, "limit"),
    ({"view": "sources", "kind": "page"}, "kind"),
    ({"view": "diagnostics", "kind": "page"}, "kind"),
    ({"view": "diagnostics", "name": "x"}, "name"),
])
def test_bad_parameters_are_refused_naming_the_field_and_change_nothing(engine, owner, store, params, field):
    before = vault_snapshot(only_store(engine.state) / "vault")
    with pytest.raises(InvalidParams) as caught:
        ontology_view(engine, owner, params)
    assert caught.value.details["field"] == field
    assert vault_snapshot(only_store(engine.state) / "vault") == before


def test_a_null_parameter_is_one_left_out_even_where_its_view_takes_none(engine, owner):
    """A strict-mode client sends every parameter, null where it means none (docs/protocol-tools.md)."""
    every = {"view": None, "kind": None, "name": None, "includeRecords": None, "limit": None, "offset": None,
             "sourcePath": None, "maxChars": None}
    assert view(engine, owner, **every) == view(engine, owner)
    assert view(engine, owner, **{**every, "view": "sources"}) == view(engine, owner, view="sources")
    assert view(engine, owner, **{**every, "view": "definitions", "name": "project"}) == view(
        engine, owner, view="definitions", name="project")


# Oversize is always limit_exceeded (issue 13), never invalid_params.
@pytest.mark.parametrize(("params", "field"), [
    ({"limit": 101}, "limit"),
    ({"view": "sources", "sourcePath": "shipped/ontology.yaml", "maxChars": 65_537}, "maxChars"),
    ({"view": "sources", "sourcePath": "x" * 300}, "sourcePath"),
    ({"view": "definitions", "name": "n" * 201}, "name"),
])
def test_oversize_parameters_are_limit_exceeded_naming_the_field_and_change_nothing(engine, owner, store, params,
                                                                                     field):
    before = vault_snapshot(only_store(engine.state) / "vault")
    with pytest.raises(LimitExceeded) as caught:
        ontology_view(engine, owner, params)
    assert caught.value.details["field"] == field
    assert vault_snapshot(only_store(engine.state) / "vault") == before


def test_parameters_must_be_an_object_and_limits_have_their_bounds():
    with pytest.raises(InvalidParams):
        parse_ontology_request(["catalog"])
    assert parse_ontology_request(None).view == "catalog"
    assert parse_ontology_request({"limit": 1}).limit == 1
    assert parse_ontology_request({"limit": 100}).limit == 100
    assert parse_ontology_request({"view": "definitions"}).limit == 10
    assert parse_ontology_request({"view": "diagnostics"}).limit == 50
    assert parse_ontology_request({"view": "sources", "sourcePath": "x", "maxChars": 256}).max_chars == 256
    assert parse_ontology_request({"view": "sources", "sourcePath": "x", "maxChars": 65_536}).max_chars == 65_536


def test_the_schema_lists_exactly_the_accepted_parameters():
    assert set(TOOL_INPUT_SCHEMA["properties"]) == PARAMS
    assert TOOL_INPUT_SCHEMA["properties"]["limit"]["anyOf"][0]["maximum"] == 100  # or null: left out
