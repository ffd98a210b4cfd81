"""Real git remotes for the sync tests: a bare repository on disk, the same served by ``git daemon`` on loopback,
and by ``git http-backend`` behind a small threaded HTTP server (smart HTTP, push allowed).

Each fixture gives a ``GitRemote``: the URL a machine fetches and pushes with, and the bare repository's path,
which a test changes directly with plain git (a force-push made on the server, a hostile commit).  The
servers are started and stopped by the fixtures; a server is waited for by polling its port.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator
from urllib.parse import urlsplit

import pytest

REPOSITORY = "notes.git"
READY_SECONDS = 60  # how long a server may take to listen on a loaded machine before the test fails


@dataclass(frozen=True)
class GitRemote:
    """A remote repository: the URL machines use, and the bare repository behind it on this disk."""

    kind: str   # "disk", "daemon" or "http"
    url: str
    path: Path


def git_executable() -> str:
    found = shutil.which("git")
    assert found is not None, "the sync tests need git (scripts/test.sh installs it)"
    return found


def plain_git(repository: Path, *args: str, stdin: bytes | None = None) -> str:
    """Run plain git in ``repository`` (a bare one, or a work tree's .git) with no user configuration and no
    hooks (the tests' own changes are not what the hook tests look at)."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_DIR": str(repository), "LC_ALL": "C",
           "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@localhost",
           "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@localhost"}
    completed = subprocess.run([git_executable(), "-c", f"core.hooksPath={os.devnull}", *args], input=stdin,
                               capture_output=True, env=env, check=False)
    assert completed.returncode == 0, f"git {args[0]} failed: {completed.stderr.decode('utf-8', 'replace')}"
    return completed.stdout.decode("utf-8", "replace").strip()


def make_bare(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    plain_git(path, "init", "-q", "--bare")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, alive: Callable[[], bool] = lambda: True) -> None:
    """Poll until something accepts connections on ``port`` (the server's own start, however slow)."""
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        assert alive(), "the server exited before it listened"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            threading.Event().wait(0.02)
    raise AssertionError(f"nothing listened on port {port} within {READY_SECONDS} s")


# --- git daemon -----------------------------------------------------------------------------------


class GitDaemon:
    """``git daemon`` serving every repository under ``base`` on loopback, push allowed."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_CONFIG_GLOBAL": os.devnull}
        self.process = subprocess.Popen(
            [git_executable(), "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={self.port}", "--export-all",
             "--enable=receive-pack", "--informative-errors", f"--base-path={self.base}", str(self.base)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        process = self.process
        wait_for_port(self.port, lambda: process.poll() is None)

    def stop(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)  # the daemon and the children serving connections
        except ProcessLookupError:
            pass
        self.process.wait(timeout=60)
        self.process = None

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"


# --- git http-backend -----------------------------------------------------------------------------


class _BackendHandler(BaseHTTPRequestHandler):
    """Each request handed to ``git http-backend`` as a CGI request; its answer passed back."""

    server: "GitHttpServer"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._backend()

    def do_POST(self) -> None:
        self._backend()

    def log_message(self, format: str, *args: object) -> None:
        self.server.requests.append(format % args)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _backend(self) -> None:
        parts = urlsplit(self.path)
        body = self._body()
        env = {"PATH": os.environ.get("PATH", ""), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
               "GIT_PROJECT_ROOT": str(self.server.base), "GIT_HTTP_EXPORT_ALL": "1", "REMOTE_USER": "owner",
               "REMOTE_ADDR": "127.0.0.1", "GATEWAY_INTERFACE": "CGI/1.1", "REQUEST_METHOD": self.command,
               "PATH_INFO": parts.path, "QUERY_STRING": parts.query, "CONTENT_LENGTH": str(len(body)),
               "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.receivepack", "GIT_CONFIG_VALUE_0": "true"}
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        completed = subprocess.run([git_executable(), "http-backend"], input=body, capture_output=True, env=env,
                                   check=False)
        head, _, payload = completed.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = completed.stdout.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class GitHttpServer(ThreadingHTTPServer):
    """Smart HTTP for every repository under ``base`` on loopback, push allowed (``REMOTE_USER`` is set)."""

    daemon_threads = True

    def __init__(self, base: Path) -> None:
        super().__init__(("127.0.0.1", 0), _BackendHandler)
        self.base = base
        self.requests: list[str] = []
        self._thread = threading.Thread(target=self.serve_forever, name="test-git-http", daemon=True)

    @property
    def port(self) -> int:
        return self.server_address[1]

    def start(self) -> None:
        self._thread.start()
        wait_for_port(self.port, self._thread.is_alive)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=60)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture
def bare_remote(tmp_path: Path) -> GitRemote:
    """A bare repository on disk, reached by its path."""
    path = make_bare(tmp_path / "served" / REPOSITORY)
    return GitRemote("disk", str(path), path)


def _served(kind: str, server: "GitDaemon | GitHttpServer") -> Iterator[GitRemote]:
    path = make_bare(server.base / REPOSITORY)
    server.start()
    try:
        yield GitRemote(kind, server.url(REPOSITORY), path)
    finally:
        server.stop()


@pytest.fixture
def daemon_remote(tmp_path: Path) -> Iterator[GitRemote]:
    """A bare repository served by a real ``git daemon`` on loopback (``git://``), push enabled."""
    yield from _served("daemon", GitDaemon(tmp_path / "served"))


@pytest.fixture
def http_remote(tmp_path: Path) -> Iterator[GitRemote]:
    """A bare repository served by ``git http-backend`` behind a threaded HTTP server on loopback."""
    yield from _served("http", GitHttpServer(tmp_path / "served"))


@pytest.fixture(params=["disk", "daemon", "http"])
def any_remote(request: pytest.FixtureRequest) -> GitRemote:
    """Each test that takes it runs once per transport: on disk, over git://, over http://."""
    return request.getfixturevalue({"disk": "bare_remote", "daemon": "daemon_remote",
                                    "http": "http_remote"}[request.param])
