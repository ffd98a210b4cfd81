"""Installing a merged vault: the publications that turn this machine's vault into the merge, and the
conflicts the owner hears about (docs/sync.md, "Installing a merge").

``plan_sync`` builds one ``Plan`` per partition the merge changes (operation ``sync``, no agent, no request
id): each file written with the bytes this machine's state holds as its base, each file the merge dropped
removed, and ``ontology.yaml`` with the private partition's plan.  Publishing them (``Publisher.
publish_together``, on the store's lane) journals, installs, catalogues and queues them for git like any
publication, so a crash half way is finished or undone by recovery.  Every incoming record is checked as
an edit made outside the engine would be read (parsed, its scope its partition's, within the limits); one
that fails refuses the whole round before anything is written.

``record_conflicts`` lists each conflict in ``sync_conflicts`` for the owner and keeps the version that
does not stand in the revision archive (origin ``sync``), so a record's history and a read of that
revision serve it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Iterable, Mapping, NoReturn, Sequence

from ..core.db import Database
from ..core.findings import Finding
from ..core.ids import format_timestamp, is_record_id, new_id, utc_now
from ..store.attachments import ATTACH_FILE_MAX_BYTES
from ..store.catalog import keep_revision, record_removals, sync_removals
from ..store.catalog_reads import CatalogReads, RevisionRow, version_label
from ..store.walk import is_descriptor_path, is_record_path
from ..store.publication import ONTOLOGY_PATH, FileWrite, Plan, removal, request_hash
from ..store.store import EXTENSIONS_FILE, VAULT_DIR, Store
from ..vault.evidence import DESCRIPTOR_MAX_BYTES
from ..vault.frontmatter import RECORD_MAX_BYTES
from ..vault.ontology import ONTOLOGY_MAX_BYTES
from ..vault.records import PRIVATE_SCOPE, check_scope, conversation_scope, parse_record
from .merge import CONVERSATIONS_DIR, ONTOLOGY_FILE, MergeConflict, MergeResult, Version, is_synced, partition_of
from .status import SyncConflict, SyncConflictVersion, SyncRemoval
from .transport import SyncRefused

SYNC_OPERATION = "sync"
REMOVALS_LISTED = 50
CONFLICT_PREFIX = "sc"
# A retained source travels up to the size an attachment may have (the largest evidence the engine keeps).
SOURCE_MAX_BYTES = ATTACH_FILE_MAX_BYTES
_LIMITS = {"record": RECORD_MAX_BYTES, "descriptor": DESCRIPTOR_MAX_BYTES, "source": SOURCE_MAX_BYTES,
           "ontology": ONTOLOGY_MAX_BYTES}

Load = Callable[[Hashable], bytes]


@dataclass(frozen=True)
class SyncPlans:
    """The publications that install a merge: one plan per partition it changes, in partition order, with
    the vault paths each writes and removes (empty when the merge changes nothing here)."""

    plans: list[Plan]
    written: list[str]   # vault paths
    removed: list[str]   # vault paths

    @property
    def empty(self) -> bool:
        return not self.plans


def partition_name(folder: str) -> str:
    """The engine's name of a vault partition folder (``private``, ``conversations/<uuid>``)."""
    if folder.startswith(f"{CONVERSATIONS_DIR}/"):
        return conversation_scope(folder.split("/", 1)[1])
    return PRIVATE_SCOPE


def role_of(relpath: str) -> str:
    """What a partition file is to the engine, by its path (as the catalog reads it)."""
    if is_descriptor_path(relpath):
        return "descriptor"
    if is_record_path(relpath):
        return "record"
    return "source"


