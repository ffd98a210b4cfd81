"""``knowledge bench import --markdown-notes N``: how fast a Markdown vault with links imports.

Generates a vault of N notes in twenty folders, each of about 120 words with three ``[[links]]`` to other
notes of the vault and a tag, and imports it as ``knowledge import markdown`` does (``import_engine``: the
vault watcher and git checkpoints on, a fresh state directory).  Timed separately: reading and checking the
folder (every note parsed, links resolved, credential scan), the import (each note's original retained, a
page per note, then a ``related_to`` relationship per link), importing the same folder again (each page
found by its original and compared, each link found: all retries), and closing the engine.  With
``--profile`` the store's lane runs under cProfile during the first import.  Issue 31's targets: 10,000 notes
in at most 60 s, the same import again in at most 20 s.
"""

from __future__ import annotations

import cProfile
import os
import random
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..core.answers import TypedDict
from ..importers.common import Writer, import_engine, import_instance, owner_caller
from ..importers.markdown import import_markdown, load_markdown
from ..state.statedir import StateDir
from .imports import WRITES, _every, _on_the_lane, _top
from .socket import WORDS, machine

TARGET_NOTES, TARGET_S, TARGET_AGAIN_S = 10_000, 60.0, 20.0
FOLDERS = 20


class MarkdownImportReport(TypedDict):
    notes: int
    links: int
    bytes: int
    read_s: float
    import_s: float
    again_s: float
    close_s: float
    pages: int
    relationships: int
    profile: str | None
    load: tuple[float, float]
    bulk: bool  # items written many at a time (engine/importers/bulk.py), else one after another


def write_vault(root: Path, notes: int, seed: int = 0) -> tuple[int, int]:
    """The generated vault under ``root``: (links written, bytes written)."""
    rng = random.Random(seed)
    links = size = 0
    for number in range(notes):
        targets = sorted({rng.randrange(notes) for _ in range(3)} - {number})
        links += len(targets)
        text = (f"# Note {number}\n\n{' '.join(rng.choices(WORDS, k=120))}.\n\n"
                f"See {', '.join(f'[[Note {target}]]' for target in targets)}. #topic{number % 7}\n")
        path = root / f"Area {number % FOLDERS}" / f"Note {number}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        size += path.write_text(text, encoding="utf-8")
    return links, size


def run(notes: int = 1000, profile: bool = False, say: Callable[[str], None] = print,
        bulk: bool = True) -> MarkdownImportReport:
    with tempfile.TemporaryDirectory(prefix="knowledge-bench-markdown-") as work:
        vault = Path(work) / "vault"
        links, size = write_vault(vault, notes)
        say(f"generated {notes} notes with {links} links, {size / 1e6:.1f} MB")
        state = StateDir(Path(work) / "state")
        load_before = os.getloadavg()[0]
        engine = import_engine(state)
        profiler = cProfile.Profile() if profile else None
        try:
            started = time.perf_counter()
            plan = load_markdown(str(vault), engine.refuse_secrets)
            read = time.perf_counter()
            say(f"read and checked in {read - started:.2f} s")
            with owner_caller(engine, instance=import_instance("markdown")) as (caller, _):
                with _on_the_lane(profiler):
                    result = import_markdown(Writer(engine, caller, "markdown",
                                                    progress=_every(max(1, notes // 10), say), bulk=bulk), *plan)
                imported = time.perf_counter()
                say(f"imported in {imported - read:.2f} s")
                import_markdown(Writer(engine, caller, "markdown", bulk=bulk), *load_markdown(str(vault), engine.refuse_secrets))
                again = time.perf_counter()
                say(f"imported again (all retries) in {again - imported:.2f} s")
        finally:
            closing = time.perf_counter()
            engine.close()
            closed = time.perf_counter()
    return {"notes": notes, "links": links, "bytes": size, "read_s": read - started, "import_s": imported - read,
            "again_s": again - imported, "close_s": closed - closing, "pages": len(result["pages"]),
            "relationships": result["relationships"], "profile": _top(profiler) if profiler else None,
            "load": (load_before, os.getloadavg()[0]), "bulk": bulk}


def report(result: MarkdownImportReport, command: str) -> str:
    first = result["read_s"] + result["import_s"]
    scale = TARGET_NOTES / result["notes"]
    lines = [
        "# Import benchmark: a Markdown vault with links", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}; load average {result['load'][0]:.1f} at the start, {result['load'][1]:.1f} "
        "at the end (a shared machine: figures are lower while others run)",
        f"- Command: `{command}`",
        f"- Input: {result['notes']:,} generated notes in {FOLDERS} folders, {result['links']:,} `[[links]]` between "
        f"them, {result['bytes'] / 1e6:.1f} MB; in-process engine, git checkpoints on, a fresh state directory; "
        f"{WRITES[result['bulk']]}. Made: {result['pages']:,} pages and {result['relationships']:,} relationships.", "",
        "| phase | seconds | notes/s |", "| --- | ---: | ---: |",
        f"| read and check the folder (parse, links resolved, credential scan) | {result['read_s']:.2f} | "
        f"{result['notes'] / result['read_s']:.0f} |",
        f"| import (originals retained, a page per note, then the links) | {result['import_s']:.2f} | "
        f"{result['notes'] / result['import_s']:.1f} |",
        f"| **both** | **{first:.2f}** | **{result['notes'] / first:.1f}** |",
        f"| the same folder again (all retries) | {result['again_s']:.2f} | "
        f"{result['notes'] / result['again_s']:.1f} |",
        f"| closing the engine (the last git checkpoint) | {result['close_s']:.2f} | |", "",
        f"Projected for {TARGET_NOTES:,} notes at these rates: **{first * scale:.0f} s** (target {TARGET_S:.0f} s) "
        f"and **{result['again_s'] * scale:.0f} s** again (target {TARGET_AGAIN_S:.0f} s).", "",
    ]
    if result["profile"]:
        lines += ["## Where the import's time goes", "",
                  "cProfile of the store's lane during the first import, by time spent in the function itself:", "",
                  "```", result["profile"], "```", ""]
    return "\n".join(lines)
