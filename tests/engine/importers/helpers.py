"""Running an importer in-process as ``knowledge import`` does, on fixture files the tests write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from engine.access.authority import AgentCaller, OperatorCaller
from engine.cli.import_commands import IMPORTERS
from engine.importers.common import Progress, Writer, import_instance, owner_caller
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.helpers import only_store, vault_snapshot


def run_import(engine: Engine, format_name: str, path: Path, *, dry_run: bool = False,
               progress: Callable[[Progress], None] | None = None) -> dict[str, Any]:
    load, run, _, _ = IMPORTERS[format_name]
    plan = load(str(path), engine.refuse_secrets)
    if dry_run:  # as the engine's own dry run: reading (as the operator) what an earlier import made
        return run(Writer(engine, OperatorCaller("main"), format_name, dry_run=True, progress=progress), *plan)
    with owner_caller(engine, instance=import_instance(format_name)) as (caller, _):
        return run(Writer(engine, caller, format_name, progress=progress), *plan)


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


def interrupt_after(count: int) -> Callable[[Progress], None]:
    """A progress callback that stops the import after ``count`` items, as an interruption would."""

    def stop(progress: Progress) -> None:
        if progress.done >= count:
            raise KeyboardInterrupt(f"stopped after {progress.done}")

    return stop
