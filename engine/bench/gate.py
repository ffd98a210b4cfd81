"""``knowledge bench gate``: the recall gate on LoCoMo: latency, what it injects, and a reranker against PyTorch.

1. A LoCoMo store: the file is imported into the state directory (a
   throwaway one unless ``--state-dir`` names one that already has it).
2. The model ``--model`` names: a folder (registered with ``add_local``;
   an ONNX graph, ``tokenizer.json`` and ``config.json`` are enough) or a
   model already installed in the state directory.  A cross-encoder is
   selected as ``onnx/NAME``, an embedding model as ``embedding/NAME`` (and
   as the search's ``embeddingModel``, so the store's vectors are the gate's
   page vectors).  The gate runs in ``shadow`` mode with the journal on.
3. **Gate turns**: LoCoMo questions, spread evenly over the file, each one
   ``memory/gate`` call (``gate_turn``, the socket method minus the
   socket) as the owner: latency p50/p95/max, the share inside
   ``timeoutMs`` (and inside it plus 50 ms), tokens scored per turn.
4. **Quality** (``--quality``; gate_quality.py): every question of LoCoMo
   conversations 5-9 and off-topic messages, per candidate mode; with
   ``--fit-calibration`` conversations 0-4, and the embedding provider's
   calibration fitted on them.
5. **Throughput, side by side** (only with ``--torch-python``): exactly the
   pairs each turn scored, scored again without a deadline by the engine's
   ONNX runtime (a fresh one each round, so nothing comes from the score
   cache) and by sentence-transformers' ``CrossEncoder`` on the same weights
   with PyTorch (``gate_baseline.py``), round after round so a noisy machine
   slows both alike.  Tokens per second count real tokens (special tokens
   included, padding excluded), the same pairs on both sides.
6. **Fidelity**: the first round's scores on both sides compared pair by
   pair (largest and mean difference of the probabilities, and how often
   both put the same page first), which matters when ``--variant`` runs a
   quantized graph of the weights PyTorch runs in fp32.

A benchmark, not a test: it prints figures and writes them to a report.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from models.errors import ModelError
from models.installed import ModelStore, is_model_name
from models.local import add_local

from ..access.authority import OperatorCaller
from ..core.answers import NotRequired, TypedDict
from ..decision.runtime import BooleanQuestion, DecisionRuntime
from ..gate.turn import gate_turn
from ..gate.journal import journal_turns
from ..operator.model_operator import catalogue, local_kind
from ..importers.locomo import import_locomo, load_locomo, owner_caller
from ..service import Engine
from ..state.statedir import StateDir
from ..index.vectors import embedding_text
from ..vault.frontmatter import split_document
from ..state.config import parse_settings
from . import gate_quality, metrics
from .gate_quality import FunctionWordFigures, LatencyFigures, ModeQuality
from .defaults import GATE_OUTPUT as DEFAULT_OUTPUT, LOCOMO_DATA as DEFAULT_DATA
from .report_file import write_report

MODEL_NAME = "bench-reranker"
AGENT = "main"
BASELINE = Path(__file__).with_name("gate_baseline.py")
LOAD_TIMEOUT_S = 900.0


class BenchmarkSkipped(Exception):
    """What is missing to run the benchmark (nothing was measured)."""


@dataclass(frozen=True)
class Options:
    model: Path | str | None = None     # a model folder (registered for the run) or an installed model's name
    variant: str | None = None          # an ONNX file of the folder other than onnx/model.onnx (e.g. model_int8)
    torch_python: Path | None = None    # the PyTorch comparison runs only when this is given
    data: Path = DEFAULT_DATA
    state_dir: Path | None = None
    questions: int = 150
    timeout_ms: int = 1500
    rounds: int = 3
    output: Path | None = DEFAULT_OUTPUT
    command: str = "knowledge bench gate"
    quality: bool = False               # the LoCoMo quality figures (docs/benchmarks/gate-quality.md)
    fit: bool = False                   # fit the embedding provider's calibration (conversations FIT_SAMPLES)
    candidates: tuple[str, ...] = ("keyword",)   # candidate modes the quality figures compare
    long_windows: int = 0               # recallGate.longWindows of the latency turns (the cascade)
    fit_samples: range = range(0, 5)        # LoCoMo conversations the calibration is fitted on
    report_samples: range = range(5, 10)    # the conversations the quality figures are reported on


NO_MODEL = "--model must name an installed model (knowledge models list) or a model folder"


@dataclass(frozen=True)
class ChosenModel:
    name: str                   # the installed name
    select: str                 # the decisionModel value
    kind: str                   # reranker | embedding
    folder: Path


class CalibrationFit(TypedDict):
    """The calibration fitted on the fit samples' (similarity, relevant) pairs of one mode."""
    a: float
    b: float
    pairs: int
    relevant: int
    mode: str


