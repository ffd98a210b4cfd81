"""The ``rerank`` Decision provider against a fake ``/rerank`` endpoint on loopback."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from engine.state.config import Settings
from engine.decision.runtime import BooleanQuestion, ChoiceQuestion, DecisionRuntime
from engine.core.errors import DecisionUnavailable, InvalidResponse
from models.installed import ModelStore

QUERY = "when is the budget report due"
DOCS = ["The budget report is due on Friday.", "Alice paints.", "Bob plays the guitar."]
Reply = tuple[int, Any]   # status, JSON-able body (or bytes sent as they are)


class FakeRerank:
    """Answers POST /rerank with ``respond(request_json)``; records every request.  With ``hold`` it answers only
    once the test sets ``released`` (a slow endpoint, as slow as the test needs, whatever the machine's load)."""

    def __init__(self, respond: Callable[[dict[str, Any]], Reply], hold: bool = False) -> None:
        self.respond = respond
        self.hold, self.released = hold, threading.Event()
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, **body})
                status, reply = fake.respond(body)
                if fake.hold:
                    fake.released.wait(30)
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass   # the client gave up (timeout tests)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-rerank", daemon=True)

    def forms(self) -> list[str]:
        return ["texts" if "texts" in request else "documents" for request in self.requests]


@pytest.fixture
def serve() -> Iterator[Callable[..., FakeRerank]]:
    started: list[FakeRerank] = []

    def start(respond: Callable[[dict[str, Any]], Reply], hold: bool = False) -> FakeRerank:
        fake = FakeRerank(respond, hold)
        fake.thread.start()
        started.append(fake)
        return fake

    yield start
    for fake in started:
        fake.released.set()
        fake.server.shutdown()
        fake.server.server_close()
        fake.thread.join()


def runtime_for(base_url: str, tmp_path: Path, model: str = "BAAI/bge-reranker-v2-m3",
                settings: list[Settings] | None = None) -> DecisionRuntime:
    current = settings or [Settings(decision_model=f"rerank/{model}", rerank_base_url=base_url)]
    return DecisionRuntime(lambda: current[0], ModelStore(tmp_path / "models"))


def ask(runtime: DecisionRuntime, documents: list[str] = DOCS, seconds: float = 5.0, **options: Any):
    questions = [BooleanQuestion(document, f"page-{i}") for i, document in enumerate(documents)]
    return runtime.ask_boolean(QUERY, questions, deadline=time.monotonic() + seconds, **options)


def cohere(scores: list[float]) -> dict[str, Any]:
    # Cohere, Jina, vLLM and Infinity answer sorted by relevance, not by index.
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return {"id": "x", "results": [{"index": i, "relevance_score": scores[i]} for i in order]}


SCORES = [0.93, 0.02, 0.40]


# --- response shapes ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["cohere", "voyage", "tei"])
def test_each_response_shape_gives_probabilities_by_index(serve, tmp_path: Path, shape: str) -> None:
    bodies = {
        "cohere": cohere(SCORES),
        "voyage": {"object": "list", "data": [{"index": i, "relevance_score": s} for i, s in enumerate(SCORES)],
                   "model": "rerank-2"},
        "tei": [{"index": i, "score": s} for i, s in reversed(list(enumerate(SCORES)))],
    }
    fake = serve(lambda body: (200, bodies[shape]))
    runtime = runtime_for(fake.url, tmp_path)

    result = ask(runtime)

    assert [(a.key, a.probability_true, a.value) for a in result.answers] == [
        ("page-0", 0.93, True), ("page-1", 0.02, False), ("page-2", 0.40, False)]
    assert result.unscored == () and result.model == "rerank/BAAI/bge-reranker-v2-m3"
    assert fake.requests == [{"path": "/rerank", "model": "BAAI/bge-reranker-v2-m3", "query": QUERY,
                              "documents": DOCS}]
    assert runtime.status().state == "ready"


def test_a_base_url_with_a_path_keeps_it(serve, tmp_path: Path) -> None:
    fake = serve(lambda body: (200, cohere(SCORES)))
    ask(runtime_for(fake.url + "/v1/", tmp_path))
    assert fake.requests[0]["path"] == "/v1/rerank"


def test_a_rejected_request_is_retried_once_with_texts_and_the_form_is_remembered(serve, tmp_path: Path) -> None:
    def tei_only(body: dict[str, Any]) -> Reply:
        if "texts" not in body:
            return 422, {"error": "missing field `texts`"}
        return 200, [{"index": i, "score": s} for i, s in enumerate(SCORES)]

    fake = serve(tei_only)
    other = serve(lambda body: (200, cohere(SCORES)))
    runtime = runtime_for(fake.url, tmp_path)

    first = ask(runtime)
    assert [a.probability_true for a in first.answers] == SCORES
    assert fake.forms() == ["documents", "texts"] and fake.requests[1]["texts"] == DOCS
    ask(runtime, ["another document"] * 3)
    assert fake.forms() == ["documents", "texts", "texts"]      # remembered: one request
    # Remembered per endpoint: another endpoint still starts with documents.
    ask(runtime_for(other.url, tmp_path))
    assert other.forms() == ["documents"]


def test_both_forms_rejected_is_unavailable_after_exactly_two_requests(serve, tmp_path: Path) -> None:
    fake = serve(lambda body: (400, {"error": "bad request"}))
    with pytest.raises(DecisionUnavailable) as raised:
        ask(runtime_for(fake.url, tmp_path))
    assert raised.value.details["kind"] == "rejected" and raised.value.details["status"] == 400
    assert fake.forms() == ["documents", "texts"]


