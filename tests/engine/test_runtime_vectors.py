"""Vectors follow publications off the lane: a write never waits for the embedding model.

The committed tiny embedder runs for real; a gate around its ``embed`` holds
the vectors thread inside the model for as long as a test needs, so what a
publication, a search and ``close()`` do meanwhile is observable without a
sleep or a timing assumption.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

import pytest

from engine.access.authority import AgentCaller
from engine.index.embedding import RunSettings
from engine.index.vectors import embedding_text
from engine.search import knowledge_base as kb
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.search.test_knowledge_base import PAGES, ask, open_engine, seed, vectors_of
from tests.helpers import page

WAIT = 30.0  # seconds: a bound on waits that only a broken implementation reaches


class Gate:
    """Wraps an embedder's ``embed``: calls from the vectors thread wait at the gate until it opens."""

    def __init__(self, embed: Callable[..., Any]) -> None:
        self._embed = embed
        self.open = threading.Event()
        self.entered = threading.Event()
        self.calls: list[tuple[str, int]] = []  # (thread name, texts)

    def __call__(self, texts: Any, **options: Any) -> Any:
        name = threading.current_thread().name
        self.calls.append((name, len(texts)))
        if name.startswith("vectors-"):
            self.entered.set()
            assert self.open.wait(WAIT), "the gate was never opened"
        return self._embed(texts, **options)

    def hold(self) -> None:
        """Close the gate again (after letting seeding through)."""
        self.open.clear()
        self.entered.clear()
        self.calls.clear()

    def threads(self) -> set[str]:
        return {name.split("-")[0] for name, _ in self.calls}


class HeldRuns:
    """Holds the model's runs made by the threads ``held`` picks, one text a run: each waits, counted, until
    ``release`` is set, so a test can stop the engine while a long embedding is inside the model."""

    def __init__(self, embedder: Any, monkeypatch: pytest.MonkeyPatch, held: Callable[[str], bool]) -> None:
        self.runs: list[int] = []
        self.inside, self.release = threading.Event(), threading.Event()
        self._run, self._held = embedder._run, held
        monkeypatch.setattr(embedder, "settings", RunSettings(rows=1))  # one text a run: an embedding is many
        monkeypatch.setattr(embedder, "_run", self)

    def __call__(self, rows: Any) -> Any:
        if self._held(threading.current_thread().name):
            self.runs.append(len(rows))
            self.inside.set()
            assert self.release.wait(WAIT), "the run was never released"
        return self._run(rows)


def vectors_thread(name: str) -> bool:
    return name.startswith("vectors-")


@pytest.fixture
def gated(state_dir: StateDir, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Engine, Gate]]:
    engine = open_engine(state_dir)
    try:
        embedder = engine.embeddings.current()
        assert embedder is not None
        gate = Gate(embedder.embed)
        monkeypatch.setattr(embedder, "embed", gate)
        yield engine, gate
    finally:
        gate.open.set()
        engine.close()


def settle(engine: Engine, caller: AgentCaller) -> Any:
    runtime = vectors_of(engine, caller)[0]
    assert runtime.vectors_settled(WAIT)
    return runtime


def test_a_publication_is_acknowledged_while_the_model_is_held_and_vectors_follow(gated):
    engine, gate = gated
    caller = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"}, "laptop-main")
    receipt = engine.save_page(caller, page("first", "Harbour map", "note", "Where the boats moor."))
    assert gate.entered.wait(WAIT)  # the vectors thread is inside the model now, and stays there
    second = engine.save_page(caller, page("second", "Ferry times", "note", "Boats leave on the hour."))
    assert receipt["id"] and second["id"]  # both acknowledged while the model was held
    runtime = vectors_of(engine, caller)[0]
    assert not runtime.vectors_settled(0)
    assert vectors_of(engine, caller)[1] == 0
    gate.open.set()
    settle(engine, caller)
    assert vectors_of(engine, caller)[1] == 2
    assert gate.threads() == {"vectors"}  # never the lane


