"""Smoke test of a built bundle: version, a serving engine answering ping and its relay, the window painting,
install.

    python packaging/smoke_test.py [dist/knowledge-desk]

Standard library only, so it runs without the project installed.  Prints what it checked and how long
each step took; exits non-zero on the first failure.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


INITIALIZE = (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", '
              b'"capabilities": {}, "clientInfo": {"name": "smoke", "version": "1"}}}\n')


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"smoke test: timed out waiting for {what}")


def engine_info(state: Path) -> dict | None:
    try:
        return json.loads((state / "engine.json").read_text())
    except (OSError, ValueError):
        return None


def ping(port: int) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        stream = connection.makefile("rwb")
        stream.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        stream.flush()
        return json.loads(stream.readline())


# More than the record files a sync reads in this process (engine/store/record_rows.py POOL_MIN_FILES): the
# sync that finds them starts worker processes, which a frozen executable starts as itself.
MANY_FILES = 6_000


def catalogue_many_files(knowledge: Path, state: Path, env: dict[str, str]) -> int:
    """Drop ``MANY_FILES`` notes into the demo store's private partition and search for one: the search answers
    after the catalog read them, and no worker process failed (which the engine would log, then read them
    itself)."""
    subprocess.run([str(knowledge), "--state-dir", str(state), "demo"], env=env, capture_output=True, check=True,
                   timeout=300)
    notes = next((state / "stores").iterdir()) / "vault" / "private" / "pages" / "notes" / "smoke"
    notes.mkdir(parents=True)
    stamp = "2026-01-05T09:00:00Z"
    for number in range(MANY_FILES):
        (notes / f"n{number}.md").write_text(
            f"---\nformat: knowledge-record-v1\nid: pg_smoke_{number}\nrevision: 1\nkind: page\n"
            f"title: Smoke note {number}\nrecorded_at: '{stamp}'\nupdated_at: '{stamp}'\nscope: private\n"
            f"lifecycle: active\ntype: note\n---\nA quokkasmoke{number} note.\n", encoding="utf-8")
    found = subprocess.run([str(knowledge), "--state-dir", str(state), "search", f"quokkasmoke{MANY_FILES - 1}",
                            "--json"], env=env, capture_output=True, text=True, timeout=600)
    assert found.returncode == 0, found.stderr
    assert "worker process" not in found.stderr, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert [hit["title"] for hit in hits] == [f"Smoke note {MANY_FILES - 1}"], hits
    return MANY_FILES


def main() -> int:
    bundle = Path(sys.argv[1] if len(sys.argv) > 1 else "dist/knowledge-desk").resolve()
    knowledge = bundle / "knowledge"
    scratch = Path(tempfile.mkdtemp(prefix="knowledge-smoke-"))
    env = {**os.environ, "HOME": str(scratch / "home"), "QT_QPA_PLATFORM": "offscreen"}
    env.pop("KNOWLEDGE_STATE_DIR", None)

    started = time.monotonic()
    version = subprocess.run([str(knowledge), "--version"], capture_output=True, text=True, env=env, check=True)
    assert version.stdout.startswith("knowledge-desk "), version.stdout
    print(f"--version: {version.stdout.strip()} ({time.monotonic() - started:.2f} s)")

    state = scratch / "serve-state"
    started = time.monotonic()
    subprocess.run([str(knowledge), "--state-dir", str(state), "agents", "add", "main", "--owner"], env=env,
                   capture_output=True, check=True)
    server = subprocess.Popen([str(knowledge), "--state-dir", str(state), "serve", "--port", "0"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        info = wait_for(lambda: (i := engine_info(state)) and i.get("port") and i, 60, "engine.json")
        assert ping(info["port"]) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        print(f"serve: state dir created, ping answered on port {info['port']} ({time.monotonic() - started:.2f} s)")
        started = time.monotonic()
        relayed = subprocess.run([str(bundle / "knowledge-mcp"), "--state-dir", str(state), "mcp", "--agent", "main"],
                                 input=INITIALIZE, capture_output=True, env=env, timeout=60)
        answer = json.loads(relayed.stdout.splitlines()[0])
        assert answer["result"]["serverInfo"]["name"] == "knowledge-desk", (answer, relayed.stderr)
        print(f"knowledge-mcp: the relay answered initialize through the engine ({time.monotonic() - started:.2f} s)")
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(60)
    assert code == 0 and not (state / "engine.json").exists(), f"serve exited {code}"

    state = scratch / "desktop-state"
    report = scratch / "startup.json"
    started = time.monotonic()
    window = subprocess.run([str(knowledge), "--state-dir", str(state), "desktop", "--demo", "--startup-report",
                             str(report)], env=env, capture_output=True, text=True, timeout=180)
    try:
        assert window.returncode == 0, window.stderr
        stamps = json.loads(report.read_text())
        assert "paintedAt" in stamps and "recordsAt" in stamps, stamps
        print(f"desktop: window painted and showed the demo store's records ({time.monotonic() - started:.2f} s)")
    finally:
        info = engine_info(state)
        if info:
            os.kill(info["pid"], signal.SIGTERM)

    started = time.monotonic()
    catalogued = catalogue_many_files(knowledge, scratch / "catalog-state", env)
    print(f"catalog: {catalogued:,} files dropped into a partition catalogued in worker processes "
          f"({time.monotonic() - started:.2f} s)")

    home = scratch / "home"
    installed = subprocess.run(["sh", str(bundle / "install" / "install.sh")], env=env, capture_output=True,
                               text=True)
    assert installed.returncode == 0, installed.stderr
    data = home / ".local" / "share"
    for path in (home / ".local" / "bin" / "knowledge",
                 data / "applications" / "dev.knowledgedesk.KnowledgeDesk.desktop",
                 data / "metainfo" / "dev.knowledgedesk.KnowledgeDesk.metainfo.xml",
                 data / "icons" / "hicolor" / "256x256" / "apps" / "dev.knowledgedesk.KnowledgeDesk.png"):
        assert path.exists(), f"install.sh did not place {path}"
    again = subprocess.run([str(home / ".local" / "bin" / "knowledge"), "--version"], capture_output=True,
                           text=True, env=env, check=True)
    assert again.stdout == version.stdout
    print("install: bundle, command, desktop entry, AppStream data and icons in place for the user")
    return 0


if __name__ == "__main__":
    sys.exit(main())
