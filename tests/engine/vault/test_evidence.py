"""Retained evidence: source descriptors, retained paths and display filenames."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from engine.core.errors import InvalidParams
from engine.vault.evidence import (
    DESCRIPTOR_MAX_BYTES,
    SourceDescriptor,
    clean_filename,
    describe_source,
    descriptor_path,
    excerpt_line_count,
    parse_descriptor,
    retained_path_for,
)
from engine.vault.frontmatter import dump_yaml, load_yaml

CONTENT = b"please send me the status notes every Friday\n"
STAMP = "2026-11-29T10:14:03Z"
ORIGIN = {"agent": "main", "instance": "laptop-main", "audience": "owner-private"}
PATH = "sources/src_1.source.yaml"


def describe(**overrides: Any) -> SourceDescriptor:
    arguments: dict[str, Any] = {"media_type": "text/plain", "origin": ORIGIN, "recorded_at": STAMP}
    arguments.update(overrides)
    return describe_source("src_1", CONTENT, **arguments)


def descriptor_bytes(**changes: Any) -> bytes:
    """A rendered descriptor for src_1 with some keys changed (None removes a key)."""
    document = load_yaml(describe(filename="notes.txt").render().decode("utf-8"))
    for key, value in changes.items():
        if value is None:
            document.pop(key, None)
        else:
            document[key] = value
    return dump_yaml(document).encode("utf-8")


def rejected(data: bytes, path: str = PATH) -> str:
    descriptor, findings = parse_descriptor(data, path)
    assert descriptor is None
    [finding] = findings
    assert (finding.code, finding.path) == ("source_invalid", path)
    return finding.message


# --- describing a source ---------------------------------------------------------------


def test_describe_source_hashes_and_measures_the_content() -> None:
    descriptor = describe()
    assert descriptor.sha256 == hashlib.sha256(CONTENT).hexdigest()
    assert descriptor.size == len(CONTENT)
    assert (descriptor.id, descriptor.media_type, descriptor.origin, descriptor.recorded_at) == (
        "src_1", "text/plain", ORIGIN, STAMP)
    assert descriptor.descriptor_path == PATH == descriptor_path("src_1")


def test_describe_source_of_empty_content() -> None:
    descriptor = describe_source("src_1", b"", media_type="text/plain", origin={}, recorded_at=STAMP)
    assert descriptor.size == 0
    assert descriptor.sha256 == hashlib.sha256(b"").hexdigest()


@pytest.mark.parametrize(("filename", "media_type", "retained"), [
    ("Report.PDF", "application/octet-stream", "sources/src_1.pdf"),     # suffix from the name, lowercased
    ("archive.tar.gz", "application/gzip", "sources/src_1.gz"),          # only the last suffix
    ("notes", "text/plain", "sources/src_1.txt"),                        # no suffix: from the media type
    (None, "text/markdown", "sources/src_1.md"),
    (None, "application/json", "sources/src_1.json"),
    (None, "application/x-unknown-thing", "sources/src_1.bin"),         # unknown type: .bin
    ("weird.s p", "text/plain", "sources/src_1.txt"),                    # unsafe suffix is ignored
    ("x.averyveryverylongsuffix", "image/png", "sources/src_1.png"),     # suffix over 12 characters
    ("x./../y", "text/plain", "sources/src_1.txt"),
])
def test_retained_path_suffix(filename: str | None, media_type: str, retained: str) -> None:
    assert retained_path_for("src_1", filename, media_type) == retained
    assert describe(filename=filename, media_type=media_type).retained_path == retained


def test_render_writes_every_field_and_omits_a_missing_filename() -> None:
    with_name = load_yaml(describe(filename="notes.txt").render().decode("utf-8"))
    assert with_name["format"] == "knowledge-source-v1"
    assert with_name["filename"] == "notes.txt"
    assert with_name["recorded_at"] == STAMP  # a string, not a datetime
    assert "filename" not in load_yaml(describe().render().decode("utf-8"))


# --- parsing descriptors ---------------------------------------------------------------


@pytest.mark.parametrize("filename", [None, "notes.txt"])
def test_parse_accepts_what_render_produces(filename: str | None) -> None:
    original = describe(filename=filename)
    parsed, findings = parse_descriptor(original.render(), PATH)
    assert findings == []
    assert parsed == original


def test_parse_fills_a_missing_media_type_and_origin() -> None:
    parsed, findings = parse_descriptor(descriptor_bytes(media_type=None, origin=None), PATH)
    assert findings == []
    assert parsed is not None
    assert (parsed.media_type, parsed.origin) == ("application/octet-stream", {})


def test_id_must_match_the_file_name() -> None:
    assert "does not match" in rejected(descriptor_bytes(), "sources/src_2.source.yaml")
    assert "does not match" in rejected(descriptor_bytes(), "elsewhere/src_1.source.yaml")


@pytest.mark.parametrize("bad_id", ["", "has space", "../x", 5])
def test_id_must_be_a_record_id(bad_id: Any) -> None:
    assert "id" in rejected(descriptor_bytes(id=bad_id))


def test_id_is_required() -> None:
    assert "id" in rejected(descriptor_bytes(id=None))


@pytest.mark.parametrize("retained", [
    "src_1.txt", "other/src_1.txt", "sources/sub/src_1.txt", "sources/src_2.txt", "sources/../src_1.txt",
    "/sources/src_1.txt", 5,
])
def test_retained_path_must_be_this_sources_file_under_sources(retained: Any) -> None:
    assert "retained_path" in rejected(descriptor_bytes(retained_path=retained))


@pytest.mark.parametrize("retained", ["sources/src_10.txt", "sources/src_1_other.txt", "sources/src_1.source.yaml"])
def test_retained_path_cannot_name_another_sources_file(retained: str) -> None:
    # 'sources/src_10.txt' belongs to src_10, and the descriptor is not the original.
    assert "retained_path" in rejected(descriptor_bytes(retained_path=retained))


@pytest.mark.parametrize("sha", ["abc", "A" * 64, "g" * 64, "0" * 63, "0" * 65, 123])
def test_sha256_must_be_64_lowercase_hex_digits(sha: Any) -> None:
    assert "sha256" in rejected(descriptor_bytes(sha256=sha))


@pytest.mark.parametrize("size", [-1, "5", True, 1.5])
def test_size_must_be_a_non_negative_integer(size: Any) -> None:
    assert "size" in rejected(descriptor_bytes(size=size))


@pytest.mark.parametrize("recorded_at", ["2026-11-29", "2026-11-29T10:14:03", "soon", 1700000000])
def test_recorded_at_must_be_a_utc_timestamp(recorded_at: Any) -> None:
    assert "recorded_at" in rejected(descriptor_bytes(recorded_at=recorded_at))


def test_origin_must_be_a_mapping() -> None:
    assert "origin" in rejected(descriptor_bytes(origin=["main"]))


@pytest.mark.parametrize("form", ["knowledge-source-v2", "knowledge-record-v1"])
def test_format_must_be_the_source_format(form: str) -> None:
    assert "knowledge-source-v1" in rejected(descriptor_bytes(format=form))


def test_format_is_required() -> None:
    assert "knowledge-source-v1" in rejected(descriptor_bytes(format=None))


def test_a_descriptor_that_is_not_a_mapping_is_rejected() -> None:
    assert "knowledge-source-v1" in rejected(b"- a\n- b\n")


def test_an_oversized_descriptor_is_rejected() -> None:
    padded = descriptor_bytes() + b"#" * DESCRIPTOR_MAX_BYTES + b"\n"
    assert "larger than" in rejected(padded)


def test_a_descriptor_of_exactly_the_limit_is_read() -> None:
    data = descriptor_bytes()
    data += b"#" * (DESCRIPTOR_MAX_BYTES - len(data) - 1) + b"\n"
    assert len(data) == DESCRIPTOR_MAX_BYTES
    assert parse_descriptor(data, PATH)[1] == []


@pytest.mark.parametrize("data", [b"\xff\xfe", b"id: [unclosed\n", b"a: &x 1\nb: *x\n", b"a: " + b"[" * 30 + b"]" * 30])
def test_unreadable_descriptors_become_findings(data: bytes) -> None:
    rejected(data)


# --- display filenames ------------------------------------------------------------------


@pytest.mark.parametrize(("given", "expected"), [
    ("notes.txt", "notes.txt"),
    ("/home/dana/notes.txt", "notes.txt"),
    ("C:\\Users\\dana\\notes.txt", "notes.txt"),
    ("../../etc/passwd", "passwd"),
    ("  spaced name.md  ", "spaced name.md"),
    ("ünïcødé.pdf", "ünïcødé.pdf"),
])
def test_clean_filename_keeps_only_the_last_component(given: str, expected: str) -> None:
    assert clean_filename(given) == expected


def test_clean_filename_passes_none_through() -> None:
    assert clean_filename(None) is None


@pytest.mark.parametrize("bad", ["", "   ", "..", ".", "dir/", "dir/..", "a\nb.txt", "tab\there", "bell\x07",
                                 "x" * 256, 5, b"notes.txt"])
def test_clean_filename_rejects_unusable_names(bad: Any) -> None:
    with pytest.raises(InvalidParams) as caught:
        clean_filename(bad)
    assert caught.value.details["field"] == "filename"


def test_clean_filename_accepts_255_characters() -> None:
    assert clean_filename("x" * 255) == "x" * 255


# --- excerpts -------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "lines"), [("", 1), ("one", 1), ("one\n", 1), ("one\ntwo", 2), ("a\nb\nc\n", 3)])
def test_excerpt_line_count(text: str, lines: int) -> None:
    assert excerpt_line_count(text) == lines


def test_a_media_type_that_is_no_media_type_is_served_as_bytes_with_a_warning() -> None:
    crafted = '<img src="file:///etc/hosts"><b>text/plain</b>'
    parsed, findings = parse_descriptor(descriptor_bytes(media_type=crafted), PATH)

    assert parsed is not None and parsed.media_type == "application/octet-stream"
    assert [(f.code, f.severity, f.field) for f in findings] == [("source_invalid", "warning", "media_type")]
