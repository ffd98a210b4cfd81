"""Fetching and pushing a store's branches (the transport helper's module, issue 28).

This branch holds only the refusal every sync step raises; the transport's own version of this module
replaces it when the branches are merged (the class is the same, word for word).
"""

from __future__ import annotations

from ..core.errors import Conflict
from ..core.findings import Finding


class SyncRefused(Conflict):
    """A fetch or push refused; ``finding`` says why in plain words (its ``code`` is one of
    ``REFUSAL_CODES``), and nothing was delivered or recorded."""

    def __init__(self, finding: Finding, **details: object) -> None:
        super().__init__(finding.message, code=finding.code, findings=[finding.to_dict()], **details)
        self.finding = finding
