"""What the Knowledge Index lists as of a moment: the partition's pages and claims, grouped and ranked.

Two ways reach the same ranking.  ``select_all`` reads every catalog row
(and the revision archive for records revised after ``as_of``) and ranks
from scratch: it is the definition.  ``KeptSelection`` holds the partition's
records as the catalog has them now, with the rankings kept sorted, and is
brought up to date from the records the catalog logs as changed
(``CatalogReads.maintained``); it answers for an ``as_of`` by setting aside
only the records recorded or revised after it, so a build after one
publication reads one row and re-ranks the few pages that record names.
docs/knowledge-index.md records the rules (the window, the groups, the
connection measure) and how the kept selection follows the catalog.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import sys
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any, Callable, Iterable, Iterator, Sequence

from ..core.findings import has_errors
from ..core.ids import parse_timestamp
from ..store.catalog import Catalog
from ..store.catalog_reads import LabelRow
from ..store.store import Store
from ..vault.record_view import RecordView, Validity, view_of
from ..vault.records import check_record, check_scope, parse_record

RECENT_DAYS = 14
UNLISTED_PAGE_TYPES = ("source", "artifact")
PRIORITY_CLAIM_KINDS = ("decision", "commitment", "preference")
BUSY_CLAIM_KINDS = ("decision", "commitment")
BUSIEST_PAGES = 3
# More changed records than this rebuild the kept selection from one scan (cheaper than as many updates).
KEPT_UPDATE_MAX = 2_000
ARCHIVED_KEPT_MAX = 10_000  # records whose as-of revisions are remembered between builds


@dataclass(slots=True)
class Entry:
    """One record as it stood at a moment: its labels and the links the ranking counts."""

    id: str
    kind: str | None
    type: str | None
    title: str | None
    recorded: float                 # recorded_at, in POSIX seconds
    subject: str | None = None      # a claim's subject
    ends: tuple[str, ...] = ()      # a relationship's ends (from, to), each once
    aliases: tuple[str, ...] = ()   # a page's aliases that are text, in order


def entry_of(record_id: str, kind: str | None, record_type: str | None, title: str | None,
             recorded: float, view: RecordView) -> Entry:
    """The entry of a record with the view ``view`` (a value of the wrong type links nothing)."""
    return _entry(record_id, kind, record_type, title, recorded, view.subject, view.from_id, view.to_id,
                  list(view.aliases or ()))


def _entry(record_id: str, kind: str | None, record_type: str | None, title: str | None, recorded: float,
           subject: str | None, source: str | None, target: str | None, aliases: list[str]) -> Entry:
    if kind == "claim":
        return Entry(record_id, kind, record_type, title, recorded, subject=subject)
    if kind == "relationship":
        return Entry(record_id, kind, record_type, title, recorded,
                     ends=tuple(dict.fromkeys(end for end in (source, target) if end is not None)))
    if kind == "page":
        return Entry(record_id, kind, record_type, title, recorded, aliases=tuple(aliases))
    return Entry(record_id, kind, record_type, title, recorded)


def newest_first(entry: Entry) -> tuple[float, str]:
    return (-entry.recorded, entry.id)


def _unfiled_rank(entry: Entry) -> tuple[bool, float, str]:
    return (entry.type not in PRIORITY_CLAIM_KINDS, -entry.recorded, entry.id)


def _named_pages(entry: Entry | None) -> set[str]:
    """The ids whose page standing ``entry`` bears on: itself for a page, a claim's subject, a link's ends."""
    if entry is None:
        return set()
    if entry.kind == "page":
        return {entry.id}
    if entry.kind == "claim":
        return {entry.subject} if entry.subject is not None else set()
    if entry.kind == "relationship":
        return set(entry.ends)
    return set()


def _listed(entry: Entry) -> bool:
    return entry.type not in UNLISTED_PAGE_TYPES


@dataclass(slots=True)
class Page:
    entry: Entry
    new_claims: int = 0
    claims: int = 0
    relationships: int = 0
    last_active: float | None = None
    busy_claims: list[Entry] = field(default_factory=list)

    @property
    def connections(self) -> int:
        return self.claims + self.relationships

    @property
    def connection_rank(self) -> tuple[int, int, float, str]:
        return (-self.connections, -self.relationships, *newest_first(self.entry))


@dataclass
class Ranking:
    """The selection as of a moment, in the order the index places it."""

    page_types: Counter[str]     # every page, listed or not, by type ("page" for none)
    recent: Iterable[Page]       # recently active: the busiest first, then by latest activity
    busy: set[str]               # the busiest pages' ids
    connected: Iterable[Page]    # the other listed pages, most connected first
    unfiled: Sequence[Entry]     # recent claims not filed under a page, ranked


# --- the vault as of a moment, from every row ------------------------------------------------


def records_as_of(store: Store, catalog: Catalog, partition: str, as_of: datetime) -> list[Entry]:
    """Every record that was current at ``as_of``, in the revision it had then.

    A record revised after ``as_of`` (retitled, superseded, withdrawn) is
    read from the revision archive, so the view does not move during a
    session.  A record whose file was deleted since is no longer seen.
    """
    entries = []
    for row in catalog.dated(partition):
        recorded = parse_timestamp(row.recorded_at)
        if recorded is None or recorded > as_of:
            continue
        updated = parse_timestamp(row.updated_at)
        if updated is not None and updated <= as_of:
            if row.is_current and row.view.valid_at(as_of):
                entries.append(entry_of(row.record_id, row.kind, row.type, row.title, recorded.timestamp(),
                                        row.view))
            continue
        archived = revision_at(store, catalog, partition, row.record_id, as_of)
        if archived is not None:
            entries.append(archived)
    return entries


def revision_at(store: Store, catalog: Catalog, partition: str, record_id: str, as_of: datetime) -> Entry | None:
    """The archived revision in force at ``as_of``, if it was current then."""
    ontology = store.ontology(partition)
    for row in catalog.revisions(partition, record_id, newest_first=True):
        record, _ = parse_record(row.content, row.path)
        if record is None:
            continue
        view = record.view
        updated = parse_timestamp(view.updated_at)
        if updated is None or updated > as_of:
            continue
        recorded = parse_timestamp(view.recorded_at)
        if (record.lifecycle != "active" or record.is_fixture or recorded is None or recorded > as_of
                or not view.valid_at(as_of)
                or check_scope(record, partition) is not None
                or has_errors(check_record(record, ontology, row.path))):
            return None
        kind = record.kind
        record_type = record.effective_type(ontology, row.path) if kind == "page" else view.detail
        return entry_of(record_id, kind, record_type, record.title, recorded.timestamp(), view)
    return None


def select(entries: list[Entry], as_of: datetime) -> tuple[dict[str, Page], list[Entry]]:
    """Pages with their activity and connections, and the ranked recent unfiled claims."""
    since = (as_of - timedelta(days=RECENT_DAYS)).timestamp()
    pages = {e.id: Page(e) for e in entries if e.kind == "page"}

    def touch(page: Page, moment: float) -> None:
        if moment >= since and (page.last_active is None or moment > page.last_active):
            page.last_active = moment

    for page in pages.values():
        touch(page, page.entry.recorded)
    unfiled = []
    for entry in entries:
        recent = entry.recorded >= since
        if entry.kind == "claim":
            page = pages.get(entry.subject)  # type: ignore[arg-type]  (None names no page)
            if page is None:
                if recent:
                    unfiled.append(entry)
                continue
            page.claims += 1
            page.new_claims += int(recent)
            touch(page, entry.recorded)
            if entry.type in BUSY_CLAIM_KINDS:
                page.busy_claims.append(entry)
        elif entry.kind == "relationship":
            for end in entry.ends:
                if end in pages:
                    pages[end].relationships += 1
                    touch(pages[end], entry.recorded)
    for page in pages.values():
        page.busy_claims.sort(key=newest_first)
    unfiled.sort(key=_unfiled_rank)
    return pages, unfiled


def _groups(pages: dict[str, Page]) -> tuple[list[Page], list[Page], set[str]]:
    """(recently active, most connected, ids of the busiest pages), each in listing order.

    The busiest pages (most claims filed in the window) lead the recently
    active group so their claims fit; the rest follow by latest activity.
    """
    listable = [p for p in pages.values() if _listed(p.entry)]
    active = [p for p in listable if p.last_active is not None]
    busiest = sorted((p for p in active if p.new_claims),
                     key=lambda p: (-p.new_claims, -p.last_active, p.entry.id))[:BUSIEST_PAGES]  # type: ignore
    busy_ids = {p.entry.id for p in busiest}
    rest = sorted((p for p in active if p.entry.id not in busy_ids),
                  key=lambda p: (-p.last_active, p.entry.id))  # type: ignore[operator]
    connected = sorted((p for p in listable if p.last_active is None), key=lambda p: p.connection_rank)
    return busiest + rest, connected, busy_ids


def select_all(store: Store, catalog: Catalog, partition: str, as_of: datetime) -> Ranking:
    """The ranking as of ``as_of`` from every catalog row: the definition ``KeptSelection`` is held to."""
    pages, unfiled = select(records_as_of(store, catalog, partition, as_of), as_of)
    recent, connected, busy_ids = _groups(pages)
    return Ranking(Counter(p.entry.type or "page" for p in pages.values()), recent, busy_ids, connected, unfiled)


# --- the selection kept current ------------------------------------------------------------


@dataclass(slots=True)
class _Standing:
    """A current page's counts as the catalog holds them now, and its places in the kept rankings."""

    claims: int
    relationships: int
    activity: float                                           # its latest recorded_at, or a claim's or link's
    by_activity: tuple[float, str] | None                     # None: an unlisted type
    by_connections: tuple[int, int, float, str] | None


