"""A generated partition for speed measurements: deterministic note pages.

The records are ``knowledge-record-v1`` pages of type ``note`` rendered by
the engine's own record renderer and written straight into a partition's
``pages/notes/<set>/`` folders, as if an owner had copied a large vault in.
Everything comes from seeded random generators, so the same seed, count
and Python version give byte-identical files on any machine (``random``
only promises its sequences within a Python version).

Text is drawn from a vocabulary of common English words followed by
made-up pronounceable words, with Zipf-like frequencies (the word of rank r
has weight 1/(r + 1)), so a few words are everywhere and most are rare, as
in real notes.  Queries are 2-4 content words taken from randomly chosen
records, so each has at least one matching record (its *source*).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

from ..core.ids import format_timestamp
from ..vault.records import PRIVATE_SCOPE, RECORD_FORMAT, Record
from ..store.writes import slugify

VOCABULARY_SIZE = 4_000
NOTE_SETS = ("journal", "meetings", "projects", "reading", "ideas", "travel", "people", "archive")
NOTES_DIR = "pages/notes"
ALIAS_SHARE = 0.15
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_EPOCH = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
_ATTRIBUTION = {"agent": "bench", "instance": "bench-generator", "audience": "owner-private"}
# The most frequent words of English; they take the top ranks, as function words do in real text.
COMMON = tuple("""
the of and to a in is it you that he was for on are with as his they be at one have this from or had by
not word but what some we can out other were all there when up use your how said an each she which do
their time if will way about many then them write would like so these her long make thing see him two
has look more day could go come did number sound no most people my over know water than call first who
may down side been now find any new work part take get place made live where after back little only
round man year came show every good me give our under name very through just form sentence great think
say help low line differ turn cause much mean before move right boy old too same tell does set three
want air well also play small end put home read hand port large spell add even land here must big high
such follow act why ask men change went light kind off need house picture try us again animal point
mother world near build self earth father head stand own page should country found answer school grow
study still learn plant cover food sun four between state keep eye never last let thought city tree
cross farm hard start might story saw far sea draw left late run while press close night real life few
north open seem together next white children begin got walk example ease paper group always music those
both mark often letter until mile river car feet care second book carry took science eat room friend
began idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain girl
usual young ready above ever red list though feel talk bird soon body dog family direct pose leave song
measure door product black short numeral class wind question happen complete ship area half rock order
fire south problem piece told knew pass since top whole king space heard best hour better during hundred
five remember step early hold west ground interest reach fast verb sing listen six table travel less
morning ten simple several vowel toward war lay against pattern slow center love person money serve
appear road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead cry
dark machine note wait plan figure star box noun field rest correct able pound done beauty drive stood
contain front teach week final gave green quick develop ocean warm free minute strong special mind
behind clear tail produce fact street inch multiply nothing course stay wheel full force blue object
decide surface deep moon island foot system busy test record boat common gold possible plane stead dry
wonder laugh thousand ago ran check game shape equate miss brought heat snow tire bring yes distant fill
east paint language among
""".split())
_ONSETS = ("b", "br", "c", "ch", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "l", "m", "n", "p", "pl",
           "qu", "r", "s", "sh", "sk", "st", "t", "th", "tr", "v", "w", "z")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y")
_CODAS = ("", "", "n", "r", "l", "m", "s", "x", "nd", "rk", "st", "th")


@dataclass(frozen=True)
class GeneratedRecord:
    index: int
    record_id: str
    path: str  # partition-relative
    title: str
    aliases: tuple[str, ...]
    body: str


def vocabulary(size: int = VOCABULARY_SIZE, seed: int = 0) -> list[str]:
    """``size`` distinct lowercase words: common English first, then made-up words."""
    rng = random.Random(f"vocabulary-{seed}")
    words = list(dict.fromkeys(COMMON))[:size]
    seen = set(words)
    while len(words) < size:
        syllables = rng.choice((2, 2, 2, 3, 3, 4))
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)) + rng.choice(_CODAS)
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class TextSource:
    """Words drawn with Zipf-like frequencies from a fixed vocabulary."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.cum_weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))
        self.common = frozenset(COMMON)

    def draw(self, rng: random.Random, count: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cum_weights, k=count)

    def sentence_text(self, rng: random.Random, count: int) -> str:
        """``count`` words as sentences of 6-14 words, each capitalised and ending in a full stop."""
        words = self.draw(rng, count)
        sentences, start = [], 0
        while start < len(words):
            length = rng.randint(6, 14)
            chunk = words[start:start + length]
            sentences.append(" ".join([chunk[0].capitalize(), *chunk[1:]]) + ".")
            start += length
        return " ".join(sentences)


