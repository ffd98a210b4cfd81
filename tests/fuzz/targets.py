"""Fuzz targets: each takes raw bytes and must only ever fail with the engine's own errors.

Shared by the coverage-guided fuzzer (``python -m tests.fuzz.run``) and by the replay of
checked-in regression inputs in CI (tests/engine/test_fuzz_regressions.py).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from engine.index.analysis import Analyzer
from engine.access.authority import AgentCaller
from engine.core.errors import KnowledgeError
from engine.vault.frontmatter import parse_document
from engine.vault.ontology import Ontology
from engine.wire.protocol import ERROR_CODES, Dispatcher, Session
from engine.vault.records import check_record, parse_record
from engine.search.keyword import parse_query_text
from engine.service import Engine
from engine.state.statedir import StateDir

REASONS = set(ERROR_CODES)


class UnexpectedFailure(AssertionError):
    """What a fuzzer reports as a crash."""


def record_parser(data: bytes) -> None:
    try:
        parse_document(data)
    except KnowledgeError:
        pass
    record, findings = parse_record(data, "pages/fuzz.md")
    if record is not None:
        check_record(record, _ontology(), "pages/fuzz.md")


def ontology_loader(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    try:
        Ontology.from_text(text, "fuzz")
    except KnowledgeError:
        pass
    _ontology().extended(text, "vault/ontology.yaml")  # must never raise: problems become findings


def query_builder(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    try:
        parse_query_text(text)
    except KnowledgeError:
        return
    _analyzer().query_terms(text)


def socket_messages(data: bytes) -> None:
    world = _world()
    if Dispatcher.answers_at_once(data):  # the event loop answers these itself: only ever a ping
        reply = world["dispatcher"].handle(Session(), data)
        if reply is not None and reply.get("result") != {} and "error" not in reply:
            raise UnexpectedFailure(f"answered on the event loop with {reply!r}")
    for session in (Session(), world["session"]):
        reply = world["dispatcher"].handle(session, data)
        if reply is None:
            continue
        if reply.get("jsonrpc") != "2.0":
            raise UnexpectedFailure(f"not a JSON-RPC reply: {reply!r}")
        error = reply.get("error")
        if error is not None and error.get("data", {}).get("reason") not in REASONS:
            raise UnexpectedFailure(f"unexpected error reason: {error!r}")
        try:  # a reply must be sendable as written: no lone surrogate echoed back from the message
            json.dumps(reply, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UnexpectedFailure(f"the reply cannot be encoded: {exc}") from exc


TARGETS: dict[str, Callable[[bytes], None]] = {
    "record": record_parser,
    "ontology": ontology_loader,
    "query": query_builder,
    "socket": socket_messages,
}

_cache: dict[str, object] = {}


def _ontology() -> Ontology:
    if "ontology" not in _cache:
        _cache["ontology"] = Ontology.shipped()
    return _cache["ontology"]  # type: ignore[return-value]


def _analyzer() -> Analyzer:
    if "analyzer" not in _cache:
        _cache["analyzer"] = Analyzer()
    return _cache["analyzer"]  # type: ignore[return-value]


def _world() -> dict:
    """An engine with one agent and a little knowledge, made once per process."""
    if "world" not in _cache:
        root = Path(tempfile.mkdtemp(prefix="knowledge-fuzz-"))
        engine = Engine(StateDir(root / "state"), watch=False, git=False)
        token = engine.add_agent("main", owner=True)
        engine.save_page(AgentCaller(token, {"kind": "owner-private"}),
                         {"requestId": "seed", "type": "note", "title": "Harbour", "body": "Ferries at dawn."})
        dispatcher = Dispatcher(engine)
        session = Session()
        dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"}}}}}).encode())
        _cache["world"] = {"engine": engine, "dispatcher": dispatcher, "session": session, "root": root}
    return _cache["world"]  # type: ignore[return-value]


def close() -> None:
    world = _cache.pop("world", None)
    if world is not None:
        world["engine"].close()  # type: ignore[index]
        shutil.rmtree(world["root"], ignore_errors=True)  # type: ignore[index]
