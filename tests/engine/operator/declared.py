"""Holding operator answers to their declarations: the TypedDict a handler declares, as a strict JSON Schema
(closed as tests/declared_answers.py closes it); only the return annotation is read, since operator
modules name some parameter types for the type checker alone.

``output_schema`` leaves an object open to keys it does not declare (as MCP clients read it); here every
declared object is closed, so an answer with a key its declaration lacks fails as surely as one with a
wrong type or a missing key.  Values declared ``JsonValue`` or with ``extra_items`` stay open.
"""

from __future__ import annotations

import functools
import inspect
import json
from typing import Any, Callable

import jsonschema

from engine.core.answers import output_schema
from tests.declared_answers import closed


def declared_answer(function: Callable[..., Any]) -> Any:
    """The TypedDict ``function`` declares it returns, or None (no declaration, or not a TypedDict)."""
    function = inspect.unwrap(function)
    annotation = getattr(function, "__annotations__", {}).get("return")
    if isinstance(annotation, str):  # modules use postponed annotations: read it where it was written
        annotation = eval(annotation, function.__globals__)  # noqa: S307 - our own source's annotation
    return annotation if hasattr(annotation, "__required_keys__") else None


@functools.cache
def strict_schema(shape: Any) -> dict[str, Any]:
    return closed(output_schema(shape))


def check_answer(answer: Any, shape: Any) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``answer``, as the wire carries it, fits ``shape``."""
    jsonschema.validate(json.loads(json.dumps(answer)), strict_schema(shape))


def checked(function: Callable[..., Any], shape: Any) -> Callable[..., Any]:
    """``function``, checking each answer it returns against ``shape``."""

    @functools.wraps(function)
    def answer_checked(*args: Any, **kwargs: Any) -> Any:
        answer = function(*args, **kwargs)
        check_answer(answer, shape)
        return answer

    return answer_checked
