"""Machines for the transport tests: a vault with its own git history (engine/store/githistory.py) and the
store's sync folder, and hostile commits made on a remote with plain git plumbing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.store.githistory import CommitFile, GitHistory
from engine.sync.transport import BRANCHES, DELIVERED, Transport, machine_id
from tests.engine.sync.gitservers import git_executable, plain_git

STORE = "st_01JSYNCTRANSPORT0000000000"
OTHER_STORE = "st_01JSYNCOTHERSTORE00000000"


@dataclass
class Machine:
    """One machine's copy of a store: its vault (with git history), its sync folder, its transport."""

    root: Path
    store_id: str = STORE

    def __post_init__(self) -> None:
        self.vault = self.root / "vault"
        self.vault.mkdir(parents=True, exist_ok=True)
        self.sync_dir = self.root / "sync"
        self.history = GitHistory(self.vault, git_executable())
        self.history.ensure_repository()
        self.id = machine_id(self.sync_dir)
        self.transport = Transport(self.sync_dir, git_executable(), self.store_id, self.id, self.vault / ".git")

    def write(self, files: dict[str, bytes], message: str = "write") -> str:
        return self.history.commit([CommitFile(path, data) for path, data in files.items()], message)

    def head(self) -> str | None:
        return self.history.head()

    def adopt(self, commit: str) -> None:
        """Take a fetched commit as the vault's head (what a round's fast-forward does)."""
        self.history.ensure_repository()
        plain_git(self.vault / ".git", "update-ref", "refs/heads/main", commit)

    def delivered(self) -> dict[str, str]:
        """The refs the transport delivered into the vault's repository: ref -> commit."""
        return refs(self.vault / ".git", DELIVERED)

    def tips_bytes(self) -> bytes | None:
        path = self.sync_dir / "tips.json"
        return path.read_bytes() if path.exists() else None


def refs(repository: Path, prefix: str) -> dict[str, str]:
    if not (repository / "HEAD").exists():
        return {}
    listed = plain_git(repository, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ") for line in listed.splitlines())


def branch(store_id: str, machine: str) -> str:
    return f"{BRANCHES}/{store_id}/{machine}"


def record(title: str, body: str = "") -> bytes:
    return f"---\ntitle: {title}\n---\n{body}\n".encode()


def blob(repository: Path, data: bytes) -> str:
    return plain_git(repository, "hash-object", "-w", "--stdin", stdin=data)


def tree(repository: Path, entries: list[tuple[str, str, str, bytes]]) -> str:
    """A tree from (mode, type, object id, raw name) entries, names taken as bytes (``mktree -z``)."""
    stream = b"".join(f"{mode} {kind} {oid}\t".encode() + name + b"\0" for mode, kind, oid, name in entries)
    return plain_git(repository, "mktree", "-z", "--missing", stdin=stream)


def commit_on(repository: Path, tree_id: str, parent: str | None, message: str = "hostile") -> str:
    args = ["commit-tree", tree_id, "-m", message]
    if parent:
        args += ["-p", parent]
    return plain_git(repository, *args)


def tree_with(repository: Path, base_commit: str, path: list[bytes], mode: str, kind: str, oid: str) -> str:
    """``base_commit``'s tree with one more entry at ``path`` (each component raw bytes)."""
    def build(tree_id: str | None, parts: list[bytes]) -> str:
        entries = []
        if tree_id is not None:
            listed = plain_git(repository, "ls-tree", "-z", tree_id).encode("utf-8", "surrogateescape")
            for line in filter(None, listed.split(b"\0")):
                meta, _, name = line.partition(b"\t")
                m, k, o = meta.decode().split()
                entries.append((m, k, o, name))
        head, rest = parts[0], parts[1:]
        if rest:
            existing = next((e for e in entries if e[3] == head and e[1] == "tree"), None)
            sub = build(existing[2] if existing else None, rest)
            entries = [e for e in entries if e[3] != head] + [("040000", "tree", sub, head)]
        else:
            entries = [e for e in entries if e[3] != head] + [(mode, kind, oid, head)]
        return tree(repository, entries)
    base_tree = plain_git(repository, "rev-parse", f"{base_commit}^{{tree}}")
    return build(base_tree, path)
