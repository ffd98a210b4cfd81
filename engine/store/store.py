"""One physical store on disk: its directory, manifest, database and vault.

    stores/<store-id>/
      vault.json       manifest (see manifest.py)
      state.sqlite     journal, catalog, revisions, git outbox, events
      staging/         temp files of writes into the vault, out of its watcher's sight
      vault/           the editable Markdown vault
        ontology.yaml                 private ontology extensions
        private/                      the private partition
        conversations/<session-id>/   one partition per conversation

A store is only ever created on an agent's first authorized use, and is
built in a temporary directory that is renamed into place, so a crash
during creation never leaves a half-made store behind.  A store that
existed and lost its directory, manifest or database is unavailable and is
never re-created.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from ..core.db import Database, like_prefix
from .catalog_reads import CURRENT_UNQUALIFIED
from ..core.errors import InvalidParams, KnowledgeError, StoreUnavailable
from ..core.files import StagingFolder, fsync_dir, read_file
from ..core.findings import Finding
from ..core.ids import VAULT_PREFIX, canonical_session_id, format_timestamp, new_id, utc_now
from ..vault.manifest import (
    PARTITION_MARKER, Manifest, read_manifest, read_partition_marker, write_manifest, write_partition_marker,
)
from ..vault.ontology import ONTOLOGY_MAX_BYTES, Ontology
from ..vault.records import PRIVATE_SCOPE, conversation_scope
from ..state.registry import StoreRecord

STATE_DB = "state.sqlite"
MANIFEST = "vault.json"
VAULT_DIR = "vault"
EXTENSIONS_FILE = "ontology.yaml"
CONVERSATIONS_DIR = "conversations"
STAGING_DIR = "staging"

# The catalog columns a record's listing and its current status are drawn from; an update that sets one logs the
# record as changed (migration 0005).  Stat columns and the search index's marks are not among them.
_SELECTED_COLUMNS = ("record_id", "revision", "kind", "type", "title", "lifecycle", "file_status", "fixture",
                     "duplicate", "xref_ok", "sha256", "recorded_at", "updated_at", "frontmatter")


def _log_change(row: str) -> str:
    """The trigger statement that stamps ``row``'s record (OLD or NEW) with the partition's catalog version."""
    return (f"INSERT INTO catalog_changes (partition, record_id, catalog_version) "
            f"SELECT {row}.partition, {row}.record_id, COALESCE((SELECT catalog_version FROM partition_state "
            f"WHERE partition = {row}.partition), 0) WHERE {row}.record_id IS NOT NULL "
            "ON CONFLICT (partition, record_id) DO UPDATE SET catalog_version = excluded.catalog_version")


STATE_MIGRATIONS = [
    ("0001_state", """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE partitions (
            partition TEXT PRIMARY KEY,
            identity TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE publications (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            partition TEXT NOT NULL,
            operation TEXT NOT NULL,
            request_id TEXT,
            request_hash TEXT NOT NULL,
            agent TEXT,
            state TEXT NOT NULL CHECK (state IN ('journaled', 'applied', 'rolled_back')),
            receipt TEXT NOT NULL,
            created_at TEXT NOT NULL,
            finished_at TEXT,
            detail TEXT
        );
        CREATE UNIQUE INDEX publications_request ON publications (partition, request_id)
            WHERE request_id IS NOT NULL AND state != 'rolled_back';
        CREATE INDEX publications_state ON publications (state);
        CREATE TABLE publication_files (
            publication_seq INTEGER NOT NULL REFERENCES publications (seq),
            ordinal INTEGER NOT NULL,
            path TEXT NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('record', 'source', 'descriptor')),
            record_id TEXT,
            revision INTEGER,
            new_sha256 TEXT NOT NULL,
            new_bytes BLOB NOT NULL,
            base_sha256 TEXT,
            base_bytes BLOB,
            PRIMARY KEY (publication_seq, ordinal)
        );
        CREATE TABLE revisions (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            partition TEXT NOT NULL,
            record_id TEXT NOT NULL,
            revision INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            content BLOB NOT NULL,
            path TEXT NOT NULL,
            origin TEXT NOT NULL CHECK (origin IN ('publication', 'external')),
            publication_id TEXT,
            agent TEXT,
            observed_at TEXT NOT NULL
        );
        CREATE UNIQUE INDEX revisions_content ON revisions (partition, record_id, revision, sha256);
        CREATE TABLE catalog (
            partition TEXT NOT NULL,
            path TEXT NOT NULL,
            record_id TEXT,
            revision INTEGER,
            kind TEXT,
            type TEXT,
            title TEXT,
            lifecycle TEXT,
            file_status TEXT NOT NULL CHECK (file_status IN ('ok', 'invalid', 'withheld', 'unreadable')),
            fixture INTEGER NOT NULL DEFAULT 0,
            duplicate INTEGER NOT NULL DEFAULT 0,
            xref_ok INTEGER NOT NULL DEFAULT 1,
            sha256 TEXT,
            file_size INTEGER,
            mtime_ns INTEGER,
            ctime_ns INTEGER,
            ino INTEGER,
            recorded_at TEXT,
            updated_at TEXT,
            frontmatter TEXT,
            findings TEXT NOT NULL DEFAULT '[]',
            xref_findings TEXT NOT NULL DEFAULT '[]',
            indexed_sha TEXT,
            PRIMARY KEY (partition, path)
        );
        CREATE INDEX catalog_record ON catalog (partition, record_id);
        CREATE INDEX catalog_updated ON catalog (partition, updated_at);
        CREATE TABLE names (
            partition TEXT NOT NULL,
            path TEXT NOT NULL,
            key TEXT NOT NULL
        );
        CREATE INDEX names_key ON names (partition, key);
        CREATE INDEX names_path ON names (partition, path);
        CREATE TABLE sources (
            partition TEXT NOT NULL,
            source_id TEXT NOT NULL,
            path TEXT NOT NULL,
            retained_path TEXT,
            sha256 TEXT,
            size INTEGER,
            media_type TEXT,
            status TEXT NOT NULL CHECK (status IN ('ok', 'invalid')),
            descriptor TEXT,
            findings TEXT NOT NULL DEFAULT '[]',
            file_size INTEGER,
            mtime_ns INTEGER,
            ctime_ns INTEGER,
            ino INTEGER,
            verified_stamp TEXT,
            PRIMARY KEY (partition, path)
        );
        CREATE INDEX sources_id ON sources (partition, source_id);
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            partition TEXT NOT NULL,
            kind TEXT NOT NULL,
            path TEXT NOT NULL,
            record_id TEXT,
            detail TEXT,
            at TEXT NOT NULL
        );
        CREATE TABLE partition_state (
            partition TEXT PRIMARY KEY,
            catalog_version INTEGER NOT NULL DEFAULT 0,
            index_version INTEGER NOT NULL DEFAULT -1
        );
        CREATE TABLE index_removals (
            partition TEXT NOT NULL,
            path TEXT NOT NULL,
            PRIMARY KEY (partition, path)
        );
        CREATE TABLE scans (
            partition TEXT PRIMARY KEY,
            synced_at TEXT NOT NULL
        );
        CREATE TABLE outbox (
            publication_seq INTEGER PRIMARY KEY REFERENCES publications (seq),
            state TEXT NOT NULL CHECK (state IN ('pending', 'committed')),
            commit_id TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            updated_at TEXT NOT NULL
        )
    """),
    # The recall gate's log and opt-in shadow journal (engine/gate/journal.py).
    ("0002_gate_turns", """
        CREATE TABLE gate_turns (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            partition TEXT NOT NULL,
            agent TEXT NOT NULL,
            audience TEXT NOT NULL,
            at TEXT NOT NULL,
            mode TEXT NOT NULL,
            source TEXT NOT NULL,
            model TEXT,
            outcome TEXT NOT NULL,
            would TEXT,
            stage TEXT,
            reason TEXT,
            latency_ms REAL NOT NULL,
            offered INTEGER NOT NULL,
            shortlisted INTEGER NOT NULL,
            decisions TEXT NOT NULL,
            settings TEXT NOT NULL,
            message TEXT,
            candidates TEXT,
            needed TEXT,
            labelled_at TEXT
        );
        CREATE INDEX gate_turns_partition ON gate_turns (partition, seq)
    """),
    # The ids each record's reference checks look up, so a change re-checks only the records that name
    # what changed (engine/store/catalog.py); filled for a partition by its first full check.
    ("0003_refs", """
        CREATE TABLE refs (
            partition TEXT NOT NULL,
            path TEXT NOT NULL,
            target TEXT NOT NULL
        );
        CREATE INDEX refs_target ON refs (partition, target);
        CREATE INDEX refs_path ON refs (partition, path);
        ALTER TABLE partition_state ADD COLUMN refs_ready INTEGER NOT NULL DEFAULT 0
    """),
    # What the search index lacks and what it must drop, found without reading every row
    # (engine/store/index_ledger.py asks with exactly these conditions, so SQLite uses them).
    ("0004_index_backlog", f"""
        CREATE INDEX catalog_index_backlog ON catalog (partition)
            WHERE {CURRENT_UNQUALIFIED} AND indexed_sha IS NOT sha256;
        CREATE INDEX catalog_index_stale ON catalog (partition)
            WHERE indexed_sha IS NOT NULL AND NOT ({CURRENT_UNQUALIFIED})
    """),
    # Which records' catalog rows changed since a catalog version (catalog_reads.changed_since), so a view of
    # the whole partition (the Knowledge Index's selection) re-reads only those.  A change is stamped with the
    # partition's catalog version as it is made, before its transaction bumps the version: the records changed
    # since a view read version V are those stamped V or later.
    ("0005_catalog_changes", f"""
        CREATE TABLE catalog_changes (
            partition TEXT NOT NULL,
            record_id TEXT NOT NULL,
            catalog_version INTEGER NOT NULL,
            PRIMARY KEY (partition, record_id)
        ) WITHOUT ROWID;
        CREATE INDEX catalog_changes_version ON catalog_changes (partition, catalog_version);
        CREATE TRIGGER catalog_changes_insert AFTER INSERT ON catalog WHEN NEW.record_id IS NOT NULL BEGIN
            {_log_change("NEW")};
        END;
        CREATE TRIGGER catalog_changes_update AFTER UPDATE OF {", ".join(_SELECTED_COLUMNS)} ON catalog BEGIN
            {_log_change("OLD")};
            {_log_change("NEW")};
        END;
        CREATE TRIGGER catalog_changes_delete AFTER DELETE ON catalog WHEN OLD.record_id IS NOT NULL BEGIN
            {_log_change("OLD")};
        END
    """),
    # The stamp of every file a walk compares with the disk (catalog.Catalog._known_stats), read from this
    # index alone: the table's rows hold each record's frontmatter, so reading them cost three times as much.
    ("0006_catalog_stats", """
        CREATE INDEX catalog_stats ON catalog (partition, path, ino, file_size, mtime_ns, ctime_ns)
    """),
    # Publications that remove a file (a sync removes what the other machine removed) and that install the
    # vault's ontology.yaml (role 'ontology', its path relative to the vault): a removal journals the bytes it
    # removes as its base and has no new bytes.  SQLite changes a CHECK only by rebuilding the table.
    ("0007_publication_removals", """
        CREATE TABLE publication_files_new (
            publication_seq INTEGER NOT NULL REFERENCES publications (seq),
            ordinal INTEGER NOT NULL,
            path TEXT NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('record', 'source', 'descriptor', 'ontology')),
            record_id TEXT,
            revision INTEGER,
            new_sha256 TEXT,
            new_bytes BLOB,
            base_sha256 TEXT,
            base_bytes BLOB,
            removes INTEGER NOT NULL DEFAULT 0 CHECK (removes IN (0, 1)),
            CHECK (CASE WHEN removes THEN new_bytes IS NULL AND new_sha256 IS NULL AND base_bytes IS NOT NULL
                        ELSE new_bytes IS NOT NULL AND new_sha256 IS NOT NULL END),
            PRIMARY KEY (publication_seq, ordinal)
        );
        INSERT INTO publication_files_new (publication_seq, ordinal, path, role, record_id, revision, new_sha256,
            new_bytes, base_sha256, base_bytes)
            SELECT publication_seq, ordinal, path, role, record_id, revision, new_sha256, new_bytes, base_sha256,
                   base_bytes FROM publication_files;
        DROP TABLE publication_files;
        ALTER TABLE publication_files_new RENAME TO publication_files
    """),
    # Sync (engine/sync/install.py): a version a merge did not let stand is kept in the revision archive with
    # origin 'sync' (the table is rebuilt to widen its CHECK; every row keeps its seq), and each conflict is
    # listed for the owner until dismissed.
    ("0008_sync_conflicts", """
        CREATE TABLE revisions_new (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            partition TEXT NOT NULL,
            record_id TEXT NOT NULL,
            revision INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            content BLOB NOT NULL,
            path TEXT NOT NULL,
            origin TEXT NOT NULL CHECK (origin IN ('publication', 'external', 'sync')),
            publication_id TEXT,
            agent TEXT,
            observed_at TEXT NOT NULL
        );
        INSERT INTO revisions_new (seq, partition, record_id, revision, sha256, content, path, origin,
            publication_id, agent, observed_at)
            SELECT seq, partition, record_id, revision, sha256, content, path, origin, publication_id, agent,
                   observed_at FROM revisions ORDER BY seq;
        DROP TABLE revisions;
        ALTER TABLE revisions_new RENAME TO revisions;
        CREATE UNIQUE INDEX revisions_content ON revisions (partition, record_id, revision, sha256);
        CREATE TABLE sync_conflicts (
            id TEXT PRIMARY KEY,
            partition TEXT,
            record_id TEXT,
            kind TEXT NOT NULL CHECK (kind IN ('revised_on_both', 'added_on_both', 'removed_and_revised')),
            standing_path TEXT NOT NULL,
            standing_revision INTEGER,
            standing_sha256 TEXT NOT NULL,
            standing_updated_at TEXT,
            other_path TEXT,
            other_revision INTEGER,
            other_sha256 TEXT,
            other_updated_at TEXT,
            diff TEXT NOT NULL,
            remote TEXT NOT NULL,
            machine TEXT NOT NULL,
            at TEXT NOT NULL,
            dismissed_at TEXT
        );
        CREATE INDEX sync_conflicts_waiting ON sync_conflicts (at) WHERE dismissed_at IS NULL
    """),
    # A search index catch-up of many never-indexed records marks its partition instead of writing each path
    # ahead as a removal (engine/store/index_ledger.py): a mark a catch-up left behind rebuilds the index.
    ("0009_index_unlisted", """
        ALTER TABLE partition_state ADD COLUMN index_unlisted INTEGER NOT NULL DEFAULT 0
    """),
    # A sync logs the records of the rows it writes itself, in one statement in id order, instead of the insert
    # trigger logging each row as it lands (engine/store/catalog.py ``Catalog._logging_changes``): its
    # transaction lists the partition here while it writes them and takes it off before it ends, so no committed
    # state holds a row of this table.  The update and delete triggers are as they were.
    ("0010_catalog_changes_deferred", f"""
        CREATE TABLE catalog_changes_deferred (partition TEXT PRIMARY KEY);
        DROP TRIGGER catalog_changes_insert;
        CREATE TRIGGER catalog_changes_insert AFTER INSERT ON catalog WHEN NEW.record_id IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM catalog_changes_deferred WHERE partition = NEW.partition) BEGIN
            {_log_change("NEW")};
        END
    """),
    # The git outbox's pending rows, which the git thread reads every checkpoint: the outbox keeps a row for every
    # publication ever committed, and finding the few pending ones walked them all (engine/store/outbox.py).
    ("0011_outbox_pending", """
        CREATE INDEX outbox_pending ON outbox (publication_seq) WHERE state = 'pending'
    """),
    # The generated ids each catalog row's frontmatter text holds, so a record page finds the records that
    # mention it without reading every frontmatter of the partition (engine/store/catalog_reads.py
    # ``mentioning``).  The rows already catalogued are read once when the store next opens (``meta``'s mark).
    ("0012_mentions", """
        CREATE TABLE mentions (
            partition TEXT NOT NULL,
            path TEXT NOT NULL,
            target TEXT NOT NULL
        );
        CREATE INDEX mentions_target ON mentions (partition, target);
        CREATE INDEX mentions_path ON mentions (partition, path);
        INSERT INTO meta (key, value) VALUES ('mentions_unfilled', '1')
    """),
]


def partition_dir(partition: str) -> str:
    """The vault-relative directory of a partition name (``private`` or ``conversation:<uuid>``)."""
    if partition == PRIVATE_SCOPE:
        return PRIVATE_SCOPE
    session = partition.removeprefix("conversation:")
    if partition.startswith("conversation:") and canonical_session_id(session) == session:
        return f"{CONVERSATIONS_DIR}/{session}"
    raise InvalidParams(f"not a partition: {partition!r}")


def check_presence(record: StoreRecord) -> None:
    """Fail closed when a store that existed lost its directory, manifest or database."""
    root = os.fspath(record.path)  # plain os calls: this runs several times per request
    if not _is(root, stat.S_ISDIR, follow=False):
        raise StoreUnavailable("the store's directory is missing", store=record.store_id)
    if not _is(os.path.join(root, MANIFEST), stat.S_ISREG):
        raise StoreUnavailable("the store's manifest (vault.json) is missing", store=record.store_id)
    if not _is(os.path.join(root, STATE_DB), stat.S_ISREG):
        raise StoreUnavailable("the store's database (state.sqlite) is missing", store=record.store_id)


def _is_real_directory(path: Path) -> bool:
    """``path.is_dir() and not path.is_symlink()``, asked with one lstat where no symlink is there (every
    identity check makes it, twice a write): the same answer, and the same errors raised or ignored."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:  # what pathlib's stat would meet at the same component
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return False
        raise
    except ValueError:
        return False
    if stat.S_ISLNK(mode):  # refused either way; asked as pathlib asks it, target and all
        return path.is_dir() and not path.is_symlink()
    return stat.S_ISDIR(mode)


