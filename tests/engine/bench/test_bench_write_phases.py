"""The write-phases benchmark's machinery works end to end, with several clients at once (no timing is asserted)."""

from engine.bench import write_phases


def test_several_clients_write_an_equal_share_and_the_report_says_how_many():
    result = write_phases.measure(5, records=2, clients=2)
    assert result["clients"] == 2
    assert set(result["kinds"]) == {"page", "remember"}
    for figures in result["kinds"].values():
        assert figures["writes"] == 4  # an equal share each: two writes a client
        assert figures["per_s"] > 0 and figures["cpu_ms"] > 0
        assert figures["calls"]["lane: install: compare, temp files, renames"] > 0
    text = write_phases.report(result, "python -m engine.bench.write_phases 5 2 2")
    assert "| writes a second, 2 clients in all |" in text
