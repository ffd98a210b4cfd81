"""What the reliability harnesses share: a real engine process, socket clients, writing agents.

The engine runs as ``python -m engine.cli --state-dir S serve --port 0``, as it does for real agents,
so a SIGKILL hits everything at once: the socket, the lanes, SQLite, the git child.  Agents are
threads of the harness, each with its own connection; a writer keeps every receipt it was given
(an *acknowledged* write) and retries an unanswered request with the same ``requestId`` once the
engine is back, as a well-behaved agent does.
"""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.state.registry import Registry
from engine.state.statedir import StateDir

ROOT = Path(__file__).resolve().parents[2]


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# --- the engine process --------------------------------------------------------------------------


class EngineProcess:
    """``knowledge serve --port 0`` in its own process; ``fault`` sets ``KNOWLEDGE_FAULT`` for it."""

    def __init__(self, state: StateDir, *, fault: str | None = None, log: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.state = state
        self.fault = fault
        self.log = log
        self.extra_env = env or {}
        self.process: subprocess.Popen | None = None
        self.port: int | None = None

    def start(self, timeout: float = 60.0) -> int | None:
        """Start and wait until it listens; returns the port, or None when it died first."""
        env = {**os.environ, "PYTHONPATH": str(ROOT), **self.extra_env}
        env.pop("KNOWLEDGE_FAULT", None)
        if self.fault:
            env["KNOWLEDGE_FAULT"] = self.fault
        output = open(self.log, "ab") if self.log else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "engine.cli", "--state-dir", str(self.state.root), "serve", "--port", "0"],
                cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT if self.log else subprocess.DEVNULL,
            )
        finally:
            if self.log:
                output.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return None
            info = self.state.read_engine_info()
            if info and info.get("pid") == self.process.pid and info.get("port"):
                self.port = int(info["port"])
                return self.port
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"the engine did not start within {timeout:.0f} s (log: {self.log})")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> int | None:
        """SIGKILL it (a no-op when it already died) and reap it."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        return self.process.wait(timeout=30)

    def stop(self, timeout: float = 60.0) -> int | None:
        """A clean stop (SIGTERM: the engine drains, checkpoints git and exits)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def rss_kib(self) -> int:
        """Resident memory of the engine (Linux /proc)."""
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0


# --- socket clients -------------------------------------------------------------------------------


class EngineGone(Exception):
    """The connection broke: the engine died (or closed it) before answering."""


