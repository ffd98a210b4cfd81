"""The ``sync`` block of config.json: when the serving engine syncs a store by itself (docs/sync.md,
"Automatic sync").

Absent, every default holds: automatic sync is on for every store that has remotes.  An unknown key or a
value out of range makes the whole config invalid, so the engine reports it and keeps the last valid
settings (engine/state/config.py), as with ``recallGate``::

    "sync": {"automatic": true, "intervalSeconds": 300, "quietSeconds": 10, "batchSeconds": 60,
             "backoffMaxSeconds": 3600, "stores": {"team": {"automatic": false}}}

``stores`` is keyed by a named store's name or a store id (an isolated store has no name); a store it does
not list follows ``automatic``.  A store whose automatic sync is off still syncs on ``knowledge sync now``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.errors import InvalidParams
from ..core.params import Flag, Integer, Params

WHERE = "sync"
STORE_KEY_MAX_CHARS = 128


@dataclass(frozen=True)
class SyncSettings:
    """Automatic sync as configured; field names follow the config keys."""

    automatic: bool = True            # the default of every store
    interval_seconds: int = 300       # a round this often with no publication at all
    quiet_seconds: int = 10           # after the last publication, this long without another before a round
    batch_seconds: int = 60           # at most one round per this long while writes go on
    backoff_max_seconds: int = 3600   # the longest wait between two tries of a failing remote
    stores: dict[str, bool] = field(default_factory=dict)  # store name or id -> automatic

    def automatic_for(self, store_id: str, name: str | None) -> bool:
        """Whether the store (its id, and its name when it is a named store) syncs by itself."""
        if store_id in self.stores:
            return self.stores[store_id]
        if name is not None and name in self.stores:
            return self.stores[name]
        return self.automatic


SETTINGS = Params(
    Flag("automatic"),
    Integer("intervalSeconds", 30, 86_400, scale=True),
    Integer("quietSeconds", 1, 3_600, scale=True),
    Integer("batchSeconds", 10, 3_600, scale=True),
    Integer("backoffMaxSeconds", 60, 86_400, scale=True),
    note="known: automatic, intervalSeconds, quietSeconds, batchSeconds, backoffMaxSeconds, stores",
)
STORE = Params(Flag("automatic", required=True), note="a store's sync settings hold only automatic")


def parse_sync_settings(block: Any) -> SyncSettings:
    """The defaults when the block is absent; raises InvalidParams naming the key."""
    if block is None:
        return SyncSettings()
    if not isinstance(block, dict):
        raise InvalidParams("sync must be an object", field=WHERE)
    values = SETTINGS.read({key: value for key, value in block.items() if key != "stores"}, where=f"{WHERE}.")
    stores_block = block.get("stores", {})
    if not isinstance(stores_block, dict):
        raise InvalidParams("sync.stores must be an object of store names or ids", field=f"{WHERE}.stores")
    stores = {}
    for key, entry in stores_block.items():
        where = f"{WHERE}.stores.{key}"
        if not key or len(key) > STORE_KEY_MAX_CHARS or not key.isprintable():
            raise InvalidParams("sync.stores is keyed by a store's name or id", field=where)
        stores[key] = STORE.read(entry, where=f"{where}.")["automatic"]
    defaults = SyncSettings()
    settings = SyncSettings(
        automatic=defaults.automatic if values["automatic"] is None else values["automatic"],
        interval_seconds=values["intervalSeconds"] or defaults.interval_seconds,
        quiet_seconds=values["quietSeconds"] or defaults.quiet_seconds,
        batch_seconds=values["batchSeconds"] or defaults.batch_seconds,
        backoff_max_seconds=values["backoffMaxSeconds"] or defaults.backoff_max_seconds,
        stores=stores)
    if settings.quiet_seconds > settings.batch_seconds:
        raise InvalidParams("sync.quietSeconds must be at most batchSeconds (a round waits for a quiet moment, "
                            "but never longer than batchSeconds while writes go on)", field=f"{WHERE}.quietSeconds")
    return settings
