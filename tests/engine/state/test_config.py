"""Owner settings: config.json parsing, migration, re-reading and saving."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from engine.state.config import (
    CONFIG_MAX_BYTES,
    SCHEMA_VERSION,
    NamedStore,
    Settings,
    SettingsSource,
    parse_settings,
    read_settings,
)
from engine.core.errors import InvalidParams


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "config.json"


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def replace_json(path: Path, data: Any) -> None:
    """Swap in new content with os.replace, as editors do: always a new inode, so a new stamp."""
    temp = path.with_name(path.name + ".new")
    temp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(temp, path)


def field_of(data: Any) -> str | None:
    with pytest.raises(InvalidParams) as caught:
        parse_settings(data)
    return caught.value.details.get("field")


# --- defaults and parsing -------------------------------------------------------------


def test_a_missing_file_means_the_defaults(config_path: Path) -> None:
    settings = read_settings(config_path)
    assert settings == Settings()
    assert (settings.schema_version, settings.writes_enabled, settings.stores) == (SCHEMA_VERSION, True, {})


def test_an_empty_object_means_the_defaults() -> None:
    settings = parse_settings({})
    assert settings.writes_enabled is True and settings.stores == {}


def test_a_full_config_parses_into_typed_settings() -> None:
    settings = parse_settings({
        "schemaVersion": 1, "writesEnabled": False,
        "stores": {"work": {"label": "  Work  ", "agents": ["main", "coder"]}, "home": {}},
        "recallGate": {"mode": "live"},
    })
    assert settings.writes_enabled is False
    assert settings.stores["work"] == NamedStore("work", "Work", ("main", "coder"))
    assert settings.stores["home"] == NamedStore("home", "home", ())
    assert settings.raw["recallGate"] == {"mode": "live"}


@pytest.mark.parametrize(("data", "field"), [
    ({"writesEnabled": "yes"}, "writesEnabled"),
    ({"writesEnabled": 1}, "writesEnabled"),
    ({"writesEnabled": None}, "writesEnabled"),
    ({"stores": []}, "stores"),
    ({"stores": "work"}, "stores"),
    ({"stores": {"Work": {}}}, "stores.Work"),
    ({"stores": {"has space": {}}}, "stores.has space"),
    ({"stores": {"-lead": {}}}, "stores.-lead"),
    ({"stores": {"x" * 65: {}}}, f"stores.{'x' * 65}"),
    ({"stores": {"work": ["main"]}}, "stores.work"),
    ({"stores": {"work": {"label": ""}}}, "stores.work.label"),
    ({"stores": {"work": {"label": "two\nlines"}}}, "stores.work.label"),
    ({"stores": {"work": {"label": 5}}}, "stores.work.label"),
    ({"stores": {"work": {"agents": "main"}}}, "stores.work.agents"),
    ({"stores": {"work": {"agents": ["Main"]}}}, "stores.work.agents"),
    ({"stores": {"work": {"agents": [7]}}}, "stores.work.agents"),
    ({"stores": {"work": {"agents": ["main", "main"]}}}, "stores.work.agents"),
    ({"schemaVersion": SCHEMA_VERSION + 1}, "schemaVersion"),
    ({"schemaVersion": 0}, "schemaVersion"),
    ({"schemaVersion": True}, "schemaVersion"),
    ({"schemaVersion": "1"}, "schemaVersion"),
])
def test_each_invalid_value_names_its_field(data: dict, field: str) -> None:
    assert field_of(data) == field


def test_duplicate_agent_message_says_so() -> None:
    with pytest.raises(InvalidParams, match="twice"):
        parse_settings({"stores": {"work": {"agents": ["main", "main"]}}})


def test_a_newer_schema_version_says_which_release_reads_it() -> None:
    with pytest.raises(InvalidParams, match=f"schema version {SCHEMA_VERSION + 1}"):
        parse_settings({"schemaVersion": SCHEMA_VERSION + 1})


@pytest.mark.parametrize("data", [[], "text", None, 3])
def test_config_must_be_a_json_object(data: Any) -> None:
    with pytest.raises(InvalidParams, match="JSON object"):
        parse_settings(data)


def test_read_settings_rejects_invalid_json(config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text("{not json", encoding="utf-8")
    with pytest.raises(InvalidParams, match="not valid JSON"):
        read_settings(config_path)


def test_read_settings_rejects_invalid_utf8(config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InvalidParams, match="not valid JSON"):
        read_settings(config_path)


def test_read_settings_rejects_an_oversized_file(config_path: Path) -> None:
    write_json(config_path, {"padding": "x" * CONFIG_MAX_BYTES})
    with pytest.raises(InvalidParams, match="larger than"):
        read_settings(config_path)


# --- membership --------------------------------------------------------------------------


def test_named_stores_of_lists_every_store_naming_the_agent_sorted() -> None:
    settings = parse_settings({"stores": {
        "zeta": {"agents": ["main"]}, "alpha": {"agents": ["main", "coder"]}, "solo": {"agents": ["coder"]},
    }})
    assert settings.named_stores_of("main") == ["alpha", "zeta"]
    assert settings.named_stores_of("coder") == ["alpha", "solo"]
    assert settings.named_stores_of("stranger") == []


def test_with_stores_replaces_membership_and_keeps_other_keys() -> None:
    settings = parse_settings({"stores": {"old": {"agents": ["main"]}}, "custom": 1})
    updated = settings.with_stores({"new": NamedStore("new", "New", ("main",))})
    assert updated.named_stores_of("main") == ["new"]
    assert updated.raw["stores"] == {"new": {"label": "New", "agents": ["main"]}}
    assert updated.raw["custom"] == 1
    assert settings.named_stores_of("main") == ["old"]  # the original is unchanged


# --- the settings source ---------------------------------------------------------------------


def test_source_without_a_file_serves_defaults(config_path: Path) -> None:
    source = SettingsSource(config_path)
    assert source.current() == Settings()
    assert source.problem is None
    assert not config_path.exists()  # reading never creates the file


def test_source_reads_the_file_at_start(config_path: Path) -> None:
    write_json(config_path, {"writesEnabled": False})
    assert SettingsSource(config_path).current().writes_enabled is False


def test_source_picks_up_a_valid_change(config_path: Path) -> None:
    write_json(config_path, {"writesEnabled": True})
    source = SettingsSource(config_path)
    replace_json(config_path, {"writesEnabled": False, "stores": {"work": {"agents": ["main"]}}})
    settings = source.current()
    assert settings.writes_enabled is False
    assert settings.named_stores_of("main") == ["work"]


def test_source_picks_up_an_in_place_edit_of_a_different_size(config_path: Path) -> None:
    write_json(config_path, {"writesEnabled": True})
    source = SettingsSource(config_path)
    config_path.write_text(json.dumps({"writesEnabled": False, "note": "longer"}), encoding="utf-8")
    assert source.current().writes_enabled is False


def test_source_keeps_the_last_valid_settings_when_the_file_turns_invalid(config_path: Path) -> None:
    write_json(config_path, {"writesEnabled": False, "stores": {"work": {"agents": ["main"]}}})
    source = SettingsSource(config_path)
    replace_json(config_path, {"writesEnabled": "nope"})
    settings = source.current()
    assert settings.writes_enabled is False
    assert settings.named_stores_of("main") == ["work"]
    assert source.problem is not None
    assert "writesEnabled" in source.problem


def test_source_reports_broken_json_and_recovers_when_fixed(config_path: Path) -> None:
    write_json(config_path, {"writesEnabled": False})
    source = SettingsSource(config_path)
    temp = config_path.with_name("broken")
    temp.write_text("{", encoding="utf-8")
    os.replace(temp, config_path)
    assert source.current().writes_enabled is False
    assert source.problem is not None and "not valid JSON" in source.problem
    replace_json(config_path, {"writesEnabled": True})
    assert source.current().writes_enabled is True
    assert source.problem is None


def test_source_invalid_from_the_start_serves_defaults_and_a_problem(config_path: Path) -> None:
    write_json(config_path, {"stores": {"Bad Name": {}}})
    source = SettingsSource(config_path)
    assert source.current() == Settings()
    assert source.problem is not None and "stores.Bad Name" in source.problem


def test_save_round_trips_and_preserves_unknown_keys(config_path: Path) -> None:
    write_json(config_path, {"writesEnabled": True, "recallGate": {"mode": "live"}, "futureKey": [1, 2]})
    source = SettingsSource(config_path)
    updated = source.current().with_stores({"work": NamedStore("work", "Work", ("main",))})
    source.save(updated)
    on_disk = json.loads(config_path.read_text(encoding="utf-8"))
    assert on_disk["recallGate"] == {"mode": "live"} and on_disk["futureKey"] == [1, 2]
    assert on_disk["schemaVersion"] == SCHEMA_VERSION and on_disk["writesEnabled"] is True
    assert on_disk["stores"] == {"work": {"label": "Work", "agents": ["main"]}}
    reread = read_settings(config_path)
    assert (reread.writes_enabled, reread.stores) == (updated.writes_enabled, updated.stores)
    assert SettingsSource(config_path).current().named_stores_of("main") == ["work"]
    assert source.current() is updated  # the saved file is not re-read as a change
    assert stat.S_IMODE(os.stat(config_path).st_mode) == 0o600


def test_save_creates_the_state_directory_and_clears_a_problem(config_path: Path) -> None:
    source = SettingsSource(config_path)
    source.save(Settings(writes_enabled=False))
    assert read_settings(config_path).writes_enabled is False
    replace_json(config_path, {"writesEnabled": 3})
    source.current()
    assert source.problem is not None
    source.save(Settings())
    assert source.problem is None
    assert source.current().writes_enabled is True


def test_save_refuses_invalid_settings_and_leaves_the_file(config_path: Path) -> None:
    write_json(config_path, {"writesEnabled": False})
    before = config_path.read_bytes()
    source = SettingsSource(config_path)
    bad = Settings(stores={"Bad Name": NamedStore("Bad Name", "x", ())}, raw={"stores": {"Bad Name": {}}})
    with pytest.raises(InvalidParams):
        source.save(bad)
    assert config_path.read_bytes() == before
    assert source.current().writes_enabled is False


def test_to_json_always_writes_version_switch_and_stores() -> None:
    data = json.loads(Settings().to_json())
    assert data == {"schemaVersion": SCHEMA_VERSION, "writesEnabled": True, "stores": {}}


# --- allowSecrets ----------------------------------------------------------------------------


def test_allow_secrets_is_off_by_default_and_reads_a_boolean() -> None:
    assert parse_settings({}).allow_secrets is False
    assert Settings().allow_secrets is False
    assert parse_settings({"allowSecrets": True}).allow_secrets is True
    assert parse_settings({"allowSecrets": False}).allow_secrets is False


@pytest.mark.parametrize("value", ["true", 1, 0, None, [], {"on": True}])
def test_allow_secrets_is_only_the_json_literals(value: Any) -> None:
    assert field_of({"allowSecrets": value}) == "allowSecrets"


def test_an_invalid_allow_secrets_keeps_the_last_valid_setting(config_path: Path) -> None:
    write_json(config_path, {"allowSecrets": True})
    source = SettingsSource(config_path)
    assert source.current().allow_secrets is True
    replace_json(config_path, {"allowSecrets": "false"})
    assert source.current().allow_secrets is True
    assert source.problem is not None and "allowSecrets" in source.problem
    replace_json(config_path, {"allowSecrets": False})
    assert source.current().allow_secrets is False and source.problem is None


def test_allow_secrets_survives_a_save(config_path: Path) -> None:
    write_json(config_path, {"allowSecrets": True})
    source = SettingsSource(config_path)
    source.save(source.current().with_stores({}))
    assert json.loads(config_path.read_text(encoding="utf-8"))["allowSecrets"] is True
    assert SettingsSource(config_path).current().allow_secrets is True


EMBEDDING = {"decisionModel": "embedding/all-minilm-l6-v2-int8"}   # the search's default embeddingModel too
RERANKER = {"decisionModel": "onnx/gte-reranker-modernbert-base"}


@pytest.mark.parametrize("config, reads", [
    ({**EMBEDDING}, False),                                                        # no recallGate block
    ({**EMBEDDING, "recallGate": {"mode": "off", "candidates": "hybrid"}}, False),
    ({**EMBEDDING, "recallGate": {}}, True),                                       # its page vectors are the index's
    ({**EMBEDDING, "recallGate": {"candidates": "model"}}, False),                 # labels, never page vectors
    ({**EMBEDDING, "embeddingModel": "onnx/other", "recallGate": {}}, False),      # other vectors than the index's
    ({**EMBEDDING, "embeddingModel": None, "recallGate": {"candidates": "hybrid"}}, False),   # nothing to build with
    ({**RERANKER, "recallGate": {}}, False),
    ({**RERANKER, "recallGate": {"candidates": "hybrid"}}, True),
    ({**RERANKER, "recallGate": {"longWindows": 3}}, True),                        # the cascade's similarity order
])
def test_the_gate_reads_the_stores_vectors_whatever_the_knowledge_base_switch(config: dict[str, Any],
                                                                               reads: bool) -> None:
    for switch in (False, True):
        settings = parse_settings({**config, "knowledgeRuntimeEnabled": switch})
        assert settings.gate_reads_vectors() is reads
