"""A snippet as an owner reads it: the words of a Markdown fragment without their markup, the query's words marked.

The search index keeps a record's body as written, so a snippet cut from it carries ``[[wiki|links]]``,
emphasis, headings' ``#``, callout markers, list bullets and frontmatter, often cut in the middle.  Agents
get the fragment as their contract says; the owner's search (the window, ``knowledge search``) shows
``owner_snippet`` instead: plain words, "…" where the note goes on, and the spans of the words that matched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from ..core.attachments import BASE_SUFFIX, FILE_SUFFIXES, IMAGE_SUFFIXES
from ..index.analysis import UNSPACED_RUN, Analyzer

ELLIPSIS = "\u2026"
WIDEN_CHARS = 40

# An embedded image, file or Obsidian Base (``![[icon.svg#icon]]``, ``![[Books.base#By year]]``): its file
# name says nothing in a snippet.  It goes with the spaces before it (and the brackets around it alone), so the
# words left read as a sentence: "the list ![[Books.base]]." is "the list.", never "the list .".
_EMBED = (r"!\[\[[^\[\]|#]*(?:%s)(?:[#|][^\[\]]*)?\]\]"
          % "|".join(re.escape(suffix) for suffix in IMAGE_SUFFIXES + FILE_SUFFIXES + (BASE_SUFFIX,)))
_EMBEDDED_FILE = re.compile(rf"[ \t]*(?:\([ \t]*{_EMBED}[ \t]*\)|{_EMBED})", re.I)
_CLOSING = ".,;:!?)]}\u2026"  # what follows a word without a space between
_WIKI = re.compile(r"!?\[\[([^\[\]|#]*)(?:#([^\[\]|]*))?(?:\|([^\[\]]*))?\]\]")
_WIKI_CUT_START = re.compile(r"^[^\[\]]*?\|([^\[\]|]*)\]\]")  # "…target|alias]]": the fragment began inside
_WIKI_CUT_END = re.compile(r"!?\[\[([^\[\]|#]*)[^\[\]]*$")  # "[[target|ali…": the fragment ended inside
_MARKDOWN_LINK = re.compile(r"!?\[([^\[\]]*)\]\((?:[^()\s]|\([^()\s]*\))*\)")  # parentheses in pairs inside
_MARKDOWN_CUT_END = re.compile(r"!?\[([^\[\]]*)\]\([^\s)]*$")  # "![](../photo/Pasted%20ima…": ended inside
_CALLOUT = re.compile(r"^\s*>\s*\[!([A-Za-z-]+)\][+-]?\s*", re.M)
_LINE_MARKS = re.compile(r"^\s*(?:>\s*)*(?:#{1,6}\s+|[-*+]\s+\[[ xX]\]\s+|[-*+]\s+|\d+[.)]\s+)?", re.M)
_EMPHASIS = re.compile(r"(\*\*|__|~~|==)(\S(?:.*?\S)?)\1|(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?!\w)")
_STRAY_EMPHASIS = re.compile(r"(?<=\w)(?:\*\*|__|~~|==)(?!\w)|(?<![\w*])(?:\*\*|__|~~|==)(?=\w)")  # a cut's half
_CODE = re.compile(r"`([^`]*)`")
_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[^\n]*$", re.M)  # a code block's fence, with its language
_TABLE_ROW = re.compile(r"^[ \t]*\|.*$|^.*\|[ \t]*$", re.M)  # a table's row: a pipe begins or ends it
_TABLE_RULE = re.compile(r"^[\s|:-]*-[\s|:-]*$")  # the row under a table's header: | --- | :---: |
_CELL = re.compile(r"(?<!\\)\|")  # a cell's edge: a pipe the table does not escape
_BLOCK_ID = re.compile(r"(?:^|[ \t])\^[A-Za-z0-9-]{1,80}[ \t]*$", re.M)  # "^id" ending a line: a link's anchor
_LEFTOVER = re.compile(r"\[\[|\]\]|(?<!\w)#(?=[A-Za-z])")
_SPACES = re.compile(r"\s+")
# A YAML block between fences at the start: lines of "key: value", list items or indented continuations.
_FRONTMATTER = re.compile(r"\A\s*---[ \t]*\n(?:(?:[\w-]+:|[ \t]*-[ \t]|[ \t]+\S)[^\n]*\n)*---[ \t]*$", re.M)
_RULE = re.compile(r"^[ \t]*(?:---+|\*\*\*+|___+)[ \t]*$", re.M)  # a thematic break, or a fence left by a cut
_WORD = re.compile(r"[^\W_]+")  # a word as the index's tokenizer splits text: letters and digits
# The frontmatter a Markdown import keeps at the end of a page (its keys the ontology has no field for, or the whole
# block when it was not valid YAML), under this line and in a fenced YAML block (engine/importers/markdown.py).
KEPT_FRONTMATTER = "Frontmatter kept from the note"
_KEPT_BLOCK = re.compile(r"(?:\A|\n\n)%s(?: as written \(not read: .*?\))?:\n\n(`{3,})yaml\n.*\n\1\s*\Z"
                         % re.escape(KEPT_FRONTMATTER), re.S)


def owner_snippet(fragment: str, body: str, marks: Marker) -> tuple[str, list[list[int]]]:
    """The owner's snippet of ``body`` from ``fragment`` (the passage of it the search chose, or its start):
    plain words (``plain_snippet``), whole words only, "…" where the body goes on before or after it; and the
    ``[start, end)`` character spans in that text of the words (or the parts of a Chinese or Japanese run)
    ``marks`` finds."""
    fragment, body = fragment.strip(), body.strip()
    start = body.find(fragment) if fragment else -1
    before = after = False
    if start >= 0:  # widened to the spaces around it: whole words, and markup that closes or opens beside them
        end = start + len(fragment)
        start, end = _widened(body, start, -1), _widened(body, end, 1)
        fragment, before, after = body[start:end], start > 0, end < len(body)
    text = plain_snippet(fragment)
    if not text:
        return "", []
    text = (ELLIPSIS if before else "") + text + (ELLIPSIS if after else "")
    return text, [[word.start() + start, word.start() + end] for word in _WORD.finditer(text)
                  for start, end in marks(word.group())]


def own_text(body: str) -> str:
    """``body`` without the frontmatter block a Markdown import kept at its end (``KEPT_FRONTMATTER``): the note's
    own text; ``body`` itself when it ends with no such block."""
    kept = _KEPT_BLOCK.search(body)
    return body[:kept.start()] if kept else body


def _widened(body: str, at: int, step: int) -> int:
    """``at`` moved by ``step`` to the nearest space of ``body`` (at most ``WIDEN_CHARS``: a URL stays cut)."""
    for _ in range(WIDEN_CHARS):
        beside = body[at - 1] if step < 0 else body[at] if at < len(body) else " "
        if at == 0 or beside.isspace():
            break
        at += step
    return at


# The spans of a word to mark (``query_marker``): the whole word, none of it, or parts of a Chinese or Japanese run.
Marker = Callable[[str], list[tuple[int, int]]]


def query_marker(analyzer: Analyzer, terms: Collection[str]) -> Marker:
    """The spans of a snippet's word to mark: the word whole when it is one of ``terms`` (a query's, as the
    analyzer makes them: "syncing" is "sync"), none of it when not; each distinct word is analyzed once.  A
    Chinese or Japanese run has no spaces to find words by: in it the query's pairs of characters (and its lone
    characters) are marked where they stand, neighbouring ones as one span ("会议记录" in "今天的会议记录很长"
    for the query 会议记录)."""
    wanted, seen = frozenset(terms), {}
    pieces = [term for term in wanted if UNSPACED_RUN.fullmatch(term)]

    def whole(word: str) -> bool:
        key = word.lower()
        if key not in seen:
            seen[key] = any(term in wanted for term in analyzer.terms(word))
        return seen[key]

    def marks(word: str) -> list[tuple[int, int]]:
        if word.isascii() or not UNSPACED_RUN.search(word):
            return [(0, len(word))] if whole(word) else []
        spans: list[tuple[int, int]] = []
        at = 0
        for run in UNSPACED_RUN.finditer(word):
            if run.start() > at and whole(word[at:run.start()]):
                spans.append((at, run.start()))
            spans += _pieces_in(word, run.start(), run.end(), pieces)
            at = run.end()
        if at < len(word) and whole(word[at:]):
            spans.append((at, len(word)))
        return _joined(spans)

    return marks


def _pieces_in(word: str, start: int, end: int, pieces: list[str]) -> list[tuple[int, int]]:
    """The spans of ``word[start:end]`` (a run of unspaced characters) that are one of ``pieces``."""
    found = []
    for piece in pieces:
        at = word.find(piece, start, end)
        while at >= 0:
            found.append((at, at + len(piece)))
            at = word.find(piece, at + 1, end)
    return found


def _joined(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` in order, those that overlap or touch joined into one."""
    joined: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(end, joined[-1][1]))
        else:
            joined.append((start, end))
    return joined


