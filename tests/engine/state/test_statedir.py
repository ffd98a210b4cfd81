"""The engine lock: one owner per state directory, and a dead owner's lock is waited for, not reported."""

import os
import subprocess
import sys
import threading

import pytest

from engine.core.errors import EngineLocked
from engine.state.statedir import EngineLock, StateDir, _try_lock


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_live_owner_is_named_at_once(tmp_path, monkeypatch):
    state = StateDir(tmp_path / "state")
    first = EngineLock(state)
    first.acquire()

    def waited(seconds: float) -> None:  # only a dead owner's lock is waited for
        raise AssertionError(f"acquire waited {seconds} s for a live owner's lock")

    try:
        monkeypatch.setattr("engine.state.statedir.time.sleep", waited)
        with pytest.raises(EngineLocked) as raised:
            EngineLock(state).acquire()
        assert f"pid {os.getpid()}" in str(raised.value)
    finally:
        first.release()


def test_a_lock_still_held_for_a_dead_owner_is_waited_for(tmp_path):
    state = StateDir(tmp_path / "state")
    state.create()
    # Hold the lock on another open file description, as the kernel may for a moment after a SIGKILL,
    # with a pid in the file that no longer runs.
    lingering = os.open(state.lock, os.O_RDWR | os.O_CREAT, 0o600)
    assert _try_lock(lingering)
    os.write(lingering, f"{dead_pid()}\n".encode())
    threading.Timer(0.3, os.close, args=(lingering,)).start()
    lock = EngineLock(state)
    lock.acquire()
    try:
        assert state.lock.read_text().strip() == str(os.getpid())
    finally:
        lock.release()
