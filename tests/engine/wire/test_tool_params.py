"""What tools/list publishes is what the engine checks: for every tool, each bound in its input schema
(integers' minimum and maximum, strings' lengths, lists' counts, enums, required and unknown keys) is
probed against the tool's declared parameters, and every refusal again through the socket's tools/call,
which must refuse exactly as the declaration does (same reason, same field)."""

from __future__ import annotations

import copy
import json
from typing import Any, Iterator

import jsonschema
import pytest

from engine.core.errors import KnowledgeError, LimitExceeded
from engine.core.ids import new_id
from engine.search import knowledge_base as kb
from engine.service import Engine
from engine.wire.protocol import Dispatcher, Session
from engine.wire.tools import CORE_TOOLS, Tool
from tests.helpers import tool_answer

RECORD = new_id("pg")
CLAIM = {"text": "Atlas ships in January.", "claimKind": "fact", "excerpt": "We ship in January."}
RELATIONSHIP = {"relation": "works_on", "from": "Dana", "to": "Atlas", "excerpt": "Dana works on Atlas."}
CITATION = {"excerpt": "Atlas ships in January."}
RETAINED = {"source": new_id("src")}

# Arguments each tool's declaration reads without complaint; a probe replaces one value in one of them.
BASES: dict[str, list[dict[str, Any]]] = {
    "knowledge_grep": [{"query": "atlas"}],
    "knowledge_lookup": [{"name": "Atlas"}],
    "knowledge_record": [{"id": RECORD}],
    "knowledge_remember": [{"requestId": "r1", "items": [CLAIM], "subject": "Atlas"},
                           {"requestId": "r1", "items": [{"text": "Atlas ships.", "claimKind": "fact",
                                                          "evidence": [CITATION]}]},
                           {"requestId": "r1", "items": [{"text": "Atlas ships.", "claimKind": "fact",
                                                          "evidence": [RETAINED]}]},
                           {"requestId": "r1", "items": [RELATIONSHIP]}],
    "knowledge_save_page": [{"requestId": "p1", "type": "project", "title": "Atlas", "evidence": [CITATION]},
                            {"requestId": "p1", "type": "project", "title": "Atlas", "evidence": [RETAINED]}],
    "knowledge_recall": [{"id": RECORD, "recall": {"summary": "Atlas ships in January."}}],
    "knowledge_ontology": [{}],
    "knowledge_attach_file": [{"requestId": "a1", "filePath": "/srv/notes.txt", "sha256": "0" * 64}],
    "knowledge_attach": [{"requestId": "a1", "content": "bm90ZXMK"}],
    "knowledge_resume": [{}],
    "search_knowledge": [{"query": "atlas"}, {"knowledge_item_id": RECORD}],
}