class Connection:
    """One agent connection: newline-delimited JSON-RPC over loopback TCP."""

    def __init__(self, port: int, token: str | None, audience: dict[str, Any] | None = None, *,
                 timeout: float = 60.0, instance: str | None = None, initialize: bool = True,
                 operator_token: str | None = None) -> None:
        try:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        except OSError as exc:
            raise EngineGone(str(exc)) from exc
        self.file = self.sock.makefile("rwb")
        self.next_id = 0
        if initialize:
            knowledge: dict[str, Any] = ({"operatorToken": operator_token} if operator_token else
                                         {"token": token, "audience": audience or {"kind": "owner-private"}})
            if instance:
                knowledge["instance"] = instance
            reply = self.request("initialize", {"protocolVersion": "2025-11-25", "_meta": {"knowledge": knowledge}})
            if "error" in reply:
                raise RuntimeError(f"initialize failed: {reply['error']}")

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        try:
            self.file.write(json.dumps(message).encode("utf-8") + b"\n")
            self.file.flush()
            line = self.file.readline()
        except (OSError, ValueError) as exc:  # reset, broken pipe, timeout, closed file
            raise EngineGone(f"{type(exc).__name__}: {exc}") from exc
        if not line:
            raise EngineGone("the engine closed the connection")
        return json.loads(line)

    def tool(self, name: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """(True, result) or (False, {reason, message, ...}) for a tool call."""
        return outcome(self.request("tools/call", {"name": name, "arguments": arguments}))

    def close(self) -> None:
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass


def outcome(reply: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    if "error" in reply:
        return False, {"message": reply["error"].get("message"), **(reply["error"].get("data") or {})}
    result = reply["result"]
    if isinstance(result, dict) and result.get("isError"):
        return False, json.loads(result["content"][0]["text"])  # an error is the text alone
    if isinstance(result, dict) and "structuredContent" in result:
        return True, result["structuredContent"]
    return True, result


# --- agents ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentSpec:
    """One writing agent: its credential and the audience its host declared."""

    name: str
    credential: str  # the registered agent the token belongs to
    token: str
    audience: dict[str, Any]


def register_agents(state: StateDir, credentials: int) -> dict[str, str]:
    """Register ``credentials`` owner agents (before the engine starts); name -> token."""
    state.create()
    registry = Registry.open(state.registry, state.root)
    try:
        return {f"agent{n}": registry.add_agent(f"agent{n}", owner=True) for n in range(credentials)}
    finally:
        registry.close()


def agent_specs(tokens: dict[str, str], count: int) -> list[AgentSpec]:
    """``count`` writers over the credentials: alternately each credential's private partition and a
    conversation of its own, so several writers share each store's lane and each store has two partitions."""
    names = sorted(tokens)
    specs = []
    for number in range(count):
        credential = names[number % len(names)]
        if (number // len(names)) % 2 == 0:
            audience: dict[str, Any] = {"kind": "owner-private"}
        else:
            audience = {"kind": "conversation", "sessionKey": f"chat:{number}",
                        "sessionId": str(uuid.UUID(int=number + 1))}
        specs.append(AgentSpec(f"w{number}", credential, tokens[credential], audience))
    return specs


class Supervisor:
    """Where the engine is now: writers wait here for a (re)started engine."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self.port: int | None = None
        self.generation = 0
        self.stopping = False

    def up(self, port: int) -> None:
        with self._condition:
            self.port = port
            self.generation += 1
            self._condition.notify_all()

    def down(self) -> None:
        with self._condition:
            self.port = None

    def stop(self) -> None:
        with self._condition:
            self.stopping = True
            self._condition.notify_all()

    def wait_up(self, newer_than: int) -> tuple[int, int] | None:
        """The port and generation of an engine started after ``newer_than``; None when stopping."""
        with self._condition:
            while not self.stopping and (self.port is None or self.generation <= newer_than):
                self._condition.wait(timeout=1.0)
            return None if self.stopping else (self.port, self.generation)  # type: ignore[return-value]


@dataclass
class Ack:
    """One acknowledged write: what was asked, what the receipt said, and the marker of each revision."""

    writer: str
    operation: str
    params: dict[str, Any]
    receipt: dict[str, Any]
    markers: dict[tuple[str, int], str]
    generation: int
    retried: bool


class Writer(threading.Thread):
    """An agent writing a stream of pages, revisions, claims (some correcting earlier ones) and attachments.

    Every revision carries a word no other revision holds (its *marker*), so a search for it tells
    whether exactly that revision is in the index.  A request that got no answer is sent again, with
    the same requestId, to the next engine; until then it is *in flight*.
    """

    def __init__(self, spec: AgentSpec, supervisor: Supervisor, *, seed: int, max_writes: int | None = None,
                 pause: float = 0.0, retry_unavailable: bool = False) -> None:
        super().__init__(name=f"writer-{spec.name}", daemon=True)
        self.spec = spec
        self.supervisor = supervisor
        self.rng = random.Random(seed)
        self.max_writes = max_writes
        self.pause = pause
        # A store_unavailable write may or may not have been applied: send it again until it is answered.
        self.retry_unavailable = retry_unavailable
        self.refusals = 0
        self.acks: list[Ack] = []
        self.errors: list[dict[str, Any]] = []
        self.in_flight: tuple[str, dict[str, Any], dict[tuple[str, int], str]] | None = None
        self.retries = 0
        self.pages: dict[str, int] = {}  # page id -> last acknowledged revision
        self.seen: dict[str, str] = {}   # page id -> sha256 of a version a refusal named (an outside edit)
        self.claims: list[str] = []      # active claim ids
        self._count = 0
        self._halt = threading.Event()

    def halt(self) -> None:
        self._halt.set()

    def marker(self) -> str:
        self._count += 1
        return f"zk{self.spec.name[1:]}q{self._count}x{self.rng.randrange(10**6)}"

    def next_write(self) -> tuple[str, dict[str, Any], dict[tuple[str, int], str]]:
        """The next request: (tool, arguments, markers of the revisions it publishes, keyed by id or '')."""
        roll = self.rng.random()
        mark = self.marker()
        request_id = f"{self.spec.name}-{self._count}"
        if not self.pages or roll < 0.25:
            title = f"Page {self.spec.name} {self._count}"
            page = {"requestId": request_id, "type": "note", "title": title,
                    "body": f"{title} body. Marker {mark}. Harbour ferry schedule."}
            if self._count % 2:  # every other new page retains a file with it, in the page's publication
                page["evidence"] = [{"content": base64.b64encode(f"Notes for {mark}\n".encode()).decode(),
                                     "filename": f"{mark}.md"}]
            return "knowledge_save_page", page, {("", 1): mark}
        if roll < 0.55:
            page_id = self.rng.choice(sorted(self.pages))
            revision = self.pages[page_id]
            named = {"expectedSha256": self.seen[page_id]} if page_id in self.seen else {}
            return "knowledge_save_page", {
                "requestId": request_id, "id": page_id, "expectedRevision": revision, **named, "type": "note",
                "title": f"Page {self.spec.name} rev {revision + 1}",
                "body": f"Revision {revision + 1}. Marker {mark}. Lighthouse budget review."}, \
                {(page_id, revision + 1): mark}
        if roll < 0.85:
            item: dict[str, Any] = {"text": f"Claim {mark} holds.", "claimKind": "fact",
                                    "excerpt": f"Excerpt for {mark}."}
            markers = {("", 1): mark}
            if self.claims and self.rng.random() < 0.3:
                item["replaces"] = self.rng.choice(self.claims)
            return "knowledge_remember", {"requestId": request_id, "subject": self.rng.choice(sorted(self.pages)),
                                          "items": [item]}, markers
        content = f"Attachment {mark}\n".encode() * self.rng.randint(1, 40)
        return "knowledge_attach", {"requestId": request_id, "content": base64.b64encode(content).decode(),
                                    "filename": f"{mark}.txt"}, {}

    def _learn(self, tool: str, params: dict[str, Any], receipt: dict[str, Any],
               markers: dict[tuple[str, int], str]) -> dict[tuple[str, int], str]:
        """Update what this agent knows from a receipt; returns the markers keyed by (id, revision)."""
        resolved: dict[tuple[str, int], str] = {}
        if tool == "knowledge_save_page":
            self.pages[receipt["id"]] = receipt["revision"]
            self.seen.pop(receipt["id"], None)  # its own revision: the number names it
            resolved[(receipt["id"], receipt["revision"])] = next(iter(markers.values()))
        elif tool == "knowledge_remember":
            claim = receipt["items"][0]
            resolved[(claim["id"], claim["revision"])] = next(iter(markers.values()))
            self.claims.append(claim["id"])
            replaced = params["items"][0].get("replaces")
            if replaced is not None:
                self.claims.remove(replaced)
        return resolved

    def write_once(self, connection: Connection, generation: int = 0) -> tuple[bool, dict[str, Any]]:
        """Send the request in flight (or the next one); raises EngineGone, leaving it in flight."""
        retried = self.in_flight is not None
        if self.in_flight is None:
            self.in_flight = self.next_write()
        tool, params, markers = self.in_flight
        ok, body = connection.tool(tool, params)
        if not ok and self.retry_unavailable and body.get("reason") == "store_unavailable":
            self.refusals += 1
            return ok, body
        self.in_flight = None
        if ok:
            self.acks.append(Ack(self.spec.name, tool, params, body, self._learn(tool, params, body, markers),
                                 generation, retried))
        else:
            self._learn_from_refusal(params, body)
            self.errors.append({"tool": tool, "requestId": params["requestId"], "params": params,
                                "markers": markers, **body})
        return ok, body

    def _learn_from_refusal(self, params: dict[str, Any], body: dict[str, Any]) -> None:
        """What a refusal says about the world (someone else edited, renamed or deleted a record)."""
        reason, subject = body.get("reason"), body.get("id")
        if reason == "stale_revision" and params.get("id") in self.pages and isinstance(body.get("revision"), int):
            self.pages[params["id"]] = body["revision"]
            if isinstance(body.get("sha256"), str):  # the version on disk now: the next revision is planned on it
                self.seen[params["id"]] = body["sha256"]
        elif reason == "not_found":
            for gone in {subject, body.get("name")} - {None}:
                self.pages.pop(gone, None)
                if gone in self.claims:
                    self.claims.remove(gone)
        elif reason == "conflict" and subject in self.claims and "already" in body.get("message", ""):
            self.claims.remove(subject)

    def retry_failed(self, connection: Connection) -> tuple[bool, dict[str, Any]]:
        """Send the last failed request again, with the same requestId."""
        failed = self.errors.pop()
        self.in_flight = (failed["tool"], failed["params"], failed["markers"])
        return self.write_once(connection)

    def run(self) -> None:
        wanted = 0  # the engine generation to connect to must be newer than this
        generation = 0
        connection: Connection | None = None
        while not self._halt.is_set():
            if connection is None:
                found = self.supervisor.wait_up(wanted)
                if found is None:
                    return
                port, generation = found
                try:
                    connection = Connection(port, self.spec.token, self.spec.audience, instance=self.spec.name)
                except (EngineGone, RuntimeError):
                    connection, wanted = None, generation  # this engine is going away: wait for the next
                    continue
            if self.max_writes is not None and self.in_flight is None and \
                    len(self.acks) + len(self.errors) >= self.max_writes:
                break
            try:
                self.write_once(connection, generation)
            except EngineGone:
                connection.close()
                connection, wanted = None, generation
                self.retries += 1
                continue
            if self.pause:
                time.sleep(self.pause)
        if connection is not None:
            connection.close()


# --- figures --------------------------------------------------------------------------------------


def machine_line() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0, 0, 0)
    return (f"{os.uname().machine}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
            f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start")


def print_table(rows: list[tuple[str, Any]]) -> None:
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def report(figures: dict[str, Any], problems: list[str]) -> int:
    """Print a harness's figures and problems; the exit status (1 when any promise was broken)."""
    print_table(sorted(figures.items()))
    for problem in problems:
        print("PROBLEM:", problem)
    return 1 if problems else 0
