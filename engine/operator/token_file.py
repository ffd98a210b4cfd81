"""The operator token file, ``<state>/operator.token``: made by the serving engine, read by its clients.

Apart from ``methods.py`` (the operator's method table, which imports the whole engine) so that a client
of the socket, the desktop window above all, reads the token without loading the engine it talks to:
the window's first paint waits for its imports (docs/benchmarks/desktop.md).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from ..core.errors import Denied
from ..core.files import atomic_write
from ..state.statedir import StateDir

TOKEN_PREFIX = "kdo_"
TOKEN_MAX_BYTES = 1024


class OperatorTokenProblem(Denied):
    """The operator token file is missing, unsafe or unreadable (the message says how to fix it)."""


def ensure_operator_token(state: StateDir) -> Path:
    """Create ``<state>/operator.token`` (0600) when it is missing; an existing file is left as it is."""
    path = state.operator_token
    if not os.path.lexists(path):
        state.create()
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        atomic_write(path, (token + "\n").encode("utf-8"), mode=0o600)
    return path


def read_operator_token(state: StateDir) -> str:
    """The operator token, from a regular file only this account can read or write."""
    path = state.operator_token
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise OperatorTokenProblem(f"{path} is missing; start the engine (knowledge serve) to create it",
                                   path=str(path)) from None
    except OSError as exc:
        raise OperatorTokenProblem(f"{path} cannot be read: {exc.strerror}", path=str(path)) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OperatorTokenProblem(f"{path} is not a regular file", path=str(path))
        if os.name == "posix":
            if info.st_uid != os.geteuid():
                raise OperatorTokenProblem(f"{path} belongs to another account", path=str(path))
            if info.st_mode & 0o077:
                raise OperatorTokenProblem(
                    f"{path} is open to other accounts (mode {stat.S_IMODE(info.st_mode):04o}); "
                    f"run: chmod 600 {path}", path=str(path), mode=f"{stat.S_IMODE(info.st_mode):04o}")
        data = os.read(fd, TOKEN_MAX_BYTES + 1)
    finally:
        os.close(fd)
    token = data.decode("utf-8", errors="replace").strip()
    if len(data) > TOKEN_MAX_BYTES or not token.startswith(TOKEN_PREFIX):
        raise OperatorTokenProblem(f"{path} does not hold an operator token; delete it and restart the engine",
                                   path=str(path))
    return token
