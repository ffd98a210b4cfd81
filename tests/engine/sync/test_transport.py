"""The sync transport against real remotes (on disk, git daemon, git http-backend): fetching other machines'
branches into the quarantine and the vault, fast-forward pushes, and the refusals (docs/sync.md, Transport)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from engine.core.errors import Conflict
from engine.sync.transport import (
    QUARANTINE, SyncRefused, Transport, git_environment, machine_id, size_limit,
)
from engine.vault.frontmatter import RECORD_MAX_BYTES
from tests.engine.sync.gitservers import GitRemote, free_port, git_executable, make_bare, plain_git
from tests.engine.sync.machines import (
    OTHER_STORE, STORE, Machine, blob, branch, commit_on, record, refs, tree_with,
)


@pytest.fixture
def laptop(tmp_path: Path) -> Machine:
    return Machine(tmp_path / "laptop")


@pytest.fixture
def desktop(tmp_path: Path) -> Machine:
    return Machine(tmp_path / "desktop")


def joined(first: Machine, second: Machine, remote: GitRemote) -> str:
    """``first`` writes and pushes; ``second`` fetches it and takes it as its head (as ``sync clone`` does)."""
    commit = first.write({"private/pages/alpha.md": record("Alpha")}, "alpha")
    assert first.transport.push("nas", remote.url, commit) is True
    fetched = second.transport.fetch("nas", remote.url)
    assert fetched.tips == {first.id: commit}
    second.adopt(commit)
    return commit


# --- fetch and push -------------------------------------------------------------------------------


def test_a_fetch_brings_other_machines_branches_into_the_vault_repository(
        any_remote: GitRemote, laptop: Machine, desktop: Machine) -> None:
    commit = laptop.write({"private/pages/alpha.md": record("Alpha")}, "alpha")
    assert laptop.transport.push("nas", any_remote.url, commit) is True
    assert refs(any_remote.path, "refs/heads/") == {branch(STORE, laptop.id): commit}

    fetched = desktop.transport.fetch("nas", any_remote.url)

    assert fetched.tips == {laptop.id: commit} and fetched.own is None
    assert desktop.delivered() == {f"refs/remotes/sync/nas/{laptop.id}": commit}
    assert not (desktop.vault / "private").exists()  # nothing reaches the vault's files
    tips = json.loads(desktop.tips_bytes() or b"")
    assert tips["remotes"]["nas"]["seen"] == {laptop.id: commit}
    assert stat.S_IMODE((desktop.sync_dir / "tips.json").stat().st_mode) == 0o600

    desktop.adopt(commit)
    answer = desktop.write({"private/pages/beta.md": record("Beta")}, "beta")
    assert desktop.transport.push("nas", any_remote.url, answer) is True
    back = laptop.transport.fetch("nas", any_remote.url)
    assert back.tips == {desktop.id: answer} and back.own == commit
    assert laptop.delivered() == {f"refs/remotes/sync/nas/{desktop.id}": answer}


def test_pushes_are_fast_forwards_and_a_second_push_of_the_same_commit_says_so(
        any_remote: GitRemote, laptop: Machine) -> None:
    first = laptop.write({"private/pages/alpha.md": record("Alpha")})
    assert laptop.transport.push("nas", any_remote.url, first) is True
    assert laptop.transport.push("nas", any_remote.url, first) is False
    second = laptop.write({"private/pages/beta.md": record("Beta")})
    assert laptop.transport.push("nas", any_remote.url, second) is True
    assert refs(any_remote.path, "refs/heads/") == {branch(STORE, laptop.id): second}
    assert plain_git(any_remote.path, "rev-list", "--count", second) == "2"
    assert json.loads(laptop.tips_bytes() or b"")["remotes"]["nas"]["pushed"] == second
    assert laptop.transport.fetch("nas", any_remote.url).own == second


def test_a_fetch_with_nothing_new_changes_nothing(any_remote: GitRemote, laptop: Machine, desktop: Machine) -> None:
    commit = joined(laptop, desktop, any_remote)
    before = desktop.tips_bytes()
    assert desktop.transport.fetch("nas", any_remote.url).tips == {laptop.id: commit}
    assert desktop.tips_bytes() == before


def test_a_push_the_remote_took_before_a_crash_kept_it_from_being_recorded_is_recognised(
        bare_remote: GitRemote, laptop: Machine) -> None:
    first = laptop.write({"private/pages/alpha.md": record("Alpha")})
    laptop.transport.push("nas", bare_remote.url, first)
    second = laptop.write({"private/pages/beta.md": record("Beta")})
    plain_git(laptop.vault / ".git", "push", "-q", bare_remote.url, f"{second}:{branch(STORE, laptop.id)}")

    assert laptop.transport.fetch("nas", bare_remote.url).own == second
    assert json.loads(laptop.tips_bytes() or b"")["remotes"]["nas"]["pushed"] == second
    assert laptop.transport.push("nas", bare_remote.url, second) is False


# --- rewritten remotes ----------------------------------------------------------------------------


def test_a_rewritten_branch_of_this_machine_is_refused_on_fetch_and_push(
        any_remote: GitRemote, laptop: Machine) -> None:
    first = laptop.write({"private/pages/alpha.md": record("Alpha")})
    second = laptop.write({"private/pages/beta.md": record("Beta")})
    laptop.transport.push("nas", any_remote.url, second)
    # On the server: the branch forced back to a commit made there, which this machine never pushed.
    other = commit_on(any_remote.path, plain_git(any_remote.path, "rev-parse", f"{first}^{{tree}}"), first, "else")
    plain_git(any_remote.path, "update-ref", branch(STORE, laptop.id), other)
    tips = laptop.tips_bytes()

    with pytest.raises(SyncRefused) as refused:
        laptop.transport.fetch("nas", any_remote.url)
    assert refused.value.finding.code == "rewritten" and "rewritten" in refused.value.message
    third = laptop.write({"private/pages/gamma.md": record("Gamma")})
    with pytest.raises(SyncRefused) as rejected:
        laptop.transport.push("nas", any_remote.url, third)
    assert rejected.value.finding.code == "rewritten"
    assert refs(any_remote.path, "refs/heads/") == {branch(STORE, laptop.id): other}  # never overwritten
    assert laptop.tips_bytes() == tips


def test_a_copy_of_this_state_directory_pushing_as_this_machine_is_said_so_with_the_way_out(
        bare_remote: GitRemote, laptop: Machine, tmp_path: Path) -> None:
    """The owner copied the state directory to a second machine instead of cloning: both are one machine id,
    and the copy's pushes land on this machine's branch. Nothing is taken or overwritten either way."""
    laptop.transport.push("nas", bare_remote.url, laptop.write({"private/pages/alpha.md": record("Alpha")}))
    shutil.copytree(laptop.root, tmp_path / "copy")
    copy = Machine(tmp_path / "copy")
    assert copy.id == laptop.id
    pushed_by_copy = copy.write({"private/pages/beta.md": record("Beta")})
    assert copy.transport.push("nas", bare_remote.url, pushed_by_copy) is True
    laptop.write({"private/pages/gamma.md": record("Gamma")})
    tips = laptop.tips_bytes()

    with pytest.raises(SyncRefused) as refused:
        laptop.transport.fetch("nas", bare_remote.url)
    assert refused.value.finding.code == "rewritten"
    assert "another copy of this state directory" in refused.value.message
    assert f"remove machine.json and tips.json from {laptop.sync_dir}" in refused.value.message
    assert refs(bare_remote.path, "refs/heads/") == {branch(STORE, laptop.id): pushed_by_copy}
    assert laptop.tips_bytes() == tips


def test_a_vanished_branch_of_this_machine_is_rewritten(bare_remote: GitRemote, laptop: Machine) -> None:
    laptop.transport.push("nas", bare_remote.url, laptop.write({"private/pages/alpha.md": record("Alpha")}))
    plain_git(bare_remote.path, "update-ref", "-d", branch(STORE, laptop.id))
    with pytest.raises(SyncRefused) as refused:
        laptop.transport.fetch("nas", bare_remote.url)
    assert refused.value.finding.code == "rewritten"


def test_a_rewritten_branch_of_another_machine_is_refused_and_nothing_is_delivered(
        any_remote: GitRemote, laptop: Machine, desktop: Machine) -> None:
    base = joined(laptop, desktop, any_remote)
    later = laptop.write({"private/pages/beta.md": record("Beta")})
    laptop.transport.push("nas", any_remote.url, later)
    assert desktop.transport.fetch("nas", any_remote.url).tips == {laptop.id: later}
    # The laptop's branch forced on the server to a sibling of what the desktop saw.
    sibling = commit_on(any_remote.path, plain_git(any_remote.path, "rev-parse", f"{later}^{{tree}}"), base, "forced")
    plain_git(any_remote.path, "update-ref", branch(STORE, laptop.id), sibling)
    delivered, tips = desktop.delivered(), desktop.tips_bytes()

    with pytest.raises(SyncRefused) as refused:
        desktop.transport.fetch("nas", any_remote.url)

    assert refused.value.finding.code == "rewritten" and laptop.id in refused.value.message
    assert desktop.delivered() == delivered and desktop.tips_bytes() == tips


def test_another_stores_history_on_a_machine_branch_is_other_store(
        bare_remote: GitRemote, laptop: Machine, desktop: Machine, tmp_path: Path) -> None:
    joined(laptop, desktop, bare_remote)
    stranger = Machine(tmp_path / "stranger")
    unrelated = stranger.write({"private/pages/zeta.md": record("Zeta")})
    plain_git(stranger.vault / ".git", "push", "-q", bare_remote.url, f"{unrelated}:{branch(STORE, 'mc_STRANGER')}")
    delivered, tips = desktop.delivered(), desktop.tips_bytes()
    with pytest.raises(SyncRefused) as refused:
        desktop.transport.fetch("nas", bare_remote.url)
    assert refused.value.finding.code == "other_store"
    assert desktop.delivered() == delivered and desktop.tips_bytes() == tips


# --- untrusted content ----------------------------------------------------------------------------


def _hostile(remote: GitRemote, base: str, path: list[bytes], mode: str = "100644", data: bytes = b"x\n",
             kind: str = "blob", oid: str | None = None) -> str:
    """A commit made on the server on top of ``base``, adding one entry, on a machine branch of this store."""
    entry = oid or blob(remote.path, data)
    commit = commit_on(remote.path, tree_with(remote.path, base, path, mode, kind, entry), base)
    plain_git(remote.path, "update-ref", branch(STORE, "mc_HOSTILE"), commit)
    return commit


HOSTILE = {
    "symlink": ([b"private", b"pages", b"link.md"], "120000", "symlink"),
    "submodule": ([b"private", b"vendored"], "160000", "submodule"),
    "dot-git": ([b"private", b".git", b"config"], "100644", "unsafe_path"),
    "dot-GIT": ([b"private", b".GIT", b"hooks", b"post-checkout"], "100755", "unsafe_path"),
    "gitmodules": ([b".gitmodules"], "100644", "unsafe_path"),
    "not-utf8": ([b"private", b"pages", b"\xff\xfe.md"], "100644", "unsafe_path"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_untrusted_content_is_refused_with_nothing_delivered(
        any_remote: GitRemote, laptop: Machine, desktop: Machine, case: str) -> None:
    base = joined(laptop, desktop, any_remote)
    path, mode, code = HOSTILE[case]
    if mode == "160000":
        hostile = _hostile(any_remote, base, path, mode, kind="commit", oid=base)
    else:
        hostile = _hostile(any_remote, base, path, mode)
    delivered, tips = desktop.delivered(), desktop.tips_bytes()

    with pytest.raises(SyncRefused) as refused:
        desktop.transport.fetch("nas", any_remote.url)

    assert refused.value.finding.code == code
    assert refused.value.details["code"] == code and refused.value.reason == "conflict"
    assert desktop.delivered() == delivered and desktop.tips_bytes() == tips
    assert not (desktop.vault / "private").exists() and not (desktop.vault / "notes.txt").exists()
    assert subprocess.run(["git", "--git-dir", str(desktop.vault / ".git"), "cat-file", "-e", hostile],
                          capture_output=True).returncode != 0  # not even its objects reached the vault


@pytest.mark.parametrize("path", [[b"notes.txt"], [b"conversations", b"not-a-session", b"a.md"]])
def test_a_safe_file_sync_does_not_carry_is_fetched_and_left_out(
        bare_remote: GitRemote, laptop: Machine, desktop: Machine, path: list[bytes]) -> None:
    base = joined(laptop, desktop, bare_remote)
    hostile = _hostile(bare_remote, base, path, "100644")
    assert desktop.transport.fetch("nas", bare_remote.url).tips["mc_HOSTILE"] == hostile
    assert not (desktop.vault / "notes.txt").exists() and not (desktop.vault / "conversations").exists()


def test_an_oversized_record_is_too_large_and_a_retained_source_may_be_larger(
        any_remote: GitRemote, laptop: Machine, desktop: Machine) -> None:
    base = joined(laptop, desktop, any_remote)
    big = b"x" * (RECORD_MAX_BYTES + 1)
    source = _hostile(any_remote, base, [b"private", b"sources", b"src_1.bin"], data=big)
    assert desktop.transport.fetch("nas", any_remote.url).tips["mc_HOSTILE"] == source
    _hostile(any_remote, source, [b"private", b"pages", b"big.md"], data=big)
    delivered, tips = desktop.delivered(), desktop.tips_bytes()

    with pytest.raises(SyncRefused) as refused:
        desktop.transport.fetch("nas", any_remote.url)

    assert refused.value.finding.code == "too_large"
    assert refused.value.finding.path == "private/pages/big.md"
    assert desktop.delivered() == delivered and desktop.tips_bytes() == tips


def test_size_limits_follow_the_kind_of_file() -> None:
    assert size_limit("private/pages/a.md") == RECORD_MAX_BYTES
    assert size_limit("private/sources/src_1.source.yaml") == 64 * 1024
    assert size_limit("conversations/0b3c6c1e-5a2f-4c8e-9d1a-2f3e4d5c6b7a/sources/src_1.pdf") > RECORD_MAX_BYTES
    assert size_limit("ontology.yaml") == 64 * 1024


# --- stores, protocols, hooks, credentials -------------------------------------------------------


def test_two_stores_sharing_a_remote_never_see_each_others_branches(
        any_remote: GitRemote, laptop: Machine, tmp_path: Path) -> None:
    other = Machine(tmp_path / "other", store_id=OTHER_STORE)
    mine = laptop.write({"private/pages/alpha.md": record("Alpha")})
    theirs = other.write({"private/pages/zeta.md": record("Zeta")})
    laptop.transport.push("nas", any_remote.url, mine)
    other.transport.push("nas", any_remote.url, theirs)

    assert laptop.transport.fetch("nas", any_remote.url).tips == {}
    assert other.transport.fetch("nas", any_remote.url).tips == {}
    assert laptop.delivered() == {} and other.delivered() == {}
    assert refs(laptop.sync_dir / QUARANTINE, "refs/sync/") == {}
    assert laptop.transport.stores_on(any_remote.url) == {STORE: {laptop.id: mine}, OTHER_STORE: {other.id: theirs}}
    newcomer = Machine(tmp_path / "newcomer")
    assert newcomer.transport.fetch("nas", any_remote.url).tips == {laptop.id: mine}


def test_the_environment_allows_only_the_plain_transports(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GIT_DIR", "GIT_SSH_COMMAND", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG_PARAMETERS"):
        monkeypatch.setenv(name, "/tmp/elsewhere")
    env, options = git_environment()
    pairs = dict(option.split("=", 1) for option in options[1::2])
    assert pairs["protocol.allow"] == "never" and pairs["core.hooksPath"] == os.devnull
    assert {name for name, value in pairs.items() if name.startswith("protocol.") and value == "always"} == {
        "protocol.file.allow", "protocol.git.allow", "protocol.ssh.allow", "protocol.http.allow",
        "protocol.https.allow"}
    assert env["GIT_TERMINAL_PROMPT"] == "0" and [name for name in env if name.startswith("GIT_")] == [
        "GIT_TERMINAL_PROMPT"]
    assert "protocol.gcrypt.allow" in dict(o.split("=", 1) for o in git_environment(helpers=["gcrypt"])[1][1::2])


def test_a_url_that_sneaks_in_a_remote_helper_runs_nothing(
        laptop: Machine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "ext")  # an inherited allowance is not taken either
    commit = laptop.write({"private/pages/alpha.md": record("Alpha")})
    for url in (f"ext::sh -c touch% {marker}", "fd::0", "ftp://127.0.0.1/notes.git"):
        with pytest.raises(SyncRefused) as refused:
            laptop.transport.fetch("nas", url)
        assert refused.value.finding.code in ("git_failed", "unreachable")
        with pytest.raises(SyncRefused):
            laptop.transport.push("nas", url, commit)
    # The owner's own configuration rewriting an address into ext:: is refused the same way.
    (Path(os.environ["HOME"]) / ".gitconfig").write_text(
        f'[url "ext::sh -c touch% {marker}% #"]\n\tinsteadOf = https://rewritten.invalid/\n', encoding="utf-8")
    with pytest.raises(SyncRefused) as refused:
        laptop.transport.fetch("nas", "https://rewritten.invalid/notes.git")
    assert "ext" in refused.value.message
    assert not marker.exists()


def test_hooks_in_the_remote_the_vault_and_the_quarantine_never_run(
        bare_remote: GitRemote, laptop: Machine, desktop: Machine, tmp_path: Path) -> None:
    marker = tmp_path / "hook-ran"
    names = ("pre-receive", "update", "post-receive", "post-update", "reference-transaction", "push-to-checkout",
             "pre-push", "post-checkout", "post-merge", "proc-receive")
    for repository in (bare_remote.path, laptop.vault / ".git", desktop.vault / ".git"):
        hooks = repository / "hooks"
        hooks.mkdir(exist_ok=True)
        for name in names:
            (hooks / name).write_text(f"#!/bin/sh\necho {name} >> '{marker}'\n", encoding="utf-8")
            (hooks / name).chmod(0o755)
    plain_git(bare_remote.path, "config", "core.hooksPath", str(bare_remote.path / "hooks"))
    joined(laptop, desktop, bare_remote)
    for name in names:
        (desktop.sync_dir / QUARANTINE / "hooks").mkdir(exist_ok=True)
        (desktop.sync_dir / QUARANTINE / "hooks" / name).write_text(
                f"#!/bin/sh\necho quarantine {name} >> '{marker}'\n", encoding="utf-8")
        (desktop.sync_dir / QUARANTINE / "hooks" / name).chmod(0o755)
    later = desktop.write({"private/pages/beta.md": record("Beta")})
    desktop.transport.push("nas", f"file://{bare_remote.path}", later)
    laptop.transport.fetch("nas", bare_remote.url)
    desktop.transport.fetch("nas", bare_remote.url)
    assert not marker.exists(), marker.read_text(encoding="utf-8")


def test_the_url_is_never_logged_or_put_in_an_error(
        http_remote: GitRemote, laptop: Machine, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secret_path = "private-path-of-the-owner"
    url = http_remote.url.replace("http://", "http://alice@")
    commit = laptop.write({"private/pages/alpha.md": record("Alpha")})
    assert laptop.transport.push("nas", url, commit) is True
    laptop.transport.fetch("nas", url)
    port = free_port()
    failures = []
    for bad in (f"http://alice@127.0.0.1:{port}/{secret_path}.git", f"git://127.0.0.1:{port}/{secret_path}.git",
                f"/{secret_path}/missing.git", f"{http_remote.url.rsplit('/', 1)[0]}/{secret_path}.git"):
        with pytest.raises(SyncRefused) as refused:
            laptop.transport.fetch("nas", bad)
        failures.append(refused.value)
    for failure in failures:
        assert failure.finding.code == "unreachable", failure.message
        assert secret_path not in json.dumps(failure.to_dict()) and "alice" not in failure.message
    assert "alice" not in caplog.text and secret_path not in caplog.text
    assert b"alice" not in (laptop.tips_bytes() or b"")


def test_an_unreachable_remote_is_unreachable(any_remote: GitRemote, laptop: Machine, tmp_path: Path) -> None:
    port = free_port()
    url = {"disk": str(tmp_path / "nowhere" / "notes.git"), "daemon": f"git://127.0.0.1:{port}/notes.git",
           "http": f"http://127.0.0.1:{port}/notes.git"}[any_remote.kind]
    commit = laptop.write({"private/pages/alpha.md": record("Alpha")})
    for attempt in (lambda: laptop.transport.fetch("nas", url), lambda: laptop.transport.push("nas", url, commit),
                    lambda: laptop.transport.stores_on(url)):
        with pytest.raises(SyncRefused) as refused:
            attempt()
        assert refused.value.finding.code == "unreachable", refused.value.message
    assert laptop.tips_bytes() is None


def test_a_server_without_that_repository_is_said_to_hold_none(any_remote: GitRemote, laptop: Machine) -> None:
    """A mistyped repository name on a server that answers: the same words for a path, git:// and http://."""
    url = any_remote.url.replace("notes.git", "nots.git")
    commit = laptop.write({"private/pages/alpha.md": record("Alpha")})
    for attempt in (lambda: laptop.transport.fetch("nas", url), lambda: laptop.transport.push("nas", url, commit),
                    lambda: laptop.transport.stores_on(url)):
        with pytest.raises(SyncRefused) as refused:
            attempt()
        assert refused.value.finding.code == "unreachable", refused.value.message
        assert refused.value.message == "the remote could not be reached: there is no repository at that address"
    assert laptop.tips_bytes() is None


