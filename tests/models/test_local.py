"""`knowledge models add-local`: layout checks, safety refusals and recorded hashes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.cli.commands import main
from models.errors import ModelRefused, ModelVerifyFailed
from models.fixtures import TINY_RERANKER, TINY_RERANKER_FILES
from models.installed import PINNED, REGISTERED, ModelStore
from models.local import add_local


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    return ModelStore(tmp_path / "state" / "models")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A private copy of the tiny fixture that a test may spoil."""
    copy = tmp_path / "tiny-copy"
    shutil.copytree(TINY_RERANKER, copy)
    return copy


def test_a_folder_registers_with_the_hash_of_every_file_it_needs(store: ModelStore) -> None:
    model = add_local(store, TINY_RERANKER, name="tiny")

    assert (model.name, model.source, model.onnx, model.folder) == ("tiny", "local", "onnx/model.onnx", TINY_RERANKER)
    assert {f.path: (f.size, f.sha256) for f in model.files} == TINY_RERANKER_FILES
    assert {f.trust for f in model.files} == {REGISTERED}
    assert store.get("tiny") == model          # the manifest round-trips
    model.verify()


def test_the_name_defaults_to_the_folder_and_must_be_usable(store: ModelStore, folder: Path, tmp_path: Path) -> None:
    assert add_local(store, folder).name == "tiny-copy"
    odd = tmp_path / "no good"
    shutil.copytree(TINY_RERANKER, odd)
    with pytest.raises(ModelRefused, match="not a usable model name"):
        add_local(store, odd)


def test_a_second_registration_under_the_same_name_needs_replace(store: ModelStore, folder: Path) -> None:
    add_local(store, TINY_RERANKER, name="tiny")
    with pytest.raises(ModelRefused, match="already installed"):
        add_local(store, folder, name="tiny")
    assert add_local(store, folder, name="tiny", replace=True).folder == folder


@pytest.mark.parametrize("pickle_name", ["pytorch_model.bin", "model.pt", "weights.pth", "state.pkl",
                                         "onnx/extra.pickle", "last.ckpt"])
def test_pickle_files_are_refused_and_nothing_is_recorded(store: ModelStore, folder: Path, pickle_name: str) -> None:
    (folder / pickle_name).write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(ModelRefused, match="pickle") as raised:
        add_local(store, folder, name="tiny")
    assert pickle_name in raised.value.details["files"]
    assert store.installed() == {} and not store.manifest_path.exists()


def test_python_code_in_the_folder_is_refused(store: ModelStore, folder: Path) -> None:
    (folder / "modeling_custom.py").write_text("import os\n", encoding="utf-8")
    with pytest.raises(ModelRefused, match="Python code"):
        add_local(store, folder, name="tiny")


@pytest.mark.parametrize("config_name, extra", [
    ("config.json", {"auto_map": {"AutoModel": "modeling_custom.Model"}}),
    ("config.json", {"trust_remote_code": True}),
    ("tokenizer_config.json", {"auto_map": {"AutoTokenizer": ["tok.Custom", None]}}),
])
def test_configurations_asking_for_remote_code_are_refused(store: ModelStore, folder: Path, config_name: str,
                                                           extra: dict) -> None:
    path = folder / config_name
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    path.write_text(json.dumps({**data, **extra}), encoding="utf-8")
    with pytest.raises(ModelRefused, match="remote code"):
        add_local(store, folder, name="tiny")
    assert store.installed() == {}


@pytest.mark.parametrize("missing", ["tokenizer.json", "config.json"])
def test_the_hugging_face_layout_is_required(store: ModelStore, folder: Path, missing: str) -> None:
    (folder / missing).unlink()
    with pytest.raises(ModelRefused, match=f"no {missing}"):
        add_local(store, folder, name="tiny")


def test_a_folder_without_weights_or_with_a_broken_tokenizer_is_refused(store: ModelStore, folder: Path) -> None:
    (folder / "tokenizer.json").write_text("{\"not\": \"a tokenizer\"}", encoding="utf-8")
    with pytest.raises(ModelRefused, match="tokenizer.json cannot be read"):
        add_local(store, folder, name="tiny")
    shutil.copy(TINY_RERANKER / "tokenizer.json", folder / "tokenizer.json")
    shutil.rmtree(folder / "onnx")
    with pytest.raises(ModelRefused, match="no ONNX graph"):
        add_local(store, folder, name="tiny")
    with pytest.raises(ModelRefused, match="not a folder"):
        add_local(store, folder / "nowhere", name="tiny")


def test_safetensors_weights_register_but_are_not_runnable(store: ModelStore, folder: Path) -> None:
    shutil.rmtree(folder / "onnx")
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    model = add_local(store, folder, name="st")
    assert model.onnx is None and not model.runnable
    assert "model.safetensors" in {f.path for f in model.files}


def test_several_onnx_files_need_a_choice(store: ModelStore, folder: Path) -> None:
    (folder / "onnx" / "model.onnx").rename(folder / "onnx" / "model_fp16.onnx")
    shutil.copy(folder / "onnx" / "model_fp16.onnx", folder / "onnx" / "model_int8.onnx")
    with pytest.raises(ModelRefused, match="--variant"):
        add_local(store, folder, name="tiny")
    model = add_local(store, folder, name="tiny", variant="model_int8")
    assert (model.onnx, model.variant) == ("onnx/model_int8.onnx", "model_int8")
    with pytest.raises(ModelRefused, match="no ONNX file"):
        add_local(store, folder, name="other", variant="model_q4")


def test_a_catalogue_name_only_takes_the_pinned_files(store: ModelStore, folder: Path) -> None:
    with pytest.raises(ModelRefused, match="differs from the file pinned"):
        add_local(store, folder, name="gte-reranker-modernbert-base")
    assert store.installed() == {}


def test_a_file_changed_after_registration_fails_verification(store: ModelStore, folder: Path) -> None:
    model = add_local(store, folder, name="tiny")
    with open(folder / "config.json", "a", encoding="utf-8") as handle:
        handle.write(" ")
    with pytest.raises(ModelVerifyFailed, match="config.json of model tiny changed since it was registered"):
        model.verify()


def test_the_command_line_reports_a_refusal(folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (folder / "pytorch_model.bin").write_bytes(b"x")
    state = tmp_path / "cli-state"

    code = main(["models", "add-local", str(folder), "--state-dir", str(state)])

    assert code == 2 and "pickle" in capsys.readouterr().err
    assert not (state / "models" / "manifest.json").exists()
    assert main(["models", "add-local", str(TINY_RERANKER), "--name", "tiny", "--state-dir", str(state)]) == 0
    assert main(["models", "list", "--json", "--state-dir", str(state)]) == 0
    listing = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert [m["name"] for m in listing["installed"]] == ["tiny"]
    assert listing["installed"][0]["selectAs"] == "onnx/tiny"
    assert listing["catalogue"][0]["name"] == "gte-reranker-modernbert-base"


def test_registered_files_keep_their_trust_level_through_the_manifest(store: ModelStore) -> None:
    add_local(store, TINY_RERANKER, name="tiny")
    raw = json.loads(store.manifest_path.read_text(encoding="utf-8"))
    assert raw["schemaVersion"] == 1
    assert {f["trust"] for f in raw["models"]["tiny"]["files"]} == {REGISTERED}
    assert PINNED != REGISTERED
