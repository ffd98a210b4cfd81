"""What every importer of an owner's existing memory does, written once.

An import has two phases.  First the whole input is read and checked
(``Original``; an export's JSON by ``json_shapes``): a malformed input is refused with
an error naming the file and the place in it (a JSON path or a line), and
nothing is written.  Then ``Writer`` publishes through the engine's public
write methods only (``attach``, ``save_page``, ``remember``), so the same
importer can later run over a client of a running engine:

- every original is retained with its sha256 (``Writer.retain``), in parts
  of at most one attachment when it is larger, so that the parts joined in
  order are the original byte for byte; what the import produces cites it;
- every request id is derived from a key of the item in the input and a
  hash of what the write holds, so importing the same input again returns
  the first receipts and creates nothing, and a run interrupted midway is
  finished by running it again;
- an item an earlier import made a record of is found again by a stable
  key (``imported_pages``: a conversation's address; ``imported_by_original``:
  the name its original was retained under; ``imported_records``: any key
  of a record and the sources it cites): unchanged, it is left as it is;
  changed, it gets that record's next revision;
- a dry run goes through the same code with a ``Writer`` that writes
  nothing and counts what would be created (given the engine, it reads
  what an earlier import made, so it also counts what it would revise);
- progress goes to a callback after each item (the terminal prints it, the
  desktop shows it), in its phase: ``writing`` the items, then, for a
  Markdown folder, ``linking`` them, note by note;
- conversations (ChatGPT, Claude) share one page writer
  (``conversations.import_conversations``): a ``source`` page per
  conversation, the transcripts retained a hundred to a text file, each page
  citing its lines;
- the caller's attribution names the import (``import_instance``:
  ``import-<format>``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
import re
import threading
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

from ..access.authority import AgentCaller, Caller
from ..core.errors import InvalidParams, KnowledgeError, NotFound
from ..core.files import read_file as read_stored
from ..core.words import counted, for_count
from ..service import Engine
from ..state.statedir import StateDir
from ..store.attachments import ATTACH_MAX_BYTES, attach
from ..store.inputs import ITEMS_MAX
from ..store.reads import get_record
from ..vault.evidence import DescriptorData
from ..vault.frontmatter import RECORD_MAX_BYTES, split_document
from ..vault.record_view import RecordView, view_of
from .answers import ImportCounts, ImportResult
from .bulk import Pipeline, done as written
from .edits import Edit, first_written_by, page_edit
from .zipped import export_zip, is_zip, member_named, read_parsed_file

DEFAULT_AGENT = "main"
REQUEST_ID_MAX_CHARS = 128
_REQUEST_KEY = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_PART = re.compile(r"\.part-[0-9]{3}-of-[0-9]{3}$")  # what ``Writer.retain`` adds to a part's file name
Shape = TypeVar("Shape", bound=ImportResult)  # a format's result (engine/importers/answers.py)
Item = TypeVar("Item")  # what an item's writes return (``Writer.later``)


# --- the caller --------------------------------------------------------------------------------


@contextmanager
def owner_caller(engine: Engine, agent: str = DEFAULT_AGENT,
                 instance: str = "knowledge-import") -> Iterator[tuple[AgentCaller, str | None]]:
    """An owner-private caller for ``agent`` with a temporary credential, revoked on exit.

    Registers ``agent`` as an owner agent when it does not exist; the second
    value is that new agent's token (shown once), else None.
    """
    known = engine.registry.agent(agent)
    created = engine.add_agent(agent, owner=True) if known is None or not known.active else None
    token = engine.registry.add_credential(agent)
    try:
        yield AgentCaller(token, {"kind": "owner-private"}, instance=instance), created
    finally:
        engine.registry.revoke_credential(token)


def import_engine(state: StateDir) -> Engine:
    """The in-process engine an import runs on: with the vault watcher, so the lane does not walk the
    whole partition before each write (which made an import's cost grow with the square of its size)."""
    return Engine(state, watch=True)


def import_instance(format_name: str) -> str:
    """The instance id an import's writes are attributed to: ``import-<format>``."""
    return f"import-{format_name}"


# --- reading the input -----------------------------------------------------------------------


@dataclass(frozen=True)
class Original:
    """One input file as read: its display name (a path inside a folder or zip) and its exact bytes."""

    name: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def text(self) -> str:
        """The file as UTF-8 text (a leading byte-order mark dropped), else InvalidParams naming it."""
        try:
            return self.data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise refused(self.name, f"byte {exc.start}", "is not UTF-8 text") from exc


def refused(file: str, place: str | None, problem: str) -> InvalidParams:
    """The one shape of a bad-input error: the file, the place in it, what is wrong."""
    where = f"{file}: {place}" if place else file
    return InvalidParams(f"{where} {problem}", file=file, place=place)


def read_file(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidParams(f"cannot read {path}: {exc.strerror or exc}", file=str(path)) from exc


def read_export(path: str | Path, member: str) -> Original:
    """``member`` (such as conversations.json) given directly, or found inside an export's zip; parsed
    whole, so either is refused beyond ``zipped.PARSED_MAX_BYTES`` before it is read."""
    path = Path(path)
    if not is_zip(path):
        return Original(path.name, read_parsed_file(path))
    with export_zip(path) as archive:
        chosen = member_named(archive.names(), member)
        if chosen is None:
            raise refused(str(path), None, f"holds no {member}")
        return Original(f"{path.name}/{chosen}", archive.read_parsed(chosen))


# ``Engine.refuse_secrets``: raises on a credential; a value in bytes is a file, scanned as the engine reads one.
Scan = Callable[[Iterable[tuple[str, str | bytes]]], None]


def refuse_secrets(scan: Scan, original: Original, places: Callable[[], Iterable[tuple[str, str]]]) -> None:
    """Refuse the import when what it would store holds a credential, before anything is written.

    ``places`` (place, text) are the texts the import will store, as they will be stored (decoded
    from the export's JSON), and are always scanned: joined, in one pass, and only on a find one by
    one to name the place.  The original, which will be retained, is scanned as the engine reads an
    attachment; a find there that no place holds is named by its line.
    """
    texts = list(places())
    try:
        if texts:
            scan([(original.name, "\n".join(text for _, text in texts))])
    except KnowledgeError as exc:
        for place, text in texts:
            try:
                scan([(place, text)])
            except KnowledgeError as found:
                raise refused(original.name, place, f"holds what looks like a {found.details.get('kind')}; "
                              "Knowledge does not store credentials: remove it from the export (or allow "
                              "secrets in the settings) and import again") from found
        raise refused(original.name, None, f"holds what looks like a {exc.details.get('kind')}; Knowledge does "
                      "not store credentials: remove it (or allow secrets in the settings) and import again") from exc
    try:
        scan([(original.name, original.data)])
    except KnowledgeError as exc:
        line = exc.details.get("line")
        raise refused(original.name, f"line {line}" if line else None,
                      f"holds what looks like a {exc.details.get('kind')}; Knowledge does not store "
                      "credentials: remove it (or allow secrets in the settings) and import again") from exc


# --- writing ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """How far an import is: ``done`` of ``total`` items of the input (conversations, notes, memories)."""

    format: str
    done: int
    total: int
    item: str  # the item just finished, as the input names it
    phase: str = "writing"  # or "linking": the links between the items written (a Markdown folder's)
    stopping: bool = False  # written while the import was stopping (cancelled, or an error): count, don't stop


@dataclass
class Counts:
    sources: int = 0
    pages: int = 0
    claims: int = 0
    relationships: int = 0

    def as_dict(self) -> ImportCounts:
        return {"sources": self.sources, "pages": self.pages, "claims": self.claims,
                "relationships": self.relationships}

    def add(self, kind: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)

    def less(self, other: "Counts") -> "Counts":
        return Counts(self.sources - other.sources, self.pages - other.pages, self.claims - other.claims,
                      self.relationships - other.relationships)


@dataclass
class Writer:
    """Publishes an import's records through the engine, each under a request id derived from what it writes.

    A request id is ``<format>-<key>-<hash of the parameters>``: the same input gives the same ids, so a second
    run gets the first receipts back and writes nothing, and an interrupted run finishes what is missing.  With
    ``dry_run`` nothing is written: a write an earlier run published (its request id is in the journal) is
    answered with that run's receipt and counted as reused, as a real run's retry would be; every other write is
    counted and answered with a placeholder id, so the importer's own code reports what it would create.
    """

    engine: Engine | None
    caller: Caller | None
    format: str
    dry_run: bool = False
    progress: Callable[[Progress], None] | None = None
    counts: Counts = field(default_factory=Counts)  # every record that stands for the input, made or found
    # Of ``counts``, those an earlier run made: found and kept (``kept``), or a write whose request id an
    # earlier run published, answered with that run's receipt.
    reused: Counts = field(default_factory=Counts)
    # Makes the caller the first write is made with, ``caller`` reading until then (``run_import``: the
    # receiving agent is registered only at the first write, so an import that writes nothing registers
    # nobody); None: ``caller`` writes.
    first_write: Callable[[], Caller] | None = None
    # Items written many at a time (``later``, engine/importers/bulk.py); False: one after another.
    bulk: bool = True
    # An earlier import's page revised since by someone else (``edits``) gets the input's changes anyway; False:
    # it is left as it is, and the result lists it (Markdown's ``keptEdits``).
    replace_edits: bool = False
    _placeholders: int = 0
    _pipeline: Pipeline | None = None
    _stopping: bool = False  # reporting the items that finished after the import began to stop
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _reading: tuple[Caller, Any] | None = None  # the caller and its entry (``Engine.enter``) the reads share
    _earlier_writes: bool | None = None  # ``_any_earlier_writes``: None until asked, before the first write

    def later(self, write: Callable[[], Item], then: Callable[[], None] | None = None) -> "Future[Item]":
        """Write one item (``write`` makes its writes through this writer) beside the next ones, so the store
        publishes them in groups; ``then`` (its progress report) runs on this thread once it and every
        earlier item are written.  A dry run, or a writer without ``bulk``, writes it on the spot."""
        if self.dry_run or not self.bulk or self.engine is None:
            value = write()
            if then is not None:
                then()
            return written(value)
        if self._pipeline is None:
            self._pipeline = Pipeline()
        return self._pipeline.submit(write, then)

    def settle(self) -> None:
        """Wait until every item started with ``later`` is written (raising the first error)."""
        try:
            if self._pipeline is not None:
                self._pipeline.wait()
        finally:
            self.close()

    def close(self) -> None:
        """Stop writing: items not started are dropped, those running finish (each whole or not written) and
        are reported as written, without stopping again (the import is stopping already)."""
        if self._pipeline is not None:
            pipeline, self._pipeline = self._pipeline, None
            self._stopping = True
            try:
                for report in pipeline.close():
                    report()
            finally:
                self._stopping = False

    def request_id(self, key: str, params: Any) -> str:
        digest = hashlib.sha256(json.dumps(params, sort_keys=True, ensure_ascii=False).encode(
            "utf-8", "surrogatepass")).hexdigest()[:24]
        if not _REQUEST_KEY.fullmatch(key):
            key = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return f"{self.format}-{key}-{digest}"[:REQUEST_ID_MAX_CHARS]

    def retain(self, original: Original, key: str, *, media_type: str | None = None,
               filename: str | None = None) -> list[str]:
        """Retain ``original`` with its sha256; returns its source ids: one, or several when it is larger
        than one attachment (``name.part-001-of-003`` and on, which joined in order are the original).
        The file name is ``filename``, else the original's own (without its folder).
        An empty file retains nothing (an empty source can back no citation)."""
        ids = []
        for request_id, params, chunk in self._parts(original, key, media_type=media_type, filename=filename):
            request = {"requestId": request_id, **params,
                       "content": base64.b64encode(chunk).decode("ascii")} if not self.dry_run else {}
            ids.append(self._write("sources", lambda r=request: attach(self.engine, self.caller, r),
                                   request_id, lambda receipt: receipt["source"]["id"]))
        return ids

    def _parts(self, original: Original, key: str, *, media_type: str | None = None, filename: str | None = None
               ) -> list[tuple[str, dict[str, str], bytes]]:
        """The parts ``retain`` attaches ``original`` in: each one's request id, parameters (file name, sha256,
        media type) and bytes."""
        data = original.data
        chunks = [data[start:start + ATTACH_MAX_BYTES] for start in range(0, len(data), ATTACH_MAX_BYTES)]
        name = filename or original.name.replace("\\", "/").rsplit("/", 1)[-1]
        guessed = media_type or mimetypes.guess_type(name, strict=False)[0]
        parts = []
        for number, chunk in enumerate(chunks, start=1):
            filename = name if len(chunks) == 1 else f"{name}.part-{number:03d}-of-{len(chunks):03d}"
            params = {"filename": filename, "sha256": hashlib.sha256(chunk).hexdigest(),
                      **({"mediaType": guessed} if guessed else {})}
            parts.append((self.request_id(f"{key}-original-{number}", params), params, chunk))
        return parts

    def retains_alone(self, original: Original, key: str, *, media_type: str | None = None,
                      filename: str | None = None) -> list[str]:
        """The request ids ``retain`` attaches ``original`` under, one a part: an import that retained it so
        (before its pages retained their originals, ``save_page_retaining``) is finished the same way."""
        return [request_id for request_id, _, _ in self._parts(original, key, media_type=media_type,
                                                               filename=filename)]

    def save_page_retaining(self, key: str, params: dict[str, Any], original: Original, *, media_type: str,
                            filename: str) -> tuple[str, list[str]]:
        """Save one page whose first citation is ``original`` (one part: at most one attachment's size), retained
        with the page in one publication: one group and one round of fsync for both, where a page citing a
        source retained on its own waited for the group after the source's.  Returns the page's id and the
        original's source id.  The request id hashes the original by its name, sha256 and media type, as
        ``retain``'s do, so the same input gives the same request."""
        [(_, file, chunk)] = self._parts(original, key, media_type=media_type, filename=filename)
        cited = {**params, "evidence": [file, *params.get("evidence", [])]}
        request_id = self.request_id(key, cited)
        if self.dry_run:
            receipt, earlier = self._earlier_receipt(request_id), True
            if receipt is None:
                return self._placeholder("pages"), [self._placeholder("sources")]
        else:
            request = {"requestId": request_id, **params,
                       "evidence": [{**file, "content": base64.b64encode(chunk).decode("ascii")},
                                    *params.get("evidence", [])]}
            self._writing()
            earlier = self._published_before(request_id)
            receipt = self.engine.save_page(self.caller, request)
        self._count("sources", earlier)
        self._count("pages", earlier)
        return receipt["id"], [source["id"] for source in receipt["sources"]]

    def published(self, request_ids: Iterable[str]) -> set[str]:
        """Those of ``request_ids`` already published in the caller's partition, in one read beside the store's
        lane; none without a store to read (a dry run without state, an agent with no store yet)."""
        wanted = list(dict.fromkeys(request_ids))
        if not wanted or self.engine is None or self.caller is None:
            return set()
        try:
            return self.engine.enter(self.caller, create=False).read(
                lambda runtime, authority, view: runtime.publisher.published(authority.partition, wanted))
        except NotFound:
            return set()

    def save_page(self, key: str, params: dict[str, Any]) -> str:
        """Save one page (a new one, or the next revision of ``params["id"]``); returns its id."""
        if self.dry_run and "id" in params:  # a revision keeps its page's id, and is written
            self._count("pages")
            return params["id"]
        request = {"requestId": self.request_id(key, params), **params}
        return self._write("pages", lambda: self.engine.save_page(self.caller, request), request["requestId"],
                           lambda receipt: receipt["id"])

    def remember(self, key: str, items: list[dict[str, Any]]) -> list[str]:
        """Save claims and relationships, ``ITEMS_MAX`` a call; returns their ids."""
        ids: list[str] = []
        for start in range(0, len(items), ITEMS_MAX):
            part = items[start:start + ITEMS_MAX]
            kinds = ["relationships" if "relation" in item else "claims" for item in part]
            request = {"requestId": self.request_id(f"{key}-{start // ITEMS_MAX + 1}", part), "items": part}
            if self.dry_run:
                receipt, earlier = self._earlier_receipt(request["requestId"]), True
                if receipt is None:
                    ids += [self._placeholder(kind) for kind in kinds]
                    continue
            else:
                self._writing()
                earlier = self._published_before(request["requestId"])
                receipt = self.engine.remember(self.caller, request)
            for kind in kinds:
                self._count(kind, earlier)
            ids += [entry["id"] for entry in receipt["items"]]
        return ids

    def imported_pages(self, page_type: str, tag: str) -> dict[str, tuple[str, int]]:
        """The current pages an earlier run of this format's import made (its attribution names it) of
        ``page_type`` tagged ``tag``, by their ``fields.url``: ``(id, revision)``, the newest where several
        share one.  A dry run without the store, or an agent with no store yet, has none."""
        return self.imported_records(lambda row, _: (row.view.fields or {}).get("url"), reads=("fields",),
                                     kind="page", type=page_type, tag=tag)

    def imported_by_original(self, kind: str, *, revised_since: bool = False,
                             **filters: Any) -> dict[str, tuple[str, int]]:
        """The current records of ``kind`` an earlier run of this format's import made, by the file name of
        the retained original each cites first (``Writer.retain``'s ``filename``: a note's path in its
        folder): ``(id, revision)``, the newest where several share one.  With ``revised_since``, also those
        whose current revision someone else wrote (an agent, the owner): a record whose first version the
        import wrote and whose first citation is an original the import retained (``edits.page_edit`` then
        says what changed); a record the import's revision names is found before them."""
        def original(row: Any, read: "SourceReader") -> str | None:
            return read.filename(first_source(row.view))

        instance = import_instance(self.format)

        def revised_by_another(row: Any, read: SourceReader) -> bool:
            return (read.instance(first_source(row.view)) == instance
                    and first_written_by(read.view.catalog.revisions(read.partition, row.record_id), instance))

        return self.imported_records(original, reads=("evidence",), kind=kind, active_only=kind == "claim",
                                     made_by=revised_by_another if revised_since else None, **filters)

    def imported_records(self, key_of: Callable[[Any, "SourceReader"], Any], *, active_only: bool = False,
                         reads: tuple[str, ...] | None = None,
                         made_by: Callable[[Any, "SourceReader"], bool] | None = None, retired: bool = False,
                         **filters: Any) -> dict[str, tuple[str, int]]:
        """The current records an earlier run of this format's import made (its attribution names it; or
        ``made_by(row, sources)`` says so) matching ``filters`` (``kind``, ``type``, ``tag``; with
        ``active_only``, not superseded or withdrawn; with ``retired``, also those no longer active, ``kind`` the
        only filter), by ``key_of(row, sources)`` (rows without a key are left out): ``(id, revision)``, the
        newest where several share one, a record whose attribution names the import before any other.  A dry
        run without the store, or an agent with no store yet, has none.  ``reads``: the frontmatter keys
        ``key_of`` reads of ``row.view``; given, each row's view is made of those keys alone (``narrow_view``),
        not of the whole frontmatter, which cost most of a rerun's look-up of a large import's records."""
        if self.engine is None or self.caller is None:
            return {}
        instance = import_instance(self.format)

        def rows(runtime: Any, authority: Any, view: Any) -> dict[str, tuple[str, int]]:
            sources = SourceReader(view, authority.partition)
            found: dict[str, tuple[str, int]] = {}
            others: dict[str, tuple[str, int]] = {}  # made by the import, revised since by someone else
            retired_rows = view.catalog.retired(authority.partition, kind=filters.get("kind")) if retired else []
            for row in [*view.catalog.current(authority.partition, **filters), *retired_rows]:  # newest first
                narrow = row.view if reads is None else narrow_view(row, reads)
                if (not row.record_id or not isinstance(row.revision, int)
                        or (active_only and narrow.lifecycle not in (None, "active"))):
                    continue
                own = (narrow.attribution or {}).get("instance") == instance
                if not own and (made_by is None or not made_by(row, sources)):
                    continue
                key = key_of(row, sources)
                if isinstance(key, str) and key not in found:
                    (found if own else others).setdefault(key, (row.record_id, row.revision))
            return {**others, **found}

        try:
            return self.engine.enter(self.caller, create=False).read(rows)
        except NotFound:
            return {}

    def current_page(self, page_id: str) -> dict[str, Any]:
        """The current revision of a page (as ``Engine.get_record`` answers it, without the link)."""
        return self._read(lambda runtime, authority, view: dict(get_record(view.store, view.catalog,
                                                                           authority.partition, page_id)))

    current_record = current_page  # a claim's, the same way

    def current_page_and_sources(self, page_id: str) -> tuple[dict[str, Any], dict[str, str]]:
        """A page's current revision (as ``current_page`` answers it) and the sha256 of each
        source its evidence cites, in one read: what a rerun asks of every page it finds (``retained``)."""
        def work(runtime: Any, authority: Any, view: Any) -> tuple[dict[str, Any], dict[str, str]]:
            record = get_record(view.store, view.catalog, authority.partition, page_id)
            return dict(record), _source_shas(view, authority.partition, _cited(record))

        return self._read(work)

    def current_pages_and_sources(self, page_ids: Iterable[str]) -> dict[str, tuple[dict[str, Any], dict[str, str]]]:
        """``current_page_and_sources`` of many pages in one read (a rerun's every page found, authorised once
        rather than once a page); empty without a store to read."""
        wanted = list(dict.fromkeys(page_ids))
        if not wanted or self.engine is None or self.caller is None:
            return {}

        def work(runtime: Any, authority: Any, view: Any) -> dict[str, tuple[dict[str, Any], dict[str, str]]]:
            found = {}
            for page_id in wanted:
                record = _catalogued_page(view, authority.partition, page_id) or dict(
                    get_record(view.store, view.catalog, authority.partition, page_id))
                found[page_id] = (record, _source_shas(view, authority.partition, _cited(record)))
            return found

        return self._read(work)

    def page_edits(self, pages: dict[str, dict[str, Any]]) -> dict[str, Edit]:
        """Of ``pages`` (by id, each as ``current_page`` answers it), those revised since this format's import
        last wrote them, with why and the version it wrote (``edits.page_edit``), in one read; none without a
        store to read."""
        if not pages or self.engine is None or self.caller is None:
            return {}
        instance = import_instance(self.format)

        def work(runtime: Any, authority: Any, view: Any) -> dict[str, Edit]:
            found = {}
            for page_id, page in pages.items():
                edit = page_edit(view.catalog, authority.partition, page_id, page, instance)
                if edit is not None:
                    found[page_id] = edit
            return found

        return self._read(work)

    def source_sha256(self, source_id: str) -> str | None:
        """The sha256 of a retained source of the caller's partition, None when there is none."""
        return self.source_sha256s([source_id]).get(source_id)

    def source_sha256s(self, source_ids: Iterable[str]) -> dict[str, str]:
        """The sha256 of each of ``source_ids`` that is a retained source of the caller's partition, in one
        read beside the store's lane (a rerun asks it for every page it finds; the lane is the writes')."""
        wanted = list(dict.fromkeys(source_ids))
        if not wanted:
            return {}

        return self._read(lambda runtime, authority, view: _source_shas(view, authority.partition, wanted))

    def _read(self, work: Callable[[Any, Any, Any], Item]) -> Item:
        """``work`` as an authorised read of the caller's partition.  The reads of an import share one entry:
        authorised once, and each read's authority checked again right after it (``EngineEntry.read``), so a
        caller revoked midway gets no answer, as when each read entered on its own."""
        reading = self._reading
        if reading is None or reading[0] is not self.caller:
            reading = self._reading = (self.caller, self.engine.enter(self.caller))
        return reading[1].read(work)

    def cites(self, record: dict[str, Any], original: Original, shas: dict[str, str] | None = None) -> bool:
        """Whether a record (as ``current_record`` answers) cites this very file (its first part) as evidence:
        importing the same input again, rather than a newer one that says the same.  ``shas``: the cited
        sources' sha256 when the caller read them already (``current_page_and_sources``)."""
        shas = self.source_sha256s(_cited(record)) if shas is None else shas
        return first_part_sha256(original) in shas.values()

    def retained(self, record: dict[str, Any], original: Original, shas: dict[str, str]) -> list[str] | None:
        """The source ids ``original`` is retained under, when ``record`` cites every part of it (as ``retain``
        answers them, in order; ``shas``: the cited sources' sha256, ``current_page_and_sources``): the very
        same file imported again, whose retries would answer these ids, counted as kept.  None when a part is
        not cited (an edited record, a newer file): then ``retain`` it."""
        by_sha: dict[str, str] = {}
        for source in _cited(record):
            if source in shas:
                by_sha.setdefault(shas[source], source)
        data = original.data
        ids = [by_sha.get(hashlib.sha256(data[start:start + ATTACH_MAX_BYTES]).hexdigest())
               for start in range(0, len(data), ATTACH_MAX_BYTES)]
        if not ids or None in ids:
            return None
        return [self.kept(source, "sources") for source in ids if source is not None]

    def done(self, done: int, total: int, item: str, phase: str = "writing") -> None:
        if self.progress is not None:
            self.progress(Progress(self.format, done, total, item, phase, stopping=self._stopping))

    def done_together(self, reports: list[Callable[[], None]]) -> None:
        """The progress reports of items written together, in order; when one stops the import (a cancel),
        the rest, written too, are still reported, as stopping: an import counts what it wrote."""
        for number, report in enumerate(reports):
            try:
                report()
            except BaseException:
                self._stopping = True
                try:
                    for rest in reports[number + 1:]:
                        rest()
                finally:
                    self._stopping = False
                raise

    def kept(self, record_id: str, kind: str = "pages") -> str:
        """A record an earlier import made that already says what this one would: counted, as reused, not
        written."""
        self._count(kind, reused=True)
        return record_id

    def _write(self, kind: str, write: Callable[[], Any], request_id: str, answer: Callable[[Any], str]) -> str:
        """One write (``write`` sends it and returns its receipt), counted; returns ``answer(receipt)``, the id
        it made.  A dry run sends nothing: a write an earlier run published is answered with that run's
        receipt, as a real run's retry would be, and counted as reused; any other gets a placeholder id."""
        if self.dry_run:
            receipt = self._earlier_receipt(request_id)
            if receipt is None:
                return self._placeholder(kind)
            self._count(kind, reused=True)
            return answer(receipt)
        self._writing()
        earlier = self._published_before(request_id)
        result = answer(write())
        self._count(kind, earlier)
        return result

    def _earlier_receipt(self, request_id: str) -> Any:
        """The receipt an earlier run's publication of ``request_id`` got (what a retry of it answers), None
        when no run published it: a dry run's answer to a write, read without writing."""
        if not self._any_earlier_writes():
            return None
        return self.engine.enter(self.caller, create=False).read(
            lambda runtime, authority, view: runtime.publisher.applied_receipt(authority.partition, request_id))

    def _published_before(self, request_id: str) -> bool:
        """Whether an earlier run published ``request_id``: its write is a retry, answered with that run's
        receipt, and what it answers is counted as reused."""
        return self._any_earlier_writes() and request_id in self.published([request_id])

    def _any_earlier_writes(self) -> bool:
        """Whether the caller's partition holds a write of an earlier run of this format's import (its request
        id begins ``<format>-``), asked once a run; none without a store yet (then no write is looked up)."""
        with self._lock:
            if self._earlier_writes is None:
                self._earlier_writes = self._published_any()
        return self._earlier_writes

    def _published_any(self) -> bool:
        if self.engine is None or self.caller is None:
            return False
        try:
            return self.engine.enter(self.caller, create=False).read(
                lambda runtime, authority, view: runtime.publisher.published_any(authority.partition,
                                                                                 f"{self.format}-"))
        except NotFound:
            return False

    def _writing(self) -> None:
        """Before a write: the caller that writes, made now where ``first_write`` makes it (once, whichever
        of ``later``'s threads writes first)."""
        if self.first_write is not None:
            with self._lock:
                if self.first_write is not None:
                    self.caller = self.first_write()
                    self.first_write = None

    def _count(self, kind: str, reused: bool = False) -> None:
        with self._lock:
            self.counts.add(kind)
            if reused:
                self.reused.add(kind)

    def _placeholder(self, kind: str) -> str:
        self._count(kind)
        with self._lock:
            self._placeholders += 1
            return f"(new {kind[:-1]} {self._placeholders})"


class SourceReader:
    """The retained originals of one partition, as a lookup of earlier imports reads them."""

    def __init__(self, view: Any, partition: str) -> None:
        self.view, self.partition = view, partition

    def filename(self, source_id: str | None) -> str | None:
        """The file name a source was retained under (an original retained in parts: its own, without
        ``.part-001-of-003``); None when there is no such source."""
        name = self._descriptor(source_id).get("filename")
        return _PART.sub("", name) if isinstance(name, str) else None

    def media_type(self, source_id: str | None) -> str | None:
        """The media type a source was retained as; None when there is no such source."""
        media_type = self._descriptor(source_id).get("media_type")
        return media_type if isinstance(media_type, str) else None

    def instance(self, source_id: str | None) -> str | None:
        """The instance that retained a source (``import-markdown``, an agent's), from its descriptor's origin."""
        origin = self._descriptor(source_id).get("origin")
        return origin.get("instance") if isinstance(origin, dict) else None

    def _descriptor(self, source_id: str | None) -> DescriptorData | dict[str, Any]:
        row = self.view.catalog.source(self.partition, source_id) if source_id else None
        return {} if row is None else row.descriptor

    def text(self, source_id: str | None) -> str | None:
        """A retained source's text (a cited excerpt); None when there is none, or it is not UTF-8 text."""
        row = self.view.catalog.source(self.partition, source_id) if source_id else None
        if row is None or not row.retained_path:
            return None
        try:
            data, _ = read_stored(self.view.store.partition_root(self.partition), row.retained_path,
                                  max_bytes=ATTACH_MAX_BYTES)
            return data.decode("utf-8")
        except (OSError, UnicodeDecodeError, KnowledgeError):
            return None


def narrow_view(row: Any, keys: tuple[str, ...]) -> RecordView:
    """A catalog row's view made of ``keys`` of its frontmatter and the two an import's look-up filters on
    (``lifecycle``, ``attribution``), each field as the whole view reads it; cached as the row's ``view``
    (where ``cached_property`` keeps it), so ``row.view`` answers it: a key not in ``keys`` reads as absent."""
    raw = json.loads(row.frontmatter_json) if row.frontmatter_json is not None else {}
    narrow = view_of({key: raw[key] for key in (*keys, "lifecycle", "attribution") if key in raw})
    row.__dict__["view"] = narrow
    return narrow


def first_source(view: RecordView) -> str | None:
    """The source a record's first citation names, if it names one."""
    first = view.evidence[0] if view.evidence else None
    return first.source if first is not None and first.at == 0 else None


def _catalogued_page(view: Any, partition: str, page_id: str) -> dict[str, Any] | None:
    """A page's title, frontmatter, body and sha256 as ``get_record`` answers them, its frontmatter taken from
    the catalog rather than parsed again from YAML when the file holds the very bytes the catalog read; None
    otherwise (another file, an edit not catalogued yet, a duplicated id: ``get_record`` then decides)."""
    rows = view.catalog.rows_for_id(partition, page_id)
    row = rows[0] if len(rows) == 1 else None
    if (row is None or row.record_id != page_id or row.file_status == "withheld" or row.frontmatter_json is None
            or row.sha256 is None):
        return None
    try:
        data, _ = read_stored(view.store.partition_root(partition), row.path, max_bytes=RECORD_MAX_BYTES)
        if hashlib.sha256(data).hexdigest() != row.sha256:
            return None
        body = split_document(data.decode("utf-8"))[1]
    except (OSError, UnicodeDecodeError, KnowledgeError):
        return None
    frontmatter = json.loads(row.frontmatter_json)  # parsed once: the title read as the whole view reads it
    return {"title": view_of({"title": frontmatter.get("title")}).title, "frontmatter": frontmatter, "body": body,
            "sha256": row.sha256}


def _source_shas(view: Any, partition: str, source_ids: Iterable[str]) -> dict[str, str]:
    """The sha256 of each of ``source_ids`` that is a retained source of ``partition``, as ``view`` reads them."""
    rows = [(source_id, view.catalog.source(partition, source_id)) for source_id in source_ids]
    return {source_id: row.sha256 for source_id, row in rows if row is not None}


def _cited(record: dict[str, Any]) -> list[str]:
    """The source ids a record's evidence cites, in order, each once."""
    return list(dict.fromkeys(e["source"] for e in record["frontmatter"].get("evidence") or []
                              if isinstance(e, dict) and isinstance(e.get("source"), str)))


def first_part_sha256(original: Original) -> str:
    """The sha256 of the first part an original is retained in (all of it, up to one attachment's size)."""
    return hashlib.sha256(original.data[:ATTACH_MAX_BYTES]).hexdigest()


def says_same(page: dict[str, Any], params: dict[str, Any]) -> bool:
    """Whether a page's current revision says what ``params`` would: type, title, body, aliases, tags and
    fields (not the evidence: a newer input is another file, citing it says nothing new)."""
    view = view_of(page["frontmatter"])
    return (view.type == params["type"] and page["title"] == params["title"]
            and (page.get("body") or "").rstrip("\n") == params["body"].rstrip("\n")
            and list(view.aliases or ()) == (params.get("aliases") or [])
            and list(view.tags or ()) == (params.get("tags") or [])
            and (view.fields or {}) == (params.get("fields") or {}))


def revised_note(writer: Writer, revised: int, what: str, *, claims: bool = False, plural: str | None = None
                 ) -> list[str]:
    """The result's note on the items an import revised (or, on a dry run, would), as every importer words it
    (``what``: the item's noun, ``plural`` where adding ``s`` is wrong)."""
    if not revised:
        return []
    get = f"{for_count(revised, 'it', 'each')} {'would get' if writer.dry_run else 'got'}"
    how = (f"{get} a new claim that replaces its earlier one, which is kept as superseded" if claims
           else f"{get} a new revision of its page")
    return [f"{counted(revised, what, plural)} changed since an earlier import: {how}."]


def report(writer: Writer, shape: type[Shape], **extra: Any) -> Shape:
    """An import's result, declared by ``shape``: the format, whether it was a dry run, what the format
    counts (``extra``) and its counts.  A real run counts the records it stands for (``imported``), made now
    or by an earlier run of the input, and of those the ones an earlier run made (``reused``): the rest this
    run wrote.  A dry run counts what a real run would write (``wouldCreate``: new records and new revisions)
    and what an earlier run made (``reused``), which a real run would find and leave as they are."""
    counted: dict[str, ImportCounts] = (
        {"wouldCreate": writer.counts.less(writer.reused).as_dict(), "reused": writer.reused.as_dict()}
        if writer.dry_run else {"imported": writer.counts.as_dict(), "reused": writer.reused.as_dict()})
    return shape(format=writer.format, dryRun=writer.dry_run, **extra, **counted)  # type: ignore[typeddict-item]
