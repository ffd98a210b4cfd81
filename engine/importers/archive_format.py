"""The portable store archive's format: a zip file whose manifest lists every other member with its hash.

    knowledge-archive.json   the manifest: format and version, engine version, created time, the store
                             (id, vault id, kind, name, partitions), every file with sha256 and size,
                             the kept revisions, conversation owners and what history the archive holds
    vault/<path>             every file of the vault as it was on disk
    revisions/<sha256>       the exact bytes of each revision the revision archive kept (one per content)
    history/vault.bundle     the vault's git history as a git bundle
    history/.git/<path>      or the history parts of the vault's .git folder (HEAD, packed-refs, refs/,
                             objects/), copied where git was not installed

``ArchiveReader`` checks an archive whole before anyone writes from it: the zip's bounds (members, total
size, compression ratios: ``zipped``), the manifest's shape, every member's name (nothing absolute, no
``..``, no symlink, nothing unlisted, nothing listed and absent), every member's size and sha256, that the
partition markers name the manifest's store, that each source descriptor's media type has a media type's
form, and that a copied git folder holds objects and refs only (``archive_history``).  Any problem is one
``InvalidParams`` (a bound: ``LimitExceeded``) naming the archive file and the member.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, overload

from ..core.answers import JsonObject
from ..core.errors import InvalidParams, KnowledgeError
from ..core.ids import (
    STORE_PREFIX, VAULT_PREFIX, canonical_session_id, is_agent_name, is_generated_id, is_record_id,
)
from ..state.config import is_store_name
from ..state.registry import Conversation
from ..store.githistory import HISTORY_PARTS, is_history_part
from ..store.portable import KeptRevision, StoreIdentity
from ..store.store import partition_dir
from ..vault.evidence import DESCRIPTOR_MAX_BYTES, DESCRIPTOR_SUFFIX, SOURCES_DIR, is_media_type
from ..vault.frontmatter import load_yaml
from ..vault.manifest import PARTITION_MARKER
from ..vault.records import PRIVATE_SCOPE
from .archive_history import check_git_folder, is_copied_history_part
from .zipped import ZIP_ERRORS, BoundedZip

ARCHIVE_FORMAT = "knowledge-store-archive"
FORMAT_VERSION = 1
MANIFEST_NAME = "knowledge-archive.json"
MANIFEST_MAX_BYTES = 256 * 1024 * 1024
VAULT_PREFIX_DIR = "vault/"
REVISIONS_DIR = "revisions/"
HISTORY_DIR = "history/"
BUNDLE_NAME = HISTORY_DIR + "vault.bundle"
GIT_FOLDER_PREFIX = HISTORY_DIR + ".git/"
HISTORY_KINDS = ("bundle", "git-folder")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class ArchivedFile:
    path: str  # the member's name in the archive
    sha256: str
    size: int


@dataclass(frozen=True)
class ArchivedStore:
    """The store an archive holds, as its manifest describes it."""

    identity: StoreIdentity
    kind: str  # "isolated" or "named"
    name: str | None
    created_for: str | None


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def safe_member_name(name: str) -> bool:
    """Whether ``name`` stays inside the directory it is restored into: relative, ``/``-separated, with no
    empty, ``.`` or ``..`` part, no backslash, drive or control character."""
    if not name or name.startswith("/") or "\\" in name or ":" in name.split("/")[0]:
        return False
    if _CONTROL.search(name):
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def history_member_path(member: str) -> str:
    """The vault-relative path of a copied ``.git`` folder's member."""
    return member.removeprefix(HISTORY_DIR)


