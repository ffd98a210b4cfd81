"""The ``recallGate`` block of config.json, parsed once into a typed object.

The block is the gate's explicit opt-in: without it the gate never runs.
``{}`` means every default (``mode: "shadow"``).  Every key of the settings
table in spec 000 ("Recall gate") is here with its range; an unknown key or
a value out of range makes the whole config invalid, so the engine reports
it and keeps the last valid settings (engine/state/config.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from ..core.answers import NotRequired, TypedDict
from ..core.errors import InvalidParams
from ..core.params import Choice, Flag, Integer, Number, Params

MODES = ("off", "shadow", "live")
CANDIDATE_SOURCES = ("keyword", "hybrid", "model")
WHERE = "recallGate"

# key: (lowest, highest) for integers
_INT_RANGES = {
    "maxCandidates": (1, 10),
    "excerpts": (1, 10),
    "excerptChars": (100, 4000),
    "pageChars": (200, 6000),
    "timeoutMs": (100, 10000),
    "maxIndexChars": (1000, 100_000),
    "longWindows": (0, 10),
}
_THRESHOLDS = ("highThreshold", "mediumThreshold", "skipHintBelow")
KEYS = ("mode", "candidates", *_INT_RANGES, *_THRESHOLDS, "journal")


class GateConfig(TypedDict):
    """The ``recallGate`` block with every key, as config.json spells it (``null``: a tier left off)."""

    mode: str
    candidates: str
    maxCandidates: int
    highThreshold: NotRequired[float]   # absent: the Decision model's documented one is in force
    excerpts: int
    excerptChars: int
    pageChars: int
    mediumThreshold: float | None
    skipHintBelow: float | None
    timeoutMs: int
    maxIndexChars: int
    journal: bool
    longWindows: int


@dataclass(frozen=True)
class GateSettings:
    """The gate's settings in force; field names follow the config keys."""

    mode: str = "shadow"
    candidates: str = "keyword"
    max_candidates: int = 10
    high_threshold: float = 0.75
    excerpts: int = 4
    excerpt_chars: int = 1000
    page_chars: int = 2800
    medium_threshold: float | None = None
    skip_hint_below: float | None = None
    timeout_ms: int = 1500
    max_index_chars: int = 24000
    journal: bool = False
    long_windows: int = 0            # the cascade: this many likeliest pages get the long windows (0: equal windows)
    # False when recallGate names no highThreshold: the Decision model in force then brings its documented one
    # (``in_force``; the spec's 0.75 stays for a reranker, whose probabilityTrue is the model's own)
    high_threshold_set: bool = True

    def to_config(self) -> GateConfig:
        """The block as config.json spells it (camelCase, every key, ``null`` for an unset tier; no
        ``highThreshold`` when the owner set none)."""
        config = {_camel(name): value for name, value in asdict(self).items() if name != "high_threshold_set"}
        if not self.high_threshold_set:
            del config["highThreshold"]
        return config  # type: ignore[return-value]

    def in_force(self, model_threshold: float | None) -> "GateSettings":
        """These settings with ``model_threshold`` (the Decision model's documented ``highThreshold``, None for
        none) as ``highThreshold`` when the owner set none; the owner's own value always wins.  The answer names
        its ``highThreshold`` (``to_config``), so a turn's gate log records the threshold it ran with."""
        if self.high_threshold_set:
            return self
        return replace(self, high_threshold=self.high_threshold if model_threshold is None else model_threshold,
                       high_threshold_set=True)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_FIELDS = {_camel(name): name for name in GateSettings.__dataclass_fields__}


SETTINGS = Params(
    Choice("mode", MODES),
    Choice("candidates", CANDIDATE_SOURCES),
    # Ranges, not sizes: a value outside one is invalid either way.
    *(Integer(key, low, high, scale=True) for key, (low, high) in _INT_RANGES.items()),
    Number("highThreshold", 0, 1),
    Number("mediumThreshold", 0, 1),   # null: the tier is off, as when the key is absent
    Number("skipHintBelow", 0, 1),
    Flag("journal"),
    note=f"known: {', '.join(KEYS)}",
)


def parse_gate_settings(block: Any) -> GateSettings | None:
    """``None`` when the block is absent (the gate is off); raises InvalidParams naming the key."""
    if block is None:
        return None
    if not isinstance(block, dict):
        raise InvalidParams("recallGate must be an object", field=WHERE)
    values = SETTINGS.read(block, where=f"{WHERE}.")
    settings = GateSettings(**{_FIELDS[key]: value for key, value in values.items() if value is not None},
                            high_threshold_set=values.get("highThreshold") is not None)
    return check_tiers(settings)


def check_tiers(settings: GateSettings) -> GateSettings:
    """``settings`` when its pointer tier lies below its ``highThreshold``; check them again once in force
    (``in_force``): without the owner's own, the Decision model's threshold (0.55 for an embedding model) may
    lie below a pointer line that the spec's 0.75 would have allowed."""
    if settings.medium_threshold is not None and settings.medium_threshold >= settings.high_threshold:
        raise InvalidParams(f"recallGate.mediumThreshold must be below highThreshold, {settings.high_threshold:g} "
                            "here (pages at or above highThreshold are injected, the pointer tier lies between "
                            "the two)", field=f"{WHERE}.mediumThreshold")
    return settings
