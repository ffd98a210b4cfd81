"""Merging two machines' vaults by record, never by the text of their files (STYLE rule 29).

``merge_vaults(base, ours, theirs)`` takes three vault states (the last state both machines shared,
and each machine's own), each a mapping of vault-relative path to the file's exact bytes, or to a
blob id with a ``load`` that reads it, so that only the changed files are read.  It computes the
merged state and what the owner must hear about: conflicts, removals, files moved aside because two
records wanted one path, and paths left out of the merge.  It is a pure function:
no disk, no git, no store.  How the states are read (git trees through the store's git wrapper) and
what is done with the result (written to the vault, archived, shown in ``sync status``) belongs to
the callers; docs/sync.md, "Merging by record", says what each rule means for the owner.

The rules:

- Only what the engine reads travels: ``ontology.yaml`` and the files under ``private/`` and
  ``conversations/<session-uuid>/``.  Derived files (``.partition.json``, ``*.tmp``, anything named
  ``.git*``) and everything else are left out with a finding; a path that could leave the vault
  (absolute, ``..``, a backslash, a NUL) refuses the whole merge.
- A record is merged by its ``id`` wherever its file lives; any other file (a retained source, a
  descriptor, the ontology, a file that is no record) by its path.  Each is a three-way merge: a
  change made on one side only is taken (a removal too, listed in ``removals``); the same change
  on both sides is taken once; two different changes are a conflict.  A record's path and its bytes
  merge apart, so one moved on one side and revised on the other is the revision at its new path.
- A conflict keeps both versions: the one that stands is chosen by ``precedence`` (an ended
  lifecycle first, so a correction or withdrawal is never undone by a concurrent edit, then the
  higher revision, the later ``updated_at``, the greater sha256), the same on every machine; the
  other is listed with its bytes so its diff can be shown and it can be archived.  A record
  removed on one side and revised on the other is decided by the same order between the revision and
  the version the removal removed (``removed``: what that side's commits removed): the revision stays,
  or the removal applies and the revision is listed against the removed version.  A move is no
  revision: a removal removes its version wherever the other side moved it.
- A record that stays goes where the merged histories last moved it: of its moves (a commit that removed
  it at one path and wrote it at another) that no later move on the same line of commits replaced, the
  greatest path.  The paths the sides hold say the same where no more than one side moved it since the
  base (the table's three-way rule, read without any history); a side's history is read where both moved
  it, and a remover's wherever it moved it, never the path it was removed at.
- A side holding nothing of a partition that the base held is refused (``MergeRefused``): an
  unreadable or missing folder is never read as "everything deleted".
- Two records, or a record and another file, wanting one path: the record with the smaller id (the
  older one: ids begin with their creation time) takes it, the other goes beside it to
  ``<stem>-<id>.md`` (another file: ``<stem>-<sha256 prefix><suffix>``).  Placement depends only on
  the merged files: a file moved aside returns once its path is free.

Merging is commutative (the sides may be swapped) and, because a record's current version is the
greatest of every version written concurrently and a removal is weighed by the version it removed, the
order in which machines merge does not change the final bytes; a record's place is a function of the commits
merged, whatever order merged them (tests/engine/sync/test_merge_convergence.py; docs/sync.md, "Where a record
goes").
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Hashable, Literal, Mapping, Sequence

from ..core.errors import Conflict
from ..core.files import sha256_bytes
from ..core.findings import Finding
from ..core.ids import canonical_session_id, is_record_id, parse_timestamp
from ..vault.records import parse_record

# A vault state: vault-relative path -> the file's bytes or, merged with ``load``, its blob id (any hashable
# key naming the bytes, such as a git blob's object id).
VaultState = Mapping[str, "bytes | Hashable"]
Side = Literal["ours", "theirs"]
Held = Literal["base", "ours", "theirs"]
# One commit of a side's history: its id, its parents' ids, and what it removed and what it wrote, as (path, bytes
# or blob id) pairs (a merge: nothing; its parents tie together the lines of commits it joins).
Removed = tuple[Hashable, Sequence[Hashable], Sequence[tuple[str, "bytes | Hashable"]],
                Sequence[tuple[str, "bytes | Hashable"]]]

ONTOLOGY_FILE = "ontology.yaml"
PRIVATE_DIR = "private"
CONVERSATIONS_DIR = "conversations"
SOURCES_DIR = "sources"
RECORD_SUFFIX = ".md"
# Lifecycles that end a record: what happened to it wins over a concurrent edit of it.
ENDED_LIFECYCLES = frozenset({"superseded", "withdrawn", "merged"})
# Derived or machine-local names inside a vault; never merged.
_DERIVED_NAMES = frozenset({".partition.json"})
_DERIVED_SUFFIXES = (".tmp",)

ConflictKind = Literal["revised_on_both", "added_on_both", "removed_and_revised"]


class MergeRefused(Conflict):
    """The states cannot be merged safely; ``findings`` says why, and nothing was merged."""

    def __init__(self, message: str, findings: list[Finding]) -> None:
        super().__init__(message, findings=[finding.to_dict() for finding in findings])
        self.findings = findings


@dataclass(frozen=True)
class Version:
    """One file as a side holds it: where, and its bytes (``blob``: the bytes, or the id ``load`` reads)."""

    path: str
    blob: bytes | Hashable
    load: Callable[[Hashable], bytes] | None = field(default=None, compare=False, repr=False)

    @cached_property
    def data(self) -> bytes:
        if self.load is not None:
            return self.load(self.blob)
        assert isinstance(self.blob, bytes)  # checked on the way in
        return self.blob

    @cached_property
    def sha256(self) -> str:
        return sha256_bytes(self.data)

    @cached_property
    def _record(self):
        if not _may_be_record(self.path):
            return None
        record, _ = parse_record(self.data, self.path)
        return record if record is not None and is_record_id(record.id) else None

    @property
    def record_id(self) -> str | None:
        return None if self._record is None else self._record.id

    @cached_property
    def tag(self) -> str:
        """What names this file beside a path another holds: its record id, else its sha256's first 12 digits."""
        return self.record_id if self.record_id is not None else self.sha256[:12]

    @cached_property
    def natural(self) -> str:
        """The path this file wants: its own, less the ``-<tag>`` a merge added when it moved it aside."""
        stem, suffix = _split_name(self.path)
        return stem[: -len(self.tag) - 1] + suffix if stem.endswith(f"-{self.tag}") else self.path

    def same(self, other: Version | None) -> bool:
        """The same bytes wanting the same path (a file moved aside is still the same file)."""
        return other is not None and self.blob == other.blob and self.natural == other.natural

    @property
    def revision(self) -> int | None:
        return None if self._record is None else self._record.revision

    @property
    def lifecycle(self) -> str | None:
        return None if self._record is None else self._record.lifecycle

    @property
    def updated_at(self) -> str | None:
        return None if self._record is None else self._record.view.updated_at


