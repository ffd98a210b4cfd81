"""What the rest of the engine reads of the catalog: frozen rows, and the current-record rule once.

Only the store package touches the catalog's tables (``catalog``,
``revisions``, ``names``, ``mentions``, ``sources``, ``events``, ``partition_state``,
``index_removals``).  Every other package asks ``CatalogReads`` (the read
half of ``Catalog``) and gets frozen rows back: ``RecordRow`` for a file the
catalog knows, ``RevisionRow`` for a kept revision, ``SourceRow`` for a
retained original.

The rule that makes a record *current* is ``_CURRENT_RULE`` below, written
once: the SQL fragment ``CURRENT`` and a row's ``status`` are both drawn
from it, so the rule a query filters by and the status a reader is shown
cannot disagree.
"""

from __future__ import annotations

import json
import threading
import unicodedata
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, Callable, Hashable, Iterator, Literal, NamedTuple, Sequence, TypeVar

from ..core.answers import TypedDict
from ..core.db import Database
from ..core.ids import is_generated_id
from ..core.tags import tag_key
from ..vault.evidence import DescriptorData
from ..vault.ontology import Ontology
from ..vault.record_view import EMPTY, RecordView, view_of
from ..vault.records import PRIVATE_SCOPE, effective_type

T = TypeVar("T")
DERIVED_KEYS_MAX = 8
_IDS_PER_QUERY = 500  # ids or paths in one IN (...) list
_LAST_CHAR = "\U0010ffff"  # after every character: [prefix, prefix + _LAST_CHAR) holds what starts with prefix

# (column, the value a current record has, the status shown when it differs: that word, or the column's value).
# The order is the order a reader is told why a record is not current.
_CURRENT_RULE: tuple[tuple[str, str | int, str | None], ...] = (
    ("file_status", "ok", None),
    ("duplicate", 0, "duplicate"),
    ("xref_ok", 1, "invalid"),
    ("fixture", 0, "fixture"),
    ("lifecycle", "active", None),
)
CURRENT = " AND ".join(f"c.{column} = {value!r}" for column, value, _ in _CURRENT_RULE)
CURRENT_UNQUALIFIED = " AND ".join(f"{column} = {value!r}" for column, value, _ in _CURRENT_RULE)  # for DDL
# Current in every way but the lifecycle: a record superseded (a claim a correction replaced), withdrawn or merged.
RETIRED = " AND ".join([*(f"c.{column} = {value!r}" for column, value, _ in _CURRENT_RULE if column != "lifecycle"),
                        "c.lifecycle != 'active'"])


@dataclass(frozen=True)
class RecordRow:
    """One file the catalog knows, as it was last read."""

    path: str
    record_id: str | None
    revision: int | None
    kind: str | None
    type: str | None
    title: str | None
    lifecycle: str | None
    file_status: str
    fixture: int                     # 0 or 1, as the catalog keeps them
    duplicate: int
    xref_ok: int
    sha256: str | None
    recorded_at: str | None
    updated_at: str | None
    frontmatter_json: str | None
    findings_json: str
    xref_findings_json: str

    @cached_property
    def view(self) -> RecordView:
        """The record's typed view (every field None for a file that has no frontmatter)."""
        return EMPTY if self.frontmatter_json is None else view_of(json.loads(self.frontmatter_json))

    @property
    def status(self) -> str:
        """The derived status a reader sees: ``current``, or why the record is not (the rule's first miss)."""
        for column, wanted, otherwise in _CURRENT_RULE:
            value = getattr(self, column)
            if value != wanted:
                return otherwise or value
        return "current"

    @property
    def is_current(self) -> bool:
        return self.status == "current"

    @property
    def findings(self) -> list[dict[str, Any]]:
        """The file's own findings, then its reference checks'."""
        return json.loads(self.findings_json) + json.loads(self.xref_findings_json)


class ViewColumns(TypedDict):
    """``VIEW_COLUMNS`` with their values (the catalog's row for a record file, less where and how it is)."""

    record_id: str | None
    revision: int | None
    kind: str | None
    type: str | None
    title: str | None
    lifecycle: str | None
    fixture: int
    recorded_at: str | None
    updated_at: str | None
    frontmatter: str | None


# The catalog columns a record's view fills (``view_columns``); the rest say where the file is, its bytes,
# its stat and the checks' verdicts.  Written once: the catalog's writes and resets are drawn from it.
VIEW_COLUMNS = tuple(ViewColumns.__annotations__)


