"""Features tried beside ``turn_features`` for the embedding Decision model (issue 29's first target).

``python -m engine.bench.gate_features --models STATE/models [--output FILE]``

The pages, turns and shortlists are ``gate_shapes``' (both page shapes, keyword and hybrid candidates). Each
shortlisted page gets, besides its ``turn_features``:

- ``token``: late interaction (MaxSim) with the model's own token states: for each of the message's content word
  pieces (function words, punctuation, ``[CLS]`` and ``[SEP]`` out), the best cosine with any token of a passage,
  averaged; the page's is its best passage's.  Read against the turn like the similarity (``token_lead``,
  ``token_below``, ``token_spread``);
- ``static``: the same over the graph's word-piece embedding table (no model run: each content piece against the
  page's distinct pieces), with the same three relatives;
- ``margin``: the best passage's similarity over the page's second best (0 for a one-passage page);
- ``neighbour``: the cosine of the page's best passage with the nearest best passage of the turn's other
  candidates (near duplicates);
- ``two_best``: the mean similarity of the page's two best passages.

Each feature set is chosen on conversations 0-4 only: the logistic regression (``gate_shapes.fit``'s) fitted
leaving one conversation out at a time, and ``gate_shapes``' threshold rule (the lowest threshold with precision
at least 0.75 on both shapes) over the held-out scores.  Then it is fitted on all of 0-4 and reported on 5-9 and
the off-topic turns, which choose nothing.  ``best page only`` injects at most the best-scored page of a turn.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from models.installed import ModelStore

from ..index.analysis import FUNCTION_WORDS, Analyzer
from ..index.embedding import Embedder
from ..index.int8_graph import initializer_array
from ..index.similarity import Features, page_passages
from . import gate_shapes as gs
from .defaults import LOCOMO_DATA
from .gate_quality import THRESHOLDS, roc_auc
from .report_file import write_report

WORD_EMBEDDINGS = "inner.embeddings.word_embeddings.weight_q"   # the all-MiniLM-L6-v2 int8 export's table
BASE = list(Features._fields)


def relatives(name: str) -> list[str]:
    return [name, f"{name}_lead", f"{name}_below", f"{name}_spread"]


FEATURE_SETS: dict[str, list[str]] = {
    "turn features (refitted)": BASE,
    "+ passage margin": BASE + ["margin"],
    "+ near-duplicate neighbour": BASE + ["neighbour"],
    "+ two best passages": BASE + ["two_best"],
    "+ static word-piece MaxSim": BASE + relatives("static"),
    "+ token MaxSim": BASE + relatives("token"),
    "+ token MaxSim, margin, neighbour": BASE + relatives("token") + ["margin", "neighbour"],
}
BEST_PAGE_ONLY = "turn features, best page only"


def content_mask(pieces: Sequence[str]) -> np.ndarray:
    """Weights of a message's word pieces for MaxSim: 1 for content pieces, else 0 (all but ``[CLS]``/``[SEP]``
    when the message has no content piece)."""
    inner = [0 < i < len(pieces) - 1 for i in range(len(pieces))]
    content = [inside and any(ch.isalnum() for ch in piece) and piece.lstrip("#").lower() not in FUNCTION_WORDS
               for inside, piece in zip(inner, pieces)]
    chosen = content if any(content) else (inner if any(inner) else [True] * len(pieces))
    return np.array(chosen, dtype=np.float32)


def maxsim(message: np.ndarray, weights: np.ndarray, passages: Sequence[np.ndarray]) -> float:
    """The best passage's weighted mean, over the message's tokens, of each token's best cosine in the passage."""
    total = float(weights.sum()) or 1.0
    return max(float((message @ passage.T).max(axis=1) @ weights) / total for passage in passages)


def relative(values: Sequence[float]) -> list[tuple[float, float, float]]:
    """(lead, below, spread) of each value against the turn's others, as ``turn_features`` reads similarities."""
    best, mean = max(values, default=0.0), (sum(values) / len(values) if values else 0.0)
    return [(v - max((o for j, o in enumerate(values) if j != i), default=0.0), best - v, v - mean)
            for i, v in enumerate(values)]


