"""A writer process for the crash tests: publishes a stream of writes, printing each receipt.

    python -m tests.engine.crash_writer STATE_DIR TOKEN_FILE COUNT

Each acknowledged receipt is printed as one JSON line and flushed before the
next write starts, so whatever the parent reads was acknowledged.  The
parent sets ``KNOWLEDGE_FAULT`` to have the engine SIGKILL this process at a
chosen publication step.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

from engine.access.authority import AgentCaller
from engine.service import Engine
from engine.state.statedir import StateDir


def writes(count: int):
    """A mix of operations, each publishing several files (evidence, records, superseded claims)."""
    yield "save_page", {"requestId": "page-dana", "type": "person", "title": "Dana", "aliases": ["Dana"],
                        "body": "Dana runs operations.",
                        "evidence": [{"excerpt": "I run operations at Northwind."}]}
    yield "save_page", {"requestId": "page-northwind", "type": "organization", "title": "Northwind",
                        "body": "A logistics company.",  # and the file it comes from, retained with it
                        "evidence": [{"content": base64.b64encode(b"Northwind: logistics.\n").decode("ascii"),
                                      "filename": "northwind.txt"}]}
    for index in range(count):
        if index % 3 == 0:
            yield "remember", {"requestId": f"claims-{index}", "subject": "Dana", "items": [
                {"text": f"Fact {index} about Dana.", "claimKind": "fact", "excerpt": f"Excerpt {index}a."},
                {"text": f"Preference {index} of Dana.", "claimKind": "preference", "excerpt": f"Excerpt {index}b."},
            ]}
        elif index % 3 == 1:
            yield "revise", {"requestId": f"revise-{index}", "title": "Dana", "type": "person",
                             "body": f"Dana runs operations (revision note {index}).",
                             "evidence": [{"excerpt": f"Revision evidence {index}."}]}
        else:
            yield "remember", {"requestId": f"rel-{index}", "items": [
                {"relation": "works_at", "from": "Dana", "to": "Northwind", "excerpt": f"Works there ({index})."},
            ]}


def main() -> None:
    state, token_file, count = StateDir(Path(sys.argv[1])), Path(sys.argv[2]), int(sys.argv[3])
    caller = AgentCaller(token_file.read_text(encoding="utf-8").strip(), {"kind": "owner-private"})
    with Engine(state, watch=False) as engine:
        page_id, revision = None, 0
        for operation, params in writes(count):
            if operation == "revise":
                params = {**params, "id": page_id, "expectedRevision": revision}
                receipt = engine.save_page(caller, params)
            elif operation == "save_page":
                receipt = engine.save_page(caller, params)
            else:
                receipt = engine.remember(caller, params)
            if params.get("title") == "Dana":
                page_id, revision = receipt["id"], receipt["revision"]
            print(json.dumps({"operation": operation, "params": params, "receipt": receipt}), flush=True)


if __name__ == "__main__":
    main()
