"""The owner's search (``operator/search``, ``knowledge search``): keyword or hybrid, and which one answered."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from engine.access.authority import OperatorCaller
from engine.core.errors import InvalidParams
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.search.test_knowledge_base import PAGES, open_engine, seed


@pytest.fixture
def engine_with_model(state_dir: StateDir) -> Iterator[Engine]:
    """An embedding model installed and chosen, the Knowledge Base runtime and the recall gate off."""
    with open_engine(state_dir, knowledgeRuntimeEnabled=False) as opened:
        yield opened


def owner_search(engine: Engine, **params: Any) -> dict[str, Any]:
    return engine.owner_search(OperatorCaller("main"), params)


def test_auto_is_hybrid_when_a_model_is_installed_and_names_every_page(engine_with_model) -> None:
    seed(engine_with_model)

    answer = owner_search(engine_with_model, query="database backups at night", limit=10)

    assert answer["mode"] == "hybrid" and "hybridUnavailable" not in answer and "nextCursor" not in answer
    assert answer["hits"][0]["title"] == "Database backups" and answer["hits"][0]["score"] == 1.0
    assert {hit["title"] for hit in answer["hits"]} <= {title for title, _, _ in PAGES}
    assert all(0 <= hit["score"] <= 1 for hit in answer["hits"])


def test_the_first_hybrid_search_has_the_vectors_follow_the_store(engine_with_model) -> None:
    seed(engine_with_model)
    runtime = next(iter(engine_with_model._runtimes.values()))

    first = owner_search(engine_with_model, query="pizza on Fridays")
    assert runtime.vector_feed.settled(60)
    later = owner_search(engine_with_model, query="pizza on Fridays")

    assert first["vectors"] == "building" and later["vectors"] == "ready"
    assert later["hits"][0]["title"] == "Team lunch"


def test_keyword_is_what_was_asked_and_auto_without_a_model_says_why(state_dir) -> None:
    with open_engine(state_dir, model=False) as engine:
        seed(engine)
        asked = owner_search(engine, query="database backups", mode="keyword")
        auto = owner_search(engine, query="database backups")
        hybrid_asked = owner_search(engine, query="database backups", mode="hybrid")

    assert asked["mode"] == "keyword" and "hybridUnavailable" not in asked
    assert auto["mode"] == hybrid_asked["mode"] == "keyword"
    assert "is not installed" in auto["hybridUnavailable"] and auto["hits"] == asked["hits"]


def test_hybrid_keeps_the_owners_filters_and_word_rule(engine_with_model) -> None:
    seed(engine_with_model)

    claims_only = owner_search(engine_with_model, query="database backups", kinds=["claim"])
    assert claims_only["mode"] == "hybrid" and claims_only["hits"] == []
    pages = owner_search(engine_with_model, query="how are the database dumps kept", kinds=["page"])
    assert pages["mode"] == "hybrid" and pages["hits"][0]["title"] == "Database backups"
    hit = pages["hits"][0]  # a plain snippet with the query's meaningful words marked, in hybrid too
    assert [hit["snippet"][start:end] for start, end in hit["highlights"]] == ["dumps", "database", "kept"]
    with pytest.raises(InvalidParams):
        owner_search(engine_with_model, query="backups", mode="semantic")


def test_a_candidate_without_a_vector_counts_its_keyword_score_twice(engine_with_model, monkeypatch) -> None:
    """Before any vector exists, hybrid ranks as keyword does, with the same relative scores."""
    seed(engine_with_model)
    monkeypatch.setattr("engine.runtime.StoreRuntime.follow_for_owner", lambda runtime: None)

    fused = owner_search(engine_with_model, query="incident review timeline")
    keyword = owner_search(engine_with_model, query="incident review timeline", mode="keyword")

    assert fused["mode"] == "hybrid" and fused["vectors"] == "building"
    assert [(hit["title"], hit["score"]) for hit in fused["hits"]] == [
        (hit["title"], hit["score"]) for hit in keyword["hits"]]


def test_a_note_titled_exactly_as_the_query_leads_the_first_page(engine_with_model) -> None:
    caller, _ = seed(engine_with_model)
    from tests.helpers import page
    engine_with_model.save_page(caller, page("p9", "Backups", "note", "Database backups, database backups, backups."))

    for mode in ("keyword", "hybrid"):
        hits = owner_search(engine_with_model, query="Database backups", mode=mode)["hits"]
        assert hits[0]["title"] == "Database backups" and hits[0]["score"] == 1.0, mode
    assert owner_search(engine_with_model, query="backups", mode="keyword")["hits"][0]["title"] == "Backups"


def crowded_by_stronger_matches(engine: Engine) -> tuple[str, set[str]]:
    """A note titled "Ideas" whose long body never says the word, below a dozen short notes that say it again
    and again: the ranking puts it after them.  Its id, and the ids of every note the query "ideas" matches."""
    from tests.helpers import page
    caller, _ = seed(engine)
    words = " ".join(f"word{number}" for number in range(400))
    named = engine.save_page(caller, page("named", "Ideas", "note", f"A long list. {words}"))["id"]
    stronger = {engine.save_page(caller, page(f"s{number}", f"Ideas, round {number}", "note",
                                              "ideas " * 12 + f"round {number}"))["id"] for number in range(12)}
    return named, stronger | {named}


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_note_titled_exactly_as_the_query_leads_the_page_wherever_the_ranking_puts_it(
        engine_with_model, mode) -> None:
    named, _ = crowded_by_stronger_matches(engine_with_model)
    ranked = engine_with_model.search(OperatorCaller("main"), {"query": "ideas", "limit": 50})["hits"]
    assert named not in [hit["id"] for hit in ranked[:5]]  # the ranking alone leaves it off a page of 5

    answer = owner_search(engine_with_model, query="Ideas", mode=mode, limit=5)

    assert answer["mode"] == mode and len(answer["hits"]) == 5
    assert answer["hits"][0]["id"] == named and answer["hits"][0]["score"] == 1.0
    assert [hit["id"] for hit in answer["hits"]].count(named) == 1
    others = owner_search(engine_with_model, query="Ideas", mode=mode, limit=5, kinds=["claim"])["hits"]
    assert named not in [hit["id"] for hit in others]  # the kinds asked hold for it as for the ranking


def test_paging_after_a_promoted_note_serves_every_match_once(engine_with_model) -> None:
    named, matching = crowded_by_stronger_matches(engine_with_model)

    served, cursor = [], None
    while True:
        params = {"query": "ideas", "mode": "keyword", "limit": 5, **({"cursor": cursor} if cursor else {})}
        answer = owner_search(engine_with_model, **params)
        assert len(answer["hits"]) <= 5
        served += [hit["id"] for hit in answer["hits"]]
        cursor = answer.get("nextCursor")
        if cursor is None:
            break

    assert served[0] == named
    assert len(served) == len(set(served)) and set(served) == matching


def test_a_long_page_is_as_near_as_its_nearest_passage(engine_with_model) -> None:
    """A long page's vector holds its start; hybrid judges it by its nearest passage, whose vectors the first hybrid
    search has the catch-up index."""
    import numpy as np

    from engine.index.similarity import page_passages
    from engine.index.vectors import embedding_text
    from engine.vault.frontmatter import split_document
    from tests.helpers import page

    caller, _ = seed(engine_with_model)
    filler = " ".join(f"chapter{number} covers release planning details" for number in range(120))
    engine_with_model.save_page(caller, page("long", "Handbook", "note",
                                             f"{filler} Tomatoes need sun and water every morning."))
    owner_search(engine_with_model, query="warm up")
    runtime = next(iter(engine_with_model._runtimes.values()))
    assert runtime.vector_feed.settled(60)
    embedder = engine_with_model.embeddings.current()
    vector = embedder.embed(["tomatoes need sun and water"])[0]

    def work(runtime, authority):
        rows = [row for row in runtime.catalog.current(authority.partition)]
        return runtime.vectors.page_passage_similarities(authority.partition, vector, [row.path for row in rows]), {
            row.path: embedding_text(row.title, split_document(content.decode())[1]) for row, content in
            runtime.catalog.current_with_content(
                authority.partition, [row.path for row in rows if row.title == "Handbook"])}

    nearest, texts = engine_with_model.on_store(OperatorCaller("main"), work)
    [(path, text)] = texts.items()
    passages = page_passages(text)
    assert len(passages) > 1 and set(nearest) == {path}  # the short pages are their own vector
    expected = max(float(np.dot(vector, passage)) for passage in embedder.embed(passages))
    assert nearest[path] == pytest.approx(expected, abs=1e-5)


def _long_body(tail: str) -> str:
    filler = " ".join(f"chapter{number} covers release planning details" for number in range(120))
    return f"{filler} {tail}"


def _page_passage_rows(engine: Engine) -> dict[str, list[str]]:
    """The page passages the vector index holds: the page's sha256 of each, by path."""
    def work(runtime, authority):
        rows = runtime.vectors._db().execute("SELECT path, sha256 FROM page_passages WHERE partition = ?",
                                             (authority.partition,)).fetchall()
        found: dict[str, list[str]] = {}
        for path, sha in rows:
            found.setdefault(path, []).append(sha)
        return found
    return engine.on_store(OperatorCaller("main"), work)


