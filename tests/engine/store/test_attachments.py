"""Retaining files as evidence: knowledge_attach (base64) and knowledge_attach_file (workspace files)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from engine.store.attachments import (
    ATTACH_FILE_INPUT_SCHEMA,
    ATTACH_FILE_MAX_BYTES,
    ATTACH_FILE_PARAMS,
    ATTACH_INPUT_SCHEMA,
    ATTACH_MAX_BYTES,
    ATTACH_PARAMS,
    SOCKET_MESSAGE_MAX_BYTES,
    attach,
    attach_file,
    parse_attach_file_input,
    parse_attach_input,
)
from engine.access.authority import AgentCaller
from engine.state.config import parse_settings
from engine.core.errors import (
    Conflict, Denied, ForeignReference, InvalidParams, KnowledgeError, LimitExceeded, NotFound, RuntimeDisabled,
    WritesDisabled,
)
from engine.vault.evidence import parse_descriptor
from engine.service import Engine
from tests.helpers import conversation, only_store, operator, private_dir, vault_snapshot

SESSION = "0b7f9a52-3c1e-4e8e-9a57-5d6f0c2b1a99"
TEXT = b"Dana asked for the status notes\non Fridays, every week.\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def configure(engine: Engine, **config: Any) -> None:
    """Replace config.json (a new inode, so the engine's settings source sees the change)."""
    path = engine.state.config
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name("config.json.new")
    temp.write_text(json.dumps(config), encoding="utf-8")
    os.replace(temp, path)
    engine.settings.current()  # the engine has seen it (what "last valid settings" refers to)


@pytest.fixture
def workspace(tmp_path: Path, engine: Engine) -> Path:
    """A workspace directory the owner allowed attach_file to read."""
    root = (tmp_path / "workspace").resolve()
    root.mkdir()
    configure(engine, attachments={"workspaceRoots": [str(root)]})
    return root


def write(path: Path, data: bytes = TEXT) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def file_params(path: Path, data: bytes = TEXT, request_id: str = "att-1", **extra: Any) -> dict[str, Any]:
    return {"requestId": request_id, "filePath": str(path), "sha256": sha(data), **extra}


def publications(engine: Engine, caller: AgentCaller) -> int:
    return engine.on_store(caller, lambda rt, a: rt.store.db.one("SELECT COUNT(*) AS n FROM publications")["n"])


def state_of(engine: Engine, caller: AgentCaller) -> tuple[dict[str, str], int]:
    """Everything a refused request must leave alone: the vault's files and the publication journal."""
    return vault_snapshot(only_store(engine.state) / "vault"), publications(engine, caller)


@pytest.fixture
def baseline(engine: Engine, owner: AgentCaller) -> dict[str, Any]:
    """The owner's store, created and holding one attachment, so refusals have something to leave alone."""
    return attach(engine, owner, {"requestId": "baseline", "content": b64(b"baseline\n")})


def manifest_vault_id(engine: Engine) -> str:
    return json.loads((only_store(engine.state) / "vault.json").read_text(encoding="utf-8"))["vaultId"]


def descriptor_on_disk(engine: Engine, source_id: str, root: Path | None = None) -> Any:
    root = root or private_dir(engine.state)
    relpath = f"sources/{source_id}.source.yaml"
    descriptor, findings = parse_descriptor((root / relpath).read_bytes(), relpath)
    assert findings == []
    return descriptor


# --- configuration ------------------------------------------------------------------------------


def test_workspace_roots_are_read_from_config() -> None:
    settings = parse_settings({"attachments": {"workspaceRoots": ["/home/dana/work/", "/srv/docs", "/srv/docs"]}})
    assert settings.workspace_roots == ("/home/dana/work", "/srv/docs")
    assert parse_settings({}).workspace_roots == ()
    assert parse_settings({"attachments": {}}).workspace_roots == ()


@pytest.mark.parametrize(("attachments", "field"), [
    ([], "attachments"),
    ({"workspaceRoot": ["/srv"]}, "attachments.workspaceRoot"),
    ({"workspaceRoots": "/srv"}, "attachments.workspaceRoots"),
    ({"workspaceRoots": ["/srv"] * 33}, "attachments.workspaceRoots"),
    ({"workspaceRoots": ["relative/dir"]}, "attachments.workspaceRoots[0]"),
    ({"workspaceRoots": ["/srv", "/srv/../etc"]}, "attachments.workspaceRoots[1]"),
    ({"workspaceRoots": ["/srv/./docs"]}, "attachments.workspaceRoots[0]"),
    ({"workspaceRoots": ["/srv//docs"]}, "attachments.workspaceRoots[0]"),
    ({"workspaceRoots": ["/"]}, "attachments.workspaceRoots[0]"),
    ({"workspaceRoots": [""]}, "attachments.workspaceRoots[0]"),
    ({"workspaceRoots": ["/srv/\x00"]}, "attachments.workspaceRoots[0]"),
    ({"workspaceRoots": [7]}, "attachments.workspaceRoots[0]"),
])
def test_invalid_workspace_roots_are_refused_naming_the_field(attachments: Any, field: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        parse_settings({"attachments": attachments})
    assert caught.value.details["field"] == field


def test_an_invalid_attachments_setting_keeps_the_last_valid_roots(engine, owner, workspace):
    configure(engine, attachments={"workspaceRoots": ["not/absolute"]})
    receipt = attach_file(engine, owner, file_params(write(workspace / "notes.txt")))
    assert receipt["source"]["sha256"] == sha(TEXT)
    assert engine.settings.problem is not None and "attachments.workspaceRoots[0]" in engine.settings.problem


# --- knowledge_attach ------------------------------------------------------------------------------


def test_attach_retains_the_bytes_and_an_immutable_descriptor(engine, owner):
    receipt = attach(engine, owner, {"requestId": "att-1", "content": b64(TEXT), "filename": "notes/friday.TXT",
                                     "sha256": sha(TEXT).upper()})

    source = receipt["source"]
    assert source["sha256"] == sha(TEXT) and source["size"] == len(TEXT)
    assert (source["mediaType"], source["filename"]) == ("text/plain", "friday.TXT")
    assert source["retainedPath"] == f"sources/{source['id']}.txt"
    assert receipt["publicationId"].startswith("pub_") and receipt["requestId"] == "att-1"
    assert receipt["git"]["state"] in ("pending", "committed", "unavailable")
    assert (private_dir(engine.state) / source["retainedPath"]).read_bytes() == TEXT
    descriptor = descriptor_on_disk(engine, source["id"])
    assert (descriptor.sha256, descriptor.size, descriptor.media_type, descriptor.filename) == (
        sha(TEXT), len(TEXT), "text/plain", "friday.TXT")
    assert descriptor.origin == {"agent": "main", "audience": "owner-private"}
    assert receipt["vaultId"] == manifest_vault_id(engine)


def test_attach_without_a_filename_or_media_type_is_octet_stream(engine, owner):
    data = bytes(range(256))
    receipt = attach(engine, owner, {"requestId": "bin", "content": b64(data)})
    assert receipt["source"]["mediaType"] == "application/octet-stream"
    assert receipt["source"]["filename"] is None
    assert receipt["source"]["retainedPath"].endswith(".bin")
    assert (private_dir(engine.state) / receipt["source"]["retainedPath"]).read_bytes() == data


def test_attach_accepts_line_wrapped_base64_and_an_explicit_media_type(engine, owner):
    data = b"x" * 200
    wrapped = base64.encodebytes(data).decode("ascii")  # MIME style: a newline every 76 characters
    assert "\n" in wrapped.strip()
    receipt = attach(engine, owner, {"requestId": "wrapped", "content": wrapped, "mediaType": "Text/Markdown"})
    assert receipt["source"]["mediaType"] == "text/markdown"
    assert receipt["source"]["retainedPath"].endswith(".md")


def test_a_claim_can_cite_an_attached_source(engine, owner):
    receipt = attach(engine, owner, {"requestId": "att-1", "content": b64(TEXT), "filename": "friday.txt"})
    source_id = receipt["source"]["id"]

    remembered = engine.remember(owner, {"requestId": "claim-1", "items": [{
        "text": "Dana wants status notes on Fridays", "claimKind": "preference",
        "evidence": [{"source": source_id, "lines": [2, 2], "quote": "on Fridays"}],
    }]})

    claim = engine.get_record(owner, remembered["items"][0]["id"])
    assert claim["status"] == "current"
    assert claim["frontmatter"]["evidence"] == [{"source": source_id, "lines": [2, 2], "quote": "on Fridays"}]
    hits = engine.search(owner, {"query": "status notes Fridays"})["hits"]
    assert [hit["id"] for hit in hits] == [claim["id"]]


def test_an_identical_retry_returns_the_original_receipt(engine, owner):
    params = {"requestId": "att-1", "content": b64(TEXT), "filename": "friday.txt"}
    first = attach(engine, owner, params)
    before = state_of(engine, owner)

    again = attach(engine, owner, dict(params, sha256=sha(TEXT)))  # verifying is not part of the request

    assert again["source"] == first["source"] and again["publicationId"] == first["publicationId"]
    assert state_of(engine, owner) == before


def test_a_filename_with_folders_keeps_its_last_part_and_the_receipt_says_so(engine, owner, workspace):
    receipt = attach(engine, owner, {"requestId": "att-1", "content": b64(TEXT), "filename": "../x.txt"})
    assert receipt["source"]["filename"] == "x.txt"
    assert receipt["note"] == ("filename was kept as 'x.txt', a file's own name: a display name holds no folder "
                               "and no surrounding spaces")
    assert descriptor_on_disk(engine, receipt["source"]["id"]).filename == "x.txt"
    again = attach(engine, owner, {"requestId": "att-1", "content": b64(TEXT), "filename": "x.txt"})
    assert again["source"] == receipt["source"] and "note" not in again  # the same request: the name kept

    path = write(workspace / "friday.txt")
    filed = attach_file(engine, owner, file_params(path, request_id="att-2", filename="C:\\notes\\friday.txt"))
    assert filed["source"]["filename"] == "friday.txt" and "'friday.txt'" in filed["note"]
    plain = attach_file(engine, owner, file_params(path, request_id="att-3"))
    assert plain["source"]["filename"] == "friday.txt" and "note" not in plain


@pytest.mark.parametrize("change", [{"content": b64(b"other bytes\n")}, {"filename": "other.txt"},
                                    {"mediaType": "text/markdown"}])
def test_the_same_request_id_with_other_content_is_a_conflict(engine, owner, change):
    params = {"requestId": "att-1", "content": b64(TEXT), "filename": "friday.txt"}
    attach(engine, owner, params)
    before = state_of(engine, owner)
    with pytest.raises(Conflict):
        attach(engine, owner, {**params, **change})
    assert state_of(engine, owner) == before


def test_a_request_id_used_by_another_write_is_a_conflict(engine, owner):
    engine.save_page(owner, {"requestId": "shared-id", "type": "note", "title": "A note", "body": "x"})
    before = state_of(engine, owner)
    with pytest.raises(Conflict):
        attach(engine, owner, {"requestId": "shared-id", "content": b64(TEXT)})
    assert state_of(engine, owner) == before


@pytest.mark.parametrize(("params", "field"), [
    ({"requestId": "a", "content": "not base64!"}, "content"),
    ({"requestId": "a", "content": "aGVsbG8"}, "content"),                # missing padding
    ({"requestId": "a", "content": "aGVs bG8=\u00e9"}, "content"),        # not ASCII
    ({"requestId": "a", "content": "aGVsbG8_"}, "content"),               # URL-safe alphabet
    ({"requestId": "a", "content": ""}, "content"),                       # empty
    ({"requestId": "a", "content": "  \n "}, "content"),                  # only whitespace: empty too
    ({"requestId": "a", "content": 5}, "content"),
    ({"requestId": "a"}, "content"),
    ({"requestId": "a", "content": b64(TEXT), "sha256": sha(b"other")}, "sha256"),
    ({"requestId": "a", "content": b64(TEXT), "sha256": "abc"}, "sha256"),
    ({"requestId": "a", "content": b64(TEXT), "mediaType": "text/plain; charset=utf-8"}, "mediaType"),
    ({"requestId": "a", "content": b64(TEXT), "mediaType": "plain"}, "mediaType"),
    ({"requestId": "a", "content": b64(TEXT), "filename": "../"}, "filename"),
    ({"requestId": "a", "content": b64(TEXT), "filename": ""}, "filename"),
    ({"requestId": "a", "content": b64(TEXT), "filePath": "/x"}, "filePath"),
    ({"requestId": "a", "content": b64(TEXT), "bogus": 1}, "bogus"),
    ({"requestId": "has space", "content": b64(TEXT)}, "requestId"),
    ({"content": b64(TEXT)}, "requestId"),
])
def test_bad_attach_input_is_refused_and_changes_nothing(engine, owner, baseline, params, field):
    before = state_of(engine, owner)
    with pytest.raises(InvalidParams) as caught:
        attach(engine, owner, params)
    assert caught.value.details.get("field") == field
    assert state_of(engine, owner) == before


def test_a_mismatched_sha256_reports_both_digests(engine, owner):
    with pytest.raises(InvalidParams) as caught:
        attach(engine, owner, {"requestId": "a", "content": b64(TEXT), "sha256": sha(b"other")})
    assert (caught.value.details["expected"], caught.value.details["actual"]) == (sha(b"other"), sha(TEXT))


def test_parameters_must_be_an_object() -> None:
    with pytest.raises(InvalidParams):
        parse_attach_input(["content"])
    with pytest.raises(InvalidParams):
        parse_attach_file_input(None)


def test_the_largest_attachment_fits_one_socket_message(engine, owner):
    data = os.urandom(ATTACH_MAX_BYTES)
    params = {"requestId": "largest", "content": b64(data), "filename": "blob.bin", "mediaType": "application/zip",
              "sha256": sha(data)}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "knowledge_attach", "arguments": params,
                          "_meta": {"knowledge": {"audience": {"kind": "conversation", "sessionKey": "k" * 256,
                                                              "sessionId": SESSION}}}}}
    assert len(json.dumps(message).encode("utf-8")) + 1 <= SOCKET_MESSAGE_MAX_BYTES

    receipt = attach(engine, owner, params)
    assert receipt["source"]["size"] == ATTACH_MAX_BYTES
    assert (private_dir(engine.state) / receipt["source"]["retainedPath"]).read_bytes() == data


