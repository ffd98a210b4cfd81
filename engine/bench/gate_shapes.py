"""The embedding Decision model's calibration on two page shapes: LoCoMo session summaries and session transcripts.

``python -m engine.bench.gate_shapes --models STATE/models [--fit] [--output FILE]``

1. **Pages.** Every LoCoMo session becomes a page in two shapes: its summary (about 700 characters, what
   ``knowledge import locomo`` saves) and its transcript (``D3:7 Name: text`` lines, about 2,800 characters,
   up to 5,000), each titled as the import titles it.  The data is read where it lies, never copied.
2. **Turns.** Every question of conversations 0-4 (the fit half) and 5-9 (the evaluation half), with its gold
   pages (the sessions of its evidence turns), and the fixed off-topic turns (``OFF_TOPIC_TURNS``: work
   questions, small talk and unrelated tasks, none from the data).
3. **Candidates.** ``keyword``: the ten best pages by BM25 over the engine's analyzer terms (a stand-in for the
   store's tantivy index, same terms and parameters); ``hybrid``: reciprocal rank fusion (k = 60) of BM25
   without function words and the pages' best passage similarity, ten pages.  Candidates come from all 272
   pages of one shape, as in a store holding all ten conversations.
4. **Scores** exactly as the engine's ``embedding/`` provider scores them (engine/index/similarity.py):
   ``page_passages`` cuts each page, a page's similarity is its best passage's, ``turn_features`` reads each
   candidate against its turn (similarities, shortlist place, words and names of the message), and
   ``Calibration.score`` turns the features into probabilities.
5. **Fit** (``--fit``): the logistic regression of "gold" on ``turn_features`` over every
   keyword-shortlisted pair of conversations 0-4, both shapes pooled, and the threshold: the lowest of
   ``THRESHOLDS`` whose precision is at least ``TARGET_PRECISION`` on both shapes of the fit half.  Without
   ``--fit`` the figures use the calibration in the code.  Conversations 5-9 and the off-topic turns are
   reported, never fitted on.
6. **Bounds**: what any rule could reach with these shortlists: an oracle choosing among the candidates, and
   the ``k`` best-scored pages of every question (``best_of``).
"""

from __future__ import annotations

import argparse
import math
import platform
import re
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from models.installed import ModelStore

from ..index.analysis import Analyzer
from ..index.embedding import Embedder
from ..index.similarity import (CALIBRATION, COEFFICIENTS, HIGH_THRESHOLD, Calibration, Features, page_passages,
                                turn_features)
from .defaults import LOCOMO_DATA
from .gate_quality import OFF_TOPIC_TURNS, THRESHOLDS, roc_auc
from .report_file import write_report

SHAPES = ("summary", "transcript")
MODES = ("keyword", "hybrid")
SHORTLIST = 10
RRF_K = 60
TARGET_PRECISION = 0.75
FIT_SAMPLES, REPORT_SAMPLES = range(0, 5), range(5, 10)
_EVIDENCE = re.compile(r"D:?([0-9]+):([0-9]+)")


@dataclass(frozen=True)
class Page:
    sample: int
    session: int
    text: str            # title, a blank line, the body (the store's vector text)


@dataclass(frozen=True)
class Turn:
    sample: int | None   # None: an off-topic turn
    message: str
    gold: frozenset[int]


def pages_of(data: Sequence[dict[str, Any]], shape: str) -> list[Page]:
    """One page per session of every conversation, in ``shape``."""
    pages = []
    for index, sample in enumerate(data):
        conversation = sample["conversation"]
        pair = f"{conversation['speaker_a']} and {conversation['speaker_b']}"
        number = 1
        while f"session_{number}" in conversation:
            title = f"{pair}, session {number} ({conversation.get(f'session_{number}_date_time', '')})"
            if shape == "summary":
                body = (sample.get("session_summary") or {}).get(f"session_{number}_summary", "")
            else:
                body = "\n".join(f"{turn['dia_id']} {turn['speaker']}: {turn['text']}"
                                 for turn in conversation[f"session_{number}"])
            pages.append(Page(index, number, f"{title}\n\n{body}".strip()))
            number += 1
    return pages