def precedence(version: Version) -> tuple[int, int, float, str, str]:
    """The order that decides which of two concurrent versions stands; greater stands.

    An ended lifecycle (superseded, withdrawn, merged) first: a claim's correction or a record's
    withdrawal made on one machine is not undone by an edit made meanwhile on another.  Then the
    higher revision, the later ``updated_at``, the greater sha256 and, for the same bytes at two
    places, the greater path: every machine computes the same answer from the same two versions.
    """
    moment = parse_timestamp(version.updated_at)
    return (
        1 if version.lifecycle in ENDED_LIFECYCLES else 0,
        version.revision or 0,
        moment.timestamp() if moment is not None else float("-inf"),
        version.sha256,
        version.natural,
    )


@dataclass(frozen=True)
class MergeConflict:
    """Two different changes of one record (or file) since the base: which stands, and the other."""

    kind: ConflictKind
    record_id: str | None       # None for a file that is no record (merged by path)
    kept: Version               # the version that stands in the merged vault (before any move)
    kept_side: Side
    other: Version | None       # the version that does not stand; None when that side removed it
    base: Version | None

    def diff(self) -> str:
        """A unified diff from the version that does not stand to the one that does, its sides named as the
        owner reads them: ``path (not standing)`` and ``path (stands)``, not by which side of a merge each came
        from (a conflict replayed from another machine's merge has that machine's sides)."""
        before = "" if self.other is None else self.other.data.decode("utf-8", "replace")
        after = self.kept.data.decode("utf-8", "replace")
        before_name = f"{self.other.path} (not standing)" if self.other is not None else "/dev/null"
        return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), before_name,
                                            f"{self.kept.path} (stands)"))


