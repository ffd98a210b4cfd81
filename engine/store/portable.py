"""A store's portable parts: what an archive carries out of a store, and a store built back from them.

Out: every file of the vault as it is on disk (records, retained sources and their descriptors, the
ontology extensions, the partition markers; git's own folder aside) and every revision the revision
archive keeps.  In: a complete store directory with the same identity, built in a temporary directory
and renamed into place like a new store, so an interrupted restore leaves nothing behind.  Its
``state.sqlite`` starts with the identity, the conversation partitions and the kept revisions only:
the engine catalogues the vault's files and builds the search index at its first operation, as it
does for any vault whose catalog has not seen its files.
"""

from __future__ import annotations

import os
import shutil
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..core.db import Database
from ..core.errors import StoreUnavailable
from ..core.files import fsync_dir
from ..vault.manifest import Manifest, write_manifest
from ..vault.records import PRIVATE_SCOPE
from .store import MANIFEST, STATE_DB, STATE_MIGRATIONS, VAULT_DIR, Store, partition_dir

GIT_DIR = ".git"
_SYNC_WORKERS = 16


@dataclass(frozen=True)
class KeptRevision:
    """One row of the revision archive, with its exact bytes."""

    partition: str
    record_id: str
    revision: int
    sha256: str
    content: bytes
    path: str
    origin: str
    publication_id: str | None
    agent: str | None
    observed_at: str


@dataclass(frozen=True)
class StoreIdentity:
    """What makes a restored store the same store: its ids, creation time and partition identities."""

    store_id: str
    vault_id: str
    created_at: str
    partitions: dict[str, str]  # partition name -> directory identity (the markers hold the same)


def kept_revisions(store: Store) -> list[KeptRevision]:
    """Every revision the store keeps, in the order it kept them (call on the store's lane)."""
    return [KeptRevision(row["partition"], row["record_id"], row["revision"], row["sha256"], bytes(row["content"]),
                         row["path"], row["origin"], row["publication_id"], row["agent"], row["observed_at"])
            for row in store.db.all(
                "SELECT partition, record_id, revision, sha256, content, path, origin, publication_id, agent, "
                "observed_at FROM revisions ORDER BY seq")]


def store_identity(store: Store) -> StoreIdentity:
    manifest = store.manifest()
    partitions = {PRIVATE_SCOPE: manifest.partitions[PRIVATE_SCOPE]}
    for partition in store.partitions()[1:]:
        identity = store.partition_identity(partition)
        if identity is not None:
            partitions[partition] = identity
    return StoreIdentity(store.store_id, manifest.vault_id, manifest.created_at, partitions)


def vault_files(vault: Path, *, git: bool = False) -> tuple[list[str], list[str]]:
    """The vault-relative paths of the regular files under ``vault`` (or, with ``git``, under its ``.git``),
    and the entries left out: symlinks, other special files and names that are not UTF-8.

    Temp files of atomic writes (hidden ``*.tmp``) are left out unreported: they hold no acknowledged write.
    """
    root = vault / GIT_DIR if git else vault
    files: list[str] = []
    skipped: list[str] = []
    for directory, subdirs, names in os.walk(root):
        relative_dir = os.path.relpath(directory, vault).replace(os.sep, "/")
        prefix = "" if relative_dir == "." else relative_dir + "/"
        kept_dirs = []
        for name in sorted(subdirs):
            if not git and not prefix and name == GIT_DIR:
                continue
            if os.path.islink(os.path.join(directory, name)) or not _utf8(name):
                skipped.append(prefix + _shown(name))
            else:
                kept_dirs.append(name)
        subdirs[:] = kept_dirs
        for name in sorted(names):
            if name.startswith(".") and name.endswith(".tmp"):
                continue
            info = os.lstat(os.path.join(directory, name))
            if not _utf8(name) or not stat.S_ISREG(info.st_mode):
                skipped.append(prefix + _shown(name))
            else:
                files.append(prefix + name)
    return sorted(files), sorted(skipped)


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def build_store(stores_root: Path, identity: StoreIdentity, files: Iterable[tuple[str, bytes]],
                revisions: Iterable[KeptRevision], *, finish: Callable[[Path], None] | None = None) -> Path:
    """Build a complete store with ``identity`` from its vault ``files`` (vault-relative paths, already
    checked to stay inside the vault) and its kept ``revisions``, then rename it into place.

    ``finish`` runs on the built vault before the rename (the git history is restored there).  A failure
    anywhere removes the half-built directory; nothing is left under ``stores/<id>``.
    """
    stores_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    final = stores_root / identity.store_id
    if os.path.lexists(final):
        raise StoreUnavailable("a directory for this store already exists", store=identity.store_id)
    building = stores_root / f".{identity.store_id}.creating"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(mode=0o700)
    try:
        _fill(building, identity, files, revisions)
        if finish is not None:
            finish(building / VAULT_DIR)
        fsync_dir(building)
        os.replace(building, final)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    fsync_dir(stores_root)
    return final


def _fill(building: Path, identity: StoreIdentity, files: Iterable[tuple[str, bytes]],
          revisions: Iterable[KeptRevision]) -> None:
    for partition in identity.partitions:
        partition_dir(partition)  # refuses a name that is no partition
    vault = building / VAULT_DIR
    vault.mkdir()
    written = []
    for relpath, data in files:
        target = vault / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as handle:  # "x": two entries for one path never overwrite each other
            handle.write(data)
        written.append(target)
    _make_durable([*written, *_directories(vault)])
    database = Database.open(building / STATE_DB, create=True, migrations=STATE_MIGRATIONS)
    try:
        with database.atomic():
            database.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [
                ("store_id", identity.store_id), ("vault_id", identity.vault_id), ("created_at", identity.created_at)])
            database.executemany(
                "INSERT INTO partitions (partition, identity, created_at) VALUES (?, ?, ?)",
                [(partition, marker, identity.created_at) for partition, marker in sorted(identity.partitions.items())
                 if partition != PRIVATE_SCOPE])
            database.executemany(
                "INSERT OR IGNORE INTO revisions (partition, record_id, revision, sha256, content, path, origin, "
                "publication_id, agent, observed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                ((kept.partition, kept.record_id, kept.revision, kept.sha256, kept.content, kept.path, kept.origin,
                  kept.publication_id, kept.agent, kept.observed_at) for kept in revisions))
    finally:
        database.close()
    # A fresh database has applied no publication: the restored manifest's checkpoint is 0 to match it.
    write_manifest(building / MANIFEST, Manifest(identity.store_id, identity.vault_id, identity.created_at,
                                                 {PRIVATE_SCOPE: identity.partitions[PRIVATE_SCOPE]}, 0))


def _make_durable(paths: list[Path]) -> None:
    """fsync every file and directory before the store is renamed into place.  Concurrent fsyncs share the
    file system's journal commits, so a vault of thousands of files is made durable in a fraction of the
    time one fsync after another takes."""
    def sync(path: Path) -> None:
        if path.is_dir():
            fsync_dir(path)
        else:
            with open(path, "rb+") as handle:
                os.fsync(handle.fileno())

    with ThreadPoolExecutor(max_workers=_SYNC_WORKERS, thread_name_prefix="restore-fsync") as pool:
        for _ in pool.map(sync, paths):
            pass


def _directories(root: Path) -> Iterator[Path]:
    for directory, _, _ in os.walk(root):
        yield Path(directory)