class QualityFigures(TypedDict):
    """Gate turns for LoCoMo questions with gold pages (and off-topic messages), per candidate mode."""
    samples: list[int]  # the first and the last conversation
    questions: int
    sessionPages: int
    offTopic: int
    modes: dict[str, ModeQuality]
    functionWords: NotRequired[FunctionWordFigures]
    fit: NotRequired[CalibrationFit]


class Fidelity(TypedDict, total=False):
    """How far the ONNX probabilities are from PyTorch's (empty when no turn could be compared)."""
    pairs: int
    turns: int
    maxDifference: float
    meanDifference: float
    sameFirst: float


class ThroughputRound(TypedDict):
    """One round, both sides back to back: tokens a second, per-turn ratios, tokens scored."""
    onnx: float
    torch: float
    turnRatios: list[float]
    onnxTokens: int
    torchTokens: int


class BaselineInfo(TypedDict, total=False):
    """What the PyTorch baseline (gate_baseline.py) says of itself."""
    torch: str
    sentenceTransformers: str
    threads: int
    loadSeconds: float


class GateThroughput(TypedDict):
    rounds: list[ThroughputRound]
    baseline: BaselineInfo
    turns: int
    fidelity: Fidelity
    pairs: int


class TokenFigures(TypedDict):
    p50: float
    mean: float


class GateSummary(TypedDict):
    """The latency turns' figures, with the PyTorch comparison's when it ran."""
    command: str
    date: str
    machine: metrics.Machine
    timeoutMs: int
    questions: int
    pages: int
    loadRate: float | None
    latency: dict[str, LatencyFigures]  # gate, wall
    inside: float
    insidePlus50: float
    tokens: TokenFigures
    candidates: float
    unscored: float
    variant: str | None
    outcomes: dict[str, int]
    throughput: GateThroughput | None
    longWindows: int
    onnxRate: NotRequired[float]
    torchRate: NotRequired[float]
    ratio: NotRequired[float]
    turnRatio: NotRequired[float]


class ModelChoice(TypedDict):
    select: str
    kind: str


class MachineLoad(TypedDict):
    start: float | None
    end: float | None


class GateReport(GateSummary):
    """``knowledge bench gate``: the summary, the model, the quality figures when asked, the load average."""
    model: ModelChoice
    quality: QualityFigures | None
    load: MachineLoad