@dataclass(frozen=True)
class Removal:
    """A file one side removed and the other left as the base had it: removed, and said so."""

    side: Side
    record_id: str | None
    base: Version


@dataclass(frozen=True)
class Move:
    """A record or file placed beside the path it wanted, because another held that path."""

    record_id: str | None
    wanted: str     # the path it wants (its own, less any ``-<tag>`` a merge added)
    was: str        # where the version that stands had it
    placed: str     # where it is in the merged vault


@dataclass(frozen=True)
class MergeResult:
    files: dict[str, bytes | Hashable]  # the merged vault: path -> bytes (or blob id, as given), by path
    conflicts: tuple[MergeConflict, ...]
    removals: tuple[Removal, ...]
    moves: tuple[Move, ...]
    left_out: tuple[Finding, ...]    # paths of the inputs that are not merged (derived, outside)


# --- paths --------------------------------------------------------------------------------------


def _unsafe(path: object) -> str | None:
    if not isinstance(path, str) or not path:
        return "the path is empty or not text"
    if path.startswith("/") or "\\" in path or "\x00" in path:
        return "the path is absolute or holds a backslash or NUL"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "the path has an empty, '.' or '..' component"
    return None


def partition_of(path: str) -> str | None:
    """The partition folder a vault path lies in (``private`` or ``conversations/<uuid>``), or None."""
    parts = path.split("/")
    if parts[0] == PRIVATE_DIR and len(parts) > 1:
        return PRIVATE_DIR
    if parts[0] == CONVERSATIONS_DIR and len(parts) > 2 and canonical_session_id(parts[1]) == parts[1]:
        return f"{CONVERSATIONS_DIR}/{parts[1]}"
    return None


def is_derived(path: str) -> bool:
    """Whether a vault path is derived or machine-local (never merged, never pushed)."""
    parts = path.split("/")
    return (parts[-1] in _DERIVED_NAMES or parts[-1].endswith(_DERIVED_SUFFIXES)
            or any(part.startswith(".git") for part in parts))


def is_synced(path: str) -> bool:
    """Whether a (safe) vault path is part of what sync merges and carries."""
    if is_derived(path):
        return False
    return path == ONTOLOGY_FILE or partition_of(path) is not None


def _may_be_record(path: str) -> bool:
    partition = partition_of(path)
    if partition is None or not path.endswith(RECORD_SUFFIX):
        return False
    return not path[len(partition) + 1:].startswith(f"{SOURCES_DIR}/")


# --- the merge ----------------------------------------------------------------------------------