def test_a_store_whose_vectors_were_built_before_gets_its_page_passages_on_the_first_hybrid_search(state_dir) -> None:
    """Vectors complete before the owner ever searched in hybrid mode (the Knowledge Base runtime keeps them) hold
    no page passages; the first hybrid search has the catch-up add them, and says 'building' until it did."""
    from engine.index.similarity import page_passages
    from engine.search import knowledge_base as kb
    from tests.helpers import page

    with open_engine(state_dir) as engine:  # knowledgeRuntimeEnabled: vectors follow without the owner's search
        caller, _ = seed(engine)
        receipt = engine.save_page(caller, page("long", "Handbook", "note",
                                                _long_body("Tomatoes need sun and water every morning.")))
        kb.search_knowledge(engine, caller, {"query": "warm up", "mode": "semantic"})  # the vectors catch up
        runtime = next(iter(engine._runtimes.values()))
        assert runtime.vector_feed.settled(60)
        assert _page_passage_rows(engine) == {}  # nobody asked for them yet

        first = owner_search(engine, query="tomatoes need sun", mode="hybrid")
        assert runtime.vector_feed.settled(60)
        path = engine.get_record(OperatorCaller("main"), receipt["id"])["path"]
        text = f"Handbook\n\n{_long_body('Tomatoes need sun and water every morning.')}"
        held = _page_passage_rows(engine)
        assert set(held) == {path} and len(held[path]) == len(page_passages(text)) > 1
        assert first["vectors"] in ("building", "ready")
        assert owner_search(engine, query="tomatoes need sun", mode="hybrid")["vectors"] == "ready"


