"""The ChatGPT importer on small exports written here in the real shape (mapping tree, current_node)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from engine.bench.secrets import fake_credentials
from engine.cli.commands import main
from engine.core.errors import InvalidParams
from engine.core.faults import Faults
from engine.importers.summaries import import_summary
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import (imported_page, interrupt_after, reader, records, run_import,
                                            same_but_reused, state_snapshot, store_snapshot, would_import)


def node(node_id: str, parent: str | None, children: list[str], role: str | None = None, text: Any = None,
         *, at: float = 1_780_000_000.0, content_type: str = "text", **message: Any) -> dict[str, Any]:
    body = None
    if role is not None:
        parts = text if isinstance(text, list) else [text]
        body = {"id": node_id, "author": {"role": role, "name": None, "metadata": {}}, "create_time": at,
                "update_time": None, "content": {"content_type": content_type, "parts": parts},
                "status": "finished_successfully", "end_turn": True, "weight": 1.0, "metadata": {},
                "recipient": "all", **message}
    return {"id": node_id, "message": body, "parent": parent, "children": children}


def conversation(conversation_id: str, title: str | None, mapping: list[dict[str, Any]], current: str,
                 created: float = 1_780_000_000.25, updated: float = 1_780_003_600.5) -> dict[str, Any]:
    return {"title": title, "create_time": created, "update_time": updated,
            "mapping": {n["id"]: n for n in mapping}, "moderation_results": [], "current_node": current,
            "plugin_ids": None, "conversation_id": conversation_id, "conversation_template_id": None,
            "gizmo_id": None, "is_archived": False, "safe_urls": [], "default_model_slug": "gpt-4o",
            "id": conversation_id}


def export() -> list[dict[str, Any]]:
    """Two conversations; the first has a regenerated answer and an edited question (abandoned branches)."""
    return [
        conversation("6790a1b2-0000-4000-8000-000000000001", "Repairing a tram clock", [
            node("root", None, ["sys"]),
            node("sys", "root", ["q1"], "system", "", metadata={"is_visually_hidden_from_conversation": True}),
            node("q1", "sys", ["a1-old", "a1"], "user", "How do I repair the old tram clock?", at=1_780_000_010.0),
            node("a1-old", "q1", [], "assistant", "REGENERATED AWAY: buy a new one."),
            node("a1", "q1", ["q2-old", "q2"], "assistant", "Start with the escapement and oil the pivots.",
                 at=1_780_000_020.0),
            node("q2-old", "a1", ["a2-old"], "user", "EDITED AWAY: what oil?"),
            node("a2-old", "q2-old", [], "assistant", "EDITED AWAY ANSWER"),
            node("q2", "a1", ["a2"], "user", [{"content_type": "image_asset_pointer", "asset_pointer": "file-1"},
                                              "Which clock oil for brass pivots?"],
                 at=1_780_000_030.0, content_type="multimodal_text"),
            node("a2", "q2", [], "assistant", "A synthetic clock oil, one drop per pivot.", at=1_780_000_040.0),
        ], current="a2"),
        conversation("6790a1b2-0000-4000-8000-000000000002", None, [
            node("r", None, ["u"]),
            node("u", "r", ["x"], "user", "Kayak rack ideas?"),
            node("x", "u", [], "assistant", "Cedar and rope lashings."),
        ], current="x"),
    ]


def not_imported_alone(*names: str) -> str:
    """The note on files a conversations.json given alone names: none beside it is the export's."""
    counted = ("1 file the conversations name was" if len(names) == 1 else
               f"{len(names)} files the conversations name were")
    return (f"{counted} not imported: {', '.join(names)}. A "
            "conversations.json given alone is an export of its own: no file beside it is read (that folder may "
            "be any, Downloads say); import the export's zip or folder to bring them in.")


def not_in_export(*names: str) -> str:
    """The note on files an export's zip or folder does not give."""
    counted = ("1 file the conversations name is not in the export, or is" if len(names) == 1 else
               f"{len(names)} files the conversations name are not in the export, or are")
    return f"{counted} never taken from it (a dot-file, a link, a path): {', '.join(names)}."


@pytest.fixture
def export_file(tmp_path: Path) -> Path:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export()), encoding="utf-8")
    return path


