"""The owner has seen a sync conflict: ``operator/dismissSyncConflict`` (docs/sync.md, "Automatic sync").

A conflict is two revisions of one record written on two machines from one revision; the merge already
chose the one that stands (engine/sync/merge.py) and kept the other in history.  Dismissing it changes
neither: the standing revision stays and the vault is not touched.  It only leaves "waiting" (the count
``knowledge sync status``, doctor and the window show), by setting ``dismissed_at`` in the store's
``sync_conflicts`` table (migration 0008, engine/store/store.py).

    method                        params                        changes
    operator/dismissSyncConflict  id, agent? | store?           the conflict's dismissed_at in state.sqlite

Dismissing a conflict already dismissed changes nothing and answers when it was; an id the store has not
is ``not_found``.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, TypeVar

from ..access.stores import StoreResolver
from ..core.answers import TypedDict
from ..core.changes import ChangeFeed
from ..core.errors import NotFound
from ..core.ids import format_timestamp, utc_now
from ..core.methods import Method
from ..core.params import Params, String
from ..state.registry import StoreRecord
from .install import conflicts_waiting, dismiss_conflict
from .remotes import CHOOSE_STORE, DEFAULT_AGENT
from .round import SyncRuntime

T = TypeVar("T")

CONFLICT_ID_MAX_CHARS = 128


class SyncConflictDismissed(TypedDict):
    """The conflict dismissed (``dismissedAt``: now, or when it was first dismissed) and how many still wait."""

    storeId: str
    id: str
    dismissedAt: str
    conflictsWaiting: int


class ConflictsEngine(Protocol):
    @property
    def resolver(self) -> StoreResolver: ...

    @property
    def changes(self) -> ChangeFeed: ...

    def maintain(self, record: StoreRecord, work: Callable[[SyncRuntime], T]) -> T: ...


DISMISS_SYNC_CONFLICT = Params(String("id", CONFLICT_ID_MAX_CHARS, min_chars=1, required=True,
                                      what="a sync conflict's id (operator/syncStatus lists them)")) + CHOOSE_STORE


def dismiss(engine: ConflictsEngine, conflict_id: str, *, store: str | None = None,
            agent: str | None = None) -> SyncConflictDismissed:
    """Dismiss the conflict ``conflict_id`` of the chosen store (``store`` or ``agent``, default ``main``'s)."""
    record = engine.resolver.select(store=store, agent=agent, default_agent=DEFAULT_AGENT)
    engine.resolver.check(record)
    def work(runtime: SyncRuntime) -> tuple[str | None, int]:
        dismissed = dismiss_conflict(runtime.store.db, conflict_id, format_timestamp(utc_now()))
        return dismissed, conflicts_waiting(runtime.store.db)

    dismissed, waiting = engine.maintain(record, work)
    if dismissed is None:
        raise NotFound(f"store {record.store_id} has no sync conflict {conflict_id!r} (operator/syncStatus lists "
                       "them)", store=record.store_id, id=conflict_id)
    engine.changes.publish("sync", storeId=record.store_id)
    return {"storeId": record.store_id, "id": conflict_id, "dismissedAt": dismissed, "conflictsWaiting": waiting}


def methods(engine: ConflictsEngine) -> tuple[Method, ...]:
    """The conflicts' ``operator/*`` method (engine/core/methods.py)."""
    def dismiss_sync_conflict(params: dict[str, Any]) -> SyncConflictDismissed:
        values = DISMISS_SYNC_CONFLICT.read(params)
        return dismiss(engine, values["id"], store=values["store"], agent=values["agent"])

    return (Method("dismissSyncConflict", DISMISS_SYNC_CONFLICT, SyncConflictDismissed, dismiss_sync_conflict),)
