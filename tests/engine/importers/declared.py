"""Holding this layer's answers to their declarations: every function of engine/importers declared to return
one of its answers (a TypedDict of engine/importers/answers.py, or a union of them) has each answer it gives validated, with jsonschema, against
``output_schema`` of that declaration, closed (a key the declaration does not name fails too)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import inspect
import json
import pkgutil
import sys
from typing import Any, Callable, Union, get_args, get_origin, get_type_hints

import jsonschema
from typing_extensions import is_typeddict

import engine.importers
from engine.importers import answers
from engine.core.answers import output_schema


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every object of declared properties closed to others (``additionalProperties``
    false), unless the declaration opens it itself."""
    schema = copy.deepcopy(schema)

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


def shapes(declared: Any) -> tuple[Any, ...]:
    """The TypedDicts a return annotation declares (one, or each member of a union); none when it is another type."""
    if is_typeddict(declared):
        return (declared,)
    if get_origin(declared) is Union:
        members = get_args(declared)
        if members and all(is_typeddict(member) for member in members):
            return members
    return ()


def check_answer(declared: Any, answer: Any) -> None:
    """Validate ``answer``, as JSON, against its declaration; one of a union's shapes must hold it whole."""
    data = json.loads(json.dumps(answer))
    schemas = [closed(output_schema(shape)) for shape in shapes(declared)]
    errors = []
    for schema in schemas:
        try:
            jsonschema.validate(data, schema)
            return
        except jsonschema.ValidationError as exc:
            errors.append(exc)
    raise AssertionError(f"an answer does not hold to its declaration {declared!r}: "
                         + "; ".join(f"{error.message} at {list(error.absolute_path)}" for error in errors))


@functools.cache
def declared_functions() -> dict[Callable[..., Any], Any]:
    """Every module-level function of engine/importers declared to return one of its answers
    (engine/importers/answers.py: a TypedDict, or a union of them), with that declaration."""
    found: dict[Callable[..., Any], Any] = {}
    for module_info in pkgutil.iter_modules(engine.importers.__path__, "engine.importers."):
        module = importlib.import_module(module_info.name)
        for _, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__:
                continue
            declared = get_type_hints(function).get("return")
            if shapes(declared) and all(shape.__module__ == answers.__name__ for shape in shapes(declared)):
                found[function] = declared
    return found


def checked(function: Callable[..., Any], declared: Any, seen: dict[str, int]) -> Callable[..., Any]:
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        answer = function(*args, **kwargs)
        check_answer(declared, answer)
        seen[function.__qualname__] = seen.get(function.__qualname__, 0) + 1
        return answer

    return call


def hold_to_declarations(monkeypatch: Any, seen: dict[str, int]) -> None:
    """Replace every binding of a declared function (in the engine's and the tests' modules, and in the import
    format tables) with one that checks each answer it gives."""
    wrappers = {function: checked(function, declared, seen) for function, declared in declared_functions().items()}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("engine.", "tests.", "desktop.")):
            continue
        for attribute, value in list(vars(module).items()):
            if inspect.isfunction(value) and value in wrappers:
                monkeypatch.setattr(module, attribute, wrappers[value])
    from engine.cli.import_commands import IMPORTERS
    from engine.importers.formats import FORMATS
    for name, chosen in list(FORMATS.items()):
        if chosen.run in wrappers:
            monkeypatch.setitem(FORMATS, name, dataclasses.replace(chosen, run=wrappers[chosen.run]))
    for name, (load, run, what, unit) in list(IMPORTERS.items()):
        if run in wrappers:
            monkeypatch.setitem(IMPORTERS, name, (load, wrappers[run], what, unit))