def test_one_page_per_conversation_with_only_the_active_branch(engine: Engine, export_file: Path,
                                                                 state_dir: StateDir) -> None:
    result = run_import(engine, "chatgpt", export_file)

    assert result["conversations"] == 2
    assert result["imported"] == {"sources": 2, "pages": 2, "claims": 0, "relationships": 0}
    caller = reader(engine)
    clock = engine.get_record(caller, result["pages"]["6790a1b2-0000-4000-8000-000000000001"])
    assert clock["title"] == "Repairing a tram clock"
    assert clock["frontmatter"]["type"] == "source"
    assert clock["frontmatter"]["fields"] == {
        "published": "2026-05-28", "url": "https://chatgpt.com/c/6790a1b2-0000-4000-8000-000000000001"}
    assert clock["frontmatter"]["attribution"]["instance"] == "import-chatgpt"
    body = clock["body"]
    assert "How do I repair the old tram clock?" in body and "one drop per pivot" in body
    assert "[image]\nWhich clock oil for brass pivots?" in body
    assert "AWAY" not in body
    assert body.index("escapement") < body.index("Which clock oil")
    untitled = engine.get_record(caller, result["pages"]["6790a1b2-0000-4000-8000-000000000002"])
    assert untitled["title"] == "Untitled conversation"

    # The transcript is retained as evidence (its own lines of a transcripts file), and the original file.
    evidence = clock["frontmatter"]["evidence"]
    sources = [c["source"] for c in evidence]
    files = records(state_dir, "sources/")
    transcript = next(p for p in files if p.endswith(f"{sources[0]}.txt"))
    lines = (next(state_dir.stores.iterdir()) / "vault" / transcript).read_text(encoding="utf-8").splitlines()
    first, last = evidence[0]["lines"]
    cited = "\n".join(lines[first - 1:last])
    assert cited.startswith("# Repairing a tram clock (6790a1b2-0000-4000-8000-000000000001)\nUser (")
    assert "Assistant (2026-05-28T20:27:00Z):\nStart with the escapement" in cited and "AWAY" not in cited
    assert cited.endswith("one drop per pivot.") and "Kayak" in "\n".join(lines[last:])
    descriptor = next(p for p in files if p.endswith(f"{sources[1]}.source.yaml"))
    described = (state_dir.stores.iterdir().__next__() / "vault" / descriptor).read_text(encoding="utf-8")
    assert f"sha256: {result['sha256']}" in described and "filename: conversations.json" in described


def test_importing_again_creates_nothing(engine: Engine, export_file: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "chatgpt", export_file)
    before = store_snapshot(state_dir)

    second = run_import(engine, "chatgpt", export_file)

    assert second["pages"] == first["pages"]
    assert store_snapshot(state_dir) == before


def test_a_dry_run_reports_and_writes_nothing(engine: Engine, export_file: Path, state_dir: StateDir) -> None:
    result = run_import(engine, "chatgpt", export_file, dry_run=True)

    assert result["dryRun"] is True
    assert result["wouldCreate"] == {"sources": 2, "pages": 2, "claims": 0, "relationships": 0}
    assert list(state_dir.stores.iterdir()) == [] if state_dir.stores.exists() else True
    assert engine.registry.agent("main") is None


def test_an_interrupted_import_is_finished_by_running_it_again(tmp_path: Path, export_file: Path) -> None:
    interrupted, whole = StateDir(tmp_path / "interrupted"), StateDir(tmp_path / "whole")
    with Engine(interrupted, watch=False) as engine:
        with pytest.raises(KeyboardInterrupt):
            run_import(engine, "chatgpt", export_file, progress=interrupt_after(1))
        # the items started before the interruption (a window ahead of it: engine/importers/bulk.py) finish
        assert len(records(interrupted, "pages/")) >= 1
        run_import(engine, "chatgpt", export_file)
        assert len(records(interrupted, "pages/")) == 2
    with Engine(whole, watch=False) as engine:
        run_import(engine, "chatgpt", export_file)
    assert len(records(interrupted)) == len(records(whole))


def test_a_write_the_engine_refuses_midway_is_completed_by_a_rerun(tmp_path: Path, export_file: Path) -> None:
    state = StateDir(tmp_path / "state")
    with Engine(state, watch=False, faults=Faults("journaled:4:enospc")) as engine:
        with pytest.raises(Exception):
            run_import(engine, "chatgpt", export_file)
        # the original and the transcripts were; the pages, written together, were not both
        assert len(records(state, "pages/")) < 2
        result = run_import(engine, "chatgpt", export_file)
    assert len(records(state, "pages/")) == 2
    assert len(set(result["pages"].values())) == 2


def test_the_export_zip_is_read(engine: Engine, tmp_path: Path) -> None:
    archive = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("chat.html", "<html></html>")
        out.writestr("conversations.json", json.dumps(export()[:1]))
        out.writestr("user.json", "{}")

    result = run_import(engine, "chatgpt", archive)

    assert result["file"] == "chatgpt-export.zip/conversations.json" and result["conversations"] == 1


