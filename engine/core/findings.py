"""Validation findings: what is wrong with a file, where, and how badly."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

from .answers import NotRequired, TypedDict

MAX_FINDINGS_PER_RESPONSE = 1000
# A finding often quotes the value it refuses; a file may hold megabytes of it.  Bounded, so one bad
# file's findings can never outgrow a reply (the socket's 8 MiB) or the catalog row they live in.
MAX_FINDING_CHARS = 1000


def _bounded(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_FINDING_CHARS:
        return text
    return text[: MAX_FINDING_CHARS - 1] + "\u2026"


class FindingAnswer(TypedDict):
    """A finding as answers carry it: the fields of ``Finding`` that are set, named as there."""

    code: str
    message: str
    severity: str
    path: NotRequired[str]
    field: NotRequired[str]
    line: NotRequired[int]
    record_id: NotRequired[str]


class TruncatedFindings(TypedDict):
    """At most a response's worth of findings, how many there were, and whether some were left out."""

    findings: list[FindingAnswer]
    total: int
    truncated: bool


@dataclass(frozen=True)
class Finding:
    """One validation result.  ``error`` makes a record invalid; ``warning`` does not."""

    code: str
    message: str
    severity: str = "error"
    path: str | None = None
    field: str | None = None
    line: int | None = None
    record_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", _bounded(self.message))
        object.__setattr__(self, "field", _bounded(self.field))

    def to_dict(self) -> FindingAnswer:
        return {key: value for key, value in asdict(self).items() if value is not None}  # type: ignore[return-value]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Finding":
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(finding.severity == "error" for finding in findings)


def truncated(findings: list[FindingAnswer], limit: int = MAX_FINDINGS_PER_RESPONSE) -> TruncatedFindings:
    """The response shape for a findings list: at most ``limit``, truncation reported."""
    return {"findings": findings[:limit], "total": len(findings), "truncated": len(findings) > limit}
