"""The declared answers of this layer: an import's result per format, an export's and a restore's summary,
the jobs ``operator/startExport`` and ``operator/import`` answer with, and the archive's manifest.

An import's result starts with ``ImportResult`` (what every format says) and adds what its format counts;
``knowledge import --json`` prints it and an import job's ``result`` holds it.
"""

from __future__ import annotations

from typing import Union

from ..core.answers import JsonValue, NotRequired, TypedDict
from ..core.jobs import JobFields


class ImportCounts(TypedDict):
    """The records an import stands for (``imported``), of those the ones an earlier run of the same input made
    (``reused``), or on a dry run those a real run would write (``wouldCreate``)."""
    sources: int
    pages: int
    claims: int
    relationships: int


class ImportResult(TypedDict):
    """What every import says: its format, whether it was a dry run, the receiving agent on a real run
    (with the file its new token is in, when the import registered it) and its counts: on a real run the
    records that stand for the input (``imported``), made now or by an earlier run, and of those the ones an
    earlier run made (``reused``); on a dry run what a real run would write (``wouldCreate``: new records and
    new revisions) and what an earlier run made, which it would leave as it is (``reused``): their sum is the
    real run's ``imported``."""
    agent: NotRequired[str]
    tokenFile: NotRequired[str]
    format: str
    dryRun: bool
    imported: NotRequired[ImportCounts]
    reused: NotRequired[ImportCounts]
    wouldCreate: NotRequired[ImportCounts]


class ExportPart(TypedDict):
    """One file of an export split in parts, and its sha256."""
    file: str
    sha256: str


class ConversationsImport(ImportResult):
    """A ChatGPT or Claude export: one page per conversation (or project), by conversation key."""
    file: str
    sha256: str
    files: NotRequired[list[ExportPart]]
    conversations: int
    projects: NotRequired[int]
    pages: dict[str, str]
    revised: int
    notes: NotRequired[list[str]]
    leftOut: NotRequired[list[str]]


class KeptEdit(TypedDict):
    """A note or memory file that changed since an earlier import whose page was revised in the store since (by
    the owner, an agent, or an edit outside the engine): left as it is, not overwritten by the input."""
    path: str  # the note's path in the folder, the memory file's in the workspace
    line: NotRequired[int]  # memory-core: the list item's line, where the edit kept is its claim's
    id: str  # its page (or the list item's claim)
    why: str  # what revised the page: "revision 2 was written by main (laptop-main), not by the import"


class MarkdownImport(ImportResult):
    """A folder of Markdown notes: one page per note, by the note's path in the folder."""
    folder: str
    notes: list[str]
    pages: dict[str, str]
    relationships: int
    attachments: int
    revised: int
    leftOut: NotRequired[list[str]]
    unresolved: NotRequired[dict[str, list[str]]]  # a note's path: its links that name nothing, as written
    unreadFrontmatter: NotRequired[dict[str, str]]  # a note's path: why its frontmatter was not read
    unreadFields: NotRequired[dict[str, str]]  # a note's path: which known fields of its frontmatter were not read, why
    keptEdits: NotRequired[list[KeptEdit]]  # notes whose page's edits were kept (not with ``replaceEdits``)


class Mem0Import(ImportResult):
    """A mem0 or OpenMemory export: one claim per memory, in the export's order."""
    file: str
    sha256: str
    memories: int
    skippedDeleted: int
    relationsLeftOut: NotRequired[int]
    claims: list[str]
    revised: int
    notes: list[str]


class RecallProposal(TypedDict):
    """The recall OpenClaw's annotations propose for one claim; approved by nobody until the owner does."""
    claim: str
    file: str
    line: int
    triggers: list[str]
    importance: int | None
    projects: list[str]


class MemoryCoreImport(ImportResult):
    """An agent workspace (OpenClaw memory-core): one page per file, by file name, and the claims counted."""
    files: int
    pages: dict[str, str]
    claims: int
    revised: int
    notes: list[str]
    leftOut: list[str]
    recallProposals: list[RecallProposal]
    keptEdits: NotRequired[list[KeptEdit]]  # files whose page's edits were kept (not with ``replaceEdits``)


AnyImport = Union[ConversationsImport, MarkdownImport, Mem0Import, MemoryCoreImport]


class LocomoImport(TypedDict):
    """A LoCoMo benchmark file: counts, and the claims citing each dialog turn, by sample then dialog id."""
    samples: int
    people: int
    sessions: int
    claims: int
    dialogClaims: dict[str, dict[str, list[str]]]


