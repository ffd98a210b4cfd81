"""A record page's "Linked from" at a store's size: ``CatalogReads.mentioning`` and ``operator/links``, in process.

    .venv/bin/python scripts/bench_record_links.py build RECORDS DIR
    .venv/bin/python scripts/bench_record_links.py time DIR [--calls 30]

``build`` makes a state directory under DIR whose private partition holds a note "Target" that four
notes link to (``knowledge import markdown``: four relationships name it) and RECORDS generated note pages
(engine/bench/corpus.py) written into the vault and catalogued as a large vault copied in is.  ``time``
opens that state directory with this checkout's engine (the watcher on, as ``knowledge serve`` runs it) and
prints one JSON line: the median of ``--calls`` calls of ``mentioning`` for the target (limit 501, as
``operator/links`` asks) and of ``operator/links`` itself.  Run ``time`` with each checkout's PYTHONPATH on a
copy of the directory each (a checkout may migrate the store it opens), alternating.  A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Callable

from engine.bench.corpus import write_partition
from engine.cli.import_commands import IMPORTERS
from engine.importers.common import Writer, import_instance, owner_caller
from engine.operator.methods import OperatorMethods
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.store.catalog_reads import CatalogReads
from engine.store.store import VAULT_DIR

AGENT = "main"


def build(records: int, root: Path) -> None:
    root.mkdir(parents=True)
    state = StateDir(root / "state")
    state.create()
    notes = root / "notes"
    notes.mkdir()
    (notes / "Target.md").write_text("# Target\n", encoding="utf-8")
    for number in range(4):
        (notes / f"Ref {number}.md").write_text(f"Ref {number} points at [[Target]].\n", encoding="utf-8")
    with Engine(state, watch=True) as engine:
        engine.add_agent(AGENT, owner=True)
        load, run, _, _ = IMPORTERS["markdown"]
        plan = load(str(notes), engine.refuse_secrets)
        with owner_caller(engine, instance=import_instance("markdown")) as (caller, _):
            target = run(Writer(engine, caller, "markdown"), *plan)["pages"]["Target.md"]
        (root / "target").write_text(target, encoding="utf-8")
        store = next((state.root / "stores").iterdir())
        write_partition(store / VAULT_DIR / "private", records, 0)
        started = time.perf_counter()
        OperatorMethods(engine).links({"agent": AGENT, "id": target})
        print(f"{records:,} notes catalogued in {time.perf_counter() - started:.1f} s")


def measure(root: Path, calls: int) -> dict[str, float | int]:
    target = (root / "target").read_text(encoding="utf-8")
    with Engine(StateDir(root / "state"), watch=True) as engine:
        operator = OperatorMethods(engine)
        started = time.perf_counter()
        links = operator.links({"agent": AGENT, "id": target})  # the store opened and caught up
        opened = time.perf_counter() - started
        runtime = engine.runtime(engine.registry.own_store_of(AGENT))

        def median_ms(call: Callable[[], object]) -> float:
            timings = []
            for _ in range(calls):
                started = time.perf_counter()
                call()
                timings.append((time.perf_counter() - started) * 1000)
            return statistics.median(timings)

        with runtime.store.db.snapshot() as db:
            reads = CatalogReads(db)
            records = db.one("SELECT count(*) FROM catalog WHERE record_id IS NOT NULL")[0]
            mentioning = len(reads.mentioning("private", target, 501))
            mentioning_ms = median_ms(lambda: reads.mentioning("private", target, 501))
        links_ms = median_ms(lambda: operator.links({"agent": AGENT, "id": target}))
    return {"records": records, "open_and_first_links_s": round(opened, 2), "mentioning": mentioning,
            "connections": len(links["connections"]), "mentioning_ms": round(mentioning_ms, 3),
            "links_ms": round(links_ms, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    making = commands.add_parser("build")
    making.add_argument("records", type=int)
    making.add_argument("dir", type=Path)
    timing = commands.add_parser("time")
    timing.add_argument("dir", type=Path)
    timing.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    if args.command == "build":
        build(args.records, args.dir)
    else:
        print(json.dumps(measure(args.dir, args.calls)))


if __name__ == "__main__":
    main()
