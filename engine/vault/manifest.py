"""``vault.json``: the store's manifest, outside the editable vault.

A strict JSON object (unknown keys are an error) binding the store's
identity, its vault, the private partition directory and the publication
checkpoint.  It is checked against the registry, ``state.sqlite`` and the
partition directory before and after every query; any mismatch fails
closed and nothing is ever re-created or replaced automatically.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.errors import StoreUnavailable
from ..core.files import StagingFolder, atomic_write

MANIFEST_FORMAT = "knowledge-vault-v1"
MANIFEST_MAX_BYTES = 64 * 1024
PARTITION_MARKER = ".partition.json"
_KEYS = {"format", "storeId", "vaultId", "createdAt", "partitions", "checkpoint"}


@dataclass(frozen=True)
class Manifest:
    store_id: str
    vault_id: str
    created_at: str
    partitions: dict[str, str] = field(default_factory=dict)  # partition -> directory identity
    checkpoint: int = 0

    def to_json(self) -> bytes:
        return (json.dumps({
            "format": MANIFEST_FORMAT,
            "storeId": self.store_id,
            "vaultId": self.vault_id,
            "createdAt": self.created_at,
            "partitions": self.partitions,
            "checkpoint": self.checkpoint,
        }, indent=2) + "\n").encode("utf-8")

    def with_checkpoint(self, seq: int) -> "Manifest":
        return replace(self, checkpoint=seq)


def read_manifest(path: Path) -> Manifest:
    """Read and strictly validate a manifest; any problem is StoreUnavailable."""
    try:
        info = os.lstat(path)
    except FileNotFoundError as exc:
        raise StoreUnavailable("the store's manifest (vault.json) is missing", file="vault.json") from exc
    if not os.path.isfile(path) or os.path.islink(path):
        raise StoreUnavailable("the store's manifest is not a regular file", file="vault.json")
    if info.st_size > MANIFEST_MAX_BYTES:
        raise StoreUnavailable(f"vault.json is larger than {MANIFEST_MAX_BYTES} bytes", file="vault.json")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise StoreUnavailable(f"vault.json cannot be read: {exc.strerror}", file="vault.json") from exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, a huge integer, nesting past the stack
        problem = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise StoreUnavailable(f"vault.json is not valid JSON: {problem}", file="vault.json") from exc
    return parse_manifest(data)


def parse_manifest(data: Any) -> Manifest:
    def bad(message: str) -> StoreUnavailable:
        return StoreUnavailable(f"vault.json is invalid: {message}", file="vault.json")

    if not isinstance(data, dict):
        raise bad("not a JSON object")
    unknown = set(data) - _KEYS
    if unknown:
        raise bad(f"unknown keys {sorted(unknown)}")
    if data.get("format") != MANIFEST_FORMAT:
        raise bad(f"format must be {MANIFEST_FORMAT}")
    for key in ("storeId", "vaultId", "createdAt"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise bad(f"{key} must be a non-empty string")
    partitions = data.get("partitions", {})
    if not isinstance(partitions, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in partitions.items()
    ):
        raise bad("partitions must map partition names to identities")
    checkpoint = data.get("checkpoint", 0)
    if isinstance(checkpoint, bool) or not isinstance(checkpoint, int) or checkpoint < 0:
        raise bad("checkpoint must be a non-negative integer")
    return Manifest(data["storeId"], data["vaultId"], data["createdAt"], dict(partitions), checkpoint)


def write_manifest(path: Path, manifest: Manifest, *, replace_only: bool = False) -> os.stat_result:
    """Write vault.json atomically; the new file's stat.  ``replace_only``: the manifest must still be there
    right before the rename, so a store whose manifest was deleted is never given a new one by an ordinary
    write (it fails closed as unavailable; only creating a store writes the first manifest)."""
    data = manifest.to_json()
    if len(data) > MANIFEST_MAX_BYTES:
        raise StoreUnavailable(f"vault.json would exceed {MANIFEST_MAX_BYTES} bytes", file="vault.json")
    return atomic_write(path, data, check=(lambda: _still_there(path)) if replace_only else None)


def _still_there(path: Path) -> None:
    if not os.path.lexists(path):
        raise StoreUnavailable("the store's manifest (vault.json) is missing", file="vault.json")


def write_partition_marker(directory: Path, store_id: str, partition: str, identity: str, *,
                           staging: StagingFolder | None = None) -> None:
    marker = {"storeId": store_id, "partition": partition, "identity": identity}
    atomic_write(directory / PARTITION_MARKER, (json.dumps(marker) + "\n").encode("utf-8"), staging=staging)


def read_partition_marker(directory: Path) -> dict[str, Any] | None:
    path = directory / PARTITION_MARKER
    if path.is_symlink():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # missing, unreadable, not JSON: not this store's marker
        return None
    return data if isinstance(data, dict) else None
