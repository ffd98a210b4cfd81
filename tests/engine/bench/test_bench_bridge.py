"""``knowledge bench bridge`` runs end to end on a throwaway state directory and reports both targets."""

from __future__ import annotations

from engine.bench import bridge


def test_one_block_measures_memory_and_calls_on_both_paths() -> None:
    result = bridge.measure(blocks=2, calls=3)

    assert {path: len(times) for path, times in result["seconds"].items()} == {"direct": 6, "bridge": 6}
    assert result["bridge_rss_kib"]["initialized"] > 0 and result["python_rss_kib"] > 0
    text = bridge.report(result, "knowledge bench bridge --blocks 2 --calls 3")
    assert "at most 25 MiB" in text and "added by the bridge" in text
