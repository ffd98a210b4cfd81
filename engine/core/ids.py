"""Identifiers and timestamps.

Record, source, store and publication ids are opaque, sortable strings: a
short prefix naming the kind and a ULID (48-bit millisecond time, 80 random
bits, Crockford base32).  Identity never comes from a filename or a title.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from datetime import datetime, timezone

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_TWO_DIGITS = [f"{number:02d}" for number in range(100)]
_CROCKFORD_PAIRS = [first + second for first in _CROCKFORD for second in _CROCKFORD]  # 10 bits: two characters

PAGE_PREFIX = "pg"
CLAIM_PREFIX = "cl"
RELATIONSHIP_PREFIX = "rl"
SOURCE_PREFIX = "src"
STORE_PREFIX = "st"
VAULT_PREFIX = "vt"
PUBLICATION_PREFIX = "pub"

# Ids are opaque, but they end up in file names and git paths, so they are
# restricted to a safe alphabet.
ID_REGEX = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
ID_MAX_CHARS = 128
_ID_PATTERN = re.compile(ID_REGEX)
_AGENT_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_GENERATED_PATTERN = re.compile(
    rf"(?:{'|'.join([PAGE_PREFIX, CLAIM_PREFIX, RELATIONSHIP_PREFIX, SOURCE_PREFIX, STORE_PREFIX, VAULT_PREFIX, PUBLICATION_PREFIX])})"
    rf"_[{_CROCKFORD}]{{26}}")


def new_id(prefix: str) -> str:
    """Return ``<prefix>_<ULID>``; monotonic enough for humans to sort by."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    # The value's low 130 bits, most significant first: 26 characters of 5 bits, taken two at a time.
    return f"{prefix}_{''.join([_CROCKFORD_PAIRS[(value >> shift) & 1023] for shift in range(120, -10, -10)])}"


def is_generated_id(value: str) -> bool:
    """Whether ``value`` is exactly an id as ``new_id`` makes them (a known prefix and a ULID)."""
    return _GENERATED_PATTERN.fullmatch(value) is not None


def generated_ids_in(text: str) -> set[str]:
    """Every id as ``new_id`` makes them that occurs anywhere in ``text``, even inside a longer word.

    One left-to-right pass finds them all: two of them never overlap, since an id's ULID holds no ``_`` and
    no prefix ends with another.
    """
    return set(_GENERATED_PATTERN.findall(text))


def is_record_id(value: object) -> bool:
    return isinstance(value, str) and _ID_PATTERN.fullmatch(value) is not None


def is_agent_name(value: object) -> bool:
    return isinstance(value, str) and _AGENT_PATTERN.fullmatch(value) is not None


def canonical_session_id(value: object) -> str | None:
    """The canonical lowercase form of a session UUID, or None if it is not one.

    Session ids name conversation partition directories, so only real UUIDs
    are accepted: nothing that could smuggle a path separator or ``..``.
    """
    if not isinstance(value, str) or len(value) != 36:
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def format_timestamp(moment: datetime) -> str:
    """UTC ISO-8601 with a ``Z`` suffix and whole seconds, as records store it."""
    utc = moment.astimezone(timezone.utc)
    if utc.year < 1000:  # ``strftime`` writes such a year without leading zeros; kept as it was
        return utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    # The same text as that ``strftime`` (a publication formats several a write), put together from kept
    # two-digit texts: no format call at all.
    two = _TWO_DIGITS
    return f"{utc.year}-{two[utc.month]}-{two[utc.day]}T{two[utc.hour]}:{two[utc.minute]}:{two[utc.second]}Z"


def parse_timestamp(value: object) -> datetime | None:
    """Parse an ISO-8601 timestamp with an explicit UTC offset; None if it is not one."""
    if not isinstance(value, str) or not value:
        return None
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.astimezone(timezone.utc)
