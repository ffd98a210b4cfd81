"""Storage faults under a running engine: a full disk, a read-only vault, a locked git repository, a
manifest or database deleted.

    python -m tests.reliability.faults [--only NAME ...] [--list]

Each scenario runs a real engine process with one writing agent and checks the same things: the
fault ends in a clear error (a ``reason`` from the wire vocabulary naming what went wrong, never
``internal``), no acknowledged write is lost, and once the fault is removed the request that failed
succeeds when sent again with the same requestId and ``checks.verify`` finds the store whole.

Injected faults (``KNOWLEDGE_FAULT=<step>:<n>:enospc`` or ``:erofs``) are portable and run in CI;
``disk-full-tmpfs`` (the state directory on a small tmpfs that is really filled) and
``read-only-mount`` (the vault remounted read-only) need root and ``mount``, and are skipped
elsewhere; ``read-only-chmod`` needs a user that file modes bind: not root, or root without
CAP_DAC_OVERRIDE (``setpriv --bounding-set -dac_override,-dac_read_search python -m ...``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from engine.state.statedir import StateDir

from .checks import verify
from .harness import (
    AgentSpec, Connection, EngineProcess, Supervisor, Writer, agent_specs, machine_line, outcome,
    register_agents,
)


class Skip(Exception):
    """The scenario cannot run here (needs root, mount, or a non-root user)."""


class Bench:
    """One state directory, one engine process, one owner agent writing over its own connection."""

    def __init__(self, root: Path, *, fault: str | None = None, state_root: Path | None = None) -> None:
        self.root = root
        self.state = StateDir(state_root or root / "state")
        tokens = register_agents(self.state, 1)
        self.spec = agent_specs(tokens, 1)[0]
        self.writer = Writer(self.spec, Supervisor(), seed=7)
        self.engine = EngineProcess(self.state, fault=fault, log=root / "engine.log")
        self.connection: Connection | None = None
        self.problems: list[str] = []
        self.figures: dict[str, Any] = {}

    def start(self) -> None:
        port = self.engine.start()
        assert port is not None, "the engine did not start"
        self.connection = Connection(port, self.spec.token, self.spec.audience)

    def write(self, count: int) -> list[tuple[bool, dict[str, Any]]]:
        assert self.connection is not None
        return [self.writer.write_once(self.connection) for _ in range(count)]

    def write_until_error(self, limit: int = 20) -> dict[str, Any]:
        for _ in range(limit):
            ok, body = self.write(1)[0]
            if not ok:
                return body
        self.problems.append(f"no write failed in {limit} attempts")
        return {}

    def expect_clear_error(self, body: dict[str, Any], reason: str, *words: str) -> None:
        """The error names a wire reason and what went wrong."""
        text = f"{body.get('message', '')} {body.get('errno', '')}".lower()
        if body.get("reason") != reason or not all(word.lower() in text for word in words):
            self.problems.append(f"expected a clear {reason} error naming {words}, got {body}")

    def retry_failed(self, *, expect_ok: bool = True) -> dict[str, Any]:
        """Send the failed request again with its requestId; returns the error while the fault holds."""
        assert self.connection is not None
        ok, body = self.writer.retry_failed(self.connection)
        if expect_ok and not ok:
            self.problems.append(f"the failed request did not succeed once the fault was removed: {body}")
        if not expect_ok and ok:
            self.problems.append("the request succeeded while the fault held")
        return body

    def request(self, method: str, params: dict[str, Any] | None = None) -> tuple[bool, dict[str, Any]]:
        assert self.connection is not None
        return outcome(self.connection.request(method, params))

    def reads_still_work(self) -> None:
        """Every acknowledged record still reads back exactly while the fault holds."""
        assert self.connection is not None
        for ack in self.writer.acks:
            for written in ack.receipt.get("records", []):
                ok, body = self.connection.tool("knowledge_record", {"id": written["id"],
                                                                     "revision": written["revision"]})
                if not ok:
                    self.problems.append(f"reading {written['id']} failed during the fault: {body}")
                    return

    def abandon(self) -> None:
        """Stop the engine of a scenario that ended before ``finish`` (a mount refused, say)."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None
        self.engine.stop()

    def finish(self) -> tuple[dict[str, Any], list[str]]:
        if self.connection is not None:
            self.connection.close()
        self.engine.stop()
        figures, problems = verify(self.state, [self.writer])
        unexpected = [e for e in self.writer.errors]
        if unexpected:
            problems.append(f"writes failed that should not have: {[(e['reason'], e['message']) for e in unexpected]}")
        log = (self.root / "engine.log").read_text(encoding="utf-8", errors="replace")
        if "Traceback" in log:
            problems.append("the engine logged a traceback")
        return {**self.figures, "writes acknowledged": figures["writes acknowledged"],
                "git blobs checked": figures.get("git blobs checked", 0)}, self.problems + problems


