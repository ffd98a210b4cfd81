"""The mem0 / OpenMemory importer on small exports written here in the real shapes."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from engine.core.errors import InvalidParams
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import (interrupt_after, reader, records, run_import, same_but_reused,
                                            state_snapshot, store_snapshot, would_import)


def mem0_memories() -> dict[str, Any]:
    """mem0's get_all answer."""
    return {"results": [
        {"id": "0f9c7a52-0000-4000-8000-000000000001", "memory": "Prefers tea over coffee in the morning",
         "hash": "5d41402abc4b2a76b9719d911017c592", "metadata": {"category": "preferences", "confidence": 0.9},
         "categories": ["food"], "user_id": "dana", "agent_id": None, "app_id": None, "run_id": None,
         "created_at": "2026-02-01T08:00:00-08:00", "updated_at": "2026-02-03T08:00:00-08:00"},
        {"id": "0f9c7a52-0000-4000-8000-000000000002", "memory": "Is training for a half marathon in May",
         "hash": "7d793037a0760186574b0282f2f435e7", "metadata": None, "user_id": "dana",
         "created_at": "2026-02-02T08:00:00-08:00", "updated_at": None},
    ]}


def openmemory_export() -> dict[str, Any]:
    """OpenMemory's memories.json, as its export zip holds it."""
    return {"user": {"id": "u1", "user_id": "dana"}, "apps": [{"id": "a1", "name": "cursor"}],
            "categories": [{"id": "k1", "name": "work"}],
            "memories": [
                {"id": "m1", "user_id": "u1", "app_id": "a1", "content": "Works on the billing service",
                 "metadata": {"source_app": "cursor", "mcp_client": "cursor"}, "state": "active",
                 "created_at": "2026-01-05T10:00:00", "updated_at": "2026-01-05T10:00:00", "archived_at": None,
                 "deleted_at": None, "categories": ["work"]},
                {"id": "m2", "user_id": "u1", "app_id": "a1", "content": "Old phone number was in Ghent",
                 "metadata": {}, "state": "deleted", "created_at": "2026-01-06T10:00:00",
                 "deleted_at": "2026-01-07T10:00:00"},
            ]}


def write(tmp_path: Path, data: Any, name: str = "memories.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def test_each_memory_is_a_source_claim_with_its_metadata_kept(engine: Engine, tmp_path: Path,
                                                                state_dir: StateDir) -> None:
    result = run_import(engine, "mem0", write(tmp_path, mem0_memories()))

    assert result["imported"] == {"sources": 1, "pages": 0, "claims": 2, "relationships": 0}
    caller = reader(engine)
    tea = engine.get_record(caller, result["claims"][0])
    assert tea["body"].strip() == "Prefers tea over coffee in the morning"
    front = tea["frontmatter"]
    assert (front["claim_kind"], front["assertion_origin"]) == ("fact", "source")
    assert "subject" not in front
    assert front["attribution"]["instance"] == "import-mem0"
    vault = next(state_dir.stores.iterdir()) / "vault" / "private" / "sources"
    kept = json.loads((vault / f"{front['evidence'][0]['source']}.txt").read_text(encoding="utf-8"))
    assert kept == mem0_memories()["results"][0]  # metadata, categories, hash, dates: all of it
    original = (vault / f"{front['evidence'][1]['source']}.source.yaml").read_text(encoding="utf-8")
    assert f"sha256: {result['sha256']}" in original


def test_openmemory_zip_skips_deleted_memories(engine: Engine, tmp_path: Path) -> None:
    archive = tmp_path / "openmemory-export.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("memories.json", json.dumps(openmemory_export()))
        out.writestr("memories.jsonl.gz", b"\x1f\x8b")

    result = run_import(engine, "mem0", archive)

    assert (result["memories"], result["skippedDeleted"]) == (1, 1)
    claim = engine.get_record(reader(engine), result["claims"][0])
    assert claim["body"].strip() == "Works on the billing service"


