"""`knowledge models pull`: pinned, verified, resumable, and quick to say when the hub is out of reach."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from engine.cli.commands import main
from models.catalogue import CatalogueEntry, PinnedFile, Variant
from models.errors import ModelDownloadFailed, ModelNotFound, ModelOffline, ModelUnpinned, ModelVerifyFailed
from models.fixtures import TINY_RERANKER, TINY_RERANKER_FILES
from models.installed import PINNED, ModelStore
from models.pull import PARTIAL_DIR, pull

from .fake_hub import FakeHub, running

REVISION = "0123456789abcdef0123456789abcdef01234567"
FILES = {path: (TINY_RERANKER / path).read_bytes() for path in TINY_RERANKER_FILES}


def tiny_entry(**unpinned: bool) -> dict[str, CatalogueEntry]:
    def pin(path: str) -> PinnedFile:
        size, digest = TINY_RERANKER_FILES[path]
        return PinnedFile(path, None, None, "test") if unpinned.get(path) else PinnedFile(path, size, digest, "test")

    entry = CatalogueEntry("tiny", "owner/tiny", REVISION, "Apache-2.0", "test model",
                           {"fp32": Variant("fp32", pin("onnx/model.onnx"))}, "fp32",
                           (pin("tokenizer.json"), pin("config.json")))
    return {"tiny": entry}


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    return ModelStore(tmp_path / "state" / "models")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_offline_fails_fast_with_a_clear_message_through_hf_endpoint(store: ModelStore,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    started = time.monotonic()
    with pytest.raises(ModelOffline, match="cannot reach http://127.0.0.1") as raised:
        pull(store, "gte-reranker-modernbert-base")
    assert time.monotonic() - started < 5
    assert "nothing was downloaded" in raised.value.message and "add-local" in raised.value.message
    assert store.installed() == {}


def test_the_command_line_reports_offline_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    started = time.monotonic()
    code = main(["models", "pull", "gte-reranker-modernbert-base", "--state-dir", str(tmp_path / "state")])
    assert code == 2 and time.monotonic() - started < 5
    assert capsys.readouterr().err.startswith("knowledge models: cannot reach http://127.0.0.1:")


def test_hf_hub_offline_is_honoured_without_any_request(store: ModelStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub = FakeHub("owner/tiny", REVISION, FILES)
    with running(hub), pytest.raises(ModelOffline, match="HF_HUB_OFFLINE"):
        pull(store, "tiny", endpoint=hub.url, catalogue=tiny_entry())
    assert hub.requests == []


def test_an_unpinned_file_is_never_fetched(store: ModelStore) -> None:
    hub = FakeHub("owner/tiny", REVISION, FILES)
    with running(hub), pytest.raises(ModelUnpinned, match="never fetched as verified"):
        pull(store, "tiny", endpoint=hub.url, catalogue=tiny_entry(**{"tokenizer.json": True}))
    assert hub.requests == []
    with pytest.raises(ModelUnpinned, match="fp32, fp16, int8, bnb4"):
        pull(store, "gte-reranker-modernbert-base", "quantized", endpoint=f"http://127.0.0.1:{closed_port()}")


def test_unknown_models_and_variants_are_named(store: ModelStore) -> None:
    with pytest.raises(ModelNotFound, match="not in the catalogue"):
        pull(store, "no-such-model")
    with pytest.raises(ModelNotFound, match="variants: fp32, fp16"):
        pull(store, "gte-reranker-modernbert-base", "fp64")


def test_a_pull_fetches_the_pinned_revision_verifies_and_records_it(store: ModelStore) -> None:
    hub = FakeHub("owner/tiny", REVISION, FILES)
    lines: list[str] = []
    with running(hub):
        model = pull(store, "tiny", endpoint=hub.url, catalogue=tiny_entry(), say=lines.append)

    assert all(f"/owner/tiny/resolve/{REVISION}/" in path for _, path, _ in hub.requests)
    assert sorted(hub.gets()) == sorted(f"/owner/tiny/resolve/{REVISION}/{p}" for p in FILES)
    assert model.folder == store.folder_for("tiny") and model.onnx == "onnx/model.onnx"
    assert {f.path: (f.size, f.sha256) for f in model.files} == TINY_RERANKER_FILES
    assert {f.trust for f in model.files} == {PINNED}
    assert (model.repo, model.revision) == ("owner/tiny", REVISION)
    assert store.get("tiny") == model
    for path, data in FILES.items():
        assert (model.folder / path).read_bytes() == data
    assert sum("sha256 verified" in line for line in lines) == 3
    model.verify()


def test_a_second_pull_sends_nothing_for_verified_files(store: ModelStore) -> None:
    hub = FakeHub("owner/tiny", REVISION, FILES)
    with running(hub):
        pull(store, "tiny", endpoint=hub.url, catalogue=tiny_entry())
        hub.requests.clear()
        lines: list[str] = []
        pull(store, "tiny", endpoint=hub.url, catalogue=tiny_entry(), say=lines.append)
    assert hub.requests == [] and all("already present and verified" in line for line in lines)


def test_an_interrupted_download_resumes_with_a_range_request(store: ModelStore) -> None:
    data = FILES["onnx/model.onnx"]
    partial = store.folder_for("tiny") / PARTIAL_DIR / "onnx" / "model.onnx.part"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(data[:100_000])
    hub = FakeHub("owner/tiny", REVISION, FILES)
    with running(hub):
        model = pull(store, "tiny", endpoint=hub.url, catalogue=tiny_entry())
    ranged = [header for method, path, header in hub.requests if method == "GET" and path.endswith("model.onnx")]
    assert ranged == ["bytes=100000-"]
    assert (model.folder / "onnx" / "model.onnx").read_bytes() == data and not partial.exists()


def test_bytes_that_do_not_match_the_pin_are_discarded(store: ModelStore) -> None:
    tampered = dict(FILES, **{"config.json": FILES["config.json"].replace(b"512", b"513")})
    hub = FakeHub("owner/tiny", REVISION, tampered)
    with running(hub), pytest.raises(ModelVerifyFailed, match="config.json arrived with sha256"):
        pull(store, "tiny", endpoint=hub.url, catalogue=tiny_entry())
    assert store.installed() == {}
    assert not (store.folder_for("tiny") / "config.json").exists()
    assert not (store.folder_for("tiny") / PARTIAL_DIR / "config.json.part").exists()


def test_a_size_that_differs_from_the_pin_stops_before_downloading(store: ModelStore) -> None:
    hub = FakeHub("owner/tiny", REVISION, dict(FILES, **{"onnx/model.onnx": FILES["onnx/model.onnx"] + b"x"}))
    with running(hub), pytest.raises(ModelVerifyFailed, match="not the pinned"):
        pull(store, "tiny", endpoint=hub.url, catalogue=tiny_entry())
    assert hub.gets() == []


def test_a_missing_file_on_the_hub_is_a_download_failure(store: ModelStore) -> None:
    hub = FakeHub("owner/tiny", REVISION, {k: v for k, v in FILES.items() if k != "onnx/model.onnx"})
    with running(hub), pytest.raises(ModelDownloadFailed, match="HTTP 404"):
        pull(store, "tiny", endpoint=hub.url, catalogue=tiny_entry())
    assert store.installed() == {}


def test_a_progress_bar_may_cancel_and_the_partial_file_is_resumed(store: ModelStore) -> None:
    from models.errors import ModelCancelled

    class CancellingBar:
        def __init__(self, **_: object) -> None:
            pass

        def __enter__(self) -> "CancellingBar":
            return self

        def __exit__(self, *exc_info: object) -> None:
            pass

        def update(self, n: int) -> None:
            raise ModelCancelled("cancelled by the owner")

    hub = FakeHub("owner/tiny", REVISION, FILES)
    with running(hub):
        with pytest.raises(ModelCancelled):
            pull(store, "tiny", endpoint=hub.url, catalogue=tiny_entry(), tqdm_class=CancellingBar)
        assert store.installed() == {}
        assert (store.folder_for("tiny") / PARTIAL_DIR / "onnx" / "model.onnx.part").exists()
        model = pull(store, "tiny", endpoint=hub.url, catalogue=tiny_entry())
    assert {f.path for f in model.files} == set(FILES)
