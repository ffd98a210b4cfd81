"""One sync round of a store with its remotes: fetch, merge by record, push (docs/sync.md, "Rounds").

The entry point, for automatic sync (scheduler.py), ``Engine.sync_store`` (the command line and the operator
methods go through it) and ``sync clone`` alike::

    run_round(runtime, record, remote_name=None) -> list[SyncRemoteStatus]

runs one round with every remote of the store (or the one named; ``NotFound`` when the store has no
such remote) and returns each remote's status as ``status.json`` now holds it.  A remote that fails
(unreachable, rewritten, a refused history, a git failure) is ``failing`` with ``lastError`` saying why
in plain words; the round goes on with the next remote, and nothing is raised for it.  ``read_status``
gives the same per-remote statuses without running anything.

A round with one remote:

1. fetch (``Transport.fetch``) off the lane and without the git lock: the remote's branches of this
   store, checked in the quarantine, delivered into the vault's repository as
   ``refs/remotes/sync/<remote>/<machine>``.  Nothing reaches the vault's files.
2. holding the runtime's git lock, on the lane (no publication can land in between):
   - the pending publications are committed (``the runtime's ``checkpoint(inline=True)````), and what was
     edited by hand in the vault is committed as one commit ("outside edits"), so the head holds exactly
     the vault's synced files;
   - a vault with no history yet first takes the first tip's (``_take_history``: what it holds merged with
     the tip from nothing, the branch moved to the tip, the rest committed on top);
   - each fetched tip, in machine-id order: one the head already holds is nothing; one that holds the
     head is a fast-forward (the difference installed as a publication, then the branch moved to the
     tip); any other is merged by record (``merge_vaults`` from the merge base, several bases merged
     first), the result installed as publications (``plan_sync``), its conflicts recorded
     (``record_conflicts``) and a merge commit made with the tip as second parent.  A merge that
     changes nothing of ours still makes the merge commit, so the other machine's head is then held
     here and the next round is a fast-forward there, never another merge.
3. the head is pushed to this machine's branch, fast-forward only (``Transport.push``), off the lane; not
   at all when the fetch found that branch at the head already (a round with nothing new runs no push); a
   store with no history that found nothing of its own on a remote holding other stores fails with
   ``other_store``, pointing at ``sync clone``.

Each removal a round installs is recorded as an event of its record's history (``removed_by_sync``) and
listed by ``sync status``.

A crash anywhere loses nothing: the fetch is idempotent, each install is a journalled publication, and
a publication left uncommitted is committed by the next checkpoint as an ordinary commit, which the next
round merges again (the same change on both sides is no change; a version that side already held is the
file's base, so the other machine's later revisions of it are no conflict: ``_held_versions_as_base``).
The kill points ``sync_fetched``, ``sync_installed``, ``sync_committed`` and ``sync_pushed``
(engine/core/faults.py) let tests/reliability/sync_crash.py kill a round exactly there.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable, Protocol, TypeVar

from ..core.errors import KnowledgeError, NotFound, WritesDisabled
from ..core.faults import Faults
from ..core.files import atomic_write
from ..core.findings import Finding
from ..core.ids import format_timestamp, utc_now
from ..state.config import SettingsSource
from ..state.registry import StoreRecord
from ..store.catalog_reads import CatalogReads
from ..store.githistory import CommitFile, GitError, GitHistory, blob_id
from ..store.outbox import GitOutbox
from ..store.publication import Plan
from ..store.store import Store
from .install import plan_sync, record_conflicts, record_sync_removals, removals_of, waiting_conflicts
from .merge import MergeConflict, MergeRefused, MergeResult, Removed, is_synced, merge_vaults
from .remotes import SYNC_DIR, SyncRemote, read_remotes
from .status import SyncError, SyncRemoteStatus
from .transport import Fetched, SyncRefused, Transport, machine_id, this_machine_name

log = logging.getLogger(__name__)
T = TypeVar("T")

STATUS_FILE = "status.json"
STATUS_SCHEMA_VERSION = 1
STATUS_FILE_MAX_BYTES = 1024 * 1024
OUTSIDE_EDITS_MESSAGE = "Knowledge: outside edits\n\nFiles changed in the vault by hand, committed before a sync round.\n"


class SyncRuntime(Protocol):
    """What a round needs of the store's runtime (engine/runtime.py's StoreRuntime)."""

    store: Store
    catalog: CatalogReads
    git: GitHistory | None
    settings: SettingsSource
    outbox: GitOutbox
    sync_lock: threading.Lock
    faults: Faults  # KNOWLEDGE_FAULT's sync_* kill points (engine/core/faults.py)

    def with_history(self, work: Callable[[], T], *, on_lane: bool = True) -> T: ...

    def prepare(self, partition: str) -> None: ...

    def checkpoint(self, *, inline: bool = False) -> Any: ...

    def publish(self, plan: Plan) -> Any: ...

    def rebuild_catalogue(self) -> int: ...


# --- status.json ----------------------------------------------------------------------------------


def sync_dir(record: StoreRecord) -> Path:
    return record.path / SYNC_DIR


def status_file(record: StoreRecord) -> Path:
    return sync_dir(record) / STATUS_FILE


def _never(remote: SyncRemote) -> SyncRemoteStatus:
    return {"name": remote["name"], "url": remote["url"], "state": "never", "lastAttempt": None,
            "lastSuccess": None, "lastError": None, "ahead": None, "behind": None, "machines": [],
            "machineNames": {}}


def _read_entries(record: StoreRecord) -> dict[str, dict[str, Any]]:
    """``status.json``'s entries by remote name: ``{"status": SyncRemoteStatus, "pushed": commit}``.  A file
    that is missing, torn by hand or of another version reads as no entries (each remote is then ``never``
    until its next round): it is this machine's record of its rounds, never something to refuse a round for."""
    try:
        with open(status_file(record), "rb") as handle:
            data = handle.read(STATUS_FILE_MAX_BYTES + 1)
        document = json.loads(data)
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict) or document.get("schemaVersion") != STATUS_SCHEMA_VERSION:
        return {}
    entries = document.get("remotes")
    if not isinstance(entries, dict):
        return {}
    return {name: entry for name, entry in entries.items()
            if isinstance(entry, dict) and isinstance(entry.get("status"), dict)}