def bases_for(tool: str, path: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The bases a probe at ``path`` goes into, best first: one already holding that value (a relationship's
    ``from``, a citation's ``quote``), else one holding the object it belongs to."""
    if tool == "search_knowledge":  # the two shapes are separate calls
        return BASES[tool][1:] if path[0] in kb.READ_KEYS else BASES[tool][:1]
    candidates = BASES[tool]
    for at, step in enumerate(path):
        if step in ("lines", "quote"):  # they locate text in a cited source: a citation with an excerpt takes neither
            candidates = [base for base in candidates if "excerpt" not in (_get(base, path[:at]) or {})]
    holding = [base for base in candidates if _has(base, path)]
    parent = [base for base in candidates if _has(base, path[:-2] if path[-1] == "*" else path[:-1])]
    return holding + [base for base in parent if base not in holding]


def handler_base(tool: str, path: tuple[Any, ...], arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with what the handlers' checks across parameters need around the probed one: the
    ontology tool's views (checked before the values), a page revision's id and expectedRevision."""
    if tool == "knowledge_save_page" and path[0] in ("id", "expectedRevision"):
        return {"id": RECORD, "expectedRevision": 1, **arguments}
    if tool != "knowledge_ontology":
        return arguments
    views = {"name": {"view": "definitions"}, "includeRecords": {"view": "definitions"},
             "sourcePath": {"view": "sources"},
             "maxChars": {"view": "sources", "sourcePath": "shipped/ontology.yaml"}}
    return {**views.get(path[0], {}), **arguments}


# --- probes -------------------------------------------------------------------------------------------


def _field(path: tuple[Any, ...]) -> str:
    """The field an error about ``path`` names: ``items[0].text``, ``recall.summary``, ``aliases``."""
    shown = ""
    for step in path:
        if step == "*":
            break  # an entry of a list of strings: the error names the list
        shown += f"[{step}]" if isinstance(step, int) else (f".{step}" if shown else step)
    return shown


def _set(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    document = copy.deepcopy(document)
    target = document
    for step in path[:-1]:
        target = target[step]
    if value is _OMIT:
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value
    return document


def _has(document: Any, path: tuple[Any, ...]) -> bool:
    for step in path:
        if isinstance(step, int):
            if not isinstance(document, list) or len(document) <= step:
                return False
        elif step == "*" or not isinstance(document, dict) or step not in document:
            return step == "*" and isinstance(document, list)
        document = document[step]
    return True


def _get(document: Any, path: tuple[Any, ...]) -> Any:
    if not _has(document, path):
        return None
    for step in path:
        document = document[step]
    return document


_OMIT = object()


def _sample(schema: dict[str, Any]) -> Any:
    """A value the schema allows, for growing a list to its bounds."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    return {"integer": schema.get("minimum", 1), "number": schema.get("minimum", 0), "boolean": False,
            "string": "a" * max(1, schema.get("minLength", 1))}.get(kind, "a")


def probes(schema: dict[str, Any], path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any, bool, str]]:
    """(path, value, allowed by the schema, what is probed) for every bound in ``schema``."""
    if "anyOf" in schema:  # a value that may also be null: the bounds are its other member's
        for member in schema["anyOf"]:
            if member.get("type") != "null":
                yield from probes(member, path)
        return
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "object" in kinds and "properties" in schema:
        if schema.get("additionalProperties") is False:
            yield (*path, "unknownParameter"), 1, False, "additionalProperties"
        for name in schema.get("required", []):
            yield (*path, name), _OMIT, False, "required"
        for name, child in schema["properties"].items():
            yield from probes(child, (*path, name))
        return
    if "enum" in schema:
        for member in schema["enum"]:
            yield path, member, True, "enum"
        yield path, "not-" + str(schema["enum"][0]), False, "enum"
    if "integer" in kinds:  # JSON Schema's integer is any number without a fraction: 5.0 is one, true is not
        least = schema.get("minimum", 1)
        yield path, float(least), True, "integer"
        yield path, least + 0.5, False, "integer"
        yield path, True, False, "integer"
    if "integer" in kinds or "number" in kinds:
        step = 1 if "integer" in kinds else 0.001
        if "minimum" in schema:
            yield path, schema["minimum"], True, "minimum"
            yield path, schema["minimum"] - step, False, "minimum"
        if "maximum" in schema:
            yield path, schema["maximum"], True, "maximum"
            yield path, schema["maximum"] + step, False, "maximum"
    if "string" in kinds and "enum" not in schema:
        if "maxLength" in schema:
            yield path, "a" * schema["maxLength"], True, "maxLength"
            yield path, "a" * (schema["maxLength"] + 1), False, "maxLength"
        if schema.get("minLength"):
            yield path, "", False, "minLength"
    if "array" in kinds:
        items = schema.get("items", {})
        if items.get("type") == "object":
            yield from probes(items, (*path, 0))
        elif items:
            yield from probes(items, (*path, "*"))
        if "maxItems" in schema:
            yield path, ("same", schema["maxItems"]), True, "maxItems"
            yield path, ("same", schema["maxItems"] + 1), False, "maxItems"
        if schema.get("minItems"):
            yield path, [], False, "minItems"


def _placed(document: Any, path: tuple[Any, ...], value: Any, schema: dict[str, Any]) -> Any:
    """``document`` with ``value`` at ``path``: a list entry (``*``) as a list of as many copies as the
    list needs; ``("same", n)`` as n copies of the list's present entry."""
    if path[-1] == "*":
        listed = _schema_at(schema, path[:-1])
        return _set(document, path[:-1], [value] * max(1, listed.get("minItems", 1)))
    if isinstance(value, tuple) and value[0] == "same":
        present = _get(document, path)
        entry = present[0] if present else _sample(_schema_at(schema, path).get("items", {}))
        value = [copy.deepcopy(entry) for _ in range(value[1])]
    return _set(document, path, value)


def _schema_at(schema: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    for step in path:
        schema = next((member for member in schema.get("anyOf", ()) if member.get("type") != "null"), schema)
        schema = schema["items"] if isinstance(step, int) or step == "*" else schema["properties"][step]
    return next((member for member in schema.get("anyOf", ()) if member.get("type") != "null"), schema)


def _error(read: Any, arguments: Any) -> KnowledgeError | None:
    try:
        read(arguments)
    except KnowledgeError as exc:
        return exc
    return None


def _named(error: KnowledgeError | None, field: str) -> bool:
    return error is not None and error.details.get("field") == field


TOOLS = {tool.name: tool for tool in CORE_TOOLS}
CASES = [(name, path, value, allowed, what) for name, tool in TOOLS.items()
         for path, value, allowed, what in probes(tool.descriptor()["inputSchema"])]


def _case_id(case: tuple[Any, ...]) -> str:
    name, path, value, allowed, what = case
    return f"{name}:{_field(path) or '-'}:{what}:{'ok' if allowed else 'refused'}"


def _arguments(tool: Tool, path: tuple[Any, ...], value: Any) -> tuple[dict[str, Any], KnowledgeError | None]:
    """The probe set into its base, and what the tool's declaration says about it."""
    bases = bases_for(tool.name, path)
    assert bases, f"no base holds {_field(path)}"
    arguments = _placed(bases[0], path, value, tool.descriptor()["inputSchema"])
    return arguments, _error(tool.params.read, arguments)


def test_each_probe_is_allowed_or_refused_as_json_schema_itself_judges_it():
    """The probes' own verdicts are JSON Schema's (Draft 2020-12), so the declaration is held to the standard
    a client validates arguments with, not to this file's reading of it."""
    for name, path, value, allowed, what in CASES:
        if what in ("integer", "minimum", "maximum", "enum"):
            schema = _schema_at(TOOLS[name].descriptor()["inputSchema"], path[:-1] if path[-1] == "*" else path)
            schema = schema.get("items", schema) if path[-1] == "*" else schema
            assert jsonschema.Draft202012Validator(schema).is_valid(value) == allowed, (name, path, value)


def test_every_tool_declares_what_it_reads_and_publishes_it():
    for tool in CORE_TOOLS:
        assert tool.descriptor()["inputSchema"] == tool.params.schema(), tool.name
        assert tool.descriptor()["inputSchema"]["additionalProperties"] is False, tool.name
    assert len(CASES) > 200  # the probes below cover every bound, not a sample


@pytest.mark.parametrize("case", CASES, ids=[_case_id(case) for case in CASES])
def test_the_declaration_accepts_every_bound_the_schema_allows_and_refuses_the_rest(case):
    name, path, value, allowed, what = case
    field = _field(path)
    arguments, error = _arguments(TOOLS[name], path, value)
    if allowed and what in ("maxLength", "maxItems"):
        # A string or list of that size is not too big (its content may be wrong for other reasons).
        assert error is None or (_named(error, field) and not isinstance(error, LimitExceeded)), (arguments, error)
    elif allowed:
        assert error is None, (arguments, error)
    else:
        assert _named(error, field), (arguments, error)


# --- through the socket ---------------------------------------------------------------------------------


def test_every_tool_refuses_exactly_as_its_declaration_does(state_dir):
    state_dir.root.mkdir(parents=True)
    state_dir.config.write_text(json.dumps({"knowledgeRuntimeEnabled": True}), encoding="utf-8")
    mismatches, refusals = [], [case for case in CASES if not case[3]]
    with Engine(state_dir, watch=False, git=False) as engine:
        dispatcher, session = Dispatcher(engine), Session()
        token = engine.add_agent("main", owner=True)
        opened = dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"}}}}}).encode())
        assert "result" in opened
        for case in refusals:
            name, path, value, _, _ = case
            arguments, expected = _arguments(TOOLS[name], path, value)
            assert expected is not None, _case_id(case)
            reply = dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": name, "arguments": handler_base(name, path, arguments)}}).encode())
            refused = tool_answer(reply["result"])
            if not reply["result"]["isError"] or (refused["reason"], refused.get("field")) != (
                    expected.reason, expected.details["field"]):
                mismatches.append((_case_id(case), expected.to_dict(), refused))
    assert len(refusals) > 100
    assert not mismatches, mismatches


def test_every_tool_accepts_what_its_schema_allows(state_dir):
    """At each bound the tool's answer, if an error, is not about that bound: a string or list of the
    largest size is never too big (its content may still be no such type or path), and a number or
    choice the schema allows is never refused."""
    state_dir.root.mkdir(parents=True)
    state_dir.config.write_text(json.dumps({"knowledgeRuntimeEnabled": True}), encoding="utf-8")
    mismatches, accepted = [], [case for case in CASES if case[3]]
    with Engine(state_dir, watch=False, git=False) as engine:
        dispatcher, session = Dispatcher(engine), Session()
        token = engine.add_agent("main", owner=True)
        dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"}}}}}).encode())
        for number, case in enumerate(accepted):
            name, path, value, _, what = case
            arguments, _ = _arguments(TOOLS[name], path, value)
            arguments = handler_base(name, path, arguments)
            if "requestId" in arguments and path != ("requestId",):
                arguments["requestId"] = f"probe-{number}"  # each write its own, never a conflict
            reply = dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": name, "arguments": arguments}}).encode())
            answer = tool_answer(reply["result"])
            about_it = reply["result"]["isError"] and answer.get("field") == _field(path)
            refused = ("limit_exceeded",) if what in ("maxLength", "maxItems") else ("invalid_params", "limit_exceeded")
            if about_it and answer["reason"] in refused:
                mismatches.append((_case_id(case), answer))
    assert len(accepted) > 50
    assert not mismatches, mismatches
