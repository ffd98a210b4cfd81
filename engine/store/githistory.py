"""Local git history of a vault, written from the publication outbox.

Git is optional: it runs when the ``git`` executable is installed and
writes are enabled.  The repository lives at exactly ``vault/.git``; an
enclosing repository is never adopted (every command names its git dir and
work tree explicitly) and no remote is ever configured.

Commits carry the exact bytes each publication installed, fed through
``git fast-import``, so an edit made to a file after its publication never
leaks into that publication's commit.  A git failure never rolls anything
back: the outbox keeps the entry pending and a later checkpoint retries.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

BRANCH = "refs/heads/main"
COMMITTER = "Knowledge Desk <knowledge-desk@localhost>"
_TIMEOUT = 60
# Packing a long history can take minutes (a full repack once 50 packs have gathered); killed at the usual
# limit, each try would be lost and start over.  It runs on the git thread, holding up only checkpoints.
_GC_TIMEOUT = 900
# What of a vault's .git folder a copy carries: the history itself, never its configuration or hooks.
HISTORY_PARTS = ("HEAD", "packed-refs", "refs/", "objects/")
COPIED_HISTORY_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"


# The commands that take git's locks; the engine runs them one at a time.  Reads (rev-parse, log, diff-index,
# remote, bundle) may run beside them and never clean anything up.
_WRITING_COMMANDS = frozenset({"init", "symbolic-ref", "fast-import", "update-index", "read-tree", "fetch", "gc",
                               "update-ref"})
# Git's own default: ``gc --auto`` packs the history once about this many loose objects have gathered.  Each
# checkpoint leaves its objects loose (fast-import explodes a small import), so without it a vault's history
# grows by a file per object: 3,000 checkpoints left 24,000 loose files taking 217 MiB (docs/benchmarks/git-history.md).
GC_AUTO_OBJECTS = 6700
# What the history never holds: a publication's temp files, the partition markers (machine-local), and hidden
# names (``existing_files`` skips them too).  ``ensure_repository`` writes the first two to info/exclude.
EXCLUDED = ("*.tmp", ".partition.json")
# The vault's top-level entries the engine reads; ``outside_changes`` looks nowhere else.
_SYNCED_TOP = ("ontology.yaml", "private", "conversations")
_REGULAR_MODES = ("100644", "100755")
_ZERO = "0" * 40
_OBJECT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")  # SHA-1 or SHA-256
_ASK_GIT = object()  # what ``_branch_in_files`` answers where the refs are not plain files it can read


class GitError(Exception):
    """A git command failed; the message says which and why."""


@dataclass(frozen=True)
class CommitFile:
    path: str  # vault-relative
    data: bytes


def find_git() -> str | None:
    return shutil.which("git")


class GitHistory:
    def __init__(self, vault: Path, executable: str) -> None:
        self.vault = vault
        self.git_dir = vault / ".git"
        self.executable = executable
        self._ready = False
        # Why the index missed a commit (a left-over index.lock, a crash between commit and index update);
        # None while it is in step.  Cosmetic: history is complete either way, only `git status` differs.
        self.index_problem: str | None = None
        # Lock files one of our own git commands left behind (killed on timeout, or the disk refused git's own
        # clean-up): ours to remove, as soon as the disk lets us.
        self._left_locks: set[Path] = set()
        self.gc_auto_objects = GC_AUTO_OBJECTS
        self._config_without_remote: bytes | None = None  # vault/.git/config as it was when git listed no remote

    def _env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
        env.update({
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.vault),
            "GIT_CEILING_DIRECTORIES": str(self.vault.parent),
            "LC_ALL": "C",
        })
        return env

    def _run(self, *args: str, stdin: bytes | None = None) -> str:
        writes = args[0] in _WRITING_COMMANDS
        if writes:
            self._remove_left_locks()
        before = self._locks() if writes else set()
        # Only ``tidy`` packs the history, on the git thread; no command on a checkpoint's way starts a gc,
        # and none runs one in the background (its locks would outlive the command).
        gc_auto = self.gc_auto_objects if args[0] == "gc" else 0
        try:
            completed = subprocess.run(
                [self.executable, "-c", "core.hooksPath=" + os.devnull, "-c", f"gc.auto={gc_auto}",
                 "-c", "gc.autoDetach=false", *args],
                input=stdin, capture_output=True, env=self._env(), cwd=self.vault,
                timeout=_GC_TIMEOUT if args[0] == "gc" else _TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            if writes:
                self._clear_locks_left_since(before, killed=True)
            raise GitError(f"git {args[0]} could not run: {exc}") from exc
        if writes:
            self._clear_locks_left_since(before, killed=False)
        if completed.returncode != 0:
            raise GitError(f"git {args[0]} failed: {self._explain(completed.stderr, completed.returncode)}")
        return completed.stdout.decode("utf-8", "replace").strip()

    def _locks(self) -> set[Path]:
        """The lock files in ``vault/.git`` now: its own (index, HEAD, packed-refs, config) and its refs'."""
        found = set()
        for folder in (self.git_dir, self.git_dir / "refs" / "heads"):
            try:
                found.update(Path(entry.path) for entry in os.scandir(folder) if entry.name.endswith(".lock"))
            except OSError:  # no repository yet, or unreadable: nothing of ours to find
                pass
        return found

    def _clear_locks_left_since(self, before: set[Path], *, killed: bool) -> None:
        """Remove the locks a writing command left behind, and only those.

        Git leaves a lock when it is killed (on timeout), or when its own clean-up is refused: the vault
        turned read-only under a running commit (a kept vault from such a run held a branch that had moved
        and HEAD.lock beside it: that command even succeeded).  A lock that appeared while the command ran
        and outlived it is the command's when the command was killed, or when the lock's folder refuses
        writes now, so git's removal must have failed; a lock in a writable folder was taken by someone
        else meanwhile (an owner holding the branch) and is left alone, as is one that was there before:
        whose it is cannot be known, and git's error names it for the owner instead.  The engine runs this
        repository's writing commands one at a time (under the runtime's git lock).
        """
        appeared = self._locks() - before
        self._left_locks |= appeared if killed else {lock for lock in appeared if _refuses_writes(lock.parent)}
        self._remove_left_locks()

    def _remove_left_locks(self) -> None:
        """Remove the locks our commands left; one the disk still refuses stays listed for the next
        writing command (only those call this, one at a time, so a live lock of theirs is never taken)."""
        for lock in list(self._left_locks):
            try:
                lock.unlink(missing_ok=True)
            except OSError:
                continue
            self._left_locks.discard(lock)

    def _explain(self, stderr: bytes, returncode: int) -> str:
        """Git's own reason: its first fatal or error line (which names a left-over lock file), with
        paths shown relative to the vault."""
        lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
        reason = next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[-1] if lines else "")
        return reason.replace(f"{self.vault}{os.sep}", "") or f"exit status {returncode}"

    def ensure_repository(self) -> None:
        """Initialise ``vault/.git`` on first use, or check the one that is exactly there.

        Every step is idempotent, so a crash half way through initialisation
        is finished by the next call.
        """
        if self._ready and (self.git_dir / "HEAD").is_file() and not self.git_dir.is_symlink():
            return
        self._ready = False
        if self.git_dir.is_symlink() or (self.git_dir.exists() and not self.git_dir.is_dir()):
            raise GitError("vault/.git is not a directory; it will not be followed or replaced")
        if not (self.git_dir / "HEAD").is_file():
            self._run("init", "-q")
        self._run("rev-parse", "--git-dir")
        if self.head() is None:
            self._run("symbolic-ref", "HEAD", BRANCH)
        exclude = self.git_dir / "info" / "exclude"
        exclude.parent.mkdir(exist_ok=True)
        wanted = list(EXCLUDED)
        present = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
        if any(line not in present for line in wanted):
            exclude.write_text("\n".join(present + [w for w in wanted if w not in present]) + "\n", encoding="utf-8")
        if self.head() is not None:
            try:  # a process killed between a commit and its index update left the index behind
                self._run("diff-index", "--cached", "--quiet", BRANCH)
            except GitError:
                self.index_problem = "the index does not match the last commit"
        self._ready = True

    def _check_no_remote(self) -> None:
        """Refuse a repository with a remote.  Git is asked again only when vault/.git/config changed since it
        last listed none (a checkpoint then starts one git process fewer); a configuration that includes
        other files is asked every time, since those could change without it."""
        try:
            config = (self.git_dir / "config").read_bytes()
        except OSError:
            config = None
        if config is not None and config == self._config_without_remote:
            return
        if self._run("remote"):
            raise GitError("vault/.git has a remote configured; Knowledge history never uses remotes")
        self._config_without_remote = None if config is None or b"include" in config.lower() else config

    def head(self) -> str | None:
        """The branch's commit, None before the first.  Read from the ref's file (or packed-refs) as git writes
        them, without starting git (a checkpoint asked three times); git answers where they are not plain."""
        known = self._branch_in_files()
        if known is not _ASK_GIT:
            return known  # type: ignore[return-value]
        try:
            return self._run("rev-parse", "--verify", "-q", BRANCH) or None
        except GitError:
            return None

    def _branch_in_files(self) -> object:
        """The commit id in BRANCH's loose ref, else in packed-refs; None when neither names it; ``_ASK_GIT``
        for anything else (a symbolic or malformed ref, a link, reftable storage, a linked work tree)."""
        if any(os.path.lexists(self.git_dir / name) for name in ("reftable", "commondir")):
            return _ASK_GIT
        for name in (BRANCH, "packed-refs"):
            path = self.git_dir / name
            try:
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    return _ASK_GIT
                text = path.read_bytes().decode("ascii")
            except FileNotFoundError:
                continue
            except (OSError, UnicodeDecodeError):
                return _ASK_GIT
            if name == BRANCH:
                value = text.strip()
                return value if _OBJECT_ID.fullmatch(value) else _ASK_GIT
            for line in text.splitlines():
                value, _, ref = line.partition(" ")
                if ref == BRANCH:
                    return value if _OBJECT_ID.fullmatch(value) else _ASK_GIT
        return None

    def commit(self, files: list[CommitFile], message: str, *,
               existing: Callable[[], list[CommitFile]] | None = None, removals: Sequence[str] = (),
               merge_parents: Sequence[str] = ()) -> str:
        """Commit exactly ``files`` (and the removal of ``removals``) on top of the branch; returns the new
        commit id.  ``merge_parents`` are further parents (a sync merge names the tip it merged); each must
        already be in this repository, and the branch must have a commit (``GitError`` otherwise: a vault
        with no history takes a fetched one by ``fast_forward``).

        The first commit also takes in what the vault already held (files published while git was
        unavailable, or written by hand), so the history starts complete: ``existing`` reads them
        (``existing_files`` by default; the store runtime reads them on its lane, where no publication
        is half installed).
        """
        self.ensure_repository()
        self._check_no_remote()
        parent = self.head()
        if parent is None and merge_parents:
            # fast-import would make the first further parent the only one, with a tree of ``files`` alone:
            # a vault with no history takes a fetched one by ``fast_forward`` instead (docs/sync.md, "Rounds").
            raise GitError("a merge commit needs a history to merge into: this vault has none yet "
                           "(a vault with no history takes the fetched history by a fast-forward)")
        if parent is None:
            published = {item.path for item in files} | set(removals)
            files = [item for item in (existing or self.existing_files)() if item.path not in published] + files
        stream = bytearray()
        encoded = message.encode("utf-8")
        stream += f"commit {BRANCH}\ncommitter {COMMITTER} {int(time.time())} +0000\n".encode()
        stream += f"data {len(encoded)}\n".encode() + encoded + b"\n"
        if parent:
            stream += f"from {parent}\n".encode()
        for other in merge_parents:
            stream += f"merge {_object_id(other)}\n".encode()
        for path in removals:
            stream += f"D {_quote(path)}\n".encode()
        for item in files:
            stream += f"M 100644 inline {_quote(item.path)}\ndata {len(item.data)}\n".encode()
            stream += item.data + b"\n"
        stream += b"done\n"
        try:
            self._run("fast-import", "--quiet", "--done", stdin=bytes(stream))
        except GitError:
            self._ready = False
            raise
        commit = self.head()
        if commit is None or commit == parent:
            raise GitError("git fast-import did not advance the branch")
        if self.index_problem is not None:
            self.repair_index()
        else:
            self._sync_index(files, removals)
        return commit

    # --- reading commits (sync) ---------------------------------------------------------

    def tree(self, commit: str) -> dict[str, str]:
        """The regular files of ``commit``: vault path -> blob id (symlinks and submodules are left out)."""
        listing = self._run_bytes("ls-tree", "-r", "-z", "--full-tree", _object_id(commit))
        files = {}
        for entry in listing.split(b"\0"):
            if not entry:
                continue
            meta, _, path = entry.partition(b"\t")
            mode, kind, blob = meta.decode("ascii").split(" ")
            if kind == "blob" and mode in _REGULAR_MODES:
                files[path.decode("utf-8", "surrogateescape")] = blob
        return files

    def read_blobs(self, ids: Iterable[str]) -> dict[str, bytes]:
        """The bytes of each blob in ``ids``, read by one ``git cat-file --batch``."""
        wanted = sorted({_object_id(blob) for blob in ids})
        if not wanted:
            return {}
        out = self._run_bytes("cat-file", "--batch", stdin="".join(f"{blob}\n" for blob in wanted).encode())
        blobs, at = {}, 0
        for blob in wanted:
            end = out.index(b"\n", at)
            header = out[at:end].decode("ascii").split(" ")
            if len(header) != 3 or header[0] != blob or header[1] != "blob":
                raise GitError(f"git cat-file did not return blob {blob}: {' '.join(header)}")
            size = int(header[2])
            blobs[blob] = out[end + 1:end + 1 + size]
            at = end + 1 + size + 1  # the object, then a newline
        return blobs

    def merge_bases(self, a: str, b: str) -> list[str]:
        """Every best common ancestor of ``a`` and ``b`` (``merge-base --all``); empty when they share none."""
        returncode, out = self._run_status("merge-base", "--all", _object_id(a), _object_id(b))
        return out.decode("ascii").split() if returncode == 0 else []  # 1: no common ancestor

    def is_ancestor(self, a: str, b: str) -> bool:
        """Whether ``a`` is ``b`` or one of its ancestors."""
        returncode, _ = self._run_status("merge-base", "--is-ancestor", _object_id(a), _object_id(b))
        return returncode == 0

    def count_commits(self, include: Sequence[str], exclude: Sequence[str] = ()) -> int:
        """How many commits ``include`` reach that ``exclude`` do not (``rev-list --count``); 0 for none."""
        if not include:
            return 0
        return int(self._run("rev-list", "--count", *map(_object_id, include), "--not",
                             *map(_object_id, exclude)) or "0")

    def objects_since(self, commit: str, exclude: Sequence[str] = ()) -> set[str]:
        """The ids of the objects (commits, trees, blobs) ``commit``'s history holds that ``exclude`` do not."""
        listed = self._run("rev-list", "--objects", _object_id(commit), "--not", *map(_object_id, exclude))
        return {line.split(" ", 1)[0] for line in listed.splitlines()}

    def removals_since(self, include: Sequence[str], exclude: Sequence[str] = ()) -> list[
            tuple[str, list[str], list[tuple[str, str]], list[tuple[str, str]]]]:
        """Every commit ``include`` reach and ``exclude`` do not, with its parents, the regular files it removed and
        those it wrote, as (vault path, blob id) pairs (``git log --raw``, renames as a removal and a write); a merge
        lists none (its parents tie the lines of commits together, so a reader can tell which change came after
        which)."""
        if not include:
            return []
        out = self._run_bytes("log", "--raw", "-z", "--root", "--no-renames", "--no-abbrev", "--format=%x01%H %P",
                              *map(_object_id, include), "--not", *map(_object_id, exclude))
        commits = []
        for chunk in out.split(b"\x01")[1:]:
            fields = chunk.split(b"\0")
            commit, *parents = fields[0].decode("ascii").split()
            removed, written, meta = [], [], None
            for field in fields[1:]:
                if field.lstrip(b"\n").startswith(b":"):
                    meta = field.lstrip(b"\n").decode("ascii").split()
                elif field and meta is not None:
                    path = field.decode("utf-8", "surrogateescape")
                    if meta[4] == "D" and meta[0].lstrip(":") in _REGULAR_MODES:
                        removed.append((path, meta[2]))
                    elif meta[4] != "D" and meta[1] in _REGULAR_MODES:
                        written.append((path, meta[3]))
                    meta = None
            commits.append((commit, parents, removed, written) if len(parents) < 2 else (commit, parents, [], []))
        return commits

    def has_fetched_history(self) -> bool:
        """Whether sync delivered another machine's history of this store (``refs/remotes/sync/``)."""
        return bool(self.commits_under("refs/remotes/sync/")) if (self.git_dir / "HEAD").is_file() else False

    def commits_under(self, prefix: str) -> list[str]:
        """The distinct commits the refs under ``prefix`` (``refs/remotes/sync/<remote>/``) point at, sorted."""
        if not prefix.startswith("refs/") or not prefix.endswith("/") or prefix.startswith("-"):
            raise GitError(f"not a ref folder: {prefix[:60]!r}")
        return sorted(set(self._run("for-each-ref", "--format=%(objectname)", prefix).split()))

    def merges_between(self, tip: str, exclude: Sequence[str] = ()) -> list[tuple[str, list[str]]]:
        """The merge commits ``tip`` reaches that ``exclude`` do not, oldest first, each with its parents."""
        listed = self._run("rev-list", "--merges", "--reverse", "--parents", _object_id(tip), "--not",
                           *map(_object_id, exclude))
        return [(fields[0], fields[1:]) for fields in (line.split() for line in listed.splitlines()) if fields]

    def fast_forward(self, commit: str, expected: str | None) -> None:
        """Move the branch to ``commit`` if it is still at ``expected`` (None: no commit yet), and bring the
        index along: entries of files the move left unchanged keep their stat cache."""
        self.ensure_repository()
        self._check_no_remote()
        commit = _object_id(commit)
        self._run("update-ref", "-m", "sync: fast-forward", BRANCH, commit,
                  _object_id(expected) if expected is not None else _ZERO)
        if self.index_problem is not None:
            self.repair_index()
            return
        if expected is None:
            self.index_problem = "a first history was taken by a fast-forward"
            self.repair_index()
            return
        changes = self._run_bytes("diff-tree", "-r", "-z", "--no-renames", expected, commit)
        lines, fields = [], changes.split(b"\0")
        for meta, path in zip(fields[0::2], fields[1::2]):
            _, new_mode, _, new_blob, status = meta.decode("ascii").lstrip(":").split(" ")
            name = path.decode("utf-8", "surrogateescape")
            lines.append(f"0 {_ZERO}\t{name}\n" if status == "D" else f"{new_mode} {new_blob}\t{name}\n")
        if lines:
            try:
                self._run("update-index", "--index-info", stdin="".join(lines).encode("utf-8", "surrogateescape"))
            except GitError as exc:
                self.index_problem = str(exc)

    def outside_changes(self) -> tuple[list[CommitFile], list[str]]:
        """What the vault holds that the branch does not: files changed or added (with their bytes) and
        paths removed, under ``ontology.yaml``, ``private/`` and ``conversations/`` only, leaving out
        hidden names and ``EXCLUDED``.  Git's index stat cache tells which files changed, so an
        unchanged file is not read (the index is first brought to the branch when it lags).  It writes the
        index: run it where commits are made, one at a time (the store runtime's git lock).  A file a
        checkpoint just committed is read once more here: the commit gives the index its blob, not its stat."""
        if self.head() is None:
            return [f for f in self.existing_files() if _looked_at(f.path)], []
        self.ensure_repository()
        if self.index_problem is not None and self.repair_index() is not None:
            raise GitError(f"the git index cannot be brought to the history: {self.index_problem}")
        pathspec = ["--", *_SYNCED_TOP]
        # Refresh the stat cache: only entries whose stat changed are read (hashed) here.
        self._run("update-index", "-q", "--refresh", "--ignore-missing", "--unmerged")
        changed, removed = [], []
        listing = self._run_bytes("diff-files", "-z", "--name-status", "--no-renames", *pathspec)
        fields = listing.split(b"\0")
        for status, path in zip(fields[0::2], fields[1::2]):
            name = path.decode("utf-8", "surrogateescape")
            if not _looked_at(name):
                continue
            (removed if status == b"D" else changed).append(name)
        excludes = [f"--exclude={pattern}" for pattern in (*EXCLUDED, ".*")]
        others = self._run_bytes("ls-files", "-z", "--others", *excludes, *pathspec)
        tracked = set(changed)
        changed += [name for name in (p.decode("utf-8", "surrogateescape") for p in others.split(b"\0") if p)
                    if _looked_at(name)]
        files = []
        for name in sorted(changed):
            data = self._read_regular(name)
            if data is not None:
                files.append(CommitFile(name, data))
            elif name in tracked:  # no longer a regular, singly linked file: gone, for the history
                removed.append(name)
        return files, sorted(removed)

    def _read_regular(self, name: str) -> bytes | None:
        """A vault file's bytes when it is a regular, singly linked file, as ``existing_files`` takes them."""
        path = self.vault / name
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                return None
            with open(path, "rb") as handle:
                return handle.read()
        except OSError:
            return None

    def _run_bytes(self, *args: str, stdin: bytes | None = None) -> bytes:
        """A reading command's exact output (paths and blobs are bytes, not text to strip)."""
        return self._run_status(*args, stdin=stdin, answers=(0,))[1]

    def _run_status(self, *args: str, stdin: bytes | None = None,
                    answers: tuple[int, ...] = (0, 1)) -> tuple[int, bytes]:
        """A reading command's exit status (one of ``answers``: a question git answers by its status) and
        exact output; any other status is a failure."""
        try:
            completed = subprocess.run(
                [self.executable, "-c", "core.hooksPath=" + os.devnull, "-c", "core.quotePath=false", *args],
                input=stdin, capture_output=True, env=self._env(), cwd=self.vault, timeout=_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GitError(f"git {args[0]} could not run: {exc}") from exc
        if completed.returncode not in answers:
            raise GitError(f"git {args[0]} failed: {self._explain(completed.stderr, completed.returncode)}")
        return completed.returncode, completed.stdout

    def tidy(self) -> None:
        """Pack the history when enough loose objects have gathered (``git gc --auto``: a quick count
        otherwise).  Reads beside it are safe; a failure loses nothing and the next tidy tries again."""
        if (self.git_dir / "HEAD").is_file():
            self._run("gc", "--auto", "--quiet")

    def existing_files(self) -> list[CommitFile]:
        """Regular, singly linked, non-hidden files under the vault (no symlinks followed)."""
        found = []
        for directory, subdirs, names in os.walk(self.vault):
            subdirs[:] = [d for d in subdirs if not d.startswith(".") and _utf8_name(d)
                          and not os.path.islink(os.path.join(directory, d))]
            for name in names:
                path = os.path.join(directory, name)
                # A name that is not UTF-8 cannot be written to fast-import's stream (nor is it read by the
                # catalog, which reports it): leaving it out keeps the first commit possible.
                if name.startswith(".") or not _utf8_name(name) or os.path.islink(path):
                    continue
                try:
                    info = os.lstat(path)
                    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                        continue
                    with open(path, "rb") as handle:
                        data = handle.read()
                except OSError:  # gone or unreadable since the walk: not part of the snapshot
                    continue
                found.append(CommitFile(os.path.relpath(path, self.vault).replace(os.sep, "/"), data))
        return found

    def _sync_index(self, files: list[CommitFile], removals: Sequence[str] = ()) -> None:
        """Point the index at the committed blobs so ``git status`` stays quiet; cosmetic only."""
        lines = "".join(f"100644 {blob_id(item.data)}\t{item.path}\n" for item in files)
        lines += "".join(f"0 {_ZERO}\t{path}\n" for path in removals)
        try:
            self._run("update-index", "--add", "--index-info", stdin=lines.encode("utf-8"))
        except GitError as exc:
            self.index_problem = str(exc)  # the next commit or checkpoint resets the whole index

    def repair_index(self) -> str | None:
        """Reset an index that missed commits to the branch; returns why it is still behind, if it is."""
        if not self._ready and (self.git_dir / "HEAD").is_file():
            self.ensure_repository()  # checks the index a previous process may have left behind
        if self.index_problem is None:
            return None
        try:
            self._run("read-tree", BRANCH)
        except GitError as exc:
            self.index_problem = str(exc)
            return self.index_problem
        self.index_problem = None
        return None

    def log(self, path: str | None = None, limit: int = 50) -> list[dict[str, str]]:
        args = ["log", f"-{limit}", "--format=%H%x1f%ct%x1f%s", BRANCH]
        if path:
            args += ["--", path]
        if self.head() is None:
            return []
        entries = []
        for line in self._run(*args).splitlines():
            commit, timestamp, subject = line.split("\x1f", 2)
            entries.append({"commit": commit, "time": timestamp, "subject": subject})
        return entries

    def bundle(self, path: Path) -> bool:
        """Write the history to a git bundle at ``path`` (a portable archive's copy); False when the vault has
        no commit yet, so there is nothing to bundle."""
        if not (self.git_dir / "HEAD").is_file() or self.git_dir.is_symlink() or self.head() is None:
            return False
        self._run("bundle", "create", "-q", str(path), BRANCH)
        return True

    def restore_bundle(self, path: Path) -> str:
        """Make ``vault/.git`` the history a bundle holds, its index matching the last commit (the vault's
        files are already in place); returns that commit.  No remote is configured: the bundle is fetched
        by its path once."""
        if os.path.lexists(self.git_dir):
            raise GitError("vault/.git already exists; a history is restored only into a new store")
        self._run("init", "-q")
        self._run("bundle", "verify", "-q", str(path))
        self._run("fetch", "-q", "--no-tags", str(path), f"{BRANCH}:{BRANCH}")
        self._run("symbolic-ref", "HEAD", BRANCH)
        self._run("read-tree", BRANCH)
        head = self.head()
        if head is None:
            raise GitError(f"the bundle holds no {BRANCH}")
        return head

    def show(self, commit: str, path: str) -> bytes:
        completed = subprocess.run(
            [self.executable, "show", f"{commit}:{path}"], capture_output=True, env=self._env(),
            cwd=self.vault, timeout=_TIMEOUT,
        )
        if completed.returncode != 0:
            raise GitError(f"git show failed for {path} at {commit}")
        return completed.stdout


def is_history_part(relpath: str) -> bool:
    """Whether a path inside ``.git`` is part of the history a copy carries (``HISTORY_PARTS``)."""
    return relpath in HISTORY_PARTS or relpath.startswith(tuple(part for part in HISTORY_PARTS if part.endswith("/")))


def adopt_copied_history(vault: Path, executable: str | None) -> None:
    """Finish a ``vault/.git`` restored from a copy of its history parts: a configuration of our own (a
    copied one could name commands for git to run) and, where git is installed, an index matching the last
    commit (elsewhere the first checkpoint after git appears rebuilds it)."""
    (vault / ".git" / "config").write_text(COPIED_HISTORY_CONFIG, encoding="utf-8")
    if executable is not None:
        history = GitHistory(vault, executable)
        if history.head() is not None:
            history._run("read-tree", BRANCH)


def _refuses_writes(folder: Path) -> bool:
    """Whether this process may not create or remove files in ``folder`` (file modes, a read-only mount)."""
    return not os.access(folder, os.W_OK)


def _utf8_name(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # os.walk hands undecodable bytes over as lone surrogates
        return False
    return True


def _looked_at(path: str) -> bool:
    """Whether ``outside_changes`` reports a vault path: under the synced top-level entries, no hidden
    component, not excluded."""
    parts = path.split("/")
    top = parts[0]
    if top not in _SYNCED_TOP or (top == "ontology.yaml") != (len(parts) == 1):
        return False
    return not any(part.startswith(".") for part in parts) and not parts[-1].endswith(".tmp")


def _object_id(name: str) -> str:
    """A commit or blob id as the caller gave it, refused unless it is 40 hex digits (never an option or a
    revision expression handed to git)."""
    if len(name) != 40 or any(ch not in "0123456789abcdef" for ch in name):
        raise GitError(f"not an object id: {name[:60]!r}")
    return name


def blob_id(data: bytes) -> str:
    """The id git gives a blob of ``data``."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()


def _quote(path: str) -> str:
    if any(ch in path for ch in ('"', "\\", "\n")) or path.startswith(" "):
        escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    return path


def commit_runs(batch: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The batch in order, cut wherever a file would repeat: one commit holds one revision of a file,
    so every published revision's exact bytes stay in the history, not just a batch's last one."""
    runs: list[list[dict[str, Any]]] = []
    paths: set[str] = set()
    for entry in batch:
        touched = {path for path, _ in entry["files"]}
        if not runs or touched & paths:
            runs.append([])
            paths = set()
        runs[-1].append(entry)
        paths |= touched
    return runs


def commit_message(batch: list[dict[str, Any]]) -> str:
    """A checkpoint commit's message: what was published and by whom, one trailer a publication."""
    if len(batch) == 1:
        entry = batch[0]
        subject = f"{entry['operation']} by {entry['agent'] or 'unknown'}"
    else:
        subject = f"{len(batch)} publications"
    trailers = "\n".join(
        f"Knowledge-Publication: {entry['id']} ({entry['operation']} by {entry['agent'] or 'unknown'})"
        for entry in batch
    )
    return f"Knowledge: {subject}\n\n{trailers}\n"
