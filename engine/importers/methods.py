"""The operator methods of this layer, which ``knowledge serve`` adds to the socket's method table.

They sit above the wire and operator layers (they run an export or an import as a whole), so the
process that serves registers them (``register``) rather than the dispatcher itself.  The command line
asks them when an engine serves its state directory (``engine/cli/desk.py``); the engine does the work
and checks the parameters as for any operator method.

    method            params                                   changes
    operator/export   out (an absolute path), store?, agent?,  writes the archive file out
                      withHistory?
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..core.errors import InvalidParams
from ..core.params import AgentName, Flag, Params, String, without_meta
from ..service import Engine
from .archive import export_archive

EXPORT = Params(String("out", 4096, required=True, min_chars=1, what="the archive's absolute path"),
                String("store", 64, min_chars=1, what="a store's name or id"), AgentName("agent"),
                Flag("withHistory", default=False))


def register(dispatcher: Any, engine: Engine) -> None:
    """Add this layer's ``operator/*`` methods to ``dispatcher`` (a ``wire.protocol.Dispatcher``)."""
    handlers: dict[str, Callable[[dict[str, Any]], Any]] = {"export": lambda params: export(engine, params)}
    for name, handler in handlers.items():
        dispatcher.register("operator/" + name, lambda session, params, handler=handler: handler(without_meta(params)))


def export(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    """``knowledge export`` in the serving engine: the store's archive, collected on its lane."""
    values = EXPORT.read(params)
    out = Path(values["out"])
    if not out.is_absolute():  # the engine's working directory is not the command's
        raise InvalidParams("out must be an absolute path", field="out")
    return export_archive(engine, out, store=values["store"], agent=values["agent"],
                          with_history=values["withHistory"])