@pytest.mark.parametrize("status, kind", [(429, "overloaded"), (401, "unauthorized"), (500, "http"), (503, "http")])
def test_statuses_that_are_not_a_form_rejection_are_not_retried(serve, tmp_path: Path, status: int,
                                                                kind: str) -> None:
    fake = serve(lambda body: (status, {"error": "no"}))
    with pytest.raises(DecisionUnavailable) as raised:
        ask(runtime_for(fake.url, tmp_path))
    assert raised.value.details["kind"] == kind and len(fake.requests) == 1


# --- invalid answers ----------------------------------------------------------------------------


@pytest.mark.parametrize("reply, message", [
    (cohere([0.93, 1.5, 0.4]), "outside 0..1"),
    (cohere([0.93, -0.01, 0.4]), "outside 0..1"),
    ([{"index": 0, "score": 2.1387}, {"index": 1, "score": 2.4609}, {"index": 2, "score": -1.6729}],
     "outside 0..1"),                                            # raw logits, e.g. llama.cpp: never rescaled
    ({"results": [{"index": 0}, {"index": 1, "relevance_score": 0.1}, {"index": 2, "relevance_score": 0.2}]},
     "no numeric score"),
    ({"results": [{"index": 0, "relevance_score": True}, {"index": 1, "relevance_score": 0.1},
                  {"index": 2, "relevance_score": 0.2}]}, "no numeric score"),
    ({"results": [{"relevance_score": 0.5}]}, "no valid index"),
    ({"results": [{"index": 0, "relevance_score": 0.5}]}, "no score for document"),
    ({"results": [{"index": 7, "relevance_score": 0.5}]}, "no valid index"),
    ({"results": [{"index": 0, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.5},
                  {"index": 1, "relevance_score": 0.5}]}, "twice"),
    ({"scores": [0.1, 0.2, 0.3]}, "neither results"),
    (b"<html>502 Bad Gateway</html>", "did not answer JSON"),
    ({"results": [0.1, 0.2, 0.3]}, "not an object"),
])
def test_answers_outside_the_contract_are_invalid_responses(serve, tmp_path: Path, reply: Any,
                                                            message: str) -> None:
    fake = serve(lambda body: (200, reply))
    with pytest.raises(InvalidResponse, match=message) as raised:
        ask(runtime_for(fake.url, tmp_path))
    assert raised.value.reason == "invalid-response"


# --- time and reachability -------------------------------------------------------------------------


def test_a_slow_endpoint_times_out_at_the_deadline(serve, tmp_path: Path) -> None:
    fake = serve(lambda body: (200, cohere(SCORES)), hold=True)   # answers only after the call returned
    started = time.monotonic()
    with pytest.raises(DecisionUnavailable) as raised:
        ask(runtime_for(fake.url, tmp_path), seconds=0.3)
    elapsed = time.monotonic() - started
    # The endpoint answers only when released: had the call waited for it, it would have scored, 30 s later.
    assert raised.value.details["kind"] == "timeout"
    assert 0.25 <= elapsed   # and it did not give up before its deadline


def test_an_unreachable_endpoint_is_unavailable(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(DecisionUnavailable) as raised:
        ask(runtime_for(f"http://127.0.0.1:{port}", tmp_path))
    assert raised.value.details["kind"] == "unreachable"


def test_with_no_time_left_nothing_is_sent_and_everything_is_unscored(serve, tmp_path: Path) -> None:
    fake = serve(lambda body: (200, cohere(SCORES)))
    result = ask(runtime_for(fake.url, tmp_path), seconds=-0.001)
    assert result.answers == () and result.unscored == ("page-0", "page-1", "page-2")
    assert fake.requests == []


def test_authority_is_checked_before_every_dispatch_and_retry(serve, tmp_path: Path) -> None:
    fake = serve(lambda body: (200, [{"index": i, "score": s} for i, s in enumerate(SCORES)])
                 if "texts" in body else (404, {"error": "unknown route"}))
    checks: list[int] = []
    ask(runtime_for(fake.url, tmp_path), before_dispatch=lambda: checks.append(len(fake.requests)))
    assert checks == [0, 1] and fake.forms() == ["documents", "texts"]

    def revoked() -> None:
        raise PermissionError("the conversation lost its grant")

    quiet = serve(lambda body: (200, cohere(SCORES)))
    with pytest.raises(PermissionError):
        ask(runtime_for(quiet.url, tmp_path), before_dispatch=revoked)
    assert quiet.requests == []


def test_a_choice_over_a_rerank_endpoint_cuts_at_the_none_option(serve, tmp_path: Path) -> None:
    # Document 0 is the none option; the fake scores it 0.3.
    fake = serve(lambda body: (200, cohere([0.3, 0.9, 0.1, 0.5])))
    runtime = runtime_for(fake.url, tmp_path)
    result = runtime.ask_choice(QUERY, ChoiceQuestion(("budget page", "paint page", "report page")),
                                deadline=time.monotonic() + 5)
    assert fake.requests[0]["documents"][0] == "None of these"
    assert result.chosen == (0, 2) and result.none_score == 0.3 and result.scores == {0: 0.9, 1: 0.1, 2: 0.5}


def test_a_changed_base_url_takes_effect_on_the_next_question(serve, tmp_path: Path) -> None:
    first, second = serve(lambda body: (200, cohere(SCORES))), serve(lambda body: (200, cohere(SCORES)))
    settings = [Settings(decision_model="rerank/m", rerank_base_url=first.url)]
    runtime = runtime_for(first.url, tmp_path, settings=settings)
    ask(runtime)
    settings[0] = Settings(decision_model="rerank/m", rerank_base_url=second.url)
    ask(runtime)
    assert len(first.requests) == 1 and len(second.requests) == 1
