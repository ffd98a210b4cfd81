"""A snippet as an owner reads it: the words of a Markdown fragment without their markup.

The search index keeps a record's body as written, so a snippet cut from it carries ``[[wiki|links]]``,
emphasis, headings' ``#``, callout markers and list bullets, often cut in the middle.  Agents get the
fragment as their contract says; the owner's search (the window, ``knowledge search``) shows this instead.
"""

from __future__ import annotations

import re

_WIKI = re.compile(r"!?\[\[([^\[\]|#]*)(?:#([^\[\]|]*))?(?:\|([^\[\]]*))?\]\]")
_WIKI_CUT_START = re.compile(r"^[^\[\]]*?\|([^\[\]|]*)\]\]")  # "…target|alias]]": the fragment began inside
_WIKI_CUT_END = re.compile(r"!?\[\[([^\[\]|#]*)[^\[\]]*$")  # "[[target|ali…": the fragment ended inside
_MARKDOWN_LINK = re.compile(r"!?\[([^\[\]]*)\]\([^()\s]*\)")
_CALLOUT = re.compile(r"^\s*>\s*\[!([A-Za-z-]+)\][+-]?\s*", re.M)
_LINE_MARKS = re.compile(r"^\s*(?:>\s*)*(?:#{1,6}\s+|[-*+]\s+\[[ xX]\]\s+|[-*+]\s+|\d+[.)]\s+)?", re.M)
_EMPHASIS = re.compile(r"(\*\*|__|~~|==)(\S(?:.*?\S)?)\1|(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?!\w)")
_CODE = re.compile(r"`([^`]*)`")
_LEFTOVER = re.compile(r"\[\[|\]\]|(?<!\w)#(?=[A-Za-z])")
_SPACES = re.compile(r"\s+")


def plain_snippet(fragment: str) -> str:
    """``fragment`` with wiki links as the words they show (their alias, else their target), Markdown links as
    their text, and emphasis, code ticks, headings' ``#``, callout and quote markers and list bullets gone; on
    one line, spaces collapsed."""
    text = _WIKI_CUT_START.sub(lambda match: match.group(1), fragment)
    text = _WIKI.sub(_wiki_words, text)
    text = _WIKI_CUT_END.sub(lambda match: match.group(1), text)
    text = _MARKDOWN_LINK.sub(lambda match: match.group(1), text)
    text = _CALLOUT.sub(lambda match: match.group(1).capitalize() + ": ", text)
    text = _LINE_MARKS.sub("", text)
    text = _CODE.sub(lambda match: match.group(1), text)
    for _ in range(2):  # emphasis inside emphasis (**bold _and italic_**)
        text = _EMPHASIS.sub(lambda match: match.group(2) or match.group(3), text)
    text = _LEFTOVER.sub("", text)
    return _SPACES.sub(" ", text).strip()


def _wiki_words(match: re.Match[str]) -> str:
    target, heading, alias = match.group(1), match.group(2), match.group(3)
    if alias:
        return alias
    target = target.rsplit("/", 1)[-1]
    if target.lower().endswith(".md"):
        target = target[:-3]
    return f"{target} › {heading}" if heading and target else (heading or target)