class ArchiveReader:
    """An archive opened and checked whole; members are read again (and re-hashed) when restored."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._zip = BoundedZip(path)  # its central directory checked against the bounds first
        except FileNotFoundError as exc:
            raise InvalidParams(f"{path}: no such archive", file=str(path)) from exc
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise InvalidParams(f"{path} is not a readable archive (truncated or not a zip file): {exc}",
                                file=str(path)) from exc
        try:
            self.manifest = self._read_manifest()
            self.files = _files(self.manifest, self._refuse)
            self._check_members()
            self.store = _store(self.manifest, self._refuse)
            self.revisions_listed = _revisions(self.manifest, self.files, self._refuse)
            self.conversations = _conversations(self.manifest, self._refuse)
            self.history = _history(self.manifest, self.files, self._refuse)
            for entry in self.files.values():
                self._verified(entry, keep=False)
            self._check_markers()
            self._check_descriptors()
            if self.history == "git-folder":
                check_git_folder({path.removeprefix(GIT_FOLDER_PREFIX): path for path in self.files
                                  if path.startswith(GIT_FOLDER_PREFIX)}, self.read, self._refuse)
        except BaseException:
            self._zip.close()
            raise

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> "ArchiveReader":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _refuse(self, message: str, member: str | None = None) -> InvalidParams:
        where = f" ({member})" if member else ""
        return InvalidParams(f"{self.path}{where}: {message}; nothing was restored", file=str(self.path),
                             member=member)

    # --- reading ----------------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        """A listed member's bytes, checked against the manifest again."""
        return self._verified(self.files[path], keep=True)

    def copy(self, path: str, target: Path) -> None:
        """Write a listed member to a new file ``target`` a chunk at a time, checked against the manifest again
        (a history bundle of any size is never whole in memory)."""
        with open(target, "xb") as handle:
            self._verified(self.files[path], keep=False, out=handle)

    def vault_files(self) -> Iterator[tuple[str, bytes]]:
        """(vault-relative path, bytes) of every vault file, then of a copied ``.git`` folder."""
        for path in sorted(self.files):
            if path.startswith(VAULT_PREFIX_DIR):
                yield path.removeprefix(VAULT_PREFIX_DIR), self.read(path)
        if self.history == "git-folder":
            for path in sorted(self.files):
                if path.startswith(GIT_FOLDER_PREFIX):
                    yield history_member_path(path), self.read(path)

    def revisions(self) -> Iterator[KeptRevision]:
        for listed, member in self.revisions_listed:
            content = self.read(member)
            yield KeptRevision(listed["partition"], listed["recordId"], listed["revision"], listed["sha256"],
                               content, listed["path"], listed["origin"], listed.get("publicationId"),
                               listed.get("agent"), listed["observedAt"])

    def vault_digests(self) -> dict[str, str]:
        """vault-relative path -> sha256 of every vault file the archive holds."""
        return {path.removeprefix(VAULT_PREFIX_DIR): entry.sha256 for path, entry in self.files.items()
                if path.startswith(VAULT_PREFIX_DIR)}

    # --- checks -----------------------------------------------------------------------------

    def _read_manifest(self) -> JsonObject:
        try:
            info = self._zip.zip.getinfo(MANIFEST_NAME)
        except KeyError:
            raise self._refuse(f"the archive has no {MANIFEST_NAME}") from None
        if info.file_size > MANIFEST_MAX_BYTES:
            raise self._refuse(f"the manifest is larger than {MANIFEST_MAX_BYTES} bytes", MANIFEST_NAME)
        try:
            data = json.loads(self._zip.read(MANIFEST_NAME, MANIFEST_MAX_BYTES).decode("utf-8"))
        except (*ZIP_ERRORS, ValueError, RecursionError) as exc:
            raise self._refuse(f"the manifest cannot be read: {exc}", MANIFEST_NAME) from exc
        if not isinstance(data, dict) or data.get("format") != ARCHIVE_FORMAT:
            raise self._refuse(f"not a Knowledge Desk store archive (format must be {ARCHIVE_FORMAT})", MANIFEST_NAME)
        version = data.get("formatVersion")
        if isinstance(version, bool) or not isinstance(version, int):
            raise self._refuse("formatVersion must be an integer", MANIFEST_NAME)
        if version != FORMAT_VERSION:
            raise self._refuse(f"format version {version} is not {FORMAT_VERSION}, the one this release reads",
                               MANIFEST_NAME)
        return data

    def _check_members(self) -> None:
        seen: set[str] = set()
        for info in self._zip.zip.infolist():
            name = info.filename
            if not safe_member_name(name.rstrip("/") if info.is_dir() else name):
                raise self._refuse("the path leaves the store (absolute, '..' or a drive)", name)
            if stat.S_ISLNK(info.external_attr >> 16):
                raise self._refuse("a symlink; archives hold regular files only", name)
            if name in seen:
                raise self._refuse("the archive holds this member twice", name)
            seen.add(name)
            if info.is_dir() or name == MANIFEST_NAME:
                continue
            if name not in self.files:
                raise self._refuse("a member the manifest does not list", name)
            if info.file_size != self.files[name].size:
                raise self._refuse(f"{info.file_size} bytes where the manifest says {self.files[name].size}", name)
        for name in self.files:
            if name not in seen:
                raise self._refuse("listed in the manifest but missing from the archive (truncated?)", name)
        clashes = [name for name in self.files if any(parent in self.files for parent in _parents(name))]
        if clashes:
            raise self._refuse("a file where another member needs a directory", clashes[0])

    def _verified(self, entry: ArchivedFile, *, keep: bool, out: Any = None) -> bytes:
        """A member streamed and hashed (its bytes counted against the zip's bounds as they come), refused
        unless it is the size and sha256 the manifest lists; its bytes with ``keep`` (held once), written to
        ``out`` as they come when given."""
        digest = hashlib.sha256()
        kept = io.BytesIO() if keep else None
        size = 0
        try:
            for chunk in self._zip.chunks(entry.path):
                size += len(chunk)
                if size > entry.size:
                    break
                digest.update(chunk)
                if kept is not None:
                    kept.write(chunk)
                if out is not None:
                    out.write(chunk)
        except KnowledgeError:
            raise
        except (*ZIP_ERRORS, ValueError) as exc:  # a bad CRC, a truncated member
            raise self._refuse(f"the member cannot be read: {exc}", entry.path) from exc
        if size != entry.size:
            raise self._refuse(f"{size} bytes or more where the manifest says {entry.size}", entry.path)
        if digest.hexdigest() != entry.sha256:
            raise self._refuse("its sha256 does not match the manifest (the archive was changed)", entry.path)
        return kept.getvalue() if kept is not None else b""

    def _check_descriptors(self) -> None:
        """Each source descriptor's media type has a media type's form (``type/subtype``, parameters
        optional): the window and every reader show it as the descriptor says."""
        for path, entry in self.files.items():
            if not (path.startswith(VAULT_PREFIX_DIR) and path.endswith(DESCRIPTOR_SUFFIX)
                    and f"/{SOURCES_DIR}/" in f"/{path}" and entry.size <= DESCRIPTOR_MAX_BYTES):
                continue
            try:
                descriptor = load_yaml(self.read(path).decode("utf-8"), what="source descriptor")
            except (UnicodeDecodeError, KnowledgeError):
                continue  # an unreadable descriptor is the vault's finding, as on any disk
            media_type = descriptor.get("media_type") if isinstance(descriptor, dict) else None
            if media_type is not None and not is_media_type(media_type):
                raise self._refuse("the source descriptor's media_type is not a media type (type/subtype, "
                                   "parameters optional, RFC 6838 characters)", path)

    def _check_markers(self) -> None:
        """Each partition of the manifest has its marker, naming this store and identity: a restored store
        whose markers disagree would be unavailable the moment it opened."""
        identity = self.store.identity
        for partition, marker_identity in identity.partitions.items():
            member = f"{VAULT_PREFIX_DIR}{partition_dir(partition)}/{PARTITION_MARKER}"
            if member not in self.files:
                raise self._refuse(f"the {partition} partition has no identity marker", member)
            try:
                marker = json.loads(self.read(member).decode("utf-8"))
            except ValueError as exc:
                raise self._refuse(f"the partition marker is not JSON: {exc}", member) from exc
            if marker != {"storeId": identity.store_id, "partition": partition, "identity": marker_identity}:
                raise self._refuse("the partition marker names another store or identity than the manifest",
                                   member)
        listed = {f"{VAULT_PREFIX_DIR}{partition_dir(p)}/" for p in identity.partitions}
        stray = [path for path in self.files if path.startswith(f"{VAULT_PREFIX_DIR}conversations/")
                 and not any(path.startswith(prefix) for prefix in listed)]
        if stray:
            raise self._refuse("a conversation directory the manifest does not list as a partition", stray[0])