@pytest.mark.parametrize("change, place", [
    (lambda data: data[1].update(current_node="nowhere"), "[1].current_node"),
    (lambda data: data[0]["mapping"]["q1"]["message"]["content"].update(parts="not a list"),
     "[0].mapping.q1.message.content.parts"),
    (lambda data: data[1]["mapping"]["u"].update(parent="x"), "[1].mapping."),
    (lambda data: data[0].pop("mapping"), "[0]"),
    (lambda data: data[1].update(id=data[0]["id"], conversation_id=data[0]["id"]), "[1].id"),
])
def test_a_bad_export_is_refused_with_the_place_and_nothing_is_written(
        engine: Engine, tmp_path: Path, change: Any, place: str) -> None:
    data = export()
    change(data)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")

    with pytest.raises(InvalidParams) as caught:
        run_import(engine, "chatgpt", path)

    assert caught.value.details["file"] == "conversations.json"
    assert caught.value.details["place"].startswith(place)
    assert engine.registry.agent("main") is None


def test_invalid_json_is_refused_with_its_line(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text('[\n{"id": "a",\n "mapping": {]\n', encoding="utf-8")

    with pytest.raises(InvalidParams) as caught:
        run_import(engine, "chatgpt", path)

    assert caught.value.details["place"] == "line 3 column 14"


def test_a_credential_in_the_export_is_refused_naming_the_conversation(engine: Engine, tmp_path: Path) -> None:
    data = export()
    secret, _ = fake_credentials()["AWS access key id"]
    data[1]["mapping"]["u"]["message"]["content"]["parts"] = [f"keep this safe: {secret}"]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")

    with pytest.raises(InvalidParams) as caught:
        run_import(engine, "chatgpt", path)

    assert caught.value.details["place"] == "[1]"
    assert secret.rsplit(" ", 1)[1] not in caught.value.message


def test_a_large_original_is_retained_in_parts_and_each_page_cites_its_own(
        engine: Engine, tmp_path: Path, state_dir: StateDir, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.importers import common, conversations
    for module in (common, conversations):  # parts are cut where originals are retained, and cited by pages
        monkeypatch.setattr(module, "ATTACH_MAX_BYTES", 900)
    data = export() + [conversation(f"c-{n}", f"Filler {n}", [node("r", None, ["u"]),
                                                              node("u", "r", [], "user", "x" * 300)], "u")
                       for n in range(3)]
    path = tmp_path / "conversations.json"
    raw = json.dumps(data).encode("utf-8")
    path.write_bytes(raw)

    result = run_import(engine, "chatgpt", path)

    vault = next(state_dir.stores.iterdir()) / "vault" / "private"
    parts = sorted(vault.glob("sources/*.json"), key=lambda p: p.stat().st_mtime_ns)
    described = {p: (vault / "sources" / f"{p.name[:-5]}.source.yaml").read_text(encoding="utf-8") for p in parts}
    ordered = sorted(parts, key=lambda p: described[p].split("filename: ")[1].split("\n")[0])
    assert len(ordered) == -(-len(raw) // 900) and b"".join(p.read_bytes() for p in ordered) == raw
    caller = reader(engine)
    last = engine.get_record(caller, result["pages"]["c-2"])["frontmatter"]["evidence"]
    cited = [c["source"] for c in last if "lines" not in c]
    start = raw.rindex(json.dumps(data[-1]).encode("utf-8"))
    end = start + len(json.dumps(data[-1]).encode("utf-8"))
    assert cited == [p.name[:-5] for p in ordered[start // 900:(end - 1) // 900 + 1]]
    assert len(cited) < len(ordered)


def test_cli_imports_with_progress_and_dry_run(tmp_path: Path, export_file: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    assert main(["--state-dir", str(state), "import", "chatgpt", str(export_file), "--dry-run"]) == 0
    out = capsys.readouterr()
    assert "would create 2 sources, 2 pages" in out.out and not (state / "stores").exists()

    assert main(["--state-dir", str(state), "import", "chatgpt", str(export_file)]) == 0
    out = capsys.readouterr()
    assert "2 pages" in out.out and "knowledge import chatgpt: 2/2 conversations" in out.err

    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}', encoding="utf-8")
    assert main(["--state-dir", str(state), "import", "chatgpt", str(bad)]) == 2
    assert "bad.json must hold a list of conversations" in capsys.readouterr().err


def test_a_lone_surrogate_is_imported_as_a_replacement_character(engine: Engine, tmp_path: Path) -> None:
    data = export()
    path = tmp_path / "conversations.json"
    text = json.dumps(data).replace("Kayak rack ideas?", "Kayak rack ideas\\ud83d?")
    path.write_text(text, encoding="utf-8")

    result = run_import(engine, "chatgpt", path)

    page = engine.get_record(reader(engine), result["pages"]["6790a1b2-0000-4000-8000-000000000002"])
    assert "Kayak rack ideas\ufffd?" in page["body"]


# --- a newer export of the same account ---------------------------------------------------------------------


def newer_export() -> list[dict[str, Any]]:
    """The export a month later: the clock conversation went on (two more messages, its current node moved),
    the kayak one is as it was, and one conversation is new."""
    clock, kayak = export()
    clock["mapping"]["a2"]["children"] = ["q3"]
    for added in (node("q3", "a2", ["a3"], "user", "And how often should I oil them?", at=1_780_090_000.0),
                  node("a3", "q3", [], "assistant", "Once a year is plenty.", at=1_780_090_010.0)):
        clock["mapping"][added["id"]] = added
    clock["current_node"], clock["update_time"] = "a3", 1_780_090_010.0
    new = conversation("6790a1b2-0000-4000-8000-000000000003", "Sourdough starter", [
        node("s", None, ["m"]), node("m", "s", ["n"], "user", "Is my starter dead?"),
        node("n", "m", [], "assistant", "Feed it twice and wait a day.")], current="n")
    return [new, clock, kayak]


def test_a_newer_export_revises_the_pages_of_changed_conversations_and_leaves_the_rest(
        engine: Engine, export_file: Path, state_dir: StateDir, tmp_path: Path) -> None:
    first = run_import(engine, "chatgpt", export_file)
    before, sources_before = store_snapshot(state_dir), records(state_dir, "sources/")
    clock_id, kayak_id = (first["pages"][f"6790a1b2-0000-4000-8000-00000000000{n}"] for n in (1, 2))
    newer = tmp_path / "newer" / "conversations.json"
    newer.parent.mkdir()
    newer.write_text(json.dumps(newer_export()), encoding="utf-8")

    second = run_import(engine, "chatgpt", newer)

    caller = reader(engine)
    assert second["pages"]["6790a1b2-0000-4000-8000-000000000001"] == clock_id  # the same page ...
    clock = engine.get_record(caller, clock_id)
    assert clock["revision"] == 2 and "Once a year is plenty." in clock["body"]  # ... its next revision
    assert "6 messages on the active branch" in clock["body"]
    assert [r["revision"] for r in engine.history(caller, clock_id)["revisions"]] == [1, 2]
    cited = [e["source"] for e in clock["frontmatter"]["evidence"]]
    assert cited[-1] not in json.dumps(engine.get_record(caller, kayak_id)["frontmatter"])  # the newer export
    assert second["pages"]["6790a1b2-0000-4000-8000-000000000002"] == kayak_id
    assert engine.get_record(caller, kayak_id)["revision"] == 1
    assert second["revised"] == 1 and second["notes"] == [
        "1 conversation changed since an earlier import: it got a new revision of its page.",
        not_imported_alone("file-1")]
    after = store_snapshot(state_dir)
    kayak_path = engine.get_record(caller, kayak_id)["path"]
    assert after[f"private/{kayak_path}"] == before[f"private/{kayak_path}"]  # not touched at all
    assert len(records(state_dir, "pages/")) == 3  # the new conversation is the one new page
    # The newer export and one transcripts file (its batch holds the changed and the new conversation) are retained,
    # each a file and its descriptor.
    assert len(sources_before) == 4 and len(records(state_dir, "sources/")) == 8

    assert run_import(engine, "chatgpt", newer)["pages"] == second["pages"]
    assert store_snapshot(state_dir) == after  # the same newer export again: nothing


def test_a_newer_export_where_nothing_changed_creates_nothing(
        engine: Engine, export_file: Path, state_dir: StateDir, tmp_path: Path) -> None:
    first = run_import(engine, "chatgpt", export_file)
    before = store_snapshot(state_dir)
    same = export()
    for raw in same:
        raw["is_archived"] = True  # another file (other bytes, another sha256), the same conversations
    newer = tmp_path / "newer" / "conversations.json"
    newer.parent.mkdir()
    newer.write_text(json.dumps(same, indent=2), encoding="utf-8")

    second = run_import(engine, "chatgpt", newer)

    assert second["pages"] == first["pages"] and second["revised"] == 0
    assert second["imported"] == {"sources": 0, "pages": 2, "claims": 0, "relationships": 0}
    assert store_snapshot(state_dir) == before


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def test_an_image_the_export_holds_is_retained_and_cited_by_its_conversation(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    data = export()
    data[0]["mapping"]["q2"]["message"]["content"]["parts"][0]["asset_pointer"] = "file-service://file-1"  # as exported
    archive = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("conversations.json", json.dumps(data))
        out.writestr("file-1-brass-pivots.png", PNG)
        out.writestr("file-10-unrelated.png", b"not this one")  # another asset whose id only starts alike
        out.writestr("dalle-generations/file-2.webp", b"nobody points here")

    result = run_import(engine, "chatgpt", archive)

    assert result["imported"]["sources"] == 3  # the export, the transcripts, the image
    caller = reader(engine)
    clock = engine.get_record(caller, result["pages"]["6790a1b2-0000-4000-8000-000000000001"])
    assert "[image: file-1-brass-pivots.png]\nWhich clock oil for brass pivots?" in clock["body"]
    image = clock["frontmatter"]["evidence"][-1]["source"]
    retained = {path: digest for path, digest in records(state_dir, "sources/").items() if image in path}
    assert hashlib.sha256(PNG).hexdigest() in retained.values()
    kayak = engine.get_record(caller, result["pages"]["6790a1b2-0000-4000-8000-000000000002"])
    assert image not in json.dumps(kayak["frontmatter"])
    assert not any("unrelated" in path or "webp" in path for path in records(state_dir, "sources/"))

    before = store_snapshot(state_dir)
    assert same_but_reused(run_import(engine, "chatgpt", archive), result)
    assert store_snapshot(state_dir) == before


def test_an_image_in_an_unzipped_export_folder_is_found_and_beside_its_lone_conversations_json_is_not(
        engine: Engine, tmp_path: Path) -> None:
    folder = tmp_path / "export"
    (folder / "user-abc").mkdir(parents=True)
    (folder / "conversations.json").write_text(json.dumps(export()[:1]), encoding="utf-8")
    (folder / "user-abc" / "file-1-brass-pivots.png").write_bytes(PNG)

    alone = run_import(engine, "chatgpt", folder / "conversations.json", dry_run=True)
    result = run_import(engine, "chatgpt", folder)

    assert alone["wouldCreate"]["sources"] == 2 and alone["notes"] == [not_imported_alone("file-1")]
    assert result["imported"]["sources"] == 3 and "notes" not in result
    page = engine.get_record(reader(engine), result["pages"]["6790a1b2-0000-4000-8000-000000000001"])
    assert "[image: file-1-brass-pivots.png]" in page["body"]


def test_a_credential_inside_an_exported_file_refuses_the_import_naming_it(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    secret, _ = fake_credentials()["AWS access key id"]
    archive = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("conversations.json", json.dumps(export()))
        out.writestr("file-1-screenshot.png", f"{secret}\n".encode())

    with pytest.raises(InvalidParams, match="file-1-screenshot.png"):
        run_import(engine, "chatgpt", archive)
    assert engine.registry.agent("main") is None


def test_a_dry_run_of_a_newer_export_says_what_it_would_revise(
        engine: Engine, export_file: Path, state_dir: StateDir, tmp_path: Path) -> None:
    first = run_import(engine, "chatgpt", export_file)
    newer = tmp_path / "newer" / "conversations.json"
    newer.parent.mkdir()
    newer.write_text(json.dumps(newer_export()), encoding="utf-8")
    before = state_snapshot(state_dir)

    result = run_import(engine, "chatgpt", newer, dry_run=True)

    clock = "6790a1b2-0000-4000-8000-000000000001"
    assert result["revised"] == 1 and result["pages"][clock] == first["pages"][clock]
    assert result["notes"] == [
        "1 conversation changed since an earlier import: it would get a new revision of its page.",
        not_imported_alone("file-1")]
    assert state_snapshot(state_dir) == before
    # A real run would write the newer export, the revised and the new conversation's pages; the kayak one's
    # page is as an earlier run made it.
    assert result["wouldCreate"] == {"sources": 2, "pages": 2, "claims": 0, "relationships": 0}
    assert result["reused"] == {"sources": 0, "pages": 1, "claims": 0, "relationships": 0}
    real = run_import(engine, "chatgpt", newer)
    assert (real["pages"][clock], real["revised"]) == (first["pages"][clock], 1)
    assert (real["imported"], real["reused"]) == (would_import(result), result["reused"])


def test_a_dry_run_of_an_export_imported_already_would_create_nothing(
        engine: Engine, export_file: Path, state_dir: StateDir) -> None:
    first = run_import(engine, "chatgpt", export_file)
    before = state_snapshot(state_dir)

    result = run_import(engine, "chatgpt", export_file, dry_run=True)

    assert result["wouldCreate"] == {"sources": 0, "pages": 0, "claims": 0, "relationships": 0}
    assert result["reused"] == first["imported"] and result["pages"] == first["pages"]
    assert summary(result)[0] == ("Dry run of the chatgpt import: nothing new: all 2 sources and 2 pages of the "
                                  "input were already made by an earlier run of this input; nothing was written.")
    assert state_snapshot(state_dir) == before


# --- shapes of real exports beyond plain text ------------------------------------------------------------------


def page_of(engine: Engine, tmp_path: Path, data: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return imported_page(engine, tmp_path, "chatgpt", data, key)


def test_a_voice_conversation_keeps_what_was_said(engine: Engine, tmp_path: Path) -> None:
    # Voice mode: each turn's parts are a transcription object (its words in "text") and the audio's pointer.
    audio = {"content_type": "real_time_user_audio_video_asset_pointer", "frames_asset_pointers": [],
             "video_container_asset_pointer": None,
             "audio_asset_pointer": {"content_type": "audio_asset_pointer", "asset_pointer": "sediment://file_0a1",
                                     "size_bytes": 1200, "format": "wav"}}
    said = {"content_type": "audio_transcription", "text": "Is the ferry running on Sunday?", "direction": "in",
            "decoding_id": None}
    answered = {"content_type": "audio_transcription", "text": "Yes, every hour from nine.", "direction": "out"}
    data = [conversation("voice-1", "Ferry times", [
        node("r", None, ["u"]),
        node("u", "r", ["a"], "user", [said, audio], content_type="multimodal_text"),
        node("a", "u", [], "assistant", [answered, {"content_type": "audio_asset_pointer",
                                                    "asset_pointer": "sediment://file_0a2", "format": "wav"}],
             content_type="multimodal_text"),
    ], "a")]

    body = page_of(engine, tmp_path, data, "voice-1")["body"]

    assert "Is the ferry running on Sunday?\n[audio]" in body
    assert "Yes, every hour from nine.\n[audio]" in body
    assert "[file]" not in body


def test_a_conversation_without_a_current_node_imports_its_latest_branch(engine: Engine, tmp_path: Path) -> None:
    data = [conversation("no-current", "Bread", [
        node("r", None, ["u"]),
        node("u", "r", ["a-old", "a"], "user", "How long to proof rye?", at=1_780_000_010.0),
        node("a-old", "u", [], "assistant", "OLDER ANSWER", at=1_780_000_020.0),
        node("a", "u", [], "assistant", "About three hours at room temperature.", at=1_780_000_030.0),
    ], "a"), conversation("empty", "Nothing said yet", [], "x")]
    data[0]["current_node"] = None
    data[1]["current_node"] = None

    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = run_import(engine, "chatgpt", path)

    caller = reader(engine)
    bread = engine.get_record(caller, result["pages"]["no-current"])
    assert "About three hours" in bread["body"] and "OLDER ANSWER" not in bread["body"]
    assert bread["body"].index("How long to proof rye?") < bread["body"].index("About three hours")
    assert "0 messages on the active branch" in engine.get_record(caller, result["pages"]["empty"])["body"]


def test_a_root_whose_parent_is_not_in_the_mapping_starts_the_branch(engine: Engine, tmp_path: Path) -> None:
    data = [conversation("rooted", "Tides", [
        node("r", "client-created-root", ["u"]),
        node("u", "r", ["a"], "user", "When is high tide?"),
        node("a", "u", [], "assistant", "At 14:10 today."),
    ], "a")]

    body = page_of(engine, tmp_path, data, "rooted")["body"]

    assert "When is high tide?" in body and "At 14:10 today." in body


def test_tool_calls_code_and_quotes_read_as_what_they_are(engine: Engine, tmp_path: Path) -> None:
    code = {"content_type": "code", "language": "python", "response_format_name": None,
            "text": "# total of the receipts\nprint(12 + 30)"}
    output = {"content_type": "execution_output", "text": "42"}
    quote = {"content_type": "tether_quote", "url": "https://example.org/tides", "domain": "example.org",
             "text": "High tide is at 14:10.", "title": "Tide table"}
    data = [conversation("tools", "Receipts", [
        node("r", None, ["u"]),
        node("u", "r", ["c"], "user", "Add up my receipts"),
        node("c", "u", ["o"], "assistant", None, recipient="python", content=code),
        node("o", "c", ["q"], "tool", None, content=output, author={"role": "tool", "name": "python"}),
        node("q", "o", ["a"], "tool", None, content=quote, author={"role": "tool", "name": "myfiles_browser"}),
        node("a", "q", [], "assistant", "They come to 42."),
    ], "a")]

    body = page_of(engine, tmp_path, data, "tools")["body"]

    assert "Assistant (to python) (" in body
    assert "```python\n# total of the receipts\nprint(12 + 30)\n```" in body
    assert "Tool (python) (" in body and "```\n42\n```" in body
    assert "High tide is at 14:10.\n(Quoted from Tide table, https://example.org/tides)" in body
    assert body.index("They come to 42.") > body.index("```\n42\n```")


def test_titles_keep_emoji_sequences_right_to_left_marks_slashes_and_repeats(engine: Engine, tmp_path: Path) -> None:
    titles = {"t-family": "Family 👨\u200d👩\u200d👧 trip", "t-rtl": "\u200fשלום עולם\u200f", "t-arabic": "مرحبا بالعالم",
              "t-slash": "Invoices 2026/03 ../../etc", "t-same-1": "Weekly plan", "t-same-2": "Weekly plan",
              "t-control": "Tabs\tand\x07bells"}
    data = [conversation(key, title, [node("r", None, ["u"]), node("u", "r", [], "user", f"about {key}")], "u")
            for key, title in titles.items()]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")

    result = run_import(engine, "chatgpt", path)

    caller = reader(engine)
    pages = {key: engine.get_record(caller, result["pages"][key]) for key in titles}
    assert pages["t-family"]["title"] == "Family 👨\u200d👩\u200d👧 trip"  # the joiners hold the family together
    assert pages["t-rtl"]["title"] == "\u200fשלום עולם\u200f" and pages["t-arabic"]["title"] == "مرحبا بالعالم"
    assert pages["t-slash"]["title"] == "Invoices 2026/03 ../../etc"
    assert pages["t-control"]["title"] == "Tabs and bells"
    assert len({page["id"] for page in pages.values()}) == len(titles)  # repeated titles: a page each
    assert len({page["path"] for page in pages.values()}) == len(titles)
    assert all(page["path"].startswith("pages/sources/") and ".." not in page["path"] for page in pages.values())
    assert "about t-same-2" in pages["t-same-2"]["body"] and "about t-same-1" in pages["t-same-1"]["body"]


def test_a_canvas_document_reads_as_its_name_and_content(engine: Engine, tmp_path: Path) -> None:
    # Canvas: the assistant sends the document as JSON in a code message to canmore.create_textdoc.
    created = {"content_type": "code", "language": "json", "text": json.dumps(
        {"name": "greenhouse_timer", "type": "code/python", "content": "# water at dawn\nschedule('06:00')"})}
    edited = {"content_type": "code", "language": "json", "text": json.dumps(
        {"updates": [{"pattern": ".*", "multiple": False, "replacement": "# water twice\nschedule('06:00', '18:00')"}]})}
    broken = {"content_type": "code", "language": "json", "text": "{not json"}
    data = [conversation("canvas", "Greenhouse", [
        node("r", None, ["u"]),
        node("u", "r", ["c"], "user", "Write a watering timer"),
        node("c", "u", ["e"], "assistant", None, recipient="canmore.create_textdoc", content=created),
        node("e", "c", ["b"], "assistant", None, recipient="canmore.update_textdoc", content=edited),
        node("b", "e", [], "assistant", None, recipient="canmore.update_textdoc", content=broken),
    ], "b")]

    body = page_of(engine, tmp_path, data, "canvas")["body"]

    assert "[canvas: greenhouse_timer]\n```python\n# water at dawn\nschedule('06:00')\n```" in body
    assert "[canvas edited]\n```\n# water twice\nschedule('06:00', '18:00')\n```" in body
    assert "```json\n{not json\n```" in body  # not the JSON a canvas call holds: shown as it is


def test_an_empty_export_says_it_holds_no_conversations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "conversations.json"
    path.write_text("[]", encoding="utf-8")

    assert main(["--state-dir", str(tmp_path / "state"), "import", "chatgpt", str(path)]) == 0

    out = capsys.readouterr().out
    assert "nothing" in out and "conversations.json holds no conversations: nothing to import." in out


def test_a_document_the_owner_uploaded_is_named_and_retained(engine: Engine, tmp_path: Path,
                                                              state_dir: StateDir) -> None:
    # Uploads are listed in the message's metadata.attachments; an image among them is a part as well.
    data = export()[:1]
    q2 = data[0]["mapping"]["q2"]["message"]
    q2["content"]["parts"][0]["asset_pointer"] = "file-service://file-1"
    q2["metadata"] = {"attachments": [
        {"id": "file-Doc9", "name": "clock-manual.pdf", "size": 1024, "mime_type": "application/pdf"},
        {"id": "file-1", "name": "brass-pivots.png", "size": 1024, "mime_type": "image/png"},
        {"id": "file-Gone", "name": "not-in-export.docx", "size": 10}]}
    archive = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("conversations.json", json.dumps(data))
        out.writestr("file-1-brass-pivots.png", PNG)
        out.writestr("file-Doc9-clock-manual.pdf", b"%PDF-1.4 manual")

    result = run_import(engine, "chatgpt", archive)

    page = engine.get_record(reader(engine), result["pages"]["6790a1b2-0000-4000-8000-000000000001"])
    assert ("[image: file-1-brass-pivots.png]\nWhich clock oil for brass pivots?\n"
            "[attachment: clock-manual.pdf]\n[attachment: not-in-export.docx]") in page["body"]
    assert page["body"].count("brass-pivots.png") == 1
    assert result["imported"]["sources"] == 4  # the export, the transcripts, the image, the manual
    cited = {e["source"] for e in page["frontmatter"]["evidence"]}
    assert hashlib.sha256(b"%PDF-1.4 manual").hexdigest() in {
        digest for path, digest in records(state_dir, "sources/").items() if any(c in path for c in cited)}


def test_what_a_tool_fetched_for_the_model_is_left_out(engine: Engine, tmp_path: Path) -> None:
    # A web search's results, a fetched page and a tool's error are what the model read, not the owner.
    browsing = {"content_type": "tether_browsing_display", "result": "SEARCH RESULTS LIST", "summary": None}
    page = {"content_type": "sonic_webpage", "url": "https://example.org", "domain": "example.org",
            "title": "Ferries", "text": "WHOLE FETCHED PAGE", "snippet": "..."}
    error = {"content_type": "system_error", "name": "tool_error", "text": "ROBOTS.TXT DENIED"}
    memory = {"content_type": "text", "parts": ["MODEL SET CONTEXT UPDATED."]}
    drawn = {"content_type": "multimodal_text", "parts": [
        {"content_type": "image_asset_pointer", "asset_pointer": "sediment://file_9", "metadata": {"dalle": {}}}]}
    data = [conversation("fetch", "Ferries", [
        node("r", None, ["u"]),
        node("u", "r", ["b"], "user", "When do ferries leave, and draw one"),
        node("b", "u", ["p"], "tool", None, content=browsing, author={"role": "tool", "name": "web"}),
        node("p", "b", ["e"], "tool", None, content=page, author={"role": "tool", "name": "web.run"}),
        node("e", "p", ["m"], "tool", None, content=error, author={"role": "tool", "name": "web.run"}),
        node("m", "e", ["d"], "tool", None, content=memory, author={"role": "tool", "name": "bio"}),
        node("d", "m", ["a"], "tool", None, content=drawn, author={"role": "tool", "name": "dalle.text2im"}),
        node("a", "d", [], "assistant", "Hourly from nine; here is a ferry."),
    ], "a")]

    body = page_of(engine, tmp_path, data, "fetch")["body"]

    for hidden in ("SEARCH RESULTS LIST", "WHOLE FETCHED PAGE", "ROBOTS.TXT DENIED", "MODEL SET CONTEXT"):
        assert hidden not in body
    assert "Tool (dalle.text2im) (" in body and "[image]" in body  # the image drawn for the owner stays
    assert "3 messages on the active branch" in body



def test_an_export_without_group_chats_says_nothing_of_them(engine: Engine, export_file: Path) -> None:
    result = run_import(engine, "chatgpt", export_file)

    assert "leftOut" not in result and result["notes"] == [not_imported_alone("file-1")]


def test_a_rerun_says_what_it_found_already_made_and_what_it_wrote(
        engine: Engine, export_file: Path, tmp_path: Path) -> None:
    first = run_import(engine, "chatgpt", export_file)
    assert first["reused"] == {"sources": 0, "pages": 0, "claims": 0, "relationships": 0}
    assert summary(first)[0] == "Imported chatgpt into main's store: 2 sources, 2 pages."

    again = run_import(engine, "chatgpt", export_file)  # the same export: every record an earlier run's

    assert again["imported"] == first["imported"] and again["reused"] == first["imported"]
    assert summary(again)[0] == ("Nothing new: all 2 sources and 2 pages of the chatgpt input in main's store were "
                                 "already made by an earlier run of this input; nothing was written.")

    newer = tmp_path / "newer" / "conversations.json"
    newer.parent.mkdir()
    newer.write_text(json.dumps(newer_export()), encoding="utf-8")
    later = run_import(engine, "chatgpt", newer)  # one conversation went on, one is new, one as it was

    assert later["imported"] == {"sources": 2, "pages": 3, "claims": 0, "relationships": 0}
    assert later["reused"] == {"sources": 0, "pages": 1, "claims": 0, "relationships": 0}
    assert summary(later)[0] == ("Imported chatgpt into main's store: 2 sources, 2 pages new, and 1 page reused "
                                 "(made by an earlier run of this input).")


def summary(result: dict[str, Any]) -> list[str]:
    """The words ``knowledge import`` prints of a result (``formats.run_import`` adds the receiving agent)."""
    return import_summary({"agent": "main", **result}).splitlines()
