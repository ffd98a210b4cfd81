"""Operator access on the socket: the token file, the operator/* methods, and that knowledge stays read-only."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest

from engine.access.authority import AgentCaller, PreviewCaller
from engine.importers.demo import seed_demo
from engine.operator.gate_operator import handlers as gate_handlers
from engine.operator.methods import PREFIX, OperatorMethods
from engine.operator.token_file import TOKEN_PREFIX, ensure_operator_token, read_operator_token
from engine.wire.protocol import Dispatcher, Session
from engine.wire.server import EngineServer
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.helpers import only_store, page, vault_snapshot


def message(method: str, params: dict | None = None, request_id: int | None = 1) -> bytes:
    body = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        body["id"] = request_id
    return json.dumps(body).encode() + b"\n"


def operator_init(token: str) -> dict:
    return {"protocolVersion": "2025-11-25", "_meta": {"knowledge": {"operatorToken": token}}}


@pytest.fixture
def demo(engine: Engine) -> dict:
    return seed_demo(engine)


@pytest.fixture
def dispatcher(engine: Engine) -> Dispatcher:
    return Dispatcher(engine)


@pytest.fixture
def operator_session(engine: Engine, dispatcher: Dispatcher) -> Session:
    ensure_operator_token(engine.state)
    session = Session()
    reply = dispatcher.handle(session, message("initialize", operator_init(read_operator_token(engine.state))))
    assert reply["result"]["operator"] is True
    return session


def call(dispatcher: Dispatcher, session: Session, method: str, params: dict | None = None) -> dict:
    return dispatcher.handle(session, message(method, params))


def ok(dispatcher: Dispatcher, session: Session, method: str, params: dict | None = None) -> dict:
    reply = call(dispatcher, session, method, params)
    assert "result" in reply, reply
    return reply["result"]


def reason(reply: dict) -> str:
    return reply["error"]["data"]["reason"]


# --- the token file --------------------------------------------------------------------------


def test_the_token_file_is_created_once_readable_by_the_owner_only(state_dir: StateDir) -> None:
    path = ensure_operator_token(state_dir)
    token = read_operator_token(state_dir)

    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert token.startswith(TOKEN_PREFIX) and len(token) > 40
    ensure_operator_token(state_dir)
    assert read_operator_token(state_dir) == token


def test_the_serving_engine_creates_the_token_on_start(engine: Engine) -> None:
    assert not engine.state.operator_token.exists()
    server = EngineServer(engine, port=0)
    server.start()
    try:
        assert stat.S_IMODE(os.stat(engine.state.operator_token).st_mode) == 0o600
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            client.sendall(message("initialize", operator_init(read_operator_token(engine.state))))
            client.sendall(message("operator/inventory", request_id=2))
            replies = client.makefile("rb")
            assert json.loads(replies.readline())["result"]["operator"] is True
            assert json.loads(replies.readline())["result"]["agents"] == []
    finally:
        server.stop()


@pytest.mark.parametrize("presented", [None, "", "kdo_wrong", 42])
def test_a_missing_or_wrong_operator_token_is_denied(engine, dispatcher, presented) -> None:
    ensure_operator_token(engine.state)
    session = Session()
    meta = {} if presented is None else {"operatorToken": presented}
    reply = call(dispatcher, session, "initialize", {"_meta": {"knowledge": meta}})

    assert reason(reply) == "denied"
    assert not session.operator
    assert reason(call(dispatcher, session, "operator/inventory")) == "denied"


def test_an_operator_token_open_to_other_accounts_is_refused(engine, dispatcher) -> None:
    path = ensure_operator_token(engine.state)
    token = read_operator_token(engine.state)
    os.chmod(path, 0o644)

    reply = call(dispatcher, Session(), "initialize", operator_init(token))

    assert reason(reply) == "denied"
    assert "chmod 600" in reply["error"]["message"]


def test_a_missing_token_file_or_a_symlink_is_refused(engine, dispatcher, tmp_path: Path) -> None:
    reply = call(dispatcher, Session(), "initialize", operator_init("kdo_anything"))
    assert reason(reply) == "denied" and "missing" in reply["error"]["message"]

    elsewhere = tmp_path / "elsewhere.token"
    elsewhere.write_text("kdo_planted\n", encoding="utf-8")
    os.chmod(elsewhere, 0o600)
    engine.state.operator_token.symlink_to(elsewhere)
    assert reason(call(dispatcher, Session(), "initialize", operator_init("kdo_planted"))) == "denied"


def test_a_replaced_token_file_applies_at_the_next_initialize(engine, dispatcher) -> None:
    path = ensure_operator_token(engine.state)
    old = read_operator_token(engine.state)
    path.unlink()
    ensure_operator_token(engine.state)

    assert reason(call(dispatcher, Session(), "initialize", operator_init(old))) == "denied"
    assert "result" in call(dispatcher, Session(), "initialize", operator_init(read_operator_token(engine.state)))


# --- sessions are either operator or agent, never both ---------------------------------------


def test_an_operator_session_calls_operator_methods_only(dispatcher, operator_session, demo) -> None:
    assert ok(dispatcher, operator_session, "ping") == {}
    for method, params in [("tools/list", {}), ("memory/search", {"query": "Dana"}), ("memory/prompt", {}),
                           ("tools/call", {"name": "knowledge_grep", "arguments": {"query": "Dana"}})]:
        assert reason(call(dispatcher, operator_session, method, params)) == "denied", method
    assert reason(call(dispatcher, operator_session, "initialize", operator_init("kdo_x"))) == "invalid_params"


def test_an_agent_session_cannot_call_operator_methods(engine, dispatcher) -> None:
    token = engine.add_agent("main", owner=True)
    session = Session()
    call(dispatcher, session, "initialize", {"_meta": {"knowledge": {"token": token,
                                                                     "audience": {"kind": "owner-private"}}}})
    assert session.token == token
    for name in ("inventory", "records", "setSettings", "connections", "agentConfig"):
        assert reason(call(dispatcher, session, PREFIX + name, {"agent": "main"})) == "denied"


# --- owner administration --------------------------------------------------------------------


def test_inventory_lists_agents_stores_and_settings(dispatcher, operator_session, demo) -> None:
    result = ok(dispatcher, operator_session, "operator/inventory")

    assert [agent["name"] for agent in result["agents"]] == ["main"]
    assert result["agents"][0]["store"]["status"] == "ok"
    assert len(result["stores"]) == 1 and result["stores"][0]["kind"] == "isolated"
    assert result["settings"] == {"writesEnabled": True, "knowledgeRuntimeEnabled": False, "workspaceRoots": [],
                                  "problem": None}


def test_add_agent_returns_its_token_once_and_a_working_mcp_config(engine, dispatcher, operator_session) -> None:
    result = ok(dispatcher, operator_session, "operator/addAgent", {"name": "helper"})

    assert engine.registry.authenticate(result["token"]).name == "helper"
    assert Path(result["tokenFile"]).read_text(encoding="utf-8").strip() == result["token"]
    assert stat.S_IMODE(os.stat(result["tokenFile"]).st_mode) == 0o600
    server = result["mcpConfig"]["mcpServers"]["knowledge"]  # helper has no owner authority: its own conversation
    args = server["args"]
    assert args[:5] == ["mcp", "--agent", "helper", "--token-file", result["tokenFile"]]
    assert args[args.index("--audience") + 1] == "conversation" and args[-2:] == ["--state-dir", str(engine.state.root)]
    assert result["audience"]["kind"] == "conversation" and result["audience"]["sessionKey"] in args
    owner = ok(dispatcher, operator_session, "operator/addAgent", {"name": "lead", "owner": True})
    assert "--audience" not in owner["mcpConfig"]["mcpServers"]["knowledge"]["args"]
    assert owner["audience"] == {"kind": "owner-private"}
    assert "helper" in [agent["name"] for agent in result["agents"]]
    assert reason(call(dispatcher, operator_session, "operator/addAgent", {"name": "helper"})) == "conflict"
    assert reason(call(dispatcher, operator_session, "operator/addAgent", {"name": "Bad Name"})) == "invalid_params"


def test_the_sharing_actions_follow_the_spec(engine, dispatcher, operator_session, demo) -> None:
    ok(dispatcher, operator_session, "operator/addAgent", {"name": "helper"})
    store_id = engine.stores()[0]["storeId"]

    shared = ok(dispatcher, operator_session, "operator/shareStore",
                {"agent": "main", "name": "team", "label": "Team", "others": ["helper"]})
    team = [store for store in shared["stores"] if store.get("name") == "team"]
    assert team[0]["storeId"] == store_id and team[0]["agents"] == ["main", "helper"]  # renamed, not copied

    own = ok(dispatcher, operator_session, "operator/useOwnStore", {"agent": "helper"})
    helper = next(agent for agent in own["agents"] if agent["name"] == "helper")
    assert helper["store"]["status"] == "not created"  # a new empty store, created on first use

    joined = ok(dispatcher, operator_session, "operator/useSharedStore", {"agent": "helper", "name": "team"})
    helper = next(agent for agent in joined["agents"] if agent["name"] == "helper")
    assert helper["store"]["storeId"] == store_id
    assert reason(call(dispatcher, operator_session, "operator/useSharedStore",
                       {"agent": "helper", "name": "nowhere"})) == "not_found"
    assert reason(call(dispatcher, operator_session, "operator/shareStore",
                       {"agent": "main", "name": "x", "others": "helper"})) == "invalid_params"


def test_settings_edit_writes_enabled_only(engine, dispatcher, operator_session) -> None:
    result = ok(dispatcher, operator_session, "operator/setSettings", {"writesEnabled": False})

    assert result["settings"]["writesEnabled"] is False
    assert engine.settings.current().writes_enabled is False
    assert reason(call(dispatcher, operator_session, "operator/setSettings", {"writesEnabled": "no"})) \
        == "invalid_params"
    assert reason(call(dispatcher, operator_session, "operator/setSettings", {"recallGate": {}})) \
        == "invalid_params"


def test_settings_switch_search_knowledge_and_keep_the_rest_of_config(engine, dispatcher, operator_session) -> None:
    engine.settings.save(engine.settings.current().with_knowledge_runtime(False))
    before = json.loads(engine.state.config.read_text(encoding="utf-8"))

    result = ok(dispatcher, operator_session, "operator/setSettings", {"knowledgeRuntimeEnabled": True})

    assert result["settings"]["knowledgeRuntimeEnabled"] is True and result["settings"]["writesEnabled"] is True
    assert engine.settings.current().knowledge_runtime_enabled is True
    after = json.loads(engine.state.config.read_text(encoding="utf-8"))
    assert after == {**before, "knowledgeRuntimeEnabled": True}
    assert reason(call(dispatcher, operator_session, "operator/setSettings", {})) == "invalid_params"
    assert reason(call(dispatcher, operator_session, "operator/setSettings", {"knowledgeRuntimeEnabled": 1})) \
        == "invalid_params"
    assert engine.settings.current().knowledge_runtime_enabled is True


def test_settings_set_workspace_roots_checked_by_the_engine(engine, dispatcher, operator_session, tmp_path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    engine.settings.save(engine.settings.current().with_knowledge_runtime(True))
    before = json.loads(engine.state.config.read_text(encoding="utf-8"))

    result = ok(dispatcher, operator_session, "operator/setSettings", {"workspaceRoots": [str(tmp_path / "work") + "/"]})

    assert result["settings"]["workspaceRoots"] == [str(tmp_path / "work")]
    assert engine.settings.current().workspace_roots == (str(tmp_path / "work"),)
    after = json.loads(engine.state.config.read_text(encoding="utf-8"))
    assert after == {**before, "attachments": {"workspaceRoots": [str(tmp_path / "work")]}}
    for bad, why in [("relative/dir", "absolute path"), ("/", "absolute path"), (str(tmp_path / "work/../x"), "'..'"),
                     (str(tmp_path / "missing"), "is not a directory"), (str(tmp_path / "notes.txt"), "is not a directory")]:
        reply = call(dispatcher, operator_session, "operator/setSettings",
                     {"workspaceRoots": [str(tmp_path / "work"), bad], "writesEnabled": False})
        assert reason(reply) == "invalid_params" and why in reply["error"]["message"], (bad, reply)
        assert reply["error"]["data"]["field"] == "workspaceRoots" and reply["error"]["data"]["index"] == 1
    assert reason(call(dispatcher, operator_session, "operator/setSettings", {"workspaceRoots": "/tmp"})) \
        == "invalid_params"
    assert reason(call(dispatcher, operator_session, "operator/setSettings",
                       {"workspaceRoots": [str(tmp_path / "work")] * 33})) == "limit_exceeded"
    assert json.loads(engine.state.config.read_text(encoding="utf-8")) == after  # nothing changed by a refusal
    assert engine.settings.current().writes_enabled is True

    cleared = ok(dispatcher, operator_session, "operator/setSettings", {"workspaceRoots": []})
    assert cleared["settings"]["workspaceRoots"] == [] and "attachments" not in json.loads(
        engine.state.config.read_text(encoding="utf-8"))


def test_recent_connections_list_agents_and_instances_seen(engine, dispatcher, operator_session) -> None:
    token = engine.add_agent("main", owner=True)
    assert ok(dispatcher, operator_session, "operator/connections") == {"connections": [], "limit": 100}
    agent = Session()
    assert "result" in call(dispatcher, agent, "initialize", {
        "clientInfo": {"name": "claude-code", "version": "2.1"},
        "_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"}, "instance": "laptop-main"}}})
    ok(dispatcher, agent, "ping")
    refused = Session()
    call(dispatcher, refused, "initialize", {"_meta": {"knowledge": {"token": "kd_wrong",
                                                                     "audience": {"kind": "owner-private"}}}})

    listed = ok(dispatcher, operator_session, "operator/connections")["connections"]

    assert len(listed) == 1  # a refused initialize is nobody
    seen = listed[0]
    assert {key: seen[key] for key in ("agent", "instance", "audience", "client", "connections", "open")} == {
        "agent": "main", "instance": "laptop-main", "audience": "owner-private", "client": "claude-code 2.1",
        "connections": 1, "open": 1}
    assert seen["firstSeen"] <= seen["lastSeen"] and token not in json.dumps(listed)
    assert reason(call(dispatcher, operator_session, "operator/connections", {"agent": "main"})) == "invalid_params"
    assert reason(call(dispatcher, agent, "operator/connections")) == "denied"


def test_agent_config_is_what_the_cli_prints_for_the_agent_as_registered(engine, dispatcher, operator_session):
    engine.add_agent("main", owner=True)
    engine.add_agent("guest")
    owner = ok(dispatcher, operator_session, "operator/agentConfig", {"agent": "main", "client": "vscode",
                                                                      "instance": "desk-main"})
    assert owner["audience"] == {"kind": "owner-private"} and "grantCommand" not in owner
    server = json.loads(owner["config"])["servers"]["knowledge"]
    assert server["type"] == "stdio" and server["args"][:4] == ["mcp", "--agent", "main", "--token-file"]
    assert "--audience" not in server["args"] and "desk-main" in server["args"]

    guest = ok(dispatcher, operator_session, "operator/agentConfig", {"agent": "guest", "client": "cursor"})
    args = json.loads(guest["config"])["mcpServers"]["knowledge"]["args"]
    assert guest["audience"]["kind"] == "conversation" and args[args.index("--audience") + 1] == "conversation"
    assert guest["grantCommand"].startswith("knowledge grants add guest ")
    assert guest["audience"]["sessionKey"] == guest["instance"]

    for params, expected in [({"agent": "nobody"}, "not_found"), ({"agent": "main", "client": "emacs"}, "invalid_params"),
                             ({"agent": "main", "sessionKey": "k"}, "invalid_params"),
                             ({"agent": "guest", "instance": "a\nb"}, "invalid_params"), ({}, "invalid_params")]:
        assert reason(call(dispatcher, operator_session, "operator/agentConfig", params)) == expected, params


def test_agents_and_grants_are_administered_by_the_engine(engine, dispatcher, operator_session) -> None:
    added = ok(dispatcher, operator_session, "operator/addAgent", {"name": "reader", "scopes": ["memory:read"]})
    assert engine.registry.agent("reader").scopes == ("memory:read",)
    assert reason(call(dispatcher, operator_session, "operator/addAgent",
                       {"name": "other", "scopes": ["memory:everything"]})) == "invalid_params"

    grant = ok(dispatcher, operator_session, "operator/setGrant", {"agent": "reader", "sessionKey": "chat-1"})["grant"]
    assert (grant["agent"], grant["sessionKey"], grant["access"]) == ("reader", "chat-1", "read")
    assert grant["conversations"] == []  # no conversation bound under that key yet (operator/partitions)
    listed = {key: grant[key] for key in ("agent", "sessionKey", "access", "createdAt")}
    assert ok(dispatcher, operator_session, "operator/grants", {"agent": "reader"})["grants"] == [listed]
    assert reason(call(dispatcher, operator_session, "operator/setGrant",
                       {"agent": "reader", "sessionKey": "chat-1", "access": "write"})) == "invalid_params"
    assert reason(call(dispatcher, operator_session, "operator/setGrant",
                       {"agent": "nobody", "sessionKey": "chat-1"})) == "not_found"
    ok(dispatcher, operator_session, "operator/removeGrant", {"agent": "reader", "sessionKey": "chat-1"})
    assert engine.registry.grants("reader") == []
    assert reason(call(dispatcher, operator_session, "operator/removeGrant",
                       {"agent": "reader", "sessionKey": "chat-1"})) == "not_found"

    ok(dispatcher, operator_session, "operator/removeAgent", {"name": "reader"})
    assert engine.registry.authenticate(added["token"]) is None
    assert not Path(added["tokenFile"]).exists()
    assert reason(call(dispatcher, operator_session, "operator/removeAgent", {"name": "reader"})) == "not_found"


# --- browsing ---------------------------------------------------------------------------------


def test_records_are_paged_and_filtered(dispatcher, operator_session, demo) -> None:
    first = ok(dispatcher, operator_session, "operator/records", {"agent": "main", "limit": 5})
    rest = ok(dispatcher, operator_session, "operator/records",
              {"agent": "main", "offset": first["nextOffset"], "limit": 500})

    ids = [record["id"] for record in first["records"] + rest["records"]]
    assert len(first["records"]) == 5 and first["total"] == len(ids) == len(set(ids))
    assert "nextOffset" not in rest
    updated = [record["updatedAt"] for record in first["records"] + rest["records"]]
    assert updated == sorted(updated, reverse=True)

    people = ok(dispatcher, operator_session, "operator/records",
                {"agent": "main", "kind": "page", "type": "person", "order": "title"})
    assert [record["title"] for record in people["records"]] == ["Dana Whitaker", "Ravi Menon"]
    everything = ok(dispatcher, operator_session, "operator/records", {"agent": "main", "status": "all"})
    assert "superseded" in {record["status"] for record in everything["records"]}
    assert reason(call(dispatcher, operator_session, "operator/records", {"agent": "main", "limit": 0})) \
        == "invalid_params"


def test_records_tagged_so_are_listed_with_the_tags_nested_in_it(dispatcher, operator_session, engine,
                                                                   owner) -> None:
    """A click on a tag lists the notes holding it, as Obsidian's tag search does: ``project`` lists
    ``#project`` and ``#project/alpha`` (in either case), never ``#projects``."""
    for number, (title, tags) in enumerate([("Plan", ["project"]), ("Alpha", ["Project/alpha", "中断"]),
                                             ("Other", ["projects", "ideas/project"]), ("Untagged", [])]):
        engine.save_page(owner, page(f"tagged-{number}", title, type_="note", tags=tags))

    def titles(params: dict) -> list[str]:
        answer = ok(dispatcher, operator_session, "operator/records", {"agent": "main", "order": "title", **params})
        assert answer["total"] == len(answer["records"])
        return [record["title"] for record in answer["records"]]

    assert titles({"tag": "project"}) == ["Alpha", "Plan"]
    assert titles({"tag": "project/alpha"}) == ["Alpha"]
    assert titles({"tag": "中断", "kinds": ["page", "claim"]}) == ["Alpha"]
    assert titles({"tag": "ideas"}) == ["Other"] and titles({"tag": "proj"}) == []
    assert reason(call(dispatcher, operator_session, "operator/records", {"agent": "main", "tag": ""})) \
        == "invalid_params"


