"""The LoCoMo importer, on a tiny invented file of the same shape (never the benchmark's own data)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from engine.access.authority import AgentCaller
from engine.cli.commands import main
from engine.core.errors import InvalidParams
from engine.importers.locomo import evidence_records, import_locomo, load_locomo, owner_caller
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.helpers import only_store, private_dir, vault_snapshot


def sample_file() -> list[dict[str, Any]]:
    """Two invented conversations; the speaker Ines appears in both."""
    return [
        {
            "sample_id": "talk-1",
            "conversation": {
                "speaker_a": "Ines", "speaker_b": "Bruno",
                "session_1_date_time": "9:05 am on 4 June, 2031",
                "session_1": [
                    {"speaker": "Ines", "dia_id": "D1:1",
                     "text": "Morning Bruno! I finally repaired the old tram clock."},
                    {"speaker": "Bruno", "dia_id": "D1:2", "text": "Nice! I spent the weekend\nbuilding a kayak rack.",
                     "blip_caption": "a photo of a wooden rack", "img_url": ["https://example.invalid/rack.jpg"]},
                    {"speaker": "Ines", "dia_id": "D1:3", "text": "My sister Lotte is visiting from Ghent next week."},
                    {"speaker": "Bruno", "dia_id": "D1:4", "text": "Tell her the harbour market opens on Sundays."},
                ],
                "session_2_date_time": "6:40 pm on 19 June, 2031",
                "session_2": [
                    {"speaker": "Bruno", "dia_id": "D2:1", "text": "The kayak rack held up in the storm."},
                    {"speaker": "Ines", "dia_id": "D2:2", "text": "Lotte loved the harbour market, by the way."},
                ],
                "session_3_date_time": "noon on 1 July, 2031",  # a date without a transcript, as LoCoMo has
            },
            "observation": {
                "session_1_observation": {
                    "Ines": [["Ines repaired an old tram clock.", "D1:1"],
                             ["Ines has a sister, Lotte, who lives in Ghent.", ["D1:3"]]],
                    "Bruno": [["Bruno built a kayak rack and likes the harbour market.", "D1:2, D1:4"]],
                },
                "session_2_observation": {
                    "Bruno": [["Bruno's kayak rack survived a storm.", "D2:1"]],
                    "Ines": [],
                },
            },
            "session_summary": {
                "session_1_summary": "Ines and Bruno traded weekend projects and plans for Lotte's visit.",
                "session_2_summary": "Bruno's rack survived a storm; Lotte enjoyed the market.",
            },
            "event_summary": {},
            "qa": [
                {"question": "What did Ines repair?", "answer": "a tram clock", "evidence": ["D1:1"], "category": 1},
                {"question": "What did Bruno build?", "answer": "a kayak rack", "evidence": ["D1:2; D2:1"],
                 "category": 4},
                {"question": "Where did Lotte go?", "answer": "the harbour market", "evidence": ["D2:02"],
                 "category": 2},
                {"question": "What did Ines adopt?", "adversarial_answer": "a cat", "evidence": [], "category": 5},
            ],
        },
        {
            "sample_id": "talk-2",
            "conversation": {
                "speaker_a": "Farid", "speaker_b": "Ines",
                "session_1_date_time": "sometime in the autumn",
                "session_1": [
                    {"speaker": "Farid", "dia_id": "D1:1", "text": "I joined a choir that sings in lighthouses."},
                    {"speaker": "Ines", "dia_id": "D1:2", "text": "That sounds echoey and wonderful."},
                ],
            },
            "observation": {"session_1_observation": {
                "Farid": [["Farid sings in a choir that performs in lighthouses.", "D1:1"]],
            }},
            "session_summary": {"session_1_summary": "Farid told Ines about his lighthouse choir."},
            "event_summary": {},
            "qa": [{"question": "Where does Farid's choir sing?", "answer": "lighthouses", "evidence": ["D1:1"],
                    "category": 1}],
        },
    ]


def text_of(engine: Engine, caller: AgentCaller, record_id: str) -> str:
    return engine.get_record(caller, record_id)["body"].strip()


def claims_by_text(engine: Engine, caller: AgentCaller, result: dict[str, Any]) -> dict[str, str]:
    ids = {claim for sample in result["dialogClaims"].values() for claims in sample.values() for claim in claims}
    return {text_of(engine, caller, claim): claim for claim in ids}


# --- the import ------------------------------------------------------------------------------


def test_import_saves_people_sessions_and_claims_citing_their_turns(
        engine: Engine, owner: AgentCaller, state_dir: StateDir) -> None:
    result = import_locomo(engine, owner, sample_file())

    assert {k: result[k] for k in ("samples", "people", "sessions", "claims")} == {
        "samples": 2, "people": 4, "sessions": 3, "claims": 5}
    claims = claims_by_text(engine, owner, result)
    clock = engine.get_record(owner, claims["Ines repaired an old tram clock."])["frontmatter"]
    ines = engine.get_record(owner, clock["subject"])
    assert (ines["title"], ines["frontmatter"]["type"]) == ("Ines (talk-1)", "person")
    assert "aliases" not in ines["frontmatter"]
    rack = engine.get_record(owner, claims["Bruno built a kayak rack and likes the harbour market."])["frontmatter"]
    bruno = engine.get_record(owner, rack["subject"])
    assert bruno["title"] == "Bruno"
    assert (rack["claim_kind"], rack["assertion_origin"]) == ("fact", "source")
    assert [(c["lines"], c["quote"]) for c in rack["evidence"]] == [
        ([2, 2], "Nice! I spent the weekend building a kayak rack."),
        ([4, 4], "Tell her the harbour market opens on Sundays."),
    ]

    source = rack["evidence"][0]["source"]
    transcript = (private_dir(state_dir) / "sources" / f"{source}.txt").read_text(encoding="utf-8").splitlines()
    assert transcript == [
        "D1:1 Ines: Morning Bruno! I finally repaired the old tram clock.",
        "D1:2 Bruno: Nice! I spent the weekend building a kayak rack. [image: a photo of a wooden rack]",
        "D1:3 Ines: My sister Lotte is visiting from Ghent next week.",
        "D1:4 Bruno: Tell her the harbour market opens on Sundays.",
    ]
    for claim_id in claims.values():
        for citation in engine.get_record(owner, claim_id)["frontmatter"]["evidence"]:
            if citation["source"] == source:
                assert citation["quote"] in transcript[citation["lines"][0] - 1]

    events = sorted((private_dir(state_dir) / "pages" / "events").iterdir())
    pages = [engine.get_record(owner, _record_id(path)) for path in events]
    assert sorted((p["title"], p["frontmatter"].get("fields")) for p in pages) == [
        ("Farid and Ines, session 1 (sometime in the autumn)", None),
        ("Ines and Bruno, session 1 (4 June 2031)", {"date": "2031-06-04"}),
        ("Ines and Bruno, session 2 (19 June 2031)", {"date": "2031-06-19"}),
    ]
    first = next(p for p in pages if p["title"].startswith("Ines and Bruno, session 1"))
    assert first["body"].strip() == "Ines and Bruno traded weekend projects and plans for Lotte's visit."
    assert [(c["source"], c["lines"]) for c in first["frontmatter"]["evidence"]] == [(source, [1, 4])]
    assert result["dialogClaims"]["talk-1"]["D1:4"] == [rack["id"]]
    assert result["dialogClaims"]["talk-2"] == {
        "D1:1": [claims["Farid sings in a choir that performs in lighthouses."]]}


def _record_id(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("id: "):
            return line[4:]
    raise AssertionError(f"no id in {path}")


def test_importing_twice_changes_nothing_and_returns_the_same_ids(engine: Engine, state_dir: StateDir) -> None:
    with owner_caller(engine) as (caller, created):
        first = import_locomo(engine, caller, sample_file())
    vault = only_store(state_dir) / "vault"
    before = vault_snapshot(vault)

    with owner_caller(engine) as (caller, again):
        second = import_locomo(engine, caller, sample_file())

    assert created is not None and again is None
    assert second == first
    assert vault_snapshot(vault) == before
    assert sum(1 for path in before if path.startswith("private/claims/")) == 5


def test_the_temporary_credential_is_revoked(engine: Engine) -> None:
    with owner_caller(engine, "scout") as (caller, created):
        import_locomo(engine, caller, sample_file())

    assert engine.registry.authenticate(created) is not None
    assert engine.registry.authenticate(caller.token) is None


def test_a_session_with_more_observations_than_one_call_holds_is_split(engine: Engine, owner: AgentCaller) -> None:
    data = sample_file()[1:]
    data[0]["observation"]["session_1_observation"]["Farid"] = [
        [f"Farid has sung in lighthouse number {n}.", "D1:1"] for n in range(1, 103)]

    result = import_locomo(engine, owner, data)

    assert result["claims"] == 102
    assert len(set(result["dialogClaims"]["talk-2"]["D1:1"])) == 102
    last = result["dialogClaims"]["talk-2"]["D1:1"][-1]
    assert text_of(engine, owner, last) == "Farid has sung in lighthouse number 102."


# --- questions and their evidence ----------------------------------------------------------------


def test_evidence_records_maps_each_question_to_the_claims_citing_its_turns(
        engine: Engine, owner: AgentCaller) -> None:
    claims = claims_by_text(engine, owner, import_locomo(engine, owner, sample_file()))

    questions = evidence_records(engine, owner, sample_file())

    expected = {
        "What did Ines repair?": {"Ines repaired an old tram clock."},
        "What did Bruno build?": {"Bruno built a kayak rack and likes the harbour market.",
                                  "Bruno's kayak rack survived a storm."},
        "Where did Lotte go?": set(),  # no observation cites D2:2
        "What did Ines adopt?": set(),
        "Where does Farid's choir sing?": {"Farid sings in a choir that performs in lighthouses."},
    }
    assert [q["question"] for q in questions] == list(expected)
    for question in questions:
        assert question["record_ids"] == sorted(claims[text] for text in expected[question["question"]])
    assert [(q["sample"], q["category"], q["evidence"]) for q in questions] == [
        ("talk-1", 1, ["D1:1"]), ("talk-1", 4, ["D1:2", "D2:1"]), ("talk-1", 2, ["D2:2"]), ("talk-1", 5, []),
        ("talk-2", 1, ["D1:1"])]


# --- bad input ---------------------------------------------------------------------------------


def _drop(path: list[Any]):
    def change(data: list[dict[str, Any]]) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return change


def _set(path: list[Any], value: Any):
    def change(data: list[dict[str, Any]]) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


BAD_FILES = [
    ("no sample id", _drop([1, "sample_id"]), "[1] has no 'sample_id'"),
    ("no conversation", _drop([1, "conversation"]), "sample talk-2 has no 'conversation'"),
    ("no speaker", _drop([1, "conversation", "speaker_b"]), "sample talk-2 conversation has no 'speaker_b'"),
    ("no session date", _drop([1, "conversation", "session_1_date_time"]),
     "sample talk-2 session_1 has no 'session_1_date_time'"),
    ("no summary", _drop([1, "session_summary", "session_1_summary"]),
     "sample talk-2 session_1 has no 'session_1_summary'"),
    ("no turn text", _drop([1, "conversation", "session_1", 1, "text"]), "sample talk-2 session_1[1] has no 'text'"),
    ("dialog id of another session", _set([1, "observation", "session_1_observation", "Farid", 0, 1], "D2:1"),
     "dialog id 'D2:1' is not a turn of session_1"),
    ("dialog id past the end", _set([1, "observation", "session_1_observation", "Farid", 0, 1], "D1:1, D1:9"),
     "dialog id 'D1:9' is not a turn of session_1"),
    ("not a dialog id", _set([1, "observation", "session_1_observation", "Farid", 0, 1], "turn one"),
     "'turn' is not a dialog id like D3:7"),
    ("unknown speaker", _set([1, "observation", "session_1_observation", "Zoe"], []),
     "'Zoe' is neither speaker_a nor speaker_b"),
    ("observation without a session", _set([1, "observation", "session_4_observation"], {}),
     "observation.session_4_observation names no session"),
    ("NUL in a turn", _set([1, "conversation", "session_1", 0, "text"], "a\x00b"),
     "sample talk-2 session_1[0].text contains a NUL character"),
    ("duplicate sample", _set([1, "sample_id"], "talk-1"), "sample_id 'talk-1' appears twice"),
    ("same speaker twice", _set([1, "conversation", "speaker_b"], "Farid"), "both speakers are named 'Farid'"),
]


@pytest.mark.parametrize("change, message", [case[1:] for case in BAD_FILES], ids=[case[0] for case in BAD_FILES])
def test_a_malformed_file_is_refused_whole_before_anything_is_written(
        engine: Engine, owner: AgentCaller, state_dir: StateDir, change, message: str) -> None:
    import_locomo(engine, owner, sample_file()[:1])
    before = vault_snapshot(only_store(state_dir) / "vault")
    bad = sample_file()
    bad[0]["conversation"]["session_4_date_time"] = "8:00 am on 2 August, 2031"  # a new, valid session first
    bad[0]["conversation"]["session_4"] = [{"speaker": "Ines", "dia_id": "D4:1", "text": "Back from Ghent."}]
    bad[0]["observation"]["session_4_observation"] = {"Ines": [["Ines went to Ghent.", "D4:1"]]}
    bad[0]["session_summary"]["session_4_summary"] = "Ines came back."
    change(bad)

    with pytest.raises(InvalidParams) as raised:
        import_locomo(engine, owner, bad)

    assert message in raised.value.message
    assert vault_snapshot(only_store(state_dir) / "vault") == before


@pytest.mark.parametrize("data, message", [
    ({"sample_id": "talk-1"}, "a LoCoMo file holds a non-empty list of samples"),
    ([], "a LoCoMo file holds a non-empty list of samples"),
    (["talk-1"], "sample [0] must be an object"),
])
def test_a_file_that_is_not_a_list_of_samples_is_refused(engine: Engine, owner: AgentCaller, data: Any,
                                                         message: str) -> None:
    with pytest.raises(InvalidParams, match=message.replace("[", r"\[").replace("]", r"\]")):
        import_locomo(engine, owner, data)
    assert engine.stores() == []


def test_questions_are_checked_before_the_import_writes(engine: Engine, owner: AgentCaller) -> None:
    data = sample_file()
    del data[1]["qa"][0]["evidence"]

    with pytest.raises(InvalidParams, match="sample talk-2 qa\\[0\\] has no 'evidence'"):
        evidence_records(engine, owner, data)
    assert engine.stores() == []


# --- command line ------------------------------------------------------------------------------


def write_file(tmp_path: Path, data: Any, name: str = "locomo.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_cli_imports_registers_main_once_and_is_idempotent(
        tmp_path: Path, state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    root, file = str(state_dir.root), write_file(tmp_path, sample_file())

    assert main(["--state-dir", root, "import", "locomo", file, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    vault = vault_snapshot(only_store(state_dir) / "vault")
    assert main(["--state-dir", root, "import", "locomo", file]) == 0
    text = capsys.readouterr().out

    assert {k: first[k] for k in ("agent", "samples", "people", "sessions", "claims")} == {
        "agent": "main", "samples": 2, "people": 4, "sessions": 3, "claims": 5}
    assert Path(first["tokenFile"]) == state_dir.tokens / "main.token"
    assert sorted(first["dialogClaims"]["talk-1"]) == ["D1:1", "D1:2", "D1:3", "D1:4", "D2:1"]
    assert "Registered" not in text
    assert "Imported LoCoMo into main's store: 2 samples, 4 people, 3 sessions, 5 claims." in text
    assert vault_snapshot(only_store(state_dir) / "vault") == vault
    with Engine(state_dir, watch=False) as engine:
        assert [(a["name"], a["owner"]) for a in engine.agents()] == [("main", True)]


def test_cli_imports_for_another_agent(tmp_path: Path, state_dir: StateDir,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    file = write_file(tmp_path, sample_file())

    assert main(["--state-dir", str(state_dir.root), "import", "locomo", file, "--agent", "bench"]) == 0

    out = capsys.readouterr().out
    assert f"Registered owner agent bench; its token is in {state_dir.tokens / 'bench.token'}." in out
    with Engine(state_dir, watch=False) as engine:
        assert [a["name"] for a in engine.agents()] == ["bench"]


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    ("{not json", "is not a UTF-8 JSON file"),
    (json.dumps([{"sample_id": "talk-9"}]), "sample talk-9 has no 'conversation'"),
])
def test_cli_refuses_a_bad_file_without_registering_anything(
        tmp_path: Path, state_dir: StateDir, capsys: pytest.CaptureFixture[str], content: str | None,
        message: str) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")

    code = main(["--state-dir", str(state_dir.root), "import", "locomo", str(path)])

    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert message in captured.err
    assert not state_dir.registry.exists()


def test_load_locomo_checks_the_file(tmp_path: Path) -> None:
    good = sample_file()
    assert load_locomo(write_file(tmp_path, good)) == good
    broken = copy.deepcopy(good)
    broken[0]["conversation"]["session_2"][0]["speaker"] = "Zoe"
    with pytest.raises(InvalidParams, match="speaker 'Zoe' is neither speaker_a nor speaker_b"):
        load_locomo(write_file(tmp_path, broken, "broken.json"))
