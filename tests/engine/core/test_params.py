"""The one parameter reader: unknown keys refused first, exact types, bounds, defaults, and the JSON Schema
built from the same specs."""

from __future__ import annotations

import re

import pytest

from engine.core.errors import InvalidParams, LimitExceeded
from engine.core.params import (
    INTEGER_MAX, NO_PARAMS, AgentName, Choice, Flag, Integer, Name, Names, Number, Objects, Params, Query, RecordId, RequestId,
    String, Text, Value, without_meta,
)


def refused(params: Params, arguments, error=InvalidParams, **where) -> dict:
    with pytest.raises(error) as raised:
        params.read(arguments, **where)
    return {"message": raised.value.message, **raised.value.details}


# --- the reader -----------------------------------------------------------------------------------------


def test_an_unknown_key_is_refused_before_any_value_is_read():
    params = Params(Integer("limit", 1, 5, required=True))
    assert refused(params, {"zebra": 1, "bogus": 2, "limit": "x"}) == {
        "message": "unknown parameter bogus", "field": "bogus"}
    assert refused(params, {"x": 1}, where="recall.") == {"message": "unknown parameter recall.x",
                                                          "field": "recall.x"}
    noted = Params(note="this method takes no store")
    assert refused(noted, {"store": "s"})["message"] == "unknown parameter store; this method takes no store"
    assert refused(NO_PARAMS, {1: "int key"})["field"] == "1"


def test_parameters_are_an_object_and_none_is_no_parameters():
    assert refused(NO_PARAMS, ["a"]) == {"message": "parameters must be an object"}
    assert refused(NO_PARAMS, "x", where="recall.") == {"message": "recall must be an object", "field": "recall"}
    assert NO_PARAMS.read(None) == {} and NO_PARAMS.read({}) == {}


def test_absent_values_read_as_their_default_and_required_ones_are_refused():
    params = Params(Integer("limit", 1, 50, default=10), Name("type", 64), Integer("id", 1, required=True))
    assert params.read({"id": 3}) == {"limit": 10, "type": None, "id": 3}
    assert refused(params, {}) == {"message": "id is required", "field": "id"}
    assert refused(params, {"id": None})["field"] == "id"


def test_null_reads_as_absent_for_every_optional_parameter_of_every_kind():
    """A client in a strict mode sends null for every parameter it leaves out (docs/protocol-tools.md)."""
    optional = Params(Name("type", 64), Integer("revision", 1), Integer("limit", 1, 5, default=2),
                      Number("minScore", 0, 1, default=0.5), Choice("view", ("a", "b"), default="a"),
                      Flag("owner", default=False), Value("asOf", lambda value, field: 1 / 0),
                      Names("tags", 3, 10, default=()), Objects("items", Params(Name("t", 5)), max_items=2))
    nulls = {name: None for name in optional.names}
    assert optional.read(nulls) == optional.read({}) == {
        "type": None, "revision": None, "limit": 2, "minScore": 0.5, "view": "a", "owner": False, "asOf": None,
        "tags": (), "items": None}
    assert optional.refuse_unknown(nulls) == {}  # what a handler checks by the keys given sees none of them
    assert refused(optional, {**nulls, "zebra": None}) == {"message": "unknown parameter zebra", "field": "zebra"}


def test_a_required_parameters_null_is_refused_naming_it_unless_its_value_may_be_null():
    assert refused(Params(Name("title", 64, required=True)), {"title": None}) == {
        "message": "title is required", "field": "title"}
    assert refused(Params(Integer("limit", 1, 5, required=True)), {"limit": None}) == {
        "message": "limit must be an integer from 1 to 5", "field": "limit"}
    assert refused(Params(Flag("owner", required=True)), {"owner": None})["field"] == "owner"
    cleared = Params(Value("recall", lambda value, field: "cleared" if value is None else value, required=True))
    assert cleared.read({"recall": None}) == {"recall": "cleared"}


def test_the_schema_says_an_optional_parameter_may_be_null_and_a_required_one_may_not():
    schema = Params(Integer("limit", 1, 5, default=2, description="How many"), Name("title", 64, required=True),
                    Value("recall", required=True, json={"anyOf": [{"type": "object"}, {"type": "null"}]}),
                    Value("flushId")).schema()
    assert schema["required"] == ["title", "recall"]
    assert schema["properties"]["limit"] == {"description": "How many", "anyOf": [
        {"type": "integer", "minimum": 1, "maximum": 5, "default": 2}, {"type": "null"}]}
    assert schema["properties"]["title"] == {"type": "string", "minLength": 1, "maxLength": 64}
    assert schema["properties"]["recall"] == {"anyOf": [{"type": "object"}, {"type": "null"}]}
    assert schema["properties"]["flushId"] == {}  # any value, null among them
    union = Params(Name("title", 64, required=True)).schema(required=False)  # a shape chosen by its keys
    assert union["required"] == [] and union["properties"]["title"]["anyOf"][1] == {"type": "null"}