def merge_vaults(base: VaultState, ours: VaultState, theirs: VaultState, *,
                 load: Callable[[Hashable], bytes] | None = None,
                 removed: Callable[[Held], Sequence[Removed]] | None = None) -> MergeResult:
    """Merge two machines' vault states from their last common state; see the module's docstring.

    Without ``load`` each state maps a path to the file's bytes.  With it, to a blob id (a git tree's
    object ids, say) that ``load`` turns into bytes: only files that differ between the states are
    read, the merged state names blobs the inputs named (a merge never makes new bytes), and a merge
    of two large vaults that each changed a few files reads those few files.

    ``removed(side)`` answers that side's commits since the base: for each, its id, its parents' ids, and, for
    a commit that is no merge, the files it removed and the files it wrote, as (path, bytes or blob id) pairs;
    ``removed("base")`` the same for the base's own history.  Both sides' commits are asked for in every merge:
    they say which records both sides moved since the base, whose place only the histories decide, and, where a
    record removed on one side meets a revision (or a move) on the other, which version the removal removed.
    The base's history is asked for only where a record's place is read from the histories (both sides moved
    it, or a side that moved it removed it: the parents say which move came after which) and where a side
    holds a record the base lacks, to learn whether the base's history removed it.  Without ``removed``, a
    removal is taken to have removed the base's version where the base had it, a record goes where the paths
    the sides hold put it, and a record the base lacks is new."""
    states = {"base": base, "ours": ours, "theirs": theirs}
    left_out, partitions = _check_paths(states, bytes_only=load is None)
    base, ours, theirs = ({path: data for path, data in state.items() if path in partitions}
                          for state in (base, ours, theirs))
    _check_partitions(partitions, base, {"ours": ours, "theirs": theirs})

    files: dict[str, bytes | Hashable] = {}
    changed: set[str] = set()
    for path in base.keys() | ours.keys() | theirs.keys():
        data = base.get(path)
        if data is not None and ours.get(path) == data and theirs.get(path) == data:
            files[path] = data
        else:
            changed.add(path)

    records, plain = _group(changed, base, ours, theirs, load)
    removed_by = _Removed(removed, load)
    if removed is not None:
        # a record both sides moved since the base may have to move although all three hold it alike (each side's
        # line put it back where the base has it, by merging a greater concurrent move)
        by_path = {version.record_id for versions in plain.values() for version in versions if version is not None}
        for record_id in sorted(removed_by.moved_on_both() - records.keys() - by_path):
            held = _unchanged_record(files, record_id, removed_by.places(record_id), load)
            if held is not None:
                del files[held.path]
                records[record_id] = (held, held, held)
    conflicts: list[MergeConflict] = []
    removals: list[Removal] = []
    wanted_records: dict[str, Version] = {}
    wanted_plain: dict[str, Version] = {}
    for key, versions in sorted(records.items()):
        kept = _three_way(key, *versions, conflicts, removals, removed_by)
        if kept is not None:
            wanted_records[key] = kept
    for key, versions in sorted(plain.items()):
        kept = _three_way(None, *versions, conflicts, removals, None)
        if kept is not None:
            wanted_plain[key] = kept

    moves = _place(files, [*wanted_records.values(), *wanted_plain.values()], load)
    return MergeResult(
        files=dict(sorted(files.items())),
        conflicts=tuple(sorted(conflicts, key=lambda c: (c.record_id or "", c.kept.path))),
        removals=tuple(sorted(removals, key=lambda r: (r.record_id or "", r.base.path))),
        moves=tuple(moves), left_out=tuple(left_out),
    )


def _check_paths(states: dict[str, VaultState], *,
                 bytes_only: bool) -> tuple[list[Finding], dict[str, str | None]]:
    """The paths left out, and the partition of each path that is merged (None: ``ontology.yaml``).

    Each distinct path is judged once, however many states hold it."""
    refused, left_out, synced = [], [], {}
    judged: set[str] = set()
    for name, state in states.items():
        for path, data in state.items():
            if bytes_only and not isinstance(data, bytes):
                refused.append(Finding("unsafe_path", f"{name}: the file's content is not bytes",
                                       path=repr(path)[:200]))
            if path in judged:
                continue
            judged.add(path)
            problem = _unsafe(path)
            if problem is not None:
                refused.append(Finding("unsafe_path", f"{name}: {problem}", path=repr(path)[:200]))
            elif is_synced(path):
                synced[path] = partition_of(path)
            else:
                reason = "derived or machine-local" if is_derived(path) else "outside the partitions"
                left_out.append(Finding("not_synced", f"{reason}; not merged", severity="warning", path=path))
    if refused:
        raise MergeRefused("a vault state holds a path that could leave the vault; nothing was merged", refused)
    return sorted(left_out, key=lambda finding: finding.path or ""), synced