def test_page_passages_follow_the_page_through_an_edit_and_a_deletion(engine_with_model) -> None:
    from engine.index.similarity import page_passages
    from tests.helpers import page, private_dir

    caller, _ = seed(engine_with_model)
    receipt = engine_with_model.save_page(caller, page("long", "Handbook", "note", _long_body("Tomatoes grow.")))
    owner_search(engine_with_model, query="warm up")
    runtime = next(iter(engine_with_model._runtimes.values()))
    assert runtime.vector_feed.settled(60)
    path = engine_with_model.get_record(OperatorCaller("main"), receipt["id"])["path"]
    before = _page_passage_rows(engine_with_model)[path]

    longer = _long_body("Tomatoes grow. " + " ".join(f"appendix{n} lists seeds" for n in range(60)))
    engine_with_model.save_page(caller, page("edit", "Handbook", "note", longer, id=receipt["id"],
                                             expectedRevision=1))
    assert owner_search(engine_with_model, query="appendix seeds")["vectors"] in ("building", "ready")
    assert runtime.vector_feed.settled(60)
    after = _page_passage_rows(engine_with_model)[path]
    assert len(after) == len(page_passages(f"Handbook\n\n{longer}")) > len(before)
    assert len(set(after)) == 1 and set(after) != set(before)  # the new revision's alone

    (private_dir(engine_with_model.state) / path).unlink()  # the note deleted in the vault
    owner_search(engine_with_model, query="appendix seeds")
    assert runtime.vector_feed.settled(60)
    assert path not in _page_passage_rows(engine_with_model)


