"""The memory-core importer: MEMORY.md and memory/YYYY-MM-DD.md of an agent workspace written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.errors import InvalidParams
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import reader, run_import, store_snapshot

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