def test_a_burst_of_publications_is_embedded_together(gated):
    engine, gate = gated
    caller = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"}, "laptop-main")
    engine.save_page(caller, page("first", "Harbour map", "note", "Where the boats moor."))
    assert gate.entered.wait(WAIT)
    for number in range(6):
        engine.save_page(caller, page(f"burst{number}", f"Tide table {number}", "note", f"High water at {number}."))
    gate.open.set()
    settle(engine, caller)
    assert vectors_of(engine, caller)[1] == 7
    assert [texts for _, texts in gate.calls] == [1, 6]  # the held one, then the whole burst in one run


def test_a_search_while_the_model_is_held_still_finds_the_new_record(gated):
    engine, gate = gated
    gate.open.set()
    caller, ids = seed(engine)
    settle(engine, caller)
    gate.hold()
    receipt = engine.save_page(caller, page("new", "Harbour map", "note", "Where the boats moor."))
    assert gate.entered.wait(WAIT)
    text = embedding_text("Harbour map", "Where the boats moor.")
    envelope = ask(engine, caller, query=text, mode="semantic")  # the search catches up on its own
    assert envelope["results"][0]["knowledge_item_id"] == receipt["id"]
    assert "fallback" not in envelope and "index_pending" not in envelope
    gate.open.set()
    runtime = settle(engine, caller)
    rows = runtime.call(lambda: runtime.vectors._db().execute(
        "SELECT COUNT(*), COUNT(DISTINCT path) FROM items").fetchall())
    assert rows == [(len(PAGES) + 1, len(PAGES) + 1)]  # what the search indexed meanwhile is not added twice


def test_a_search_that_may_not_embed_discloses_what_waits(gated, monkeypatch):
    engine, gate = gated
    gate.open.set()
    caller, _ = seed(engine)
    settle(engine, caller)
    gate.hold()
    engine.save_page(caller, page("new", "Harbour map", "note", "the team and the database boats"))
    assert gate.entered.wait(WAIT)
    monkeypatch.setattr(kb, "QUERY_EMBED_BUDGET", 0)
    envelope = ask(engine, caller, query="the team and the database boats", max_results=5)
    assert envelope["index_pending"] == 1
    assert envelope["fallback"]["reason"] == kb.NOT_EMBEDDED_YET and envelope["fallback"]["results"] >= 1


def test_close_with_work_pending_is_clean_and_the_next_start_catches_up(state_dir, monkeypatch):
    engine = open_engine(state_dir)
    embedder = engine.embeddings.current()
    gate = Gate(embedder.embed)
    monkeypatch.setattr(embedder, "embed", gate)
    caller, ids = seed(engine)
    assert gate.entered.wait(WAIT)
    for number in range(3):
        engine.save_page(caller, page(f"late{number}", f"Late note {number}", "note", f"Written at {number}."))
    runtime = vectors_of(engine, caller)[0]
    closing = threading.Thread(target=engine.close, name="test-close")
    closing.start()
    gate.open.set()  # the chunk in the model finishes; nothing new starts
    closing.join(WAIT)
    assert not closing.is_alive()
    assert not runtime.vector_feed.alive and runtime.vectors_settled(0)
    with Engine(state_dir, watch=False, git=False) as reopened:
        found = ask(reopened, caller, query=embedding_text(*PAGES[2][:2]), mode="semantic")
        assert found["results"][0]["knowledge_item_id"] == ids["Team lunch"]
        assert "index_pending" not in found
        assert vectors_of(reopened, caller)[1] == len(PAGES) + 3


