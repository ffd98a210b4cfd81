"""Installing a merge on a real store: the plans ``plan_sync`` builds, published together, leave the vault
exactly the merged files, the catalog and search see the records, conflicts are listed and the version that
does not stand is readable through the revision archive; an invalid incoming record refuses everything."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from engine.access.authority import AgentCaller
from engine.core.db import Database
from engine.importers.archive import ArchiveReader, export_archive, restore_archive
from tests.engine.importers.test_archive import RECIPE_ONTOLOGY as RECIPE_TEXT
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.store.githistory import CommitFile
from engine.store.store import STATE_MIGRATIONS
from engine.sync.install import dismiss_conflict, plan_sync, record_conflicts, waiting_conflicts
from engine.sync.merge import is_synced, merge_vaults
from engine.sync.transport import SyncRefused
from engine.vault.records import RECORD_FORMAT, Record, parse_record
from tests.engine.store.test_publication_removals import runtime_of
from tests.engine.sync.records import CONVERSATION, record, revised
from tests.helpers import only_store, page

SESSION = CONVERSATION.split("/", 1)[1]
NEW_PRIVATE = "pg_01JNEWPR1VATEPAGE00000000A"
NEW_CHAT = "pg_01JNEWCHATPAGE00000000000B"
RECIPE_ONTOLOGY = RECIPE_TEXT.encode("utf-8")


def vault_state(vault: Path) -> dict[str, bytes]:
    """The synced files of a vault, as the merge reads a side."""
    state = {}
    for path in vault.rglob("*"):
        relpath = path.relative_to(vault).as_posix()
        if path.is_file() and not relpath.startswith(".git/") and is_synced(relpath):
            state[relpath] = path.read_bytes()
    return state


def scoped(data: bytes, scope: str) -> bytes:
    parsed, _ = parse_record(data, "x.md")
    return Record({**parsed.frontmatter, "scope": scope}, parsed.body).render()


@pytest.fixture
def three_pages(engine: Engine, owner: AgentCaller, state_dir: StateDir) -> dict[str, str]:
    """Alpha, Bravo and Charlie saved by the engine; their vault paths by title."""
    paths = {}
    for title in ("Alpha", "Bravo", "Charlie"):
        saved = engine.save_page(owner, page(f"p-{title}", title, body=f"{title} body."))
        paths[title] = "private/" + engine.get_record(owner, saved["records"][0]["id"])["path"]
    checkpoint = runtime_of(engine).checkpoint()
    assert checkpoint["state"] == "committed", checkpoint
    return paths


def test_a_merge_is_installed_byte_for_byte_and_the_catalog_and_search_see_it(engine, owner, state_dir, three_pages):
    runtime = runtime_of(engine)
    vault = only_store(state_dir) / "vault"
    base = vault_state(vault)
    # This machine revised Charlie twice (by hand, as an editor would).
    charlie = three_pages["Charlie"]
    ours_charlie = revised(revised(base[charlie], body="Charlie, as this machine wrote him."))
    (vault / charlie).write_bytes(ours_charlie)
    ours = vault_state(vault)
    # The other machine: Alpha removed, Bravo revised, Charlie revised once, a new record in each partition,
    # an ontology extension.
    theirs = dict(base)
    del theirs[three_pages["Alpha"]]
    theirs[three_pages["Bravo"]] = revised(base[three_pages["Bravo"]], body="Bravo, revised elsewhere.")
    theirs_charlie = revised(base[charlie], body="Charlie, as the other machine wrote him.")
    theirs[charlie] = theirs_charlie
    theirs["private/pages/people/delta.md"] = record(NEW_PRIVATE, title="Delta", body="Delta arrived by sync.")
    theirs[f"{CONVERSATION}/pages/echo.md"] = scoped(
        record(NEW_CHAT, title="Echo", body="Echo lives in a conversation."), f"conversation:{SESSION}")
    theirs["ontology.yaml"] = RECIPE_ONTOLOGY
    merged = merge_vaults(base, ours, theirs)
    assert [conflict.kind for conflict in merged.conflicts] == ["revised_on_both"]

    plans = runtime.call(lambda: (runtime.prepare("private"), plan_sync(runtime.store, ours, merged, None))[1])
    assert [plan.partition for plan in plans.plans] == [f"conversation:{SESSION}", "private"]
    assert plans.removed == [three_pages["Alpha"]]
    assert all(plan.operation == "sync" and plan.agent is None and plan.request_id is None for plan in plans.plans)
    outcomes = runtime.call(lambda: runtime.publisher.publish_together(plans.plans))
    assert not [outcome for outcome in outcomes if isinstance(outcome, Exception)]
    conflicts = runtime.call(lambda: record_conflicts(runtime.store.db, merged.conflicts, remote="nas",
                                                      machine="mc_other"))

    assert vault_state(vault) == merged.files  # byte for byte, nothing more, nothing less
    found = {hit["id"] for hit in engine.search(owner, {"query": "delta arrived"})["hits"]}
    assert NEW_PRIVATE in found
    bravo = engine.get_record(owner, parse_record(merged.files[three_pages["Bravo"]], "b.md")[0].id)
    assert "Bravo, revised elsewhere." in bravo["body"] and bravo["revision"] == 2
    alpha_id = parse_record(base[three_pages["Alpha"]], "a.md")[0].id
    assert alpha_id not in {hit["id"] for hit in engine.search(owner, {"query": "alpha"})["hits"]}
    rows = runtime.call(lambda: runtime.store.db.tuples(
        "SELECT partition, record_id FROM catalog WHERE record_id IN (?, ?, ?)", (NEW_PRIVATE, NEW_CHAT, alpha_id)))
    assert sorted(rows) == sorted([("private", NEW_PRIVATE), (f"conversation:{SESSION}", NEW_CHAT)])
    # The ontology came along: the private partition now knows the recipe type.
    assert "recipe" in runtime.call(lambda: runtime.store.ontology("private")).page_types

    # The conflict: this machine's revision 3 stands; the other machine's revision 2 is archived and readable.
    [conflict] = conflicts
    charlie_id = parse_record(ours_charlie, "c.md")[0].id
    assert conflict["recordId"] == charlie_id and conflict["partition"] == "private"
    assert conflict["standing"]["revision"] == 3 and conflict["other"]["revision"] == 2
    assert "as the other machine wrote him" in conflict["diff"] and conflict["remote"] == "nas"
    kept = engine.get_record(owner, charlie_id, revision=2)
    assert "Charlie, as the other machine wrote him." in kept["body"]
    history = engine.history(owner, charlie_id)
    assert [(entry["revision"], entry["origin"]) for entry in history["revisions"]][-2:] == [(2, "sync"), (3, "external")]
    assert engine.get_record(owner, charlie_id)["revision"] == 3
    assert runtime.call(lambda: waiting_conflicts(runtime.store.db)) == conflicts
    assert runtime.call(lambda: dismiss_conflict(runtime.store.db, conflict["id"], "2026-12-04T00:00:00Z"))
    assert runtime.call(lambda: waiting_conflicts(runtime.store.db)) == []

    # The checkpoint commits the whole install, the removal as a removal.
    checkpoint = runtime.checkpoint()
    assert checkpoint["state"] == "committed"
    tree = runtime.git.tree(checkpoint["commit"])
    blobs = runtime.git.read_blobs(tree.values())
    committed = {path: blobs[blob] for path, blob in tree.items() if is_synced(path)}
    # Charlie's revision 3 was this machine's hand edit: an outside edit the round commits, not the install.
    assert committed == {**merged.files, charlie: base[charlie]}
    with runtime._git_lock:  # as a round holds it: the index is git's, one writer at a time
        assert runtime.call(runtime.git.outside_changes) == ([CommitFile(charlie, ours_charlie)], [])


def test_an_invalid_incoming_record_refuses_the_round_and_changes_nothing(engine, owner, state_dir, three_pages):
    runtime = runtime_of(engine)
    vault = only_store(state_dir) / "vault"
    base = vault_state(vault)
    theirs = dict(base)
    theirs[three_pages["Bravo"]] = revised(base[three_pages["Bravo"]], body="A fine revision.")
    theirs["private/pages/people/broken.md"] = b"---\nid: [unclosed\n---\nbody\n"
    merged = merge_vaults(base, base, theirs)
    with pytest.raises(SyncRefused) as refused:
        runtime.call(lambda: plan_sync(runtime.store, base, merged, None))
    assert refused.value.finding.code == "invalid_record"
    assert refused.value.finding.path == "private/pages/people/broken.md"
    assert vault_state(vault) == base


@pytest.mark.parametrize("path, data, code", ids=["scope", "size", "id", "ontology", "ontology-utf8"], argvalues=[
    (f"{CONVERSATION}/pages/wrong.md", record(NEW_PRIVATE, title="Wrong"), "invalid_record"),  # scope: private
    ("private/pages/people/big.md", record(NEW_PRIVATE) + b"x" * 5_000_001, "too_large"),
    ("private/pages/people/noid.md", Record({"format": RECORD_FORMAT, "id": "not an id", "revision": 1,
                                             "kind": "page", "title": "N", "scope": "private"}, "b").render(),
     "invalid_record"),
    ("ontology.yaml", b"format: knowledge-ontology-v1\npage_types: [not, a, mapping]\n", "invalid_ontology"),
    ("ontology.yaml", b"\xff\xfe", "invalid_ontology"),
])
def test_incoming_files_are_checked_as_the_engine_reads_them(engine, owner, state_dir, three_pages, path, data,
                                                              code):
    runtime = runtime_of(engine)
    base = vault_state(only_store(state_dir) / "vault")
    merged = merge_vaults(base, base, {**base, path: data})
    with pytest.raises(SyncRefused) as refused:
        runtime.call(lambda: plan_sync(runtime.store, base, merged, None))
    assert refused.value.finding.code == code and refused.value.finding.path == path


def test_a_merge_that_changes_nothing_plans_nothing(engine, owner, state_dir, three_pages):
    runtime = runtime_of(engine)
    base = vault_state(only_store(state_dir) / "vault")
    plans = runtime.call(lambda: plan_sync(runtime.store, base, merge_vaults(base, base, base), None))
    assert plans.empty and plans.written == [] and plans.removed == []


def test_plans_name_blobs_through_load_and_read_only_what_changed(engine, owner, state_dir, three_pages):
    runtime = runtime_of(engine)
    base = vault_state(only_store(state_dir) / "vault")
    blobs = {f"blob-{index}": data for index, data in enumerate(base.values())}
    ids = {path: f"blob-{index}" for index, path in enumerate(base)}
    bravo = three_pages["Bravo"]
    blobs["blob-new"] = revised(base[bravo], body="Bravo again.")
    read = []
    merged = merge_vaults(ids, ids, {**ids, bravo: "blob-new"}, load=lambda blob: (read.append(blob), blobs[blob])[1])
    read.clear()
    plans = runtime.call(lambda: plan_sync(runtime.store, ids, merged,
                                           lambda blob: (read.append(blob), blobs[blob])[1]))
    assert plans.written == [bravo]
    assert sorted(read) == sorted(["blob-new", ids[bravo]])


def test_migrations_keep_every_revision_and_publication_file(tmp_path):
    """A store made before sync: the rebuilt tables keep every row, their seq and their index."""
    path = tmp_path / "state.sqlite"
    before = [migration for migration in STATE_MIGRATIONS if migration[0] < "0007"]
    old = Database.open(path, create=True, migrations=before)
    old.execute("INSERT INTO publications (id, partition, operation, request_hash, state, receipt, created_at) "
                "VALUES ('pub_1', 'private', 'save_page', 'h', 'applied', '{}', 'now')")
    old.execute("INSERT INTO publication_files VALUES (1, 0, 'a.md', 'record', 'pg_1', 1, 's', x'61', NULL, NULL)")
    for seq in (5, 9):
        old.execute("INSERT INTO revisions (seq, partition, record_id, revision, sha256, content, path, origin, "
                    "observed_at) VALUES (?, 'private', 'pg_1', ?, ?, x'62', 'a.md', 'publication', 'now')",
                    (seq, seq, f"sha{seq}"))
    old.close()
    migrated = Database.open(path, create=False, migrations=STATE_MIGRATIONS)
    assert migrated.tuples("SELECT seq, revision, origin FROM revisions ORDER BY seq") == [
        (5, 5, "publication"), (9, 9, "publication")]
    assert migrated.tuples("SELECT path, new_bytes, removes FROM publication_files") == [("a.md", b"a", 0)]
    migrated.execute("INSERT INTO revisions (partition, record_id, revision, sha256, content, path, origin, "
                     "observed_at) VALUES ('private', 'pg_1', 10, 'sha10', x'63', 'a.md', 'sync', 'now')")
    assert migrated.tuples("SELECT MAX(seq) FROM revisions") == [(10,)]
    with pytest.raises(sqlite3.IntegrityError):  # the unique index came back
        migrated.execute("INSERT INTO revisions (partition, record_id, revision, sha256, content, path, origin, "
                         "observed_at) VALUES ('private', 'pg_1', 10, 'sha10', x'63', 'a.md', 'sync', 'now')")
    with pytest.raises(sqlite3.IntegrityError):  # a removal journals the bytes it removes
        migrated.execute("INSERT INTO publication_files (publication_seq, ordinal, path, role, removes) "
                         "VALUES (1, 1, 'b.md', 'record', 1)")
    migrated.close()
    assert os.path.exists(path)


def test_a_version_kept_by_sync_travels_in_an_export_and_is_restored(tmp_path, engine, owner, state_dir, three_pages):
    runtime = runtime_of(engine)
    vault = only_store(state_dir) / "vault"
    base = vault_state(vault)
    charlie = three_pages["Charlie"]
    (vault / charlie).write_bytes(revised(revised(base[charlie], body="Ours.")))
    ours = vault_state(vault)
    merged = merge_vaults(base, ours, {**base, charlie: revised(base[charlie], body="Theirs.")})
    runtime.call(lambda: (runtime.prepare("private"),
                          record_conflicts(runtime.store.db, merged.conflicts, remote="nas", machine="mc_other")))
    charlie_id = parse_record(ours[charlie], "c.md")[0].id
    before = [(entry["revision"], entry["origin"]) for entry in engine.history(owner, charlie_id)["revisions"]]
    assert (2, "sync") in before
    export_archive(engine, tmp_path / "store.zip")
    target = StateDir(tmp_path / "target")
    with ArchiveReader(tmp_path / "store.zip") as reader, Engine(target, watch=False) as restored:
        restore_archive(restored, reader)
        token = restored.add_agent("main", owner=True)
        caller = AgentCaller(token, {"kind": "owner-private"})
        after = [(entry["revision"], entry["origin"]) for entry in restored.history(caller, charlie_id)["revisions"]]
        assert after == before
        assert "Theirs." in restored.get_record(caller, charlie_id, revision=2)["body"]


def test_removing_the_ontology_is_planned_with_the_private_partition(engine, owner, state_dir, three_pages):
    runtime = runtime_of(engine)
    vault = only_store(state_dir) / "vault"
    (vault / "ontology.yaml").write_bytes(RECIPE_ONTOLOGY)
    ours = vault_state(vault)
    theirs = {path: data for path, data in ours.items() if path != "ontology.yaml"}
    merged = merge_vaults(ours, ours, theirs)
    plans = runtime.call(lambda: plan_sync(runtime.store, ours, merged, None))
    [plan] = plans.plans
    assert plan.partition == "private" and plans.removed == ["ontology.yaml"]
    [write] = plan.writes
    assert (write.path, write.role, write.removes, write.base) == ("ontology.yaml", "ontology", True, RECIPE_ONTOLOGY)
    [outcome] = runtime.call(lambda: runtime.publisher.publish_together(plans.plans))
    assert not isinstance(outcome, Exception)
    assert not (vault / "ontology.yaml").exists()
    assert vault_state(vault) == merged.files
    checkpoint = runtime.checkpoint()
    assert "ontology.yaml" not in runtime.git.tree(checkpoint["commit"])


def test_every_kind_of_conflict_is_listed_and_only_a_record_version_is_archived():
    db = Database.open(None, create=True, migrations=STATE_MIGRATIONS)
    first, second = "pg_01JFIRSTPAGE0000000000000A", "pg_01JSECONDPAGE000000000000B"
    base = {"private/pages/a.md": record(first), "private/pages/b.md": record(second),
            "private/sources/notes.txt": b"base notes\n"}
    ours = {"private/pages/a.md": revised(base["private/pages/a.md"], body="ours"),
            "private/sources/notes.txt": b"our notes\n"}
    theirs = {**base, "private/pages/a.md": revised(base["private/pages/a.md"], body="theirs"),
              "private/pages/b.md": revised(base["private/pages/b.md"], body="revised there"),
              "private/sources/notes.txt": b"their notes\n"}
    merged = merge_vaults(base, ours, theirs)
    listed = record_conflicts(db, merged.conflicts, remote="nas", machine="mc_other")
    kinds = sorted((entry["kind"], entry["recordId"] or "") for entry in listed)
    assert kinds == [("removed_and_revised", second), ("revised_on_both", ""), ("revised_on_both", first)]
    removed = next(entry for entry in listed if entry["kind"] == "removed_and_revised")
    assert removed["other"] is None and removed["standing"]["revision"] == 2
    archived = db.tuples("SELECT record_id, revision, origin, path FROM revisions")
    [record_conflict] = [c for c in merged.conflicts if c.record_id == first]
    assert archived == [(first, 2, "sync", record_conflict.other.path.removeprefix("private/"))]
    assert waiting_conflicts(db) == sorted(listed, key=lambda entry: (entry["at"], entry["id"]))
    assert dismiss_conflict(db, "sc_unknown", "2026-12-04T00:00:00Z") is None
