"""The partitions view's methods: figures for every partition, never a conversation's records; grants checked."""

from __future__ import annotations

import json
import uuid

import pytest

from engine.access.authority import AgentCaller
from engine.operator.token_file import ensure_operator_token, read_operator_token
from engine.service import Engine
from engine.wire.protocol import Dispatcher, Session
from tests.helpers import conversation, page

SESSION_A, SESSION_B = str(uuid.uuid4()), str(uuid.uuid4())


def ask(dispatcher: Dispatcher, session: Session, method: str, params: dict | None = None) -> dict:
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}).encode() + b"\n"
    return dispatcher.handle(session, line)


def ok(dispatcher: Dispatcher, session: Session, method: str, params: dict | None = None) -> dict:
    reply = ask(dispatcher, session, method, params)
    assert "result" in reply, reply
    return reply["result"]


def reason(dispatcher: Dispatcher, session: Session, method: str, params: dict) -> str:
    reply = ask(dispatcher, session, method, params)
    assert "error" in reply, reply
    return reply["error"]["data"]["reason"]


@pytest.fixture
def desk(engine: Engine) -> tuple[Dispatcher, Session, str]:
    """An operator session, and a store with a private page and two conversations (chat:1 and chat:2)."""
    token = engine.add_agent("main", owner=True)
    engine.save_page(AgentCaller(token, {"kind": "owner-private"}), page("p-1", "Dana Whitfield"))
    engine.save_page(conversation(token, SESSION_A, "chat:1"), page("c-1", "Secret conversation page"))
    engine.save_page(conversation(token, SESSION_A, "chat:1"), page("c-2", "Another secret page"))
    engine.save_page(conversation(token, SESSION_B, "chat:2"), page("c-3", "Third secret page"))
    dispatcher = Dispatcher(engine)
    ensure_operator_token(engine.state)
    session = Session()
    ok(dispatcher, session, "initialize", {"_meta": {"knowledge": {"operatorToken": read_operator_token(engine.state)}}})
    return dispatcher, session, engine.resolver.effective("main", create=False).store_id


def test_every_partition_is_listed_with_figures_and_no_record_of_a_conversation(engine, desk) -> None:
    dispatcher, session, store_id = desk
    ok(dispatcher, session, "operator/setGrant", {"agent": "main", "sessionKey": "chat:2", "access": "read"})

    answer = ok(dispatcher, session, "operator/partitions", {"store": store_id})

    private, *conversations = answer["partitions"]
    assert private["kind"] == "private" and private["records"] == 1 and private["publications"] == 1
    assert private["links"] == 0  # a page alone: no relationship among its records
    assert private["lastPublicationAt"] and private["createdAt"]
    by_session = {row["sessionId"]: row for row in conversations}
    assert set(by_session) == {SESSION_A, SESSION_B}
    first, second = by_session[SESSION_A], by_session[SESSION_B]
    assert (first["records"], first["publications"], first["agent"]) == (2, 2, "main")
    assert first["grant"] is None and first["sessionKey"] is None  # the key is kept as a hash only
    assert second["grant"]["access"] == "read" and second["sessionKey"] == "chat:2"
    assert answer["grants"] == [{"agent": "main", "sessionKey": "chat:2", "access": "read",
                                 "createdAt": second["grant"]["createdAt"], "conversations": [SESSION_B]}]
    shown = json.dumps(answer)
    assert "secret" not in shown.lower() and "pg_" not in shown  # no title, no record id of any partition
    assert answer["store"]["agents"] == ["main"] and answer["store"]["status"] == "ok"


def test_a_grant_from_a_conversations_row_must_name_the_key_it_is_bound_under(engine, desk) -> None:
    dispatcher, session, store_id = desk
    wrong = {"agent": "main", "sessionKey": "chat:2", "access": "read-and-save", "sessionId": SESSION_A}

    assert reason(dispatcher, session, "operator/setGrant", wrong) == "invalid_params"
    assert engine.registry.grants("main") == []
    granted = ok(dispatcher, session, "operator/setGrant", {**wrong, "sessionKey": "chat:1"})
    assert granted["grant"]["conversations"] == [SESSION_A] and granted["grant"]["access"] == "read-and-save"
    rows = ok(dispatcher, session, "operator/partitions", {"store": store_id})["partitions"]
    assert next(r for r in rows if r.get("sessionId") == SESSION_A)["grant"]["access"] == "read-and-save"

    assert ok(dispatcher, session, "operator/removeGrant", {"agent": "main", "sessionKey": "chat:1"})["grants"] == []
    assert reason(dispatcher, session, "operator/removeGrant", {"agent": "main", "sessionKey": "chat:1"}) == "not_found"


def test_grants_are_checked_and_bad_ones_change_nothing(engine, desk) -> None:
    dispatcher, session, store_id = desk
    refused = [
        ({"agent": "nobody", "sessionKey": "chat:1", "access": "read"}, "not_found"),
        ({"agent": "main", "sessionKey": "chat:1", "access": "write"}, "invalid_params"),
        ({"agent": "main", "sessionKey": "two\nlines", "access": "read"}, "invalid_params"),
        ({"agent": "main", "sessionKey": "", "access": "read"}, "invalid_params"),
        ({"agent": "main", "sessionKey": "k" * 257, "access": "read"}, "limit_exceeded"),
        ({"agent": "main", "sessionKey": "chat:1", "access": "read", "sessionId": "not-a-uuid"}, "invalid_params"),
        ({"agent": "main", "sessionKey": "chat:1", "access": "read", "sessionId": str(uuid.uuid4())}, "not_found"),
        ({"agent": "main", "sessionKey": "chat:1", "access": "read", "store": store_id}, "invalid_params"),
    ]
    for params, expected in refused:
        assert reason(dispatcher, session, "operator/setGrant", params) == expected, params
    assert engine.registry.grants() == []
    assert reason(dispatcher, session, "operator/partitions", {"store": "st_nothing"}) == "not_found"
    assert reason(dispatcher, session, "operator/partitions", {}) == "invalid_params"

