"""The portable store archive: export, restore byte for byte, and refusals that leave nothing behind."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import zipfile
from pathlib import Path
from typing import Any, Callable

import pytest

from engine.access.authority import AgentCaller
from engine.cli.commands import main
from engine.core.errors import Conflict, InvalidParams, NotFound
from engine.importers.archive import ArchiveReader, export_archive, restore_archive
from engine.importers.archive_format import BUNDLE_NAME, MANIFEST_NAME
from engine.service import Engine
from engine.state.registry import hash_token
from engine.state.statedir import EngineLock, StateDir
from engine.store.attachments import attach
from tests.helpers import claim, conversation, page, vault_snapshot

SESSION = "3d5e7f90-1a2b-4c3d-8e9f-0a1b2c3d4e5f"
RECIPE_ONTOLOGY = """\
format: knowledge-ontology-v1
page_types:
  recipe:
    label: Recipe
    filing: [pages/recipes/]
    fields:
      cuisine: {type: string}
"""
QUERIES = ("lighthouse", "friday notes", "pasta", "harbour")


def store_dir(state: StateDir) -> Path:
    [directory] = [p for p in state.stores.iterdir() if not p.name.startswith(".")]
    return directory


def vault_of(state: StateDir) -> Path:
    return store_dir(state) / "vault"


def seed(engine: Engine) -> tuple[AgentCaller, dict[str, str]]:
    """A store with pages, claims, a relationship, retained evidence, several revisions of one page, an
    ontology extension with a page of its type, an edit made outside the engine and a conversation."""
    owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
    dana = engine.save_page(owner, page("dana", "Dana Whitaker", body="Keeps the lighthouse running.",
                                        aliases=["Dana"]))
    engine.save_page(owner, page("atlas", "Atlas", "project", body="The lighthouse restoration project."))
    for number, body in enumerate(("Keeps the lighthouse running. Sails.", "Keeps the lighthouse. Sails often."), 1):
        engine.save_page(owner, {**page(f"dana-{number}", "Dana Whitaker", body=body, aliases=["Dana"]),
                                 "id": dana["id"], "expectedRevision": number})
    remembered = engine.remember(owner, {"requestId": "m1", "subject": "Dana", "items": [
        claim("Dana wants the status notes on Fridays.", "send me the friday notes", kind="preference"),
        {"relation": "works_on", "from": "Dana", "to": "Atlas", "excerpt": "Dana works on Atlas."},
    ]})
    attach(engine, owner, {"requestId": "att-1", "content": base64.b64encode(b"Harbour minutes\n").decode(),
                           "filename": "minutes.txt"})
    (vault_of(engine.state) / "ontology.yaml").write_text(RECIPE_ONTOLOGY, encoding="utf-8")
    recipe = engine.save_page(owner, page("recipe", "Pasta al limone", "recipe", body="Lemon pasta.",
                                          fields={"cuisine": "Italian"}))
    edited = vault_of(engine.state) / "private" / engine.get_record(owner, dana["id"])["path"]
    edited.write_bytes(edited.read_bytes().replace(b"Sails often.", b"Sails often, by hand."))
    chat = conversation(owner.token, SESSION)
    in_chat = engine.save_page(chat, page("chat-note", "Harbour call", "note", body="Harbour call on Monday."))
    return owner, {"dana": dana["id"], "recipe": recipe["id"], "claim": remembered["items"][0]["id"],
                   "chat": in_chat["id"]}


def served(engine: Engine, owner: AgentCaller, ids: dict[str, str]) -> dict[str, Any]:
    """What the engine serves of a store: searches, records and their histories, the conversation's page."""
    chat = conversation(owner.token, SESSION)
    return {
        "search": {query: [(hit["id"], hit["kind"], hit["title"])
                           for hit in engine.search(owner, {"query": query})["hits"]] for query in QUERIES},
        "records": {name: {key: value for key, value in engine.get_record(owner, record_id).items() if key != "git"}
                    for name, record_id in ids.items() if name != "chat"},
        "history": {name: [(entry["revision"], entry["sha256"], entry["origin"])
                            for entry in engine.history(owner, record_id)["revisions"]]
                    for name, record_id in ids.items() if name != "chat"},
        "chat": engine.get_record(chat, ids["chat"])["frontmatter"],
    }


