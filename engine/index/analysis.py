"""Text analysis shared by indexing, querying and passage selection.

One analyzer turns text into terms everywhere, so a word in a query and the
same word in a record always meet: split on anything that is not a letter
or digit (any script), drop tokens over 40 bytes, lowercase, fold accents
to ASCII, and reduce English words to their stem.  Scripts written without
spaces (Chinese, Japanese) are split into single characters first, so they
match word for word too.

User text is only ever tokenized by this analyzer; it is never parsed as
query syntax, so quotes, colons, ``AND`` and brackets are just characters.
"""

from __future__ import annotations

import re

import tantivy

ANALYZER_NAME = "knowledge"
MAX_TERMS = 64
# Han, Hiragana, Katakana and CJK punctuation-free ranges: no spaces between words.
_UNSPACED = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f])")


def build_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def prepare(text: str) -> str:
    """Space out characters of unspaced scripts so each is its own term."""
    if text.isascii():  # none of those scripts: most text, checked far faster than the pattern is searched
        return text
    return _UNSPACED.sub(r" \1 ", text)


class Analyzer:
    """The engine's analyzer, built once per index owner and shared."""

    def __init__(self) -> None:
        self.tantivy = build_analyzer()

    def terms(self, text: str) -> list[str]:
        """Every term of ``text``, in order, repeats included."""
        return self.tantivy.analyze(prepare(text))

    def query_terms(self, text: str) -> list[str]:
        """The distinct terms of a query, in first-seen order, at most MAX_TERMS."""
        return list(dict.fromkeys(self.terms(text)))[:MAX_TERMS]
