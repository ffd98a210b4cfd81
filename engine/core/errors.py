"""Every error the engine raises, in one tree, each with its wire reason and JSON-RPC code.

    KnowledgeError                 reason               code    meaning
    ├── Denied                     denied               -32001  the caller has no authority here
    │   └── OperatorTokenProblem   denied               -32001  operator.token missing, unsafe or unreadable
    │                                                           (engine/operator/methods.py)
    ├── NotFound                   not_found            -32002  no such agent, store, record, revision or model
    ├── InvalidParams              invalid_params       -32602  bad input: names the field and why
    │   ├── RecordInvalid          invalid_params       -32602  a record failed validation (carries findings)
    │   ├── UnsafePath             invalid_params       -32602  a path leaves its root or passes a symlink or
    │   │                                                       hardlink (engine/core/files.py)
    │   └── DocumentSyntaxError    invalid_params       -32602  a file is no frontmatter document we can read
    │                                                           (engine/vault/frontmatter.py)
    ├── StaleRevision              stale_revision       -32003  expectedRevision (or expectedSha256) no longer
    │                                                           matches the file, an outside edit included
    ├── StaleCursor                stale_cursor         -32004  a cursor outlived its index snapshot
    ├── ForeignReference           foreign_reference    -32005  a reference or cursor from another store
    ├── Conflict                   conflict             -32006  same requestId with other content, or an edit race
    │   ├── MergeRefused           conflict             -32006  two vault states cannot be merged safely (carries
    │   │                                                       findings; engine/sync/merge.py)
    │   └── SyncRefused            conflict             -32006  a sync round refused what a remote holds, or could
    │                                                           not reach it (a finding; engine/sync/transport.py)
    ├── LimitExceeded              limit_exceeded       -32007  a size, depth or count limit was hit
    ├── StoreUnavailable           store_unavailable    -32008  the store is missing, damaged or mid-recovery
    ├── IndexFailed                index_failed         -32009  the search index could not be brought up to date
    ├── WritesDisabled             writes_disabled      -32010  the owner turned writes off
    ├── RuntimeDisabled            runtime_disabled     -32011  the surface is switched off in config
    ├── SecretDetected             secret_detected      -32012  a write holds a credential (names the field and
    │                                                           the kind, never the secret; engine/store/credentials.py)
    ├── DecisionUnavailable        decision_unavailable -32013  no Decision answer: not configured, loading, failed,
    │                                                           unreachable, rejected, timeout (details.kind)
    ├── InvalidResponse            invalid-response     -32014  a Decision provider answered outside the contract
    │                                                           (a score outside 0..1, missing fields, not JSON)
    ├── ModelUnavailable           model_unavailable    -32015  a model cannot be used or fetched: refused,
    │                                                           unpinned, offline, download or verification
    │                                                           failed (details.kind is the model layer's reason)
    └── EngineUnreachable          engine_unreachable   -32016  no engine serves the state directory, or it does
                                                                not answer: what ``knowledge mcp`` tells its client
                                                                (engine/wire/bridge.py)

Each error carries a fixed ``reason`` (the socket's ``data.reason``) and ``code`` (the JSON-RPC error code),
a human-readable message and structured ``details`` (record id, revision, path, field ...), so callers never
parse messages.  The model layer (``models/``) never imports the engine; ``from_model_error`` is the one
place its errors become these.
"""

from __future__ import annotations

from typing import Any

from models.errors import ModelError, ModelNotFound

from .answers import JsonValue, TypedDict


class ErrorAnswer(TypedDict, extra_items=JsonValue):
    """An engine error as the wire carries it: ``reason``, ``message`` and the error's details
    (``field``, ``limit``, ``id``...), each a JSON value."""

    reason: str
    message: str


class KnowledgeError(Exception):
    """Base of every engine error; ``reason`` and ``code`` are part of the wire contract."""

    reason = "internal"
    code = -32603  # JSON-RPC "internal error": only an engine bug leaves a KnowledgeError without its own

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = {key: value for key, value in details.items() if value is not None}

    def to_dict(self) -> ErrorAnswer:
        return {"reason": self.reason, "message": self.message, **self.details}


class Denied(KnowledgeError):
    reason = "denied"
    code = -32001


class NotFound(KnowledgeError):
    reason = "not_found"
    code = -32002


class InvalidParams(KnowledgeError):
    reason = "invalid_params"
    code = -32602


class RecordInvalid(InvalidParams):
    """A record that would be written fails the envelope or the ontology."""

    def __init__(self, message: str, findings: list[dict[str, Any]], **details: Any) -> None:
        super().__init__(message, findings=findings, **details)
        self.findings = findings


class StaleRevision(KnowledgeError):
    reason = "stale_revision"
    code = -32003


class StaleCursor(KnowledgeError):
    reason = "stale_cursor"
    code = -32004


class ForeignReference(KnowledgeError):
    reason = "foreign_reference"
    code = -32005


class Conflict(KnowledgeError):
    reason = "conflict"
    code = -32006


class LimitExceeded(KnowledgeError):
    reason = "limit_exceeded"
    code = -32007


class SecretDetected(KnowledgeError):
    """A write's text holds what looks like a credential; nothing was written.

    ``details`` name the field and the kind of secret (``field``, ``kind``, ``line``); the secret itself
    never appears in the message, the details or a log line.
    """

    reason = "secret_detected"
    code = -32012


class StoreUnavailable(KnowledgeError):
    reason = "store_unavailable"
    code = -32008


class IndexFailed(KnowledgeError):
    reason = "index_failed"
    code = -32009


class WritesDisabled(KnowledgeError):
    reason = "writes_disabled"
    code = -32010


class RuntimeDisabled(KnowledgeError):
    reason = "runtime_disabled"
    code = -32011


class DecisionUnavailable(KnowledgeError):
    """The Decision provider cannot answer now; ``details['kind']`` says why (the gate logs it)."""

    reason = "decision_unavailable"
    code = -32013


class InvalidResponse(KnowledgeError):
    """A Decision provider's answer broke the contract; it is never rescaled or repaired."""

    reason = "invalid-response"
    code = -32014


class ModelUnavailable(KnowledgeError):
    """A model the owner asked for cannot be used or fetched; ``details['kind']`` is the model layer's reason."""

    reason = "model_unavailable"
    code = -32015


class EngineUnreachable(KnowledgeError):
    """No engine serves the state directory, or it does not answer; the message says how to start one."""

    reason = "engine_unreachable"
    code = -32016


def from_model_error(exc: ModelError, **details: Any) -> KnowledgeError:
    """The one translation of a model-layer error into the engine's tree (the caller raises it ``from exc``):
    a model that is not there is ``not_found``; any other reason it cannot be used is ``model_unavailable``."""
    details = {**exc.details, **details}
    if isinstance(exc, ModelNotFound):
        return NotFound(exc.message, **details)
    return ModelUnavailable(exc.message, kind=exc.reason, **details)


def wire_codes() -> dict[str, int]:
    """Every wire reason with its JSON-RPC code, from the classes themselves (the protocol's table)."""
    codes: dict[str, int] = {}
    pending = [KnowledgeError]
    while pending:
        cls = pending.pop(0)
        codes.setdefault(cls.reason, cls.code)
        pending.extend(cls.__subclasses__())
    codes.pop(KnowledgeError.reason)
    # invalid_params first (the standard JSON-RPC code), then the engine's own codes in order.
    return dict(sorted(codes.items(), key=lambda item: (item[1] != -32602, -item[1])))


class EngineLocked(Exception):
    """Another engine process owns the state directory (not a wire error)."""

    def __init__(self, message: str, owner: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.owner = owner or {}
