"""``knowledge bench cataloguing``: new files dropped into a partition's folder, then the first search.

The catalogue row of ``knowledge bench throughput`` on its own, repeated, and side by side with another
checkout of the engine (``--compare``), alternated run by run so that both sides see the same load.  Each
run: a fresh state directory whose store is made by a first ``knowledge_save_page`` (so the partition and
its catalog exist, as in the throughput benchmark), the engine stopped, the generated note pages
(engine/bench/corpus.py, written once into a template and copied in) dropped into the private partition,
the engine started again (``knowledge serve --port 0``, its own process), and the first ``knowledge_grep``
timed: the catalog's sync of every new file and the search index's catch-up happen before it answers.
Then the engine is restarted and the first search on the unchanged vault is timed too.

A side is a checkout: the engine process runs with that directory as its working directory, so
``python -m engine.cli`` is that checkout's engine, with this interpreter and its packages.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..core.answers import TypedDict
from ..state.statedir import StateDir
from ..store.store import VAULT_DIR
from .corpus import NOTES_DIR, write_partition
from .defaults import CATALOGUING_RECORDS as RECORDS
from .socket import RpcClient, _start_engine, machine, owner_state
from .throughput import FIRST_QUERY_TIMEOUT_S, _grep, _page


class Run(TypedDict):
    side: str
    load_1min: float  # the load average as the run started
    catalogue_s: float
    catalogue_cpu_s: float  # the engine's CPU time (every thread, its worker processes) from its start to the answer
    restart_first_query_s: float


class CataloguingReport(TypedDict):
    records: int
    sides: dict[str, str]  # name -> checkout
    runs: list[Run]


def _stop(state: StateDir, process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(300)
    state.remove_engine_info()


def _cpu_seconds(pid: int) -> float:
    """The CPU time a process has used so far, every thread, user and system, with that of the child processes
    it has waited for (a large sync's workers, which it waits for before it answers; Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime


def _first_search(state: StateDir, token: str, checkout: Path, query: int) -> tuple[float, float]:
    """(wall seconds of the first search, the engine's CPU seconds from its start to the answer)."""
    process, port = _start_engine(state, checkout)
    try:
        client = RpcClient(port, token, timeout=FIRST_QUERY_TIMEOUT_S)
        began = time.perf_counter()
        _grep(client, query)
        elapsed = time.perf_counter() - began
        cpu = _cpu_seconds(process.pid)
        client.close()
    finally:
        _stop(state, process)
    return elapsed, cpu


def measure(template: Path, side: str, checkout: Path) -> Run:
    with tempfile.TemporaryDirectory() as scratch:
        state, token = owner_state(Path(scratch))
        process, port = _start_engine(state, checkout)
        client = RpcClient(port, token)
        client.tool("knowledge_save_page", _page("seed", 0))  # the store and its partition
        client.close()
        _stop(state, process)
        store_dir = next((state.root / "stores").iterdir())
        shutil.copytree(template / NOTES_DIR, store_dir / VAULT_DIR / "private" / NOTES_DIR, dirs_exist_ok=True)
        os.sync()  # the copy's writeback is not the engine's work
        load = os.getloadavg()[0]
        catalogue, cpu = _first_search(state, token, checkout, 0)
        restart, _ = _first_search(state, token, checkout, 1)
    return {"side": side, "load_1min": load, "catalogue_s": catalogue, "catalogue_cpu_s": cpu,
            "restart_first_query_s": restart}


def run(*, records: int = RECORDS, repeats: int = 3, sides: dict[str, Path], template: Path | None = None,
        say: Callable[[str], None] = lambda line: None) -> CataloguingReport:
    """``repeats`` runs of each side, alternated (the first side first)."""
    with tempfile.TemporaryDirectory() as scratch:
        if template is None or not (template / NOTES_DIR).is_dir():
            template = template or Path(scratch) / "template"
            say(f"writing {records:,} generated records into {template}")
            write_partition(template, records, 0)
        runs: list[Run] = []
        for repeat in range(repeats):
            for side, checkout in sides.items():
                result = measure(template, side, checkout)
                say(f"run {repeat + 1}, {side}: catalogued in {result['catalogue_s']:.1f} s "
                    f"({result['catalogue_cpu_s']:.1f} s of the engine's CPU), first search after a "
                    f"restart {result['restart_first_query_s']:.2f} s (load {result['load_1min']:.2f})")
                runs.append(result)
    return {"records": records, "sides": {side: str(checkout) for side, checkout in sides.items()}, "runs": runs}


def report(result: CataloguingReport, command: str) -> str:
    sides = list(result["sides"])
    lines = [
        "# Cataloguing benchmark", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}",
        f"- Command: `{command}`",
        f"- {result['records']:,} generated note pages copied into the private partition of a fresh store, then "
        "the first `knowledge_grep` through the socket of `knowledge serve` (its own process); then a restart "
        "and the first search on the unchanged vault. Sides alternated run by run: "
        + ", ".join(f"{side} = `{checkout}`" for side, checkout in result["sides"].items()) + ".", "",
        "The engine's CPU is its process's user and system time, every thread and the worker processes it "
        "waited for, from its start to the first answer (Python's start included): on a loaded machine it moves "
        "less than the wall clock.", "",
        "| run | side | load (1 min) | cataloguing, first search (s) | engine CPU to the answer (s) "
        "| first search after a restart (s) |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for number, item in enumerate(result["runs"]):
        lines.append(f"| {number // len(sides) + 1} | {item['side']} | {item['load_1min']:.2f} | "
                     f"{item['catalogue_s']:.1f} | {item['catalogue_cpu_s']:.1f} | "
                     f"{item['restart_first_query_s']:.2f} |")
    lines += ["", "| side | runs | median cataloguing (s) | median engine CPU (s) "
                  "| median first search after a restart (s) |",
              "| --- | ---: | ---: | ---: | ---: |"]
    for side in sides:
        mine = [item for item in result["runs"] if item["side"] == side]
        lines.append(f"| {side} | {len(mine)} | {statistics.median(i['catalogue_s'] for i in mine):.1f} | "
                     f"{statistics.median(i['catalogue_cpu_s'] for i in mine):.1f} | "
                     f"{statistics.median(i['restart_first_query_s'] for i in mine):.2f} |")
    return "\n".join(lines) + "\n"
