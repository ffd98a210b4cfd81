"""The host methods (``memory/*``): what an agent's host asks beside the tools (docs/protocol.md).

Each is a ``Method`` (engine/core/methods.py) called with the connection's caller and the request's
arguments without ``_meta``.  Those the Engine facade answers are declared here (the wire sits below
it); the memory and gate packages declare theirs beside their handlers (``HOST_METHODS`` of
memory.recall, memory.memory_prompt, memory.knowledge_index and gate.turn).  ``HOST_METHODS`` gathers
them all for the dispatcher.
"""

from __future__ import annotations

from ..core.methods import Method
from ..core.params import NO_PARAMS
from ..gate import turn
from ..memory import knowledge_index, memory_prompt, recall
from ..search.keyword import MEMORY_SEARCH_PARAMS, SearchAnswer
from ..store.answers import Health, ReferenceRead, StatusAnswer
from ..store.reads import READ_PARAMS

FACADE_METHODS = (
    Method("memory/search", MEMORY_SEARCH_PARAMS, SearchAnswer, lambda engine, caller, args: engine.search(caller, args)),
    Method("memory/read", READ_PARAMS, ReferenceRead, lambda engine, caller, args: engine.read(caller, args)),
    Method("memory/health", NO_PARAMS, Health, lambda engine, caller, args: engine.health(caller)),
    Method("memory/status", NO_PARAMS, StatusAnswer, lambda engine, caller, args: engine.status(caller)),
)

HOST_METHODS = (*FACADE_METHODS, *recall.HOST_METHODS, *memory_prompt.HOST_METHODS, *knowledge_index.HOST_METHODS,
                *turn.HOST_METHODS)
