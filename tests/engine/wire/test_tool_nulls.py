"""Null for an optional tool parameter is the parameter left out, on every tool and at any depth, and the
published input schemas say so; a required parameter's null is refused naming it.

A client in a strict mode (OpenAI's strict function calling, the OpenAI Agents SDK's
``convert_schemas_to_strict``) lists every property of every object as required and has its model send
null for what it would leave out.  The tests below walk each tool's published ``inputSchema``: every
optional property admits null under JSON Schema (Draft 2020-12), no required one does, and calls shaped
as such a client sends them answer exactly as the calls without the nulls, through the socket's
``tools/call`` (docs/protocol-tools.md, "Schemas and strict mode")."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any, Iterator

import jsonschema
import pytest

from engine.service import Engine
from engine.wire.protocol import Dispatcher, Session
from engine.wire.tools import CORE_TOOLS
from tests.helpers import tool_answer

TOOLS = {tool.name: tool for tool in CORE_TOOLS}
NOTES = base64.b64encode(b"Atlas ships in January.\n").decode()


def _value_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of a given (non-null) value: the member of ``anyOf`` that is not null."""
    return next((member for member in schema.get("anyOf", ()) if member.get("type") != "null"), schema)


def _objects(schema: dict[str, Any], path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], dict]]:
    """Every object schema with declared properties, and the path of the value it describes."""
    schema = _value_schema(schema)
    if "properties" in schema:
        yield path, schema
        for name, child in schema["properties"].items():
            yield from _objects(child, (*path, name))
    if isinstance(schema.get("items"), dict):
        yield from _objects(schema["items"], (*path, 0))


def _admits_null(schema: dict[str, Any]) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(None)


# Required parameters whose value may be null, as their own schema says: knowledge_recall's recall (null
# removes the recall block).
NULL_VALUES = {("knowledge_recall", ("recall",))}


