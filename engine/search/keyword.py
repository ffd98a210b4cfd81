"""Keyword search (BM25 over tantivy), cursors and references.

User text becomes terms through the engine's analyzer and the query is built
from those terms by code: title and alias matches count more than body
matches, any term may match.  Scores are query-local: each hit's BM25 score
divided by the best hit's, so the best is 1.0 and ``minScore`` cuts relative
to it.  Cursors are signed and bind the query, filters, partition, store and
index version; references name a record revision and its content hash and
grant no access by themselves.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import hmac
import json
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import tantivy

from ..core.answers import JsonObject, JsonValue, NotRequired, TypedDict
from ..index.analysis import UNSPACED_RUN, Analyzer, prepare, raw_offset
from ..store.catalog_reads import CatalogReads, RecordRow, lookup_keys, record_name_keys
from ..core.errors import ForeignReference, InvalidParams, StaleCursor
from ..core.ids import format_timestamp, utc_now
from ..index.overlay import Overlay
from ..index.tantivy_index import PartitionIndex
from ..core.params import Choice, Choices, Integer, Name, Number, Params, Query, String, Value
from ..vault.records import KINDS
from .fresh import merged_window
from ..store.reads import AS_OF, reference
from ..store.summaries import RecordSummary, Reference, record_summary
from ..store.store import Store
from ..vault.ontology import Ontology
from .plain import Marker, own_text, owner_snippet, query_marker

QUERY_MAX_BYTES = 8192
LIMIT_DEFAULT, LIMIT_MAX = 10, 50
# Each query word is scored once over title, aliases and body together (the ``text`` field), plus a small
# bonus where it is in the title or an alias.  Measured on LoCoMo and a 100k-record known-item set in
# docs/benchmarks/search.md: separate per-field BM25 with large title boosts let one word in a short title
# outrank a record holding every word of the query.
TITLE_BOOST, ALIAS_BOOST = 0.25, 0.15
# The owner's search: what a word that cannot match alone (``SearchRequest.unmatched_alone``) adds, as a share of
# what a meaningful word adds.  Questions say "how do I ... my"; notes that happen to say "I" and "my" often (a
# FAQ, a policy) should not outrank the note about the question's subject (docs/benchmarks/search-vault.md).
FUNCTION_WORD_WEIGHT = 0.25
SNIPPET_CHARS = 240
CURSOR_VERSION = 1
CURSOR_MAX_CHARS = 2048
TYPE_MAX_CHARS = 64


@dataclass(frozen=True)
class SearchRequest:
    query: str
    limit: int = LIMIT_DEFAULT
    min_score: float = 0.0
    kind: str | None = None
    type: str | None = None
    cursor: str | None = None
    as_of: datetime | None = None   # claims that do not hold then are left out (None: now)
    kinds: tuple[str, ...] | None = None  # the operator's filter: only records of these kinds
    # Terms that count toward a hit's score but cannot make it a hit alone (the owner's search: "to" or "how"
    # matches nearly every note); empty for agents' searches, where any query word may match.
    unmatched_alone: frozenset[str] = frozenset()
    # The owner's search: snippets are plain words with these query terms marked (engine/search/plain.py);
    # None for agents' searches, whose snippets are the fragment as written.
    marked: frozenset[str] | None = None
    # The owner's search: the records titled or aliased exactly as the query lead the first page wherever the
    # ranking puts them (``named_hits``), and later pages leave them out.
    names_first: bool = False


QUERY = Query("query", max_bytes=QUERY_MAX_BYTES, required=True,
              description=f"Words to look for; never query syntax (at most {QUERY_MAX_BYTES:,} bytes as UTF-8)")


def parse_query_text(value: Any) -> str:
    """A user's query: non-empty text, at most 8 KiB, no control characters."""
    return QUERY.check(value, "query")


