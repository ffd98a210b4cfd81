"""Typed inputs of the write operations, parsed once at the edge.

Every entry point (Python API, socket tool, CLI) hands raw parameters to
these parsers; the core only ever sees the frozen dataclasses, already
checked for types, sizes and mutually exclusive fields.  What each write
takes is declared here once (``PAGE_PARAMS``, ``REMEMBER_PARAMS``, and the
tools' forms with ``flushId``, ``PAGE_CALL`` and ``REMEMBER_CALL``), read by
``engine/core/params.py`` and published from the same declarations in
``tools/list``; the edge rules (names, text, sizes) are that module's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Iterator

from .credentials import texts_of
from .attachments import ATTACH_MAX_BYTES, FILE_CITATION, FileInput, inline_file
from ..core.errors import InvalidParams, LimitExceeded
from ..core.params import (
    Name, Names, Objects, Params, RecordId, RequestId, Integer, String, Text, Value, check_name, check_text,
    whole_number,
)
from ..vault.frontmatter import RECORD_MAX_BYTES
from ..vault.record_view import validity_moment, validity_problem
from ..vault.records import ASSERTION_ORIGINS, TITLE_MAX_CHARS

TEXT_MAX_CHARS = 100_000
BODY_MAX_CHARS = 4_000_000
EXCERPT_MAX_CHARS = 1_000_000
NAME_MAX_CHARS = 64  # type, claimKind, relation
ITEMS_MAX = 100
LIST_MAX = 100
SHA256 = re.compile(r"[0-9a-fA-F]{64}")
# What a caller may say a claim comes from: never its own inference (ASSERTION_ORIGINS' third).
CALLER_ORIGINS = tuple(origin for origin in ASSERTION_ORIGINS if origin != "agent_inference")


@dataclass(frozen=True)
class EvidenceInput:
    """A citation: new supporting text to retain (``excerpt``) or an existing source."""

    excerpt: str | None = None
    source: str | None = None
    lines: tuple[int, int] | None = None
    quote: str | None = None


@dataclass(frozen=True)
class PageInput:
    request_id: str
    type: str
    title: str
    body: str | None  # None: a new page's is empty, a revised page keeps its own
    aliases: tuple[str, ...] | None = None  # None keeps a revised page's aliases
    tags: tuple[str, ...] | None = None
    fields: dict[str, Any] | None = None
    evidence: tuple[EvidenceInput | FileInput, ...] = ()  # a file to retain with the page, or a citation
    id: str | None = None
    expected_revision: int | None = None
    expected_sha256: str | None = None  # the version read, by its bytes (docs/record-format.md)

    def digest_params(self) -> dict[str, object]:  # the fields the request's digest is made of
        params = as_plain(self)
        if params["body"] is None and params["id"] is None:  # a new page without a body digests as it did
            params["body"] = ""
        if params["expected_sha256"] is None:  # a revision by number alone digests as it did before the key
            del params["expected_sha256"]
        for citation in params["evidence"]:  # a file by its sha256 (a field already) and size, not its bytes
            if isinstance(citation.get("content"), bytes):
                citation["content"] = len(citation["content"])
        return params


@dataclass(frozen=True)
class ClaimItem:
    text: str
    claim_kind: str
    evidence: tuple[EvidenceInput, ...]
    assertion_origin: str = "user"
    replaces: str | None = None
    subject: str | None = None
    valid_from: str | None = None       # when the claim holds (docs/record-format.md)
    valid_to: str | None = None


@dataclass(frozen=True)
class RelationshipItem:
    relation: str
    from_page: str
    to_page: str
    evidence: tuple[EvidenceInput, ...]
    assertion_origin: str = "user"


@dataclass(frozen=True)
class RememberInput:
    request_id: str
    items: tuple[ClaimItem | RelationshipItem, ...]
    subject: str | None = None

    def digest_params(self) -> dict[str, object]:
        params = as_plain(self)
        for item in params["items"]:  # a claim without validity digests as it did before the keys existed
            for key in ("valid_from", "valid_to"):
                if item.get(key, 0) is None:
                    del item[key]
        return params


def as_plain(value: Any) -> Any:
    """``dataclasses.asdict`` of a parsed input, made for the request's digest: dataclasses become dicts and
    tuples, lists and dicts are copied, equal to what ``asdict`` returns, without its deep copy of every string
    (a write's digest is taken on the caller's thread for every request)."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is tuple or kind is list:
        return kind(as_plain(item) for item in value)
    if kind is dict:
        return {as_plain(key): as_plain(item) for key, item in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        return {field.name: as_plain(getattr(value, field.name)) for field in fields(value)}
    return value  # str, bytes, int, float, bool, None: immutable, shared as they are


# --- what each write takes -------------------------------------------------------------------------


def parse_fields(value: Any, field: str = "fields") -> dict[str, Any] | None:
    """A page's typed fields: an object whose keys, at every depth, are names; string values are text.

    The ontology checks which fields a type has and what they hold; this is the edge rule for
    every key and string in them, walked with an explicit stack so no depth exhausts Python's.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidParams(f"{field} must be an object", field=field)
    stack: list[tuple[str, Any]] = [(field, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            check_text(item, path, max_chars=BODY_MAX_CHARS)  # the record's own size limit bounds the rest
        elif isinstance(item, dict):
            for index, (key, child) in enumerate(item.items()):
                check_name(key, f"{path}.<key {index}>", max_chars=TITLE_MAX_CHARS)
                stack.append((f"{path}.{key}", child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
    return dict(value)


def _lines(value: Any, field: str) -> tuple[int, int]:
    first, last = (whole_number(n) for n in value) if isinstance(value, list) and len(value) == 2 else (None, None)
    if first is None or last is None or not 1 <= first <= last:
        raise InvalidParams("lines must be [first, last] with 1 <= first <= last", field=field)
    return first, last


def _origin(value: Any, field: str) -> str:
    if value == "agent_inference":
        raise InvalidParams("agent inference is never stored as a claim; record your analysis on a page instead",
                            field=field)
    if not isinstance(value, str) or value not in CALLER_ORIGINS:
        raise InvalidParams(f"assertionOrigin must be {' or '.join(map(repr, CALLER_ORIGINS))}", field=field)
    return value


def _citation(values: dict[str, Any], raw: dict[str, Any], where: str) -> EvidenceInput:
    if (values["excerpt"] is None) == (values["source"] is None):
        raise InvalidParams("a citation gives either an excerpt to retain or an existing source id",
                            field=where.removesuffix("."))
    for locator in ("lines", "quote"):  # an excerpt is retained whole: a locator beside it would be dropped
        if values["excerpt"] is not None and values[locator] is not None:
            raise InvalidParams(f"{locator} locates text in a cited source; an excerpt is retained whole and "
                                "takes none", field=where + locator)
    return EvidenceInput(values["excerpt"], values["source"], values["lines"], values["quote"])


CITATION = Params(
    Text("excerpt", EXCERPT_MAX_CHARS, description="Supporting text to retain as evidence"),
    RecordId("source", description="A retained source's id"),
    Value("lines", _lines,
          json={"type": "array", "description": "With source only: the cited lines, [first, last]",
                "items": {"type": "integer", "minimum": 1}, "minItems": 2, "maxItems": 2}),
    Text("quote", TEXT_MAX_CHARS, description="With source only: text that stands in the cited lines"),
)
EVIDENCE = Objects("evidence", CITATION, max_items=LIST_MAX, what="citations", build=_citation, default=(),
                   description="Citations, each an excerpt to retain or a retained source's id")


def _page_citation(values: dict[str, Any], raw: dict[str, Any], where: str) -> EvidenceInput | FileInput:
    """A page's citation: a file to retain with it (``content``, base64, with its ``filename``, ``mediaType``
    and ``sha256``, as knowledge_attach takes them), or a citation as every write's."""
    if values["content"] is None:
        for key in ("filename", "mediaType", "sha256"):
            if values[key] is not None:
                raise InvalidParams(f"{key} describes a file to retain; give it with content", field=where + key)
        return _citation(values, raw, where)
    for key in ("excerpt", "source", "lines", "quote"):
        if values[key] is not None:
            raise InvalidParams(f"a citation gives a file's content to retain or {key}, not both",
                                field=where + key)
    return inline_file(values, where)