@pytest.fixture
def exported(tmp_path: Path) -> dict[str, Any]:
    """A seeded store exported (without history), and what its engine served."""
    source = StateDir(tmp_path / "source")
    with Engine(source, watch=False) as engine:
        owner, ids = seed(engine)
        before = served(engine, owner, ids)
        token = owner.token
        summary = export_archive(engine, tmp_path / "store.zip")
    return {"archive": tmp_path / "store.zip", "source": source, "ids": ids, "served": before, "token": token,
            "summary": summary, "target": StateDir(tmp_path / "target")}


def restored_engine_serves(target: StateDir, ids: dict[str, str], token_of: Callable[[Engine], str]) -> dict:
    with Engine(target, watch=False) as engine:
        owner = AgentCaller(token_of(engine), {"kind": "owner-private"})
        return served(engine, owner, ids)


def rewrite(archive: Path, change: Callable[[dict[str, bytes], dict[str, Any]], None], out: Path) -> Path:
    """A copy of ``archive`` with its members (and manifest) changed by ``change``."""
    with zipfile.ZipFile(archive) as original:
        members = {info.filename: original.read(info) for info in original.infolist()}
    manifest = json.loads(members.pop(MANIFEST_NAME))
    change(members, manifest)
    with zipfile.ZipFile(out, "w") as changed:
        for name, data in members.items():
            changed.writestr(name, data)
        changed.writestr(MANIFEST_NAME, json.dumps(manifest))
    return out


def listed(manifest: dict[str, Any], name: str, data: bytes) -> None:
    manifest["files"].append({"path": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})


# --- the round trip ------------------------------------------------------------------------------


def test_a_restored_store_holds_every_file_byte_identical_and_serves_the_same(exported, capsys):
    source, target = exported["source"], exported["target"]
    assert exported["summary"]["revisions"] >= 8 and exported["summary"]["skipped"] == []
    assert main(["import", "archive", str(exported["archive"]), "--state-dir", str(target.root)]) == 0
    said = capsys.readouterr().out  # the agent is not registered by a restore, and the owner is told how
    assert "No agent named main is registered here" in said and "knowledge agents add main --owner" in said

    assert vault_snapshot(vault_of(target)) == vault_snapshot(vault_of(source))
    assert (vault_of(target) / "ontology.yaml").read_text(encoding="utf-8") == RECIPE_ONTOLOGY
    assert store_dir(target).name == store_dir(source).name
    # No token crossed over: the owner registers the agent again and gets a new one.
    after = restored_engine_serves(target, exported["ids"], lambda engine: engine.add_agent("main", owner=True))
    assert after == exported["served"]
    assert after["search"]["lighthouse"] and after["search"]["pasta"] and after["search"]["friday notes"]
    assert [origin for _, _, origin in after["history"]["dana"]][-1] == "external"  # the outside edit is kept
    assert main(["import", "archive", str(exported["archive"]), "--state-dir", str(target.root)]) == 0
    again = capsys.readouterr().out
    assert "already restored" in again and "No agent named" not in again  # registered since


def test_a_symlink_in_the_vault_is_left_out_and_reported(tmp_path, capsys):
    state = StateDir(tmp_path / "state")
    with Engine(state, watch=False) as engine:
        seed(engine)
    (tmp_path / "outside.md").write_text("outside the vault\n", encoding="utf-8")
    os.symlink(tmp_path / "outside.md", vault_of(state) / "private" / "pages" / "linked.md")
    assert main(["export", str(tmp_path / "store.zip"), "--state-dir", str(state.root)]) == 0
    assert "Left out (not a regular file, or a name that is not UTF-8): private/pages/linked.md" in (
        capsys.readouterr().out)
    with zipfile.ZipFile(tmp_path / "store.zip") as archive:
        assert not [name for name in archive.namelist() if "linked" in name]
        assert b"outside the vault" not in b"".join(archive.read(name) for name in archive.namelist())


