"""A record's body as HTML: CommonMark (markdown-it-py), made safe, with links to other records.

Stored text is data, so the renderer never lets it act:

- raw HTML is escaped, not passed through (``html`` off);
- images are never loaded: an image becomes its alt text and address in
  words (the browser's ``loadResource`` refuses every resource as well);
- a link is kept only for ``http``, ``https`` and ``mailto`` addresses and
  for records; any other scheme (``file:``, ``javascript:``, ``data:`` ...)
  stays plain text.

Links to other records: ``[[target]]`` and ``[[target|label]]`` name a
record by id or by title, and an id as the engine makes them (``pg_`` and a
ULID, say) written in the text is a link too.  A target the page already
knows (a record this one names, or one that names it) links straight to
its id; any other title becomes a ``wikilink:`` link, which the record page
resolves with a search when it is clicked.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, unquote

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

from engine.core.ids import CLAIM_PREFIX, PAGE_PREFIX, RELATIONSHIP_PREFIX, is_generated_id, is_record_id

from ..common.widgets import RECORD_SCHEME, esc

WIKILINK_SCHEME = "wikilink"
ALLOWED_SCHEMES = ("http:", "https:", "mailto:", f"{RECORD_SCHEME}:")
WIKILINK = re.compile(r"\[\[([^\[\]|\n]{1,200})(?:\|([^\[\]\n]{1,200}))?\]\]")
MENTIONED_ID = re.compile(rf"\b(?:{PAGE_PREFIX}|{CLAIM_PREFIX}|{RELATIONSHIP_PREFIX})_[0-9A-HJKMNP-TV-Z]{{26}}\b")

Known = dict[str, dict[str, Any]]  # what a target may name (an id, or a title in lower case) -> the record


def known_records(links: dict[str, Any] | None) -> Known:
    """Every record the page's links name, by id and by lower-case title."""
    found: list[dict[str, Any]] = []
    links = links or {}
    found.extend(ref.get("record") or {} for ref in links.get("references") or [])
    found.extend(links.get("backlinks") or [])
    found.extend(links.get("claims") or [])
    for connection in links.get("connections") or []:
        found.extend((connection.get("record") or {}, connection.get("via") or {}))
    known: Known = {}
    for record in found:
        if record.get("id"):
            known.setdefault(record["id"], record)
            if record.get("title"):
                known.setdefault(str(record["title"]).casefold(), record)
    return known


def _wikilink_rule(state: StateInline, silent: bool) -> bool:
    if not state.src.startswith("[[", state.pos):
        return False
    match = WIKILINK.match(state.src, state.pos)
    if match is None:
        return False
    if not silent:
        token = state.push("wikilink", "", 0)
        token.meta = {"target": match.group(1).strip(), "label": (match.group(2) or "").strip()}
    state.pos = match.end()
    return True


def _mentioned_ids_rule(state: StateCore) -> None:
    """Split generated record ids out of running text (never inside a link) into record links."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        in_link = 0
        for token in block.children:
            in_link += {"link_open": 1, "link_close": -1}.get(token.type, 0)
            if token.type != "text" or in_link or not MENTIONED_ID.search(token.content):
                children.append(token)
                continue
            at = 0
            for match in MENTIONED_ID.finditer(token.content):
                if not is_generated_id(match.group(0)):
                    continue
                if match.start() > at:
                    children.append(_text(token.content[at:match.start()], token.level))
                link = Token("wikilink", "", 0, level=token.level)
                link.meta = {"target": match.group(0), "label": ""}
                children.append(link)
                at = match.end()
            if at < len(token.content):
                children.append(_text(token.content[at:], token.level))
        block.children = children


def _text(content: str, level: int) -> Token:
    token = Token("text", "", 0, level=level)
    token.content = content
    return token


def _validate_link(url: str) -> bool:
    return url.strip().lower().startswith(ALLOWED_SCHEMES)


class _BodyRenderer(RendererHTML):
    """markdown-it's HTML renderer, with images in words and record links resolved against ``env["known"]``."""

    def image(self, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        alt = "".join(child.content for child in token.children or [])
        where = str(token.attrGet("src") or "")
        return (f'<span class="muted">[image{": " + esc(alt) if alt else ""}'
                f'{" (" + esc(where) + ")" if where else ""}, not shown]</span>')

    def wikilink(self, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        target, label = tokens[idx].meta["target"], tokens[idx].meta["label"]
        known: Known = env.get("known") or {}
        record = known.get(target) or known.get(target.casefold())
        if record is not None:
            shown = label or (target if target != record["id"] else record.get("title") or target)
            return f'<a href="{RECORD_SCHEME}:{esc(record["id"])}">{esc(shown)}</a>'
        if is_generated_id(target):
            return f'<a href="{RECORD_SCHEME}:{esc(target)}">{esc(label or target)}</a>'
        return f'<a href="{WIKILINK_SCHEME}:{esc(quote(target, safe=""))}">{esc(label or target)}</a>'


def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False},
                        renderer_cls=_BodyRenderer)
    parser.enable(["table", "strikethrough"])
    parser.validateLink = _validate_link  # type: ignore[method-assign]
    parser.inline.ruler.before("link", "wikilink", _wikilink_rule)
    parser.core.ruler.after("inline", "mentioned_ids", _mentioned_ids_rule)
    return parser


PARSER = _parser()  # holds no state between renders: what a body may link to comes in its env


def body_html(text: str, known: Known | None = None) -> str:
    """The body's Markdown as safe HTML, record links resolved against ``known`` (see ``known_records``)."""
    return PARSER.render(text or "", {"known": known or {}})


def wikilink_target(path: str) -> str | None:
    """The id or title a ``wikilink:`` link names (None when it names nothing)."""
    target = unquote(path).strip()
    return target or None


def names_an_id(target: str) -> bool:
    """Whether a wikilink target can be a record id (else it can only be a title)."""
    return is_record_id(target)
