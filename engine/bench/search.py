"""``knowledge bench search``: our tantivy search side by side with SQLite FTS5, in one run.

Two data sets:

- **LoCoMo** (quality and speed): the file is imported into a throwaway
  state directory through the engine API (``engine/importers/locomo.py``); each
  question is a query and the claims citing its evidence turns are its gold
  records.  Tantivy answers through the real ``Engine.search``; FTS5 answers
  over a table of exactly the same current records.
- **generated** (speed): just under 100,000 deterministic note pages written
  straight into the private partition of a fresh store (the engine refuses
  to scan more than ``MAX_SCAN_ENTRIES`` filesystem entries per partition,
  directories included), then caught up by the engine's catalog sync.

Index builds run in worker subprocesses (``python -m engine.bench.search
--worker SPEC``), one per engine and repeat, so each reports its own peak
resident memory, Rust allocations included.  Query latency is measured in
this process with both engines open, query by query, the order of engines
rotating, so a noisy machine slows both alike.  Nothing here asserts
anything about speed: the figures are printed and written to a report.
"""

from __future__ import annotations

import gc
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ..index.analysis import Analyzer
from ..access.authority import Caller
from ..store.walk import MAX_SCAN_ENTRIES
from ..core.errors import InvalidParams
from ..index.tantivy_index import INDEX_DIR, PartitionIndex, build_schema
from ..core.answers import NotRequired, TypedDict
from ..importers.locomo import evidence_records, load_locomo, owner_caller
from ..vault.records import PRIVATE_SCOPE
from ..state.registry import StoreRecord
from ..service import Engine
from ..state.statedir import StateDir
from ..store.store import STATE_DB, VAULT_DIR, partition_dir
from . import metrics
from .corpus import NOTE_SETS, write_partition
from .defaults import LOCOMO_DATA as DEFAULT_DATA, SEARCH_OUTPUT as DEFAULT_OUTPUT
from .engines import FtsReference, TantivyCore, current_documents, fts5_problem
from .modes import ModeFigures, measure_modes, score_modes
from .report import render_markdown
from .report_file import write_report

LIMIT = 10
BUILDERS = ("tantivy", "tantivy-core", "fts5")  # worker kinds: the engine's rebuild, tantivy alone, FTS5
RUNNERS = ("tantivy", "fts5", "api")  # latency: tantivy core, FTS5, the whole Engine.search call
WARMUP_QUERIES = 200
# Filesystem entries a generated partition holds besides its records: pages/, pages/notes/, the note
# sets, the partition's identity marker and the seed page.
_EXTRA_ENTRIES = 2 + len(NOTE_SETS) + 2


class WorkerFigures(TypedDict):
    """One build in a worker: memory before and at the peak (KiB), the catalog read (FTS5 and tantivy alone),
    the build, the index's records and bytes, one pass over the queries."""
    kind: str
    baseline_kib: int
    extract_s: NotRequired[float]
    build_s: float
    records: int
    query_pass_s: float
    index_bytes: int
    peak_kib: int


class BuildSummary(TypedDict):
    """The builds of one kind: medians over the repeats, the counts and sizes, each run's build seconds."""
    build_s: float
    extract_s: NotRequired[float]
    baseline_kib: float
    peak_kib: float
    query_pass_s: float
    runs: int
    records: int
    index_bytes: int
    build_runs_s: list[float]


class Agreement(TypedDict):
    """Queries where tantivy alone and ``Engine.search`` give the same top 10."""
    same_top10: int
    queries: int


class SideBySide(TypedDict):
    """Every runner's timings (ns), its first round's answers, the queries the API refused."""
    times: dict[str, list[int]]
    results: dict[str, list[list[str]]]
    refused: int
    agreement: Agreement


class NoGold(TypedDict):
    """LoCoMo questions without gold records: all of them, those without evidence, by category."""
    total: int
    no_evidence: int
    by_category: dict[str, int]


