"""The one parameter check every ``operator/*`` method starts with."""

from __future__ import annotations

from typing import Any

from .errors import InvalidParams
from .ids import is_agent_name


def operator_params(params: dict[str, Any], allowed: set[str], *, agent: bool = False) -> dict[str, Any]:
    """The request's parameters without ``_meta``, unknown keys refused (``agent``: it must name one)."""
    cleaned = {key: value for key, value in params.items() if key != "_meta"}
    unknown = sorted(set(cleaned) - allowed - ({"agent"} if agent else set()))
    if unknown:
        raise InvalidParams(f"unknown parameter {unknown[0]}", field=unknown[0])
    if agent and not is_agent_name(cleaned.get("agent")):
        raise InvalidParams("agent must name an agent", field="agent")
    return cleaned
