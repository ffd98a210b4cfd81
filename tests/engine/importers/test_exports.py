"""A chat export reads only itself: the files its conversations name are looked for in its zip or folder,
never beside a conversations.json given alone nor above the export; dot-files and links are never taken."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from engine.core.errors import InvalidParams
from engine.importers.exports import ExportFiles
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import reader, records, run_import
from tests.engine.importers.test_chatgpt import PNG, not_imported_alone, not_in_export
from tests.engine.importers.test_chatgpt import conversation as chatgpt_conversation
from tests.engine.importers.test_chatgpt import node
from tests.engine.importers.test_claude import message
from tests.helpers import only_store

CHAT = "c-0001"
CLAUDE = "3f1c0000-0000-4000-8000-0000000000aa"


def _home(root: Path) -> Path:
    """A home folder as an owner's is: a shell history, a dot-folder, documents; the export put in it."""
    (root / ".config").mkdir(parents=True)
    (root / "Documents").mkdir()
    (root / ".bash_history").write_text("HISTORY ssh prod.example\n", encoding="utf-8")
    (root / ".config" / "personal.txt").write_text("PERSONAL notes\n", encoding="utf-8")
    (root / "Documents" / "tax-2025.txt").write_text("TAX return\n", encoding="utf-8")
    return root


def chatgpt_naming(*pointers: str) -> list[dict[str, Any]]:
    """One ChatGPT conversation whose question shows an image part for each pointer."""
    parts: list[Any] = [{"content_type": "image_asset_pointer", "asset_pointer": p} for p in pointers]
    return [chatgpt_conversation(CHAT, "Pivots", [
        node("r", None, ["u"]),
        node("u", "r", [], "user", [*parts, "What is this?"], content_type="multimodal_text"),
    ], "u")]


def claude_naming(*file_names: str) -> list[dict[str, Any]]:
    """One Claude conversation whose message attaches a file for each name (no text of it in the export)."""
    return [{"uuid": CLAUDE, "name": "Papers", "created_at": "2026-03-02T09:14:59Z",
             "updated_at": "2026-03-02T09:20:00Z",
             "chat_messages": [message("m1", "human", "Look at these.",
                                       files=[{"file_name": name} for name in file_names])]}]


def _retained_texts(state_dir: StateDir) -> str:
    """Every retained source's bytes, as text, one after another."""
    vault = only_store(state_dir) / "vault"
    return "\n".join((vault / path).read_bytes().decode("utf-8", "replace") for path in records(state_dir, "sources/"))


# --- a conversations.json given alone is its own export ---------------------------------------------------


