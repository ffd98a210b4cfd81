"""Ids and timestamps: the texts they make, held to the plain definitions they are written from."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from engine.core import ids
from engine.core.ids import format_timestamp, is_generated_id, new_id, parse_timestamp


def _ulid_one_char_at_a_time(milliseconds: int, randomness: bytes) -> str:
    """The ULID text by its definition: the value's low 130 bits in Crockford base32, five bits a character."""
    value = (milliseconds << 80) | int.from_bytes(randomness, "big")
    chars = []
    for _ in range(26):
        chars.append("0123456789ABCDEFGHJKMNPQRSTVWXYZ"[value & 31])
        value >>= 5
    return "".join(reversed(chars))


@pytest.mark.parametrize("milliseconds", [0, 1, 1023, 2**48 - 1, 1_764_979_200_000, 2**50 + 5])
@pytest.mark.parametrize("randomness", [bytes(10), b"\xff" * 10, bytes(range(10)), b"\x80" + bytes(9)])
def test_new_id_spells_the_value_as_its_definition_does(monkeypatch, milliseconds, randomness):
    monkeypatch.setattr(ids.time, "time", lambda: milliseconds / 1000)
    monkeypatch.setattr(ids.os, "urandom", lambda size: randomness)
    made = new_id("pg")
    assert made == f"pg_{_ulid_one_char_at_a_time(int(milliseconds / 1000 * 1000), randomness)}"
    assert is_generated_id(made)


def test_new_id_matches_its_definition_over_random_values(monkeypatch):
    rng = random.Random(31)
    for _ in range(2000):
        milliseconds, randomness = rng.getrandbits(48), rng.getrandbits(80).to_bytes(10, "big")
        monkeypatch.setattr(ids.time, "time", lambda: milliseconds / 1000)
        monkeypatch.setattr(ids.os, "urandom", lambda size: randomness)
        assert new_id("pub") == f"pub_{_ulid_one_char_at_a_time(int(milliseconds / 1000 * 1000), randomness)}"


def test_new_ids_are_unique_and_sort_by_time():
    made = [new_id("cl") for _ in range(200)]
    assert len(set(made)) == 200
    assert all(is_generated_id(value) and len(value) == 29 for value in made)
    assert made[0][3:13] <= made[-1][3:13]  # the time part: 10 characters, most significant first


@pytest.mark.parametrize("moment", [
    datetime(2026, 12, 5, 23, 52, 43, 999_999, tzinfo=timezone.utc),
    datetime(1000, 1, 1, tzinfo=timezone.utc),
    datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc),
    datetime(2024, 2, 29, 0, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2024, 1, 1, 1, 2, 3, tzinfo=timezone(timedelta(hours=-8))),
    datetime(999, 12, 31, 12, 0, tzinfo=timezone.utc),  # a year below 1000: strftime's own text
    datetime(1, 1, 1, 0, 0, tzinfo=timezone.utc),
])
def test_format_timestamp_is_strftimes_text(moment):
    assert format_timestamp(moment) == moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_format_timestamp_matches_strftime_over_random_moments():
    rng = random.Random(5)
    start = datetime(1000, 1, 1, tzinfo=timezone.utc)
    for _ in range(2000):
        moment = start + timedelta(seconds=rng.randrange(0, 9000 * 365 * 86400), microseconds=rng.randrange(10**6))
        offset = timezone(timedelta(minutes=rng.randrange(-14 * 60, 14 * 60)))
        moment = moment.astimezone(offset) if moment.year > 1000 else moment
        assert format_timestamp(moment) == moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_formatted_timestamp_reads_back():
    moment = datetime.now(timezone.utc).replace(microsecond=0)
    assert parse_timestamp(format_timestamp(moment)) == moment
