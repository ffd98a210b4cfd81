"""Authority matrix: every caller kind against every tool and host method, over the wire protocol.

For each pair the test asserts the exact outcome (served from the one partition the caller may reach,
or denied) and that the reply holds no id, title, alias or path of any other partition; and that no
read reply changes when only other partitions change (so no count of theirs shows through either).
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from engine.access.authority import AgentCaller
from engine.state.config import NamedStore
from engine.wire.protocol import Dispatcher, Session
from engine.wire.resources import RECORD_TEMPLATE, resource_uri
from tests.helpers import tool_answer

SESSION_1, SESSION_2 = str(uuid.uuid4()), str(uuid.uuid4())


def audience_of(kind: str) -> dict:
    conversation = {"kind": "conversation", "sessionId": SESSION_1}
    return {
        "owner": {"kind": "owner-private"},
        "chat": {**conversation, "sessionKey": "chat:plain"},
        "chat-read": {**conversation, "sessionKey": "chat:read"},
        "chat-save": {**conversation, "sessionKey": "chat:save"},
        "child-owner": {"kind": "child", "root": {"kind": "owner-private"}},
        "child-chat": {"kind": "child", "root": {**conversation, "sessionKey": "chat:plain"}},
        "sandboxed": {"kind": "owner-private", "sandboxed": True},
        "sandboxed-one": {"kind": "owner-private", "sandboxed": 1},
        "sandboxed-text": {"kind": "owner-private", "sandboxed": "true"},
        # Presenting the first conversation's session id without owning it: another member agent of the
        # shared store (with the same or its own session key), or the same agent under another session key.
        "member-same-key": {**conversation, "sessionKey": "chat:plain"},
        "member-own-key": {**conversation, "sessionKey": "helper:chat"},
        "owner-other-key": {**conversation, "sessionKey": "chat:other"},
    }[kind]


# caller -> (partition it reaches or None when denied, may it write)
EXPECTED = {
    "owner": ("private", True),
    "chat": ("chat1", True),
    "chat-read": ("private", False),
    "chat-save": ("private", True),
    "child-owner": ("private", True),
    "child-chat": ("chat1", True),
    "sandboxed": (None, False),
    "sandboxed-one": (None, False),
    "sandboxed-text": (None, False),
    "member-same-key": (None, False),
    "member-own-key": (None, False),
    "owner-other-key": (None, False),
    "non-owner": (None, False),
    "revoked": (None, False),
    "wrong-token": (None, False),
}

# A malformed audience is refused as bad input naming the field, never read as a default.
REFUSED_AS = {"sandboxed-one": "invalid_params", "sandboxed-text": "invalid_params"}


@pytest.fixture
def world(engine):
    """Four partitions, each with a recognisable page and claim; main and helper share the named store "team"."""
    main_token = engine.add_agent("main", owner=True)
    other_token = engine.add_agent("other", owner=True)
    helper_token = engine.add_agent("helper")
    engine.settings.save(engine.settings.current().with_stores({"team": NamedStore("team", "Team",
                                                                                   ("main", "helper"))}))
    revoked_token = engine.add_agent("gone", owner=True)
    engine.registry.set_grant("main", "chat:read", "read")
    engine.registry.set_grant("main", "chat:save", "read-and-save")
    seeds = {
        "private": (AgentCaller(main_token, {"kind": "owner-private"}), "Privatepagemarker"),
        "chat1": (AgentCaller(main_token, audience_of("chat")), "Chatonemarker"),
        "chat2": (AgentCaller(main_token, {"kind": "conversation", "sessionKey": "chat:two",
                                           "sessionId": SESSION_2}), "Chattwomarker"),
        "other": (AgentCaller(other_token, {"kind": "owner-private"}), "Otheragentmarker"),
    }
    markers: dict[str, set[str]] = {}
    for partition, (caller, word) in seeds.items():
        page = engine.save_page(caller, {"requestId": "seed", "type": "project", "title": f"{word} project",
                                         "aliases": [word.lower()], "body": f"{word} shared keyword body."})
        claim = engine.remember(caller, {"requestId": "seed-claim", "subject": page["id"], "items": [
            {"text": f"{word} shared keyword claim.", "claimKind": "decision", "excerpt": f"{word} excerpt"}]})
        markers[partition] = {word, page["id"], claim["items"][0]["id"]}
    engine.add_agent("gone-2")  # registry churn must not matter
    engine.remove_agent("gone")
    tokens = {"main": main_token, "other": other_token, "helper": helper_token, "revoked": revoked_token}
    return {"tokens": tokens, "markers": markers, "page_ids": {p: next(m for m in ms if m.startswith("pg_"))
                                                                 for p, ms in markers.items()},
            "store": engine.resolver.effective("main", create=False).store_id}


def session_for(dispatcher: Dispatcher, world: dict, kind: str) -> tuple[Session, dict]:
    """An initialized session (where the credential allows one) and the audience meta for requests; it may be
    sent notifications, as a socket's (so resources/subscribe is served)."""
    session = Session(can_push=True)
    token = {"non-owner": world["tokens"]["helper"], "revoked": world["tokens"]["revoked"],
             "member-same-key": world["tokens"]["helper"], "member-own-key": world["tokens"]["helper"],
             "wrong-token": "kd_" + "x" * 43}.get(kind, world["tokens"]["main"])
    audience = {"kind": "owner-private"} if kind in ("non-owner", "revoked", "wrong-token") else audience_of(kind)
    reply = dispatcher.handle(session, _message("initialize", {"_meta": {"knowledge": {
        "token": world["tokens"]["main"] if kind in ("revoked", "wrong-token") else token,
        "audience": {"kind": "owner-private"}}}}))
    assert "result" in reply, reply
    if kind in ("revoked", "wrong-token"):
        session.token = token  # as if initialized before the credential was revoked, or forged afterwards
    return session, {"_meta": {"knowledge": {"audience": audience}}}


