"""The round's methods as the window calls them, answered from states a test sets.

``FakeSync`` serves ``operator/syncStatus`` and ``operator/syncNow`` in the engine's own shapes
(``engine/sync/status.py``, ``engine/sync/service.py`` and ``engine/sync/conflicts.py``), in place of the real ones on the real socket, so
a test can set what each remote's last round left (``set_remote``: a failure at a given time, ahead and
behind) and the conflicts waiting (``add_conflict``) without arranging rounds between machines that end
that way; ``changed`` publishes the ``sync`` topic as a round does.  It reads each store's remotes from
the real ``remotes.json``, so ``operator/addSyncRemote`` and ``removeSyncRemote`` stay the engine's own.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from engine.core.errors import NotFound
from engine.core.methods import Method
from engine.core.params import Params, String
from engine.service import Engine
from engine.sync.conflicts import SyncConflictDismissed
from engine.sync.remotes import CHOOSE_STORE, RemoteBook
from engine.sync.service import SyncNowAnswer
from engine.sync.status import StoreSyncStatus, SyncConflict, SyncRemoteStatus, SyncStatus

MACHINE = "m-laptop-01"


SYNC_NOW = CHOOSE_STORE + Params(String("remote", 64, min_chars=1, what="a remote's name"))
DISMISS = Params(String("store", 64, min_chars=1, required=True, what="a store id"),
                 String("id", 128, min_chars=1, required=True, what="a conflict id"))


def conflict(number: int, *, record: str = "pg_01JEXAMPLE", remote: str = "nas", at: str = "2026-12-04T09:58:00Z"
             ) -> SyncConflict:
    """A page revised on two machines: revision 4 stands, revision 3 from the other machine does not."""
    path = f"pages/topic/atlas-{number}.md"
    return {"id": f"sc_{number:04d}", "recordId": f"{record}{number}", "partition": "private",
            "kind": "revised_on_both", "remote": remote, "at": at,
            "standing": {"path": path, "revision": 4, "sha256": "a" * 64, "updatedAt": "2026-12-04T09:40:00Z"},
            "other": {"path": path, "revision": 3, "sha256": "b" * 64, "updatedAt": "2026-12-04T09:30:00Z"},
            "diff": (f"--- {path} (revision 3, other machine)\n+++ {path} (revision 4, stands)\n@@ -3,2 +3,2 @@\n"
                     " # Atlas migration\n-Cut-over on Friday.\n+Cut-over moved to Monday.\n")}


class FakeSync:
    """The three round methods over states a test sets; every call is recorded in ``calls``."""

    def __init__(self) -> None:
        self.engine: Engine | None = None  # the engine served, once ``serve`` has registered the methods
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.remotes: dict[tuple[str, str], dict[str, Any]] = {}  # (store, remote) -> what the last round left
        self.conflicts: dict[str, list[SyncConflict]] = {}
        self.after_sync: dict[str, Any] = {"state": "ok", "lastSuccess": "2026-12-04T10:05:00Z", "lastError": None}
        self._lock = threading.Lock()

    def methods(self) -> tuple[Method, ...]:
        return (Method("syncStatus", Params(), SyncStatus, self.status),
                Method("syncNow", SYNC_NOW, SyncNowAnswer, self.sync_now),
                Method("dismissSyncConflict", DISMISS, SyncConflictDismissed, self.dismiss))

    def serve(self, dispatcher: Any) -> None:
        """Register the methods on ``dispatcher`` (conftest's ``serving(register=...)``)."""
        self.engine = dispatcher.engine
        for method in self.methods():
            dispatcher.register_operator(method)

    # --- what a test sets ----------------------------------------------------------------------

    def set_remote(self, store: str, name: str, **state: Any) -> None:
        with self._lock:
            self.remotes.setdefault((store, name), {}).update(state)

    def add_conflict(self, store: str, made: SyncConflict) -> None:
        with self._lock:
            self.conflicts.setdefault(store, []).append(made)

    def changed(self, store: str) -> None:
        """What a round does when it ends: the ``sync`` topic, for that store."""
        self.engine.changes.publish("sync", storeId=store)

    # --- the methods -------------------------------------------------------------------------------

    def _remote(self, store: str, remote: dict[str, Any]) -> SyncRemoteStatus:
        found: SyncRemoteStatus = {"name": remote["name"], "url": remote["url"], "state": "never",
                                   "lastAttempt": None, "lastSuccess": None, "lastError": None, "ahead": None,
                                   "behind": None, "machines": []}
        found.update(copy.deepcopy(self.remotes.get((store, remote["name"]), {})))  # type: ignore[typeddict-item]
        return found

    def status(self, params: dict[str, Any]) -> SyncStatus:
        Params().read(params)
        self.calls.append(("syncStatus", params))
        return self._listing()

    def _listing(self) -> SyncStatus:
        stores: list[StoreSyncStatus] = []
        with self._lock:
            for entry in RemoteBook(self.engine.state, self.engine.resolver).listing()["stores"]:
                store = entry["storeId"]
                waiting = copy.deepcopy(self.conflicts.get(store, []))
                made: StoreSyncStatus = {
                    "storeId": store, "name": entry["name"], "machineId": MACHINE if entry["remotes"] else None,
                    "remotes": [self._remote(store, remote) for remote in entry["remotes"]],
                    "conflicts": waiting, "conflictsWaiting": len(waiting)}
                if entry["problem"]:
                    made["problem"] = entry["problem"]
                stores.append(made)
        return {"stores": stores}

    def sync_now(self, params: dict[str, Any]) -> SyncNowAnswer:
        values = SYNC_NOW.read(params)
        self.calls.append(("syncNow", params))
        store = self.engine.resolver.select(store=values["store"], agent=values["agent"],
                                            default_agent="main").store_id
        chosen = [entry for entry in self._listing()["stores"] if entry["storeId"] == store][0]["remotes"]
        chosen = [remote for remote in chosen if values["remote"] in (None, remote["name"])]
        for remote in chosen:
            self.set_remote(store, remote["name"], **self.after_sync)
        self.changed(store)
        after = [self._remote(store, remote) for remote in chosen]
        return {"stores": [{"storeId": store, "remotes": after}],
                "failing": sum(remote["state"] == "failing" for remote in after)}

    def dismiss(self, params: dict[str, Any]) -> SyncConflictDismissed:
        values = DISMISS.read(params)
        self.calls.append(("dismissSyncConflict", params))
        with self._lock:
            waiting = self.conflicts.get(values["store"], [])
            if not any(c["id"] == values["id"] for c in waiting):
                raise NotFound(f"store {values['store']} has no conflict {values['id']} waiting",
                               store=values["store"], id=values["id"])
            self.conflicts[values["store"]] = [c for c in waiting if c["id"] != values["id"]]
            left = len(self.conflicts[values["store"]])
        self.changed(values["store"])
        return {"storeId": values["store"], "id": values["id"], "dismissedAt": "2026-12-04T10:05:00Z",
                "conflictsWaiting": left}