def run(options: Options, say: Callable[[str], None] = print) -> GateReport:
    if options.torch_python is not None and not Path(options.torch_python).is_file():
        raise BenchmarkSkipped("--torch-python must name a Python with torch and sentence-transformers "
                               "(the PyTorch baseline runs there)")
    if options.model is None:
        raise BenchmarkSkipped(NO_MODEL)   # before the data is read: the data set is not shipped either
    if options.fit:
        raise BenchmarkSkipped("the embedding Decision model's calibration is fitted by `python -m "
                               "engine.bench.gate_shapes --fit` (it takes each turn's other candidates into account)")
    if not Path(options.data).is_file():
        raise BenchmarkSkipped(f"no LoCoMo file at {options.data} (it is not shipped with the project: see "
                               "../shared/data/README.md, or pass --data PATH)")
    data = load_locomo(options.data)
    samples = options.fit_samples if options.fit else options.report_samples
    if (options.quality or options.fit) and samples.stop > len(data):
        raise BenchmarkSkipped(f"the LoCoMo file has {len(data)} conversations; the quality figures need "
                               f"conversations {samples.start}-{samples.stop - 1}")
    load_at_start = _load()
    work = Path(tempfile.mkdtemp(prefix="knowledge-bench-gate-"))
    try:
        state = StateDir(options.state_dir or work / "state")
        chosen = _prepare_store(state, data, options, say)
        if options.torch_python is not None:
            _check_torch_model(chosen, options.variant)
        with Engine(state) as engine, owner_caller(engine, AGENT, "bench-gate") as (caller, _):
            status = engine.decision.wait_ready(LOAD_TIMEOUT_S)
            if status.state != "ready":
                raise BenchmarkSkipped(f"the model did not load: {status.reason}")
            rate = f"{status.tokens_per_second:.0f} tokens/s measured at load" if status.tokens_per_second else \
                "no tokens/s figure (an embedding model)"
            say(f"model {chosen.select} ready: {rate}")
            runtime = engine.runtime(engine.authorizer.authorize(caller).store)
            say("waiting for the vector index to embed the store ...")
            runtime.vectors_settled(LOAD_TIMEOUT_S)
            questions = _pick([qa["question"] for sample in data for qa in sample["qa"]], options.questions)
            gate_turn(engine, caller, {"message": "warm-up: what did they talk about last time?"})
            turns = _gate_turns(engine, caller, questions, say)
            kept = engine.on_store(OperatorCaller(AGENT), lambda rt, a: journal_turns(
                rt.store, a.partition, limit=len(questions)))[::-1]
            pages = engine.on_store(OperatorCaller(AGENT), lambda rt, a: sum(
                count for (kind, _), count in rt.catalog.current_counts(a.partition).items() if kind == "page"))
            throughput = None
            if options.torch_python is not None:
                throughput = _throughput(engine, _scored_pairs(kept, turns), chosen.folder, options, work, say)
            quality = _quality(engine, caller, state, data, chosen, options, say) \
                if options.quality or options.fit else None
        result: GateReport = {**_summary(options, turns, throughput, pages, status.tokens_per_second),
                              "model": {"select": chosen.select, "kind": chosen.kind}, "quality": quality,
                              "load": {"start": load_at_start, "end": _load()}}
        text = render(result)
        say(text)
        if options.output is not None:
            write_report(options.output, text)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _load() -> float | None:
    return metrics.load_average()


def _check_torch_model(chosen: ChosenModel, variant: str | None) -> None:
    """The PyTorch comparison runs the folder's safetensors weights as a cross-encoder."""
    needed = ("onnx/model.onnx", "tokenizer.json", "config.json", "model.safetensors")
    if chosen.kind != "reranker" or not all((chosen.folder / name).is_file() for name in needed):
        raise BenchmarkSkipped("--torch-python compares a cross-encoder with PyTorch: --model must name a reranker "
                               "folder with " + ", ".join(needed) + " (scripts/make_fullsize_reranker.py makes one)")
    if variant is not None and not (chosen.folder / "onnx" / f"{variant}.onnx").is_file():
        raise BenchmarkSkipped(f"--variant {variant}: {chosen.folder}/onnx/{variant}.onnx does not exist (make an "
                               "int8 graph with scripts/quantize_reranker.py)")


def resolve_model(store: ModelStore, model: Path | str | None, variant: str | None = None) -> ChosenModel:
    """A folder is registered (an ONNX graph is enough); anything else must name an installed model."""
    if model is None:
        raise BenchmarkSkipped(NO_MODEL)
    folder = Path(model).expanduser()
    if folder.is_dir():
        if variant is not None and not (folder / "onnx" / f"{variant}.onnx").is_file():
            raise BenchmarkSkipped(f"--variant {variant}: {folder}/onnx/{variant}.onnx does not exist")
        name = folder.name if is_model_name(folder.name) else MODEL_NAME
        try:
            installed = add_local(store, folder, name=name, replace=True, variant=variant)
        except ModelError as exc:
            raise BenchmarkSkipped(f"--model {folder}: {exc.message}") from exc
    else:
        try:
            installed = store.get(str(model))
        except ModelError as exc:
            raise BenchmarkSkipped(f"--model {model}: {exc.message}") from exc
    if not installed.runnable:
        raise BenchmarkSkipped(f"--model {model}: no ONNX graph (only ONNX models run here)")
    entries = catalogue()
    kind = entries[installed.name].kind if installed.name in entries else local_kind(installed)
    prefix = "embedding" if kind == "embedding" else "onnx"
    return ChosenModel(installed.name, f"{prefix}/{installed.name}", kind, Path(installed.folder))


