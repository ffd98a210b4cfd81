"""How many other records link to each record: the owner's hybrid search's link prior.

A vault's links are relationship records (``from`` one note ``to`` another: the Markdown importer makes one
per wiki link).  A note many others link to is the vault's note on its subject; an overview that mentions a
subject in passing is linked to less than the note that explains it.  Web search has long used a document's
in-links as a prior beside the query's scores; the owner's hybrid search adds a small one
(engine/search/hybrid.py, ``LINK_PRIOR_WEIGHT``).

The counts are a view of the whole partition kept current by the catalog (``CatalogReads.maintained``):
built once from the current relationships, then updated from the records that changed since.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from ..store.catalog_reads import CatalogReads, RecordRow

VIEW_NAME = "in_links"
IDS_PER_READ = 500  # changed records' rows are read this many at a time (SQLite's limit on bound values)


@dataclass
class InLinks:
    """Each linked record's count of distinct other records linking to it, by record id."""

    edges: dict[str, tuple[str, str]] = field(default_factory=dict)  # relationship id -> (from, to)
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)  # (from, to) -> relationships joining them
    counts: Counter[str] = field(default_factory=Counter)  # to -> distinct records linking to it

    @classmethod
    def build(cls, rows: list[RecordRow]) -> InLinks:
        links = cls()
        for row in rows:
            links._add(row)
        return links

    def update(self, changed: list[str], rows: list[RecordRow]) -> InLinks:
        """The view after the records ``changed`` (their ids) changed or went; ``rows``: those of them that are
        current relationships now."""
        for record_id in changed:
            edge = self.edges.pop(record_id, None)
            if edge is not None:
                self.pairs[edge] -= 1
                if not self.pairs[edge]:
                    del self.pairs[edge]
                    self.counts[edge[1]] -= 1
                    if not self.counts[edge[1]]:
                        del self.counts[edge[1]]
        for row in rows:
            self._add(row)
        return self

    def _add(self, row: RecordRow) -> None:
        source, target = row.view.from_id, row.view.to_id
        if row.record_id is None or not source or not target or source == target:
            return  # a link to itself says nothing about what others think of the note
        self.edges[row.record_id] = (source, target)
        self.pairs[(source, target)] += 1
        if self.pairs[(source, target)] == 1:
            self.counts[target] += 1


def in_links(catalog: CatalogReads, partition: str) -> InLinks:
    """The partition's in-link counts, brought up to date with the catalog (on the store's lane)."""

    def build() -> InLinks:
        return InLinks.build(catalog.current(partition, kind="relationship"))

    def update(view: InLinks, changed: list[str]) -> InLinks:
        if len(changed) > max(len(view.edges), IDS_PER_READ):  # reading every relationship is then cheaper
            return build()
        rows = [row for start in range(0, len(changed), IDS_PER_READ) for row in catalog.current(
            partition, kind="relationship", record_ids=changed[start:start + IDS_PER_READ])]
        return view.update(changed, rows)

    return catalog.maintained(partition, VIEW_NAME, build, update)


def link_prior(links: InLinks, record_ids: dict[str, str | None]) -> dict[str, float]:
    """For each candidate (``record_ids``: its record id by path), the log of one more than its in-link count
    over that of the most linked candidate: 0..1, by path; empty when no candidate is linked to."""
    # The log: the tenth link says less than the first; over the most linked candidate's: a prior within this
    # answer, whatever the size of the vault.
    counts = {path: links.counts.get(record_id, 0) if record_id else 0 for path, record_id in record_ids.items()}
    most = max(counts.values(), default=0)
    if not most:
        return {}
    return {path: math.log1p(count) / math.log1p(most) for path, count in counts.items() if count}
