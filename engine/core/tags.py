"""Tags as the owner reads them: ``#Été``, ``#été`` and ``#ÉTÉ`` are one tag.

A tag is compared by ``tag_key``, Unicode's canonical caseless match (decomposed, case folded, decomposed
again): any letter's case is ignored, not only ASCII's, and an accented letter matches however it was
encoded (``é`` as one character or as ``e`` and its accent, as a macOS folder name may write it).  The
Markdown import keeps one spelling of tags alike by this key, and ``operator/records``' ``tag`` filter
matches by it (``tag_within``, which the catalog's SQL calls: every connection registers it).
"""

from __future__ import annotations

import unicodedata


def tag_key(tag: str) -> str:
    """What two spellings of one tag share (``Été`` and ``été``: ``e\\u0301te\\u0301``)."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", tag).casefold())


def tag_within(tag: object, wanted: str) -> bool:
    """Whether ``tag`` is the tag whose ``tag_key`` is ``wanted``, or one nested in it (``wanted/...``, as
    Obsidian's tag search lists ``#project/alpha`` for ``project``); a value that is no text is no tag."""
    if not isinstance(tag, str):
        return False
    key = tag_key(tag)
    return key == wanted or key.startswith(wanted + "/")
