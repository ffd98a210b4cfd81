"""A store archive's bounds and its history: what it may expand to, and a git folder of objects and refs only.

Each archive is the seeded store's export with members changed (``rewrite``); every refusal leaves the
target state directory as it was: nothing restored."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from engine.cli.commands import main
from engine.core.errors import LimitExceeded
from engine.importers import zipped
from engine.importers.archive import ArchiveReader
from engine.importers.archive_history import is_ref_name
from engine.store.attachments import _MEDIA_TYPE
from engine.vault.evidence import MEDIA_TYPE, is_media_type
from tests.engine.importers.test_archive import exported, listed, rewrite  # noqa: F401 (a fixture)

OID = "0123456789abcdef0123456789abcdef01234567"


def restore_refused(archive: Path, target: Any, capsys: pytest.CaptureFixture[str]) -> str:
    """Restore ``archive`` through the command line; it must be refused with nothing written."""
    assert main(["import", "archive", str(archive), "--state-dir", str(target.root)]) == 2
    assert not target.root.exists()
    return capsys.readouterr().err


def with_git_folder(tmp_path: Path, exported: dict[str, Any], files: dict[str, bytes]) -> Path:
    """The export with a copied git folder of ``files`` (paths inside ``.git``)."""
    def change(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
        for part, data in files.items():
            members[f"history/.git/{part}"] = data
            listed(manifest, f"history/.git/{part}", data)
        manifest["history"] = {"kind": "git-folder"}

    return rewrite(exported["archive"], change, tmp_path / "crafted.zip")


def deflated(path: Path) -> Path:
    """``path`` rewritten with every member deflated (``rewrite`` stores them)."""
    with zipfile.ZipFile(path) as stored:
        members = [(info.filename, stored.read(info)) for info in stored.infolist()]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for name, data in members:
            out.writestr(name, data)
    return path


# --- what a zip may expand to ---------------------------------------------------------------------


def test_an_archive_expanding_past_the_total_size_bound_is_refused(exported, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(zipped, "MAX_TOTAL_BYTES", 1000)

    err = restore_refused(exported["archive"], exported["target"], capsys)

    assert "total decompressed size limit is 1,000" in err


def test_an_archive_of_more_members_than_the_count_bound_is_refused(exported, tmp_path, monkeypatch):
    monkeypatch.setattr(zipped, "MAX_MEMBERS", 5)

    with pytest.raises(LimitExceeded, match="member count limit is 5") as refused:
        ArchiveReader(exported["archive"])

    assert refused.value.details["bound"] == "member count" and refused.value.details["limit"] == 5


def test_an_archive_member_expanding_a_thousandfold_is_refused(exported, tmp_path, capsys):
    zeros = bytes(2 * 1024 * 1024)

    def bomb(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
        members["vault/private/sources/zeros.bin"] = zeros
        listed(manifest, "vault/private/sources/zeros.bin", zeros)

    crafted = deflated(rewrite(exported["archive"], bomb, tmp_path / "bomb.zip"))
    assert crafted.stat().st_size < 100_000

    err = restore_refused(crafted, exported["target"], capsys)

    assert "vault/private/sources/zeros.bin" in err and "member compression ratio limit is 200" in err


def test_the_bytes_read_are_counted_against_the_total_bound_each_member_once(exported, monkeypatch):
    with ArchiveReader(exported["archive"]) as reader:  # checked: every member read once
        checked = reader._zip.read_total
        list(reader.vault_files())  # read again to be restored: not counted twice
        assert reader._zip.read_total == checked > 0
    with zipped.BoundedZip(exported["archive"]) as bounded:
        monkeypatch.setattr(zipped, "MAX_TOTAL_BYTES", 100)  # as if the central directory had understated
        with pytest.raises(LimitExceeded, match="expands to more bytes in all"):
            for name in bounded.names():
                bounded.read(name)
        assert bounded.read_total <= 100 + zipped.CHUNK  # stopped at the chunk that passed the bound


# --- a copied git folder: objects and refs only ------------------------------------------------------


@pytest.mark.parametrize("part", ["objects/info/alternates", "objects/info/http-alternates",
                                  "objects/pack/evil.sh", "objects/ab/not-an-object", "logs/HEAD", "description"])
def test_a_git_folder_pointing_elsewhere_or_holding_other_files_is_refused(exported, tmp_path, capsys, part):
    crafted = with_git_folder(tmp_path, exported, {"HEAD": b"ref: refs/heads/main\n",
                                                    part: b"/home/someone/other-store/vault/.git/objects\n"})

    err = restore_refused(crafted, exported["target"], capsys)

    assert f"crafted.zip (history/.git/{part})" in err


@pytest.mark.parametrize("head", [b"ref: refs/heads/../../../../etc/passwd\n", b"ref: refs/heads/-x\n",
                                  b"ref: refs/tags/v1\n", b"ref: refs/heads/main\x1b[31m\n", b"deadbeef\n",
                                  b"ref: refs/heads/main.lock\n", OID.encode() + b"\nextra\n"])
def test_a_bad_head_is_refused(exported, tmp_path, capsys, head):
    crafted = with_git_folder(tmp_path, exported, {"HEAD": head})

    err = restore_refused(crafted, exported["target"], capsys)

    assert "crafted.zip (history/.git/HEAD)" in err and "ref: refs/heads/<name>" in err


@pytest.mark.parametrize("files", [
    {"refs/heads/-rf": OID.encode() + b"\n"},
    {"refs/heads/main.lock": OID.encode() + b"\n"},
    {"refs/heads/a@{1}": OID.encode() + b"\n"},
    {"refs/heads/main": b"ref: refs/heads/..x\n"},
    {"refs/heads/main": b"not an id\n"},
    {"refs/notes/commits": OID.encode() + b"\n"},
    {"packed-refs": b"# pack-refs with: peeled fully-peeled sorted \n" + OID.encode() + b" refs/heads/a..b\n"},
    {"packed-refs": OID.encode() + b" refs/heads/main\n[include]\n"},
], ids=["leading-dash", "lock", "at-brace", "symref-dots", "not-an-id", "not-heads-tags-remotes",
        "packed-dots", "packed-junk"])
def test_a_bad_ref_is_refused(exported, tmp_path, capsys, files):
    crafted = with_git_folder(tmp_path, exported, {"HEAD": b"ref: refs/heads/main\n", **files})

    err = restore_refused(crafted, exported["target"], capsys)

    assert f"crafted.zip (history/.git/{next(iter(files))})" in err


def test_refs_git_writes_are_taken():
    # (an exported git folder restoring with its history is test_archive's round trip)
    for name in ("refs/heads/main", "refs/heads/feature/x-1", "refs/tags/v1.0", "refs/remotes/origin/main"):
        assert is_ref_name(name), name
    for name in ("refs/heads/", "refs/heads/a/", "refs/heads/a.", "refs/heads/.a", "refs/heads/a//b",
                 "refs/heads/@", "refs/heads/a b", "refs/heads/a~1", "refs/heads/a\\b", "HEAD", "refs/heads/a:b"):
        assert not is_ref_name(name), name


# --- a source descriptor's media type ---------------------------------------------------------------


def test_a_descriptor_whose_media_type_is_markup_is_refused(exported, tmp_path, capsys):
    def markup(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
        [name] = [n for n in members if n.startswith("vault/private/sources/") and n.endswith(".source.yaml")
                  and b"minutes.txt" in members[n]]
        members[name] = members[name].replace(b"media_type: text/plain",
                                              b"media_type: <img src=x onerror=alert(1)>")
        assert b"<img" in members[name]
        entry = next(e for e in manifest["files"] if e["path"] == name)
        manifest["files"].remove(entry)
        listed(manifest, name, members[name])

    crafted = rewrite(exported["archive"], markup, tmp_path / "markup.zip")

    err = restore_refused(crafted, exported["target"], capsys)

    assert "media_type is not a media type" in err


def test_one_media_type_form_for_attachments_and_descriptors():
    assert _MEDIA_TYPE.pattern == MEDIA_TYPE.pattern  # knowledge_attach's check is the same form, no parameters
    for taken in ("text/plain", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                  "image/svg+xml", "text/plain; charset=utf-8", "text/plain;charset=UTF-8;format=flowed"):
        assert is_media_type(taken), taken
    assert not is_media_type("text/plain; charset=utf-8", parameters=False)
    for refused in ("<b>x</b>", "text/<script>", "text/plain; charset=\"<b>\"", "text", "text/plain extra",
                    "text/plain\n", "/plain", None, 3):
        assert not is_media_type(refused), refused