def _memory_only(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or any(source != "memory" for source in value):
        raise InvalidParams("Knowledge provides only the 'memory' source; 'sessions' is not searched here",
                            field=field)
    return value


# ``knowledge_grep`` and ``operator/search``; ``memory/search`` (the host's shared search) adds ``sources``.
SEARCH_PARAMS = Params(
    QUERY,
    Integer("limit", 1, LIMIT_MAX, default=LIMIT_DEFAULT),
    Number("minScore", 0, 1, default=0.0, description="Hits scoring below this share of the best one are left out"),
    Choice("kind", KINDS),
    Name("type", TYPE_MAX_CHARS, description="A page type, claim kind or relation"),
    String("cursor", CURSOR_MAX_CHARS, what="a cursor string from an earlier search",
           description="nextCursor of the previous page of results"),
    AS_OF,
)
MEMORY_SEARCH_PARAMS = SEARCH_PARAMS + Params(Value("sources", _memory_only, default=["memory"]))
KINDS_FILTER = Choices("kinds", KINDS, description="Only records of these kinds (the window leaves relationships "
                       "out unless the owner asks for links); not with kind")
SEARCH_MODES = ("auto", "keyword", "hybrid")
SEARCH_MODE = Choice("mode", SEARCH_MODES, default="auto",
                     description="keyword, hybrid (keyword and the installed embedding model), or auto: hybrid "
                                 "when an embedding model is installed, keyword otherwise")
# ``operator/search``: the tool's parameters, the window's filter by several kinds, and the owner's search mode.
OPERATOR_SEARCH_PARAMS = SEARCH_PARAMS + Params(KINDS_FILTER, SEARCH_MODE)


def refuse_kind_and_kinds(kind: str | None, kinds: tuple[str, ...] | None) -> None:
    """One kind or a list of them, never both (which one would win is not obvious)."""
    if kind is not None and kinds is not None:
        raise InvalidParams("give kind or kinds, not both", field="kinds")


def parse_search_request(params: dict[str, Any], declared: Params = MEMORY_SEARCH_PARAMS) -> SearchRequest:
    """``declared``: what the caller's method takes (``SEARCH_PARAMS``: the tool, no ``sources``)."""
    values = declared.read(params)
    kinds = values.get("kinds")
    refuse_kind_and_kinds(values["kind"], kinds)
    return SearchRequest(values["query"], values["limit"], values["minScore"], values["kind"], values["type"],
                         values["cursor"], values["asOf"], kinds)


# --- cursors -------------------------------------------------------------------------------


class CursorSigner:
    def __init__(self, key: bytes) -> None:
        self.key = key

    def _mac(self, payload: bytes) -> str:
        return base64.urlsafe_b64encode(hmac.new(self.key, payload, hashlib.sha256).digest()[:18]).decode()

    def sign(self, state: dict[str, Any]) -> str:
        payload = json.dumps(state, separators=(",", ":"), sort_keys=True).encode("utf-8")
        return base64.urlsafe_b64encode(payload).decode().rstrip("=") + "." + self._mac(payload)

    def open(self, cursor: str) -> JsonObject:
        """The state ``sign`` was given: any JSON object a caller signed, checked against its binding by it."""
        body, _, mac = cursor.partition(".")
        try:
            payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (ValueError, TypeError) as exc:
            raise InvalidParams("cursor is not a cursor from this engine", field="cursor") from exc
        if not mac or not hmac.compare_digest(mac, self._mac(payload)):
            raise InvalidParams("cursor is not a cursor from this engine", field="cursor")
        return json.loads(payload)


class CursorBinding(TypedDict):
    """What a cursor is bound to, besides the index version: its store, partition, query and filters."""

    store: str
    partition: str
    query: str  # a digest of the query text
    kind: str | None
    type: str | None
    minScore: float
    limit: int
    asOf: NotRequired[str]  # a later page answers as of the same moment as the first
    kinds: NotRequired[list[str]]  # the operator's filter by several kinds
    words: NotRequired[str]  # "meaningful": the owner's search, where function words cannot match alone


def _binding(store_id: str, partition: str, request: SearchRequest) -> CursorBinding:
    """What a cursor is bound to, besides the index version."""
    digest = hashlib.sha256(request.query.encode("utf-8")).hexdigest()[:32]
    binding: CursorBinding = {"store": store_id, "partition": partition, "query": digest, "kind": request.kind,
               "type": request.type, "minScore": request.min_score, "limit": request.limit}
    if request.as_of is not None:  # a later page answers as of the same moment as the first
        binding["asOf"] = format_timestamp(request.as_of)
    if request.kinds is not None:
        binding["kinds"] = list(request.kinds)
    if request.unmatched_alone:
        binding["words"] = "meaningful"
    return binding


# --- search --------------------------------------------------------------------------------


class SearchHit(RecordSummary):
    snippet: str
    score: float
    assertionOrigin: JsonValue
    attribution: JsonValue
    ref: Reference
    link: NotRequired[str]  # the native tool's hits of the private partition


class SearchAnswer(TypedDict):
    hits: list[SearchHit]
    nextCursor: NotRequired[str]


class GrepAnswer(SearchAnswer):
    """The hits; `note`, on a first page with no hit, when the store's ontology does not define the `type` asked
    for: it names the defined types closest to it (`Person`, `persons` or a typo: did you mean `person`)."""
    note: NotRequired[str]


class OwnerSearchHit(SearchHit):
    """A hit of the owner's search: its ``snippet`` is plain words ("…" where the note goes on), and
    ``highlights`` the ``[start, end)`` character spans in it of the words the query matched."""
    highlights: list[list[int]]


class OwnerHits(TypedDict):
    """A search's answer for the owner (``SearchRequest.marked``): hits with plain snippets and highlights."""
    hits: list[OwnerSearchHit]
    nextCursor: NotRequired[str]


class OwnerSearchAnswer(OwnerHits):
    """``operator/search``: the hits, the mode that ranked them, and for hybrid whether every record had its
    vector; ``hybridUnavailable`` says why a search that asked for hybrid (or auto) was ranked by keyword, and
    ``embedding`` the embedding model's state then (``not_configured``, ``not_installed`` or ``failed``)."""
    mode: str  # "keyword" or "hybrid"
    vectors: NotRequired[str]  # hybrid: "ready", or "building" while some records wait for theirs
    hybridUnavailable: NotRequired[str]
    embedding: NotRequired[str]


def build_query(schema: tantivy.Schema, terms: list[str], request: SearchRequest) -> tantivy.Query:
    """Any of ``terms`` may match, each scored over ``text`` with the title and alias bonuses; where some of them
    are in ``request.unmatched_alone`` and others are not, a hit must match one of the others, and the words
    that cannot match alone only add to its score, weighed ``FUNCTION_WORD_WEIGHT`` (a query of such words alone
    matches as any query does)."""
    meaningful = [term for term in terms if term not in request.unmatched_alone]
    if not meaningful or len(meaningful) == len(terms):
        return _filtered(schema, _any_of(schema, terms), request)
    alone = [term for term in terms if term in request.unmatched_alone]
    query = tantivy.Query.boolean_query([
        (tantivy.Occur.Must, _any_of(schema, meaningful)),
        (tantivy.Occur.Should, tantivy.Query.boost_query(_any_of(schema, alone), FUNCTION_WORD_WEIGHT))])
    return _filtered(schema, query, request)


def _any_of(schema: tantivy.Schema, terms: list[str]) -> tantivy.Query:
    should = []
    for term in terms:
        should.append(tantivy.Query.term_query(schema, "text", term))
        should.append(tantivy.Query.boost_query(tantivy.Query.term_query(schema, "title", term), TITLE_BOOST))
        should.append(tantivy.Query.boost_query(tantivy.Query.term_query(schema, "aliases", term), ALIAS_BOOST))
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, clause) for clause in should])