def turns_of(data: Sequence[dict[str, Any]], pages: Sequence[Page]) -> list[Turn]:
    """Every question with its gold pages (positions in ``pages``), then the off-topic turns."""
    where = {(page.sample, page.session): position for position, page in enumerate(pages)}
    turns = []
    for index, sample in enumerate(data):
        for qa in sample["qa"]:
            evidence = [item for item in qa.get("evidence") or [] if isinstance(item, str)]
            sessions = {int(session) for item in evidence for session, _ in _EVIDENCE.findall(item)}
            turns.append(Turn(index, qa["question"], frozenset(where[(index, s)] for s in sessions
                                                               if (index, s) in where)))
    return turns + [Turn(None, message, frozenset()) for message in OFF_TOPIC_TURNS]


class Bm25:
    """BM25 (k1 1.2, b 0.75) over the engine analyzer's terms."""

    def __init__(self, analyzer: Analyzer, texts: Sequence[str]) -> None:
        self.analyzer = analyzer
        self.postings: dict[str, list[tuple[int, int]]] = {}
        lengths = []
        for position, text in enumerate(texts):
            terms = analyzer.terms(text)
            lengths.append(len(terms))
            counts: dict[str, int] = {}
            for term in terms:
                counts[term] = counts.get(term, 0) + 1
            for term, count in counts.items():
                self.postings.setdefault(term, []).append((position, count))
        self.lengths = np.array(lengths, dtype=float)
        self.average = float(self.lengths.mean()) if lengths else 1.0

    def scores(self, message: str, drop: frozenset[str] = frozenset()) -> np.ndarray:
        out = np.zeros(len(self.lengths))
        total = len(self.lengths)
        for term in self.analyzer.query_terms(message):
            postings = self.postings.get(term)
            if term in drop or not postings:
                continue
            idf = math.log(1 + (total - len(postings) + 0.5) / (len(postings) + 0.5))
            for position, count in postings:
                norm = 1.2 * (0.25 + 0.75 * self.lengths[position] / self.average)
                out[position] += idf * count * 2.2 / (count + norm)
        return out


def shortlist(mode: str, keyword: np.ndarray, keyword_content: np.ndarray, similarities: np.ndarray) -> list[int]:
    """The ten candidates of ``mode``, best first."""
    if mode == "keyword":
        return [int(k) for k in np.argsort(-keyword, kind="stable")[:SHORTLIST] if keyword[k] > 0]
    fused: dict[int, float] = {}
    content = [int(k) for k in np.argsort(-keyword_content, kind="stable")[:3 * SHORTLIST] if keyword_content[k] > 0]
    for ranked in (content, [int(k) for k in np.argsort(-similarities, kind="stable")[:3 * SHORTLIST]]):
        for place, page in enumerate(ranked):
            fused[page] = fused.get(page, 0.0) + 1 / (RRF_K + place + 1)
    return sorted(fused, key=lambda page: -fused[page])[:SHORTLIST]


@dataclass(frozen=True)
class Embedded:
    """One shape's pages cut into passages and embedded, and the turns' messages."""
    passages: list[int]           # passages per page
    vectors: np.ndarray           # every passage, page after page
    messages: np.ndarray          # one per turn
    starts: np.ndarray            # each page's whole text as the model reads it (its first 256 tokens): before


def embed(embedder: Embedder, pages: Sequence[Page], messages: np.ndarray) -> Embedded:
    cut = [page_passages(page.text) for page in pages]
    vectors = embedder.embed([t for passages in cut for t in passages])
    bounds = np.cumsum([0] + [len(passages) for passages in cut])
    long = [k for k, passages in enumerate(cut) if len(passages) > 1]
    starts = vectors[bounds[:-1]].copy()   # a one-passage page's passage is its whole text
    if long:
        starts[long] = embedder.embed([pages[k].text for k in long])
    return Embedded([len(passages) for passages in cut], vectors, messages, starts)


