"""The store lane's write groups: writes queue, are planned together and published as one group.

``WriteGroups`` is the part of ``StoreRuntime`` (engine/runtime.py) that takes pages, claims and attachments
queued while the lane is busy (``write``), plans them in turn while they stay independent (store/groups.py),
publishes them together (``Publisher.publish_chained``), and, when writes are queued again by the time a
group is acknowledged, plans and journals those inside that group's acknowledging transaction and publishes
them next on the same turn of the lane (``_follow``).  The lane's queue holds one group at a time
(``_schedule_group``); other lane work (``_submit_other``) goes before the next group of a chain.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, TypeVar

from .core.errors import StoreUnavailable
from .store.answers import Receipt
from .store.groups import Group, PlanReads
from .store.publication import Journalled, Plan

T = TypeVar("T")

GROUP_MAX = 64  # queued writes planned and published together at most


@dataclass(eq=False)
class _QueuedWrite:
    """A write waiting for the lane: ``plan`` builds its Plan (or returns the receipt of an identical retry)."""

    partition: str
    plan: Callable[[PlanReads], Plan | dict[str, Any]]
    fence: Callable[[], None] | None
    # Writes with equal keys have fences that answer alike (one caller, one partition): a group checks each
    # key once before planning its first write and once more after planning them all (``_plan_group``).
    fence_key: Hashable | None = None
    future: Future[dict[str, Any]] = field(default_factory=Future)


@dataclass(eq=False)
class _Batch:
    """Writes taken from the queue together: once planned, the plans of one group and the writes they are for."""

    taken: list[_QueuedWrite]
    outcomes: list[tuple[_QueuedWrite, Any]] = field(default_factory=list)  # refused, retries, then published
    planned: list[_QueuedWrite] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)
    ready: bool = False  # planned


class WriteGroups:
    """The write queue of ``StoreRuntime``, which provides the lane, the store, its publisher and ``prepare``."""

    _lane: ThreadPoolExecutor

    def __init__(self) -> None:
        self._queued: deque[_QueuedWrite] = deque()
        self._queued_lock = threading.Lock()
        self._others = 0  # lane work other than write groups submitted and not yet begun (``_submit_other``)
        self._group_scheduled = False  # a group is on the lane's queue and has not yet taken the writes queued

    def _submit_other(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Submit lane work other than a write group, counted until it begins: groups published one after the
        other on one turn of the lane (``_follow``) give way to it."""
        with self._queued_lock:
            self._others += 1

        def begun() -> T:
            with self._queued_lock:
                self._others -= 1
            return fn(*args)

        return self._lane.submit(begun)

    def write(self, partition: str, plan: Callable[[PlanReads], Plan | Receipt], *,
              fence: Callable[[], None] | None = None, fence_key: Hashable | None = None) -> Receipt:
        """Plan a publication on the lane and publish it; returns its receipt.

        Writes queued while the lane is busy go together (``_publish_group``): each planned in turn,
        then all journalled in one transaction, installed, checkpointed once and acknowledged in one
        transaction.  ``plan`` reads the catalog through the ``PlanReads`` it is given, and ``fence``
        re-checks the caller's authority right before it, as ``run`` does; writes of a group sharing a
        ``fence_key`` are re-checked together, before the first is planned and after the last.
        """
        if self._closing.is_set():
            raise StoreUnavailable("the store is shutting down", store=self.store_id)
        queued = _QueuedWrite(partition, plan, fence, fence_key)
        with self._queued_lock:
            self._queued.append(queued)
        self._schedule_group()
        receipt = queued.future.result()
        if self.git is not None:
            self._git_wake.set()
        return receipt

    def _publish_group(self) -> None:
        """On the lane: plan the queued writes in order while they stay independent (``Group``), publish
        them together, and leave the first that is not for the next group.

        Writes queued by the time a group is acknowledged are planned and journalled inside its acknowledging
        transaction (``_follow``), and published next on this same turn of the lane: one COMMIT for one
        group's acknowledgement and the next one's journal.  Each group's writes are answered once its
        acknowledgement is committed."""
        batch = self._taken(scheduled=True)
        journalled: Journalled | None = None
        while batch is not None:
            following: list[_Batch] = []
            this, journalled = journalled, None
            try:
                self._plan_batch(batch)
                if batch.plans:
                    results, journalled = self._publish_planned(
                        this if this is not None else batch.plans, lambda: self._follow(following))
                    batch.outcomes += zip(batch.planned, results)
                    failure = next((outcome for outcome in results if isinstance(outcome, Exception)), None)
                    if following and failure is not None:  # only the acknowledging transaction fails then
                        self._lost_with(following[0], failure)
                # The next group journalled meanwhile is this lane's own, published next.
                self._verify_after(batch.outcomes, allow_pending=journalled is not None)
            except BaseException:
                for taken in following:
                    self._answer(taken)
                raise
            finally:
                self._answer(batch)
            batch = following[0] if following else None

    def _schedule_group(self) -> None:
        """Put a group on the lane's queue unless one is there that has not yet taken the queued writes: so the
        lane's queue holds one group at a time, not one a write, and other work waits behind that one."""
        with self._queued_lock:
            if self._group_scheduled:
                return
            self._group_scheduled = True
        try:
            self._lane.submit(self._publish_group)
        except RuntimeError:  # the lane shut down
            with self._queued_lock:
                self._group_scheduled = False
            raise

    def _taken(self, *, scheduled: bool = False) -> _Batch | None:
        """The writes queued now, up to a group's most (None: an earlier group took them); ``scheduled``: taken by
        the group ``_schedule_group`` put on the lane's queue, so a write queued from now on schedules another."""
        with self._queued_lock:
            if scheduled:
                self._group_scheduled = False
            taken = [self._queued.popleft() for _ in range(min(GROUP_MAX, len(self._queued)))]
        return _Batch(taken) if taken else None

    def _plan_batch(self, batch: _Batch) -> None:
        """Plan ``batch`` once (``_plan_group``), the writes that must wait for the next group queued again."""
        if batch.ready:
            return
        batch.ready = True
        group, batch.planned, later = self._plan_group(batch.taken, batch.outcomes)
        batch.plans = group.plans
        if later:  # the queue's again, no longer this batch's to answer
            batch.taken = [queued for queued in batch.taken if queued not in later]
            self._queue_again(later)

    def _follow(self, following: list[_Batch]) -> list[Plan]:
        """Inside a group's acknowledging transaction: the writes queued meanwhile, planned against the catalog
        as that group leaves it, for ``Publisher.publish_chained`` to journal in the same transaction.  None
        while other lane work waits (it goes before the next group), the store closes, or a publication is
        left for recovery (``prepare`` would recover it, which belongs outside any transaction)."""
        if not self._queued or self._others or self._closing.is_set() or self.store.pending_publications():
            return []  # the queue first: a lone writer's group asks nothing more
        batch = self._taken()
        if batch is None:
            return []
        following.append(batch)
        self._plan_batch(batch)
        return batch.plans

    def _lost_with(self, batch: _Batch, failure: Exception) -> None:
        """The acknowledging transaction ``batch`` was planned and journalled in failed: its journal is gone, and
        what its planning answered (a retry's receipt, a stale revision) was read in that transaction, so each
        of its writes gets ``failure``; the catalog sync its planning made is gone too, so the next plan of its
        partitions walks them again."""
        batch.outcomes = [(queued, failure) for queued, _ in batch.outcomes]
        for queued in batch.taken:
            self._synced.pop(queued.partition, None)

    def _answer(self, batch: _Batch) -> None:
        """Give each write of ``batch`` its outcome; one left without (the lane itself failed) is refused."""
        for queued, outcome in batch.outcomes:
            if queued.future.done():
                continue
            if isinstance(outcome, Exception):
                queued.future.set_exception(outcome)
            else:
                queued.future.set_result(outcome)
        with self._queued_lock:
            waiting = {id(queued) for queued in self._queued}
        for queued in batch.taken:  # only when the lane itself failed
            if not queued.future.done() and id(queued) not in waiting:
                queued.future.set_exception(StoreUnavailable(
                    "the store stopped before the write was published; nothing was acknowledged",
                    store=self.store_id))

    def _queue_again(self, later: list[_QueuedWrite]) -> None:
        """Put ``later`` back at the head of the queue for the next group (refused once the lane is shut)."""
        with self._queued_lock:
            self._queued.extendleft(reversed(later))
        try:
            self._schedule_group()
        except RuntimeError:  # the lane shut down: no group will take them
            with self._queued_lock:
                for _ in later:
                    self._queued.popleft()
            for queued in later:
                queued.future.set_exception(StoreUnavailable("the store is shutting down", store=self.store_id))

    def _plan_group(self, taken: list[_QueuedWrite], outcomes: list[tuple[_QueuedWrite, Any]]
                    ) -> tuple[Group, list[_QueuedWrite], list[_QueuedWrite]]:
        """Plan ``taken`` in order: (the group, the writes it holds, the writes left for the next group).
        A write refused while planned, or an identical retry, gets its outcome in ``outcomes``.

        Authority is re-checked before a write is planned, once per ``fence_key`` of the group, and once more
        per key once all are planned (``_fence_again``): a revocation committed before the group is published
        refuses every write of that caller in it."""
        group, planned, prepared, fenced = Group(), [], set(), {}
        for index, queued in enumerate(taken):
            reads = PlanReads(self.catalog)
            try:
                if queued.partition not in prepared:
                    self._storage_boundary(lambda: self.prepare(queued.partition))
                    prepared.add(queued.partition)
                if queued.fence is not None and (queued.fence_key is None or queued.fence_key not in fenced):
                    queued.fence()
                    if queued.fence_key is not None:
                        fenced[queued.fence_key] = queued
                plan = self._storage_boundary(lambda: queued.plan(reads))
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

    @staticmethod
    def _fence_again(group: Group, planned: list[_QueuedWrite], outcomes: list[tuple[_QueuedWrite, Any]],
                     fenced: dict[Hashable, _QueuedWrite]) -> tuple[Group, list[_QueuedWrite]]:
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

    def _verify_after(self, outcomes: list[tuple[_QueuedWrite, dict[str, Any] | Exception]], *,
                      allow_pending: bool = False) -> None:
        """The identity check ``run`` makes after an operation, once per partition of the group (``allow_pending``:
        the next group is journalled already, ``_publish_group``)."""
        failures: dict[str, Exception | None] = {}
        for index, (queued, outcome) in enumerate(outcomes):
            if isinstance(outcome, Exception):
                continue
            if queued.partition not in failures:
                try:
                    self._storage_boundary(lambda: self.store.verify(queued.partition, allow_pending=allow_pending))
                    failures[queued.partition] = None
                except Exception as exc:
                    failures[queued.partition] = exc
            if failures[queued.partition] is not None:
                outcomes[index] = (queued, failures[queued.partition])
