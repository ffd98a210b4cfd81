"""The command line beside a serving engine: the same commands, asked of the engine as the operator, print the same.

Each command runs twice on identical copies of a demo state directory: once in this process with no engine
(the local transport), once while an ``Engine`` and its ``EngineServer`` serve the copy (the socket).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from engine.access.authority import OperatorCaller
from engine.cli.commands import main
from engine.cli.desk import LocalDesk, RemoteDesk, open_desk
from engine.importers import methods as import_methods
from engine.importers.archive_format import MANIFEST_NAME
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.wire.protocol import Dispatcher, Session
from engine.wire.server import EngineServer
from tests.helpers import tool_answer

# Run in this order on each copy; errors included (a conflict, a missing grant, an unknown agent).
SCRIPT = [
    ["search", "Dana"], ["search", "Atlas", "--limit", "3", "--json"], ["search", "x", "--agent", "nobody"],
    ["doctor"], ["doctor", "--json"], ["reindex"], ["reindex", "--json"],
    ["agents", "list"], ["agents", "list", "--json"], ["stores", "list"], ["stores", "list", "--json"],
    ["agents", "add", "helper", "--scopes", "memory:read,memory:write", "--json"], ["agents", "add", "helper"],
    ["agents", "add", "Bad Name"], ["agents", "config", "helper", "--instance", "laptop"],
    ["agents", "config", "main", "--client", "codex", "--instance", "laptop"], ["agents", "config", "nobody"],
    ["grants", "add", "helper", "chat-1", "--access", "read-and-save"], ["grants", "list"],
    ["grants", "list", "helper", "--json"], ["grants", "remove", "helper", "chat-1"],
    ["grants", "remove", "helper", "chat-1"], ["grants", "add", "nobody", "chat-1"],
    ["settings", "show"], ["settings", "search-knowledge", "on", "--json"], ["settings", "show", "--json"],
    ["settings", "search-knowledge", "off"], ["settings", "writes", "off", "--json"], ["settings", "writes", "on"],
    ["settings", "workspace-roots", "/tmp", "--json"], ["settings", "workspace-roots", "/no/such/folder"],
    ["settings", "workspace-roots", "/"], ["settings", "show"], ["settings", "workspace-roots"],
    ["models", "list", "--json"],
    ["agents", "remove", "helper"], ["agents", "remove", "helper"], ["agents", "list", "--json"],
]
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
TOKEN = re.compile(r"kd_[A-Za-z0-9_-]+")


@contextmanager
def serving(state: StateDir) -> Iterator[Engine]:
    """An engine serving ``state`` on a socket, named in engine.json as `knowledge serve` names it."""
    with Engine(state, watch=False) as engine:
        server = EngineServer(engine, port=0, socket_path=state.root / "engine.sock", workers=4)
        import_methods.register(server.dispatcher, engine)  # as `knowledge serve` does
        server.start()
        state.write_engine_info({"pid": os.getpid(), **server.info()})
        try:
            yield engine
        finally:
            state.remove_engine_info()
            server.stop()


@pytest.fixture
def demo_copies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[StateDir, StateDir]:
    seed, here, served = (StateDir(tmp_path / name / "state") for name in ("seed", "here", "served"))
    assert main(["--state-dir", str(seed.root), "demo"]) == 0
    capsys.readouterr()
    for copy in (here, served):  # both copies, so that both see their vault moved (the same catch-up)
        shutil.copytree(seed.root, copy.root)
    return here, served


def run(capsys: pytest.CaptureFixture[str], state: StateDir, argv: list[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr, with what differs between two copies by nature (their path, new tokens
    and timestamps) masked."""
    code = main(["--state-dir", str(state.root), *argv])
    out, err = capsys.readouterr()

    def masked(text: str) -> str:
        return TOKEN.sub("<token>", TIMESTAMP.sub("<time>", text.replace(str(state.root.parent), "<dir>")))

    return code, masked(out), masked(err)


