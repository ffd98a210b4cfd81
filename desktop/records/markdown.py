"""A record's body as HTML: CommonMark (markdown-it-py), made safe, with links to other records.

Stored text is data, so the renderer never lets it act:

- raw HTML is escaped, not passed through (``html`` off);
- images are never loaded: an image becomes its alt text and address in
  words (the browser's ``loadResource`` refuses every resource as well);
- a link is kept only for ``http``, ``https`` and ``mailto`` addresses and
  for records; any other scheme (``file:``, ``javascript:``, ``data:`` ...)
  stays plain text.  A Markdown link to a path in the vault
  (``[2.4 中断](2.4%20中断.md)``, ``[链接器](../02%20arm/1.3%20链接器脚本.md#用法)``,
  the links Obsidian writes with wikilinks turned off) links to the note it
  names, as ``[[...]]`` does; one to another file of the vault is its label;
  a Markdown image of the vault (``![](../photo/a.png)``) is not loaded and
  reads ``[image]`` as an embedded one does.

Links to other records: ``[[target]]`` and ``[[target|label]]`` name a
record by id or by title (``[[target#Heading]]`` a part of it, shown as
``target › Heading``), and an id as the engine makes them (``pg_`` and a
ULID, say) written in the text is a link too.  A target the page already
knows (a record this one names, or one that names it) links straight to
its id; any other title becomes a ``wikilink:`` link, which the record page
resolves with a search when it is clicked.  A link to a heading of the note
itself (``[[#Supported types]]``) is a ``heading:`` link to an anchor each
heading carries, which the record page scrolls to.

Obsidian's own syntax is shown as what it means, never as markup:

- a callout (``> [!warning] Title`` and the quote's other lines) is a box
  in its kind's colour, titled with its title (else its kind), in colours
  for the palette in force;
- an embed (``![[Note]]``) says that the note embeds that note, with a
  link to it; an embedded image or file (``![[diagram.png]]``) is not
  loaded: it reads ``[image]`` or ``[file]`` where it stands, and one line
  beneath the body names them all (a note of icons said so in every list item);
  an embedded Obsidian Base (``![[Books.base#View]]``, a table of notes)
  reads ``[base: Books, view View]``, never a link to a note of that name;
- a block id (``^id`` ending a paragraph or list item, the anchor of a
  ``[[Note#^id]]`` link) is not shown, as Obsidian shows none;
- a YAML block at the very start of a body (frontmatter an import left in
  the text) is not shown: the record's own fields are beside the body.
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
from engine.core.attachments import BASE_SUFFIX, FILE_SUFFIXES, IMAGE_SUFFIXES
from engine.core.words import counted

from ..common.widgets import RECORD_SCHEME, esc, is_dark

WIKILINK_SCHEME = "wikilink"
HEADING_SCHEME = "heading"  # heading:<key>, a heading of the note shown (``heading_key``)
ALLOWED_SCHEMES = ("http:", "https:", "mailto:", f"{RECORD_SCHEME}:")
WIKILINK = re.compile(r"\[\[([^\[\]|\n]{1,200})(?:\|([^\[\]\n]{1,200}))?\]\]")
CALLOUT = re.compile(r"\[!([A-Za-z][\w-]{0,40})\]([+-]?)[ \t]*(.*)")
FRONTMATTER = re.compile(r"\A\ufeff?---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
YAML_LINE = re.compile(r"(?:[\w.\- \"']{1,80}:(?:\s|$)|\s*- |\s+\S|#)")

# A callout's kind (Obsidian's names and aliases) -> its title and accent colour on a light and a dark palette.
CALLOUT_KINDS = {
    "note": ("Note", "#0969da", "#58a6ff"), "info": ("Info", "#0969da", "#58a6ff"),
    "todo": ("To do", "#0969da", "#58a6ff"),
    "abstract": ("Abstract", "#1b7c83", "#39c5cf"), "summary": ("Summary", "#1b7c83", "#39c5cf"),
    "tldr": ("TL;DR", "#1b7c83", "#39c5cf"),
    "tip": ("Tip", "#1b7c83", "#39c5cf"), "hint": ("Hint", "#1b7c83", "#39c5cf"),
    "important": ("Important", "#1b7c83", "#39c5cf"),
    "success": ("Success", "#1a7f37", "#3fb950"), "check": ("Check", "#1a7f37", "#3fb950"),
    "done": ("Done", "#1a7f37", "#3fb950"),
    "question": ("Question", "#9a6700", "#d29922"), "help": ("Help", "#9a6700", "#d29922"),
    "faq": ("FAQ", "#9a6700", "#d29922"),
    "warning": ("Warning", "#bc4c00", "#f0883e"), "caution": ("Caution", "#bc4c00", "#f0883e"),
    "attention": ("Attention", "#bc4c00", "#f0883e"),
    "failure": ("Failure", "#cf222e", "#f85149"), "fail": ("Fail", "#cf222e", "#f85149"),
    "missing": ("Missing", "#cf222e", "#f85149"), "danger": ("Danger", "#cf222e", "#f85149"),
    "error": ("Error", "#cf222e", "#f85149"), "bug": ("Bug", "#cf222e", "#f85149"),
    "example": ("Example", "#8250df", "#a371f7"),
    "quote": ("Quote", "#6e7781", "#8b949e"), "cite": ("Quote", "#6e7781", "#8b949e"),
}
# A Logseq property line, ``key:: value`` (a page's at its top, a block's under its bullet); ``id::`` and
# ``collapsed::`` are Logseq's own bookkeeping, which it never shows.
PROPERTY_LINE = re.compile(r"[ \t]*([A-Za-z][\w-]{0,60})::(?:[ \t]|$)")
HIDDEN_PROPERTIES = ("id", "collapsed")
# A Logseq drawer (a task's clock), hidden as Logseq hides it.
DRAWER_OPEN = re.compile(r"[ \t]*:(?:LOGBOOK|logbook|PROPERTIES|properties):[ \t]*")
DRAWER_CLOSE = re.compile(r"[ \t]*:END:[ \t]*")
OUTLINE_FIRST_LINE = re.compile(r"\s*[-*] ")  # a Logseq outline's bullet, indented under a heading
BLOCK_ID = re.compile(r"(?:^|[ \t])\^[A-Za-z0-9-]{1,80}[ \t]*$")
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


def _embed_rule(state: StateInline, silent: bool) -> bool:
    """``![[target]]`` (before the image rule, which would read it as an image with a link for alt text)."""
    if not state.src.startswith("![[", state.pos):
        return False
    match = WIKILINK.match(state.src, state.pos + 1)
    if match is None:
        return False
    if not silent:
        token = state.push("embed", "", 0)
        token.meta = {"target": match.group(1).strip(), "label": (match.group(2) or "").strip()}
    state.pos = match.end()
    return True


def _callouts_rule(state: StateCore) -> None:
    """Mark each quote whose first line is ``[!kind] Title`` as a callout, that line taken out of its text."""
    tokens = state.tokens
    for at, token in enumerate(tokens[:-2]):
        if token.type != "blockquote_open" or tokens[at + 1].type != "paragraph_open" \
                or tokens[at + 2].type != "inline":
            continue
        first, _, rest = tokens[at + 2].content.partition("\n")
        match = CALLOUT.fullmatch(first.strip())
        if match is None:
            continue
        close = next((later for later in tokens[at + 1:]
                      if later.type == "blockquote_close" and later.level == token.level), None)
        if close is None:
            continue
        kind = match.group(1).lower()
        token.meta = close.meta = {"callout": kind, "title": match.group(3).strip()}
        tokens[at + 2].content = rest
        if not rest.strip():  # only the title line: no empty paragraph under it
            tokens[at + 1].hidden = True
            following = next(later for later in tokens[at + 3:] if later.type == "paragraph_close")
            following.hidden = True


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


def _block_ids_rule(state: StateCore) -> None:
    """Take the block id (`` ^id``) off the end of each line of a paragraph or list item, and a line that is
    only one (with the break before it)."""
    breaks = ("softbreak", "hardbreak")
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children = block.children
        kept: list[Token] = []
        for at, token in enumerate(children):
            ends_line = at + 1 == len(children) or children[at + 1].type in breaks
            match = BLOCK_ID.search(token.content) if token.type == "text" and ends_line else None
            starts_line = at == 0 or children[at - 1].type in breaks
            if match is None or (match.start() == 0 and not match.group(0)[0].isspace() and not starts_line):
                kept.append(token)  # ``x^2`` or ``*word*^note``: a caret in running text, not an id
                continue
            token.content = token.content[:match.start()]
            if token.content:
                kept.append(token)
            elif kept and kept[-1].type in breaks:
                kept.pop()  # the line was only the id: no break left before nothing
        block.children = kept


def _outline_rule(state: StateCore) -> None:
    """An outline indented right under a heading (Logseq writes a page's first block ``# Title`` and its children a tab
    in: ``\t- See [[x]]``) as the nested list it is, not as code: CommonMark reads lines indented under a heading
    as an indented code block, which showed every such page's outline as one grey block of markup.  Code
    indented after a blank line stays code, as Obsidian shows it."""
    tokens: list[Token] = []
    for at, token in enumerate(state.tokens):
        heading = state.tokens[at - 3] if at >= 3 and state.tokens[at - 1].type == "heading_close" else None
        if token.type == "code_block" and heading is not None and heading.map and token.map \
                and heading.map[1] == token.map[0] and OUTLINE_FIRST_LINE.match(token.content):
            nested: list[Token] = []
            state.md.block.parse(token.content, state.md, state.env, nested)
            for inner in nested:
                inner.level += token.level
            tokens += nested
        else:
            tokens.append(token)
    state.tokens = tokens


def _properties_rule(state: StateCore) -> None:
    """Each Logseq ``key:: value`` line of a paragraph or list item on a line of its own (Markdown would run
    them together as one line of text), its key muted; ``id::`` and ``collapsed::`` lines and ``:LOGBOOK:`` ...
    ``:END:`` drawers (a task's clock) left out, as Logseq leaves them out."""
    breaks = ("softbreak", "hardbreak")
    for block in state.tokens:
        if block.type != "inline" or not block.children or ("::" not in block.content
                                                             and ":END:" not in block.content):
            continue
        lines: list[list[Token]] = [[]]
        for token in block.children:
            if token.type in breaks:
                lines.append([])
            else:
                lines[-1].append(token)
        kept: list[tuple[bool, list[Token]]] = []  # each line shown, and whether it is a property's
        in_drawer = False
        for line in lines:
            first = line[0] if line else None
            whole = "".join(token.content for token in line)
            if in_drawer or (len(line) == 1 and DRAWER_OPEN.fullmatch(whole)):
                in_drawer = not DRAWER_CLOSE.fullmatch(whole)
                continue
            match = PROPERTY_LINE.match(first.content) if first is not None and first.type == "text" else None
            if match is not None and match.group(1).lower() in HIDDEN_PROPERTIES:
                continue
            if match is not None:
                key = Token("html_inline", "", 0, level=first.level)
                key.content = f'<span class="muted">{esc(match.group(1))}:</span> '
                first.content = first.content[match.end():]
                line = [key, *line]
            kept.append((match is not None, line))
        children: list[Token] = []
        for at, (is_property, line) in enumerate(kept):
            if at:  # a property's line stands on its own; other lines join as Markdown joins them
                joined = is_property or kept[at - 1][0]
                children.append(Token("hardbreak" if joined else "softbreak", "br" if joined else "", 0,
                                      level=block.level))
            children += line
        block.children = children


def _text(content: str, level: int) -> Token:
    token = Token("text", "", 0, level=level)
    token.content = content
    return token


def _validate_link(url: str) -> bool:
    return url.strip().lower().startswith(ALLOWED_SCHEMES) or in_vault(url)


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_SUFFIX = re.compile(r"[A-Za-z0-9]{1,8}")  # a file's type after its name's last "."


def in_vault(url: str) -> bool:
    """Whether a Markdown link's address is a path in the vault (``2.4%20中断.md``, ``../photo/a.png``) or a
    heading of the note (``#Setup``): no scheme, not from the disk's root."""
    url = url.strip()
    return bool(url) and _SCHEME.match(url) is None and not url.startswith(("/", "\\"))


def vault_target(url: str) -> str | None:
    """What a Markdown link to a path in the vault names as ``[[...]]`` would: the note's path without ``.md``
    (``../02 arm/1.3 链接器脚本#用法``), ``#Heading`` for a heading of the note; None for another file."""
    path, _, part = unquote(url.strip()).partition("#")
    name = path[:-3] if path.lower().endswith(".md") else path
    suffix = name.rsplit("/", 1)[-1].rpartition(".")[2] if "." in name.rsplit("/", 1)[-1] else ""
    if _SUFFIX.fullmatch(suffix) and not suffix.isdigit() and not path.lower().endswith(".md"):
        return None  # a picture, a PDF: not a note ("v2.0" or "2.4 中断" is a note's name)
    return f"{name}#{part}" if part else name


def split_target(target: str) -> tuple[str, str]:
    """``Note#Heading`` (or ``Note#^block``) -> (``Note``, ``Heading``): the record named, and the part of it."""
    name, _, part = target.partition("#")
    if not part and "^" in name:
        name, _, part = name.partition("^")
    return name.strip(), part.strip().lstrip("^")


def _blend(colour: str, base: str, share: float) -> str:
    """``colour`` laid over ``base`` at ``share`` opacity, as ``#rrggbb``."""
    mixed = (round(int(colour[i:i + 2], 16) * share + int(base[i:i + 2], 16) * (1 - share)) for i in (1, 3, 5))
    return "#" + "".join(f"{value:02x}" for value in mixed)


def callout_colours(kind: str, dark: bool) -> tuple[str, str, str]:
    """(title, accent, background) of a callout of ``kind``: an unknown kind is titled by its name, in blue."""
    title, light_accent, dark_accent = CALLOUT_KINDS.get(kind, (kind.replace("-", " ").capitalize(),
                                                                *CALLOUT_KINDS["note"][1:]))
    accent = dark_accent if dark else light_accent
    return title, accent, _blend(accent, "#252525" if dark else "#ffffff", 0.18 if dark else 0.09)


def strip_frontmatter(text: str) -> str:
    """``text`` without a YAML block at its very start (every line of it a key, a list item or indented)."""
    match = FRONTMATTER.match(text)
    if match is None:
        return text
    lines = [line for line in match.group(1).splitlines() if line.strip()]
    return text[match.end():] if lines and all(YAML_LINE.match(line) for line in lines) else text


class _BodyRenderer(RendererHTML):
    """markdown-it's HTML renderer, with images in words and record links resolved against ``env["known"]``."""

    def image(self, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        alt = "".join(child.content for child in token.children or [])
        where = str(token.attrGet("src") or "")
        if in_vault(where):  # a picture of the vault, as an embedded one: named once, beneath the body
            env.setdefault("unshown", {}).setdefault("image", []).append(
                unquote(where.partition("#")[0]).rsplit("/", 1)[-1])
            return '<span class="muted">[image]</span>'
        return (f'<span class="muted">[image{": " + esc(alt) if alt else ""}'
                f'{" (" + esc(where) + ")" if where else ""}, not shown]</span>')

    def link_open(self, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        """A link to a path in the vault as a link to the note it names (a ``[[...]]``'s), one to another
        file of the vault as its label alone; any other link as markdown-it writes it."""
        href = str(tokens[idx].attrGet("href") or "")
        closing = env.setdefault("closing", [])
        if not in_vault(href):
            closing.append("</a>")
            return super().renderToken(tokens, idx, options, env)
        target = vault_target(href)
        opened = _record_link(target, "\0", env.get("known") or {}) if target is not None else "<span>\0</span>"
        tag, _, end = opened.partition("\0")
        closing.append(end)
        return tag

    def link_close(self, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        closing = env.get("closing") or []
        return closing.pop() if closing else "</a>"

    def wikilink(self, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        return _record_link(tokens[idx].meta["target"], tokens[idx].meta["label"], env.get("known") or {})

    def embed(self, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        target, label = tokens[idx].meta["target"], tokens[idx].meta["label"]
        name = split_target(target)[0]
        if name.lower().endswith(BASE_SUFFIX):   # an Obsidian Base: a table of notes the window does not draw
            view = split_target(target)[1]
            return (f'<span class="muted">[base: {esc(name.rsplit("/", 1)[-1][:-len(BASE_SUFFIX)])}'
                    f'{", view " + esc(view) if view else ""}]</span>')
        if name.lower().endswith(IMAGE_SUFFIXES + FILE_SUFFIXES):
            what = "image" if name.lower().endswith(IMAGE_SUFFIXES) else "file"
            env.setdefault("unshown", {}).setdefault(what, []).append(name)
            return f'<span class="muted">[{what}]</span>'   # named once, beneath the body (unshown_html)
        link = _record_link(target, "" if label.isdigit() else label, env.get("known") or {})
        return f'<span class="embed">[embeds the note {link}]</span>'

    def heading_open(self, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        """The heading, with the anchor a ``[[#Heading]]`` of the note scrolls to."""
        key = heading_key(tokens[idx + 1].content if idx + 1 < len(tokens) else "")
        anchor = f'<a name="{heading_anchor(key)}"></a>' if key else ""
        return super().renderToken(tokens, idx, options, env) + anchor

    def blockquote_open(self, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        kind = tokens[idx].meta.get("callout") if tokens[idx].meta else None
        if kind is None:
            return super().renderToken(tokens, idx, options, env)
        title, accent, background = callout_colours(kind, bool(env.get("dark")))
        shown = tokens[idx].meta["title"] or title
        return (f'<table class="callout callout-{esc(kind)}" width="100%" cellspacing="0" cellpadding="8" '
                f'border="1" bgcolor="{background}" style="border-color: {accent}; '
                f'background-color: {background}; border-style: solid; margin: 6px 0;"><tr><td>'
                f'<p style="color: {accent};"><b>{esc(shown)}</b>'
                f'{"" if shown == title else f" <small>({esc(title)})</small>"}</p>')

    def blockquote_close(self, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        if tokens[idx].meta and tokens[idx].meta.get("callout"):
            return "</td></tr></table>\n"
        return super().renderToken(tokens, idx, options, env)


def _record_link(target: str, label: str, known: Known) -> str:
    """A link to the record ``target`` names (by id or title, ``#part`` after it), shown as ``label`` if any."""
    name, part = split_target(target)
    key = "" if part.startswith("^") else heading_key(part)  # the heading linked to (a block has no anchor)
    if not name:  # a heading of this very note
        if not key:
            return f"<span>{esc(label or part)}</span>"
        return f'<a href="{HEADING_SCHEME}:{key}">{esc(label or part)}</a>'
    shown = label or (f"{name} › {part}" if part else "")
    at = f"#{key}" if key else ""
    record = known.get(name) or known.get(name.casefold())
    if record is not None:
        shown = shown or (name if name != record["id"] else record.get("title") or name)
        return f'<a href="{RECORD_SCHEME}:{esc(record["id"])}{at}">{esc(shown)}</a>'
    if is_generated_id(name):
        return f'<a href="{RECORD_SCHEME}:{esc(name)}{at}">{esc(shown or name)}</a>'
    return f'<a href="{WIKILINK_SCHEME}:{esc(quote(name, safe=""))}{at}">{esc(shown or name)}</a>'


def heading_key(text: str) -> str:
    """A heading's anchor key: its words in lower case joined by "-" (``[[#supported types]]`` finds
    ``## Supported types``, as Obsidian's does); "" for a heading of no words."""
    return "-".join(re.findall(r"\w+", text.casefold()))


def heading_anchor(key: str) -> str:
    """The name of the anchor of the heading whose key is ``key`` (what the record page scrolls to)."""
    return f"{HEADING_SCHEME}-{key}"


def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False},
                        renderer_cls=_BodyRenderer)
    parser.enable(["table", "strikethrough"])
    parser.validateLink = _validate_link  # type: ignore[method-assign]
    parser.inline.ruler.before("link", "wikilink", _wikilink_rule)
    parser.inline.ruler.before("image", "embed", _embed_rule)
    parser.core.ruler.after("block", "outline", _outline_rule)
    parser.core.ruler.after("outline", "callouts", _callouts_rule)
    parser.core.ruler.after("inline", "mentioned_ids", _mentioned_ids_rule)
    parser.core.ruler.after("mentioned_ids", "block_ids", _block_ids_rule)
    parser.core.ruler.after("block_ids", "properties", _properties_rule)
    return parser


PARSER = _parser()  # holds no state between renders: what a body may link to comes in its env

FIRST_PART_CHARS = 8_000  # a long body's first part: more than a page's first screen holds
PART_CHARS = 16_000  # each later part: about 10 ms of parsing on a 2-core machine
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}(?=[^`]*$)|~{3,})")  # a backtick fence's info string has no backtick
_HEADING_LINE = re.compile(r"#{1,6}(?:[ \t]|\r?$)")  # an ATX heading at the line's very start
_REFERENCE = re.compile(r"^ {0,3}\[[^\]\n]+\]:", re.M)  # a link reference definition: any part may use it
_LINE = re.compile(r"[^\n]*\n|[^\n]+")


def parse_part(text: str) -> list[Token]:
    """Markdown parsed as it is (``parse_body``'s work, the frontmatter already off)."""
    return PARSER.parse(text, {})


def parse_body(text: str) -> list[Token]:
    """The body's Markdown parsed, a YAML block at its start taken off: what ``render_body`` makes HTML of.

    Parsing is most of the cost of a long note (a 200 KB note's is several times its rendering), and what
    a body's links resolve to does not change it: a page parses its body once and renders it again as
    its links arrive or the palette changes."""
    return parse_part(strip_frontmatter(text or ""))


def body_parts(text: str, first: int = FIRST_PART_CHARS, size: int = PART_CHARS) -> list[str]:
    """The body (its frontmatter off) cut into parts that parse and render, one after the other, as the whole
    does: the first about ``first`` characters, the others about ``size``.  A part ends only before a heading
    at a line's start after a blank line, outside a fenced code block: such a heading closes every list,
    quote and paragraph before it.  A body with no such heading, or with a link reference definition
    (``[name]: address``, usable from anywhere in it), is one part."""
    text = strip_frontmatter(text or "")
    if len(text) <= first or _REFERENCE.search(text):
        return [text]
    parts: list[str] = []
    start = at = 0
    fence: str | None = None  # the open fenced code block's fence (``` or ~~~, as long as it was)
    blank = True  # the line before was blank
    for line in _LINE.finditer(text):
        content = line.group()
        if fence is not None:
            if re.fullmatch(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*", content.rstrip("\r\n")):
                fence = None
        elif opened := _FENCE_OPEN.match(content.rstrip("\r\n")):
            fence = opened.group(1)
        elif blank and _HEADING_LINE.match(content) and at - start >= (size if parts else first):
            parts.append(text[start:at])
            start = at
        blank = not content.strip()
        at = line.end()
    return [*parts, text[start:]]


class BodyParse:
    """A body parsed a part at a time (``body_parts``): a long note's first part is shown while the rest is
    parsed, a part between the window's events."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.parts = body_parts(text)
        self.tokens: list[list[Token]] = []  # the parts parsed so far

    @property
    def done(self) -> bool:
        return len(self.tokens) == len(self.parts)

    def parse_next(self) -> None:
        """Parse the next part (nothing when all are parsed)."""
        if not self.done:
            self.tokens.append(parse_part(self.parts[len(self.tokens)]))

    def parse_all(self) -> None:
        while not self.done:
            self.parse_next()

    def render(self, known: Known | None = None, *, dark: bool | None = None) -> str:
        """The parts parsed so far as ``render_body`` makes the whole (what the images and files embedded are
        is said beneath the last part only)."""
        return render_body([token for tokens in self.tokens for token in tokens], known, dark=dark,
                           unshown=self.done)


def render_body(tokens: list[Token], known: Known | None = None, *, dark: bool | None = None,
                unshown: bool = True) -> str:
    """A parsed body (``parse_body``) as safe HTML, record links resolved against ``known`` (see
    ``known_records``), and callouts in colours for a dark palette or a light one (default: the palette in
    force); with ``unshown``, the line beneath it naming the images and files it embeds."""
    dark = is_dark() if dark is None else dark
    env: dict[str, Any] = {"known": known or {}, "dark": dark}
    html = PARSER.renderer.render(tokens, PARSER.options, env)
    return html + (unshown_html(env.get("unshown") or {}) if unshown else "")


def body_html(text: str, known: Known | None = None, *, dark: bool | None = None) -> str:
    """The body's Markdown as safe HTML (``parse_body`` then ``render_body``)."""
    return render_body(parse_body(text), known, dark=dark)


def unshown_html(unshown: dict[str, list[str]]) -> str:
    """One line beneath the body naming the images and files it embeds (each ``[image]`` or ``[file]`` where it
    stands): the window shows none, and a note of icons would otherwise say so in every list item."""
    if not unshown:
        return ""
    kinds = [(what, list(dict.fromkeys(unshown[what]))) for what in ("image", "file") if unshown.get(what)]
    counts = [counted(len(names), what) for what, names in kinds]
    names = [name for _, named in kinds for name in named]
    return f'<p class="muted">Not shown: {" and ".join(counts)} this note embeds ({esc(", ".join(names))}).</p>'


def wikilink_target(path: str) -> str | None:
    """The id or title a ``wikilink:`` link names (None when it names nothing)."""
    target = unquote(path).strip()
    return target or None


def names_an_id(target: str) -> bool:
    """Whether a wikilink target can be a record id (else it can only be a title)."""
    return is_record_id(target)
