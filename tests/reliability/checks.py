"""The promises a harness checks once the engine is down: nothing acknowledged lost, nothing half written.

``verify`` opens the state directory in-process (the engine process is gone) and checks every
acknowledged receipt against the four places a write lives:

- the vault: every acknowledged revision reads back exactly, with the text it was written with, and
  no file on disk is a torn or invalid record; a revision newer than the last acknowledged one, or a
  record nobody was told about, is only allowed for a request still in flight when the engine died;
- the catalog: after recovery, a fresh walk of every partition changes nothing;
- the search index: every acknowledged revision that is current is found by its marker word, and
  no revision that is not current is found (and the index holds exactly the current records);
- git: after a checkpoint (``knowledge_resume``) ``git status`` is clean and every acknowledged
  revision's exact bytes are in the history.

It returns figures and a list of problems; a harness fails when the list is not empty.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from engine.access.authority import AgentCaller
from engine.core.errors import KnowledgeError
from engine.vault.evidence import SOURCES_DIR
from engine.vault.records import check_record, parse_record
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.store.store import partition_dir

from .harness import Ack, Writer


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()


def git(vault: Path, *args: str) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update({"GIT_DIR": str(vault / ".git"), "GIT_WORK_TREE": str(vault), "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull})
    return subprocess.run(["git", *args], env=env, cwd=vault, capture_output=True, text=True, check=True).stdout


def disk_records(root: Path, ontology: Any, problems: list[str]) -> dict[str, dict[str, Any]]:
    """Every record file of a partition, parsed: id -> {revision, lifecycle, body, path}.  Torn or
    invalid files are problems; hidden temp files of interrupted writes are counted by the caller."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(root.rglob("*.md")):
        relpath = str(path.relative_to(root))
        if any(part.startswith(".") for part in path.relative_to(root).parts) or relpath.startswith(f"{SOURCES_DIR}/"):
            continue  # a retained original may be Markdown too (a page's file, an imported note): not a record
        record, findings = parse_record(path.read_bytes(), relpath)
        if record is None:
            problems.append(f"{root.name}/{relpath} does not parse: {findings}")
            continue
        errors = [f for f in check_record(record, ontology, relpath) if f.severity == "error"]
        if errors:
            problems.append(f"{root.name}/{relpath} is not a valid record: {errors}")
        if record.id in found:
            problems.append(f"two files hold {record.id}: {found[record.id]['path']} and {relpath}")
        found[record.id] = {"revision": record.revision, "lifecycle": record.lifecycle, "body": record.body,
                            "path": relpath}
    return found


def temp_files(root: Path, store: Path) -> list[Path]:
    """Temp files of atomic writes beside their targets under ``root`` (a partition's folder), and in ``store``'s
    staging folder."""
    return [*root.rglob(".*.tmp"), *(store / "staging").glob("*.tmp")]


