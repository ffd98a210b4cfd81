"""Errors of the model layer (it never imports the engine; the engine translates these once).

    ModelError              reason           meaning
    ├── ModelNotFound       not_found        no such catalogue entry, variant or installed model
    ├── ModelRefused        refused          a folder or file the safety rules reject (pickle, remote code)
    ├── ModelUnpinned       unpinned         no pinned sha256 for a file, so it is never fetched as verified
    ├── ModelOffline        offline          the model hub cannot be reached; nothing was downloaded
    ├── ModelDownloadFailed download_failed  the hub answered but the download did not complete
    ├── ModelVerifyFailed   verify_failed    a file's size or sha256 is not the pinned or registered one
    └── ModelCancelled      cancelled        the owner cancelled a pull; what arrived is kept for the next one
"""

from __future__ import annotations

from typing import Any


class ModelError(Exception):
    reason = "model_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = {key: value for key, value in details.items() if value is not None}


class ModelNotFound(ModelError):
    reason = "not_found"


class ModelRefused(ModelError):
    reason = "refused"


class ModelUnpinned(ModelError):
    reason = "unpinned"


class ModelOffline(ModelError):
    reason = "offline"


class ModelDownloadFailed(ModelError):
    reason = "download_failed"


class ModelVerifyFailed(ModelError):
    reason = "verify_failed"


class ModelCancelled(ModelError):
    reason = "cancelled"
