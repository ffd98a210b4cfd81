"""The memory-core importer: an OpenClaw agent workspace (MEMORY.md, USER.md, memory/**, DREAMS.md) written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.errors import InvalidParams
from engine.memory.recall import recall_candidates, set_recall
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import (reader, records, run_import, same_but_reused, state_snapshot,
                                            store_snapshot, would_import)

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

    assert same_but_reused(run_import(engine, "memory-core", workspace), first)
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
        "2 files changed since an earlier import: each got a new revision of its page.",
        "Left out 1 file or folder of the workspace that is not its memory: memory/notes.txt."]
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
    before = state_snapshot(state_dir)

    result = run_import(engine, "memory-core", workspace, dry_run=True)

    assert result["dryRun"] is True and result["revised"] == 1
    assert result["pages"] == first["pages"]
    # The changed file retained and its page revised; the other files, their pages and claims, reused.
    assert result["wouldCreate"] == {"sources": 1, "pages": 1, "claims": 0, "relationships": 0}
    assert result["reused"] == {"sources": 2, "pages": 2, "claims": 3, "relationships": 0}
    assert state_snapshot(state_dir) == before
    real = run_import(engine, "memory-core", workspace)
    assert (real["imported"], real["reused"]) == (would_import(result), result["reused"])
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
    assert result["notes"] == ["3 task-list items neither open nor done ([-], [>], ...) or without text stay "
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
    assert second["notes"][-1] == ("1 list item changed since an earlier import: it got a new claim that "
                                   "replaces its earlier one, which is kept as superseded.")
    after = store_snapshot(state_dir)
    assert run_import(engine, "memory-core", root)["imported"] == second["imported"]  # again: nothing new
    assert store_snapshot(state_dir) == after


# --- a workspace as OpenClaw 2026.9 writes it ----------------------------------------------------------------
# Written here after OpenClaw's documented layout (concepts/memory, user-model, dreaming, cli/migrate) and the
# shapes its memory-core writes: promote's `[score=… source=path:a-b]` entries and `Source: path#La-Lb`
# consolidations, trailing `<!-- trigger -->` / `<!-- importance -->` annotations, USER.md's dated directives.

OPENCLAW_MEMORY = """# Long-term memory

- Dana's sister Lotte lives in Ghent. <!-- trigger: Lotte, Ghent family --> <!-- importance: 7 -->
- Keep the gateway on loopback.
- [ ] Renew the passport <!-- importance: 4 -->

## Promoted From Short-Term Memory (2026-12-03)

<!-- openclaw-memory-promotion:memory:memory/2026-12-02.md:1:4 -->
- # 2026-12-02 ## Billing service - The billing service retries failed charges three times. \
[score=0.747 signals=3 recalls=3 avg=0.620 source=memory/2026-12-02.md:1-4] \
<!-- trigger: billing retries, failed charges --> <!-- importance: 7 -->
- Invoices go out on the first of the month. Source: memory/2026-11-30.md#L2-L2 \
<!-- trigger: invoices --> <!-- importance: 5 --> <!-- project: billing -->
"""

OPENCLAW_USER = """# USER.md - User Model

Store stable user preferences and profile facts as directives.

```md
<!-- observed: YYYY-MM-DD | status: active -->

- Prefer concise progress updates during implementation work.
```

- Begin each directive with an imperative such as `Always`, `Never`, or `Prefer`.

## Directives

<!-- observed: 2026-05-10 | status: superseded -->

- Prefer detailed explanations for every code change.

<!-- observed: 2026-07-27 | status: active -->

- Prefer concise implementation summaries unless more detail is requested. <!-- trigger: code review --> \
<!-- importance: 6 -->

<!-- observed: YYYY-MM-DD | status: active -->

- Prefer ...
"""

OPENCLAW_DREAMS = """# Dream Diary

<!-- openclaw:dreaming:diary:start -->
---

*December 2, 2026*

<!-- openclaw:dreaming:backfill-entry day=2026-12-02 source=memory/2026-12-02.md -->

What Happened
1. Billing service: retries run three times. [memory/2026-12-02.md:4]

