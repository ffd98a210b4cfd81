"""Screenshots of every desktop view on the demo store, into docs/screenshots/.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/screenshots.py      # or under xvfb-run

Seeds the demo into a throwaway state directory, lets the window start the
engine as a child process (as `knowledge desktop --demo` does), walks the
views, waits for each one's data, and saves the window as PNG.  The engine
is stopped at the end.

No trained reranker can be downloaded where these are taken, so the recall
gate's shadow log comes from a loopback ``/rerank`` service run by this
script that scores a page by the share of the message's words it contains
(a real, if crude, relevance score: nothing in the pictures is typed in by
hand), and the owner's labels are the pages each message names.  The tiny
test model is installed so the Models view has something to verify and
benchmark.  ``--embedding-model DIR`` installs the embedding model from that folder
(as the README's command does with ``knowledge models pull``), so the search is the owner's hybrid one.  A
small folder of notes, written by this script about the demo's project, is imported as Markdown so the
Folders tab has a vault to browse.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QEventLoop, Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QWidget  # noqa: E402

from desktop import launcher  # noqa: E402
from desktop.app import application  # noqa: E402
from desktop.connect.agent_dialog import ConnectAgentDialog  # noqa: E402
from desktop.connect.settings_dialog import SettingsDialog  # noqa: E402
from desktop.main_window import MainWindow  # noqa: E402
from desktop.tasks import EngineTasks  # noqa: E402
from desktop.transfer.dialogs import ImportDialog, owner_agents  # noqa: E402
from engine.access.authority import AgentCaller  # noqa: E402
from engine.importers.common import Writer, import_instance, owner_caller  # noqa: E402
from engine.importers.demo import seed_demo  # noqa: E402
from engine.importers.markdown import import_markdown, load_markdown  # noqa: E402
from engine.gate.turn import gate_turn  # noqa: E402
from engine.operator.gate_operator import handlers as gate_handlers  # noqa: E402
from engine.service import Engine  # noqa: E402
from engine.state.statedir import StateDir  # noqa: E402
from models.fixtures import TINY_RERANKER  # noqa: E402
from models.installed import ModelStore  # noqa: E402
from models.local import add_local  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
TIMEOUT_MS = 60_000


# What an owner asks the agent, and the demo pages each message is about (the owner's labels).
GATE_TURNS = [
    ("How is the Atlas migration going?", ["Atlas Migration"]),
    ("When is the Atlas cut-over now?", ["Atlas Migration"]),
    ("Draft the weekly status notes for Dana", ["Dana Whitaker"]),
    ("Who at Northwind Labs works on Atlas?", ["Northwind Labs", "Atlas Migration"]),
    ("What does Ravi own in the atlas repository?", ["Ravi Menon", "northwind/atlas"]),
    ("Explain blue-green deployment for the cut-over", ["Blue-green deployment"]),
    ("Remind me what Dana prefers for status updates", ["Dana Whitaker"]),
    ("Thanks, that is all for today", []),
    ("Book a table for lunch on Friday", []),
    ("Is the Northwind office open on Mondays?", ["Northwind Labs"]),
]
# A small vault of the owner's own notes, imported as Markdown: its folders are browsed in Records.
NOTES = {
    "Projects/Atlas/Cut-over checklist.md": "# Cut-over checklist\n\nBefore the [[Atlas runbook]] is followed:"
    " freeze writes, take a snapshot, switch the load balancer to green.\n\n> [!warning] Rollback\n> Keep blue"
    " running for a day after the switch.\n",
    "Projects/Atlas/Atlas runbook.md": "# Atlas runbook\n\nSteps for the blue-green switch, owned by Ravi."
    " See the [[Cut-over checklist]] and [[Weekly status]].\n",
    "Meetings/Weekly status.md": "# Weekly status\n\nDana wants the status notes on Fridays, short, with the"
    " risks first. Last week: the cut-over moved to January.\n",
    "Meetings/Vendor call.md": "# Vendor call\n\nNorthwind Labs asked for the migration dates; sent the"
    " [[Atlas runbook]].\n",
    "Reading/Blue-green deployments.md": "# Blue-green deployments\n\nTwo identical environments; traffic"
    " moves from one to the other at once, and back if something breaks.\n",
}
WORD = re.compile(r"[a-z0-9]{3,}")
STOPWORDS = {"the", "and", "for", "what", "who", "how", "when", "does", "that", "this", "now", "is", "me", "on"}


def overlap_score(query: str, document: str) -> float:
    """The share of the message's words in the document, through a logistic: 0..1."""
    words = set(WORD.findall(query.lower())) - STOPWORDS
    if not words:
        return 0.0
    share = len(words & set(WORD.findall(document.lower()))) / len(words)
    return 1 / (1 + math.exp(-8 * (share - 0.3)))