class DatasetFigures(TypedDict):
    """One data set: its size and preparation, the builds, latency per runner, and (LoCoMo) quality per
    engine and mode or (generated) known-item figures."""
    records: int
    queries: int
    preparation: dict[str, float]
    builds: dict[str, BuildSummary]
    latency: dict[str, metrics.LatencySummary]
    agreement: Agreement
    refused: int
    quality: NotRequired[dict[str, metrics.RetrievalQuality]]
    no_gold: NotRequired[NoGold]
    modes: NotRequired[ModeFigures]
    questions: NotRequired[list[dict[str, Any]]]  # each LoCoMo question with every engine's scores
    known_item: NotRequired[dict[str, dict[str, float]]]


class RunOptions(TypedDict):
    records: int
    queries: int
    rounds: int
    repeats: int
    samples: int | None
    seed: int
    quick: bool
    limit: int


class SearchReport(TypedDict):
    """``knowledge bench search``: when, how and on what it ran; each data set's figures; how long it took."""
    date: str
    command: str
    machine: metrics.Machine
    versions: dict[str, str]
    options: RunOptions
    locomo: DatasetFigures
    generated: DatasetFigures
    elapsed_s: float


class BenchmarkSkipped(Exception):
    """The benchmark cannot run here (no data set, no FTS5); nothing was measured.

    Never raised by the engine itself, so it stays outside ``engine/core/errors.py``.
    """


@dataclass
class Options:
    data: Path = DEFAULT_DATA
    state_dir: Path | None = None  # a LoCoMo state dir to reuse (or fill); None: a throwaway one
    output: Path | None = DEFAULT_OUTPUT
    quick: bool = False
    records: int = 99_900
    queries: int = 500
    rounds: int = 3
    repeats: int = 3
    samples: int | None = None  # only the first N LoCoMo conversations
    seed: int = 0
    work_dir: Path | None = None  # kept when given (a LoCoMo import there is reused); a temporary one is removed
    embedding_model: Path | None = None  # a model folder: adds the search_knowledge modes on LoCoMo (modes.py)
    command: str = "knowledge bench search"

    @classmethod
    def quick_run(cls, **overrides: Any) -> "Options":
        values = {"quick": True, "records": 10_000, "queries": 50, "rounds": 1, "repeats": 1, "samples": 2}
        values.update(overrides)
        return cls(**values)


@dataclass
class Dataset:
    name: str
    state: StateDir
    store: StoreRecord
    queries: list[str]
    records: int = 0
    partition: str = PRIVATE_SCOPE
    questions: list[dict[str, Any]] = field(default_factory=list)  # LoCoMo: gold records per query
    sources: list[str] = field(default_factory=list)  # generated: the record each query came from
    preparation: dict[str, Any] = field(default_factory=dict)

    @property
    def state_db(self) -> Path:
        return self.store.path / STATE_DB

    @property
    def index_dir(self) -> Path:
        return self.store.path / INDEX_DIR / self.partition.replace(":", "-")


# --- the run ----------------------------------------------------------------------------------