def test_every_command_prints_the_same_in_process_and_beside_the_serving_engine(
        demo_copies: tuple[StateDir, StateDir], capsys: pytest.CaptureFixture[str]) -> None:
    here, served = demo_copies
    with open_desk(here) as desk:
        assert isinstance(desk, LocalDesk)
    in_process = [run(capsys, here, argv) for argv in SCRIPT]

    with serving(served) as engine:
        with open_desk(served) as desk:
            assert isinstance(desk, RemoteDesk)
        beside = [run(capsys, served, argv) for argv in SCRIPT]
        # The serving engine did the work: it holds what the commands changed.
        assert engine.registry.agent("helper") is not None and not engine.registry.agent("helper").active
        assert engine.settings.current().knowledge_runtime_enabled is False

    for argv, local, remote in zip(SCRIPT, in_process, beside):
        assert remote == local, argv
    codes = {" ".join(argv): code for argv, (code, _, _) in zip(SCRIPT, in_process)}
    assert codes["search Dana"] == 0 and "Dana Whitaker" in in_process[0][1]
    assert codes["agents add helper"] == 2 and "already exists" in in_process[12][2]
    assert codes["grants remove helper chat-1"] == 2 and codes["agents config nobody"] == 2
    assert codes["search x --agent nobody"] == 2 and "nobody" in in_process[2][2]
    assert json.loads(in_process[SCRIPT.index(["settings", "search-knowledge", "on", "--json"])][1])[
        "knowledgeRuntimeEnabled"] is True
    assert json.loads(in_process[SCRIPT.index(["settings", "writes", "off", "--json"])][1])["writesEnabled"] is False
    assert json.loads(in_process[SCRIPT.index(["settings", "workspace-roots", "/tmp", "--json"])][1])[
        "workspaceRoots"] == ["/tmp"]
    refused = in_process[SCRIPT.index(["settings", "workspace-roots", "/no/such/folder"])]
    assert refused[0] == 2 and "'/no/such/folder' is not a directory (workspaceRoots)" in refused[2]
    assert codes["settings workspace-roots /"] == 2
    assert "workspace roots   /tmp  (where" in in_process[SCRIPT.index(["settings", "show"], 30)][1]


def test_a_stale_engine_json_is_not_taken_for_a_serving_engine(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    state_dir.create()
    state_dir.write_engine_info({"pid": 2 ** 22 + 12345, "port": 1})  # no such process

    assert main(["--state-dir", str(state_dir.root), "doctor"]) == 0
    assert capsys.readouterr().out == "No problems found.\n"


def test_an_engine_that_stopped_answering_is_named_with_what_to_do(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    with serving(state_dir):
        info = state_dir.read_engine_info()
    state_dir.write_engine_info({**info, "pid": os.getpid()})  # alive, but its sockets are closed

    assert main(["--state-dir", str(state_dir.root), "agents", "list"]) == 1
    err = capsys.readouterr().err
    assert "Cannot reach the Knowledge engine" in err and "engine.json" in err


def test_export_runs_in_the_serving_engine_and_writes_the_archive_an_export_here_writes(
        demo_copies: tuple[StateDir, StateDir], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    here, served = demo_copies
    assert run(capsys, here, ["export", str(tmp_path / "here.zip")])[0] == 0
    with serving(served):
        code, out, err = run(capsys, served, ["export", str(tmp_path / "served.zip"), "--json"])
        assert code == 0, err
        assert json.loads(out)["storeId"] and (tmp_path / "served.zip").is_file()
        assert run(capsys, served, ["export", str(tmp_path / "served.zip")])[0] == 2  # it exists: refused

    def files(archive: Path) -> list[dict]:
        with zipfile.ZipFile(archive) as opened:
            return json.loads(opened.read(MANIFEST_NAME))["files"]

    assert files(tmp_path / "served.zip") == files(tmp_path / "here.zip")


def test_import_and_serve_refuse_beside_the_engine_saying_what_to_do(
        state_dir: StateDir, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "locomo.json"
    data.write_text("[]", encoding="utf-8")
    with serving(state_dir):
        assert main(["--state-dir", str(state_dir.root), "import", "locomo", str(data)]) == 3
        err = capsys.readouterr().err
        assert "`knowledge import` needs the state directory to itself" in err
        assert f"kill {os.getpid()}" in err
        assert main(["--state-dir", str(state_dir.root), "serve", "--port", "0"]) == 3
        assert "already serves" in capsys.readouterr().err


# --- agents config: a configuration that works for the agent as registered ---------------------------


def _bridge_audience(args: list[str]) -> dict | None:
    if "--audience" not in args:
        return None
    value = {flag: args[args.index(flag) + 1] for flag in ("--audience", "--session-key", "--session-id")}
    return {"kind": value["--audience"], "sessionKey": value["--session-key"], "sessionId": value["--session-id"]}


def _session(dispatcher: Dispatcher, token: str, audience: dict | None) -> Session:
    session = Session()
    meta = {"token": token, "audience": audience or {"kind": "owner-private"}}
    reply = dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "_meta": {"knowledge": meta}}}).encode())
    assert "result" in reply, reply
    return session