def _filtered(schema: tantivy.Schema, query: tantivy.Query, request: SearchRequest) -> tantivy.Query:
    filters = [tantivy.Query.term_query(schema, field, value)
               for field, value in (("kind", request.kind), ("type", request.type)) if value]
    if request.kinds is not None:
        filters.append(tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "kind", kind)) for kind in request.kinds]))
    if filters:
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, query)] + [(tantivy.Occur.Must, clause) for clause in filters])
    return query


def search(store: Store, catalog: CatalogReads, index: PartitionIndex, version: int, analyzer: Analyzer,
           signer: CursorSigner, partition: str, request: SearchRequest, overlay: Overlay | None = None
           ) -> SearchAnswer | OwnerHits:
    """``overlay``: the acknowledged records ``index`` has not committed yet, merged in (engine/search/fresh.py)."""
    terms = analyzer.query_terms(request.query)
    if not terms:
        raise InvalidParams("the query has no words to search for", field="query")
    binding = _binding(store.store_id, partition, request)
    offset, top = 0, None
    if request.cursor is not None:
        state = signer.open(request.cursor)
        if state.get("store") != store.store_id:
            raise ForeignReference("the cursor belongs to another store", field="cursor")
        bound = set(binding) | {"asOf", "kinds", "words"}  # an optional binding left out must be absent from the cursor too
        if any(state.get(key) != binding.get(key) for key in bound):
            raise InvalidParams("the cursor belongs to another query, filter or partition", field="cursor")
        # A page of the overlay's merged order (engine/search/fresh.py) and one of the committed order are not
        # one sequence: once the commit lands, a cursor of the merged order is stale like one of an older version.
        if state.get("version") != version or bool(state.get("merged")) != bool(overlay):
            raise StaleCursor("the index changed since this cursor was issued; search again", field="cursor")
        offset, top = int(state["offset"]), float(state["top"])
    query = build_query(index.schema, terms, request)
    searcher = index.searcher() if overlay is None else overlay.searcher
    moment = request.as_of or utc_now()
    snippets = snippet_generator(searcher, index.schema, terms, request)
    marker = snippet_marker(analyzer, request)
    named = named_hits(store.store_id, catalog, searcher, index.schema, partition, request, moment, snippets,
                       marker, overlay)
    if request.cursor is not None and state.get("named") != _names_digest(named):
        # The records the first page led with are left out of every later one: they must be the same records.
        raise StaleCursor("the records named as the query changed since this cursor was issued; search again",
                          field="cursor")
    hits: list[SearchHit] = list(named.values()) if request.cursor is None else []
    next_cursor = None
    # Index order, a window at a time: a claim that does not hold at ``moment`` is passed over, so a page
    # still holds ``limit`` hits and the cursor names the index position after the last one served.
    position, done = offset, False
    while not done:
        if overlay is None:
            window = [(raw_score, searcher.doc(address)) for raw_score, address
                      in searcher.search(query, request.limit + 1, count=False, offset=position).hits]
        else:
            window = merged_window(searcher, index.schema, query, terms, request, (("text", 1.0), ("title", TITLE_BOOST), (
                "aliases", ALIAS_BOOST)), FUNCTION_WORD_WEIGHT, overlay, analyzer, position, request.limit + 1)
        if top is None:
            top = window[0][0] if window else 1.0
        rows = {row.path: row for row in catalog.current(
            partition, paths=[document["path"][0] for _, document in window])}
        done = len(window) <= request.limit
        for raw_score, document in window:
            score = min(1.0, raw_score / top) if top > 0 else 0.0
            if score < request.min_score:
                done = True
                break
            if len(hits) == request.limit:
                next_cursor = signer.sign({**binding, "version": version, "offset": position,
                                           "top": top, "v": CURSOR_VERSION, **({"merged": True} if overlay else {}),
                                           **({"named": _names_digest(named)} if named else {})})
                done = True
                break
            position += 1
            row = rows.get(document["path"][0])
            # A row can only be missing if the catalog moved on since the catch-up; never serve what is not
            # current, nor a claim that does not hold at the moment asked, nor a record the first page led with.
            if row is not None and row.view.valid_at(moment) and row.path not in named:
                hits.append(hit_of(store.store_id, row, document, snippets, score, marker))
    response: SearchAnswer = {"hits": hits}
    if next_cursor is not None:
        response["nextCursor"] = next_cursor
    return response