def plan_sync(store: Store, ours: Mapping[str, bytes | Hashable], merged: MergeResult, load: Load | None, *,
              operation: str = SYNC_OPERATION) -> SyncPlans:
    """The plans that turn the vault from ``ours`` (what this machine holds: bytes, or blob ids ``load``
    reads) into ``merged.files``; refuses (``SyncRefused``, nothing written) when an incoming file could
    not be installed as it is: a record that does not parse, is not its partition's, or is too large, a
    descriptor or source over its limit, an ontology that is not valid."""

    read: dict[Hashable, bytes] = {}

    def data_of(value: bytes | Hashable) -> bytes:
        if isinstance(value, bytes):
            return value
        if load is None:
            raise TypeError("a vault state names a blob but no load was given")
        if value not in read:
            read[value] = load(value)
        return read[value]

    writes: dict[str, list[FileWrite]] = {}
    written, removed = [], []
    for path, value in merged.files.items():
        before = ours.get(path)
        if before is not None and (before == value or data_of(before) == data_of(value)):
            continue
        data = data_of(value)
        write = _incoming(store, path, data, None if before is None else data_of(before))
        writes.setdefault(_split(path)[0], []).append(write)
        written.append(path)
    for path in sorted(set(ours) - set(merged.files)):
        if not is_synced(path):
            continue  # never merged (derived, outside the partitions): never removed either
        partition, relpath = _split(path)
        base = data_of(ours[path])
        writes.setdefault(partition, []).append(
            removal(relpath, "ontology" if path == ONTOLOGY_FILE else role_of(relpath), base,
                    _record_id(relpath, base)))
        removed.append(path)
    plans = []
    for partition in sorted(writes):
        files = writes[partition]
        digest = request_hash(operation, {"partition": partition, "files": [
            [w.path, w.role, w.new_sha256, w.base_sha256] for w in files]})
        plans.append(Plan(partition, operation, None, digest, None, files,
                          receipt={"operation": operation, "written": sum(not w.removes for w in files),
                                   "removed": sum(w.removes for w in files)}))
    return SyncPlans(plans, sorted(written), removed)


def _split(path: str) -> tuple[str, str]:
    """A synced vault path as (partition, path inside it); ``ontology.yaml`` goes with the private one."""
    if path == ONTOLOGY_FILE:
        return PRIVATE_SCOPE, ONTOLOGY_PATH
    folder = partition_of(path)
    if folder is None or not is_synced(path):
        raise SyncRefused(Finding("unsafe_path", "the merge holds a file outside the synced folders; nothing "
                                  "was installed", path=path))
    return partition_name(folder), path[len(folder) + 1:]


def _record_id(relpath: str, data: bytes) -> str | None:
    if not is_record_path(relpath):
        return None
    record, _ = parse_record(data, relpath)
    return record.id if record is not None and is_record_id(record.id) else None


def _incoming(store: Store, path: str, data: bytes, base: bytes | None) -> FileWrite:
    """One file the merge brings, checked as the engine would read it here."""
    partition, relpath = _split(path)
    role = "ontology" if path == ONTOLOGY_FILE else role_of(relpath)
    if len(data) > _LIMITS[role]:
        _refuse(path, f"{role} file of {len(data)} bytes is over the limit of {_LIMITS[role]} bytes", "too_large")
    if role == "ontology":
        _check_ontology(store, path, data)
        return FileWrite(relpath, role, data, base=base)
    if role != "record":
        return FileWrite(relpath, role, data, base=base)
    record, findings = parse_record(data, relpath)
    if record is None:
        _refuse(path, f"the record cannot be read: {findings[0].message if findings else 'unreadable'}")
    if not is_record_id(record.id):
        _refuse(path, "the record has no valid id")
    wrong = check_scope(record, partition)
    if wrong is not None:
        _refuse(path, wrong.message.replace("; withheld", ""))
    return FileWrite(relpath, role, data, record.id, record.revision, base)