def _prepare_store(state: StateDir, data: Any, options: Options, say: Callable[[str], None]) -> ChosenModel:
    state.create()
    say("registering the model (hashing its files) ...")
    chosen = resolve_model(ModelStore(state.models), options.model, options.variant)
    config = json.loads(state.config.read_text(encoding="utf-8")) if state.config.is_file() else {}
    config.update(decisionModel=chosen.select, knowledgeRuntimeEnabled=True,
                  recallGate={"mode": "shadow", "journal": True, "timeoutMs": options.timeout_ms,
                              "longWindows": options.long_windows})
    if chosen.kind == "embedding":
        config["embeddingModel"] = f"onnx/{chosen.name}"   # the store's vectors are the gate's page vectors
    state.config.write_text(json.dumps(config, indent=2), encoding="utf-8")
    with Engine(state, watch=False) as engine:
        if not engine.stores():
            say("importing LoCoMo ...")
            with owner_caller(engine, AGENT) as (caller, _):
                import_locomo(engine, caller, data)
    return chosen


def _pick(questions: list[str], count: int) -> list[str]:
    """``count`` questions spread evenly over the file (every sample contributes)."""
    if count >= len(questions):
        return questions
    step = len(questions) / count
    return [questions[int(index * step)] for index in range(count)]


def _gate_turns(engine: Engine, caller: Any, questions: list[str], say: Callable[[str], None]) -> list[dict]:
    turns = []
    for number, question in enumerate(questions, 1):
        started = time.perf_counter()
        answer = gate_turn(engine, caller, {"message": question})
        wall_ms = (time.perf_counter() - started) * 1000
        tiers = [d["tier"] for d in answer["decisions"]]
        turns.append({"latencyMs": answer["latencyMs"], "wallMs": wall_ms, "outcome": answer["outcome"],
                      "stage": answer.get("stage"), "reason": answer.get("reason"),
                      "tokens": answer.get("tokensScored", 0), "candidates": len(tiers),
                      "unscored": tiers.count("unscored"),
                      "scores": {d["id"]: d["score"] for d in answer["decisions"]}})
        if number % 25 == 0:
            say(f"  {number}/{len(questions)} turns, last {answer['latencyMs']:.0f} ms")
    return turns


def _quality(engine: Engine, caller: Any, state: StateDir, data: Any, chosen: ChosenModel, options: Options,
             say: Callable[[str], None]) -> QualityFigures:
    """Gate turns for LoCoMo questions with their gold pages (and off-topic messages), per candidate mode."""
    pages = engine.on_store(OperatorCaller(AGENT), lambda rt, a: [
        (row.record_id, row.title) for row in rt.catalog.current(a.partition, kind="page")])
    sessions = gate_quality.session_pages(data, pages)
    samples = options.fit_samples if options.fit else options.report_samples
    questions = gate_quality.gold_questions(data, sessions, samples)
    if not options.fit:
        questions += gate_quality.off_topic_questions()
    raw = engine.settings.current().raw
    figures: dict[str, Any] = {"samples": [samples.start, samples.stop - 1], "questions": len(questions),
                               "sessionPages": len(sessions), "offTopic": 0 if options.fit else
                               len(gate_quality.OFF_TOPIC_TURNS), "modes": {}}
    for mode in options.candidates:
        settings = json.loads(json.dumps(raw))
        settings["recallGate"] = {**settings.get("recallGate", {}), "candidates": mode, "journal": False}
        engine.settings.save(parse_settings(settings))
        # What the vector index holds follows the settings (hybrid's evidence passages): let it catch up first.
        engine.runtime(engine.authorizer.authorize(caller).store).vectors_settled(LOAD_TIMEOUT_S)
        say(f"quality: {len(questions)} turns, {mode} candidates ...")
        turns = []
        for question in questions:
            answer = gate_turn(engine, caller, {"message": question["message"]})
            turns.append({**question, "latencyMs": answer["latencyMs"], "outcome": answer["outcome"],
                          "scores": {d["id"]: d["score"] for d in answer["decisions"]}})
        figures["modes"][mode] = gate_quality.quality(turns)
        if chosen.kind == "embedding":   # scores are similarities: the cascade's cheap orders can be replayed
            figures["modes"][mode]["cascade"] = gate_quality.cascade_placement(turns)
        if mode == "keyword":
            figures["functionWords"] = _function_words(engine, turns)
        latencies = sorted(turn["latencyMs"] for turn in turns)
        figures["modes"][mode]["latency"] = {"p50": metrics.percentile(latencies, 0.5),
                                             "p95": metrics.percentile(latencies, 0.95), "max": latencies[-1]}
    engine.settings.save(parse_settings(json.loads(json.dumps(raw))))
    return figures