def _check_partitions(partitions: dict[str, str | None], base: VaultState, sides: dict[str, VaultState]) -> None:
    held = {partitions[path] for path in base} - {None}
    findings = []
    for name, state in sides.items():
        present = {partitions[path] for path in state}
        for partition in sorted(held - present):
            findings.append(Finding(
                "partition_missing",
                f"{name} holds nothing of {partition}/, which the last common state held; a missing or "
                "unreadable folder is never read as every record removed", path=f"{partition}/"))
    if findings:
        raise MergeRefused("a side is missing a whole partition folder; nothing was merged", findings)


_Triple = tuple["Version | None", "Version | None", "Version | None"]


def _group(changed: set[str], base: VaultState, ours: VaultState, theirs: VaultState,
           load: Callable[[Hashable], bytes] | None) -> tuple[dict[str, _Triple], dict[str, _Triple]]:
    """The changed files as (base, ours, theirs) versions: records by id, other files by path.

    An id held by two files on one side (a duplicate the owner must resolve) is merged by path."""
    by_id: list[dict[str, list[Version]]] = [{}, {}, {}]
    by_path: list[dict[str, Version]] = [{}, {}, {}]
    for at, state in enumerate((base, ours, theirs)):
        for path in changed:
            if path in state:
                version = Version(path, state[path], load)
                if version.record_id is not None:
                    by_id[at].setdefault(version.record_id, []).append(version)
                else:
                    by_path[at][path] = version
    records: dict[str, _Triple] = {}
    duplicated = {record_id for side in by_id for record_id, found in side.items() if len(found) > 1}
    for record_id in set().union(*by_id):
        if record_id in duplicated:
            for at in range(3):
                for version in by_id[at].get(record_id, ()):
                    by_path[at][version.path] = version
        else:
            base_of, ours_of, theirs_of = (side.get(record_id, [None])[0] for side in by_id)
            records[record_id] = (base_of, ours_of, theirs_of)
    plain: dict[str, _Triple] = {}
    by_natural = [{version.natural: version for version in side.values()} for side in by_path]
    for path in set().union(*by_natural):
        plain[path] = (by_natural[0].get(path), by_natural[1].get(path), by_natural[2].get(path))
    return records, plain


def _unchanged_record(files: Mapping[str, bytes | Hashable], record_id: str, places: set[str],
                      load: Callable[[Hashable], bytes] | None) -> Version | None:
    """The file of ``files`` (those no side changed) holding a record, looked for only where its moves put it:
    at each of ``places`` (the paths its moves wrote it at), or beside one as a merge moves a file aside."""
    for place in sorted(places):
        stem, suffix = _split_name(place)
        aside = re.compile(re.escape(f"{stem}-{record_id}") + r"(?:-[0-9]+)?" + re.escape(suffix))
        for path in sorted(path for path in files if path == place or aside.fullmatch(path)):
            version = Version(path, files[path], load)
            if version.record_id == record_id:
                return version
    return None


class _SideHistory:
    """One side's commits, as ``removed(side)`` tells them: the versions of each record they
    removed, the moves they made (a commit that removed a record and wrote it elsewhere moved it, and removed
    nothing), and each commit's parents, which say which move came after which."""

    def __init__(self, commits: Sequence[Removed], load: Callable[[Hashable], bytes] | None) -> None:
        self.parents: dict[Hashable, Sequence[Hashable]] = {}
        self.removed: dict[str, list[Version]] = {}
        self.moves: dict[str, list[tuple[Hashable, Version]]] = {}
        for commit, parents, gone, written in commits:
            self.parents[commit] = parents
            if not gone:
                continue
            wrote = {version.record_id: version for version in (Version(path, blob, load) for path, blob in written)}
            for path, blob in gone:
                version = Version(path, blob, load)
                if version.record_id is None:
                    continue
                if version.record_id not in wrote:
                    self.removed.setdefault(version.record_id, []).append(version)
                elif wrote[version.record_id].natural != version.natural:
                    self.moves.setdefault(version.record_id, []).append((commit, wrote[version.record_id]))