def test_content_over_the_cap_is_refused_and_changes_nothing(engine, owner, baseline):
    before = state_of(engine, owner)
    with pytest.raises(LimitExceeded) as caught:
        attach(engine, owner, {"requestId": "big", "content": b64(b"\0" * (ATTACH_MAX_BYTES + 1))})
    assert caught.value.details["limit"] == ATTACH_MAX_BYTES
    with pytest.raises(LimitExceeded):
        attach(engine, owner, {"requestId": "big", "content": "A" * (SOCKET_MESSAGE_MAX_BYTES + 1)})
    assert state_of(engine, owner) == before


def test_attach_needs_writes_enabled(engine, owner, baseline):
    configure(engine, writesEnabled=False)
    before = vault_snapshot(only_store(engine.state) / "vault")
    with pytest.raises(WritesDisabled):
        attach(engine, owner, {"requestId": "a", "content": b64(TEXT)})
    assert vault_snapshot(only_store(engine.state) / "vault") == before


def test_the_operator_and_a_read_only_grant_cannot_attach(engine, owner, baseline):
    before = state_of(engine, owner)
    with pytest.raises(Denied):
        attach(engine, operator("main"), {"requestId": "a", "content": b64(TEXT)})
    engine.registry.set_grant("main", "chat:granted", "read")
    with pytest.raises(Denied):
        attach(engine, conversation(owner.token, SESSION, key="chat:granted"),
               {"requestId": "a", "content": b64(TEXT)})
    assert state_of(engine, owner) == before