@pytest.mark.parametrize("said", [
    "fatal: remote error: no such repository: /nots.git",  # git daemon --informative-errors
    "fatal: remote error: access denied or repository not exported: /nots.git",  # git daemon without it
])
def test_git_daemons_words_for_a_missing_repository_are_ours(said: str) -> None:
    from engine.sync.transport import _failure

    refused = _failure(said.encode(), "git://host.example/nots.git")
    assert refused.finding.code == "unreachable"
    assert refused.finding.message == "the remote could not be reached: there is no repository at that address"


def test_a_missing_git_is_git_missing(laptop: Machine, tmp_path: Path) -> None:
    transport = Transport(laptop.sync_dir, str(tmp_path / "no-git"), STORE, laptop.id, laptop.vault / ".git")
    with pytest.raises(SyncRefused) as refused:
        transport.fetch("nas", str(make_bare(tmp_path / "r.git")))
    assert refused.value.finding.code == "git_missing"


def test_a_vault_without_its_repository_is_not_a_vault(bare_remote: GitRemote, tmp_path: Path) -> None:
    transport = Transport(tmp_path / "sync", git_executable(), STORE, "mc_X", tmp_path / "vault" / ".git")
    with pytest.raises(SyncRefused) as refused:
        transport.fetch("nas", bare_remote.url)
    assert refused.value.finding.code == "not_a_vault"
    assert not (tmp_path / "sync").exists()


