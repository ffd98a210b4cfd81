"""``knowledge bench import``: how fast a ChatGPT export imports, from the file to the last page.

Generates an export of N synthetic conversations in the real shape (a
``mapping`` tree with a regenerated answer per conversation, so the active
branch has to be found), writes it to a temporary directory, and imports it
as ``knowledge import chatgpt`` does: the in-process engine of
``import_engine`` (vault watcher and git checkpoints on), a fresh state
directory.  Timed separately: reading and
checking the file (parse, active branches, credential scan), the import
(the original retained, one page per conversation), closing the engine
(the last git checkpoint), and importing the same file again (each page
found by its address and compared, the retained files idempotent retries).  With ``--profile`` the store's lane runs under
cProfile during the import and the report lists where its time goes.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import random
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from ..importers.chatgpt import import_chatgpt, load_chatgpt
from ..importers.common import Writer, import_engine, import_instance, owner_caller
from ..runtime import StoreRuntime
from ..state.statedir import StateDir
from ..core.answers import TypedDict
from .socket import WORDS, machine

T = TypeVar("T")


class ImportReport(TypedDict):
    """A ChatGPT export's import timed: its phases (seconds), rates (conversations a second), the time
    projected for ``TARGET`` conversations, the lane's profile when asked, the load average before and after."""
    conversations: int
    messages: int
    bytes: int
    read_s: float
    import_s: float
    again_s: float
    close_s: float
    open_s: float
    total_s: float
    rate: float
    again_rate: float
    projected_s: float
    profile: str | None
    load: tuple[float, float]
    bulk: bool  # items written many at a time (engine/importers/bulk.py), else one after another
    cpu: tuple[float, float, float]  # the process's CPU seconds (every thread) reading, importing, again

TARGET = 10_000
WRITES = {True: "items written in bulk (engine/importers/bulk.py)",
          False: "items written one after another (`--one-by-one`, as before bulk writing)"}


def synthetic_export(conversations: int, messages: int, seed: int = 0) -> list[dict[str, Any]]:
    """``conversations`` ChatGPT conversations of ``messages`` messages on the active branch each, plus
    one abandoned regenerated answer; words drawn from the benchmark vocabulary."""
    rng = random.Random(seed)
    start = 1_750_000_000.0
    data = []
    for number in range(conversations):
        at = start + number * 3600.0
        mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
        parent = "root"
        for turn in range(messages):
            node_id = f"n{turn}"
            role = "user" if turn % 2 == 0 else "assistant"
            length = rng.randint(8, 30) if role == "user" else rng.randint(40, 160)
            mapping[node_id] = {"id": node_id, "parent": parent, "children": [], "message": {
                "id": node_id, "author": {"role": role, "name": None, "metadata": {}}, "create_time": at + turn,
                "content": {"content_type": "text", "parts": [" ".join(rng.choices(WORDS, k=length)) + "."]},
                "status": "finished_successfully", "metadata": {}, "recipient": "all"}}
            mapping[parent]["children"].append(node_id)
            if turn == 1:  # a regenerated answer the owner moved away from
                mapping["old"] = {"id": "old", "parent": "n0", "children": [], "message": {
                    "id": "old", "author": {"role": "assistant", "name": None, "metadata": {}},
                    "create_time": at + 0.5, "content": {"content_type": "text", "parts": ["an abandoned answer"]},
                    "status": "finished_successfully", "metadata": {}, "recipient": "all"}}
                mapping["n0"]["children"].append("old")
            parent = node_id
        data.append({"title": " ".join(rng.choices(WORDS, k=4)).capitalize(), "create_time": at,
                     "update_time": at + messages, "mapping": mapping, "current_node": parent,
                     "conversation_id": f"bench-{number:06d}", "id": f"bench-{number:06d}"})
    return data


