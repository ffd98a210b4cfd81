"""One record file as the catalog records it: its row, its name keys, the revision it keeps.

Reading, parsing and checking a record file touches no database, so a sync of many new or changed files
does it in worker processes, one per core, while the store's lane writes the rows the workers send back
(``catalogue_files``).  A worker is a fresh interpreter (the ``spawn`` start method: the engine's process
runs threads, which a forked child would inherit half-way); a frozen bundle calls
``multiprocessing.freeze_support()`` at its entry point for that.  A small sync parses in its own process,
where starting workers would cost more than they save, and so does a sync whose workers cannot start or die.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from ..core.errors import KnowledgeError, LimitExceeded
from ..core.files import TreeReader, sha256_bytes
from ..core.findings import Finding, has_errors
from ..core.ids import format_timestamp, utc_now
from ..vault.frontmatter import RECORD_MAX_BYTES
from ..vault.ontology import Ontology
from ..vault.records import Record, check_record, check_scope, parse_record
from .catalog_reads import VIEW_COLUMNS, record_name_keys, view_columns
from .walk import FileStat

log = logging.getLogger(__name__)

# A sync of fewer record files than this parses them in its own process.  Measured (20,000 generated notes,
# two workers, load 11): 3.5-3.7 s of CPU to parse them here, 4.0-4.3 s in the workers and 0.3 s left here,
# so starting the workers and sending rows back costs about half a second, what 3,000 notes take to parse.
POOL_MIN_FILES = 5_000
CHUNK_FILES = 500  # record files a worker reads per task, and the lane writes per statement
_IN_FLIGHT = 4  # tasks queued per worker: enough to keep it busy, few enough to bound the memory held

# A catalogued file's row: where it is, what its record's view says (``VIEW_COLUMNS``), its bytes and stat.
STAT_COLUMNS = {"file_size": "size", "mtime_ns": "mtime_ns", "ctime_ns": "ctime_ns", "ino": "ino"}
CATALOG_COLUMNS = ("partition", "path", *VIEW_COLUMNS, "sha256", *STAT_COLUMNS, "file_status", "findings")


@dataclass
class Catalogued:
    """What cataloguing one record file writes: its catalog row, its name keys, the revision it keeps; and, with
    a revision kept, what its search document adds to the row (``body``, the string ``aliases``)."""

    row: dict[str, Any]
    names: list[str]
    revision: tuple[Any, ...] | None
    body: str | None = None
    aliases: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Unreadable:
    """A record file that could not be read (too large, gone, refused): its finding and the stamp walked."""

    info: FileStat
    finding: Finding


def catalogue(partition: str, relpath: str, data: bytes, info: FileStat, ontology: Ontology,
              publication_id: str | None = None, agent: str | None = None, *,
              observed_at: str | None = None, read: Record | None = None, sha256: str | None = None
              ) -> Catalogued:
    """What the catalog records of one record file's bytes (``Catalog._write_catalogued`` writes it).  ``read``
    and ``sha256``: the record ``parse_record`` reads from ``data`` and its digest, where the caller has them."""
    record, findings = (read, []) if read is not None else parse_record(data, relpath)
    view = record.view if record is not None else None
    row: dict[str, Any] = {
        "partition": partition, "path": relpath, **view_columns(view, ontology, relpath),
        "sha256": sha256 or sha256_bytes(data),
        **{column: getattr(info, field) for column, field in STAT_COLUMNS.items()},
    }
    status = "invalid"
    revision = None
    if record is not None:
        withheld = check_scope(record, partition)
        if withheld is not None:
            findings = [Finding(withheld.code, withheld.message, path=relpath, field="scope",
                                record_id=row["record_id"])]
            status = "withheld"
        else:
            findings = check_record(record, ontology, relpath)
            status = "invalid" if has_errors(findings) else "ok"
            if row["record_id"] is not None and isinstance(row["revision"], int):
                # Every revision's bytes are kept: publications, and edits made outside the engine.
                revision = (partition, row["record_id"], row["revision"], row["sha256"], data, relpath,
                            "publication" if publication_id else "external", publication_id, agent,
                            observed_at or format_timestamp(utc_now()))
    row["file_status"] = status
    row["findings"] = json.dumps([finding.to_dict() for finding in findings]) if findings else "[]"
    keys: list[str] = []
    if record is not None and status != "withheld":
        keys = record_name_keys(record.view)
    if revision is None:
        return Catalogued(row, keys, revision)
    return Catalogued(row, keys, revision, record.body, _aliases(record.view.raw.get("aliases")))


def _aliases(value: Any) -> list[str]:
    """The aliases a search document holds: as the index reads them back from the row's frontmatter JSON."""
    if not isinstance(value, list):
        return []
    return [alias for alias in json.loads(json.dumps(value, ensure_ascii=False, default=str))
            if isinstance(alias, str)]


def catalogue_chunk(root: Path, partition: str, ontology: Ontology,
                    files: list[tuple[str, FileStat]]) -> list[Catalogued | Unreadable]:
    """Read and catalogue ``files`` (record files under ``root``, in path order); what a worker runs."""
    clock = _Clock()
    done: list[Catalogued | Unreadable] = []
    with TreeReader(root) as reader:
        for relpath, info in files:
            try:
                data, real = reader.read(relpath, max_bytes=RECORD_MAX_BYTES)
            except KnowledgeError as exc:
                code = "too_large" if isinstance(exc, LimitExceeded) else "unreadable"
                done.append(Unreadable(info, Finding(code, exc.message, path=relpath)))
                continue
            done.append(catalogue(partition, relpath, data, FileStat.of(real), ontology, observed_at=clock.now()))
    return done


def catalogue_files(root: Path, partition: str, ontology: Ontology,
                    files: list[tuple[str, FileStat]]) -> Iterator[list[Catalogued | Unreadable]]:
    """``catalogue_chunk`` of ``files`` a chunk at a time, in their order: in worker processes when there are
    many files and cores, else here.  Close the iterator (or exhaust it) to stop the workers."""
    chunks = [files[start:start + CHUNK_FILES] for start in range(0, len(files), CHUNK_FILES)]
    workers = _cores()
    if len(files) < POOL_MIN_FILES or workers < 2:
        for chunk in chunks:
            yield catalogue_chunk(root, partition, ontology, chunk)
        return
    done = 0
    executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        queued: deque[Future[list[Catalogued | Unreadable]]] = deque()
        while done < len(chunks):
            try:
                while len(queued) < workers * _IN_FLIGHT and done + len(queued) < len(chunks):
                    queued.append(executor.submit(catalogue_chunk, root, partition, ontology,
                                                  chunks[done + len(queued)]))
                result = queued.popleft().result()
            except (BrokenProcessPool, OSError) as exc:  # no process to be had, or one killed (memory)
                log.warning("cataloguing the rest in this process: a worker process failed: %s", exc)
                break
            done += 1
            yield result
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    for chunk in chunks[done:]:
        yield catalogue_chunk(root, partition, ontology, chunk)


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class _Clock:
    """The time a sync observes each file at, in whole seconds as the revision archive keeps it, formatted
    again only when the second changes (a large scan reads thousands of files a second)."""

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def now(self) -> str:
        second = int(time.time())
        if second != self._second:
            self._second, self._text = second, format_timestamp(datetime.fromtimestamp(second, timezone.utc))
        return self._text
