"""The two engines as the benchmark drives them: tantivy's core and an SQLite FTS5 reference.

The reference is what the reference implementation is known to use (SQLite
FTS5 ranked with ``bm25()``), built the way a careful implementation would:
columns title, aliases and body weighted 3, 2 and 1 in ``bm25()``, the ``porter unicode61 remove_diacritics 2`` tokenizer, and a MATCH
expression made only of the query's words, each double-quoted and joined
with OR, so user text is never FTS syntax.

Both read exactly the same records: the partition's current catalog rows
with the stored bytes of their current revision (what ``engine/index/tantivy_index.py``
indexes), title and aliases from the frontmatter and the Markdown body.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..index.analysis import Analyzer
from ..core.db import Database
from ..store.catalog_reads import CatalogReads
from ..vault.frontmatter import split_document
from ..index.tantivy_index import PARALLEL_FROM, PartitionIndex, build_schema, index_document
from ..search.keyword import SearchRequest, build_query

FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"
# The reference's kind of setup: a title match weighs 3, an alias 2, the body 1, all inside one bm25().
FTS_WEIGHTS = (3.0, 2.0, 1.0, 0.0)  # title, aliases, body, record_id (unindexed)
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Document:
    """One current record as both engines index it."""

    path: str
    record_id: str
    revision: int
    kind: str
    type: str
    lifecycle: str
    title: str
    aliases: str  # one alias a line
    body: str

    def tantivy_fields(self) -> dict[str, str | int]:
        """The fields ``engine/index/tantivy_index.py`` gives tantivy for this record."""
        return index_document(path=self.path, record_id=self.record_id, revision=self.revision, kind=self.kind,
                              type_=self.type, lifecycle=self.lifecycle, title=self.title,
                              aliases=self.aliases.split(" \n") if self.aliases else [], body=self.body)


def fts5_problem() -> str | None:
    """Why this Python's sqlite3 cannot run the FTS5 reference, or None when it can."""
    try:
        with sqlite3.connect(":memory:") as conn:
            conn.execute(f"CREATE VIRTUAL TABLE probe USING fts5(body, tokenize='{FTS_TOKENIZE}')")
            conn.execute("INSERT INTO probe (body) VALUES ('probing')")
            conn.execute("SELECT bm25(probe) FROM probe WHERE probe MATCH '\"probe\"'").fetchall()
    except sqlite3.Error as exc:
        return (f"this Python's sqlite3 (SQLite {sqlite3.sqlite_version}) has no usable FTS5 "
                f"with the porter tokenizer ({exc})")
    return None


def current_documents(state_db: Path, partition: str) -> list[Document]:
    """The partition's current records, read from the store's catalog (read-only)."""
    conn = sqlite3.connect(f"file:{state_db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        rows = CatalogReads(Database(conn, None)).current_with_content(partition)
    finally:
        conn.close()
    documents = []
    for row, content in rows:
        if content is None:
            continue  # not kept in the archive yet: the engine's own index leaves it out too
        aliases = row.view.aliases or ()
        _, body = split_document(content.decode("utf-8"))
        documents.append(Document(row.path, row.record_id, row.revision, row.kind, row.type or "", row.lifecycle,
                                  row.title, " \n".join(aliases), body))
    return documents


def match_expression(text: str) -> str | None:
    """The FTS5 MATCH for user text: its distinct words, each quoted, OR-ed; None when it has none."""
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))
    return " OR ".join(f'"{word}"' for word in words) if words else None


class FtsReference:
    """An FTS5 table of one partition's records in its own database file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path)

    @classmethod
    def build(cls, path: Path, documents: list[Document]) -> "FtsReference":
        """Create the table, insert every document and commit."""
        path.unlink(missing_ok=True)
        reference = cls(path)
        with reference.conn:
            reference.conn.execute(
                "CREATE VIRTUAL TABLE fts USING fts5(title, aliases, body, record_id UNINDEXED, "
                f"tokenize='{FTS_TOKENIZE}')"
            )
            reference.conn.executemany(
                "INSERT INTO fts (title, aliases, body, record_id) VALUES (?, ?, ?, ?)",
                ((d.title, d.aliases, d.body, d.record_id) for d in documents),
            )
        return reference

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM fts").fetchone()[0]

    def search(self, text: str, limit: int = 10) -> list[str]:
        """Record ids of the best ``limit`` matches (their title and body are fetched too)."""
        expression = match_expression(text)
        if expression is None:
            return []
        rows = self.conn.execute(
            "SELECT record_id, title, body, bm25(fts, ?, ?, ?, ?) AS score FROM fts WHERE fts MATCH ? "
            "ORDER BY score LIMIT ?",
            (*FTS_WEIGHTS, expression, limit),
        ).fetchall()
        return [row[0] for row in rows]

    def close(self) -> None:
        self.conn.close()


class TantivyCore:
    """The engine's search core without the API around it: analyzer, query, searcher, stored docs."""

    def __init__(self, index: PartitionIndex, analyzer: Analyzer) -> None:
        self.index = index
        self.analyzer = analyzer

    @classmethod
    def build(cls, directory: Path, documents: list[Document], analyzer: Analyzer) -> "TantivyCore":
        """A fresh index of ``documents`` with the engine's schema, writer and commit (no catalog)."""
        index = PartitionIndex(directory, build_schema(), analyzer)
        index.apply([], (document.tantivy_fields() for document in documents),
                    threads=2 if len(documents) >= PARALLEL_FROM else 1)  # as the engine's rebuild
        return cls(index, analyzer)

    def count(self) -> int:
        return self.index.searcher().num_docs

    def search(self, text: str, limit: int = 10) -> list[str]:
        terms = self.analyzer.query_terms(text)
        if not terms:
            return []
        query = build_query(self.index.schema, terms, SearchRequest(text, limit))
        searcher = self.index.searcher()
        result = searcher.search(query, limit, count=False)
        return [searcher.doc(address)["id"][0] for _, address in result.hits]