_append = list.append


def _discard(ranked: list[Any], item: Any) -> None:
    at = bisect_left(ranked, item)
    if at < len(ranked) and ranked[at] == item:
        del ranked[at]


class KeptSelection:
    """The partition's records as the catalog holds them now, with the rankings kept sorted.

    A record's ``moments`` are its ``recorded_at`` and when its as-of view
    becomes its catalog row, ``settled`` (``max(recorded_at, updated_at)``;
    never, without an ``updated_at``): for an ``as_of`` at or after it the
    record counts as it is now (when current), and before it the record is
    set aside and read as of then.
    """

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}          # current records with a readable recorded_at
        self.moments: dict[str, tuple[float, float]] = {}  # every dated record so recorded: (recorded, settled)
        self.filed: dict[str, set[str]] = {}         # subject -> current claims naming it
        self.linked: dict[str, set[str]] = {}        # id -> current relationships with it at an end
        self.standings: dict[str, _Standing] = {}    # current pages
        self.page_types: Counter[str] = Counter()
        self.by_settled: list[tuple[float, str]] = []
        self.claims_by_time: list[tuple[float, str]] = []
        self.by_activity: list[tuple[float, str]] = []                 # listed pages, latest activity first
        self.by_connections: list[tuple[int, int, float, str]] = []    # listed pages, most connected first
        self.archived: dict[str, dict[float, Entry | None]] = {}       # as-of revisions read, per record
        self.bounded: dict[str, Validity] = {}       # current claims that hold only between their bounds

    @classmethod
    def build(cls, rows: Iterable[LabelRow]) -> "KeptSelection":
        """From the partition's rows (``CatalogReads.label_rows``), ranked in one sort per list."""
        kept = cls()
        for row in rows:
            kept._add(row, _append)
        for page_id in [record_id for record_id, entry in kept.entries.items() if entry.kind == "page"]:
            kept._stand(page_id, _append)
        for ranked in (kept.by_settled, kept.claims_by_time, kept.by_activity, kept.by_connections):
            ranked.sort()
        return kept

    def update(self, rows: Iterable[LabelRow], changed: Iterable[str]) -> None:
        """Take in the catalog's ``rows`` now for the ``changed`` records (a changed record without one went)."""
        named: set[str] = set()
        for record_id in changed:
            named |= self._remove(record_id)
        for row in rows:
            named |= self._add(row, insort)
        for page_id in named:
            self._stand(page_id, insort)

    def _members(self, entry: Entry) -> dict[str, set[str]]:
        return self.filed if entry.kind == "claim" else self.linked

    def _remove(self, record_id: str) -> set[str]:
        self.archived.pop(record_id, None)
        self.bounded.pop(record_id, None)
        moments = self.moments.pop(record_id, None)
        if moments is not None:
            _discard(self.by_settled, (moments[1], record_id))
        entry = self.entries.pop(record_id, None)
        if entry is None:
            return set()
        if entry.kind == "page":
            self.page_types -= Counter([entry.type or "page"])
        elif entry.kind == "claim":
            _discard(self.claims_by_time, (entry.recorded, record_id))
        named = _named_pages(entry)
        members = self._members(entry)
        for name in named - {record_id}:
            members[name].discard(record_id)
            if not members[name]:
                del members[name]
        return named

    def _add(self, row: LabelRow, put: Callable[[list[Any], Any], None]) -> set[str]:
        recorded = parse_timestamp(row.recorded_at)
        if recorded is None:
            return set()  # recorded by no moment
        updated = parse_timestamp(row.updated_at)
        moment = recorded.timestamp()
        settled = max(moment, updated.timestamp()) if updated is not None else math.inf
        record_id = row.record_id
        self.moments[record_id] = (moment, settled)
        put(self.by_settled, (settled, record_id))
        if not row.is_current:
            return set()
        # Kinds and types are a small vocabulary: one string object each, however many records.
        kind = sys.intern(row.kind) if row.kind is not None else None
        record_type = sys.intern(row.type) if row.type is not None else None
        aliases = [a for a in json.loads(row.aliases_json) if isinstance(a, str)] if row.aliases_json else []
        entry = _entry(record_id, kind, record_type, row.title, moment, row.subject, row.source, row.target, aliases)
        self.entries[record_id] = entry
        if kind == "page":
            self.page_types[record_type or "page"] += 1
        elif kind == "claim":
            put(self.claims_by_time, (moment, record_id))
            validity = view_of({"kind": kind, "valid_from": row.valid_from, "valid_to": row.valid_to}).validity
            if validity.bounded:
                self.bounded[record_id] = validity
        named = _named_pages(entry)
        members = self._members(entry)
        for name in named - {record_id}:
            members.setdefault(name, set()).add(record_id)
        return named

    def _stand(self, page_id: str, put: Callable[[list[Any], Any], None]) -> None:
        """Measure ``page_id`` again and move it in the rankings (out of them, if it is no current page)."""
        old = self.standings.pop(page_id, None)
        if old is not None and old.by_activity is not None:
            _discard(self.by_activity, old.by_activity)
            _discard(self.by_connections, old.by_connections)
        entry = self.entries.get(page_id)
        if entry is None or entry.kind != "page":
            return
        claims = self.filed.get(page_id, ())
        links = self.linked.get(page_id, ())
        activity = entry.recorded
        for member in itertools.chain(claims, links):
            activity = max(activity, self.entries[member].recorded)
        standing = _Standing(len(claims), len(links), activity, None, None)
        if _listed(entry):
            standing.by_activity = (-activity, page_id)
            standing.by_connections = (-len(claims) - len(links), -len(links), -entry.recorded, page_id)
            put(self.by_activity, standing.by_activity)
            put(self.by_connections, standing.by_connections)
        self.standings[page_id] = standing

    # --- as of a moment ----------------------------------------------------------------------

    def ranking(self, as_of: datetime, revision_at: Callable[[str], Entry | None]) -> Ranking:
        """The same ranking as ``select_all`` for ``as_of``; ``revision_at(id)`` reads a record as of then."""
        late = self._set_aside(as_of.timestamp(), revision_at)
        for record_id, validity in self.bounded.items():  # a claim that does not hold then is not listed
            if record_id not in late and not validity.holds_at(as_of):
                late[record_id] = None
        return _AsOf(self, as_of, late).ranking()

    def _set_aside(self, moment: float, revision_at: Callable[[str], Entry | None]) -> dict[str, Entry | None]:
        """The records recorded or revised after ``moment``, each as it stood then (None: not current then)."""
        if len(self.archived) > ARCHIVED_KEPT_MAX:
            self.archived.clear()
        late: dict[str, Entry | None] = {}
        for _, record_id in self.by_settled[bisect_right(self.by_settled, moment, key=itemgetter(0)):]:
            if self.moments[record_id][0] > moment:
                late[record_id] = None
                continue
            seen = self.archived.setdefault(record_id, {})
            if moment not in seen:
                seen[moment] = revision_at(record_id)
            late[record_id] = seen[moment]
        return late


