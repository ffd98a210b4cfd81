"""Retaining files as evidence without writing a record.

Two tools put an original file under the caller's partition's ``sources/``
with its immutable descriptor, so later claims, relationships and pages can
cite it (``evidence: [{"source": <id>}]``):

- ``knowledge_attach`` takes the bytes inline, base64-encoded: the form for
  remote or sandboxed clients.  At most ``ATTACH_MAX_BYTES`` decoded, so
  the encoded request still fits one 8 MiB socket message.
- ``knowledge_attach_file`` names a file on this machine.  Only regular,
  singly linked files inside a workspace root the owner configured
  (``config.json``: ``"attachments": {"workspaceRoots": [...]}``) are read;
  no component of the path may be a symlink.  The file is hashed as a
  stream before anything is loaded, and the caller's ``sha256`` must match.

Both publish through the ordinary path (journal, atomic install, receipt,
idempotent ``requestId``) and need a caller allowed to write its partition.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import mimetypes
import os
import re
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, cast

from .answers import SourceReceipt, SourceSummary
from .credentials import texts_of
from ..core.errors import (
    Conflict, Denied, ForeignReference, InvalidParams, LimitExceeded, NotFound, RuntimeDisabled,
)
from ..vault.evidence import MEDIA_TYPE, SourceDescriptor, clean_filename, retained_path_for
from ..core.files import UnsafePath
from ..core.methods import Method
from ..core.ids import SOURCE_PREFIX, format_timestamp, new_id, utc_now
from ..core.params import Params, RecordId, RequestId, String, Value, check_size, refuse_controls
from .publication import FileWrite, Plan, request_hash

if TYPE_CHECKING:  # the engine calls in here; this module only needs types (the caller's from the layer above)
    from .open_store import OpenStore
    from ..access.authority import Authority, Caller, StoreEntry
    from ..state.config import SettingsSource
    from ..state.statedir import StateDir

    class AttachEngine(StoreEntry[OpenStore], Protocol):
        """What the attach tools need of the engine: the way into a store, the secret check, the
        workspace roots in the settings and the state directory (never read as a workspace)."""

        @property
        def settings(self) -> SettingsSource: ...

        @property
        def state(self) -> StateDir: ...

        def refuse_secrets(self, texts: Iterable[tuple[str, str | bytes]]) -> None: ...


# A socket message is at most 8 MiB (8,388,608 bytes).  6,000,000 bytes encode to
# 8,000,000 base64 characters, which leaves room for the JSON-RPC envelope.
ATTACH_MAX_BYTES = 6_000_000
ATTACH_MAX_ENCODED_CHARS = 4 * -(-ATTACH_MAX_BYTES // 3)
SOCKET_MESSAGE_MAX_BYTES = 8 * 1024 * 1024
# The publication journal keeps a file's exact bytes in state.sqlite until git has
# them (and the install needs them in memory), so attached files are bounded too.
ATTACH_FILE_MAX_BYTES = 256 * 1024 * 1024
FILE_PATH_MAX_CHARS = 4096
FILENAME_MAX_CHARS = 255
MEDIA_TYPE_MAX_CHARS = 255
DEFAULT_MEDIA_TYPE = "application/octet-stream"

_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_MEDIA_TYPE = MEDIA_TYPE  # the one form check, shared with an archive's descriptors (vault/evidence.py)
_BASE64_WHITESPACE = str.maketrans("", "", " \t\r\n")
_CHUNK = 1 << 20
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
# Walking a path one directory descriptor at a time is what makes "no symlink anywhere" hold
# even while someone swaps directories around; without dir_fd the tool is refused.
_DIR_FD = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd and bool(_DIRECTORY and _NOFOLLOW)

def _content(value: Any, field: str) -> bytes:
    """The decoded bytes of base64 ``content``: bounded before decoding, never empty."""
    if not isinstance(value, str):
        raise InvalidParams(f"{field} must be a base64 string", field=field)
    if len(value) > SOCKET_MESSAGE_MAX_BYTES:
        raise LimitExceeded(f"{field} is larger than one socket message; attach at most {ATTACH_MAX_BYTES} "
                            "bytes here, or use knowledge_attach_file", field=field, limit=ATTACH_MAX_BYTES)
    encoded = value.translate(_BASE64_WHITESPACE)
    if len(encoded) > ATTACH_MAX_ENCODED_CHARS:
        raise LimitExceeded(f"{field} decodes to more than {ATTACH_MAX_BYTES} bytes; use knowledge_attach_file "
                            "for larger files", field=field, limit=ATTACH_MAX_BYTES)
    try:
        content = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidParams(f"{field} is not valid base64 (standard alphabet, with padding)", field=field) from exc
    if not content:
        raise InvalidParams(f"{field} is empty; there is nothing to retain", field=field)
    return content


def _filename(value: Any, field: str = "filename") -> str | None:
    """A display filename: the name rule (one line, no control character, at most 255 characters in its
    last component), then ``clean_filename`` for the rest (no directories, not '.' or '..')."""
    if isinstance(value, str):
        refuse_controls(value, field, one_line=True)
        check_size(value.replace("\\", "/").rsplit("/", 1)[-1].strip(), field, FILENAME_MAX_CHARS)
    try:
        return clean_filename(value)
    except InvalidParams as exc:  # named where it was given (a page's ``evidence[0].filename``)
        raise InvalidParams(exc.message, field=field) from exc


def _path_parts(value: Any, field: str = "filePath") -> tuple[str, ...]:
    """An absolute path's components; '.', '..', empty parts and control characters are refused, never
    normalised."""
    if not isinstance(value, str) or not value:
        raise InvalidParams(f"{field} must be an absolute path of at most {FILE_PATH_MAX_CHARS} characters",
                            field=field)
    check_size(value, field, FILE_PATH_MAX_CHARS)
    refuse_controls(value, field, one_line=True)
    if not value.startswith("/"):
        raise InvalidParams(f"{field} must be absolute; the engine does not share the agent's working directory",
                            field=field)
    parts = tuple(value[1:].split("/"))
    if any(part in ("", ".", "..") for part in parts):
        raise UnsafePath(f"{field} must not contain '.', '..' or empty components", field=field, path=value)
    return parts


_REQUEST_ID = RequestId("requestId", required=True, description="a fresh id per attachment; a retry with the "
                        "same id and content returns the original receipt")
_FILENAME = Value("filename", _filename, json={"type": "string", "description": "display name kept "
                  "in the descriptor", "maxLength": FILENAME_MAX_CHARS})
_MEDIA_TYPE_SPEC = String("mediaType", MEDIA_TYPE_MAX_CHARS, pattern=_MEDIA_TYPE,
                          what="a type/subtype such as text/plain, without parameters",
                          description="type/subtype; guessed from the filename when omitted")
# A file sent inline: knowledge_attach's content, and a page's citation of a file it retains (``FILE_CITATION``).
_INLINE_FILE = Params(
    Value("content", _content, required=True, json={
        "type": "string", "contentEncoding": "base64",
        "description": f"the file, base64; at most {ATTACH_MAX_BYTES} bytes decoded"}),
    _FILENAME,
    _MEDIA_TYPE_SPEC,
    String("sha256", pattern=_SHA256, what="64 hexadecimal digits",
           description="verified against the decoded content when given"),
)
ATTACH = Params(_REQUEST_ID) + _INLINE_FILE
FILE_CITATION = _INLINE_FILE.optional()
ATTACH_FILE = Params(
    _REQUEST_ID,
    Value("filePath", _path_parts, required=True, json={
        "type": "string", "maxLength": FILE_PATH_MAX_CHARS, "description": "absolute path of a regular file "
        f"inside a configured workspace root; at most {ATTACH_FILE_MAX_BYTES} bytes"}),
    String("sha256", required=True, pattern=_SHA256, what="64 hexadecimal digits",
           description="the file's sha256; a mismatch is refused"),
    _FILENAME,
    _MEDIA_TYPE_SPEC,
    RecordId("expectedVaultId", what="a vault id", description="refuse unless the caller's store is this vault"),
)
ATTACH_PARAMS, ATTACH_FILE_PARAMS = ATTACH.names, ATTACH_FILE.names
ATTACH_INPUT_SCHEMA, ATTACH_FILE_INPUT_SCHEMA = ATTACH.schema(), ATTACH_FILE.schema()


@dataclass(frozen=True)
class FileInput:
    """A file sent inline to be retained by the write that cites it (a page's ``evidence``), in the same
    publication: its source and descriptor land with the record or not at all."""

    content: bytes
    sha256: str
    filename: str | None
    media_type: str


@dataclass(frozen=True)
class AttachInput:
    request_id: str
    content: bytes
    sha256: str
    filename: str | None
    media_type: str

    def digest(self) -> str:
        return request_hash("attach", {"sha256": self.sha256, "size": len(self.content),
                                       "filename": self.filename, "mediaType": self.media_type})


@dataclass(frozen=True)
class AttachFileInput:
    request_id: str
    file_path: str
    parts: tuple[str, ...]  # the path's components below '/'
    sha256: str
    filename: str | None
    media_type: str
    expected_vault_id: str | None

    def digest(self) -> str:
        return request_hash("attach_file", {"filePath": self.file_path, "sha256": self.sha256,
                                            "filename": self.filename, "mediaType": self.media_type,
                                            "expectedVaultId": self.expected_vault_id})


# --- parsing at the edge ---------------------------------------------------------------------


def _media_type(value: str | None, filename: str | None) -> str:
    """The given ``type/subtype`` (lowercased), else a guess from the filename, else octet-stream."""
    if value is None:
        guessed = mimetypes.guess_type(filename, strict=False)[0] if filename else None
        return guessed or DEFAULT_MEDIA_TYPE
    return value.lower()


def parse_attach_input(params: Any) -> AttachInput:
    values = ATTACH.read(params)
    file = inline_file(values)
    return AttachInput(values["requestId"], file.content, file.sha256, file.filename, file.media_type)


def inline_file(values: dict[str, Any], where: str = "") -> FileInput:
    """The file ``_INLINE_FILE``'s values describe (``where`` prefixes the field an error names): its sha256,
    when given, checked against the decoded content; its media type given, or guessed from its name."""
    content = values["content"]
    actual = hashlib.sha256(content).hexdigest()
    claimed = values["sha256"].lower() if values["sha256"] is not None else None
    if claimed is not None and claimed != actual:
        raise InvalidParams("sha256 does not match the decoded content", field=f"{where}sha256", expected=claimed,
                            actual=actual)
    filename = values["filename"]
    return FileInput(content, actual, filename, _media_type(values["mediaType"], filename))


def parse_attach_file_input(params: Any) -> AttachFileInput:
    values = ATTACH_FILE.read(params)
    parts = values["filePath"]
    filename = values["filename"] if (params or {}).get("filename") is not None else _default_filename(parts[-1])
    return AttachFileInput(values["requestId"], params["filePath"], parts, values["sha256"].lower(), filename,
                           _media_type(values["mediaType"], filename), values["expectedVaultId"])


def _default_filename(name: str) -> str | None:
    """The file's own name, when it is usable as a display name."""
    try:
        return _filename(name)
    except (InvalidParams, LimitExceeded):
        return None


# --- the tools -----------------------------------------------------------------------------------


def attach(engine: "AttachEngine", caller: "Caller", params: Any) -> SourceReceipt:
    """``knowledge_attach``: retain base64 content as a source; returns the receipt with its descriptor id.

    The content is scanned for credentials before anything is queued, except for an identical retry of a
    large one (``RETRY_LOOKUP_FROM``), which is answered with its first receipt: that content was scanned
    when it was first published.  Should the receipt not be there once the lane plans it after all, the
    content is scanned then, before anything is written."""
    request = parse_attach_input(params)
    engine.refuse_secrets(texts_of(params, skip=frozenset({"content"})))
    digest = request.digest()
    content = lambda: [("content", request.content)]  # noqa: E731
    scanned = len(request.content) < RETRY_LOOKUP_FROM or not _published(engine, caller, request.request_id, digest)
    if scanned:
        engine.refuse_secrets(content())

    def load() -> tuple[bytes, str]:  # on the lane, when no identical request was published
        if not scanned:
            engine.refuse_secrets(content())
        return request.content, request.sha256

    return _said_of_filename(_publish_source(engine, caller, "attach", request.request_id, digest, None, load,
                                             request.filename, request.media_type), params)


# An attachment at least this large that retries a published request is not scanned again: looking its receipt
# up costs a read, scanning megabytes for credentials far more (a rerun of an import retries every original).
RETRY_LOOKUP_FROM = 64 * 1024


def _published(engine: "AttachEngine", caller: "Caller", request_id: str, digest: str) -> bool:
    """Whether this very request was published already (its receipt is there); a request id used for other
    content answers False here, so that the scan comes first and the conflict is raised where it always was."""
    def work(runtime: "OpenStore", authority: "Authority", view: Any) -> bool:
        try:
            return runtime.publisher.existing_receipt(authority.partition, request_id, digest) is not None
        except Conflict:
            return False

    try:  # never creating the caller's store: a refused write changes nothing
        return engine.enter(caller, write=True, create=False).read(work)
    except NotFound:  # no store yet, so nothing published
        return False


def attach_file(engine: "AttachEngine", caller: "Caller", params: Any) -> SourceReceipt:
    """``knowledge_attach_file``: retain a workspace file, verified against the caller's sha256."""
    request = parse_attach_file_input(params)
    engine.refuse_secrets(texts_of(params))
    engine.authorize(caller, write=True, create=False)  # who asks comes before what is configured
    roots = engine.settings.current().workspace_roots
    if not roots:
        raise RuntimeDisabled("knowledge_attach_file is off: the owner has configured no workspace root "
                              "(config.json attachments.workspaceRoots); use knowledge_attach instead")
    if not _DIR_FD:
        raise RuntimeDisabled("knowledge_attach_file needs a platform that can open files relative to a "
                              "directory; use knowledge_attach instead")
    state_parts = {_real_parts(str(engine.state.root)), tuple(str(engine.state.root).strip("/").split("/"))}

    def load() -> tuple[bytes, str]:  # on the lane, after the retry check: a retry never re-reads the file
        content, sha = read_workspace_file(request.parts, request.sha256, roots, state_parts)
        engine.refuse_secrets([("content", content)])  # the file's content, as for attach
        return content, sha

    return _said_of_filename(_publish_source(engine, caller, "attach_file", request.request_id, request.digest(),
                                             request.expected_vault_id, load, request.filename,
                                             request.media_type), params)


def _said_of_filename(receipt: SourceReceipt, params: Any) -> SourceReceipt:
    """The receipt, with a note when the display name kept is not the ``filename`` given: a name with folders
    (``../x.txt``, ``C:\\Users\\dana\\x.txt``) keeps its last part, and surrounding spaces are dropped."""
    note = kept_name_note("filename", params.get("filename"), receipt["source"]["filename"])
    return receipt if note is None else {**receipt, "note": note}


def kept_name_note(field: str, given: Any, kept: str | None) -> str | None:
    """What to say when the display name kept is not the one ``field`` gave; None when it is."""
    if not isinstance(given, str) or kept is None or given == kept:
        return None
    return f"{field} was kept as {kept!r}, a file's own name: a display name holds no folder and no surrounding spaces"


def _publish_source(engine: "AttachEngine", caller: "Caller", operation: str, request_id: str, digest: str,
                    expected_vault_id: str | None, load: Callable[[], tuple[bytes, str]],
                    filename: str | None, media_type: str) -> SourceReceipt:
    """Publish one original and its descriptor; an identical retry returns the original receipt."""

    def plan(runtime: "OpenStore", authority: "Authority", catalog: Any) -> Plan | SourceReceipt:
        """Planned with the writes queued beside it and published in one group with them (an import's
        originals beside its pages: engine/importers/bulk.py)."""
        vault_id = runtime.store.manifest().vault_id
        if expected_vault_id is not None and expected_vault_id != vault_id:
            raise ForeignReference("expectedVaultId names another vault than the caller's store",
                                   field="expectedVaultId")
        existing = runtime.publisher.existing_receipt(authority.partition, request_id, digest)
        if existing is not None:
            return existing
        content, sha = load()
        source_id = new_id(SOURCE_PREFIX)
        descriptor = SourceDescriptor(
            id=source_id, retained_path=retained_path_for(source_id, filename, media_type), sha256=sha,
            size=len(content), media_type=media_type, recorded_at=format_timestamp(utc_now()),
            origin=authority.attribution(), filename=filename,
        )
        writes = [FileWrite(descriptor.retained_path, "source", content),
                  FileWrite(descriptor.descriptor_path, "descriptor", descriptor.render())]
        summary: SourceSummary = {"id": source_id, "sha256": sha, "size": len(content), "mediaType": media_type,
                   "filename": filename, "retainedPath": descriptor.retained_path}
        return Plan(authority.partition, operation, request_id, digest, authority.agent, writes,
                    {"source": summary, "vaultId": vault_id})

    return cast(SourceReceipt, engine.enter(caller, write=True).write(plan))


# --- reading a workspace file ------------------------------------------------------------------


def _real_parts(path: str) -> tuple[str, ...]:
    return tuple(os.path.realpath(path).strip("/").split("/"))


def _root_of(parts: tuple[str, ...], roots: tuple[str, ...]) -> tuple[str, ...] | None:
    """The configured root holding ``parts`` (a file strictly below it), compared component-wise."""
    for root in roots:
        root_parts = tuple(root.strip("/").split("/"))
        if len(parts) > len(root_parts) and parts[:len(root_parts)] == root_parts:
            return root_parts
    return None


def read_workspace_file(parts: tuple[str, ...], expected_sha: str, roots: tuple[str, ...],
                        forbidden: set[tuple[str, ...]]) -> tuple[bytes, str]:
    """The verified bytes of ``/parts...`` and their sha256.

    Refused: paths outside every root or inside the engine's state
    directory, a symlink anywhere on the path, a directory, device, FIFO or
    socket, a hardlinked file, more than ``ATTACH_FILE_MAX_BYTES``, and a
    sha256 that does not match.  The hash is streamed first, so a mismatch
    never loads the file.
    """
    shown = "/" + "/".join(parts)
    if _root_of(parts, roots) is None:
        raise Denied("filePath is outside the workspace roots the owner allows; send the file's content with "
                     "knowledge_attach instead", field="filePath", path=shown)
    if any(parts[:len(state)] == state for state in forbidden):
        raise Denied("files in the engine's state directory are never attached", field="filePath", path=shown)
    fd, info = _open_without_symlinks(parts, shown)
    try:
        if info.st_size > ATTACH_FILE_MAX_BYTES:
            raise LimitExceeded(f"the file is larger than {ATTACH_FILE_MAX_BYTES} bytes, the most one "
                                "publication journals", field="filePath", limit=ATTACH_FILE_MAX_BYTES,
                                size=info.st_size)
        digest, size = hashlib.sha256(), 0
        while chunk := os.read(fd, _CHUNK):
            size += len(chunk)
            if size > ATTACH_FILE_MAX_BYTES:
                raise LimitExceeded(f"the file grew past {ATTACH_FILE_MAX_BYTES} bytes while being read",
                                    field="filePath", limit=ATTACH_FILE_MAX_BYTES)
            digest.update(chunk)
        if size == 0:
            raise InvalidParams("the file is empty; there is nothing to retain", field="filePath", path=shown)
        if digest.hexdigest() != expected_sha:
            raise InvalidParams("sha256 does not match the file", field="sha256", expected=expected_sha,
                                actual=digest.hexdigest())
        os.lseek(fd, 0, os.SEEK_SET)
        with os.fdopen(os.dup(fd), "rb") as handle:
            content = handle.read(size + 1)
        if len(content) != size or hashlib.sha256(content).hexdigest() != expected_sha:
            raise Conflict("the file changed while it was being attached; try again", field="filePath",
                           path=shown)
        return content, expected_sha
    finally:
        os.close(fd)


def _open_without_symlinks(parts: tuple[str, ...], shown: str) -> tuple[int, os.stat_result]:
    """Open ``/parts...`` one directory descriptor at a time, never following a symlink.

    Only a regular file is ever opened: the leaf is checked with lstat
    first, and the opened descriptor must be that same file (a swap in
    between is refused; O_NONBLOCK keeps a FIFO swapped in from blocking).
    """
    dir_flags = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
    directory = os.open("/", dir_flags)
    try:
        for index, part in enumerate(parts[:-1]):
            try:
                child = os.open(part, dir_flags, dir_fd=directory)
            except OSError as exc:
                raise _path_error(exc, directory, part, "/" + "/".join(parts[:index + 1]), shown) from exc
            os.close(directory)
            directory = child
        leaf = parts[-1]
        try:
            before = os.stat(leaf, dir_fd=directory, follow_symlinks=False)
        except OSError as exc:
            raise _path_error(exc, directory, leaf, shown, shown) from exc
        _check_regular(before, shown)
        try:
            fd = os.open(leaf, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _NOCTTY | _CLOEXEC, dir_fd=directory)
        except OSError as exc:
            raise _path_error(exc, directory, leaf, shown, shown) from exc
    finally:
        os.close(directory)
    info = os.fstat(fd)
    try:
        _check_regular(info, shown)
        if (info.st_dev, info.st_ino) != (before.st_dev, before.st_ino):
            raise Conflict("the file was replaced while it was being opened; try again", field="filePath",
                           path=shown)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _check_regular(info: os.stat_result, shown: str) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath("filePath is a symlink; symlinks are never followed", field="filePath", path=shown)
    if stat.S_ISDIR(info.st_mode):
        raise UnsafePath("filePath is a directory; attach one regular file", field="filePath", path=shown)
    if not stat.S_ISREG(info.st_mode):
        raise UnsafePath("filePath is not a regular file (a device, FIFO or socket)", field="filePath",
                         path=shown)
    if info.st_nlink > 1:
        raise UnsafePath("the file has more than one hard link; attach a copy", field="filePath", path=shown)


def _path_error(exc: OSError, directory: int, name: str, at: str, shown: str) -> Exception:
    """What an open or lstat failure on the way to the file means for the caller."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        try:
            mode = os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode
        except OSError:
            mode = 0
        if stat.S_ISLNK(mode) or exc.errno in (errno.ELOOP, errno.EMLINK):
            return UnsafePath(f"{at} is a symlink; symlinks are never followed", field="filePath", path=shown)
        return UnsafePath(f"{at} is not a directory", field="filePath", path=shown)
    if exc.errno == errno.ENOENT:
        return NotFound("no file at filePath", field="filePath", path=shown)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return Denied(f"the engine may not read {at}", field="filePath", path=shown)
    return InvalidParams(f"cannot open filePath: {exc.strerror}", field="filePath", path=shown)


TOOLS = (
    Method(
        "knowledge_attach_file", ATTACH_FILE, SourceReceipt, attach_file, writes=True,
        title="Attach a local file as evidence",
        description="Retain a file from the owner's workspace as evidence (regular files inside the configured "
        "workspace roots only; its sha256 must match). Cite the returned source id from claims and pages.",
    ),
    Method(
        "knowledge_attach", ATTACH, SourceReceipt, attach, writes=True, title="Attach content as evidence",
        description="Retain content sent inline (base64, at most 6,000,000 bytes decoded) as evidence, for clients "
        "that cannot share files. Cite the returned source id from claims and pages.",
    ),
)
