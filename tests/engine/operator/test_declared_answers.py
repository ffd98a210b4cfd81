"""Operator answers against their declarations: each method declares a TypedDict, and what it answers fits it.

The autouse fixture of conftest.py checks every answer the operator tests produce; here the main methods
(stores, partitions, records, history, approvals, the recall gate) are driven on a seeded engine and each
answer is validated with jsonschema against the strict form of ``output_schema(<its TypedDict>)``.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest

from engine.gate.turn import gate_turn
from engine.importers.demo import seed_demo
from engine.operator.methods import OperatorMethods
from engine.operator.token_file import ensure_operator_token, read_operator_token
from engine.service import Engine
from engine.wire.protocol import Dispatcher, Session
from tests.engine.gate_helpers import conversation_audience, owner_caller, rerank_engine, seed
from tests.engine.operator.declared import check_answer, declared_answer
from tests.helpers import conversation, page

# gateStats is the gate package's (engine/gate/stats.py), which declares its own answers.
DECLARED_ELSEWHERE = {"gateStats"}
# Answers passed on as the package that builds them answers them (the search, store, ontology and gate
# journal packages), declared here as JSON objects.
PASSED_ON = {"search", "record", "ontology", "labelGateTurn", "gateWhatIf"}


def shapes(engine: Engine) -> dict[str, Any]:
    return {name: declared_answer(handler) for name, handler in OperatorMethods(engine).handlers().items()}


class Desk:
    """An operator session on an engine, answering through the socket's dispatcher."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.dispatcher, self.session = engine, Dispatcher(engine), Session()
        self.shapes = shapes(engine)
        ensure_operator_token(engine.state)
        self.rpc("initialize", {"_meta": {"knowledge": {"operatorToken": read_operator_token(engine.state)}}})

    def rpc(self, method: str, params: dict[str, Any]) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        reply = self.dispatcher.handle(self.session, json.dumps(body).encode() + b"\n")
        assert "result" in reply, reply
        return reply["result"]

    def answer(self, name: str, params: dict[str, Any] | None = None) -> Any:
        """``operator/<name>``'s answer, validated against the method's declaration."""
        result = self.rpc("operator/" + name, params or {})
        if name in PASSED_ON:
            assert isinstance(result, dict)
        else:
            check_answer(result, self.shapes[name])
        return result


@pytest.fixture
def desk(engine: Engine) -> Desk:
    seed_demo(engine)
    return Desk(engine)


def test_every_operator_method_declares_its_answer(engine: Engine) -> None:
    handlers = OperatorMethods(engine).handlers()
    undeclared = {name for name, shape in shapes(engine).items() if shape is None}
    assert undeclared == DECLARED_ELSEWHERE | PASSED_ON
    assert {name for name in PASSED_ON if handlers[name].__annotations__["return"] != "JsonObject"} == set()


def test_stores_agents_and_settings_fit_their_declarations(desk: Desk, tmp_path: Path) -> None:
    inventory = desk.answer("inventory")
    assert inventory["stores"] and inventory["agents"][0]["store"]["status"] == "ok"
    added = desk.answer("addAgent", {"name": "reader"})
    assert added["agent"] == "reader" and added["audience"]["kind"] == "conversation"
    desk.answer("setSettings", {"workspaceRoots": [str(tmp_path)]})
    desk.answer("shareStore", {"agent": "main", "name": "team", "others": ["reader"]})
    desk.answer("useOwnStore", {"agent": "reader"})
    desk.answer("agentConfig", {"agent": "reader", "client": "claude"})
    desk.answer("connections")
    desk.answer("doctor")
    desk.answer("removeAgent", {"name": "reader"})


def test_partitions_and_grants_fit_their_declarations(engine: Engine, desk: Desk) -> None:
    token = engine.registry.add_credential("main")
    engine.save_page(conversation(token, str(uuid.uuid4())), page("c-1", "A page of the conversation"))
    store_id = engine.resolver.effective("main", create=False).store_id
    listed = desk.answer("partitions", {"store": store_id})
    assert {row["kind"] for row in listed["partitions"]} == {"private", "conversation"}
    desk.answer("setGrant", {"agent": "main", "sessionKey": "chat:9", "access": "read"})
    assert desk.answer("grants", {"agent": "main"})["grants"][0]["sessionKey"] == "chat:9"
    assert desk.answer("removeGrant", {"agent": "main", "sessionKey": "chat:9"}) == {"grants": []}


