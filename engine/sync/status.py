"""What the owner sees of a store's sync: per remote, its state, ahead/behind, last success and last error,
and the conflicts waiting (docs/sync.md).

The shapes here are shared by ``knowledge sync status``, ``operator/syncStatus`` and the window's Sync
section.  A round writes them to ``<state>/stores/<store id>/sync/status.json`` (``engine/sync/round.py``);
this module declares them.
"""

from __future__ import annotations

from typing import Literal

from ..core.answers import NotRequired, TypedDict

# never: no round has run against this remote; ok: the last round succeeded; failing: the last round
# failed (``lastError`` says why); syncing: a round is running now.
RemoteState = Literal["never", "ok", "failing", "syncing"]

# What a conflict is (merge.ConflictKind), in the owner's words: ``knowledge sync status`` and the window's
# Sync section both say it so; the answers carry the code.
CONFLICT_KINDS = {
    "revised_on_both": "revised on two machines from one revision",
    "added_on_both": "added on two machines with different content",
    "removed_and_revised": "removed on one machine and revised on the other, so it stays",
}


def conflict_kind_words(kind: str | None) -> str:
    """A conflict's kind in the owner's words (a kind not listed, from a newer version, with its underscores
    read as spaces)."""
    kind = kind or ""
    return CONFLICT_KINDS.get(kind, kind.replace("_", " ") or "a conflict")


class SyncError(TypedDict):
    """Why a round failed, in plain words: ``code`` is one of the findings docs/sync.md lists
    (``unreachable``, ``rewritten``, ``unsafe_path``, ``symlink``, ``submodule``, ``too_large``,
    ``invalid_record``, ``invalid_ontology``, ``other_store``, ``partition_missing``, ``git_failed``,
    ``git_missing``), or the round's own: ``interrupted`` (the engine stopped during the last round),
    ``writes_disabled``, ``conflict`` (a file changed under the install), ``internal`` (an unexpected failure,
    logged with its traceback)."""

    code: str
    message: str
    at: str  # ISO 8601 UTC


class SyncRemoteStatus(TypedDict):
    """One remote of a store as this machine last saw it."""

    name: str
    url: str
    state: RemoteState
    lastAttempt: str | None
    lastSuccess: str | None
    lastError: SyncError | None
    ahead: int | None   # commits here that this machine's branch on the remote lacks; None: not known yet
    behind: int | None  # commits on the remote's other branches of this store not merged here
    machines: list[str]  # the other machines whose branches the remote holds for this store
    machineNames: dict[str, str]  # of those, each that recorded its name (its host's) there: id -> name


class SyncConflictVersion(TypedDict):
    """One side of a conflict.  ``label`` names the version as the record's History does (``4``, or ``1.1``
    for an edit made outside the engine that kept the file's number) and ``seenAt`` says when this machine
    first kept it; both are absent where the version is not in the revision archive (a file that is no
    record)."""

    path: str
    revision: int | None
    sha256: str
    updatedAt: str | None
    label: NotRequired[str]
    seenAt: NotRequired[str]


class SyncConflict(TypedDict):
    """A record (or file) revised on two machines from one revision: which version stands, the other one
    (kept in history and the revisions table) and the diff from the other to the standing one."""

    id: str
    recordId: str | None
    partition: str | None
    kind: str  # merge.ConflictKind
    standing: SyncConflictVersion
    other: SyncConflictVersion | None
    diff: str
    remote: str
    at: str
    title: NotRequired[str]  # the record's title as the owner knows it (absent for a file that is no record)


class SyncRemoval(TypedDict):
    """A file a round removed here because another machine removed it (also an event of the record's
    history, kind ``removed_by_sync``); git and the revisions table keep its bytes."""

    partition: str
    path: str            # inside the partition
    recordId: str | None
    detail: str          # "by sync from machine <machine id> of remote <name>"
    at: str


class StoreSyncStatus(TypedDict):
    storeId: str
    name: str | None   # a named store's name
    machineId: str | None  # None until the store's first round or clone
    remotes: list[SyncRemoteStatus]
    conflicts: list[SyncConflict]
    conflictsWaiting: int
    removed: NotRequired[list[SyncRemoval]]  # the newest removals rounds made here, newest first
    problem: NotRequired[str]  # why the store's sync state could not be read


class SyncStatus(TypedDict):
    """Every store of this state directory with its sync state."""

    stores: list[StoreSyncStatus]