def _write_entries(record: StoreRecord, entries: dict[str, dict[str, Any]]) -> None:
    path = status_file(record)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    document = {"schemaVersion": STATUS_SCHEMA_VERSION, "remotes": dict(sorted(entries.items()))}
    atomic_write(path, (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), mode=0o600)


def _entry_status(remote: SyncRemote, entry: dict[str, Any] | None) -> SyncRemoteStatus:
    """A remote's status from its entry; an entry for another URL (the remote removed and added again
    elsewhere) is not this remote's."""
    never = _never(remote)
    if entry is None or entry["status"].get("url") != remote["url"]:
        return never
    status = entry["status"]
    return {key: status.get(key, default) for key, default in never.items()}  # type: ignore[return-value]


def read_status(record: StoreRecord, remotes: list[SyncRemote] | None = None) -> list[SyncRemoteStatus]:
    """Every remote of the store with its status as the last rounds left it (``never`` before the first);
    ``Conflict`` when the remotes file cannot be read."""
    entries = _read_entries(record)
    return [_entry_status(remote, entries.get(remote["name"]))
            for remote in (read_remotes(record) if remotes is None else remotes)]


def read_machine_id(record: StoreRecord) -> str | None:
    """This machine's id for the store, or None before its first round or clone (nothing is created)."""
    try:
        document = json.loads((sync_dir(record) / "machine.json").read_bytes())
    except (OSError, ValueError):
        return None
    machine = document.get("machineId") if isinstance(document, dict) else None
    return machine if isinstance(machine, str) else None