def test_sync_remotes_fit_their_declarations(desk: Desk) -> None:
    assert desk.answer("syncRemotes")["stores"][0]["remotes"] == []
    added = desk.answer("addSyncRemote", {"name": "nas", "url": "git@nas.local:srv/notes.git", "agent": "main"})
    assert [remote["name"] for remote in added["remotes"]] == ["nas"]
    assert desk.answer("syncRemotes")["stores"][0]["remotes"] == added["remotes"]
    assert desk.answer("removeSyncRemote", {"name": "nas", "store": added["storeId"]})["remotes"] == []
    assert desk.answer("syncNow")["stores"] == []
    assert desk.answer("syncStatus")["stores"][0]["remotes"] == []


def test_records_history_and_approvals_fit_their_declarations(desk: Desk) -> None:
    page = desk.answer("records", {"agent": "main", "limit": 3})
    assert len(page["records"]) == 3 and "nextOffset" in page
    desk.answer("records", {"agent": "main", "status": "all", "limit": 500})
    desk.answer("types", {"agent": "main"})
    approvals = desk.answer("approvals", {"agent": "main"})["approvals"]
    claim = approvals[0]["id"]
    history = desk.answer("history", {"agent": "main", "id": claim})
    assert [revision["revision"] for revision in history["revisions"]] == [1, 2]
    desk.answer("diff", {"agent": "main", "id": claim, "from": 1, "to": 2})
    links = desk.answer("links", {"agent": "main", "id": claim})
    subject = desk.answer("links", {"agent": "main", "id": links["references"][0]["record"]["id"]})
    assert subject["claims"] and subject["connections"]
    desk.answer("source", {"agent": "main", "source": subject["claims"][0]["evidence"][0]["source"]})
    desk.answer("health", {"agent": "main"})
    desk.answer("prompt", {"agent": "main", "projectKey": "atlas"})
    desk.answer("prompt", {"agent": "main", "audience": conversation_audience()})
    desk.answer("index", {"agent": "main", "firstMessageAt": "2100-01-01T00:00:00Z"})


@contextlib.contextmanager
def journaled_desk(tmp_path: Path) -> Iterator[tuple[Engine, Desk, dict[str, str]]]:
    """A seeded engine whose recall gate journaled one turn, its operator desk, and the seeded records' ids."""
    with rerank_engine(tmp_path, {"Alice Martin": 0.9, "Harbour museum": 0.6},
                       {"mode": "shadow", "journal": True}) as (engine, _):
        caller = owner_caller(engine)
        ids = seed(engine, caller)
        gate_turn(engine, caller, {"message": "who painted the museum mural"})
        yield engine, Desk(engine), ids


def test_the_recall_gate_methods_fit_their_declarations(tmp_path: Path) -> None:
    with journaled_desk(tmp_path) as (engine, desk, ids):
        desk.answer("gateSettings")
        desk.answer("checkGateSettings", {"recallGate": {"pageChars": 10}})
        desk.answer("checkGateSettings", {"recallGate": {"mode": "live"}})
        assert desk.answer("gateLog", {"agent": "main"})["total"] == 1
        turn = desk.answer("gateJournal", {"agent": "main"})["turns"][0]
        desk.answer("labelGateTurn", {"agent": "main", "turn": turn["id"], "needed": [ids["Alice Martin"]]})
        desk.answer("gateWhatIf", {"agent": "main", "threshold": 0.5})
        suggestion = desk.answer("suggestGateThresholds", {"agent": "main", "precision": 0.7})
        assert suggestion["labelled"] == 1 and suggestion["highThreshold"] is None
        replay = desk.answer("gateReplay", {"agent": "main", "recallGate": {"highThreshold": 0.5}})
        assert replay["turns"][0]["id"] == turn["id"]
        job = desk.answer("startGateReplay", {"agent": "main"})
        assert engine.jobs.wait(job["id"], 60)["state"] == "done"
        desk.answer("job", {"job": job["id"]})
        desk.answer("jobs", {"kind": "replay"})
        desk.answer("setGateSettings", {"recallGate": None})
        assert desk.answer("clearGateJournal", {"agent": "main"}) == {"cleared": 1}


def test_an_answer_that_strays_from_its_declaration_is_refused(desk: Desk) -> None:
    page = desk.answer("records", {"agent": "main", "limit": 2})
    shape = desk.shapes["records"]
    with pytest.raises(jsonschema.ValidationError):
        check_answer({**page, "total": str(page["total"])}, shape)          # a wrong type
    with pytest.raises(jsonschema.ValidationError):
        check_answer({key: value for key, value in page.items() if key != "offset"}, shape)  # a key missing
    with pytest.raises(jsonschema.ValidationError):
        check_answer({**page, "records": [{**page["records"][0], "secret": 1}]}, shape)  # an undeclared key
