"""Installed models: ``<state>/models/`` and its manifest.

    <state>/models/manifest.json        every installed model: source, variant, folder, files with size and sha256
    <state>/models/<name>/              files fetched by `knowledge models pull` (Hugging Face layout)

A model added with `knowledge models add-local` stays in the owner's folder;
the manifest records that folder and the hashes taken at registration.
Loading re-hashes every recorded file, so a file changed or swapped after
pull or registration is refused, never run.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .errors import ModelError, ModelNotFound, ModelVerifyFailed
from .files import atomic_write, sha256_file

MANIFEST_VERSION = 1
MANIFEST_MAX_BYTES = 1024 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# How a file's hash came to be trusted.
PINNED = "pinned"          # equals the catalogue's pin for this revision
REGISTERED = "registered"  # taken when the owner registered the folder (add-local)


def is_model_name(value: object) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None and ".." not in value


@dataclass(frozen=True)
class RecordedFile:
    path: str
    size: int
    sha256: str
    trust: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256, "trust": self.trust}


@dataclass(frozen=True)
class InstalledModel:
    name: str
    source: str                  # "catalogue" or "local"
    folder: Path
    variant: str
    onnx: str | None             # the ONNX graph the runtime loads (None: safetensors only)
    tokenizer: str
    config: str
    files: tuple[RecordedFile, ...]
    repo: str | None = None
    revision: str | None = None
    installed_at: str = ""

    @property
    def runnable(self) -> bool:
        return self.onnx is not None

    @property
    def fingerprint(self) -> str:
        """Identifies the exact weights (a score cache key part): the ONNX file's sha256."""
        chosen = self.onnx or (self.files[0].path if self.files else "")
        return next((f.sha256 for f in self.files if f.path == chosen), "")

    def path(self, relative: str) -> Path:
        return self.folder / relative

    def verify(self) -> None:
        """Re-hash every recorded file; raises ModelVerifyFailed naming the first that differs."""
        for recorded in self.files:
            target = self.path(recorded.path)
            try:
                size, digest = sha256_file(target)
            except OSError as exc:
                raise ModelVerifyFailed(f"{recorded.path} of model {self.name} cannot be read: "
                                        f"{exc.strerror or exc}", model=self.name, path=recorded.path) from exc
            if size != recorded.size or digest != recorded.sha256:
                raise ModelVerifyFailed(
                    f"{recorded.path} of model {self.name} changed since it was "
                    f"{'pulled' if self.source == 'catalogue' else 'registered'} (sha256 {digest[:12]}..., "
                    f"expected {recorded.sha256[:12]}...); pull or add it again", model=self.name, path=recorded.path)

    def verified_config(self) -> dict[str, Any]:
        """Verify every file, then read config.json; one that asks for remote code is refused (ValueError)."""
        self.verify()
        config = json.loads(self.path(self.config).read_text(encoding="utf-8"))
        if not isinstance(config, dict) or "auto_map" in config or config.get("trust_remote_code"):
            raise ValueError(f"config.json of {self.name} asks for remote code; refused")
        return config

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name, "source": self.source, "folder": str(self.folder), "variant": self.variant,
            "onnx": self.onnx, "tokenizer": self.tokenizer, "config": self.config,
            "files": [f.to_json() for f in self.files], "installedAt": self.installed_at,
        }
        if self.repo:
            data["repo"] = self.repo
            data["revision"] = self.revision
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "InstalledModel":
        return cls(
            name=data["name"], source=data["source"], folder=Path(data["folder"]), variant=data["variant"],
            onnx=data.get("onnx"), tokenizer=data["tokenizer"], config=data["config"],
            files=tuple(RecordedFile(f["path"], int(f["size"]), f["sha256"], f["trust"]) for f in data["files"]),
            repo=data.get("repo"), revision=data.get("revision"), installed_at=data.get("installedAt", ""),
        )


class ModelStore:
    """The manifest of ``<state>/models/``; nothing is created until a model is installed."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def folder_for(self, name: str) -> Path:
        return self.root / name

    def manifest_stamp(self) -> tuple[int, int, int] | None:
        """The manifest's (inode, mtime, size), None while there is none: another stamp means it was rewritten
        (each write replaces the file, so a new inode)."""
        try:
            info = os.stat(self.manifest_path)
        except FileNotFoundError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def installed(self) -> dict[str, InstalledModel]:
        try:
            raw = self.manifest_path.read_bytes()
        except FileNotFoundError:
            return {}
        if len(raw) > MANIFEST_MAX_BYTES:
            raise ModelError(f"{self.manifest_path} is larger than {MANIFEST_MAX_BYTES} bytes")
        try:
            data = json.loads(raw.decode("utf-8"))
            models = {name: InstalledModel.from_json(entry) for name, entry in data.get("models", {}).items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(f"{self.manifest_path} is damaged ({exc}); pull or add the models again") from exc
        return models

    def get(self, name: str) -> InstalledModel:
        model = self.installed().get(name)
        if model is None:
            raise ModelNotFound(f"no installed model named {name!r}; see `knowledge models list`", model=name)
        return model

    def record(self, model: InstalledModel) -> None:
        """Add or replace one model's entry (atomic rewrite of the manifest)."""
        models = self.installed()
        models[model.name] = model
        self._write(models)

    def _write(self, models: dict[str, InstalledModel]) -> None:
        data = {"schemaVersion": MANIFEST_VERSION,
                "models": {name: models[name].to_json() for name in sorted(models)}}
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(self.manifest_path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))


def now_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
