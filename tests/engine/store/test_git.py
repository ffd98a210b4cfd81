"""Local git history of a vault: exact published bytes, one repo per vault, never a rollback."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

from engine.access.authority import AgentCaller
from engine.service import Engine
from engine.state.statedir import StateDir
import pytest

from engine.store import githistory
from engine.store.githistory import CommitFile, GitError, GitHistory
from tests.helpers import claim, only_store, page, private_dir


def _git_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env["GIT_CONFIG_NOSYSTEM"] = "1"  # HOME is already a temporary directory (conftest)
    return env


def git(vault: Path, *args: str) -> str:
    """Run git against exactly ``vault``'s repository, never one found by searching upwards."""
    completed = subprocess.run(
        ["git", f"--git-dir={vault / '.git'}", f"--work-tree={vault}", *args],
        cwd=vault, env=_git_env(), capture_output=True, check=True, timeout=60,
    )
    return completed.stdout.decode("utf-8").strip()


def git_show(vault: Path, commit: str, path: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={vault / '.git'}", "show", f"{commit}:{path}"],
        cwd=vault, env=_git_env(), capture_output=True, check=True, timeout=60,
    ).stdout


def outer_git(root: Path, *args: str) -> str:
    completed = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.invalid", *args],
        cwd=root, env=_git_env(), capture_output=True, check=True, timeout=60,
    )
    return completed.stdout.decode("utf-8").strip()


def vault_of(state: StateDir) -> Path:
    return only_store(state) / "vault"


def record_path(engine: Engine, caller: AgentCaller, record_id: str) -> str:
    return engine.get_record(caller, record_id)["path"]


def test_checkpoint_commits_the_published_bytes_and_receipts_name_the_commit(
        engine: Engine, owner: AgentCaller, state_dir: StateDir) -> None:
    receipt = engine.save_page(owner, page("git-1", "Dana Whitaker", body="Dana runs operations."))
    path = record_path(engine, owner, receipt["id"])
    published = (private_dir(state_dir) / path).read_bytes()

    resumed = engine.resume(owner)
    retry = engine.save_page(owner, page("git-1", "Dana Whitaker", body="Dana runs operations."))

    vault = vault_of(state_dir)
    head = git(vault, "rev-parse", "refs/heads/main")
    assert resumed["state"] == "committed" and resumed["commit"] == head
    assert retry["publicationId"] == receipt["publicationId"]
    assert retry["git"] == {"state": "committed", "commit": head}
    assert git_show(vault, head, f"private/{path}") == published


def test_commit_holds_the_published_bytes_not_a_later_edit(
        engine: Engine, owner: AgentCaller, state_dir: StateDir) -> None:
    engine.save_page(owner, page("git-first", "Northwind Labs", type_="organization"))
    assert engine.resume(owner)["state"] == "committed"
    vault = vault_of(state_dir)
    # Hold the branch so no checkpoint can run before the edit below.
    lock = vault / ".git" / "refs" / "heads" / "main.lock"
    lock.write_bytes(b"")

    receipt = engine.save_page(owner, page("git-edit", "Ravi Menon", body="Ravi leads the backend."))
    path = record_path(engine, owner, receipt["id"])
    on_disk = private_dir(state_dir) / path
    published = on_disk.read_bytes()
    edited = published.replace(b"Ravi leads the backend.", b"Edited outside the engine.")
    assert edited != published
    on_disk.write_bytes(edited)
    lock.unlink()

    resumed = engine.resume(owner)

    assert resumed["state"] == "committed"
    assert git_show(vault, resumed["commit"], f"private/{path}") == published
    assert on_disk.read_bytes() == edited
    # The edit shows up as an ordinary uncommitted change, nothing else does.
    assert git(vault, "status", "--porcelain") == f"M private/{path}"