def verify(state: StateDir, writers: Iterable[Writer], *, git_expected: bool = True,
           explained: Iterable[str] = ()) -> tuple[dict[str, int], list[str]]:
    """``explained``: ids of records that others wrote (another machine's agents, through sync), which are
    no request in flight here but no mystery either."""
    writers = list(writers)
    figures: Counter[str] = Counter()
    problems: list[str] = []
    acks: list[Ack] = [ack for writer in writers for ack in writer.acks]
    figures["writes acknowledged"] = len(acks)
    figures["writes in flight at the end"] = sum(1 for w in writers if w.in_flight is not None)
    markers: dict[tuple[str, int], str] = {}
    for ack in acks:
        markers.update(ack.markers)

    with Engine(state, watch=True) as engine:
        # --- recovery, then the catalog: a fresh walk changes nothing ---------------------------------
        runtimes = {}
        for record in engine.registry.stores():
            runtime = engine.runtime(record)  # recovery runs here, before anything reads
            runtimes[record.store_id] = runtime
            figures["publications recovered at the end"] += len(runtime.recovered)
            for partition in runtime.call(runtime.store.partitions):
                report = runtime.call(lambda: runtime.catalog.sync(partition))
                figures["partitions walked"] += 1
                if report.touched:
                    problems.append(f"a fresh scan of {record.store_id}/{partition} changed the catalog: "
                                    f"{report.changed[:5]} {report.removed[:5]}")

        # --- each writer's partition: the disk, every acknowledged revision, the index ---------------
        seen_partitions: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        for writer in writers:
            caller = AgentCaller(writer.spec.token, writer.spec.audience)
            authority = engine.authorizer.authorize(caller, create=False)
            store = authority.store
            assert store is not None
            key = (store.store_id, authority.partition)
            root = store.path / "vault" / partition_dir(authority.partition)
            if key not in seen_partitions:
                seen_partitions[key] = disk_records(root, engine.ontology, problems)
                leftovers = temp_files(root, store.path)
                figures["temp files of interrupted writes left"] += len(leftovers)
                figures["record files checked whole"] += len(seen_partitions[key])
            disk = seen_partitions[key]
            _check_writer(engine, caller, writer, disk, root, markers, figures, problems)
        _check_unexplained(writers, engine, seen_partitions, problems, figures, set(explained))

        for (store_id, partition), _ in seen_partitions.items():
            runtime = runtimes[store_id]
            current, documents = runtime.call(lambda: _index_counts(runtime, partition))
            figures["index documents compared"] += documents
            if current != documents:
                problems.append(f"{store_id}/{partition}: the index holds {documents} documents for {current} "
                                "current records")

        # --- the journal and the manifest ----------------------------------------------------------------
        for store_id, runtime in runtimes.items():
            pending = runtime.call(runtime.store.pending_publications)
            manifest = json.loads((runtime.store.root / "vault.json").read_text(encoding="utf-8"))
            applied = runtime.call(runtime.store.applied_checkpoint)
            if pending:
                problems.append(f"{store_id}: publications still journaled after recovery: {pending}")
            if manifest["checkpoint"] != applied:
                problems.append(f"{store_id}: manifest checkpoint {manifest['checkpoint']} != applied {applied}")

        # --- git: a checkpoint, then a clean status and every acknowledged revision in history ------------
        if git_expected and engine.git_executable:
            for store_id, runtime in runtimes.items():
                _check_git(runtime, acks, writers, engine, figures, problems)
    return dict(figures), problems


def _retained(ack: Ack) -> list[dict[str, Any]]:
    """The files an acknowledged write retained: an attachment's source, or those a page retained with it."""
    return [ack.receipt["source"]] if ack.operation == "knowledge_attach" else ack.receipt.get("sources", [])


def _check_writer(engine: Engine, caller: AgentCaller, writer: Writer, disk: dict[str, dict[str, Any]],
                  root: Path, markers: dict[tuple[str, int], str], figures: Counter[str],
                  problems: list[str]) -> None:
    newest: dict[str, int] = {}
    for ack in writer.acks:
        for source in _retained(ack):
            path = root / source["retainedPath"]
            if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != source["sha256"]:
                problems.append(f"{writer.spec.name}: acknowledged attachment {source['id']} is missing or changed")
            figures["attachments checked"] += 1
        if ack.operation == "knowledge_attach":
            continue
        for written in ack.receipt["records"]:
            record_id, revision = written["id"], written["revision"]
            newest[record_id] = max(newest.get(record_id, 0), revision)
            try:
                record = engine.get_record(caller, record_id, revision)
            except KnowledgeError as exc:
                problems.append(f"{writer.spec.name}: acknowledged {record_id} r{revision} is unreadable: "
                                f"{exc.reason} {exc.message}")
                continue
            figures["acknowledged revisions read back"] += 1
            marker = _marker_of(markers, record_id, revision)
            if record.get("revision") != revision or (marker and marker not in (record.get("body") or "")):
                problems.append(f"{writer.spec.name}: {record_id} r{revision} reads back as something else")
    for record_id, revision in newest.items():
        on_disk = disk.get(record_id)
        if on_disk is None:
            problems.append(f"{writer.spec.name}: acknowledged {record_id} has no file on disk")
            continue
        if on_disk["revision"] < revision:
            problems.append(f"{writer.spec.name}: {record_id} is at r{on_disk['revision']} on disk, "
                            f"r{revision} was acknowledged")
        elif on_disk["revision"] > revision and not _in_flight_touches(writer, record_id):
            problems.append(f"{writer.spec.name}: {record_id} is at r{on_disk['revision']}, newer than any "
                            f"acknowledged r{revision}, and no request of this agent was in flight for it")
    # The index: each acknowledged revision found by its marker exactly when it is current.
    for (record_id, revision), marker in markers.items():
        if record_id not in newest:
            continue
        on_disk = disk.get(record_id) or {}
        current = on_disk.get("revision") == revision and on_disk.get("lifecycle") == "active"
        try:
            hits = engine.search(caller, {"query": marker, "limit": 5})["hits"]
        except KnowledgeError as exc:
            problems.append(f"{writer.spec.name}: search failed: {exc.reason} {exc.message}")
            continue
        figures["marker searches"] += 1
        found = [hit for hit in hits if hit["id"] == record_id]
        if current and not any(hit["revision"] == revision for hit in found):
            problems.append(f"{writer.spec.name}: current {record_id} r{revision} is not found by its marker")
        if not current and found:
            problems.append(f"{writer.spec.name}: {record_id} r{revision} is not current but search finds "
                            f"{[(h['id'], h['revision']) for h in found]}")