def test_a_plain_list_imports_once_and_resumes(engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    many = [{"id": str(n), "memory": f"Memory number {n}", "metadata": {"n": n}} for n in range(150)]
    path = write(tmp_path, many)
    with pytest.raises(KeyboardInterrupt):
        run_import(engine, "mem0", path, progress=interrupt_after(100))
    assert len(records(state_dir, "claims/")) == 100

    result = run_import(engine, "mem0", path)
    before = store_snapshot(state_dir)
    assert same_but_reused(run_import(engine, "mem0", path), result)

    assert len(records(state_dir, "claims/")) == 150
    assert store_snapshot(state_dir) == before


def test_dry_run(engine: Engine, tmp_path: Path) -> None:
    result = run_import(engine, "mem0", write(tmp_path, mem0_memories()), dry_run=True)

    assert result["wouldCreate"]["claims"] == 2 and engine.registry.agent("main") is None


@pytest.mark.parametrize("data, place", [
    ({"results": [{"id": "a", "memory": ""}]}, "results[0].memory"),
    ({"memories": [{"id": "a", "content": "x"}, "text"]}, "memories[1]"),
    ([{"id": "a", "memory": "x"}, {"id": "a", "memory": "y"}], "[1].id"),
    ({"something": []}, None),
])
def test_bad_exports_are_refused_with_the_place(engine: Engine, tmp_path: Path, data: Any,
                                                place: str | None) -> None:
    with pytest.raises(InvalidParams) as caught:
        run_import(engine, "mem0", write(tmp_path, data))

    assert caught.value.details.get("place") == place
    assert caught.value.details["file"] == "memories.json"
    assert engine.registry.agent("main") is None


# --- importing a newer export ---------------------------------------------------------------------------


def newer_memories() -> dict[str, Any]:
    """mem0's answer some weeks later: the first memory's text changed, the second's metadata only, one new."""
    data = mem0_memories()
    first, second = data["results"]
    first.update(memory="Prefers green tea over coffee in the morning", updated_at="2026-03-01T08:00:00-08:00")
    second["metadata"] = {"category": "health"}
    data["results"].append({"id": "0f9c7a52-0000-4000-8000-000000000003", "memory": "Has a cat named Pixel",
                            "user_id": "dana", "created_at": "2026-03-02T08:00:00-08:00"})
    return data


def test_a_changed_memory_replaces_its_claim_and_the_rest_are_left(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "mem0", write(tmp_path, mem0_memories()))
    tea, marathon = first["claims"]
    before = store_snapshot(state_dir)
    newer = tmp_path / "newer"
    newer.mkdir()

    second = run_import(engine, "mem0", write(newer, newer_memories()))

    caller = reader(engine)
    old = engine.get_record(caller, tea)  # the earlier claim: its next revision says it is superseded
    assert (old["revision"], old["frontmatter"]["lifecycle"]) == (2, "superseded")
    assert [r["revision"] for r in engine.history(caller, tea)["revisions"]] == [1, 2]
    assert engine.get_record(caller, tea, revision=1)["body"].strip() == "Prefers tea over coffee in the morning"
    new = engine.get_record(caller, second["claims"][0])
    assert new["body"].strip() == "Prefers green tea over coffee in the morning"
    assert new["frontmatter"]["replaces"] == tea and new["frontmatter"]["assertion_origin"] == "source"
    assert second["claims"][1] == marathon  # only its metadata changed: left as it was
    marathon_path = engine.get_record(caller, marathon)["path"]
    assert store_snapshot(state_dir)[f"private/{marathon_path}"] == before[f"private/{marathon_path}"]
    assert engine.get_record(caller, marathon)["revision"] == 1
    assert second["claims"][2] not in first["claims"]  # a new memory is a new claim
    assert len(records(state_dir, "claims/")) == 4
    assert second["revised"] == 1 and second["notes"] == [
        "1 memory changed since an earlier import: it got a new claim that replaces its earlier one, "
        "which is kept as superseded."]

    after = store_snapshot(state_dir)
    third = run_import(engine, "mem0", newer / "memories.json")  # the same export again: nothing
    assert (third["claims"], third["imported"], third["revised"]) == (second["claims"], second["imported"], 0)
    assert store_snapshot(state_dir) == after


def test_a_newer_export_where_no_text_changed_creates_nothing(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "mem0", write(tmp_path, mem0_memories()))
    before = store_snapshot(state_dir)
    same = mem0_memories()
    same["results"][0]["metadata"] = {"category": "drinks"}  # another file, the same memories' texts
    newer = tmp_path / "newer"
    newer.mkdir()

    second = run_import(engine, "mem0", write(newer, same))

    assert second["claims"] == first["claims"] and second["revised"] == 0
    assert second["imported"] == {"sources": 0, "pages": 0, "claims": 2, "relationships": 0}
    assert store_snapshot(state_dir) == before  # not even the newer export is retained


def test_a_dry_run_says_what_it_would_replace(engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "mem0", write(tmp_path, mem0_memories()))
    newer = tmp_path / "newer"
    newer.mkdir()
    path = write(newer, newer_memories())
    before = state_snapshot(state_dir)

    result = run_import(engine, "mem0", path, dry_run=True)

    assert result["dryRun"] is True and result["revised"] == 1
    assert result["claims"][1] == first["claims"][1] and result["claims"][0].startswith("(new claim")
    # The newer export retained, a new claim and one replacing its earlier one; the memory as it was, reused.
    assert result["wouldCreate"] == {"sources": 1, "pages": 0, "claims": 2, "relationships": 0}
    assert result["reused"] == {"sources": 0, "pages": 0, "claims": 1, "relationships": 0}
    assert state_snapshot(state_dir) == before
    real = run_import(engine, "mem0", path)
    assert (real["imported"], real["reused"]) == (would_import(result), result["reused"])


def test_a_bad_newer_export_changes_nothing(engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    run_import(engine, "mem0", write(tmp_path, mem0_memories()))
    bad = newer_memories()
    bad["results"][2]["memory"] = ""
    newer = tmp_path / "newer"
    newer.mkdir()
    before = store_snapshot(state_dir)

    with pytest.raises(InvalidParams) as caught:
        run_import(engine, "mem0", write(newer, bad))

    assert caught.value.details["place"] == "results[2].memory"
    assert store_snapshot(state_dir) == before


def test_graph_relations_beside_the_memories_are_counted_and_said_to_be_left_out(
        engine: Engine, tmp_path: Path) -> None:
    # mem0 with its graph store enabled answers get_all with the memories and the graph's relations.
    data = mem0_memories()
    data["relations"] = [{"source": "dana", "relationship": "sister_of", "target": "lotte"},
                         {"source": "dana", "relationship": "trains_for", "target": "half_marathon"}]

    result = run_import(engine, "mem0", write(tmp_path, data))

    assert result["imported"]["claims"] == 2 and result["relationsLeftOut"] == 2
    assert "Left out 2 graph relations" in " ".join(result["notes"])


def test_relations_that_are_not_a_list_are_refused(engine: Engine, tmp_path: Path) -> None:
    data = mem0_memories()
    data["relations"] = "dana -> lotte"

    with pytest.raises(InvalidParams) as caught:
        run_import(engine, "mem0", write(tmp_path, data))

    assert caught.value.details["place"] == "relations"
    assert engine.registry.agent("main") is None


def test_an_export_without_memories_says_so(engine: Engine, tmp_path: Path) -> None:
    result = run_import(engine, "mem0", write(tmp_path, {"results": []}))

    assert result["imported"]["claims"] == 0
    assert result["notes"] == ["memories.json holds no memories: nothing to import."]


def test_a_structured_platform_export_is_refused_saying_what_to_export_instead(engine: Engine, tmp_path: Path) -> None:
    # The platform's memory export is shaped by a schema the owner gave (here a profile), not a list of memories.
    profile = {"full_name": "Dana", "current_role": "engineer", "skills": ["kayaks"]}

    with pytest.raises(InvalidParams, match="get_all") as caught:
        run_import(engine, "mem0", write(tmp_path, profile))

    assert caught.value.details["file"] == "memories.json" and caught.value.details.get("place") is None
    assert engine.registry.agent("main") is None


def test_an_expiration_date_is_the_claims_valid_to_and_recording_times_are_not_validity(
        engine: Engine, tmp_path: Path) -> None:
    data = mem0_memories()
    data["results"][0]["expiration_date"] = "2026-03-31"
    data["results"][1]["expiration_date"] = "some day"  # no date: kept in the cited JSON only
    result = run_import(engine, "mem0", write(tmp_path, data))
    caller = reader(engine)
    tea, marathon = (engine.get_record(caller, claim_id)["frontmatter"] for claim_id in result["claims"])
    assert tea["valid_to"] == "2026-03-31" and "valid_from" not in tea  # created_at says when mem0 recorded it
    assert "valid_to" not in marathon and "valid_from" not in marathon
