"""The error tree: drawn whole at the top of errors.py, each class with its reason and its JSON-RPC code."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re

import pytest

import engine
from engine.core import errors
from engine.core.errors import (
    DecisionUnavailable, InvalidResponse, KnowledgeError, ModelUnavailable, NotFound, from_model_error, wire_codes,
)
from engine.wire.protocol import error_for
from models.errors import ModelCancelled, ModelNotFound, ModelOffline, ModelRefused, ModelVerifyFailed


def _every_error_class() -> set[type[KnowledgeError]]:
    for module in pkgutil.walk_packages(engine.__path__, "engine."):
        if not module.name.startswith("engine.bench") and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found, pending = set(), [KnowledgeError]
    while pending:
        cls = pending.pop()
        found.add(cls)
        pending.extend(cls.__subclasses__())
    return {cls for cls in found if cls.__module__.startswith("engine.") and cls is not KnowledgeError}


def test_the_tree_at_the_top_of_errors_py_draws_every_error_class_with_its_reason_and_code():
    drawn = {match.group(1): (match.group(2), int(match.group(3)))
             for match in re.finditer(r"[├└]── (\w+)\s+(\S+)\s+(-\d+)", errors.__doc__)}
    classes = _every_error_class()
    assert {cls.__name__ for cls in classes} == set(drawn)
    for cls in classes:
        assert drawn[cls.__name__] == (cls.reason, cls.code), cls


def test_each_reason_has_one_code_and_the_wire_uses_the_class_code():
    codes = {}
    for cls in _every_error_class():
        assert codes.setdefault(cls.reason, cls.code) == cls.code, f"{cls.__name__}: two codes for {cls.reason}"
        assert cls.code != KnowledgeError.code, f"{cls.__name__} falls through to the internal error code"
    assert wire_codes() == {reason: codes[reason] for reason in wire_codes()} and set(wire_codes()) == set(codes)
    assert len(set(codes.values())) == len(codes)


@pytest.mark.parametrize("exc, code", [
    (DecisionUnavailable("no model", kind="not_configured"), -32013),
    (InvalidResponse("score 3.2"), -32014),
    (ModelUnavailable("offline", kind="offline"), -32015),
])
def test_decision_and_model_reasons_no_longer_fall_through_to_internal(exc, code):
    reply = error_for(7, exc)
    assert reply["error"]["code"] == code and reply["error"]["data"]["reason"] == exc.reason
    json.dumps(reply)


@pytest.mark.parametrize("model_error, reason", [
    (ModelNotFound("no installed model named x"), "not_found"),
    (ModelRefused("pickle weights are refused"), "model_unavailable"),
    (ModelOffline("the hub cannot be reached"), "model_unavailable"),
    (ModelVerifyFailed("config.json arrived with another sha256"), "model_unavailable"),
    (ModelCancelled("cancelled"), "model_unavailable"),
])
def test_model_errors_are_translated_in_one_place(model_error, reason):
    translated = from_model_error(model_error, model="x")
    assert translated.reason == reason and translated.message == model_error.message
    assert translated.details["model"] == "x"
    if reason == "model_unavailable":
        assert translated.details["kind"] == model_error.reason
    assert isinstance(translated, NotFound) == (reason == "not_found")
