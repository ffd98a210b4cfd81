"""A writer process for the crash tests of chained groups: two groups published on one turn of the lane.

    python -m tests.engine.chain_writer STATE_DIR TOKEN_FILE

A seed page makes the store (publication 1).  Then, with the lane held, four writes are queued: pages Dana
and Northwind, and a claim about each.  The claims depend on the pages, so the pages are published as one
group (publications 2 and 3) and the claims, planned while that group is acknowledged, are journalled in its
acknowledging transaction and published next (4 and 5).  Each acknowledged receipt is printed as one JSON line,
flushed, by the thread that got it.  The parent sets ``KNOWLEDGE_FAULT`` to have the engine SIGKILL this process
at a chosen step.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from engine.access.authority import AgentCaller
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.helpers import queued_behind_held_lane

PAGES = [{"requestId": "page-dana", "type": "person", "title": "Dana", "body": "Dana runs operations."},
         {"requestId": "page-northwind", "type": "organization", "title": "Northwind", "body": "A logistics company."}]
CLAIMS = [{"requestId": f"claim-{subject.lower()}", "subject": subject, "items": [
    {"text": f"{subject} moved to Friday reviews.", "claimKind": "fact", "excerpt": f"{subject}: Friday reviews."}]}
    for subject in ("Dana", "Northwind")]


def main() -> None:
    state, token_file = StateDir(Path(sys.argv[1])), Path(sys.argv[2])
    caller = AgentCaller(token_file.read_text(encoding="utf-8").strip(), {"kind": "owner-private"})
    printed = threading.Lock()
    with Engine(state, watch=False) as engine:
        seed = {"requestId": "page-seed", "type": "note", "title": "Seed", "body": "The store's first page."}
        print(json.dumps({"operation": "save_page", "params": seed, "receipt": engine.save_page(caller, seed)}),
              flush=True)
        runtime = engine.runtime(engine.registry.own_store_of("main"))

        def write(operation: str, params: dict[str, Any], call: Callable[..., Any]) -> None:
            receipt = call(caller, params)
            with printed:
                print(json.dumps({"operation": operation, "params": params, "receipt": receipt}), flush=True)

        calls = [("save_page", params, engine.save_page) for params in PAGES]
        calls += [("remember", params, engine.remember) for params in CLAIMS]
        queued_behind_held_lane(runtime, [lambda queued=queued: write(*queued) for queued in calls], 60)


if __name__ == "__main__":
    main()