# --- the round ------------------------------------------------------------------------------------


def run_round(runtime: SyncRuntime, record: StoreRecord, remote_name: str | None = None) -> list[SyncRemoteStatus]:
    """One round with every remote of the store, or with ``remote_name``; see the module's docstring."""
    remotes = read_remotes(record)
    if remote_name is not None:
        remotes = [remote for remote in remotes if remote["name"] == remote_name]
        if not remotes:
            raise NotFound(f"store {record.store_id} has no remote named {remote_name!r} (`knowledge sync remote "
                           "list` shows them)", store=record.store_id, name=remote_name)
    results = []
    with runtime.sync_lock:
        for remote in remotes:
            results.append(_round_with(runtime, record, remote))
    return results


def _round_with(runtime: SyncRuntime, record: StoreRecord, remote: SyncRemote) -> SyncRemoteStatus:
    entries = _read_entries(record)
    previous = entries.get(remote["name"])
    status = _entry_status(remote, previous)
    pushed = previous.get("pushed") if previous is not None and status["state"] != "never" else None
    status.update(state="syncing", lastAttempt=_now())
    entries[remote["name"]] = {"status": status, "pushed": pushed}
    _write_entries(record, entries)
    fetched: Fetched | None = None
    try:
        history = _history(runtime)
        transport = Transport(sync_dir(record), history.executable, record.store_id, machine_id(sync_dir(record)),
                              history.git_dir)
        # The vault's repository exists before the fetch delivers into it.
        runtime.with_history(history.ensure_repository, on_lane=False)
        fetched = transport.fetch(remote["name"], remote["url"])
        runtime.faults.reach("sync_fetched")
        head = _merge_on_lane(runtime, history, remote["name"], fetched)
        if head is None:
            _refuse_other_stores(transport, record, remote)
        if head is not None:
            if head != fetched.own:  # the fetch found this machine's branch at the head: nothing to push
                transport.push(remote["name"], remote["url"], head)
            runtime.faults.reach("sync_pushed")
            pushed = head
            _push_name(transport, remote, fetched)
    except Exception as exc:  # noqa: BLE001 - every failure is the remote's status, never a traceback
        error = _sync_error(exc)
        status.update(state="failing", lastError=error)
        # debug, not warning: offline is a normal state; automatic sync logs one line when a remote starts
        # failing and one when it recovers (scheduler.py), and ``sync now`` prints the status it returns.
        log.debug("sync of store %s with remote %s failed: %s (%s)", record.store_id, remote["name"],
                  error["message"], error["code"])
    else:
        status.update(state="ok", lastError=None, lastSuccess=status["lastAttempt"])
    if fetched is not None:
        status["machines"] = sorted(fetched.tips)
        status["machineNames"] = {machine: fetched.names[machine][1] for machine in status["machines"]
                                  if machine in fetched.names}
    _count(runtime, remote["name"], status, pushed, fetched is not None)
    entries = _read_entries(record)
    entries[remote["name"]] = {"status": status, "pushed": pushed}
    _write_entries(record, entries)
    return status


def _push_name(transport: Transport, remote: SyncRemote, fetched: Fetched) -> None:
    """This machine's name beside its branch, where the remote has another or none: the other machines show it
    instead of the id.  A name that could not be pushed is tried again next round; the round stands."""
    try:
        transport.push_name(remote["url"], this_machine_name(), fetched.names.get(transport.machine))
    except SyncRefused as exc:
        log.debug("sync: the name of this machine was not recorded on remote %s: %s", remote["name"], exc.message)