def test_every_revision_gets_its_own_commit_and_the_tree_stays_clean(
        engine: Engine, owner: AgentCaller, state_dir: StateDir) -> None:
    first = engine.save_page(owner, page("rev-1", "Atlas Migration", type_="project", body="Version one."))
    commits = [engine.resume(owner)["commit"]]
    for revision in (2, 3):
        engine.save_page(owner, page(f"rev-{revision}", "Atlas Migration", type_="project",
                                     body=f"Version {revision}.", id=first["id"],
                                     expectedRevision=revision - 1))
        commits.append(engine.resume(owner)["commit"])
    remembered = engine.remember(owner, {"requestId": "rev-claim", "subject": first["id"], "items": [
        claim("Atlas cuts over on January 22.", "The cut-over slips to January 22.", kind="project_state"),
    ]})
    claim_commit = engine.resume(owner)["commit"]

    vault = vault_of(state_dir)
    path = record_path(engine, owner, first["id"])
    assert len(set(commits)) == 3
    assert git(vault, "log", "--format=%H", "refs/heads/main", "--", f"private/{path}").split() == commits[::-1]
    assert git(vault, "log", "--format=%H", "refs/heads/main").split() == [claim_commit, *commits[::-1]]
    for revision, commit in enumerate(commits, start=1):
        assert f"revision: {revision}\n".encode() in git_show(vault, commit, f"private/{path}")
    history = engine.history(owner, first["id"])
    assert [entry["git"] for entry in history["revisions"]] == [{"commit": c} for c in commits]
    claim_path = record_path(engine, owner, remembered["items"][0]["id"])
    assert f"private/{claim_path}" in git(vault, "ls-tree", "-r", "--name-only", claim_commit).splitlines()
    assert git(vault, "status", "--porcelain") == ""


def test_without_git_receipts_say_unavailable_and_everything_else_works(state_dir: StateDir) -> None:
    with Engine(state_dir, watch=False, git=False) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        created = engine.save_page(owner, page("nogit-1", "Dana Whitaker"))
        revised = engine.save_page(owner, page("nogit-2", "Dana Whitaker", body="Revised.", id=created["id"],
                                               expectedRevision=1))
        remembered = engine.remember(owner, {"requestId": "nogit-3", "subject": created["id"], "items": [
            claim("Dana prefers Friday notes.", "Send me the notes every Friday.", kind="preference"),
        ]})
        retry = engine.save_page(owner, page("nogit-1", "Dana Whitaker"))
        resumed = engine.resume(owner)
        current = engine.get_record(owner, created["id"])
        first = engine.get_record(owner, created["id"], revision=1)
        history = engine.history(owner, created["id"])
        claim_record = engine.get_record(owner, remembered["items"][0]["id"])
        diagnostics = engine.diagnostics(owner)

    for receipt in (created, revised, remembered, retry):
        assert receipt["git"] == {"state": "unavailable"}
    assert resumed["state"] == "unavailable"
    assert current["revision"] == 2 and current["body"].strip() == "Revised."
    assert first["status"] == "historical"
    assert [entry["revision"] for entry in history["revisions"]] == [1, 2]
    assert all(entry["git"] is None for entry in history["revisions"])
    assert claim_record["status"] == "current"
    assert diagnostics["git"]["state"] == "unavailable"
    assert not (vault_of(state_dir) / ".git").exists()


def test_the_first_commit_takes_in_what_was_published_while_git_was_unavailable(state_dir: StateDir) -> None:
    with Engine(state_dir, watch=False, git=False) as engine:
        token = engine.add_agent("main", owner=True)
        owner = AgentCaller(token, {"kind": "owner-private"})
        before = engine.save_page(owner, page("early", "Dana Whitaker"))
    with Engine(state_dir, watch=False) as engine:
        later = engine.save_page(owner, page("later", "Northwind", type_="organization"))
        assert engine.resume(owner)["state"] == "committed"
        early_path = record_path(engine, owner, before["id"])
        later_path = record_path(engine, owner, later["id"])
    vault = vault_of(state_dir)
    tracked = git(vault, "ls-files").splitlines()
    assert f"private/{early_path}" in tracked and f"private/{later_path}" in tracked
    assert git(vault, "status", "--porcelain", "--untracked-files=all") == ""


def test_the_first_commit_reads_the_vault_on_the_lane(state_dir: StateDir, monkeypatch) -> None:
    """Found by the disk-full harness under load: read beside the lane, the first commit's walk of the vault
    took in a file of a publication that was installed and then rolled back, so git kept a file the vault
    never acknowledged and ``git status`` showed it deleted."""
    walked_on = []
    real = GitHistory.existing_files

    def existing_files(self):
        walked_on.append(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(GitHistory, "existing_files", existing_files)
    with Engine(state_dir, watch=False) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("first", "Dana Whitaker"))
        assert engine.resume(owner)["state"] == "committed"
    assert walked_on and all(name.startswith("lane-") for name in walked_on)