def test_the_archive_lists_every_member_with_its_hash_and_holds_no_credential(exported):
    with zipfile.ZipFile(exported["archive"]) as archive:
        manifest = json.loads(archive.read(MANIFEST_NAME))
        members = {info.filename: archive.read(info) for info in archive.infolist() if info.filename != MANIFEST_NAME}
    assert stat.S_IMODE(exported["archive"].stat().st_mode) == 0o600  # it holds the owner's private knowledge
    assert (manifest["format"], manifest["formatVersion"]) == ("knowledge-store-archive", 1)
    assert manifest["engineVersion"] and manifest["createdAt"]
    assert (manifest["store"]["kind"], manifest["store"]["createdFor"]) == ("isolated", "main")
    assert {entry["path"]: (entry["sha256"], entry["size"]) for entry in manifest["files"]} == {
        name: (hashlib.sha256(data).hexdigest(), len(data)) for name, data in members.items()}
    assert {name.split("/")[0] for name in members} == {"vault", "revisions"}
    assert [entry["sessionId"] for entry in manifest["conversations"]] == [SESSION]
    everything = exported["archive"].read_bytes() + b"".join(members.values()) + json.dumps(manifest).encode()
    token = exported["token"]
    assert token.encode() not in everything and hash_token(token).encode() not in everything


def test_a_restored_conversation_still_belongs_to_its_agent_and_session_key(exported):
    target = exported["target"]
    with ArchiveReader(exported["archive"]) as reader, Engine(target, watch=False) as engine:
        restore_archive(engine, reader)
        token = engine.add_agent("main", owner=True)
        other = engine.add_agent("other")
        assert engine.get_record(conversation(token, SESSION), exported["ids"]["chat"])["title"] == "Harbour call"
        for caller in (conversation(token, SESSION, key="chat:2"), conversation(other, SESSION)):
            with pytest.raises(Exception) as refused:
                engine.get_record(caller, exported["ids"]["chat"])
            assert getattr(refused.value, "reason", None) in ("denied", "not_found")


def test_restoring_the_same_archive_again_creates_nothing(exported):
    target = exported["target"]
    assert main(["import", "archive", str(exported["archive"]), "--state-dir", str(target.root)]) == 0
    stores, vault = sorted(target.stores.iterdir()), vault_snapshot(vault_of(target))
    with ArchiveReader(exported["archive"]) as reader, Engine(target, watch=False) as engine:
        again = restore_archive(engine, reader)
        assert again["created"] is False and "nothing was created" in again["note"]
        assert len(engine.registry.stores()) == 1
    assert main(["import", "archive", str(exported["archive"]), "--state-dir", str(target.root)]) == 0
    assert sorted(target.stores.iterdir()) == stores and vault_snapshot(vault_of(target)) == vault
    assert vault == vault_snapshot(vault_of(exported["source"]))


def test_a_store_that_exists_with_other_content_is_refused(exported):
    target = exported["target"]
    with ArchiveReader(exported["archive"]) as reader, Engine(target, watch=False) as engine:
        restore_archive(engine, reader)
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        engine.save_page(owner, page("later", "Written after the restore"))
        vault = vault_snapshot(vault_of(target))
        with pytest.raises(Conflict, match="other content"):
            restore_archive(engine, reader)
        assert vault_snapshot(vault_of(target)) == vault


def test_a_name_or_an_agent_store_already_taken_is_refused_and_another_can_be_chosen(exported, tmp_path):
    target = exported["target"]
    with Engine(target, watch=False) as engine:
        token = engine.add_agent("main", owner=True)
        engine.save_page(AgentCaller(token, {"kind": "owner-private"}), page("own", "Own page"))  # main's own store
        with ArchiveReader(exported["archive"]) as reader:
            with pytest.raises(Conflict, match="already has its own store"):
                restore_archive(engine, reader)
            assert len(engine.registry.stores()) == 1 and len(list(target.stores.iterdir())) == 1
            summary = restore_archive(engine, reader, store_name="family")
        assert (summary["kind"], summary["name"], summary["created"]) == ("named", "family", True)
        assert engine.registry.store_named("family").store_id == summary["storeId"]


# --- refusals: nothing written ---------------------------------------------------------------------


