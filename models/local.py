"""`knowledge models add-local DIR`: register a folder the owner already has.

The folder must be in the Hugging Face layout (``onnx/model.onnx`` or
``model.safetensors``, ``tokenizer.json``, ``config.json``). It is refused when
it holds pickle weights (.bin, .pt, .pth, .pkl, .pickle, .ckpt) or Python
code, or when a configuration asks for remote code (``auto_map``,
``trust_remote_code``). The files stay where they are; their sizes and
sha256 are recorded now and checked again at every load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .catalogue import CATALOGUE
from .errors import ModelRefused
from .files import is_pickle_file, sha256_file
from .installed import PINNED, REGISTERED, InstalledModel, ModelStore, RecordedFile, is_model_name, now_stamp

MAX_WALK_ENTRIES = 10_000
MAX_WALK_DEPTH = 6
CONFIG_MAX_BYTES = 1024 * 1024
# Configuration files that could name code for a loader to import.
CODE_CONFIGS = ("config.json", "tokenizer_config.json", "sentence_bert_config.json",
                "config_sentence_transformers.json")


def add_local(store: ModelStore, folder: str | os.PathLike[str], *, name: str | None = None,
              variant: str | None = None, replace: bool = False) -> InstalledModel:
    """Check ``folder``, hash its files and record it as ``name`` (default: the folder's name)."""
    root = Path(folder).expanduser().resolve()
    if not root.is_dir():
        raise ModelRefused(f"{root} is not a folder", path=str(root))
    name = name or root.name
    if not is_model_name(name):
        raise ModelRefused(f"{name!r} is not a usable model name: 1-100 letters, digits, '.', '-' or '_', "
                           "starting with a letter or digit; pass --name", name=name)
    if not replace and name in store.installed():
        raise ModelRefused(f"a model named {name!r} is already installed; pass --replace to register this folder "
                           "in its place, or choose another --name", name=name)
    files = _walk(root)
    _refuse_unsafe(root, files)
    for required in ("config.json", "tokenizer.json"):
        if required not in files:
            raise ModelRefused(f"{root} has no {required}; a model folder needs the Hugging Face layout "
                               "(onnx/model.onnx or model.safetensors, tokenizer.json, config.json)", path=str(root))
    _check_tokenizer(root / "tokenizer.json")
    weights, onnx = _choose_weights(root, files, variant)
    recorded = [_record(root, path) for path in (*weights, "tokenizer.json", "config.json")]
    recorded = _match_catalogue(name, recorded, weights[0])
    model = InstalledModel(
        name=name, source="local", folder=root, variant=Path(weights[0]).stem, onnx=onnx,
        tokenizer="tokenizer.json", config="config.json", files=tuple(recorded), installed_at=now_stamp(),
    )
    store.record(model)
    return model


def _walk(root: Path) -> set[str]:
    """Relative paths (with '/') of every file under root, bounded in count and depth."""
    found: set[str] = set()
    for directory, subdirs, names in os.walk(root):
        depth = len(Path(directory).relative_to(root).parts)
        if depth >= MAX_WALK_DEPTH:
            subdirs[:] = []
        subdirs[:] = [d for d in subdirs if d not in (".git", ".cache")]
        for filename in names:
            found.add((Path(directory) / filename).relative_to(root).as_posix())
            if len(found) > MAX_WALK_ENTRIES:
                raise ModelRefused(f"{root} holds more than {MAX_WALK_ENTRIES} files; point at the model's own "
                                   "folder", path=str(root))
    return found


def _refuse_unsafe(root: Path, files: set[str]) -> None:
    pickles = sorted(path for path in files if is_pickle_file(path))
    if pickles:
        raise ModelRefused(f"{root} holds pickle files ({', '.join(pickles[:5])}); pickle weights run code when "
                           "loaded and are never accepted. Keep only ONNX or safetensors weights in the folder",
                           path=str(root), files=pickles)
    code = sorted(path for path in files if path.endswith(".py"))
    if code:
        raise ModelRefused(f"{root} ships Python code ({', '.join(code[:5])}); a reranker needs none, and a "
                           "folder that brings its own code is refused", path=str(root), files=code)
    for config in CODE_CONFIGS:
        if config in files:
            _refuse_remote_code(root / config, config)


def _refuse_remote_code(path: Path, label: str) -> None:
    data = _read_json(path, label)
    asks = []
    if "auto_map" in data:
        asks.append("auto_map")
    if data.get("trust_remote_code"):
        asks.append("trust_remote_code")
    if asks:
        raise ModelRefused(f"{label} asks for remote code ({', '.join(asks)}); models that need their own code "
                           "are never loaded", path=str(path))


def _read_json(path: Path, label: str) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
        if len(raw) > CONFIG_MAX_BYTES:
            raise ModelRefused(f"{label} is larger than {CONFIG_MAX_BYTES} bytes", path=str(path))
        data = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ModelRefused(f"{label} is not readable JSON: {exc}", path=str(path)) from exc
    if not isinstance(data, dict):
        raise ModelRefused(f"{label} must hold a JSON object", path=str(path))
    return data


def _check_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer

    try:
        Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises bare Exception subclasses for malformed files
        raise ModelRefused(f"tokenizer.json cannot be read by tokenizers: {exc}", path=str(path)) from exc


def _choose_weights(root: Path, files: set[str], variant: str | None) -> tuple[tuple[str, ...], str | None]:
    """The weights to record: an ONNX graph (with its external data) or, failing that, safetensors."""
    graphs = sorted(path for path in files if path.endswith(".onnx") and path.count("/") <= 1
                    and (path.startswith("onnx/") or "/" not in path))
    if variant:
        wanted = [variant, f"onnx/{variant}", f"onnx/{variant}.onnx", f"{variant}.onnx"]
        chosen = next((path for path in wanted if path in graphs), None)
        if chosen is None:
            raise ModelRefused(f"no ONNX file {variant!r} in {root} (found: {', '.join(graphs) or 'none'})",
                               path=str(root))
    elif "onnx/model.onnx" in graphs:
        chosen = "onnx/model.onnx"
    elif "model.onnx" in graphs:
        chosen = "model.onnx"
    elif len(graphs) == 1:
        chosen = graphs[0]
    elif graphs:
        raise ModelRefused(f"{root} holds several ONNX files ({', '.join(graphs)}); pick one with --variant",
                           path=str(root))
    else:
        chosen = None
    if chosen is not None:
        data = [path for path in (f"{chosen}.data", f"{chosen}_data", f"{chosen[:-5]}.onnx_data") if path in files]
        return (chosen, *data), chosen
    shards = sorted(path for path in files if path.endswith(".safetensors") and "/" not in path)
    if shards:
        return tuple(shards), None
    raise ModelRefused(f"{root} has no ONNX graph (onnx/model.onnx) and no model.safetensors", path=str(root))


def _record(root: Path, relative: str) -> RecordedFile:
    target = root / relative
    if not target.is_file():
        raise ModelRefused(f"{relative} is not a regular file", path=str(target))
    size, digest = sha256_file(target)
    return RecordedFile(relative, size, digest, REGISTERED)


def _match_catalogue(name: str, recorded: list[RecordedFile], weights: str) -> list[RecordedFile]:
    """A folder registered under a catalogue name must hold exactly the pinned files."""
    entry = CATALOGUE.get(name)
    if entry is None:
        return recorded
    pins = {variant.weights.path: variant.weights for variant in entry.variants.values()}
    pins.update({file.path: file for file in entry.shared})
    if weights not in pins:
        raise ModelRefused(f"{name!r} is a catalogue model and {weights} is none of its files; register this "
                           "folder under another --name", name=name)
    checked = []
    for file in recorded:
        pin = pins.get(file.path)
        if pin is None or not pin.pinned:
            checked.append(file)
            continue
        if (file.size, file.sha256) != (pin.size, pin.sha256):
            raise ModelRefused(f"{file.path} differs from the file pinned for {entry.repo}@{entry.revision[:12]} "
                               f"(sha256 {file.sha256[:12]}..., pinned {pin.sha256[:12]}...); register this "
                               "folder under another --name", name=name, path=file.path)
        checked.append(RecordedFile(file.path, file.size, file.sha256, PINNED))
    return checked