# --- injected disk faults --------------------------------------------------------------------------

SETTLE_S = 60.0  # how long a store may take to serve again once what was taken from it is back
# Three writes succeed first (the fault counter starts with the engine), then the step fails once.
INJECTED = {
    "disk-full-journal": ("journaled:4:enospc", "disk is full"),
    "disk-full-install": ("installed:6:enospc", "no space left"),
    "disk-full-checkpoint": ("checkpointed:4:enospc", "no space left"),
    "disk-full-acknowledge": ("acknowledged:4:enospc", "disk is full"),
    "read-only-install": ("installed:6:erofs", "read-only"),
}


def injected(name: str) -> Callable[[Path], tuple[dict[str, Any], list[str]]]:
    fault, words = INJECTED[name]

    def scenario(root: Path) -> tuple[dict[str, Any], list[str]]:
        bench = Bench(root, fault=fault)
        bench.start()
        error = bench.write_until_error()
        bench.expect_clear_error(error, "store_unavailable", words)
        bench.reads_still_work()
        bench.retry_failed()  # a one-shot fault: it is gone now
        bench.write(3)
        bench.figures["error"] = f"{error.get('reason')}: {error.get('message')}"
        return bench.finish()

    return scenario


# --- real faults -------------------------------------------------------------------------------------


def _mount(*args: str) -> None:
    """``mount``, tried again for up to 5 s while it answers "busy": a remount read-only is refused while the
    engine still has a vault file open for writing (its last write's publication finishing)."""
    deadline = time.monotonic() + 5.0
    while True:
        completed = subprocess.run(["mount", *args], capture_output=True, text=True)
        if completed.returncode == 0:
            return
        if "busy" not in completed.stderr or time.monotonic() > deadline:
            raise Skip(f"mount {' '.join(args)} failed: {completed.stderr.strip()}")
        time.sleep(0.1)


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _need_root() -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        raise Skip("needs root and mount")


def disk_full_tmpfs(root: Path) -> tuple[dict[str, Any], list[str]]:
    """The state directory on a 24 MiB tmpfs that a filler file really fills."""
    _need_root()
    mountpoint = root / "tmpfs"
    mountpoint.mkdir()
    _mount("-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", str(mountpoint))
    try:
        bench = Bench(root, state_root=mountpoint / "state")
        bench.start()
        try:
            bench.write(12)
            filler = mountpoint / "filler"
            bench.figures["filler bytes"] = _fill(filler)
            failures = []
            ok, body = bench.write(1)[0]
            if not ok:  # the same request again while the disk stays full
                failures = [body] + [bench.retry_failed(expect_ok=False) for _ in range(3)]
            if not failures:
                bench.problems.append("no write failed on a full disk")
            for body in failures:
                if body.get("reason") in ("internal", None):
                    bench.problems.append(f"a full disk gave an unclear error: {body}")
            bench.figures["errors while full"] = sorted({f"{b.get('reason')}: {b.get('message')}" for b in failures})
            bench.reads_still_work()
            ok, health = bench.request("memory/health")
            bench.figures["health while full"] = \
                "answered" if ok else f"{health.get('reason')}: {health.get('message')}"
            filler.unlink()
            if failures:
                bench.retry_failed()
            bench.write(5)
            return bench.finish()
        except BaseException:
            bench.abandon()
            raise
    finally:
        _umount(mountpoint)


def _fill(path: Path) -> int:
    """Write to ``path`` until the file system has no byte left; returns how many were written."""
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for block in (1 << 16, 512, 1):
            while True:
                try:
                    written += os.write(fd, b"\0" * block)
                except OSError:
                    break
    finally:
        os.close(fd)
    return written


