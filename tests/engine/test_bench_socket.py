"""The socket benchmark's machinery works end to end (no timing is asserted)."""

from engine.bench.socket import report, run


def test_socket_benchmark_runs_and_reports_every_level():
    result = run(pages=5, round_trips=5, seconds=0.3, concurrency=(1, 2))
    assert set(result["latency"]) == {"knowledge_lookup", "knowledge_grep"}
    assert [row["clients"] for row in result["throughput"]] == [1, 2]
    assert all(row["errors"] == 0 and row["requests"] > 0 for row in result["throughput"])
    text = report(result, "knowledge bench socket --pages 5")
    assert "## Round trip, one client" in text and "| 2 |" in text
