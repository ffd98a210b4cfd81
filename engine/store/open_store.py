"""One open store as work on its lane reaches it, named by the features that need no more.

The store runtime (``engine/runtime.py``) is the implementation: a feature
types the store its work is handed as ``OpenStore`` (or ``SearchableStore``,
in ``engine/index``) instead of importing the runtime from above its layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .answers import Receipt
from .catalog import Catalog
from .catalog_reads import CatalogReads
from .publication import Plan, Publisher
from .store import Store


class OpenStore(Protocol):
    """A store on its lane: its directories and database, the catalog of its files, its publisher."""

    @property
    def store(self) -> Store: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def publisher(self) -> Publisher: ...

    def publish(self, plan: Plan) -> Receipt:
        """Publish ``plan`` (journal, install, acknowledge) and bring the derived indexes up to date."""
        ...


class NeedsLane(Exception):
    """Raised by a read beside the lane that found something only the lane may do (catalogue a file that
    changed under the catalog): ``StoreRuntime.read`` does the read again on the lane."""


@dataclass(frozen=True)
class ReadView:
    """What a read sees (``StoreRuntime.read``): the store, its catalog as of one committed state, and that
    state's catalog version (every publication acknowledged before the read began is in it)."""

    store: Store
    catalog: CatalogReads
    version: int