def test_an_enclosing_repository_is_never_adopted(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    outer.mkdir()
    outer_git(outer, "init", "-q")
    (outer / "README").write_text("outer project\n", encoding="utf-8")
    outer_git(outer, "add", "README")
    outer_git(outer, "commit", "-q", "-m", "outer")
    outer_head = outer_git(outer, "rev-parse", "HEAD")
    state = StateDir(outer / "state")

    with Engine(state, watch=False) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        receipt = engine.save_page(owner, page("outer-1", "Dana Whitaker"))
        resumed = engine.resume(owner)
        path = record_path(engine, owner, receipt["id"])

    vault = vault_of(state)
    assert resumed["state"] == "committed"
    assert (vault / ".git").is_dir()
    assert outer_git(vault, "rev-parse", "--show-toplevel") == str(vault)
    assert f"private/{path}" in git(vault, "ls-tree", "-r", "--name-only", resumed["commit"]).splitlines()
    assert outer_git(outer, "rev-parse", "HEAD") == outer_head
    assert outer_git(outer, "rev-list", "--all", "--count") == "1"
    assert outer_git(outer, "diff", "--cached", "--name-only") == ""
    assert outer_git(outer, "ls-files") == "README"


def test_a_git_failure_never_rolls_back_a_publication(
        engine: Engine, owner: AgentCaller, state_dir: StateDir) -> None:
    engine.save_page(owner, page("fail-0", "Northwind Labs", type_="organization"))
    assert engine.resume(owner)["state"] == "committed"
    vault = vault_of(state_dir)
    head = git(vault, "rev-parse", "refs/heads/main")
    lock = vault / ".git" / "refs" / "heads" / "main.lock"
    lock.write_bytes(b"")

    receipt = engine.save_page(owner, page("fail-1", "Ravi Menon", body="Ravi leads the backend."))
    record = engine.get_record(owner, receipt["id"])
    published = (private_dir(state_dir) / record["path"]).read_bytes()
    stuck = engine.resume(owner)
    diagnostics = engine.diagnostics(owner)

    assert receipt["revision"] == 1 and receipt["git"] == {"state": "pending"}
    assert record["status"] == "current" and record["title"] == "Ravi Menon"
    assert stuck["state"] == "pending" and stuck["reason"] and stuck["publications"] == 1
    assert diagnostics["git"]["state"] == "pending" and diagnostics["git"]["lastError"]
    assert git(vault, "rev-parse", "refs/heads/main") == head

    lock.unlink()
    resumed = engine.resume(owner)
    retry = engine.save_page(owner, page("fail-1", "Ravi Menon", body="Ravi leads the backend."))

    assert resumed["state"] == "committed" and resumed["commit"] != head
    assert retry["git"] == {"state": "committed", "commit": resumed["commit"]}
    assert git_show(vault, resumed["commit"], f"private/{record['path']}") == published
    assert engine.diagnostics(owner)["git"]["state"] == "committed"


def test_a_vault_git_path_that_is_not_a_directory_keeps_writes_pending(state_dir: StateDir) -> None:
    with Engine(state_dir, watch=False, git=False) as engine:
        token = engine.add_agent("main", owner=True)
        engine.save_page(AgentCaller(token, {"kind": "owner-private"}), page("plain-0", "Northwind Labs",
                                                                            type_="organization"))
    vault = vault_of(state_dir)
    (vault / ".git").write_text("gitdir: /somewhere/else\n", encoding="utf-8")

    with Engine(state_dir, watch=False) as engine:
        owner = AgentCaller(token, {"kind": "owner-private"})
        receipt = engine.save_page(owner, page("plain-1", "Dana Whitaker"))
        stuck = engine.resume(owner)
        record = engine.get_record(owner, receipt["id"])
        assert stuck["state"] == "pending" and "not a directory" in stuck["reason"]
        assert record["title"] == "Dana Whitaker"
        assert (vault / ".git").read_text(encoding="utf-8") == "gitdir: /somewhere/else\n"

        (vault / ".git").unlink()
        resumed = engine.resume(owner)

    assert resumed["state"] == "committed"
    assert f"private/{record['path']}" in git(vault, "ls-tree", "-r", "--name-only", resumed["commit"]).splitlines()


def test_the_vault_repository_has_no_remotes(engine: Engine, owner: AgentCaller, state_dir: StateDir) -> None:
    engine.save_page(owner, page("remote-0", "Dana Whitaker"))
    engine.remember(owner, {"requestId": "remote-1", "items": [claim("Dana likes tea.", "I like tea.")]})
    assert engine.resume(owner)["state"] == "committed"

    vault = vault_of(state_dir)
    assert git(vault, "remote") == ""
    assert "remote." not in git(vault, "config", "--local", "--list")
    assert git(vault, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert git(vault, "rev-parse", "--is-bare-repository") == "false"


def test_a_vault_repository_with_a_remote_is_refused_without_losing_writes(state_dir: StateDir) -> None:
    with Engine(state_dir, watch=False) as engine:
        token = engine.add_agent("main", owner=True)
        owner = AgentCaller(token, {"kind": "owner-private"})
        engine.save_page(owner, page("remote-0", "Dana Whitaker"))
        assert engine.resume(owner)["state"] == "committed"
    vault = vault_of(state_dir)
    git(vault, "remote", "add", "origin", "https://example.invalid/vault.git")
    head = git(vault, "rev-parse", "refs/heads/main")

    with Engine(state_dir, watch=False) as engine:
        receipt = engine.save_page(owner, page("remote-1", "Ravi Menon"))
        stuck = engine.resume(owner)
        assert stuck["state"] == "pending" and "remote" in stuck["reason"]
        assert engine.get_record(owner, receipt["id"])["title"] == "Ravi Menon"
    assert git(vault, "rev-parse", "refs/heads/main") == head

    git(vault, "remote", "remove", "origin")
    with Engine(state_dir, watch=False) as engine:
        resumed = engine.resume(owner)
        path = record_path(engine, owner, receipt["id"])
    assert resumed["state"] == "committed" and resumed["publications"] == 1
    assert f"private/{path}" in git(vault, "ls-tree", "-r", "--name-only", resumed["commit"]).splitlines()


def test_a_vault_repository_removed_while_running_is_recreated_by_the_next_checkpoint(
        engine: Engine, owner: AgentCaller, state_dir: StateDir) -> None:
    engine.save_page(owner, page("gone-0", "Dana Whitaker"))
    assert engine.resume(owner)["state"] == "committed"
    vault = vault_of(state_dir)
    shutil.rmtree(vault / ".git")

    receipt = engine.save_page(owner, page("gone-1", "Ravi Menon"))
    resumed = engine.resume(owner)

    assert engine.get_record(owner, receipt["id"])["title"] == "Ravi Menon"
    assert resumed["state"] == "committed", resumed
    assert (vault / ".git").is_dir()
    path = record_path(engine, owner, receipt["id"])
    assert git_show(vault, resumed["commit"], f"private/{path}") == (vault / "private" / path).read_bytes()


def test_revisions_queued_in_one_batch_each_keep_their_bytes_in_history(
        engine: Engine, owner: AgentCaller, state_dir: StateDir) -> None:
    """Found by the crash harness: a batch holding two revisions of one page committed only the last."""
    first = engine.save_page(owner, page("batch-1", "Atlas Migration", type_="project", body="Version one."))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    with runtime._git_lock:  # hold the git queue so every revision lands in one batch
        for revision in (2, 3):
            engine.save_page(owner, page(f"batch-{revision}", "Atlas Migration", type_="project",
                                         body=f"Version {revision}.", id=first["id"],
                                         expectedRevision=revision - 1))
    assert engine.resume(owner)["state"] == "committed"

    vault = vault_of(state_dir)
    path = f"private/{record_path(engine, owner, first['id'])}"
    history = engine.history(owner, first["id"])["revisions"]
    assert [entry["revision"] for entry in history] == [1, 2, 3]
    for entry in history:
        assert f"revision: {entry['revision']}\n".encode() in git_show(vault, entry["git"]["commit"], path)
    assert git(vault, "status", "--porcelain") == ""


def test_a_left_over_index_lock_is_reported_and_the_index_catches_up_once_it_is_gone(
        engine: Engine, owner: AgentCaller, state_dir: StateDir) -> None:
    """Found by the fault harness: commits made while index.lock was held left `git status` dirty for good."""
    engine.save_page(owner, page("lock-0", "Northwind Labs", type_="organization"))
    assert engine.resume(owner)["state"] == "committed"
    vault = vault_of(state_dir)
    lock = vault / ".git" / "index.lock"
    lock.write_bytes(b"")

    engine.save_page(owner, page("lock-1", "Ravi Menon", body="Ravi leads the backend."))
    engine.remember(owner, {"requestId": "lock-2", "subject": "Ravi Menon",
                            "items": [claim("Ravi prefers async reviews.", "async reviews please")]})
    locked = engine.resume(owner)
    assert locked["state"] == "committed" and "index.lock" in locked["index"]
    assert str(vault) not in locked["index"]
    assert lock.exists(), "a lock the engine did not leave is never removed: whose it is cannot be known"

    lock.unlink()
    resumed = engine.resume(owner)
    assert resumed["state"] == "committed" and "index" not in resumed
    assert git(vault, "status", "--porcelain", "--untracked-files=all") == ""


def test_an_index_a_crash_left_behind_its_commit_is_repaired_by_the_next_engine(state_dir: StateDir) -> None:
    """A SIGKILL between a commit and its index update leaves the index one commit behind."""
    with Engine(state_dir, watch=False) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        saved = engine.save_page(owner, page("crash-0", "Northwind Labs", type_="organization"))
        assert engine.resume(owner)["state"] == "committed"
        path = f"private/{record_path(engine, owner, saved['id'])}"
    vault = vault_of(state_dir)
    git(vault, "rm", "--cached", "-q", path)  # as if update-index never ran for that commit
    assert git(vault, "status", "--porcelain") != ""

    with Engine(state_dir, watch=False) as engine:
        assert "index" not in engine.resume(owner)
    assert git(vault, "status", "--porcelain", "--untracked-files=all") == ""


def _git_that_leaves(tmp_path: Path, command: str, lock: str, *, succeeds: bool = False) -> tuple[Path, Path]:
    """A git that, while ``switch`` exists, leaves ``lock`` behind in ``command``, the way git does when the vault
    turns read-only under it: it dies after taking the lock or, with ``succeeds``, does its work and only then
    fails to remove it; returns (the executable, the switch)."""
    switch = tmp_path / "leave-lock"
    script = tmp_path / "git"
    real = shutil.which("git")
    work = f'"{real}" "$@"; status=$?; : > "$GIT_DIR/{lock}"; exit $status' if succeeds else \
        f': > "$GIT_DIR/{lock}"; echo "fatal: Unable to rename {lock}: Permission denied" >&2; exit 128'
    script.write_text(
        "#!/bin/sh\n"
        f'if [ -e "{switch}" ]; then for arg in "$@"; do if [ "$arg" = "{command}" ]; then\n'
        f"  {work}\n"
        "fi; done; fi\n"
        f'exec "{real}" "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    return script, switch


def _refuses_writes_while(monkeypatch, switch: Path) -> None:
    """The vault's folders refuse writes while ``switch`` exists, as a read-only disk's would (the suite runs
    as root, whom file modes do not bind)."""
    monkeypatch.setattr(githistory, "_refuses_writes", lambda folder: switch.exists())


def _commit(history: GitHistory, vault: Path, name: str, text: bytes) -> str:
    (vault / name).write_bytes(text)
    return history.commit([CommitFile(name, text)], f"save {name}")


@pytest.mark.parametrize(("command", "lock", "succeeds"), [
    ("update-index", "index.lock", False), ("fast-import", "HEAD.lock", False), ("fast-import", "HEAD.lock", True),
])
def test_a_lock_a_git_command_left_is_removed_and_history_catches_up(
        tmp_path: Path, monkeypatch, command: str, lock: str, succeeds: bool) -> None:
    """Found by the fault harness: a vault made read-only while a commit ran left git's lock behind, so every
    later checkpoint failed (HEAD.lock) or the index stayed behind (index.lock) until the owner removed it."""
    vault = tmp_path / "vault"
    vault.mkdir()
    executable, switch = _git_that_leaves(tmp_path, command, lock, succeeds=succeeds)
    _refuses_writes_while(monkeypatch, switch)
    history = GitHistory(vault, str(executable))
    _commit(history, vault, "one.md", b"one")

    switch.touch()
    if command == "fast-import" and not succeeds:
        with pytest.raises(GitError, match=lock):
            _commit(history, vault, "two.md", b"two")
    else:
        _commit(history, vault, "two.md", b"two")
        assert succeeds or lock in (history.index_problem or "")
    assert not (vault / ".git" / lock).exists()

    switch.unlink()
    (vault / "two.md").unlink()
    _commit(history, vault, "two.md", b"two")
    assert history.index_problem is None
    assert git(vault, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_left_lock_the_disk_will_not_remove_yet_is_removed_by_the_next_writing_command(
        tmp_path: Path, monkeypatch) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    executable, switch = _git_that_leaves(tmp_path, "update-index", "index.lock")
    _refuses_writes_while(monkeypatch, switch)
    history = GitHistory(vault, str(executable))
    _commit(history, vault, "one.md", b"one")
    lock = vault / ".git" / "index.lock"
    real_unlink = Path.unlink

    def read_only_unlink(self: Path, missing_ok: bool = False) -> None:
        if self == lock:
            raise PermissionError(13, "Permission denied", str(self))
        real_unlink(self, missing_ok=missing_ok)

    switch.touch()
    monkeypatch.setattr(Path, "unlink", read_only_unlink)
    _commit(history, vault, "two.md", b"two")
    assert lock.exists()
    history.head()  # a read never removes a lock: a writing command beside it could own one by that name
    monkeypatch.setattr(Path, "unlink", real_unlink)
    assert lock.exists()

    switch.unlink()
    assert history.repair_index() is None and not lock.exists()
    assert git(vault, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_lock_someone_else_took_while_a_command_ran_is_left_alone(tmp_path: Path) -> None:
    """An owner holding the branch (main.lock) just as a checkpoint runs: the folder takes writes, so git's own
    clean-up cannot have failed and the lock is not the engine's.  Found by test_commit_holds_..., whose lock
    the first version of the clean-up took."""
    vault = tmp_path / "vault"
    vault.mkdir()
    executable, switch = _git_that_leaves(tmp_path, "fast-import", "refs/heads/main.lock", succeeds=True)
    history = GitHistory(vault, str(executable))
    _commit(history, vault, "one.md", b"one")
    switch.touch()
    _commit(history, vault, "two.md", b"two")
    switch.unlink()
    lock = vault / ".git" / "refs" / "heads" / "main.lock"
    assert lock.exists()
    with pytest.raises(GitError, match="main.lock"):
        _commit(history, vault, "three.md", b"three")
    assert lock.exists()


def _blobs_in_one_fanout_folder(count: int, folder: str = "17") -> list[bytes]:
    """Contents whose blobs all land in ``objects/<folder>``: the folder ``git gc --auto`` counts to estimate
    how many loose objects there are."""
    found, n = [], 0
    while len(found) < count:
        data = f"note {n}\n".encode()
        if hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest().startswith(folder):
            found.append(data)
        n += 1
    return found


def test_tidy_packs_the_loose_objects_checkpoints_leave_and_history_reads_the_same(tmp_path: Path) -> None:
    """Every checkpoint left its objects loose and nothing ever packed them: 3,000 checkpoints took 208 MiB."""
    vault = tmp_path / "vault"
    vault.mkdir()
    history = GitHistory(vault, shutil.which("git"))
    history.tidy()  # no history yet: nothing to do
    for index, data in enumerate(_blobs_in_one_fanout_folder(3)):
        _commit(history, vault, f"note-{index}.md", data)
    log = history.log()
    history.gc_auto_objects = 10_000  # above the count: a quick look, nothing packed
    history.tidy()
    assert "in-pack: 0" in git(vault, "count-objects", "-v")
    history.gc_auto_objects = 1  # git's threshold per fan-out folder is then 1; three blobs are there
    history.tidy()
    counted = dict(line.split(": ") for line in git(vault, "count-objects", "-v").splitlines())
    assert counted["count"] == "0" and int(counted["in-pack"]) >= 9 and counted["packs"] == "1"
    assert history.log() == log
    assert git_show(vault, log[0]["commit"], "note-2.md") == _blobs_in_one_fanout_folder(3)[2]
    assert git(vault, "status", "--porcelain", "--untracked-files=all") == ""


def test_the_git_thread_tidies_the_history_after_committing(state_dir: StateDir, monkeypatch) -> None:
    tidied = threading.Event()
    monkeypatch.setattr(GitHistory, "tidy", lambda self: tidied.set())
    with Engine(state_dir, watch=True) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("tidy-0", "Northwind Labs", type_="organization"))
        assert tidied.wait(30), "the git thread never packed the history after a checkpoint"


def test_a_remote_added_while_running_is_refused_at_the_next_checkpoint(
        engine: Engine, owner: AgentCaller, state_dir: StateDir) -> None:
    """The remote check asks git again once vault/.git/config changed, not only when the engine starts."""
    engine.save_page(owner, page("remote-0", "Dana Whitaker"))
    assert engine.resume(owner)["state"] == "committed"
    vault = vault_of(state_dir)
    git(vault, "remote", "add", "origin", "https://example.invalid/vault.git")
    engine.save_page(owner, page("remote-1", "Ravi Menon"))
    stuck = engine.resume(owner)
    assert stuck["state"] == "pending" and "remote" in stuck["reason"]


def test_the_branch_read_from_its_files_is_what_git_says(tmp_path: Path, monkeypatch) -> None:
    """``head`` reads the loose ref, then packed-refs, as git writes them; anything else is git's to answer."""
    vault = tmp_path / "vault"
    vault.mkdir()
    history = GitHistory(vault, shutil.which("git") or "git")
    history.ensure_repository()
    assert history.head() is None
    first = history.commit([CommitFile("a.md", b"a\n")], "first")
    assert first == git(vault, "rev-parse", "refs/heads/main") == history.head()
    git(vault, "pack-refs", "--all")
    assert not (vault / ".git" / "refs" / "heads" / "main").exists()
    assert history.head() == first  # from packed-refs
    second = history.commit([CommitFile("b.md", b"b\n")], "second")
    assert second == git(vault, "rev-parse", "refs/heads/main") == history.head() != first

    started: list[tuple[str, ...]] = []
    run = GitHistory._run
    monkeypatch.setattr(GitHistory, "_run", lambda self, *args, **kw: started.append(args) or run(self, *args, **kw))
    assert history.head() == second and started == []  # no git process for it
    (vault / ".git" / "refs" / "heads" / "main").write_text(f"{first[:20]}\n", encoding="ascii")  # malformed
    assert history.head() is None and started[-1][0] == "rev-parse"  # git's answer: no such branch


def test_a_checkpoint_stopped_after_its_first_commit_says_so_on_the_change_feed(
        engine: Engine, owner: AgentCaller, monkeypatch) -> None:
    """The window shows a revision's commit in History when ``health`` is said; a batch whose second commit
    fails has still committed its first."""
    first = engine.save_page(owner, page("run-1", "Atlas Migration", type_="project", body="Version one."))
    runtime = engine.runtime(engine.registry.own_store_of("main"))
    assert engine.resume(owner)["state"] == "committed"
    with runtime._git_lock:  # two revisions of one page in one batch: two commits
        for revision in (2, 3):
            engine.save_page(owner, page(f"run-{revision}", "Atlas Migration", type_="project",
                                         body=f"Version {revision}.", id=first["id"], expectedRevision=revision - 1))
        commit, calls = GitHistory.commit, []

        def second_fails(self, *args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                raise GitError("the disk is full")
            return commit(self, *args, **kwargs)

        monkeypatch.setattr(GitHistory, "commit", second_fails)
        watching = engine.changes.subscribe(["health"])
        result = runtime.checkpoint(inline=True)  # the git lock held: as a sync round's commit runs it
    changes, _ = watching.take()
    watching.close()

    assert result["state"] == "pending" and result["publications"] == 1 and len(calls) == 2
    assert [change["topic"] for change in changes] == ["health"]
    history = engine.history(owner, first["id"])["revisions"]
    assert [entry["git"] is not None for entry in history] == [True, True, False]
