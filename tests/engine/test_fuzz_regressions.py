"""Replay every input the fuzzers ever crashed on (tests/fuzz/regressions/<target>/)."""

from pathlib import Path

import pytest

from tests.fuzz import targets

REGRESSIONS = Path(__file__).resolve().parents[1] / "fuzz" / "regressions"
SEEDS = {
    "record": b"---\nformat: knowledge-record-v1\nid: x\n---\nbody",
    "ontology": b"page_types: {recipe: {fields: {serves: integer}}}",
    "query": b'title:(x AND "y',
    "socket": b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
}


@pytest.fixture(autouse=True)
def close_world():
    yield
    targets.close()


def test_every_crash_the_fuzzers_found_is_handled_now():
    cases = sorted(path for path in REGRESSIONS.glob("*/*") if path.is_file())
    for case in cases:
        targets.TARGETS[case.parent.name](case.read_bytes())


def test_every_target_handles_its_seed_inputs():
    assert set(SEEDS) == set(targets.TARGETS)
    for name, data in SEEDS.items():
        targets.TARGETS[name](data)