def _refuse_other_stores(transport: Transport, record: StoreRecord, remote: SyncRemote) -> None:
    """A store that has written nothing yet and found nothing of its own on a remote that holds other stores:
    the owner most likely meant to join one of them, which is ``sync clone`` (a store joins another's history
    only by its store id).  Said as a failure until this store has something to push."""
    others = sorted(set(transport.stores_on(remote["url"])) - {record.store_id})
    if others:
        raise refused("other_store", f"this store ({record.store_id}) has nothing to sync yet and remote "
                      f"{remote['name']} holds only other stores ({', '.join(others)}); to join one of them on this "
                      "machine, `knowledge sync clone URL --agent A --store-id ID` it for an agent without a "
                      "store (this store's first write is pushed as a store of its own)")


def _history(runtime: SyncRuntime) -> GitHistory:
    if runtime.git is None:
        raise refused("git_missing", "git is not installed on this machine; a store syncs through git "
                                      "(install it and sync again)")
    if not runtime.settings.current().writes_enabled:
        raise WritesDisabled("the owner has turned Knowledge writes off: nothing was fetched, merged or pushed "
                             "(a round writes what other machines wrote)")
    return runtime.git


def refused(code: str, message: str) -> SyncRefused:
    """The refusal of a round (or clone) for ``code`` (status.py lists them), saying why in plain words."""
    return SyncRefused(Finding(code, message))


def _now() -> str:
    return format_timestamp(utc_now())


def _sync_error(exc: BaseException) -> SyncError:
    """What the owner reads of a failed round: the finding's code and its message in plain words."""
    if isinstance(exc, SyncRefused):
        return {"code": exc.finding.code, "message": exc.finding.message, "at": _now()}
    if isinstance(exc, MergeRefused) and exc.findings:
        finding = exc.findings[0]
        return {"code": finding.code, "message": exc.message, "at": _now()}
    if isinstance(exc, KnowledgeError):
        return {"code": exc.reason, "message": exc.message, "at": _now()}
    if isinstance(exc, GitError):
        return {"code": "git_failed", "message": str(exc), "at": _now()}
    log.error("sync round failed unexpectedly", exc_info=exc)
    return {"code": "internal", "message": f"the round stopped on an unexpected error ({type(exc).__name__}: {exc}); "
                                           "nothing was lost, the next round tries again", "at": _now()}


def _count(runtime: SyncRuntime, remote: str, status: SyncRemoteStatus, pushed: str | None, fetched: bool) -> None:
    """Ahead: commits here that this machine's branch on the remote lacks; behind: commits of the remote's
    other branches of this store not merged here (known only after a fetch).  Reads only: no git lock."""
    history = runtime.git
    if history is None:
        return
    try:
        head = history.head()
        status["ahead"] = 0 if head is None else history.count_commits([head], [pushed] if pushed else [])
        tips = history.commits_under(f"refs/remotes/sync/{remote}/") if fetched else None
        status["behind"] = None if tips is None else history.count_commits(tips, [head] if head else [])
    except GitError as exc:
        log.warning("could not count the commits ahead of and behind remote %s: %s", remote, exc)


# --- on the lane ----------------------------------------------------------------------------------


def _merge_on_lane(runtime: SyncRuntime, history: GitHistory, remote: str, fetched: Fetched) -> str | None:
    """Step 2 of the round, holding the git lock and on the lane; returns the head to push (None: the
    vault has no history yet and nothing came)."""
    return runtime.with_history(lambda: _merge_tips(runtime, history, remote, fetched))


def _merge_tips(runtime: SyncRuntime, history: GitHistory, remote: str, fetched: Fetched) -> str | None:
    for partition in runtime.store.partitions():
        runtime.prepare(partition)  # the catalog sees what was edited by hand before anything is installed
    if history.head() is None and fetched.tips:
        first = min(fetched.tips)
        _take_history(runtime, history, fetched.tips[first], remote, first)
    checkpoint = runtime.checkpoint(inline=True)
    if checkpoint["state"] != "committed":
        raise GitError(f"the pending publications could not be committed: {checkpoint.get('reason')}")
    _commit_outside_edits(history)
    for machine in sorted(fetched.tips):
        tip = fetched.tips[machine]
        head = history.head()
        if head is not None and (tip == head or history.is_ancestor(tip, head)):
            continue
        _replay_conflicts(runtime, history, head, tip, remote, machine)
        if head is None or history.is_ancestor(head, tip):
            _fast_forward(runtime, history, head, tip, remote, machine)
        else:
            _merge(runtime, history, head, tip, remote, machine)
    return history.head()


