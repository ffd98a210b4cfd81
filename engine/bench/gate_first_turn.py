"""``knowledge bench gate --first-turn``: the first gate turn on a freshly opened store against the turns after it.

An embedding Decision model scores a page by its vector. When the store's
vector index holds the page vectors (docs/recall-gate.md, "The gate's
vectors"), a turn embeds only the message; when it does not, the first
turns embed their shortlisted pages on the spot. This measures both:

1. A generated store of ``pages`` pages (default 400; 10-14 KB each, as
   long chat sessions are) is written once with the Knowledge Base switch
   off, the gate's vectors following the writes off the lane.
2. Each round opens a fresh engine on it (nothing in memory: not the
   Decision model's vector cache, not the store's runtime), waits for the
   models to load, opens the store and lets its vectors settle, then times
   one first turn and ``warm`` later turns, each with a message of its own.
3. The same for every candidate mode asked for, and once more with keyword
   candidates and no vectors in the store (``embeddingModel`` null: what a
   gate whose vectors are not built does).

The figure that matters is the median first turn over the median later
turn (the target: at most 2x). A benchmark, not a test: it
prints figures and writes them to the "First turn" section of its report,
leaving the report's other sections as they are.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from models.errors import ModelError
from models.installed import ModelStore
from models.local import add_local

from ..core.answers import TypedDict
from ..gate.turn import gate_turn
from ..importers.common import owner_caller
from ..service import Engine
from ..state.statedir import StateDir
from . import metrics
from .defaults import GATE_OUTPUT

AGENT = "main"
SECTION = "## First turn"
LOAD_TIMEOUT_S = 900.0
NO_VECTORS = "keyword, no store vectors"
TARGET_RATIO = 2.0

# The generated pages' words: a few hundred topics, so a message shares words with about ten pages.
_NOUNS = ("garden harbour museum budget concert bicycle kitchen library mountain violin lantern ferry orchard "
          "festival bakery workshop canal meadow theatre market tram glacier island bridge quarry vineyard studio "
          "archive lighthouse greenhouse observatory stadium railway cathedral pottery aquarium monastery castle "
          "telescope harvest recipe journey wedding birthday interview project deadline invoice contract "
          "exhibition rehearsal marathon tournament expedition sculpture painting novel poem podcast").split()
_ADJECTIVES = ("quiet crowded early late rainy sunny old new small large distant nearby careful hurried "
               "bright dim famous local").split()
_VERBS = ("visited planned described repaired booked cancelled photographed painted mentioned discussed "
          "recommended remembered").split()
_PEOPLE = ("Alice Bruno Chen Dana Emeka Fatima Greta Hiro Ines Jonas Kofi Lena Mateo Nadia Omar Priya").split()


@dataclass(frozen=True)
class Options:
    model: Path | str                   # an embedding model folder, or a model installed in ``models_from``
    models_from: Path | None = None     # a state directory holding the installed model ``model`` names
    pages: int = 400
    rounds: int = 3
    warm: int = 20                      # later turns per round
    candidates: tuple[str, ...] = ("keyword", "hybrid")
    output: Path | None = GATE_OUTPUT
    command: str = "knowledge bench gate --first-turn"
    seed: int = 29


class SetupFigures(TypedDict):
    """One setup's rounds: each round's first turn and the median of its later turns (ms), and their ratio."""
    first: list[float]
    warmMedian: list[float]
    warmP95: list[float]
    ratios: list[float]
    vectors: list[str]                  # hybrid: what the first turns' answers said of the vectors


class FirstTurnReport(TypedDict):
    command: str
    date: str
    machine: metrics.Machine
    model: str
    pages: int
    rounds: int
    warm: int
    buildSeconds: float
    setups: dict[str, SetupFigures]
    load: list[float | None]            # the 1-minute load average at the start and at the end (a shared machine)


class BenchmarkSkipped(Exception):
    """What is missing to run the benchmark (nothing was measured)."""


def run(options: Options, say: Callable[[str], None] = print) -> FirstTurnReport:
    load_at_start = metrics.load_average()
    work = Path(tempfile.mkdtemp(prefix="knowledge-bench-first-turn-"))
    try:
        state = StateDir(work / "state")
        state.create()
        name = _register(state, options)
        rng = random.Random(options.seed)
        say(f"writing {options.pages} generated pages (the gate's vectors follow off the lane) ...")
        build = _write_store(state, name, options.pages, rng)
        turns_in_all = options.rounds * (options.warm + 1) * (len(options.candidates) + 1)
        messages = [_message(rng) for _ in range(turns_in_all)]
        setups: dict[str, SetupFigures] = {}
        for setup in (*options.candidates, NO_VECTORS):
            figures: SetupFigures = {"first": [], "warmMedian": [], "warmP95": [], "ratios": [], "vectors": []}
            for round_number in range(options.rounds):
                turns = [messages.pop() for _ in range(options.warm + 1)]
                first, later, vectors = _round(state, name, setup, turns)
                warm = sorted(later)
                figures["first"].append(first)
                figures["warmMedian"].append(statistics.median(warm))
                figures["warmP95"].append(metrics.percentile(warm, 0.95))
                figures["ratios"].append(first / statistics.median(warm))
                if vectors is not None:
                    figures["vectors"].append(vectors)
                say(f"  {setup}, round {round_number + 1}: first turn {first:.1f} ms, later turns median "
                    f"{statistics.median(warm):.1f} ms")
            setups[setup] = figures
        result: FirstTurnReport = {
            "command": options.command, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": metrics.machine(), "model": name, "pages": options.pages, "rounds": options.rounds,
            "warm": options.warm, "buildSeconds": build, "setups": setups,
            "load": [load_at_start, metrics.load_average()]}
        text = render(result)
        say(text)
        if options.output is not None:
            write_section(options.output, text)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _register(state: StateDir, options: Options) -> str:
    """The embedding model registered in the throwaway state directory; its name."""
    folder = Path(options.model).expanduser()
    if not folder.is_dir():
        if options.models_from is None:
            raise BenchmarkSkipped("--model must be an embedding model folder, or the name of one installed in "
                                   "--state-dir (knowledge models pull all-minilm-l6-v2-int8)")
        try:
            folder = Path(ModelStore(StateDir(options.models_from).models).get(str(options.model)).folder)
        except ModelError as exc:
            raise BenchmarkSkipped(f"--model {options.model}: {exc.message}") from exc
    try:
        installed = add_local(ModelStore(state.models), folder, name=folder.name, replace=True)
    except ModelError as exc:
        raise BenchmarkSkipped(f"--model {folder}: {exc.message}") from exc
    return installed.name


def _configure(state: StateDir, name: str, setup: str) -> None:
    """Shadow mode, the Knowledge Base switch off; the search's embedding model is the Decision model's, so the
    store's vectors are its page vectors (``NO_VECTORS``: no embedding model for the store's vectors)."""
    candidates = "keyword" if setup == NO_VECTORS else setup
    config = {"decisionModel": f"embedding/{name}", "knowledgeRuntimeEnabled": False,
              "embeddingModel": None if setup == NO_VECTORS else f"onnx/{name}",
              "recallGate": {"mode": "shadow", "candidates": candidates}}
    state.config.write_text(json.dumps(config, indent=2), encoding="utf-8")


def _write_store(state: StateDir, name: str, pages: int, rng: random.Random) -> float:
    """The generated store, written through the engine; seconds until its vectors had followed."""
    _configure(state, name, "keyword")
    started = time.perf_counter()
    with Engine(state, watch=True) as engine, owner_caller(engine, AGENT, "bench-first-turn") as (caller, _):
        for number in range(pages):
            engine.save_page(caller, _page(number, rng))
        if not engine.runtime(engine.authorizer.authorize(caller).store).vectors_settled(LOAD_TIMEOUT_S):
            raise BenchmarkSkipped("the store's vectors did not settle")
    return time.perf_counter() - started


def _round(state: StateDir, name: str, setup: str, messages: list[str]) -> tuple[float, list[float], str | None]:
    """A fresh engine: models loaded, the store opened and its vectors settled, then the turns (gate latency, ms)."""
    _configure(state, name, setup)
    if setup == NO_VECTORS:   # derived data: without it the Decision model embeds the pages itself
        for path in state.stores.glob("*/index/vectors.v*.sqlite*"):
            path.unlink()
    with Engine(state, watch=True) as engine, owner_caller(engine, AGENT, "bench-first-turn") as (caller, _):
        status = engine.decision.wait_ready(LOAD_TIMEOUT_S)
        if status.state != "ready":
            raise BenchmarkSkipped(f"the Decision model did not load: {status.reason}")
        runtime = engine.runtime(engine.authorizer.authorize(caller).store)
        if not runtime.vectors_settled(LOAD_TIMEOUT_S):
            raise BenchmarkSkipped("the store's vectors did not settle")
        answers = [gate_turn(engine, caller, {"message": message}) for message in messages]
    failed = [a for a in answers if a["outcome"] != "shadow"]
    if failed:
        raise BenchmarkSkipped(f"a gate turn did not run to the end: {failed[0].get('stage')} "
                               f"{failed[0].get('reason')}")
    latencies = [a["latencyMs"] for a in answers]
    return latencies[0], latencies[1:], answers[0].get("vectors")


def _page(number: int, rng: random.Random) -> dict[str, Any]:
    """A page like a saved chat session: a title of two topics and 10-14 KB of sentences about them and others."""
    topics = rng.sample(_NOUNS, 2)
    target = rng.randint(10_000, 14_000)
    sentences: list[str] = []
    size = 0
    while size < target:
        noun = topics[0] if rng.random() < 0.3 else (topics[1] if rng.random() < 0.3 else rng.choice(_NOUNS))
        sentence = (f"{rng.choice(_PEOPLE)} {rng.choice(_VERBS)} the {rng.choice(_ADJECTIVES)} {noun} near the "
                    f"{rng.choice(_NOUNS)} with {rng.choice(_PEOPLE)}.")
        sentences.append(sentence)
        size += len(sentence) + 1
    return {"requestId": f"first-turn-{number}", "type": "note",
            "title": f"{topics[0].capitalize()} and {topics[1]} ({number})", "body": " ".join(sentences)}


def _message(rng: random.Random) -> str:
    first, second = rng.sample(_NOUNS, 2)
    return f"What did {rng.choice(_PEOPLE)} say about the {first} and the {second}?"


def write_section(path: Path, text: str) -> None:
    """``text`` (starting with ``SECTION``) in place of that section of ``path``, or after the rest; the other
    sections stay as they are."""
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    lines = old.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == SECTION), None)
    if start is None:
        kept_before, kept_after = lines, []
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        kept_before, kept_after = lines[:start], lines[end:]
    while kept_before and not kept_before[-1].strip():
        kept_before.pop()
    parts = ["\n".join(kept_before)] if kept_before else []
    parts.append(text.rstrip("\n"))
    if kept_after:
        parts.append("\n".join(kept_after))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(parts) + "\n", encoding="utf-8")


def first_turn_ratio(figures: SetupFigures) -> float:
    """The median first turn over the median of the rounds' later-turn medians."""
    return statistics.median(figures["first"]) / statistics.median(figures["warmMedian"])