PAGE_EVIDENCE = Objects("evidence", CITATION + FILE_CITATION, max_items=LIST_MAX, what="citations",
                        build=_page_citation, default=(),
                        description="Citations, each an excerpt to retain, a retained source's id, or a file to "
                        "retain with the page (content, base64, as knowledge_attach takes it; at most "
                        f"{ATTACH_MAX_BYTES} bytes in all), whose new source the receipt names")
ORIGIN = Value("assertionOrigin", _origin, default="user", json={"type": "string", "enum": list(CALLER_ORIGINS)})
REQUEST_ID = RequestId("requestId", required=True,
                       description="A fresh id per write; an identical retry returns the original receipt")
FLUSH_ID = RequestId("flushId", description="During a pre-compaction flush, the host's flush id instead of a "
                     "requestId: a stable request id is derived from it")
# The tools' form of a write: requestId, or during a flush flushId instead (Engine derives the request id).
_FLUSH_FORM = Params(RequestId("requestId", description="Required unless flushId is given: "
                               + REQUEST_ID.description), FLUSH_ID)

PAGE_PARAMS = Params(
    REQUEST_ID,
    Name("type", NAME_MAX_CHARS, required=True, description="A page type (see knowledge_ontology)"),
    Name("title", TITLE_MAX_CHARS, required=True),
    Text("body", BODY_MAX_CHARS, description="The page's Markdown text. To revise: left out, the page keeps "
         "its body, as it keeps aliases, tags and fields left out; \"\" empties it"),
    Names("aliases", LIST_MAX, TITLE_MAX_CHARS),
    Names("tags", LIST_MAX, TITLE_MAX_CHARS),
    Value("fields", parse_fields,
          json={"type": "object", "description": "Typed fields of the page type (see knowledge_ontology)"}),
    PAGE_EVIDENCE,
    RecordId("id", description="To revise: the page's id, with expectedRevision"),
    Integer("expectedRevision", 1,
            description="To revise: the revision you read (knowledge_record's revision)"),
    String("expectedSha256", pattern=SHA256, what="64 hexadecimal digits",
           description="To revise, with expectedRevision: the sha256 of the version you read (knowledge_record's "
           "sha256); the write is refused unless the file still holds exactly that version. Without it, "
           "expectedRevision is refused when the page was edited outside the engine after that revision"),
)
PAGE_CALL = PAGE_PARAMS + _FLUSH_FORM


