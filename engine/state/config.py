"""Owner settings: ``<state>/config.json``, one typed object, re-read on change.

The file is the authority for store membership and for switches such as
``writesEnabled``.  The engine re-reads it when it changes; an invalid file
is reported and the last valid settings stay in force.  Keys this release
does not know are kept as they are when the engine saves the file.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from models.catalogue import DEFAULT_EMBEDDING_MODEL
from models.installed import is_model_name

from ..core.answers import JsonObject
from ..core.errors import InvalidParams
from ..core.files import atomic_write
from .gate_settings import GateSettings, parse_gate_settings
from .sync_settings import SyncSettings, parse_sync_settings
from ..core.ids import is_agent_name

SCHEMA_VERSION = 1
CONFIG_MAX_BYTES = 1024 * 1024
_STORE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
WORKSPACE_ROOTS_MAX = 32
WORKSPACE_ROOT_MAX_CHARS = 4096

# Each step takes a config dict at version N and returns it at version N + 1.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def is_store_name(value: object) -> bool:
    return isinstance(value, str) and _STORE_NAME.fullmatch(value) is not None


@dataclass(frozen=True)
class NamedStore:
    """A named store's membership as the owner configured it."""

    name: str
    label: str
    agents: tuple[str, ...]


@dataclass(frozen=True)
class Settings:
    schema_version: int = SCHEMA_VERSION
    writes_enabled: bool = True
    stores: dict[str, NamedStore] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    # attachments.workspaceRoots: where knowledge_attach_file may read files (none: it is refused)
    workspace_roots: tuple[str, ...] = ()
    # decisionModel: "onnx/<installed model>", "embedding/<installed embedding model>" or "rerank/<model id>"
    # (None: no Decision model, the gate skips)
    decision_model: str | None = None
    # models.providers.rerank.baseUrl, without a trailing '/'
    rerank_base_url: str | None = None
    # recallGate: the recall gate's settings (None: no block, the gate never runs); see engine/state/gate_settings.py
    recall_gate: GateSettings | None = None
    # knowledgeRuntimeEnabled: serve search_knowledge (off: knowledge_unavailable / knowledge_runtime_disabled)
    knowledge_runtime_enabled: bool = False
    # embeddingModel: "onnx/<installed model>" for semantic search, or None (lexical only); see docs/knowledge-base.md
    embedding_model: str | None = f"onnx/{DEFAULT_EMBEDDING_MODEL}"
    # allowSecrets: store writes that hold credentials (API keys, tokens, private keys); off by default, see
    # engine/store/credentials.py and docs/secrets.md
    allow_secrets: bool = False
    # sync: when the serving engine syncs stores with their remotes by itself; see engine/state/sync_settings.py
    sync: SyncSettings = field(default_factory=SyncSettings)

    def named_stores_of(self, agent: str) -> list[str]:
        """Names of every named store that lists ``agent`` (more than one makes it unavailable)."""
        return sorted(name for name, store in self.stores.items() if agent in store.agents)

    def with_stores(self, stores: dict[str, NamedStore]) -> "Settings":
        raw = dict(self.raw)
        raw["stores"] = {
            name: {"label": store.label, "agents": list(store.agents)} for name, store in sorted(stores.items())
        }
        return replace(self, stores=dict(stores), raw=raw)

    def gate_reads_vectors(self) -> bool:
        """Whether the recall gate reads the stores' vector indexes, so they are built and kept current whatever
        ``knowledgeRuntimeEnabled`` says (docs/recall-gate.md, "The gate's vectors"): ``hybrid`` candidates; an
        ``embedding/`` Decision model that is the search's ``embeddingModel`` (its page vectors are the
        index's); and the cascade's similarity order of keyword candidates."""
        gate = self.recall_gate
        if gate is None or gate.mode == "off" or gate.candidates == "model" or self.embedding_model is None:
            return False
        if gate.candidates == "hybrid" or gate.long_windows > 0:
            return True
        return self.gate_scores_index_vectors()

    def gate_scores_index_vectors(self) -> bool:
        """Whether the gate's ``embedding/`` Decision model is the search's ``embeddingModel``, so the vector
        index also keeps the passage vectors of long pages it scores them by (engine/index/similarity.py)."""
        gate = self.recall_gate
        if gate is None or gate.mode == "off" or self.embedding_model is None:
            return False
        kind, _, name = (self.decision_model or "").partition("/")
        return kind == "embedding" and self.embedding_model == f"onnx/{name}"

    def with_knowledge_runtime(self, enabled: bool) -> "Settings":
        """These settings with search_knowledge served (``knowledgeRuntimeEnabled``) or not."""
        return replace(self, knowledge_runtime_enabled=enabled, raw={**self.raw, "knowledgeRuntimeEnabled": enabled})

    def with_workspace_roots(self, roots: tuple[str, ...]) -> "Settings":
        """These settings with ``attachments.workspaceRoots`` (checked as config.json is; none removes the key)."""
        cleaned = _parse_workspace_roots({"workspaceRoots": list(roots)})
        attachments = {key: value for key, value in dict(self.raw.get("attachments") or {}).items()
                       if key != "workspaceRoots"}
        if cleaned:
            attachments["workspaceRoots"] = list(cleaned)
        raw = {key: value for key, value in self.raw.items() if key != "attachments"}
        if attachments:
            raw["attachments"] = attachments
        return replace(self, workspace_roots=cleaned, raw=raw)

    def to_json(self) -> bytes:
        raw = dict(self.raw)
        raw["schemaVersion"] = self.schema_version
        raw["writesEnabled"] = self.writes_enabled
        raw.setdefault("stores", {})
        return (json.dumps(raw, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def migrate(data: JsonObject) -> JsonObject:
    """config.json's document as written, brought up to this release's schema version."""
    version = data.get("schemaVersion", SCHEMA_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidParams("schemaVersion must be a positive integer", field="schemaVersion")
    if version > SCHEMA_VERSION:
        raise InvalidParams(
            f"config.json is schema version {version}; this release reads up to {SCHEMA_VERSION}",
            field="schemaVersion",
        )
    while version < SCHEMA_VERSION:
        data = MIGRATIONS[version](dict(data))
        version += 1
        data["schemaVersion"] = version
    return data


def parse_settings(data: Any) -> Settings:
    """Validate a decoded config.json; raises InvalidParams naming the field."""
    if not isinstance(data, dict):
        raise InvalidParams("config.json must hold a JSON object")
    data = migrate(data)
    writes = data.get("writesEnabled", True)
    if not isinstance(writes, bool):
        raise InvalidParams("writesEnabled must be true or false", field="writesEnabled")
    stores_raw = data.get("stores", {})
    if not isinstance(stores_raw, dict):
        raise InvalidParams("stores must be an object of named stores", field="stores")
    stores = {}
    for name, entry in stores_raw.items():
        where = f"stores.{name}"
        if not is_store_name(name):
            raise InvalidParams(
                "store names are 1-64 lowercase letters, digits, '-' or '_'", field=where
            )
        if not isinstance(entry, dict):
            raise InvalidParams("a named store must be an object", field=where)
        label = entry.get("label", name)
        if not isinstance(label, str) or not label.strip() or "\n" in label:
            raise InvalidParams("label must be a one-line string", field=f"{where}.label")
        agents = entry.get("agents", [])
        if not isinstance(agents, list) or not all(is_agent_name(agent) for agent in agents):
            raise InvalidParams("agents must be a list of agent names", field=f"{where}.agents")
        if len(set(agents)) != len(agents):
            raise InvalidParams("agents lists an agent twice", field=f"{where}.agents")
        stores[name] = NamedStore(name, label.strip(), tuple(agents))
    rerank_base_url = _parse_rerank_base_url(data.get("models", {}))
    knowledge_runtime = data.get("knowledgeRuntimeEnabled", False)
    if not isinstance(knowledge_runtime, bool):
        raise InvalidParams("knowledgeRuntimeEnabled must be true or false", field="knowledgeRuntimeEnabled")
    allow_secrets = data.get("allowSecrets", False)
    if not isinstance(allow_secrets, bool):  # "true", 1 or null are not consent to store credentials
        raise InvalidParams("allowSecrets must be true or false", field="allowSecrets")
    return Settings(SCHEMA_VERSION, writes, stores, dict(data),
                    workspace_roots=_parse_workspace_roots(data.get("attachments", {})),
                    decision_model=_parse_decision_model(data.get("decisionModel"), rerank_base_url),
                    rerank_base_url=rerank_base_url, knowledge_runtime_enabled=knowledge_runtime,
                    recall_gate=parse_gate_settings(data.get("recallGate")),
                    embedding_model=_parse_embedding_model(data.get("embeddingModel", Settings.embedding_model)),
                    allow_secrets=allow_secrets, sync=parse_sync_settings(data.get("sync")))


def _parse_embedding_model(value: Any) -> str | None:
    """``onnx/<installed model name>``, or null to keep semantic search off."""
    if value is None:
        return None
    provider, _, model = value.partition("/") if isinstance(value, str) else ("", "", "")
    if provider != "onnx" or not is_model_name(model):
        raise InvalidParams("embeddingModel must be 'onnx/<model>' (an installed model, see `knowledge models "
                            "list`) or null", field="embeddingModel")
    return value


DECISION_MODEL_FORMS = "decisionModel must be 'onnx/<model>', 'embedding/<model>' or 'rerank/<model id>'"


def _parse_decision_model(value: Any, rerank_base_url: str | None) -> str | None:
    """``onnx/<installed model name>``, ``embedding/<installed model name>`` or ``rerank/<model id>`` (the
    latter needs a rerank baseUrl)."""
    if value is None:
        return None
    where = "decisionModel"
    if not isinstance(value, str) or len(value) > 300 or not value.isprintable() or " " in value:
        raise InvalidParams(DECISION_MODEL_FORMS, field=where)
    provider, _, model = value.partition("/")
    if provider in ("onnx", "embedding") and is_model_name(model):
        return value
    if provider == "rerank" and model:
        if rerank_base_url is None:
            raise InvalidParams("a rerank/ decisionModel needs models.providers.rerank.baseUrl", field=where)
        return value
    raise InvalidParams(DECISION_MODEL_FORMS + " (an installed model, see `knowledge models list`)", field=where)


def _parse_rerank_base_url(models: Any) -> str | None:
    """``models.providers.rerank.baseUrl``: an http(s) URL; other keys of ``models`` are kept as they are."""
    for where, value in (("models", models), ("models.providers", (models or {}).get("providers", {}))):
        if not isinstance(value, dict):
            raise InvalidParams(f"{where} must be an object", field=where)
    rerank = models.get("providers", {}).get("rerank", {})
    if not isinstance(rerank, dict):
        raise InvalidParams("models.providers.rerank must be an object", field="models.providers.rerank")
    url = rerank.get("baseUrl")
    if url is None:
        return None
    where = "models.providers.rerank.baseUrl"
    try:
        parts = urlsplit(url) if isinstance(url, str) and len(url) <= 2048 and url.isprintable() else None
        valid = (parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname)
                 and not parts.query and not parts.fragment and (parts.port or 1) > 0)
    except ValueError:  # a malformed port or IPv6 literal
        valid = False
    if not valid:
        raise InvalidParams("baseUrl must be an http:// or https:// URL without query or fragment", field=where)
    return url.rstrip("/")


def _parse_workspace_roots(attachments: Any) -> tuple[str, ...]:
    """``attachments.workspaceRoots``: absolute, canonical directory paths (existence is checked at use)."""
    if not isinstance(attachments, dict):
        raise InvalidParams("attachments must be an object", field="attachments")
    unknown = sorted(set(attachments) - {"workspaceRoots"})
    if unknown:
        raise InvalidParams(f"unknown setting attachments.{unknown[0]}", field=f"attachments.{unknown[0]}")
    where = "attachments.workspaceRoots"
    roots = attachments.get("workspaceRoots", [])
    if not isinstance(roots, list) or len(roots) > WORKSPACE_ROOTS_MAX:
        raise InvalidParams(f"workspaceRoots must be a list of at most {WORKSPACE_ROOTS_MAX} paths", field=where)
    cleaned = []
    for index, root in enumerate(roots):
        if not isinstance(root, str) or not root or len(root) > WORKSPACE_ROOT_MAX_CHARS or "\x00" in root:
            raise InvalidParams("a workspace root must be an absolute directory path", field=f"{where}[{index}]")
        if root.endswith("/") and len(root) > 1:
            root = root[:-1]
        parts = root.split("/")
        if parts[0] != "" or root == "/" or any(part in ("", ".", "..") for part in parts[1:]):
            raise InvalidParams("a workspace root must be an absolute path without '.', '..' or empty parts, "
                                "and not '/' itself", field=f"{where}[{index}]")
        cleaned.append(root)
    return tuple(dict.fromkeys(cleaned))


def read_settings(path: Path) -> Settings:
    """Read and validate config.json; a missing file means the defaults."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Settings()
    if len(data) > CONFIG_MAX_BYTES:
        raise InvalidParams(f"config.json is larger than {CONFIG_MAX_BYTES} bytes")
    try:
        decoded = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidParams(f"config.json is not valid JSON: {exc}") from exc
    return parse_settings(decoded)


class SettingsSource:
    """The settings in force, re-read whenever config.json changes on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._settings = Settings()
        self.problem: str | None = None
        # Called (outside the lock) when the file in force changed: re-read or saved.
        self.on_changed: Callable[[], None] = lambda: None
        self.current()

    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def current(self) -> Settings:
        # The file looked at outside the lock: a stat waits for the interpreter lock after it, and made under the
        # lock it made every caller queue behind the others' waits (an import's writing threads authorising).
        # Unchanged since it was read, the settings in force are the answer; else it is looked at again below.
        stamp = self._file_stamp()
        with self._lock:
            if stamp == self._stamp:
                return self._settings
        with self._lock:
            stamp = self._file_stamp()
            changed = stamp != self._stamp
            if changed:
                self._stamp = stamp
                try:
                    self._settings = read_settings(self.path)
                    self.problem = None
                except InvalidParams as exc:
                    where = exc.details.get("field")
                    self.problem = f"{exc.message} ({where})" if where else exc.message
            settings = self._settings
        if changed:
            self.on_changed()
        return settings

    def save(self, settings: Settings) -> None:
        """Write settings atomically (used by membership and settings edits)."""
        parse_settings(json.loads(settings.to_json()))
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, settings.to_json(), mode=0o600)
            self._settings = settings
            self._stamp = self._file_stamp()
            self.problem = None
        self.on_changed()