# --- machine.json ----------------------------------------------------------------------------------


def test_the_machine_id_is_made_once_and_kept(tmp_path: Path) -> None:
    sync_dir = tmp_path / "sync"
    first = machine_id(sync_dir)
    assert machine_id(sync_dir) == first and first.startswith("mc_")
    assert stat.S_IMODE((sync_dir / "machine.json").stat().st_mode) == 0o600
    assert json.loads((sync_dir / "machine.json").read_text(encoding="utf-8")) == {
        "schemaVersion": 1, "machineId": first}
    assert machine_id(tmp_path / "elsewhere") != first


@pytest.mark.parametrize("content", [b"{", b'{"schemaVersion": 2, "machineId": "mc_A"}',
                                     b'{"schemaVersion": 1, "machineId": "a/b"}', b"[]"])
def test_a_machine_file_that_is_not_ours_is_refused_and_kept(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "machine.json").write_bytes(content)
    with pytest.raises(Conflict):
        machine_id(tmp_path)
    assert (tmp_path / "machine.json").read_bytes() == content


def test_the_quarantine_has_no_hooks_or_alternates(bare_remote: GitRemote, laptop: Machine, tmp_path: Path) -> None:
    laptop.transport.fetch("nas", bare_remote.url)
    quarantine = laptop.sync_dir / QUARANTINE
    assert not (quarantine / "hooks").exists()
    (quarantine / "objects" / "info" / "alternates").write_text(str(tmp_path), encoding="utf-8")
    laptop.transport.fetch("nas", bare_remote.url)
    assert not (quarantine / "objects" / "info" / "alternates").exists()
    assert git_executable()


