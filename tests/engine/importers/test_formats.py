"""``run_import``, the one way every format runs (``knowledge import`` here, ``operator/import`` in the engine):
the receiving agent is registered at the import's first write, so an input with nothing to write registers
nobody."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.cli.commands import main
from engine.importers.formats import FORMATS, run_import
from engine.importers.summaries import import_summary
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import reader, state_snapshot
from tests.engine.importers.test_chatgpt import conversation, export, node
from tests.engine.importers.test_claude import export as claude_export
from tests.engine.importers.test_mem0 import mem0_memories
from tests.engine.importers.test_memory_core import MEMORY


def _run(engine: Engine, state_dir: StateDir, format_name: str, path: Path, **options: Any) -> dict[str, Any]:
    chosen = FORMATS[format_name]
    plan = chosen.load(str(path), engine.refuse_secrets)
    return run_import(engine, chosen, plan, agent="main", progress=None,
                      keep_token=lambda name, token: str(state_dir.write_agent_token(name, token)), **options)


def _no_store(state_dir: StateDir) -> bool:
    return not state_dir.stores.is_dir() or not any(state_dir.stores.iterdir())


NOTHING_TO_WRITE = {
    "an empty ChatGPT export": ("chatgpt", "conversations.json", [],
                                ["conversations.json holds no conversations: nothing to import."]),
    "an empty Claude export": ("claude", "conversations.json", [],
                               ["conversations.json holds no conversations: nothing to import."]),
    "an empty mem0 export": ("mem0", "memories.json", {"results": []},
                             ["memories.json holds no memories: nothing to import."]),
    "an OpenMemory export whose every memory is deleted": (
        "mem0", "memories.json", {"memories": [{"id": "m1", "content": "Likes tea", "state": "deleted"},
                                               {"id": "m2", "content": "Owns a kayak", "state": "deleted"}]},
        ["Skipped 2 deleted memories."]),
}


@pytest.mark.parametrize("case", NOTHING_TO_WRITE, ids=list(NOTHING_TO_WRITE))
def test_an_input_with_nothing_to_write_registers_nobody_and_says_so(
        engine: Engine, state_dir: StateDir, tmp_path: Path, case: str) -> None:
    format_name, file_name, data, notes = NOTHING_TO_WRITE[case]
    path = tmp_path / file_name
    path.write_text(json.dumps(data), encoding="utf-8")

    result = _run(engine, state_dir, format_name, path, dry_run=False)

    assert engine.registry.agent("main") is None
    assert not (state_dir.tokens / "main.token").exists() and "tokenFile" not in result
    assert _no_store(state_dir)
    assert result["agent"] == "main" and result["dryRun"] is False
    assert not any(result["imported"].values()) and result["notes"] == notes
    summary = import_summary(result).splitlines()
    assert summary[0] == (f"Nothing imported: the {format_name} input holds nothing to import; nothing was "
                          "written and no agent was registered.")
    assert summary[1:] == notes


def test_an_import_that_writes_registers_the_agent_at_its_first_write(
        engine: Engine, state_dir: StateDir, tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export()), encoding="utf-8")
    assert engine.registry.agent("main") is None

    result = _run(engine, state_dir, "chatgpt", path, dry_run=False)

    registered = engine.registry.agent("main")
    assert registered is not None and registered.active and registered.owner
    assert result["tokenFile"] == str(state_dir.tokens / "main.token") and Path(result["tokenFile"]).is_file()
    assert result["imported"]["pages"] == 2
    assert import_summary(result).startswith("Registered owner agent main; its token is in ")

    again = _run(engine, state_dir, "chatgpt", path, dry_run=False)  # known now: nothing registered again
    assert "tokenFile" not in again and again["pages"] == result["pages"]
    assert import_summary(again).startswith(  # nothing new: the first run made it all
        "Nothing new: all 2 sources and 2 pages of the chatgpt input in main's store were already made by an "
        "earlier run of this input; nothing was written.")


def test_knowledge_import_of_an_empty_export_leaves_no_agent_and_no_token(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "conversations.json"
    path.write_text("[]", encoding="utf-8")
    state = StateDir(tmp_path / "state")

    assert main(["--state-dir", str(state.root), "import", "chatgpt", str(path)]) == 0

    out = capsys.readouterr().out
    assert out.startswith("Nothing imported: the chatgpt input holds nothing to import;")
    assert "Registered owner agent" not in out
    assert not (state.tokens / "main.token").exists() and _no_store(state)
    with Engine(state, watch=False) as engine:
        assert engine.registry.agent("main") is None


def test_a_conversation_whose_every_message_is_left_out_still_gets_its_page(
        engine: Engine, state_dir: StateDir, tmp_path: Path) -> None:
    # Only what a tool fetched for the model: no message is kept, but the conversation is the export's.
    fetched = {"content_type": "tether_browsing_display", "result": "SEARCH RESULTS", "summary": None}
    data = [conversation("fetched", "Ferry times", [
        node("r", None, ["b"]),
        node("b", "r", [], "tool", None, content=fetched, author={"role": "tool", "name": "web"}),
    ], "b")]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")

    result = _run(engine, state_dir, "chatgpt", path, dry_run=False)

    assert result["imported"]["pages"] == 1 and "tokenFile" in result
    assert "0 messages on the active branch" in engine.get_record(reader(engine), result["pages"]["fetched"])["body"]


def _claude_export(folder: Path) -> Path:
    (folder / "conversations.json").write_text(json.dumps(claude_export()), encoding="utf-8")
    return folder / "conversations.json"


def _mem0_export(folder: Path) -> Path:
    (folder / "memories.json").write_text(json.dumps(mem0_memories()), encoding="utf-8")
    return folder / "memories.json"


def _workspace(folder: Path) -> Path:
    (folder / "memory").mkdir()
    (folder / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    (folder / "memory" / "2026-01-15.md").write_text("# 2026-01-15\n\n- Fixed the tram clock.\n", encoding="utf-8")
    return folder


IMPORTED_ALREADY = {"claude": _claude_export, "mem0": _mem0_export, "memory-core": _workspace}


@pytest.mark.parametrize("format_name", IMPORTED_ALREADY)
def test_a_dry_run_of_an_input_imported_already_would_create_nothing_and_writes_nothing(
        engine: Engine, state_dir: StateDir, tmp_path: Path, format_name: str) -> None:
    path = IMPORTED_ALREADY[format_name](tmp_path)
    first = _run(engine, state_dir, format_name, path, dry_run=False)
    before = state_snapshot(state_dir)

    result = _run(engine, state_dir, format_name, path, dry_run=True)

    assert any(first["imported"].values()) and not any(result["wouldCreate"].values())
    assert result["reused"] == first["imported"]
    assert import_summary(result).splitlines()[0].startswith(f"Dry run of the {format_name} import: nothing new: ")
    assert state_snapshot(state_dir) == before