class OverlapRerank:
    """``POST /rerank`` on loopback, answering in Cohere's shape with ``overlap_score``."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                documents = body.get("documents") or body.get("texts") or []
                data = json.dumps({"results": [{"index": n, "relevance_score": overlap_score(body["query"], d)}
                                               for n, d in enumerate(documents)]}).encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def seed_gate(state: StateDir, rerank_url: str, embedding_model: str | None, notes: Path) -> None:
    """The demo, a shadow-mode gate with a journal, ten turns of it, the owner's labels, and the
    owner's notes imported from ``notes``."""
    state.create()
    state.config.write_text(json.dumps({
        "decisionModel": "rerank/overlap", "models": {"providers": {"rerank": {"baseUrl": rerank_url}}},
        "recallGate": {"mode": "shadow", "journal": True, "highThreshold": 0.8, "mediumThreshold": 0.5},
    }), encoding="utf-8")
    add_local(ModelStore(state.models), TINY_RERANKER, name="tiny-test-reranker")
    if embedding_model:
        add_local(ModelStore(state.models), embedding_model, name="all-minilm-l6-v2-int8")
    for name, text in NOTES.items():
        (notes / name).parent.mkdir(parents=True, exist_ok=True)
        (notes / name).write_text(text, encoding="utf-8")
    with Engine(state, watch=False) as engine:
        seed_demo(engine)
        with owner_caller(engine, instance=import_instance("markdown")) as (importer, _):
            import_markdown(Writer(engine, importer, "markdown"), *load_markdown(str(notes), engine.refuse_secrets))
        caller = AgentCaller(engine.registry.add_credential("main"), {"kind": "owner-private"})
        engine.decision.wait_ready(30)
        for message, _ in GATE_TURNS:
            gate_turn(engine, caller, {"message": message})
        operator = gate_handlers(engine)
        journal = operator["gateJournal"]({"agent": "main"})
        for turn in journal["turns"]:
            needed = next(pages for message, pages in GATE_TURNS if message == turn["message"])
            ids = [page["id"] for page in turn["pages"] if page["title"] in needed]
            operator["labelGateTurn"]({"agent": "main", "turn": turn["id"], "needed": ids})


def wait(signal: Any, trigger: Callable[[], Any] = lambda: None, *, settle_ms: int = 300) -> None:
    """Run the event loop until ``signal`` fires (after ``trigger``), then a little longer to paint."""
    loop = QEventLoop()
    fired: list[bool] = []

    def on_fired(*_: Any) -> None:
        fired.append(True)
        loop.quit()

    signal.connect(on_fired)
    timer = QTimer.singleShot(TIMEOUT_MS, loop.quit)  # noqa: F841 - a stuck view must not hang the script
    trigger()
    if not fired:
        loop.exec()
    if not fired:
        raise SystemExit(f"timed out waiting for {signal}")
    pause_ms(settle_ms)


def pause_ms(ms: int) -> None:
    """Run the event loop for ``ms`` milliseconds (to paint)."""
    pause = QEventLoop()
    QTimer.singleShot(ms, pause.quit)
    pause.exec()