def _check_ontology(store: Store, path: str, data: bytes) -> None:
    """The vault's ontology extensions as the engine would read them here: UTF-8, and extending the
    shipped ontology without an error (an invalid one would leave the private partition's records
    checked against the shipped ontology alone, so it is refused rather than installed)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        _refuse(path, "ontology.yaml is not valid UTF-8", "invalid_ontology")
    extended = store.shipped.extended(text, f"{VAULT_DIR}/{EXTENSIONS_FILE}")
    problems = [f for f in extended.findings[len(store.shipped.findings):] if f.severity == "error"]
    if problems:
        _refuse(path, f"ontology.yaml is not valid here: {problems[0].message}", "invalid_ontology")


def _refuse(path: str, why: str, code: str = "invalid_record") -> NoReturn:
    raise SyncRefused(Finding(code, f"{path}: {why}; the round installed nothing", path=path))


# --- conflicts ----------------------------------------------------------------------------------


def record_conflicts(db: Database, conflicts: Iterable[MergeConflict], *, remote: str,
                     machine: str) -> list[SyncConflict]:
    """List each conflict for the owner and archive the version that does not stand (origin ``sync``);
    returns them as ``sync status`` shows them.  Call on the store's lane, after the merge is installed."""
    now = format_timestamp(utc_now())
    listed: list[SyncConflict] = []
    with db.atomic():
        for conflict in conflicts:
            folder = partition_of(conflict.kept.path)
            partition = partition_name(folder) if folder is not None else None
            standing, other = _version(conflict.kept), _version(conflict.other) if conflict.other else None
            entry: SyncConflict = {
                "id": new_id(CONFLICT_PREFIX), "recordId": conflict.record_id, "partition": partition,
                "kind": conflict.kind, "standing": standing, "other": other, "diff": conflict.diff(),
                "remote": remote, "at": now}
            db.execute(
                "INSERT INTO sync_conflicts (id, partition, record_id, kind, standing_path, standing_revision, "
                "standing_sha256, standing_updated_at, other_path, other_revision, other_sha256, other_updated_at, "
                "diff, remote, machine, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (entry["id"], partition, conflict.record_id, conflict.kind, standing["path"], standing["revision"],
                 standing["sha256"], standing["updatedAt"], other and other["path"], other and other["revision"],
                 other and other["sha256"], other and other["updatedAt"], entry["diff"], remote, machine, now))
            other_folder = partition_of(conflict.other.path) if conflict.other is not None else None
            if conflict.other is not None and conflict.record_id is not None and other_folder is not None:
                # Kept in the partition the version's own file lies in (a merge by id may pair two folders).
                keep_revision(db, partition_name(other_folder), conflict.record_id, conflict.other.revision or 0,
                              conflict.other.data, conflict.other.path[len(other_folder) + 1:], origin="sync",
                              observed_at=now)
            listed.append(entry)
    return listed


def removals_of(plans: Sequence[Plan]) -> list[tuple[str, str, str | None]]:
    """What the plans remove: (partition, path inside it, record id).  A record the plans also write at
    another path was moved (renamed on the other machine), not removed: it is left out."""
    written = {write.record_id for plan in plans for write in plan.writes
               if not write.removes and write.record_id is not None}
    return [(plan.partition, write.path, write.record_id) for plan in plans for write in plan.writes
            if write.removes and (write.record_id is None or write.record_id not in written)]


def record_sync_removals(db: Database, removals: list[tuple[str, str, str | None]], *, remote: str,
                         machine: str) -> None:
    """Record the removals a round installed here, each as an event of its record's history saying which
    machine's history removed it.  Call on the store's lane, after they are installed."""
    if removals:
        with db.atomic():
            record_removals(db, removals, detail=f"by sync from machine {machine} of remote {remote}",
                            at=format_timestamp(utc_now()))


def removals_made(db: Database, limit: int = REMOVALS_LISTED) -> list[SyncRemoval]:
    """The newest removals rounds made here, newest first (``sync status``)."""
    return [{"partition": row["partition"], "path": row["path"], "recordId": row["record_id"],
             "detail": row["detail"] or "", "at": row["at"]} for row in sync_removals(db, limit)]


def waiting_conflicts(db: Database) -> list[SyncConflict]:
    """The conflicts the owner has not dismissed, oldest first."""
    return [_conflict_of(row) for row in db.all(
        "SELECT * FROM sync_conflicts WHERE dismissed_at IS NULL ORDER BY at, id")]