def test_the_nearest_records_are_those_of_the_kinds_asked(engine_with_model) -> None:
    """A vault's links crowd its notes out of the nearest records: the vector search itself keeps to the kinds
    asked, instead of filtering the nearest of every kind afterwards."""
    from tests.helpers import claim

    caller, ids = seed(engine_with_model)
    engine_with_model.remember(caller, {"requestId": "c", "subject": ids["Team lunch"], "items": [
        claim(f"Lunch note {number}: the team eats pizza together near the harbour.", "pizza")
        for number in range(8)]})
    owner_search(engine_with_model, query="warm up")
    runtime = next(iter(engine_with_model._runtimes.values()))
    assert runtime.vector_feed.settled(60)
    vector = engine_with_model.embeddings.current().embed(["the team eats pizza together near the harbour"])[0]

    def nearest(k, kinds):
        return engine_with_model.on_store(OperatorCaller("main"), lambda runtime, authority: [
            path for path, _ in runtime.vectors.nearest(authority.partition, vector, k, kinds=kinds)])

    everything = nearest(20, None)
    assert len(everything) == len(PAGES) + 8
    for kind, folder in (("page", "pages/"), ("claim", "claims/")):
        assert nearest(3, (kind,)) == [path for path in everything if path.startswith(folder)][:3]


def test_records_indexed_before_the_index_knew_kinds_get_theirs_from_the_next_catch_up(engine_with_model) -> None:
    seed(engine_with_model)
    owner_search(engine_with_model, query="warm up")
    runtime = next(iter(engine_with_model._runtimes.values()))
    assert runtime.vector_feed.settled(60)

    def kinds(runtime, authority):
        return runtime.vectors._db().execute("SELECT kind, COUNT(*) FROM items GROUP BY kind").fetchall()

    def forget_kinds(runtime, authority):  # as a file made before kinds reads once opened
        db = runtime.vectors._db()
        with db:
            db.execute("UPDATE items SET kind = NULL")
            db.execute("DELETE FROM progress")

    engine_with_model.on_store(OperatorCaller("main"), forget_kinds)
    assert engine_with_model.on_store(OperatorCaller("main"), kinds) == [(None, len(PAGES))]
    assert owner_search(engine_with_model, query="backups")["vectors"] == "building"  # and a catch-up is queued
    assert runtime.vector_feed.settled(60)
    assert engine_with_model.on_store(OperatorCaller("main"), kinds) == [("page", len(PAGES))]
    assert owner_search(engine_with_model, query="backups")["vectors"] == "ready"


def test_a_claim_about_the_person_the_question_names_comes_first(engine_with_model, monkeypatch) -> None:
    """Two claims alike but for whom they are about: the one whose subject the question names leads, by the
    bonus; without it the two score alike (which of them comes first is then chance: a claim's path is its id)."""
    from tests.helpers import claim, page
    engine = engine_with_model
    caller, _ = seed(engine)
    people = {name: engine.save_page(caller, page(name.lower(), name, "person", "A colleague."))["id"]
              for name in ("Dana", "Lee")}
    receipt = engine.remember(caller, {"requestId": "walks", "items": [
        claim("Prefers the harbour walk at dawn.", "harbour walk", subject=people["Lee"]),
        claim("Prefers the harbour walk at dawn.", "harbour walk", subject=people["Dana"])]})
    lees, danas = (item["id"] for item in receipt["items"])
    owner_search(engine, query="harbour walk")
    assert next(iter(engine._runtimes.values())).vector_feed.settled(60)

    question = "which harbour walk does Dana prefer"
    leader, lead = first_claim_and_lead(engine, question, danas, lees)
    assert leader == danas and lead > 0.05
    monkeypatch.setattr("engine.search.hybrid.NAMED_SUBJECT_BONUS", 0.0)
    assert abs(first_claim_and_lead(engine, question, danas, lees)[1]) < 0.05


def first_claim_and_lead(engine, question: str, ahead: str, behind: str) -> tuple[str, float]:
    """The first claim the owner's search answers ``question`` with, and how far ``ahead`` scores above ``behind``."""
    hits = owner_search(engine, query=question, kinds=["claim"])["hits"]
    score = {hit["id"]: hit["score"] for hit in hits}
    return hits[0]["id"], score[ahead] - score[behind]


