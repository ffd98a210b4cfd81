"""A portable archive of one store: ``knowledge export`` writes it, ``knowledge import archive`` restores it.

An archive holds what the owner's knowledge is: the vault's files (records, retained sources, ontology
extensions, partition markers) exactly as on disk, every revision the revision archive keeps, who owns
each conversation partition (agent and session-key hash), and, when asked, the git history.  It holds
nothing that grants access: no agent tokens or token hashes, no operator token, no grants, no registry
secrets, no config.json.  What can be rebuilt is left out too: the catalog, the search and vector
indexes, the publication journal and the recall gate's log; the engine rebuilds the catalog and the
index from the vault when the restored store first opens.  The format is in ``archive_format``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from ..core.answers import TypedDict
from ..core.errors import Conflict, InvalidParams, NotFound
from ..core.files import AtomicFile
from ..core.ids import format_timestamp, is_agent_name, utc_now
from ..runtime import StoreRuntime
from ..service import Engine
from ..state.config import is_store_name
from ..state.registry import StoreRecord
from ..store.githistory import HISTORY_PARTS, GitError, GitHistory, adopt_copied_history, is_history_part
from ..store.portable import GIT_DIR, StoreIdentity, build_store, kept_revisions, store_identity, vault_files
from .answers import (
    ArchivedMember, ArchivedRevision, ExportHistory, ExportResult, Manifest, RestoredHistory, RestoreResult,
)
from .archive_format import (
    ARCHIVE_FORMAT, BUNDLE_NAME, FORMAT_VERSION, HISTORY_DIR, MANIFEST_NAME, REVISIONS_DIR, VAULT_PREFIX_DIR,
    ArchiveReader, sha256_of,
)
from .locomo import DEFAULT_AGENT
from .zipped import MAX_MEMBER_RATIO, MAX_TOTAL_RATIO

__all__ = ["ArchiveReader", "export_archive", "restore_archive", "select_store"]


def select_store(engine: Engine, *, store: str | None = None, agent: str | None = None) -> StoreRecord:
    """The store ``--store`` (a named store's name, or any store's id) or ``--agent`` (that agent's effective
    store) names; with neither, the effective store of the default agent ``main``."""
    return engine.resolver.select(store=store, agent=agent, default_agent=DEFAULT_AGENT)


# --- export -------------------------------------------------------------------------------------


class _Members:
    """The archive's members as they are written, each listed once with its sha256 and size."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.listed: dict[str, ArchivedMember] = {}

    def add(self, name: str, data: bytes) -> str:
        if name not in self.listed:
            info = zipfile.ZipInfo(name, date_time=utc_now().timetuple()[:6])
            info.compress_type = zipfile.ZIP_STORED if _too_compressible(data) else zipfile.ZIP_DEFLATED
            info.external_attr = 0o100644 << 16  # a regular file, so no reader takes it for a link
            self.archive.writestr(info, data)
            self.listed[name] = {"path": name, "sha256": sha256_of(data), "size": len(data)}
        return name


# A restore refuses a member that expands more than MAX_MEMBER_RATIO times, and an archive more than
# MAX_TOTAL_RATIO times (zipped.py): a file that compresses beyond this is stored as it is, so every archive
# the engine writes is one it restores.  zlib's fastest level, a cheap estimate, compresses a little less
# than the archive's deflate: the margin below both bounds covers the difference.
EXPORT_MAX_RATIO = min(MAX_MEMBER_RATIO, MAX_TOTAL_RATIO) // 2


def _too_compressible(data: bytes) -> bool:
    return len(data) > EXPORT_MAX_RATIO * len(zlib.compress(data, 1))