def _function_words(engine: Engine, turns: list[dict[str, Any]]) -> FunctionWordFigures:
    """Per turn, the shortlisted pages (and gold pages among them) sharing only function words with the message."""
    analyzer = engine.analyzer
    function_terms = set(analyzer.function_terms)

    def texts(rt: Any, a: Any) -> dict[str, set[str]]:
        terms = {}
        for row in rt.catalog.current(a.partition, kind="page"):
            stored = rt.catalog.revision(a.partition, row.record_id, row.revision, row.sha256)
            body = split_document(stored.text)[1] if stored is not None else ""
            terms[row.record_id] = set(analyzer.terms(embedding_text(row.title, body)))
        return terms

    page_terms = engine.on_store(OperatorCaller(AGENT), texts)
    for turn in turns:
        message = analyzer.query_terms(turn["message"])
        only = {page for page in turn["scores"]
                if gate_quality.function_word_only(message, page_terms.get(page, ()), function_terms)}
        turn["reachedByFunctionWords"] = len(only)
        turn["goldByFunctionWords"] = len(only & set(turn["gold"]))
    return gate_quality.function_word_figures(turns)


def _scored_pairs(kept: list[dict[str, Any]], turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per turn, the (message, document) pairs the gate scored, from the shadow journal."""
    pairs = []
    for turn in kept:
        scored = {d["id"] for d in turn["decisions"] if d.get("score") is not None}
        documents = [page["document"] for page in turn.get("pages", []) if page["id"] in scored and page["document"]]
        if documents:
            pairs.append({"query": turn["message"], "documents": documents})
    return pairs


def _throughput(engine: Engine, pairs: list[dict[str, Any]], model: Path, options: Options, work: Path,
                say: Callable[[str], None]) -> GateThroughput:
    pairs_file = work / "pairs.json"
    pairs_file.write_text(json.dumps(pairs), encoding="utf-8")
    # Run from a copy: a script's folder leads sys.path, and engine/bench/socket.py would shadow the stdlib's.
    baseline = work / BASELINE.name
    shutil.copyfile(BASELINE, baseline)
    settings = engine.settings.current()
    rounds = []
    baseline_info: BaselineInfo = {}
    fidelity: Fidelity = {}
    for number in range(1, options.rounds + 1):
        runtime = DecisionRuntime(lambda: settings, ModelStore(engine.state.models))   # a fresh, empty cache
        try:
            runtime.wait_ready(LOAD_TIMEOUT_S)
            onnx = []
            for turn in pairs:
                questions = [BooleanQuestion(doc, str(i)) for i, doc in enumerate(turn["documents"])]
                started = time.perf_counter()
                result = runtime.ask_boolean(turn["query"], questions, deadline=time.monotonic() + 600)
                onnx.append({"seconds": time.perf_counter() - started, "tokens": result.tokens_scored,
                             "scores": [answer.probability_true for answer in result.answers]})
        finally:
            runtime.close()
        out = work / f"torch-{number}.json"
        subprocess.run([str(options.torch_python), str(baseline), str(model), str(pairs_file), str(out)],
                       check=True, stdout=subprocess.DEVNULL)
        baseline_info = json.loads(out.read_text(encoding="utf-8"))
        torch_turns = baseline_info.pop("turns")
        if number == 1:
            fidelity = _fidelity([turn["scores"] for turn in onnx], [turn["scores"] for turn in torch_turns])
        rounds.append({"onnx": _rate(onnx), "torch": _rate(torch_turns),
                       "turnRatios": [(o["tokens"] / o["seconds"]) / (t["tokens"] / t["seconds"])
                                      for o, t in zip(onnx, torch_turns) if o["seconds"] > 0 and t["seconds"] > 0],
                       "onnxTokens": sum(o["tokens"] for o in onnx),
                       "torchTokens": sum(t["tokens"] for t in torch_turns)})
        say(f"round {number}: onnx {rounds[-1]['onnx']:.0f} tokens/s, "
            f"PyTorch {rounds[-1]['torch']:.0f} tokens/s")
    return {"rounds": rounds, "baseline": baseline_info, "turns": len(pairs), "fidelity": fidelity,
            "pairs": sum(len(turn["documents"]) for turn in pairs)}


def _fidelity(onnx: list[list[float | None]], torch: list[list[float]]) -> Fidelity:
    """Per pair, how far the ONNX probability is from PyTorch's; per turn, whether both rank the same page first."""
    differences, same_first, turns = [], 0, 0
    for ours, theirs in zip(onnx, torch):
        if len(ours) != len(theirs) or not ours or any(score is None for score in ours):
            continue
        turns += 1
        differences += [abs(float(a) - float(b)) for a, b in zip(ours, theirs)]
        same_first += max(range(len(ours)), key=lambda i: ours[i]) == max(range(len(theirs)), key=lambda i: theirs[i])
    if not differences:
        return {}
    return {"pairs": len(differences), "turns": turns, "maxDifference": max(differences),
            "meanDifference": statistics.fmean(differences), "sameFirst": same_first / turns}


def _rate(turns: list[dict[str, Any]]) -> float:
    seconds = sum(turn["seconds"] for turn in turns)
    return sum(turn["tokens"] for turn in turns) / seconds if seconds else 0.0


def _summary(options: Options, turns: list[dict[str, Any]], throughput: GateThroughput | None, pages: int,
             load_rate: float | None) -> GateSummary:
    latencies = sorted(turn["latencyMs"] for turn in turns)
    walls = sorted(turn["wallMs"] for turn in turns)
    budget = options.timeout_ms
    outcomes: dict[str, int] = {}
    for turn in turns:
        key = turn["outcome"] if turn["stage"] is None else f"{turn['outcome']} ({turn['stage']}: {turn['reason']})"
        outcomes[key] = outcomes.get(key, 0) + 1
    result: GateSummary = {
        "command": options.command, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": metrics.machine(), "timeoutMs": budget, "questions": len(turns), "pages": pages,
        "loadRate": load_rate,
        "latency": {name: {"p50": metrics.percentile(values, 0.5), "p95": metrics.percentile(values, 0.95),
                           "max": values[-1]} for name, values in (("gate", latencies), ("wall", walls))},
        "inside": sum(v <= budget for v in walls) / len(walls),
        "insidePlus50": sum(v <= budget + 50 for v in walls) / len(walls),
        "tokens": {"p50": metrics.percentile(sorted(t["tokens"] for t in turns), 0.5),
                   "mean": statistics.fmean(t["tokens"] for t in turns)},
        "candidates": statistics.fmean(t["candidates"] for t in turns),
        "unscored": statistics.fmean(t["unscored"] for t in turns),
        "variant": options.variant, "outcomes": outcomes, "throughput": throughput,
        "longWindows": options.long_windows,
    }
    if throughput is not None:
        rounds = throughput["rounds"]
        result.update(
            onnxRate=statistics.median(r["onnx"] for r in rounds),
            torchRate=statistics.median(r["torch"] for r in rounds),
            # The headline ratio is the median of the rounds' ratios: each round runs both sides back to back.
            ratio=statistics.median(r["onnx"] / r["torch"] for r in rounds) if rounds else float("nan"),
            turnRatio=statistics.median(x for r in rounds for x in r["turnRatios"]) if rounds else float("nan"))
    return result


def _graph(variant: str | None) -> str:
    return "the fp32 ONNX graph (`onnx/model.onnx`)" if variant is None else f"the ONNX graph `onnx/{variant}.onnx`"


def _fidelity_lines(fidelity: Fidelity) -> list[str]:
    if not fidelity:
        return []
    return [f"Fidelity (round 1, {fidelity['pairs']} pairs of {fidelity['turns']} turns): the ONNX probability "
            f"differs from PyTorch's by {fidelity['meanDifference']:.4f} on average and {fidelity['maxDifference']:.4f} "
            f"at most; both rank the same page first in {fidelity['sameFirst']:.1%} of turns.", ""]


def render(result: GateReport) -> str:
    machine, latency, throughput = result["machine"], result["latency"], result["throughput"]
    memory = f", {machine['memory_bytes'] / 2**30:.0f} GiB" if machine.get("memory_bytes") else ""
    model = result.get("model") or {"select": f"onnx/{MODEL_NAME}", "kind": "reranker"}
    if model["kind"] == "embedding":
        described = (f"Decision model `{model['select']}`: calibrated cosine similarity of the message and each "
                     "candidate's page text (engine/index/similarity.py).")
    else:
        rate = f" ({result['loadRate']:.0f} tokens/s measured at load)" if result.get("loadRate") else ""
        described = (f"Decision model `{model['select']}`: a cross-encoder, {_graph(result.get('variant'))} "
                     f"through onnxruntime{rate}.")
    lines = [
        "# Recall gate benchmark" if result.get("quality") is None else "# Recall gate quality", "",
        f"`{result['command']}` on {result['date']}: {machine['cpu']}, {machine['cores']} cores{memory}, "
        f"{machine['system']}, Python {machine['python']}; load average {result.get('load', {}).get('start')} "
        f"at the start, {result.get('load', {}).get('end')} at the end.", "",
        f"LoCoMo store ({result['pages']} pages), {result['questions']} LoCoMo questions as user turns, "
        f"`recallGate` shadow mode, keyword candidates, defaults except `timeoutMs` {result['timeoutMs']}"
        + (f" and `longWindows` {result['longWindows']} (the cascade)" if result.get("longWindows") else "") + ". "
        f"{described}", "",
        "## Gate turns", "",
        "| | p50 | p95 | max |", "| --- | --- | --- | --- |",
        *(f"| {label} | {latency[key]['p50']:.1f} ms | {latency[key]['p95']:.1f} ms | {latency[key]['max']:.1f} ms |"
          for key, label in (("gate", "latencyMs (the gate's own)"), ("wall", "whole call (gate log write included)"))),
        "",
        f"- inside `timeoutMs` ({result['timeoutMs']} ms): {result['inside']:.1%} of turns; "
        f"inside {result['timeoutMs'] + 50} ms: {result['insidePlus50']:.1%}",
        f"- tokens scored per turn: median {result['tokens']['p50']:.0f}, mean {result['tokens']['mean']:.0f}",
        f"- candidates per turn: mean {result['candidates']:.1f}, of which unscored at the deadline: "
        f"mean {result['unscored']:.1f}",
        "- outcomes: " + ", ".join(f"{key} {count}" for key, count in sorted(result["outcomes"].items())), "",
    ]
    if throughput is not None:
        baseline = throughput["baseline"]
        lines += [
            "## Throughput: the same pairs, ONNX runtime against PyTorch", "",
            f"{throughput['pairs']} pairs of {throughput['turns']} turns, scored per turn without a deadline. "
            f"Baseline: sentence-transformers {baseline.get('sentenceTransformers')} `CrossEncoder` "
            f"(torch {baseline.get('torch')}, {baseline.get('threads')} threads), default batch size.", "",
            "| round | ONNX tokens/s | PyTorch tokens/s | ratio |", "| --- | --- | --- | --- |",
            *(f"| {n} | {r['onnx']:.0f} | {r['torch']:.0f} | {r['onnx'] / r['torch']:.2f}x |"
              for n, r in enumerate(throughput["rounds"], 1)),
            f"| **median** | **{result['onnxRate']:.0f}** | **{result['torchRate']:.0f}** | **{result['ratio']:.2f}x** |",
            "", f"Median of the per-turn ratios: {result['turnRatio']:.2f}x.", "",
            *_fidelity_lines(throughput.get("fidelity") or {}),
            "## Targets", "",
            f"- every turn inside its budget plus 50 ms: {'met' if result['insidePlus50'] == 1 else 'not met'} "
            f"({result['insidePlus50']:.1%}, max {latency['wall']['max']:.0f} ms)",
            f"- tokens per second at least 1.5x PyTorch: {'met' if result['ratio'] >= 1.5 else 'not met'} "
            f"({result['ratio']:.2f}x)", "",
        ]
    if result.get("quality") is not None:
        lines += gate_quality.render(result["quality"], model["select"])
    return "\n".join(lines)
