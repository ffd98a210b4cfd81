"""HTML for a record page: its header, the details beside the note, claims with evidence, and its links
(Links and Linked from).

Pure functions from engine answers (and, for times, ``now``) to HTML strings; every stored value is
escaped (stored text is data, never markup).  Links use three schemes the
record page handles itself: ``record:<id>``, ``source:<id>`` and ``tag:<tag>`` (the notes holding it).  Times are
said in ``now``'s zone, relative where that helps, the exact time in a
tooltip (``desktop/common/times.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote

from engine.vault.record_view import view_of

from ..common.times import ago, exact_time, local_now
from ..common.widgets import RECORD_SCHEME, SOURCE_SCHEME, esc
from .history import kept_again, revision_time, value_text, written_by

# Keys the details panel shows in its own words (or the header or the Claims tab does); any other key of the
# frontmatter is listed after them under its own name.
_SHOWN_ELSEWHERE = {"format", "id", "title", "revision", "kind", "type", "fields", "evidence", "recall", "valid_from",
                    "valid_to", "tags", "aliases", "recorded_at", "updated_at", "attribution", "lifecycle", "scope",
                    "claim_kind", "subject", "relation", "from", "to", "assertion_origin", "replaces"}
ASSERTION_ORIGINS = {"user": "the owner", "source": "a source", "agent_inference": "the agent's own inference"}


TAG_SCHEME = "tag"  # tag:<the tag, percent-encoded>: a tag of the record shown, a click lists the notes holding it
WEB_ADDRESS = re.compile(r"https?://[^\s<>\"]+")  # a field's value that is a web address: a link to it
ACRONYMS = {"url": "URL", "uri": "URI", "id": "ID", "doi": "DOI", "isbn": "ISBN", "pdf": "PDF"}


def record_link(record: dict[str, Any] | None, fallback: str = "") -> str:
    if not record or not record.get("id"):
        return esc(fallback or "(missing)")
    title = record.get("title") or record["id"]
    status = record.get("status")
    note = f' <span class="muted">({esc(status)})</span>' if status and status != "current" else ""
    return f'<a href="{RECORD_SCHEME}:{esc(record["id"])}">{esc(title)}</a>{note}'


def tag_link(tag: str) -> str:
    """A tag as a link that lists the notes holding it (``tag_of`` reads it back)."""
    return (f'<a class="tag" href="{TAG_SCHEME}:{esc(quote(tag, safe=""))}" title="List the notes tagged '
            f'#{esc(tag)}">#{esc(tag)}</a>')


def tag_of(path: str) -> str | None:
    """The tag a ``tag:`` link names (None when it names none)."""
    tag = unquote(path).strip()
    return tag or None


def when_html(value: Any, now: datetime) -> str:
    """``3 minutes ago`` in ``now``'s zone, the exact time in its tooltip."""
    return f'<span title="{esc(exact_time(value, now))}">{esc(ago(value, now))}</span>'


def header_html(record: dict[str, Any], now: datetime | None = None, version: dict[str, Any] | None = None) -> str:
    """The title, and one line: what the record is, its state when not current, and when it was last written.
    ``version``: History's row of the bytes shown, once known; an edit made outside the engine that kept the
    file's number is named and dated as History names and dates it (``1.1``, when the engine saw it)."""
    now = now or local_now()
    view = view_of(record.get("frontmatter") or {})
    detail = view.type or view.claim_kind or (relation_words(view.relation) if view.relation else "")
    status = record.get("status")
    state = f" · <b>{esc(status)}</b>" if status and status != "current" else ""
    updated = view.updated_at or view.recorded_at
    revision = record.get("revision")  # an invalid file may have none
    numbered = f' · <span class="muted">revision {esc(revision)}</span>' if revision is not None else ""
    if version is not None and kept_again(version):
        updated = revision_time(version)
        numbered = (f' · <span class="muted">revision {esc(version.get("label"))}, edited outside the engine'
                    "</span>")
    return (f"<h2>{esc(record.get('title') or record.get('id'))}</h2>"
            f"<div>{esc(record.get('kind'))}{' · ' + esc(detail) if detail else ''}{state}"
            f"{' · updated ' + when_html(updated, now) if updated else ''}"
            f"{numbered}</div>{validity_html(record)}")


