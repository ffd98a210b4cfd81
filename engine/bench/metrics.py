"""Figures the search benchmark computes: retrieval quality, latency summaries, memory, the machine."""

from __future__ import annotations

import math
import os
import platform
import resource
import sqlite3
import statistics
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

from ..core.answers import TypedDict

CATEGORIES = (1, 2, 3, 4, 5)
CUTOFFS = (5, 10)


class RetrievalQuality(TypedDict):
    """Mean scores (``questions`` and ``recall@k``/``hit@k``) per LoCoMo category (and ``other``), and overall."""
    categories: dict[str, dict[str, float | int]]
    overall: dict[str, float | int]


class LatencySummary(TypedDict):
    """Milliseconds over ``samples`` timings (NaN when there are none)."""
    samples: int
    p50_ms: float
    p99_ms: float
    mean_ms: float


class Machine(TypedDict):
    """What the figures were measured on (cores and memory None where the system does not say)."""
    cpu: str
    cores: int | None
    memory_bytes: int | None
    system: str
    python: str


def question_scores(gold: Sequence[str], found: Sequence[str]) -> dict[str, float]:
    """recall@k (share of gold records in the top k) and hit@k (any of them there) for one question."""
    wanted = set(gold)
    scores = {}
    for k in CUTOFFS:
        top = set(found[:k]) & wanted
        scores[f"recall@{k}"] = len(top) / len(wanted)
        scores[f"hit@{k}"] = float(bool(top))
    return scores


def _mean_scores(rows: list[dict[str, float]]) -> dict[str, float | int]:
    summary: dict[str, float | int] = {"questions": len(rows)}
    for key in (f"{metric}@{k}" for metric in ("recall", "hit") for k in CUTOFFS):
        summary[key] = statistics.fmean(row[key] for row in rows) if rows else math.nan
    return summary


def retrieval_quality(questions: list[dict[str, Any]], engine: str) -> RetrievalQuality:
    """Mean scores of ``engine`` per LoCoMo category and overall, over questions with gold records."""
    scored = [q for q in questions if q["record_ids"]]
    by_category = {str(c): _mean_scores([q[engine] for q in scored if q["category"] == c]) for c in CATEGORIES}
    others = [q[engine] for q in scored if q["category"] not in CATEGORIES]
    if others:
        by_category["other"] = _mean_scores(others)
    return {"categories": by_category, "overall": _mean_scores([q[engine] for q in scored])}


def known_item(sources: list[str], results: list[list[str]]) -> dict[str, float]:
    """Where each query's source record lands: hit@1, hit@10 and reciprocal rank within the top 10."""
    ranks = [found.index(source) + 1 if source in found else None for source, found in zip(sources, results)]
    count = max(len(ranks), 1)
    return {"hit@1": sum(1 for r in ranks if r == 1) / count,
            "hit@10": sum(1 for r in ranks if r is not None and r <= 10) / count,
            "mrr@10": sum(1 / r for r in ranks if r is not None and r <= 10) / count}


def percentile(sorted_values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(share * len(sorted_values)))
    return sorted_values[rank - 1]


def latency_summary(nanoseconds: Sequence[int]) -> LatencySummary:
    """p50, p99 and mean in milliseconds, and the number of samples."""
    values = sorted(ns / 1e6 for ns in nanoseconds)
    return {"samples": len(values), "p50_ms": percentile(values, 0.50), "p99_ms": percentile(values, 0.99),
            "mean_ms": statistics.fmean(values) if values else math.nan}


def peak_rss_kib() -> int:
    """This process image's peak resident set size so far, in KiB.

    On Linux this is ``VmHWM``: ``ru_maxrss`` is not reset by ``exec``, so a
    worker started from a large parent would report the parent's peak.
    Elsewhere ``ru_maxrss`` (KiB, or bytes on macOS) is the best there is.
    """
    try:
        with open("/proc/self/status", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak


def tree_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (or of ``path`` itself)."""
    if path.is_file():
        return path.stat().st_size
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file())


def machine() -> Machine:
    """What the figures were measured on."""
    cpu, cores = platform.processor() or platform.machine(), os.cpu_count()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            names = [line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    memory = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    memory = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"cpu": cpu, "cores": cores, "memory_bytes": memory, "system": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def versions() -> dict[str, str]:
    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "unknown"
    return {"tantivy": version("tantivy"), "sqlite": sqlite3.sqlite_version,
            "knowledge-desk": version("knowledge-desk")}


def load_average() -> float | None:
    """The 1-minute load average (the machine may be shared: other work slows every side alike)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan
