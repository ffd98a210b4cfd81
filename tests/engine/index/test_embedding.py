"""The embedding runtime on the committed tiny embedder: loading, pooling, batching, and why it is unavailable."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.state.config import SettingsSource, parse_settings
from engine.index.embedding import (
    FAILED,
    NOT_CONFIGURED,
    NOT_INSTALLED,
    READY,
    Embedder,
    EmbeddingRuntime,
    EmbeddingStopped,
    RunSettings,
    plan_batches,
)
from engine.core.errors import InvalidParams
from models.fixtures import TINY_EMBEDDER
from models.installed import ModelStore
from models.local import add_local


@pytest.fixture
def embedder(tmp_path) -> Embedder:
    model = add_local(ModelStore(tmp_path / "models"), TINY_EMBEDDER)
    loaded = Embedder(model)
    loaded.load()
    return loaded


def test_vectors_are_unit_length_mean_pooled_and_independent_of_their_batch(embedder):
    texts = ["pizza", "Alice painted the museum piece in March, then Bruno brewed ginger beer in the cellar.",
             "the team"]
    together = embedder.embed(texts)
    assert together.shape == (3, 32) and together.dtype == np.float32
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    for row, text in enumerate(texts):
        alone = embedder.embed([text])[0]
        assert np.allclose(alone, together[row], atol=1e-5), text  # padding never leaks into a vector
    assert embedder.dimensions == 32
    assert not np.allclose(together[0], together[2])


def test_a_run_asked_to_stop_ends_between_two_batches(embedder, monkeypatch):
    monkeypatch.setattr(embedder, "settings", RunSettings(rows=1))
    ran: list[int] = []
    model_run = embedder._run
    monkeypatch.setattr(embedder, "_run", lambda rows: ran.append(len(rows)) or model_run(rows))
    with pytest.raises(EmbeddingStopped, match="2 of 3 texts left"):
        embedder.embed(["pizza", "the team", "museum"], stop=lambda: len(ran) == 1)
    assert ran == [1]
    assert embedder.embed(["pizza", "the team"], stop=lambda: False).shape == (2, 32)
    assert ran == [1, 1, 1]


def test_token_states_come_from_the_same_run_as_the_vectors(embedder):
    texts = ["pizza", "Alice painted the museum piece in March, then Bruno brewed ginger beer."]
    vectors, states = embedder.token_states(texts)
    assert np.allclose(vectors, embedder.embed(texts), atol=1e-6)
    for text, state in zip(texts, states):
        encoding = embedder._tokenizer.encode(text)
        assert state.ids == encoding.ids and state.pieces == encoding.tokens
        assert state.states.shape == (len(encoding.ids), 32)
        assert np.allclose(np.linalg.norm(state.states, axis=1), 1.0, atol=1e-5)
    assert embedder.token_states([])[0].shape == (0, 32)


def test_the_tokenizer_files_own_padding_and_truncation_are_replaced(embedder):
    tokenizer_file = json.loads((TINY_EMBEDDER / "tokenizer.json").read_text(encoding="utf-8"))
    assert tokenizer_file["padding"]["strategy"] == {"Fixed": 128}  # the real file's shape
    assert embedder._tokenizer.padding is None
    assert embedder._tokenizer.truncation["max_length"] == embedder.max_tokens == 256
    long_text = " ".join(["pizza"] * 1000)
    assert len(embedder._tokenizer.encode(long_text).ids) == 256
    assert embedder.embed([long_text]).shape == (1, 32)


def test_the_fingerprint_names_the_weights_and_the_token_window(embedder):
    assert embedder.fingerprint.startswith(embedder.model.fingerprint[:32])
    assert embedder.fingerprint.endswith("-256")
    assert embedder.name == "onnx/tiny-embedder"


def test_batches_group_similar_lengths_within_the_row_and_token_caps():
    lengths = [5, 300, 6, 7, 290, 5]
    batches = plan_batches(lengths, rows=3, tokens=700)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 3 and len(batch) * max(lengths[i] for i in batch) <= 700
    assert batches[0] == [0, 5, 2]


def runtime_for(tmp_path, **config) -> EmbeddingRuntime:
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(config), encoding="utf-8")
    return EmbeddingRuntime(SettingsSource(config_path).current, ModelStore(tmp_path / "models"))


def test_the_runtime_says_why_there_is_no_model_and_picks_one_up_once_installed(tmp_path):
    missing = runtime_for(tmp_path)
    assert missing.current() is None
    status = missing.status()
    assert status.state == NOT_INSTALLED and status.model == "onnx/all-minilm-l6-v2-int8"
    assert "knowledge models pull all-minilm-l6-v2-int8" in status.reason
    off = runtime_for(tmp_path, embeddingModel=None)
    assert off.current() is None and off.status().state == NOT_CONFIGURED
    chosen = runtime_for(tmp_path, embeddingModel="onnx/tiny-embedder")
    assert chosen.status().state == NOT_INSTALLED
    add_local(ModelStore(tmp_path / "models"), TINY_EMBEDDER)
    assert chosen.current() is not None and chosen.status().state == READY


def test_a_model_whose_files_changed_is_refused(tmp_path):
    folder = tmp_path / "copy"
    for path in TINY_EMBEDDER.rglob("*"):
        if path.is_file():
            target = folder / path.relative_to(TINY_EMBEDDER)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    add_local(ModelStore(tmp_path / "models"), folder, name="copied")
    (folder / "config.json").write_text("{}", encoding="utf-8")
    runtime = runtime_for(tmp_path, embeddingModel="onnx/copied")
    assert runtime.current() is None
    assert runtime.status().state == FAILED and "changed since it was registered" in runtime.status().reason


def test_config_keys_of_the_knowledge_base_runtime():
    defaults = parse_settings({})
    assert defaults.knowledge_runtime_enabled is False
    assert defaults.embedding_model == "onnx/all-minilm-l6-v2-int8"
    assert parse_settings({"knowledgeRuntimeEnabled": True, "embeddingModel": None}).embedding_model is None
    for bad in ({"knowledgeRuntimeEnabled": "yes"}, {"embeddingModel": "rerank/x"}, {"embeddingModel": "onnx/../x"},
                {"embeddingModel": 3}):
        with pytest.raises(InvalidParams) as raised:
            parse_settings(bad)
        assert raised.value.details["field"] == next(iter(bad))