def candidate_rows(embedded: Embedded, analyzer: Analyzer, pages: Sequence[Page], turns: Sequence[Turn],
                   mode: str) -> list[dict[str, Any]]:
    """Per turn: the shortlisted pages with each one's best passage similarity and passage count."""
    bounds = np.cumsum([0] + embedded.passages)
    bm25 = Bm25(analyzer, [page.text for page in pages])
    rows = []
    for turn, message in zip(turns, embedded.messages):
        products = embedded.vectors @ message
        starts = embedded.starts @ message
        similarities = np.array([products[bounds[k]:bounds[k + 1]].max() for k in range(len(pages))])
        chosen = shortlist(mode, bm25.scores(turn.message), bm25.scores(turn.message, analyzer.function_terms),
                           similarities)
        chosen_similarities = [float(similarities[k]) for k in chosen]
        counts = [embedded.passages[k] for k in chosen]
        rows.append({"turn": turn, "pages": chosen, "similarities": chosen_similarities, "passages": counts,
                     "starts": [float(starts[k]) for k in chosen],
                     "features": turn_features(chosen_similarities, counts, turn.message,
                                               [pages[k].text for k in chosen], analyzer)})
    return rows


def features(row: dict[str, Any]) -> list[Features]:
    """Each candidate's ``Features`` as the engine computes them (those of the texts when the row has them)."""
    if "features" in row:
        return row["features"]
    return turn_features(row["similarities"], row["passages"])


def fit(rows: Sequence[dict[str, Any]], iterations: int = 100, ridge: float = 1e-3) -> Calibration:
    """The logistic regression of "gold" on ``features`` (Newton's method, a small ridge so that a feature that
    never varies, such as names on data without any, stays 0 instead of making the system singular)."""
    x: list[Features] = []
    y: list[bool] = []
    for row in rows:
        x += features(row)
        y += [page in row["turn"].gold for page in row["pages"]]
    design = np.hstack([np.array(x, dtype=float).reshape(-1, len(Features._fields)), np.ones((len(y), 1))])
    labels = np.array(y, dtype=float)
    if not labels.any() or labels.all():
        raise ValueError("fitting a calibration needs both relevant and irrelevant pairs")
    penalty = ridge * np.eye(design.shape[1])
    penalty[-1, -1] = 0.0   # the intercept is not shrunk
    weights = np.zeros(design.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-design @ weights))
        hessian = (design * (p * (1 - p))[:, None]).T @ design + penalty
        step = np.linalg.solve(hessian, design.T @ (p - labels) + penalty @ weights)
        weights -= step
        if np.abs(step).max() < 1e-10:
            break
    return Calibration(**{name: round(float(w), 3) for name, w in zip(COEFFICIENTS, weights)})


# The scoring before issue 29: the page's start, sigmoid(a * cosine + b) fitted on summaries alone.
PAGE_START = Calibration(a=5.8859, b=-5.0381)
PAGE_START_THRESHOLDS = (0.10, 0.75)   # the threshold docs/recall-gate.md recommended then, and the spec's default


def figures(rows: Sequence[dict[str, Any]], calibration: Calibration,
            thresholds: Sequence[float] = THRESHOLDS, page_start: bool = False) -> dict[str, Any]:
    """Precision and recall of the gold pages, off-topic turns with anything injected, AUC, per threshold;
    ``page_start``: as the gate scored before (each page's start, one similarity per pair, ``calibration``'s
    ``a`` and ``b`` alone)."""
    scored = [(row, [calibration.probability(s) for s in row["starts"]] if page_start else
               [calibration.score(f) for f in features(row)]) for row in rows]
    questions = [(row, p) for row, p in scored if row["turn"].sample is not None]
    off_topic = [(row, p) for row, p in scored if row["turn"].sample is None]
    gold = sum(len(row["turn"].gold) for row, _ in questions)
    shortlisted = sum(len(row["turn"].gold & set(row["pages"])) for row, _ in questions)
    table = []
    for threshold in thresholds:
        injected = hits = 0
        for row, p in questions:
            chosen = {page for page, score in zip(row["pages"], p) if score >= threshold}
            injected, hits = injected + len(chosen), hits + len(chosen & row["turn"].gold)
        noisy = sum(any(score >= threshold for score in p) for _, p in off_topic)
        table.append({"threshold": threshold, "precision": hits / injected if injected else math.nan,
                      "recall": hits / gold if gold else math.nan, "perTurn": injected / max(len(questions), 1),
                      "offTopic": noisy / len(off_topic) if off_topic else math.nan})
    scores = [score for _, p in questions for score in p]
    labels = [page in row["turn"].gold for row, _ in questions for page in row["pages"]]
    return {"questions": len(questions), "offTopicTurns": len(off_topic), "gold": gold,
            "shortlistRecall": shortlisted / gold if gold else math.nan, "auc": roc_auc(scores, labels),
            "thresholds": table, "best": [best_of(questions, k, gold) for k in BEST_OF]}