def test_a_tag_is_one_tag_whatever_the_case_of_its_letters_in_any_script(dispatcher, operator_session, engine,
                                                                          owner) -> None:
    """``#Été``, ``#été`` and ``#ÉTÉ`` are one tag, as ``#Project`` and ``#project`` are, and so are ``#Straße``
    and ``#STRASSE`` (Unicode's case folding, not only ASCII's) and an ``é`` written as ``e`` and its accent (a
    macOS folder's name); ``#Ete`` and ``#étés`` stay others."""
    for number, (title, tags) in enumerate([("Lower", ["été"]), ("Upper", ["ÉTÉ/juillet"]),
                                             ("Decomposed", ["E\u0301te\u0301"]), ("Plain", ["Ete"]),
                                             ("Plural", ["étés"]), ("Street", ["Straße", "Ωμέγα"])]):
        engine.save_page(owner, page(f"tagged-{number}", title, type_="note", tags=tags))

    def titles(tag: str) -> list[str]:
        answer = ok(dispatcher, operator_session, "operator/records", {"agent": "main", "order": "title", "tag": tag})
        assert answer["total"] == len(answer["records"])
        return [record["title"] for record in answer["records"]]

    assert titles("Été") == titles("été") == titles("ÉTÉ") == ["Decomposed", "Lower", "Upper"]
    assert titles("été/JUILLET") == ["Upper"] and titles("ete") == ["Plain"]
    assert titles("STRASSE") == titles("straße") == ["Street"] and titles("ΩΜΈΓΑ") == ["Street"]