def _last_place(histories: Sequence[_SideHistory], parents: Mapping[Hashable, Sequence[Hashable]],
                record_id: str) -> Version | None:
    """Where these commits, taken together, last moved a record: of the moves no later move on the same line of
    commits replaced, the greatest path (the rule of where a record goes); None when they never moved it.
    ``parents``: each commit's parents, of every history given."""
    moves = [move for history in histories for move in history.moves.get(record_id, [])]

    def descends(commit: Hashable, ancestor: Hashable) -> bool:
        seen, waiting = set(), list(parents.get(commit, ()))
        while waiting:
            at = waiting.pop()
            if at == ancestor:
                return True
            if at not in seen:
                seen.add(at)
                waiting.extend(parents.get(at, ()))
        return False

    last = [version for commit, version in moves
            if not any(later != commit and descends(later, commit) for later, _ in moves)]
    return max(last, key=lambda version: version.natural, default=None)


class _Removed:
    """What each side's commits since the base, and the base's own history, did to a record: the versions they
    removed, and where they last moved it.  Each side's history is read once, when first asked."""

    def __init__(self, removed: Callable[[Held], Sequence[Removed]] | None,
                 load: Callable[[Hashable], bytes] | None) -> None:
        self._removed, self._load = removed, load
        self._by_side: dict[Held, _SideHistory] = {}
        self._parents: dict[tuple[Held, ...], dict[Hashable, Sequence[Hashable]]] = {}

    def _read(self, side: Held) -> _SideHistory:
        if side not in self._by_side:
            self._by_side[side] = _SideHistory(self._removed(side) if self._removed is not None else (), self._load)
        return self._by_side[side]

    def _last_place_in(self, sides: tuple[Held, ...], record_id: str) -> Version | None:
        """``_last_place`` in these sides' histories taken together, their commits' parents joined once a merge."""
        histories = [self._read(side) for side in sides]
        if sides not in self._parents:
            self._parents[sides] = {commit: listed for history in histories
                                    for commit, listed in history.parents.items()}
        return _last_place(histories, self._parents[sides], record_id)

    def revision(self, side: Held, record_id: str) -> Version | None:
        """The version that side's removals removed: the greatest by ``precedence`` (a version removed first-hand
        is the greatest that machine had seen); None when its commits removed nothing of the record."""
        return max(self._read(side).removed.get(record_id, []), key=precedence, default=None)

    def moved(self, side: Held, record_id: str) -> bool:
        """Whether that side's commits since the base moved the record."""
        return record_id in self._read(side).moves

    def moved_on_both(self) -> set[str]:
        """The records both sides' commits since the base moved."""
        return self._read("ours").moves.keys() & self._read("theirs").moves.keys()

    def places(self, record_id: str) -> set[str]:
        """Every path the merged histories moved a record to, as it wants it (less a ``-<id>`` a merge added)."""
        return {version.natural for side in ("base", "ours", "theirs")
                for _, version in self._read(side).moves.get(record_id, [])}

    def place(self, record_id: str, base: Version, ours: Version | None, theirs: Version | None) -> Version | None:
        """Where a record that stays goes, read from the merged histories (both sides' commits and the base's):
        ``_last_place`` of them all.  None where the paths the sides hold say the same: when no more than one
        side's commits since the base moved it, the three-way rule of the paths (``_merged_place``) gives that
        place, because every commit holds a record where its own history last moved it (docs/sync.md, "Where a
        record goes"), and the base's history need not be read.  ``ours``/``theirs``: None for a side that removed
        the record, whose history is read whenever it moved it; ``base``: the record in the base."""
        moved = {side: self.moved(side, record_id) for side in ("ours", "theirs")}
        if (ours is None and moved["ours"]) or (theirs is None and moved["theirs"]) or all(moved.values()):
            return self._last_place_in(("base", "ours", "theirs"), record_id) or base
        return None

    def base_of_removed(self, record_id: str) -> Version | None:
        """The version of a record the base's history removed, where that history last had it."""
        gone = self.revision("base", record_id)
        if gone is None:
            return None
        place = self._last_place_in(("base",), record_id) or gone
        return Version(place.path, gone.blob, gone.load)

    def was_removed(self, record_id: str, ours: Version | None, theirs: Version | None) -> bool:
        """Whether a record the base lacks was removed in the base's history rather than added since: both sides
        hold it, or the side that lacks it removed or moved it since the base."""
        if ours is not None and theirs is not None:
            return True
        lacking: Held = "theirs" if ours is not None else "ours"
        return self.revision(lacking, record_id) is not None or self.moved(lacking, record_id)


