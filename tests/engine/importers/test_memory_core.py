"""The memory-core importer: MEMORY.md and memory/YYYY-MM-DD.md of an agent workspace written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.errors import InvalidParams
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import reader, records, run_import, store_snapshot

MEMORY = """# What I know about Dana

## People
- Dana's sister Lotte lives in Ghent.
- Bruno builds kayak racks.

## Preferences
1. Status notes go out on Fridays.

```
- not a memory, a code sample
```
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    (root / "memory" / "2026-01-15.md").write_text("# 2026-01-15\n\n- Fixed the tram clock.\n", encoding="utf-8")
    (root / "memory" / "2026-01-16-release.md").write_text("Shipped 1.4.\n", encoding="utf-8")
    (root / "memory" / "notes.txt").write_text("not markdown", encoding="utf-8")
    return root


def test_memory_md_items_are_claims_and_daily_notes_pages(engine: Engine, workspace: Path) -> None:
    result = run_import(engine, "memory-core", workspace)

    assert result["imported"] == {"sources": 3, "pages": 3, "claims": 3, "relationships": 0}
    caller = reader(engine)
    long_term = engine.get_record(caller, result["pages"]["MEMORY.md"])
    assert long_term["title"] == "What I know about Dana"
    assert long_term["frontmatter"]["tags"] == ["memory-core"]
    assert "- Bruno builds kayak racks." in long_term["body"]
    daily = engine.get_record(caller, result["pages"]["memory/2026-01-15.md"])
    assert daily["title"] == "Daily memory 2026-01-15"
    assert daily["frontmatter"]["tags"] == ["memory-core", "daily-note"]
    release = engine.get_record(caller, result["pages"]["memory/2026-01-16-release.md"])
    assert release["title"] == "Daily memory 2026-01-16: release"

    found = engine.search(caller, {"query": "sister Lotte Ghent"})
    claims = [hit for hit in found["hits"] if hit["kind"] == "claim"]
    claim = engine.get_record(caller, claims[0]["id"])["frontmatter"]
    assert claim["assertion_origin"] == "source"
    assert claim["evidence"][0]["lines"] == [4, 4]
    assert claim["evidence"][0]["quote"] == "Dana's sister Lotte lives in Ghent."


def test_importing_again_and_dry_run(engine: Engine, workspace: Path, state_dir: StateDir) -> None:
    assert run_import(engine, "memory-core", workspace, dry_run=True)["wouldCreate"]["claims"] == 3
    assert engine.registry.agent("main") is None
    first = run_import(engine, "memory-core", workspace)
    before = store_snapshot(state_dir)

    assert run_import(engine, "memory-core", workspace) == first
    assert store_snapshot(state_dir) == before


def test_the_memory_md_path_itself_is_accepted(engine: Engine, workspace: Path) -> None:
    assert run_import(engine, "memory-core", workspace / "MEMORY.md")["files"] == 3


def test_a_daily_note_named_after_no_date_is_refused(engine: Engine, workspace: Path) -> None:
    (workspace / "memory" / "2026-02-30.md").write_text("- a day that never was\n", encoding="utf-8")

    with pytest.raises(InvalidParams) as caught:
        run_import(engine, "memory-core", workspace)

    assert caught.value.details["file"] == "memory/2026-02-30.md"
    assert engine.registry.agent("main") is None


def test_a_file_that_is_not_utf8_is_refused_with_the_byte(engine: Engine, workspace: Path) -> None:
    (workspace / "MEMORY.md").write_bytes(b"- caf\xe9\n")

    with pytest.raises(InvalidParams) as caught:
        run_import(engine, "memory-core", workspace)

    assert (caught.value.details["file"], caught.value.details["place"]) == ("MEMORY.md", "byte 5")