def add_extras(row: dict[str, Any], message: np.ndarray, vectors: Sequence[np.ndarray],
               token: Sequence[float], static: Sequence[float]) -> None:
    """``row["extra"]``: each candidate's extra features; ``vectors``: each candidate's passage vectors."""
    sims = [np.sort(v @ message)[::-1] for v in vectors]
    best = [v[int(np.argmax(v @ message))] for v in vectors]
    extra = []
    for i, s in enumerate(sims):
        others = [float(best[i] @ best[j]) for j in range(len(best)) if j != i]
        extra.append({"margin": float(s[0] - s[1]) if len(s) > 1 else 0.0, "two_best": float(s[:2].mean()),
                      "neighbour": max(others, default=0.0), "token": token[i], "static": static[i]})
    for name, values in (("token", token), ("static", static)):
        for entry, (lead, below, spread) in zip(extra, relative(values)):
            entry.update({f"{name}_lead": lead, f"{name}_below": below, f"{name}_spread": spread})
    row["extra"] = extra


def design(row: dict[str, Any], names: Sequence[str]) -> np.ndarray:
    columns = [dict(zip(BASE, f), **e) for f, e in zip(row["features"], row["extra"])]
    return np.array([[c[n] for n in names] for c in columns], dtype=float).reshape(-1, len(names))


def fit(rows: Sequence[dict[str, Any]], names: Sequence[str], ridge: float = 1e-3) -> np.ndarray:
    """Logistic regression weights (the intercept last), Newton's method as ``gate_shapes.fit``."""
    x = np.vstack([design(r, names) for r in rows])
    y = np.array([page in r["turn"].gold for r in rows for page in r["pages"]], dtype=float)
    x = np.hstack([x, np.ones((len(y), 1))])
    penalty = ridge * np.eye(x.shape[1])
    penalty[-1, -1] = 0.0
    w = np.zeros(x.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-x @ w))
        step = np.linalg.solve((x * (p * (1 - p))[:, None]).T @ x + penalty, x.T @ (p - y) + penalty @ w)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return w


def scores(rows: Sequence[dict[str, Any]], names: Sequence[str], w: np.ndarray) -> list[np.ndarray]:
    return [1 / (1 + np.exp(-(design(r, names) @ w[:-1] + w[-1]))) for r in rows]


def measure(scored: Sequence[tuple[dict[str, Any], np.ndarray]], threshold: float, cap: int | None = None) -> dict:
    """Precision and recall of the gold pages, and off-topic turns with anything injected, at ``threshold``."""
    injected = hits = gold = noisy = off_topic = 0
    for row, p in scored:
        top = [i for i in np.argsort(-p, kind="stable")[:cap] if p[i] >= threshold]
        if row["turn"].sample is None:
            off_topic, noisy = off_topic + 1, noisy + bool(top)
            continue
        chosen = {row["pages"][i] for i in top}
        gold, injected, hits = gold + len(row["turn"].gold), injected + len(chosen), hits + len(chosen & row["turn"].gold)
    return {"precision": hits / injected if injected else math.nan, "recall": hits / gold if gold else math.nan,
            "offTopic": noisy / off_topic if off_topic else math.nan}


def rule(by_shape: dict[str, list], cap: int | None) -> float | None:
    """``gate_shapes``' threshold: the lowest with precision at least the target on every shape."""
    for threshold in THRESHOLDS:
        if all(measure(s, threshold, cap)["precision"] >= gs.TARGET_PRECISION for s in by_shape.values()):
            return threshold
    return None