def read_only_mount(root: Path) -> tuple[dict[str, Any], list[str]]:
    """The vault bind-mounted read-only under the running engine, then writable again."""
    _need_root()
    bench = Bench(root)
    bench.start()
    try:
        bench.write(6)
        vault = next(p for p in bench.state.stores.iterdir() if not p.name.startswith(".")) / "vault"
        _mount("--bind", str(vault), str(vault))
        try:
            _mount("-o", "remount,ro,bind", str(vault))
            return _read_only_then_writable(bench, lambda: _umount(vault), "read-only")
        finally:
            _umount(vault)
    except BaseException:
        bench.abandon()  # a refused mount (Skip) must not leave the engine running
        raise


def file_modes_bind(root: Path) -> bool:
    """Whether this process is refused a write into a directory without write permission (root is not,
    unless it runs without CAP_DAC_OVERRIDE, e.g. under ``setpriv --bounding-set -dac_override``)."""
    probe = root / "mode-probe"
    probe.mkdir()
    probe.chmod(0o555)
    try:
        (probe / "x").write_bytes(b"")
    except PermissionError:
        return True
    finally:
        probe.chmod(0o755)
        shutil.rmtree(probe, ignore_errors=True)
    return False


def read_only_chmod(root: Path) -> tuple[dict[str, Any], list[str]]:
    """Every directory of the vault made read-only with chmod (binds any user but root)."""
    if not file_modes_bind(root):
        raise Skip("this user ignores file modes (root); run it without CAP_DAC_OVERRIDE, see docs/reliability.md")
    bench = Bench(root)
    bench.start()
    bench.write(6)
    vault = next(p for p in bench.state.stores.iterdir() if not p.name.startswith(".")) / "vault"
    directories = [vault, *[p for p in vault.rglob("*") if p.is_dir()]]
    modes = {path: path.stat().st_mode for path in directories}
    for path in directories:
        path.chmod(modes[path] & ~0o222)

    def restore() -> None:
        for path, mode in modes.items():
            path.chmod(mode)

    try:
        return _read_only_then_writable(bench, restore, "permission denied")
    finally:
        restore()


def _read_only_then_writable(bench: Bench, restore: Callable[[], None], words: str) -> tuple[dict, list[str]]:
    failures = []
    ok, body = bench.write(1)[0]
    if ok:
        bench.problems.append("a write to a read-only vault succeeded")
    else:
        failures = [body] + [bench.retry_failed(expect_ok=False) for _ in range(2)]
    for body in failures:
        bench.expect_clear_error(body, "store_unavailable", words)
    bench.figures["error"] = f"{failures[0].get('reason')}: {failures[0].get('message')}" if failures else None
    bench.reads_still_work()
    restore()
    if failures:
        bench.retry_failed()
    bench.write(3)
    return bench.finish()


# --- git left locked ---------------------------------------------------------------------------------


def git_locked(lock_name: str) -> Callable[[Path], tuple[dict[str, Any], list[str]]]:
    def scenario(root: Path) -> tuple[dict[str, Any], list[str]]:
        bench = Bench(root)
        bench.start()
        bench.write(3)
        ok, resumed = bench.connection.tool("knowledge_resume", {})  # type: ignore[union-attr]
        if not ok or resumed.get("state") != "committed":
            bench.problems.append(f"the first checkpoint failed: {resumed}")
        vault = next(p for p in bench.state.stores.iterdir() if not p.name.startswith(".")) / "vault"
        lock = vault / ".git" / lock_name
        lock.write_bytes(b"")
        bench.write(6)  # writes go on: git never rolls a publication back
        ok, stuck = bench.connection.tool("knowledge_resume", {})  # type: ignore[union-attr]
        said = stuck.get("reason") or stuck.get("index") or ""
        bench.figures["resume while locked"] = f"{stuck.get('state')}: {said}"
        if lock_name not in said or stuck.get("state") != ("pending" if lock_name.startswith("refs") else "committed"):
            bench.problems.append(f"resume did not name the lock clearly: {stuck}")
        lock.unlink()
        ok, resumed = bench.connection.tool("knowledge_resume", {})  # type: ignore[union-attr]
        if resumed.get("state") != "committed" or "index" in resumed:
            bench.problems.append(f"resume did not catch up once the lock was gone: {resumed}")
        bench.write(2)
        return bench.finish()

    return scenario


# --- the manifest or the database deleted --------------------------------------------------------------


