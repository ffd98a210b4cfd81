"""Record files catalogued in worker processes give what cataloguing them here gives, in the same order; a
worker that dies leaves the rest to this process."""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from engine.store import record_rows
from engine.store.record_rows import Catalogued, Unreadable, catalogue, catalogue_chunk, catalogue_files
from engine.store.walk import FileStat, walk_partition
from engine.vault.frontmatter import RECORD_MAX_BYTES
from engine.vault.ontology import Ontology
from engine.vault.records import Record
from tests.engine.store.test_catalog import envelope, place, render


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, list[tuple[str, FileStat]]]:
    """Valid and invalid notes, one too large to read and one gone since the walk, in path order."""
    root = tmp_path / "partition"
    for number in range(7):
        place(root, f"pages/notes/n{number}.md", render(envelope(f"pg_n{number}", "page", f"Note {number}",
                                                                 type="note", aliases=[f"nn{number}"])))
    place(root, "pages/notes/bad-yaml.md", b"---\ntitle: [unclosed\n---\n")
    place(root, "pages/notes/large.md", render(envelope("pg_large", "page", "Large", type="note"),
                                               "x" * RECORD_MAX_BYTES))
    place(root, "pages/notes/gone.md", render(envelope("pg_gone", "page", "Gone", type="note")))
    walked, _ = walk_partition(root)
    os.unlink(root / "pages/notes/gone.md")
    return root, sorted(walked.items())


def _comparable(entries: list[Catalogued | Unreadable]) -> list[object]:
    """The entries without the second each revision was observed at (the clock may tick between runs)."""
    return [(entry.row, entry.names, entry.revision[:-1] if entry.revision else None)
            if isinstance(entry, Catalogued) else entry for entry in entries]


def test_worker_processes_catalogue_what_this_process_does(files, monkeypatch, caplog) -> None:
    root, walked = files
    ontology = Ontology.shipped()
    here = catalogue_chunk(root, "private", ontology, walked)
    monkeypatch.setattr(record_rows, "POOL_MIN_FILES", 1)
    monkeypatch.setattr(record_rows, "CHUNK_FILES", 3)
    monkeypatch.setattr(record_rows, "_cores", lambda: 2)

    with caplog.at_level(logging.WARNING, logger=record_rows.__name__):
        chunks = list(catalogue_files(root, "private", ontology, walked))

    assert not caplog.records  # the workers did the work: none failed over to this process
    assert [len(chunk) for chunk in chunks] == [3, 3, 3, 1]
    pooled = [entry for chunk in chunks for entry in chunk]
    assert _comparable(pooled) == _comparable(here)
    statuses = {entry.row["path"]: entry.row["file_status"] for entry in pooled if isinstance(entry, Catalogued)}
    assert statuses["pages/notes/bad-yaml.md"] == "invalid" and statuses["pages/notes/n0.md"] == "ok"
    refused = {entry.finding.path: entry.finding.code for entry in pooled if isinstance(entry, Unreadable)}
    assert refused == {"pages/notes/large.md": "too_large", "pages/notes/gone.md": "unreadable"}


class _DyingPool:
    """A process pool whose workers die after ``survives`` tasks, as one killed for its memory does."""

    def __init__(self, workers: int, *, mp_context: object, survives: int) -> None:
        self.survives = survives
        self.shut_down = False

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        if self.survives > 0:
            self.survives -= 1
            future.set_result(fn(*args))
        else:
            future.set_exception(BrokenProcessPool("a process in the pool was terminated abruptly"))
        return future

    def shutdown(self, *, wait: bool, cancel_futures: bool) -> None:
        self.shut_down = True


def test_a_worker_that_dies_leaves_the_rest_to_this_process(files, monkeypatch, caplog) -> None:
    root, walked = files
    ontology = Ontology.shipped()
    pools: list[_DyingPool] = []
    monkeypatch.setattr(record_rows, "POOL_MIN_FILES", 1)
    monkeypatch.setattr(record_rows, "CHUNK_FILES", 2)
    monkeypatch.setattr(record_rows, "_cores", lambda: 2)
    monkeypatch.setattr(record_rows, "ProcessPoolExecutor",
                        lambda workers, mp_context: pools.append(_DyingPool(workers, mp_context=mp_context,
                                                                            survives=3)) or pools[-1])

    with caplog.at_level(logging.WARNING, logger=record_rows.__name__):
        chunks = list(catalogue_files(root, "private", ontology, walked))

    assert [entry for chunk in chunks for entry in chunk] and pools[0].shut_down
    assert [len(chunk) for chunk in chunks] == [2, 2, 2, 2, 2]  # every file once, in order
    assert _comparable([entry for chunk in chunks for entry in chunk]) == _comparable(
        catalogue_chunk(root, "private", ontology, walked))
    assert "a worker process failed" in caplog.text


@pytest.mark.parametrize("frontmatter", [
    envelope("pg_a", "page", "Atlas", type="project", aliases=["The Atlas", "ATLAS"], fields={"status": "active"}),
    envelope("cl_a", "claim", "Atlas ships", claim_kind="fact", subject="pg_a", assertion_origin="user",
             evidence=[{"source": "src_a", "lines": [1, 2], "quote": "ships"}]),
    envelope("pg_b", "page", "Withheld", scope="conversation:0f0e0d0c-0b0a-4908-8706-050403020100"),
    envelope("pg_c", "page", "Bad revision", revision="two"),
])
def test_a_record_read_while_rendering_is_catalogued_as_its_bytes_are(frontmatter: dict) -> None:
    data, read = Record(frontmatter, "Body.\n---\nmore").render_and_read()
    assert read is not None
    info = FileStat(ino=1, size=len(data), mtime_ns=2, ctime_ns=3)
    ontology = Ontology.shipped()
    kept = catalogue("private", "pages/x.md", data, info, ontology, "pub_1", "main", observed_at="t", read=read)
    parsed = catalogue("private", "pages/x.md", data, info, ontology, "pub_1", "main", observed_at="t")
    assert (kept.row, kept.names, kept.revision) == (parsed.row, parsed.names, parsed.revision)