def test_one_blob_at_a_source_and_a_record_path_is_held_to_the_record_limit(
        bare_remote: GitRemote, laptop: Machine, desktop: Machine) -> None:
    base = joined(laptop, desktop, bare_remote)
    big = blob(bare_remote.path, b"y" * (RECORD_MAX_BYTES + 1))
    both = tree_with(bare_remote.path, base, [b"private", b"sources", b"src_2.bin"], "100644", "blob", big)
    with_record = commit_on(bare_remote.path, both, base)
    record_tree = tree_with(bare_remote.path, with_record, [b"private", b"zettel", b"copy.md"], "100644", "blob", big)
    plain_git(bare_remote.path, "update-ref", branch(STORE, "mc_HOSTILE"),
              commit_on(bare_remote.path, record_tree, base))
    with pytest.raises(SyncRefused) as refused:
        desktop.transport.fetch("nas", bare_remote.url)
    assert refused.value.finding.code == "too_large" and refused.value.finding.path == "private/zettel/copy.md"


def test_removing_a_file_sync_does_not_carry_is_no_refusal(
        bare_remote: GitRemote, laptop: Machine, desktop: Machine) -> None:
    (laptop.vault / "notes.txt").write_text("kept before git was on\n", encoding="utf-8")
    first = laptop.write({"private/pages/alpha.md": record("Alpha")})  # the first commit takes notes.txt in
    plain_git(laptop.vault / ".git", "push", "-q", bare_remote.url, f"{first}:{branch(STORE, 'mc_OLD')}")
    plain_git(desktop.vault / ".git", "fetch", "-q", bare_remote.url, f"{branch(STORE, 'mc_OLD')}:refs/old")
    desktop.adopt(first)  # a machine whose history began with that commit
    listed = plain_git(bare_remote.path, "ls-tree", first).splitlines()
    kept = "".join(line + "\n" for line in listed if not line.endswith("\tnotes.txt"))
    removal = commit_on(bare_remote.path, plain_git(bare_remote.path, "mktree", stdin=kept.encode()), first)
    plain_git(bare_remote.path, "update-ref", branch(STORE, laptop.id), removal)
    assert desktop.transport.fetch("nas", bare_remote.url).tips == {"mc_OLD": first, laptop.id: removal}


