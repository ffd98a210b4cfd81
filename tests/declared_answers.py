"""Holding a package's answers to their declarations: every function and method of the package declared to
return one of the engine's TypedDicts (or a union of them) has each answer it gives validated, with jsonschema, against
``output_schema`` of that declaration, which closes every object it declares (a key the declaration does not
name fails too)."""

from __future__ import annotations

import functools
import inspect
import json
import sys
from types import ModuleType
from typing import Any, Callable, Union, get_args, get_origin, get_type_hints

import jsonschema
from typing_extensions import is_typeddict

from engine.core.answers import output_schema


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
    schemas = [output_schema(shape) for shape in shapes(declared)]
    errors = []
    for schema in schemas:
        try:
            jsonschema.validate(data, schema)
            return
        except jsonschema.ValidationError as exc:
            errors.append(exc)
    raise AssertionError(f"an answer does not hold to its declaration {declared!r}: "
                         + "; ".join(f"{error.message} at {list(error.absolute_path)}" for error in errors))


def declared_functions(package: str) -> dict[Callable[..., Any], Any]:
    """Every function and method of ``package`` (``engine.importers``), in the modules loaded so far, declared
    to return one of the engine's TypedDicts (or a union of them), with that declaration."""
    found: dict[Callable[..., Any], Any] = {}
    for name, module in list(sys.modules.items()):
        if module is not None and name.startswith(package + "."):
            found.update(_declared_in(module, package))
    return found


@functools.cache
def _declared_in(module: ModuleType, package: str) -> dict[Callable[..., Any], Any]:
    """The module's functions, and its classes' methods, declared to return the engine's TypedDicts."""
    found = {}
    classes = [value for value in vars(module).values()
               if inspect.isclass(value) and value.__module__ == module.__name__]
    functions = [value for value in vars(module).values() if inspect.isfunction(value)]
    for function in functions + [value for cls in classes for value in vars(cls).values() if inspect.isfunction(value)]:
        if function.__module__ != module.__name__:
            continue
        declared = get_type_hints(function, vars(module)).get("return")
        if shapes(declared) and all(_is_answer(shape) for shape in shapes(declared)):
            found[function] = declared
    return found


def _is_answer(shape: Any) -> bool:
    """A TypedDict the engine declares as an answer; a private one (``_Collected``) is a step's own, not JSON."""
    return shape.__module__.startswith("engine.") and not shape.__name__.startswith("_")


def checked(function: Callable[..., Any], declared: Any, seen: dict[str, int]) -> Callable[..., Any]:
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        answer = function(*args, **kwargs)
        check_answer(declared, answer)
        seen[function.__qualname__] = seen.get(function.__qualname__, 0) + 1
        return answer

    return call


def hold_to_declarations(monkeypatch: Any, seen: dict[str, int], package: str
                         ) -> dict[Callable[..., Any], Callable[..., Any]]:
    """Replace every binding of ``package``'s declared functions in the engine's and the tests' modules with one
    that checks each answer it gives; returns the replacements, by function, for tables that hold them too."""
    wrappers = {function: checked(function, declared, seen)
                for function, declared in declared_functions(package).items()}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("engine.", "tests.", "desktop.")):
            continue
        owners = [module] + [value for value in vars(module).values()
                             if inspect.isclass(value) and value.__module__ == name]
        for owner in owners:
            for attribute, value in list(vars(owner).items()):
                if inspect.isfunction(value) and value in wrappers:
                    monkeypatch.setattr(owner, attribute, wrappers[value])
    return wrappers