def passes_filters(row: RecordRow, request: SearchRequest) -> bool:
    """Whether ``row`` passes the kind, type and kinds filters ``build_query`` applies, for records found
    otherwise than by the query (hybrid's nearest vectors, the exact names)."""
    return ((request.kind is None or row.kind == request.kind) and (request.type is None or row.type == request.type)
            and (request.kinds is None or row.kind in request.kinds))


def named_hits(store_id: str, catalog: CatalogReads, searcher: tantivy.Searcher, schema: tantivy.Schema,
               partition: str, request: SearchRequest, moment: datetime, snippets: tantivy.SnippetGenerator,
               marker: Marker | None, overlay: Overlay | None = None) -> dict[str, SearchHit]:
    """For the owner's search (``request.names_first``), the hits of the current records whose title or an alias
    is exactly the query, of the kinds and type asked and valid at ``moment``, by path: at most ``request.limit``
    of them (newest first), each scored 1.0 as the best match there is.  A page's ranking may put such a record
    anywhere (a long note called "Ideas" below short ones that say "ideas" often); its first page leads with
    them and fills the rest from the ranking, which leaves them out on every page."""
    if not request.names_first:
        return {}
    name = request.query.strip()
    asked = set(lookup_keys(name))  # a lookup matches an id too: the promise is a title or an alias
    rows = [row for row in catalog.current(partition, record_ids=catalog.lookup(partition, name))
            if asked & set(record_name_keys(row.view)) and passes_filters(row, request) and row.view.valid_at(moment)]
    hits: dict[str, SearchHit] = {}
    for row in rows[:request.limit]:
        document = indexed_document(searcher, schema, row.path, overlay)
        if document is not None:
            hits[row.path] = hit_of(store_id, row, document, snippets, 1.0, marker)
    return hits


