"""A store's writes on its lane: queued, planned in groups, published together, the next group planned early.

Writes queued while the lane is busy go together (``WriteLane.publish_group``): each planned in turn against
the catalog as the last group left it, then all journalled in one transaction, installed, checkpointed once
and acknowledged in one transaction (``engine/store/groups.py`` says which may share a group).

While a group's new files are written and synced on the sync threads, the lane, which would only wait for
them, plans the next group (``plan_ahead``).  Those plans are made exactly as a later member of the group
being published would be: against the catalog without that group's effects, and admitted only when they
read and write nothing it writes (``Group.before``); the first that does waits, to be planned once the group
is acknowledged.  Nothing else is done early: the next group is journalled only after the last one is
acknowledged, so the journal's order, and what a kill at any point leaves, are as before.  The early plans
are kept only while nothing could have changed what they read: the catalog was not brought up to date for
them (``prepare`` would recover the group being published), so a partition is planned on early only while
the watcher has reported nothing there but the engine's own installs (``StoreRuntime.quiet``), and the plans
are dropped (their writes planned again) when something was reported by the time the next group starts,
when another operation takes the lane in between, or when the group before failed.  Authority is checked
again for every early-planned write right before its group is published.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable

from .core.errors import StoreUnavailable
from .store.groups import Group, PlanReads, written_keys
from .store.publication import Plan

if TYPE_CHECKING:
    from .runtime import StoreRuntime

log = logging.getLogger(__name__)
GROUP_MAX = 64  # queued writes planned and published together at most


@dataclass(eq=False)
class QueuedWrite:
    """A write waiting for the lane: ``plan`` builds its Plan (or returns the receipt of an identical retry)."""

    partition: str
    plan: Callable[[PlanReads], Plan | dict[str, Any]]
    fence: Callable[[], None] | None
    # Writes with equal keys have fences that answer alike (one caller, one partition): a group checks each
    # key once before planning its first write and once more after planning them all (``plan_group``).
    fence_key: Hashable | None = None
    future: Future[dict[str, Any]] = field(default_factory=Future)


@dataclass
class _Ahead:
    """The next group, planned while the last one's files were synced, not yet published."""

    taken: list[QueuedWrite]  # every write taken from the queue for it, in order
    group: Group
    planned: list[QueuedWrite]
    outcomes: list[tuple[QueuedWrite, Any]]  # refused while planned, or an identical retry's receipt
    partitions: set[str]


