"""What a credential can be disguised by, undone for the credential check only.

A key can be written so that no pattern sees it, while whoever reads the stored text (or the desktop
window that renders it) gets the key back: JSON escapes (``\\u0041KIA...``), HTML entities
(``&#65;KIA...``), fullwidth or mathematical letters that NFKC turns into ASCII, an invisible
character inside the key (a zero-width space, a soft hyphen, a byte-order mark), a look-alike letter
of another script (Cyrillic ``А`` for Latin ``A``), or base64.  ``undisguised_lines`` gives, for each
line of a text that holds one of these, what the line decodes to, and the texts its base64 runs
decode to.  The credential scan reads those beside the text as written; what is stored never changes.

Cost: a line is decoded only when it holds a backslash, an ampersand, a control character, a
character outside ASCII or a run of 20 or more base64 characters; text with none of these is found
so with one regular-expression search, and the rest of its work is the scan it always had.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
import unicodedata
from typing import Iterator

BASE64_MIN_CHARS = 20  # the shortest key the scan knows (20 characters) is 28 in base64
BASE64_DEPTH = 2  # base64 inside base64 is decoded once more, no further
# A line holding none of these reads the same decoded: an escape, an entity, a control character or one
# outside ASCII (searched for as a character class, which ``re`` does fast) ...
_SPECIAL = re.compile(r"[^\n\t\r\x20-\x25\x27-\x5b\x5d-\x7e]")
# ... or a run that could be base64, found with ``bytes.find`` in a copy where each base64 character is
# "a" and every other byte (a character outside ASCII is one "?" when encoded) a space, because a regular
# expression for such a run retries at every letter of every word.
_RUN_TABLE = bytes(ord("a") if chr(byte).isascii() and (chr(byte).isalnum() or chr(byte) in "+/_-") else ord(" ")
                   for byte in range(256))
_RUN = b"a" * BASE64_MIN_CHARS
ROUNDS = 3  # decoding repeated while it changes the line: JSON escapes inside JSON, an entity of an escape

# --- JSON escapes ------------------------------------------------------------------------------------------

_JSON_ESCAPE = re.compile(r"(?:\\u[0-9a-fA-F]{4})+|\\[\"\\/bfnrt]")
_SIMPLE_ESCAPES = {"\\\"": "\"", "\\\\": "\\", "\\/": "/", "\\b": "\b", "\\f": "\f", "\\n": "\n", "\\r": "\r",
                   "\\t": "\t"}


def _json_escape(match: re.Match[str]) -> str:
    escape = match.group()
    if escape[1] != "u":
        return _SIMPLE_ESCAPES[escape]
    return json.loads(f'"{escape}"')  # a run at once, so a surrogate pair becomes its one character


def json_unescaped(text: str) -> str:
    """``text`` with JSON's string escapes decoded (a lone surrogate stays one)."""
    return _JSON_ESCAPE.sub(_json_escape, text)


# --- characters nobody sees ----------------------------------------------------------------------------------

# Format characters (every code point of Unicode category Cf: soft hyphen, zero-width space, joiners,
# word joiner, byte-order mark, bidirectional controls, tags), control characters other than tab and the
# line ends, and the other default-ignorable code points (combining grapheme joiner, Hangul fillers,
# Khmer inherent vowels, Mongolian variation selectors, variation selectors).  A test holds the Cf list to
# the interpreter's Unicode tables.
INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff"
    "\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff]")

# --- look-alike letters ---------------------------------------------------------------------------------------