def _parents(name: str) -> Iterator[str]:
    parts = name.split("/")
    for end in range(1, len(parts)):
        yield "/".join(parts[:end])


def _files(manifest: dict[str, Any], refuse: Any) -> dict[str, ArchivedFile]:
    listed = manifest.get("files")
    if not isinstance(listed, list):
        raise refuse("files must be a list", MANIFEST_NAME)
    files: dict[str, ArchivedFile] = {}
    for entry in listed:
        if not isinstance(entry, dict) or set(entry) != {"path", "sha256", "size"}:
            raise refuse("each file is {path, sha256, size}", MANIFEST_NAME)
        path, digest, size = entry["path"], entry["sha256"], entry["size"]
        if not isinstance(path, str) or not safe_member_name(path):
            raise refuse("the path leaves the store (absolute, '..' or a drive)", str(path))
        if not path.startswith((VAULT_PREFIX_DIR, REVISIONS_DIR, HISTORY_DIR)) or path == MANIFEST_NAME:
            raise refuse("a file outside vault/, revisions/ and history/", path)
        if path.startswith(VAULT_PREFIX_DIR + ".git/"):
            raise refuse("vault/.git is restored from history/ only", path)
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise refuse("sha256 must be 64 lowercase hex digits", path)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise refuse("size must be a non-negative integer", path)
        if path in files:
            raise refuse("the manifest lists this file twice", path)
        files[path] = ArchivedFile(path, digest, size)
    return files