def named_as_history(catalog: CatalogReads, conflicts: list[SyncConflict]) -> list[SyncConflict]:
    """The conflicts with the record's ``title`` and each version's ``label`` and ``seenAt`` from the revision
    archive, so the owner reads the names History uses (``1.1`` for an edit made outside the engine that kept
    the file's number, not the number it kept).  Call on the store's lane."""
    named: list[SyncConflict] = []
    for conflict in conflicts:
        entry: SyncConflict = {**conflict}
        record_id = conflict["recordId"]
        if record_id is not None:
            kept = _kept_versions(catalog, record_id)
            entry["standing"] = _named_version(kept, conflict["standing"])
            if conflict["other"] is not None:
                entry["other"] = _named_version(kept, conflict["other"])
            title = _title(catalog, kept, record_id, conflict["partition"], conflict["standing"]["path"])
            if title:
                entry["title"] = title
        named.append(entry)
    return named


def _kept_versions(catalog: CatalogReads, record_id: str) -> Callable[[str], list[RevisionRow]]:
    """Every kept version of the record in a partition, oldest first, read once a partition for all that asks."""
    read: dict[str, list[RevisionRow]] = {}

    def kept(partition: str) -> list[RevisionRow]:
        if partition not in read:
            read[partition] = catalog.revisions(partition, record_id)
        return read[partition]

    return kept


def _named_version(kept: Callable[[str], list[RevisionRow]], version: SyncConflictVersion) -> SyncConflictVersion:
    folder = partition_of(version["path"])
    if folder is None:
        return version
    versions = kept(partition_name(folder))
    row = next((row for row in versions if row.sha256 == version["sha256"] and row.revision == version["revision"]),
               None)
    return version if row is None else {**version, "label": version_label(versions, row), "seenAt": row.observed_at}


def _title(catalog: CatalogReads, kept: Callable[[str], list[RevisionRow]], record_id: str, partition: str | None,
           path: str) -> str | None:
    """The record's current title; else the title of the newest version kept (a record withheld now)."""
    if partition is None:
        return None
    rows = catalog.rows_for_id(partition, record_id)
    if rows and rows[0].title:
        return rows[0].title
    versions = kept(partition)
    record = parse_record(versions[-1].content, path)[0] if versions else None
    return record.view.title if record is not None else None


def dismiss_conflict(db: Database, conflict_id: str, at: str) -> str | None:
    """Mark the conflict seen at ``at`` unless it already is; answers when it was dismissed (None: the store
    has no such conflict).  Call on the store's lane."""
    with db.atomic():
        row = db.one("SELECT dismissed_at FROM sync_conflicts WHERE id = ?", (conflict_id,))
        if row is None:
            return None
        if row["dismissed_at"] is not None:
            return str(row["dismissed_at"])
        db.execute("UPDATE sync_conflicts SET dismissed_at = ? WHERE id = ?", (at, conflict_id))
        return at


def conflicts_waiting(db: Database) -> int:
    """How many of the store's conflicts the owner has not dismissed."""
    row = db.one("SELECT count(*) AS waiting FROM sync_conflicts WHERE dismissed_at IS NULL")
    return int(row["waiting"]) if row is not None else 0


def _version(version: Version) -> SyncConflictVersion:
    return {"path": version.path, "revision": version.revision, "sha256": version.sha256,
            "updatedAt": version.updated_at}


def _conflict_of(row) -> SyncConflict:
    other: SyncConflictVersion | None = None
    if row["other_sha256"] is not None:
        other = {"path": row["other_path"], "revision": row["other_revision"], "sha256": row["other_sha256"],
                 "updatedAt": row["other_updated_at"]}
    return {"id": row["id"], "recordId": row["record_id"], "partition": row["partition"], "kind": row["kind"],
            "standing": {"path": row["standing_path"], "revision": row["standing_revision"],
                         "sha256": row["standing_sha256"], "updatedAt": row["standing_updated_at"]},
            "other": other, "diff": row["diff"], "remote": row["remote"], "at": row["at"]}

