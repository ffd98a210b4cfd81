"""Embedding throughput: records per second of the embedding model on LoCoMo's record texts, old code and new.

    python -m engine.bench.embedding --model DIR [--old TREE] [--texts N] [--rounds R] [--state-dir DIR]

``DIR`` is an installed model folder (``knowledge models pull
all-minilm-l6-v2-int8`` fills one); ``TREE`` a checkout of the code to compare
against (``git worktree add /tmp/embed-old <commit>``). The texts are the
embedding texts (title and body, ``engine/index/vectors.py``) of the current
records of a LoCoMo import made through the engine API (``--state-dir`` keeps
it for the next run).

Every figure comes from its own worker process (``python -c``, with
``PYTHONPATH`` naming the tree), which loads the model and then embeds the
texts in catch-up chunks (``EMBED_CHUNK``) through ``Embedder.embed``; the
variants take turns round by round, so a noisy machine slows them alike. A
worker reports wall seconds and CPU seconds: records per CPU-second is what a
text costs whatever else the machine runs. Variants with settings run this
tree's ``Embedder`` with ``RunSettings`` changed one field at a time.

The writes part times ``save_page`` with the Knowledge Base runtime on (a
fresh store per worker): the old code embeds each publication's text on the
lane before it acknowledges, the new one afterwards on its own thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from ..core.answers import JsonObject, NotRequired, TypedDict
from ..index.embedding import RunSettings
from . import metrics
from .report_file import write_report

# ``quality``'s figures of one kind of products, and of both side by side (keys that are not names: the
# functional form).
ProductQuality = TypedDict("ProductQuality", {"questions": int, "recall@10": float, "hit@10": float})
EmbeddingQuality = TypedDict("EmbeddingQuality", {
    "float32 products": ProductQuality, "int8 products": ProductQuality,
    "cosine_min": float, "cosine_median": float, "top10_overlap": float})


class VariantFigures(TypedDict):
    """One variant's embedding throughput: the median over its rounds, and each round's records/s."""
    tree: str
    settings: dict[str, int | bool | None] | None  # RunSettings' fields; None: the old code's own defaults
    fingerprint: str
    records_per_s: float
    records_per_cpu_s: float
    runs: list[float]


class WriteFigures(TypedDict):
    """The writes worker: each write's nanoseconds, all acknowledged, the vectors caught up, and how many."""
    write_ns: list[int]
    acknowledged_s: float
    caught_up_s: float
    vectors: int


class EmbeddingReport(TypedDict):
    texts: int
    rounds: int
    variants: dict[str, VariantFigures]
    writes: dict[str, list[WriteFigures]]  # by code tree
    texts_all: NotRequired[int]  # the command adds these two: every text, and the quality asked for
    quality: NotRequired[EmbeddingQuality]

DEFAULT_OUTPUT = Path("docs") / "benchmarks" / "embedding.md"
HERE = Path(__file__).resolve().parents[2]

# One worker: load the model, embed the texts in catch-up chunks, print the figures as JSON.
EMBED_WORKER = r"""
import json, sys, time
from pathlib import Path
from models.installed import ModelStore
from models.local import add_local
from engine.index import embedding
from engine.index.vectors import EMBED_CHUNK
request = json.loads(sys.argv[1])
texts = json.loads(Path(request["texts"]).read_text(encoding="utf-8"))
model = add_local(ModelStore(Path(request["models"])), request["model"], name="bench-embedder", replace=True)
options = {} if request["settings"] is None else {"settings": embedding.RunSettings(**request["settings"])}
embedder = embedding.Embedder(model, **options)
embedder.load()
embedder.embed(texts[:EMBED_CHUNK])
began, cpu = time.perf_counter(), time.process_time()
for start in range(0, len(texts), EMBED_CHUNK):
    embedder.embed(texts[start:start + EMBED_CHUNK])
print(json.dumps({"seconds": time.perf_counter() - began, "cpu_seconds": time.process_time() - cpu,
                  "texts": len(texts), "fingerprint": embedder.fingerprint}))
"""