def test_records_and_search_take_several_kinds_at_once(dispatcher, operator_session, demo) -> None:
    """The window's lists leave links out: ``kinds`` names the kinds wanted, counted and paged alike."""
    every = ok(dispatcher, operator_session, "operator/records", {"agent": "main", "limit": 500})
    notes = ok(dispatcher, operator_session, "operator/records",
               {"agent": "main", "kinds": ["page", "claim"], "limit": 3})
    kinds = [record["kind"] for record in every["records"]]
    assert notes["total"] == kinds.count("page") + kinds.count("claim") == every["total"] - kinds.count("relationship")
    assert kinds.count("relationship") == 6 and notes["nextOffset"] == 3
    rest = ok(dispatcher, operator_session, "operator/records",
              {"agent": "main", "kinds": ["page", "claim"], "offset": 3, "limit": 500})
    assert {record["kind"] for record in notes["records"] + rest["records"]} == {"page", "claim"}

    query = {"agent": "main", "query": "Dana Atlas Northwind", "limit": 50}
    hits = ok(dispatcher, operator_session, "operator/search", query)["hits"]
    assert "relationship" in {hit["kind"] for hit in hits}
    kept = ok(dispatcher, operator_session, "operator/search", {**query, "kinds": ["page", "claim"]})["hits"]
    assert [hit["id"] for hit in kept] == [hit["id"] for hit in hits if hit["kind"] != "relationship"]
    first = ok(dispatcher, operator_session, "operator/search", {**query, "kinds": ["page", "claim"], "limit": 1})
    assert first["hits"] == kept[:1]
    later = ok(dispatcher, operator_session, "operator/search",
               {**query, "kinds": ["page", "claim"], "limit": 1, "cursor": first["nextCursor"]})
    assert later["hits"] == kept[1:2]
    assert reason(call(dispatcher, operator_session, "operator/search",
                       {**query, "limit": 1, "cursor": first["nextCursor"]})) == "invalid_params"  # another filter

    for bad in ([], ["page", "page"], ["note"], "page", [1]):
        for method, params in (("operator/records", {"agent": "main"}), ("operator/search", query)):
            assert reason(call(dispatcher, operator_session, method, {**params, "kinds": bad})) == "invalid_params"
    both = {"agent": "main", "kind": "page", "kinds": ["page"]}
    assert reason(call(dispatcher, operator_session, "operator/records", both)) == "invalid_params"
    assert reason(call(dispatcher, operator_session, "operator/search", {**query, **both})) == "invalid_params"