BEST_OF = (1, 2, 3)


def best_of(questions: Sequence[tuple[dict[str, Any], list[float]]], k: int, gold: int) -> dict[str, float]:
    """Precision and recall of injecting the ``k`` best-scored candidates of every question, whatever their score:
    its recall is also the most that any rule injecting at most ``k`` pages a turn in this order can reach (a
    perfect yes/no on each of them reaches it at precision 100 %)."""
    injected = hits = 0
    for row, p in questions:
        top = sorted(range(len(p)), key=lambda i: -p[i])[:k]
        injected += len(top)
        hits += sum(row["pages"][i] in row["turn"].gold for i in top)
    return {"k": k, "precision": hits / injected if injected else math.nan, "recall": hits / gold if gold else math.nan}


def chosen_threshold(fitted: dict[str, dict[str, Any]], target: float = TARGET_PRECISION) -> float | None:
    """The lowest threshold whose precision reaches ``target`` on every shape (of the fit half)."""
    for position, threshold in enumerate(THRESHOLDS):
        if all(not math.isnan(f["thresholds"][position]["precision"])
               and f["thresholds"][position]["precision"] >= target for f in fitted.values()):
            return threshold
    return None


def _in(samples: range, row: dict[str, Any], off_topic: bool) -> bool:
    sample = row["turn"].sample
    return off_topic if sample is None else sample in samples


def run(models: Path, model: str, data: Path, do_fit: bool) -> dict[str, Any]:
    import json
    loaded = json.loads(Path(data).read_text(encoding="utf-8"))
    embedder = Embedder(ModelStore(models).get(model))
    embedder.load()
    analyzer = Analyzer()
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    sizes = {}
    messages: np.ndarray | None = None
    for shape in SHAPES:
        pages = pages_of(loaded, shape)
        turns = turns_of(loaded, pages)
        if messages is None:   # the same turns, in the same order, for every shape
            messages = embedder.embed([turn.message for turn in turns])
        embedded = embed(embedder, pages, messages)
        sizes[shape] = {"pages": len(pages), "medianChars": int(np.median([len(p.text) for p in pages])),
                        "maxChars": max(len(p.text) for p in pages), "passages": len(embedded.vectors)}
        rows[shape] = {mode: candidate_rows(embedded, analyzer, pages, turns, mode) for mode in MODES}
    calibration, threshold = CALIBRATION, HIGH_THRESHOLD
    if do_fit:
        calibration = fit([row for shape in SHAPES for row in rows[shape]["keyword"]
                           if _in(FIT_SAMPLES, row, off_topic=False)])
    fit_half = {shape: figures([r for r in rows[shape]["keyword"] if _in(FIT_SAMPLES, r, False)], calibration)
                for shape in SHAPES}
    if do_fit:
        threshold = chosen_threshold(fit_half) or THRESHOLDS[-1]
    report = {shape: {mode: figures([r for r in rows[shape][mode] if _in(REPORT_SAMPLES, r, True)], calibration)
                      for mode in MODES} for shape in SHAPES}
    before = {shape: {mode: figures([r for r in rows[shape][mode] if _in(REPORT_SAMPLES, r, True)], PAGE_START,
                                    PAGE_START_THRESHOLDS, page_start=True)
                      for mode in MODES} for shape in SHAPES}
    return {"calibration": calibration, "threshold": threshold, "fitHalf": fit_half, "report": report,
            "before": before, "sizes": sizes, "fitted": do_fit}