# One worker: a fresh store with the runtime on; time each save_page, then until the vectors caught up.
WRITES_WORKER = r"""
import json, sys, time
from pathlib import Path
from engine.access.authority import AgentCaller
from engine.service import Engine
from engine.state.statedir import StateDir
from models.installed import ModelStore
from models.local import add_local
request = json.loads(sys.argv[1])
texts = json.loads(Path(request["texts"]).read_text(encoding="utf-8"))[:request["writes"]]
state = StateDir(Path(request["state"]))
state.root.mkdir(parents=True)
add_local(ModelStore(state.models), request["model"], name="bench-embedder")
state.config.write_text(json.dumps({"knowledgeRuntimeEnabled": True, "embeddingModel": "onnx/bench-embedder"}))
with Engine(state, watch=False, git=False) as engine:
    caller = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
    engine.embeddings.current()
    engine.save_page(caller, {"requestId": "warm", "type": "note", "title": "Warm up", "body": "Warm up."})
    runtime = engine.runtime(engine.authorizer.authorize(caller).store)
    settle = getattr(runtime, "vectors_settled", lambda timeout: True)
    settle(600)
    times = []
    began = time.perf_counter()
    for number, text in enumerate(texts):
        title, _, body = text.partition("\n\n")
        started = time.perf_counter_ns()
        engine.save_page(caller, {"requestId": f"w{number}", "type": "note", "title": f"{title[:150]} ({number})",
                                  "body": body or title})
        times.append(time.perf_counter_ns() - started)
    acknowledged = time.perf_counter() - began
    settle(600)
    caught_up = time.perf_counter() - began
    vectors = runtime.call(lambda: runtime.vectors.count("private"))
print(json.dumps({"write_ns": times, "acknowledged_s": acknowledged, "caught_up_s": caught_up, "vectors": vectors}))
"""


def sweep_variants() -> dict[str, dict[str, Any]]:
    """This tree's defaults, then one setting changed at a time."""
    default = asdict(RunSettings())
    changes: dict[str, dict[str, Any]] = {
        "new defaults": {},
        "float32 products (int8 off)": {"int8": False},
        "1 thread": {"threads": 1},
        "spinning threads": {"spinning": True},
        "batches of 32 rows / 8,192 tokens (the old cap)": {"rows": 32, "tokens": 8192},
        "batches of 32 rows / 2,048 tokens": {"rows": 32, "tokens": 2048},
        "batches of 32 rows / 256 tokens": {"rows": 32, "tokens": 256},
        "batches of 8 rows / 512 tokens": {"rows": 8, "tokens": 512},
    }
    return {label: {**default, **change} for label, change in changes.items()}


