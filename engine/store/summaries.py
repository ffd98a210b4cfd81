"""The record summary and the reference: the two shapes every answer naming a record starts from.

A search hit, a lookup match, a Browse row, a recall candidate, an ontology definition's records and
an exact read all name a record the same way: ``record_summary`` builds that part once, and each answer
adds its own keys after it (``{**record_summary(row), "snippet": ...}``).
"""

from __future__ import annotations

from ..core.answers import TypedDict
from ..vault.record_view import RecordView
from .catalog_reads import RecordRow

PROVIDER = "knowledge"


class RecordSummary(TypedDict):
    """Which record, at which revision, and what it is.  ``type`` is a page's type, a claim's kind or a
    relationship's relation; any field is None for a file that does not say it (an invalid record)."""

    id: str | None
    revision: int | None
    kind: str | None
    type: str | None
    title: str | None


class Reference(TypedDict):
    """A citation of one exact revision of a record; it grants no access by itself."""

    provider: str
    store: str
    id: str | None
    revision: int | None
    sha256: str | None


def record_summary(record: RecordRow | RecordView) -> RecordSummary:
    """The summary of a catalogued record (its row: a page's type as classified), or of a record read from
    its bytes (its view: a page's type as declared)."""
    if isinstance(record, RecordRow):
        return {"id": record.record_id, "revision": record.revision, "kind": record.kind, "type": record.type,
                "title": record.title}
    return {"id": record.id, "revision": record.revision, "kind": record.kind, "type": record.detail,
            "title": record.title}


def reference(store_id: str, row: RecordRow) -> Reference:
    """A citation of one exact revision; it grants no access by itself."""
    return {"provider": PROVIDER, "store": store_id, "id": row.record_id, "revision": row.revision,
            "sha256": row.sha256}
