"""The Claude importer on small exports written here in the real shape (chat_messages, content blocks)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from engine.core.errors import InvalidParams
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import imported_page, reader, records, run_import, same_but_reused, store_snapshot
from tests.helpers import only_store


def message(uuid: str, sender: str, text: str, *, blocks: bool = True, parent: str | None = None,
            **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"uuid": uuid, "text": "" if blocks else text, "sender": sender,
                            "created_at": "2026-03-02T09:15:00.123456Z", "updated_at": "2026-03-02T09:15:00Z",
                            "attachments": [], "files": [], **extra}
    if blocks:
        data["content"] = [{"type": "text", "text": text, "citations": []},
                           {"type": "tool_use", "name": "web_search", "input": {"query": "HIDDEN TOOL"}}]
    if parent is not None:
        data["parent_message_uuid"] = parent
    return data


def export() -> list[dict[str, Any]]:
    return [
        {"uuid": "3f1c0000-0000-4000-8000-00000000000a", "name": "Harbour market opening hours",
         "created_at": "2026-03-02T09:14:59.000000Z", "updated_at": "2026-03-02T09:20:00.000000Z",
         "account": {"uuid": "acc-1"},
         "chat_messages": [
             message("m1", "human", "When does the harbour market open?",
                     attachments=[{"file_name": "market-map.pdf", "file_type": "pdf", "file_size": 100,
                                   "extracted_content": "stalls"}]),
             message("m2", "assistant", "On Sundays from eight.", blocks=False),
         ]},
        {"uuid": "3f1c0000-0000-4000-8000-00000000000b", "name": "", "created_at": "2026-03-03T10:00:00Z",
         "updated_at": "2026-03-03T10:05:00Z", "current_leaf_message_uuid": "b3",
         "chat_messages": [
             message("b1", "human", "Name a kayak.", parent="00000000-0000-4000-8000-000000000000"),
             message("b2-old", "assistant", "RETRIED AWAY", parent="b1"),
             message("b2", "assistant", "Call it Driftwood.", parent="b1"),
             message("b3", "human", "Perfect, thanks.", parent="b2"),
         ]},
    ]


@pytest.fixture
def export_file(tmp_path: Path) -> Path:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export(), indent=2), encoding="utf-8")
    return path


def test_one_page_per_conversation_with_its_messages(engine: Engine, export_file: Path) -> None:
    result = run_import(engine, "claude", export_file)

    assert result["imported"]["pages"] == 2
    caller = reader(engine)
    market = engine.get_record(caller, result["pages"]["3f1c0000-0000-4000-8000-00000000000a"])
    assert market["title"] == "Harbour market opening hours"
    assert market["frontmatter"]["fields"] == {
        "published": "2026-03-02", "url": "https://claude.ai/chat/3f1c0000-0000-4000-8000-00000000000a"}
    assert market["frontmatter"]["tags"] == ["claude"]
    assert "User (2026-03-02T09:15:00Z):\nWhen does the harbour market open?\n[attachment: market-map.pdf]" \
        in market["body"]
    assert "Assistant (2026-03-02T09:15:00Z):\nOn Sundays from eight." in market["body"]
    assert "HIDDEN TOOL" not in market["body"]


def test_only_the_branch_to_the_current_leaf_is_imported(engine: Engine, export_file: Path) -> None:
    result = run_import(engine, "claude", export_file)

    kayak = engine.get_record(reader(engine), result["pages"]["3f1c0000-0000-4000-8000-00000000000b"])
    assert kayak["title"] == "Untitled conversation"
    assert "Call it Driftwood." in kayak["body"] and "RETRIED AWAY" not in kayak["body"]
    assert "3 messages on the active branch" in kayak["body"]


def test_the_zip_imports_once(engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    archive = tmp_path / "data-2026-03-04.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("users.json", "[]")
        out.writestr("conversations.json", json.dumps(export()))
    first = run_import(engine, "claude", archive)
    before = store_snapshot(state_dir)

    assert same_but_reused(run_import(engine, "claude", archive), first)
    assert store_snapshot(state_dir) == before


def test_dry_run_counts_without_writing(engine: Engine, export_file: Path) -> None:
    result = run_import(engine, "claude", export_file, dry_run=True)

    assert result["wouldCreate"]["pages"] == 2
    assert engine.registry.agent("main") is None


@pytest.mark.parametrize("change, place", [
    (lambda data: data[0]["chat_messages"][1].update(sender="robot"), "[0].chat_messages[1].sender"),
    (lambda data: data[1].pop("uuid"), "[1]"),
    (lambda data: data[0]["chat_messages"][0]["content"].__setitem__(0, "text"), "[0].chat_messages[0].content[0]"),
    (lambda data: data[1].update(current_leaf_message_uuid="gone"), "[1].current_leaf_message_uuid"),
])
def test_a_bad_export_is_refused_with_the_place(engine: Engine, tmp_path: Path, change: Any, place: str) -> None:
    data = export()
    change(data)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")

    with pytest.raises(InvalidParams) as caught:
        run_import(engine, "claude", path)

    assert caught.value.details["place"] == place
    assert engine.registry.agent("main") is None


def test_transcripts_share_a_retained_file_and_one_too_large_keeps_its_own(
        engine: Engine, tmp_path: Path, state_dir: StateDir, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.importers import common, conversations
    for module in (common, conversations):  # parts are cut where originals are retained, and cited by pages
        monkeypatch.setattr(module, "ATTACH_MAX_BYTES", 600)
    data = export()
    data.append({"uuid": "long-one", "name": "Long", "created_at": "2026-03-04T10:00:00Z",
                 "chat_messages": [message("l1", "human", "word " * 200)]})
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")

    result = run_import(engine, "claude", path)

    caller = reader(engine)
    first, second, long = (engine.get_record(caller, result["pages"][key])["frontmatter"]["evidence"][0]
                           for key in ("3f1c0000-0000-4000-8000-00000000000a", "3f1c0000-0000-4000-8000-00000000000b",
                                       "long-one"))
    assert first["source"] == second["source"] and first["lines"][1] < second["lines"][0]
    assert long["source"] != first["source"]
    sources = next(state_dir.stores.iterdir()) / "vault" / "private" / "sources"
    own = (sources / f"{long['source']}.txt").read_text(encoding="utf-8")
    assert own.startswith("User (") and "# Long" not in own  # an excerpt of its own, not a transcripts file
    shared = (sources / f"{first['source']}.txt").read_text(encoding="utf-8")
    assert shared.startswith("# Harbour market opening hours (3f1c0000-0000-4000-8000-00000000000a)\n")


def test_a_renamed_conversation_in_a_newer_export_is_a_new_revision_of_its_page(
        engine: Engine, export_file: Path, tmp_path: Path) -> None:
    first = run_import(engine, "claude", export_file)
    newer = export()
    newer[0]["name"] = "Harbour market: opening hours and stalls"
    newer[0]["chat_messages"].append(message("m3", "human", "And on holidays?"))
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(newer), encoding="utf-8")

    second = run_import(engine, "claude", path)

    assert second["pages"] == first["pages"] and second["revised"] == 1
    market = engine.get_record(reader(engine), first["pages"]["3f1c0000-0000-4000-8000-00000000000a"])
    assert market["revision"] == 2 and market["title"] == "Harbour market: opening hours and stalls"
    assert "And on holidays?" in market["body"]
    kayak = engine.get_record(reader(engine), first["pages"]["3f1c0000-0000-4000-8000-00000000000b"])
    assert kayak["revision"] == 1


def test_an_attachments_text_and_a_file_the_export_holds_are_retained_and_cited(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    data = export()
    data[0]["chat_messages"][0]["files"] = [{"file_name": "stall-photo.jpg", "file_uuid": "9d2e4f10-aaaa"}]
    data[1]["chat_messages"][1]["attachments"] = [{"file_name": "retried.txt", "extracted_content": "GONE"}]
    archive = tmp_path / "claude-export.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("conversations.json", json.dumps(data))
        out.writestr("files/9d2e4f10-aaaa-stall-photo.jpg", b"\xff\xd8\xff jpeg bytes")

    result = run_import(engine, "claude", archive)

    # the export, the transcripts, market-map.pdf's text, the photo; not the abandoned retry's attachment
    assert result["imported"]["sources"] == 4
    market = engine.get_record(reader(engine), result["pages"]["3f1c0000-0000-4000-8000-00000000000a"])
    cited = [e["source"] for e in market["frontmatter"]["evidence"]]
    files = records(state_dir, "sources/")
    texts = [p for p in files if p.endswith(".txt") and any(c in p for c in cited)]
    vault = only_store(state_dir) / "vault"
    assert any((vault / p).read_text(encoding="utf-8") == "stalls" for p in texts)
    assert any(p.endswith(".jpg") and any(c in p for c in cited) for p in files)
    assert not any("GONE" in (vault / p).read_text(encoding="utf-8") for p in files if p.endswith(".txt"))


def page_of(engine: Engine, tmp_path: Path, data: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return imported_page(engine, tmp_path, "claude", data, key)


def test_an_artifact_claude_wrote_is_in_the_transcript(engine: Engine, tmp_path: Path) -> None:
    # An artifact is a tool_use block (name "artifacts"): created whole, later edited by a replacement.
    created = {"type": "tool_use", "name": "artifacts", "input": {
        "id": "packing-list", "command": "create", "type": "text/markdown", "title": "Packing list",
        "content": "# Packing list\n- tent\n- stove"}}
    edited = {"type": "tool_use", "name": "artifacts", "input": {
        "id": "packing-list", "command": "update", "old_str": "- stove", "new_str": "- stove\n- matches"}}
    result_block = {"type": "tool_result", "name": "artifacts", "content": [{"type": "text", "text": "OK"}]}
    written = {"type": "tool_use", "name": "create_file", "input": {
        "path": "/mnt/user-data/outputs/route.txt", "file_text": "Day 1: Aviemore to Loch Etchachan"}}
    data = [{"uuid": "art-1", "name": "Camping trip", "created_at": "2026-03-05T08:00:00Z",
             "chat_messages": [
                 message("u1", "human", "Make me a packing list"),
                 {**message("a1", "assistant", ""), "content": [
                     {"type": "text", "text": "Here is a list."}, created, result_block,
                     {"type": "text", "text": "Added matches."}, edited, written]},
             ]}]

    body = page_of(engine, tmp_path, data, "art-1")["body"]

    assert "Here is a list.\n\n[artifact: Packing list]\n```markdown\n# Packing list\n- tent\n- stove\n```" in body
    assert "Added matches.\n\n[artifact edited: packing-list]\n```\n- stove\n- matches\n```" in body
    assert "[file: route.txt]\n```\nDay 1: Aviemore to Loch Etchachan\n```" in body
    assert "\nOK" not in body  # the tool's answer is left out


def test_a_message_whose_blocks_hold_no_text_keeps_its_text(engine: Engine, tmp_path: Path) -> None:
    data = [{"uuid": "flat-1", "name": "Bike gears", "created_at": "2026-03-05T08:00:00Z",
             "chat_messages": [
                 {**message("u1", "human", ""), "text": "Which gear for hills?",
                  "content": [{"type": "text", "text": ""}]},
                 message("a1", "assistant", "The lowest one."),
             ]}]

    body = page_of(engine, tmp_path, data, "flat-1")["body"]

    assert "User (2026-03-02T09:15:00Z):\nWhich gear for hills?" in body


def projects() -> list[dict[str, Any]]:
    """projects.json of a Claude export: a project's description, its instructions and its knowledge files."""
    return [{"uuid": "p0000000-0000-4000-8000-000000000001", "name": "Allotment", "description": "Plot 14 plans",
             "is_private": True, "is_starter_project": False,
             "prompt_template": "Answer as a patient gardener; metric units.",
             "created_at": "2026-02-01T10:00:00Z", "updated_at": "2026-02-10T10:00:00Z",
             "creator": {"uuid": "acc-1", "full_name": "Dana"},
             "docs": [{"uuid": "d1", "filename": "soil-test.md", "content": "pH 6.5, loamy",
                       "created_at": "2026-02-02T10:00:00Z"}]},
            {"uuid": "p0000000-0000-4000-8000-0000000000s1", "name": "How to use Claude", "is_starter_project": True,
             "description": "An example project that every account starts with", "prompt_template": "",
             "created_at": "2026-01-01T10:00:00Z", "updated_at": "2026-01-01T10:00:00Z", "docs": []}]