@pytest.mark.parametrize("tool", CORE_TOOLS, ids=lambda tool: tool.name)
def test_every_optional_property_admits_null_and_no_required_one_does(tool):
    schema = tool.descriptor()["inputSchema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    optional = 0
    for path, node in _objects(schema):
        for name, child in node["properties"].items():
            if name in node["required"]:
                assert _admits_null(child) == ((tool.name, (*path, name)) in NULL_VALUES), (tool.name, path, name)
            else:
                assert _admits_null(child), (tool.name, path, name)
                assert "anyOf" in child or not child.get("type"), (tool.name, path, name)  # never a type list
                optional += 1
    assert optional or not schema["properties"], tool.name


def _strict(schema: Any) -> Any:
    """``schema`` as a strict mode reads it: every object's properties all required (nothing else changed)."""
    if isinstance(schema, list):
        return [_strict(member) for member in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {key: _strict(value) for key, value in schema.items()}
    if isinstance(schema.get("properties"), dict):
        strict["properties"] = {name: _strict(child) for name, child in schema["properties"].items()}
        strict["required"] = list(schema["properties"])
    return strict


def _with_nulls(schema: dict[str, Any], value: Any) -> Any:
    """``value`` as a strict-mode client sends it: every property of the schema it leaves out, as null."""
    schema = _value_schema(schema)
    if isinstance(value, dict) and "properties" in schema:
        return {name: _with_nulls(child, value[name]) if name in value else None
                for name, child in schema["properties"].items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_with_nulls(schema["items"], entry) for entry in value]
    return value


def _leaves_out(schema: dict[str, Any], value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every optional property of an object present in ``value``, given or not."""
    schema = _value_schema(schema)
    if isinstance(value, dict) and "properties" in schema:
        for name, child in schema["properties"].items():
            if name not in schema.get("required", ()):
                yield (*path, name)
            if name in value:
                yield from _leaves_out(child, value[name], (*path, name))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, entry in enumerate(value):
            yield from _leaves_out(schema["items"], entry, (*path, index))


def _required_in(schema: dict[str, Any], value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    schema = _value_schema(schema)
    if isinstance(value, dict) and "properties" in schema:
        for name, child in schema["properties"].items():
            if name in schema.get("required", ()):
                yield (*path, name)
            if name in value:
                yield from _required_in(child, value[name], (*path, name))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, entry in enumerate(value):
            yield from _required_in(schema["items"], entry, (*path, index))


def _set(document: Any, path: tuple[Any, ...], value: Any, *, remove: bool = False) -> Any:
    document = copy.deepcopy(document)
    target = document
    for step in path[:-1]:
        target = target[step]
    if remove:
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value
    return document


def _field(path: tuple[Any, ...]) -> str:
    shown = ""
    for step in path:
        shown += f"[{step}]" if isinstance(step, int) else (f".{step}" if shown else step)
    return shown


class Served:
    """One engine with a page, a person, a retained source and the Knowledge Base runtime on, called through
    the socket's dispatcher as a connected agent."""

    def __init__(self, engine: Engine) -> None:
        self.dispatcher, self.session, self.calls = Dispatcher(engine), Session(), 0
        token = engine.add_agent("main", owner=True)
        opened = self.dispatcher.handle(self.session, json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"}}}}}).encode())
        assert "result" in opened
        self.page = self.answer("knowledge_save_page", {
            "requestId": "seed-1", "type": "project", "title": "Atlas", "body": "Atlas ships in January.",
            "evidence": [{"excerpt": "Atlas ships in January."}]})["id"]
        self.answer("knowledge_save_page", {"requestId": "seed-2", "type": "person", "title": "Dana",
                                            "evidence": [{"excerpt": "Dana works on Atlas."}]})
        self.source = self.answer("knowledge_attach", {"requestId": "seed-3", "content": NOTES})["source"]["id"]

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        self.calls += 1
        reply = self.dispatcher.handle(self.session, json.dumps({
            "jsonrpc": "2.0", "id": self.calls + 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}).encode())
        return reply["result"]["isError"], tool_answer(reply["result"])

    def answer(self, name: str, arguments: dict[str, Any]) -> Any:
        failed, answer = self.call(name, arguments)
        assert not failed, (name, arguments, answer)
        return answer

    def bases(self) -> dict[str, list[dict[str, Any]]]:
        """Calls each tool answers (but knowledge_attach_file, which this engine has no workspace root for, and
        refuses alike with or without the nulls)."""
        claim = {"text": "Atlas ships in January.", "claimKind": "fact", "excerpt": "We ship in January."}
        bases = {
            "knowledge_grep": [{"query": "atlas"}],
            "knowledge_lookup": [{"name": "Atlas"}],
            "knowledge_record": [{"id": self.page}, {"id": self.page, "view": "history"}],
            "knowledge_remember": [
                {"subject": "Atlas", "items": [claim]},
                {"subject": "Atlas", "items": [{"text": "Atlas ships.", "claimKind": "fact",
                                                "evidence": [{"source": self.source, "lines": [1, 1]}]}]},
                {"items": [{"relation": "works_on", "from": "Dana", "to": "Atlas",
                            "excerpt": "Dana works on Atlas."}]}],
            "knowledge_save_page": [{"type": "project", "title": "Borealis", "body": "Borealis ships later.",
                                     "evidence": [{"excerpt": "Borealis ships later."}]}],
            "knowledge_recall": [{"id": self.page, "recall": {"summary": "Atlas ships in January."}}],
            "knowledge_ontology": [{}, {"view": "definitions", "kind": "page"}],
            "knowledge_attach": [{"content": NOTES}],
            "knowledge_attach_file": [{"filePath": "/srv/notes.txt", "sha256": "0" * 64}],
            "knowledge_resume": [{}],
            "search_knowledge": [{"query": "atlas"}, {"knowledge_item_id": self.page}],
        }
        bases = {name: [{"requestId": "base", **base} if "requestId" in TOOLS[name].params.names else base
                        for base in listed] for name, listed in bases.items()}
        # During a pre-compaction flush a save gives flushId instead: the requestId is derived from it.
        bases["knowledge_save_page"].append({"flushId": "base", "type": "note", "title": "Flushed note"})
        bases["knowledge_remember"].append({"flushId": "base", "items": [claim]})
        return bases

    def pair(self, name: str, first: dict[str, Any], second: dict[str, Any]) -> tuple[Any, Any]:
        """Both calls' outcomes; a write's two share a fresh requestId, so the second is the first's retry and
        answers its receipt only if the engine read the two as one request (another is a conflict)."""
        if "requestId" in TOOLS[name].params.names:
            fresh = f"pair-{self.calls}"  # for the bases' requestId or flushId, unless the call leaves it out
            first, second = ({**call, **{key: fresh for key in ("requestId", "flushId") if call.get(key)}}
                             for call in (first, second))
        return self.call(name, first), self.call(name, second)


@pytest.fixture
def served(state_dir) -> Iterator[Served]:
    state_dir.root.mkdir(parents=True)
    state_dir.config.write_text(json.dumps({"knowledgeRuntimeEnabled": True}), encoding="utf-8")
    with Engine(state_dir, watch=False, git=False) as engine:
        yield Served(engine)


def test_the_bases_answer(served):
    """What the comparisons below start from are answers, not refusals (but the one documented)."""
    for name, bases in served.bases().items():
        for base in bases:
            (failed, answer), _ = served.pair(name, base, base)
            assert failed == (name == "knowledge_attach_file"), (name, base, answer)
    assert set(served.bases()) == set(TOOLS)


def test_a_strict_mode_call_with_every_optional_parameter_null_answers_as_the_call_without_them(served):
    compared = 0
    for name, bases in served.bases().items():
        schema = TOOLS[name].descriptor()["inputSchema"]
        for base in bases:
            nulls = _with_nulls(schema, base)
            assert nulls != base or not schema["properties"]
            jsonschema.validate(nulls, schema, cls=jsonschema.Draft202012Validator)
            if name != "knowledge_save_page":  # its open `fields` keeps it out of strict mode (documented)
                jsonschema.validate(nulls, _strict(schema), cls=jsonschema.Draft202012Validator)
            without, with_nulls = served.pair(name, base, nulls)
            assert with_nulls == without, (name, nulls)
            compared += 1
    assert compared == sum(len(bases) for bases in served.bases().values())


def test_each_optional_parameter_null_answers_as_the_call_without_it(served):
    """One at a time, top level and nested (an item's, a citation's): given as null, or left out."""
    differing, compared = [], 0
    for name, bases in served.bases().items():
        schema = TOOLS[name].descriptor()["inputSchema"]
        for base in bases:
            for path in _leaves_out(schema, base):
                if path == ("requestId",):
                    continue  # the pair's own retry key; tests/engine/store reads a write without one
                without, with_null = served.pair(name, _set(base, path, None, remove=True), _set(base, path, None))
                compared += 1
                if with_null != without:
                    differing.append((name, _field(path), without, with_null))
    assert compared > 60
    assert not differing, differing


def test_a_required_parameters_null_is_refused_naming_it(served):
    refused = []
    for name, bases in served.bases().items():
        schema = TOOLS[name].descriptor()["inputSchema"]
        for base in bases:
            if "flushId" in base:
                continue  # a flush save without its title or texts is refused first, naming texts, null or absent
            for path in _required_in(schema, base):
                if (name, path) in NULL_VALUES:
                    continue
                failed, answer = served.call(name, _set(base, path, None))
                refused.append((name, path))
                assert failed and answer["reason"] == "invalid_params", (name, path, answer)
                assert answer["field"] == _field(path), (name, path, answer)
    assert len(refused) > 15
    served.answer("knowledge_recall", {"id": served.page, "recall": {"summary": "Atlas ships in January."}})
    served.answer("knowledge_recall", {"id": served.page, "recall": None})  # removes it: a value, as its schema says
