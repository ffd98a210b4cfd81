"""External edits under load: an editor rewrites, renames and deletes vault files while agents write.

    python -m tests.reliability.editors --agents 4 --seconds 60 [--seed N]

A real engine process (``knowledge serve``, its watcher on) serves agents writing pages, page
revisions, claims and attachments, while an editor thread works on the same vault the way people
and their tools do: rewriting a record (atomically through a temp file and rename, or in place),
with or without bumping its revision, renaming a page file, deleting a claim or a page.  Agents
treat ``conflict``, ``stale_revision`` and ``not_found`` as the answers an edited vault deserves
and carry on; any other error is a problem.

Then, with the engine still running, everything must converge:

- exact reads: every record file on disk reads back with the disk's exact bytes, and a record the
  editor deleted reads as not_found;
- search: every marker word ever written (agents' and the editor's) finds exactly the current
  records whose file holds it now;
- no silent overwrite: every version the editor wrote is still on disk, or was replaced by the
  editor itself, or is in the engine's revision history (the engine saw it before anything was
  planned on top of it);
- nothing acknowledged lost: every acknowledged revision reads back exactly from the history;
- no unread overwrite: every acknowledged page revision replaced the version its writer named, by
  ``expectedSha256`` or, by number alone, the first version kept with that number (never an edit
  that kept the number);

and after a clean stop a fresh scan changes nothing and git holds every acknowledged revision.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from engine.vault.records import parse_record
from engine.state.statedir import StateDir

from .checks import blob_id, git
from .harness import (
    Connection, EngineProcess, Supervisor, Writer, agent_specs, machine_line, print_table, register_agents,
)

TOLERATED = {"conflict", "stale_revision", "not_found"}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Editor(threading.Thread):
    """Someone editing the vault by hand: rewrites, renames, deletions, at a steady pace."""

    def __init__(self, vault_roots: list[Path], *, seed: int, pause: float) -> None:
        super().__init__(name="editor", daemon=True)
        self.roots = vault_roots
        self.rng = random.Random(seed)
        self.pause = pause
        self.stop = threading.Event()
        self.counts: Counter[str] = Counter()
        self.last_write: dict[str, str] = {}       # record id -> sha of the editor's last version
        self.replaced: dict[str, set[str]] = {}    # record id -> editor versions someone else replaced
        self.markers: set[str] = set()
        self._n = 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.edit_once()
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                self.counts["edits that lost a race with the engine"] += 1
            self.stop.wait(self.pause)

    def _files(self, kind: str) -> list[Path]:
        return [path for root in self.roots for path in (root / kind).rglob("*.md")
                if not path.name.startswith(".")] if self.roots else []

    def _observe(self, record_id: str, current: bytes) -> None:
        """Before touching a record: if its file no longer holds the editor's last version, someone else
        replaced that version, and the engine must have kept it."""
        mine = self.last_write.get(record_id)
        if mine is not None and sha(current) != mine:
            self.replaced.setdefault(record_id, set()).add(mine)

    def edit_once(self) -> None:
        roll = self.rng.random()
        kind = "pages" if roll < 0.75 else "claims"
        files = self._files(kind)
        if not files:
            return
        path = self.rng.choice(files)
        data = path.read_bytes()
        record, _ = parse_record(data, path.name)
        if record is None or not isinstance(record.id, str):
            return  # half written by an in-place edit of ours: leave it to the next pass
        self._observe(record.id, data)
        if roll < 0.55 or (kind == "claims" and roll < 0.9):
            self._rewrite(path, record.id, data, bump=self.rng.random() < 0.5, in_place=self.rng.random() < 0.3)
        elif roll < 0.7 and kind == "pages":
            target = path.with_name(f"renamed-{self._next()}.md")
            os.rename(path, target)
            self.counts["renames"] += 1
        else:
            path.unlink()
            self.last_write.pop(record.id, None)
            self.counts[f"deletions of {kind}"] += 1

    def _next(self) -> int:
        self._n += 1
        return self._n

    def _rewrite(self, path: Path, record_id: str, data: bytes, *, bump: bool, in_place: bool) -> None:
        head, separator, body = data.partition(b"\n---\n")
        if not separator:
            return
        marker = f"edq{self._next()}x{self.rng.randrange(10**6)}"
        if bump:
            lines = head.split(b"\n")
            lines = [b"revision: %d" % (int(line.split(b":")[1]) + 1) if line.startswith(b"revision:") else line
                     for line in lines]
            head = b"\n".join(lines)
        new = head + separator + body.rstrip(b"\n") + f"\n\nEditor note {marker}.\n".encode()
        if in_place:
            with open(path, "r+b") as handle:
                handle.truncate(0)
                handle.write(new)
        else:
            temp = path.with_name(f".{path.name}.editor")
            temp.write_bytes(new)
            os.replace(temp, path)
        self.markers.add(marker)
        self.last_write[record_id] = sha(new)
        self.counts["rewrites" + (" bumping the revision" if bump else " keeping the revision")] += 1


def _vault_roots(state: StateDir) -> list[Path]:
    roots = []
    for store in state.stores.iterdir() if state.stores.is_dir() else []:
        if store.name.startswith("."):
            continue
        vault = store / "vault"
        roots.append(vault / "private")
        conversations = vault / "conversations"
        if conversations.is_dir():
            roots.extend(p for p in conversations.iterdir() if p.is_dir())
    return roots


def _disk_records(roots: list[Path]) -> dict[Path, dict[str, Any]]:
    """Record files now on disk, per partition root: id -> {path, bytes, record}."""
    found: dict[Path, dict[str, Any]] = {}
    for root in roots:
        records = found.setdefault(root, {})
        for path in root.rglob("*.md"):
            if any(part.startswith(".") for part in path.relative_to(root).parts):
                continue
            data = path.read_bytes()
            record, _ = parse_record(data, path.name)
            if record is not None and isinstance(record.id, str):
                records[record.id] = {"path": str(path.relative_to(root)), "bytes": data, "record": record}
    return found


def run(*, agents: int = 4, seconds: float = 60.0, seed: int = 0, edit_pause: float = 0.02,
        writer_pause: float = 0.0) -> tuple[dict[str, Any], list[str]]:
    scratch = Path(tempfile.mkdtemp(prefix="kd-editors-"))
    state = StateDir(scratch / "state")
    tokens = register_agents(state, max(1, min(agents, 2)))
    specs = agent_specs(tokens, agents)
    supervisor = Supervisor()
    writers = [Writer(spec, supervisor, seed=seed * 1000 + n, pause=writer_pause) for n, spec in enumerate(specs)]
    engine = EngineProcess(state, log=scratch / "engine.log")
    figures: Counter[str] = Counter()
    problems: list[str] = []
    port = engine.start()
    assert port is not None
    try:
        for writer in writers:
            writer.start()
        supervisor.up(port)
        time.sleep(min(2.0, seconds / 4))  # let every partition exist before the editor starts
        editor = Editor(_vault_roots(state), seed=seed, pause=edit_pause)
        editor.start()
        time.sleep(seconds)
        editor.stop.set()
        editor.join()
        for writer in writers:
            writer.halt()
        for writer in writers:
            writer.join(timeout=60)
        supervisor.stop()
        figures.update(editor.counts)
        figures["edits"] = sum(v for k, v in editor.counts.items() if not k.startswith("edits that"))
        figures["writes acknowledged"] = sum(len(w.acks) for w in writers)
        for writer in writers:
            for error in writer.errors:
                figures[f"writes refused: {error['reason']}"] += 1
                if error["reason"] not in TOLERATED:
                    problems.append(f"{writer.spec.name}: unexpected refusal {error['reason']}: {error['message']}")
        time.sleep(1.0)  # the watcher's last events
        _converge(port, writers, editor, state, figures, problems)
    finally:
        supervisor.stop()
        for writer in writers:
            writer.halt()
        engine.stop()
    _after_stop(state, writers, figures, problems)
    logged = (scratch / "engine.log").read_text(encoding="utf-8", errors="replace")
    if "Traceback" in logged:
        problems.append(f"the engine logged a traceback; see {scratch / 'engine.log'}")
    if problems:
        figures["kept for inspection"] = str(scratch)  # type: ignore[assignment]
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return dict(figures), problems


def _converge(port: int, writers: list[Writer], editor: Editor, state: StateDir, figures: Counter[str],
              problems: list[str]) -> None:
    """With the engine still running: exact reads and search agree with the disk."""
    roots = _vault_roots(state)
    disk = _disk_records(roots)
    by_partition: dict[str, Writer] = {}
    for writer in writers:
        key = "private" if writer.spec.audience["kind"] == "owner-private" else writer.spec.audience["sessionId"]
        by_partition.setdefault(f"{writer.spec.credential}/{key}", writer)
    markers = set(editor.markers) | {m for w in writers for ack in w.acks for m in ack.markers.values()}
    for writer in {id(w): w for w in by_partition.values()}.values():
        connection = Connection(port, writer.spec.token, writer.spec.audience)
        try:
            ok, status = connection.tool("knowledge_ontology", {})  # any read: the lane catches up first
            root = _root_of(roots, writer, state)
            records = disk.get(root, {})
            for record_id, entry in records.items():
                ok, body = connection.tool("knowledge_record", {"id": record_id})
                figures["exact reads compared with the disk"] += 1
                if not ok or body.get("sha256") != sha(entry["bytes"]) or body.get("path") != entry["path"]:
                    problems.append(f"exact read of {record_id} does not match the disk: "
                                    f"{body.get('reason') or (body.get('path'), body.get('revision'))} "
                                    f"vs {entry['path']}")
            mine = {written["id"] for w in writers if _root_of(roots, w, state) == root
                    for ack in w.acks for written in ack.receipt.get("records", [])}
            for record_id in mine - set(records):
                ok, body = connection.tool("knowledge_record", {"id": record_id})
                figures["reads of deleted records"] += 1
                if ok:
                    problems.append(f"{record_id} was deleted on disk but still reads as {body.get('path')}")
            for marker in sorted(markers):
                expected = {rid for rid, entry in records.items()
                            if marker.encode() in entry["bytes"] and entry["record"].lifecycle == "active"}
                ok, found = connection.tool("knowledge_grep", {"query": marker, "limit": 20})
                figures["marker searches"] += 1
                got = {hit["id"] for hit in found.get("hits", [])} if ok else None
                if got != expected and not (got is not None and _explained(expected - got, records, connection)):
                    problems.append(f"search for {marker} finds {got}, the disk says {expected}")
            for w in writers:
                if _root_of(roots, w, state) != root:
                    continue
                for ack in w.acks:
                    for written in ack.receipt.get("records", []):
                        ok, body = connection.tool("knowledge_record", {"id": written["id"],
                                                                        "revision": written["revision"]})
                        figures["acknowledged revisions read back"] += 1
                        if not ok:
                            problems.append(f"acknowledged {written['id']} r{written['revision']} is lost: {body}")
        finally:
            connection.close()
    _silent_overwrites(editor, disk, state, figures, problems)
    _unread_overwrites(writers, state, figures, problems)


def _explained(missing: set[str], records: dict[str, dict[str, Any]], connection: Connection) -> bool:
    """A record the search leaves out is fine when it is not current (invalid after a hand edit,
    or a duplicate id): exact reads say why."""
    for record_id in missing:
        ok, body = connection.tool("knowledge_record", {"id": record_id})
        if ok and body.get("status") == "current":
            return False
    return True


def _root_of(roots: list[Path], writer: Writer, state: StateDir) -> Path | None:
    if writer.spec.audience["kind"] == "owner-private":
        wanted = "private"
    else:
        wanted = writer.spec.audience["sessionId"]
    registry = sqlite3.connect(state.registry)
    try:
        row = registry.execute("SELECT store_id FROM bindings WHERE agent = ?", (writer.spec.credential,)).fetchone()
    finally:
        registry.close()
    for root in roots:
        if root.name == wanted and row and row[0] in root.parts:
            return root
    return None


def _silent_overwrites(editor: Editor, disk: dict[Path, dict[str, Any]], state: StateDir, figures: Counter[str],
                       problems: list[str]) -> None:
    """Every editor version replaced by someone else must be in the engine's history."""
    archived: dict[str, set[str]] = {}
    for store in state.stores.iterdir():
        if store.name.startswith("."):
            continue
        with sqlite3.connect(f"file:{store / 'state.sqlite'}?mode=ro", uri=True) as db:
            for record_id, digest in db.execute("SELECT record_id, sha256 FROM revisions"):
                archived.setdefault(record_id, set()).add(digest)
    on_disk = {rid: sha(entry["bytes"]) for records in disk.values() for rid, entry in records.items()}
    replaced = {rid: set(versions) for rid, versions in editor.replaced.items()}
    for record_id, mine in editor.last_write.items():
        if on_disk.get(record_id) not in (None, mine):
            replaced.setdefault(record_id, set()).add(mine)
    for record_id, versions in replaced.items():
        for version in versions:
            figures["editor versions replaced by the engine"] += 1
            if version not in archived.get(record_id, set()):
                problems.append(f"an editor's version of {record_id} was overwritten without the engine keeping it")
                figures["silent overwrites"] += 1
    figures.setdefault("silent overwrites", 0)


