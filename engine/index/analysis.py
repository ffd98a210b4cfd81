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


# English function words (articles, pronouns, auxiliaries, prepositions, conjunctions, question words): the
# recall gate's hybrid candidates do not count a page that shares only these with a message as a match.
FUNCTION_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves also anything every ever get got many much
may might must shall still yet via per
""".split())


class Analyzer:
    """The engine's analyzer, built once per index owner and shared."""

    def __init__(self) -> None:
        self.tantivy = build_analyzer()
        self.function_terms = frozenset(self.terms(" ".join(sorted(FUNCTION_WORDS))))   # as analyzed

    def terms(self, text: str) -> list[str]:
        """Every term of ``text``, in order, repeats included."""
        return self.tantivy.analyze(prepare(text))

    def query_terms(self, text: str) -> list[str]:
        """The distinct terms of a query, in first-seen order, at most MAX_TERMS."""
        return list(dict.fromkeys(self.terms(text)))[:MAX_TERMS]
