"""A writer process for the removal crash tests: one publication that removes a record file, revises
another and adds a third, printing its receipt once acknowledged.

    python -m tests.engine.store.removal_writer STATE_DIR PLAN_JSON

The parent sets ``KNOWLEDGE_FAULT`` to have the engine SIGKILL this process at a chosen step.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.service import Engine
from engine.state.statedir import StateDir
from engine.store.publication import FileWrite, Plan, removal


def main() -> None:
    state, spec = StateDir(Path(sys.argv[1])), json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))
    with Engine(state, watch=False) as engine:
        record = engine.registry.own_store_of("main")
        assert record is not None
        runtime = engine.runtime(record)
        writes = [FileWrite(w["path"], "record", w["data"].encode(), w["id"], None,
                            w["base"].encode() if w["base"] is not None else None) for w in spec["writes"]]
        writes += [removal(r["path"], "record", r["base"].encode(), r["id"]) for r in spec["removals"]]
        plan = Plan("private", "sync", None, "sync-test", None, writes)
        receipt = runtime.call(lambda: (runtime.prepare("private"), runtime.publish(plan))[1])
        print(json.dumps(receipt), flush=True)


if __name__ == "__main__":
    main()
