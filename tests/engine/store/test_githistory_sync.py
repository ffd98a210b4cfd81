"""The vault history's reads and moves that sync needs: trees, blobs, merge bases, removals, merge
commits, fast-forwards, and what the vault holds that the history does not."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from engine.store.githistory import CommitFile, GitError, GitHistory
from tests.engine.store.test_git import git, git_show

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def history(tmp_path: Path) -> GitHistory:
    vault = tmp_path / "vault"
    vault.mkdir(parents=True)
    return GitHistory(vault, shutil.which("git") or "git")


def put(history: GitHistory, path: str, data: bytes) -> CommitFile:
    target = history.vault / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return CommitFile(path, data)


def test_tree_and_read_blobs_return_the_committed_bytes(tmp_path: Path) -> None:
    h = history(tmp_path)
    first = put(h, "private/claims/a.md", b"alpha\n")
    second = put(h, "private/sources/b.bin", b"\x00\x01binary\n\xff")
    commit = h.commit([first, second], "two files", existing=lambda: [])
    tree = h.tree(commit)
    assert sorted(tree) == ["private/claims/a.md", "private/sources/b.bin"]
    blobs = h.read_blobs([*tree.values(), tree["private/claims/a.md"]])
    assert blobs[tree["private/claims/a.md"]] == b"alpha\n"
    assert blobs[tree["private/sources/b.bin"]] == b"\x00\x01binary\n\xff"
    assert h.read_blobs([]) == {}


def test_object_ids_are_checked_before_git_sees_them(tmp_path: Path) -> None:
    h = history(tmp_path)
    h.commit([put(h, "private/a.md", b"a")], "one", existing=lambda: [])
    with pytest.raises(GitError, match="not an object id"):
        h.tree("--output=/tmp/x")
    with pytest.raises(GitError, match="not an object id"):
        h.is_ancestor("HEAD", "HEAD")


def test_removals_and_merge_parents_make_the_commit_git_would(tmp_path: Path) -> None:
    h = history(tmp_path)
    base = h.commit([put(h, "private/a.md", b"a\n"), put(h, "private/b.md", b"b\n")], "base", existing=lambda: [])
    ours = h.commit([put(h, "private/c.md", b"c\n")], "ours")
    (h.vault / "private" / "b.md").unlink()
    merged = h.commit([put(h, "private/d.md", b"d\n")], "merge", removals=["private/b.md"], merge_parents=[base])
    parents = git(h.vault, "rev-list", "--parents", "-n", "1", merged).split()[1:]
    assert parents == [ours, base]
    assert sorted(h.tree(merged)) == ["private/a.md", "private/c.md", "private/d.md"]
    assert git_show(h.vault, merged, "private/d.md") == b"d\n"
    # The index follows the removal: git sees the vault as committed.
    assert git(h.vault, "status", "--porcelain", "--untracked-files=no") == ""
    assert h.merge_bases(merged, base) == [base]
    assert h.is_ancestor(base, merged) and h.is_ancestor(merged, merged)
    assert not h.is_ancestor(merged, base)


def test_merge_bases_of_unrelated_histories_is_empty(tmp_path: Path) -> None:
    h = history(tmp_path)
    one = h.commit([put(h, "private/a.md", b"a\n")], "one", existing=lambda: [])
    other = git(h.vault, "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit-tree",
                git(h.vault, "mktree", "--missing"), "-m", "unrelated")
    assert h.merge_bases(one, other) == []
    assert not h.is_ancestor(other, one)


def test_fast_forward_moves_the_branch_only_from_the_expected_commit(tmp_path: Path) -> None:
    h = history(tmp_path)
    base = h.commit([put(h, "private/a.md", b"a\n"), put(h, "private/b.md", b"b\n")], "base", existing=lambda: [])
    tip = h.commit([put(h, "private/c.md", b"c\n")], "tip", removals=["private/b.md"])
    git(h.vault, "update-ref", "refs/heads/main", base)  # back to base, as before a fetched tip arrived
    git(h.vault, "read-tree", "refs/heads/main")
    with pytest.raises(GitError):
        h.fast_forward(tip, tip)  # the branch is not where the caller thinks
    assert h.head() == base
    (h.vault / "private" / "b.md").unlink()  # the publication installed the tip's files
    h.fast_forward(tip, base)
    assert h.head() == tip
    assert git(h.vault, "status", "--porcelain", "--untracked-files=no") == ""
    assert h.outside_changes() == ([], [])


def fetched_into_an_empty_vault(tmp_path: Path) -> tuple[GitHistory, str]:
    """A vault with a repository and no commit, holding another machine's one-commit history as sync
    delivers it (``refs/remotes/sync/``); returns it and that commit."""
    source = history(tmp_path / "a")
    tip = source.commit([put(source, "private/a.md", b"a\n")], "one", existing=lambda: [])
    h = history(tmp_path)
    h.ensure_repository()
    git(h.vault, "fetch", "-q", str(source.git_dir), "refs/heads/main:refs/remotes/sync/r/m")
    return h, tip


def test_fast_forward_of_a_vault_with_no_history_takes_the_tip(tmp_path: Path) -> None:
    h, tip = fetched_into_an_empty_vault(tmp_path)
    put(h, "private/a.md", b"a\n")
    h.fast_forward(tip, None)
    assert h.head() == tip
    assert h.outside_changes() == ([], [])


def test_outside_changes_reports_edits_additions_and_removals_of_synced_paths(tmp_path: Path) -> None:
    h = history(tmp_path)
    session = "conversations/0b1e3c1e-8f4a-4c57-9d1a-2f3c4d5e6f70"
    h.commit([put(h, "private/a.md", b"a\n"), put(h, "private/b.md", b"b\n"), put(h, "ontology.yaml", b"x: 1\n"),
              put(h, f"{session}/c.md", b"c\n")], "base", existing=lambda: [])
    assert h.outside_changes() == ([], [])
    put(h, "private/a.md", b"a, edited\n")
    put(h, "private/new/e.md", b"e\n")
    put(h, f"{session}/f.md", b"f\n")
    (h.vault / "private" / "b.md").unlink()
    # Never reported: excluded, hidden, outside the synced folders.
    put(h, "private/.partition.json", b"{}")
    put(h, "private/.a.md.x1.tmp", b"half")
    put(h, "private/g.tmp", b"temp")
    put(h, "private/.hidden/h.md", b"h")
    put(h, "notes/outside.md", b"outside")
    put(h, "README.md", b"outside")
    put(h, ".gitignore", b"private/\n")  # the owner's ignore files are not the engine's
    os.link(h.vault / "private" / "new" / "e.md", h.vault / "private" / "linked.md")  # hard links are left out
    os.link(h.vault / "private" / "new" / "e.md", h.vault / "notes" / "e-link.md")
    (h.vault / "private" / "new" / "e-again.md").symlink_to("e.md")  # and symlinks
    files, removed = h.outside_changes()
    assert {item.path: item.data for item in files} == {"private/a.md": b"a, edited\n", f"{session}/f.md": b"f\n"}
    assert removed == ["private/b.md"]
    os.unlink(h.vault / "notes" / "e-link.md")
    os.unlink(h.vault / "private" / "linked.md")
    files, removed = h.outside_changes()
    assert sorted(item.path for item in files) == [f"{session}/f.md", "private/a.md", "private/new/e.md"]
    # A committed file that became a symlink is gone, for the history.
    (h.vault / "private" / "a.md").unlink()
    (h.vault / "private" / "a.md").symlink_to("new/e.md")
    files, removed = h.outside_changes()
    assert "private/a.md" not in [item.path for item in files] and removed == ["private/a.md", "private/b.md"]


def test_outside_changes_does_not_read_files_whose_stat_is_unchanged(tmp_path: Path) -> None:
    h = history(tmp_path)
    kept = put(h, "private/kept.md", b"kept\n")
    h.commit([kept, put(h, "private/b.md", b"b\n")], "base", existing=lambda: [])
    h.outside_changes()  # the stat cache now holds both files
    unread = h.vault / "private" / "kept.md"
    info = os.stat(unread)
    # git's cached stat of the file is the file's own, so a refresh compares stats and does not hash it.
    debug = git(h.vault, "ls-files", "--debug", "private/kept.md")
    assert f"mtime: {int(info.st_mtime)}:" in debug and f"size: {info.st_size}\t" in debug
    assert f"ino: {info.st_ino}\n" in debug
    unread.chmod(0)  # a read of it would now fail, for anyone but root
    try:
        put(h, "private/b.md", b"b, edited\n")
        files, removed = h.outside_changes()
    finally:
        unread.chmod(0o644)
    assert [item.path for item in files] == ["private/b.md"] and removed == []


def test_outside_changes_of_a_vault_without_history_is_every_synced_file(tmp_path: Path) -> None:
    h = history(tmp_path)
    put(h, "private/a.md", b"a\n")
    put(h, "private/.partition.json", b"{}")
    put(h, "other.md", b"o\n")
    files, removed = h.outside_changes()
    assert [item.path for item in files] == ["private/a.md"] and removed == []


def test_commit_keeps_its_first_commit_behaviour_with_removals(tmp_path: Path) -> None:
    h = history(tmp_path)
    put(h, "private/old.md", b"old\n")
    put(h, "private/gone.md", b"gone\n")
    commit = h.commit([put(h, "private/new.md", b"new\n")], "first", removals=["private/gone.md"])
    assert sorted(h.tree(commit)) == ["private/new.md", "private/old.md"]


def test_counts_ref_listings_and_merges_for_a_round(tmp_path: Path) -> None:
    h = history(tmp_path)
    base = h.commit([put(h, "private/a.md", b"a\n")], "base", existing=lambda: [])
    ours = h.commit([put(h, "private/b.md", b"b\n")], "ours")
    git(h.vault, "update-ref", "refs/heads/main", base)
    git(h.vault, "read-tree", "refs/heads/main")
    theirs = h.commit([put(h, "private/c.md", b"c\n")], "theirs")
    merged = h.commit([put(h, "private/b.md", b"b\n")], "merge", merge_parents=[ours])
    git(h.vault, "update-ref", "refs/remotes/sync/origin/mc_1", merged)
    git(h.vault, "update-ref", "refs/remotes/sync/origin/mc_2", theirs)
    git(h.vault, "update-ref", "refs/remotes/sync/other/mc_3", base)
    assert h.count_commits([merged]) == 4
    assert h.count_commits([merged], [ours]) == 2 and h.count_commits([ours], [merged]) == 0
    assert h.count_commits([]) == 0
    assert h.commits_under("refs/remotes/sync/origin/") == sorted({merged, theirs})
    assert h.commits_under("refs/remotes/sync/none/") == []
    assert h.merges_between(merged) == [(merged, [theirs, ours])]
    assert h.merges_between(merged, [merged]) == [] and h.merges_between(theirs, [base]) == []
    with pytest.raises(GitError, match="not a ref folder"):
        h.commits_under("--output=/tmp/x")
    with pytest.raises(GitError, match="not an object id"):
        h.count_commits(["HEAD"])


def test_a_merge_commit_on_a_vault_with_no_history_is_refused(tmp_path: Path) -> None:
    h, tip = fetched_into_an_empty_vault(tmp_path)
    assert h.has_fetched_history()
    with pytest.raises(GitError, match="needs a history to merge into"):
        h.commit([put(h, "private/b.md", b"b\n")], "merge", existing=lambda: [], merge_parents=[tip])
    assert h.head() is None


def test_removals_since_lists_each_commit_with_its_parents_and_what_it_removed_and_wrote(tmp_path: Path) -> None:
    h = history(tmp_path)
    base = h.commit([put(h, "private/a.md", b"a\n"), put(h, "private/b.md", b"b\n")], "base", existing=lambda: [])
    blob = h.tree(base)
    (h.vault / "private" / "a.md").rename(h.vault / "private" / "moved.md")
    moved = h.commit([CommitFile("private/moved.md", b"a\n")], "moved by hand", removals=["private/a.md"])
    (h.vault / "private" / "b.md").unlink()
    removed = h.commit([], "removed", removals=["private/b.md"])
    merged = h.commit([put(h, "private/c.md", b"c\n")], "a merge removes nothing first-hand",
                      removals=["private/moved.md"], merge_parents=[base])
    assert h.removals_since([merged], [base]) == [
        (merged, [removed, base], [], []),
        (removed, [moved], [("private/b.md", blob["private/b.md"])], []),
        (moved, [base], [("private/a.md", blob["private/a.md"])], [("private/moved.md", blob["private/a.md"])]),
    ]
    assert h.removals_since([removed], [moved]) == [(removed, [moved], [("private/b.md", blob["private/b.md"])], [])]
    assert h.removals_since([base]) == [(base, [], [], sorted(blob.items()))] and h.removals_since([]) == []
