"""The embedding benchmark's machinery works end to end on the tiny embedder (no timing is asserted)."""

from engine.bench import embedding as bench
from engine.bench import metrics
from models.fixtures import TINY_EMBEDDER

TEXTS = ["pizza on fridays\n\npizza on fridays", "the team", "database backups\n\nnightly dumps of the database",
         "alice painted the museum piece in march"]


def test_the_embedding_benchmark_runs_its_workers_and_reports(tmp_path):
    result = bench.measure(TINY_EMBEDDER, None, TEXTS, rounds=1, writes=2, work=tmp_path, say=lambda line: None,
                           sweep=False)
    figures = result["variants"]["new defaults"]
    assert figures["records_per_s"] > 0 and figures["fingerprint"].endswith("-256")  # float32 graph: no -int8
    assert [run["vectors"] for run in result["writes"]["new code"]] == [3]  # the warm-up page and both writes
    result["texts_all"] = len(TEXTS)
    result["quality"] = bench.quality(TINY_EMBEDDER, TEXTS, ["a", "b", "c", "d"],
                                      [{"question": "the team", "record_ids": ["b"]},
                                       {"question": "no gold", "record_ids": []}], tmp_path, lambda line: None)
    assert result["quality"]["int8 products"]["questions"] == 1
    assert result["quality"]["float32 products"]["recall@10"] == 100.0
    text = bench.report(result, "python -m engine.bench.embedding --model tiny", metrics.machine())
    assert "| new defaults | yes | all cores | no | 32 / 512 |" in text
    assert "## Writes with the Knowledge Base runtime on" in text and "## Retrieval quality" in text