Reflections
1. No grounded reflections emerged from this note yet.
<!-- openclaw:dreaming:diary:end -->
"""


def write_openclaw_workspace(root: Path) -> Path:
    files = {
        "MEMORY.md": OPENCLAW_MEMORY,
        "memory.md": "- Bruno once sold kayaks in Leuven.\n",  # the legacy file doctor would merge
        "USER.md": OPENCLAW_USER,
        "users/prof_7Q2K/USER.md": "<!-- observed: 2026-11-02 | status: active -->\n\n- Always answer Bruno in Dutch.\n",
        "DREAMS.md": OPENCLAW_DREAMS,
        "memory/2026-12-02.md": "# 2026-12-02\n\n## Billing service\n- The billing service retries failed charges "
                                "three times.\n",
        "memory/2026-12-02-billing-retro.md": "# Session: 2026-12-02 14:05:11 UTC\n\n- **Session Key**: agent:main\n",
        "memory/dreaming/deep/2026-12-02.md": "# Deep Sleep\n\n- Promoted 1 candidate.\n",
        "memory/imports/claude-code/proj-1a2b3c/MEMORY.md": "- [tea](tea.md) how Dana takes tea\n",
        "memory/imports/claude-code/proj-1a2b3c/tea.md": "---\nname: tea\ntype: user\n---\n\nDana takes tea without sugar.\n",
        "AGENTS.md": "# AGENTS.md\n\n- Read SOUL.md first.\n",
        "SOUL.md": "# SOUL.md\n",
        "skills/weather/SKILL.md": "---\nname: weather\n---\n",
        ".openclaw/workspace-state.json": "{}",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def openclaw(tmp_path: Path) -> Path:
    return write_openclaw_workspace(tmp_path / "workspace")


def claims_by_text(engine: Engine, state_dir: StateDir) -> dict[str, dict]:
    """Every claim of the store by its text: its id, kind, title and evidence."""
    caller = reader(engine)
    found = {}
    for path in records(state_dir, "claims/"):
        record = engine.get_record(caller, path.rsplit("/", 1)[-1].split(".", 1)[0])
        found[record["body"].strip()] = {"id": record["id"], "kind": record["frontmatter"]["claim_kind"],
                                         "title": record["title"], "evidence": record["frontmatter"]["evidence"],
                                         "recall": record["frontmatter"].get("recall")}
    return found


def test_every_memory_file_of_an_openclaw_workspace_is_a_page(engine: Engine, openclaw: Path) -> None:
    result = run_import(engine, "memory-core", openclaw)

    caller = reader(engine)
    shown = {name: (page["title"], page["frontmatter"]["tags"])
             for name, page in ((n, engine.get_record(caller, i)) for n, i in result["pages"].items())}
    assert shown == {
        "MEMORY.md": ("Long-term memory", ["memory-core"]),
        "memory.md": ("memory.md", ["memory-core"]),
        "USER.md": ("USER.md - User Model", ["memory-core", "user-model"]),
        "users/prof_7Q2K/USER.md": ("USER.md (profile prof_7Q2K)", ["memory-core", "user-model"]),
        "DREAMS.md": ("Dream Diary", ["memory-core", "dream-diary"]),
        "memory/2026-12-02.md": ("Daily memory 2026-12-02", ["memory-core", "daily-note"]),
        "memory/2026-12-02-billing-retro.md": ("Daily memory 2026-12-02: billing-retro", ["memory-core", "daily-note"]),
        "memory/dreaming/deep/2026-12-02.md": ("Dreaming report: deep/2026-12-02", ["memory-core", "dreaming-report"]),
        "memory/imports/claude-code/proj-1a2b3c/MEMORY.md": ("Imported from claude-code: proj-1a2b3c/MEMORY",
                                                             ["memory-core", "imported-memory"]),
        "memory/imports/claude-code/proj-1a2b3c/tea.md": ("Imported from claude-code: proj-1a2b3c/tea",
                                                          ["memory-core", "imported-memory"]),
    }
    assert result["files"] == 10
    assert result["leftOut"] == ["AGENTS.md", "SOUL.md", "skills/"]
    assert ("Left out 3 files and folders of the workspace that are not its memory: AGENTS.md, SOUL.md, "
            "skills/.") in result["notes"]


def test_memory_and_user_entries_are_claims_and_dreams_and_imports_are_not(
        engine: Engine, openclaw: Path, state_dir: StateDir) -> None:
    result = run_import(engine, "memory-core", openclaw)

    claims = claims_by_text(engine, state_dir)
    assert sorted((c["kind"], text) for text, c in claims.items()) == [
        ("commitment", "Renew the passport"),
        ("fact", "Bruno once sold kayaks in Leuven."),
        ("fact", "Dana's sister Lotte lives in Ghent."),
        ("fact", "Invoices go out on the first of the month."),
        ("fact", "Keep the gateway on loopback."),
        ("fact", "The billing service retries failed charges three times."),
        ("preference", "Always answer Bruno in Dutch."),
        ("preference", "Prefer concise implementation summaries unless more detail is requested."),
    ]
    assert result["claims"] == 8
    assert ("3 list items of USER.md that are no active directive (superseded, the template's undated "
            "placeholder, guidance without an observed line) stay in their page's body and are not claims."
            ) in result["notes"]


def test_annotations_are_no_claim_text_and_become_proposals_nobody_approved(
        engine: Engine, openclaw: Path, state_dir: StateDir) -> None:
    result = run_import(engine, "memory-core", openclaw)

    claims = claims_by_text(engine, state_dir)
    for text, claim in claims.items():
        assert "<!--" not in text and "<!--" not in claim["title"]
        assert all("<!--" not in (e.get("quote") or "") for e in claim["evidence"])
        assert claim["recall"] is None  # the import approves nothing
    lotte = claims["Dana's sister Lotte lives in Ghent."]
    assert lotte["title"] == "Dana's sister Lotte lives in Ghent."
    assert lotte["evidence"][0]["quote"] == "Dana's sister Lotte lives in Ghent."
    by_claim = {p["claim"]: p for p in result["recallProposals"]}
    assert by_claim[lotte["id"]] == {"claim": lotte["id"], "file": "MEMORY.md", "line": 3,
                                     "triggers": ["Lotte", "Ghent family"], "importance": 7, "projects": []}
    assert by_claim[claims["Renew the passport"]["id"]]["triggers"] == []
    assert by_claim[claims["Renew the passport"]["id"]]["importance"] == 4
    assert by_claim[claims["Invoices go out on the first of the month."]["id"]]["projects"] == ["billing"]
    summaries = claims["Prefer concise implementation summaries unless more detail is requested."]
    assert by_claim[summaries["id"]]["file"] == "USER.md" and by_claim[summaries["id"]]["triggers"] == ["code review"]
    assert claims["Keep the gateway on loopback."]["id"] not in by_claim  # no annotation, no proposal
    assert len(by_claim) == 5
    page = engine.get_record(reader(engine), result["pages"]["MEMORY.md"])
    assert "<!-- trigger: Lotte, Ghent family --> <!-- importance: 7 -->" in page["body"]  # the file as written
    # An imported claim's text came from a file: the engine approves recall only on the owner's own words.
    with pytest.raises(InvalidParams, match="assertion_origin 'source'"):
        set_recall(engine, reader(engine), {"id": lotte["id"], "recall": {"summary": "Lotte lives in Ghent",
                                                                           "triggers": ["Lotte"], "importance": 7}})
    assert recall_candidates(engine, reader(engine), {"mode": "trigger"})["candidates"] == []


def test_a_promoted_entry_is_the_fact_it_carries_citing_its_daily_note(
        engine: Engine, openclaw: Path, state_dir: StateDir) -> None:
    result = run_import(engine, "memory-core", openclaw)

    claims = claims_by_text(engine, state_dir)
    assert not [text for text in claims if "score=" in text or "Source:" in text or text.startswith("#")]
    billing = claims["The billing service retries failed charges three times."]
    caller = reader(engine)
    long_term = engine.get_record(caller, result["pages"]["MEMORY.md"])["frontmatter"]["evidence"][0]["source"]
    daily = engine.get_record(caller, result["pages"]["memory/2026-12-02.md"])["frontmatter"]["evidence"][0]["source"]
    assert billing["evidence"] == [
        {"source": long_term, "lines": [10, 10],
         "quote": "# 2026-12-02 ## Billing service - The billing service retries failed charges three times."},
        {"source": daily, "lines": [1, 4]}]
    # Consolidated (`Source: path#La-Lb`) from a daily note the workspace no longer has: its MEMORY.md line only.
    invoices = claims["Invoices go out on the first of the month."]
    assert invoices["evidence"] == [{"source": long_term, "lines": [11, 11],
                                     "quote": "Invoices go out on the first of the month."}]
    assert "[score=0.747 signals=3 recalls=3 avg=0.620 source=memory/2026-12-02.md:1-4]" in engine.get_record(
        caller, result["pages"]["MEMORY.md"])["body"]
    assert ("2 entries written by memory promote are claimed as the fact they carry, citing their MEMORY.md "
            "line; 1 also cites the daily note lines it came from, the rest name a daily note that is not in the "
            "workspace or no longer says it.") in result["notes"]


def test_a_daily_note_edited_since_promotion_is_not_cited(engine: Engine, openclaw: Path, state_dir: StateDir) -> None:
    (openclaw / "memory" / "2026-12-02.md").write_text("# 2026-12-02\n\n## Billing service\n- Retries were dropped.\n",
                                                       encoding="utf-8")

    run_import(engine, "memory-core", openclaw)

    billing = claims_by_text(engine, state_dir)["The billing service retries failed charges three times."]
    assert len(billing["evidence"]) == 1


def test_an_openclaw_workspace_imported_again_changes_nothing(
        engine: Engine, openclaw: Path, state_dir: StateDir) -> None:
    dry = run_import(engine, "memory-core", openclaw, dry_run=True)
    first = run_import(engine, "memory-core", openclaw)
    before = store_snapshot(state_dir)

    assert same_but_reused(run_import(engine, "memory-core", openclaw), first)
    assert store_snapshot(state_dir) == before
    assert dry["wouldCreate"] == first["imported"] and len(dry["recallProposals"]) == len(first["recallProposals"])


def test_a_legacy_memory_md_alone_is_the_long_term_memory(engine: Engine, tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "memory.md").write_text("# Old memory\n\n- Bruno once sold kayaks in Leuven.\n", encoding="utf-8")

    result = run_import(engine, "memory-core", root)

    assert list(result["pages"]) == ["memory.md"] and result["claims"] == 1


# --- symbolic links -----------------------------------------------------------------------------------------


def test_linked_memory_files_are_not_followed_but_named(
        engine: Engine, openclaw: Path, tmp_path: Path, state_dir: StateDir) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret-plans.md").write_text("- Dana plans to move to Lisbon.\n", encoding="utf-8")
    (openclaw / "MEMORY.md").unlink()
    (openclaw / "MEMORY.md").symlink_to(elsewhere / "secret-plans.md")
    (openclaw / "USER.md").unlink()
    (openclaw / "USER.md").symlink_to(elsewhere / "secret-plans.md")
    (openclaw / "memory" / "2026-12-01.md").symlink_to(elsewhere / "secret-plans.md")
    (openclaw / "users" / "prof_9XYZ").symlink_to(elsewhere)

    result = run_import(engine, "memory-core", openclaw)

    assert not {"MEMORY.md", "USER.md", "memory/2026-12-01.md"} & set(result["pages"])
    assert "Lisbon" not in str(store_snapshot(state_dir))
    assert result["leftOut"][:4] == ["MEMORY.md", "USER.md", "memory/2026-12-01.md", "users/prof_9XYZ"]
    assert ("Left out 4 symbolic links, which an import never follows: MEMORY.md, USER.md, memory/2026-12-01.md, "
            "users/prof_9XYZ.") in result["notes"]


def test_a_linked_memory_folder_is_not_followed(engine: Engine, tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "workspace", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "2026-12-01.md").write_text("- Dana plans to move to Lisbon.\n", encoding="utf-8")
    root.mkdir()
    (root / "memory").symlink_to(elsewhere)
    (root / "MEMORY.md").write_text("- Keep the gateway on loopback.\n", encoding="utf-8")

    result = run_import(engine, "memory-core", root)

    assert list(result["pages"]) == ["MEMORY.md"]
    assert result["leftOut"] == ["memory"]


def test_a_workspace_whose_only_memory_is_a_link_is_refused(engine: Engine, tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (tmp_path / "notes.md").write_text("- a note\n", encoding="utf-8")
    (root / "MEMORY.md").symlink_to(tmp_path / "notes.md")

    with pytest.raises(InvalidParams, match="neither MEMORY.md nor"):
        run_import(engine, "memory-core", root / "MEMORY.md")
    assert engine.registry.agent("main") is None