def test_types_count_current_records(dispatcher, operator_session, demo) -> None:
    types = ok(dispatcher, operator_session, "operator/types", {"agent": "main"})["types"]
    assert {"kind": "page", "type": "person", "count": 2} in types
    assert sum(t["count"] for t in types if t["kind"] == "relationship") == 6


def test_search_record_links_history_and_diff(dispatcher, operator_session, demo) -> None:
    hits = ok(dispatcher, operator_session, "operator/search", {"agent": "main", "query": "Dana"})["hits"]
    dana = next(hit for hit in hits if hit["title"] == "Dana Whitaker")
    assert dana["snippet"]

    record = ok(dispatcher, operator_session, "operator/record", {"agent": "main", "id": dana["id"]})
    assert record["frontmatter"]["fields"]["location"] == "Lisbon" and "operations" in record["body"]

    links = ok(dispatcher, operator_session, "operator/links", {"agent": "main", "id": dana["id"]})
    assert links["claims"][0]["title"].startswith("Dana prefers")
    assert links["claims"][0]["evidence"][0]["retainedPath"].startswith("sources/")
    assert {(c["relation"], c["direction"], c["record"]["title"]) for c in links["connections"]} == {
        ("works_at", "out", "Northwind Labs"), ("works_on", "out", "Atlas Migration")}

    claim_id = links["claims"][0]["id"]
    history = ok(dispatcher, operator_session, "operator/history", {"agent": "main", "id": claim_id})
    assert [revision["revision"] for revision in history["revisions"]] == [1, 2]  # approved for recall
    diff = ok(dispatcher, operator_session, "operator/diff", {"agent": "main", "id": claim_id, "from": 1, "to": 2})
    assert "+recall:" in diff["diff"] and "-revision: 1" in diff["diff"]
    # what History shows: the keys that changed, old and new values, and the body's own diff
    # (updated_at changes too unless the approval came within the second the claim was written)
    assert [[name for name in revision["changed"] if name != "updated_at"] for revision in history["revisions"]] == [
        [], ["revision", "recall"]]
    changes = {change["name"]: change for change in diff["fields"]}
    assert diff["readable"] is True and [name for name in changes if name != "updated_at"] == ["revision", "recall"]
    assert (changes["revision"]["change"], changes["revision"]["before"], changes["revision"]["after"]) == (
        "changed", 1, 2)
    assert changes["recall"]["change"] == "added" and changes["recall"]["before"] is None
    assert diff["bodyDiff"] == "" and diff["bodyTruncated"] is False  # the approval left the body as it was
    assert reason(call(dispatcher, operator_session, "operator/diff",
                       {"agent": "main", "id": claim_id, "from": 1, "to": 9})) == "not_found"