def view_columns(view: RecordView | None, ontology: Ontology, path: str) -> ViewColumns:
    """The ``VIEW_COLUMNS`` of one record file (all empty for a file that is no record).  ``type`` is what
    the record is of its kind: a page's type (declared, else classified by path), a claim's kind, a
    relationship's relation."""
    if view is None:
        return {"record_id": None, "revision": None, "kind": None, "type": None, "title": None, "lifecycle": None,
                "fixture": 0, "recorded_at": None, "updated_at": None, "frontmatter": None}
    return {
        "record_id": view.id, "revision": view.revision, "kind": view.kind,
        "type": effective_type(view, ontology, path) if view.kind == "page" else view.detail,
        "title": view.title, "lifecycle": view.lifecycle, "fixture": int(view.is_fixture),
        "recorded_at": view.recorded_at, "updated_at": view.updated_at,
        "frontmatter": json.dumps(dict(view.raw), ensure_ascii=False, default=str),
    }


class LabelRow(NamedTuple):
    """What the Knowledge Index reads of one record a ``dated`` scan returns: its labels and the links it ranks by.

    ``subject`` is a claim's frontmatter ``subject``, ``source`` and ``target`` a relationship's ``from`` and
    ``to``, each when it is text (None otherwise); ``aliases_json`` is a page's ``aliases`` list as JSON (None
    when it has no list).
    """

    record_id: str
    kind: str | None
    type: str | None
    title: str | None
    recorded_at: str | None
    updated_at: str | None
    is_current: int
    subject: str | None
    source: str | None
    target: str | None
    aliases_json: str | None
    valid_from: str | None           # a claim's validity bounds, when they are text
    valid_to: str | None


@dataclass(frozen=True)
class RevisionRow:
    """One kept revision of a record: its exact bytes and where they came from."""

    seq: int
    record_id: str
    revision: int
    sha256: str
    content: bytes
    path: str
    origin: str
    publication_id: str | None
    agent: str | None
    observed_at: str
    commit_id: str | None = None

    @property
    def text(self) -> str:
        return self.content.decode("utf-8")


def version_label(kept: list[RevisionRow], row: RevisionRow) -> str:
    """How History names a kept version: its number, and for a version that kept the number of one before it
    (an edit made outside the engine leaves the file's number as it was) the number and how many such versions
    came before it: 1, 1.1, 1.2, 2. ``kept`` is every kept version of the record, oldest first."""
    same = [other.sha256 for other in kept if other.revision == row.revision]
    before = same.index(row.sha256) if row.sha256 in same else 0
    return f"{row.revision}.{before}" if before else f"{row.revision}"


@dataclass(frozen=True)
class SourceRow:
    """A retained original the partition's descriptors name."""

    source_id: str
    path: str
    retained_path: str | None
    sha256: str | None
    size: int | None
    media_type: str | None
    status: str
    descriptor_json: str | None

    @cached_property
    def descriptor(self) -> DescriptorData:
        return json.loads(self.descriptor_json or "{}")


@dataclass(frozen=True)
class PartitionSummary:
    """One partition as the owner's partitions view shows it (no record of it, only figures)."""

    partition: str
    created_at: str | None           # None for the private partition (made with the store)
    records: int                     # current records, as the catalog last synced them
    links: int                       # of them, relationships (the rest are pages and claims)
    publications: int                # acknowledged publications
    last_publication_at: str | None


def _select(row_type: type, alias: str, renamed: dict[str, str]) -> str:
    columns = [f.name for f in fields(row_type) if f.name != "commit_id"]
    return ", ".join(f"{alias}.{renamed.get(name, name)} AS {name}" for name in columns)


RECORD_COLUMNS = _select(RecordRow, "c", {"frontmatter_json": "frontmatter", "findings_json": "findings",
                                   "xref_findings_json": "xref_findings"})
_REVISION = _select(RevisionRow, "r", {})
# Catalog rows with the bytes of their catalogued revision (NULL until the archive keeps it).
WITH_CONTENT = (f"SELECT {RECORD_COLUMNS}, r.content AS content FROM catalog c LEFT JOIN revisions r "
                "ON r.partition = c.partition AND r.record_id = c.record_id AND r.revision = c.revision "
                "AND r.sha256 = c.sha256")
