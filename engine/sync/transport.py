"""Fetching other machines' branches of a store into a quarantine, checking them, and pushing this machine's
branch fast-forward only (docs/sync.md, "Transport").

On a remote, each machine writes one branch per store, ``refs/heads/knowledge/<store id>/<machine id>``, and
only its own, only as a fast-forward (never ``+``, never ``--force``).  Outside the branches,
``refs/knowledge-names/<store id>/<machine id>`` holds a commit with no files whose message is the machine's
name (its host name: what the owner calls that computer), pushed when it differs from the one there, as a
fast-forward too; a machine without one (an older engine's) is named by its id.  A name never reaches the
vault, and an engine that does not read names never fetches them.  A fetch takes every branch of this
store, never another store's, into ``<store>/sync/fetched.git``, a bare repository of the transport's own
(the quarantine), and checks what is new there before any of it reaches the vault's repository:

- every branch descends from the tip this machine saw last time (``tips.json``), and this machine's own
  branch is the commit it last pushed (or one of the vault's own commits it pushed before a crash let it
  record so): otherwise the remote was ``rewritten`` under it;
- every fetched tip shares history with the vault's head (``other_store`` otherwise), once there is one;
- every new commit (``rev-list tips --not`` what was seen and the vault's head) changes only paths sync
  carries (``merge.is_synced``: ``ontology.yaml``, ``private/...``, ``conversations/<uuid>/...``), UTF-8,
  with no ``.git`` component in any case (``unsafe_path``), regular files only (``symlink``, ``submodule``),
  each blob within the limits of its kind (``too_large``).

Only then are the tips delivered into the vault's repository as ``refs/remotes/sync/<remote>/<machine>``
and recorded as seen.  Nothing reaches the vault's files here; merging and installing is the round's part.

Every git command runs with ``git_environment``: no terminal prompt, hooks off, only the ``file``, ``git``,
``ssh``, ``http`` and ``https`` transports (``gcrypt`` besides, for a ``gcrypt::`` remote only: git-remote-gcrypt
keeps the remote's copy encrypted with the owner's GPG keys), fsck of
every fetched object, the owner's credential helpers and ssh-agent.  The URL is never logged or put in an
error: git's own reasons are reworded or redacted.

Files in ``<store>/sync/`` (0600, written atomically)::

    machine.json  {"schemaVersion": 1, "machineId": "mc_01J..."}
    tips.json     {"schemaVersion": 1, "remotes": {"nas": {"url": "<sha256 of the URL>",
                                                           "seen": {"<machine>": "<commit>"},
                                                           "pushed": "<commit>" | null}}}
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..core.answers import TypedDict
from ..core.errors import Conflict
from ..core.files import atomic_write
from ..core.findings import Finding
from ..core.ids import ID_REGEX, new_id
from ..store.attachments import ATTACH_FILE_MAX_BYTES
from ..store.githistory import COMMITTER
from ..vault.evidence import DESCRIPTOR_MAX_BYTES, DESCRIPTOR_SUFFIX, SOURCES_DIR
from ..vault.frontmatter import RECORD_MAX_BYTES
from ..vault.ontology import ONTOLOGY_MAX_BYTES
from .merge import ONTOLOGY_FILE, is_synced, partition_of
from .remotes import GCRYPT_PREFIX, check_remote_name, local_path

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
MACHINE_FILE = "machine.json"
TIPS_FILE = "tips.json"
NAMES = "refs/knowledge-names"   # <store id>/<machine id>: the machine's name, outside the branches
NAME_MAX_CHARS = 64
QUARANTINE = "fetched.git"
BRANCHES = "refs/heads/knowledge"
VAULT_BRANCH = "refs/heads/main"
DELIVERED = "refs/remotes/sync"
PROTOCOLS = ("file", "git", "ssh", "http", "https")
STATE_FILE_MAX_BYTES = 1024 * 1024
NETWORK_TIMEOUT = 600   # a fetch or push of a large history over a slow link
LOCAL_TIMEOUT = 120

# Inside the quarantine: what the last fetch brought (cleared before each), and the tips accepted.
_INCOMING = "refs/incoming"
_INCOMING_NAMES = "refs/incoming-names"
_ACCEPTED = "refs/sync"
_VAULT_HEAD = "refs/vault/main"
_MACHINE = re.compile(ID_REGEX)
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_EMPTY = "0" * 40
REFUSAL_CODES = frozenset({"unreachable", "rewritten", "unsafe_path", "symlink", "submodule", "too_large",
                           "not_a_vault", "other_store", "git_failed", "git_missing", "invalid_record",
                           "invalid_ontology", "partition_missing"})

# git's own words for a remote it could not reach, and how we say it (the URL is never repeated).
_UNREACHABLE = (
    (re.compile(r"connection refused|could not connect|failed to connect|unable to connect", re.I),
     "the connection was refused"),
    (re.compile(r"could not resolve|name or service not known|temporary failure in name resolution", re.I),
     "its host name could not be resolved"),
    (re.compile(r"timed? ?out", re.I), "the connection timed out"),
    (re.compile(r"authentication failed|permission denied|\b40[13]\b", re.I), "it refused the credentials"),
    # A remote that asks for a password git has none for (no credential helper; the engine never prompts).
    (re.compile(r"could not read (username|password)|terminal prompts disabled", re.I),
     "it asks for credentials git has none for (give git a credential helper, or use an ssh address and key)"),
    (re.compile(r"does not appear to be a git repository|repository .* not found|not found|no such file|"
                r"not a git repository|'.*' does not exist|"
                r"no such repository|repository not exported", re.I),  # git daemon's words, with and without
     "there is no repository at that address"),                         # --informative-errors
    (re.compile(r"could not read from remote repository|unable to access|hung up|early eof|"
                r"connection reset|broken pipe|remote helper", re.I), "the connection failed"),
)
_FSCK_PATH = re.compile(r"hasDot|fullPathname|badTree|gitmodules", re.I)


class SyncRefused(Conflict):
    """A fetch or push refused; ``finding`` says why in plain words (its ``code`` is one of
    ``REFUSAL_CODES``), and nothing was delivered or recorded."""

    def __init__(self, finding: Finding, **details: object) -> None:
        super().__init__(finding.message, code=finding.code, findings=[finding.to_dict()], **details)
        self.finding = finding


def _refused(code: str, message: str, path: str | None = None, **details: object) -> SyncRefused:
    return SyncRefused(Finding(code, message, path=path), **details)


class MachineFile(TypedDict):
    schemaVersion: int
    machineId: str


class RemoteTips(TypedDict):
    """What this machine knows of one remote: the tip of each other machine's branch it accepted last,
    and the commit it last pushed to its own."""

    url: str    # sha256 of the URL: tips seen at another address are not this remote's
    seen: dict[str, str]
    pushed: str | None


class TipsFile(TypedDict):
    schemaVersion: int
    remotes: dict[str, RemoteTips]


def machine_name(text: str) -> str:
    """A machine's name as it is recorded and shown: one line of printable characters, at most
    ``NAME_MAX_CHARS``."""
    printable = "".join(char for char in text if char.isprintable())
    return printable.strip()[:NAME_MAX_CHARS].strip()


def this_machine_name() -> str:
    """This computer's name as its owner set it (the host name, without its domain)."""
    return machine_name(socket.gethostname().split(".")[0])


