"""Hashing and atomic writes for model files (the model layer keeps its own, it never imports the engine)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

CHUNK = 1 << 20
# Weights in a pickle-based format run code when loaded: never accepted.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")


def sha256_file(path: Path) -> tuple[int, str]:
    """Size and sha256 of a file, read in 1 MiB chunks (a 600 MB model never sits in memory)."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename over, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise
    if os.name != "nt":
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def is_pickle_file(name: str) -> bool:
    return name.lower().endswith(PICKLE_SUFFIXES)