def evaluate(rows: dict[str, dict[str, list]], names: Sequence[str], cap: int | None) -> dict[str, Any]:
    fit_rows = {shape: [r for r in rows[shape]["keyword"] if r["turn"].sample in gs.FIT_SAMPLES] for shape in gs.SHAPES}
    held_out: dict[str, list] = {shape: [] for shape in gs.SHAPES}
    for fold in gs.FIT_SAMPLES:
        w = fit([r for shape in gs.SHAPES for r in fit_rows[shape] if r["turn"].sample != fold], names)
        for shape in gs.SHAPES:
            test = [r for r in fit_rows[shape] if r["turn"].sample == fold]
            held_out[shape] += zip(test, scores(test, names, w))
    cv_threshold = rule(held_out, cap)
    w = fit([r for shape in gs.SHAPES for r in fit_rows[shape]], names)
    threshold = rule({shape: list(zip(fit_rows[shape], scores(fit_rows[shape], names, w))) for shape in gs.SHAPES}, cap)
    report = {}
    for shape in gs.SHAPES:
        for mode in gs.MODES:
            chosen = [r for r in rows[shape][mode] if r["turn"].sample is None or r["turn"].sample in gs.REPORT_SAMPLES]
            scored = list(zip(chosen, scores(chosen, names, w)))
            questions = [(r, p) for r, p in scored if r["turn"].sample is not None]
            reachable = [(t, m["recall"]) for t in THRESHOLDS
                         for m in [measure(scored, t, cap)] if m["precision"] >= gs.TARGET_PRECISION]
            report[(shape, mode)] = dict(measure(scored, threshold, cap) if threshold else {}, auc=roc_auc(
                [s for _, p in questions for s in p], [g in r["turn"].gold for r, _ in questions for g in r["pages"]]),
                best=max(reachable, key=lambda tr: tr[1], default=None))
    return {"cv": {s: measure(held_out[s], cv_threshold, cap) if cv_threshold else None for s in gs.SHAPES},
            "cvThreshold": cv_threshold, "threshold": threshold, "report": report,
            "weights": dict(zip(list(names) + ["b"], np.round(w, 3).tolist()))}


def build(models: Path, model: str, data: Path) -> dict[str, dict[str, list]]:
    loaded = json.loads(Path(data).read_text(encoding="utf-8"))
    embedder = Embedder(ModelStore(models).get(model))
    embedder.load()
    table = initializer_array(embedder.model.path(embedder.model.onnx or "").read_bytes(), WORD_EMBEDDINGS)
    table /= np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    analyzer, rows, messages = Analyzer(), {}, None
    for shape in gs.SHAPES:
        pages = gs.pages_of(loaded, shape)
        turns = gs.turns_of(loaded, pages)
        if messages is None:
            vectors, states = embedder.token_states([t.message for t in turns])
            messages = (vectors, [(s.states, content_mask(s.pieces)) for s in states],
                        [[i for i, keep in zip(s.ids, content_mask(s.pieces)) if keep] for s in states])
        cut = [page_passages(page.text) for page in pages]
        vectors, states = embedder.token_states([text for passages in cut for text in passages])
        bounds = np.cumsum([0] + [len(passages) for passages in cut])
        piece_states = [s.states.astype(np.float16) for s in states]
        pieces = [np.array(sorted({i for b in range(bounds[k], bounds[k + 1]) for i in states[b].ids[1:-1]}))
                  for k in range(len(pages))]
        del states
        embedded = gs.Embedded([len(p) for p in cut], vectors, messages[0], vectors[bounds[:-1]])
        rows[shape] = {mode: gs.candidate_rows(embedded, analyzer, pages, turns, mode) for mode in gs.MODES}
        kept: dict[tuple[int, int], tuple[float, float]] = {}
        for mode in gs.MODES:
            for t, row in enumerate(rows[shape][mode]):
                (state, weights), query = messages[1][t], table[messages[2][t]] if messages[2][t] else None
                for k in row["pages"]:
                    if (t, k) not in kept:
                        token = maxsim(state, weights, [piece_states[b].astype(np.float32)
                                                        for b in range(bounds[k], bounds[k + 1])])
                        static = float((query @ table[pieces[k]].T).max(axis=1).mean()) if query is not None else 0.0
                        kept[(t, k)] = (token, static)
                add_extras(row, messages[0][t], [vectors[bounds[k]:bounds[k + 1]] for k in row["pages"]],
                           [kept[(t, k)][0] for k in row["pages"]], [kept[(t, k)][1] for k in row["pages"]])
    return rows