def test_the_projects_of_a_claude_export_are_imported_with_their_documents(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    archive = tmp_path / "data-2026-03-04.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("users.json", "[]")
        out.writestr("conversations.json", json.dumps(export()))
        out.writestr("projects.json", json.dumps(projects()))

    result = run_import(engine, "claude", archive)

    assert result["conversations"] == 2 and result["projects"] == 1  # not Claude's own example project
    assert "p0000000-0000-4000-8000-0000000000s1" not in result["pages"]
    allotment = engine.get_record(reader(engine), result["pages"]["p0000000-0000-4000-8000-000000000001"])
    assert allotment["title"] == "Allotment" and allotment["frontmatter"]["type"] == "source"
    assert allotment["frontmatter"]["fields"] == {
        "published": "2026-02-01", "url": "https://claude.ai/project/p0000000-0000-4000-8000-000000000001"}
    body = allotment["body"]
    assert body.startswith("Claude project p0000000-0000-4000-8000-000000000001. Created 2026-02-01T10:00:00Z")
    assert "1 document." in body
    assert "Description:\nPlot 14 plans" in body
    assert "Instructions:\nAnswer as a patient gardener; metric units." in body
    assert "Document (2026-02-02T10:00:00Z):\nsoil-test.md\n\npH 6.5, loamy" in body
    vault = only_store(state_dir) / "vault" / "private" / "sources"
    cited = [(vault / f"{e['source']}.source.yaml").read_text(encoding="utf-8")
             for e in allotment["frontmatter"]["evidence"] if "lines" not in e]
    assert any("filename: projects.json" in c for c in cited)

    before = store_snapshot(state_dir)
    assert same_but_reused(run_import(engine, "claude", archive), result)
    assert store_snapshot(state_dir) == before


def test_a_bad_projects_file_is_refused_with_its_place(engine: Engine, tmp_path: Path) -> None:
    data = projects()
    data[0]["docs"][0]["content"] = 12
    folder = tmp_path / "claude-export"
    folder.mkdir()
    (folder / "conversations.json").write_text(json.dumps(export()), encoding="utf-8")
    (folder / "projects.json").write_text(json.dumps(data), encoding="utf-8")

    with pytest.raises(InvalidParams) as caught:
        run_import(engine, "claude", folder)

    assert caught.value.details["file"] == "claude-export/projects.json"
    assert caught.value.details["place"] == "[0].docs[0].content"
    assert engine.registry.agent("main") is None


def test_branches_without_a_current_leaf_import_the_branch_written_last(engine: Engine, tmp_path: Path) -> None:
    data = [{"uuid": "noleaf-1", "name": "Kayak", "created_at": "2026-03-03T10:00:00Z",
             "chat_messages": [
                 {**message("b1", "human", "Name a kayak.", parent="00000000-0000-4000-8000-000000000000"),
                  "created_at": "2026-03-03T10:00:00Z"},
                 {**message("b2-old", "assistant", "RETRIED AWAY", parent="b1"), "created_at": "2026-03-03T10:00:05Z"},
                 {**message("b2", "assistant", "Call it Driftwood.", parent="b1"), "created_at": "2026-03-03T10:01:00Z"},
             ]}]

    body = page_of(engine, tmp_path, data, "noleaf-1")["body"]

    assert "Name a kayak." in body and "Call it Driftwood." in body and "RETRIED AWAY" not in body
    assert "2 messages on the active branch" in body


def test_unnamed_and_same_named_attachments_are_each_retained(engine: Engine, tmp_path: Path,
                                                              state_dir: StateDir) -> None:
    # Text pasted into Claude becomes an attachment with an empty file_name; two files can share a name.
    pasted = [{"file_name": "", "file_type": "txt", "file_size": 10, "extracted_content": "first paste: tide table"}]
    again = [{"file_name": "", "file_type": "txt", "file_size": 10, "extracted_content": "second paste: ferry times"}]
    notes_1 = [{"file_name": "notes.txt", "file_type": "txt", "extracted_content": "notes of Monday"}]
    notes_2 = [{"file_name": "notes.txt", "file_type": "txt", "extracted_content": "notes of Tuesday"}]
    same = [{"file_name": "notes.txt", "file_type": "txt", "extracted_content": "notes of Monday"}]
    data = [{"uuid": "att-1", "name": "Harbour", "created_at": "2026-03-05T08:00:00Z",
             "chat_messages": [
                 message("u1", "human", "Read this", attachments=pasted),
                 message("u2", "human", "And this", attachments=again),
                 message("u3", "human", "My notes", attachments=notes_1),
                 message("u4", "human", "Newer notes", attachments=notes_2),
                 message("u5", "human", "Monday again", attachments=same),
             ]}]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")

    result = run_import(engine, "claude", path)

    page = engine.get_record(reader(engine), result["pages"]["att-1"])
    assert "Read this\n[attachment]" in page["body"] and "My notes\n[attachment: notes.txt]" in page["body"]
    vault = only_store(state_dir) / "vault"
    cited = {e["source"] for e in page["frontmatter"]["evidence"]}
    texts = sorted((vault / p).read_text(encoding="utf-8") for p in records(state_dir, "sources/")
                   if p.endswith(".txt") and any(c in p for c in cited) and "transcripts" not in p
                   and not (vault / p).read_text(encoding="utf-8").startswith("# "))
    assert texts == ["first paste: tide table", "notes of Monday", "notes of Tuesday", "second paste: ferry times"]