def is_machine_id(value: object) -> bool:
    """Whether ``value`` can name a machine's branch (an id's safe alphabet, one ref component)."""
    return (isinstance(value, str) and _MACHINE.fullmatch(value) is not None and ".." not in value
            and not value.endswith((".", ".lock")))


def machine_id(sync_dir: Path) -> str:
    """This machine's id for the store whose ``sync`` folder this is: read from ``machine.json``, made once
    (atomically, 0600) when there is none.  A file that is not ours is a ``Conflict`` and is never replaced:
    a second id would start a second branch."""
    path = sync_dir / MACHINE_FILE
    try:
        data = path.read_bytes()[:STATE_FILE_MAX_BYTES]
    except FileNotFoundError:
        sync_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        document: MachineFile = {"schemaVersion": SCHEMA_VERSION, "machineId": new_id("mc")}
        atomic_write(path, (json.dumps(document) + "\n").encode("utf-8"), mode=0o600)
        return document["machineId"]
    try:
        document = json.loads(data)
    except ValueError:
        document = None
    if (not isinstance(document, dict) or document.get("schemaVersion") != SCHEMA_VERSION
            or not is_machine_id(document.get("machineId"))):
        raise Conflict(f"{path} is not a machine file this release reads; correct it (or remove it only if this "
                       "machine never synced the store: a new id starts a new branch)", file=str(path))
    return document["machineId"]


