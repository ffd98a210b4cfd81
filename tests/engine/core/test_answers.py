"""Declared answers: the schema generated from a TypedDict accepts what it declares and refuses the rest."""

from typing import Literal

import jsonschema
import pytest

from engine.core.answers import JsonObject, NotRequired, TypedDict, output_schema


class Hit(TypedDict):
    id: str
    score: float
    fields: NotRequired[JsonObject]


class Found(TypedDict):
    """What a search found."""

    hits: list[Hit]
    mode: Literal["keyword", "hybrid"]
    next: str | None


def test_a_declared_answer_validates_and_a_wrong_one_does_not():
    schema = output_schema(Found)
    assert schema["type"] == "object" and schema["required"] == ["hits", "mode", "next"]
    jsonschema.validate({"hits": [{"id": "a", "score": 1.0, "fields": {"x": [1, {"y": None}]}}],
                         "mode": "keyword", "next": None}, schema)
    for wrong in ({"hits": [], "mode": "fuzzy", "next": None},       # not one of the modes
                  {"hits": [{"id": 3, "score": 1.0}], "mode": "keyword", "next": None},
                  {"hits": [], "mode": "keyword"}):                  # a required key missing
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)


def test_an_answer_that_is_not_an_object_is_refused():
    with pytest.raises(TypeError, match="JSON object"):
        output_schema(list[Hit])


class Other(TypedDict):
    other: int


def test_an_answer_of_several_shapes_is_an_object_schema_with_any_of():
    schema = output_schema(Found | Other)
    assert schema["type"] == "object" and len(schema["anyOf"]) == 2
    jsonschema.validate({"other": 1}, schema)
    jsonschema.validate({"hits": [], "mode": "hybrid", "next": "c"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"hits": []}, schema)
    with pytest.raises(TypeError, match="JSON object"):
        output_schema(Found | int)


class Titled(TypedDict):
    title: str
    hits: list[Hit]


def test_declared_objects_are_closed_and_carry_no_generated_titles():
    schema = output_schema(Titled)
    assert schema["additionalProperties"] is False and "title" not in schema
    assert list(schema["properties"]) == ["title", "hits"]  # a key named title is a key, never dropped
    hit = schema["$defs"]["Hit"]
    assert hit["additionalProperties"] is False and "title" not in hit["properties"]["id"]
    assert hit["properties"]["fields"]["additionalProperties"] != False  # noqa: E712  JSON by nature stays open
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"title": "t", "hits": [{"id": "a", "score": 1, "extra": 1}]}, schema)