def _three_way(record_id: str | None, base: Version | None, ours: Version | None, theirs: Version | None,
               conflicts: list[MergeConflict], removals: list[Removal], removed: _Removed | None) -> Version | None:
    def same(one: Version | None, other: Version | None) -> bool:
        return one is None and other is None or one is not None and one.same(other)

    if same(ours, theirs) and (ours is None or base is None):
        return ours
    brought_back = (base is None and record_id is not None and removed is not None
                    and removed.was_removed(record_id, ours, theirs))
    if brought_back:
        # ids never collide, so such a record was there before and removed in the base's history, and brought back
        # on a side (a revision standing over the removal): what the base's history removed is the record's base,
        # so the merge is the same as had the two sides met before that removal
        base = removed.base_of_removed(record_id)

    def moved_to() -> Version | None:
        """Where the record goes if it stays, when the paths the sides hold cannot say (``_Removed.place``): both
        sides moved it since the base (a side's line may have put it back where the base has it, by merging a
        greater concurrent move, while its own move still counts against the other side's), or a side that moved
        it removed it.  Asked only for a record that stays."""
        if base is None or removed is None or record_id is None:
            return None
        return removed.place(record_id, base, ours, theirs)

    def placed(version: Version) -> Version:
        place = moved_to()
        return version if place is None else Version(place.path, version.blob, version.load)

    if same(ours, theirs):
        assert ours is not None  # both None: taken above
        return placed(ours)
    if same(ours, base) or same(theirs, base):
        removed_by: Side = "theirs" if same(ours, base) else "ours"
        kept = theirs if same(ours, base) else ours
        if kept is None and base is not None:
            removals.append(Removal(removed_by, record_id, base))
        return None if kept is None else placed(kept)
    if ours is None or theirs is None:  # removed on one side, revised (or moved) on the other
        kept_side: Side = "ours" if ours is not None else "theirs"
        standing = ours if ours is not None else theirs
        assert standing is not None  # both None would be equal, taken above
        remover: Side = "theirs" if kept_side == "ours" else "ours"
        found = removed.revision(remover, record_id) if removed is not None and record_id else None
        gone = found or base  # no removal in the remover's history: it removed the base's version, where it was
        if gone is not None and (gone.blob == standing.blob or precedence(gone) > precedence(standing)):
            # The removal removed this version (wherever a move it never saw put it), or one that stands over it
            # (as they would have been merged had they met before the removal): the removal applies, and a version
            # it never saw is listed against the one it removed, as two concurrent versions are.
            if gone.blob != standing.blob:
                conflicts.append(MergeConflict("revised_on_both", record_id, gone, remover, standing, base))
            removals.append(Removal(remover, record_id, gone))
            return None
        # The record stays, where the merged histories' moves put it: the remover's own moves count (the place it
        # gave the record before removing it), never the place it removed it from.
        standing = placed(standing)
        conflicts.append(MergeConflict("removed_and_revised", record_id, standing, kept_side, None, base))
        return standing
    kept_side = "ours" if precedence(ours) > precedence(theirs) else "theirs"
    kept, other = (ours, theirs) if kept_side == "ours" else (theirs, ours)
    if base is None:
        conflicts.append(MergeConflict("added_on_both", record_id, kept, kept_side, other, base))
        return kept
    merged, conflicting = _place_and_bytes(base, ours, theirs, kept, moved_to())
    if conflicting:
        conflicts.append(MergeConflict("revised_on_both", record_id, merged, kept_side, other, base))
    return merged