def test_an_empty_workspace_is_refused(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(InvalidParams, match="neither MEMORY.md nor"):
        run_import(engine, "memory-core", tmp_path)


# --- importing the workspace again after it changed -------------------------------------------------------


def test_changed_files_revise_their_pages_and_new_items_are_new_claims(
        engine: Engine, workspace: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "memory-core", workspace)
    before = store_snapshot(state_dir)
    (workspace / "MEMORY.md").write_text(MEMORY.replace("# What I know about Dana", "# What I know about Dana Peeters")
                                         + "- Dana moved the standup to 9:30.\n", encoding="utf-8")
    (workspace / "memory" / "2026-01-15.md").write_text("# 2026-01-15\n\n- Fixed the tram clock.\n- Oiled it.\n",
                                                        encoding="utf-8")
    (workspace / "memory" / "2026-01-17.md").write_text("- Quiet day.\n", encoding="utf-8")

    second = run_import(engine, "memory-core", workspace)

    caller = reader(engine)
    for name in ("MEMORY.md", "memory/2026-01-15.md"):  # the same pages, their next revision
        assert second["pages"][name] == first["pages"][name]
        assert [r["revision"] for r in engine.history(caller, first["pages"][name])["revisions"]] == [1, 2]
    long_term = engine.get_record(caller, first["pages"]["MEMORY.md"])
    assert long_term["title"] == "What I know about Dana Peeters" and "standup to 9:30" in long_term["body"]
    assert engine.get_record(caller, first["pages"]["MEMORY.md"], revision=1)["title"] == "What I know about Dana"
    release = first["pages"]["memory/2026-01-16-release.md"]
    assert second["pages"]["memory/2026-01-16-release.md"] == release
    assert engine.get_record(caller, release)["revision"] == 1
    path = engine.get_record(caller, release)["path"]
    assert store_snapshot(state_dir)[f"private/{path}"] == before[f"private/{path}"]
    assert second["pages"]["memory/2026-01-17.md"] not in first["pages"].values()
    assert second["revised"] == 2 and second["notes"] == [
        "2 file(s) changed since an earlier import: each got a new revision of its page.",
        "Left out 1 file(s) and folder(s) of the workspace that are not its memory: memory/notes.txt."]
    # The three items claimed before are not claimed again; the new one is a new claim citing the newer file.
    assert second["claims"] == 4 and len(records(state_dir, "claims/")) == 4
    new = [hit for hit in engine.search(caller, {"query": "standup"})["hits"] if hit["kind"] == "claim"]
    claim = engine.get_record(caller, new[0]["id"])["frontmatter"]
    cited = [e["source"] for e in long_term["frontmatter"]["evidence"]]
    assert len(cited) == 2 and claim["evidence"][0]["source"] == cited[-1]  # the newer file, beside the first
    assert claim["evidence"][0]["quote"] == "Dana moved the standup to 9:30."

    after = store_snapshot(state_dir)
    third = run_import(engine, "memory-core", workspace)  # again: nothing
    assert (third["pages"], third["imported"], third["revised"]) == (second["pages"], second["imported"], 0)
    assert store_snapshot(state_dir) == after


def test_a_dry_run_says_what_it_would_revise(engine: Engine, workspace: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "memory-core", workspace)
    (workspace / "memory" / "2026-01-16-release.md").write_text("Shipped 1.4.1.\n", encoding="utf-8")
    before = store_snapshot(state_dir)

    result = run_import(engine, "memory-core", workspace, dry_run=True)

    assert result["dryRun"] is True and result["revised"] == 1
    assert result["pages"] == first["pages"]
    assert store_snapshot(state_dir) == before
    assert run_import(engine, "memory-core", workspace)["imported"] == result["wouldCreate"]
    assert engine.get_record(reader(engine), first["pages"]["memory/2026-01-16-release.md"])["revision"] == 2


def test_a_bad_file_in_a_workspace_imported_before_changes_nothing(
        engine: Engine, workspace: Path, state_dir: StateDir) -> None:
    run_import(engine, "memory-core", workspace)
    (workspace / "MEMORY.md").write_text(MEMORY + "- more\n", encoding="utf-8")
    (workspace / "memory" / "2026-02-30.md").write_text("- a day that never was\n", encoding="utf-8")
    before = store_snapshot(state_dir)

    with pytest.raises(InvalidParams):
        run_import(engine, "memory-core", workspace)

    assert store_snapshot(state_dir) == before


def test_a_memory_md_saved_with_a_byte_order_mark_keeps_its_first_item(engine: Engine, tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "MEMORY.md").write_bytes("\ufeff- Dana takes the 7:40 ferry.\n- Lotte lives in Ghent.\r\n".encode("utf-8"))

    result = run_import(engine, "memory-core", root)

    assert result["claims"] == 2


# --- task lists ---------------------------------------------------------------------------------------------

TASKS = """# Dana's agent

- Dana likes her tea without sugar.
- [ ] Renew the passport before June
- [x] Sent Lotte the photos
- [X] Booked the ferry
- [ ]
- [-] Cancelled the kayak course
- [>] Call the notary
- [a] is no box: the item's own words
"""


def claims_of(engine: Engine, state_dir: StateDir) -> dict[str, dict]:
    """Every claim of the store by its id: (kind, text, lifecycle, what it replaces, its first quote)."""
    caller = reader(engine)
    found = {}
    for path in records(state_dir, "claims/"):
        record_id = path.rsplit("/", 1)[-1].split(".", 1)[0]
        record = engine.get_record(caller, record_id)
        frontmatter = record["frontmatter"]
        found[record["id"]] = {"kind": frontmatter["claim_kind"], "text": record["body"].strip(),
                               "lifecycle": frontmatter.get("lifecycle", "active"),
                               "replaces": frontmatter.get("replaces"),
                               "quote": frontmatter["evidence"][0].get("quote")}
    return found


def test_task_list_items_are_commitments_and_events_without_their_box(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "MEMORY.md").write_text(TASKS, encoding="utf-8")

    result = run_import(engine, "memory-core", root)

    claims = sorted((c["kind"], c["text"], c["quote"]) for c in claims_of(engine, state_dir).values())
    assert claims == [
        ("commitment", "Renew the passport before June", "Renew the passport before June"),
        ("event", "Booked the ferry", "Booked the ferry"),
        ("event", "Sent Lotte the photos", "Sent Lotte the photos"),
        ("fact", "Dana likes her tea without sugar.", "Dana likes her tea without sugar."),
        ("fact", "[a] is no box: the item's own words", "[a] is no box: the item's own words"),
    ]
    assert result["claims"] == 5
    assert result["notes"] == ["3 task-list item(s) neither open nor done ([-], [>], ...) or without text stay "
                               "in their page's body and are not claims."]
    page = engine.get_record(reader(engine), result["pages"]["MEMORY.md"])
    assert "- [-] Cancelled the kayak course" in page["body"]  # the page keeps the file as it is


def test_a_task_ticked_off_since_an_earlier_import_replaces_its_commitment(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "MEMORY.md").write_text("- [ ] Renew the passport\n- Dana likes tea.\n", encoding="utf-8")
    run_import(engine, "memory-core", root)
    (open_task,) = [i for i, c in claims_of(engine, state_dir).items() if c["kind"] == "commitment"]
    # ticked off, and written twice (the second time under another heading): its commitment is replaced once
    (root / "MEMORY.md").write_text("- [x] Renew the passport\n- Dana likes tea.\n\n## Done\n- [x] Renew the passport\n",
                                    encoding="utf-8")

    second = run_import(engine, "memory-core", root)

    claims = claims_of(engine, state_dir)
    assert claims[open_task]["lifecycle"] == "superseded"
    done = sorted(([c["text"], c["replaces"], c["lifecycle"]] for c in claims.values() if c["kind"] == "event"),
                  key=lambda c: c[1] is None)
    assert done == [["Renew the passport", open_task, "active"], ["Renew the passport", None, "active"]]
    assert len(claims) == 4 and second["claims"] == 3
    assert second["notes"][-1] == ("1 list item(s) changed since an earlier import: each got a new claim that "
                                   "replaces its earlier one, which is kept as superseded.")
    after = store_snapshot(state_dir)
    assert run_import(engine, "memory-core", root)["imported"] == second["imported"]  # again: nothing new
    assert store_snapshot(state_dir) == after