def indexed_document(searcher: tantivy.Searcher, schema: tantivy.Schema, path: str,
                     overlay: Overlay | None = None) -> tantivy.Document | None:
    """The search index's document of ``path``: the overlay's where it holds a revision the index has not
    committed, none where it masks the committed one (removed)."""
    if overlay is not None:
        fresh = next((document.stored for document in overlay.documents if document.path == path), None)
        if fresh is not None or path in overlay.masked:
            return fresh
    found = searcher.search(tantivy.Query.term_query(schema, "path", path), 1, count=False).hits
    return searcher.doc(found[0][1]) if found else None


def _names_digest(named: dict[str, SearchHit]) -> str | None:
    """What a cursor holds of the records its first page led with (their paths could outgrow a cursor)."""
    if not named:
        return None
    return hashlib.sha256("\n".join(sorted(named)).encode("utf-8")).hexdigest()[:32]


# How many of the partition's types a note about an unknown ``type`` lists, when none is close to it.
TYPES_LISTED = 12

# What a ``type`` is of each kind, in a note's words.
TYPE_WORDS = {"page": "page type", "claim": "claim kind", "relationship": "relationship type"}


def defined_types(ontology: Ontology) -> dict[str, tuple[str, ...]]:
    """The names ``type`` may take for each kind: the effective ontology's page types, claim kinds and relations."""
    return {"page": tuple(ontology.page_types), "claim": tuple(ontology.claim_kinds),
            "relationship": tuple(ontology.relation_types)}


def unknown_type_note(catalog: CatalogReads, partition: str, ontology: Ontology, type: str,
                      kind: str | None = None) -> str | None:
    """What to say about a ``type`` filter whose first page has no hit: nothing when the partition's effective
    ontology defines it for ``kind`` (any kind when None), since a defined type no record has yet is simply
    empty; else that the ontology does not define it, with the defined types and those records have that are
    closest to it (``Person``, ``persons``, ``preson``, the alias ``people``: did you mean ``person``), or the
    types records have."""
    defined = defined_types(ontology)
    kinds = [kind] if kind in defined else list(defined)
    if any(type in defined[name] for name in kinds):
        return None
    elsewhere = [name for name in defined if name not in kinds and type in defined[name]]
    if elsewhere:
        return (f"{type!r} is a {TYPE_WORDS[elsewhere[0]]}, not a {TYPE_WORDS[kinds[0]]}: search with kind "
                f"{elsewhere[0]!r}, or leave kind out")
    counts: dict[str, int] = {}
    for (record_kind, name), count in catalog.current_counts(partition).items():
        if name and record_kind in kinds:
            counts[name] = counts.get(name, 0) + count
    names = list(dict.fromkeys([name for kind_name in kinds for name in defined[kind_name]] + list(counts)))
    said = f"type {type!r} is not defined in this store's ontology"
    close = difflib.get_close_matches(type, names, n=3, cutoff=0.6)
    close += [name for name in names if name.lower() == type.lower() and name not in close]
    if "page" in kinds:  # a page type's alias (`people`) names it
        close += [name for name, page_type in ontology.page_types.items() if name not in close
                  and type.lower() in (alias.lower() for alias in page_type.aliases)]
    if close:
        return f"{said}; did you mean {' or '.join(map(repr, close))}?"
    if not counts:
        return f"{said}, and no record here has a type yet (knowledge_ontology lists the types it defines)"
    common = sorted(counts, key=lambda name: (-counts[name], name))[:TYPES_LISTED]
    more = f" and {len(counts) - len(common)} more" if len(counts) > len(common) else ""
    return f"{said}; types records have here: {', '.join(common)}{more} (knowledge_ontology lists the types it defines)"


def snippet_generator(searcher: tantivy.Searcher, schema: tantivy.Schema, terms: list[str],
                      request: SearchRequest) -> tantivy.SnippetGenerator:
    """Where a hit's snippet is cut: the passage of ``body`` that holds the query's words (the owner's marked
    words, ``request.marked``; an agent's query words), or the body's start when none of them is there.  The
    words are weighed by the ``text`` field's statistics (the body is kept, not analysed: build_schema), and the
    snippet is cut from the body given as that field (``hit_of``)."""
    words = sorted(request.marked if request.marked is not None else set(terms))
    query = tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(schema, "text", term))
                                         for term in words])
    snippets = tantivy.SnippetGenerator.create(searcher, query, schema, "text")
    snippets.set_max_num_chars(SNIPPET_CHARS)
    return snippets


