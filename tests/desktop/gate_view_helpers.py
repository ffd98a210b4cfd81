"""What the Recall gate view's tests share: the demo store with a shadow gate and six turns kept, the view shown,
and the engine's config and labelled turns read and written off the window."""

from __future__ import annotations

import json
from importlib import import_module
from typing import Any, Iterator

import pytest

from desktop.gate.view import GateView
from engine.access.authority import AgentCaller
from engine.gate.turn import gate_turn
from engine.service import Engine
from models.fixtures import TINY_RERANKER
from models.installed import ModelStore
from models.local import add_local
from tests.desktop.conftest import wait_for_signal
from tests.engine.gate_helpers import FakeRerank, keep_turns, quiet_and_needing, scores_by_text, write_config

# The charts import pyqtgraph when first shown (reading its files, as any import does); here it is imported
# before the GUI-thread guard is on, so that the guard watches the views' own work.
import_module("pyqtgraph")

SCORES = {"Atlas Migration": 0.91, "Dana Whitaker": 0.66, "Northwind Labs": 0.31}
MESSAGES = ["Atlas migration status for Dana", "When is the Atlas cut-over?", "What does Dana prefer?",
            "Northwind offices and Atlas", "Ravi and the Atlas schema", "blue-green deployment for atlas"]


@pytest.fixture
def gate_engine(served_engine: Engine) -> Iterator[tuple[Engine, FakeRerank]]:
    """The demo store with a shadow gate and a journal, six turns kept, and the tiny model installed as ``tiny``."""
    fake = FakeRerank(scores_by_text(SCORES))
    state = served_engine.state
    write_config(state, {"mode": "shadow", "journal": True}, model="rerank/test", base_url=fake.url)
    add_local(ModelStore(state.models), TINY_RERANKER, name="tiny")
    caller = AgentCaller(served_engine.registry.add_credential("main"), {"kind": "owner-private"})
    for message in MESSAGES:
        assert gate_turn(served_engine, caller, {"message": message})["outcome"] == "shadow"
    try:
        yield served_engine, fake
    finally:
        fake.close()


def shown(qtbot: Any, tasks: Any) -> GateView:
    view = GateView(tasks)
    qtbot.addWidget(view)
    view.resize(1200, 800)
    view.show()
    return view


def shown_on_main(qtbot: Any, tasks: Any) -> GateView:
    """The view shown, its settings read for the agent ``main``."""
    view = shown(qtbot, tasks)
    wait_for_signal(qtbot, view.settings.sig_settings_loaded, lambda: view.set_agent("main"))
    return view


def proposal_shown(qtbot: Any, tasks: Any, engine: Engine, guard: Any) -> tuple[GateView, dict]:
    """The labelled turns kept, the view shown on ``main`` with its Tuning tab in front: the view and the
    proposal it loaded."""
    keep_labelled_turns(engine, guard)
    view = shown_on_main(qtbot, tasks)
    blocker = wait_for_signal(qtbot, view.tuning.sig_proposal_loaded, lambda: view.show_tab(view.tuning))
    return view, blocker.args[0]


def read_config(engine: Engine, guard: Any) -> dict:
    guard.active = False   # the test reads what the engine wrote
    try:
        return json.loads(engine.state.config.read_text(encoding="utf-8"))
    finally:
        guard.active = True


def keep_labelled_turns(engine: Engine, gui_thread_guard: Any) -> None:
    """Write the quiet and the needing labelled turns into the gate log (the test's own write, off the window)."""
    gui_thread_guard.active = False
    try:
        keep_turns(engine, quiet_and_needing())
    finally:
        gui_thread_guard.active = True
