"""The passages of a page that best match a message (the recall gate's excerpts).

A page's body is split into blank-line-separated passages.  Passages that
share the most distinct terms with the message win (more matching words
next, then earlier in the page); they are quoted in page order, each at most
``passage_chars`` long and all together at most ``page_chars``.  A passage
longer than its allowance is clipped to the window holding the most matching
words, cut at word boundaries and marked with an ellipsis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..index.analysis import Analyzer

ELLIPSIS = "…"
MIN_PASSAGE_CHARS = 80  # a smaller remainder of the page budget would quote nothing useful
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Passage:
    text: str
    index: int  # position of the passage in the page
    matched: int  # distinct message terms it contains


def split_passages(body: str) -> list[str]:
    return [part.strip() for part in _PARAGRAPH_BREAK.split(body) if part.strip()]


class PassageFinder:
    def __init__(self, analyzer: Analyzer) -> None:
        self.analyzer = analyzer

    def best(self, body: str, message: str, *, max_passages: int, passage_chars: int,
             page_chars: int) -> list[Passage]:
        wanted = set(self.analyzer.query_terms(message))
        passages = split_passages(body)
        scored = []
        for index, text in enumerate(passages):
            terms = self.analyzer.terms(text)
            matched = wanted.intersection(terms)
            if matched:
                occurrences = sum(1 for term in terms if term in wanted)
                scored.append((len(matched), occurrences, index, text))
        if not scored and passages:
            scored = [(0, 0, 0, passages[0])]  # the title matched: quote how the page begins
        chosen = sorted(sorted(scored, key=lambda s: (-s[0], -s[1], s[2]))[:max_passages], key=lambda s: s[2])
        result, budget = [], page_chars
        for matched, _, index, text in chosen:
            allowance = min(passage_chars, budget)
            if allowance < min(MIN_PASSAGE_CHARS, passage_chars):
                break
            clipped = self.clip(text, wanted, allowance)
            result.append(Passage(clipped, index, matched))
            budget -= len(clipped)
        return result

    def clip(self, text: str, wanted: set[str], limit: int) -> str:
        """``text`` if it fits, else the ``limit``-character window with the most matching words."""
        if len(text) <= limit:
            return text
        spans = list(_WORD.finditer(text))
        cache: dict[str, bool] = {}

        def matches(word: str) -> bool:
            if word not in cache:
                cache[word] = bool(wanted.intersection(self.analyzer.terms(word)))
            return cache[word]

        hits = [span.start() for span in spans if matches(span.group())]
        inner = limit - 2 * len(ELLIPSIS)
        best_start, best_count = 0, -1
        right = 0
        for left, start in enumerate(hits):
            while right < len(hits) and hits[right] < start + inner:
                right += 1
            if right - left > best_count:
                best_start, best_count = start, right - left
        # Lead in a little before the first matching word, then cut on word boundaries.
        start = max(0, best_start - inner // 8)
        end = min(len(text), start + inner)
        start = max(0, end - inner)
        if start > 0:
            boundary = text.find(" ", start)
            start = boundary + 1 if 0 <= boundary < start + 40 else start
        if end < len(text):
            boundary = text.rfind(" ", start, end)
            end = boundary if boundary > start + inner // 2 else end
        window = text[start:end].strip()
        return (ELLIPSIS if start > 0 else "") + window + (ELLIPSIS if end < len(text) else "")
