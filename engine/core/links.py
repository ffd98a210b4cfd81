"""Record links: ``knowledge://record/<store-id>/<record-id>``, what an agent cites and the owner clicks.

A link names a record by the identity that never changes: the store it lives
in and its id (never a title, a path or a partition).  It opens the record on
the owner's Knowledge page, the desktop window (``knowledge open URL``; the
desktop entry registers the scheme).  It grants nothing: the window reads
the record as the operator, like any other.  Only records of a store's
private partition get links, since the window never browses a
conversation's records.

The parser is strict, since a link arrives from outside (a chat, a browser):
the scheme ``knowledge``, the host ``record``, exactly two path segments,
a store id as the engine makes them and a record id of the safe alphabet,
and no user, port, query or fragment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, TypeVar, cast
from urllib.parse import urlsplit

from .errors import InvalidParams
from .ids import STORE_PREFIX, is_generated_id, is_record_id

# An answer that may gain a ``link`` (a read, a search hit, a receipt): its declaration names ``link``
# as NotRequired, and it keeps that declaration with the link added.
Linked = TypeVar("Linked", bound=Mapping[str, Any])

SCHEME = "knowledge"
RECORD_HOST = "record"
LINK_MAX_CHARS = 512
PRIVATE_PARTITION = "private"
FORM = f"{SCHEME}://{RECORD_HOST}/<store id>/<record id>"


@dataclass(frozen=True)
class RecordLink:
    """A parsed record link: the store and the record it names."""

    store_id: str
    record_id: str

    @property
    def url(self) -> str:
        return record_link(self.store_id, self.record_id)


def is_store_id(value: object) -> bool:
    return isinstance(value, str) and value.startswith(STORE_PREFIX + "_") and is_generated_id(value)


def record_link(store_id: str, record_id: str) -> str:
    """The link of ``record_id`` in store ``store_id``."""
    if not is_store_id(store_id) or not is_record_id(record_id):
        raise ValueError(f"not a store id and record id: {store_id!r}, {record_id!r}")
    return f"{SCHEME}://{RECORD_HOST}/{store_id}/{record_id}"


def parse_record_link(text: Any) -> RecordLink:
    """The store and record ``text`` names; ``InvalidParams`` saying what is wrong with it otherwise."""

    def refuse(why: str) -> InvalidParams:
        return InvalidParams(f"not a Knowledge record link ({why}); a link reads {FORM}", field="url")

    if not isinstance(text, str) or not text.strip():
        raise refuse("empty")
    if len(text) > LINK_MAX_CHARS:
        raise refuse(f"longer than {LINK_MAX_CHARS} characters")
    if not text.isprintable() or text != text.strip():
        raise refuse("it holds spaces or control characters")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise refuse(str(exc)) from None
    if parts.scheme != SCHEME:
        raise refuse(f"the scheme must be {SCHEME}://")
    if parts.netloc.lower() != RECORD_HOST or parts.username is not None or port is not None:
        raise refuse(f"it must name {RECORD_HOST} after {SCHEME}://")
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise refuse("it has a query or fragment")
    segments = parts.path.split("/")
    if len(segments) != 3 or segments[0] != "":
        raise refuse("the path must be /<store id>/<record id>")
    store_id, record_id = segments[1], segments[2]
    if not is_store_id(store_id):
        raise refuse(f"{store_id!r} is not a store id")
    if not is_record_id(record_id):
        raise refuse(f"{record_id!r} is not a record id")
    return RecordLink(store_id, record_id)


def link_of(store_id: str | None, partition: str, record_id: Any) -> str | None:
    """The link of ``record_id`` when it is a record of ``store_id``'s private partition, else None."""
    if not _linkable(store_id, partition) or not is_record_id(record_id):
        return None
    return record_link(store_id, record_id)


def _linkable(store_id: str | None, partition: str) -> bool:
    """Whether records of ``partition`` in ``store_id`` get links: only a store's private partition's do."""
    return store_id is not None and partition == PRIVATE_PARTITION and is_store_id(store_id)


def with_link(entry: Linked, store_id: str | None, partition: str) -> Linked:
    """``entry`` (a receipt's record, a search hit, a read) with its record's ``link``, when it has one."""
    link = link_of(store_id, partition, entry.get("id"))
    return entry if link is None else cast(Linked, {**entry, "link": link})


def with_record_links(receipt: Linked, store_id: str | None, partition: str) -> Linked:
    """A write's receipt with the link of each record it published, when they are in the private partition.

    Links are added to the answer, never stored with the receipt, so an identical retry gets them too.
    """
    if not _linkable(store_id, partition):
        return receipt
    linked = with_link(receipt, store_id, partition)
    for key in ("records", "items"):  # every record a publication touched; a remember's saved items
        entries = linked.get(key)
        if isinstance(entries, list):
            linked = cast(Linked, {**linked, key: [with_link(entry, store_id, partition) if isinstance(entry, dict) else entry
                                               for entry in entries]})
    return linked
