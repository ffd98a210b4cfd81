"""What the store's reads and publications answer, declared once (engine/core/answers.py): the exact read of
a record, its history, the citation of a revision and the receipts of a publication.

The tools return these as they are (engine/wire/tools.py publishes their ``outputSchema``).  A record read
shows the file's frontmatter as written, and its summary as the record view reads it (a value of the wrong
type is None); a file that is not a record at all has only its ``sha256``, ``status``, ``path`` and
``findings``.  The record summary and the reference are in ``summaries``.
"""

from __future__ import annotations

from typing import Literal

from ..core.answers import JsonObject, JsonValue, NotRequired, TypedDict
from ..core.findings import FindingAnswer
from .summaries import RecordSummary, Reference


class ValidityAnswer(TypedDict):
    """When a claim holds, and whether it holds at the moment asked (``asOf``, default now)."""

    validFrom: str | None
    validTo: str | None
    holds: bool


class RecordRead(TypedDict):
    sha256: str
    status: str
    path: str
    findings: list[FindingAnswer]
    id: NotRequired[str | None]  # the record summary's (engine/store/summaries.py): None where the file's is no text
    revision: NotRequired[int | None]
    kind: NotRequired[str | None]
    title: NotRequired[str | None]
    frontmatter: NotRequired[JsonObject]
    body: NotRequired[str]
    validity: NotRequired[ValidityAnswer]
    link: NotRequired[str]


class GitCommit(TypedDict):
    commit: str


class Revision(TypedDict):
    revision: int
    sha256: str
    origin: str
    publicationId: str | None
    observedAt: str
    updatedAt: JsonValue
    lifecycle: JsonValue
    title: JsonValue
    attribution: JsonValue
    git: GitCommit | None


class OutsideEvent(TypedDict):
    """An edit, rename or deletion seen outside the engine."""

    kind: str
    path: str
    detail: str | None
    at: str


class RecordHistory(TypedDict):
    id: str
    revisions: list[Revision]
    events: list[OutsideEvent]
    link: NotRequired[str]


class GitState(TypedDict):
    state: Literal["committed", "pending", "unavailable"]
    commit: NotRequired[str]


class PublishedRecord(TypedDict):
    id: str
    revision: int
    kind: str
    link: NotRequired[str]


class SavedItem(TypedDict):
    id: str
    revision: int
    link: NotRequired[str]


class Receipt(TypedDict):
    """What every publication answers; an identical retry gets the same receipt."""

    publicationId: str
    requestId: str | None
    git: GitState


class SourceSummary(TypedDict):
    id: str
    sha256: str
    size: int
    mediaType: str
    filename: str | None
    retainedPath: str


class PageReceipt(Receipt):
    id: str
    revision: int
    records: list[PublishedRecord]
    sources: NotRequired[list[SourceSummary]]  # the files its evidence sent (``content``), retained with it, in order
    link: NotRequired[str]
    note: NotRequired[str]  # a file's display name kept is not the filename given (its last part, trimmed)


class RememberReceipt(Receipt):
    items: list[SavedItem]
    records: list[PublishedRecord]


class SourceReceipt(Receipt):
    source: SourceSummary
    vaultId: str
    note: NotRequired[str]  # the display name kept is not the filename given (its last part, trimmed)


class LookupMatch(RecordSummary):
    ref: Reference
    link: NotRequired[str]


class LookupAnswer(TypedDict):
    """At most one match: a name shared by several records resolves to none (`ambiguous`)."""

    matches: list[LookupMatch]
    ambiguous: bool


class ResumeAnswer(TypedDict):
    """The caller's partition's checkpoint: `reason` says why it is pending or unavailable."""

    state: str
    reason: NotRequired[str]
    publications: NotRequired[int]
    commit: NotRequired[str]
    index: NotRequired[str]  # a git index behind the history: the private partition's only


class GitSummary(TypedDict):
    """One partition's git queue (``memory/health``'s ``git``): ``unavailable`` with its ``reason`` without git."""

    state: Literal["committed", "pending", "unavailable"]
    pending: NotRequired[int]
    lastError: NotRequired[str | None]
    commit: NotRequired[str | None]
    reason: NotRequired[str]


class OntologySources(TypedDict):
    sources: list[str]


class Diagnostics(TypedDict):
    """Scoped validation of the caller's partition: at most 1,000 findings, ``truncated`` past them."""

    findings: list[FindingAnswer]
    total: int
    truncated: bool
    files: dict[str, int]  # files per status
    ontology: OntologySources
    pendingPublications: int
    git: GitSummary


class Health(Diagnostics):
    """``memory/health``: the diagnostics with their verdict."""

    ok: bool
    errors: int
    warnings: int


class StatusAnswer(TypedDict):
    """``memory/status``: readiness only, no counts, scope, ids or paths."""

    ready: bool


class EvidenceLocator(TypedDict):
    """Where a cited piece of evidence is kept; an invalid record's citation may name anything at all."""

    source: JsonValue
    lines: NotRequired[JsonValue]
    quote: NotRequired[JsonValue]
    retainedPath: NotRequired[str]
    filename: NotRequired[str]  # the original's own name, when it was given one (an imported note's path)
    mediaType: NotRequired[str]
    sha256: NotRequired[str]
    size: NotRequired[int]


# ``memory/read``: lines of the exact revision a search hit's reference names ("from" is a keyword: the
# functional form declares it).
ReferenceRead = TypedDict("ReferenceRead", {
    "ref": Reference, "title": str, "kind": str, "from": int, "lines": int, "totalLines": int,
    "truncated": bool, "text": str, "evidence": list[EvidenceLocator], "evidenceTruncated": bool,
})