def _is(path: str, kind: Callable[[int], bool], *, follow: bool = True) -> bool:
    try:
        return kind((os.stat if follow else os.lstat)(path).st_mode)
    except (OSError, ValueError):
        return False


def create_store_directory(stores_root: Path, store_id: str) -> Path:
    """Build a complete, empty store in a temporary directory and rename it into place."""
    stores_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    final = stores_root / store_id
    if final.exists():
        raise StoreUnavailable("a directory for this new store already exists", store=store_id)
    building = stores_root / f".{store_id}.creating"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(mode=0o700)
    vault_id = new_id(VAULT_PREFIX)
    now = format_timestamp(utc_now())
    database = Database.open(building / STATE_DB, create=True, migrations=STATE_MIGRATIONS)
    try:
        with database.atomic():
            database.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [("store_id", store_id), ("vault_id", vault_id), ("created_at", now)],
            )
    finally:
        database.close()
    private = building / VAULT_DIR / PRIVATE_SCOPE
    private.mkdir(parents=True)
    identity = new_id("pt")
    write_partition_marker(private, store_id, PRIVATE_SCOPE, identity)
    write_manifest(building / MANIFEST, Manifest(store_id, vault_id, now, {PRIVATE_SCOPE: identity}, 0))
    fsync_dir(building)
    os.replace(building, final)
    fsync_dir(stores_root)
    return final