def test_close_leaves_a_chunk_between_two_runs_of_the_model(state_dir, monkeypatch):
    """A chunk is many runs of the model (a long page's passages, a large import): close stops the vectors
    thread after the run in progress, so it neither waits for the rest of the chunk nor leaves the model's
    threads running when the process exits (which aborted ``knowledge import`` with exit 134); nothing of
    the unfinished chunk is stored and the next start embeds it."""
    engine = open_engine(state_dir)
    held = HeldRuns(engine.embeddings.current(), monkeypatch, vectors_thread)  # the chunk is several runs
    caller, ids = seed(engine)
    assert held.inside.wait(WAIT)
    feed = vectors_of(engine, caller)[0].vector_feed
    closing = threading.Thread(target=engine.close, name="test-close")
    closing.start()
    for _ in range(int(WAIT * 100)):  # until close has asked the vectors thread to stop
        if feed._stop.wait(0.01):
            break
    held.release.set()
    closing.join(WAIT)
    assert not closing.is_alive() and not feed.alive
    assert held.runs == [1]  # the run in progress finished; the chunk's other texts never reached the model
    with Engine(state_dir, watch=False, git=False) as reopened:
        found = ask(reopened, caller, query=embedding_text(*PAGES[2][:2]), mode="semantic")
        assert found["results"][0]["knowledge_item_id"] == ids["Team lunch"]
        assert vectors_of(reopened, caller)[1] == len(PAGES)


def test_close_right_after_a_publication_is_clean(state_dir):
    engine = open_engine(state_dir)
    caller, _ = seed(engine)
    engine.close()  # whatever the vectors thread was doing, it stops and the store closes
    with Engine(state_dir, watch=False, git=False) as reopened:
        assert "index_pending" not in ask(reopened, caller, query="pizza", mode="semantic")


# --- a catch-up split across lane steps ----------------------------------------------------------


def forget(runtime: Any, *, path: str | None = None) -> None:
    """Drop the vectors of one record (or all) and the partition's progress, as if never indexed."""
    def drop() -> None:
        db = runtime.vectors._db()
        where, values = ("WHERE path = ?", (path,)) if path is not None else ("", ())
        db.execute(f"DELETE FROM vec_items WHERE id IN (SELECT id FROM items {where})", values)
        db.execute(f"DELETE FROM items {where}", values)
        db.execute("DELETE FROM progress")
    runtime.call(drop)


def test_a_catch_up_through_a_lane_tolerates_what_happens_between_its_steps(kb_engine):
    engine = kb_engine
    caller, _ = seed(engine)
    runtime = settle(engine, caller)
    embedder = engine.embeddings.current()
    path = runtime.call(lambda: runtime.vectors._db().execute("SELECT path FROM items LIMIT 1").fetchall())[0][0]
    forget(runtime, path=path)
    steps: list[str] = []

    def lane(step: Callable[[], Any]) -> Any:
        steps.append("step")
        if len(steps) == 3:  # between reading the chunk and storing it, another catch-up does the whole work
            assert runtime.call(lambda: runtime.vectors.catch_up("private", embedder)).pending == 0
        return runtime.call(step)

    done = runtime.vectors.catch_up("private", embedder, lane=lane)
    assert len(steps) == 4  # plan, read the chunk, store it, finish
    assert (done.indexed, done.pending) == (len(PAGES), 0)
    rows = runtime.call(lambda: runtime.vectors._db().execute(
        "SELECT COUNT(*), COUNT(DISTINCT path) FROM items").fetchall())
    assert rows == [(len(PAGES), len(PAGES))]


def test_a_catch_up_through_a_lane_stops_when_another_model_takes_the_file(kb_engine):
    from engine.index.embedding import Embedder

    engine = kb_engine
    caller, _ = seed(engine)
    runtime = settle(engine, caller)
    embedder = engine.embeddings.current()
    other = Embedder(embedder.model, max_tokens=64)  # another fingerprint
    other.load()
    forget(runtime)

    def lane(step: Callable[[], Any]) -> Any:
        result = runtime.call(step)
        runtime.call(lambda: runtime.vectors._use_model(other))  # a search with the new model, in between
        return result

    done = runtime.vectors.catch_up("private", embedder, lane=lane)
    assert (done.indexed, done.embedded, done.pending) == (0, 0, len(PAGES))
    assert runtime.call(lambda: runtime.vectors._holds(other))


