"""Every error the engine raises, in one tree.

    KnowledgeError                 reason            meaning
    ├── Denied                     denied            the caller has no authority here
    ├── NotFound                   not_found         no such agent, store, record or revision
    ├── InvalidParams              invalid_params    bad input: names the field and why
    │   └── RecordInvalid          invalid_params    a record failed validation (carries findings)
    ├── StaleRevision              stale_revision    expectedRevision no longer matches
    ├── StaleCursor                stale_cursor      a cursor outlived its index snapshot
    ├── ForeignReference           foreign_reference a reference or cursor from another store
    ├── Conflict                   conflict          same requestId with other content, or an edit race
    ├── LimitExceeded              limit_exceeded    a size, depth or count limit was hit
    ├── SecretDetected             secret_detected   a write holds a credential (names the field and the kind,
    │                                                never the secret); see engine/store/credentials.py
    ├── StoreUnavailable           store_unavailable the store is missing, damaged or mid-recovery
    ├── IndexFailed                index_failed      the search index could not be brought up to date
    ├── WritesDisabled             writes_disabled   the owner turned writes off
    ├── RuntimeDisabled            runtime_disabled  the surface is switched off in config
    ├── DecisionUnavailable        decision_unavailable  no Decision answer: not configured, loading, failed,
    │                                                    unreachable, rejected, timeout (details.kind)
    └── InvalidResponse            invalid-response  a Decision provider answered outside the contract
                                                     (a score outside 0..1, missing fields, not JSON)

Each error carries a fixed ``reason`` (the socket's ``data.reason``), a
human-readable message and structured ``details`` (record id, revision,
path, field ...), so callers never parse messages.
"""

from __future__ import annotations

from typing import Any


class KnowledgeError(Exception):
    """Base of every engine error; ``reason`` is part of the wire contract."""

    reason = "internal"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = {key: value for key, value in details.items() if value is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "message": self.message, **self.details}


class Denied(KnowledgeError):
    reason = "denied"


class NotFound(KnowledgeError):
    reason = "not_found"


class InvalidParams(KnowledgeError):
    reason = "invalid_params"


class RecordInvalid(InvalidParams):
    """A record that would be written fails the envelope or the ontology."""

    def __init__(self, message: str, findings: list[dict[str, Any]], **details: Any) -> None:
        super().__init__(message, findings=findings, **details)
        self.findings = findings


class StaleRevision(KnowledgeError):
    reason = "stale_revision"


class StaleCursor(KnowledgeError):
    reason = "stale_cursor"


class ForeignReference(KnowledgeError):
    reason = "foreign_reference"


class Conflict(KnowledgeError):
    reason = "conflict"


class LimitExceeded(KnowledgeError):
    reason = "limit_exceeded"


class SecretDetected(KnowledgeError):
    """A write's text holds what looks like a credential; nothing was written.

    ``details`` name the field and the kind of secret (``field``, ``kind``, ``line``); the secret itself
    never appears in the message, the details or a log line.
    """

    reason = "secret_detected"


class StoreUnavailable(KnowledgeError):
    reason = "store_unavailable"


class IndexFailed(KnowledgeError):
    reason = "index_failed"


class WritesDisabled(KnowledgeError):
    reason = "writes_disabled"


class RuntimeDisabled(KnowledgeError):
    reason = "runtime_disabled"


class DecisionUnavailable(KnowledgeError):
    """The Decision provider cannot answer now; ``details['kind']`` says why (the gate logs it)."""

    reason = "decision_unavailable"


class InvalidResponse(KnowledgeError):
    """A Decision provider's answer broke the contract; it is never rescaled or repaired."""

    reason = "invalid-response"


class EngineLocked(Exception):
    """Another engine process owns the state directory (not a wire error)."""

    def __init__(self, message: str, owner: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.owner = owner or {}