class WriteLane:
    """The queue of a store's writes and the group loop that runs on its lane."""

    def __init__(self, runtime: StoreRuntime) -> None:
        self.runtime = runtime
        self.queued: deque[QueuedWrite] = deque()
        self.lock = threading.Lock()
        self._ahead: _Ahead | None = None  # touched on the lane only

    def submit(self, queued: QueuedWrite) -> None:
        with self.lock:
            self.queued.append(queued)
        self.runtime.on_lane(self.publish_group)

    def publish_group(self) -> None:
        """On the lane: plan the queued writes in order while they stay independent (``Group``), publish
        them together, and leave the first that is not for the next group."""
        ahead = self._resume_ahead()
        with self.lock:
            room = GROUP_MAX - (len(ahead.taken) if ahead else 0)
            taken = [self.queued.popleft() for _ in range(min(room, len(self.queued)))]
        if not taken and ahead is None:
            return  # an earlier group took them
        everyone = (ahead.taken if ahead else []) + taken
        outcomes: list[tuple[QueuedWrite, dict[str, Any] | Exception]] = list(ahead.outcomes) if ahead else []
        published = False
        try:
            group, planned, later = self.plan_group(taken, outcomes, ahead)
            if later:
                self._queue_again(later)
            if group.plans:
                self.runtime.publisher.while_syncing = lambda synced: self.plan_ahead(group.plans, synced)
                try:
                    outcomes += zip(planned, self.runtime._publish_planned(group.plans))
                finally:
                    self.runtime.publisher.while_syncing = None
            self._verify_after(outcomes)
            published = True
        finally:
            if not published:
                self.drop_ahead()  # planned beside a group that failed: planned again after recovery
            for queued, outcome in outcomes:
                if isinstance(outcome, Exception):
                    queued.future.set_exception(outcome)
                else:
                    queued.future.set_result(outcome)
            with self.lock:
                waiting = {id(queued) for queued in self.queued}
            waiting |= {id(queued) for queued in (self._ahead.taken if self._ahead else ())}
            for queued in everyone:  # only when the lane itself failed
                if not queued.future.done() and id(queued) not in waiting:
                    queued.future.set_exception(StoreUnavailable(
                        "the store stopped before the write was published; nothing was acknowledged",
                        store=self.runtime.store_id))
            if self._ahead is not None:
                self._next_group(self._ahead.taken)

    def _queue_again(self, later: list[QueuedWrite]) -> None:
        """Put ``later`` back at the head of the queue for the next group (refused once the lane is shut)."""
        with self.lock:
            self.queued.extendleft(reversed(later))
        self._next_group(later)

    def _next_group(self, waiting: list[QueuedWrite]) -> None:
        """Have the lane take the next group; ``waiting`` are refused if it is shut."""
        try:
            self.runtime.on_lane(self.publish_group)
        except RuntimeError:  # the lane shut down: no group will take them
            with self.lock:
                for queued in waiting:
                    if queued in self.queued:
                        self.queued.remove(queued)
            self._ahead = None
            for queued in waiting:
                if not queued.future.done():
                    queued.future.set_exception(StoreUnavailable("the store is shutting down",
                                                                 store=self.runtime.store_id))

    # --- planning ---------------------------------------------------------------------------

    def plan_group(self, taken: list[QueuedWrite], outcomes: list[tuple[QueuedWrite, Any]],
                   ahead: _Ahead | None = None) -> tuple[Group, list[QueuedWrite], list[QueuedWrite]]:
        """Plan ``taken`` in order, after the writes planned ``ahead``: (the group, the writes it holds, the
        writes left for the next group).  A write refused while planned, or an identical retry, gets its
        outcome in ``outcomes``.

        Authority is re-checked before a write is planned, once per ``fence_key`` of the group, and once more
        per key once all are planned (``_fence_again``): a revocation committed before the group is published
        refuses every write of that caller in it."""
        group = ahead.group if ahead else Group()
        planned = list(ahead.planned) if ahead else []
        prepared = set(ahead.partitions) if ahead else set()
        fenced: dict[Hashable, QueuedWrite] = {}  # the writes planned ahead are all checked again after
        runtime = self.runtime
        for index, queued in enumerate(taken):
            reads = PlanReads(runtime.catalog)
            try:
                if queued.partition not in prepared:
                    runtime._storage_boundary(lambda: runtime.prepare(queued.partition))
                    prepared.add(queued.partition)
                plan = self._fenced_plan(queued, reads, fenced)
            except Exception as exc:
                if group.depends(reads):
                    return self._fence_again(group, planned, outcomes, fenced) + (taken[index:],)
                outcomes.append((queued, exc))
                continue
            if not isinstance(plan, Plan):
                outcomes.append((queued, plan))
            elif group.admits(plan, reads):
                planned.append(queued)
            else:
                return self._fence_again(group, planned, outcomes, fenced) + (taken[index:],)
        return self._fence_again(group, planned, outcomes, fenced) + ([],)

    def _fenced_plan(self, queued: QueuedWrite, reads: PlanReads,
                     fenced: dict[Hashable, QueuedWrite]) -> Plan | dict[str, Any]:
        """``queued``'s plan, its authority checked first unless its ``fence_key`` was checked in this group."""
        if queued.fence is not None and (queued.fence_key is None or queued.fence_key not in fenced):
            queued.fence()
            if queued.fence_key is not None:
                fenced[queued.fence_key] = queued
        return self.runtime._storage_boundary(lambda: queued.plan(reads))

    @staticmethod
    def _fence_again(group: Group, planned: list[QueuedWrite], outcomes: list[tuple[QueuedWrite, Any]],
                     fenced: dict[Hashable, QueuedWrite]) -> tuple[Group, list[QueuedWrite]]:
        """Re-check each ``fence_key`` of the planned writes once, but a key whose one write was checked right
        before it was planned (``fenced``); a key's writes refused now leave the group, the others stand."""
        checked = {key for key, queued in fenced.items()
                   if [other for other in planned if other.fence_key == key] == [queued]}
        refused: dict[Hashable, Exception] = {}
        for queued in planned:
            if queued.fence is None or queued.fence_key is None or queued.fence_key in checked:
                continue
            checked.add(queued.fence_key)
            try:
                queued.fence()
            except Exception as exc:
                refused[queued.fence_key] = exc
        gone = [index for index, queued in enumerate(planned) if queued.fence_key in refused]
        outcomes += [(planned[index], refused[planned[index].fence_key]) for index in gone]
        return group.without(gone), [queued for index, queued in enumerate(planned) if index not in gone]

    # --- the next group planned while the last one's files sync ------------------------------

    def plan_ahead(self, publishing: list[Plan], synced: Callable[[], bool] = lambda: False) -> None:
        """On the lane, while the files of ``publishing`` sync: plan the queued writes that depend on nothing
        it writes, on partitions where nothing but the engine's own installs was reported (``_Ahead``), until
        ``synced`` says the files are (the rest are planned with the group, not to delay it)."""
        if self._ahead is not None or any(write.role == "ontology" for plan in publishing for write in plan.writes):
            return  # an ontology changes how every later write is validated
        with self.lock:
            taken = [self.queued.popleft() for _ in range(min(GROUP_MAX, len(self.queued)))]
        if not taken:
            return
        before: set[Any] = set()
        for plan in publishing:
            before |= written_keys(plan)
        ahead = _Ahead([], Group(before=before), [], [], set())
        try:
            left = self._plan_early(taken, ahead, synced)
        except Exception:  # never the group being published's failure: its writes are planned again later
            log.exception("planning the next group early failed")
            self._queue_again(taken)
            return
        except BaseException:
            self._queue_again(taken)
            raise
        if left:
            self._queue_again(left)
        if ahead.taken:
            self._ahead = ahead

    def _plan_early(self, taken: list[QueuedWrite], ahead: _Ahead, synced: Callable[[], bool]) -> list[QueuedWrite]:
        """Plan ``taken`` into ``ahead`` until one may not be planned early or the files are ``synced``;
        returns the writes left."""
        fenced: dict[Hashable, QueuedWrite] = {}
        for index, queued in enumerate(taken):
            if synced():
                return taken[index:]
            if queued.partition not in ahead.partitions:
                if not self.runtime.quiet(queued.partition):
                    return taken[index:]
                ahead.partitions.add(queued.partition)
            reads = PlanReads(self.runtime.catalog)
            try:
                plan = self._fenced_plan(queued, reads, fenced)
            except Exception as exc:
                if ahead.group.depends(reads):
                    return taken[index:]
                ahead.taken.append(queued)
                ahead.outcomes.append((queued, exc))
                continue
            if isinstance(plan, Plan) and not ahead.group.admits(plan, reads):
                return taken[index:]
            ahead.taken.append(queued)
            if isinstance(plan, Plan):
                ahead.planned.append(queued)
            else:
                ahead.outcomes.append((queued, plan))
        return []

    def _resume_ahead(self) -> _Ahead | None:
        """The group planned early, ready to be planned on: its partitions brought up to date as before any
        group; dropped if anything but the engine's own installs was reported there meanwhile, or a
        publication is left journalled (the group before failed)."""
        ahead = self._ahead
        if ahead is None:
            return None
        runtime = self.runtime
        if runtime.store.pending_publications() or not all(runtime.quiet(p) for p in ahead.partitions):
            self.drop_ahead()
            return None
        try:
            for partition in sorted(ahead.partitions):
                runtime._storage_boundary(lambda: runtime.prepare(partition))
        except Exception:
            self.drop_ahead()  # the writes meet the same refusal when planned again
            return None
        self._ahead = None
        ahead.group.before = set()  # the group they were planned beside is acknowledged
        return ahead

    def drop_ahead(self) -> None:
        """Forget the group planned early: its writes go back to the head of the queue, to be planned again."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            self._queue_again(ahead.taken)

    def _verify_after(self, outcomes: list[tuple[QueuedWrite, dict[str, Any] | Exception]]) -> None:
        """The identity check ``run`` makes after an operation, once per partition of the group."""
        failures: dict[str, Exception | None] = {}
        runtime = self.runtime
        for index, (queued, outcome) in enumerate(outcomes):
            if isinstance(outcome, Exception):
                continue
            if queued.partition not in failures:
                try:
                    runtime._storage_boundary(lambda: runtime.store.verify(queued.partition))
                    failures[queued.partition] = None
                except Exception as exc:
                    failures[queued.partition] = exc
            if failures[queued.partition] is not None:
                outcomes[index] = (queued, failures[queued.partition])