def _p(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1%}"


def render(result: dict[str, Any], command: str) -> str:
    c, threshold = result["calibration"], result["threshold"]
    lines = [f"`{command}` on {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}: {_cpu()}, "
             f"Python {platform.python_version()}.", "",
             f"Calibration {'fitted here' if result['fitted'] else 'in the code'}: "
             + ", ".join(f"{name} = {value}" for name, value in c.coefficients().items()) + f"; threshold {threshold}.", "",
             "| shape | pages | median / max characters | passages scored |", "| --- | --- | --- | --- |"]
    for shape, size in result["sizes"].items():
        lines.append(f"| {shape} | {size['pages']} | {size['medianChars']} / {size['maxChars']} | {size['passages']} |")
    lines += ["", f"Fit half (conversations 0-4, keyword candidates), at {threshold}: " + "; ".join(
        f"{shape} precision {_p(row['precision'])}, recall {_p(row['recall'])}"
        for shape, f in result["fitHalf"].items() for row in f["thresholds"] if row["threshold"] == threshold), ""]
    for shape, modes in result["report"].items():
        for mode, f in modes.items():
            lines += [f"#### {shape} pages, {mode} candidates (conversations 5-9)", "",
                      f"{f['questions']} questions ({f['gold']} gold pages, {_p(f['shortlistRecall'])} shortlisted), "
                      f"{f['offTopicTurns']} off-topic turns; ROC AUC {f['auc']:.2f}.", "",
                      "Bounds: an oracle choosing among the shortlist reaches recall "
                      f"{_p(f['shortlistRecall'])} at precision 100%; " + "; ".join(
                          f"the {row['k']} best-scored page(s) of every question: precision {_p(row['precision'])}, "
                          f"recall {_p(row['recall'])}" for row in f["best"]) + ".", "",
                      _before(result["before"][shape][mode]), "",
                      "| threshold | precision | recall | pages injected per question | off-topic turns injected |",
                      "| --- | --- | --- | --- | --- |"]
            for row in f["thresholds"]:
                mark = "**" if row["threshold"] == threshold else ""
                lines.append(f"| {mark}{row['threshold']:.2f}{mark} | {_p(row['precision'])} | {_p(row['recall'])} | "
                             f"{row['perTurn']:.2f} | {_p(row['offTopic'])} |")
            lines.append("")
    return "\n".join(lines)


def _before(f: dict[str, Any]) -> str:
    rows = "; ".join(f"at {row['threshold']:.2f} precision {_p(row['precision'])}, recall {_p(row['recall'])}, "
                     f"off-topic {_p(row['offTopic'])}" for row in f["thresholds"])
    return (f"Before (the page's start, a = {PAGE_START.a}, b = {PAGE_START.b}, on the same turns): ROC AUC "
            f"{f['auc']:.2f}; {rows}.")


def _cpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                     platform.processor())
    except OSError:
        model = platform.processor()
    import os
    return f"{model}, {os.cpu_count()} cores"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.gate_shapes", description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=Path, required=True, help="a state directory's models folder")
    parser.add_argument("--model", default="all-minilm-l6-v2-int8")
    parser.add_argument("--data", type=Path, default=LOCOMO_DATA)
    parser.add_argument("--fit", action="store_true", help="fit the calibration and threshold on conversations 0-4")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    started = time.monotonic()
    result = run(args.models, args.model, args.data, args.fit)
    command = "python -m engine.bench.gate_shapes --models STATE/models" + (" --fit" if args.fit else "")
    text = render(result, command) + f"\n({time.monotonic() - started:.0f} s)\n"
    print(text)
    if args.output is not None:
        write_report(args.output, text)


if __name__ == "__main__":
    main()