def test_a_later_declaration_replaces_a_spec_of_the_same_name_in_place():
    first = Params(RequestId("requestId", required=True), Name("title", 10, required=True))
    both = first + Params(RequestId("requestId"), Value("flushId"))
    assert list(both.specs) == ["requestId", "title", "flushId"]
    assert both.read({"title": "T"}) == {"requestId": None, "title": "T", "flushId": None}
    assert first.optional().schema()["required"] == [] and first.schema()["required"] == ["requestId", "title"]


def test_without_meta_drops_only_the_protocols_meta():
    assert without_meta({"_meta": {"knowledge": {}}, "query": "x"}) == {"query": "x"}
    assert without_meta(["not", "an", "object"]) == ["not", "an", "object"]


# --- the kinds --------------------------------------------------------------------------------------------


def test_an_integer_is_a_whole_number_within_its_bounds():
    limit = Integer("limit", 1, 1000)
    assert limit.check(1, "limit") == 1 and limit.check(1000, "limit") == 1000
    read = limit.check(2.0, "limit")  # JSON Schema's integer: a client that checks the schema sends it
    assert read == 2 and type(read) is int
    for wrong in (0, True, False, 2.5, 0.0, float("inf"), float("nan"), "3", None):
        with pytest.raises(InvalidParams) as raised:
            limit.check(wrong, "limit")
        assert raised.value.message == "limit must be an integer from 1 to 1,000"
    with pytest.raises(LimitExceeded) as raised:
        limit.check(1001, "limit")
    assert raised.value.details == {"field": "limit", "limit": 1000, "size": 1001}
    with pytest.raises(InvalidParams, match="importance must be an integer from 1 to 10"):
        Integer("importance", 1, 10, scale=True).check(11, "importance")
    with pytest.raises(InvalidParams, match="revision must be a positive integer"):
        Integer("revision", 1).check(0, "revision")
    with pytest.raises(InvalidParams, match="offset must be a non-negative integer"):
        Integer("offset", 0).check(-1, "offset")
    assert Integer("offset", 0).check(10**15, "offset") == 10**15


def test_an_integer_without_an_upper_bound_stops_at_the_largest_one_a_record_or_sqlite_holds():
    """A revision of 10**20 reached SQLite, which cannot bind it, and the tool answered `internal`."""
    revision = Integer("revision", 1)
    assert revision.check(INTEGER_MAX, "revision") == INTEGER_MAX == 2**63 - 1
    with pytest.raises(LimitExceeded) as raised:
        revision.check(INTEGER_MAX + 1, "revision")
    assert raised.value.details == {"field": "revision", "limit": INTEGER_MAX, "size": INTEGER_MAX + 1}
    assert revision.schema() == {"type": "integer", "minimum": 1, "maximum": INTEGER_MAX}
    with pytest.raises(InvalidParams, match="revision must be a positive integer"):
        revision.check("1", "revision")


def test_numbers_flags_and_choices():
    score = Number("minScore", 0, 1)
    assert score.check(1, "minScore") == 1.0 and isinstance(score.check(0, "minScore"), float)
    for wrong in (True, -0.001, 1.001, "0.5", float("nan"), float("inf")):
        with pytest.raises(InvalidParams, match="minScore must be a number from 0 to 1"):
            score.check(wrong, "minScore")
    for wrong in (1, "true", None):
        with pytest.raises(InvalidParams, match="owner must be true or false"):
            Flag("owner").check(wrong, "owner")
    mode = Choice("mode", ("trigger", "project"))
    assert mode.check("project", "mode") == "project"
    for wrong in ("Project", ["trigger"], 1, None):
        with pytest.raises(InvalidParams, match="mode must be one of trigger, project"):
            mode.check(wrong, "mode")


def test_names_text_queries_and_strings_follow_the_edge_rules():
    assert Name("title", 10).check("  Atlas  ", "title") == "Atlas"
    with pytest.raises(LimitExceeded):
        Name("title", 10).check("t" * 11, "title")
    with pytest.raises(InvalidParams, match="title must be one line"):
        Name("title", 10).check("a\nb", "title")
    with pytest.raises(InvalidParams, match="title must not be empty"):
        Name("title", 10).check("   ", "title")
    assert Name("subject", 10, blank=True).check("  ", "subject") == "  "  # no subject, as always
    assert Text("body", 20).check("a\tb\r\n", "body") == "a\tb\r\n"
    assert Text("summary", 5, strip=True, required=True).check("  abcde  ", "summary") == "abcde"
    with pytest.raises(InvalidParams, match="summary must not be empty"):
        Text("summary", 5, strip=True, required=True).check(" \n ", "summary")
    assert Query("query", max_bytes=4).check("a\tb", "query") == "a\tb"
    with pytest.raises(LimitExceeded, match="query is longer than 4 bytes"):
        Query("query", max_bytes=4).check("ééé", "query")
    with pytest.raises(InvalidParams, match="control characters"):
        Query("query", max_bytes=40).check("a\x85b", "query")
    sha = String("sha256", pattern=re.compile("[0-9a-f]{4}"), what="4 hex digits")
    assert sha.check("00af", "sha256") == "00af"
    with pytest.raises(InvalidParams, match="sha256 must be 4 hex digits"):
        sha.check("00ag", "sha256")
    with pytest.raises(InvalidParams, match="turn must be a journal turn id"):
        String("turn", min_chars=1, what="a journal turn id").check("", "turn")
    with pytest.raises(LimitExceeded):
        String("cursor", 3).check("abcd", "cursor")