def _message(method: str, params: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n"


def operations(world: dict) -> dict[str, tuple[str, dict, bool]]:
    """name -> (method, params, writes); read targets name the owner's private page."""
    private_page = world["page_ids"]["private"]
    private_uri = resource_uri(world["store"], private_page)
    tool = "tools/call"
    return {
        "grep": (tool, {"name": "knowledge_grep", "arguments": {"query": "shared keyword"}}, False),
        # One hit a page: the reply carries a cursor, which binds the index snapshot.
        "grep-page": (tool, {"name": "knowledge_grep", "arguments": {"query": "shared keyword", "limit": 1}}, False),
        "lookup": (tool, {"name": "knowledge_lookup", "arguments": {"name": "privatepagemarker"}}, False),
        "record": (tool, {"name": "knowledge_record", "arguments": {"id": private_page}}, False),
        "history": (tool, {"name": "knowledge_record", "arguments": {"id": private_page, "view": "history"}},
                    False),
        "ontology": (tool, {"name": "knowledge_ontology", "arguments": {"view": "definitions", "name": "project",
                                                                          "includeRecords": True}}, False),
        "save_page": (tool, {"name": "knowledge_save_page", "arguments": {
            "requestId": "m-page", "type": "note", "title": "Matrix note"}}, True),
        "remember": (tool, {"name": "knowledge_remember", "arguments": {"requestId": "m-claim", "items": [
            {"text": "Matrix claim.", "claimKind": "fact", "excerpt": "matrix"}]}}, True),
        "attach": (tool, {"name": "knowledge_attach", "arguments": {
            "requestId": "m-attach", "content": base64.b64encode(b"matrix").decode()}}, True),
        "recall": (tool, {"name": "knowledge_recall", "arguments": {"id": private_page,
                                                                     "recall": {"summary": "Matrix."}}}, True),
        "resume": (tool, {"name": "knowledge_resume", "arguments": {}}, True),
        "search": ("memory/search", {"query": "shared keyword"}, False),
        "status": ("memory/status", {}, False),
        "health": ("memory/health", {}, False),
        "prompt": ("memory/prompt", {}, False),
        "index": ("memory/index", {"firstMessageAt": "2999-01-01T00:00:00Z"}, False),
        "candidates": ("memory/recallCandidates", {"mode": "trigger"}, False),
        "flush": ("memory/flushPlan", {}, False),
        # MCP resources, prompts and completions (engine/wire/mcp_features.py).
        "resources": ("resources/list", {}, False),
        "templates": ("resources/templates/list", {}, False),
        "resource": ("resources/read", {"uri": private_uri}, False),
        "revision": ("resources/read", {"uri": private_uri + "/revision/1"}, False),
        "subscribe": ("resources/subscribe", {"uri": private_uri}, False),
        "unsubscribe": ("resources/unsubscribe", {"uri": private_uri}, False),
        "prompts": ("prompts/list", {}, False),
        "memory-prompt": ("prompts/get", {"name": "knowledge_memory", "arguments": {"projectKey": "matrix"}}, False),
        "index-prompt": ("prompts/get", {"name": "knowledge_index",
                                         "arguments": {"firstMessageAt": "2999-01-01T00:00:00Z"}}, False),
        "complete": ("completion/complete", {"ref": {"type": "ref/resource", "uri": RECORD_TEMPLATE},
                                             "argument": {"name": "record", "value": ""}}, False),
        "complete-key": ("completion/complete", {"ref": {"type": "ref/prompt", "name": "knowledge_memory"},
                                                 "argument": {"name": "projectKey", "value": ""}}, False),
    }


def outcome(reply: dict) -> tuple[str, dict]:
    """('ok', result) or ('error', {reason, ...})."""
    if "error" in reply:
        return "error", reply["error"]["data"]
    result = reply["result"]
    if result.get("isError"):
        return "error", tool_answer(result)
    return "ok", result.get("structuredContent", result)


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_every_caller_kind_against_every_tool_and_method(engine, world, kind):
    dispatcher = Dispatcher(engine)
    reach, may_write = EXPECTED[kind]
    session, meta = session_for(dispatcher, world, kind)
    foreign = set().union(*(markers for partition, markers in world["markers"].items() if partition != reach))
    for name, (method, params, writes) in operations(world).items():
        reply = dispatcher.handle(session, _message(method, {**params, **meta}))
        text, asked = json.dumps(reply).casefold(), json.dumps(params).casefold()
        # Echoing back an id the caller itself sent reveals nothing; anything else foreign is a leak.
        # Case-folded, so a file path (slugs are lower case) or an alias counts as much as a title.
        leaked = sorted(marker for marker in foreign if marker.casefold() in text and marker.casefold() not in asked)
        assert not leaked, f"{kind} / {name} leaked {leaked}"
        status, body = outcome(reply)
        if reach is None:
            if name == "index":  # the index is omitted, never an error, for callers without one
                assert status == "ok" and body["text"] is None, (kind, name, body)
            else:
                assert status == "error" and body["reason"] == REFUSED_AS.get(kind, "denied"), (kind, name, body)
            continue
        if writes and not may_write:
            assert status == "error" and body["reason"] == "denied", (kind, name, body)
            continue
        if name == "recall" and kind in ("chat", "child-chat", "child-owner"):
            # Only an owner-private audience or a read-and-save grant approves recall (children do not).
            assert status == "error" and body["reason"] in ("denied", "not_found"), (kind, name, body)
            continue
        if name in ("record", "history", "recall", "resource", "revision", "subscribe") and reach != "private":
            # The owner's page id means nothing in another partition.
            assert status == "error" and body["reason"] == "not_found", (kind, name, body)
            continue
        assert status == "ok", (kind, name, body)
        if name in ("grep", "grep-page", "search"):
            titles = {hit["title"] for hit in body["hits"]}
            wanted = next(m for m in world["markers"][reach] if not m.startswith(("pg_", "cl_")))
            assert titles and all(wanted in title for title in titles), (kind, titles)
            assert (name == "grep-page") == ("nextCursor" in body), (kind, name, body)
        seed_page = world["page_ids"][reach]
        if name == "resources":  # the partition's records, its seeded page among them
            assert seed_page in {entry["name"] for entry in body["resources"]}, (kind, body)
        if name == "complete":
            assert seed_page in body["completion"]["values"], (kind, body)
        if name == "complete-key":  # its own project page's title and alias
            word = next(m for m in world["markers"][reach] if not m.startswith(("pg_", "cl_")))
            assert body["completion"]["values"] == [f"{word} project", word.lower()], (kind, body)
        if name in ("resource", "revision"):
            assert body["contents"][0]["text"].startswith("---\n"), (kind, body)


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_every_caller_kind_listening_for_changes(engine, world, kind):
    """``subscriptions/listen`` (MCP 2026-07-28's only method beside the 2025 ones): what each caller kind is
    honoured, its own partition's resource only, and nothing for a refused one."""
    dispatcher = Dispatcher(engine)
    reach, _ = EXPECTED[kind]
    session, meta = session_for(dispatcher, world, kind)
    session.era, session.protocol_version = "2026-07-28", "2026-07-28"  # as knowledge/authenticate leaves it
    private_uri = resource_uri(world["store"], world["page_ids"]["private"])
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
    params = {"notifications": {"toolsListChanged": True, "resourcesListChanged": True,
                                "resourceSubscriptions": [private_uri]},
              "_meta": {**meta["_meta"], **envelope}}
    reply = dispatcher.handle(session, _message("subscriptions/listen", params))
    foreign = set().union(*(markers for partition, markers in world["markers"].items() if partition != reach))
    text = json.dumps(reply).casefold()
    assert not [marker for marker in foreign if marker.casefold() in text and marker.casefold() not in
                private_uri.casefold()], (kind, reply)
    if reach is None:
        assert reply["error"]["data"]["reason"] == REFUSED_AS.get(kind, "denied"), (kind, reply)
        assert session.listen is None and not engine.changes.watched
        return
    honoured = reply["params"]["notifications"]
    assert honoured == {"toolsListChanged": True, "resourcesListChanged": True,
                        **({"resourceSubscriptions": [private_uri]} if reach == "private" else {})}, (kind, reply)
    dispatcher.end_listen(session)
    assert not engine.changes.watched


def test_no_reply_depends_on_another_partitions_contents(engine, world):
    """Non-interference: after one partition gains records, every read, every knowledge_resume and every
    denial of every caller kind that cannot reach it is byte for byte the same, so no reply carries its counts,
    sizes, index, journal, outbox or git state."""
    dispatcher = Dispatcher(engine)
    sessions = {kind: session_for(dispatcher, world, kind) for kind in EXPECTED}
    # Every read, and knowledge_resume: it writes nothing of its own but reports git state.
    reads = {name: (method, params) for name, (method, params, writes) in operations(world).items()
             if not writes or name == "resume"}

    def replies(kinds: list[str]) -> dict[tuple[str, str], dict]:
        return {(kind, name): dispatcher.handle(sessions[kind][0], _message(method, {**params, **sessions[kind][1]}))
                for kind in kinds for name, (method, params) in reads.items()}

    def settled() -> None:
        """Every write so far checkpointed and in the search index: knowledge_resume reports what git committed
        of the caller's partition, and a grep answered beside uncommitted records (the overlay) may order exact
        ties and round its cursor's figures otherwise than the committed index; the git and index threads
        commit a burst a moment after it (engine/runtime.py), not at once."""
        for record in engine.registry.stores():
            runtime = engine.runtime(record)
            runtime.checkpoint()
            runtime.call(lambda: [runtime.indexes.catch_up(name) for name in runtime.store.partitions()])

    settled()
    for partition, caller in _seed_callers(world).items():
        blind = [kind for kind, (reach, _) in EXPECTED.items() if reach != partition]
        settled()  # the writes of the partition before this one
        before = replies(blind)
        page = engine.save_page(caller, {"requestId": "more", "type": "project", "title": "Added project",
                                         "body": "shared keyword body, added later."})
        engine.remember(caller, {"requestId": "more-claim", "subject": page["id"], "items": [
            {"text": "Added shared keyword claim.", "claimKind": "decision", "excerpt": "added excerpt"}]})
        engine.save_page(caller, {"requestId": "more-2", "type": "note", "title": "Added note", "body": "note"})
        after = replies(blind)
        changed = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
        assert not changed, f"records added to {partition} changed these replies: {changed}"


def _seed_callers(world: dict) -> dict[str, AgentCaller]:
    """A writer for each partition of the world."""
    main = world["tokens"]["main"]
    return {
        "private": AgentCaller(main, {"kind": "owner-private"}),
        "chat1": AgentCaller(main, audience_of("chat")),
        "chat2": AgentCaller(main, {"kind": "conversation", "sessionKey": "chat:two", "sessionId": SESSION_2}),
        "other": AgentCaller(world["tokens"]["other"], {"kind": "owner-private"}),
    }


def test_operator_reads_only_the_chosen_agents_private_partition(engine, world):
    from engine.access.authority import OperatorCaller

    found = engine.search(OperatorCaller("main"), {"query": "shared keyword"})
    assert {hit["title"] for hit in found["hits"]} == {"Privatepagemarker project",
                                                       "Privatepagemarker shared keyword claim."}
    text = json.dumps(found)
    assert not any(marker in text for p, ms in world["markers"].items() if p != "private" for marker in ms)


# --- the operator methods `knowledge serve` adds (engine/importers/methods.py): the operator's alone ---------


def importer_operations(tmp_path) -> dict[str, tuple[str, dict]]:
    notes = tmp_path / "notes"
    notes.mkdir(exist_ok=True)
    (notes / "Matrix.md").write_text("Matrixnote body.\n", encoding="utf-8")
    return {"export": ("operator/export", {"out": str(tmp_path / "matrix.zip")}),
            "start-export": ("operator/startExport", {"out": str(tmp_path / "matrix-job.zip")}),
            "import": ("operator/import", {"format": "markdown", "path": str(notes)}),
            "dry-run": ("operator/import", {"format": "markdown", "path": str(notes), "dryRun": True})}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_no_agent_caller_may_export_or_import(engine, world, kind, tmp_path):
    from engine.importers.methods import register

    dispatcher = Dispatcher(engine)
    register(dispatcher, engine)
    session, meta = session_for(dispatcher, world, kind)
    for name, (method, params) in importer_operations(tmp_path).items():
        reply = dispatcher.handle(session, _message(method, {**params, **meta}))
        assert reply["error"]["data"]["reason"] == "denied", (kind, name, reply)
    assert not (tmp_path / "matrix.zip").exists() and not (tmp_path / "matrix-job.zip").exists()
    assert engine.jobs.list() == []
    found = engine.search(_owner_reader(world), {"query": "Matrixnote"})["hits"]
    assert found == []


def test_the_operator_may_export_and_import(engine, world, tmp_path):
    from engine.importers.methods import register
    from engine.operator.token_file import ensure_operator_token, read_operator_token

    dispatcher = Dispatcher(engine)
    register(dispatcher, engine)
    ensure_operator_token(engine.state)
    session = Session()
    dispatcher.handle(session, _message("initialize", {"_meta": {"knowledge": {
        "operatorToken": read_operator_token(engine.state)}}}))
    assert session.operator
    operations = importer_operations(tmp_path)
    exported = dispatcher.handle(session, _message(*operations["export"]))
    assert "result" in exported and (tmp_path / "matrix.zip").is_file(), exported
    for name in ("start-export", "dry-run", "import"):
        job = dispatcher.handle(session, _message(*operations[name]))["result"]
        assert engine.jobs.wait(job["id"], 30)["state"] == "done", name
    assert (tmp_path / "matrix-job.zip").is_file()
    found = engine.search(_owner_reader(world), {"query": "Matrixnote"})["hits"]
    assert [hit["title"] for hit in found] == ["Matrix"]


def _owner_reader(world: dict) -> AgentCaller:
    return AgentCaller(world["tokens"]["main"], {"kind": "owner-private"})