def _replay_conflicts(runtime: SyncRuntime, history: GitHistory, head: str | None, tip: str, remote: str,
                      machine: str) -> None:
    """Record here the conflicts of the merges another machine made that the tip brings: a merge is the same
    computation on every machine, so merging each one's parents again gives its conflicts, and every machine
    lists every conflict, not only the one that happened to merge."""
    for _merge_commit, parents in history.merges_between(tip, [head] if head else []):
        if len(parents) != 2:
            continue
        ours, theirs = _synced_tree(history, parents[0]), _synced_tree(history, parents[1])
        bases = sorted(history.merge_bases(*parents))
        base = _base_state(history, bases) if bases else {}
        removed = _removed(history, bases, parents[:1], parents[1:])
        base = _held_versions_as_base(history, base, bases, (parents[0], ours), (parents[1], theirs))
        load = _blob_loader(history, [base, ours, theirs])
        _record_conflicts(runtime, merge_vaults(base, ours, theirs, load=load, removed=removed).conflicts, remote, machine)


def _record_conflicts(runtime: SyncRuntime, conflicts: Iterable[MergeConflict], remote: str, machine: str) -> None:
    """List the conflicts the owner has not been told of yet: one already waiting for the same record between
    the same two versions (two machines merged the same pair, or a replay after a round that failed) is not
    listed twice."""
    def key(record_id: str | None, one: str, other: str | None) -> tuple[str | None, frozenset[str | None]]:
        return record_id, frozenset({one, other})

    db = runtime.store.db
    waiting = {key(c["recordId"], c["standing"]["sha256"], c["other"]["sha256"] if c["other"] else None)
               for c in waiting_conflicts(db)}
    new = [c for c in conflicts
           if key(c.record_id, c.kept.sha256, c.other.sha256 if c.other is not None else None) not in waiting]
    if new:
        record_conflicts(db, new, remote=remote, machine=machine)


def _commit_outside_edits(history: GitHistory) -> None:
    changed, removed = history.outside_changes()
    if changed or removed:
        history.commit(changed, OUTSIDE_EDITS_MESSAGE, removals=removed)


def _blob_loader(history: GitHistory, states: Iterable[dict[str, str]]) -> Callable[[Hashable], bytes]:
    """A ``load`` for ``merge_vaults`` that reads, in one batch, every blob that is not the same in all the
    states (the only ones a merge reads), and any other on demand."""
    states = list(states)
    paths = set().union(*states)
    differing = {state[path] for path in paths for state in states
                 if path in state and any(other.get(path) != state[path] for other in states)}
    blobs = history.read_blobs(sorted(differing)) if differing else {}

    def load(blob: Hashable) -> bytes:
        if blob not in blobs:
            blobs.update(history.read_blobs([str(blob)]))
        return blobs[blob]

    return load


def _synced_tree(history: GitHistory, commit: str | None) -> dict[str, str]:
    if commit is None:
        return {}
    return {path: blob for path, blob in history.tree(commit).items() if is_synced(path)}


