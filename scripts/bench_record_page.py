"""A large note's record page: its load by phase, this checkout against another, for docs/benchmarks/desktop.md.

    .venv/bin/python scripts/bench_record_page.py [--pairs 5] [--opens 3] [--store DIR] [--baseline CHECKOUT]
                                                  [--platform offscreen|xcb]

Writes a vault of 500 short topic notes, a hub note of 500 ``[[links]]`` to them (a Map of Content) and a
200 KB meeting log (198 days of headings, paragraphs with wiki links, numbered and nested lists, a table,
a code block and a quote each), and imports it with ``knowledge import markdown`` into ``--store`` (kept,
and reused when there). Then, for each checkout in turn (``--baseline``: the other first every second
pair), it starts that checkout's engine (``knowledge serve``) on the store and, in a process of that
checkout's window code on Qt's ``--platform`` (offscreen by default; ``xcb`` under a real X server, such as
``xvfb-run -a``), a Records view of 1280 by 800 that opens the meeting log, the hub and an ordinary note
``--opens`` times each, one after the other. Each is timed from asking for it (``open_record``) to its page
loaded (record, links and history answered and made: ``sig_content_loaded``) and then drawn (the view
grabbed), then to its body shown whole and drawn (``sig_body_shown``, where the checkout shows a long note's
first part first; else the same); and by phase: each engine call as the window's worker waits for it, the
Markdown made (parsed and rendered, all of it), and each text browser's ``setHtml``. Prints one JSON line an open,
then medians per checkout and note (its first open in the window's process, and its later ones, after the
other two notes), the ratio of this checkout's to the baseline's and the load average at each run's start.
A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTES = ("Meeting log", "Hub", "Topic 042")
WORDS = ("meeting decision budget vendor release plan risk owner deadline review design storage sync "
         "phone backup folder graph search index schema migration latency throughput customer support").split()


def write_vault(root: Path) -> None:
    """500 topic notes, a hub of 500 links to them, and a 200 KB meeting log linking to some."""
    (root / "Topics").mkdir(parents=True, exist_ok=True)
    for n in range(500):
        (root / "Topics" / f"Topic {n:03d}.md").write_text(
            f"# Topic {n:03d}\n\nAbout {WORDS[n % len(WORDS)]} and {WORDS[(n * 7) % len(WORDS)]}.\n"
            f"See [[Topic {(n + 1) % 500:03d}]].\n", encoding="utf-8")
    hub = ["# Map of content", "", "Every topic, by number.", ""]
    hub += [f"- [[Topic {n:03d}]] — {WORDS[n % len(WORDS)]}" for n in range(500)]
    (root / "Hub.md").write_text("\n".join(hub) + "\n", encoding="utf-8")
    parts, day = ["# Meeting log 2026", "", "The year's meetings, one section a day.", ""], 0
    while sum(len(part) + 1 for part in parts) < 200_000:
        day += 1

        def w(k: int) -> str:
            return WORDS[(day * 5 + k * 3) % len(WORDS)]

        parts += [f"## Day {day}: {w(0)} {w(1)}", "",
                  f"Attendees talked about the **{w(2)}** and the *{w(3)}*; see [[Topic {(day * 13) % 500:03d}]] "
                  f"and [[Topic {(day * 29) % 500:03d}|the {w(4)} notes]]. " + " ".join(w(k) for k in range(40)) + ".",
                  "", "### Decisions", "", f"1. Move the {w(5)} to next week.",
                  f"2. Ask `{w(6)}` for the {w(7)} figures.",
                  f"   - with the {w(8)} attached", f"   - and the [[Topic {(day * 31) % 500:03d}]] owner in copy", "",
                  "| item | owner | due |", "| --- | --- | --- |", f"| {w(9)} | {w(10)} | day {day + 3} |",
                  f"| {w(11)} | {w(12)} | day {day + 7} |", "",
                  "```python", f"def {w(13)}_{day}(x):", f"    return x * {day}  # {w(14)}", "```", "",
                  f"> {w(15)} {w(16)}: " + " ".join(w(k) for k in range(20, 45)), "",
                  f"- [ ] follow up on {w(17)}", f"- [x] sent the {w(18)}", ""]
    (root / "Meeting log.md").write_text("\n".join(parts) + "\n", encoding="utf-8")


# --- in the window's process (``--probe``), on the measured checkout's code ------------------------


def probe(state_root: str, opens: int) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication
    import desktop.records.markdown as markdown_module

    app = QApplication([])
    import desktop.records.page as page_module
    from desktop.client import OperatorClient
    from desktop.common import widgets
    from desktop.records.view import RecordsView
    from desktop.tasks import EngineTasks
    from engine.state.statedir import StateDir

    phases: dict[str, float] = {}

    def timed(name: str, work):  # type: ignore[no-untyped-def]
        def run(*args, **kwargs):  # type: ignore[no-untyped-def]
            began = time.perf_counter()
            try:
                return work(*args, **kwargs)
            finally:
                phases[name] = phases.get(name, 0.0) + time.perf_counter() - began
        return run

    tasks = EngineTasks(connect=lambda: OperatorClient(StateDir(Path(state_root))))
    calling = tasks._call
    tasks._call = lambda method, params: timed(f"engine {method.split('/')[-1]}", calling)(method, params)
    for name in ("body_html", "parse_body", "render_body"):  # whichever the checkout's page uses
        if hasattr(page_module, name):
            setattr(page_module, name, timed("markdown", getattr(page_module, name)))
    if hasattr(markdown_module, "BodyParse"):  # a body parsed a part at a time: its parts and its rendering
        markdown_module.parse_part = timed("markdown", markdown_module.parse_part)
        markdown_module.BodyParse.render = timed("markdown", markdown_module.BodyParse.render)
    view = RecordsView(tasks)
    browsers = {id(getattr(view.page, name)): name for name in ("header", "body", "details", "claims", "connections")}
    setting = widgets.SafeTextBrowser.setHtml
    widgets.SafeTextBrowser.setHtml = lambda browser, html: timed(
        f"setHtml {browsers.get(id(browser), 'other')}", setting)(browser, html)
    view.resize(1280, 800)
    view.show()

    def wait(done) -> None:  # type: ignore[no-untyped-def]
        deadline = time.time() + 120
        while not done() and time.time() < deadline:
            app.processEvents()
            time.sleep(0.0005)

    view.set_agent("main")
    listed: dict = {}
    tasks.request("operator/records", {"agent": "main", "kinds": ["page"], "order": "title", "limit": 200},
                  listed.update)
    wait(lambda: listed)
    ids = {row["title"]: row["id"] for row in listed["records"] if row.get("title") in NOTES}
    shown: dict = {}
    view.page.sig_content_loaded.connect(lambda record_id: shown.update(id=record_id))
    whole = getattr(view.page, "sig_body_shown", None)  # None: the checkout shows every body whole at once
    if whole is not None:
        whole.connect(lambda record_id: shown.update(body=record_id))
    for number in range(opens):
        for title in NOTES:
            phases.clear()
            shown.clear()
            began = time.perf_counter()
            view.open_record(ids[title])
            wait(lambda: shown.get("id") == ids[title])
            loaded = time.perf_counter()
            view.grab()  # laid out and painted, as far as it shows
            drawn = time.perf_counter()
            if whole is not None and shown.get("body") != ids[title]:
                wait(lambda: shown.get("body") == ids[title])
                view.grab()
            finished = time.perf_counter()
            print(json.dumps({"note": title, "open": number, "loaded_ms": 1000 * (loaded - began),
                              "shown_ms": 1000 * (drawn - began), "whole_ms": 1000 * (finished - began),
                              **{name: 1000 * spent for name, spent in phases.items()}}), flush=True)
    tasks.shutdown()


# --- the runner -----------------------------------------------------------------------------------


def _knowledge(checkout: Path, *args: str, platform: str = "offscreen", **kwargs):  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": str(checkout), "QT_QPA_PLATFORM": platform}
    return subprocess.Popen([sys.executable, *args], cwd=checkout, env=env, **kwargs)


def one_run(checkout: Path, store: Path, opens: int, platform: str) -> list[dict]:
    info = store / "engine.json"
    info.unlink(missing_ok=True)
    serve = _knowledge(checkout, "-m", "engine.cli", "--state-dir", str(store), "serve", "--port", "0",
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not info.exists():
            time.sleep(0.05)
        window = _knowledge(checkout, str(Path(__file__).resolve()), "--probe", str(store), str(opens),
                            platform=platform, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        out, _ = window.communicate(timeout=600)
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    finally:
        serve.terminate()
        serve.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--opens", type=int, default=3, help="opens of each note a run")
    parser.add_argument("--store", default="/tmp/kd-bench-record-page", help="the imported store (kept, reused)")
    parser.add_argument("--baseline", help="another checkout of the project, measured in turn, engine and window")
    parser.add_argument("--platform", default="offscreen", help="Qt's platform for the window (xcb: an X server)")
    parser.add_argument("--probe", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe(args.probe[0], int(args.probe[1]))
        return 0
    store = Path(args.store)
    if not (store / "registry.sqlite").exists():
        write_vault(store.parent / (store.name + "-vault"))
        _knowledge(ROOT, "-m", "engine.cli", "--state-dir", str(store), "import", "markdown",
                   str(store.parent / (store.name + "-vault")), stdout=subprocess.DEVNULL).wait()
    checkouts = [("this checkout", ROOT)] + ([("baseline", Path(args.baseline).resolve())] if args.baseline else [])
    results: dict[str, list[dict]] = {name: [] for name, _ in checkouts}
    loads = []
    for pair in range(args.pairs):
        for name, checkout in (checkouts if pair % 2 == 0 else checkouts[::-1]):
            loads.append(os.getloadavg()[0])
            runs = one_run(checkout, store, args.opens, args.platform)
            for run in runs:
                print(json.dumps({"checkout": name, "pair": pair, "load": loads[-1], **run}), flush=True)
            results[name].extend({**run, "pair": pair} for run in runs)
    print(f"\nload average (1 min) at each run's start: {min(loads):.2f} to {max(loads):.2f}\n")
    if args.baseline:  # each pair: the median of a run's three opens of a note (first and again), asking to drawn
        print("| pair | first | load | " + " | ".join(f"{title}: this / baseline (ratio)" for title in NOTES) + " |")
        for pair in range(args.pairs):
            cells = []
            for title in NOTES:
                shown = {name: statistics.median(run["shown_ms"] for run in runs
                                                 if run["pair"] == pair and run["note"] == title)
                         for name, runs in results.items()}
                cells.append(f"{shown['this checkout']:.0f} / {shown['baseline']:.0f} ms "
                             f"({shown['this checkout'] / shown['baseline']:.2f})")
            first = "this" if pair % 2 == 0 else "baseline"
            print(f"| {pair + 1} | {first} | {loads[2 * pair]:.2f} | " + " | ".join(cells) + " |")
        print()
    phases = sorted({key for runs in results.values() for run in runs for key in run
                     if key not in ("note", "open", "pair")})
    for title in NOTES:
        for label, first in (("first open in the window", True), ("opened again", False)):
            print(f"{title}, {label}:")
            chosen = {name: [run for run in runs if run["note"] == title and (run["open"] == 0) == first]
                      for name, runs in results.items()}
            if not all(chosen.values()):
                continue
            medians = {name: {key: statistics.median(run.get(key, 0.0) for run in picked) for key in phases}
                       for name, picked in chosen.items()}
            for key in phases:
                cells = "  ".join(f"{name} {medians[name][key]:7.1f} ms" for name, _ in checkouts)
                ratio = (f"  ratio {medians['this checkout'][key] / medians['baseline'][key]:.2f}"
                         if args.baseline and medians["baseline"][key] else "")
                print(f"  {key:24s} {cells}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