def validity_html(record: dict[str, Any]) -> str:
    """A claim's interval (``valid_from`` to ``valid_to``), and whether it holds now; nothing for a record
    that holds always."""
    validity = view_of(record.get("frontmatter") or {}).validity
    if not validity.bounded:
        return ""
    bounds = [f"from {esc(validity.valid_from)}" if validity.valid_from else "",
              f"until {esc(validity.valid_to)} (inclusive)" if validity.valid_to else ""]
    holds = (record.get("validity") or {}).get("holds")
    state = "" if holds is None else " · holds now" if holds else " · <b>does not hold now</b>"
    return f'<div class="validity">Holds {" ".join(b for b in bounds if b)}{state}</div>'


def _value_html(value: Any, titles: dict[str, dict[str, Any]]) -> str:
    if isinstance(value, str) and value in titles:
        return record_link(titles[value], value)
    if isinstance(value, list):
        return ", ".join(_value_html(item, titles) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{esc(key)}: {_value_html(item, titles)}" for key, item in value.items())
    if isinstance(value, str) and WEB_ADDRESS.fullmatch(value):  # a conversation's address, a source's page
        return f'<a href="{esc(value)}">{esc(value)}</a>'
    return esc(value_text(value))


def label_of(key: str) -> str:
    """A frontmatter key as a label: ``next_review`` -> ``Next review``, ``url`` -> ``URL``."""
    words = [ACRONYMS.get(word.casefold(), word) for word in str(key).replace("_", " ").split()]
    label = " ".join(words)
    return label[:1].upper() + label[1:]


def details_html(record: dict[str, Any], links: dict[str, Any] | None, now: datetime | None = None) -> str:
    """The details beside the note: its properties in words (type, tags, aliases, when created and updated,
    who wrote it), its typed fields and other keys (names resolved to record links), its evidence, its
    recall approval and findings, and last, small, where it is kept."""
    now = now or local_now()
    view = view_of(record.get("frontmatter") or {})
    titles = {ref["record"]["id"]: ref["record"] for ref in (links or {}).get("references", [])
              if ref.get("record", {}).get("id")}
    titles.update((entry["id"], entry) for entry in _connected(links) if entry.get("id"))
    rows: list[tuple[str, str]] = []
    detail = relation_words(view.relation) if view.relation and view.detail == view.relation else view.detail
    kind = " · ".join(esc(part) for part in (record.get("kind"), detail) if part)  # "related to", never "related_to"
    if kind:
        rows.append(("Type", kind))
    if view.tags:
        rows.append(("Tags", " ".join(tag_link(tag) for tag in view.tags)))
    if view.aliases:
        rows.append(("Aliases", ", ".join(esc(alias) for alias in view.aliases)))
    if view.recorded_at:
        rows.append(("Created", when_html(view.recorded_at, now)))
    if view.updated_at and view.updated_at != view.recorded_at:
        rows.append(("Updated", when_html(view.updated_at, now)))
    author = written_by(view.attribution)
    if author:
        rows.append(("Written by", esc(author)))
    if record.get("status") and record.get("status") != "current":
        rows.append(("Status", f"<b>{esc(record['status'])}</b>"))
    if view.lifecycle and view.lifecycle != "active":
        rows.append(("Lifecycle", esc(view.lifecycle)))
    for key, label in (("subject", "About"), ("from", "From"), ("to", "To"), ("replaces", "Replaces")):
        if view.given(key):
            rows.append((label, _value_html(view.raw[key], titles)))
    if view.assertion_origin:
        rows.append(("Said by", esc(ASSERTION_ORIGINS.get(view.assertion_origin, view.assertion_origin))))
    rows += [(label_of(name), _value_html(value, titles)) for name, value in (view.fields or {}).items()]
    rows += [(label_of(key), _value_html(value, titles)) for key, value in view.raw.items()
             if key not in _SHOWN_ELSEWHERE]
    cells = "".join(f'<tr><td class="muted">{esc(label)}</td><td>{value}</td></tr>' for label, value in rows)
    parts = [f"<table>{cells}</table>"]
    evidence = (links or {}).get("evidence")
    if evidence:
        parts.append(f"<h3>Evidence ({len(evidence)})</h3>{evidence_html(evidence)}")
    recall = view.recall
    if recall is not None:
        parts.append(f"<h3>Approved for recall</h3><div>{esc(recall.get('summary'))}</div>"
                     f'<div class="muted">importance {esc(recall.get("importance"))}; triggers '
                     f"{esc(', '.join(recall.get('triggers') or []) or '-')}; projects "
                     f"{esc(', '.join(recall.get('projects') or []) or '-')}; approved by "
                     f"{esc(recall.get('approved_by'))} {when_html(recall.get('approved_at'), now)}</div>")
    findings = "".join(f"<li>{esc(f.get('severity', 'error'))}: {esc(f.get('message'))}</li>"
                       for f in record.get("findings") or [])
    if findings:
        parts.append(f"<h3>Findings</h3><ul>{findings}</ul>")
    parts.append(f'<p class="muted"><small>{esc(record.get("id"))}<br>{esc(record.get("path"))}<br>'
                 f'<span title="{esc(record.get("sha256"))}">sha256 {esc((record.get("sha256") or "")[:16])}…</span>'
                 "</small></p>")
    return "".join(parts)


def _connected(links: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The records a page's links name (a claim's subject, a relationship's ends), to show by their titles."""
    links = links or {}
    return [connection.get("record") or {} for connection in links.get("connections") or []] \
        + list(links.get("backlinks") or [])


def evidence_html(locators: list[dict[str, Any]]) -> str:
    if not locators:
        return '<div class="muted">no evidence cited</div>'
    items = []
    for locator in locators:
        where = f" lines {locator['lines'][0]}-{locator['lines'][1]}" if locator.get("lines") else ""
        kept = (f' <span class="muted">{esc(locator.get("mediaType"))}, {int(locator.get("size") or 0):,} bytes</span>'
                if locator.get("retainedPath") else ' <span class="muted">(not retained in this partition)</span>')
        quote = f'<div class="quote">“{esc(locator["quote"])}”</div>' if locator.get("quote") else ""
        # The original's own name where it has one (an imported note's ``Vault › Folder › Note.md``).
        name = esc(locator["filename"]) if locator.get("filename") else "open the retained original"
        lines = f"#{locator['lines'][0]}-{locator['lines'][1]}" if locator.get("lines") else ""  # opened there
        items.append(f'<li><a href="{SOURCE_SCHEME}:{esc(locator.get("source"))}{esc(lines)}">{name}</a>'
                     f"{esc(where)}{kept}{quote}</li>")
    return f"<ul>{''.join(items)}</ul>"


def claims_html(links: dict[str, Any]) -> str:
    parts = ["<h3>Evidence for this record</h3>", evidence_html(links.get("evidence") or [])]
    claims = links.get("claims") or []
    parts.append(f"<h3>Claims about this record ({len(claims)})</h3>")
    if not claims:
        parts.append('<div class="muted">none</div>')
    for claim in claims:
        parts.append(f"<p>{record_link(claim)} "
                     f'<span class="muted">{esc(claim.get("claimKind"))}, said by the '
                     f"{esc(claim.get('assertionOrigin'))}, revision {esc(claim.get('revision'))}</span></p>")
        parts.append(evidence_html(claim.get("evidence") or []))
    if links.get("truncated"):
        parts.append('<p class="muted">Only the first 500 records that name this one are shown.</p>')
    return "".join(parts)


@dataclass
class Linked:
    """One record a page links to (or is linked from), with every way it is linked: a relationship's
    relation (``via`` that relationship record) or the name of a field that holds the id."""

    record: dict[str, Any]
    ways: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)
    current: bool = True  # False when every way goes through a record that is no longer current


def relation_words(relation: Any) -> str:
    """``related_to`` as owners say it: "related to"."""
    return str(relation or "linked").replace("_", " ")


def page_links(links: dict[str, Any]) -> tuple[list[Linked], list[Linked]]:
    """(the records this one links to, the records linked to it), each record once.

    Outgoing: the relationships from it and the records its fields name (a relationship's own ends, a
    claim's subject, ``replaces``, typed fields).  Incoming: the relationships to it and the records whose
    fields name it.  Claims about it are listed with their evidence, not here.  A relationship, or a record
    naming it, that is no longer current (withdrawn, superseded, historical) leaves the count: such a
    record is listed apart (``current`` False) when nothing current links the same way.
    """
    outgoing: dict[str, Linked] = {}
    incoming: dict[str, Linked] = {}

    def add(found: dict[str, Linked], record: dict[str, Any] | None, way: str, via: dict[str, Any] | None,
            current: bool) -> None:
        record = record or {}
        key = record.get("id") or f"missing:{len(found)}"
        entry = found.get(key)
        if entry is None:
            entry = found[key] = Linked(record, current=current)
        elif current and not entry.current:
            entry.current, entry.ways = True, []  # what is current replaces what no longer is
        elif entry.current and not current:
            return
        if (way, via) not in entry.ways:
            entry.ways.append((way, via))

    for connection in links.get("connections") or []:
        via = connection.get("via") or {}
        target = incoming if connection.get("direction") == "in" else outgoing
        add(target, connection.get("record"), relation_words(connection.get("relation")), via,
            via.get("status", "current") == "current")
    for reference in links.get("references") or []:
        add(outgoing, reference.get("record"), str(reference.get("field") or "").removeprefix("fields."), None,
            True)
    for back in links.get("backlinks") or []:
        add(incoming, back, ", ".join(back.get("fields") or []), None, back.get("status", "current") == "current")
    return list(outgoing.values()), list(incoming.values())


def _linked_html(entries: list[Linked]) -> str:
    rows = []
    for entry in entries:
        ways = "; ".join(f"{esc(way)}" + (f' (<a href="{RECORD_SCHEME}:{esc(via["id"])}">link record</a>)'
                                          if via and via.get("id") else "") for way, via in entry.ways)
        rows.append(f'<div>{record_link(entry.record)} <span class="muted">{ways}</span></div>')
    return "".join(rows) or '<div class="muted">none</div>'


def by_title(entry: Linked) -> tuple[bool, str]:
    """A listed record's place: by title as the owner reads it (whatever order the links were written in),
    a record with no title last."""
    title = str(entry.record.get("title") or "")
    return (not title, title.casefold())


def links_html(links: dict[str, Any]) -> str:
    """The Links tab: the records this one links to, and the records linked to it, each once, by title."""
    outgoing, incoming = page_links(links)
    parts = []
    for heading, entries in (("Links", outgoing), ("Linked from", incoming)):
        entries = sorted(entries, key=by_title)
        current = [entry for entry in entries if entry.current]
        former = [entry for entry in entries if not entry.current]
        parts.append(f"<h3>{heading} ({len(current)})</h3>{_linked_html(current)}")
        if former:
            parts.append(f'<p class="muted">No longer current ({len(former)}):</p>{_linked_html(former)}')
    if links.get("truncated"):
        parts.append('<p class="muted">Only the first 500 records that name this one are read.</p>')
    return "".join(parts)


def change_request_message(agent: str, record: dict[str, Any]) -> str:
    """The message the owner pastes into the agent's chat: the exact record, revision and content hash; for a
    page, the parameters that revise exactly the version shown (an edit made since is refused, not replaced)."""
    revision, sha256 = record.get("revision"), record.get("sha256")
    on_it = (f" of this very version (knowledge_save_page with expectedRevision {revision} and expectedSha256 "
             f"{sha256})" if record.get("kind") == "page" else "")
    return (f"Change request for Knowledge record {record.get('id')} \"{record.get('title')}\" "
            f"(revision {revision}, sha256 {sha256}), as the desktop showed it "
            f"from {agent}'s private partition. Please make this change and publish the next revision{on_it}: ")