def save(window: QWidget, name: str) -> None:
    if os.environ.get("STOP_AT") == name:
        raise KeyboardInterrupt
    path = OUT / f"{name}.png"
    window.grab().save(str(path))
    print(f"saved {path.relative_to(ROOT)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedding-model", metavar="DIR",
                        help="the folder of all-minilm-l6-v2-int8 (as `knowledge models pull` installs it)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    app = application()
    with tempfile.TemporaryDirectory(prefix="kd-shots-") as temp:
        state = StateDir(Path(temp) / "state")
        rerank = OverlapRerank()
        seed_gate(state, rerank.url, args.embedding_model, Path(temp) / "Notes")
        tasks = EngineTasks()
        window = MainWindow(tasks, state)
        window.resize(1360, 820)
        window.show()
        try:
            records = window.records_view  # the window opens on Records: its first page follows the inventory
            wait(records.recent_model.sig_page_loaded, lambda: window.connect_engine(demo=False))
            window.show_view(0)
            agents = window.agents_view
            wait(agents.sig_status_reported, lambda: agents.add_agent("researcher", False))
            agents.dialog.close()
            agents.select_agent("main")
            window.messages.hide()
            save(window, "agents-and-stores")

            window.show_view(1)
            dana = next(r["id"] for r in records.recent_model.rows() if r["title"] == "Dana Whitaker")
            wait(records.page.sig_content_loaded, lambda: records.open_record(dana))
            save(window, "record-page")
            records.page.tabs.setCurrentIndex(1)
            save(window, "record-claims-and-evidence")
            records.page.tabs.setCurrentIndex(2)
            save(window, "record-connections")
            graph = records.show_connections(records.page.record)
            wait(graph.sig_graph_shown)
            wait(graph.sig_graph_shown, lambda: graph.two_hops.setChecked(True))
            save(graph, "record-connections-graph")
            graph.close()
            preference = next(r["id"] for r in records.recent_model.rows() if r["title"].startswith("Dana prefers"))
            wait(records.page.sig_content_loaded, lambda: records.open_record(preference))
            records.page.tabs.setCurrentIndex(3)
            wait(records.page.sig_diff_loaded, lambda: records.page.history_table.selectRow(1))
            save(window, "record-history-diff")
            records.query.setText("when does Atlas switch over to the new environment?")
            wait(records.search_model.sig_page_loaded, records.search)
            for _ in range(60):  # the first search by meaning starts reading the notes' passages: let it finish
                if "still being read" not in records.search_summary.text():
                    break
                pause_ms(500)
                wait(records.search_model.sig_page_loaded, records.search, settle_ms=0)
            first = records.search_model.index(0, 0)
            wait(records.page.sig_content_loaded, lambda: (records.search_table.selectRow(0),
                                                           records.search_table.clicked.emit(first)))
            records.page.tabs.setCurrentIndex(0)
            save(window, "records-search")
            wait(records.page.sig_change_request_copied, records.page.request_button.click, settle_ms=100)
            save(window, "change-request-copied")
            window.messages.hide()
            atlas = records.folders_tree.findItems("Atlas", Qt.MatchFlag.MatchExactly | Qt.MatchFlag.MatchRecursive)[0]
            wait(records.folder_model.sig_page_loaded, lambda: atlas.setSelected(True))
            checklist = next(r["id"] for r in records.folder_model.rows() if r["title"] == "Cut-over checklist")
            wait(records.page.sig_content_loaded, lambda: records.open_record(checklist))
            save(window, "records-folders")

            wait(window.vocabulary_view.sig_content_loaded, lambda: window.show_view(2))
            save(window, "vocabulary")
            wait(window.approvals_view.sig_content_loaded, lambda: window.show_view(3))
            save(window, "recall-approvals")
            window.preview_view.project_key.setText("atlas")
            wait(window.preview_view.sig_content_loaded, lambda: window.show_view(4), settle_ms=800)
            save(window, "what-the-agent-sees")
            wait(window.health_view.sig_content_loaded, lambda: window.show_view(5))
            save(window, "health")

            gate = window.gate_view
            wait(gate.settings.sig_settings_loaded, lambda: window.show_view(6))
            save(window, "recall-gate-settings")
            wait(gate.log.log_model.sig_page_loaded, lambda: gate.show_tab(gate.log), settle_ms=800)
            gate.log.log_table.selectRow(6)
            save(window, "recall-gate-shadow-log")
            wait(gate.tuning.sig_sweep_loaded, lambda: gate.show_tab(gate.tuning), settle_ms=800)
            save(window, "recall-gate-tuning")
            wait(gate.journal.sig_journal_loaded, lambda: gate.show_tab(gate.journal))
            gate.journal.journal_table.selectRow(4)
            save(window, "recall-gate-labelling")
            gate.show_tab(gate.replay)
            replay = gate.replay
            wait(replay.sig_replay_finished, replay.start_button.click)
            save(window, "recall-gate-replay")

            models = window.models_view
            wait(models.sig_content_loaded, lambda: window.show_view(7))
            models.select_installed("tiny-test-reranker")
            bench = models.benchmark
            wait(bench.sig_benchmark_finished, bench.run_button.click)
            save(window, "models-and-benchmark")

            wait(window.partitions_view.sig_content_loaded, lambda: window.show_view(8))
            save(window, "partitions")
            connect = ConnectAgentDialog(tasks, window.inventory.get("agents", []), "researcher", parent=window)
            connect.resize(900, 640)
            wait(connect.sig_connections_loaded, connect.show, settle_ms=500)
            save(connect, "connect-an-agent")
            connect.close()
            owner_settings = SettingsDialog(tasks, parent=window)
            wait(owner_settings.sig_settings_loaded, owner_settings.show)
            save(owner_settings, "owner-settings")
            owner_settings.close()
            importing = ImportDialog(tasks, owner_agents(window.inventory),
                                     "main", window)
            importing.show()
            pause_ms(300)
            save(importing, "import")
            importing.close()

            # The dark theme, applied without remembering it (the owner's choice stays theirs).
            window.theme.choice = "dark"
            window.theme.apply()
            wait(records.page.sig_content_loaded, lambda: (window.show_view(1), records.open_record(dana)))
            save(window, "record-page-dark")
            window.theme.choice = "system"
            window.theme.apply()
        except KeyboardInterrupt:
            pass
        finally:
            handle = window.handle
            tasks.shutdown()
            window.close()
            if handle is not None:
                launcher.stop_engine(handle)
                os.waitpid(handle.started_pid, 0)
            rerank.server.shutdown()
    app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