def run(options: Options, say: Callable[[str], None] = print) -> SearchReport:
    """Measure both engines on both data sets; returns the report (also written to ``options.output``)."""
    problem = fts5_problem()
    if problem is not None:
        raise BenchmarkSkipped(f"{problem}; the FTS5 reference cannot be measured")
    if not options.data.is_file():
        raise BenchmarkSkipped(f"no LoCoMo file at {options.data} (it is not shipped with the project: see "
                               "../shared/data/README.md, or pass --data PATH)")
    if options.records + _EXTRA_ENTRIES > MAX_SCAN_ENTRIES:
        raise InvalidParams(f"at most {MAX_SCAN_ENTRIES - _EXTRA_ENTRIES} generated records fit in one "
                            f"partition (the engine scans at most {MAX_SCAN_ENTRIES} entries)", field="--records")
    started = time.perf_counter()
    work = options.work_dir or Path(tempfile.mkdtemp(prefix="knowledge-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "command": options.command,
        "machine": metrics.machine(), "versions": metrics.versions(),
        "options": {"records": options.records, "queries": options.queries, "rounds": options.rounds,
                    "repeats": options.repeats, "samples": options.samples, "seed": options.seed,
                    "quick": options.quick, "limit": LIMIT},
    }
    try:
        say("LoCoMo: importing through the engine API ...")
        locomo = prepare_locomo(options, work)
        say(f"LoCoMo: {locomo.records} current records, {len(locomo.questions)} questions")
        report["locomo"] = measure(locomo, options, work, say)
        say(f"generated: writing {options.records} records ...")
        generated = prepare_generated(options, work)
        say(f"generated: {generated.records} current records; catalog sync "
            f"{generated.preparation['sync_s']:.1f} s")
        report["generated"] = measure(generated, options, work, say)
    finally:
        if options.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    report["elapsed_s"] = time.perf_counter() - started
    text = render_markdown(report)
    if options.output is not None:
        write_report(options.output, text)
    say(text)
    return report


def measure(dataset: Dataset, options: Options, work: Path, say: Callable[[str], None]) -> DatasetFigures:
    """Builds in workers, then quality and latency side by side."""
    queries_file = work / f"{dataset.name}-queries.json"
    queries_file.write_text(json.dumps(dataset.queries), encoding="utf-8")
    fts_db = work / f"{dataset.name}-fts5.sqlite"
    builds: dict[str, list[WorkerFigures]] = {kind: [] for kind in BUILDERS}
    for repeat in range(options.repeats):
        order = BUILDERS[repeat % len(BUILDERS):] + BUILDERS[:repeat % len(BUILDERS)]
        for kind in order:
            say(f"{dataset.name}: build {repeat + 1}/{options.repeats} with {kind} ...")
            builds[kind].append(run_worker({
                "kind": kind, "state": str(dataset.state.root), "store": dataset.store.store_id,
                "partition": dataset.partition, "state_db": str(dataset.state_db), "queries": str(queries_file),
                "fts_db": str(fts_db), "scratch": str(work / f"{dataset.name}-tantivy-core"),
            }))
    say(f"{dataset.name}: {len(dataset.queries)} queries x {options.rounds} rounds, engines side by side ...")
    side = side_by_side(dataset, fts_db, options)
    result: DatasetFigures = {
        "records": dataset.records, "queries": len(dataset.queries), "preparation": dataset.preparation,
        "builds": {kind: summarize_builds(runs) for kind, runs in builds.items()},
        "latency": {name: metrics.latency_summary(times) for name, times in side["times"].items()},
        "agreement": side["agreement"], "refused": side["refused"],
    }
    if dataset.questions:
        for position, question in enumerate(dataset.questions):
            for engine, runner in (("tantivy", "api"), ("fts5", "fts5")):
                question[engine] = (metrics.question_scores(question["record_ids"], side["results"][runner][position])
                                    if question["record_ids"] else None)
        no_gold = [q for q in dataset.questions if not q["record_ids"]]
        result["quality"] = {engine: metrics.retrieval_quality(dataset.questions, engine)
                             for engine in ("tantivy", "fts5")}
        result["no_gold"] = {"total": len(no_gold), "no_evidence": sum(1 for q in no_gold if not q["evidence"]),
                             "by_category": {str(c): sum(1 for q in no_gold if q["category"] == c)
                                             for c in metrics.CATEGORIES}}
        if options.embedding_model is not None:
            modes = measure_modes(dataset, options.embedding_model, say, LIMIT)
            modes["quality"] = score_modes(dataset.questions, modes.pop("results"))
            result["modes"] = modes
        result["questions"] = dataset.questions  # per question, for callers; never written to the report
    if dataset.sources:
        result["known_item"] = {"tantivy": metrics.known_item(dataset.sources, side["results"]["api"]),
                                "fts5": metrics.known_item(dataset.sources, side["results"]["fts5"])}
    return result


def summarize_builds(runs: list[WorkerFigures]) -> BuildSummary:
    """Medians over repeats (the machine is noisy); counts and sizes are the same in every run."""
    summary = {key: metrics.median([run[key] for run in runs])
               for key in ("build_s", "extract_s", "baseline_kib", "peak_kib", "query_pass_s") if key in runs[0]}
    summary.update(runs=len(runs), records=runs[-1]["records"], index_bytes=runs[-1]["index_bytes"],
                   build_runs_s=[run["build_s"] for run in runs])
    return summary


# --- data sets ----------------------------------------------------------------------------------


def prepare_locomo(options: Options, work: Path) -> Dataset:
    """Import LoCoMo (or reuse an import) and learn each question's gold records."""
    data = load_locomo(options.data)
    if options.samples is not None:
        data = data[:options.samples]
    state = StateDir((options.state_dir or work / "locomo-state").absolute())
    started = time.perf_counter()
    with Engine(state, watch=False, git=False) as engine, owner_caller(engine, instance="knowledge-bench") as (
            caller, _):
        _check_reusable(engine, caller, state)
        questions = evidence_records(engine, caller, data)
        store = engine.authorize(caller, create=False).store
        assert store is not None  # the import created it
        records = _current_count(engine, store)
    return Dataset("locomo", state, store, [q["question"] for q in questions], records, questions=questions,
                   preparation={"import_s": time.perf_counter() - started})


def _check_reusable(engine: Engine, caller: Caller, state: StateDir) -> None:
    """A state dir may be reused only when it holds nothing but a LoCoMo import."""
    store = engine.authorize(caller, create=False).store
    if store is None:
        return
    runtime = engine.runtime(store)
    others = runtime.call(lambda: runtime.store.applied_besides("locomo-"))
    if others:
        raise InvalidParams(f"{state.root} holds knowledge besides a LoCoMo import; give an empty directory "
                            "or one a previous benchmark filled", field="--state-dir")


def _current_count(engine: Engine, store: StoreRecord, partition: str = PRIVATE_SCOPE) -> int:
    runtime = engine.runtime(store)
    return runtime.call(lambda: runtime.catalog.current_count(partition))


def prepare_generated(options: Options, work: Path) -> Dataset:
    """A fresh store with a seed page, the generated records written in, then the catalog caught up."""
    state = StateDir((work / "generated-state").absolute())
    if state.root.exists():
        shutil.rmtree(state.root)
    with Engine(state, watch=False, git=False) as engine, owner_caller(engine, instance="knowledge-bench") as (
            caller, _):
        engine.save_page(caller, {"requestId": "bench-seed", "type": "note", "title": "Benchmark seed page",
                                  "body": "The store this benchmark writes its generated notes into."})
        store = engine.authorize(caller, create=False).store
        assert store is not None
    started = time.perf_counter()
    queries = write_partition(store.path / VAULT_DIR / partition_dir(PRIVATE_SCOPE), options.records,
                              options.queries, options.seed)
    write_s = time.perf_counter() - started
    with Engine(state, watch=False, git=False) as engine:
        runtime = engine.runtime(store)
        sync_s = _timed(lambda: runtime.call(lambda: runtime.prepare(PRIVATE_SCOPE)))
        rescan_s = _timed(lambda: runtime.call(lambda: runtime.prepare(PRIVATE_SCOPE)))
        records = _current_count(engine, store)
    if records != options.records + 1:
        raise RuntimeError(f"{records} current records after the sync, expected {options.records} generated "
                           "and the seed page; see `knowledge doctor`")
    return Dataset("generated", state, store, [q["query"] for q in queries], records,
                   sources=[q["source"] for q in queries],
                   preparation={"generated": options.records, "write_s": write_s, "sync_s": sync_s,
                                "rescan_s": rescan_s, "entries": options.records + _EXTRA_ENTRIES})


def _timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


# --- side by side -----------------------------------------------------------------------------


def side_by_side(dataset: Dataset, fts_db: Path, options: Options) -> SideBySide:
    """Every query through the three runners, query by query, rotating which goes first.

    The first round's answers are kept for the quality figures.  The API is
    an owner-private caller's ``Engine.search`` on an engine with its
    watcher on, so operations do not rescan the partition.
    """
    queries = dataset.queries
    rng = random.Random(f"order-{options.seed}")
    times: dict[str, list[int]] = {name: [] for name in RUNNERS}
    results: dict[str, list[list[str]]] = {name: [[] for _ in queries] for name in RUNNERS}
    refused = 0
    with Engine(dataset.state, watch=True, git=False) as engine, owner_caller(
            engine, instance="knowledge-bench") as (caller, _):

        def api(text: str) -> list[str] | None:
            try:
                return [hit["id"] for hit in engine.search(caller, {"query": text, "limit": LIMIT})["hits"]]
            except InvalidParams:  # a query with no words to search for
                return None

        api(queries[0])  # the first operation scans the partition and opens the index
        core = TantivyCore(PartitionIndex(dataset.index_dir, build_schema(), engine.analyzer), engine.analyzer)
        reference = FtsReference(fts_db)
        runners = {"tantivy": lambda text: core.search(text, LIMIT),
                   "fts5": lambda text: reference.search(text, LIMIT), "api": api}
        try:
            for text in queries[:WARMUP_QUERIES]:
                for runner in runners.values():
                    runner(text)
            gc.collect()
            for round_number in range(options.rounds):
                order = list(range(len(queries)))
                rng.shuffle(order)
                for position, index in enumerate(order):
                    shift = position % len(RUNNERS)
                    for name in RUNNERS[shift:] + RUNNERS[:shift]:
                        started = time.perf_counter_ns()
                        found = runners[name](queries[index])
                        times[name].append(time.perf_counter_ns() - started)
                        if round_number == 0:
                            if found is None:
                                refused += 1
                            results[name][index] = found or []
        finally:
            reference.close()
    agreement = sum(1 for core_ids, api_ids in zip(results["tantivy"], results["api"]) if core_ids == api_ids)
    return {"times": times, "results": results, "refused": refused,
            "agreement": {"same_top10": agreement, "queries": len(queries)}}


# --- workers -----------------------------------------------------------------------------------


def run_worker(spec: dict[str, Any]) -> WorkerFigures:
    """One build (and one pass over the queries) in a fresh interpreter; returns its figures."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "engine.bench.search", "--worker", json.dumps(spec)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {spec['kind']} benchmark worker failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def worker(spec: dict[str, Any]) -> WorkerFigures:
    """Build one engine's index of the partition, then answer every query once."""
    queries = json.loads(Path(spec["queries"]).read_text(encoding="utf-8"))
    partition = spec["partition"]
    figures: dict[str, Any] = {"kind": spec["kind"]}
    if spec["kind"] == "tantivy":
        with Engine(StateDir(Path(spec["state"])), watch=False, git=False) as engine:
            store = next(s for s in engine.registry.stores() if s.store_id == spec["store"])
            runtime = engine.runtime(store)
            figures["baseline_kib"] = metrics.peak_rss_kib()

            def rebuild() -> tuple[float, int, PartitionIndex]:
                build_s = _timed(lambda: runtime.indexes.rebuild(partition))
                count = runtime.indexes.ledger.indexed_count(partition)
                return build_s, count, runtime.indexes.get(partition)

            figures["build_s"], figures["records"], index = runtime.call(rebuild)
            core = TantivyCore(index, engine.analyzer)
            figures["query_pass_s"] = _timed(lambda: [core.search(text, LIMIT) for text in queries])
            figures["index_bytes"] = metrics.tree_bytes(runtime.indexes.directory(partition))
    else:
        figures["baseline_kib"] = metrics.peak_rss_kib()
        started = time.perf_counter()
        documents = current_documents(Path(spec["state_db"]), partition)
        figures["extract_s"] = time.perf_counter() - started
        if spec["kind"] == "fts5":
            target = Path(spec["fts_db"])
            started = time.perf_counter()
            engine_under_test: FtsReference | TantivyCore = FtsReference.build(target, documents)
        else:
            target = Path(spec["scratch"])
            shutil.rmtree(target, ignore_errors=True)
            started = time.perf_counter()
            engine_under_test = TantivyCore.build(target, documents, Analyzer())
        figures["build_s"] = time.perf_counter() - started
        del documents
        figures["records"] = engine_under_test.count()
        figures["query_pass_s"] = _timed(lambda: [engine_under_test.search(text, LIMIT) for text in queries])
        figures["index_bytes"] = metrics.tree_bytes(target)
    figures["peak_kib"] = metrics.peak_rss_kib()
    return figures


def worker_main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "--worker":
        print("usage: python -m engine.bench.search --worker SPEC_JSON", file=sys.stderr)
        return 2
    print(json.dumps(worker(json.loads(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
