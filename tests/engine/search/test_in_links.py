"""The in-link counts behind the owner's link prior (engine/search/in_links.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.search.in_links import InLinks, link_prior


def link(record_id: str, source: str, target: str) -> SimpleNamespace:
    """A relationship row as the view reads it: its id, ``from`` and ``to``."""
    return SimpleNamespace(record_id=record_id, view=SimpleNamespace(from_id=source, to_id=target))


def test_a_note_counts_each_other_note_linking_to_it_once() -> None:
    links = InLinks.build([link("r1", "a", "c"), link("r2", "a", "c"), link("r3", "b", "c"), link("r4", "c", "c"),
                           link("r5", "c", "a")])
    assert links.counts == {"c": 2, "a": 1}  # a twice to c counts once; c to itself not at all


def test_an_update_drops_what_went_and_adds_what_came() -> None:
    links = InLinks.build([link("r1", "a", "c"), link("r2", "a", "c"), link("r3", "b", "c")])
    links.update(["r1"], [])
    assert links.counts == {"c": 2}  # a still links to c through r2
    links.update(["r2", "r3"], [link("r3", "b", "d")])  # r2 went, r3 now points elsewhere
    assert links.counts == {"d": 1} and links.edges == {"r3": ("b", "d")}
    assert links == InLinks.build([link("r3", "b", "d")])


def test_the_prior_is_the_log_count_over_the_most_linked_candidates() -> None:
    links = InLinks.build([link(f"r{n}", f"s{n}", "hub") for n in range(3)] + [link("r9", "s9", "leaf")])
    prior = link_prior(links, {"hub.md": "hub", "leaf.md": "leaf", "lone.md": "lone", "odd.md": None})
    assert prior == {"hub.md": 1.0, "leaf.md": pytest.approx(0.5)}  # log 2 / log 4
    assert link_prior(links, {"lone.md": "lone"}) == {}