def export_archive(engine: Engine, out: Path, *, store: str | None = None, agent: str | None = None,
                   with_history: bool = False) -> ExportResult:
    """Write the chosen store's archive to ``out`` (a new file, written whole or not at all)."""
    record = select_store(engine, store=store, agent=agent)
    out = Path(out).absolute()
    if os.path.lexists(out):
        raise Conflict(f"{out} already exists; nothing was written", file=str(out))
    if not out.parent.is_dir():
        raise NotFound(f"{out.parent} is not a directory; nothing was written", file=str(out))
    runtime = engine.runtime(record)
    if with_history and runtime.git is not None:
        runtime.checkpoint()  # every acknowledged publication is committed before the history is copied
    with AtomicFile(out, mode=0o600) as handle, \
            zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        members = _Members(archive)
        collected = engine.maintain(record, lambda runtime: _collect(runtime, members))
        history = _copy_history(runtime, members) if with_history else {
            "kind": None, "note": "not asked for (--with-history)"}
        manifest = _manifest(engine, record, collected, history, members)
        archive.writestr(MANIFEST_NAME, json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8"))
    return {"archive": str(out), "storeId": record.store_id, "kind": record.kind, "name": record.name,
            "files": collected["files"], "revisions": len(collected["revisions"]), "skipped": collected["skipped"],
            "conversations": len(manifest["conversations"]), "history": history}


class _Collected(TypedDict):
    """What an export collects on the store's lane: its identity, the vault's files and the kept revisions."""
    identity: StoreIdentity
    files: int
    skipped: list[str]
    revisions: list[ArchivedRevision]


def _collect(runtime: StoreRuntime, members: _Members) -> _Collected:
    """On the lane: every partition caught up (an outside edit is kept as a revision first), then the vault's
    files and the kept revisions copied, with no publication between them."""
    store = runtime.store
    for partition in store.partitions():
        runtime.prepare(partition)
    identity = store_identity(store)
    files, skipped = vault_files(store.vault)
    for relpath in files:
        members.add(VAULT_PREFIX_DIR + relpath, _read_regular(store.vault / relpath))
    revisions = []
    for kept in kept_revisions(store):
        member = members.add(REVISIONS_DIR + sha256_of(kept.content), kept.content)
        revisions.append({"file": member, "partition": kept.partition, "recordId": kept.record_id,
                          "revision": kept.revision, "sha256": sha256_of(kept.content), "path": kept.path,
                          "origin": kept.origin, "publicationId": kept.publication_id, "agent": kept.agent,
                          "observedAt": kept.observed_at})
    return {"identity": identity, "files": len(files), "skipped": skipped, "revisions": revisions}


def _read_regular(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _copy_history(runtime: StoreRuntime, members: _Members) -> ExportHistory:
    """The git history as a bundle where git is installed, else the vault's ``.git`` folder as it is."""
    vault = runtime.store.vault
    git_dir = vault / GIT_DIR
    if runtime.git is not None:
        with tempfile.TemporaryDirectory(prefix="knowledge-export-") as scratch:
            bundle = Path(scratch) / "vault.bundle"
            try:
                made = runtime.git.bundle(bundle)
            except GitError as exc:
                raise InvalidParams(f"the history cannot be bundled: {exc}; nothing was written") from exc
            if not made:
                return {"kind": None, "note": "the vault has no git history yet: the archive holds none"}
            members.add(BUNDLE_NAME, bundle.read_bytes())
        return {"kind": "bundle", "head": runtime.git.head(), "note": f"git history in {BUNDLE_NAME}"}
    if git_dir.is_dir() and not git_dir.is_symlink():
        files, skipped = vault_files(vault, git=True)
        for relpath in files:
            if is_history_part(relpath.removeprefix(GIT_DIR + "/")):
                members.add(HISTORY_DIR + relpath, _read_regular(vault / relpath))
        return {"kind": "git-folder", "skipped": skipped,
                "note": f"git is not installed: the vault's history (the .git folder's {', '.join(HISTORY_PARTS)}) "
                        f"is copied under {HISTORY_DIR}.git/"}
    return {"kind": None, "note": "git is not installed and the vault has no .git folder: the archive holds no "
                                  "history (the kept revisions are in it)"}


def _manifest(engine: Engine, record: StoreRecord, collected: _Collected, history: ExportHistory,
              members: _Members) -> Manifest:
    identity = collected["identity"]
    configured = engine.settings.current().stores.get(record.name or "")
    store = {"storeId": identity.store_id, "vaultId": identity.vault_id, "createdAt": identity.created_at,
             "kind": record.kind, "name": record.name, "createdFor": record.created_for,
             "label": configured.label if configured else None,
             "agents": list(configured.agents) if configured else (
                 [record.created_for] if record.created_for else []),
             "partitions": identity.partitions}
    conversations = [{"sessionId": owner.session_id, "agent": owner.agent, "sessionKeySha256": owner.session_key_hash,
                      "createdAt": owner.created_at}
                     for owner in engine.registry.conversations(record.store_id)]
    return {"format": ARCHIVE_FORMAT, "formatVersion": FORMAT_VERSION, "engineVersion": __version__,
            "createdAt": format_timestamp(utc_now()), "store": store, "history": history,
            "conversations": conversations, "revisions": collected["revisions"],
            "files": sorted(members.listed.values(), key=lambda entry: entry["path"])}


# --- restore ------------------------------------------------------------------------------------


def restore_archive(engine: Engine, reader: ArchiveReader, *, agent: str | None = None,
                    store_name: str | None = None) -> RestoreResult:
    """Restore a checked archive into the engine's state directory as a new store with the same identity.

    ``store_name`` restores it as that named store, ``agent`` as that agent's own store; with neither it
    is restored as it was (a named store under its name, an isolated one bound to its agent).  The same
    archive restored again creates nothing; another store with the same id, a name or an agent's own
    store already taken, are refused with nothing written.
    """
    archived = reader.store
    if agent is not None and store_name is not None:
        raise InvalidParams("restore as a named store (--store) or as an agent's own store (--agent), not both",
                            field="store")
    if store_name is not None:
        if not is_store_name(store_name):
            raise InvalidParams("store names are 1-64 lowercase letters, digits, '-' or '_'", field="store")
        kind, name, owner = "named", store_name, None
    elif agent is not None:
        if not is_agent_name(agent):
            raise InvalidParams("agent names are 1-64 lowercase letters, digits, '-' or '_'", field="agent")
        kind, name, owner = "isolated", None, agent
    else:
        kind, name, owner = archived.kind, archived.name, archived.created_for
    if kind == "isolated" and owner is None:
        raise InvalidParams("the archived store belongs to no agent; restore it with --agent or --store",
                            field="agent")
    store_id = archived.identity.store_id
    summary: dict[str, Any] = {"archive": str(reader.path), "storeId": store_id, "kind": kind, "name": name,
                               "agent": owner}
    existing = engine.registry.store(store_id)
    if (existing.kind if existing is not None else kind) == "isolated":
        holder = existing.created_for if existing is not None else owner
        summary["agentRegistered"] = holder is not None and engine.registry.agent(holder) is not None
    if existing is not None:
        differs = _first_difference(existing, reader.vault_digests())
        if differs is not None:
            raise Conflict(f"store {store_id} already exists in {engine.state.root} with other content "
                           f"({differs}); nothing was restored", store=store_id, file=differs)
        return {**summary, "kind": existing.kind, "name": existing.name, "created": False,
                "note": "this archive is already restored here: nothing was created"}
    if kind == "named" and engine.registry.store_named(name or "") is not None:
        raise Conflict(f"a store named {name!r} already exists; restore under another name with --store",
                       store=name)
    if kind == "isolated" and owner is not None:
        own = engine.registry.own_store_of(owner)
        if own is not None:
            raise Conflict(f"agent {owner!r} already has its own store {own.store_id}; restore for another agent "
                           "with --agent, or as a named store with --store", agent=owner, store=own.store_id)
    finish, history = _history_restorer(engine, reader)
    final = build_store(engine.state.stores, archived.identity, reader.vault_files(), reader.revisions(),
                        finish=finish)
    try:
        record = engine.registry.new_store(store_id=store_id, kind=kind, name=name, created_for=owner)
        engine.registry.restore_conversation_owners(store_id, reader.conversations)
    except BaseException:
        shutil.rmtree(final, ignore_errors=True)
        raise
    records = engine.maintain(record, lambda runtime: runtime.rebuild_catalogue())
    return {**summary, "created": True, "files": len(reader.vault_digests()),
            "revisions": len(reader.revisions_listed), "conversations": len(reader.conversations),
            "records": records, "history": history}


def _first_difference(record: StoreRecord, archived: dict[str, str]) -> str | None:
    """The first vault file (archive order) where the existing store differs from the archive, or None."""
    vault = record.path / "vault"
    if not vault.is_dir():
        return "the store's vault is missing"
    present, _ = vault_files(vault)
    for relpath in sorted(set(present) | set(archived)):
        if relpath not in archived:
            return f"vault/{relpath} is not in the archive"
        if relpath not in present:
            return f"vault/{relpath} is missing from the store"
        if sha256_of(_read_regular(vault / relpath)) != archived[relpath]:
            return f"vault/{relpath} differs"
    return None


def _history_restorer(engine: Engine, reader: ArchiveReader
                      ) -> tuple[Callable[[Path], None] | None, RestoredHistory]:
    """What restores the archive's history into the built vault, and what the summary says of it."""
    if reader.history == "git-folder":  # its files come with the vault's
        return lambda vault: adopt_copied_history(vault, engine.git_executable), {"restored": True,
                                                                                 "kind": "git-folder"}
    if reader.history is None:
        return None, {"restored": False, "kind": None, "note": "the archive holds no git history"}
    executable = engine.git_executable
    if executable is None:
        return None, {"restored": False, "kind": "bundle",
                      "note": f"git is not installed here: the archive's history ({BUNDLE_NAME}) was not "
                              "restored; the records and their kept revisions were"}
    outcome: RestoredHistory = {"restored": True, "kind": "bundle"}

    def restore(vault: Path) -> None:
        bundle = vault.parent / "history.bundle"
        reader.copy(BUNDLE_NAME, bundle)
        try:
            outcome["head"] = GitHistory(vault, executable).restore_bundle(bundle)
        except GitError as exc:
            raise InvalidParams(f"{reader.path} ({BUNDLE_NAME}): the history cannot be restored: {exc}; "
                                "nothing was restored", file=str(reader.path), member=BUNDLE_NAME) from exc
        finally:
            bundle.unlink()

    return restore, outcome