def run(conversations: int = 1000, messages: int = 8, profile: bool = False,
        say: Callable[[str], None] = print, bulk: bool = True) -> ImportReport:
    with tempfile.TemporaryDirectory(prefix="knowledge-bench-import-") as work:
        export = Path(work) / "conversations.json"
        export.write_text(json.dumps(synthetic_export(conversations, messages)), encoding="utf-8")
        say(f"generated {conversations} conversations, {export.stat().st_size / 1e6:.1f} MB")
        state = StateDir(Path(work) / "state")
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        engine = import_engine(state)
        try:
            checked, cpu = time.perf_counter(), [time.process_time()]
            plan = load_chatgpt(str(export), engine.refuse_secrets)
            loaded = time.perf_counter()
            cpu.append(time.process_time())
            say(f"read and checked in {loaded - checked:.2f} s")
            profiler = cProfile.Profile() if profile else None
            with owner_caller(engine, instance=import_instance("chatgpt")) as (caller, _):
                writer = Writer(engine, caller, "chatgpt", progress=_every(conversations // 10 or 1, say), bulk=bulk)
                with _on_the_lane(profiler):
                    import_chatgpt(writer, *plan)
                imported = time.perf_counter()
                cpu.append(time.process_time())
                say(f"imported in {imported - loaded:.2f} s")
                import_chatgpt(Writer(engine, caller, "chatgpt", bulk=bulk), *plan)
                again = time.perf_counter()
                cpu.append(time.process_time())
                say(f"imported again (nothing new) in {again - imported:.2f} s")
        finally:
            closing = time.perf_counter()
            engine.close()
            closed = time.perf_counter()
    first = loaded - checked + imported - loaded
    result: ImportReport = {
        "conversations": conversations, "messages": messages, "bytes": len(plan[0].data),
        "read_s": loaded - checked, "import_s": imported - loaded, "again_s": again - imported,
        "close_s": closed - closing, "open_s": checked - started, "total_s": first,
        "rate": conversations / first, "again_rate": conversations / (again - imported),
        "projected_s": TARGET / (conversations / first), "profile": _top(profiler) if profiler else None,
        "load": (load_before, os.getloadavg()[0]), "bulk": bulk,
        "cpu": (cpu[1] - cpu[0], cpu[2] - cpu[1], cpu[3] - cpu[2]),
    }
    return result


@contextmanager
def _on_the_lane(profiler: cProfile.Profile | None) -> Iterator[None]:
    """Profile what the store's lane runs (where an import's writes happen; the importing thread only
    waits for them): every lane call is wrapped in the profiler while the block runs."""
    if profiler is None:
        yield
        return
    boundary = StoreRuntime._storage_boundary

    def profiled(runtime: StoreRuntime, fn: Callable[[], T]) -> T:
        profiler.enable()
        try:
            return boundary(runtime, fn)
        finally:
            profiler.disable()

    StoreRuntime._storage_boundary = profiled  # type: ignore[method-assign]
    try:
        yield
    finally:
        StoreRuntime._storage_boundary = boundary  # type: ignore[method-assign]


def _every(step: int, say: Callable[[str], None]) -> Callable[[Any], None]:
    def progress(done: Any) -> None:
        if done.done % step == 0 or done.done == done.total:
            say(f"  {done.done}/{done.total}")
    return progress


def _top(profiler: cProfile.Profile, rows: int = 18) -> str:
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats("tottime").print_stats(rows)
    lines = buffer.getvalue().splitlines()
    start = next((n for n, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return "\n".join(line.rstrip() for line in lines[start:] if line.strip())


def report(result: ImportReport, command: str) -> str:
    minutes = result["projected_s"] / 60
    lines = [
        "# Import benchmark: a ChatGPT export", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}; load average {result['load'][0]:.1f} at the start, {result['load'][1]:.1f} "
        "at the end (a shared machine: figures are lower while others run)",
        f"- Command: `{command}`",
        f"- Input: {result['conversations']} synthetic conversations of {result['messages']} messages on the "
        f"active branch (and one abandoned regenerated answer each), {result['bytes'] / 1e6:.1f} MB of "
        "conversations.json; in-process engine, git checkpoints on, a fresh state directory; "
        + WRITES[result["bulk"]] + ".", "",
        "| phase | seconds | conversations/s | CPU seconds (the process's threads, not git's) |",
        "| --- | ---: | ---: | ---: |",
        f"| read and check the file (parse, active branches, credential scan) | {result['read_s']:.2f} | "
        f"{result['conversations'] / result['read_s']:.0f} | {result['cpu'][0]:.2f} |",
        f"| import (original retained, one page per conversation) | {result['import_s']:.2f} | "
        f"{result['conversations'] / result['import_s']:.1f} | {result['cpu'][1]:.2f} |",
        f"| **both** | **{result['total_s']:.2f}** | **{result['rate']:.1f}** | "
        f"**{result['cpu'][0] + result['cpu'][1]:.2f}** |",
        f"| the same file again (each page found and compared; the files retried) | {result['again_s']:.2f} | "
        f"{result['again_rate']:.1f} | {result['cpu'][2]:.2f} |",
        f"| closing the engine (the last git checkpoint) | {result['close_s']:.2f} | | |", "",
        f"Projected for {TARGET:,} conversations at this rate: **{result['projected_s']:.0f} s "
        f"({minutes:.1f} minutes)**.", "",
    ]
    if result["profile"]:
        lines += ["## Where the import's time goes", "",
                  "cProfile of the store's lane (where the writes run; the importing thread only waits for them), "
                  "by time spent in the function itself:", "", "```", result["profile"], "```", ""]
    return "\n".join(lines)
