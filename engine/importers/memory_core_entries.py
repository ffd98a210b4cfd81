"""Reading one memory-core entry line as OpenClaw writes it: the item, its recall annotations, its provenance.

OpenClaw (2026.9) writes an entry of ``MEMORY.md`` or ``USER.md`` as one list item, with what is not the
memory itself trailing it as HTML comments and brackets:

- recall annotations: ``<!-- trigger: gateway setup, network safety -->`` (phrases separated by commas or
  semicolons), ``<!-- importance: 9 -->`` (1 to 10) and ``<!-- project: key -->``;
- an entry ``memory promote`` (and dreaming's deep phase) appended carries the daily note it came from:
  ``- SNIPPET [score=0.747 signals=3 recalls=3 avg=0.620 source=memory/2026-12-02.md:1-6]``, or, when a
  model consolidated it, ``- SNIPPET Source: memory/2026-12-02.md#L1-L6``.  SNIPPET is the note's lines
  with their whitespace collapsed, so a chunk that opened with headings reads
  ``# 2026-12-02 ## Billing service - The billing service retries ...``;
- ``USER.md`` puts a metadata line before each directive:
  ``<!-- observed: 2026-07-27 | status: active -->`` (``superseded`` for a directive since replaced).

None of it is the entry's words: :func:`read_entry` takes them apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from ..memory.recall import TRIGGER_MAX_CHARS
from ..vault.records import RECALL_LIST_MAX

# Each is matched where it must start (found from the line's end with rfind), never searched for along the
# line: an entry line may be long, and a search of a pattern opening with ``\s*`` is quadratic in it.
_ANNOTATION = re.compile(r"\s*(trigger|importance|project)\s*:\s*(.*?)\s*", re.S | re.I)
_PROMOTED = re.compile(r"\[score=[0-9.]+ signals=[0-9]+ recalls=[0-9]+ avg=[0-9.]+ "
                       r"source=([^\]]+?):([0-9]+)-([0-9]+)\]")
_CONSOLIDATED = re.compile(r"Source:\s+(\S+?)#L([0-9]+)-L([0-9]+)")
# In a collapsed snippet: a heading's or a list item's marker, with the whitespace before it.
_SNIPPET_MARK = re.compile(r"(?:^|\s+)(#{1,6}|[-*+]|[0-9]+[.)])\s+")
_NO_SNIPPET = "(no snippet captured)"  # what promote writes when a candidate had no text


@dataclass(frozen=True)
class Provenance:
    """The daily note lines a promoted entry came from (``source=memory/2026-12-02.md:1-6``)."""

    path: str
    first: int
    last: int


@dataclass(frozen=True)
class RecallAnnotations:
    """What OpenClaw proposed for recall of one entry: trigger phrases, an importance, project keys."""

    triggers: tuple[str, ...] = ()
    importance: int | None = None
    projects: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.triggers or self.importance is not None or self.projects)


@dataclass(frozen=True)
class Entry:
    """One list item's text, parted from what trails it.

    ``written`` is the item as it stands in the line once the trailing comments and the promotion's
    bracket are off (a quote of the line); ``text`` is what it says: for a promoted entry, the snippet with
    the daily note's headings dropped."""

    written: str
    text: str
    recall: RecallAnnotations
    promoted: Provenance | None = None


def read_entry(item: str) -> Entry:
    """Take a list item's trailing annotations, promotion metadata and source reference apart from its words."""
    rest, comments = item.rstrip(), []
    while (parted := _trailing_comment(rest)) is not None:
        rest, comment = parted
        comments.insert(0, comment)
    promoted = None
    if (found := _trailing_provenance(rest)) is not None:
        rest, promoted = found
    written = rest.strip()
    text = snippet_fact(written) if promoted is not None else written
    return Entry(written, text, _annotations(comments), promoted)


def _trailing_comment(text: str) -> tuple[str, str] | None:
    """``text`` (with no trailing whitespace) parted into what stands before its trailing ``<!-- ... -->``
    and that comment's inside; None when it does not end with one.  The comment opens at the first
    ``<!--`` after the line's previous ``-->``: comments do not nest."""
    if not text.endswith("-->"):
        return None
    end = len(text) - 3
    previous = text.rfind("-->", 0, end)
    start = text.find("<!--", previous + 3 if previous >= 0 else 0, end)
    if start < 0:
        return None
    return text[:start].rstrip(), text[start + 4:end]


