"""The vector index of semantic search: sqlite-vec, one derived database per store.

    stores/<store-id>/index/vectors.v1.sqlite

This Python's ``sqlite3`` may not load extensions, so this file (and only
this file) is opened with apsw, which bundles its own SQLite and loads the
sqlite-vec extension; the rest of the engine's SQLite code is untouched.

    vectors    (model, text_sha) -> vector: the cache. A text is embedded once per model,
               whichever record, revision or rebuild needs it again.
    items      one row per indexed record: partition, path, record id, revision, sha256, kind
    vec_items  vec0 table: item id, partition (partition key), unit vector (cosine distance)
    progress   per partition, the catalog version the index fully matches, and with which passages
    passages   evidence passages of pages: partition, path, the page's sha256 (vec_passages holds their vectors)
    passages_done  pages whose evidence passages are in (none at all is an answer too)
    page_passages  long pages' own passages (``page_passages``: the title with each stretch of the body), by
                   partition, path and the page's sha256; vec_page_passages holds their vectors
    page_passages_done  pages whose own passages are in (a short page is one passage, its own vector: none)

**Evidence passages** (only while ``passages_wanted()``: a store whose recall gate takes hybrid
candidates) are cut from the text sources each current page cites: the cited lines, else the whole
source, in passages of ``PASSAGE_WORDS`` words, at most ``PASSAGES_MAX`` a page. A page is then as near to
a message as the nearest of its own vector and its passages' (``nearest_pages``): a page that sums up a
conversation is found for a detail that only its transcript holds (docs/recall-gate.md).

**Page passages** (only while ``page_passages_wanted()``: the owner searched in hybrid mode, or the gate's
embedding Decision model scores pages) are a long page's own text cut by ``page_passages``. A page's vector
holds only its first 256 tokens; its passages let a search find and judge it by the part that matches
(``nearest_page_passages``, ``page_passage_similarities``). They follow the page like its vector: a changed or
deleted page's passages are dropped by the next catch-up, and a partition counts as caught up only once every
current page has its passages in.

Like the tantivy index, it never guesses what changed: a catch-up compares
the partition's current catalog rows (path, sha256) with ``items``, drops
what is gone or changed and adds what is new, embedding only texts the cache
lacks, in batches, newest records first, and at most ``budget`` of them when
a search catches up (what is left waits for the next catch-up; until then
those records fall back to lexical scores). The whole file can be deleted at
any time; it is rebuilt from the catalog, and a different embedding model
(another fingerprint or dimension) empties it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import numpy as np

from ..core.files import read_file
from ..store.catalog import Catalog
from ..store.catalog_reads import RecordRow
from .embedding import Embedder, EmbeddingStopped, text_digest
from .similarity import page_passages
from ..core.errors import IndexFailed, KnowledgeError, StoreUnavailable
from ..vault.frontmatter import split_document
from ..vault.record_view import Citation
from .tantivy_index import INDEX_DIR

if TYPE_CHECKING:
    import apsw
from ..store.store import Store

log = logging.getLogger(__name__)
T = TypeVar("T")
OnLane = Callable[[Callable[[], T]], T]  # runs one step where the file may be used (the store's lane)
SCHEMA_VERSION = 1
EMBED_CHUNK = 128  # texts embedded (and committed) together during a catch-up
KNN_MAX = 4096     # sqlite-vec's largest k

_SCHEMA = """
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, text_sha TEXT NOT NULL, vector BLOB NOT NULL,
                                        PRIMARY KEY (model, text_sha));
    CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, partition TEXT NOT NULL, path TEXT NOT NULL,
                                      record_id TEXT NOT NULL, revision INTEGER NOT NULL, sha256 TEXT NOT NULL,
                                      kind TEXT, UNIQUE (partition, path));
    CREATE TABLE IF NOT EXISTS progress (partition TEXT PRIMARY KEY, catalog_version INTEGER NOT NULL,
                                         with_passages INTEGER NOT NULL DEFAULT 0,
                                         with_page_passages INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE IF NOT EXISTS passages (id INTEGER PRIMARY KEY, partition TEXT NOT NULL, path TEXT NOT NULL,
                                         sha256 TEXT NOT NULL);
    CREATE INDEX IF NOT EXISTS passages_path ON passages (partition, path);
    CREATE TABLE IF NOT EXISTS passages_done (partition TEXT NOT NULL, path TEXT NOT NULL, sha256 TEXT NOT NULL,
                                              PRIMARY KEY (partition, path));
    CREATE TABLE IF NOT EXISTS page_passages (id INTEGER PRIMARY KEY, partition TEXT NOT NULL, path TEXT NOT NULL,
                                              sha256 TEXT NOT NULL);
    CREATE INDEX IF NOT EXISTS page_passages_path ON page_passages (partition, path);
    CREATE TABLE IF NOT EXISTS page_passages_done (partition TEXT NOT NULL, path TEXT NOT NULL,
                                                   sha256 TEXT NOT NULL, PRIMARY KEY (partition, path));
"""
PASSAGE_WORDS = 120      # words in one evidence passage (well inside the embedding model's 256 tokens)
PASSAGES_MAX = 16        # evidence passages of one page: an evidence source may be megabytes
PASSAGE_SOURCE_MAX_BYTES = 4 << 20  # a larger cited source gives no passages
_PASSAGE_TABLES = ("passages", "page_passages")  # evidence passages, pages' own passages: each with _done, vec_


@dataclass(frozen=True)
class CatchUp:
    """What one catch-up did, and how many current records still wait for a vector."""

    indexed: int   # records in the index for the partition afterwards
    embedded: int  # texts run through the model now
    cached: int    # texts whose vector came from the cache
    removed: int
    pending: int

    def to_dict(self) -> dict[str, int]:
        return {"indexed": self.indexed, "embedded": self.embedded, "cached": self.cached,
                "removed": self.removed, "pending": self.pending}


@dataclass(frozen=True)
class _Plan:
    """The first step of a catch-up: the catalog version it compared with, what to index, what it dropped."""

    catalog_version: int
    wanted: list[RecordRow]          # records without their vector, or pages without their passages
    removed: int
    passages: bool                   # whether evidence passages are indexed in this catch-up
    page_passages: bool              # whether long pages' own passages are indexed in this catch-up


def _here(step: Callable[[], T]) -> T:
    return step()


def _never() -> bool:
    return False


def embedding_text(title: str | None, body: str) -> str:
    """What a record's vector is computed from: its title, then its body."""
    return f"{title or ''}\n\n{body}".strip()


def evidence_passages(evidence: Sequence[Citation] | None,
                      source_lines: Callable[[str], list[str] | None]) -> list[str]:
    """The passages of the text sources a page's ``evidence`` cites (``source_lines``: a source's lines, None
    when it is not a readable text): each citation's lines (all of them without a range), cut into passages of
    ``PASSAGE_WORDS`` words, at most ``PASSAGES_MAX`` in all; a source cited twice for the same lines once."""
    passages: list[str] = []
    seen: set[tuple[str, Any]] = set()
    for citation in evidence or ():
        source, span = citation.source, citation.lines
        if source is None or (source, span) in seen:
            continue
        seen.add((source, span))
        lines = source_lines(source)
        if not lines:
            continue
        cited = lines[span[0] - 1:span[1]] if span is not None else lines
        words = " ".join(cited).split()
        for start in range(0, len(words), PASSAGE_WORDS):
            if len(passages) == PASSAGES_MAX:
                return passages
            passages.append(" ".join(words[start:start + PASSAGE_WORDS]))
    return passages


class VectorIndex:
    """One store's vector file; used from the store's lane only (a catch-up may embed elsewhere)."""

    def __init__(self, store: Store, catalog: Catalog, *, passages_wanted: Callable[[], bool] = _never,
                 page_passages_wanted: Callable[[], bool] = _never) -> None:
        self.store = store
        self.catalog = catalog
        self.passages_wanted = passages_wanted  # index evidence passages (the store's gate takes hybrid candidates)
        # cache the vectors of long pages' own passages (the gate's embedding Decision model scores pages by them)
        self.page_passages_wanted = page_passages_wanted
        self._connection: Any = None

    @property
    def path(self) -> Path:
        return self.store.root / INDEX_DIR / f"vectors.v{SCHEMA_VERSION}.sqlite"

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # --- the connection ---------------------------------------------------------------

    def _db(self) -> "apsw.Connection":
        if self._connection is None:
            try:
                self._connection = _open(self.path)
            except Exception as exc:  # apsw.Error and its kin: a damaged derived file is dropped, then rebuilt
                log.warning("vector index %s is unusable (%s); rebuilding it", self.path, exc)
                self._discard()
                try:
                    self._connection = _open(self.path)
                except Exception as again:
                    raise IndexFailed(f"the vector index could not be opened: {again}") from again
        return self._connection

    def _discard(self) -> None:
        self.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _use_model(self, embedder: Embedder) -> None:
        """Empty the index when the model (or its dimensions) changed; the cache keeps other models' vectors."""
        db = self._db()
        if self._holds(embedder):
            for table in ("vec_passages", "vec_page_passages"):
                if not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchall():
                    with db:  # a file made before evidence (or page) passages
                        db.execute(_vec_table(table, embedder))
            return
        with db:
            for table in ("vec_items", "vec_passages", "vec_page_passages"):
                db.execute(f"DROP TABLE IF EXISTS {table}")
                db.execute(_vec_table(table, embedder))
            for table in ("items", "progress", "passages", "passages_done", "page_passages", "page_passages_done"):
                db.execute(f"DELETE FROM {table}")
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('model', ?), ('dimensions', ?)",
                       (embedder.fingerprint, str(embedder.dimensions)))

    # --- keeping up with the catalog --------------------------------------------------------

    def rebuild(self, partition: str, embedder: Embedder, *, stop: Callable[[], bool] | None = None) -> CatchUp:
        """Drop the partition's vectors and index it again (cached texts are not embedded again).  ``stop`` ends
        the indexing between two runs of the model, as for ``catch_up``: the next catch-up finishes it."""
        try:
            self._use_model(embedder)
            db = self._db()
            with db:
                db.execute("DELETE FROM vec_items WHERE id IN (SELECT id FROM items WHERE partition = ?)",
                           (partition,))
                for table in ("passages", "page_passages"):
                    db.execute(f"DELETE FROM vec_{table} WHERE id IN (SELECT id FROM {table} WHERE partition = ?)",
                               (partition,))
                for table in ("items", "progress", "passages", "passages_done", "page_passages", "page_passages_done"):
                    db.execute(f"DELETE FROM {table} WHERE partition = ?", (partition,))
        except IndexFailed:
            raise
        except Exception as exc:
            raise IndexFailed(f"the vector index could not be rebuilt: {exc}", partition=partition) from exc
        return self.catch_up(partition, embedder, stop=stop)

    def catch_up(self, partition: str, embedder: Embedder, *, budget: int | None = None,
                 lane: OnLane | None = None, stop: Callable[[], bool] | None = None) -> CatchUp:
        """Bring the partition's vectors in line with its current records (see the module docstring).

        With ``lane``, every step that reads or writes the file or the catalog runs through it (the
        store's lane) and the model runs in the calling thread between those steps, so the lane is held
        for SQL only, never for an embedding. What changes in between is handled: a record already
        indexed meanwhile is left as it is, one changed meanwhile is caught up by the next catch-up (a
        catalog that moved on is never recorded as matched), and a different model in the file ends
        this catch-up. ``stop`` is asked before each chunk: True ends the catch-up there.
        """
        try:
            return self._catch_up(partition, embedder, budget, lane or _here, stop or _never)
        except (IndexFailed, StoreUnavailable):  # StoreUnavailable: the lane refusing (a closing store)
            raise
        except Exception as exc:  # apsw errors, a model run that failed
            raise IndexFailed(f"the vector index could not be updated: {exc}", partition=partition) from exc

    def _catch_up(self, partition: str, embedder: Embedder, budget: int | None, lane: OnLane,
                  stop: Callable[[], bool]) -> CatchUp:
        plan = lane(lambda: self._plan(partition, embedder))
        if isinstance(plan, CatchUp):
            return plan
        embedded = cached = 0
        remaining = plan.wanted
        while remaining and not stop():
            chunk, remaining = remaining[:EMBED_CHUNK], remaining[EMBED_CHUNK:]
            read = lane(lambda: self._read_chunk(partition, embedder, chunk, plan))
            if read is None:
                break  # another model took the file over: its own catch-ups fill it
            digests, passage_digests, page_digests, have, missing = read
            if budget is not None and embedded + len(missing) > budget:
                missing = dict(list(missing.items())[:max(0, budget - embedded)])
                remaining = []  # the rest waits for the next catch-up
            new: dict[str, bytes] = {}
            if missing:
                try:
                    vectors = embedder.embed(list(missing.values()), stop=stop)
                except EmbeddingStopped:
                    break  # nothing of this chunk is stored: the next catch-up embeds it
                new = {digest: vector.astype(np.float32).tobytes() for digest, vector in zip(missing, vectors)}
            stored = lane(lambda: self._store_chunk(partition, embedder, chunk, digests, passage_digests,
                                                    page_digests, {**have, **new}, new))
            if stored is None:
                break
            embedded += len(new)
            cached += stored
        return lane(lambda: self._finish(partition, embedder, plan, embedded, cached))

    def _plan(self, partition: str, embedder: Embedder) -> "_Plan | CatchUp":
        """Drop what is gone or changed; what is left to index, newest first (None: up to date)."""
        self._use_model(embedder)
        db = self._db()
        catalog_version = self.catalog.version(partition)[0]
        passages, page_passages_now = self.passages_wanted(), self.page_passages_wanted()
        if self._matched(partition, catalog_version):
            return CatchUp(self.count(partition), 0, 0, 0, 0)
        current = {row.path: row for row in self.catalog.current(partition)}
        known = {path: (item_id, sha) for item_id, path, sha in db.execute(
            "SELECT id, path, sha256 FROM items WHERE partition = ?", (partition,)).fetchall()}
        stale = [item_id for path, (item_id, sha) in known.items()
                 if path not in current or current[path].sha256 != sha]
        unkinded = db.execute("SELECT path FROM items WHERE partition = ? AND kind IS NULL", (partition,)).fetchall()
        with db:
            db.executemany("DELETE FROM vec_items WHERE id = ?", [(item_id,) for item_id in stale])
            db.executemany("DELETE FROM items WHERE id = ?", [(item_id,) for item_id in stale])
            db.executemany("UPDATE items SET kind = ? WHERE partition = ? AND path = ?",
                           [(current[path].kind, partition, path) for (path,) in unkinded if path in current])
        with_passages = {table: self._drop_stale_passages(table, partition, current) for table in _PASSAGE_TABLES}
        fresh = {path for path, (_, sha) in known.items() if path in current and current[path].sha256 == sha}
        wanted = sorted((row for path, row in current.items() if path not in fresh or (row.kind == "page" and (
                            (passages and path not in with_passages["passages"])
                            or (page_passages_now and path not in with_passages["page_passages"])))),
                        key=lambda row: (row.updated_at or "", row.path), reverse=True)
        return _Plan(catalog_version, wanted, len(stale), passages, page_passages_now)

    def _matched(self, partition: str, catalog_version: int) -> bool:
        """Whether the partition's progress says it matches ``catalog_version`` with the passages wanted now."""
        done = self._db().execute("SELECT catalog_version, with_passages, with_page_passages FROM progress "
                                  "WHERE partition = ?", (partition,)).fetchall()
        return bool(done) and done[0][0] == catalog_version and (bool(done[0][1]) or not self.passages_wanted()) \
            and (bool(done[0][2]) or not self.page_passages_wanted())

    def _drop_stale_passages(self, table: str, partition: str, current: dict[str, RecordRow]) -> set[str]:
        """Drop the passages (``table``: evidence or page passages) of pages gone or changed; the pages whose
        passages are still in."""
        db = self._db()
        known = dict(db.execute(f"SELECT path, sha256 FROM {table}_done WHERE partition = ?", (partition,)).fetchall())
        stale = [path for path, sha in known.items() if path not in current or current[path].sha256 != sha]
        with db:
            for path in stale:
                db.execute(f"DELETE FROM vec_{table} WHERE id IN (SELECT id FROM {table} WHERE partition = ? "
                           "AND path = ?)", (partition, path))
                db.execute(f"DELETE FROM {table} WHERE partition = ? AND path = ?", (partition, path))
                db.execute(f"DELETE FROM {table}_done WHERE partition = ? AND path = ?", (partition, path))
        return known.keys() - set(stale)

    def _read_chunk(self, partition: str, embedder: Embedder, chunk: list[RecordRow], plan: "_Plan"
                    ) -> tuple[dict[str, str], dict[str, list[str]], dict[str, list[str]], dict[str, bytes],
                               dict[str, str]] | None:
        """The chunk's text digests by path, its pages' evidence passage digests and own passage digests by path
        (those not in yet, when the plan indexes them), the vectors the cache has, and the texts it lacks by
        digest."""
        if not self._holds(embedder):
            return None
        texts = self._texts(partition, chunk)
        digests = {row.path: text_digest(text) for row, text in zip(chunk, texts) if text is not None}
        wanted = {digests[row.path]: text for row, text in zip(chunk, texts) if text is not None}
        passage_digests: dict[str, list[str]] = {}
        if plan.passages:
            done = self._passages_done("passages", partition, chunk)
            lines = _SourceLines(self, partition)
            for row in chunk:
                if row.kind == "page" and row.path in digests and row.path not in done:
                    cut = evidence_passages(row.view.evidence, lines)
                    passage_digests[row.path] = [text_digest(text) for text in cut]
                    wanted.update(zip(passage_digests[row.path], cut))
        page_digests: dict[str, list[str]] = {}
        if plan.page_passages:
            done = self._passages_done("page_passages", partition, chunk)
            for row, text in zip(chunk, texts):
                if row.kind == "page" and text is not None and row.path not in done:
                    cut = page_passages(text)
                    cut = cut if len(cut) > 1 else []  # a short page is one passage: its own vector
                    page_digests[row.path] = [text_digest(passage) for passage in cut]
                    wanted.update(zip(page_digests[row.path], cut))
        have = self._cached(embedder.fingerprint, set(wanted))
        missing = {digest: text for digest, text in wanted.items() if digest not in have}
        return digests, passage_digests, page_digests, have, missing

    def _passages_done(self, table: str, partition: str, chunk: list[RecordRow]) -> set[str]:
        """The chunk's pages whose passages (``table``: evidence or page passages) are in, for the revision in
        the chunk."""
        rows = self._db().execute(
            f"SELECT path, sha256 FROM {table}_done WHERE partition = ? AND path IN ({', '.join('?' * len(chunk))})",
            (partition, *(row.path for row in chunk))).fetchall()
        shas = {row.path: row.sha256 for row in chunk}
        return {path for path, sha in rows if shas.get(path) == sha}

    def _store_chunk(self, partition: str, embedder: Embedder, chunk: list[RecordRow], digests: dict[str, str],
                     passage_digests: dict[str, list[str]], page_digests: dict[str, list[str]],
                     have: dict[str, bytes], new: dict[str, bytes]) -> int | None:
        """Cache the new vectors and index the chunk's records that have one, and the evidence and own passages
        of its pages that have all of theirs; how many record vectors came from the cache."""
        if not self._holds(embedder):
            return None
        db = self._db()
        indexed = {path for (path,) in db.execute(
            f"SELECT path FROM items WHERE partition = ? AND path IN ({', '.join('?' * len(chunk))})",
            (partition, *(row.path for row in chunk))).fetchall()}
        rows = [(row, digests[row.path]) for row in chunk
                if digests.get(row.path) in have and row.path not in indexed]
        with db:
            db.executemany("INSERT OR REPLACE INTO vectors (model, text_sha, vector) VALUES (?, ?, ?)",
                           [(embedder.fingerprint, digest, vector) for digest, vector in new.items()])
            for row, digest in rows:
                db.execute("INSERT INTO items (partition, path, record_id, revision, sha256, kind) "
                           "VALUES (?, ?, ?, ?, ?, ?)", (partition, row.path, row.record_id, row.revision, row.sha256,
                                                         row.kind))
                db.execute("INSERT INTO vec_items (id, partition, embedding) VALUES (?, ?, ?)",
                           (db.last_insert_rowid(), partition, have[digest]))
            for table, by_path in (("passages", passage_digests), ("page_passages", page_digests)):
                self._store_passages(table, partition, chunk, by_path, have)
        return sum(1 for _, digest in rows if digest not in new)

    def _store_passages(self, table: str, partition: str, chunk: list[RecordRow], by_path: dict[str, list[str]],
                        have: dict[str, bytes]) -> None:
        """Index the passages (``table``) of the chunk's pages in ``by_path`` that have all their vectors and are
        not in yet, and mark those pages done (inside the caller's transaction)."""
        if not by_path:
            return
        db = self._db()
        done = self._passages_done(table, partition, chunk)
        for row in chunk:
            passages = by_path.get(row.path)
            if passages is None or row.path in done or not all(digest in have for digest in passages):
                continue
            for digest in passages:
                db.execute(f"INSERT INTO {table} (partition, path, sha256) VALUES (?, ?, ?)",
                           (partition, row.path, row.sha256))
                db.execute(f"INSERT INTO vec_{table} (id, partition, embedding) VALUES (?, ?, ?)",
                           (db.last_insert_rowid(), partition, have[digest]))
            db.execute(f"INSERT OR REPLACE INTO {table}_done (partition, path, sha256) VALUES (?, ?, ?)",
                       (partition, row.path, row.sha256))

    def _finish(self, partition: str, embedder: Embedder, plan: "_Plan", embedded: int, cached: int) -> CatchUp:
        """Record the catalog version as matched when every current record is indexed (with its passages, when
        they are wanted) and the catalog has not moved on since the plan (then the next catch-up compares
        again)."""
        indexed = self.count(partition)
        pending = max(0, self.catalog.current_count(partition) - indexed)
        pages = sum(count for (kind, _), count in self.catalog.current_counts(partition).items() if kind == "page")
        for table, wanted in (("passages", plan.passages), ("page_passages", plan.page_passages)):
            if wanted:
                with_passages = self._db().execute(f"SELECT COUNT(*) FROM {table}_done WHERE partition = ?",
                                                   (partition,)).fetchall()[0][0]
                pending += max(0, pages - with_passages)
        if pending == 0 and self._holds(embedder) and self.catalog.version(partition)[0] == plan.catalog_version:
            with self._db():
                self._db().execute("INSERT OR REPLACE INTO progress (partition, catalog_version, with_passages, "
                                   "with_page_passages) VALUES (?, ?, ?, ?)",
                                   (partition, plan.catalog_version, int(plan.passages), int(plan.page_passages)))
        return CatchUp(indexed, embedded, cached, plan.removed, pending)

    def holds_file(self) -> bool:
        """Whether the vector index's file exists (it is made by the first catch-up, never by a read)."""
        return self._connection is not None or self.path.exists()

    def follows_catalog(self, partition: str, embedder: Embedder) -> bool:
        """Whether the partition's vectors under ``embedder`` match its catalog now (with evidence passages when
        they are wanted): False while a catch-up has something left, or before the first; a file that does not
        exist yet is not created."""
        if not self.holds_file():
            return False
        try:
            if not self._holds(embedder):
                return False
            return self._matched(partition, self.catalog.version(partition)[0])
        except IndexFailed:
            raise
        except Exception as exc:  # apsw.Error and its kin
            raise IndexFailed(f"the vector index could not be read: {exc}", partition=partition) from exc

    def _holds(self, embedder: Embedder) -> bool:
        """Whether the file still holds ``embedder``'s vectors (a catch-up spans several lane steps)."""
        meta = dict(self._db().execute("SELECT key, value FROM meta").fetchall())
        return meta.get("model") == embedder.fingerprint and meta.get("dimensions") == str(embedder.dimensions)

    def _texts(self, partition: str, rows: Sequence[RecordRow]) -> list[str | None]:
        """Each record's embedding text, from the stored bytes of its current revision."""
        stored = {row.path: (row, content) for row, content in
                  self.catalog.current_with_content(partition, [row.path for row in rows])}
        texts: list[str | None] = []
        for row in rows:
            found, content = stored.get(row.path, (None, None))
            if found is None or content is None or (found.revision, found.sha256) != (row.revision, row.sha256):
                texts.append(None)  # no stored revision yet: it stays out until the catalog re-reads it
                continue
            _, body = split_document(content.decode("utf-8"))
            texts.append(embedding_text(found.title, body))
        return texts

    def cached_vectors(self, model: str, digests: Sequence[str]) -> dict[str, bytes]:
        """Vectors already computed under ``model`` (an embedder's fingerprint) for these text digests; a file
        that does not exist yet is not created."""
        if self._connection is None and not self.path.exists():
            return {}
        try:
            return self._cached(model, set(digests))
        except IndexFailed:
            raise
        except Exception as exc:  # apsw.Error and its kin
            raise IndexFailed(f"the vector index could not be read: {exc}") from exc

    def page_passage_similarities(self, partition: str, vector: np.ndarray, paths: Sequence[str]) -> dict[str, float]:
        """For each long page of ``paths`` whose own passages are in, the cosine similarity of ``vector`` to its
        nearest passage, by path; a short page (its vector is its whole text) is left out."""
        return self._similarities_by_path(
            "SELECT p.path, MIN(vec_distance_cosine(v.embedding, ?)) FROM page_passages p "
            "JOIN vec_page_passages v ON v.id = p.id WHERE p.partition = ? "
            "AND p.path IN (SELECT value FROM json_each(?)) GROUP BY p.path",
            partition, vector, paths, needs="page_passages")

    def _cached(self, model: str, digests: set[str]) -> dict[str, bytes]:
        if not digests:
            return {}
        db = self._db()
        found = {}
        ordered = sorted(digests)
        for start in range(0, len(ordered), 500):
            part = ordered[start:start + 500]
            found.update(db.execute(
                f"SELECT text_sha, vector FROM vectors WHERE model = ? AND text_sha IN ({', '.join('?' * len(part))})",
                (model, *part)).fetchall())
        return found

    # --- queries ----------------------------------------------------------------------------

    def nearest(self, partition: str, vector: np.ndarray, k: int, paths: Sequence[str] | None = None,
                kinds: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` records closest to ``vector`` as (path, cosine similarity), best first.

        ``paths`` restricts the search to those records, ``kinds`` to records of those kinds (and those indexed
        before the index knew kinds).
        """
        k = max(1, min(k, KNN_MAX))
        query = np.asarray(vector, dtype=np.float32).tobytes()
        # The items the kNN may return (sqlite-vec filters before it ranks): of those kinds, else those paths.
        among: tuple[str, Sequence[str]] | None = (
            ("kind IS NULL OR kind IN (SELECT value FROM json_each(?))", kinds) if kinds is not None
            else ("path IN (SELECT value FROM json_each(?))", paths) if paths is not None else None)
        sql = ("SELECT i.path, v.distance FROM vec_items v JOIN items i ON i.id = v.id "
               "WHERE v.embedding MATCH ? AND k = ? AND v.partition = ?")
        args: tuple[Any, ...] = (query, k, partition)
        if among is not None:
            sql += f" AND v.id IN (SELECT id FROM items WHERE partition = ? AND ({among[0]}))"
            args += (partition, json.dumps(list(among[1])))
        try:
            rows = self._db().execute(sql + " ORDER BY v.distance", args).fetchall()
        except Exception as exc:
            raise IndexFailed(f"the vector index could not be searched: {exc}", partition=partition) from exc
        return [(path, 1.0 - float(distance)) for path, distance in rows]

    def nearest_passages(self, partition: str, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The pages whose evidence passages are closest to ``vector`` among the ``k`` nearest passages, as
        (path, cosine similarity of the page's nearest passage), best first; empty while none are indexed."""
        return self._nearest_pages("passages", partition, vector, k)

    def _nearest_pages(self, table: str, partition: str, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        k = max(1, min(k, KNN_MAX))
        query = np.asarray(vector, dtype=np.float32).tobytes()
        try:
            if not self._has_vectors(table):
                return []
            rows = self._db().execute(
                f"SELECT p.path, v.distance FROM vec_{table} v JOIN {table} p ON p.id = v.id "
                "WHERE v.embedding MATCH ? AND k = ? AND v.partition = ? ORDER BY v.distance",
                (query, k, partition)).fetchall()
        except Exception as exc:
            raise IndexFailed(f"the vector index could not be searched: {exc}", partition=partition) from exc
        best: dict[str, float] = {}
        for path, distance in rows:
            best.setdefault(path, 1.0 - float(distance))
        return list(best.items())

    def nearest_page_passages(self, partition: str, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The long pages whose own passages are closest to ``vector`` among the ``k`` nearest passages, as (path,
        cosine similarity of the page's nearest passage), best first; empty while none are indexed."""
        return self._nearest_pages("page_passages", partition, vector, k)

    def similarities(self, partition: str, vector: np.ndarray, paths: Sequence[str]) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of ``paths`` that has a vector."""
        return self._similarities_by_path(
            "SELECT i.path, vec_distance_cosine(v.embedding, ?) FROM items i JOIN vec_items v ON v.id = i.id "
            "WHERE i.partition = ? AND i.path IN (SELECT value FROM json_each(?))",
            partition, vector, paths)

    def _similarities_by_path(self, sql: str, partition: str, vector: np.ndarray, paths: Sequence[str], *,
                              needs: str | None = None) -> dict[str, float]:
        """``sql`` (its parameters: the query vector, the partition, the paths as JSON) read as cosine distances
        by path, turned into similarities; empty when ``needs``, a table of vectors, holds none yet."""
        if not paths:
            return {}
        query = np.asarray(vector, dtype=np.float32).tobytes()
        try:
            if needs is not None and not self._has_vectors(needs):
                return {}
            rows = self._db().execute(sql, (query, partition, json.dumps(list(paths)))).fetchall()
        except Exception as exc:
            raise IndexFailed(f"the vector index could not be read: {exc}", partition=partition) from exc
        return {path: 1.0 - float(distance) for path, distance in rows}

    def page_passage_count(self, partition: str) -> tuple[int, int]:
        """How many long pages of the partition have their own passages indexed, and how many passages."""
        if not self._has_vectors("page_passages"):
            return 0, 0
        pages, passages = self._db().execute("SELECT COUNT(DISTINCT path), COUNT(*) FROM page_passages "
                                             "WHERE partition = ?", (partition,)).fetchall()[0]
        return pages, passages

    def _has_vectors(self, table: str) -> bool:
        """Whether ``vec_<table>`` exists: a file made before it has it from its first catch-up on."""
        return bool(self._db().execute("SELECT 1 FROM sqlite_master WHERE name = ?", (f"vec_{table}",)).fetchall())

    def count(self, partition: str) -> int:
        return self._db().execute("SELECT COUNT(*) FROM items WHERE partition = ?", (partition,)).fetchall()[0][0]


class _SourceLines:
    """The lines of a partition's retained text sources, each read once (on the lane): None for a source that
    is gone, not text, or larger than ``PASSAGE_SOURCE_MAX_BYTES``."""

    def __init__(self, index: VectorIndex, partition: str) -> None:
        self.index = index
        self.partition = partition
        self._read: dict[str, list[str] | None] = {}

    def __call__(self, source_id: str) -> list[str] | None:
        if source_id not in self._read:
            self._read[source_id] = self._lines(source_id)
        return self._read[source_id]

    def _lines(self, source_id: str) -> list[str] | None:
        row = self.index.catalog.source(self.partition, source_id)
        if row is None or row.retained_path is None:
            return None
        try:
            data, _ = read_file(self.index.store.partition_root(self.partition), row.retained_path,
                                max_bytes=PASSAGE_SOURCE_MAX_BYTES)
            return data.decode("utf-8").splitlines()
        except (KnowledgeError, UnicodeDecodeError):
            return None


def _vec_table(name: str, embedder: Embedder) -> str:
    return (f"CREATE VIRTUAL TABLE {name} USING vec0(id INTEGER PRIMARY KEY, partition TEXT partition key, "
            f"embedding float[{int(embedder.dimensions)}] distance_metric=cosine)")


def _open(path: Path) -> "apsw.Connection":
    import apsw
    import sqlite_vec

    path.parent.mkdir(parents=True, exist_ok=True)
    connection = apsw.Connection(str(path))
    try:
        connection.enable_load_extension(True)
        connection.load_extension(sqlite_vec.loadable_path())
        connection.enable_load_extension(False)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")  # derived data: a lost tail is rebuilt, not lost
        with connection:
            connection.execute(_SCHEMA)
            columns = {row[1] for row in connection.execute("PRAGMA table_info(progress)").fetchall()}
            if "with_passages" not in columns:  # a file made before evidence passages
                connection.execute("ALTER TABLE progress ADD COLUMN with_passages INTEGER NOT NULL DEFAULT 0")
            if "with_page_passages" not in columns:  # a file made before page passages
                connection.execute("ALTER TABLE progress ADD COLUMN with_page_passages INTEGER NOT NULL DEFAULT 0")
            if "kind" not in {row[1] for row in connection.execute("PRAGMA table_info(items)").fetchall()}:
                connection.execute("ALTER TABLE items ADD COLUMN kind TEXT")  # a file made before kinds: NULL,
                connection.execute("DELETE FROM progress")  # and filled by the next catch-up's comparison
        connection.execute("SELECT COUNT(*) FROM items").fetchall()
    except BaseException:
        connection.close()
        raise
    return connection
