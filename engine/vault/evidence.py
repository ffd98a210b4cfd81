"""Retained evidence: original files kept under a partition's ``sources/``.

Each retained original has an immutable descriptor beside it
(``sources/<id>.source.yaml``): id, retained path, sha256, size, media type,
optional filename and the attribution of whoever supplied it.  Claims and
relationships cite descriptors by id, optionally with a line range and an
exact quote.
"""

from __future__ import annotations

import mimetypes
import re
from dataclasses import dataclass
from typing import Any

from ..core.answers import JsonObject, NotRequired, TypedDict
from ..core.errors import InvalidParams, LimitExceeded
from ..core.files import sha256_bytes
from ..core.findings import Finding
from .frontmatter import dump_yaml, load_yaml
from ..core.ids import is_record_id, parse_timestamp

SOURCE_FORMAT = "knowledge-source-v1"
SOURCES_DIR = "sources"
DESCRIPTOR_SUFFIX = ".source.yaml"
DESCRIPTOR_MAX_BYTES = 64 * 1024
_SAFE_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,12}")
# A media type's form (RFC 6838 section 4.2): type "/" subtype, each a restricted-name (an alphanumeric,
# then up to 126 of alphanumerics and ``!#$&^_.+-``).  What ``knowledge_attach`` takes and writes.
_RESTRICTED_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
MEDIA_TYPE = re.compile(f"{_RESTRICTED_NAME}/{_RESTRICTED_NAME}")
# A descriptor written elsewhere may add parameters (``; charset=utf-8``): a restricted-name, "=", a token
# (RFC 2045; quoted strings are not taken, so no markup or space can ride in a value).
_PARAMETER = rf"[ \t]*;[ \t]*{_RESTRICTED_NAME}=[A-Za-z0-9!#$%&'*+.^_`|~-]+"
MEDIA_TYPE_WITH_PARAMETERS = re.compile(rf"{MEDIA_TYPE.pattern}(?:{_PARAMETER})*")


def is_media_type(value: Any, *, parameters: bool = True) -> bool:
    """Whether ``value`` has a media type's form: ``type/subtype``, with ``parameters`` optional ones."""
    pattern = MEDIA_TYPE_WITH_PARAMETERS if parameters else MEDIA_TYPE
    return isinstance(value, str) and pattern.fullmatch(value) is not None


class DescriptorData(TypedDict):
    """A source descriptor as its file holds it (``format: knowledge-source-v1``)."""

    format: str
    id: str
    retained_path: str
    sha256: str
    size: int
    media_type: str
    filename: NotRequired[str]
    origin: JsonObject
    recorded_at: str


@dataclass(frozen=True)
class SourceDescriptor:
    id: str
    retained_path: str
    sha256: str
    size: int
    media_type: str
    recorded_at: str
    origin: dict[str, Any]
    filename: str | None = None

    def to_dict(self) -> DescriptorData:
        data: DescriptorData = {  # type: ignore[typeddict-item]  # origin and recorded_at follow, in file order
            "format": SOURCE_FORMAT,
            "id": self.id,
            "retained_path": self.retained_path,
            "sha256": self.sha256,
            "size": self.size,
            "media_type": self.media_type,
        }
        if self.filename:
            data["filename"] = self.filename
        data["origin"] = self.origin
        data["recorded_at"] = self.recorded_at
        return data

    def render(self) -> bytes:
        return dump_yaml(self.to_dict()).encode("utf-8")

    @property
    def descriptor_path(self) -> str:
        return descriptor_path(self.id)


def descriptor_path(source_id: str) -> str:
    return f"{SOURCES_DIR}/{source_id}{DESCRIPTOR_SUFFIX}"


def retained_path_for(source_id: str, filename: str | None, media_type: str) -> str:
    """Where the original is kept: the id plus a safe suffix from the filename or media type."""
    suffix = ""
    if filename and "." in filename:
        candidate = filename[filename.rfind("."):]
        suffix = candidate.lower() if _SAFE_SUFFIX.fullmatch(candidate) else ""
    if not suffix:
        suffix = mimetypes.guess_extension(media_type) or ".bin"
    return f"{SOURCES_DIR}/{source_id}{suffix}"