def _record_id(rng: random.Random, index: int) -> str:
    """A ULID-shaped page id: the record's creation minute, then 80 seeded random bits."""
    value = (int((_EPOCH + timedelta(minutes=index)).timestamp() * 1000) << 80) | rng.getrandbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "pg_" + "".join(reversed(chars))


def generate_records(count: int, seed: int = 0) -> Iterator[GeneratedRecord]:
    """``count`` note pages: titles of 3-6 words, bodies of 30-150 words, some with an alias."""
    source = TextSource(vocabulary(seed=seed))
    rng = random.Random(f"records-{seed}")
    for index in range(count):
        record_id = _record_id(rng, index)
        title_words = source.draw(rng, rng.randint(3, 6))
        title = " ".join([title_words[0].capitalize(), *title_words[1:]])
        aliases: tuple[str, ...] = ()
        if rng.random() < ALIAS_SHARE:
            aliases = (" ".join(source.draw(rng, rng.randint(1, 3))).title(),)
        body = source.sentence_text(rng, rng.randint(30, 150))
        folder = NOTE_SETS[index % len(NOTE_SETS)]
        path = f"{NOTES_DIR}/{folder}/{slugify(title)}-{index:06d}.md"
        yield GeneratedRecord(index, record_id, path, title, aliases, body)


def render_record(record: GeneratedRecord) -> bytes:
    """The record as a valid ``knowledge-record-v1`` note page in the private partition."""
    stamp = format_timestamp(_EPOCH + timedelta(minutes=record.index))
    frontmatter = {
        "format": RECORD_FORMAT, "id": record.record_id, "revision": 1, "kind": "page", "title": record.title,
        "type": "note", "recorded_at": stamp, "updated_at": stamp, "scope": PRIVATE_SCOPE, "lifecycle": "active",
        "attribution": dict(_ATTRIBUTION),
    }
    if record.aliases:
        frontmatter["aliases"] = list(record.aliases)
    return Record(frontmatter, record.body).render()


def query_words(record: GeneratedRecord, rng: random.Random, common: frozenset[str]) -> str:
    """2-4 distinct content words of ``record`` (its title and body), lowercase, as a user might type."""
    words = [w.strip(".").lower() for w in f"{record.title} {record.body}".split()]
    content = list(dict.fromkeys(w for w in words if w not in common)) or list(dict.fromkeys(words))
    return " ".join(rng.sample(content, min(len(content), rng.randint(2, 4))))


def write_partition(root: Path, count: int, query_count: int, seed: int = 0) -> list[dict[str, str]]:
    """Write ``count`` generated records under ``root`` (a partition directory).

    Returns ``query_count`` queries, each ``{"query", "source"}`` where
    ``source`` is the id of the record its words were taken from.
    """
    for folder in NOTE_SETS:
        (root / NOTES_DIR / folder).mkdir(parents=True, exist_ok=True)
    picker = random.Random(f"queries-{seed}")
    chosen = set(picker.sample(range(count), min(query_count, count)))
    common = frozenset(COMMON)
    queries = []
    for record in generate_records(count, seed):
        (root / record.path).write_bytes(render_record(record))
        if record.index in chosen:
            queries.append({"query": query_words(record, picker, common), "source": record.record_id})
    picker.shuffle(queries)
    return queries