def test_a_conversation_attaches_into_its_own_partition(engine, owner, baseline):
    chat = conversation(owner.token, SESSION)
    receipt = attach(engine, chat, {"requestId": "chat-att", "content": b64(TEXT), "filename": "chat.txt"})

    partition = only_store(engine.state) / "vault" / "conversations" / SESSION
    assert (partition / receipt["source"]["retainedPath"]).read_bytes() == TEXT
    descriptor = descriptor_on_disk(engine, receipt["source"]["id"], partition)
    assert descriptor.origin == {"agent": "main", "audience": "conversation", "session": SESSION}
    assert not (private_dir(engine.state) / receipt["source"]["retainedPath"]).exists()
    with pytest.raises(NotFound):  # no cross-partition citations
        engine.remember(owner, {"requestId": "c", "items": [{"text": "x", "claimKind": "fact",
                                                             "evidence": [{"source": receipt["source"]["id"]}]}]})


# --- knowledge_attach_file ---------------------------------------------------------------------------


def test_attach_file_retains_a_workspace_file(engine, owner, workspace):
    path = write(workspace / "docs" / "Friday notes.md")

    receipt = attach_file(engine, owner, file_params(path))

    source = receipt["source"]
    assert (source["filename"], source["mediaType"], source["size"]) == ("Friday notes.md", "text/markdown",
                                                                         len(TEXT))
    assert (private_dir(engine.state) / source["retainedPath"]).read_bytes() == TEXT
    descriptor = descriptor_on_disk(engine, source["id"])
    assert descriptor.origin == {"agent": "main", "audience": "owner-private"}
    assert descriptor.sha256 == sha(TEXT)
    assert path.read_bytes() == TEXT  # the original is left where it was


