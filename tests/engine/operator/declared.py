"""Holding operator answers to their declarations: the TypedDict a handler declares, as ``output_schema``
makes its JSON Schema; only the return annotation is read, since operator modules name some parameter types
for the type checker alone.

``output_schema`` closes every object it declares, so an answer with a key its declaration lacks fails as
surely as one with a wrong type or a missing key.  Values declared ``JsonValue`` or with ``extra_items`` stay
open.
"""

from __future__ import annotations

import functools
import inspect
import json
from typing import Any, Callable

import jsonschema

from engine.core.answers import output_schema


def declared_answer(function: Callable[..., Any]) -> Any:
    """The TypedDict ``function`` declares it returns, or None (no declaration, or not a TypedDict)."""
    function = inspect.unwrap(function)
    annotation = getattr(function, "__annotations__", {}).get("return")
    if isinstance(annotation, str):  # modules use postponed annotations: read it where it was written
        annotation = eval(annotation, function.__globals__)  # noqa: S307 - our own source's annotation
    return annotation if hasattr(annotation, "__required_keys__") else None


def check_answer(answer: Any, shape: Any) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``answer``, as the wire carries it, fits ``shape``."""
    jsonschema.validate(json.loads(json.dumps(answer)), output_schema(shape))


def checked(function: Callable[..., Any], shape: Any) -> Callable[..., Any]:
    """``function``, checking each answer it returns against ``shape``."""

    @functools.wraps(function)
    def answer_checked(*args: Any, **kwargs: Any) -> Any:
        answer = function(*args, **kwargs)
        check_answer(answer, shape)
        return answer

    return answer_checked
