"""``knowledge desktop`` paints its window without loading the engine it talks to: the window is a client of the
socket, and the engine's code (the gate, numpy, the stores, the other commands) cost its first paint about a
second of CPU (docs/benchmarks/desktop.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# The command line as `knowledge desktop` runs it, up to the window's `run` (which would open the window).
PROBE = """
import sys
import desktop.app
desktop.app.run = lambda *args, **kwargs: print(' '.join(sorted(sys.modules))) or 0
from engine.cli import main
sys.exit(main(['--state-dir', sys.argv[1], 'desktop']))
"""
ENGINE_ONLY = {"engine.cli.commands", "engine.service", "engine.operator.methods", "engine.wire.protocol",
               "engine.gate.turn", "engine.store.store", "engine.search.keyword", "numpy", "tantivy",
               "onnxruntime", "detect_secrets", "qtawesome"}


def test_the_window_starts_without_the_engines_code(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "state")], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    loaded = set(done.stdout.split())
    assert {"desktop.main_window", "desktop.tasks", "engine.wire.operator_client"} <= loaded
    assert loaded & ENGINE_ONLY == set()  # qtawesome: the icon font comes after the first paint