def git_environment(*, helpers: Sequence[str] = ()) -> tuple[dict[str, str], list[str]]:
    """The environment and ``-c`` options every sync git command runs with.

    No ``GIT_*`` variable from outside (an inherited ``GIT_DIR``, ``GIT_SSH_COMMAND`` or alternate object
    directory never steers a sync); ``HOME``, ``PATH`` and ``SSH_AUTH_SOCK`` pass, so the owner's credential
    helpers, ssh configuration and agent work.  No prompt (``GIT_TERMINAL_PROMPT=0``; the commands run in a
    session of their own, without a terminal, so ssh and gpg cannot ask either), no hooks, transports ``PROTOCOLS`` only (plus the remote ``helpers`` named, such as ``gcrypt``), every
    fetched object checked by fsck, no automatic gc or maintenance in the background."""
    keep = ("HOME", "PATH", "SSH_AUTH_SOCK", "GNUPGHOME", "GPG_AGENT_INFO", "TMPDIR", "LANG", "USER", "LOGNAME",
            "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "SystemRoot")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    options = {"core.hooksPath": os.devnull, "protocol.allow": "never",
               **{f"protocol.{name}.allow": "always" for name in (*PROTOCOLS, *helpers)},
               "transfer.fsckObjects": "true", "fetch.fsckObjects": "true", "receive.fsckObjects": "true",
               "submodule.recurse": "false", "fetch.recurseSubmodules": "false", "core.askPass": "",
               "credential.interactive": "false", "gc.auto": "0", "gc.autoDetach": "false",
               "maintenance.auto": "false", "fetch.writeCommitGraph": "false", "core.fsmonitor": "false"}
    args: list[str] = []
    for name, value in options.items():
        args += ["-c", f"{name}={value}"]
    return env, args


@dataclass(frozen=True)
class Fetched:
    tips: dict[str, str]   # machine id -> commit of every OTHER machine's branch of this store
    own: str | None        # the remote's branch of this machine
    # Machine id -> (commit, name) of each machine that recorded its name (``NAMES``), this machine included.
    names: dict[str, tuple[str, str]] = field(default_factory=dict)