def snippet_marker(analyzer: Analyzer, request: SearchRequest) -> Marker | None:
    """For the owner's search (``request.marked``), whether a snippet's word is one to mark; None for agents'."""
    return None if request.marked is None else query_marker(analyzer, request.marked)


def chosen_passage(snippets: tantivy.SnippetGenerator, body: str) -> str:
    """The passage of ``body`` (as written) that ``snippets`` choose, as written.

    tantivy reads the body as the index analyses it, where a Chinese or Japanese run is written out as its
    characters and pairs (several times its length, engine/index/analysis.py).  Where it did, the passage is
    taken from the body from a little before the first matched word of the fragment tantivy chose (from the
    start of its sentence when that is near), ``SNIPPET_CHARS`` wide with each wide character (Chinese, Japanese,
    their punctuation) counted twice, as it takes two letters' room, ended at a space where a spaced word would be
    cut."""
    prepared = prepare(body)
    snippet = snippets.snippet_from_doc(tantivy.Document(text=prepared))
    fragment = snippet.fragment()
    if len(prepared) == len(body) or not fragment:  # no such run: the text analysed is the body
        return fragment.strip()
    # tantivy's ranges count UTF-8 bytes of the text it was given, the highlights' from the fragment's start.
    at = snippet.fragment_range().start + min((span.start for span in snippet.highlighted()), default=0)
    start = raw_offset(body, len(prepared.encode("utf-8")[:at].decode("utf-8", errors="ignore")))
    for _ in range(PASSAGE_LEAD):
        if start == 0 or body[start - 1] in SENTENCE_ENDS:
            break
        start -= 1
    end, width = start, 0
    while end < len(body) and width < SNIPPET_CHARS:
        width += 2 if unicodedata.east_asian_width(body[end]) in "WF" else 1
        end += 1
    if end < len(body) and _cuts_word(body, end):
        space = max(body.rfind(" ", start, end), body.rfind("\n", start, end))
        end = space if space > start + SNIPPET_CHARS // 4 else end
    return body[start:end].strip()


# A Chinese or Japanese passage begins at most this many characters before its first matched word: at the start
# of its sentence or line when that is nearer.
PASSAGE_LEAD = 24
SENTENCE_ENDS = "\n。！？!?；;"


def _cuts_word(text: str, at: int) -> bool:
    """Whether ending ``text`` at ``at`` splits a spaced word (any place beside a Chinese or Japanese character
    is a boundary)."""
    before, after = text[at - 1], text[at]
    return before.isalnum() and after.isalnum() and not UNSPACED_RUN.match(before) and not UNSPACED_RUN.match(after)


def hit_of(store_id: str, row: RecordRow, document: tantivy.Document, snippets: tantivy.SnippetGenerator,
           score: float, marker: Marker | None = None) -> SearchHit | OwnerSearchHit:
    """The hit for ``document``; with a ``marker`` (the owner's search), an ``OwnerSearchHit``."""
    view = row.view
    kept = (document.get_first("body") or b"").decode("utf-8")
    body = kept.strip()
    snippet = _passage(kept, snippets)
    if marker is not None:
        # The owner reads the note's own words: the frontmatter an import kept at its end ("date: … source: …")
        # is the snippet only when the rest of the note holds none of the query's words (it is still searched).
        own = own_text(body).strip()
        if own and own != body and (_holds_query_words(own, snippets) or not _holds_query_words(body, snippets)):
            snippet, body = _passage(own, snippets), own
    hit: SearchHit = {
        **record_summary(row), "snippet": snippet, "score": round(score, 6),
        "assertionOrigin": view.assertion_origin, "attribution": view.attribution,
        "ref": reference(store_id, row),
    }
    if marker is not None:
        plain, highlights = owner_snippet(snippet, body, marker)
        return cast(OwnerSearchHit, {**hit, "snippet": plain, "highlights": highlights})
    return hit


def _passage(text: str, snippets: tantivy.SnippetGenerator) -> str:
    """The snippet of ``text``: the passage holding the query's words (``chosen_passage``), its start when it
    holds none; a text that fits is the snippet whole (tantivy's fragment would stop at the last word it holds)."""
    whole = text.strip()
    if len(whole) <= SNIPPET_CHARS:
        return whole
    return chosen_passage(snippets, text) or whole[:SNIPPET_CHARS]


def _holds_query_words(text: str, snippets: tantivy.SnippetGenerator) -> bool:
    """Whether ``text`` holds any of the query's words, read as the index analyses it."""
    return bool(snippets.snippet_from_doc(tantivy.Document(text=prepare(text))).highlighted())