_SOURCE = _select(SourceRow, "s", {"descriptor_json": "descriptor"})
# Every listed record has an id and is not withheld: withheld records are never served (reads.py).
_LISTED = "c.record_id IS NOT NULL AND c.file_status != 'withheld'"
_DATED = "c.record_id IS NOT NULL AND c.duplicate = 0 AND c.file_status IN ('ok', 'invalid')"


def _frontmatter_at(kind: str, key: str, json_type: str) -> str:
    """A ``kind`` record's frontmatter value at ``key`` when it has that JSON type (an array as JSON text)."""
    return (f"CASE WHEN c.kind = '{kind}' AND json_type(c.frontmatter, '$.{key}') = '{json_type}' "
            f"THEN json_extract(c.frontmatter, '$.{key}') END")


# LabelRow's columns, in its order.  The frontmatter is JSON SQLite reads: records hold no NaN or infinity.
_LABEL_COLUMNS = ", ".join([
    "c.record_id, c.kind, c.type, c.title, c.recorded_at, c.updated_at", f"({CURRENT})",
    _frontmatter_at("claim", "subject", "text"), _frontmatter_at("relationship", "from", "text"),
    _frontmatter_at("relationship", "to", "text"), _frontmatter_at("page", "aliases", "array"),
    _frontmatter_at("claim", "valid_from", "text"), _frontmatter_at("claim", "valid_to", "text")])
# A record tagged :tag (a ``tag_key``) or with a tag nested in it (``tags.tag_within``).
TAGGED = ("EXISTS (SELECT 1 FROM json_each(c.frontmatter, '$.tags') AS tag WHERE tag.type = 'text' AND "
          "tag_within(tag.value, :tag))")
_NEWEST = "ORDER BY c.updated_at DESC, c.record_id"
# The same order for a few named rows: "+" keeps SQLite from walking the whole partition in the order of
# catalog_updated to skip sorting them, so the rows are found by their path or id and sorted after.
_NEWEST_OF_FEW = "ORDER BY +c.updated_at DESC, +c.record_id"


_RECORD_FIELDS = tuple(f.name for f in fields(RecordRow))
_new = object.__new__


def record_row(values: Sequence[Any]) -> RecordRow:
    """A row of ``RECORD_COLUMNS`` (a plain tuple, in that order) as a RecordRow.

    Filled in without ``__init__``: the columns are the fields, and a scan of
    100,000 records would otherwise spend most of its time in the frozen
    dataclass's field-by-field ``__init__``.
    """
    row = _new(RecordRow)
    row.__dict__.update(zip(_RECORD_FIELDS, values))
    return row


def with_content(values: Sequence[Any]) -> tuple[RecordRow, bytes | None]:
    """A ``WITH_CONTENT`` row (a plain tuple) as (record row, content bytes or None)."""
    content = values[-1]
    return record_row(values[:-1]), None if content is None else bytes(content)


def _revision_row(row: Any) -> RevisionRow:
    return RevisionRow(**{**dict(row), "content": bytes(row["content"])})


def placeholders(values: Sequence[Any]) -> str:
    """``?, ?, ?`` for an ``IN (...)`` list of ``values``."""
    return ", ".join("?" * len(values))


def in_chunks(values: Sequence[T]) -> Iterator[Sequence[T]]:
    """``values`` a query's ``IN (...)`` list at a time (``_IDS_PER_QUERY`` each)."""
    for start in range(0, len(values), _IDS_PER_QUERY):
        yield values[start:start + _IDS_PER_QUERY]


class KeptViews:
    """The views of whole partitions ``CatalogReads.maintained`` keeps between reads, for a store's lane
    catalog and every snapshot read beside the lane (``StoreRuntime.read``): a view one read built, the next,
    on whichever thread, brings up to date, each view under a lock of its own."""

    def __init__(self) -> None:
        self.views: dict[tuple[str, str], tuple[int, Any]] = {}  # (partition, name): (catalog version, view)
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def lock(self, key: tuple[str, str]) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(key, threading.Lock())