def parse_page_input(params: dict[str, Any]) -> PageInput:
    values = PAGE_PARAMS.read(params)
    page_id, expected = values["id"], values["expectedRevision"]
    if page_id is not None and expected is None:
        raise InvalidParams("revising a page needs expectedRevision", field="expectedRevision")
    if page_id is None and expected is not None:
        raise InvalidParams("expectedRevision only applies with id", field="expectedRevision")
    expected_sha256 = values["expectedSha256"]
    if expected_sha256 is not None and expected is None:
        raise InvalidParams("expectedSha256 only applies with id and expectedRevision", field="expectedSha256")
    body = values["body"]
    if body is not None and len(body) > RECORD_MAX_BYTES // 4:  # a shorter one cannot pass the bytes
        size = len(body.encode("utf-8"))
        if size > RECORD_MAX_BYTES:
            raise LimitExceeded(f"body is larger than {RECORD_MAX_BYTES:,} bytes as UTF-8, the most a record holds "
                                "(its frontmatter included)", field="body", limit=RECORD_MAX_BYTES, size=size)
    retained = sum(len(citation.content) for citation in values["evidence"] if isinstance(citation, FileInput))
    if retained > ATTACH_MAX_BYTES:
        raise LimitExceeded(f"the files a page retains hold more than {ATTACH_MAX_BYTES} bytes in all; attach "
                            "them first (knowledge_attach) and cite their source ids", field="evidence",
                            limit=ATTACH_MAX_BYTES)
    return PageInput(
        request_id=values["requestId"], type=values["type"], title=values["title"], body=values["body"],
        aliases=values["aliases"], tags=values["tags"], fields=values["fields"], evidence=values["evidence"],
        id=page_id, expected_revision=expected,
        expected_sha256=expected_sha256.lower() if expected_sha256 is not None else None,
    )


def page_texts(params: dict[str, Any], page: PageInput) -> Iterator[tuple[str, str | bytes]]:
    """What a page's credential check reads (``params`` parsed as ``page``): every string of its parameters but
    the base64 ``content`` of the files it retains, and those files' bytes, read as an attachment's are."""
    citations = params.get("evidence") or []
    yield from texts_of({**params, "evidence": [{key: value for key, value in citation.items() if key != "content"}
                                                for citation in citations]})
    for index, citation in enumerate(page.evidence):
        if isinstance(citation, FileInput):
            yield f"evidence[{index}].content", citation.content


