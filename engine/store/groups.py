"""Which queued writes may be published as one group (group commit).

Writes queued on a store's lane while it was busy are planned one after another against the catalog as
the last group left it, then published together (``Publisher.publish_together``).  That gives the same
result as publishing them one by one only while no plan depends on what an earlier plan of the group
writes.  So each plan is planned through ``PlanReads``, which notes every file, record and name the
plan looked up, and a plan joins the group only when nothing it read or writes is written by an earlier
member (``Group.admits``); the first one that does not waits for the next group, planned again after
this one is published.  So does one refused while planned after looking at what a member writes
(``Group.depends``): the page it did not find may be the one planned just before it.

Keys are ``(what, partition, value)``: a path, a record id, a name as lookups compare it
(``name_key``), or a request id, so that a retry queued beside its original waits to get its receipt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .catalog import Catalog, SyncReport
from .catalog_reads import SourceRow, name_key
from .publication import Plan

Key = tuple[str, str, str]


class PlanReads:
    """The catalog as a plan sees it, noting what the plan looked at.

    Only the lookups planning makes are offered: one this class does not know raises AttributeError,
    rather than reading something a group could not account for.
    """

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self.keys: set[Key] = set()
        # What this plan read, by question: the catalog does not change while a plan is planned (save through
        # ``sync``, which forgets it), and a link's write asks about the same pages and source once a link.
        self._answers: dict[tuple[Any, ...], Any] = {}

    def _asked(self, question: tuple[Any, ...], read: Callable[[], Any]) -> Any:
        try:
            hash(question)
        except TypeError:  # a filter given as a list: asked as it is
            return read()
        if question not in self._answers:
            self._answers[question] = read()
        return self._answers[question]

    def lookup(self, partition: str, name: str, *, kind: str | None = None) -> list[str]:
        found = list(self._asked(("lookup", partition, name, kind),
                                 lambda: self._catalog.lookup(partition, name, kind=kind)))
        self.keys |= {("name", partition, name_key(name)), ("id", partition, name)}
        self.keys |= {("id", partition, record_id) for record_id in found}
        return found

    def rows_for_id(self, partition: str, record_id: str) -> list[Any]:
        rows = self._catalog.rows_for_id(partition, record_id)
        self.keys.add(("id", partition, record_id))
        self.keys |= {("path", partition, row.path) for row in rows}
        return rows

    def current(self, partition: str, *, record_ids: list[str] | None = None, paths: list[str] | None = None,
                **narrower: Any) -> list[Any]:
        if record_ids is None and paths is None:
            raise AttributeError("a plan listed every current record of a partition, which no group can "
                                 "account for")
        question = ("current", partition, None if record_ids is None else tuple(record_ids),
                    None if paths is None else tuple(paths), tuple(sorted(narrower.items())))
        rows = list(self._asked(question, lambda: self._catalog.current(partition, record_ids=record_ids,
                                                                        paths=paths, **narrower)))
        self.keys |= {("id", partition, record_id) for record_id in record_ids or ()}
        self.keys |= {("path", partition, path) for path in paths or ()}
        self.keys |= {("id", partition, row.record_id) for row in rows} | {("path", partition, row.path) for row in rows}
        return rows

    def source(self, partition: str, source_id: str) -> SourceRow | None:
        row = self._asked(("source", partition, source_id), lambda: self._catalog.source(partition, source_id))
        self.keys.add(("id", partition, source_id))
        if row is not None:
            self.keys |= {("path", partition, path) for path in (row.path, row.retained_path) if path}
        return row

    def first_kept_sha256(self, partition: str, record_id: str, revision: int) -> str | None:
        self.keys.add(("id", partition, record_id))
        return self._asked(("first_kept_sha256", partition, record_id, revision),
                           lambda: self._catalog.first_kept_sha256(partition, record_id, revision))

    def path_in_use(self, partition: str, path: str) -> bool:
        self.keys.add(("path", partition, path))
        return self._catalog.path_in_use(partition, path)

    def sync(self, partition: str, paths: list[str] | None = None, *, force: bool = False) -> SyncReport:
        """A file that changed under the catalog is catalogued before it is planned on (``current_record``)."""
        self.keys |= {("path", partition, path) for path in paths or ()}
        self._answers.clear()
        return self._catalog.sync(partition, paths, force=force)


def written_keys(plan: Plan) -> set[Key]:
    """Everything ``plan`` writes: its files, their record ids and names, and its request id."""
    partition = plan.partition
    keys: set[Key] = {("path", partition, write.path) for write in plan.writes}
    keys |= {("id", partition, write.record_id) for write in plan.writes if write.record_id}
    keys |= {("name", partition, name) for name in plan.names}
    if plan.request_id is not None:
        keys.add(("request", partition, plan.request_id))
    return keys


@dataclass
class Group:
    """The plans admitted so far and what they write."""

    plans: list[Plan] = field(default_factory=list)
    written: set[Key] = field(default_factory=set)

    def depends(self, reads: PlanReads) -> bool:
        """Whether a plan read something a member writes (refused so, it may not be refused after them)."""
        return bool(self.written & reads.keys)

    def without(self, members: list[int]) -> "Group":
        """The group less the plans at ``members`` (refused once planned); what they write stays noted, as
        nothing more is admitted once a group is planned."""
        return Group([plan for index, plan in enumerate(self.plans) if index not in members], self.written)

    def admits(self, plan: Plan, reads: PlanReads) -> bool:
        """Add ``plan`` unless it reads or writes something an earlier member writes."""
        writes = written_keys(plan)
        if self.written & (writes | reads.keys):
            return False
        self.plans.append(plan)
        self.written |= writes
        return True
