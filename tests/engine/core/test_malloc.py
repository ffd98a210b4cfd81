"""The engine caps glibc's malloc arenas, unless the owner set MALLOC_ARENA_MAX or the C library is another."""

import platform
import subprocess
import sys

import pytest

from engine.core import malloc

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _limit_in_a_fresh_process(env_extra: dict[str, str]) -> str:
    import os

    env = {key: value for key, value in os.environ.items() if key != "MALLOC_ARENA_MAX"} | env_extra
    completed = subprocess.run([sys.executable, "-c", "from engine.core.malloc import limit_arenas; print(limit_arenas())"],
                               capture_output=True, text=True, env=env, check=True)
    return completed.stdout.strip()


@pytest.mark.skipif(not GLIBC, reason="mallopt's arena cap is glibc's")
def test_the_cap_is_set_on_glibc():
    assert _limit_in_a_fresh_process({}) == "True"


def test_an_owners_malloc_arena_max_wins():
    assert _limit_in_a_fresh_process({"MALLOC_ARENA_MAX": "8"}) == "False"


def test_another_c_library_is_left_alone(monkeypatch):
    monkeypatch.setattr(malloc.platform, "libc_ver", lambda: ("", ""))
    assert malloc.limit_arenas() is False