class _AsOf:
    """A kept selection seen as of a moment: the records set aside replaced by what they were then."""

    def __init__(self, kept: KeptSelection, as_of: datetime, late: dict[str, Entry | None]) -> None:
        self.kept = kept
        self.late = late
        self.since = (as_of - timedelta(days=RECENT_DAYS)).timestamp()
        late_filed: dict[str, list[Entry]] = {}
        late_linked: dict[str, list[Entry]] = {}
        named: set[str] = set()
        for record_id, entry in late.items():
            named |= _named_pages(kept.entries.get(record_id)) | _named_pages(entry)
            if entry is not None:
                for name in _named_pages(entry) - {record_id}:
                    (late_filed if entry.kind == "claim" else late_linked).setdefault(name, []).append(entry)
        self.moved = named | set(late)  # ids whose kept standing does not hold as of the moment
        self.pages: dict[str, Page] = {}  # the moved ids that are pages then, measured as of then
        for page_id in named:
            entry = self.entry(page_id)
            if entry is None or entry.kind != "page":
                continue
            claims = [kept.entries[c] for c in kept.filed.get(page_id, ()) if c not in late]
            claims += late_filed.get(page_id, [])
            links = [kept.entries[r] for r in kept.linked.get(page_id, ()) if r not in late]
            links += late_linked.get(page_id, [])
            activity = max([entry.recorded, *(c.recorded for c in claims), *(r.recorded for r in links)])
            page = Page(entry, claims=len(claims), relationships=len(links),
                        last_active=activity if activity >= self.since else None)
            page.busy_claims = sorted((c for c in claims if c.type in BUSY_CLAIM_KINDS), key=newest_first)
            self.pages[page_id] = page
        self.new_claims: Counter[str] = Counter()
        self.unfiled: list[Entry] = []
        claims_by_time = kept.claims_by_time
        for _, claim_id in claims_by_time[bisect_left(claims_by_time, (self.since,)):]:
            if claim_id not in late:
                self._file(kept.entries[claim_id])
        for entry in late.values():
            if entry is not None and entry.kind == "claim" and entry.recorded >= self.since:
                self._file(entry)
        self.unfiled.sort(key=_unfiled_rank)

    def entry(self, record_id: str) -> Entry | None:
        return self.late[record_id] if record_id in self.late else self.kept.entries.get(record_id)

    def _is_page(self, record_id: str | None) -> bool:
        entry = self.entry(record_id) if record_id is not None else None
        return entry is not None and entry.kind == "page"

    def _file(self, claim: Entry) -> None:
        if self._is_page(claim.subject):
            self.new_claims[claim.subject] += 1  # type: ignore[index]
        else:
            self.unfiled.append(claim)

    def page(self, page_id: str) -> Page:
        if page_id in self.pages:
            page = self.pages[page_id]
            page.new_claims = self.new_claims[page_id]
            return page
        standing = self.kept.standings[page_id]
        entry = self.kept.entries[page_id]
        return Page(entry, self.new_claims[page_id], standing.claims, standing.relationships,
                    standing.activity if standing.activity >= self.since else None)

    def _busy_claims(self, page_id: str) -> list[Entry]:
        if page_id in self.pages:
            return self.pages[page_id].busy_claims
        claims = (self.kept.entries[c] for c in self.kept.filed.get(page_id, ()))
        return sorted((c for c in claims if c.type in BUSY_CLAIM_KINDS), key=newest_first)

    def ranking(self) -> Ranking:
        busiest = [self.page(page_id) for page_id in self.new_claims if _listed(self.entry(page_id))]  # type: ignore
        busiest.sort(key=lambda p: (-p.new_claims, -p.last_active, p.entry.id))  # type: ignore[operator]
        busiest = busiest[:BUSIEST_PAGES]
        for page in busiest:
            page.busy_claims = self._busy_claims(page.entry.id)
        busy_ids = {p.entry.id for p in busiest}
        return Ranking(self._page_types(), itertools.chain(busiest, self._active(busy_ids)), busy_ids,
                       self._quiet(), self.unfiled)

    def _page_types(self) -> Counter[str]:
        counts = Counter(self.kept.page_types)
        for record_id, entry in self.late.items():
            now = self.kept.entries.get(record_id)
            if now is not None and now.kind == "page":
                counts[now.type or "page"] -= 1
            if entry is not None and entry.kind == "page":
                counts[entry.type or "page"] += 1
        return +counts

    def _moved_pages(self, active: bool) -> list[Page]:
        return [p for p in self.pages.values() if _listed(p.entry) and (p.last_active is not None) == active]

    def _active(self, busy_ids: set[str]) -> Iterator[Page]:
        """The listed pages active in the window but the busiest, latest activity first (then id)."""
        ranked = self.kept.by_activity
        active = bisect_right(ranked, -self.since, key=itemgetter(0))
        kept = (rank for rank in itertools.islice(ranked, active) if rank[1] not in self.moved)
        moved = sorted((-p.last_active, p.entry.id) for p in self._moved_pages(True))  # type: ignore[operator]
        for _, page_id in heapq.merge(kept, moved):
            if page_id not in busy_ids:
                yield self.page(page_id)

    def _quiet(self) -> Iterator[Page]:
        """The listed pages not active in the window, most connected first."""
        standings = self.kept.standings
        kept = (rank for rank in self.kept.by_connections
                if rank[3] not in self.moved and standings[rank[3]].activity < self.since)
        moved = sorted(p.connection_rank for p in self._moved_pages(False))
        for rank in heapq.merge(kept, moved):
            yield self.page(rank[3])


def kept_selection(catalog: Catalog, partition: str) -> KeptSelection:
    """The partition's kept selection, brought up to date with the catalog (on the store's lane)."""

    def update(kept: KeptSelection, changed: list[str]) -> KeptSelection:
        if len(changed) > KEPT_UPDATE_MAX:
            return KeptSelection.build(catalog.label_rows(partition))
        kept.update(catalog.label_rows(partition, changed), changed)
        return kept

    return catalog.maintained(partition, "knowledge_index",
                              lambda: KeptSelection.build(catalog.label_rows(partition)), update)
