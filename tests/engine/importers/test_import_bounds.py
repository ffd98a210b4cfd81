"""What an import's zip and JSON may expand to: each bound refused clearly, before anything is written.

The zips are crafted small: the bounds are lowered for a test, or the ratio is made by a member of zeros
that deflates a thousandfold (a 2 MiB member in a zip of a few KB)."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest

from engine.core.errors import InvalidParams, LimitExceeded
from engine.importers import zipped
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import run_import
from tests.engine.importers.test_chatgpt import export

HUGE_INTEGER = "1" * 5000  # past Python's 4,300-digit conversion limit


def chatgpt_zip(tmp_path: Path, **extra: bytes) -> Path:
    path = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as out:
        out.writestr("conversations.json", json.dumps(export()))
        for name, data in extra.items():
            out.writestr(name, data)
    return path


def place_of(text: str, found: str) -> str:
    at = text.index(found)
    return f"line {text.count(chr(10), 0, at) + 1} column {at - text.rfind(chr(10), 0, at)}"


def nothing_written(state_dir: StateDir) -> bool:
    return not state_dir.stores.exists() or not any(state_dir.stores.iterdir())


def test_a_zip_declaring_more_bytes_than_the_total_bound_is_refused_before_reading(
        engine: Engine, tmp_path: Path, state_dir: StateDir, monkeypatch: pytest.MonkeyPatch) -> None:
    path = chatgpt_zip(tmp_path, **{"file-1.png": b"\x89PNG" + bytes(range(256)) * 40})
    monkeypatch.setattr(zipped, "MAX_TOTAL_BYTES", 10_000)

    with pytest.raises(LimitExceeded) as refused:
        run_import(engine, "chatgpt", path)

    assert refused.value.details["bound"] == "total decompressed size" and refused.value.details["limit"] == 10_000
    assert "chatgpt-export.zip" in refused.value.message and "10,000" in refused.value.message
    assert nothing_written(state_dir)


def test_a_zip_with_more_members_than_the_count_bound_is_refused(
        engine: Engine, tmp_path: Path, state_dir: StateDir, monkeypatch: pytest.MonkeyPatch) -> None:
    path = chatgpt_zip(tmp_path, **{f"file-{n}.txt": b"x" for n in range(20)})
    monkeypatch.setattr(zipped, "MAX_MEMBERS", 10)

    with pytest.raises(LimitExceeded, match="holds 21 members") as refused:
        run_import(engine, "chatgpt", path)

    assert refused.value.details == {"file": str(path), "bound": "member count", "limit": 10}
    assert nothing_written(state_dir)


def test_a_member_that_expands_a_thousandfold_is_refused_by_the_ratio_bound(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    path = chatgpt_zip(tmp_path, **{"file-1.bin": bytes(2 * 1024 * 1024)})
    assert path.stat().st_size < 20_000

    with pytest.raises(LimitExceeded, match="expands") as refused:
        run_import(engine, "chatgpt", path)

    assert refused.value.details["member"] == "file-1.bin"
    assert refused.value.details["bound"] == "member compression ratio"
    assert refused.value.details["limit"] == zipped.MAX_MEMBER_RATIO
    assert nothing_written(state_dir)


def test_a_whole_zip_expanding_past_the_total_ratio_is_refused(tmp_path: Path, monkeypatch) -> None:
    path = chatgpt_zip(tmp_path, **{f"part-{n}.bin": bytes(300_000) for n in range(8)})
    monkeypatch.setattr(zipped, "MAX_MEMBER_RATIO", 10_000)  # each member alone is under the floor anyway

    with pytest.raises(LimitExceeded) as refused:
        zipped.BoundedZip(path)

    assert refused.value.details["bound"] == "total compression ratio"


def test_a_member_whose_zip_entry_understates_its_size_is_refused_naming_it(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    path = chatgpt_zip(tmp_path)
    data = bytearray(path.read_bytes())
    central = data.rfind(b"PK\x01\x02")  # the central directory's entry for conversations.json
    struct.pack_into("<I", data, central + 24, 10)  # its uncompressed size: 10 bytes
    path.write_bytes(bytes(data))

    with pytest.raises(InvalidParams) as refused:
        run_import(engine, "chatgpt", path)

    assert refused.value.details["member"] == "conversations.json"
    assert "where its zip entry declares 10" in refused.value.message
    assert nothing_written(state_dir)


def test_a_member_parsed_whole_is_refused_over_its_bound_before_it_is_read(
        engine: Engine, tmp_path: Path, state_dir: StateDir, monkeypatch: pytest.MonkeyPatch) -> None:
    path = chatgpt_zip(tmp_path)
    monkeypatch.setattr(zipped, "PARSED_MAX_BYTES", 100)
    read = []
    monkeypatch.setattr(zipped.BoundedZip, "chunks", lambda self, name: read.append(name) or iter(()))

    with pytest.raises(LimitExceeded, match="more than can be read whole") as refused:
        run_import(engine, "chatgpt", path)

    assert refused.value.details["member"] == "conversations.json" and refused.value.details["limit"] == 100
    assert read == [] and nothing_written(state_dir)


def test_the_bounds_pass_an_ordinary_export(engine: Engine, tmp_path: Path) -> None:
    path = chatgpt_zip(tmp_path, **{"file-1.png": b"\x89PNG" + bytes(range(256)) * 40})

    assert run_import(engine, "chatgpt", path)["conversations"] == 2


def test_a_chatgpt_number_of_thousands_of_digits_is_refused_naming_the_file_and_line(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    data = export()
    text = json.dumps(data, indent=1).replace('"update_time": 1780003600.5', f'"update_time": {HUGE_INTEGER}', 1)
    path = tmp_path / "conversations.json"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(InvalidParams, match="an integer longer than 100 characters") as refused:
        run_import(engine, "chatgpt", path)

    assert refused.value.details == {"file": "conversations.json", "place": place_of(text, HUGE_INTEGER)}
    assert nothing_written(state_dir)


def test_a_mem0_number_of_thousands_of_digits_is_refused_naming_the_file(
        engine: Engine, tmp_path: Path, state_dir: StateDir) -> None:
    path = tmp_path / "memories.json"
    text = '{"results": [{"id": "m1", "memory": "Likes tea", "metadata": {"n": %s}}]}' % HUGE_INTEGER
    path.write_text(text, encoding="utf-8")

    with pytest.raises(InvalidParams, match="an integer longer than 100 characters") as refused:
        run_import(engine, "mem0", path)

    assert refused.value.details == {"file": "memories.json", "place": place_of(text, HUGE_INTEGER)}
    assert nothing_written(state_dir)


def test_a_long_float_is_refused_and_ordinary_numbers_pass(tmp_path: Path, engine: Engine) -> None:
    path = tmp_path / "memories.json"
    path.write_text('[{"id": "m1", "memory": "Likes tea", "score": 0.%s}]' % ("5" * 200), encoding="utf-8")
    with pytest.raises(InvalidParams, match="a number longer than 100 characters"):
        run_import(engine, "mem0", path)

    path.write_text('[{"id": "m1", "memory": "Likes tea", "score": 0.25, "n": -9223372036854775808}]',
                    encoding="utf-8")
    assert run_import(engine, "mem0", path)["imported"]["claims"] == 1


@pytest.mark.parametrize(("number", "problem"), [
    ("1e999", "1e999, a number too large to read"),
    ("NaN", "NaN, which is not JSON"),
    ("-Infinity", "-Infinity, which is not JSON"),
])
def test_a_number_no_float_holds_is_refused_as_the_vaults_yaml_refuses_it(
        tmp_path: Path, engine: Engine, state_dir: StateDir, number: str, problem: str) -> None:
    path = tmp_path / "memories.json"
    path.write_text('[{"id": "m1", "memory": "Likes tea", "score": %s}]' % number, encoding="utf-8")

    with pytest.raises(InvalidParams, match=problem):
        run_import(engine, "mem0", path)
    assert nothing_written(state_dir)