class CatalogReads:
    """The catalog's typed reads over one store's state database (any thread that owns ``db``)."""

    def __init__(self, db: Database, kept: KeptViews | None = None) -> None:
        self.db = db
        self._derived: dict[tuple[str, str], tuple[int, dict[Any, Any]]] = {}
        self.kept = kept if kept is not None else KeptViews()  # ``maintained``'s views
        # Whether ``mentions`` holds every frontmatter's ids (None: not asked yet).  An old store's are filled
        # once, at its open (``Catalog.fill_mentions``), and never unfilled after: asked once per catalog.
        self._mentions_filled: bool | None = None

    def derived(self, partition: str, name: str, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``'s value for (``name``, ``key``), kept until the partition's catalog changes.

        For views drawn from the whole partition (the Knowledge Index): asked again with the same key
        and an unchanged catalog, they are not recomputed.  A few keys are kept per name.
        """
        version = self.version(partition)[0]
        kept = self._derived.get((partition, name))
        if kept is None or kept[0] != version:
            kept = (version, {})
            self._derived[(partition, name)] = kept
        values = kept[1]
        if key not in values:
            if len(values) >= DERIVED_KEYS_MAX:
                del values[next(iter(values))]
            values[key] = compute()
        return values[key]

    def maintained(self, partition: str, name: str, build: Callable[[], T],
                   update: Callable[[T, list[str]], T]) -> T:
        """A view of the whole partition kept current: ``build()`` once, then ``update(view, ids)``.

        ``ids`` are the records whose catalog rows changed (or went) since the view was last brought up to
        date; ``update`` returns the view to keep (the same one, changed, or a new one).  A view whose update
        fails is dropped, so the next call builds it afresh.  The views are ``kept``, which the lane's catalog
        shares with the snapshots read beside the lane: a read of an older snapshot than the view's gets the
        view as it is.
        """
        key = (partition, name)
        with self.kept.lock(key):
            version = self.version(partition)[0]  # read first: a change made after it is stamped with it or later
            kept = self.kept.views.pop(key, None)
            if kept is None:
                kept = (version, build())
            elif kept[0] < version:
                kept = (version, update(kept[1], self.changed_since(partition, kept[0])))
            # else: as of this catalog, or of a later one (a snapshot read while another read brought it on)
            self.kept.views[key] = kept
            return kept[1]

    def changed_since(self, partition: str, version: int) -> list[str]:
        """Ids of the records whose catalog rows changed or went since catalog version ``version`` was read."""
        return [row[0] for row in self.db.tuples(
            "SELECT record_id FROM catalog_changes WHERE partition = ? AND catalog_version >= ? "
            "ORDER BY catalog_version, record_id", (partition, version))]  # in the order of catalog_changes_version

    # --- current records ----------------------------------------------------------

    def current(self, partition: str, *, kind: str | None = None, type: str | None = None,
                paths: Sequence[str] | None = None, record_ids: Sequence[str] | None = None,
                tag: str | None = None, with_recall: bool = False, limit: int | None = None) -> list[RecordRow]:
        """Current records, newest first; each filter given narrows the set (an empty sequence matches none)."""
        if (paths is not None and not paths) or (record_ids is not None and not record_ids):
            return []
        where, values = [f"c.partition = ? AND {CURRENT}"], [partition]
        for column, value in (("kind", kind), ("type", type)):
            if value is not None:
                where.append(f"c.{column} = ?")
                values.append(value)
        for column, many in (("path", paths), ("record_id", record_ids)):
            if many is not None:
                where.append(f"c.{column} IN ({placeholders(many)})")
                values.extend(many)
        if tag is not None:
            where.append("EXISTS (SELECT 1 FROM json_each(c.frontmatter, '$.tags') AS tag WHERE tag.value = ?)")
            values.append(tag)
        if with_recall:
            where.append("json_extract(c.frontmatter, '$.recall') IS NOT NULL")
        bound = ""
        if limit is not None:
            bound = " LIMIT ?"
            values.append(limit)
        order = _NEWEST if paths is None and record_ids is None else _NEWEST_OF_FEW
        return [record_row(row) for row in self.db.tuples(
            f"SELECT {RECORD_COLUMNS} FROM catalog c WHERE {' AND '.join(where)} {order}{bound}", values)]

    def retired(self, partition: str, *, kind: str | None = None) -> list[RecordRow]:
        """Records that would be current but for their lifecycle (superseded, withdrawn, merged), newest first:
        what a re-import asks of the claims it made that a correction replaced since."""
        where, values = [f"c.partition = ? AND {RETIRED}"], [partition]
        if kind is not None:
            where.append("c.kind = ?")
            values.append(kind)
        return [record_row(row) for row in self.db.tuples(
            f"SELECT {RECORD_COLUMNS} FROM catalog c WHERE {' AND '.join(where)} {_NEWEST}", values)]

    def current_with_content(self, partition: str, paths: Sequence[str] | None = None
                             ) -> list[tuple[RecordRow, bytes | None]]:
        """Current records (of ``paths``, else all) by path, each with the bytes of its catalogued revision.

        The bytes are None while the archive has not kept that revision yet (it is re-read first).
        """
        if paths is not None and not paths:
            return []
        only = f"AND c.path IN ({placeholders(paths)})" if paths is not None else ""
        return [with_content(row) for row in self.db.tuples(
            f"{WITH_CONTENT} WHERE c.partition = ? AND {CURRENT} {only} ORDER BY c.path", (partition, *(paths or ())))]

    def current_count(self, partition: str) -> int:
        return self.db.one(f"SELECT COUNT(*) AS n FROM catalog c WHERE c.partition = ? AND {CURRENT}",
                           (partition,))["n"]

    def current_counts(self, partition: str) -> dict[tuple[str, str], int]:
        """Current records per (kind, type), in that order: a page's type, a claim's kind, a relation."""
        return {(row["kind"], row["type"]): row["n"] for row in self.db.all(
            f"SELECT c.kind, c.type, COUNT(*) AS n FROM catalog c WHERE c.partition = ? AND {CURRENT} "
            "GROUP BY c.kind, c.type ORDER BY c.kind, c.type", (partition,))}

    def lookup(self, partition: str, name: str, *, kind: str | None = None) -> list[str]:
        """Ids of current records named ``name``: by exact id, else by title or alias (``lookup_keys``).

        More than one id means the name is ambiguous; callers resolve that to none.
        """
        kind_filter = "AND c.kind = :kind" if kind else ""
        by_id = self.db.all(
            f"SELECT DISTINCT record_id FROM catalog c WHERE partition = :p AND record_id = :name {kind_filter} "
            f"AND {CURRENT}", {"p": partition, "name": name, "kind": kind},
        )
        if by_id:
            return [row["record_id"] for row in by_id]
        keys = lookup_keys(name)
        wanted = ", ".join(f":key{number}" for number in range(len(keys)))
        rows = self.db.all(
            "SELECT DISTINCT c.record_id FROM names n JOIN catalog c ON c.partition = n.partition "
            f"AND c.path = n.path WHERE n.partition = :p AND n.key IN ({wanted}) {kind_filter} AND {CURRENT} "
            "ORDER BY c.record_id",
            {"p": partition, "kind": kind, **{f"key{number}": key for number, key in enumerate(keys)}},
        )
        return [row["record_id"] for row in rows]

    def named_from(self, partition: str, name_prefix: str, *, id_prefix: str | None = None,
                   kind: str | None = None, type: str | None = None, limit: int) -> list[RecordRow]:
        """Up to ``limit`` current records with a title or alias whose ``name_key`` starts with ``name_prefix``
        (or, given ``id_prefix``, whose id starts with it), by title; found through the names index, so the
        cost follows the matches rather than the partition (completions as a name is typed)."""
        filters, values = "", {"p": partition, "kind": kind, "type": type, "limit": limit,
                               "lo": name_prefix, "hi": name_prefix + _LAST_CHAR,
                               "id_lo": id_prefix, "id_hi": (id_prefix or "") + _LAST_CHAR}
        if kind is not None:
            filters += " AND c.kind = :kind"
        if type is not None:
            filters += " AND c.type = :type"
        by_id = ("UNION SELECT c.partition, c.path FROM catalog c WHERE c.partition = :p "
                 "AND c.record_id >= :id_lo AND c.record_id < :id_hi") if id_prefix is not None else ""
        return [record_row(row) for row in self.db.tuples(
            f"SELECT {RECORD_COLUMNS} FROM catalog c JOIN (SELECT DISTINCT n.partition, n.path FROM names n "
            f"WHERE n.partition = :p AND n.key >= :lo AND n.key < :hi {by_id}) AS m "
            f"ON m.partition = c.partition AND m.path = c.path WHERE {CURRENT}{filters} "
            "ORDER BY c.title COLLATE NOCASE, c.record_id LIMIT :limit", values)]

    # --- any record ---------------------------------------------------------------

    def rows_for_id(self, partition: str, record_id: str) -> list[RecordRow]:
        """Every file that carries ``record_id`` and is not withheld (more than one: a duplicate id)."""
        return [record_row(row) for row in self.db.tuples(
            f"SELECT {RECORD_COLUMNS} FROM catalog c WHERE c.partition = ? AND c.record_id = ? "
            "AND c.file_status != 'withheld'", (partition, record_id))]

    def rows_for_ids(self, partition: str, record_ids: Sequence[str]) -> dict[str, list[RecordRow]]:
        """``rows_for_id`` of each of ``record_ids``, in one query per 500 ids (an id no file carries: [])."""
        found: dict[str, list[RecordRow]] = {record_id: [] for record_id in record_ids}
        unique = sorted(found)
        for chunk in in_chunks(unique):
            for row in self.db.tuples(
                    f"SELECT {RECORD_COLUMNS} FROM catalog c WHERE c.partition = ? AND c.record_id IN "
                    f"({placeholders(chunk)}) AND c.file_status != 'withheld'", (partition, *chunk)):
                made = record_row(row)
                found[str(made.record_id)].append(made)
        return found

    def row_at(self, partition: str, path: str) -> RecordRow | None:
        rows = self.db.tuples(f"SELECT {RECORD_COLUMNS} FROM catalog c WHERE c.partition = ? AND c.path = ?",
                              (partition, path))
        return record_row(rows[0]) if rows else None

    def listing(self, partition: str, *, current_only: bool, kinds: Sequence[str] | None, type: str | None,
                order: Literal["updated", "title"], offset: int, limit: int, tag: str | None = None
                ) -> tuple[int, list[RecordRow]]:
        """(how many records the filters match, one page of them), newest first or by title; ``kinds``: only
        records of those kinds (None: every kind); ``tag``: only records tagged so or with a tag nested in it
        (``project`` lists ``#project`` and ``#project/alpha``, as Obsidian's tag search does), whatever its
        letters' case (``tags.tag_key``: ``Été`` lists ``#été``)."""
        where = ["c.partition = :partition", _LISTED]
        if current_only:
            where.append(CURRENT)
        if kinds is not None:
            where.append(f"c.kind IN ({', '.join(f':kind{n}' for n in range(len(kinds)))})")
        if type is not None:
            where.append("c.type = :type")
        if tag is not None:
            where.append(TAGGED)
        clause = " AND ".join(where)
        ordering = _NEWEST if order == "updated" else "ORDER BY c.title COLLATE NOCASE, c.record_id"
        values = {"partition": partition, "type": type, "tag": None if tag is None else tag_key(tag),
                  "limit": limit, "offset": offset,
                  **{f"kind{n}": kind for n, kind in enumerate(kinds or ())}}
        total = self.db.one(f"SELECT COUNT(*) AS n FROM catalog c WHERE {clause}", values)["n"]
        rows = self.db.tuples(f"SELECT {RECORD_COLUMNS} FROM catalog c WHERE {clause} {ordering} "
                           "LIMIT :limit OFFSET :offset", values)
        return total, [record_row(row) for row in rows]

    def titled_after(self, partition: str, after: tuple[str | None, str] | None, limit: int) -> list[RecordRow]:
        """Up to ``limit`` current records by title (case-insensitively) then id, from after ``after`` (the
        title and id of the last one served), so that records saved or withdrawn before a page never shift it."""
        where = ["c.partition = :partition", _LISTED, CURRENT]
        title, record_id = after if after is not None else (None, "")
        if after is not None:  # a record without a title sorts first, as NULL does
            where.append("(c.title IS NOT NULL OR c.record_id > :id)" if title is None else
                         "(c.title > :title COLLATE NOCASE OR (c.title = :title COLLATE NOCASE AND c.record_id > :id))")
        return [record_row(row) for row in self.db.tuples(
            f"SELECT {RECORD_COLUMNS} FROM catalog c WHERE {' AND '.join(where)} "
            "ORDER BY c.title COLLATE NOCASE, c.record_id LIMIT :limit",
            {"partition": partition, "title": title, "id": record_id, "limit": limit})]

    def mentioning(self, partition: str, record_id: str, limit: int) -> list[RecordRow]:
        """Up to ``limit`` other listed records whose frontmatter holds the text ``record_id``, newest first.

        A generated id is looked up in ``mentions``, which holds every generated id of every frontmatter; any
        other id (an owner may choose one, and it may be a common word) is searched for in every frontmatter.
        Rows alike in both keys (one id in two files) come by path, so both ways give one order.
        """
        if self._mentions_filled is None:
            self._mentions_filled = self.db.one("SELECT 1 FROM meta WHERE key = 'mentions_unfilled'") is None
        if not is_generated_id(record_id) or not self._mentions_filled:
            return [record_row(row) for row in self.db.tuples(
                f"SELECT {RECORD_COLUMNS} FROM catalog c WHERE c.partition = ? AND {_LISTED} AND c.record_id != ? "
                f"AND instr(c.frontmatter, ?) > 0 {_NEWEST}, c.path LIMIT ?", (partition, record_id, record_id, limit))]
        return [record_row(row) for row in self.db.tuples(
            f"SELECT {RECORD_COLUMNS} FROM mentions m JOIN catalog c ON c.partition = m.partition AND c.path = m.path "
            f"WHERE m.partition = ? AND m.target = ? AND {_LISTED} AND c.record_id != ? {_NEWEST_OF_FEW}, +c.path "
            "LIMIT ?", (partition, record_id, record_id, limit))]

    def pages_citing(self, partition: str, source_ids: Sequence[str]) -> list[tuple[str, str]]:
        """(source id, path) of the current pages whose evidence cites one of ``source_ids``, as the reference
        checks recorded them (``refs``: none for a partition before its first full check)."""
        found: list[tuple[str, str]] = []
        unique = sorted(set(source_ids))
        for chunk in in_chunks(unique):
            found.extend(self.db.tuples(
                f"SELECT DISTINCT r.target, c.path FROM refs r JOIN catalog c ON c.partition = r.partition "
                f"AND c.path = r.path WHERE r.partition = ? AND r.target IN ({placeholders(chunk)}) "
                f"AND c.kind = 'page' AND {CURRENT} ORDER BY r.target, c.path", (partition, *chunk)))
        return found

    def dated(self, partition: str) -> list[RecordRow]:
        """Every record with an id that is neither withheld, unreadable nor a duplicate, by id."""
        return [record_row(row) for row in self.db.tuples(
            f"SELECT {RECORD_COLUMNS} FROM catalog c WHERE c.partition = ? AND {_DATED} ORDER BY c.record_id",
            (partition,))]

    def label_rows(self, partition: str, record_ids: Sequence[str] | None = None) -> list[LabelRow]:
        """The ``dated`` records (of ``record_ids``, else every one, by id) as the Knowledge Index reads them."""
        if record_ids is None:
            return [LabelRow._make(row) for row in self.db.iterate_tuples(
                f"SELECT {_LABEL_COLUMNS} FROM catalog c WHERE c.partition = ? AND {_DATED} ORDER BY c.record_id",
                (partition,))]
        rows: list[LabelRow] = []
        for chunk in in_chunks(record_ids):
            rows += [LabelRow._make(row) for row in self.db.iterate_tuples(
                f"SELECT {_LABEL_COLUMNS} FROM catalog c WHERE c.partition = ? AND {_DATED} "
                f"AND c.record_id IN ({placeholders(chunk)})", (partition, *chunk))]
        return rows

    def file_counts(self, partition: str) -> dict[str, int]:
        """Files per status (ok, invalid, withheld, unreadable)."""
        return {row["status"]: row["n"] for row in self.db.all(
            "SELECT file_status AS status, COUNT(*) AS n FROM catalog WHERE partition = ? GROUP BY file_status",
            (partition,))}

    def version(self, partition: str) -> tuple[int, int]:
        """(catalog version, version the search index last caught up with)."""
        row = self.db.one("SELECT catalog_version, index_version FROM partition_state WHERE partition = ?",
                          (partition,))
        return (row["catalog_version"], row["index_version"]) if row is not None else (0, -1)

    def partition_summaries(self) -> list["PartitionSummary"]:
        """Every partition of the store, private first: when it was made, its current records (and how many of
        them are relationships) and its acknowledged publications.  Counts and times only: what an owner may
        know of a conversation."""
        made = dict(self.db.tuples("SELECT partition, created_at FROM partitions"))
        counts = {partition: (count, links) for partition, count, links in self.db.tuples(
            f"SELECT c.partition, COUNT(*), SUM(c.kind = 'relationship') FROM catalog c WHERE {CURRENT} "
            "GROUP BY c.partition")}
        published = {partition: (count, last) for partition, count, last in self.db.tuples(
            "SELECT partition, COUNT(*), MAX(finished_at) FROM publications WHERE state = 'applied' "
            "GROUP BY partition")}
        names = [PRIVATE_SCOPE, *sorted((set(made) | set(counts) | set(published)) - {PRIVATE_SCOPE})]
        return [PartitionSummary(name, made.get(name), *counts.get(name, (0, 0)),
                                 *published.get(name, (0, None)))
                for name in names]

    def path_in_use(self, partition: str, path: str) -> bool:
        """Whether the catalog knows a file at ``path`` (a record, or a source descriptor)."""
        return bool(self.db.tuples("SELECT 1 FROM catalog WHERE partition = ? AND path = ? UNION ALL "
                                   "SELECT 1 FROM sources WHERE partition = ? AND path = ? LIMIT 1",
                                   (partition, path, partition, path)))

    # --- the revision archive and the originals -----------------------------------

    def revision(self, partition: str, record_id: str, revision: int,
                 sha256: str | None = None) -> RevisionRow | None:
        """The kept revision ``revision`` of a record (with exactly ``sha256``, when given), newest first; a
        version a sync merge did not let stand (origin ``sync``) only when no other holds that number."""
        row = self.db.one(
            f"SELECT {_REVISION} FROM revisions r WHERE r.partition = ? AND r.record_id = ? AND r.revision = ? "
            "AND (? IS NULL OR r.sha256 = ?) ORDER BY r.origin = 'sync', r.seq DESC LIMIT 1",
            (partition, record_id, revision, sha256, sha256))
        return None if row is None else _revision_row(row)

    def first_kept_sha256(self, partition: str, record_id: str, revision: int) -> str | None:
        """The sha256 of the first version kept with this revision number that stood in this vault (not one a
        sync merge archived without letting it stand): the version the number meant when it was written, before
        any edit made outside the engine that kept the number."""
        first = self.first_kept(partition, record_id, revision)
        return None if first is None else first[0]

    def first_kept(self, partition: str, record_id: str, revision: int) -> tuple[str, str] | None:
        """The sha256 and origin of the first version kept with this revision number that stood in this vault
        (``first_kept_sha256``): origin ``publication`` when the engine wrote it, ``external`` when a number was
        first seen in a file edited outside the engine (a revision number changed by hand)."""
        row = self.db.one("SELECT sha256, origin FROM revisions WHERE partition = ? AND record_id = ? "
                          "AND revision = ? AND origin != 'sync' ORDER BY seq LIMIT 1",
                          (partition, record_id, revision))
        return None if row is None else (row["sha256"], row["origin"])

    def revisions(self, partition: str, record_id: str, *, newest_first: bool = False) -> list[RevisionRow]:
        """Every kept revision of a record, each with the git commit that carries it (once there is one)."""
        order = "DESC" if newest_first else ""
        return [_revision_row(row) for row in self.db.all(
            f"SELECT {_REVISION}, outbox.commit_id AS commit_id FROM revisions r "
            "LEFT JOIN publications ON publications.id = r.publication_id "
            "LEFT JOIN outbox ON outbox.publication_seq = publications.seq "
            f"WHERE r.partition = ? AND r.record_id = ? ORDER BY r.revision {order}, r.seq {order}",
            (partition, record_id))]

    def events(self, partition: str, record_id: str) -> list[dict[str, Any]]:
        """Edits, renames and deletions seen outside the engine, oldest first."""
        return [{"kind": row["kind"], "path": row["path"], "detail": row["detail"], "at": row["at"]}
                for row in self.db.all("SELECT kind, path, detail, at FROM events WHERE partition = ? "
                                       "AND record_id = ? ORDER BY seq", (partition, record_id))]

    def source(self, partition: str, source_id: str) -> SourceRow | None:
        row = self.db.one(f"SELECT {_SOURCE} FROM sources s WHERE s.partition = ? AND s.source_id = ? "
                          "AND s.status = 'ok'", (partition, source_id))
        return None if row is None else SourceRow(**dict(row))


def name_key(name: str) -> str:
    """How titles and aliases are compared by exact lookups: case-folded, whitespace collapsed."""
    return " ".join(name.split()).casefold()


def lookup_keys(name: str) -> list[str]:
    """The keys a lookup of ``name`` matches: its own, and those of its composed and decomposed forms, so
    that "Café" typed with a combining accent finds a title written with the precomposed é (a name from a
    macOS file name is decomposed), and the other way round."""
    return sorted({name_key(form) for form in (name, unicodedata.normalize("NFC", name),
                                               unicodedata.normalize("NFD", name))})


def record_name_keys(view: RecordView) -> list[str]:
    """The keys a record is found by (``name_key`` of its title and of each alias)."""
    names = [view.title, *(view.aliases or ())]
    return sorted({name_key(name) for name in names if name is not None and name.strip()})