def remove_abandoned_builds(stores_root: Path) -> None:
    """Clear temporary directories of store creations that a crash interrupted."""
    if not stores_root.is_dir():
        return
    for entry in stores_root.iterdir():
        if entry.name.startswith(".") and entry.name.endswith(".creating") and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)


class Store:
    """An opened physical store.  Used only from its runtime's lane thread."""

    def __init__(self, record: StoreRecord, db: Database, shipped: Ontology) -> None:
        self.record = record
        self.db = db
        self.shipped = shipped
        self.root = record.path
        self.vault = record.path / VAULT_DIR
        self.manifest_path = record.path / MANIFEST
        self.db_path = record.path / STATE_DB
        # The manifest as last read, with the stat it was read at: one pair, replaced whole, since the lane, the
        # publisher's sync thread and the reads beside the lane all read it.
        self._manifest_read: tuple[tuple[int, int, int], Manifest] | None = None
        self._extensions: tuple[tuple[int, int, int] | None, Ontology] | None = None
        self.ontology_generation = 0  # bumped whenever the private extensions are re-read
        self._identity: tuple[str | None, str | None] | None = None  # (store_id, vault_id) in the database
        self._markers: dict[Path, tuple[tuple[int, ...], dict[str, Any] | None]] = {}
        self._conversation_identities: dict[str, str] = {}
        self._verified_checkpoint = 0  # the database's applied checkpoint at the last full ``verify``
        self._extensions_path = self.vault / EXTENSIONS_FILE
        self._partition_roots: dict[str, Path] = {}  # a write asks for its partition's folder a dozen times
        # Where writes into the vault make their temp files (None: beside each target), set by ``open``.
        self.staging: StagingFolder | None = None

    @classmethod
    def open(cls, record: StoreRecord, shipped: Ontology) -> "Store":
        check_presence(record)
        database = Database.open(record.path / STATE_DB, create=False, migrations=STATE_MIGRATIONS)
        store = cls(record, database, shipped)
        # Opened under the engine's lock, the one process that writes the store's files: a temp file of
        # another process is a crash's leftover, removed before anything reads the vault.
        store.staging = StagingFolder.open(record.path / STAGING_DIR, store.vault)
        if store.staging is not None:
            store.staging.remove_leftovers()
        try:
            store.verify(allow_pending=True)  # the runtime recovers before anything reads
        except StoreUnavailable:
            database.close()
            raise
        return store

    def close(self) -> None:
        self.db.close()

    @property
    def store_id(self) -> str:
        return self.record.store_id

    # --- identity ------------------------------------------------------------

    def manifest(self) -> Manifest:
        """vault.json as read (kept while its stat is unchanged); StoreUnavailable, naming it, once it is gone."""
        try:
            info = os.stat(self.manifest_path)
            stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
            kept = self._manifest_read
            if kept is None or kept[0] != stamp:
                kept = self._manifest_read = (stamp, read_manifest(self.manifest_path))
        except FileNotFoundError as exc:
            raise StoreUnavailable("the store's manifest (vault.json) is missing", store=self.store_id,
                                   file="vault.json") from exc
        return kept[1]

    def meta(self, key: str) -> str | None:
        row = self.db.one("SELECT value FROM meta WHERE key = ?", (key,))
        return row["value"] if row is not None else None

    def applied_checkpoint(self) -> int:
        row = self.db.one("SELECT COALESCE(MAX(seq), 0) AS seq FROM publications WHERE state = 'applied'")
        return int(row["seq"])

    def applied_besides(self, request_prefix: str) -> int:
        """How many applied publications had no request id, or one that does not start with ``request_prefix``."""
        return self.db.one(
            "SELECT COUNT(*) AS n FROM publications WHERE state = 'applied' "
            "AND (request_id IS NULL OR request_id NOT LIKE ? ESCAPE '\\')", (like_prefix(request_prefix),))["n"]

    def pending_publications(self, partition: str | None = None) -> list[int]:
        """Journalled publications not yet rolled forward or back: the store's, or one partition's."""
        return [row["seq"] for row in self.db.all(
            "SELECT seq FROM publications WHERE state = 'journaled' AND (? IS NULL OR partition = ?) ORDER BY seq",
            (partition, partition),
        )]

    def publication_marks(self) -> tuple[int, list[int]]:
        """``applied_checkpoint()`` and ``pending_publications()`` in one statement: ``verify`` runs twice a write."""
        rows = self.db.tuples(
            "SELECT 'applied', COALESCE(MAX(seq), 0) FROM publications WHERE state = 'applied' "
            "UNION ALL SELECT 'journaled', seq FROM publications WHERE state = 'journaled'")
        applied = next(int(seq) for state, seq in rows if state == "applied")
        return applied, sorted(seq for state, seq in rows if state == "journaled")

    def verify(self, partition: str | None = None, *, allow_pending: bool = False,
               marks: tuple[int, list[int]] | None = None) -> None:
        """Check manifest, database and partition identity; raise StoreUnavailable on any mismatch.

        Runs before and after every query.  ``allow_pending`` is for recovery,
        which is the one caller that may see a journalled publication.  ``marks``: what
        ``publication_marks`` answered the caller on the lane just before, not asked again.
        """
        check_presence(self.record)
        manifest = self.manifest()
        if self._identity is None:  # this connection's database file cannot change under it: read once
            self._identity = (self.meta("store_id"), self.meta("vault_id"))
        database_store, database_vault = self._identity
        if manifest.store_id != self.store_id or database_store != self.store_id:
            raise StoreUnavailable("store identity mismatch between registry, manifest and database",
                                   store=self.store_id)
        if manifest.vault_id != database_vault:
            raise StoreUnavailable("vault identity mismatch between manifest and database", store=self.store_id)
        applied, pending = marks if marks is not None else self.publication_marks()
        if pending and not allow_pending:
            raise StoreUnavailable("a publication is pending recovery; reads wait for it", store=self.store_id)
        allowed = {applied, *pending}
        if manifest.checkpoint not in allowed:
            if manifest.checkpoint < applied:
                message = (f"the vault is older than its database (checkpoint {manifest.checkpoint} < "
                           f"{applied}); restore the matching vault.json or database")
            else:
                message = (f"the vault checkpoint {manifest.checkpoint} conflicts with the database "
                           f"({applied}); it is never replaced automatically")
            raise StoreUnavailable(message, store=self.store_id)
        if partition is not None:
            self._verify_partition(partition, manifest)
        self._verified_checkpoint = max(self._verified_checkpoint, applied)

    def unchanged(self, partition: str) -> bool:
        """Whether the identity ``verify`` last found holds still, asking no database (a read beside the lane).

        False (nothing raised) for anything the full check must look at: a missing file, another manifest
        identity, a vault checkpoint older than the database's last one, a partition marker that differs,
        or no full check made yet.  The caller then goes through the lane, whose ``verify`` says what is wrong.
        """
        if self._identity is None:
            return False
        try:
            check_presence(self.record)
            manifest = self.manifest()
            expected = self.partition_identity(partition, manifest) if partition == PRIVATE_SCOPE \
                else self._conversation_identities.get(partition)
        except (OSError, KnowledgeError):
            return False
        if (manifest.store_id, manifest.vault_id) != (self.store_id, self._identity[1]) \
                or self._identity[0] != self.store_id or manifest.checkpoint < self._verified_checkpoint:
            return False
        directory = self.partition_root(partition)
        if expected is None or not directory.is_dir() or directory.is_symlink():
            return False
        return self._marker_matches(directory, partition, expected)

    def _marker(self, directory: Path) -> dict[str, Any] | None:
        """The partition's marker, read again only when its file changed (inode, size, times or type)."""
        try:
            info = os.lstat(directory / PARTITION_MARKER)
        except OSError:
            return None
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)
        kept = self._markers.get(directory)
        if kept is None or kept[0] != stamp:
            kept = (stamp, read_partition_marker(directory))
            self._markers[directory] = kept
        return kept[1]

    def _verify_partition(self, partition: str, manifest: Manifest) -> None:
        expected = self.partition_identity(partition, manifest)
        directory = self.partition_root(partition)
        exists = _is_real_directory(directory)
        if expected is None:
            if os.path.lexists(directory):
                raise StoreUnavailable("a partition directory exists that this store did not create",
                                       store=self.store_id, partition=partition)
            return
        if not exists:
            raise StoreUnavailable("a partition directory is missing", store=self.store_id, partition=partition)
        if not self._marker_matches(directory, partition, expected):
            raise StoreUnavailable("a partition directory does not belong to this store",
                                   store=self.store_id, partition=partition)

    def _marker_matches(self, directory: Path, partition: str, identity: str) -> bool:
        """Whether the partition directory's marker names this store, this partition and ``identity``."""
        return self._marker(directory) == {"storeId": self.store_id, "partition": partition, "identity": identity}

    def partition_identity(self, partition: str, manifest: Manifest | None = None) -> str | None:
        if partition == PRIVATE_SCOPE:
            return (manifest or self.manifest()).partitions.get(PRIVATE_SCOPE)
        row = self.db.one("SELECT identity FROM partitions WHERE partition = ?", (partition,))
        identity = row["identity"] if row is not None else None
        if identity is not None:  # a conversation's identity never changes once made
            self._conversation_identities[partition] = identity
        return identity

    def set_checkpoint(self, seq: int) -> None:
        manifest = self.manifest()
        if manifest.checkpoint != seq:
            written = manifest.with_checkpoint(seq)
            info = write_manifest(self.manifest_path, written, replace_only=True)
            # Kept as what the file now holds, under the stamp ``manifest`` compares: a publication's next check
            # does not read back the file it wrote (any later change to it moves the stamp, and is read).
            self._manifest_read = ((info.st_ino, info.st_mtime_ns, info.st_size), written)

    # --- partitions ------------------------------------------------------------

    def partition_root(self, partition: str) -> Path:
        root = self._partition_roots.get(partition)
        if root is None:
            root = self._partition_roots[partition] = self.vault / partition_dir(partition)
        return root

    def partitions(self) -> list[str]:
        rows = self.db.all("SELECT partition FROM partitions ORDER BY partition")
        return [PRIVATE_SCOPE] + [row["partition"] for row in rows]

    def ensure_partition(self, partition: str) -> Path:
        """The partition's directory, created with its identity marker on first write."""
        directory = self.partition_root(partition)
        if self.partition_identity(partition) is not None:
            return directory
        identity = new_id("pt")
        if os.path.lexists(directory):
            raise StoreUnavailable("a partition directory exists that this store did not create",
                                   store=self.store_id, partition=partition)
        conversations = self.vault / CONVERSATIONS_DIR
        if not conversations.exists():
            conversations.mkdir()
            fsync_dir(self.vault)
        if conversations.is_symlink() or not conversations.is_dir():
            raise StoreUnavailable("conversations/ is not a directory", store=self.store_id)
        directory.mkdir()
        fsync_dir(conversations)
        write_partition_marker(directory, self.store_id, partition, identity, staging=self.staging)
        self.db.execute(
            "INSERT INTO partitions (partition, identity, created_at) VALUES (?, ?, ?)",
            (partition, identity, format_timestamp(utc_now())),
        )
        return directory

    # --- ontology ----------------------------------------------------------------

    def ontology(self, partition: str) -> Ontology:
        """The effective ontology: shipped, plus the vault's extensions in the private partition only."""
        if partition != PRIVATE_SCOPE:
            return self.shipped
        try:
            info = os.lstat(self._extensions_path)
            stamp: tuple[int, int, int] | None = (info.st_ino, info.st_mtime_ns, info.st_size)
        except FileNotFoundError:
            stamp = None
        if self._extensions is not None and self._extensions[0] == stamp:
            return self._extensions[1]
        effective = self.shipped if stamp is None else self._load_extensions()
        self._extensions = (stamp, effective)
        self.ontology_generation += 1
        return effective

    def _load_extensions(self) -> Ontology:
        where = f"{VAULT_DIR}/{EXTENSIONS_FILE}"
        try:
            data, _ = read_file(self.vault, EXTENSIONS_FILE, max_bytes=ONTOLOGY_MAX_BYTES)
            text = data.decode("utf-8")
        except (KnowledgeError, UnicodeDecodeError) as exc:
            message = exc.message if isinstance(exc, KnowledgeError) else "not valid UTF-8"
            return replace(self.shipped, findings=(Finding("ontology_invalid", message, path=where),))
        return self.shipped.extended(text, where)


def conversation_partition(session_id: str) -> str:
    canonical = canonical_session_id(session_id)
    if canonical is None:
        raise InvalidParams("sessionId must be a UUID", field="sessionId")
    return conversation_scope(canonical)

