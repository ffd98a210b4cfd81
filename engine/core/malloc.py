"""How many malloc arenas the engine's threads share (glibc on Linux).

glibc gives each thread that finds the arenas busy one of its own, up to eight per core, and keeps
what each one grew to.  The engine runs a thread per connection, per store lane and per index, so
under many agents its resident memory followed its thread count: 32 agents took it from about 140 to
about 410 MiB, where four arenas held it near 250 MiB at the same throughput
(docs/reliability.md, "Memory under load").
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

ARENAS = 4
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's <malloc.h>


def limit_arenas(count: int = ARENAS) -> bool:
    """Cap the process's malloc arenas at ``count``; whether the cap was set.

    Left alone where the C library is not glibc, and where the owner set ``MALLOC_ARENA_MAX``
    (glibc reads it itself, and an owner's setting wins).  Call it before the engine starts its
    threads: arenas already made stay.
    """
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_ARENA_MAX, count))
    except (OSError, AttributeError):
        return False
