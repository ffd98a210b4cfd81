"""A loopback stand-in for the Hugging Face hub's ``resolve`` endpoint (HEAD and ranged GET)."""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

from contextlib import contextmanager


class FakeHub:
    def __init__(self, repo: str, revision: str, files: dict[str, bytes]) -> None:
        self.repo, self.revision, self.files = repo, revision, dict(files)
        self.requests: list[tuple[str, str, str | None]] = []   # (method, path, Range header)
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                hub.requests.append(("HEAD", self.path, self.headers.get("Range")))
                self._answer(body=False)

            def do_GET(self) -> None:
                hub.requests.append(("GET", self.path, self.headers.get("Range")))
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                prefix = f"/{hub.repo}/resolve/{hub.revision}/"
                name = self.path[len(prefix):] if self.path.startswith(prefix) else None
                if name not in hub.files:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.end_headers()
                    return
                data = hub.files[name]
                start = 0
                wanted = self.headers.get("Range")
                if body and wanted and wanted.startswith("bytes="):
                    start = int(wanted[6:].split("-")[0])
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(data) - start))
                self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header("X-Repo-Commit", hub.revision)
                self.send_header("Accept-Ranges", "bytes")
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if body:
                    self.wfile.write(data[start:])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def gets(self) -> list[str]:
        return [path for method, path, _ in self.requests if method == "GET"]


@contextmanager
def running(hub: FakeHub) -> Iterator[FakeHub]:
    thread = threading.Thread(target=hub.server.serve_forever, name="fake-hub", daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        hub.server.shutdown()
        hub.server.server_close()
        thread.join()


def hold_downloads(hub: FakeHub, suffix: str) -> tuple[threading.Event, threading.Event]:
    """Make GETs of files ending in ``suffix`` wait until the second event is set (the first says one arrived)."""
    entered, release = threading.Event(), threading.Event()
    handler = hub.server.RequestHandlerClass
    answer = handler.do_GET

    def held(self: BaseHTTPRequestHandler) -> None:
        if self.path.endswith(suffix):
            entered.set()
            release.wait(30)
        answer(self)

    handler.do_GET = held  # type: ignore[attr-defined]
    return entered, release