def run_worker(tree: Path, code: str, request: dict[str, Any], timeout: float = 3600) -> JsonObject:
    """The figures a worker printed, as JSON (each worker prints its own)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", code, json.dumps(request)], cwd=str(tree), env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the worker in {tree} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def locomo_texts(state_dir: Path, say: Callable[[str], None]) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """The embedding texts of a LoCoMo import's current records (imported into ``state_dir`` if empty), their
    record ids, and the questions with their gold records."""
    from ..importers.locomo import owner_caller
    from ..service import Engine
    from .search import Options, prepare_locomo

    say(f"LoCoMo: importing into {state_dir} (or reusing the import there) ...")
    dataset = prepare_locomo(Options(state_dir=state_dir), state_dir.parent)
    with Engine(dataset.state, watch=False, git=False) as engine, owner_caller(
            engine, instance="knowledge-bench") as (caller, _):
        runtime = engine.runtime(engine.authorize(caller, create=False).store)
        rows = runtime.call(lambda: list(runtime.catalog.current(dataset.partition)))
        texts = runtime.call(lambda: runtime.vectors._texts(dataset.partition, rows))
    kept = [(row.record_id, text) for row, text in zip(rows, texts) if text]
    return [text for _, text in kept], [record_id for record_id, _ in kept], dataset.questions


def quality(model: Path, texts: list[str], ids: list[str], questions: list[dict[str, Any]], work: Path,
            say: Callable[[str], None]) -> EmbeddingQuality:
    """Semantic recall@10 and hit@10 on LoCoMo (exact nearest neighbours), int8 products against float32."""
    import numpy as np

    from models.installed import ModelStore
    from models.local import add_local
    from ..index.embedding import Embedder

    installed = add_local(ModelStore(work / "models-quality"), model, name="bench-embedder", replace=True)
    asked = [question for question in questions if question["record_ids"]]
    found: dict[str, Any] = {}
    for label, int8 in (("float32 products", False), ("int8 products", True)):
        say(f"quality: {label}: embedding {len(texts)} records and {len(asked)} questions ...")
        embedder = Embedder(installed, settings=RunSettings(int8=int8))
        embedder.load()
        records = embedder.embed(texts)
        queries = embedder.embed([question["question"] for question in asked])
        top = np.argsort(-(queries @ records.T), axis=1)[:, :10]
        scores = [metrics.question_scores(question["record_ids"], [ids[i] for i in row])
                  for question, row in zip(asked, top)]
        found[label] = {"vectors": records, "top": top, "questions": len(asked),
                        "recall@10": 100 * sum(score["recall@10"] for score in scores) / len(scores),
                        "hit@10": 100 * sum(score["hit@10"] for score in scores) / len(scores)}
    base, int8 = found["float32 products"], found["int8 products"]
    cosines = (base["vectors"] * int8["vectors"]).sum(axis=1)
    overlap = sum(len(set(a) & set(b)) for a, b in zip(base["top"], int8["top"])) / (10 * len(asked))
    return {label: {key: value for key, value in figures.items() if key not in ("vectors", "top")}
            for label, figures in found.items()} | {
        "cosine_min": float(cosines.min()), "cosine_median": float(np.median(cosines)), "top10_overlap": overlap}


def measure(model: Path, old: Path | None, texts: list[str], rounds: int, writes: int, work: Path,
            say: Callable[[str], None], *, sweep: bool = True) -> EmbeddingReport:
    """Every variant's embedding figures (``sweep``: the settings one at a time too) and the writes."""
    texts_file = work / "texts.json"
    texts_file.write_text(json.dumps(texts), encoding="utf-8")
    variants: dict[str, tuple[Path, dict[str, Any] | None]] = {}
    if old is not None:
        variants["old code"] = (old, None)
    for label, settings in sweep_variants().items():
        if sweep or label == "new defaults":
            variants[label] = (HERE, settings)
    embed: dict[str, list[dict[str, Any]]] = {label: [] for label in variants}
    labels = list(variants)
    for round_number in range(rounds):
        shift = round_number % len(labels)
        for label in labels[shift:] + labels[:shift]:
            tree, settings = variants[label]
            request = {"texts": str(texts_file), "models": str(work / f"models-{len(embed[label])}-{abs(hash(label))}"),
                       "model": str(model), "settings": settings}
            figures = run_worker(tree, EMBED_WORKER, request)
            embed[label].append(figures)
            say(f"round {round_number + 1}: {label}: {figures['texts'] / figures['seconds']:.1f} records/s, "
                f"{figures['texts'] / figures['cpu_seconds']:.1f} per CPU-second")
    result: EmbeddingReport = {"texts": len(texts), "rounds": rounds, "variants": {}, "writes": {}}
    for label, runs in embed.items():
        tree, settings = variants[label]
        result["variants"][label] = {
            "tree": str(tree), "settings": settings, "fingerprint": runs[0]["fingerprint"],
            "records_per_s": metrics.median([run["texts"] / run["seconds"] for run in runs]),
            "records_per_cpu_s": metrics.median([run["texts"] / run["cpu_seconds"] for run in runs]),
            "runs": [round(run["texts"] / run["seconds"], 1) for run in runs]}
    if writes:
        trees = ([("old code", old)] if old is not None else []) + [("new code", HERE)]
        for label, tree in trees * max(1, rounds // 2):
            state = work / f"writes-{label.replace(' ', '-')}-{time.monotonic_ns()}"
            figures = run_worker(tree, WRITES_WORKER, {"texts": str(texts_file), "model": str(model),
                                                       "state": str(state), "writes": writes})
            result["writes"].setdefault(label, []).append(figures)
            say(f"writes: {label}: {writes} acknowledged in {figures['acknowledged_s']:.1f} s, vectors caught up "
                f"after {figures['caught_up_s']:.1f} s")
    return result


def report(result: EmbeddingReport, command: str, machine: metrics.Machine) -> str:
    variants = result["variants"]
    baseline = variants.get("old code", variants["new defaults"])
    lines = [
        "# Embedding throughput",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with `{command}`.",
        "This file is written by `engine/bench/embedding.py`; run the command again to refresh it.",
        "",
        f"- Machine: {machine['cpu']}, {machine['cores']} cores, "
        f"{(machine['memory_bytes'] or 0) / 2 ** 30:.0f} GiB memory; {machine['system']}; Python {machine['python']}. "
        "Shared and noisy: every figure is the median of the rounds, the variants taking turns round by round.",
        f"- Texts: the embedding texts of the {result['texts']:,} current records of a LoCoMo import (title and "
        "body), embedded in catch-up chunks of 128 through `Embedder.embed`, each variant in its own process "
        "after loading the model and one warm-up chunk.",
        "- records/s is wall-clock; records per CPU-second counts every thread of the process (a spinning "
        "thread's waiting included), so it stays comparable when other work shares the machine.",
        "",
        "| variant | int8 products | threads | spinning | rows / tokens per run | records/s | x old | "
        "records per CPU-second | x old | runs (records/s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, figures in variants.items():
        settings = figures["settings"]
        if settings is None:
            shape = ["no (float32)", "all cores", "yes", "32 / 8,192"]
        else:
            shape = ["yes" if settings["int8"] else "no (float32)",
                     str(settings["threads"]) if settings["threads"] else "all cores",
                     "yes" if settings["spinning"] else "no", f"{settings['rows']} / {settings['tokens']:,}"]
        lines.append("| " + " | ".join([label, *shape, f"{figures['records_per_s']:.1f}",
                                        f"{figures['records_per_s'] / baseline['records_per_s']:.2f}",
                                        f"{figures['records_per_cpu_s']:.1f}",
                                        f"{figures['records_per_cpu_s'] / baseline['records_per_cpu_s']:.2f}",
                                        " ".join(map(str, figures["runs"]))]) + " |")
    if result["writes"]:
        lines += ["", "## Writes with the Knowledge Base runtime on", "",
                  "`save_page` of the first texts as notes into a fresh store (git off), the model loaded first; "
                  "milliseconds per acknowledged write, and how long after the first write the vectors of all "
                  "of them were in the index.", "",
                  "| code | writes | p50 ms | p99 ms | mean ms | all acknowledged s | vectors caught up s |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for label, runs in result["writes"].items():
            summary = metrics.latency_summary([ns for run in runs for ns in run["write_ns"]])
            lines.append(f"| {label} | {len(runs[0]['write_ns'])} x {len(runs)} | {summary['p50_ms']:.1f} | "
                         f"{summary['p99_ms']:.1f} | {summary['mean_ms']:.1f} | "
                         f"{metrics.median([run['acknowledged_s'] for run in runs]):.2f} | "
                         f"{metrics.median([run['caught_up_s'] for run in runs]):.2f} |")
    if "quality" in result:
        figures = result["quality"]
        lines += ["", "## Retrieval quality: int8 products against float32", "",
                  f"Semantic search on LoCoMo ({figures['int8 products']['questions']} questions with gold records, "
                  f"all {result['texts_all']:,} records; exact nearest neighbours by dot product, top 10), "
                  "the same model file with its weight products in float32 (as onnxruntime runs the graph as "
                  "shipped) and in int8 (as the engine now runs it).", "",
                  "| products | recall@10 | hit@10 |", "| --- | --- | --- |"]
        for label in ("float32 products", "int8 products"):
            lines.append(f"| {label} | {figures[label]['recall@10']:.1f} | {figures[label]['hit@10']:.1f} |")
        lines += ["", f"Record vectors, int8 against float32: cosine median {figures['cosine_median']:.4f}, "
                  f"lowest {figures['cosine_min']:.4f}; the two top 10s share {100 * figures['top10_overlap']:.1f}% "
                  "of their records."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.embedding", description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, type=Path, help="an installed embedding model folder")
    parser.add_argument("--old", type=Path, help="a checkout of the code to compare against")
    parser.add_argument("--texts", type=int, default=1024, help="how many LoCoMo texts (default 1024)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--writes", type=int, default=200, help="save_page calls per writes worker (0: none)")
    parser.add_argument("--state-dir", type=Path, help="a LoCoMo import to reuse (or fill)")
    parser.add_argument("--quality", action="store_true",
                        help="also semantic recall on LoCoMo, int8 products against float32 (every text)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    command = (f"python -m engine.bench.embedding --model {args.model} --texts {args.texts} --rounds {args.rounds} "
               f"--writes {args.writes}" + (f" --old {args.old}" if args.old else "")
               + (" --quality" if args.quality else ""))

    def say(line: str) -> None:
        print(line, flush=True)

    with tempfile.TemporaryDirectory(prefix="embedding-bench-") as scratch:
        work = Path(scratch)
        texts, ids, questions = locomo_texts((args.state_dir or work / "locomo-state").absolute(), say)
        result = measure(args.model.absolute(), args.old.absolute() if args.old else None, texts[:args.texts],
                         args.rounds, args.writes, work, say)
        result["texts_all"] = len(texts)
        if args.quality:
            result["quality"] = quality(args.model.absolute(), texts, ids, questions, work, say)
    text = report(result, command, metrics.machine())
    write_report(args.output, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