def _place_and_bytes(base: Version, ours: Version, theirs: Version, kept: Version,
                     moved_to: Version | None = None) -> tuple[Version, bool]:
    """A file both sides changed, its path and its bytes merged apart, each three-way: what one side alone
    changed is taken; bytes both changed differently are ``kept``'s (the version that stands), a file both
    moved to different places goes to the greater path.  So a record moved on one machine and revised on the
    other is the revision at its new path, with no conflict.  ``moved_to``: where the merged histories last
    moved a record both sides moved since the base (``_Removed.place``), which then decides its path.
    Answers the merged version (bytes and path each some side's: a merge never makes new bytes) and whether
    the sides conflict (both changed the bytes, or both moved it, differently)."""
    if ours.blob == theirs.blob or theirs.blob == base.blob:
        data, bytes_differ = ours, False
    elif ours.blob == base.blob:
        data, bytes_differ = theirs, False
    else:
        data, bytes_differ = kept, True
    place = moved_to or (data if ours.natural == theirs.natural else _merged_place(base, ours, theirs))
    places_differ = len({base.natural, ours.natural, theirs.natural}) == 3
    return Version(place.path, data.blob, data.load), bytes_differ or places_differ


def _merged_place(base: Version, ours: Version, theirs: Version) -> Version:
    """The side whose place a file merged from ``base`` takes: the one that moved it; moved to two places, the
    greater path, whichever version stands, so any order of merges agrees."""
    if theirs.natural == base.natural:
        return ours
    if ours.natural == base.natural:
        return theirs
    return max((ours, theirs), key=lambda version: version.natural)


def _place(files: dict[str, bytes | Hashable], winners: list[Version],
           load: Callable[[Hashable], bytes] | None) -> list[Move]:
    """Put every merged file at the path it wants; where several want one path, the record with the smallest
    id (the oldest) takes it, then records before other files, then the smaller sha256, and the rest go
    beside it as ``<stem>-<tag><suffix>``.  The outcome depends only on the merged files, not on where
    earlier merges put them: a file moved aside returns once its path is free.  ``files`` holds the files
    unchanged on every side; only those a placement concerns are read."""
    wanting: dict[str, list[Version]] = {}
    for version in winners:
        wanting.setdefault(version.natural, []).append(version)
    for path in [path for path in files if _DISPLACED_NAME.search(path)]:
        version = Version(path, files[path], load)
        if version.natural != path:
            del files[path]
            wanting.setdefault(version.natural, []).append(version)
    for path, group in wanting.items():
        # a file no side changed gives its path up to an older record that wants it, even one put there by a move it
        # never saw (the place a remover's history gave a record a revision keeps)
        if path in files:
            group.append(Version(path, files.pop(path), load))
    moves = []
    for path, group in sorted(wanting.items()):
        group.sort(key=lambda v: (v.record_id is None, v.record_id or "", v.sha256))
        for at, version in enumerate(group):
            stem, suffix = _split_name(path)
            placed, counter = (path if at == 0 else f"{stem}-{version.tag}{suffix}"), 1
            while placed in files or (placed != path and placed in wanting):
                counter += 1
                placed = f"{stem}-{version.tag}-{counter}{suffix}"
            files[placed] = version.blob
            if placed != version.path:
                moves.append(Move(version.record_id, path, version.path, placed))
    return moves


# A name a merge may have given a file it moved aside: ``-<record id>`` (ids as the engine makes them,
# ``<prefix>_<ulid>``, and any of that shape) or ``-<12 hex digits>``.  Only such unchanged files are read.
_DISPLACED_NAME = re.compile(r"-(?:[a-z]+_[0-9A-Za-z]+|[0-9a-f]{12})(?:\.[^./]*)?$")


def _split_name(path: str) -> tuple[str, str]:
    """A path as (everything before its file name's last dot, the dot and what follows)."""
    dot = path.rfind(".")
    return (path[:dot], path[dot:]) if dot > path.rfind("/") + 1 else (path, "")