def plain_snippet(fragment: str) -> str:
    """``fragment`` with wiki links as the words they show (their alias, else their target), Markdown links as
    their text, and embedded images, files and bases (``![[icon.svg]]``), frontmatter, thematic breaks, block ids,
    emphasis, code ticks, headings' ``#``, callout and quote markers, list bullets, code fences and table rules
    gone, a table's cells apart by " · "; on one line, spaces collapsed."""
    text = _FRONTMATTER.sub("", fragment)
    text = _TABLE_ROW.sub(_table_words, text)
    text = _FENCE.sub("", text)
    text = _RULE.sub("", text)
    text = _BLOCK_ID.sub("", text)
    text = _EMBEDDED_FILE.sub(_without_embed, text)
    text = _WIKI_CUT_START.sub(lambda match: match.group(1), text)
    text = _WIKI.sub(_wiki_words, text)
    text = _WIKI_CUT_END.sub(lambda match: match.group(1), text)
    text = _MARKDOWN_LINK.sub(lambda match: match.group(1), text)
    text = _MARKDOWN_CUT_END.sub(lambda match: match.group(1), text)
    text = _CALLOUT.sub(lambda match: match.group(1).capitalize() + ": ", text)
    text = _LINE_MARKS.sub("", text)
    text = _CODE.sub(lambda match: match.group(1), text).replace("`", "")  # a tick left alone: the cut's
    for _ in range(2):  # emphasis inside emphasis (**bold _and italic_**)
        text = _EMPHASIS.sub(lambda match: match.group(2) or match.group(3), text)
    text = _STRAY_EMPHASIS.sub("", text)  # emphasis the fragment cut open or closed
    text = _LEFTOVER.sub("", text)
    return _SPACES.sub(" ", text).strip()


def _without_embed(match: re.Match[str]) -> str:
    """Nothing for an embedded file, or one space where it stood between two words ("a![[x.png]]b")."""
    text, start, end = match.string, match.start(), match.end()
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    return "" if before.isspace() or after.isspace() or after in _CLOSING else " "


def _table_words(match: re.Match[str]) -> str:
    """A table's row as its cells' words apart by " · " (a pipe the table escaped is the cell's own); the rule
    under the header, nothing."""
    row = match.group(0)
    if _TABLE_RULE.match(row):
        return ""
    cells = (cell.strip().replace("\\|", "|") for cell in _CELL.split(row))
    return " · ".join(cell for cell in cells if cell)


def _wiki_words(match: re.Match[str]) -> str:
    target, heading, alias = match.group(1), match.group(2), match.group(3)
    if alias:
        return alias
    target = target.rsplit("/", 1)[-1]
    if target.lower().endswith(".md"):
        target = target[:-3]
    if heading and heading.startswith("^"):  # a block's id names no words: the note is what the link shows
        heading = ""
    return f"{target} › {heading}" if heading and target else (heading or target)