def costs(models: Path, model: str, data: Path, repeats: int = 7) -> list[tuple[str, float, str]]:
    """Median milliseconds of what each feature would add to a turn of ten candidates, per shape: the token
    states of their passages (none are stored), MaxSim over them once they are known, the word-piece MaxSim."""
    loaded = json.loads(Path(data).read_text(encoding="utf-8"))
    embedder = Embedder(ModelStore(models).get(model))
    embedder.load()
    table = initializer_array(embedder.model.path(embedder.model.onnx or "").read_bytes(), WORD_EMBEDDINGS)
    table /= np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    message = "What did Caroline paint for the art show last month?"
    _, (query,) = embedder.token_states([message])
    weights = content_mask(query.pieces)
    out = []

    def median(work: Any) -> float:
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            work()
            times.append((time.perf_counter() - started) * 1000)
        return sorted(times)[len(times) // 2]

    for shape in gs.SHAPES:
        pages = gs.pages_of(loaded, shape)[:10]
        cut = [page_passages(page.text) for page in pages]
        texts = [text for passages in cut for text in passages]
        out.append((f"{shape}: token states of the ten pages' {len(texts)} passages (one model run)",
                    median(lambda: embedder.token_states(texts)), ""))
        _, states = embedder.token_states(texts)
        tokens = sum(len(s.ids) for s in states)
        out.append((f"{shape}: MaxSim of the message over them, known", median(lambda: [
            maxsim(query.states, weights, [s.states for s in states])]),
            f"{tokens} tokens: {tokens * embedder.dimensions * 2 / 1e6:.1f} MB at float16"))
        bounds = np.cumsum([0] + [len(passages) for passages in cut])
        pieces = [np.array(sorted({i for s in states[bounds[k]:bounds[k + 1]] for i in s.ids[1:-1]}))
                  for k in range(len(pages))]
        ids = [i for i, keep in zip(query.ids, weights) if keep]
        out.append((f"{shape}: word-piece MaxSim of the message over the ten pages", median(
            lambda: [float((table[ids] @ table[p].T).max(axis=1).mean()) for p in pieces]),
            f"{sum(len(p) for p in pieces)} distinct pieces"))
    return out


def render(results: dict[str, dict[str, Any]], command: str) -> str:
    def p(value: float | None) -> str:
        return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.1%}"
    lines = [f"`{command}`", "", "Chosen on conversations 0-4 (leave one conversation out, keyword candidates):", "",
             "| features | threshold | summaries precision / recall | transcripts precision / recall |",
             "| --- | --- | --- | --- |"]
    for name, r in results.items():
        cv = r["cv"]
        lines.append(f"| {name} | {r['cvThreshold']} | " + " | ".join(
            f"{p(cv[s]['precision'])} / {p(cv[s]['recall'])}" if cv[s] else "-" for s in gs.SHAPES) + " |")
    lines += ["", "Fitted on 0-4, reported on 5-9 and the 115 off-topic turns (threshold by the rule on 0-4):", "",
              "| features | threshold | shape | candidates | ROC AUC | precision | recall | off-topic injected "
              "| best recall at precision ≥ 0.75 |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in results.items():
        for (shape, mode), f in r["report"].items():
            best = f"{f['best'][1]:.1%} ({f['best'][0]})" if f["best"] else "-"
            lines.append(f"| {name} | {r['threshold']} | {shape} | {mode} | {f['auc']:.3f} | {p(f.get('precision'))} "
                         f"| {p(f.get('recall'))} | {p(f.get('offTopic'))} | {best} |")
    lines += ["", "Weights fitted on 0-4:", ""]
    lines += [f"- {name}: " + ", ".join(f"{k} = {v}" for k, v in r["weights"].items()) for name, r in results.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.gate_features", description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=Path, required=True, help="a state directory's models folder")
    parser.add_argument("--model", default="all-minilm-l6-v2-int8")
    parser.add_argument("--data", type=Path, default=LOCOMO_DATA)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--costs", action="store_true", help="time each feature on ten pages instead")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.costs:
        print("\n".join(f"- {what}: {ms:.1f} ms{'; ' + note if note else ''}"
                        for what, ms, note in costs(args.models, args.model, args.data)))
        return
    rows = build(args.models, args.model, args.data)
    results = {name: evaluate(rows, names, None) for name, names in FEATURE_SETS.items()}
    results[BEST_PAGE_ONLY] = evaluate(rows, BASE, 1)
    text = render(results, "python -m engine.bench.gate_features --models STATE/models") + \
        f"\n\n{gs._cpu()}, {time.monotonic() - started:.0f} s\n"
    print(text)
    if args.output is not None:
        write_report(args.output, text)


if __name__ == "__main__":
    main()