def _support(values: dict[str, Any], raw: dict[str, Any], where: str) -> tuple[EvidenceInput, ...]:
    """An item's support: the ``excerpt`` to retain, or ``evidence`` citing retained sources."""
    if "evidence" in raw:
        if "excerpt" in raw:
            raise InvalidParams("give either excerpt or evidence, not both", field=f"{where}evidence")
        if not values["evidence"]:
            raise InvalidParams("evidence must cite at least one source", field=f"{where}evidence")
        return values["evidence"]
    excerpt = values["excerpt"]
    if excerpt is None or not excerpt.strip():
        raise InvalidParams(f"{where}excerpt {'is required' if excerpt is None else 'must not be empty'}",
                            field=f"{where}excerpt")
    return (EvidenceInput(excerpt=excerpt),)


def _item(values: dict[str, Any], raw: dict[str, Any], where: str) -> ClaimItem | RelationshipItem:
    support = _support(values, raw, where)
    if "relation" in raw:
        return RelationshipItem(relation=values["relation"], from_page=values["from"], to_page=values["to"],
                                evidence=support, assertion_origin=values["assertionOrigin"])
    invalid = validity_problem(values["validFrom"], values["validTo"])
    if invalid is not None:
        raise InvalidParams(invalid[1].replace("valid_from", "validFrom").replace("valid_to", "validTo"),
                            field=where + ("validFrom" if invalid[0] == "valid_from" else "validTo"))
    return ClaimItem(text=values["text"].strip(), claim_kind=values["claimKind"], evidence=support,
                     assertion_origin=values["assertionOrigin"], replaces=values["replaces"],
                     subject=values["subject"], valid_from=values["validFrom"], valid_to=values["validTo"])


def _validity_bound(value: Any, field: str) -> str:
    if validity_moment(value) is None:
        raise InvalidParams(f"{field} must be a date (YYYY-MM-DD) or an ISO-8601 date-time with an offset",
                            field=field)
    return value


_EXCERPT = Text("excerpt", EXCERPT_MAX_CHARS, description="The supporting text from the conversation; every item "
                "gives this or evidence, not both")
CLAIM_ITEM = Params(
    Text("text", TEXT_MAX_CHARS, required=True, description="A claim: what it says, with claimKind"),
    # The enum is the caller's active ontology's, filled in by tools/list (wire/tools.py, with_claim_kinds).
    Name("claimKind", NAME_MAX_CHARS, required=True),
    _EXCERPT, EVIDENCE, ORIGIN,
    RecordId("replaces", description="The claim this one corrects; with validFrom, the corrected claim stays "
             "true until then instead of being superseded"),
    Name("subject", TITLE_MAX_CHARS, blank=True, description="This claim's page, instead of the call's subject"),
    Value("validFrom", _validity_bound,
          json={"type": "string", "description": "When the claim starts to hold: a date (YYYY-MM-DD) or an "
                "ISO-8601 date-time with an offset"}),
    Value("validTo", _validity_bound,
          json={"type": "string", "description": "The last date, or moment, the claim holds (a date covers "
                "its whole UTC day); not before validFrom"}),
)
RELATIONSHIP_ITEM = Params(
    Name("relation", NAME_MAX_CHARS, required=True, description="Instead of text and claimKind: a relationship "
         "type (see knowledge_ontology), with from and to"),
    Name("from", TITLE_MAX_CHARS, required=True, description="A relationship's first page: id, title or alias"),
    Name("to", TITLE_MAX_CHARS, required=True, description="A relationship's second page: id, title or alias"),
    _EXCERPT, EVIDENCE, ORIGIN,
)
REMEMBER_PARAMS = Params(
    REQUEST_ID,
    Name("subject", TITLE_MAX_CHARS, blank=True, description="The page the claims are about: id, title or alias"),
    Objects("items", CLAIM_ITEM + RELATIONSHIP_ITEM, required=True, min_items=1, max_items=ITEMS_MAX,
            what="items", pick=lambda raw: RELATIONSHIP_ITEM if "relation" in raw else CLAIM_ITEM, build=_item),
)
REMEMBER_CALL = REMEMBER_PARAMS + _FLUSH_FORM


def parse_remember_input(params: dict[str, Any]) -> RememberInput:
    values = REMEMBER_PARAMS.read(params)
    return RememberInput(request_id=values["requestId"], items=values["items"], subject=values["subject"])
