"""An import holding a credential, in any disguise the check undoes, is refused before its first write:
nothing retained, no agent registered, no record; the error names the place and the kind, never the key."""

from __future__ import annotations

import base64
import gzip
import json
import zipfile
from pathlib import Path
from typing import Callable

import pytest

from engine.core.errors import InvalidParams
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers import test_chatgpt, test_claude, test_mem0
from tests.engine.importers.helpers import run_import
from tests.engine.store.test_secret_placeholders import DOCS_NOTE
from tests.engine.store.test_secrets import SECRET

KEY = SECRET
PLACEHOLDER = "PLACEHOLDER-FOR-THE-KEY"


def fullwidth(text: str) -> str:
    return "".join(chr(ord(ch) + 0xFEE0) if ch.isalnum() else ch for ch in text)


def json_escaped(text: str) -> str:
    return "".join(f"\\u{ord(ch):04x}" for ch in text)

# How each disguise is written into an export's JSON file (after json.dumps, so escapes stay escapes).
DISGUISES: dict[str, Callable[[str], str]] = {
    "JSON escapes": lambda key: "\\u0041" + key[1:],
    "every character escaped": json_escaped,
    "HTML entity": lambda key: "&#65;" + key[1:],
    "fullwidth": fullwidth,
    "zero-width space": lambda key: key[:4] + "\\u200b" + key[4:],
    "byte-order mark": lambda key: key[:4] + "\ufeff" + key[4:],
    "Cyrillic look-alikes": lambda key: key.replace("A", "\u0410").replace("K", "\u041a"),
    "base64": lambda key: base64.b64encode(f"id {key}".encode()).decode(),
}


def nothing_written(engine: Engine, state_dir: StateDir) -> bool:
    stores = [p for p in state_dir.stores.iterdir() if not p.name.startswith(".")] if state_dir.stores.exists() else []
    return engine.registry.agent("main") is None and stores == []


def write_export(path: Path, data: object, disguised: str) -> Path:
    text = json.dumps(data, indent=2, ensure_ascii=False).replace(PLACEHOLDER, disguised)
    path.write_text(text, encoding="utf-8")
    return path


def assert_refused(engine: Engine, state_dir: StateDir, format_name: str, path: Path) -> InvalidParams:
    with pytest.raises(InvalidParams) as caught:
        run_import(engine, format_name, path)
    assert "Knowledge does not store credentials" in caught.value.message
    assert KEY not in caught.value.message and KEY not in json.dumps(caught.value.to_dict())
    assert nothing_written(engine, state_dir)
    return caught.value


@pytest.mark.parametrize("name", sorted(DISGUISES))
def test_a_chatgpt_export_with_a_disguised_key_is_refused_before_anything_is_written(
        engine: Engine, tmp_path: Path, state_dir: StateDir, name: str) -> None:
    data = test_chatgpt.export()
    data[1]["mapping"]["u"]["message"]["content"]["parts"] = [f"keep this safe: {PLACEHOLDER}"]
    path = write_export(tmp_path / "conversations.json", data, DISGUISES[name](KEY))

    error = assert_refused(engine, state_dir, "chatgpt", path)

    assert error.details["place"] in ("[1]", None) or error.details["place"].startswith("line ")


@pytest.mark.parametrize("name", sorted(DISGUISES))
def test_a_mem0_export_with_a_disguised_key_is_refused_before_anything_is_written(
        engine: Engine, tmp_path: Path, state_dir: StateDir, name: str) -> None:
    data = test_mem0.mem0_memories()
    data["results"][1]["memory"] = f"my bucket key is {PLACEHOLDER}"
    path = write_export(tmp_path / "memories.json", data, DISGUISES[name](KEY))

    assert_refused(engine, state_dir, "mem0", path)


def test_the_escaped_key_is_named_by_the_memory_that_holds_it(engine: Engine, tmp_path: Path,
                                                             state_dir: StateDir) -> None:
    data = test_mem0.mem0_memories()
    data["results"][1]["metadata"] = {"note": PLACEHOLDER}
    path = write_export(tmp_path / "memories.json", data, json_escaped(KEY))

    assert assert_refused(engine, state_dir, "mem0", path).details["place"] == "results[1]"