def test_an_outside_edit_that_keeps_the_number_is_its_own_version_in_history_and_diff(
        engine, dispatcher, operator_session, demo) -> None:
    hits = ok(dispatcher, operator_session, "operator/search", {"agent": "main", "query": "Dana"})["hits"]
    dana = next(hit for hit in hits if hit["title"] == "Dana Whitaker")
    record = ok(dispatcher, operator_session, "operator/record", {"agent": "main", "id": dana["id"]})
    path = only_store(engine.state) / "vault" / "private" / record["path"]
    before = path.read_bytes()
    path.write_bytes(before.replace(b"operations", b"operations (edited by hand)", 1))  # the number is kept

    history = ok(dispatcher, operator_session, "operator/history", {"agent": "main", "id": dana["id"]})
    first, edited = history["revisions"][-2:]
    assert (first["revision"], edited["revision"], edited["origin"]) == (1, 1, "external")
    assert first["changed"] == [] and edited["changed"] == ["body"]  # each version against the one before it

    diff = ok(dispatcher, operator_session, "operator/diff", {
        "agent": "main", "id": dana["id"], "from": 1, "to": 1,
        "fromSha256": first["sha256"], "toSha256": edited["sha256"]})
    assert (diff["fromSha256"], diff["toSha256"]) == (first["sha256"], edited["sha256"])
    assert diff["fields"] == [] and "+" in diff["bodyDiff"] and "(edited by hand)" in diff["bodyDiff"]
    for text in (diff["diff"], diff["bodyDiff"]):  # the versions named as History names them: 1, then 1.1
        assert text.startswith("--- revision 1\n+++ revision 1.1\n")
    newest = ok(dispatcher, operator_session, "operator/diff", {"agent": "main", "id": dana["id"], "from": 1, "to": 1})
    assert newest["toSha256"] == edited["sha256"] and newest["bodyDiff"] == ""  # a number alone: its newest
    for bad in ("F" * 64, "abc", 7):
        refused = call(dispatcher, operator_session, "operator/diff", {
            "agent": "main", "id": dana["id"], "from": 1, "to": 1, "toSha256": bad})
        assert reason(refused) == "invalid_params" and refused["error"]["data"]["field"] == "toSha256"
    assert reason(call(dispatcher, operator_session, "operator/diff", {
        "agent": "main", "id": dana["id"], "from": 1, "to": 1, "toSha256": "0" * 64})) == "not_found"


