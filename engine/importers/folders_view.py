"""``operator/folders``: an imported vault's notes by the folder each came from, as the owner browses them.

A note's folder is a fact the import keeps: each page a Markdown import made cites, first, the note's
original retained under the vault folder's name and the note's path in it (``markdown.retained_name``:
``notes › Projects › Alpha › Plan.md``), so the folder is all of that name but its last part, written as a
path (``notes/Projects/Alpha``).  The
folder also became one of the page's tags at import, but a tag can be the note's own too, so the tags are
not read for this.  Pages made another way, or whose first citation is no longer the original, are in no
folder.

    operator/folders  agent, folder?, offset?, limit?   {folders: [{folder, notes}]} (every folder holding
                                                         notes, by path); with ``folder``, also a page of its
                                                         notes by title, as ``operator/records`` lists them
                                                         (``records``, ``total``, ``offset``, ``nextOffset?``)
"""

from __future__ import annotations

from typing import Any

from ..access.authority import Authority, OperatorCaller
from ..core.answers import NotRequired, TypedDict
from ..core.params import AgentName, Integer, Params, String
from ..operator.browse import ListedRecord, listed_record
from ..service import Engine
from ..store.catalog_reads import RecordRow
from ..store.open_store import ReadView
from ..runtime import StoreRuntime
from .common import SourceReader, first_source, import_instance
from .markdown import RETAINED_SEPARATOR

FOLDER_MAX_CHARS = 4096
LIMIT_DEFAULT, LIMIT_MAX = 200, 500
FOLDERS = Params(AgentName("agent", required=True),
                 String("folder", FOLDER_MAX_CHARS, min_chars=1, what="a folder path from operator/folders"),
                 Integer("offset", 0, default=0), Integer("limit", 1, LIMIT_MAX, default=LIMIT_DEFAULT))


class FolderCount(TypedDict):
    folder: str
    notes: int


class NoteFolders(TypedDict):
    folders: list[FolderCount]
    records: NotRequired[list[ListedRecord]]
    total: NotRequired[int]
    offset: NotRequired[int]
    nextOffset: NotRequired[int]


def note_folders(engine: Engine, params: dict[str, Any]) -> NoteFolders:
    values = FOLDERS.read(params)

    def work(runtime: StoreRuntime, authority: Authority, view: ReadView) -> NoteFolders:
        by_folder = folders_of(view, authority.partition)
        answer: NoteFolders = {"folders": [{"folder": folder, "notes": len(rows)}
                                           for folder, rows in sorted(by_folder.items())]}
        if values["folder"] is not None:
            rows = sorted(by_folder.get(values["folder"], []), key=lambda row: ((row.title or "").lower(),
                                                                                 row.record_id or ""))
            offset, limit = values["offset"], values["limit"]
            answer.update(records=[listed_record(row) for row in rows[offset:offset + limit]], total=len(rows),
                          offset=offset)
            if offset + limit < len(rows):
                answer["nextOffset"] = offset + limit
        return answer

    return engine.enter(OperatorCaller(values["agent"]), create=False).read(work)


def folders_of(view: ReadView, partition: str) -> dict[str, list[RecordRow]]:
    """The current pages a Markdown import made, by the folder of the original each cites first."""
    sources = SourceReader(view, partition)
    instance = import_instance("markdown")
    found: dict[str, list[RecordRow]] = {}
    for row in view.catalog.current(partition, kind="page"):
        source = first_source(row.view)
        if sources.instance(source) != instance:  # the original's, not the page's: a later revision keeps it
            continue
        parts = (sources.filename(source) or "").split(RETAINED_SEPARATOR)
        if len(parts) > 1:
            found.setdefault("/".join(parts[:-1]), []).append(row)
    return found
