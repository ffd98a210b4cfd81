"""``recallGate`` in config.json: every key of the settings table, its default and its range."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.state.config import SettingsSource, parse_settings
from engine.core.errors import InvalidParams
from engine.state.gate_settings import GateSettings, parse_gate_settings


def test_no_block_means_no_gate_and_an_empty_block_means_every_default() -> None:
    assert parse_settings({}).recall_gate is None
    gate = parse_settings({"recallGate": {}}).recall_gate
    # No highThreshold: the Decision model in force brings its documented one (the spec's 0.75 for a reranker).
    assert gate == GateSettings(high_threshold_set=False) and gate.high_threshold == 0.75
    assert gate.to_config() == {
        "mode": "shadow", "candidates": "keyword", "maxCandidates": 10, "excerpts": 4,
        "excerptChars": 1000, "pageChars": 2800, "mediumThreshold": None, "skipHintBelow": None,
        "timeoutMs": 1500, "maxIndexChars": 24000, "journal": False, "longWindows": 0}


@pytest.mark.parametrize("key, low, high", [
    ("maxCandidates", 1, 10), ("excerpts", 1, 10), ("excerptChars", 100, 4000), ("pageChars", 200, 6000),
    ("timeoutMs", 100, 10000), ("maxIndexChars", 1000, 100_000), ("longWindows", 0, 10),
])
def test_integer_keys_accept_their_range_only(key: str, low: int, high: int) -> None:
    for good in (low, high):
        assert parse_gate_settings({key: good}).to_config()[key] == good
    written = parse_gate_settings({key: float(low)}).to_config()[key]  # a whole number, as JSON Schema counts one
    assert written == low and type(written) is int
    for bad in (low - 1, high + 1, low + 0.5, True, str(low)):
        with pytest.raises(InvalidParams) as raised:
            parse_gate_settings({key: bad})
        assert raised.value.details["field"] == f"recallGate.{key}"
    assert parse_gate_settings({key: None}) == parse_gate_settings({})  # null is the key left out


def test_modes_sources_thresholds_and_journal() -> None:
    for mode in ("off", "shadow", "live"):
        assert parse_gate_settings({"mode": mode}).mode == mode
    assert parse_gate_settings({"candidates": "model"}).candidates == "model"
    assert parse_gate_settings({"candidates": "hybrid"}).candidates == "hybrid"
    assert parse_gate_settings({}).candidates == "keyword", "keyword stays the default"
    gate = parse_gate_settings({"highThreshold": 1, "mediumThreshold": 0.5, "skipHintBelow": 0, "journal": True})
    assert (gate.high_threshold, gate.medium_threshold, gate.skip_hint_below, gate.journal) == (1.0, 0.5, 0.0, True)
    assert parse_gate_settings({"mediumThreshold": None, "skipHintBelow": None}) == GateSettings(high_threshold_set=False)
    assert parse_gate_settings({"highThreshold": None, "mode": None, "journal": None}) == parse_gate_settings({})
    for block, field in (({"mode": "on"}, "mode"), ({"candidates": "vector"}, "candidates"),
                         ({"highThreshold": 1.5}, "highThreshold"),
                         ({"skipHintBelow": -0.1}, "skipHintBelow"), ({"mediumThreshold": "0.5"}, "mediumThreshold"),
                         ({"mediumThreshold": 0.8}, "mediumThreshold"), ({"journal": "yes"}, "journal"),
                         ({"timeout": 100}, "timeout")):
        with pytest.raises(InvalidParams) as raised:
            parse_gate_settings(block)
        assert raised.value.details["field"] == f"recallGate.{field}", block
    with pytest.raises(InvalidParams):
        parse_gate_settings(["shadow"])


def test_an_invalid_block_is_reported_and_the_last_valid_settings_stay(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"recallGate": {"mode": "live", "highThreshold": 0.6}}), encoding="utf-8")
    source = SettingsSource(config)
    assert source.current().recall_gate.high_threshold == 0.6
    config.write_text(json.dumps({"recallGate": {"mode": "live", "excerptChars": 50}}), encoding="utf-8")
    assert source.current().recall_gate.high_threshold == 0.6
    assert source.problem and "recallGate.excerptChars" in source.problem
    config.write_text(json.dumps({"recallGate": {"mode": "shadow"}}), encoding="utf-8")
    assert source.current().recall_gate.mode == "shadow" and source.problem is None
