"""search_knowledge: the two shapes, currentness, every mode, authority, the runtime switch and the bounds.

Semantic tests run the committed tiny embedder (random weights) through the
real onnxruntime + tokenizers + sqlite-vec path. Random weights carry no
meaning, but a text identical to a record's embedding text gets exactly that
record's vector, which is what the semantic assertions rely on.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine.search import knowledge_base as kb
from engine.access.authority import AgentCaller
from engine.core.errors import Denied, InvalidParams, LimitExceeded, NotFound, RuntimeDisabled
from engine.wire.protocol import Dispatcher, Session
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.index.vectors import embedding_text
from models.fixtures import TINY_EMBEDDER
from models.installed import ModelStore
from models.local import add_local
from tests.helpers import claim, conversation, page, tool_answer

PAGES = [
    ("Deployment runbook", "Ship a release: build, tag, roll out with canaries and watch the error rate.", ["ops"]),
    ("Database backups", "Nightly dumps of the database are kept for thirty days in cold storage.", ["ops"]),
    ("Team lunch", "On Fridays the team eats pizza together near the harbour.", []),
    ("Incident review", "Every incident gets a written review within a week, with the timeline.", ["ops"]),
]


def write_config(state: StateDir, **settings: Any) -> None:
    state.root.mkdir(parents=True, exist_ok=True)
    state.config.write_text(json.dumps(settings), encoding="utf-8")


def open_engine(state: StateDir, *, model: bool = True, **settings: Any) -> Engine:
    settings.setdefault("knowledgeRuntimeEnabled", True)
    if model:
        add_local(ModelStore(state.models), TINY_EMBEDDER)
        settings.setdefault("embeddingModel", "onnx/tiny-embedder")
    write_config(state, **settings)
    return Engine(state, watch=False, git=False)


@pytest.fixture
def kb_engine(state_dir: StateDir) -> Iterator[Engine]:
    with open_engine(state_dir) as opened:
        yield opened


@pytest.fixture
def lexical_engine(state_dir: StateDir) -> Iterator[Engine]:
    """The runtime on, but no embedding model installed."""
    with open_engine(state_dir, model=False) as opened:
        yield opened


def seed(engine: Engine) -> tuple[AgentCaller, dict[str, str]]:
    caller = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"}, "laptop-main")
    ids = {}
    for number, (title, body, tags) in enumerate(PAGES):
        receipt = engine.save_page(caller, page(f"p{number}", title, "note", body, tags=tags))
        ids[title] = receipt["id"]
    return caller, ids


def ask(engine: Engine, caller: AgentCaller, **args: Any) -> dict[str, Any]:
    return kb.search_knowledge(engine, caller, args)


def titles(envelope: dict[str, Any]) -> list[str]:
    return [result["title"] for result in envelope["results"]]


# --- the runtime switch and authority ----------------------------------------------------------


def test_the_runtime_is_off_by_default_and_says_knowledge_unavailable(engine, owner):
    with pytest.raises(RuntimeDisabled) as raised:
        kb.search_knowledge(engine, owner, {"query": "anything"})
    assert raised.value.to_dict() == {
        "reason": "runtime_disabled", "error": "knowledge_unavailable", "code": "knowledge_runtime_disabled",
        "message": "the Knowledge Base runtime is switched off (knowledgeRuntimeEnabled is false): the owner "
                   "switches it on with `knowledge settings search-knowledge on`; meanwhile knowledge_grep searches "
                   "the same records"}

    session = Session()
    dispatcher = Dispatcher(engine)
    dispatcher.handle(session, _message("initialize", {"_meta": {"knowledge": {
        "token": owner.token, "audience": {"kind": "owner-private"}}}}))
    reply = dispatcher.handle(session, _message("tools/call", {"name": "search_knowledge",
                                                               "arguments": {"knowledge_item_id": "pg_x"}}))
    assert reply["result"]["isError"] is True
    assert tool_answer(reply["result"])["code"] == "knowledge_runtime_disabled"
    assert tool_answer(reply["result"])["error"] == "knowledge_unavailable"


@pytest.mark.parametrize("args, field", [
    ({}, "query"),
    ({"query": 5}, "query"),
    ({"query": "pizza", "mode": "bogus"}, "mode"),
    ({"query": "pizza", "knowledge_item_id": "pg_x"}, "knowledge_item_id"),
    ({"query": "pizza", "scope": "private"}, "scope"),
])
def test_bad_input_is_named_before_the_switch_is_read(engine, owner, args, field):
    with pytest.raises(InvalidParams) as raised:
        kb.search_knowledge(engine, owner, args)
    assert raised.value.details.get("field") == field


def test_the_switch_is_read_from_config_json_when_it_changes(state_dir):
    with open_engine(state_dir, model=False, knowledgeRuntimeEnabled=False) as engine:
        caller, _ = seed(engine)
        with pytest.raises(RuntimeDisabled):
            ask(engine, caller, query="pizza")
        write_config(state_dir, knowledgeRuntimeEnabled=True, embeddingModel=None)
        assert titles(ask(engine, caller, query="pizza")) == ["Team lunch"]


def _message(method: str, params: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n"


def test_a_credential_without_knowledge_read_is_denied_and_knowledge_read_alone_suffices(lexical_engine):
    engine = lexical_engine
    seed(engine)
    memory_only = AgentCaller(engine.add_agent("memo", owner=True, scopes=("memory:read", "memory:write")),
                              {"kind": "owner-private"})
    with pytest.raises(Denied, match="knowledge:read"):
        ask(engine, memory_only, query="pizza")
    with pytest.raises(Denied, match="knowledge:read"):
        ask(engine, memory_only, knowledge_item_id="pg_anything")
    reader = AgentCaller(engine.add_agent("reader", owner=True, scopes=("knowledge:read",)),
                         {"kind": "owner-private"})
    # Its own store is empty, so a knowledge:read-only credential reads (nothing) without memory:read.
    assert ask(engine, reader, query="pizza")["results"] == []


def test_callers_reach_only_the_partition_their_credential_and_audience_allow(lexical_engine):
    engine = lexical_engine
    owner, ids = seed(engine)
    session = str(uuid.uuid4())
    chat = conversation(owner.token, session, "chat:plain")
    assert ask(engine, chat, query="pizza")["results"] == []  # its own conversation partition
    with pytest.raises(NotFound):
        ask(engine, chat, knowledge_item_id=ids["Team lunch"])
    engine.registry.set_grant("main", "chat:granted", "read")
    granted = conversation(owner.token, session, "chat:granted")
    assert titles(ask(engine, granted, query="pizza")) == ["Team lunch"]
    sandboxed = AgentCaller(owner.token, {"kind": "owner-private", "sandboxed": True})
    with pytest.raises(Denied):
        ask(engine, sandboxed, query="pizza")
    helper = AgentCaller(engine.add_agent("helper"), {"kind": "owner-private"})
    with pytest.raises(Denied):
        ask(engine, helper, query="pizza")
    engine.registry.revoke_credential(owner.token)
    with pytest.raises(Denied):
        ask(engine, owner, query="pizza")


def test_reads_change_nothing_and_record_no_event(lexical_engine):
    engine = lexical_engine
    caller, ids = seed(engine)
    store = engine.authorizer.authorize(caller).store
    runtime = engine.runtime(store)

    def counts() -> tuple[int, ...]:
        return runtime.call(lambda: tuple(runtime.store.db.one(f"SELECT COUNT(*) AS n FROM {table}")["n"]
                                          for table in ("publications", "events", "revisions", "outbox")))

    before = counts()
    for mode in kb.MODES:
        ask(engine, caller, query="database backups", mode=mode)
    ask(engine, caller, knowledge_item_id=ids["Database backups"])
    assert counts() == before


# --- shapes --------------------------------------------------------------------------------------


def test_a_query_search_returns_the_typed_envelope_with_exact_references(lexical_engine):
    engine = lexical_engine
    caller, ids = seed(engine)
    envelope = ask(engine, caller, query="database dumps", mode="lexical")
    assert envelope["type"] == "knowledge_search" and envelope["mode"] == "lexical"
    top = envelope["results"][0]
    assert set(top) == {"knowledge_item_id", "knowledge_revision_id", "title", "content", "reference", "score",
                        "content_truncated"}
    record = engine.get_record(caller, ids["Database backups"])
    assert top["knowledge_item_id"] == ids["Database backups"]
    assert top["knowledge_revision_id"] == f"1-{record['sha256']}"
    assert top["reference"] == f"knowledge:{ids['Database backups']}@1-{record['sha256']}"
    assert top["content"] == PAGES[1][1] + "\n" and top["content_truncated"] is False
    assert top["score"] == 1.0


def test_an_addressed_read_returns_the_knowledge_envelope_window(lexical_engine):
    engine = lexical_engine
    caller, ids = seed(engine)
    body = PAGES[0][1] + "\n"  # the record's body, as stored
    read = ask(engine, caller, knowledge_item_id=ids["Deployment runbook"], offset=6, limit_chars=10)
    record = engine.get_record(caller, ids["Deployment runbook"])
    assert read == {"type": "knowledge", "knowledge_item_id": ids["Deployment runbook"],
                    "knowledge_revision_id": f"1-{record['sha256']}", "content": body[6:16], "content_offset": 6,
                    "content_limit": 10, "content_total_chars": len(body), "content_truncated": True}
    whole = ask(engine, caller, knowledge_item_id=ids["Deployment runbook"])
    assert whole["content"] == body and whole["content_truncated"] is False and whole["content_limit"] == 4000
    tail = ask(engine, caller, knowledge_item_id=ids["Deployment runbook"], offset=len(body) - 3)
    assert tail["content"] == body[-3:] and tail["content_truncated"] is False
    beyond = ask(engine, caller, knowledge_item_id=ids["Deployment runbook"], offset=len(body) + 10)
    assert beyond["content"] == "" and beyond["content_truncated"] is False


@pytest.mark.parametrize("args", [
    {"query": "pizza", "knowledge_item_id": "pg_x"},
    {"query": "pizza", "knowledge_revision_id": "1-" + "0" * 64},
    {"query": "pizza", "offset": 0},
    {"knowledge_item_id": "pg_x", "mode": "lexical"},
    {"knowledge_item_id": "pg_x", "max_results": 3},
])
def test_mixing_the_two_shapes_is_rejected(lexical_engine, args):
    caller, _ = seed(lexical_engine)
    with pytest.raises(InvalidParams, match="separate calls"):
        kb.search_knowledge(lexical_engine, caller, args)


@pytest.mark.parametrize("args, field", [
    ({}, "query"),
    ({"knowledge_revision_id": "1-" + "0" * 64}, "knowledge_item_id"),
    ({"query": "pizza", "owner": "someone"}, "owner"),
    ({"query": "pizza", "scope": "private"}, "scope"),
    ({"query": "pizza", "store": "st_x"}, "store"),
    ({"query": ""}, "query"),
    ({"query": "pizza", "mode": "fuzzy"}, "mode"),
    ({"knowledge_item_id": "../etc"}, "knowledge_item_id"),
    ({"knowledge_item_id": "pg_x", "knowledge_revision_id": "1"}, "knowledge_revision_id"),
    ({"knowledge_item_id": "pg_x", "knowledge_revision_id": "0-" + "0" * 64}, "knowledge_revision_id"),
    ({"query": "pizza", "knowledge_base_id": ""}, "knowledge_base_id"),
    ({"query": "pizza", "knowledge_base_id": "a\nb"}, "knowledge_base_id"),
])
def test_bad_arguments_name_the_field(lexical_engine, args, field):
    caller, _ = seed(lexical_engine)
    with pytest.raises(InvalidParams) as raised:
        kb.search_knowledge(lexical_engine, caller, args)
    assert raised.value.details["field"] == field


@pytest.mark.parametrize("alpha", [-0.01, 1.01, True, "0.5"])
def test_alpha_outside_zero_to_one_is_rejected(lexical_engine, alpha):
    caller, _ = seed(lexical_engine)
    with pytest.raises(InvalidParams) as raised:
        ask(lexical_engine, caller, query="pizza", alpha=alpha)
    assert raised.value.details["field"] == "alpha"


def test_a_null_parameter_is_one_left_out_even_beside_the_other_shape(lexical_engine):
    """A strict-mode client sends every parameter, null where it means none (docs/protocol-tools.md)."""
    caller, ids = seed(lexical_engine)
    query = {"query": "pizza", "mode": "lexical"}
    nulls = {key: None for key in (*kb.QUERY_KEYS, *kb.READ_KEYS)}
    assert ask(lexical_engine, caller, **{**nulls, **query}) == ask(lexical_engine, caller, **query)
    read = {"knowledge_item_id": ids["Team lunch"]}
    assert ask(lexical_engine, caller, **{**nulls, **read}) == ask(lexical_engine, caller, **read)


@pytest.mark.parametrize("max_results, error", [(0, InvalidParams), (51, LimitExceeded), (-1, InvalidParams),
                                                (True, InvalidParams), (2.5, InvalidParams)])
def test_max_results_outside_one_to_fifty_is_rejected(lexical_engine, max_results, error):
    caller, _ = seed(lexical_engine)
    with pytest.raises(error) as raised:  # over the maximum is limit_exceeded, like every oversize
        ask(lexical_engine, caller, query="pizza", max_results=max_results)
    assert raised.value.details["field"] == "max_results"


@pytest.mark.parametrize("args, field, error", [
    ({"offset": -1}, "offset", InvalidParams), ({"limit_chars": 0}, "limit_chars", InvalidParams),
    ({"limit_chars": kb.LIMIT_CHARS_MAX + 1}, "limit_chars", LimitExceeded), ({"offset": True}, "offset", InvalidParams),
])
def test_content_bounds_are_checked(lexical_engine, args, field, error):
    caller, ids = seed(lexical_engine)
    with pytest.raises(error) as raised:
        ask(lexical_engine, caller, knowledge_item_id=ids["Team lunch"], **args)
    assert raised.value.details["field"] == field


def test_results_are_bounded_by_max_results_and_long_content_by_the_result_window(lexical_engine):
    engine = lexical_engine
    caller, _ = seed(engine)
    for alpha in (0, 1):  # both ends are valid
        assert len(ask(engine, caller, query="the", max_results=2, alpha=alpha)["results"]) == 2
    long_body = "word " * 1000
    engine.save_page(caller, page("long", "Long note", "note", long_body))
    hit = next(r for r in ask(engine, caller, query="long note word", max_results=50)["results"]
               if r["title"] == "Long note")
    assert len(hit["content"]) == kb.RESULT_CONTENT_CHARS and hit["content_truncated"] is True
    assert len(ask(engine, caller, query="the", max_results=50)["results"]) <= 50


def test_a_knowledge_base_id_narrows_to_one_tag_and_an_unknown_one_is_not_found(lexical_engine):
    engine = lexical_engine
    caller, _ = seed(engine)
    assert "Team lunch" in titles(ask(engine, caller, query="the", max_results=10))
    narrowed = titles(ask(engine, caller, query="the", knowledge_base_id="ops", max_results=10))
    assert narrowed and "Team lunch" not in narrowed and set(narrowed) <= {p[0] for p in PAGES if "ops" in p[2]}
    with pytest.raises(NotFound) as raised:
        ask(engine, caller, query="the", knowledge_base_id="nobody-tags-this")
    assert raised.value.details["field"] == "knowledge_base_id"


# --- currentness ---------------------------------------------------------------------------------


def test_a_superseded_revision_never_appears_in_query_search_but_stays_addressable(kb_engine):
    engine = kb_engine
    caller, ids = seed(engine)
    item = ids["Database backups"]
    first = engine.get_record(caller, item)
    old_text = embedding_text("Database backups", PAGES[1][1])
    engine.save_page(caller, {"requestId": "rev2", "type": "note", "title": "Database backups", "id": item,
                              "expectedRevision": 1, "body": "Backups now run hourly to the offsite vault."})
    second = engine.get_record(caller, item)
    for mode in kb.MODES:
        results = ask(engine, caller, query=old_text, mode=mode, max_results=50)["results"]
        for result in results:
            assert result["knowledge_revision_id"] != f"1-{first['sha256']}", mode
        assert {r["knowledge_revision_id"] for r in results if r["knowledge_item_id"] == item} <= {
            f"2-{second['sha256']}"}
    assert ask(engine, caller, query="nightly thirty cold", mode="lexical")["results"] == []
    current = ask(engine, caller, knowledge_item_id=item)
    assert current["knowledge_revision_id"] == f"2-{second['sha256']}"
    assert current["content"] == "Backups now run hourly to the offsite vault.\n"
    pinned = ask(engine, caller, knowledge_item_id=item, knowledge_revision_id=f"1-{first['sha256']}")
    assert pinned["knowledge_revision_id"] == f"1-{first['sha256']}" and pinned["content"] == PAGES[1][1] + "\n"
    with pytest.raises(NotFound):
        ask(engine, caller, knowledge_item_id=item, knowledge_revision_id=f"1-{second['sha256']}")


def test_an_item_that_is_no_longer_published_is_not_readable_even_by_exact_revision(lexical_engine):
    engine = lexical_engine
    caller, _ = seed(engine)
    old = engine.remember(caller, {"requestId": "c1", "items": [claim("The harbour office opens at nine.",
                                                                      "opens at nine")]})["items"][0]["id"]
    old_sha = engine.get_record(caller, old)["sha256"]
    assert ask(engine, caller, knowledge_item_id=old)["knowledge_revision_id"] == f"1-{old_sha}"
    new = engine.remember(caller, {"requestId": "c2", "items": [claim(
        "The harbour office opens at ten.", "at ten now", kind="correction", replaces=old)]})["items"][0]["id"]
    found = ask(engine, caller, query="harbour office opens", mode="lexical")["results"]
    assert [r["knowledge_item_id"] for r in found if r["knowledge_item_id"] in (old, new)] == [new]
    for args in ({}, {"knowledge_revision_id": f"1-{old_sha}"}):
        with pytest.raises(NotFound):
            ask(engine, caller, knowledge_item_id=old, **args)


# --- modes ---------------------------------------------------------------------------------------


def test_semantic_search_finds_the_record_whose_text_it_is(kb_engine):
    engine = kb_engine
    caller, ids = seed(engine)
    for title, body, _ in PAGES:
        envelope = ask(engine, caller, query=embedding_text(title, body), mode="semantic", max_results=4)
        assert envelope["results"][0]["knowledge_item_id"] == ids[title]
        assert envelope["results"][0]["score"] == pytest.approx(1.0, abs=1e-4)
        assert "fallback" not in envelope
        scores = [result["score"] for result in envelope["results"]]
        assert scores == sorted(scores, reverse=True) and len(scores) == 4


def test_hybrid_alpha_one_is_the_lexical_order_and_alpha_zero_the_semantic_order(kb_engine):
    engine = kb_engine
    caller, _ = seed(engine)
    query = "the team review of the database"
    lexical = titles(ask(engine, caller, query=query, mode="lexical", max_results=4))
    semantic = titles(ask(engine, caller, query=query, mode="semantic", max_results=4))
    assert titles(ask(engine, caller, query=query, alpha=1.0, max_results=4))[:len(lexical)] == lexical
    assert titles(ask(engine, caller, query=query, alpha=0.0, max_results=4)) == semantic
    default = ask(engine, caller, query=query, max_results=4)
    assert default["mode"] == "hybrid" and all(0.0 <= r["score"] <= 1.0 for r in default["results"])


def test_hybrid_scores_are_the_alpha_weighted_normalised_scores(kb_engine):
    engine = kb_engine
    caller, _ = seed(engine)
    query = "pizza for the team"
    alpha = 0.3
    lexical = {r["title"]: r["score"] for r in ask(engine, caller, query=query, mode="lexical", max_results=50)[
        "results"]}
    semantic = {r["title"]: r["score"] for r in ask(engine, caller, query=query, mode="semantic", max_results=50)[
        "results"]}
    lexical_norm = {title: lexical.get(title, 0.0) for title in semantic}  # divided by the best, as in lexical
    semantic_norm = kb.normalized(semantic)
    hybrid = {r["title"]: r["score"] for r in ask(engine, caller, query=query, alpha=alpha, max_results=50)[
        "results"]}
    for title, score in hybrid.items():
        # (the per-mode scores were rounded to 6 places before normalising here)
        assert score == pytest.approx(alpha * lexical_norm[title] + (1 - alpha) * semantic_norm[title], abs=1e-4)


def test_rrf_fuses_the_lexical_and_vector_rankings_by_rank(kb_engine):
    engine = kb_engine
    caller, _ = seed(engine)
    query = "review the release timeline"
    lexical = titles(ask(engine, caller, query=query, mode="lexical", max_results=50))
    semantic = titles(ask(engine, caller, query=query, mode="semantic", max_results=50))
    fused = ask(engine, caller, query=query, mode="rrf", max_results=50)["results"]
    expected = {}
    for ranking in (lexical, semantic):
        for rank, title in enumerate(ranking, start=1):
            expected[title] = expected.get(title, 0.0) + 1 / (kb.RRF_K + rank)
    assert {r["title"] for r in fused} == set(expected)
    for result in fused:
        assert result["score"] == pytest.approx(expected[result["title"]], abs=1e-6)
    assert [r["score"] for r in fused] == sorted((r["score"] for r in fused), reverse=True)


def test_rrf_ordering_rewards_agreement_between_rankings():
    fused = kb.rrf([["a", "b", "c"], ["b", "d", "c"]], k=60)
    assert [key for key, _ in fused] == ["b", "c", "a", "d"]
    assert dict(fused)["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert dict(fused)["c"] == pytest.approx(2 / 63)
    assert dict(fused)["a"] == pytest.approx(1 / 61)
    assert kb.RRF_K == 60


def test_normalisation_maps_the_pool_onto_zero_to_one():
    assert kb.normalized({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert kb.normalized({"a": 0.7}) == {"a": 1.0}
    assert kb.normalized({"a": 0.0, "b": 0.0}) == {"a": 0.0, "b": 0.0}


@pytest.mark.parametrize("mode", ["semantic", "hybrid", "rrf"])
def test_without_an_installed_model_every_mode_falls_back_to_lexical_and_says_so(lexical_engine, mode):
    engine = lexical_engine
    caller, _ = seed(engine)
    lexical = ask(engine, caller, query="database backups review", mode="lexical")
    envelope = ask(engine, caller, query="database backups review", mode=mode)
    assert titles(envelope) == titles(lexical)
    assert envelope["fallback"]["to"] == "lexical"
    assert envelope["fallback"]["reason"] == kb.NO_EMBEDDING_MODEL
    assert "all-minilm-l6-v2-int8" in envelope["fallback"]["message"]
    assert envelope["fallback"]["results"] == len(envelope["results"]) > 0
    if mode != "rrf":
        assert [r["score"] for r in envelope["results"]] == pytest.approx([r["score"] for r in lexical["results"]])
    assert "fallback" not in lexical


def test_a_model_that_fails_to_load_falls_back_with_its_reason(state_dir, tmp_path):
    broken = tmp_path / "broken-embedder"
    broken.mkdir()
    for path in TINY_EMBEDDER.rglob("*"):
        if path.is_file():
            target = broken / path.relative_to(TINY_EMBEDDER)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    add_local(ModelStore(state_dir.models), broken)
    (broken / "onnx" / "model.onnx").write_bytes(b"not a model")
    write_config(state_dir, knowledgeRuntimeEnabled=True, embeddingModel="onnx/broken-embedder")
    with Engine(state_dir, watch=False, git=False) as engine:
        caller, _ = seed(engine)
        envelope = ask(engine, caller, query="pizza", mode="semantic")
        assert envelope["fallback"]["reason"] == kb.EMBEDDING_MODEL_FAILED
        assert "changed since it was registered" in envelope["fallback"]["message"]
        assert titles(envelope) == ["Team lunch"]


def test_records_without_a_vector_yet_fall_back_per_result_in_hybrid(state_dir, monkeypatch):
    with open_engine(state_dir, knowledgeRuntimeEnabled=False) as engine:
        caller, _ = seed(engine)  # written with the runtime off: nothing embedded on publication
        write_config(state_dir, knowledgeRuntimeEnabled=True, embeddingModel="onnx/tiny-embedder")
        monkeypatch.setattr(kb, "QUERY_EMBED_BUDGET", 1)
        envelope = ask(engine, caller, query="the team and the database", max_results=4)
        assert envelope["index_pending"] == len(PAGES) - 1
        assert envelope["fallback"]["reason"] == kb.NOT_EMBEDDED_YET
        assert 1 <= envelope["fallback"]["results"] <= len(envelope["results"])
        monkeypatch.setattr(kb, "QUERY_EMBED_BUDGET", 256)
        caught_up = ask(engine, caller, query="the team and the database", max_results=4)
        assert "fallback" not in caught_up and "index_pending" not in caught_up


# --- the vector index ----------------------------------------------------------------------------


def vectors_of(engine: Engine, caller: AgentCaller) -> tuple[Any, int]:
    store = engine.authorizer.authorize(caller).store
    runtime = engine.runtime(store)
    return runtime, runtime.call(lambda: runtime.vectors.count("private"))


def settled_vectors(engine: Engine, caller: AgentCaller) -> tuple[Any, int]:
    """``vectors_of`` once the vectors have followed every publication so far (they follow off the lane)."""
    store = engine.authorizer.authorize(caller).store
    assert engine.runtime(store).vectors_settled(30.0)
    return vectors_of(engine, caller)


def test_publications_update_the_vector_index_without_a_search(kb_engine):
    engine = kb_engine
    caller, ids = seed(engine)
    runtime, count = settled_vectors(engine, caller)
    assert count == len(PAGES)
    engine.save_page(caller, page("extra", "Harbour map", "note", "Where the boats moor."))
    assert settled_vectors(engine, caller)[1] == len(PAGES) + 1
    engine.save_page(caller, {"requestId": "rev", "type": "note", "title": "Team lunch", "id": ids["Team lunch"],
                              "expectedRevision": 1, "body": "Lunch moved to Thursdays."})
    settled_vectors(engine, caller)
    rows = runtime.call(lambda: runtime.vectors._db().execute(
        "SELECT revision FROM items WHERE record_id = ?", (ids["Team lunch"],)).fetchall())
    assert rows == [(2,)]


def test_publications_leave_the_vector_index_alone_while_the_runtime_is_off(state_dir):
    with open_engine(state_dir, knowledgeRuntimeEnabled=False) as engine:
        caller, _ = seed(engine)
        assert settled_vectors(engine, caller)[1] == 0


def test_the_vector_index_is_rebuilt_by_reindex_and_after_it_is_deleted(kb_engine):
    engine = kb_engine
    caller, ids = seed(engine)
    settled_vectors(engine, caller)
    rebuilt = engine.reindex()
    assert rebuilt[0]["vectors"] == {"indexed": len(PAGES), "embedded": 0, "cached": len(PAGES), "removed": 0,
                                     "pending": 0}
    runtime, _ = settled_vectors(engine, caller)  # the feed done with the publications, not refilling the file
    path = runtime.vectors.path
    runtime.call(runtime.vectors.close)
    path.unlink()
    Path(f"{path}-wal").unlink(missing_ok=True)
    assert vectors_of(engine, caller)[1] == 0
    top = ask(engine, caller, query=embedding_text(*PAGES[2][:2]), mode="semantic")["results"][0]
    assert top["knowledge_item_id"] == ids["Team lunch"]
    assert vectors_of(engine, caller)[1] == len(PAGES)


def test_a_damaged_vector_file_is_replaced_not_trusted(kb_engine):
    engine = kb_engine
    caller, ids = seed(engine)
    runtime, _ = settled_vectors(engine, caller)  # no chunk in the model still to be stored in the old file
    runtime.call(runtime.vectors.close)
    for suffix in ("-wal", "-shm"):
        Path(f"{runtime.vectors.path}{suffix}").unlink(missing_ok=True)
    runtime.vectors.path.write_bytes(b"this is not a database" * 100)
    top = ask(engine, caller, query=embedding_text(*PAGES[0][:2]), mode="semantic")
    assert "fallback" not in top and top["results"][0]["knowledge_item_id"] == ids["Deployment runbook"]


def test_the_tool_is_served_over_the_socket_with_its_schema(kb_engine):
    engine = kb_engine
    caller, ids = seed(engine)
    dispatcher, session = Dispatcher(engine), Session()
    dispatcher.handle(session, _message("initialize", {"_meta": {"knowledge": {
        "token": caller.token, "audience": {"kind": "owner-private"}}}}))
    listed = {tool["name"]: tool for tool in dispatcher.handle(session, _message("tools/list", {}))["result"]["tools"]}
    schema = listed["search_knowledge"]["inputSchema"]
    assert set(schema["properties"]) == set(kb.QUERY_KEYS) | set(kb.READ_KEYS)
    assert schema["additionalProperties"] is False
    reply = dispatcher.handle(session, _message("tools/call", {"name": "search_knowledge", "arguments": {
        "query": "pizza", "mode": "lexical"}}))
    assert reply["result"]["structuredContent"]["results"][0]["knowledge_item_id"] == ids["Team lunch"]
    mixed = dispatcher.handle(session, _message("tools/call", {"name": "search_knowledge", "arguments": {
        "query": "pizza", "knowledge_item_id": ids["Team lunch"]}}))
    assert mixed["result"]["isError"] is True
    assert tool_answer(mixed["result"])["reason"] == "invalid_params"


def test_knowledge_reindex_rebuilds_the_vectors_too(state_dir, capsys):
    from engine.cli.commands import main

    with open_engine(state_dir) as engine:
        caller, _ = seed(engine)
        settled_vectors(engine, caller)
    assert main(["--state-dir", str(state_dir.root), "reindex"]) == 0
    out = capsys.readouterr().out
    assert f"{len(PAGES)} records indexed, {len(PAGES)} vectors (0 texts embedded, {len(PAGES)} from the cache)" in out


@pytest.mark.parametrize("mode", ["lexical", "semantic", "rrf"])
def test_alpha_beside_a_mode_that_does_not_use_it_is_refused(lexical_engine, mode):
    """It was read and ignored: a caller tuning alpha in rrf mode saw nothing change and no word why."""
    caller, _ = seed(lexical_engine)
    with pytest.raises(InvalidParams) as raised:
        ask(lexical_engine, caller, query="pizza", mode=mode, alpha=0.8)
    assert raised.value.details["field"] == "alpha" and mode in raised.value.message


def test_query_search_leaves_out_claims_that_do_not_hold_now(lexical_engine):
    caller, _ = seed(lexical_engine)
    lexical_engine.remember(caller, {"requestId": "m-validity", "items": [
        {"text": "The ferry leaves at nine", "claimKind": "fact", "excerpt": "nine", "validTo": "2020-01-01"},
        {"text": "The ferry leaves at ten", "claimKind": "fact", "excerpt": "ten", "validFrom": "2020-01-02"}]})
    found = titles(ask(lexical_engine, caller, query="ferry leaves", mode="lexical"))
    assert "The ferry leaves at ten" in found and "The ferry leaves at nine" not in found