def test_attach_file_takes_a_filename_and_media_type(engine, owner, workspace):
    path = write(workspace / "export.dat")
    receipt = attach_file(engine, owner, file_params(path, filename="minutes.txt", mediaType="text/csv"))
    assert (receipt["source"]["filename"], receipt["source"]["mediaType"]) == ("minutes.txt", "text/csv")
    assert receipt["source"]["retainedPath"].endswith(".txt")


def test_a_claim_can_cite_an_attached_file(engine, owner, workspace):
    receipt = attach_file(engine, owner, file_params(write(workspace / "notes.txt")))
    remembered = engine.remember(owner, {"requestId": "claim-1", "items": [{
        "text": "Status notes go out weekly", "claimKind": "fact", "assertionOrigin": "source",
        "evidence": [{"source": receipt["source"]["id"], "quote": "every week"}],
    }]})
    assert engine.get_record(owner, remembered["items"][0]["id"])["status"] == "current"


def test_attach_file_is_refused_without_a_configured_root(engine, owner, tmp_path):
    path = write(tmp_path / "notes.txt")
    with pytest.raises(RuntimeDisabled) as caught:
        attach_file(engine, owner, file_params(path))
    assert "attachments.workspaceRoots" in caught.value.message
    assert not engine.state.stores.exists() or not any(engine.state.stores.iterdir())  # not even a store


