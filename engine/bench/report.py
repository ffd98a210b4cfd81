"""The search benchmark's report: Markdown tables and a plain reading of them.

The reading is written from the figures of the run (which engine is ahead,
by how much), so a rerun on another machine or after an engine change
rewrites it honestly; it never claims a win the tables do not show.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..search.knowledge_base import FUSION_DEPTH
from ..search.keyword import ALIAS_BOOST, TITLE_BOOST
from ..core.words import for_count
from .metrics import CATEGORIES

ENGINE_NAMES = {"tantivy": "tantivy", "fts5": "FTS5"}
BUILD_ROWS = (
    ("tantivy", "tantivy: `SearchIndexes.rebuild` (reads the catalog, prepares, writes, commits, bookkeeping)"),
    ("tantivy-core", "tantivy alone: documents given, add + commit"),
    ("fts5", "FTS5: documents given, insert + commit"),
)
LATENCY_ROWS = (
    ("tantivy", "tantivy core (analyze, query, top 10, stored docs)"),
    ("fts5", "FTS5 `MATCH ... ORDER BY bm25 LIMIT 10`"),
    ("api", "`Engine.search` (tantivy, whole API call)"),
)
DATASET_NAMES = {"locomo": "LoCoMo", "generated": "generated"}
_TIE = 0.005  # quality differences under half a point are ties


def _pct(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.1f}"


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else (f"{value:.3f}" if value < 10 else f"{value:.1f}")


def _mib(kib: float) -> str:
    return f"{kib / 1024:.0f}"


def _size(num_bytes: float) -> str:
    return f"{num_bytes / 2 ** 20:.1f} MiB"


def _seconds(value: float) -> str:
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _rate(records: int, seconds: float) -> str:
    return f"{records / seconds:,.0f}" if seconds > 0 else "-"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    machine, versions, options = report["machine"], report["versions"], report["options"]
    memory = f", {machine['memory_bytes'] / 2 ** 30:.0f} GiB memory" if machine.get("memory_bytes") else ""
    lines = [
        "# Search benchmark: tantivy and SQLite FTS5",
        "",
        f"Measured {report['date']} with `{report['command']}` ({report['elapsed_s'] / 60:.1f} minutes in all)."
        + (" **Quick run: small samples, not figures to quote.**" if options["quick"] else ""),
        "This file is written by `engine/bench/search.py`; run the command again to refresh it.",
        "",
        f"- Machine: {machine['cpu']}, {machine['cores']} cores{memory}; {machine['system']}; "
        f"Python {machine['python']}. Shared and noisy: builds are medians of {options['repeats']} runs per "
        f"engine, latencies come from {options['rounds']} rounds with the engines interleaved query by query.",
        f"- Versions: tantivy (tantivy-py) {versions['tantivy']}, SQLite {versions['sqlite']}, "
        f"knowledge-desk {versions['knowledge-desk']}.",
        "- tantivy is the engine as shipped: the analyzer of `engine/index/analysis.py` (simple tokenizer, lowercase, "
        "ASCII folding, English stemmer); each query word scored once over title, aliases and body together "
        f"(the `text` field) plus a bonus of x{TITLE_BOOST} for the title and x{ALIAS_BOOST} for an alias "
        "(`engine/search/keyword.py`).",
        "- FTS5 is the reference implementation's engine, set up as a careful implementation would: columns "
        "title, aliases, body, `tokenize='porter unicode61 remove_diacritics 2'`, ranked by "
        "`bm25(fts, 3, 2, 1)`, MATCH built from the query's words (`\\w+`), each double-quoted, joined with OR.",
        "- Both index exactly the same records: the partition's current catalog rows and the stored bytes of "
        "their current revisions. Every query asks for the top 10. The stores are throwaway ones with git off "
        "(history plays no part in search).",
        "",
    ]
    if "locomo" in report:
        lines += _quality_section(report["locomo"])
        lines += _modes_section(report["locomo"])
    lines += _build_section(report)
    lines += _latency_section(report)
    if "generated" in report:
        lines += _generated_section(report["generated"], options)
    lines += ["## Reading", ""] + [f"- {sentence}" for sentence in reading(report)] + [""]
    return "\n".join(lines)


def _quality_section(locomo: dict[str, Any]) -> list[str]:
    quality, no_gold = locomo["quality"], locomo["no_gold"]
    header = ["category", "questions"] + [f"{metric} {ENGINE_NAMES[e]}" for metric in
                                          ("recall@5", "recall@10", "hit@5", "hit@10") for e in ("tantivy", "fts5")]
    rows = []
    labels = [(str(c), f"{c}" + (" (adversarial)" if c == 5 else "")) for c in CATEGORIES]
    for key, label in labels + [("overall", "**all**")]:
        per = {e: (quality[e]["overall"] if key == "overall" else quality[e]["categories"][key]) for e in quality}
        if not per["tantivy"]["questions"]:
            continue
        rows.append([label, str(per["tantivy"]["questions"])] + [
            _pct(per[e][metric]) for metric in ("recall@5", "recall@10", "hit@5", "hit@10") for e in ("tantivy", "fts5")
        ])
    uncited = no_gold["total"] - no_gold["no_evidence"]
    return [
        "## Retrieval quality on LoCoMo",
        "",
        f"{locomo['queries']} questions over {locomo['records']:,} current records (people, session events, "
        "observation claims) imported through the engine API. A question's gold records are the claims citing "
        "one of its evidence turns (`engine/importers/locomo.py` `evidence_records`). recall@k is the share of a "
        "question's gold records in the top k, hit@k whether any is there, both averaged over the questions "
        "that have gold records, in percent. tantivy answers through `Engine.search` with an owner-private "
        "caller.",
        "",
        f"{no_gold['total']} questions have no gold record and are left out: {uncited} cite only turns that no "
        f"observation cites, {no_gold['no_evidence']} list no evidence at all (by category: "
        + ", ".join(f"{c}: {n}" for c, n in no_gold["by_category"].items()) + ").",
        "",
        *_table(header, rows),
        "",
    ]


MODE_NAMES = {"lexical": "lexical", "semantic": "semantic", "hybrid": "hybrid", "rrf": "rrf",
              "owner-keyword": "owner keyword", "owner-hybrid": "owner hybrid"}


def _modes_section(locomo: dict[str, Any]) -> list[str]:
    """The search_knowledge modes next to the engines, when an embedding model was given."""
    modes = locomo.get("modes")
    heading = ["## Retrieval modes of search_knowledge on LoCoMo", ""]
    if modes is None:
        return heading + ["Not measured in this run: pass `--embedding-model DIR` (for instance the folder "
                          "`knowledge models pull all-minilm-l6-v2-int8` fills) to add the lexical, semantic, "
                          "hybrid and rrf rows.", ""]
    quality, engines = modes["quality"], locomo["quality"]
    columns = [("tantivy", engines["tantivy"]), ("FTS5", engines["fts5"])] + [
        (MODE_NAMES[mode], quality[mode]) for mode in quality]
    header = ["category", "questions"] + [f"{metric} {name}" for metric in ("recall@5", "recall@10")
                                          for name, _ in columns]
    rows = []
    labels = [(str(c), f"{c}" + (" (adversarial)" if c == 5 else "")) for c in CATEGORIES]
    for key, label in labels + [("overall", "**all**")]:
        per = [(figures["overall"] if key == "overall" else figures["categories"][key]) for _, figures in columns]
        if not per[0]["questions"]:
            continue
        rows.append([label, str(per[0]["questions"])] + [_pct(p[metric]) for metric in ("recall@5", "recall@10")
                                                         for p in per])
    model = modes["model"]
    embed, cached = modes["builds"]
    latency_rows = [[MODE_NAMES[mode], _ms(figures["p50_ms"]), _ms(figures["p99_ms"]), _ms(figures["mean_ms"]),
                     str(modes["fallbacks"][mode])] for mode, figures in modes["latency"].items()]
    return heading + [
        f"The same questions and gold records, answered by `search_knowledge` (top 10) in each mode; tantivy "
        f"(`Engine.search`) and FTS5 repeated from the table above. Embedding model: `{Path(model['folder']).name}` "
        f"({model['bytes'] / 1e6:.1f} MB, {model['dimensions']} dimensions, ONNX sha256 "
        f"`{model['onnx_sha256'][:12]}...`, loaded and verified in {model['load_s']:.1f} s), run in-process by "
        "onnxruntime; vectors in sqlite-vec. hybrid is alpha 0.5 (lexical divided by the best, similarity min-max "
        f"normalised over the candidates); rrf uses k = 60 over the top {FUSION_DEPTH} of each ranking. "
        "owner keyword and owner hybrid are the owner's search (`operator/search`, the window and `knowledge "
        "search`; engine/search/hybrid.py): keyword where function words cannot make a match alone, and that keyword "
        "search's best 50 with the 50 nearest vectors and the long pages of the 50 nearest page passages (as near as "
        "those), a long page as near as its nearest passage, fused alpha 0.5 the same way; the question is embedded "
        "without an asker's framing (\"how do I\", none of LoCoMo's questions has one).",
        "",
        *_table(header, rows),
        "",
        *_table(["vector build", "records", "texts embedded", "from cache", "seconds", "records/s", "index size"], [
            [label, f"{build['indexed']:,}", f"{build['embedded']:,}", f"{build['cached']:,}",
             _seconds(build["seconds"]), _rate(build["indexed"], build["seconds"]), _size(modes["index_bytes"])]
            for label, build in (("every text embedded", embed), ("again, every vector cached", cached))]),
        "",
        *_page_passages(modes),
        "Milliseconds per call (one pass over the questions, the modes in rotating order; "
        "semantic, hybrid and rrf embed the question each time, nothing is cached per query). 'fallbacks' "
        "counts answers that disclosed a lexical fallback (for the owner's search: an answer saying vectors were "
        "still building, or that hybrid was not possible).",
        "",
        *_table(["mode", "p50", "p99", "mean", "fallbacks"], latency_rows),
        "",
    ]


def _build_section(report: dict[str, Any]) -> list[str]:
    rows = []
    for name in ("locomo", "generated"):
        if name not in report:
            continue
        builds = report[name]["builds"]
        for kind, label in BUILD_ROWS:
            build = builds[kind]
            extract = f"{build['extract_s']:.2f}" if "extract_s" in build else "(inside)"
            rows.append([DATASET_NAMES[name], f"{build['records']:,}", label, _seconds(build["build_s"]),
                         _rate(build["records"], build["build_s"]), extract, _size(build["index_bytes"]),
                         f"{_mib(build['peak_kib'])} ({_mib(build['baseline_kib'])})"])
    return [
        "## Index build",
        "",
        "Each build runs in its own worker process (`python -m engine.bench.search --worker ...`), which then "
        "answers every query once. Peak RSS is that process's high-water mark, so tantivy's Rust allocations "
        "count; in brackets, the same before the build (interpreter, imports, an opened engine for the "
        "rebuild). On Linux it is read from `VmHWM`: `ru_maxrss` survives fork and exec there, so a worker "
        "started by this benchmark would report the benchmark's own peak. \"extract\" is reading the same "
        "records from the catalog into documents (the engine's rebuild does that inside its time).",
        "",
        *_table(["data set", "records", "build", "seconds", "records/s", "extract s", "index size",
                 "peak RSS MiB (before)"], rows),
        "",
    ]


def _latency_section(report: dict[str, Any]) -> list[str]:
    rows, ratios = [], []
    for name in ("locomo", "generated"):
        if name not in report:
            continue
        data = report[name]
        latency = data["latency"]
        for runner, label in LATENCY_ROWS:
            figures = latency[runner]
            rows.append([DATASET_NAMES[name], f"{data['queries']} x {report['options']['rounds']}", label,
                         _ms(figures["p50_ms"]), _ms(figures["p99_ms"]), _ms(figures["mean_ms"])])
        ratios.append(f"{DATASET_NAMES[name]}: FTS5 p50 / tantivy core p50 = "
                      f"{latency['fts5']['p50_ms'] / latency['tantivy']['p50_ms']:.2f}, "
                      f"`Engine.search` p50 / tantivy core p50 = "
                      f"{latency['api']['p50_ms'] / latency['tantivy']['p50_ms']:.2f}; the core and the API "
                      f"returned the same top 10 for {data['agreement']['same_top10']} of "
                      f"{data['agreement']['queries']} queries.")
    return [
        "## Query latency",
        "",
        "Milliseconds per query in this process, both indexes open, warm (a warm-up pass first); each query "
        "goes through the three runners back to back, in rotating order. LoCoMo queries are the questions; "
        "generated queries are 2-4 content words taken from a random record. `Engine.search` runs on an "
        "engine with its watcher on, so it does not rescan the partition; it adds authorization, the lane, "
        "catalog rows, snippets and the cursor.",
        "",
        *_table(["data set", "queries x rounds", "runner", "p50", "p99", "mean"], rows),
        "",
        *[f"- {ratio}" for ratio in ratios],
        "",
    ]


def _generated_section(generated: dict[str, Any], options: dict[str, Any]) -> list[str]:
    prep = generated["preparation"]
    known = generated["known_item"]
    return [
        "## The generated partition",
        "",
        f"{prep['generated']:,} note pages (seed {options['seed']}; titles of 3-6 words, bodies of 30-150 "
        "words from a vocabulary of 4,000 common English and made-up words with Zipf-like frequencies, some "
        "with an alias) written straight into `pages/notes/<set>/` of a fresh store's private partition, plus "
        f"the seed page that created the store: {generated['records']:,} current records, "
        f"{prep['entries']:,} filesystem entries. The engine refuses to scan more than 100,000 entries per "
        "partition (`engine/store/walk.py` `MAX_SCAN_ENTRIES`, directories included), so this is as large as a "
        "partition gets.",
        "",
        *_table(["step", "seconds", "records/s"], [
            ["write the files", _seconds(prep["write_s"]), _rate(prep["generated"], prep["write_s"])],
            ["catalog sync (first scan: parse, validate, store revisions)", _seconds(prep["sync_s"]),
             _rate(prep["generated"], prep["sync_s"])],
            ["catalog sync again, nothing changed (every operation pays this when the watcher is off)",
             _seconds(prep["rescan_s"]), "-"],
        ]),
        "",
        "Known-item check: how often the record a query's words were taken from comes back (percent).",
        "",
        *_table(["engine", "hit@1", "hit@10", "MRR@10"],
                [[ENGINE_NAMES[e], _pct(known[e]["hit@1"]), _pct(known[e]["hit@10"]), _pct(known[e]["mrr@10"])]
                 for e in ("tantivy", "fts5")]),
        "",
    ]


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _compare(ours: float, theirs: float, what: str) -> str:
    difference = ours - theirs
    if abs(difference) < _TIE:
        return f"{what}: tantivy {_pct(ours)}, FTS5 {_pct(theirs)}, a tie"
    leader = "tantivy is ahead" if difference > 0 else "FTS5 is ahead"
    return f"{what}: tantivy {_pct(ours)}, FTS5 {_pct(theirs)}; {leader} by {_pct(abs(difference))} points"


def reading(report: dict[str, Any]) -> list[str]:
    """Plain sentences: who wins what in this run, and the mechanism behind each loss."""
    return (_quality_reading(report) + _modes_reading(report) + _speed_reading(report) + _build_reading(report)
            + _catalog_reading(report))


def _modes_reading(report: dict[str, Any]) -> list[str]:
    modes = report.get("locomo", {}).get("modes")
    if not modes:
        return []
    overall = {mode: figures["overall"] for mode, figures in modes["quality"].items()}
    lexical = report["locomo"]["quality"]["tantivy"]["overall"]
    best = max(overall, key=lambda mode: overall[mode]["recall@10"])
    parts = ", ".join(f"{mode} {_pct(figures['recall@10'])}" for mode, figures in overall.items())
    sentence = (f"**Modes, LoCoMo.** recall@10: {parts} (tantivy via `Engine.search` {_pct(lexical['recall@10'])}); "
                f"the best is {best}.")
    gains = {c: modes["quality"][best]["categories"][c]["recall@10"]
             - report["locomo"]["quality"]["tantivy"]["categories"][c]["recall@10"]
             for c in map(str, CATEGORIES) if modes["quality"][best]["categories"][c]["questions"]}
    if gains:
        category = max(gains, key=lambda c: gains[c])
        sentence += (f" Its largest change against tantivy is in category {category} "
                     f"({'+' if gains[category] >= 0 else ''}{_pct(gains[category])} points).")
    embed = modes["builds"][0]
    if embed["seconds"] > 0:
        sentence += (f" Embedding every record took {_seconds(embed['seconds'])} s "
                     f"({_rate(embed['indexed'], embed['seconds'])} records/s); from the cache "
                     f"{_seconds(modes['builds'][1]['seconds'])} s.")
    return [sentence]


def _quality_reading(report: dict[str, Any]) -> list[str]:
    sentences = []
    if "locomo" in report:
        quality = report["locomo"]["quality"]
        ours, theirs = quality["tantivy"]["overall"], quality["fts5"]["overall"]
        sentence = (f"**Quality, LoCoMo.** {_compare(ours['recall@10'], theirs['recall@10'], 'recall@10')}; "
                    f"{_compare(ours['recall@5'], theirs['recall@5'], 'recall@5')}.")
        if ours["recall@10"] <= theirs["recall@10"] + _TIE:
            sentence += " tantivy does not beat FTS5 here."
        hard = [c for c in map(str, CATEGORIES) if quality["fts5"]["categories"][c]["questions"]
                and max(quality[e]["categories"][c]["recall@10"] for e in quality) < 0.5]
        if hard:
            sentence += (" Both are lexical rankers over the same words, so they fail together: in "
                         + for_count(len(hard), "category ", "categories ") + _and(hard)
                         + " neither finds half of the gold claims, whose words a question mostly does not share.")
        sentences.append(sentence)
    if "generated" in report:
        known = report["generated"]["known_item"]
        ours, theirs = known["tantivy"], known["fts5"]
        sentence = (f"**Quality, generated known-item.** {_compare(ours['hit@10'], theirs['hit@10'], 'hit@10')}; "
                    f"{_compare(ours['hit@1'], theirs['hit@1'], 'hit@1')}.")
        sentence += (" Generated titles are unrelated to their bodies, so this set punishes any ranking that "
                     "lets a word in a short title outrank a record holding every query word in its body.")
        sentences.append(sentence)
    return sentences


def _speed_reading(report: dict[str, Any]) -> list[str]:
    sentences, core_wins = [], []
    for name in ("locomo", "generated"):
        if name not in report:
            continue
        data, label = report[name], DATASET_NAMES[name]
        latency = data["latency"]
        core, fts, api = (latency[k]["p50_ms"] for k in ("tantivy", "fts5", "api"))
        core_wins.append(core < fts)
        if core < fts:
            speed = f"tantivy's core answers {fts / core:.1f}x faster than FTS5 at the median"
        else:
            speed = f"FTS5 answers {core / fts:.1f}x faster than tantivy's core at the median"
        whole = "even the whole" if api < fts else "the whole"
        sentences.append(f"**Queries, {label}** ({data['records']:,} records): {speed} (tantivy {_ms(core)} ms, "
                         f"FTS5 {_ms(fts)} ms; p99 {_ms(latency['tantivy']['p99_ms'])} and "
                         f"{_ms(latency['fts5']['p99_ms'])}); "
                         f"{whole} `Engine.search` call ({_ms(api)} ms) is {'faster' if api < fts else 'slower'} "
                         "than FTS5's bare query.")
    if core_wins and all(core_wins):
        sentences.append("Why the core is fast: both engines OR every query word, so a question full of common "
                         "words matches most records. FTS5 calls `bm25()` through SQLite's function interface for "
                         "every matching row and sorts them all; tantivy scores postings in compiled code at a "
                         "small fraction of that cost per document. `Engine.search` spends most of its time around "
                         "the search: authorization before and after the lane, store identity checks, and a "
                         "catalog row and a snippet per hit.")
    return sentences


def _build_reading(report: dict[str, Any]) -> list[str]:
    sentences = []
    for name in ("locomo", "generated"):
        if name not in report:
            continue
        builds, label = report[name]["builds"], DATASET_NAMES[name]
        rate = {kind: builds[kind]["records"] / builds[kind]["build_s"] for kind in builds}
        peak = {kind: builds[kind]["peak_kib"] for kind in builds}
        sentence = (f"**Builds, {label}:** the engine's rebuild indexes {rate['tantivy']:,.0f} records/s, tantivy "
                    f"alone {rate['tantivy-core']:,.0f}/s, FTS5 {rate['fts5']:,.0f}/s; peak RSS "
                    f"{_mib(peak['tantivy'])} / {_mib(peak['tantivy-core'])} / {_mib(peak['fts5'])} MiB.")
        if rate["tantivy-core"] < rate["fts5"]:
            sentence += (f" FTS5 builds {rate['fts5'] / rate['tantivy-core']:.1f}x faster than tantivy alone and "
                         f"{rate['fts5'] / rate['tantivy']:.1f}x faster than the engine's rebuild.")
        sentences.append(sentence)
    if sentences and any(report[n]["builds"]["tantivy"]["records"] / report[n]["builds"]["tantivy"]["build_s"]
                         < report[n]["builds"]["fts5"]["records"] / report[n]["builds"]["fts5"]["build_s"]
                         for n in ("locomo", "generated") if n in report):
        sentences.append("Why builds lose: every document is prepared in Python (the combined `text` field, the "
                         "spacing of unspaced scripts) and handed to tantivy one call at a time, while FTS5's "
                         "inserts run inside SQLite's C code. The engine's rebuild adds its bookkeeping, one "
                         "`indexed_sha` update per record: the gap between the first two build rows. Full builds "
                         "are rare (`knowledge reindex`, a lost index); publications update the index record by "
                         "record.")
    return sentences


def _catalog_reading(report: dict[str, Any]) -> list[str]:
    if "generated" not in report:
        return []
    prep = report["generated"]["preparation"]
    builds = report["generated"]["builds"]
    slowest = max(build["build_s"] for build in builds.values())
    longer = "longer than any index build" if prep["sync_s"] > slowest else "less than the slowest index build"
    return [f"**Catalog.** Catching the catalog up with {prep['generated']:,} new files took "
            f"{_seconds(prep['sync_s'])} s "
            f"({_rate(prep['generated'], prep['sync_s'])} records/s), {longer}: every file is read, hashed, "
            "parsed (its YAML frontmatter twice: once for nesting and anchors, once to load it), validated and "
            f"its bytes stored as a revision. An engine without its watcher rescans the partition before every "
            f"operation: {_seconds(prep['rescan_s'])} s here when nothing changed."]


def _page_passages(modes: dict[str, Any]) -> list[str]:
    """The line on long pages' own passages, which the owner's first hybrid search has the vectors add."""
    added = modes.get("page_passages")
    if added is None:
        return []
    return [f"Long pages' own passages (the owner's hybrid search; engine/index/vectors.py): the owner's first hybrid "
            f"search and the catch-up it starts took {_seconds(added['seconds'])} s, adding {added['passages']:,} "
            f"passages of {added['pages']:,} pages; index size then {_size(added['index_bytes'])}.", ""]