def test_a_retained_original_is_read_and_verified(dispatcher, operator_session, demo) -> None:
    hits = ok(dispatcher, operator_session, "operator/search", {"agent": "main", "query": "Fridays"})["hits"]
    links = ok(dispatcher, operator_session, "operator/links", {"agent": "main", "id": hits[0]["id"]})
    source = ok(dispatcher, operator_session, "operator/source",
                {"agent": "main", "source": links["evidence"][0]["source"]})

    assert source["verified"] is True and "every Friday" in source["text"]
    assert Path(source["absolutePath"]).is_file()


def test_approvals_prompt_index_ontology_and_health(engine, dispatcher, operator_session, demo) -> None:
    approvals = ok(dispatcher, operator_session, "operator/approvals", {"agent": "main"})["approvals"]
    assert approvals[0]["summary"].startswith("Dana wants") and approvals[0]["importance"] == 7
    assert approvals[0]["approvedBy"] == "owner-private" and approvals[0]["projects"] == ["atlas"]

    prompt = ok(dispatcher, operator_session, "operator/prompt", {"agent": "main", "projectKey": "atlas"})
    assert "### Saving" in prompt["text"] and prompt["chars"] == len(prompt["text"])
    index = ok(dispatcher, operator_session, "operator/index",
               {"agent": "main", "firstMessageAt": "2100-01-01T00:00:00Z"})
    assert "Dana Whitaker" in index["text"] and index["maxChars"] == 4000 and index["chars"] <= 4000

    catalog = ok(dispatcher, operator_session, "operator/ontology", {"agent": "main"})
    person = next(entry for entry in catalog["entries"] if entry["name"] == "person")
    assert person["recordCount"] == 2

    health = ok(dispatcher, operator_session, "operator/health", {"agent": "main"})
    assert health["store"]["status"] == "ok" and health["pendingPublications"] == 0
    assert health["git"]["state"] in ("committed", "pending", "unavailable")