def _take_history(runtime: SyncRuntime, history: GitHistory, tip: str, remote: str, machine: str) -> None:
    """A vault with no history yet takes the tip's: a clone's first round, or one cut short after installing
    part of the tip (the checkpoint waits for this round then, ``StoreRuntime.checkpoint``).  What the vault
    already holds is merged with the tip from nothing (the same file twice is one file; a record both added
    differently is a conflict), the rest of the tip installed, the branch moved to the tip, and what the
    vault holds beyond it committed on top, so no file written here is lost and the head is the tip's
    history."""
    files, _ = history.outside_changes()  # with no history: every synced file the vault holds
    held = {blob_id(item.data): item.data for item in files}
    ours = {item.path: blob_id(item.data) for item in files}
    theirs = _synced_tree(history, tip)
    fetch = _blob_loader(history, [theirs])

    def load(blob: Hashable) -> bytes:
        return held[blob] if blob in held else fetch(blob)

    merged = merge_vaults({}, ours, theirs, load=load)
    _install(runtime, ours, merged, load, remote, machine)
    _record_conflicts(runtime, merged.conflicts, remote, machine)
    history.fast_forward(tip, None)
    changed = [CommitFile(path, load(blob)) for path, blob in merged.files.items() if theirs.get(path) != blob]
    removed = sorted(path for path in theirs if path not in merged.files)
    if changed or removed:
        history.commit(changed, f"Knowledge: this machine's files, onto the history of machine {machine} of "
                                f"remote {remote}\n", removals=removed)
    head = history.head()
    assert head is not None
    _mark_committed(runtime, head)
    runtime.faults.reach("sync_committed")


def _fast_forward(runtime: SyncRuntime, history: GitHistory, head: str | None, tip: str, remote: str,
                  machine: str) -> None:
    """The tip holds the head: install what it changed (merged from the head, so a tip that drops a whole
    partition is refused as any merge would), then move the branch to it.  A tip whose files the rules
    would place otherwise is merged instead, so the head always holds exactly the vault's files."""
    ours, theirs = _synced_tree(history, head), _synced_tree(history, tip)
    load = _blob_loader(history, [ours, theirs])
    merged = merge_vaults(ours, ours, theirs, load=load)
    if merged.files != theirs:
        _merge_result(runtime, history, ours, merged, load, tip, remote, machine)
        return
    _install(runtime, ours, merged, load, remote, machine)
    _mark_committed(runtime, tip)  # the publications just made hold the tip's files
    history.fast_forward(tip, head)
    runtime.faults.reach("sync_committed")


def _merge(runtime: SyncRuntime, history: GitHistory, head: str, tip: str, remote: str, machine: str) -> None:
    ours, theirs = _synced_tree(history, head), _synced_tree(history, tip)
    bases = sorted(history.merge_bases(head, tip))
    if not bases:
        raise refused("other_store", f"the history of machine {machine} on remote {remote} shares no "
                                                 "commit with this store's: it is another store's history")
    base = _base_state(history, bases)
    removed = _removed(history, bases, [head], [tip])
    base = _held_versions_as_base(history, base, bases, (head, ours), (tip, theirs))
    load = _blob_loader(history, [base, ours, theirs])
    _merge_result(runtime, history, ours, merge_vaults(base, ours, theirs, load=load, removed=removed), load, tip, remote,
                  machine)


def _merge_result(runtime: SyncRuntime, history: GitHistory, ours: dict[str, str], merged: MergeResult,
                  load: Callable[[Hashable], bytes], tip: str, remote: str, machine: str) -> None:
    """Install ``merged``, record its conflicts and commit it with the tip as second parent."""
    _install(runtime, ours, merged, load, remote, machine)
    _record_conflicts(runtime, merged.conflicts, remote, machine)
    changed = [CommitFile(path, load(blob)) for path, blob in merged.files.items() if ours.get(path) != blob]
    removed = sorted(path for path in ours if path not in merged.files)
    commit = history.commit(changed, f"Knowledge: sync with machine {machine} of remote {remote}\n",
                            removals=removed, merge_parents=[tip])
    runtime.faults.reach("sync_committed")
    _mark_committed(runtime, commit)