def test_a_remote_corrected_after_a_refusal_is_fetched_again(
        bare_remote: GitRemote, laptop: Machine, desktop: Machine) -> None:
    base = joined(laptop, desktop, bare_remote)
    _hostile(bare_remote, base, [b"private", b"link.md"], "120000")
    with pytest.raises(SyncRefused):
        desktop.transport.fetch("nas", bare_remote.url)
    plain_git(bare_remote.path, "update-ref", "-d", branch(STORE, "mc_HOSTILE"))
    later = laptop.write({"private/pages/beta.md": record("Beta")})
    laptop.transport.push("nas", bare_remote.url, later)
    assert desktop.transport.fetch("nas", bare_remote.url).tips == {laptop.id: later}


def test_a_quarantine_removed_by_hand_still_knows_what_was_seen(
        bare_remote: GitRemote, laptop: Machine, desktop: Machine) -> None:
    base = joined(laptop, desktop, bare_remote)
    later = laptop.write({"private/pages/beta.md": record("Beta")})
    laptop.transport.push("nas", bare_remote.url, later)
    desktop.transport.fetch("nas", bare_remote.url)
    shutil.rmtree(desktop.sync_dir / QUARANTINE)
    sibling = commit_on(bare_remote.path, plain_git(bare_remote.path, "rev-parse", f"{later}^{{tree}}"), base, "forced")
    plain_git(bare_remote.path, "update-ref", branch(STORE, laptop.id), sibling)
    with pytest.raises(SyncRefused) as refused:
        desktop.transport.fetch("nas", bare_remote.url)
    assert refused.value.finding.code == "rewritten"