def test_attach_file_retry_returns_the_original_receipt_even_after_the_file_is_gone(engine, owner, workspace):
    path = write(workspace / "notes.txt")
    first = attach_file(engine, owner, file_params(path, expectedVaultId=first_vault_id(engine, owner)))
    path.unlink()
    before = state_of(engine, owner)

    again = attach_file(engine, owner, file_params(path, expectedVaultId=first["vaultId"]))

    assert again["publicationId"] == first["publicationId"] and again["source"] == first["source"]
    assert state_of(engine, owner) == before


def first_vault_id(engine: Engine, caller: AgentCaller) -> str:
    return attach(engine, caller, {"requestId": "probe", "content": b64(b"probe\n")})["vaultId"]


def test_attach_file_with_the_same_request_id_and_another_file_is_a_conflict(engine, owner, workspace):
    attach_file(engine, owner, file_params(write(workspace / "a.txt")))
    other = write(workspace / "b.txt", b"other\n")
    before = state_of(engine, owner)
    with pytest.raises(Conflict):
        attach_file(engine, owner, file_params(other, b"other\n"))
    assert state_of(engine, owner) == before


def test_expected_vault_id_must_be_the_callers_vault(engine, owner, workspace):
    vault_id = first_vault_id(engine, owner)
    assert vault_id == manifest_vault_id(engine)
    path = write(workspace / "notes.txt")
    before = state_of(engine, owner)

    with pytest.raises(ForeignReference) as caught:
        attach_file(engine, owner, file_params(path, expectedVaultId="vt_01JD8Q4W6R8H2V5D1J9P3L7C0B"))
    assert caught.value.details["field"] == "expectedVaultId"
    with pytest.raises(InvalidParams):
        attach_file(engine, owner, file_params(path, expectedVaultId="../vault"))
    assert state_of(engine, owner) == before

    assert attach_file(engine, owner, file_params(path, expectedVaultId=vault_id))["vaultId"] == vault_id


def test_a_sha256_mismatch_is_refused_and_changes_nothing(engine, owner, workspace, baseline):
    path = write(workspace / "notes.txt")
    before = state_of(engine, owner)
    with pytest.raises(InvalidParams) as caught:
        attach_file(engine, owner, {"requestId": "a", "filePath": str(path), "sha256": sha(b"something else")})
    assert caught.value.details["field"] == "sha256"
    assert caught.value.details["actual"] == sha(TEXT)
    assert state_of(engine, owner) == before


def test_a_mismatch_is_found_by_streaming_without_loading_the_file(engine, owner, workspace, baseline):
    data = b"0123456789abcdef" * (1 << 20)  # 16 MiB
    path = write(workspace / "large.bin", data)
    tracemalloc.start()
    try:
        with pytest.raises(InvalidParams):
            attach_file(engine, owner, {"requestId": "a", "filePath": str(path), "sha256": sha(b"x")})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 * (1 << 20), peak


