"""The store package's declared answers: receipts, exact reads, history, diagnostics and reads by reference.

Each is a ``TypedDict`` (``engine.core.answers``): the code is held to it and the published output
schemas are made from it.  The record summary and the reference are in ``summaries``.
"""

from __future__ import annotations

from typing import Literal

from ..core.answers import JsonObject, NotRequired, TypedDict
from .summaries import Reference


class GitState(TypedDict):
    """Where a publication's git checkpoint stands: ``commit`` once ``committed``."""

    state: Literal["committed", "pending", "unavailable"]
    commit: NotRequired[str]


class GitSummary(TypedDict):
    """One partition's git queue: pending checkpoints, the last error, the newest commit."""

    state: Literal["committed", "pending"]
    pending: int
    lastError: str | None
    commit: str | None


class PublishedRecord(TypedDict):
    id: str
    revision: int
    kind: str


class PublishedItem(TypedDict):
    id: str
    revision: int


class PublishedSource(TypedDict):
    """A retained original a publication installed (``knowledge_attach``, ``knowledge_attach_file``)."""

    id: str
    sha256: str
    size: int
    mediaType: str
    filename: str | None
    retainedPath: str


class Receipt(TypedDict):
    """What a publication answers, and an identical retry answers again.  Which of the optional keys it
    has follows from the write: a page's ``id``/``revision``, remembered ``items``, an attached
    ``source`` with the ``vaultId``, a recall block."""

    publicationId: str
    requestId: str | None
    git: GitState
    id: NotRequired[str]
    revision: NotRequired[int]
    records: NotRequired[list[PublishedRecord]]
    items: NotRequired[list[PublishedItem]]
    source: NotRequired[PublishedSource]
    vaultId: NotRequired[str]
    recall: NotRequired[JsonObject | None]


class ValidityAnswer(TypedDict):
    """When a claim holds, and whether it holds at the moment asked (``asOf``, default now)."""

    validFrom: str | None
    validTo: str | None
    holds: bool


class RecordRead(TypedDict):
    """An exact read (``knowledge_record``): the file's bytes' digest, its status and, when it parses, the
    record.  ``frontmatter`` is the file's own mapping, unknown keys included; a file that does not parse
    has only its findings."""

    sha256: str
    status: str
    path: str
    findings: list[JsonObject]
    id: NotRequired[str | None]
    revision: NotRequired[int | None]
    kind: NotRequired[str | None]
    title: NotRequired[str | None]
    frontmatter: NotRequired[JsonObject]
    body: NotRequired[str]
    validity: NotRequired[ValidityAnswer]


class HistoryGit(TypedDict):
    commit: str


class HistoryEntry(TypedDict):
    revision: int
    sha256: str
    origin: str
    publicationId: str | None
    observedAt: str
    updatedAt: str | None
    lifecycle: str | None
    title: str | None
    attribution: JsonObject | None
    git: HistoryGit | None


class HistoryEvent(TypedDict):
    """An edit, rename or deletion seen outside the engine."""

    kind: str
    path: str
    detail: str | None
    at: str


class History(TypedDict):
    id: str
    revisions: list[HistoryEntry]
    events: list[HistoryEvent]


class OntologySources(TypedDict):
    sources: list[str]


class Diagnostics(TypedDict):
    """Scoped validation: findings (errors first, at most 1,000), files per status, the ontology's files,
    publications not yet applied, and the git queue."""

    findings: list[JsonObject]
    total: int
    truncated: bool
    files: dict[str, int]
    ontology: OntologySources
    pendingPublications: int
    git: GitSummary


class EvidenceLocator(TypedDict):
    """Where one cited piece of evidence is kept; the retained file's facts when it is in the partition."""

    source: str | None
    lines: NotRequired[list[int]]
    quote: NotRequired[str]
    retainedPath: NotRequired[str | None]
    mediaType: NotRequired[str | None]
    sha256: NotRequired[str | None]
    size: NotRequired[int | None]


# ``from`` is a Python keyword: this one is declared in the functional form.
ReadAnswer = TypedDict("ReadAnswer", {
    "ref": Reference, "title": str | None, "kind": str | None, "from": int, "lines": int, "totalLines": int,
    "truncated": bool, "text": str, "evidence": list[EvidenceLocator], "evidenceTruncated": bool,
})
ReadAnswer.__doc__ = "Lines of the exact revision a search hit's reference names (``memory/read``)."