def _unread_overwrites(writers: list[Writer], state: StateDir, figures: Counter[str], problems: list[str]) -> None:
    """Every acknowledged page revision was planned on the version its writer named: the one kept with
    ``expectedSha256``, or by number alone the first version kept with that number."""
    revisions = [ack for writer in writers for ack in writer.acks
                 if ack.operation == "knowledge_save_page" and "id" in ack.params]
    for store in state.stores.iterdir():
        if store.name.startswith("."):
            continue
        with sqlite3.connect(f"file:{store / 'state.sqlite'}?mode=ro", uri=True) as db:
            for ack in revisions:
                record_id, number = ack.params["id"], ack.params["expectedRevision"]
                written = db.execute("SELECT seq FROM revisions WHERE record_id = ? AND publication_id = ?",
                                     (record_id, ack.receipt["publicationId"])).fetchone()
                if written is None:
                    continue  # another store's
                kept = [digest for (digest,) in db.execute(
                    "SELECT sha256 FROM revisions WHERE record_id = ? AND revision = ? AND origin != 'sync' "
                    "AND seq < ? ORDER BY seq", (record_id, number, written[0]))]
                named = ack.params.get("expectedSha256") or (kept[0] if kept else None)
                figures["page revisions checked against the version named"] += 1
                if not kept or kept[-1] != named:
                    problems.append(f"revision {number + 1} of {record_id} replaced a version its writer did not "
                                    f"name ({ack.params['requestId']})")
                    figures["unread overwrites"] += 1
    figures.setdefault("unread overwrites", 0)