def test_a_claim_drawn_from_the_page_the_question_is_about_comes_first(engine_with_model, monkeypatch) -> None:
    """Two claims alike but for the page whose retained source they cite: the one whose page the question is
    about leads, by that page's score; without it the two score alike."""
    engine = engine_with_model
    caller, _ = seed(engine)
    sources = {}
    for key, title, summary in (("norway", "Holiday in Norway, June", "A week among the fjords near Bergen."),
                                ("office", "Office move, March", "Boxes, desks and a new printer.")):
        saved = engine.save_page(caller, {"requestId": key, "type": "event", "title": title, "body": summary,
                                          "evidence": [{"excerpt": "Ana: we swam in the lake\nBo: it was cold"}]})
        sources[key] = engine.get_record(caller, saved["id"])["frontmatter"]["evidence"][0]["source"]
    receipt = engine.remember(caller, {"requestId": "swims", "items": [
        {"text": "Ana swam in a cold lake.", "claimKind": "fact", "assertionOrigin": "source",
         "evidence": [{"source": sources[key], "lines": [1, 1], "quote": "Ana: we swam in the lake"}]}
        for key in ("office", "norway")]})
    office, norway = (item["id"] for item in receipt["items"])
    owner_search(engine, query="lake")
    assert next(iter(engine._runtimes.values())).vector_feed.settled(60)

    question = "where did Ana swim on the Norway holiday"
    leader, lead = first_claim_and_lead(engine, question, norway, office)
    assert leader == norway and lead > 0.1
    monkeypatch.setattr("engine.search.hybrid.EVIDENCE_PAGE_WEIGHT", 0.0)
    assert abs(first_claim_and_lead(engine, question, norway, office)[1]) < 0.05


def test_a_claim_with_an_evidence_page_gains_no_named_subject_bonus_on_top(engine_with_model) -> None:
    """Two claims alike but for whom they are about, both drawn from one page: the page's score stands for the
    question's subject, so naming one of the two people does not move their claims apart."""
    from tests.helpers import page
    engine = engine_with_model
    caller, _ = seed(engine)
    people = {name: engine.save_page(caller, page(name.lower(), name, "person", "A colleague."))["id"]
              for name in ("Dana", "Lee")}
    saved = engine.save_page(caller, {"requestId": "walk", "type": "event", "title": "Harbour walk",
                                      "body": "A walk along the harbour.",
                                      "evidence": [{"excerpt": "Dana: the harbour at dawn\nLee: the harbour at dawn"}]})
    source = engine.get_record(caller, saved["id"])["frontmatter"]["evidence"][0]["source"]
    receipt = engine.remember(caller, {"requestId": "walks", "items": [
        {"text": "Prefers the harbour walk at dawn.", "claimKind": "fact", "assertionOrigin": "source",
         "subject": people[name], "evidence": [{"source": source, "lines": [line, line],
                                                "quote": f"{name}: the harbour at dawn"}]}
        for line, name in ((1, "Dana"), (2, "Lee"))]})
    danas, lees = (item["id"] for item in receipt["items"])
    owner_search(engine, query="harbour walk")
    assert next(iter(engine._runtimes.values())).vector_feed.settled(60)

    hits = owner_search(engine, query="which harbour walk does Dana prefer", kinds=["claim"])["hits"]
    score = {hit["id"]: hit["score"] for hit in hits}
    assert danas in score and lees in score and abs(score[danas] - score[lees]) < 0.01


CLOCK_PAGES = [  # the keyword's answers to "tram clock oil", best first; none of them gets a vector here
    ("Tram clock oil", "Oil the tram clock's pivots with clock oil, a drop per pivot."),
    ("Tram depot visit", "At the depot the old tram still runs; its clock hangs in the hall."),
    ("Spring cleaning", "Wash the windows, sort the shed, and oil the garden gate."),
]


