"""Running an importer in-process as ``knowledge import`` does, on fixture files the tests write."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Callable

from engine.access.authority import AgentCaller, OperatorCaller
from engine.cli.import_commands import IMPORTERS
from engine.importers.common import Progress, Writer, import_instance, owner_caller
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.helpers import only_store, vault_snapshot


def write_vault(root: Path, notes: dict[str, str]) -> Path:
    """A folder of notes at ``root``: each path (folders made as needed) holding its text and a final newline."""
    for path, text in notes.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text + "\n", encoding="utf-8")
    return root


def run_import(engine: Engine, format_name: str, path: Path, *, dry_run: bool = False,
               progress: Callable[[Progress], None] | None = None, replace_edits: bool = False) -> dict[str, Any]:
    load, run, _, _ = IMPORTERS[format_name]
    plan = load(str(path), engine.refuse_secrets)
    if dry_run:  # as the engine's own dry run: reading (as the operator) what an earlier import made
        return run(Writer(engine, OperatorCaller("main"), format_name, dry_run=True, progress=progress,
                          replace_edits=replace_edits), *plan)
    with owner_caller(engine, instance=import_instance(format_name)) as (caller, _):
        return run(Writer(engine, caller, format_name, progress=progress, replace_edits=replace_edits), *plan)


def same_but_reused(again: dict[str, Any], first: dict[str, Any]) -> bool:
    """Whether a rerun answered what ``first`` did, every record it stands for now one an earlier run made."""
    return {**again, "reused": first["reused"]} == first and again["reused"] == first["imported"]


def imported_page(engine: Engine, tmp_path: Path, format_name: str, data: list[dict[str, Any]],
                  key: str) -> dict[str, Any]:
    """The page an import of ``data`` (as the export's conversations.json) made of conversation ``key``."""
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = run_import(engine, format_name, path)
    return engine.get_record(reader(engine), result["pages"][key])


def reader(engine: Engine) -> AgentCaller:
    """A caller of the main agent (registered by the import) for reading what it wrote."""
    return AgentCaller(engine.registry.add_credential("main"), {"kind": "owner-private"})


def records(state: StateDir, folder: str = "") -> dict[str, str]:
    """The private partition's files (path: sha256), optionally only those under ``folder``."""
    vault = only_store(state) / "vault"
    return {path: digest for path, digest in vault_snapshot(vault).items()
            if path.startswith(f"private/{folder}")}


def store_snapshot(state: StateDir) -> dict[str, str]:
    return vault_snapshot(only_store(state) / "vault")


def state_snapshot(state: StateDir) -> dict[str, Any]:
    """The store's files, the records its catalog holds, the rows of its publication journal (publications and
    their receipts, revisions, sources) and every row of the registry (agents, credentials): what a dry run
    must leave as it found it.  Left out: what the engine changes in the background after a write (the search
    index's ledger, the git outbox, the catalog's file stats, the journal's file bytes, dropped once
    committed)."""
    rows: dict[str, dict[str, list[str]]] = {}
    for database in (only_store(state) / "state.sqlite", state.registry):
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
            tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                      if name not in _DERIVED_TABLES]
            rows[database.name] = {table: sorted(map(repr, connection.execute(
                _PROJECTED.get(table, f'SELECT * FROM "{table}"')))) for table in tables}
    return {"files": store_snapshot(state), "rows": rows}


_DERIVED_TABLES = {"partition_state", "index_removals", "scans", "outbox", "catalog_changes",
                   "catalog_changes_deferred", "publication_files"}
_PROJECTED = {"catalog": "SELECT partition, path, record_id, revision, sha256 FROM catalog"}


def would_import(dry: dict[str, Any]) -> dict[str, int]:
    """What a real run would count as ``imported``, by a dry run's answer: what it would create and what an
    earlier run made."""
    return {kind: dry["wouldCreate"][kind] + dry["reused"][kind] for kind in dry["wouldCreate"]}


def interrupt_after(count: int) -> Callable[[Progress], None]:
    """A progress callback that stops the import after ``count`` items, as an interruption would."""

    def stop(progress: Progress) -> None:
        if progress.done >= count:
            raise KeyboardInterrupt(f"stopped after {progress.done}")

    return stop
