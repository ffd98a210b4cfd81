"""An encrypted remote: ``gcrypt::`` through git-remote-gcrypt with a throwaway GPG key, both ways, and the
remote's files holding nothing readable (docs/sync.md, Transport)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from engine.core.errors import InvalidParams
from engine.sync.remotes import check_remote_url
from engine.sync.transport import SyncRefused
from tests.engine.sync.gitservers import make_bare
from tests.engine.sync.machines import Machine, record


@pytest.fixture
def gpg_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A throwaway GPG key without passphrase in a keyring of the test's own; its agent stopped after."""
    for program in ("gpg", "git-remote-gcrypt"):
        assert shutil.which(program), f"the encrypted remote tests need {program} (scripts/test.sh installs it)"
    home = tmp_path / "g"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("GNUPGHOME", str(home))
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "owner@localhost", "default", "default",
                    "never"], check=True, capture_output=True)
    try:
        yield "owner@localhost"
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], check=False, capture_output=True)


def test_an_encrypted_remote_carries_both_ways_and_holds_nothing_readable(gpg_key: str, tmp_path: Path) -> None:
    laptop, desktop = Machine(tmp_path / "laptop"), Machine(tmp_path / "desktop")
    folder = tmp_path / "encrypted"
    url = check_remote_url(f"gcrypt::{folder}")
    first = laptop.write({"private/pages/alpha.md": record("Alpha", "the secret plan")}, "alpha")
    assert laptop.transport.push("nas", url, first) is True

    fetched = desktop.transport.fetch("nas", url)
    assert fetched.tips == {laptop.id: first}
    desktop.adopt(first)
    answer = desktop.write({"private/pages/beta.md": record("Beta")}, "beta")
    assert desktop.transport.push("nas", url, answer) is True
    assert laptop.transport.fetch("nas", url).tips == {desktop.id: answer}
    assert laptop.transport.stores_on(url) == {laptop.store_id: {laptop.id: first, desktop.id: answer}}

    stored = b"".join(path.read_bytes() for path in folder.rglob("*") if path.is_file())
    assert stored and b"secret plan" not in stored and laptop.id.encode() not in stored


def test_an_encrypted_remote_is_never_a_git_repository_on_this_machine(gpg_key: str, tmp_path: Path) -> None:
    laptop = Machine(tmp_path / "laptop")
    repository = make_bare(tmp_path / "plain.git")
    commit = laptop.write({"private/pages/alpha.md": record("Alpha")})
    for url in (f"gcrypt::{repository}", f"gcrypt::file://{tmp_path / 'folder'}"):
        with pytest.raises(SyncRefused) as refused:
            laptop.transport.push("nas", url, commit)
        assert refused.value.finding.code == "git_failed" and "folder" in refused.value.message


def test_gcrypt_is_taken_only_where_its_helper_is_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InvalidParams) as refused:
        check_remote_url("gcrypt::/srv/notes")
    assert "git-remote-gcrypt" in refused.value.message and "not installed" in refused.value.message
    helper = tmp_path / "git-remote-gcrypt"
    helper.write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    helper.chmod(0o755)
    for url in ("gcrypt::/srv/notes", "gcrypt::ssh://nas.local/srv/notes", "gcrypt::git@nas.local:notes",
                "gcrypt::https://example.com/notes.git"):
        assert check_remote_url(url) == url
    for url in ("gcrypt::ext::sh -c x", "gcrypt::gcrypt::/srv/notes", "gcrypt::notes", "gcrypt::ftp://h/x",
                "gcrypt::https://example.com/notes.git#next", "gcrypt::-oProxyCommand=x:notes", "gcrypt::"):
        with pytest.raises(InvalidParams):
            check_remote_url(url)
    assert os.environ["PATH"] == str(tmp_path)