class Transport:
    """One store's transport on this machine: its quarantine, its tips, its own branch on every remote."""

    def __init__(self, sync_dir: Path, git: str, store_id: str, machine: str, vault_git_dir: Path) -> None:
        if not is_machine_id(store_id) or not is_machine_id(machine):
            raise ValueError("store and machine ids must be single ref components of an id's alphabet")
        self.sync_dir = sync_dir
        self.git = git
        self.store_id = store_id
        self.machine = machine
        self.vault_git_dir = vault_git_dir
        self.quarantine = sync_dir / QUARANTINE

    @property
    def branch(self) -> str:
        """This machine's branch of the store on every remote."""
        return f"{BRANCHES}/{self.store_id}/{self.machine}"

    # --- fetch ------------------------------------------------------------------------------------

    def fetch(self, remote: str, url: str) -> Fetched:
        """Every branch of this store on ``url``, checked and delivered into the vault's repository as
        ``refs/remotes/sync/<remote>/<machine>``; ``SyncRefused`` with nothing delivered when the remote
        cannot be reached, was rewritten, holds another store's history or content sync never carries."""
        check_remote_name(remote)
        self._check_vault()
        _check_gcrypt_address(url)
        tips = self._read_tips()
        known = _remote_tips(tips, remote, url)
        self._ensure_quarantine()
        incoming = f"{_INCOMING}/{remote}"
        incoming_names = f"{_INCOMING_NAMES}/{remote}"
        self._clear(incoming)
        self._clear(incoming_names)
        self._network(["fetch", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "-q",
                       *self._pack_program(url, "upload"), "--", url, f"{BRANCHES}/{self.store_id}/*:{incoming}/*",
                       f"{NAMES}/{self.store_id}/*:{incoming_names}/*"], url)
        head = self._vault_head()
        fetched = self._refs(incoming)
        names = self._names(incoming_names)
        self._clear(incoming_names)
        own = fetched.pop(self.machine, None)
        seen = {machine: tip for machine, tip in known["seen"].items() if self._has(tip, machine)}
        for machine, tip in sorted(fetched.items()):
            before = seen.get(machine)
            if before is None or before == tip or self._is_ancestor(before, tip):
                continue
            if url.startswith(GCRYPT_PREFIX) and self._is_ancestor(tip, before):
                # git-remote-gcrypt rewrites the remote's whole manifest on each push, so two machines pushing
                # at once can set one's branch back: nothing is lost (we hold the newer tip), nothing to take.
                fetched[machine] = before
                continue
            raise _refused("rewritten", f"the remote's branch of machine {machine} was rewritten: it no longer "
                               "holds the commits this machine fetched from it before; nothing was taken from it",
                               remote=remote, machine=machine)
        pushed = self._check_own(remote, known["pushed"], own, head, gcrypt=url.startswith(GCRYPT_PREFIX))
        if head is not None:
            for machine, tip in sorted(fetched.items()):
                if tip != seen.get(machine) and not self._shares_history(tip):
                    raise _refused("other_store", f"the remote's branch of machine {machine} holds another store's "
                                   "history (no commit in common with this vault); nothing was taken from it",
                                   remote=remote, machine=machine)
        self._check_new_commits(list(fetched.values()), [*seen.values(), *([pushed] if pushed else [])],
                                head is not None)
        self._accept(remote, fetched)
        self._clear(incoming)
        self._deliver(remote)
        known["seen"] = {**known["seen"], **fetched}
        known["pushed"] = pushed
        tips["remotes"][remote] = known
        self._write_tips(tips)
        log.info("sync: fetched %d branches of store %s from remote %s", len(fetched), self.store_id, remote)
        return Fetched(tips=fetched, own=own, names=names)

    def _check_own(self, remote: str, pushed: str | None, own: str | None, head: str | None, *,
                   gcrypt: bool) -> str | None:
        """The commit this machine's branch on the remote holds, when it is what this machine pushed."""
        if own == pushed:
            return pushed
        if own is None:
            raise _refused("rewritten", "the remote no longer holds this machine's branch, which this machine "
                           "pushed before: it was removed or rewritten there; nothing was taken from it",
                           remote=remote, machine=self.machine)
        # A push the remote took and a crash kept us from recording: a commit of the vault's own history
        # that descends from the one recorded.  Anything else on our branch was written by someone else.
        ours = head is not None and self._is_ancestor(own, _VAULT_HEAD)
        if ours and (pushed is None or self._is_ancestor(pushed, own)):
            return own
        if ours and gcrypt and pushed is not None and self._is_ancestor(own, pushed):
            return own  # set back by another machine's gcrypt push (see fetch); the next push restores it
        if pushed is not None and self._is_ancestor(pushed, own):
            # Built on what this machine pushed, by someone holding its machine id: a copy of the state
            # directory (copied to another computer, or restored from a backup) syncing as this machine.
            raise _refused("rewritten", "the remote's branch of this machine holds commits this machine never "
                           "made, on top of the one it pushed last: another copy of this state directory (copied "
                           "rather than joined with `knowledge sync clone`, or restored from a backup) syncs as "
                           "this same machine; nothing was taken from it or pushed over it. To let this copy sync "
                           f"as a machine of its own, remove machine.json and tips.json from {self.sync_dir}",
                           remote=remote, machine=self.machine)
        raise _refused("rewritten", "the remote's branch of this machine was rewritten: it does not hold the "
                       "commit this machine pushed last; nothing was taken from it", remote=remote,
                       machine=self.machine)

    def _check_new_commits(self, tips: list[str], seen: list[str], has_head: bool) -> None:
        """Check every commit reachable from ``tips`` and not from ``seen`` or the vault's head."""
        if not tips:
            return
        exclude = [*seen, *([_VAULT_HEAD] if has_head else [])]
        listed = self._run(["rev-list", *tips, "--not", *exclude, "--"]).decode("ascii").split()
        if not listed:
            return
        raw = self._run(["diff-tree", "--stdin", "-r", "-m", "--root", "--raw", "-z", "--no-renames"],
                        stdin="".join(f"{commit}\n" for commit in listed).encode("ascii"))
        blobs: dict[str, str] = {}
        tokens = raw.split(b"\0")
        index = 0
        while index < len(tokens):
            token = tokens[index]
            index += 1
            if not token.startswith(b":"):
                continue  # a commit's id, or the final empty token
            meta = token[1:].decode("ascii").split()
            raw_path = tokens[index]
            index += 1
            mode, blob, status = meta[1], meta[3], meta[4]
            if status == "D":
                continue  # its path was in a parent, checked then or the vault's own
            path = _check_path(raw_path)
            if path is None:
                continue  # never installed: the merge leaves out what sync does not carry
            if mode == "120000":
                raise _refused("symlink", "the remote's history holds a symbolic link, which a vault never "
                               "holds; nothing was taken from it", path)
            if mode == "160000":
                raise _refused("submodule", "the remote's history holds a submodule (a link to another "
                               "repository), which a vault never holds; nothing was taken from it", path)
            if mode not in ("100644", "100755"):
                raise _refused("unsafe_path", f"the remote's history holds an entry of mode {mode}, not a regular "
                               "file; nothing was taken from it", path)
            if blob not in blobs or size_limit(path) < size_limit(blobs[blob]):
                blobs[blob] = path  # one blob at several paths is held to the smallest of their limits
        self._check_sizes(blobs)

    def _check_sizes(self, blobs: dict[str, str]) -> None:
        if not blobs:
            return
        answer = self._run(["cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)"],
                           stdin="".join(f"{blob}\n" for blob in blobs).encode("ascii")).decode("ascii")
        for line in answer.splitlines():
            parts = line.split()
            if len(parts) != 3 or parts[1] != "blob":
                raise _refused("git_failed", "the remote's history names an object it does not hold as a file")
            path = blobs[parts[0]]
            limit = size_limit(path)
            if int(parts[2]) > limit:
                raise _refused("too_large", f"a file in the remote's history is {int(parts[2])} bytes, more than "
                               f"the {limit} bytes a file there may hold; nothing was taken from it", path,
                               limit=limit)

    def _accept(self, remote: str, fetched: dict[str, str]) -> None:
        lines = "".join(f"update {_ACCEPTED}/{remote}/{machine} {tip}\n" for machine, tip in sorted(fetched.items()))
        if lines:
            self._run(["update-ref", "--stdin"], stdin=lines.encode("ascii"))

    def _deliver(self, remote: str) -> None:
        """The accepted tips into the vault's repository (its remote-tracking refs are ours to move)."""
        if not self._refs(f"{_ACCEPTED}/{remote}"):
            return
        self._run(["fetch", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "-q", "--",
                   str(self.quarantine), f"+{_ACCEPTED}/{remote}/*:{DELIVERED}/{remote}/*"],
                  git_dir=self.vault_git_dir)

    # --- push -------------------------------------------------------------------------------------

    def push(self, remote: str, url: str, commit: str) -> bool:
        """Push the vault's ``commit`` to this machine's branch on ``url``, fast-forward only; False when the
        remote had it already.  A rejected push is ``rewritten``: the remote's branch is not what this
        machine pushed, and it is never overwritten."""
        check_remote_name(remote)
        if not _OID.fullmatch(commit):
            raise ValueError("push takes a commit id")
        self._check_vault()
        _check_gcrypt_address(url)
        tips = self._read_tips()
        known = _remote_tips(tips, remote, url)
        completed = self._network(
            ["push", "--porcelain", "--no-verify", "--no-recurse-submodules", *self._pack_program(url, "receive"),
             "--", url, f"{commit}:{self.branch}"], url, git_dir=self.vault_git_dir, check=False)
        flags = [line.split("\t")[0] for line in completed.stdout.decode("utf-8", "replace").splitlines()
                 if "\t" in line]
        if completed.returncode != 0 or not flags or flags[0] == "!":
            if flags and flags[0] == "!":
                raise _refused("rewritten", "the remote refused this machine's push because its branch there holds "
                               "commits this machine did not push (it was rewritten, or another machine wrote "
                               "it); nothing was overwritten", remote=remote, machine=self.machine)
            raise _failure(completed.stderr, url)
        known["pushed"] = commit
        tips["remotes"][remote] = known
        self._write_tips(tips)
        log.info("sync: pushed store %s to remote %s", self.store_id, remote)
        return flags[0] != "="

    def push_name(self, url: str, name: str, there: tuple[str, str] | None) -> bool:
        """Record ``name`` as this machine's beside its branch on ``url`` (``there``: the one the last fetch
        found), fast-forward from that one; False when the remote has it already."""
        name = machine_name(name)
        if not name or (there is not None and there[1] == name):
            return False
        _check_gcrypt_address(url)
        self._ensure_quarantine()   # the name is made and pushed there, never in the vault's repository
        empty_tree = self._run(["hash-object", "-t", "tree", "-w", "--stdin"], stdin=b"").decode("ascii").strip()
        stamp = f"{COMMITTER} 0 +0000"   # no time: the same name from the same one is the same commit
        parent = f"parent {there[0]}\n" if there is not None else ""
        text = f"tree {empty_tree}\n{parent}author {stamp}\ncommitter {stamp}\n\n{name}\n"
        commit = self._run(["hash-object", "-t", "commit", "-w", "--stdin"],
                           stdin=text.encode("utf-8")).decode("ascii").strip()
        completed = self._network(
            ["push", "--porcelain", "--no-verify", "--no-recurse-submodules", *self._pack_program(url, "receive"),
             "--", url, f"{commit}:{NAMES}/{self.store_id}/{self.machine}"], url, check=False)
        if completed.returncode != 0:
            raise _failure(completed.stderr, url)
        return True

    # --- listing ----------------------------------------------------------------------------------

    def stores_on(self, url: str) -> dict[str, dict[str, str]]:
        """Every store a remote holds branches of: store id -> {machine id: tip} (for ``sync clone``)."""
        _check_gcrypt_address(url)
        self._ensure_quarantine()
        completed = self._network(["ls-remote", "--refs", "--", url, f"{BRANCHES}/*"], url)
        stores: dict[str, dict[str, str]] = {}
        for line in completed.stdout.decode("utf-8", "replace").splitlines():
            tip, _, ref = line.partition("\t")
            parts = ref.removeprefix(BRANCHES + "/").split("/")
            if (ref.startswith(BRANCHES + "/") and len(parts) == 2 and _OID.fullmatch(tip)
                    and is_machine_id(parts[0]) and is_machine_id(parts[1])):
                stores.setdefault(parts[0], {})[parts[1]] = tip
        return stores

    # --- git --------------------------------------------------------------------------------------

    def _check_vault(self) -> None:
        """The vault's repository must be there (``GitHistory.ensure_repository`` makes it): the transport
        delivers into it and pushes from it, and never makes it."""
        if self.vault_git_dir.is_symlink() or not (self.vault_git_dir / "HEAD").is_file():
            raise _refused("not_a_vault", "the vault has no git repository yet (history is off, or git was "
                           "missing when it opened); sync needs the vault's history")

    def _ensure_quarantine(self) -> None:
        """The bare quarantine, made without templates (no sample hooks) and never with alternates."""
        if not (self.quarantine / "HEAD").is_file():
            self.sync_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._run(["init", "-q", "--bare", "--template="])
            self._seed_quarantine()
        for name in ("alternates", "http-alternates"):
            (self.quarantine / "objects" / "info" / name).unlink(missing_ok=True)

    def _seed_quarantine(self) -> None:
        """A new quarantine (its folder removed by hand, say) takes back the tips the vault was given, so
        the tips seen before are there to check the next ones against."""
        if self._completed(["rev-parse", "--verify", "-q", VAULT_BRANCH], self.vault_git_dir).returncode == 0:
            self._run(["fetch", "--no-tags", "--no-write-fetch-head", "-q", "--", str(self.vault_git_dir),
                       f"+{DELIVERED}/*:{_ACCEPTED}/*"])

    def _vault_head(self) -> str | None:
        """The vault's head, its history copied into the quarantine (``_VAULT_HEAD``), or None before it has one."""
        try:
            head = self._run(["rev-parse", "--verify", "-q", f"{VAULT_BRANCH}^{{commit}}"],
                             git_dir=self.vault_git_dir).decode("ascii").strip()
        except SyncRefused:
            return None
        self._run(["fetch", "--no-tags", "--no-write-fetch-head", "-q", "--", str(self.vault_git_dir),
                   f"+{VAULT_BRANCH}:{_VAULT_HEAD}"])
        return head

    def _refs(self, prefix: str) -> dict[str, str]:
        """Machine id -> commit of the refs directly under ``prefix`` in the quarantine that name a machine
        and a commit; a branch this engine never writes (another name, not a commit) is not read."""
        listed = self._run(["for-each-ref", "--format=%(objectname) %(objecttype) %(refname)", f"{prefix}/"])
        found = {}
        for line in listed.decode("utf-8", "replace").splitlines():
            tip, kind, ref = line.split(" ", 2)
            machine = ref.removeprefix(prefix + "/")
            if kind == "commit" and is_machine_id(machine):
                found[machine] = tip
        return found

    def _names(self, prefix: str) -> dict[str, tuple[str, str]]:
        """Machine id -> (commit, name) of the refs directly under ``prefix`` that name a machine and hold a
        commit; a name that is empty once cleaned (``machine_name``) is no name."""
        listed = self._run(["for-each-ref", "--format=%(objectname) %(objecttype) %(refname) %(contents:subject)",
                            f"{prefix}/"])
        found = {}
        for line in listed.decode("utf-8", "replace").splitlines():
            tip, kind, ref, *said = line.split(" ", 3)
            machine = ref.removeprefix(prefix + "/")
            name = machine_name(said[0] if said else "")
            if kind == "commit" and is_machine_id(machine) and name:
                found[machine] = (tip, name)
        return found

    def _clear(self, prefix: str) -> None:
        listed = self._run(["for-each-ref", "--format=delete %(refname)", f"{prefix}/"])
        if listed.strip():
            self._run(["update-ref", "--stdin"], stdin=listed)

    def _has(self, commit: str, machine: str) -> bool:
        if self._completed(["cat-file", "-e", f"{commit}^{{commit}}"], self.quarantine).returncode == 0:
            return True
        log.warning("sync: the quarantine of store %s lost the tip seen of machine %s; its next tip is taken "
                    "without the check that it descends from it", self.store_id, machine)
        return False

    def _is_ancestor(self, ancestor: str, descendant: str) -> bool:
        completed = self._completed(["merge-base", "--is-ancestor", ancestor, descendant], self.quarantine)
        if completed.returncode not in (0, 1):
            raise _failure(completed.stderr, None)
        return completed.returncode == 0

    def _shares_history(self, tip: str) -> bool:
        completed = self._completed(["merge-base", tip, _VAULT_HEAD], self.quarantine)
        return completed.returncode == 0 and bool(completed.stdout.strip())

    def _pack_program(self, url: str, side: str) -> list[str]:
        """For a repository on this machine, git runs the remote's side itself, reading that repository's
        configuration: its hooks (a post-receive hook would run as this user) are turned off there too."""
        if url.startswith(GCRYPT_PREFIX) or not _is_local(url):
            return []
        program = f"{shlex.quote(self.git)} -c core.hooksPath={os.devnull} {side}-pack"
        return [f"--{side}-pack={program}"]

    def _helpers(self, url: str) -> list[str]:
        return ["gcrypt"] if url.startswith(GCRYPT_PREFIX) else []

    def _network(self, args: list[str], url: str, *, git_dir: Path | None = None,
                 check: bool = True) -> subprocess.CompletedProcess[bytes]:
        completed = self._completed(args, git_dir or self.quarantine, helpers=self._helpers(url),
                                    timeout=NETWORK_TIMEOUT)
        if check and completed.returncode != 0:
            raise _failure(completed.stderr, url)
        return completed

    def _run(self, args: list[str], *, git_dir: Path | None = None, stdin: bytes | None = None) -> bytes:
        completed = self._completed(args, git_dir or self.quarantine, stdin=stdin)
        if completed.returncode != 0:
            raise _failure(completed.stderr, None)
        return completed.stdout

    def _completed(self, args: list[str], git_dir: Path | None, *, stdin: bytes | None = None,
                   helpers: Sequence[str] = (), timeout: int = LOCAL_TIMEOUT) -> subprocess.CompletedProcess[bytes]:
        env, options = git_environment(helpers=helpers)
        if git_dir is not None:
            env["GIT_DIR"] = str(git_dir)
        try:
            return subprocess.run([self.git, *options, *args], input=stdin, capture_output=True, env=env,
                                  cwd=self.sync_dir if self.sync_dir.is_dir() else None, timeout=timeout,
                                  start_new_session=True)
        except FileNotFoundError:
            raise _refused("git_missing", "git is not installed (or not where it was found); sync needs it") from None
        except subprocess.TimeoutExpired:
            raise _refused("unreachable", f"git {args[0]} did not finish in {timeout} s; the remote may be "
                           "unreachable or very slow") from None
        except OSError as exc:
            raise _refused("git_failed", f"git {args[0]} could not run: {exc.strerror or exc}") from None

    # --- tips.json --------------------------------------------------------------------------------

    def _read_tips(self) -> TipsFile:
        path = self.sync_dir / TIPS_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return {"schemaVersion": SCHEMA_VERSION, "remotes": {}}
        try:
            document = json.loads(data)
            if not isinstance(document, dict) or document.get("schemaVersion") != SCHEMA_VERSION:
                raise ValueError("another schema version")
            remotes = document["remotes"]
            for entry in remotes.values():
                if (not isinstance(entry["url"], str) or not all(
                        is_machine_id(m) and _OID.fullmatch(t) for m, t in entry["seen"].items())
                        or not (entry["pushed"] is None or _OID.fullmatch(entry["pushed"]))):
                    raise ValueError("an entry is malformed")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise Conflict(f"{path} cannot be read; remove it to let the next round start again (a rewritten remote "
                           "is then noticed only from that round on)", file=str(path)) from None
        return document

    def _write_tips(self, tips: TipsFile) -> None:
        atomic_write(self.sync_dir / TIPS_FILE, (json.dumps(tips, indent=2, sort_keys=True) + "\n").encode("utf-8"),
                     mode=0o600)