def render(result: FirstTurnReport) -> str:
    machine = result["machine"]
    lines = [
        SECTION, "",
        f"`{result['command']}` on {result['date']}: {machine['cpu']}, {machine['cores']} cores, "
        f"{machine['system']}, Python {machine['python']}; load average {result['load'][0]} at the start, "
        f"{result['load'][1]} at the end.", "",
        f"A generated store of {result['pages']} pages of 10-14 KB (written in {result['buildSeconds']:.0f} s, its "
        f"vectors included, with the Knowledge Base switch off), Decision model `embedding/{result['model']}` in "
        f"shadow mode. Each round opens a fresh engine, waits for the models and for the store's vectors to "
        f"settle, then takes one first turn and {result['warm']} later turns, each with a message of its own; "
        f"{result['rounds']} rounds per setup. Latency is the answer's `latencyMs`.", "",
        "| setup | first turn (median, max) | later turns (median, p95) | first / later (median, max) |",
        "| --- | --- | --- | --- |",
    ]
    for setup, figures in result["setups"].items():
        lines.append(
            f"| {setup} | {statistics.median(figures['first']):.1f} ms, {max(figures['first']):.1f} ms | "
            f"{statistics.median(figures['warmMedian']):.1f} ms, {statistics.median(figures['warmP95']):.1f} ms | "
            f"{statistics.median(figures['ratios']):.2f}x, {max(figures['ratios']):.2f}x |")
    lines += ["", f"Target: the first turn at most {TARGET_RATIO:g}x a later turn, judged on the medians over the "
              "rounds (one round's ratio is a single turn against a median, on a shared machine).", ""]
    for setup, figures in result["setups"].items():
        if setup == NO_VECTORS:
            continue
        ratio = first_turn_ratio(figures)
        over = sum(1 for value in figures["ratios"] if value > TARGET_RATIO)
        said = f"; its first turns said `vectors: {', '.join(sorted(set(figures['vectors'])))}`" \
            if figures["vectors"] else ""
        lines.append(f"- {setup}: {ratio:.2f}x, {'met' if ratio <= TARGET_RATIO else 'not met'} ({over} of "
                     f"{len(figures['ratios'])} rounds over {TARGET_RATIO:g}x){said}")
    if NO_VECTORS in result["setups"] and "keyword" in result["setups"]:
        cold = statistics.median(result["setups"][NO_VECTORS]["first"])
        warm = statistics.median(result["setups"]["keyword"]["first"])
        lines.append(f"- {NO_VECTORS}: the Decision model embeds each shortlisted page it has not seen, the first "
                     f"turn's and the later ones' alike: a first turn of {cold:.0f} ms, {cold / warm:.0f}x the "
                     "keyword first turn with the store's vectors")
    lines.append("")
    return "\n".join(lines)