def clean_filename(filename: Any) -> str | None:
    """A display filename: no directories, no control characters."""
    if filename is None:
        return None
    if not isinstance(filename, str) or not filename.strip():
        raise InvalidParams("filename must be a non-empty string", field="filename")
    name = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if not name or name in (".", "..") or any(ord(ch) < 32 for ch in name) or len(name) > 255:
        raise InvalidParams("filename is not a usable file name", field="filename")
    return name


def displayable_filename(filename: Any) -> str | None:
    """A descriptor's filename as an answer may show it: None unless it is one that ``clean_filename`` keeps as
    is (a descriptor edited outside the engine may hold a path or control characters)."""
    try:
        return filename if isinstance(filename, str) and clean_filename(filename) == filename else None
    except InvalidParams:
        return None


def describe_source(
    source_id: str,
    content: bytes,
    *,
    media_type: str,
    origin: dict[str, Any],
    recorded_at: str,
    filename: str | None = None,
) -> SourceDescriptor:
    return SourceDescriptor(
        id=source_id,
        retained_path=retained_path_for(source_id, filename, media_type),
        sha256=sha256_bytes(content),
        size=len(content),
        media_type=media_type,
        recorded_at=recorded_at,
        origin=origin,
        filename=filename,
    )


def parse_descriptor(data: bytes, path: str) -> tuple[SourceDescriptor | None, list[Finding]]:
    """Read a descriptor file; anything unusable becomes a finding naming the file."""

    def bad(message: str, line: int | None = None) -> tuple[None, list[Finding]]:
        return None, [Finding("source_invalid", message, path=path, line=line)]

    if len(data) > DESCRIPTOR_MAX_BYTES:
        return bad(f"descriptor is larger than {DESCRIPTOR_MAX_BYTES} bytes")
    try:
        document = load_yaml(data.decode("utf-8"), what="source descriptor")
    except UnicodeDecodeError:
        return bad("descriptor is not UTF-8")
    except (InvalidParams, LimitExceeded) as exc:  # load_yaml raises nothing else on any text
        return bad(exc.message, exc.details.get("line"))
    if not isinstance(document, dict) or document.get("format") != SOURCE_FORMAT:
        return bad(f"descriptor format must be {SOURCE_FORMAT}")
    source_id = document.get("id")
    if not is_record_id(source_id) or path != descriptor_path(source_id):
        return bad("descriptor id is missing or does not match its file name")
    retained = document.get("retained_path")
    expected_prefix = f"{SOURCES_DIR}/{source_id}"
    if not isinstance(retained, str) or not (
        retained == expected_prefix
        or (retained.startswith(expected_prefix) and _SAFE_SUFFIX.fullmatch(retained[len(expected_prefix):]))
    ):
        return bad("retained_path must name this source's file under sources/")
    sha = document.get("sha256")
    size = document.get("size")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
        return bad("sha256 must be 64 lowercase hex digits")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        return bad("size must be a non-negative integer")
    if parse_timestamp(document.get("recorded_at")) is None:
        return bad("recorded_at must be an ISO-8601 UTC timestamp")
    origin = document.get("origin") or {}
    if not isinstance(origin, dict):
        return bad("origin must be a mapping")
    media_type = document.get("media_type") or "application/octet-stream"
    findings = []
    if not is_media_type(media_type):  # edited outside the engine, or synced: served as bytes, never as given
        findings.append(Finding("source_invalid", "media_type is not a media type (type/subtype); the source is "
                                "served as application/octet-stream", severity="warning", path=path,
                                field="media_type"))
        media_type = "application/octet-stream"
    filename = document.get("filename")
    return SourceDescriptor(
        id=source_id, retained_path=retained, sha256=sha, size=size,
        media_type=str(media_type), recorded_at=document["recorded_at"], origin=origin,
        filename=filename if isinstance(filename, str) else None,
    ), findings


def excerpt_line_count(text: str) -> int:
    return max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