def _remote_tips(tips: TipsFile, remote: str, url: str) -> RemoteTips:
    """The remote's entry, a copy to change; a fresh one when the remote's URL changed since."""
    url_hash = hashlib.sha256(url.encode("utf-8")).hexdigest()
    known = tips["remotes"].get(remote)
    if known is None or known["url"] != url_hash:
        return {"url": url_hash, "seen": {}, "pushed": None}
    return {"url": url_hash, "seen": dict(known["seen"]), "pushed": known["pushed"]}


def size_limit(path: str) -> int:
    """The most bytes a file at this (synced) vault path may hold: the engine's limit for its kind."""
    if path == ONTOLOGY_FILE:
        return ONTOLOGY_MAX_BYTES
    partition = partition_of(path)
    inside = path[len(partition) + 1:] if partition else path
    if inside.startswith(f"{SOURCES_DIR}/"):
        return DESCRIPTOR_MAX_BYTES if inside.endswith(DESCRIPTOR_SUFFIX) else ATTACH_FILE_MAX_BYTES
    return RECORD_MAX_BYTES


def _check_path(raw: bytes) -> str | None:
    """A fetched path as text when sync carries it; None for a safe path sync does not carry (a file
    dropped at the vault's root before git was on: the merge leaves it out and lists it); else
    ``SyncRefused`` (``unsafe_path``)."""
    try:
        path = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _refused("unsafe_path", "the remote's history holds a file name that is not UTF-8; nothing was taken "
                       "from it", raw.decode("utf-8", "replace")) from None
    parts = path.split("/")
    if any(part.lower().startswith(".git") for part in parts):
        raise _refused("unsafe_path", "the remote's history holds a .git file or folder, which could change how "
                       "git reads the vault; nothing was taken from it", path)
    if (any(part in ("", ".", "..") for part in parts) or "\\" in path
            or any(ord(char) < 0x20 or ord(char) == 0x7f for char in path)):
        raise _refused("unsafe_path", "the remote's history holds a path that could leave the vault; nothing was "
                       "taken from it", path)
    return path if is_synced(path) else None