def _changed_member(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
    name = next(name for name in members if name.startswith("vault/private/pages/"))
    members[name] = members[name].replace(b"lighthouse", b"LIGHTHOUSE")


def _missing_member(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
    del members[next(name for name in members if name.startswith("revisions/"))]


def _unlisted_member(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
    members["vault/private/pages/people/extra.md"] = b"---\n"


def _wrong_size(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
    manifest["files"][0]["size"] += 1


def _foreign_marker(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
    name = "vault/private/.partition.json"
    members[name] = members[name].replace(b'"identity": "', b'"identity": "x')
    entry = next(entry for entry in manifest["files"] if entry["path"] == name)
    entry.update(sha256=hashlib.sha256(members[name]).hexdigest(), size=len(members[name]))


@pytest.mark.parametrize("change", [_changed_member, _missing_member, _unlisted_member, _wrong_size, _foreign_marker])
def test_a_tampered_archive_is_refused_naming_the_member_with_nothing_written(exported, tmp_path, change, capsys):
    tampered = rewrite(exported["archive"], change, tmp_path / "tampered.zip")
    target = exported["target"]
    assert main(["import", "archive", str(tampered), "--state-dir", str(target.root)]) == 2
    message = capsys.readouterr().err
    assert "tampered.zip (" in message and "nothing was restored" in message
    assert not target.root.exists()


def test_a_truncated_archive_is_refused_with_nothing_written(exported, tmp_path, capsys):
    data = exported["archive"].read_bytes()
    for cut in (len(data) // 2, len(data) - 10):
        truncated = tmp_path / f"cut-{cut}.zip"
        truncated.write_bytes(data[:cut])
        assert main(["import", "archive", str(truncated), "--state-dir", str(exported["target"].root)]) == 2
        assert str(truncated) in capsys.readouterr().err
        assert not exported["target"].root.exists()


def test_a_changed_member_is_refused_even_when_the_target_state_directory_exists(exported, tmp_path):
    target = exported["target"]
    with Engine(target, watch=False) as engine:
        engine.add_agent("main", owner=True)
    before = vault_snapshot(target.root)
    tampered = rewrite(exported["archive"], _changed_member, tmp_path / "tampered.zip")
    with pytest.raises(InvalidParams, match="sha256 does not match") as refused:
        ArchiveReader(tampered)
    assert refused.value.details["member"].startswith("vault/private/pages/")
    assert vault_snapshot(target.root) == before and not target.stores.exists()


@pytest.mark.parametrize("name", ["vault/../../escaped.md", "/tmp/escaped.md", "vault/private/../../../escaped.md",
                                  "vault\\..\\escaped.md", "C:/escaped.md", "vault/./private/x.md"])
def test_a_member_whose_path_escapes_the_store_is_refused(exported, tmp_path, name, capsys):
    data = b"escaped\n"

    def escape(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
        members[name] = data
        listed(manifest, name, data)

    slipped = rewrite(exported["archive"], escape, tmp_path / "slip.zip")
    target = exported["target"]
    assert main(["import", "archive", str(slipped), "--state-dir", str(target.root)]) == 2
    assert "leaves the store" in capsys.readouterr().err
    assert not target.root.exists() and not (tmp_path / "escaped.md").exists()


def test_a_revision_whose_path_escapes_its_partition_is_refused(exported, tmp_path, capsys):
    def escape(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
        manifest["revisions"][0]["path"] = "../../escaped.md"

    slipped = rewrite(exported["archive"], escape, tmp_path / "slip.zip")
    assert main(["import", "archive", str(slipped), "--state-dir", str(exported["target"].root)]) == 2
    assert "leaves its partition" in capsys.readouterr().err
    assert not exported["target"].root.exists()


def test_a_symlink_member_is_refused(exported, tmp_path, capsys):
    name = "vault/private/pages/people/link.md"
    target_path = b"/etc/passwd"

    def link(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
        listed(manifest, name, target_path)

    slipped = rewrite(exported["archive"], link, tmp_path / "link.zip")
    with zipfile.ZipFile(slipped, "a") as archive:
        info = zipfile.ZipInfo(name)
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(info, target_path)
    assert main(["import", "archive", str(slipped), "--state-dir", str(exported["target"].root)]) == 2
    assert "symlink" in capsys.readouterr().err
    assert not exported["target"].root.exists()


def test_a_failure_while_building_leaves_no_store_behind(exported, monkeypatch):
    target = exported["target"]
    with ArchiveReader(exported["archive"]) as reader, Engine(target, watch=False) as engine:
        def broken(vault: Path) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr("engine.importers.archive._history_restorer",
                            lambda engine, reader: (broken, {"restored": False}))
        with pytest.raises(OSError):
            restore_archive(engine, reader)
        assert engine.registry.stores() == [] and list(target.stores.iterdir()) == []


# --- history ---------------------------------------------------------------------------------------


def git_log(vault: Path) -> list[str]:
    env = {**os.environ, "GIT_DIR": str(vault / ".git"), "GIT_WORK_TREE": str(vault)}
    return subprocess.run(["git", "log", "--format=%H %s", "refs/heads/main"], env=env, check=True,
                          capture_output=True, text=True).stdout.splitlines()


@pytest.mark.skipif(shutil.which("git") is None, reason="the history is a git repository: it needs git installed")
def test_the_history_comes_along_when_asked_as_a_bundle_or_the_copied_git_folder(tmp_path):
    source = StateDir(tmp_path / "source")
    with Engine(source, watch=False) as engine:
        owner, ids = seed(engine)
        export_archive(engine, tmp_path / "plain.zip")
        summary = export_archive(engine, tmp_path / "bundle.zip", with_history=True)
    assert summary["history"]["kind"] == "bundle"
    with Engine(source, watch=False, git=False) as engine:  # where git is not installed
        folder = export_archive(engine, tmp_path / "folder.zip", with_history=True)
    assert folder["history"]["kind"] == "git-folder" and "git is not installed" in folder["history"]["note"]
    with zipfile.ZipFile(tmp_path / "plain.zip") as plain:
        assert not [name for name in plain.namelist() if name.startswith("history/")]
    log = git_log(vault_of(source))
    assert len(log) >= 2

    for name in ("bundle", "folder"):
        target = StateDir(tmp_path / f"target-{name}")
        assert main(["import", "archive", str(tmp_path / f"{name}.zip"), "--state-dir", str(target.root)]) == 0
        assert git_log(vault_of(target)) == log
        assert vault_snapshot(vault_of(target)) == vault_snapshot(vault_of(source))
        with Engine(target, watch=False) as engine:  # the restored history takes the next commit
            owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
            engine.save_page(owner, page("after", "After the restore"))
        assert git_log(vault_of(target))[1:] == log


def test_without_git_the_export_says_there_is_no_history_and_a_bundle_is_not_restored(tmp_path, capsys,
                                                                                        monkeypatch):
    source = StateDir(tmp_path / "source")
    with Engine(source, watch=False, git=False) as engine:
        seed(engine)
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no git on this machine
    assert main(["export", str(tmp_path / "store.zip"), "--with-history", "--state-dir", str(source.root)]) == 0
    assert "git is not installed and the vault has no .git folder" in capsys.readouterr().out

    def with_bundle(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
        members[BUNDLE_NAME] = b"# v2 git bundle\n"
        listed(manifest, BUNDLE_NAME, members[BUNDLE_NAME])
        manifest["history"] = {"kind": "bundle"}

    bundled = rewrite(tmp_path / "store.zip", with_bundle, tmp_path / "bundled.zip")
    target = StateDir(tmp_path / "target")
    with ArchiveReader(bundled) as reader, Engine(target, watch=False, git=False) as engine:
        summary = restore_archive(engine, reader)
    assert summary["created"] and not summary["history"]["restored"]
    assert "git is not installed here" in summary["history"]["note"]
    assert not (vault_of(target) / ".git").exists()


@pytest.mark.parametrize("part", ["config", "hooks/post-checkout", "info/exclude"])
def test_a_copied_git_folder_brings_its_history_only_never_a_configuration_or_hooks(exported, tmp_path, part,
                                                                                    capsys):
    name = f"history/.git/{part}"

    def with_folder(members: dict[str, bytes], manifest: dict[str, Any]) -> None:
        for member, data in ((name, b"[core]\n\tfsmonitor = touch /tmp/owned\n"), ("history/.git/HEAD", b"x\n")):
            members[member] = data
            listed(manifest, member, data)
        manifest["history"] = {"kind": "git-folder"}

    crafted = rewrite(exported["archive"], with_folder, tmp_path / "crafted.zip")
    assert main(["import", "archive", str(crafted), "--state-dir", str(exported["target"].root)]) == 2
    assert f"crafted.zip ({name})" in capsys.readouterr().err
    assert not exported["target"].root.exists()


# --- choosing the store; the command line ----------------------------------------------------------


def test_the_store_is_chosen_by_name_id_or_agent(tmp_path):
    state = StateDir(tmp_path / "state")
    with Engine(state, watch=False) as engine:
        token = engine.add_agent("main", owner=True)
        engine.add_agent("helper")
        engine.save_page(AgentCaller(token, {"kind": "owner-private"}), page("p", "Shared page"))
        engine.resolver.share_store("main", "family", others=("helper",))
        family = engine.registry.store_named("family")
        assert export_archive(engine, tmp_path / "a.zip", store="family")["name"] == "family"
        assert export_archive(engine, tmp_path / "b.zip", store=family.store_id)["storeId"] == family.store_id
        assert export_archive(engine, tmp_path / "c.zip", agent="helper")["storeId"] == family.store_id
        with pytest.raises(NotFound):
            export_archive(engine, tmp_path / "d.zip", store="nobody")
        with pytest.raises(InvalidParams):
            export_archive(engine, tmp_path / "d.zip", store="family", agent="main")
        with pytest.raises(Conflict, match="already exists"):
            export_archive(engine, tmp_path / "a.zip", store="family")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zip", "b.zip", "c.zip", "state"]
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        store = json.loads(archive.read(MANIFEST_NAME))["store"]
    assert (store["kind"], store["name"], store["agents"]) == ("named", "family", ["main", "helper"])

    target = StateDir(tmp_path / "target")
    assert main(["import", "archive", str(tmp_path / "a.zip"), "--state-dir", str(target.root), "--json"]) == 0
    with Engine(target, watch=False) as engine:
        assert engine.registry.store_named("family").store_id == family.store_id


def test_export_and_import_refuse_while_an_engine_serves_the_state_directory(exported, capsys):
    source, target = exported["source"], exported["target"]
    for state, argv in ((source, ["export", str(exported["archive"].with_name("again.zip"))]),
                        (target, ["import", "archive", str(exported["archive"])])):
        lock = EngineLock(state)
        lock.acquire()
        try:
            assert main([*argv, "--state-dir", str(state.root)]) == 3
        finally:
            lock.release()
        assert "already owns" in capsys.readouterr().err
    assert not exported["archive"].with_name("again.zip").exists() and not target.stores.exists()


def test_export_of_a_state_directory_that_does_not_exist_writes_nothing(tmp_path, capsys):
    assert main(["export", str(tmp_path / "out.zip"), "--state-dir", str(tmp_path / "none")]) == 2
    assert "no state directory" in capsys.readouterr().err
    assert not (tmp_path / "none").exists() and not (tmp_path / "out.zip").exists()


def test_a_store_of_very_compressible_files_exports_an_archive_it_restores(tmp_path):
    """A retained log of one repeated line compresses far beyond what a restore accepts of a member (and of
    a whole archive): the export stores such a file as it is, so the owner's archive is never refused."""
    source, target = StateDir(tmp_path / "source"), StateDir(tmp_path / "target")
    log = b"2026-12-03 heartbeat ok\n" * 200_000  # 4.8 MB, about 1,000:1 deflated
    with Engine(source, watch=False) as engine:
        owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
        attach(engine, owner, {"requestId": "log-1", "content": base64.b64encode(log).decode(),
                               "filename": "heartbeat.log"})
        export_archive(engine, tmp_path / "store.zip")
    with zipfile.ZipFile(tmp_path / "store.zip") as archive:
        kept = [info for info in archive.infolist() if info.file_size == len(log)]
    assert [info.compress_type for info in kept] == [zipfile.ZIP_STORED]

    assert main(["import", "archive", str(tmp_path / "store.zip"), "--state-dir", str(target.root)]) == 0
    assert vault_snapshot(vault_of(target)) == vault_snapshot(vault_of(source))
