"""The retrieval modes on LoCoMo: lexical, semantic, hybrid and rrf through ``search_knowledge``, and the owner's
search (``operator/search``: ``Engine.owner_search``) in its keyword and hybrid modes.

Runs after the tantivy/FTS5 comparison, on the same imported store, when an
embedding model folder is given (``--embedding-model DIR``, for instance the
folder `knowledge models pull all-minilm-l6-v2-int8` filled). The model is
registered in the benchmark's own state directory, the runtime switched on
there, and then:

- **vector build**: ``VectorIndex.rebuild`` of the partition, every text
  embedded (timed), then again with every vector in the content-hash cache;
  then the owner's first hybrid search and the catch-up it starts, which adds
  long pages' own passages (timed, with the index size after);
- **quality and latency**: each question through ``search_knowledge`` in each
  mode, the modes in rotating order question by question, top 10, the whole
  API call timed (authorization, lane, catch-up check, query embedding,
  both rankings, fusion, result rows).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from ..search import knowledge_base as kb
from ..core.answers import NotRequired, TypedDict
from ..core.errors import InvalidParams
from ..importers.locomo import owner_caller
from ..service import Engine
from . import metrics

MODES = ("lexical", "semantic", "hybrid", "rrf", "owner-keyword", "owner-hybrid")
OWNER_PREFIX = "owner-"  # the owner's search, in the mode after the prefix
BENCH_MODEL = "bench-embedder"


class EmbeddingModel(TypedDict):
    """The model measured: its folder, fingerprint and size, how long it took to load, its dimensions."""
    folder: str
    onnx_sha256: str
    bytes: int
    load_s: float
    dimensions: int


class VectorBuild(TypedDict):
    """One build of the vector index (``embed`` from nothing, then ``cached``) and what it did."""
    kind: str
    seconds: float
    indexed: int
    embedded: int
    cached: int
    removed: int
    pending: int


class PagePassages(TypedDict):
    """The owner's first hybrid search on the built index: long pages' own passages embedded and indexed."""
    seconds: float
    pages: int
    passages: int
    index_bytes: int


class ModeFigures(TypedDict):
    """Every search mode measured: latency and fallbacks per mode; the first answers (``results``), which
    the caller replaces with each mode's retrieval quality (``quality``)."""
    model: EmbeddingModel
    builds: list[VectorBuild]
    index_bytes: int
    page_passages: PagePassages
    latency: dict[str, metrics.LatencySummary]
    fallbacks: dict[str, int]
    results: NotRequired[dict[str, list[list[str]]]]
    quality: NotRequired[dict[str, metrics.RetrievalQuality]]


def measure_modes(dataset: Any, model_dir: Path, say: Callable[[str], None], limit: int = 10) -> ModeFigures:
    """Register the model, build the vectors, run every question in every mode; figures per mode."""
    from models.installed import ModelStore
    from models.local import add_local

    state = dataset.state
    model = add_local(ModelStore(state.models), model_dir, name=BENCH_MODEL, replace=True)
    config = json.loads(state.config.read_text(encoding="utf-8")) if state.config.is_file() else {}
    config.update(knowledgeRuntimeEnabled=True, embeddingModel=f"onnx/{BENCH_MODEL}")
    state.config.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    figures: dict[str, Any] = {"model": {"folder": str(model.folder), "onnx_sha256": model.fingerprint,
                                         "bytes": sum(f.size for f in model.files)}}
    with Engine(state, watch=True, git=False) as engine, owner_caller(engine, instance="knowledge-bench") as (
            caller, _):
        started = time.perf_counter()
        embedder = engine.embeddings.current()
        if embedder is None:
            raise InvalidParams(f"the embedding model in {model_dir} did not load: "
                                f"{engine.embeddings.status().reason}", field="--embedding-model")
        figures["model"].update(load_s=time.perf_counter() - started, dimensions=embedder.dimensions)
        store = engine.authorize(caller, create=False).store
        runtime = engine.runtime(store)
        say(f"locomo: embedding {dataset.records} records with {model_dir.name} ...")
        builds = []
        for label in ("embed", "cached"):
            began = time.perf_counter()
            done = runtime.call(lambda: runtime.vectors.rebuild(dataset.partition, embedder))
            builds.append({"kind": label, "seconds": time.perf_counter() - began, **done.to_dict()})
        figures["builds"] = builds
        figures["index_bytes"] = metrics.tree_bytes(runtime.vectors.path)
        began = time.perf_counter()  # the owner's first hybrid search: long pages' own passages follow from then on
        engine.owner_search(caller, {"query": dataset.queries[0], "mode": "hybrid"})
        runtime.vector_feed.settled(600)
        pages, passages = runtime.call(lambda: runtime.vectors.page_passage_count(dataset.partition))
        figures["page_passages"] = {"seconds": time.perf_counter() - began, "pages": pages, "passages": passages,
                                    "index_bytes": metrics.tree_bytes(runtime.vectors.path)}
        say(f"locomo: {len(dataset.queries)} questions x {len(MODES)} modes through search_knowledge ...")
        times: dict[str, list[int]] = {mode: [] for mode in MODES}
        results: dict[str, list[list[str]]] = {mode: [[] for _ in dataset.queries] for mode in MODES}
        fallbacks = {mode: 0 for mode in MODES}
        kb.search_knowledge(engine, caller, {"query": dataset.queries[0], "mode": "hybrid"})  # warm the lane
        for index, text in enumerate(dataset.queries):
            shift = index % len(MODES)
            for mode in MODES[shift:] + MODES[:shift]:
                began_ns = time.perf_counter_ns()
                if mode.startswith(OWNER_PREFIX):
                    answer = engine.owner_search(caller, {"query": text, "mode": mode[len(OWNER_PREFIX):],
                                                          "limit": limit})
                    times[mode].append(time.perf_counter_ns() - began_ns)
                    results[mode][index] = [hit["id"] for hit in answer["hits"]]
                    fallbacks[mode] += 1 if answer.get("vectors") == "building" or "hybridUnavailable" in answer else 0
                    continue
                envelope = kb.search_knowledge(engine, caller, {"query": text, "mode": mode, "max_results": limit})
                times[mode].append(time.perf_counter_ns() - began_ns)
                results[mode][index] = [r["knowledge_item_id"] for r in envelope["results"]]
                fallbacks[mode] += 1 if "fallback" in envelope else 0
    figures["latency"] = {mode: metrics.latency_summary(values) for mode, values in times.items()}
    figures["fallbacks"] = fallbacks
    figures["results"] = results
    return figures


def score_modes(questions: list[dict[str, Any]], results: dict[str, list[list[str]]]
                ) -> dict[str, metrics.RetrievalQuality]:
    """Retrieval quality of each mode, over the questions that have gold records (as for the engines)."""
    for position, question in enumerate(questions):
        for mode in MODES:
            question[f"kb-{mode}"] = (metrics.question_scores(question["record_ids"], results[mode][position])
                                      if question["record_ids"] else None)
    return {mode: metrics.retrieval_quality(questions, f"kb-{mode}") for mode in MODES}
