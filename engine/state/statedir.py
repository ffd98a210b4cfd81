"""The state directory and the lock that makes one engine its owner.

    <state>/config.json      owner settings
    <state>/registry.sqlite  identities, bindings, credentials, grants
    <state>/engine.json      the running engine (removed on clean exit)
    <state>/engine.lock      held exclusively by the running engine
    <state>/tokens/          agent tokens, each readable by the owner only
    <state>/operator.token   the desktop's operator credential (0600, created by the serving engine)
    <state>/stores/<id>/     one directory per physical store
    <state>/models/          installed Decision models and their manifest (models/installed.py)
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from ..core.errors import EngineLocked

STATE_ENV = "KNOWLEDGE_STATE_DIR"
APP_NAME = "knowledge-desk"


def default_state_dir() -> Path:
    configured = os.environ.get(STATE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


@dataclass(frozen=True)
class StateDir:
    root: Path

    @classmethod
    def resolve(cls, explicit: str | os.PathLike[str] | None = None) -> "StateDir":
        root = Path(explicit).expanduser() if explicit else default_state_dir()
        return cls(root.absolute())

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def registry(self) -> Path:
        return self.root / "registry.sqlite"

    @property
    def engine_info(self) -> Path:
        return self.root / "engine.json"

    @property
    def lock(self) -> Path:
        return self.root / "engine.lock"

    @property
    def tokens(self) -> Path:
        return self.root / "tokens"

    @property
    def operator_token(self) -> Path:
        return self.root / "operator.token"

    @property
    def stores(self) -> Path:
        return self.root / "stores"

    @property
    def models(self) -> Path:
        return self.root / "models"

    def create(self) -> None:
        """Create the state directory itself (owner-only); never a store."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)

    def write_agent_token(self, agent: str, token: str) -> Path:
        """Keep an agent's token in ``tokens/<agent>.token``, readable by the owner only."""
        self.tokens.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.tokens / f"{agent}.token"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(token + "\n")
        os.chmod(path, 0o600)
        return path

    def remove_agent_token(self, agent: str) -> None:
        """Delete ``tokens/<agent>.token`` (a removed agent's credential no longer works anyway)."""
        try:
            (self.tokens / f"{agent}.token").unlink()
        except FileNotFoundError:
            pass

    def serving_engine(self) -> dict[str, Any] | None:
        """engine.json of the live engine that serves this directory, else None (no file, or its process
        is gone: an engine killed without cleaning up)."""
        info = self.read_engine_info()
        return info if info is not None and _alive_pid(info.get("pid")) else None

    def read_engine_info(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.engine_info.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def write_engine_info(self, info: dict[str, Any]) -> None:
        # Imported here: the stdio bridge of every connected client reads the state directory and never writes
        # it, and engine/core/files.py loads hashlib and tempfile (OpenSSL: about 5 MiB of each bridge's memory).
        from ..core.files import atomic_write
        atomic_write(self.engine_info, (json.dumps(info, indent=2) + "\n").encode("utf-8"), mode=0o600)

    def remove_engine_info(self) -> None:
        try:
            self.engine_info.unlink()
        except FileNotFoundError:
            pass


class EngineLock:
    """An exclusive, process-lifetime lock on ``<state>/engine.lock``.

    The operating system drops it when the process dies, even on SIGKILL, so
    a crashed engine never leaves a stale lock behind.
    """

    def __init__(self, state: StateDir) -> None:
        self.state = state
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise EngineLocked naming the engine that holds it.

        The lock file holds its owner's pid.  When that process is already
        gone the kernel may not have dropped its lock yet (it can lag a
        SIGKILL by a moment), so a dead owner's lock is waited for briefly.
        """
        self.state.create()
        deadline = time.monotonic() + DEAD_OWNER_WAIT_S
        while True:
            fd = os.open(self.state.lock, os.O_RDWR | os.O_CREAT, 0o600)
            if _try_lock(fd):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self._fd = fd
                return
            os.close(fd)
            holder = self._holder()
            if (holder is None or _alive(holder)) or time.monotonic() > deadline:
                owner = self.state.read_engine_info() or {}
                where = f"pid {owner.get('pid', holder or '?')}"
                if owner.get("port"):
                    where += f", port {owner['port']}"
                raise EngineLocked(f"another Knowledge engine ({where}) already owns {self.state.root}", owner)
            time.sleep(0.02)

    def _holder(self) -> int | None:
        try:
            return int(self.state.lock.read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return None

    def release(self) -> None:
        if self._fd is not None:
            _unlock(self._fd)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


DEAD_OWNER_WAIT_S = 5.0


def _alive_pid(pid: Any) -> bool:
    return isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and _alive(pid)


def _alive(pid: int) -> bool:
    if os.name == "nt":  # pragma: no cover - no signal-0 probe there: assume it lives
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
