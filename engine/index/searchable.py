"""An open store with its derived search indexes, as keyword and semantic search reach it on the lane."""

from __future__ import annotations

from typing import Protocol

from ..store.open_store import OpenStore
from .tantivy_index import SearchIndexes
from .vectors import VectorIndex


class SearchableStore(OpenStore, Protocol):
    """``OpenStore`` plus its tantivy indexes and its sqlite-vec vectors (the store runtime has both)."""

    @property
    def indexes(self) -> SearchIndexes: ...

    @property
    def vectors(self) -> VectorIndex: ...
