"""MCP resources: the records of the caller's partition, addressed by the links agents already cite.

A record is the resource ``knowledge://record/<store id>/<record id>`` (engine/core/links.py), and one
exact revision of it ``knowledge://record/<store id>/<record id>/revision/<n>``; both are published as
resource templates.  ``resources/list`` pages through the current records of the caller's partition (by
title, 100 a page, with a signed cursor bound to the store and partition), ``resources/read`` answers the
record file itself (Markdown with its frontmatter, ``text/markdown``).

Everything is scoped exactly like the tools: the caller is authorized at every request (a revoked
credential is refused at its next one), reaches one partition of one store, and a URI naming any other
store, or a record its partition does not hold, is ``not_found`` without saying whether it exists
elsewhere.  A conversation's records are resources too, with the same form of URI (a URI addresses, it
grants nothing; only the private partition's records get links that open the owner's window).  Reading
never creates a store.  Subscriptions to these URIs are engine/wire/resource_watch.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NoReturn, Protocol, TypeVar

from ..access.authority import Authority, Caller
from ..core.answers import NotRequired, TypedDict
from ..core.errors import InvalidParams, NotFound
from ..core.ids import is_record_id
from ..core.links import LINK_MAX_CHARS, parse_record_link, record_link
from ..core.params import Params, String, Value
from ..search.keyword import CursorSigner
from ..store.catalog_reads import RecordRow
from ..store.open_store import OpenStore, ReadView
from ..store.reads import record_file

T = TypeVar("T")

MIME_TYPE = "text/markdown"
PAGE_SIZE = 100
CURSOR_MAX_CHARS = 1024
REVISION_SEGMENT = "/revision/"
REVISION_DIGITS_MAX = 15
RECORD_TEMPLATE = "knowledge://record/{store}/{record}"
REVISION_TEMPLATE = "knowledge://record/{store}/{record}/revision/{revision}"
URI_FORMS = "knowledge://record/<store id>/<record id>[/revision/<n>]"


class ReadEntry(Protocol):
    """An authorized caller at its store, reading beside the lane (``Engine.enter``'s entry)."""

    @property
    def authority(self) -> Authority: ...

    def read(self, work: Callable[[OpenStore, Authority, ReadView], T]) -> T:
        """``work(store, authority, view)`` on the last committed snapshot; authority re-checked around it."""
        ...


class ResourceEngine(Protocol):
    """What resources and completions need of the engine: the way in (never creating a store) and the
    cursor signer."""

    def authorize(self, caller: Caller, *, write: bool = False, scope: str | None = None,
                  create: bool = True) -> Authority: ...

    def enter(self, caller: Caller, *, write: bool = False, scope: str | None = None,
              create: bool = True) -> ReadEntry: ...

    @property
    def signer(self) -> CursorSigner: ...


class Annotations(TypedDict):
    lastModified: str


class ResourceEntry(TypedDict):
    """One current record as ``resources/list`` shows it."""

    uri: str
    name: str  # the record id
    title: str
    description: str  # its kind and type, e.g. "page (project)"
    mimeType: str
    annotations: NotRequired[Annotations]


class ResourceList(TypedDict):
    resources: list[ResourceEntry]
    nextCursor: NotRequired[str]


class ResourceTemplate(TypedDict):
    uriTemplate: str
    name: str
    title: str
    description: str
    mimeType: str


class ResourceTemplateList(TypedDict):
    resourceTemplates: list[ResourceTemplate]


class RecordMeta(TypedDict):
    """What the file says of itself, read apart: its revision and whether it is current."""

    revision: int | None
    status: str


class ContentMeta(TypedDict):
    knowledge: RecordMeta


ResourceText = TypedDict("ResourceText", {"uri": str, "mimeType": str, "text": str, "_meta": ContentMeta})


class ResourceRead(TypedDict):
    contents: list[ResourceText]


class Empty(TypedDict):
    """The answer of ``resources/subscribe`` and ``resources/unsubscribe``."""


TEMPLATES: list[ResourceTemplate] = [
    {"uriTemplate": RECORD_TEMPLATE, "name": "record", "title": "A Knowledge record",
     "description": "A record of your partition, current revision: its file, Markdown with YAML frontmatter. "
                    "store is your store id (complete it), record a record id (complete it from a title or "
                    "alias).", "mimeType": MIME_TYPE},
    {"uriTemplate": REVISION_TEMPLATE, "name": "record-revision", "title": "One revision of a Knowledge record",
     "description": "An exact kept revision (a positive integer) of a record of your partition; it never changes.",
     "mimeType": MIME_TYPE},
]


@dataclass(frozen=True)
class ResourceAddress:
    """What a resource URI names: a record of a store, and an exact revision of it or its newest file."""

    store_id: str
    record_id: str
    revision: int | None = None

    @property
    def uri(self) -> str:
        return resource_uri(self.store_id, self.record_id, self.revision)


def resource_uri(store_id: str, record_id: str, revision: int | None = None) -> str:
    link = record_link(store_id, record_id)
    return link if revision is None else f"{link}{REVISION_SEGMENT}{revision}"


def parse_resource_uri(value: Any, field: str = "uri") -> ResourceAddress:
    """The store, record and revision ``value`` names; ``InvalidParams`` naming ``field`` otherwise."""
    if not isinstance(value, str):
        raise InvalidParams(f"{field} must be a resource URI: {URI_FORMS}", field=field)
    if len(value) > LINK_MAX_CHARS:
        raise InvalidParams(f"{field} is not a Knowledge resource URI (longer than {LINK_MAX_CHARS} "
                            f"characters); one reads {URI_FORMS}", field=field)
    base, revision = value, None
    head, segment, tail = value.rpartition(REVISION_SEGMENT)
    if segment:
        if not (tail.isascii() and tail.isdigit() and len(tail) <= REVISION_DIGITS_MAX) or tail.startswith("0"):
            raise InvalidParams(f"{field} names no revision: one reads {URI_FORMS}, <n> a positive integer",
                                field=field)
        base, revision = head, int(tail)
    try:
        link = parse_record_link(base)
    except InvalidParams as exc:
        raise InvalidParams(exc.message.replace("record link", "resource URI").split("; a link reads")[0]
                            + f"; one reads {URI_FORMS}", field=field) from None
    return ResourceAddress(link.store_id, link.record_id, revision)


def _list_cursor(value: Any, field: str) -> str:
    return String("cursor", CURSOR_MAX_CHARS, min_chars=1, what="a cursor from resources/list").check(value, field)


def _no_cursor(value: Any, field: str) -> None:
    raise InvalidParams("the resource templates are never paged, so no cursor was issued: leave cursor out",
                        field=field)


LIST_PARAMS = Params(Value("cursor", _list_cursor))
TEMPLATES_PARAMS = Params(Value("cursor", _no_cursor))
URI_PARAMS = Params(Value("uri", parse_resource_uri, required=True))  # read, subscribe, unsubscribe


def list_resources(engine: ResourceEngine, caller: Caller, cursor: str | None) -> ResourceList:
    """One page of the current records of ``caller``'s partition, by title; ``nextCursor`` while more follow.

    A cursor is signed and bound to the store and partition it was issued for: any other is refused as
    ``invalid_params`` (it names neither)."""
    entry = engine.enter(caller, create=False)
    if entry.authority.store is None:  # no store yet: nothing to list, and no cursor was ever issued
        if cursor is not None:
            _refuse_cursor()
        return {"resources": []}

    def page(store: OpenStore, authority: Authority, view: ReadView) -> ResourceList:
        binding = {"list": "resources", "store": view.store.store_id, "partition": authority.partition}
        rows = view.catalog.titled_after(authority.partition, _after(engine, cursor, binding), PAGE_SIZE + 1)
        served = rows[:PAGE_SIZE]
        answer: ResourceList = {"resources": [_entry(view.store.store_id, row) for row in served
                                              if is_record_id(row.record_id)]}  # a link's id alphabet
        if len(rows) > PAGE_SIZE:
            answer["nextCursor"] = engine.signer.sign({**binding, "after": [served[-1].title, served[-1].record_id]})
        return answer

    return entry.read(page)


def _after(engine: ResourceEngine, cursor: str | None, binding: dict[str, Any]) -> tuple[str | None, str] | None:
    """The title and id of the record a cursor's page ended on (None: the first page)."""
    if cursor is None:
        return None
    state = engine.signer.open(cursor)
    if not isinstance(state, dict) or any(state.get(key) != value for key, value in binding.items()):
        _refuse_cursor()
    after = state.get("after")
    if not (isinstance(after, list) and len(after) == 2 and isinstance(after[0], (str, type(None)))
            and isinstance(after[1], str)):
        _refuse_cursor()
    return after[0], after[1]


def _refuse_cursor() -> NoReturn:
    raise InvalidParams("cursor was not issued by resources/list for this caller: list from the start, "
                        "without a cursor", field="cursor")


def _entry(store_id: str, row: RecordRow) -> ResourceEntry:
    detail = f" ({row.type})" if row.type else ""
    entry: ResourceEntry = {"uri": resource_uri(store_id, row.record_id), "name": row.record_id,
                            "title": row.title or row.record_id, "description": f"{row.kind}{detail}",
                            "mimeType": MIME_TYPE}
    if isinstance(row.updated_at, str):
        entry["annotations"] = {"lastModified": row.updated_at}
    return entry


def read_resource(engine: ResourceEngine, caller: Caller, address: ResourceAddress) -> ResourceRead:
    """The record file a URI names, from the caller's partition: its newest file, or an exact kept revision.

    Like ``knowledge_record``, the newest file is served whatever its status (withdrawn, invalid; bytes
    that are no UTF-8 read as U+FFFD); a withheld, unknown or duplicated id, an unknown revision and
    another store are ``not_found``."""
    entry = engine.enter(caller, create=False)
    store = entry.authority.store
    if store is None or store.store_id != address.store_id:
        raise NotFound("no such resource for this caller", uri=address.uri)
    found = entry.read(lambda store, authority, view: record_file(
        view.store, view.catalog, authority.partition, address.record_id, address.revision, fields=("uri", "uri")))
    return {"contents": [{"uri": address.uri, "mimeType": MIME_TYPE, "text": found.content.decode("utf-8", "replace"),
                          "_meta": {"knowledge": {"revision": found.revision, "status": found.status}}}]}


def resource_templates(engine: ResourceEngine, caller: Caller) -> ResourceTemplateList:
    """The two URI templates; the caller is authorized first (never creating a store), like every method."""
    engine.authorize(caller, create=False)
    return {"resourceTemplates": list(TEMPLATES)}