def _marker_of(markers: dict[tuple[str, int], str], record_id: str, revision: int) -> str | None:
    """The marker a revision's body holds: its own, or (a superseded claim) its previous revision's."""
    for candidate in range(revision, 0, -1):
        if (record_id, candidate) in markers:
            return markers[(record_id, candidate)]
    return None


def _in_flight_touches(writer: Writer, record_id: str) -> bool:
    if writer.in_flight is None:
        return False
    _, params, _ = writer.in_flight
    items = params.get("items") or [{}]
    return params.get("id") == record_id or items[0].get("replaces") == record_id


def _check_unexplained(writers: list[Writer], engine: Engine,
                       partitions: dict[tuple[str, str], dict[str, dict[str, Any]]], problems: list[str],
                       figures: Counter[str], explained: set[str]) -> None:
    """Records on disk that no receipt named: each must come from a request in flight at the end."""
    acknowledged = explained | {written["id"] for w in writers for ack in w.acks
                                for written in ack.receipt.get("records", [])}
    by_partition: Counter[tuple[str, str]] = Counter()
    for writer in writers:
        if writer.in_flight is not None and writer.in_flight[0] != "knowledge_attach":
            authority = engine.authorizer.authorize(AgentCaller(writer.spec.token, writer.spec.audience),
                                                    create=False)
            by_partition[(authority.store.store_id, authority.partition)] += 1  # type: ignore[union-attr]
    for key, disk in partitions.items():
        unexplained = [record_id for record_id in disk if record_id not in acknowledged]
        figures["unacknowledged writes that landed"] += len(unexplained)
        if len(unexplained) > by_partition[key]:
            problems.append(f"{key}: {len(unexplained)} records nobody was told about, but only "
                            f"{by_partition[key]} requests were in flight: {unexplained[:5]}")


def _index_counts(runtime: Any, partition: str) -> tuple[int, int]:
    runtime.indexes.catch_up(partition)
    return runtime.catalog.current_count(partition), runtime.indexes.get(partition).searcher().num_docs


def _check_git(runtime: Any, acks: list[Ack], writers: list[Writer], engine: Engine, figures: Counter[str],
               problems: list[str]) -> None:
    store_id = runtime.store_id
    result = runtime.checkpoint()
    if result["state"] != "committed":
        problems.append(f"{store_id}: git checkpoint did not commit: {result}")
        return
    vault = runtime.store.vault
    status = git(vault, "status", "--porcelain", "--untracked-files=all")
    if status:
        problems.append(f"{store_id}: git status is not clean after resume:\n{status[:2000]}")
    reachable = {line.split(" ", 1)[0] for line in git(vault, "rev-list", "--objects", "refs/heads/main").splitlines()}
    for writer in writers:
        caller = AgentCaller(writer.spec.token, writer.spec.audience)
        authority = engine.authorizer.authorize(caller, create=False)
        if authority.store is None or authority.store.store_id != store_id:
            continue
        root = vault / partition_dir(authority.partition)
        for ack in writer.acks:
            for source in _retained(ack):
                figures["git blobs checked"] += 1
                if blob_id((root / source["retainedPath"]).read_bytes()) not in reachable:
                    problems.append(f"{store_id}: attachment {source['id']} is not in git history")
            if ack.operation == "knowledge_attach":
                continue
            for written in ack.receipt["records"]:
                row = runtime.call(lambda: runtime.store.db.one(
                    "SELECT content FROM revisions WHERE partition = ? AND record_id = ? AND revision = ? "
                    "AND origin = 'publication'", (authority.partition, written["id"], written["revision"])))
                figures["git blobs checked"] += 1
                if row is None or blob_id(bytes(row["content"])) not in reachable:
                    problems.append(f"{store_id}: {written['id']} r{written['revision']} is not in git history")