def test_an_empty_file_is_refused(engine, owner, workspace, baseline):
    path = write(workspace / "empty.txt", b"")
    before = state_of(engine, owner)
    with pytest.raises(InvalidParams) as caught:
        attach_file(engine, owner, file_params(path, b""))
    assert caught.value.details["field"] == "filePath"
    assert state_of(engine, owner) == before


def test_a_file_over_the_journal_cap_is_refused(engine, owner, workspace, baseline):
    path = workspace / "huge.bin"
    with open(path, "wb") as handle:  # sparse: no disk space, no reading
        handle.truncate(ATTACH_FILE_MAX_BYTES + 1)
    before = state_of(engine, owner)
    with pytest.raises(LimitExceeded) as caught:
        attach_file(engine, owner, file_params(path, b"irrelevant"))
    assert caught.value.details["limit"] == ATTACH_FILE_MAX_BYTES
    assert state_of(engine, owner) == before


def refused(engine: Engine, owner: AgentCaller, file_path: str, error: type[KnowledgeError],
            data: bytes = TEXT) -> KnowledgeError:
    before = state_of(engine, owner)
    with pytest.raises(error) as caught:
        attach_file(engine, owner, {"requestId": "tricky", "filePath": file_path, "sha256": sha(data)})
    assert state_of(engine, owner) == before
    return caught.value


@pytest.mark.parametrize("template", [
    "{root}/../outside.txt",
    "{root}/sub/../notes.txt",
    "{root}/./notes.txt",
    "{root}//notes.txt",
    "{root}/notes.txt/",
    "workspace/notes.txt",
    "notes.txt",
    "",
    "{root}/notes\x00.txt",
])
def test_path_tricks_are_refused_before_anything_is_opened(engine, owner, workspace, baseline, template):
    write(workspace / "notes.txt")
    write(workspace / "sub" / "keep.txt")
    write(workspace.parent / "outside.txt")
    error = refused(engine, owner, template.format(root=workspace), InvalidParams)
    assert error.details["field"] == "filePath"


def test_a_file_outside_every_root_is_denied(engine, owner, workspace, baseline, tmp_path):
    outside = write(tmp_path / "outside.txt")
    denied = refused(engine, owner, str(outside), Denied)
    assert denied.details["field"] == "filePath" and "send the file's content with knowledge_attach" in denied.message
    sibling = write(tmp_path / (workspace.name + "-other") / "notes.txt")  # a shared prefix is not inside
    refused(engine, owner, str(sibling), Denied)
    refused(engine, owner, str(workspace), Denied)  # the root itself


def test_files_of_the_engine_state_directory_are_never_attached(engine, owner, baseline):
    configure(engine, attachments={"workspaceRoots": [str(engine.state.root.resolve().parent)]})
    manifest = only_store(engine.state) / "vault.json"
    refused(engine, owner, str(manifest.resolve()), Denied, manifest.read_bytes())


def test_a_symlinked_file_is_refused(engine, owner, workspace, baseline, tmp_path):
    target = write(workspace / "real.txt")
    (workspace / "link.txt").symlink_to(target)
    outside = write(tmp_path / "secret.txt")
    (workspace / "escape.txt").symlink_to(outside)
    assert "symlink" in refused(engine, owner, str(workspace / "link.txt"), InvalidParams).message
    refused(engine, owner, str(workspace / "escape.txt"), InvalidParams)


