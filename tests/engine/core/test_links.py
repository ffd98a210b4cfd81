"""Record links: the form an agent cites, and a strict parser for what arrives from outside."""

from __future__ import annotations

import pytest

from engine.core.errors import InvalidParams
from engine.core.ids import new_id
from engine.core.links import RecordLink, parse_record_link, record_link, with_record_links

STORE = new_id("st")
RECORD = new_id("pg")


def test_a_link_names_the_store_and_the_record_and_reads_back() -> None:
    link = record_link(STORE, RECORD)
    assert link == f"knowledge://record/{STORE}/{RECORD}"
    assert parse_record_link(link) == RecordLink(STORE, RECORD)
    assert parse_record_link(link).url == link
    assert parse_record_link(f"knowledge://RECORD/{STORE}/imported-id.1").record_id == "imported-id.1"


@pytest.mark.parametrize("text, why", [
    ("", "empty"),
    (None, "empty"),
    (f"https://record/{STORE}/{RECORD}", "scheme"),
    (f"knowledge://page/{STORE}/{RECORD}", "must name record"),
    (f"knowledge://user@record/{STORE}/{RECORD}", "must name record"),
    (f"knowledge://record:80/{STORE}/{RECORD}", "must name record"),
    (f"knowledge://record/{STORE}/{RECORD}?revision=2", "query or fragment"),
    (f"knowledge://record/{STORE}/{RECORD}#top", "query or fragment"),
    (f"knowledge://record/{STORE}", "path"),
    (f"knowledge://record/{STORE}/{RECORD}/more", "path"),
    (f"knowledge://record/st_nothing/{RECORD}", "not a store id"),
    (f"knowledge://record/{RECORD}/{RECORD}", "not a store id"),
    (f"knowledge://record/{STORE}/..", "not a record id"),
    (f"knowledge://record/{STORE}/%2E%2E", "not a record id"),
    (f" knowledge://record/{STORE}/{RECORD}", "spaces or control"),
    (f"knowledge://record/{STORE}/{RECORD}\n", "spaces or control"),
    ("knowledge://record/" + "a" * 600, "longer than"),
])
def test_anything_else_is_refused_saying_what_is_wrong(text, why) -> None:
    with pytest.raises(InvalidParams) as raised:
        parse_record_link(text)
    assert why in raised.value.message and "knowledge://record/<store id>/<record id>" in raised.value.message
    assert raised.value.details["field"] == "url"


def test_receipts_of_the_private_partition_get_links_and_others_none() -> None:
    receipt = {"publicationId": "pub_1", "id": RECORD, "revision": 1,
               "records": [{"id": RECORD, "revision": 1, "kind": "page"}], "git": {"state": "pending"}}
    linked = with_record_links(receipt, STORE, "private")
    assert linked["link"] == record_link(STORE, RECORD) and linked["records"][0]["link"] == linked["link"]
    assert "link" not in receipt and "link" not in receipt["records"][0]  # the stored receipt is untouched
    assert with_record_links(receipt, STORE, "conversations/abc") is receipt
    assert with_record_links(receipt, None, "private") is receipt