def deleted(filename: str) -> Callable[[Path], tuple[dict[str, Any], list[str]]]:
    """``filename`` moved away under the running engine while a second agent keeps writing, then back."""

    def scenario(root: Path) -> tuple[dict[str, Any], list[str]]:
        bench = Bench(root)
        bench.start()
        bench.write(4)
        store = next(p for p in bench.state.stores.iterdir() if not p.name.startswith("."))
        path, aside = store / filename, root / f"{filename}.aside"
        # A second agent instance of the same credential, in the same partition, with its own request ids.
        background = Writer(AgentSpec("w9", bench.spec.credential, bench.spec.token, bench.spec.audience),
                            Supervisor(), seed=11, pause=0.01, retry_unavailable=True)
        stop = threading.Event()
        stuck: list[str] = []
        given_up_at = float("inf")  # set once the file is back

        def keep_writing() -> None:
            connection = Connection(bench.engine.port, bench.spec.token, bench.spec.audience)  # type: ignore[arg-type]
            while not stop.is_set() or background.in_flight is not None:
                if stop.is_set() and time.monotonic() > given_up_at:  # a store that never comes back ends the run
                    stuck.append(f"the background writer's last write was still refused {SETTLE_S:.0f} s after "
                                 f"{filename} was back")
                    break
                background.write_once(connection)
            connection.close()

        thread = threading.Thread(target=keep_writing)
        thread.start()
        time.sleep(0.3)
        os.replace(path, aside)
        time.sleep(0.3)
        failures = []
        ok, body = bench.write(1)[0]
        if not ok:
            failures = [body] + [bench.retry_failed(expect_ok=False) for _ in range(2)]
        ok, status = bench.request("memory/status")
        if status != {"ready": False}:
            bench.problems.append(f"memory/status during the outage said {status}")
        if path.exists():
            bench.problems.append(f"the engine re-created {filename}")
        os.replace(aside, path)
        time.sleep(0.3)
        given_up_at = time.monotonic() + SETTLE_S
        stop.set()
        thread.join()
        bench.problems.extend(stuck)
        if len(failures) != 3:
            bench.problems.append(f"{3 - len(failures)} writes succeeded without {filename}")
        for body in failures:
            bench.expect_clear_error(body, "store_unavailable", filename)
        bench.figures["error"] = f"{failures[0].get('reason')}: {failures[0].get('message')}" if failures else None
        if background.errors:
            bench.problems.append(f"the background writer got errors: {background.errors[:3]}")
        bench.figures["background writes acknowledged / refused"] = (len(background.acks), background.refusals)
        if failures:
            bench.retry_failed()
        bench.write(3)
        if bench.connection is not None:
            bench.connection.close()
            bench.connection = None
        bench.engine.stop()
        figures, problems = verify(bench.state, [bench.writer, background])
        return {**bench.figures, "writes acknowledged": figures["writes acknowledged"]}, bench.problems + problems

    return scenario


SCENARIOS: dict[str, Callable[[Path], tuple[dict[str, Any], list[str]]]] = {
    **{name: injected(name) for name in INJECTED},
    "disk-full-tmpfs": disk_full_tmpfs,
    "read-only-mount": read_only_mount,
    "read-only-chmod": read_only_chmod,
    "git-index-lock": git_locked("index.lock"),
    "git-ref-lock": git_locked("refs/heads/main.lock"),
    "manifest-deleted": deleted("vault.json"),
    "database-deleted": deleted("state.sqlite"),
}


def run_scenario(name: str) -> tuple[dict[str, Any], list[str]]:
    root = Path(tempfile.mkdtemp(prefix=f"kd-fault-{name}-"))
    try:
        figures, problems = SCENARIOS[name](root)
    except Skip:
        shutil.rmtree(root, ignore_errors=True)
        raise
    if problems:
        figures["kept for inspection"] = str(root)
    else:
        shutil.rmtree(root, ignore_errors=True)
    return figures, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    args = parser.parse_args(argv)
    print(f"faults: {machine_line()}")
    failed = 0
    for name in args.only or SCENARIOS:
        started = time.monotonic()
        try:
            figures, problems = run_scenario(name)
        except Skip as exc:
            print(f"{name}: skipped ({exc})")
            continue
        status = "ok" if not problems else "FAILED"
        failed += bool(problems)
        print(f"{name}: {status} in {time.monotonic() - started:.1f} s; {figures}")
        for problem in problems:
            print("  PROBLEM:", problem)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