def test_a_symlinked_directory_on_the_path_is_refused(engine, owner, workspace, baseline, tmp_path):
    write(workspace / "real" / "notes.txt")
    (workspace / "alias").symlink_to(workspace / "real", target_is_directory=True)
    write(tmp_path / "elsewhere" / "notes.txt")
    (workspace / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    error = refused(engine, owner, str(workspace / "alias" / "notes.txt"), InvalidParams)
    assert "alias is a symlink" in error.message
    refused(engine, owner, str(workspace / "out" / "notes.txt"), InvalidParams)


def test_a_root_reached_through_a_symlink_is_refused(engine, owner, baseline, tmp_path):
    real = tmp_path.resolve() / "real-root"
    write(real / "notes.txt")
    link = tmp_path.resolve() / "linked-root"
    link.symlink_to(real, target_is_directory=True)
    configure(engine, attachments={"workspaceRoots": [str(link)]})
    assert "linked-root is a symlink" in refused(engine, owner, str(link / "notes.txt"), InvalidParams).message


def test_a_hardlinked_file_is_refused(engine, owner, workspace, baseline):
    original = write(workspace / "original.txt")
    os.link(original, workspace / "second-name.txt")
    assert "hard link" in refused(engine, owner, str(original), InvalidParams).message
    refused(engine, owner, str(workspace / "second-name.txt"), InvalidParams)


def test_a_directory_is_refused(engine, owner, workspace, baseline):
    (workspace / "folder").mkdir()
    assert "directory" in refused(engine, owner, str(workspace / "folder"), InvalidParams).message


def test_a_fifo_is_refused_without_blocking(engine, owner, workspace, baseline):
    fifo = workspace / "pipe"
    os.mkfifo(fifo)  # a plain open for reading would wait for a writer forever
    before = state_of(engine, owner)
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            attach_file(engine, owner, {"requestId": "fifo", "filePath": str(fifo), "sha256": sha(b"")})
        except KnowledgeError as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=call, name="attach-fifo")
    worker.start()
    worker.join(timeout=30)
    blocked = worker.is_alive()
    if blocked:  # release the stuck reader so the failure below is reported instead of a hang
        os.close(os.open(fifo, os.O_WRONLY))
        worker.join()
    assert not blocked, "attach_file blocked on a FIFO"
    assert isinstance(outcome["error"], InvalidParams) and "regular file" in outcome["error"].message
    assert state_of(engine, owner) == before


def test_a_socket_is_refused(engine, owner, workspace, baseline):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(workspace / "s.sock"))
        assert "regular file" in refused(engine, owner, str(workspace / "s.sock"), InvalidParams).message
    finally:
        server.close()


def test_a_device_is_refused(engine, owner, baseline):
    assert os.path.realpath("/dev") == "/dev" and os.path.exists("/dev/null")
    configure(engine, attachments={"workspaceRoots": ["/dev"]})
    assert "regular file" in refused(engine, owner, "/dev/null", InvalidParams, b"").message


def test_a_missing_file_is_not_found(engine, owner, workspace, baseline):
    refused(engine, owner, str(workspace / "missing.txt"), NotFound)
    refused(engine, owner, str(workspace / "missing-dir" / "notes.txt"), NotFound)
    write(workspace / "file.txt")
    assert "not a directory" in refused(engine, owner, str(workspace / "file.txt" / "x"), InvalidParams).message


def test_attach_file_needs_a_sha256(engine, owner, workspace, baseline):
    path = write(workspace / "notes.txt")
    before = state_of(engine, owner)
    for params in ({"requestId": "a", "filePath": str(path)}, {"requestId": "a", "filePath": str(path),
                                                               "sha256": "xyz"}):
        with pytest.raises(InvalidParams) as caught:
            attach_file(engine, owner, params)
        assert caught.value.details["field"] == "sha256"
    with pytest.raises(InvalidParams) as caught:
        attach_file(engine, owner, {**file_params(path), "content": b64(TEXT)})
    assert caught.value.details["field"] == "content"
    assert state_of(engine, owner) == before


def test_attach_file_needs_writes_and_a_writer(engine, owner, workspace, baseline):
    path = write(workspace / "notes.txt")
    with pytest.raises(Denied):
        attach_file(engine, operator("main"), file_params(path))
    configure(engine, writesEnabled=False, attachments={"workspaceRoots": [str(workspace)]})
    with pytest.raises(WritesDisabled):
        attach_file(engine, owner, file_params(path))


# --- published schemas -----------------------------------------------------------------------------


def test_the_schemas_list_exactly_the_accepted_parameters():
    assert set(ATTACH_INPUT_SCHEMA["properties"]) == ATTACH_PARAMS
    assert set(ATTACH_FILE_INPUT_SCHEMA["properties"]) == ATTACH_FILE_PARAMS
    assert set(ATTACH_INPUT_SCHEMA["required"]) == {"requestId", "content"}
    assert set(ATTACH_FILE_INPUT_SCHEMA["required"]) == {"requestId", "filePath", "sha256"}
    for params, parser in ((ATTACH_PARAMS, parse_attach_input), (ATTACH_FILE_PARAMS, parse_attach_file_input)):
        with pytest.raises(InvalidParams) as caught:
            parser({name: None for name in params})
        assert not caught.value.message.startswith("unknown parameter")