@overload
def _text(data: dict[str, Any], key: str, refuse: Any) -> str: ...
@overload
def _text(data: dict[str, Any], key: str, refuse: Any, *, optional: bool) -> str | None: ...


def _text(data: dict[str, Any], key: str, refuse: Any, *, optional: bool = False) -> str | None:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise refuse(f"{key} must be a non-empty string", MANIFEST_NAME)
    return value


def _store(manifest: dict[str, Any], refuse: Any) -> ArchivedStore:
    store = manifest.get("store")
    if not isinstance(store, dict):
        raise refuse("store must be an object", MANIFEST_NAME)
    store_id, vault_id = _text(store, "storeId", refuse), _text(store, "vaultId", refuse)
    if not (is_generated_id(store_id) and store_id.startswith(STORE_PREFIX + "_")):
        raise refuse("storeId is not a store id", MANIFEST_NAME)
    if not (is_generated_id(vault_id) and vault_id.startswith(VAULT_PREFIX + "_")):
        raise refuse("vaultId is not a vault id", MANIFEST_NAME)
    kind = store.get("kind")
    name = _text(store, "name", refuse, optional=True)
    created_for = _text(store, "createdFor", refuse, optional=True)
    if kind not in ("isolated", "named") or (kind == "named") != (name is not None):
        raise refuse("kind must be 'isolated', or 'named' with a name", MANIFEST_NAME)
    if name is not None and not is_store_name(name):
        raise refuse("name is not a store name", MANIFEST_NAME)
    if created_for is not None and not is_agent_name(created_for):
        raise refuse("createdFor is not an agent name", MANIFEST_NAME)
    partitions = store.get("partitions")
    if not isinstance(partitions, dict) or not isinstance(partitions.get(PRIVATE_SCOPE), str) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in partitions.items()):
        raise refuse("partitions must map each partition (private first of all) to its identity", MANIFEST_NAME)
    for partition in partitions:
        try:
            partition_dir(partition)
        except InvalidParams:
            raise refuse(f"{partition!r} is not a partition", MANIFEST_NAME) from None
    identity = StoreIdentity(store_id, vault_id, _text(store, "createdAt", refuse), dict(partitions))
    return ArchivedStore(identity, kind, name, created_for)