# Letters of other scripts drawn like the ASCII letters and digits key prefixes are made of (AKIA, ghp_,
# sk-ant-, xoxb-, glpat-, AIza, ya29., hf_, -----BEGIN ... PRIVATE KEY-----), each folded to the letter of
# its own case; NFKC has already turned fullwidth and mathematical letters into ASCII.  Unicode's
# confusables skeleton (the confusable-homoglyphs package) folds I, l and 1 into one letter and O and 0
# into another, which a case-sensitive key pattern cannot use, so this table is written out here.
_LOOK_ALIKES = str.maketrans({
    # Cyrillic
    "А": "A", "В": "B", "С": "C", "Е": "E", "Н": "H", "І": "I", "Ӏ": "I", "Ј": "J", "К": "K", "М": "M",
    "О": "O", "Р": "P", "Ԛ": "Q", "Ѕ": "S", "Т": "T", "Ԝ": "W", "Х": "X", "У": "Y", "Ү": "Y", "З": "3",
    "а": "a", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j", "ӏ": "l", "о": "o", "р": "p",
    "ԛ": "q", "ѕ": "s", "ԝ": "w", "х": "x", "у": "y", "ү": "y",
    # Greek
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "α": "a", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "υ": "u",
    # Armenian, Cherokee and Latin letters drawn like others
    "օ": "o", "ս": "u", "Ꭺ": "A", "Ᏼ": "B", "Ꮯ": "C", "Ꭼ": "E", "Ꮋ": "H", "Ꭻ": "J", "Ꮶ": "K", "Ꮇ": "M",
    "Ꮲ": "P", "Ꮪ": "S", "Ꭲ": "T", "Ꮃ": "W", "Ꮓ": "Z", "ı": "i", "ɡ": "g", "ɑ": "a", "ʏ": "y",
})


def undisguised(line: str) -> str:
    """The line as whoever reads it sees it: escapes and entities decoded, NFKC, invisible characters
    removed and look-alike letters folded to ASCII, repeated while that changes it."""
    for _ in range(ROUNDS):
        before = line
        if "\\" in line:
            line = json_unescaped(line)
        if "&" in line:
            line = html.unescape(line)
        if not line.isascii():
            line = unicodedata.normalize("NFKC", line).translate(_LOOK_ALIKES)
        line = INVISIBLE.sub("", line)
        if line == before:
            break
    return line


# --- base64 -------------------------------------------------------------------------------------------------

_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{%d,}" % BASE64_MIN_CHARS)


def base64_text(run: str) -> str | None:
    """What a run of base64 characters (standard or URL-safe, padding optional) decodes to, when that is
    UTF-8 text; None for anything else (a word, an id or a digest decodes to bytes that are not)."""
    standard, url_safe = "+" in run or "/" in run, "-" in run or "_" in run
    if standard and url_safe:
        return None
    run = run[:len(run) - len(run) % 4] if len(run) % 4 == 1 else run
    try:
        data = base64.b64decode(run + "=" * (-len(run) % 4), altchars=b"-_" if url_safe else None, validate=True)
        text = data.decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return text if text.replace("\n", "").replace("\t", "").replace("\r", "").isprintable() else None


# --- a text's lines, undisguised --------------------------------------------------------------------------------


def undisguised_lines(text: str, *, _depth: int = 0) -> list[tuple[int, str]]:
    """For each line of ``text`` that reads differently decoded: (its 1-based line number, the line
    undisguised); and for each base64 run on it that decodes to text: (the same line number, that text),
    itself undisguised too.  Lines that decode to themselves are not listed.

    Every run is decoded (no budget an attacker could spend with padding before the key), so the work
    grows with the text: each character is decoded at most once per level, ``BASE64_DEPTH`` levels.
    """
    found: list[tuple[int, str]] = []
    line_number, counted = 1, 0
    for start, end in _suspect_lines(text):
        line_number += text.count("\n", counted, start)
        counted = start
        found += ((line_number, view) for view in _views(text[start:end], _depth))
    return found


def _suspect_lines(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each line holding a special character or a base64-looking run, in order."""
    starts: set[int] = set()
    match = _SPECIAL.search(text)
    while match is not None:
        starts.add(text.rfind("\n", 0, match.start()) + 1)
        end = text.find("\n", match.end())
        match = _SPECIAL.search(text, end + 1) if end != -1 else None
    runs = text.encode("ascii", "replace").translate(_RUN_TABLE)
    position = runs.find(_RUN)
    while position != -1:
        starts.add(text.rfind("\n", 0, position) + 1)
        end = text.find("\n", position)
        position = runs.find(_RUN, end + 1) if end != -1 else -1
    spans = []
    for start in sorted(starts):
        end = text.find("\n", start)
        spans.append((start, len(text) if end == -1 else end))
    return spans


def _views(line: str, depth: int) -> Iterator[str]:
    view = undisguised(line)
    if view != line:
        yield view
    if depth >= BASE64_DEPTH:
        return
    for match in _BASE64_RUN.finditer(view):
        decoded = base64_text(match.group())
        if decoded is not None:
            yield decoded
            yield from (inner for _, inner in undisguised_lines(decoded, _depth=depth + 1))
