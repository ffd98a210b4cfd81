"""``knowledge bench mcp`` runs end to end on a throwaway state directory and says whether the target holds
for a 2025 client's `initialize` and a 2026-07-28 client's first exchange."""

from __future__ import annotations

from engine.bench import mcp_start


def test_one_round_measures_the_four_and_reports_the_target() -> None:
    result = mcp_start.measure(1)

    assert {name: len(values) for name, values in result["runs"].items()} == {"python": 1, "bridge": 1,
                                                                              "modern": 1, "commands": 1}
    text = mcp_start.report(result, "knowledge bench mcp --rounds 1")
    assert "launch to `initialize` answered" in text and "Target:" in text
