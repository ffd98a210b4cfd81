"""The socket benchmarks' machinery works end to end (no timing is asserted)."""

import dataclasses
import socket

from engine.bench import socket_bounds
from engine.bench.socket import report, run
from engine.wire.server import EngineServer, SocketBounds
from tests.helpers import wait_for


def test_socket_benchmark_runs_and_reports_every_level():
    result = run(pages=5, round_trips=5, seconds=0.3, concurrency=(1, 2))
    assert set(result["latency"]) == {"knowledge_lookup", "knowledge_grep"}
    assert [row["clients"] for row in result["throughput"]] == [1, 2]
    assert all(row["errors"] == 0 and row["requests"] > 0 for row in result["throughput"])
    text = report(result, "knowledge bench socket --pages 5")
    assert "## Round trip, one client" in text and "| 2 |" in text


def test_the_bounds_attack_classifies_how_each_connection_ended(engine):
    server = EngineServer(engine, port=0, workers=2, bounds=SocketBounds(max_connections=4, initialize_timeout_s=0.5))
    server.start()
    try:
        flood = socket_bounds.attack(server.port, "flood", 3, 1 << 20, 1000, 0)
        hold = socket_bounds.attack(server.port, "hold", 3, 1 << 20, 1000, 0)
    finally:
        server.stop()
    assert flood["attempts"] == 3 and set(flood["outcomes"]) <= {"refused as oversize",
                                                                  "cut off while sending (BrokenPipeError)",
                                                                  "cut off while sending (ConnectionResetError)"}
    assert hold["outcomes"] == {"closed at the deadline": 3} and hold["lifetime_max_s"] < 5


def test_the_bounds_attack_classifies_connections_refused_at_the_cap(engine):
    """The cap's attackers are refused while every served connection is held open.  The held connections are
    counted by the server before the attack, and their deadline is far off: an attack thread started late on a
    busy machine found a slot freed by the deadline (5 served, 1 refused), so the cap is not left to a race."""
    server = EngineServer(engine, port=0, workers=2, bounds=SocketBounds(max_connections=4, initialize_timeout_s=600))
    server.start()
    held = []
    try:
        held = [socket.create_connection(("127.0.0.1", server.port), timeout=60) for _ in range(4)]
        wait_for(lambda: len(server._connections) == 4, timeout=60)
        cap = socket_bounds.attack(server.port, "cap", 2, 1 << 20, 1000, 0)
    finally:
        for sock in held:
            sock.close()
        server.stop()
    assert cap["outcomes"] == {"refused at the cap": 2} and cap["attempts"] == 2


def test_the_bounds_report_names_the_target_and_every_phase():
    row = {"connections": 2, "attempts": 2, "seconds": 1.0, "outcomes": {"refused as oversize": 2},
           "rss_before_kib": 70_000, "rss_peak_kib": 71_000, "rss_after_kib": 70_500, "hwm_before_kib": 80_000,
           "hwm_after_kib": 80_000, "pings": 10, "ping_p50_ms": 0.5, "ping_p99_ms": 2.0, "ping_max_ms": 3.0}
    result = {"connections": 2, "message_bytes": 8 << 20, "flood_s": 1.0,
              "bounds": dataclasses.asdict(SocketBounds()), "pings_total": 40, "ping_errors": [],
              "phases": [{**row, "phase": phase} for phase in ("flood", "reflood", "hold", "cap")]}
    text = socket_bounds.report(result, "knowledge bench socket --bounds --connections 2")
    assert "| flood | 2 | 2 |" in text and "| cap |" in text and "lscpu" in text
    assert "ping max 3.00 ms: met" in text


def test_throughput_benchmark_runs_and_reports_every_measure():
    from engine.bench import throughput

    result = throughput.run(sizes=(5, 20), seconds=0.3, round_trips=4)
    assert [size["records"] for size in result["sizes"]] == [5, 20]
    for size in result["sizes"]:
        assert size["pages_1"]["n"] == 4 and size["remember_1"]["n"] == 4
        assert size["pages_8"]["pages"] > 0 and size["grep_under_4_writers"]["reads"]["n"] > 0
    text = throughput.report(result, "knowledge bench throughput --records 5 20")
    assert "| cataloguing the new files (first search), s |" in text
    assert "A write into 20 records costs" in text
    assert f"{throughput.ONE_CLIENT_BLOCK} requests a block" in text
    parts = result["sizes"][0]["search_parts"]
    assert set(parts) == {"tantivy_ms", "search_ms", "authorize_ms", "identity_ms", "engine_search_ms"}
    assert all(value > 0 for value in parts.values())
    assert "| `Engine.search` in all |" in text


def test_throughput_one_client_phases_take_turns_between_sizes_block_by_block(monkeypatch):
    """One client's writes go to each size in turn, a block at a time, the order reversed every round, pages
    before claims, so the load of the moment falls on every size alike."""
    from engine.bench import throughput

    class Recording:
        def __init__(self, name: str, log: list[tuple[str, str, str]]) -> None:
            self.name, self.log = name, log

        def tool(self, tool: str, arguments: dict) -> dict:
            self.log.append((self.name, tool, arguments["requestId"]))
            return {}

    monkeypatch.setattr(throughput, "ONE_CLIENT_BLOCK", 3)
    log: list[tuple[str, str, str]] = []
    sizes = [throughput._Size(records, None, "", None, Recording(f"s{records}", log), {"records": records})
             for records in (100, 5000)]
    throughput._one_client(sizes, 7)

    pages = [(name, request) for name, tool, request in log if tool == "knowledge_save_page"]
    assert [tool for _, tool, _ in log] == ["knowledge_save_page"] * 14 + ["knowledge_remember"] * 14
    blocks = [name for name, _ in pages]
    assert blocks == ["s100"] * 3 + ["s5000"] * 3 + ["s5000"] * 3 + ["s100"] * 3 + ["s100"] + ["s5000"]
    assert [request for name, request in pages if name == "s5000"] == [f"one-{i}" for i in range(7)]
    claims = [request for name, tool, request in log if tool == "knowledge_remember" and name == "s100"]
    assert claims == [f"claim-{i}" for i in range(7)]
    assert all(len(size.pages) == 7 and len(size.claims) == 7 for size in sizes)