def _base_state(history: GitHistory, bases: list[str]) -> dict[str, str]:
    """The merge base's files; several bases (criss-cross merges) are merged first, in a fixed order,
    each pair from its own bases, as git's recursive strategy does, so every machine gets one base."""
    state = _synced_tree(history, bases[0])
    for at, other in enumerate(bases[1:], start=1):
        below = sorted(history.merge_bases(bases[0], other))
        base = _base_state(history, below) if below else {}
        theirs = _synced_tree(history, other)
        load = _blob_loader(history, [base, state, theirs])
        merged = merge_vaults(base, state, theirs, load=load, removed=_removed(history, below, bases[:at], [other]))
        state = {path: str(blob) for path, blob in merged.files.items()}
    return state


def _removed(history: GitHistory, bases: list[str], ours: list[str],
             theirs: list[str]) -> Callable[[str], list[Removed]]:
    """``merge_vaults``'s ``removed``: each side's commits since the bases, with their parents and what each removed
    and wrote, and the same for the bases' own history; read from git only when the merge asks."""
    def removed(side: str) -> list[Removed]:
        if side == "base":
            return history.removals_since(bases)
        return history.removals_since(ours if side == "ours" else theirs, bases)

    return removed


def _held_versions_as_base(history: GitHistory, base: dict[str, str], bases: list[str],
                           ours: tuple[str, dict[str, str]], theirs: tuple[str, dict[str, str]]) -> dict[str, str]:
    """The base, with each file both sides changed moved to a version one side's own history already held.

    A round killed after it installed a merge and before it committed it leaves the other machine's versions
    in the vault, committed by the next checkpoint as ordinary commits with no link to the other machine's
    commits: a later merge would see those versions as added or revised on both sides from the old base, and
    list as conflicts what is one line of revisions (machine B's r2 over the r1 that A took in).  When our
    version of a file is one their commits since the base held (or theirs one ours held), that version is
    where the two sides parted, so it is the file's base: the side that moved on from it wins without a
    conflict, as it would have had the interrupted merge been committed.  Both sides' commits are read, so
    every machine computes the same base for the same two commits."""
    (our_commit, our_files), (their_commit, their_files) = ours, theirs
    contested = [path for path in set(our_files) | set(their_files)
                 if our_files.get(path) != their_files.get(path)
                 and base.get(path) not in (our_files.get(path), their_files.get(path))]
    if not contested:
        return base
    theirs_held, ours_held = _blobs_since(history, their_commit, bases), _blobs_since(history, our_commit, bases)
    moved = dict(base)
    for path in contested:
        if path in our_files and our_files[path] in theirs_held:
            moved[path] = our_files[path]
        elif path in their_files and their_files[path] in ours_held:
            moved[path] = their_files[path]
    return moved


def _blobs_since(history: GitHistory, commit: str, bases: list[str]) -> set[str]:
    """The objects (blobs among them) of ``commit``'s history that ``bases`` do not hold."""
    return history.objects_since(commit, bases)


def _install(runtime: SyncRuntime, ours: dict[str, str], merged: MergeResult,
             load: Callable[[Hashable], bytes], remote: str, machine: str) -> None:
    """Turn the vault from ``ours`` into ``merged`` by journalled publications, one per partition, and record
    each removal among them in its record's history (which machine's history removed it)."""
    plans = plan_sync(runtime.store, ours, merged, load).plans
    removals = removals_of(plans)
    for plan in plans:
        runtime.publish(plan)
        record_sync_removals(runtime.store.db, [removal for removal in removals if removal[0] == plan.partition],
                             remote=remote, machine=machine)
        runtime.faults.reach("sync_installed")


def _mark_committed(runtime: SyncRuntime, commit: str) -> None:
    """The round's publications are held by ``commit``: the outbox has nothing else pending (everything
    before them was committed at the round's start, on this same lane call)."""
    pending = runtime.outbox.pending()
    if pending:
        runtime.outbox.committed([entry["seq"] for entry in pending], commit)