def test_records_without_a_vector_yet_are_not_outranked_by_unrelated_records_that_have_one(
        engine_with_model, monkeypatch) -> None:
    """An import's notes still being embedded: the keyword's answers, without vectors yet, come before records
    only the vectors brought (nearest of the few that have one, unrelated), in the keyword's order."""
    from tests.helpers import page
    engine = engine_with_model
    caller, _ = seed(engine)  # these four get their vectors
    owner_search(engine, query="database backups")
    runtime = next(iter(engine._runtimes.values()))
    assert runtime.vector_feed.settled(60)
    monkeypatch.setattr(runtime.vector_feed, "queue", lambda partition=None: None)  # the rest wait for theirs
    for number, (title, body) in enumerate(CLOCK_PAGES):
        engine.save_page(caller, page(f"clock{number}", title, "note", body))

    keyword = owner_search(engine, query="tram clock oil", mode="keyword")
    fused = owner_search(engine, query="tram clock oil", mode="hybrid", limit=10)

    answers = [title for title, _ in CLOCK_PAGES]
    assert [hit["title"] for hit in keyword["hits"]] == answers
    assert fused["vectors"] == "building"
    assert [hit["title"] for hit in fused["hits"]][:3] == answers
    assert [(hit["title"], hit["score"]) for hit in fused["hits"][:3]] == [
        (hit["title"], hit["score"]) for hit in keyword["hits"]]


def test_meaning_weighs_by_the_share_of_the_keywords_candidates_that_have_a_vector() -> None:
    from engine.search.hybrid import HYBRID_ALPHA, semantic_weight
    found = ["a.md", "b.md", "c.md", "d.md"]

    assert semantic_weight(found, {path: 0.3 for path in found}) == 1 - HYBRID_ALPHA  # every vector: as always
    assert semantic_weight(found, {"a.md": 0.3, "b.md": 0.1, "z.md": 0.9}) == (1 - HYBRID_ALPHA) / 2
    assert semantic_weight(found, {"z.md": 0.9}) == 0.0  # none of the keyword's: keyword alone
    assert semantic_weight([], {"z.md": 0.9}) == 1 - HYBRID_ALPHA  # no keyword candidate: the vectors alone


def test_a_question_is_compared_with_the_notes_without_its_leading_function_words(engine_with_model) -> None:
    """Hybrid embeds "how do I oil the tram clock" as "oil the tram clock": where no note holds the framing's
    words (so the keyword side scores both alike), the question and its subject rank the same notes the same."""
    from tests.helpers import page
    engine = engine_with_model
    caller, _ = seed(engine)
    for number, (title, body) in enumerate(CLOCK_PAGES):
        engine.save_page(caller, page(f"clock{number}", title, "note", body))
    owner_search(engine, query="warm up")
    assert next(iter(engine._runtimes.values())).vector_feed.settled(60)

    def ranked(query: str) -> list[tuple[str, float]]:
        answer = owner_search(engine, query=query, mode="hybrid", limit=10)
        assert answer["vectors"] == "ready"
        return [(hit["title"], round(hit["score"], 6)) for hit in answer["hits"]]

    subject = ranked("oil the tram clock")
    assert len(subject) > 3 and ranked("How do I oil the tram clock") == subject
    assert ranked("the tram clock oil") != subject  # the rest of the question is embedded as asked


def test_what_the_vectors_compare_is_the_question_after_the_askers_framing() -> None:
    from engine.index.analysis import Analyzer
    from engine.search.hybrid import asked_about
    analyzer = Analyzer()

    assert asked_about(analyzer, "how do I sync my vault to my phone") == "sync my vault to my phone"
    assert asked_about(analyzer, "How can we share a vault?") == "share a vault?"
    assert asked_about(analyzer, "where do you find themes") == "find themes"
    assert asked_about(analyzer, "do I need to pay") == "need to pay"
    assert asked_about(analyzer, "when did Dana move to Oslo") == "when did Dana move to Oslo"  # no asker
    assert asked_about(analyzer, "where does the app keep its settings") == "where does the app keep its settings"
    assert asked_about(analyzer, "which files can I keep") == "which files can I keep"  # past the first word
    assert asked_about(analyzer, "how do I") == "how do I"  # nothing after it: all of it
    assert asked_about(analyzer, "") == ""