class LocomoQuestion(TypedDict):
    """A LoCoMo question with its evidence turns and the claims citing them (``record_ids``, once found)."""
    sample: str
    question: str
    category: JsonValue  # as the file gives it
    evidence: list[str]
    record_ids: NotRequired[list[str]]


class DemoSeeded(TypedDict):
    """``knowledge demo``: the agent seeded, its token when it was created, the records published and the
    decision model the recall gate uses (None when the gate was not turned on)."""
    agent: str
    token: str | None
    records: int
    gate: str | None


# --- export and restore ----------------------------------------------------------------------------


class ExportHistory(TypedDict):
    """What an archive holds of the vault's git history: a bundle (with its head), the ``.git`` folder's
    parts (``git-folder``, with the files left out), or none (``kind`` None), and why."""
    kind: str | None
    note: str
    head: NotRequired[str | None]
    skipped: NotRequired[list[str]]


class ExportResult(TypedDict):
    """``knowledge export``: the archive written and what it holds."""
    archive: str
    storeId: str
    kind: str
    name: str | None
    files: int
    revisions: int
    skipped: list[str]
    conversations: int
    history: ExportHistory


class RestoredHistory(TypedDict):
    """What a restore made of the archive's history."""
    restored: bool
    kind: str | None
    note: NotRequired[str]
    head: NotRequired[str]


class RestoreResult(TypedDict):
    """``knowledge restore``: the store restored (``created``), or found already restored (with a note)."""
    archive: str
    storeId: str
    kind: str
    name: str | None
    agent: str | None
    created: bool
    note: NotRequired[str]
    files: NotRequired[int]
    revisions: NotRequired[int]
    conversations: NotRequired[int]
    records: NotRequired[int]
    history: NotRequired[RestoredHistory]
    agentRegistered: NotRequired[bool]  # an isolated store's agent: registered here (an archive carries no access)


class ArchivedRevision(TypedDict):
    """A kept revision as the manifest lists it, with the archive member holding its content."""
    file: str
    partition: str
    recordId: str
    revision: int
    sha256: str
    path: str
    origin: str
    publicationId: str | None
    agent: str | None
    observedAt: str


class ArchivedMember(TypedDict):
    """A member of the archive, listed with its sha256 and size."""
    path: str
    sha256: str
    size: int


class ManifestStore(TypedDict):
    storeId: str
    vaultId: str
    createdAt: str
    kind: str
    name: str | None
    createdFor: str | None
    label: str | None
    agents: list[str]
    partitions: dict[str, str]  # partition name -> its directory identity


class ManifestConversation(TypedDict):
    sessionId: str
    agent: str
    sessionKeySha256: str
    createdAt: str


class Manifest(TypedDict):
    """The archive's ``manifest.json``."""
    format: str
    formatVersion: int
    engineVersion: str
    createdAt: str
    store: ManifestStore
    history: ExportHistory
    conversations: list[ManifestConversation]
    revisions: list[ArchivedRevision]
    files: list[ArchivedMember]


# --- the operator methods' jobs --------------------------------------------------------------------


class ExportJob(JobFields):
    """``operator/startExport``: the export's job, its ``result`` ``operator/export``'s answer."""
    result: NotRequired[ExportResult]


class ImportJob(JobFields):
    """``operator/import``: the import's job, its ``result`` ``knowledge import --json``'s."""
    result: NotRequired[AnyImport]


# --- what an import writes ---------------------------------------------------------------------------


class Citation(TypedDict):
    """A piece of evidence an imported record cites: a retained source (its lines, a quote) or an excerpt."""
    source: NotRequired[str]
    lines: NotRequired[list[int]]
    quote: NotRequired[str]
    excerpt: NotRequired[str]


class PageDraft(TypedDict):
    """The parameters of a page an import saves (``Engine.save_page``); ``id``, ``expectedRevision`` and
    ``expectedSha256`` (the version the import read) when it revises a page an earlier import made."""
    id: NotRequired[str]
    expectedRevision: NotRequired[int]
    expectedSha256: NotRequired[str]
    type: str
    title: str
    body: str
    aliases: NotRequired[list[str]]
    tags: NotRequired[list[str]]
    fields: NotRequired[dict[str, str]]
    evidence: NotRequired[list[Citation]]