def _tool(dispatcher: Dispatcher, session: Session, name: str, arguments: dict) -> dict:
    reply = dispatcher.handle(session, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": name, "arguments": arguments}}).encode())
    return reply["result"]


def test_a_non_owner_agent_gets_a_working_conversation_and_is_told_the_grant_that_opens_more(
        demo_copies: tuple[StateDir, StateDir], capsys: pytest.CaptureFixture[str]) -> None:
    state = demo_copies[0]
    assert main(["--state-dir", str(state.root), "agents", "add", "helper", "--json"]) == 0
    token = json.loads(capsys.readouterr().out)["token"]
    assert main(["--state-dir", str(state.root), "agents", "config", "helper", "--instance", "laptop"]) == 0
    out, err = capsys.readouterr()
    args = json.loads(out)["mcpServers"]["knowledge"]["args"]
    audience = _bridge_audience(args)
    assert audience is not None and audience["kind"] == "conversation" and audience["sessionKey"] == "laptop"
    assert uuid.UUID(audience["sessionId"])
    assert "knowledge grants add helper laptop --access read-and-save" in err

    with serving(state) as engine:
        dispatcher = Dispatcher(engine)
        session = _session(dispatcher, token, audience)
        saved = _tool(dispatcher, session, "knowledge_save_page", {
            "requestId": "r1", "type": "person", "title": "Robin", "body": "Robin reviews the release notes."})
        assert saved["isError"] is False, saved
        found = _tool(dispatcher, session, "knowledge_grep", {"query": "Robin"})["structuredContent"]["hits"]
        assert [hit["title"] for hit in found] == ["Robin"]
        assert _tool(dispatcher, session, "knowledge_grep", {"query": "Dana"})["structuredContent"]["hits"] == []

        # The grant the message names puts that conversation in the agent's private partition instead.
        assert main(["--state-dir", str(state.root), "grants", "add", "helper", "laptop",
                     "--access", "read-and-save"]) == 0
        assert "may now read-and-save" in capsys.readouterr().out
        assert _tool(dispatcher, session, "knowledge_grep", {"query": "Robin"})["structuredContent"]["hits"] == []
        saved = _tool(dispatcher, session, "knowledge_save_page", {
            "requestId": "r2", "type": "person", "title": "Casey", "body": "Casey owns the private roadmap."})
        assert saved["isError"] is False, saved
        private = engine.search(OperatorCaller("helper"), {"query": "Casey"})["hits"]
        assert [hit["title"] for hit in private] == ["Casey"]

    # The same configuration printed again reaches the same conversation.
    assert main(["--state-dir", str(state.root), "agents", "config", "helper", "--instance", "laptop"]) == 0
    assert capsys.readouterr().out == out


def test_the_owner_private_configuration_is_left_as_it_was(
        demo_copies: tuple[StateDir, StateDir], capsys: pytest.CaptureFixture[str]) -> None:
    state = demo_copies[0]
    assert main(["--state-dir", str(state.root), "agents", "config", "main", "--instance", "laptop"]) == 0
    out, err = capsys.readouterr()
    assert "--audience" not in json.loads(out)["mcpServers"]["knowledge"]["args"]
    assert "no owner authority" not in err
    assert main(["--state-dir", str(state.root), "agents", "config", "main", "--session-key", "k"]) == 2
    assert "owner-private" in capsys.readouterr().err


def test_search_knowledge_is_switched_by_the_cli_beside_the_engine_and_the_engine_checks_it(
        demo_copies: tuple[StateDir, StateDir], capsys: pytest.CaptureFixture[str]) -> None:
    state = demo_copies[0]
    token = (state.tokens / "main.token").read_text(encoding="utf-8").strip()
    with serving(state) as engine:
        dispatcher = Dispatcher(engine)
        session = _session(dispatcher, token, None)
        refused = _tool(dispatcher, session, "search_knowledge", {"query": "Dana"})
        assert refused["isError"] is True and tool_answer(refused)["reason"] == "runtime_disabled"

        assert main(["--state-dir", str(state.root), "settings", "search-knowledge", "on"]) == 0
        assert "search-knowledge  on" in capsys.readouterr().out
        answered = _tool(dispatcher, session, "search_knowledge", {"query": "Dana"})
        assert answered["isError"] is False, answered

        assert main(["--state-dir", str(state.root), "settings", "search-knowledge", "off"]) == 0
        assert _tool(dispatcher, session, "search_knowledge", {"query": "Dana"})["isError"] is True
    assert json.loads(state.config.read_text(encoding="utf-8"))["knowledgeRuntimeEnabled"] is False


def test_a_command_that_finds_the_lock_taken_by_a_serving_engine_says_what_to_do(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(state_dir):
        # The engine came up between the command's look at engine.json and its opening of the stores.
        real = StateDir.serving_engine
        looks = iter([None])
        monkeypatch.setattr(StateDir, "serving_engine", lambda self: next(looks, real(self)))

        assert main(["--state-dir", str(state_dir.root), "doctor"]) == 3
        err = capsys.readouterr().err
        assert "serves" in err and f"kill {os.getpid()}" in err and "not serving yet" not in err