def _trailing_provenance(text: str) -> tuple[str, Provenance] | None:
    """``text`` parted into the entry before a trailing promotion bracket or ``Source:`` reference and the
    daily note lines it names; None when it ends with neither."""
    start = text.rfind("[score=") if text.endswith("]") else -1
    found = _PROMOTED.fullmatch(text, start) if start >= 0 else None
    if found is None:
        start = text.rfind("Source:")
        found = _CONSOLIDATED.fullmatch(text, start) if start > 0 and text[start - 1].isspace() else None
    if found is None:
        return None
    return text[:start].rstrip(), Provenance(found.group(1), int(found.group(2)), int(found.group(3)))


def snippet_fact(snippet: str) -> str:
    """What a promoted snippet says: its words with the daily note's headings left out and the list markers
    dropped (``# 2026-12-02 ## Billing service - Retries run three times.`` says ``Retries run three
    times.``); empty when it is headings alone or the placeholder promote writes for no text."""
    if snippet == _NO_SNIPPET:
        return ""
    if not snippet.startswith("#"):  # no heading collapsed into it: the words as written
        return snippet
    parts = _SNIPPET_MARK.split(" ".join(snippet.split()))  # promote collapsed it: one space between words  # "", mark, words, mark, words ...
    said = [words.strip() for mark, words in zip(parts[1::2], parts[2::2]) if not mark.startswith("#")]
    return " ".join(words for words in said if words)


def _annotations(comments: list[str]) -> RecallAnnotations:
    triggers: list[str] = []
    projects: list[str] = []
    importance = None
    for comment in comments:
        match = _ANNOTATION.fullmatch(comment)
        if match is None:
            continue  # another comment (a marker of OpenClaw's): not the entry's words, and no proposal
        name, value = match.group(1).lower(), match.group(2)
        if name == "trigger":
            triggers += [p for p in (" ".join(p.split()) for p in re.split(r"[,;]", value))
                         if p and len(p) <= TRIGGER_MAX_CHARS and p not in triggers]
        elif name == "project":
            projects += [p for p in (" ".join(p.split()) for p in value.split(";")) if p and p not in projects]
        elif value.isdigit() and 1 <= int(value) <= 10:  # OpenClaw's scale, and the recall block's
            importance = int(value)
    return RecallAnnotations(tuple(triggers[:RECALL_LIST_MAX]), importance, tuple(projects[:RECALL_LIST_MAX]))


def source_lines_say(lines: list[str], provenance: Provenance, snippet: str) -> bool:
    """Whether the named lines of a daily note still hold the snippet promote took from them: collapsed as
    promote collapses them, they open with it (a long snippet was cut and ends ``...``)."""
    if not 1 <= provenance.first <= provenance.last <= len(lines):
        return False
    collapsed = " ".join(" ".join(lines[provenance.first - 1:provenance.last]).split())
    collapsed = re.sub(r"^[-*+] +", "", collapsed)
    said = snippet[:-3].rstrip() if snippet.endswith("...") else snippet
    return bool(said) and collapsed.startswith(said)


@dataclass(frozen=True)
class Directive:
    """``USER.md``'s metadata line over the next list item: when it was observed, and its status."""

    observed: date | None  # None: not a calendar date (the template's ``YYYY-MM-DD``)
    status: str


def read_directive_line(line: str) -> Directive | None:
    """The metadata line of a ``USER.md`` directive, or None when the line is not one."""
    inside = line.strip()
    if not (inside.startswith("<!--") and inside.endswith("-->")) or "|" not in inside:
        return None
    when, _, state = (part.strip() for part in inside[4:-3].partition("|"))
    name, _, value = when.partition(":")
    key, _, status = state.partition(":")
    status = status.strip()
    if name.strip() != "observed" or key.strip() != "status" or not (status.isascii() and status.isalpha()):
        return None
    try:
        observed: date | None = date.fromisoformat(value.strip())
    except ValueError:
        observed = None
    return Directive(observed, status.lower())