def test_what_an_agent_sees_matches_its_own_socket_answers(engine, dispatcher, operator_session, demo) -> None:
    token = engine.add_agent("helper", owner=True, scopes=("memory:read", "knowledge:read"))
    ok(dispatcher, operator_session, "operator/shareStore", {"agent": "main", "name": "team", "others": ["helper"]})
    agent = Session()
    call(dispatcher, agent, "initialize", {"_meta": {"knowledge": {"token": token,
                                                                   "audience": {"kind": "owner-private"}}}})
    first = "2100-01-01T00:00:00Z"

    for method, params in [("prompt", {"projectKey": "atlas"}), ("index", {"firstMessageAt": first})]:
        own = ok(dispatcher, agent, "memory/" + method, params)
        preview = ok(dispatcher, operator_session, "operator/" + method, {"agent": "helper", **params})
        assert preview["text"] == own["text"], method
    assert "### Saving" not in ok(dispatcher, operator_session, "operator/prompt", {"agent": "helper"})["text"]


def test_a_preview_of_a_non_owner_agent_gets_no_private_prompt_or_index(engine, dispatcher, operator_session,
                                                                         demo) -> None:
    engine.add_agent("guest")
    prompt = ok(dispatcher, operator_session, "operator/prompt", {"agent": "guest"})
    index = ok(dispatcher, operator_session, "operator/index", {"agent": "guest"})
    assert prompt["text"] is None and prompt["reason"] == "denied"
    assert index["text"] is None and index["reason"] == "denied"


def test_unknown_agents_and_parameters_are_refused(dispatcher, operator_session, demo) -> None:
    assert reason(call(dispatcher, operator_session, "operator/records", {"agent": "nobody"})) == "not_found"
    assert reason(call(dispatcher, operator_session, "operator/health", {"agent": "nobody"})) == "not_found"
    assert reason(call(dispatcher, operator_session, "operator/records", {})) == "invalid_params"
    assert reason(call(dispatcher, operator_session, "operator/record",
                       {"agent": "main", "id": "x", "store": "s"})) == "invalid_params"
    assert reason(call(dispatcher, operator_session, "operator/nothing", {})) == "not_found"


# --- an operator never writes knowledge ----------------------------------------------------------


