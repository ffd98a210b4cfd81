"""``sync`` in config.json: automatic sync's switches and times, each key's default and range."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.core.errors import InvalidParams
from engine.state.config import SettingsSource, parse_settings
from engine.state.sync_settings import SyncSettings, parse_sync_settings


def test_no_block_means_automatic_sync_with_the_defaults() -> None:
    assert parse_settings({}).sync == SyncSettings() == parse_sync_settings({})
    defaults = SyncSettings()
    assert (defaults.automatic, defaults.interval_seconds, defaults.quiet_seconds, defaults.batch_seconds,
            defaults.backoff_max_seconds) == (True, 300, 10, 60, 3600)


@pytest.mark.parametrize("key, low, high", [
    ("intervalSeconds", 30, 86_400), ("quietSeconds", 1, 60), ("batchSeconds", 10, 3_600),
    ("backoffMaxSeconds", 60, 86_400),
])
def test_times_accept_their_range_only(key: str, low: int, high: int) -> None:
    field = {"intervalSeconds": "interval_seconds", "quietSeconds": "quiet_seconds",
             "batchSeconds": "batch_seconds", "backoffMaxSeconds": "backoff_max_seconds"}[key]
    for good in (low, high, float(low)):  # a whole number, as JSON Schema counts one
        assert getattr(parse_sync_settings({key: good}), field) == good
    for bad in (low - 1 if key != "quietSeconds" else 0, low + 0.5, True, str(low)):
        with pytest.raises(InvalidParams) as raised:
            parse_sync_settings({key: bad})
        assert raised.value.details["field"] == f"sync.{key}"
    assert parse_sync_settings({key: None}) == parse_sync_settings({})  # null is the key left out


def test_quiet_is_never_longer_than_the_batch_period() -> None:
    with pytest.raises(InvalidParams) as raised:
        parse_sync_settings({"quietSeconds": 61})
    assert raised.value.details["field"] == "sync.quietSeconds"
    assert parse_sync_settings({"quietSeconds": 120, "batchSeconds": 120}).quiet_seconds == 120


def test_automatic_per_store_by_name_or_id() -> None:
    settings = parse_sync_settings({"automatic": False, "stores": {"team": {"automatic": True},
                                                                   "st_01abc": {"automatic": False}}})
    assert settings.automatic_for("st_9", "team") and not settings.automatic_for("st_9", None)
    assert not settings.automatic_for("st_01abc", "team")  # the id is the more precise
    assert parse_sync_settings({"stores": {"st_01abc": {"automatic": False}}}).automatic_for("st_x", None)


@pytest.mark.parametrize("block, field", [
    ([], "sync"), ({"automatic": "yes"}, "sync.automatic"), ({"every": 5}, "sync.every"),
    ({"stores": []}, "sync.stores"), ({"stores": {"team": False}}, "sync.stores.team"),
    ({"stores": {"team": {}}}, "sync.stores.team.automatic"),
    ({"stores": {"team": {"automatic": True, "intervalSeconds": 5}}}, "sync.stores.team.intervalSeconds"),
    ({"stores": {"": {"automatic": True}}}, "sync.stores."),
])
def test_a_bad_block_is_refused_naming_the_key(block: object, field: str) -> None:
    with pytest.raises(InvalidParams) as raised:
        parse_settings({"sync": block})
    assert raised.value.details["field"] == field


def test_an_invalid_block_keeps_the_settings_in_force(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"sync": {"intervalSeconds": 600}}), encoding="utf-8")
    source = SettingsSource(path)
    assert source.current().sync.interval_seconds == 600
    path.write_text(json.dumps({"sync": {"intervalSeconds": 1}}), encoding="utf-8")
    assert source.current().sync.interval_seconds == 600
    assert source.problem is not None and "sync.intervalSeconds" in source.problem
