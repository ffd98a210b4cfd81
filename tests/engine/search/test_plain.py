"""The owner's snippets: the words of a Markdown fragment without their markup."""

from __future__ import annotations

import pytest

from engine.search.plain import plain_snippet
from tests.helpers import page


@pytest.mark.parametrize("fragment, shown", [
    ("See [[Sync/Mobile sync|syncing to a phone]] and [[Obsidian Sync]].", "See syncing to a phone and Obsidian Sync."),
    ("[[Guides/Setup.md]] then [[Note#Part]]", "Setup then Note › Part"),
    ("an embed ![[diagram.png]] here", "an embed diagram.png here"),
    ("ing|the alias]] and after", "the alias and after"),  # the fragment began inside a link
    ("and before [[Target|ali", "and before Target"),  # and ended inside one
    ("a [link](https://example.org/x) in text", "a link in text"),
    ("## Heading\n- item one\n1. first\n- [ ] to do", "Heading item one first to do"),
    ("**bold**, *italic*, ~~gone~~, ==marked== and `code`", "bold, italic, gone, marked and code"),
    ("> [!warning] Back up first\n> before you sync", "Warning: Back up first before you sync"),
    ("5 * 3 * 2 and C# stay", "5 * 3 * 2 and C# stay"),
])
def test_markup_becomes_the_words_it_shows(fragment: str, shown: str) -> None:
    assert plain_snippet(fragment) == shown


def test_the_owners_search_shows_plain_snippets_and_agents_get_the_fragment(engine, owner) -> None:
    engine.save_page(owner, page("p1", "Mobile sync", type_="note",
                                 body="Use [[Obsidian Sync|the sync service]] to reach the **phone**."))

    [owners] = engine.search(owner, {"query": "phone"}, owner=True)["hits"]
    [agents] = engine.search(owner, {"query": "phone"})["hits"]

    assert owners["snippet"] == "Use the sync service to reach the phone."
    assert "[[Obsidian Sync|the sync service]]" in agents["snippet"] and "**phone**" in agents["snippet"]
