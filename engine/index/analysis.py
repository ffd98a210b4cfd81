"""Text analysis shared by indexing, querying and passage selection.

One analyzer turns text into terms everywhere, so a word in a query and the
same word in a record always meet: split on anything that is not a letter
or digit (any script), drop tokens over 40 bytes, lowercase, fold accents
to ASCII, and reduce English words to their stem.

Scripts written without spaces (Chinese, Japanese) have no word boundaries
to split on, so a sentence would be one term and no word inside it could be
found.  Their runs are written out before tantivy's tokenizer sees them, as
the classic CJK bigram analyzers do: a document's run as every character and
every pair of neighbouring characters (``会议记录`` holds 会, 会议, 议, 议记,
记, 记录, 录), a query's run of two or more characters as its pairs only
(会议, 议记, 记录), a query's lone character as itself.  So "会议" finds the
notes that say 会议, not every note with a 会 or a 议 in it, and a
one-character query still finds the character wherever it stands.  Text
with none of those scripts is left exactly as it was.

User text is only ever tokenized by this analyzer; it is never parsed as
query syntax, so quotes, colons, ``AND`` and brackets are just characters.
"""

from __future__ import annotations

import re

import tantivy

ANALYZER_NAME = "knowledge"
MAX_TERMS = 64
# Han, Hiragana, Katakana and CJK punctuation-free ranges: no spaces between words.
UNSPACED_CHARS = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
UNSPACED_RUN = re.compile(f"[{UNSPACED_CHARS}]+")


def build_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _document_units(run: str) -> str:
    """A document's run of unspaced characters as its characters and neighbouring pairs, spaced apart."""
    if len(run) == 1:
        return f" {run} "
    units = [unit for i in range(len(run) - 1) for unit in (run[i], run[i:i + 2])]
    return " " + " ".join(units) + f" {run[-1]} "


def _query_units(run: str) -> str:
    """A query's run of unspaced characters as its neighbouring pairs (a lone character as itself)."""
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i:i + 2] for i in range(len(run) - 1)) + " "


def prepare(text: str) -> str:
    """``text`` as the index analyses a document: each run of unspaced scripts written out as its characters
    and their neighbouring pairs (the module's docstring)."""
    if text.isascii():  # none of those scripts: most text, checked far faster than the pattern is searched
        return text
    return UNSPACED_RUN.sub(lambda run: _document_units(run.group()), text)


def prepare_query(text: str) -> str:
    """``text`` as a query is analysed: each run of unspaced scripts written out as its neighbouring pairs."""
    if text.isascii():
        return text
    return UNSPACED_RUN.sub(lambda run: _query_units(run.group()), text)


def raw_offset(text: str, prepared_offset: int) -> int:
    """Where in ``text`` the character at ``prepared_offset`` of ``prepare(text)`` comes from (the start of
    the character or pair written there): a passage found in the prepared text is shown from the text as
    written."""
    if text.isascii():
        return prepared_offset
    shift = 0  # prepared offset - raw offset, before the current run
    for run in UNSPACED_RUN.finditer(text):
        start = run.start() + shift
        if prepared_offset < start:
            break
        units = _document_units(run.group())
        if prepared_offset < start + len(units):
            within = units[:prepared_offset - start + 1].split()
            return run.start() + max(0, len(within) - 1) // 2  # units alternate: character, pair, character...
        shift += len(units) - len(run.group())
    return prepared_offset - shift


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
        """Every term of ``text`` as a document holds them, in order, repeats included."""
        return self.tantivy.analyze(prepare(text))

    def query_terms(self, text: str) -> list[str]:
        """The distinct terms of a query, in first-seen order, at most MAX_TERMS (every one of them is among
        the ``terms`` of a document that says the query's words)."""
        return list(dict.fromkeys(self.tantivy.analyze(prepare_query(text))))[:MAX_TERMS]