def test_an_unreadable_tips_file_is_refused_and_kept(bare_remote: GitRemote, laptop: Machine) -> None:
    (laptop.sync_dir / "tips.json").write_text('{"schemaVersion": 1, "remotes": {"nas": {}}}', encoding="utf-8")
    with pytest.raises(Conflict) as refused:
        laptop.transport.fetch("nas", bare_remote.url)
    assert "tips.json" in refused.value.message
    assert (laptop.sync_dir / "tips.json").read_text(encoding="utf-8").endswith("{}}}")


def test_a_remote_asking_for_credentials_git_lacks_says_so(laptop: Machine) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class AsksForAPassword(BaseHTTPRequestHandler):  # a private https remote, and no credential helper here
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), AsksForAPassword)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/owner-private-path/notes.git"
        with pytest.raises(SyncRefused) as refused:
            laptop.transport.fetch("nas", url)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert refused.value.finding.code == "unreachable", refused.value.message
    assert refused.value.message == ("the remote could not be reached: it asks for credentials git has none for "
                                     "(give git a credential helper, or use an ssh address and key)")


def test_a_url_in_gits_words_is_redacted_up_to_its_closing_quote() -> None:
    from engine.sync.transport import _redact

    said = "fatal: unable to access 'https://alice@host.example/secret.git/': The requested URL returned error: 500"
    assert _redact(said, None) == "fatal: unable to access '<remote>': The requested URL returned error: 500"


@pytest.mark.parametrize(("said", "reason"), [
    ("fatal: could not read Username for 'http://127.0.0.1:40123/notes.git': terminal prompts disabled",
     "it asks for credentials git has none for (give git a credential helper, or use an ssh address and key)"),
    ("remote: Repository not found.\nfatal: repository 'https://host.example/releases-403.git/' not found",
     "there is no repository at that address"),
    ("fatal: unable to access 'https://host.example/notes.git/': The requested URL returned error: 401",
     "it refused the credentials"),
])
def test_the_remotes_address_never_decides_why_it_could_not_be_reached(said: str, reason: str) -> None:
    from engine.sync.transport import _failure

    refused = _failure(said.encode(), "https://host.example/notes.git")
    assert refused.finding.code == "unreachable"
    assert refused.finding.message == f"the remote could not be reached: {reason}"