def _is_local(url: str) -> bool:
    return local_path(url) is not None


def _check_gcrypt_address(url: str) -> None:
    """git-remote-gcrypt stores an encrypted repository in a folder of its own format (a plain path), or
    pushes it with ``git push -f`` into a git repository: into one on this machine, that push would run the
    repository's hooks, which no option of ours reaches.  A local ``gcrypt::`` remote is a folder, then."""
    if not url.startswith(GCRYPT_PREFIX):
        return
    inner = url[len(GCRYPT_PREFIX):]
    path = local_path(inner)
    if path is None:
        return
    if not inner.startswith("/") or (path / "HEAD").exists():
        raise _refused("git_failed", "an encrypted remote on this machine must be gcrypt:: and the absolute path of "
                       "a folder that is not a git repository (git-remote-gcrypt keeps its own files there; into a "
                       "git repository it would push with that repository's hooks)")


def _failure(stderr: bytes, url: str | None) -> SyncRefused:
    """git's failure as a finding, in our words where git's name a remote (never repeating the URL)."""
    text = stderr.decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[-1] if lines else "")
    transport = re.search(r"transport '([^']*)' not allowed", text)
    if transport is not None:
        return _refused("git_failed", f"the remote's address uses the {transport.group(1)!r} transport, which sync "
                        f"does not run (only {', '.join(PROTOCOLS)})")
    if _FSCK_PATH.search(text) and ("fsck" in text or "object" in text):
        return _refused("unsafe_path", "the remote sent a tree git's own checks refuse (a .git entry or a path "
                        "that leaves the repository); nothing was taken from it")
    if url is not None:
        words = _without_addresses(text, url)  # a port or path holding "401" is no refusal of credentials
        for pattern, said in _UNREACHABLE:
            if pattern.search(words):
                return _refused("unreachable", f"the remote could not be reached: {said}")
        return _refused("git_failed", f"git failed talking to the remote: {_redact(reason, url)}")
    return _refused("git_failed", f"git failed: {_redact(reason, None)}")


def _redact(reason: str, url: str | None) -> str:
    return _without_addresses(reason, url)[:500] or "no reason given"


def _without_addresses(text: str, url: str | None) -> str:
    """``text`` with the remote's URL and anything shaped like a remote address replaced by ``<remote>``."""
    if url:
        text = text.replace(url, "<remote>")
    text = re.sub(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+", "<remote>", text)  # up to a quote that ends it
    return re.sub(r"\S+@[^\s:]+:\S*", "<remote>", text)