_REVISION_KEYS = {"file", "partition", "recordId", "revision", "sha256", "path", "origin", "publicationId",
                  "agent", "observedAt"}


def _revisions(manifest: dict[str, Any], files: dict[str, ArchivedFile],
               refuse: Any) -> list[tuple[dict[str, Any], str]]:
    listed = manifest.get("revisions")
    if not isinstance(listed, list):
        raise refuse("revisions must be a list", MANIFEST_NAME)
    partitions = manifest["store"]["partitions"]
    revisions = []
    for entry in listed:
        if not isinstance(entry, dict) or set(entry) - _REVISION_KEYS:
            raise refuse(f"each revision holds only {sorted(_REVISION_KEYS)}", MANIFEST_NAME)
        member = entry.get("file")
        if not isinstance(member, str) or not member.startswith(REVISIONS_DIR) or member not in files:
            raise refuse("a revision names no revisions/ file of the archive", str(member))
        for key in ("recordId", "path", "observedAt"):
            _text(entry, key, refuse)
        if not is_record_id(entry["recordId"]):
            raise refuse("a revision's recordId is not a record id", member)
        if not safe_member_name(entry["path"]):
            raise refuse("a revision's path leaves its partition (absolute, '..' or a drive)", member)
        number = entry.get("revision")
        if isinstance(number, bool) or not isinstance(number, int):
            raise refuse("a revision's number must be an integer", member)
        if entry.get("partition") not in partitions:
            raise refuse("a revision of a partition the store does not have", member)
        if entry.get("origin") not in ("publication", "external", "sync"):
            raise refuse("a revision's origin is 'publication', 'external' or 'sync'", member)
        if entry.get("sha256") != files[member].sha256:
            raise refuse("a revision's sha256 is not its file's", member)
        for key in ("publicationId", "agent"):
            _text(entry, key, refuse, optional=True)
        revisions.append((entry, member))
    return revisions


def _conversations(manifest: dict[str, Any], refuse: Any) -> list[Conversation]:
    listed = manifest.get("conversations", [])
    if not isinstance(listed, list):
        raise refuse("conversations must be a list", MANIFEST_NAME)
    owners = []
    for entry in listed:
        if not isinstance(entry, dict) or canonical_session_id(entry.get("sessionId")) != entry.get("sessionId") \
                or not is_agent_name(entry.get("agent")) \
                or not _SHA256.fullmatch(str(entry.get("sessionKeySha256"))):
            raise refuse("each conversation owner is {sessionId, agent, sessionKeySha256, createdAt}", MANIFEST_NAME)
        owners.append(Conversation(entry["sessionId"], entry["agent"], entry["sessionKeySha256"],
                                        _text(entry, "createdAt", refuse)))
    return owners


def _history(manifest: dict[str, Any], files: dict[str, ArchivedFile], refuse: Any) -> str | None:
    history = manifest.get("history")
    if not isinstance(history, dict):
        raise refuse("history must be an object", MANIFEST_NAME)
    kind = history.get("kind")
    if kind is not None and kind not in HISTORY_KINDS:
        raise refuse(f"history.kind must be one of {list(HISTORY_KINDS)} or null", MANIFEST_NAME)
    held = {path for path in files if path.startswith(HISTORY_DIR)}
    if kind == "bundle" and held != {BUNDLE_NAME}:
        raise refuse(f"a bundle history is exactly {BUNDLE_NAME}", MANIFEST_NAME)
    if kind == "git-folder":
        for path in held:
            part = path.removeprefix(GIT_FOLDER_PREFIX)
            if not path.startswith(GIT_FOLDER_PREFIX) or not is_history_part(part):
                raise refuse(f"a copied git folder holds only {', '.join(HISTORY_PARTS)} under {GIT_FOLDER_PREFIX}",
                             path)
            if not is_copied_history_part(part):
                raise refuse("a copied git folder holds objects and refs only (no alternates, hooks, config or "
                             "other files that point elsewhere or run code)", path)
    if kind is None and held:
        raise refuse("history files without a history kind", sorted(held)[0])
    return kind