def test_a_claude_export_with_an_escaped_key_is_refused_before_anything_is_written(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    data = test_claude.export()
    data[1]["chat_messages"][3]["content"][0]["text"] = f"the bucket id: {PLACEHOLDER}"
    path = write_export(tmp_path / "conversations.json", data, json_escaped(KEY))

    assert assert_refused(engine, state_dir, "claude", path).details["place"] is not None


def test_a_markdown_note_with_an_entity_key_is_refused_before_anything_is_written(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "ops.md").write_text("# Ops\n\nThe bucket is Atlas.\n", encoding="utf-8")
    (folder / "keys.md").write_text(f"# Keys\n\nid &#65;{KEY[1:]}\n", encoding="utf-8")

    assert_refused(engine, state_dir, "markdown", folder)


def test_every_note_holding_a_credential_is_named_in_the_one_refusal(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    """A vault of years held two such notes; the refusal named the first, and the owner met the second only
    on the next try."""
    folder = tmp_path / "notes"
    (folder / "ops").mkdir(parents=True)
    (folder / "ops.md").write_text("# Ops\n\nThe bucket is Atlas.\n", encoding="utf-8")
    (folder / "keys.md").write_text(f"# Keys\n\nid {KEY}\n", encoding="utf-8")
    (folder / "ops" / "deploy.md").write_text(f"# Deploy\n\nfirst\nthen {KEY}\n", encoding="utf-8")

    refused = assert_refused(engine, state_dir, "markdown", folder)

    assert (refused.details["file"], refused.details["place"]) == ("keys.md", "line 3")
    assert refused.message.startswith("keys.md: line 3 holds what looks like ")
    assert refused.message.endswith("; 1 other note holds what looks like a credential too: ops/deploy.md (line 4)")


def test_a_graph_whose_notes_quote_documentation_placeholders_imports_and_a_real_key_among_them_is_refused(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    """A Logseq graph of 4,791 pages was refused for ten notes like these (`"SecretAccessKey": "value"`)."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "aws.md").write_text(f"# AWS\n\n{DOCS_NOTE}", encoding="utf-8")
    (folder / "client.md").write_text('# Client\n\n- api_key = "YOUR_API_KEY"\n- api_key: "sk-..."\n',
                                      encoding="utf-8")
    (folder / "keys.md").write_text(f'# Keys\n\n"SecretAccessKey": "value", "AccessKeyId": "{KEY}"\n',
                                    encoding="utf-8")

    refused = assert_refused(engine, state_dir, "markdown", folder)
    assert (refused.details["file"], refused.details["place"]) == ("keys.md", "line 3")

    (folder / "keys.md").unlink()
    assert sorted(run_import(engine, "markdown", folder)["pages"]) == ["aws.md", "client.md"]


@pytest.mark.parametrize("packed", ["gzip", "utf-16"])
def test_a_chatgpt_export_whose_file_hides_a_key_is_refused_before_anything_is_written(
        engine: Engine, tmp_path: Path, state_dir: StateDir, packed: str) -> None:
    text = f"screenshot text\nid {KEY}\n"
    data = gzip.compress(text.encode()) if packed == "gzip" else text.encode("utf-16-le")
    archive = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("conversations.json", json.dumps(test_chatgpt.export()))
        out.writestr("file-1-screenshot.png", data)

    with pytest.raises(InvalidParams, match="file-1-screenshot.png"):
        run_import(engine, "chatgpt", archive)
    assert nothing_written(engine, state_dir)


def test_an_ordinary_export_with_escapes_and_entities_imports(engine: Engine, tmp_path: Path) -> None:
    data = test_mem0.mem0_memories()
    data["results"][0]["memory"] = "Prefers th\u00e9 &amp; caf\u00e9 au lait \u2014 \u201cnever\u201d decaf"
    path = tmp_path / "memories.json"
    path.write_text(json.dumps(data, ensure_ascii=True), encoding="utf-8")

    assert len(run_import(engine, "mem0", path)["claims"]) == 2


def test_an_original_checked_before_the_import_is_not_scanned_again_when_it_is_retained(
        engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.store import credentials

    read: list[bytes] = []  # every file the scan reads
    real = credentials.decoded_for_scan
    monkeypatch.setattr(credentials, "decoded_for_scan", lambda data: read.append(data) or real(data))
    monkeypatch.setattr(engine.clean_contents, "part_bytes", 512)  # as the import retains a large original
    monkeypatch.setattr("engine.importers.common.ATTACH_MAX_BYTES", 512)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(test_chatgpt.export()), encoding="utf-8")
    data = path.read_bytes()

    result = run_import(engine, "chatgpt", path)

    parts = [data[start:start + 512] for start in range(0, len(data), 512)]
    assert result["imported"]["sources"] > len(parts) > 2  # the export in parts, and the transcripts
    assert read.count(data) == 1 and not [part for part in parts if part in read]  # whole, once; no part again
