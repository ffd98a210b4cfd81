"""An import writing in bulk, killed inside a group of its writes: nothing acknowledged is lost, no record is
half written, and running it again finishes it writing nothing twice (docs/reliability.md, issue 31 Build 1).

The child (``bulk_import_child``) imports a generated Markdown vault with links, its items written many at
a time (engine/importers/bulk.py), and is SIGKILLed by ``KNOWLEDGE_FAULT`` at the nth publication's step:
after the group's journal transaction, between a group's file installs, after its checkpoint, inside the
acknowledging transaction once the catalog rows are written, and after it committed.  The counts are of
publications, not of time, so each kill happens at the same step on every run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.bench.import_markdown import write_vault
from engine.core.faults import FAULT_ENV
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.engine.importers.helpers import reader, records, run_import, store_snapshot

NOTES = 24
REPO = Path(__file__).resolve().parents[3]
CHILD_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bulk") / "vault"
    write_vault(root, NOTES)
    return root


@pytest.fixture(scope="module")
def whole(vault: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, int]]:
    """The same import never killed: how many files it makes, and its counts."""
    state = StateDir(tmp_path_factory.mktemp("whole") / "state")
    with Engine(state, watch=False) as engine:
        result = run_import(engine, "markdown", vault)
    return len(store_snapshot(state)), dict(result["imported"])


# 24 publications of a page with its original, then three of links: kills in both phases.
@pytest.mark.parametrize("fault", ["journaled:20", "installed:31", "checkpointed:13", "checkpointed:26",
                                   "catalogued:26", "acknowledged:13", "acknowledged:26"])
def test_an_import_killed_inside_a_group_loses_nothing_acknowledged_and_a_rerun_writes_nothing_twice(
        fault: str, vault: Path, whole: tuple[int, dict[str, int]], tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    child = subprocess.run(
        [sys.executable, "-m", "tests.engine.importers.bulk_import_child", str(state.root), str(vault)],
        cwd=REPO, env={**os.environ, FAULT_ENV: fault}, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    acknowledged = [json.loads(line) for line in child.stdout.splitlines()]
    pages = [line["page"] for line in acknowledged if "page" in line]
    links = [ident for line in acknowledged for ident in line.get("relationships", [])]

    with Engine(state, watch=False) as engine:  # recovery finishes or undoes what was journalled
        runtime = engine.runtime(engine.registry.own_store_of("main"))
        assert runtime.call(lambda: runtime.store.pending_publications()) == []
        runtime.call(lambda: runtime.store.verify("private"))
        caller = reader(engine)
        for record_id in pages + links:  # every acknowledged record is there, whole
            assert engine.get_record(caller, record_id)["id"] == record_id
        result = run_import(engine, "markdown", vault)

    assert set(pages) <= set(result["pages"].values())  # the rerun kept what was acknowledged
    files, counts = whole
    assert len(store_snapshot(state)) == files  # and wrote nothing twice
    assert len(records(state, "pages/")) == NOTES and dict(result["imported"]) == counts