def test_an_asset_pointer_to_a_dot_file_beside_a_lone_conversations_json_is_not_retained(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    home = _home(tmp_path / "home")
    (home / "conversations.json").write_text(json.dumps(chatgpt_naming(
        "file-service://.bash_history", "file-service://.config/personal.txt")), encoding="utf-8")

    result = run_import(engine, "chatgpt", home / "conversations.json")

    assert result["imported"]["sources"] == 2  # the export and its transcripts, nothing beside them
    assert "HISTORY" not in _retained_texts(state_dir) and "PERSONAL" not in _retained_texts(state_dir)
    assert result["notes"] == [not_imported_alone(".bash_history", ".config/personal.txt")]
    page = engine.get_record(reader(engine), result["pages"][CHAT])
    assert "bash_history" not in page["body"] and "[image]\n[image]\nWhat is this?" in page["body"]


def test_attachment_names_beside_a_lone_conversations_json_and_one_folder_down_are_not_retained(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    home = _home(tmp_path / "home")
    (home / "conversations.json").write_text(json.dumps(claude_naming(
        "tax-2025.txt", "personal.txt", ".bash_history")), encoding="utf-8")

    result = run_import(engine, "claude", home / "conversations.json")

    assert result["imported"]["sources"] == 2
    retained = _retained_texts(state_dir)
    assert not any(text in retained for text in ("TAX", "PERSONAL", "HISTORY"))
    assert result["notes"] == [not_imported_alone("tax-2025.txt", "personal.txt", ".bash_history")]
    assert "[attachment: tax-2025.txt]" in engine.get_record(reader(engine), result["pages"][CLAUDE])["body"]


def test_projects_json_beside_a_lone_conversations_json_is_not_read(engine: Engine, tmp_path: Path) -> None:
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    (downloads / "conversations.json").write_text(json.dumps(claude_naming()), encoding="utf-8")
    (downloads / "projects.json").write_text(json.dumps([{"uuid": "p1", "name": "Someone else's"}]),
                                             encoding="utf-8")

    alone = run_import(engine, "claude", downloads / "conversations.json", dry_run=True)
    whole = run_import(engine, "claude", downloads, dry_run=True)

    assert "projects" not in alone and whole["projects"] == 1


# --- a folder or zip export: only its own files -----------------------------------------------------------


def test_dot_path_and_absolute_names_in_a_folder_export_resolve_to_nothing(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    (tmp_path / "outside.txt").write_text("beside the export\n", encoding="utf-8")
    (tmp_path / "file-9.txt").write_text("beside the export too\n", encoding="utf-8")
    folder = tmp_path / "export"
    (folder / "files").mkdir(parents=True)
    (folder / "files" / "outside.txt").write_text("inside\n", encoding="utf-8")  # a same base name inside
    (folder / ".bash_history").write_text("HISTORY ssh prod.example\n", encoding="utf-8")
    names = ["../outside.txt", str(tmp_path / "outside.txt"), "..\\outside.txt", "..", ".bash_history"]
    (folder / "conversations.json").write_text(json.dumps(claude_naming(*names)), encoding="utf-8")

    result = run_import(engine, "claude", folder)

    assert result["imported"]["sources"] == 2
    retained = _retained_texts(state_dir)
    assert not any(text in retained for text in ("beside the export", "inside\n", "HISTORY"))
    assert result["notes"] == [not_in_export(*names)]

    chat = tmp_path / "chat"
    chat.mkdir()
    (chat / "conversations.json").write_text(json.dumps(chatgpt_naming(
        "file-service://../file-9", "sediment:///" + str(tmp_path / "file-9"), "file-service://..\\file-9")),
        encoding="utf-8")
    said = run_import(engine, "chatgpt", chat, dry_run=True)
    assert said["wouldCreate"]["sources"] == 2
    assert said["notes"] == [not_in_export("../file-9", str(tmp_path / "file-9").lstrip("/"), "..\\file-9")]


def test_a_dot_member_of_a_zip_is_never_an_export_file(engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    archive = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("conversations.json", json.dumps(chatgpt_naming("file-service://file-1", "file-service://file-2")))
        out.writestr(".config/file-1-pivots.png", b"a dot-folder's file")
        out.writestr("user-abc/.file-2-hidden.png", b"a dot-file")
        out.writestr("__MACOSX/._file-1.png", b"a shadow")

    result = run_import(engine, "chatgpt", archive)

    assert result["imported"]["sources"] == 2
    assert not any(text in _retained_texts(state_dir) for text in ("a dot-f", "a shadow"))
    assert result["notes"] == [not_in_export("file-1", "file-2")]

    claude = tmp_path / "claude-export.zip"
    with zipfile.ZipFile(claude, "w") as out:
        out.writestr("conversations.json", json.dumps(claude_naming()))
        out.writestr(".cache/projects.json", json.dumps([{"uuid": "p1", "name": "Not the export's"}]))
    assert "projects" not in run_import(engine, "claude", claude, dry_run=True)


# --- links in an export's folder: never followed, named ---------------------------------------------------


def test_links_in_a_chat_export_folder_are_named_and_never_followed(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    home = _home(tmp_path / "home")
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "conversations.json").write_text(json.dumps(chatgpt_naming("file-service://file-1")),
                                               encoding="utf-8")
    os.symlink(home / ".bash_history", folder / "file-1-pivots.png")
    os.symlink(home / "Documents", folder / "user-abc")

    result = run_import(engine, "chatgpt", folder)

    assert result["imported"]["sources"] == 2 and "HISTORY" not in _retained_texts(state_dir)
    assert result["leftOut"] == ["export/file-1-pivots.png", "export/user-abc"]
    assert result["notes"] == [not_in_export("file-1"), "Left out 2 symbolic links, which an import never "
                               "follows: export/file-1-pivots.png, export/user-abc."]


def test_a_linked_projects_json_in_a_claude_export_folder_is_not_read(engine: Engine, tmp_path: Path) -> None:
    folder = tmp_path / "claude-export"
    folder.mkdir()
    (tmp_path / "elsewhere.json").write_text(json.dumps([{"uuid": "p1", "name": "Elsewhere"}]), encoding="utf-8")
    (folder / "conversations.json").write_text(json.dumps(claude_naming()), encoding="utf-8")
    os.symlink(tmp_path / "elsewhere.json", folder / "projects.json")

    result = run_import(engine, "claude", folder, dry_run=True)

    assert "projects" not in result and result["leftOut"] == ["claude-export/projects.json"]


def test_a_file_swapped_for_a_link_after_the_walk_is_refused_when_read(tmp_path: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "conversations.json").write_text("[]", encoding="utf-8")
    (folder / "file-1-pivots.png").write_bytes(PNG)
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    files = ExportFiles(folder)
    name = files.find("file-1")
    assert name == "file-1-pivots.png" and files.reader(name)() == PNG

    (folder / name).unlink()
    os.symlink(tmp_path / "secret.txt", folder / name)

    with pytest.raises(InvalidParams, match="symbolic link") as caught:
        files.reader(name)()
    assert caught.value.details["file"] == "export/file-1-pivots.png"


def test_a_linked_conversations_json_in_an_export_folder_is_not_read(engine: Engine, tmp_path: Path) -> None:
    folder = tmp_path / "chatgpt-export"
    folder.mkdir()
    (tmp_path / "elsewhere.json").write_text(json.dumps(chatgpt_naming()), encoding="utf-8")
    os.symlink(tmp_path / "elsewhere.json", folder / "conversations.json")

    with pytest.raises(InvalidParams, match="holds no conversations.json"):
        run_import(engine, "chatgpt", folder, dry_run=True)
