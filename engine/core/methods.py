"""One way to add a method: the declaration every tool, host method and operator method is written in.

A feature package declares its methods beside their handlers as ``Method`` values (a tuple, or for the
operator's methods a ``methods(engine)`` function giving one), and the wire gathers them: the tool
registry lists and calls the tools, the dispatcher registers the host and operator methods.  Neither
reads anything of a feature but its declarations.

Each declaration names the ``Params`` the handler reads (engine/core/params.py: the input schema a client
is shown and the check the engine runs) and the answer it returns (a TypedDict, or a Union of them,
engine/core/answers.py: the output schema).  What calls the handler depends on who may ask:

    agent methods (tools, memory/*)   handler(engine, caller, args): the request's arguments without _meta,
                                      the caller the connection's credential and audience make
    operator methods (operator/*)     handler(params): the request's params without _meta, the handler bound
                                      to its feature's object (so ``methods(engine)`` declares them)

``title``, ``description`` and ``writes`` are what ``tools/list`` shows of a tool (``writes``: listed only
while Knowledge writes are enabled); the other kinds leave them empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .params import Params, without_meta


@dataclass(frozen=True)
class Method:
    name: str          # the wire name: a tool's, a host method's (memory/...), an operator method's without operator/
    params: Params     # what the handler reads: the source of the input schema
    answer: Any        # the TypedDict (or Union of them) the handler returns: the source of the output schema
    handler: Callable[..., Any]
    writes: bool = False
    title: str = ""        # a tool's, as a client shows it to its user
    description: str = ""  # a tool's, as a model reads it


def handlers(methods: Iterable[Method]) -> dict[str, Callable[..., Any]]:
    """The handlers of ``methods`` by name, for callers in the engine's own process (the operator packages'
    ``handlers``: the command line, the tests)."""
    return {method.name: method.handler for method in methods}


def operator_handler(method: Method) -> Callable[[Any, dict[str, Any]], Any]:
    """An operator method as a method table holds it: its handler given the request's params without
    ``_meta`` (an operator session has no audience)."""
    return lambda session, params: method.handler(without_meta(params))