def test_ids_agents_and_request_ids():
    assert RecordId("id").check("pg_01J", "id") == "pg_01J"
    with pytest.raises(InvalidParams, match="expectedVaultId must be a vault id"):
        RecordId("expectedVaultId", what="a vault id").check("no/slash", "expectedVaultId")
    with pytest.raises(InvalidParams, match="agent must name an agent"):
        AgentName("agent").check("Main Agent", "agent")
    assert RequestId("requestId").check("r1:a.b_c-d", "requestId") == "r1:a.b_c-d"
    with pytest.raises(LimitExceeded):
        RequestId("requestId").check("r" * 129, "requestId")


def test_a_list_of_names_is_stripped_and_deduplicated_and_an_entry_error_names_the_list():
    aliases = Names("aliases", 3, 5)
    assert aliases.check([" a ", "a", "b"], "aliases") == ("a", "b")
    with pytest.raises(LimitExceeded) as raised:
        aliases.check(["a", "b", "c", "d"], "aliases")
    assert raised.value.details["field"] == "aliases"
    with pytest.raises(InvalidParams) as raised:
        aliases.check(["a", "b\x1b"], "aliases")
    assert raised.value.details == {"field": "aliases", "index": 1, "codepoint": "U+001B"}


def test_a_list_of_objects_reads_each_by_its_shape_and_names_its_fields_by_index():
    point = Params(Integer("x", 0, 9, required=True))
    label = Params(Name("label", 5, required=True))
    points = Objects("points", point, max_items=2, min_items=1, what="points",
                     pick=lambda raw: label if "label" in raw else point,
                     build=lambda values, raw, where: (where, values))
    assert points.check([{"x": 1}, {"label": "a"}], "points") == (("points[0].", {"x": 1}),
                                                                ("points[1].", {"label": "a"}))
    with pytest.raises(InvalidParams, match="points must be a list of 1-2 points"):
        points.check([], "points")
    with pytest.raises(LimitExceeded, match="points holds more than 2 points"):
        points.check([{"x": 1}] * 3, "points")
    with pytest.raises(InvalidParams) as raised:
        points.check([{"x": 1}, "x"], "points")
    assert raised.value.details == {"field": "points[1]"}
    with pytest.raises(LimitExceeded) as raised:
        points.check([{"x": 10}], "points")
    assert raised.value.details["field"] == "points[0].x"
    with pytest.raises(InvalidParams, match=r"unknown parameter points\[0\]\.y"):
        points.check([{"x": 1, "y": 2}], "points")


def test_a_value_is_read_by_its_own_check():
    ref = Value("ref", lambda value, field: value["id"], required=True, json={"type": "object"})
    assert Params(ref).read({"ref": {"id": "x"}}) == {"ref": "x"}
    assert ref.schema() == {"type": "object"}


# --- the schema -----------------------------------------------------------------------------------------


def test_the_schema_carries_the_bounds_the_reader_checks():
    params = Params(
        Integer("limit", 1, 50, default=10), Number("minScore", 0, 1), Choice("kind", ("page", "claim")),
        Name("type", 64, required=True, description="A page type"), Flag("includeRecords", default=False),
        Names("tags", 100, 500), RecordId("id"), String("cursor", 2048),
    )
    def or_null(schema):  # an optional parameter: null reads as absent
        return {"anyOf": [schema, {"type": "null"}]}

    assert params.schema() == {
        "type": "object",
        "properties": {
            "limit": or_null({"type": "integer", "minimum": 1, "maximum": 50, "default": 10}),
            "minScore": or_null({"type": "number", "minimum": 0, "maximum": 1}),
            "kind": or_null({"type": "string", "enum": ["page", "claim"]}),
            "type": {"type": "string", "description": "A page type", "minLength": 1, "maxLength": 64},
            "includeRecords": or_null({"type": "boolean", "default": False}),
            "tags": or_null({"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 500},
                             "maxItems": 100}),
            "id": or_null({"type": "string", "maxLength": 128, "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"}),
            "cursor": or_null({"type": "string", "maxLength": 2048}),
        },
        "required": ["type"],
        "additionalProperties": False,
    }
