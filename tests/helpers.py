"""Small helpers the tests share (fixtures live in conftest.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar
from unittest import mock

import yaml

from engine.access.authority import AgentCaller, OperatorCaller
from engine.state.statedir import StateDir
from engine.vault import frontmatter
from engine.vault.ontology import Ontology
from engine.vault.records import Record, check_record, parse_record

T = TypeVar("T")

def conversation(token: str, session_id: str, key: str = "chat:1") -> AgentCaller:
    return AgentCaller(token, {"kind": "conversation", "sessionKey": key, "sessionId": session_id})


def operator(agent: str = "main") -> OperatorCaller:
    return OperatorCaller(agent)


def page(request_id: str, title: str, type_: str = "person", body: str = "Body text.", **extra: Any) -> dict:
    return {"requestId": request_id, "type": type_, "title": title, "body": body, **extra}


def claim(text: str, excerpt: str, kind: str = "fact", **extra: Any) -> dict:
    return {"text": text, "claimKind": kind, "excerpt": excerpt, **extra}


def only_store(state: StateDir) -> Path:
    stores = [p for p in state.stores.iterdir() if not p.name.startswith(".")]
    assert len(stores) == 1, stores
    return stores[0]


def vault_snapshot(root: Path) -> dict[str, str]:
    """Every file under a directory (git internals excluded) with its sha256."""
    snapshot = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and ".git" not in path.relative_to(root).parts:
            snapshot[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return snapshot


def private_dir(state: StateDir) -> Path:
    return only_store(state) / "vault" / "private"


def temp_files_left(store: Path) -> list[Path]:
    """The temp files of atomic writes in a store: hidden ``*.tmp`` beside their targets anywhere in the vault,
    and any in its staging folder."""
    return sorted([*(store / "vault").rglob(".*.tmp"), *(store / "staging").glob("*.tmp")])


def lane_held(runtime: Any) -> tuple[threading.Event, threading.Thread]:
    """Hold a store's lane (as a long write would) until the returned event is set; join the thread after."""
    started, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=lambda: runtime.call(lambda: (started.set(), release.wait(30))))
    holder.start()
    assert started.wait(10)
    return release, holder


def queued_behind_held_lane(runtime: Any, targets: list[Callable[[], Any]], join_seconds: float) -> None:
    """Run each of ``targets`` on a thread of its own, queued on a store's held lane one after another (in that
    order), then let the lane go and join them."""
    release, holder = lane_held(runtime)
    threads: list[threading.Thread] = []
    try:
        for index, target in enumerate(targets):
            threads.append(threading.Thread(target=target))
            threads[-1].start()
            wait_for(lambda: len(runtime._queued) == index + 1)
    finally:
        release.set()
        holder.join()
        for thread in threads:
            thread.join(join_seconds)


def wait_for(predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.02) -> T:
    """Poll until ``predicate()`` is truthy (for the watcher and git threads); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)



@contextlib.contextmanager
def yaml_loader(kind: str) -> Iterator[None]:
    """Read with libyaml (the default here) or with PyYAML's pure-Python scanner (installs without libyaml)."""
    if kind == "libyaml":
        yield
        return
    with mock.patch.object(frontmatter, "_BaseLoader", yaml.SafeLoader), \
            mock.patch.object(frontmatter, "_Loader", frontmatter._strict_loader(yaml.SafeLoader)):
        yield


@contextlib.contextmanager
def catch_up_held(runtime: Any, monkeypatch: Any) -> Iterator[None]:
    """A search index catch-up on its own thread, held between tantivy's commit and the catalog's record of it
    while the block runs; nothing else catches up meanwhile (events, no timing)."""
    from engine.runtime import StoreRuntime
    from engine.store.index_ledger import IndexLedger

    monkeypatch.setattr(StoreRuntime, "_catch_up_indexes", lambda self, partitions: None)
    committed, go_on, failures = threading.Event(), threading.Event(), []
    record = IndexLedger.record

    def waiting(self: IndexLedger, *args: Any) -> None:
        committed.set()
        if not go_on.wait(120):
            failures.append("the test's block never finished while the catch-up waited")
        record(self, *args)

    monkeypatch.setattr(IndexLedger, "record", waiting)
    catching_up = threading.Thread(target=lambda: runtime.indexes.catch_up("private"))
    catching_up.start()
    try:
        assert committed.wait(120)
        yield
    finally:
        go_on.set()
        catching_up.join()
        monkeypatch.setattr(IndexLedger, "record", record)
    assert failures == []


@contextlib.contextmanager
def records_checked_as_read() -> Iterator[list[tuple[Any, Any, str]]]:
    """Each record a plan adds while the block runs: (the record asked for, the record checked, its path)."""
    from engine.store.writes import _PlanBuilder

    added: list[tuple[Any, Any, str]] = []
    add_record = _PlanBuilder.add_record

    def noted(builder: Any, frontmatter: dict, body: str, path: str, *, base: bytes | None,
              at: str | None = None) -> Any:
        checked = add_record(builder, frontmatter, body, path, base=base, at=at)
        added.append((Record(dict(frontmatter), body), checked, path))
        return checked

    with mock.patch.object(_PlanBuilder, "add_record", noted):
        yield added


def assert_checked_as_read(added: list[tuple[Any, Any, str]]) -> None:
    """The record a plan checked is its bytes' read, a copy of the record asked for: the same typed view (its
    frontmatter in the file's order) as parsing the bytes gives, and the same findings as the one asked for."""
    ontology = Ontology.shipped()
    assert added
    for asked, checked, path in added:
        data, read, copied = asked.render_and_copy()
        assert copied and checked.frontmatter == read.frontmatter, path
        assert list(checked.frontmatter) == list(read.frontmatter), path  # the file's order: the read, not the ask
        parsed, findings = parse_record(data, path)
        assert not findings and repr(checked.view) == repr(parsed.view) == repr(read.view), path
        assert check_record(checked, ontology, path) == check_record(asked, ontology, path), path
        for name in [field.name for field in dataclasses.fields(asked.view) if field.name not in ("raw", "extra")]:
            assert repr(getattr(checked.view, name)) == repr(getattr(asked.view, name)), (path, name)
        assert list(checked.view.extra.items()) == list(asked.view.extra.items())


def tool_answer(result: dict[str, Any]) -> dict[str, Any]:
    """A ``tools/call`` result's answer: its structured content, or for an error (which has none) the
    ``ToolError`` its text block holds as JSON."""
    if result["isError"]:
        assert "structuredContent" not in result, "an error result carries no structured content"
        return json.loads(result["content"][0]["text"])
    return result["structuredContent"]
