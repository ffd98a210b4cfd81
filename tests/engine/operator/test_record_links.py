"""A record page's links (``operator/links``) for a hub note: what it links to, read in a query, not one a link."""

from __future__ import annotations

from pathlib import Path

from engine.operator.methods import OperatorMethods
from engine.service import Engine
from engine.store.catalog_reads import CatalogReads
from tests.engine.importers.helpers import run_import

TOPICS = 40


def test_a_hub_notes_links_are_read_in_one_query_with_each_far_end_named(
        engine: Engine, tmp_path: Path, monkeypatch) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Hub.md").write_text("# Hub\n\n" + "".join(f"- [[Topic {n:02}]]\n" for n in range(TOPICS))
                                  + "- [[Nowhere]]\n", encoding="utf-8")
    for number in range(TOPICS):
        (vault / f"Topic {number:02}.md").write_text(f"Topic {number}, back to the [[Hub]].\n", encoding="utf-8")
    pages = run_import(engine, "markdown", vault)["pages"]
    operator = OperatorMethods(engine)
    operator.links({"agent": "main", "id": pages["Hub.md"]})  # the store opened and caught up before counting

    looked_up: list[int] = []
    one_at_a_time, many_at_once = CatalogReads.rows_for_id, CatalogReads.rows_for_ids
    monkeypatch.setattr(CatalogReads, "rows_for_id",
                        lambda self, *args: looked_up.append(1) or one_at_a_time(self, *args))
    monkeypatch.setattr(CatalogReads, "rows_for_ids",
                        lambda self, partition, ids: looked_up.append(len(ids)) or many_at_once(self, partition, ids))
    links = operator.links({"agent": "main", "id": pages["Hub.md"]})

    assert looked_up == [1, 2 * TOPICS]  # the hub itself, then every far end at once (each way: to and from)
    far = {(c["direction"], c["record"]["title"], c["record"]["status"]) for c in links["connections"]}
    assert far == {(direction, f"Topic {n:02}", "current") for n in range(TOPICS) for direction in ("in", "out")}
    assert all(c["record"]["id"] == pages[f"{c['record']['title']}.md"] for c in links["connections"])
