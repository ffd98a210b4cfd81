"""The tools' declared answers: the text form clients de-duplicate, and the schema rules docs/protocol-tools.md
states for every published input and output schema.  (Every answer the suite produces is validated against
its tool's ``outputSchema`` by tests/conftest.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.wire import tools
from engine.wire.tools import CORE_TOOLS, pretty_json, tool_result

TRICKY = {"b": 1.0, "a": [], "10": {}, "2": -0.0, "x": [1e-7, 1e21, 123456789012345678901234, 0.1, 2.5e-6, -3],
          "s": 'quote " backslash \\ tab \t nul \x00 del \x7f é 中 😀', "n": None, "t": True, "o": {"k": [False]}}


def test_the_text_is_what_javascript_prints_with_json_stringify_indented_by_two():
    text = pretty_json(TRICKY)
    assert text.startswith('{\n  "2": 0,\n  "10": {},\n  "b": 1,\n  "a": [],\n')  # integer-like keys first
    assert '"x": [\n    1e-7,\n    1e+21,\n    1.2345678901234569e+23,\n    0.1,\n    0.0000025,\n    -3\n  ]' in text
    assert r'"s": "quote \" backslash \\ tab \t nul \u0000 del ' + "\x7f é 中 😀\"" in text
    assert json.loads(text) == json.loads(json.dumps(TRICKY), parse_int=float)  # the same values, as doubles
    assert pretty_json({3: 1, True: None}) == '{\n  "3": 1,\n  "true": null\n}'  # keys as the wire writes them
    result = tool_result({"hits": []})
    assert result["content"] == [{"type": "text", "text": '{\n  "hits": []\n}'}]


@pytest.mark.skipif(shutil.which("node") is None, reason="no node to compare JSON.stringify with")
def test_the_text_equals_node_json_stringify_of_the_same_json_as_a_client_reads_it():
    wire = json.dumps(TRICKY, ensure_ascii=False)
    printed = subprocess.run(["node", "-e", "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>"
                              "process.stdout.write(JSON.stringify(JSON.parse(s),null,2)))"],
                             input=wire.encode("utf-8"), capture_output=True, check=True).stdout.decode("utf-8")
    assert pretty_json(TRICKY) == printed


def _nodes(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        yield path, schema
        for key, value in schema.items():
            yield from _nodes(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from _nodes(value, f"{path}/{index}")


# The documented exception to "every input object is closed": a page's typed fields, whose keys the caller's
# ontology defines (docs/protocol-tools.md, "Schemas and strict mode").
OPEN_INPUTS = {("knowledge_save_page", "/properties/fields/anyOf/0")}
# What OpenAI's strict mode and Gemini's schema subset both read; anything else is refused here.
INPUT_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum", "description",
                  "anyOf", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern",
                  "default", "title"}
# The documented exception to those keywords: an annotation Gemini's subset lacks (docs/protocol-tools.md).
EXTRA_KEYWORDS = {("knowledge_attach", "/properties/content"): {"contentEncoding"},
                  ("knowledge_save_page", "/properties/evidence/anyOf/0/items/properties/content/anyOf/0"):
                      {"contentEncoding"}}


@pytest.mark.parametrize("tool", CORE_TOOLS, ids=lambda tool: tool.name)
def test_published_schemas_keep_the_documented_rules(tool):
    descriptor = tool.descriptor()
    for kind in ("inputSchema", "outputSchema"):
        schema = descriptor[kind]
        assert schema["type"] == "object", (tool.name, kind)  # an object at the root, as MCP asks
        for path, node in _nodes(schema):
            if path.endswith(("/properties", "/$defs")):
                continue  # maps of names, not schemas
            assert not isinstance(node.get("type"), list), (tool.name, kind, path)  # nullable is anyOf
            if node.get("type") == "object" and (tool.name, path) not in OPEN_INPUTS:
                closed = node.get("additionalProperties") is False or (
                    kind == "outputSchema" and "additionalProperties" in node) or "anyOf" in node
                assert closed, (tool.name, kind, path)  # closed, or a map of declared values (JSON by nature)
            if kind == "inputSchema":
                allowed = INPUT_KEYWORDS | EXTRA_KEYWORDS.get((tool.name, path), set())
                assert set(node) <= allowed, (tool.name, path, set(node) - allowed)
    assert "$ref" not in json.dumps(descriptor["inputSchema"])  # Gemini's subset resolves no references


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**60, max_value=2**60) | st.floats(allow_nan=False)
    | st.text(st.characters(), max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(st.characters(), max_size=6), children,
                                                                       max_size=4),
    max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(_JSON_VALUES)
def test_the_text_printed_by_json_itself_is_the_clients_printing(value):
    assert pretty_json(value) == tools._pretty(value, "")


def test_receipts_are_printed_by_json_itself_and_values_it_would_print_otherwise_are_not(monkeypatch):
    printed_by_json = []
    monkeypatch.setattr(tools, "_pretty", lambda value, indent: printed_by_json.append(value) or "")
    receipt = {"id": "pg_1", "revision": 2, "publicationId": "pub_1", "git": {"state": "pending"}, "link": "x"}
    assert pretty_json(receipt) == json.dumps(receipt, indent=2, ensure_ascii=False) and printed_by_json == []
    for different in ({"score": 0.5}, {"2": 1}, {1: 1}, [2**53 + 1], ["\ud800"], {"\udc00": 1}):
        pretty_json(different)
    assert len(printed_by_json) == 6
