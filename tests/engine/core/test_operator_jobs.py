"""Long operator work as jobs: progress, results, readable failures, cancellation, and the gate replay job."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine.core.errors import InvalidParams, NotFound
from engine.gate.turn import gate_turn
from engine.operator.gate_operator import handlers as gate_handlers
from engine.core.jobs import CANCELLED, DONE, FAILED, JobCancelled, Jobs, handlers
from engine.service import Engine
from models.errors import ModelVerifyFailed
from tests.engine.gate_helpers import FakeRerank, owner_caller, rerank_engine, seed


@pytest.fixture
def jobs() -> Iterator[Jobs]:
    made = Jobs()
    yield made
    made.close()


def test_a_job_reports_progress_and_its_result(jobs: Jobs) -> None:
    release = threading.Event()
    reported = threading.Event()

    def work(context: Any) -> dict:
        context.progress(1, 4, unit="steps", message="first step")
        reported.set()
        release.wait(10)
        return {"answer": 42}

    job = jobs.start("test", "key", "A test", work)
    assert job["state"] == "running" and job["kind"] == "test" and job["id"].startswith("job_")
    assert reported.wait(10)
    running = jobs.get(job["id"])
    assert running["progress"] == {"done": 1, "total": 4, "unit": "steps", "message": "first step", "phase": "",
                                   "cancellable": True}
    assert "result" not in running
    assert jobs.start("test", "key", "Again", work)["id"] == job["id"], "the same key is the same job"
    release.set()
    done = jobs.wait(job["id"], 10)
    assert done["state"] == DONE and done["result"] == {"answer": 42} and done["finishedAt"]
    assert [listed["id"] for listed in jobs.list("test")] == [job["id"]] and jobs.list("other") == []


def test_failures_are_readable_and_never_tracebacks(jobs: Jobs) -> None:
    def engine_error(context: Any) -> None:
        raise InvalidParams("timeoutMs is wrong", field="timeoutMs")

    def model_error(context: Any) -> None:
        raise ModelVerifyFailed("config.json arrived with another sha256")

    def bug(context: Any) -> None:
        raise ZeroDivisionError("secret detail")

    results = [jobs.wait(jobs.start("test", key, key, work)["id"], 10)
               for key, work in (("a", engine_error), ("b", model_error), ("c", bug))]
    assert [r["state"] for r in results] == [FAILED] * 3
    # An engine error keeps its details (the field; the file and place of a bad import input).
    assert results[0]["error"] == {"reason": "invalid_params", "message": "timeoutMs is wrong", "field": "timeoutMs"}
    assert results[1]["error"] == {"reason": "verify_failed", "message": "config.json arrived with another sha256"}
    assert results[2]["error"] == {"reason": "internal", "message": "Unexpected problem (ZeroDivisionError)"}


def test_cancelling_stops_the_work_at_its_next_check(jobs: Jobs) -> None:
    started, release = threading.Event(), threading.Event()
    steps: list[int] = []

    def work(context: Any) -> None:
        started.set()
        release.wait(10)
        for step in range(100):
            context.progress(step, 100)
            steps.append(step)

    job = jobs.start("test", "key", "Cancel me", work)
    assert started.wait(10)
    assert jobs.cancel(job["id"])["state"] == "cancelling"
    release.set()
    assert jobs.wait(job["id"], 10)["state"] == CANCELLED
    assert steps == []
    assert jobs.cancel(job["id"])["state"] == CANCELLED, "cancelling a finished job changes nothing"


def test_close_cancels_and_joins_running_jobs() -> None:
    jobs = Jobs()
    started = threading.Event()
    seen: list[bool] = []

    def work(context: Any) -> None:
        started.set()
        while not context.cancelled:
            threading.Event().wait(0.01)
        seen.append(True)
        raise JobCancelled()

    job = jobs.start("test", "key", "Long", work)
    assert started.wait(10)
    jobs.close()
    assert seen == [True] and jobs.get(job["id"])["state"] == CANCELLED
    with pytest.raises(InvalidParams):
        jobs.start("test", "other", "Too late", lambda context: None)


def test_the_operator_handlers_check_their_parameters(jobs: Jobs) -> None:
    methods = handlers(jobs)
    with pytest.raises(NotFound):
        methods["job"]({"job": "job_missing"})
    with pytest.raises(InvalidParams):
        methods["cancelJob"]({})
    with pytest.raises(InvalidParams):
        methods["jobs"]({"kind": "pull", "extra": 1})
    assert methods["jobs"]({}) == {"jobs": []}


@pytest.fixture
def gate_engine(tmp_path: Path) -> Iterator[tuple[Engine, FakeRerank]]:
    with rerank_engine(tmp_path, {"Alice Martin": 0.9, "Harbour museum": 0.6},
                       {"mode": "shadow", "journal": True}) as running:
        yield running


def test_the_gate_replay_job_reports_each_turn_and_answers_like_gate_replay(gate_engine) -> None:
    engine, fake = gate_engine
    caller = owner_caller(engine)
    seed(engine, caller)
    for message in ("mural museum", "the museum", "alice mural"):
        gate_turn(engine, caller, {"message": message})
    methods = gate_handlers(engine)
    with pytest.raises(InvalidParams):
        methods["startGateReplay"]({"agent": "main", "recallGate": {"highThreshold": 7}})

    job = methods["startGateReplay"]({"agent": "main", "recallGate": {"highThreshold": 0.5}})
    finished = engine.jobs.wait(job["id"], 30)
    assert finished["state"] == DONE and finished["kind"] == "replay"
    assert finished["progress"]["done"] == 3 and finished["progress"]["total"] == 3
    result = finished["result"]
    assert len(result["turns"]) == 3 and result["settings"]["highThreshold"] == 0.5
    assert {turn["message"] for turn in result["turns"]} == {"mural museum", "the museum", "alice mural"}
    direct = methods["gateReplay"]({"agent": "main", "recallGate": {"highThreshold": 0.5}})
    assert [t["inject"] for t in direct["turns"]] == [t["inject"] for t in result["turns"]]


def test_a_cancelled_replay_stops_between_turns(gate_engine) -> None:
    engine, fake = gate_engine
    caller = owner_caller(engine)
    seed(engine, caller)
    for message in ("mural museum", "the museum", "alice mural"):
        gate_turn(engine, caller, {"message": message})
    methods = gate_handlers(engine)
    blocked, release = threading.Event(), threading.Event()
    respond = fake.respond

    def slow(request: dict) -> Any:
        blocked.set()
        release.wait(10)
        return respond(request)

    fake.respond = slow
    sent = len(fake.requests)
    job = methods["startGateReplay"]({"agent": "main", "recallGate": {"timeoutMs": 10_000}})
    assert blocked.wait(10)
    engine.jobs.cancel(job["id"])
    release.set()
    assert engine.jobs.wait(job["id"], 30)["state"] == CANCELLED
    assert len(fake.requests) == sent + 1, "no turn after the cancelled one was sent"