def _after_stop(state: StateDir, writers: list[Writer], figures: Counter[str], problems: list[str]) -> None:
    """Offline: a fresh scan changes nothing; git holds every acknowledged revision."""
    from engine.service import Engine

    with Engine(state, watch=False) as engine:
        for record in engine.registry.stores():
            runtime = engine.runtime(record)
            for partition in runtime.call(runtime.store.partitions):
                report = runtime.call(lambda: runtime.catalog.sync(partition))
                if report.touched:
                    problems.append(f"a fresh scan of {partition} changed the catalog: {report.changed[:3]}")
            if runtime.checkpoint()["state"] != "committed":
                problems.append("git did not commit")
                continue
            reachable = {line.split(" ", 1)[0] for line in
                         git(runtime.store.vault, "rev-list", "--objects", "refs/heads/main").splitlines()}
            rows = runtime.call(lambda: runtime.store.db.all(
                "SELECT record_id, revision, content FROM revisions WHERE origin = 'publication'"))
            published = {(row["record_id"], row["revision"]): bytes(row["content"]) for row in rows}
            for writer in writers:
                for ack in writer.acks:
                    for written in ack.receipt.get("records", []):
                        data = published.get((written["id"], written["revision"]))
                        if data is None:
                            continue  # another store's
                        figures["git blobs checked"] += 1
                        if blob_id(data) not in reachable:
                            problems.append(f"{written['id']} r{written['revision']} is not in git history")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--edit-pause", type=float, default=0.02, help="seconds between the editor's edits")
    args = parser.parse_args(argv)
    print(f"editors: {args.agents} agents, {args.seconds:.0f} s, seed {args.seed}; {machine_line()}")
    figures, problems = run(agents=args.agents, seconds=args.seconds, seed=args.seed, edit_pause=args.edit_pause)
    print_table(sorted(figures.items()))
    for problem in problems[:50]:
        print("PROBLEM:", problem)
    if len(problems) > 50:
        print(f"... and {len(problems) - 50} more")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