def test_no_operator_method_changes_the_vault(engine, dispatcher, operator_session, demo) -> None:
    vault = only_store(engine.state) / "vault"
    before = vault_snapshot(vault)
    record_id = ok(dispatcher, operator_session, "operator/records", {"agent": "main"})["records"][0]["id"]
    reads = {"records": {}, "types": {}, "search": {"query": "Atlas"}, "record": {"id": record_id},
             "links": {"id": record_id}, "history": {"id": record_id}, "diff": {"id": record_id, "from": 1, "to": 1},
             "approvals": {}, "prompt": {}, "index": {}, "ontology": {"view": "diagnostics"}, "health": {}}
    for name, params in reads.items():
        ok(dispatcher, operator_session, PREFIX + name, {"agent": "main", **params})
    ok(dispatcher, operator_session, "operator/setSettings", {"writesEnabled": True})
    ok(dispatcher, operator_session, "operator/inventory")
    ok(dispatcher, operator_session, "operator/grants")
    ok(dispatcher, operator_session, "operator/connections")
    ok(dispatcher, operator_session, "operator/agentConfig", {"agent": "main"})
    assert ok(dispatcher, operator_session, "operator/doctor")["problems"] == 0
    assert ok(dispatcher, operator_session, "operator/reindex")["rebuilt"]  # derived indexes only
    # The recall gate view: settings, log, journal, what-if (tests/engine/test_gate_operator.py has the rest).
    ok(dispatcher, operator_session, "operator/setGateSettings", {"recallGate": {"mode": "shadow"}})
    for name in ("gateLog", "gateJournal", "gateWhatIf", "clearGateJournal", "gateStats"):
        ok(dispatcher, operator_session, PREFIX + name, {"agent": "main"})
    ok(dispatcher, operator_session, "operator/gateSettings")
    # The models view and long work (tests/engine/operator/test_model_operator.py and test_operator_jobs.py have the rest).
    ok(dispatcher, operator_session, "operator/models")
    ok(dispatcher, operator_session, "operator/jobs")
    # The partitions view (tests/engine/operator/test_partitions.py has the rest): figures, and grants in the registry.
    store_id = ok(dispatcher, operator_session, "operator/inventory")["stores"][0]["storeId"]
    ok(dispatcher, operator_session, "operator/partitions", {"store": store_id})
    ok(dispatcher, operator_session, "operator/setGrant", {"agent": "main", "sessionKey": "chat:1", "access": "read"})
    ok(dispatcher, operator_session, "operator/removeGrant", {"agent": "main", "sessionKey": "chat:1"})
    # Sync remotes (tests/engine/sync/test_remotes.py has the rest): kept beside the vault, never in it.
    ok(dispatcher, operator_session, "operator/addSyncRemote", {"name": "nas", "url": "ssh://nas.local/notes.git"})
    assert ok(dispatcher, operator_session, "operator/syncRemotes")["stores"][0]["remotes"][0]["name"] == "nas"
    ok(dispatcher, operator_session, "operator/removeSyncRemote", {"name": "nas"})
    # Sync rounds (tests/engine/sync/test_round*.py have the rest): they change the vault only with what a
    # remote brings, and with no remote a round does nothing.
    assert ok(dispatcher, operator_session, "operator/syncNow")["stores"] == []
    assert ok(dispatcher, operator_session, "operator/syncStatus")["stores"][0]["remotes"] == []
    # Dismissing a sync conflict (tests/engine/sync/test_autosync_engine.py has the rest) touches no vault file.
    assert reason(call(dispatcher, operator_session, "operator/dismissSyncConflict", {"id": "sc_1"})) == "not_found"

    assert vault_snapshot(vault) == before
    registered = set(OperatorMethods.__dict__) & {"save_page", "remember", "set_recall", "attach", "resume"}
    assert not registered
    operator_methods = sorted(m for m in dispatcher.methods if m.startswith(PREFIX))
    assert set(operator_methods) == {PREFIX + name for name in reads} | {
        PREFIX + name for name in ("inventory", "addAgent", "shareStore", "useSharedStore", "useOwnStore",
                                   "setSettings", "source", "removeAgent", "grants", "setGrant", "removeGrant",
                                   "doctor", "reindex")} | {PREFIX + name for name in gate_handlers(engine)} | {
        PREFIX + name for name in ("gateStats", "models", "pullModel", "benchmarkModel", "setModelSettings",
                                   "job", "jobs", "cancelJob")} | {
        PREFIX + name for name in ("partitions", "setGrant", "removeGrant", "subscribe", "connections", "agentConfig")} | {
        PREFIX + name for name in ("syncRemotes", "addSyncRemote", "removeSyncRemote", "syncNow", "syncStatus",
                                   "syncClone", "startSyncClone", "dismissSyncConflict")}
    assert {PREFIX + "startGateReplay", PREFIX + "gateReplay"} <= set(operator_methods)


def test_a_preview_caller_can_never_write(engine, demo) -> None:
    with pytest.raises(Exception) as raised:
        engine.save_page(PreviewCaller("main", {"kind": "owner-private"}),
                         {"requestId": "r1", "type": "note", "title": "Sneaky", "body": "x"})
    assert getattr(raised.value, "reason", None) == "denied"
    assert engine.authorizer.can_save(PreviewCaller("main", {"kind": "owner-private"})) is True
    token = engine.add_agent("reader", owner=True, scopes=("memory:read",))
    assert engine.authorizer.can_save(AgentCaller(token, {"kind": "owner-private"})) is False


def test_the_owners_search_is_not_matched_by_function_words_alone(dispatcher, operator_session, demo) -> None:
    """"who is Dana" finds Dana's records and nothing that only shares "who" or "is" with the question."""
    question = {"agent": "main", "query": "who is Dana", "limit": 50}
    owners = ok(dispatcher, operator_session, "operator/search", question)["hits"]
    by_word = ok(dispatcher, operator_session, "operator/search", {**question, "query": "Dana"})["hits"]

    assert {hit["id"] for hit in owners} == {hit["id"] for hit in by_word}
