"""The demo turns the recall gate on in shadow mode with the embedding model, when that model is installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.importers import demo
from engine.service import Engine
from engine.state.statedir import StateDir
from models.fixtures import TINY_EMBEDDER
from models.installed import ModelStore
from models.local import add_local


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StateDir:
    # The tiny fixture stands in for all-minilm-l6-v2-int8 (a catalogue name only its pinned files may take).
    monkeypatch.setattr(demo, "DEFAULT_EMBEDDING_MODEL", "tiny-embedder")
    monkeypatch.setattr(demo, "DEMO_DECISION_MODEL", "embedding/tiny-embedder")
    state = StateDir(tmp_path / "state")
    state.create()
    return state


def config(state: StateDir) -> dict:
    return json.loads(state.config.read_text(encoding="utf-8")) if state.config.is_file() else {}


def test_without_the_model_the_demo_leaves_the_gate_off(state: StateDir) -> None:
    with Engine(state, watch=False) as engine:
        assert demo.seed_demo(engine)["gate"] is None
    assert "decisionModel" not in config(state) and "recallGate" not in config(state)


def test_with_the_model_installed_the_demo_gate_runs_in_shadow_mode_on_it(state: StateDir) -> None:
    add_local(ModelStore(state.models), TINY_EMBEDDER)
    with Engine(state, watch=False) as engine:
        assert demo.seed_demo(engine)["gate"] == "embedding/tiny-embedder"
        assert engine.settings.current().recall_gate.mode == "shadow"
        written = config(state)
        assert demo.seed_demo(engine)["gate"] == "embedding/tiny-embedder"
    assert written["decisionModel"] == "embedding/tiny-embedder"
    assert written["recallGate"] == {"mode": "shadow", "journal": True}
    assert config(state) == written, "seeding again changes nothing"


def test_an_owners_own_choice_is_kept(state: StateDir) -> None:
    add_local(ModelStore(state.models), TINY_EMBEDDER)
    state.config.write_text(json.dumps({"recallGate": {"mode": "off"}}), encoding="utf-8")
    with Engine(state, watch=False) as engine:
        assert demo.seed_demo(engine)["gate"] is None
    assert config(state)["recallGate"] == {"mode": "off"} and "decisionModel" not in config(state)