@pytest.fixture
def kb_engine(state_dir: StateDir) -> Iterator[Engine]:
    with open_engine(state_dir) as opened:
        yield opened


def test_a_catch_up_asked_to_stop_ends_before_its_next_chunk(kb_engine, monkeypatch):
    from engine.index import vectors as vectors_module

    engine = kb_engine
    caller, _ = seed(engine)
    runtime = settle(engine, caller)
    embedder = engine.embeddings.current()
    forget(runtime)
    monkeypatch.setattr(vectors_module, "EMBED_CHUNK", 1)
    asked: list[bool] = []

    def stop() -> bool:
        asked.append(True)
        return len(asked) > 2  # two chunks, then stop

    done = runtime.vectors.catch_up("private", embedder, lane=runtime.call, stop=stop)
    assert (done.indexed, done.pending) == (2, len(PAGES) - 2)
    assert runtime.call(lambda: runtime.vectors.catch_up("private", embedder)).pending == 0


def test_close_during_a_reindex_ends_its_vectors_between_two_runs_of_the_model(state_dir, monkeypatch):
    """``knowledge reindex`` embeds on the store's lane: Ctrl+C closes the engine, and close no longer waits for
    the whole partition to be embedded (a minute and more on a large store), only for the run in progress;
    the next start embeds the rest."""
    engine = open_engine(state_dir)
    caller, ids = seed(engine)
    settle(engine, caller)
    # One text a run, so the rebuild is many runs; the lane's runs are held, for the reindex.
    held = HeldRuns(engine.embeddings.current(), monkeypatch, lambda name: not vectors_thread(name))
    runtime = vectors_of(engine, caller)[0]
    runtime.call(lambda: runtime.vectors._db().execute("DELETE FROM vectors"))  # no cache: every text is embedded
    reindexing = threading.Thread(target=lambda: engine.reindex(), name="test-reindex")
    reindexing.start()
    assert held.inside.wait(WAIT)
    closing = threading.Thread(target=engine.close, name="test-close")
    closing.start()
    for _ in range(int(WAIT * 100)):  # until close has asked the store's work to stop
        if runtime._stop_asked.wait(0.01):
            break
    held.release.set()
    closing.join(WAIT)
    reindexing.join(WAIT)
    assert not closing.is_alive() and not reindexing.is_alive()
    assert held.runs == [1]  # the run in progress finished; the partition's other texts never reached the model
    with Engine(state_dir, watch=False, git=False) as reopened:
        found = ask(reopened, caller, query=embedding_text(*PAGES[2][:2]), mode="semantic")
        assert found["results"][0]["knowledge_item_id"] == ids["Team lunch"]
        assert vectors_of(reopened, caller)[1] == len(PAGES)


def test_stop_work_ends_a_reindex_being_answered_before_the_engine_closes(state_dir, monkeypatch):
    """``knowledge serve`` stopping waits for the requests it is answering before it closes the engine; a
    reindex among them is asked to stop first, so Ctrl+C does not wait for the whole partition's vectors."""
    engine = open_engine(state_dir)
    try:
        caller, _ = seed(engine)
        settle(engine, caller)
        held = HeldRuns(engine.embeddings.current(), monkeypatch, lambda name: not vectors_thread(name))
        runtime = vectors_of(engine, caller)[0]
        runtime.call(lambda: runtime.vectors._db().execute("DELETE FROM vectors"))
        answered: list[Any] = []
        reindexing = threading.Thread(target=lambda: answered.append(engine.reindex()), name="test-reindex")
        reindexing.start()
        assert held.inside.wait(WAIT)
        engine.stop_work()
        held.release.set()
        reindexing.join(WAIT)
        assert not reindexing.is_alive() and answered  # answered while the engine is still open
        assert held.runs == [1]
    finally:
        held.release.set()
        engine.close()
